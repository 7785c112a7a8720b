//! `mmlab trace`: the tracepoints of every layer for any workload, printed
//! as ftrace text, JSON lines or a Perfetto timeline, and the replay of a
//! real kernel's kmem trace with a decision-by-decision diff.
//!
//! - [`event`]: the events as serialisable values ([`TraceEvent`]) and the
//!   `tracing` layer that makes them ([`EventLayer`]), handing each to a
//!   [`Sink`] (a writer, or a [`Collector`] in memory);
//! - [`filter`]: `set_event`-style selection (`kmem:mm_page_alloc`,
//!   `vmalloc:*`, `!kmem:mm_page_free`);
//! - [`text`]: ftrace text and JSON lines (kmem through the printer of
//!   `mmlab trace pages`, so identical);
//! - [`perfetto`]: the Chrome/Perfetto trace-event JSON timeline;
//! - [`plot`]: SVG plots of the gauges (buddyinfo heat map, pcp count and
//!   high per CPU);
//! - [`kernel`]: parsing a real kernel's trace and replaying it;
//! - [`cli`]: the command's arguments and runner.
//!
//! The events come from the engine ([`mmlab_engine::trace`]); which are
//! the kernel's and which are mmlab's own is in its catalogue.

pub mod cli;
pub mod event;
pub mod filter;
pub mod kernel;
pub mod perfetto;
pub mod plot;
pub mod text;

pub use event::{Collector, EventLayer, FieldValue, Sink, TraceEvent};
pub use filter::EventFilter;

use crate::cli::GlobalOpts;
use crate::settings::Configs;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;

/// Runs `f` with an [`EventLayer`] collecting the events `filter` selects
/// as the current thread's subscriber; returns `f`'s result and the events.
/// Only events emitted on this thread while `f` runs are collected.
pub fn capture<R>(filter: &EventFilter, f: impl FnOnce() -> R) -> (R, Vec<TraceEvent>) {
    let c = Collector::new();
    let subscriber = Registry::default().with(EventLayer::new(c.clone()).filtered(filter.clone()));
    let r = tracing::subscriber::with_default(subscriber, f);
    (r, c.take())
}

/// Every configuration of `g` (`default_cpus` where `--cpus` is not
/// given); the run's header goes to stderr, as the trace keeps the
/// kernel's formats.
pub fn configs(g: &GlobalOpts, default_cpus: usize) -> Result<Configs, String> {
    let c = g.configs(crate::cli::MachineDefaults { cpus: default_cpus, ..crate::cli::MachineDefaults::MACHINE })?;
    eprint!("{}", g.record(&c).header());
    Ok(c)
}
