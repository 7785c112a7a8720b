//! What `mmlab` runs on an emulated machine: the kernel's test_vmalloc
//! module ([`test_vmalloc`]: its parameters, its thirteen cases, the workers
//! that run them and its summary lines) and the seeded random page
//! workload of `stat --after-ops` and `trace` ([`random`]).
//!
//! A workload only drives the libraries and returns what it measured and
//! counted; choosing configurations and comparing them is
//! [`crate::experiment`]'s, and printing is the renderers'.

pub mod random;
pub mod test_vmalloc;
