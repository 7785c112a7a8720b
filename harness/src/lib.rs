//! The `mmlab` command's library: workloads and the /proc-style reports, so
//! that integration tests can drive exactly what the command does.
#![forbid(unsafe_code)]

pub mod cli;
pub mod compare;
pub mod fuzz;
pub mod pgtables;
pub mod plot;
pub mod procfs;
pub mod reproduce;
pub mod settings;
pub mod shard;
pub mod stats;
pub mod test_vmalloc;
pub mod workload;
