//! The `mmlab` command's library: workloads and the /proc-style reports, so
//! that integration tests can drive exactly what the command does.
//!
//! The harness is a thin shell around the library crates:
//! - [`cli`]: the command line's parsers, bounds and value enums;
//! - [`workloads`]: test_vmalloc (parameters, cases, runner, rendering) and
//!   the seeded random workload;
//! - [`experiment`]: compare, reproduce, their statistics and shards;
//! - [`output`]: charts, translation-table reports, the JSON writer and
//!   the kmem tracepoint printer (ftrace text, JSON lines);
//! - [`hugetlb`]: `mmlab hugetlb`, the sysfs interface of the pools;
//! - [`trace`]: `mmlab trace` (every layer's tracepoints for any workload,
//!   Perfetto timelines, plots, and the replay of a real kernel's trace);
//! - [`stack`]: the one way a configured machine boots;
//! - [`provenance`]: the run record every output carries;
//! - [`procfs`], [`settings`] and [`fuzz`].
//!
//! The modules' earlier paths (`mmlab_harness::compare`, `::test_vmalloc`,
//! `::workload`, ...) stay as re-exports.
#![forbid(unsafe_code)]

pub mod cli;
pub mod experiment;
pub mod fuzz;
pub mod hugetlb;
pub mod output;
pub mod peer;
pub mod procfs;
pub mod provenance;
pub mod settings;
pub mod stack;
pub mod trace;
pub mod workloads;

pub use experiment::{compare, reproduce, shard, stats};
pub use output::{pgtables, plot};
pub use workloads::random as workload;
pub use workloads::test_vmalloc;
