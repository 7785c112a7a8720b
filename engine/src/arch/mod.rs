//! Architecture code, as the kernel's `arch/` holds it. mmlab emulates one
//! architecture, arm64.

pub mod arm64;
