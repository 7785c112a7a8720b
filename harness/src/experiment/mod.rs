//! Experiments built from workloads: the A/B comparison of configurations
//! ([`compare`]) with its statistics ([`stats`]) and its seed shards that
//! merge exactly ([`shard`]), and the reproductions of published kernel
//! results ([`reproduce`]).
//!
//! An experiment boots one machine per configuration, runs a workload of
//! [`crate::workloads`] on each, and turns the runs into an outcome that
//! the renderers print as a table, Markdown, CSV, JSON or a chart.

pub mod compare;
pub mod reproduce;
pub mod shard;
pub mod stats;
