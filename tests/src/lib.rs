//! Cross-crate integration and property tests live in tests/.
#![forbid(unsafe_code)]
