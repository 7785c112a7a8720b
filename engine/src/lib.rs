//! mmlab's machine: the pieces of an arm64 Linux system that the memory-management
//! code stands on. See the crate README in the repository for the map.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod barrier;
pub mod gfp;
pub mod trace;
