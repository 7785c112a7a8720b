//! Trace events as values: what a tracepoint emitted, kept as a
//! serialisable [`TraceEvent`], and the `tracing-subscriber` layer that
//! turns the engine's `tracing` events into them ([`EventLayer`]) and hands
//! each to a [`Sink`]: the text/JSON writer, or a collector for timelines,
//! plots and the kernel-trace replay.

use super::filter::EventFilter;
use mmlab_engine::trace::{EventDesc, find_event};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, MutexGuard};
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::layer::{Context, Layer};

/// Locks `m`, taking the data even if a writer panicked while holding it.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One field's value, as the tracepoint recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldValue {
    /// An unsigned integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A string (names: the TLBI op, the barrier option, the function).
    Str(String),
}

impl FieldValue {
    /// The value's bits as u64 (signed values as two's complement; strings 0).
    pub fn bits(&self) -> u64 {
        match self {
            FieldValue::U64(v) => *v,
            FieldValue::I64(v) => *v as u64,
            FieldValue::Str(_) => 0,
        }
    }
}

/// One emitted tracepoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceEvent {
    /// Trace-clock tick (one tick = one microsecond when printed).
    pub ts: u64,
    /// The emulated CPU.
    pub cpu: u64,
    /// The ftrace system (`kmem`, `vmalloc`, `mmlab_tlb`, ...).
    pub system: &'static str,
    /// The event name.
    pub name: &'static str,
    /// The record's fields after `cpu` and `ts`, in the order emitted.
    pub fields: Vec<(&'static str, FieldValue)>,
}

impl TraceEvent {
    /// The value of field `name`, if the event has it.
    pub fn get(&self, name: &str) -> Option<&FieldValue> {
        self.fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
    /// Field `name` as u64 bits (0 when absent).
    pub fn u(&self, name: &str) -> u64 {
        self.get(name).map_or(0, FieldValue::bits)
    }
    /// Field `name` as i64 (0 when absent).
    pub fn i(&self, name: &str) -> i64 {
        self.u(name) as i64
    }
    /// Field `name` as a string ("" when absent or not a string).
    pub fn s(&self, name: &str) -> &str {
        match self.get(name) {
            Some(FieldValue::Str(s)) => s,
            _ => "",
        }
    }
    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }
}

/// Builds a [`TraceEvent`] from a `tracing` event's fields.
struct Fields {
    ts: u64,
    cpu: u64,
    fields: Vec<(&'static str, FieldValue)>,
}

impl Fields {
    fn put(&mut self, field: &Field, v: FieldValue) {
        match field.name() {
            "ts" => self.ts = v.bits(),
            "cpu" => self.cpu = v.bits(),
            name => self.fields.push((name, v)),
        }
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, FieldValue::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, FieldValue::I64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, FieldValue::U64(u64::from(value)));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, FieldValue::Str(value.to_owned()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, FieldValue::Str(format!("{value:?}")));
    }
}

/// Where an [`EventLayer`] sends each event. Implementations must not
/// panic: tracing must not change what the emulation does.
pub trait Sink: Send + Sync + 'static {
    /// One event, in emission order (per emitting thread).
    fn event(&self, ev: TraceEvent);
}

/// A sink keeping every event in memory.
#[derive(Clone, Debug, Default)]
pub struct Collector(Arc<Mutex<Vec<TraceEvent>>>);

impl Collector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }
    /// Takes the events collected so far, leaving none.
    pub fn take(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut *lock(&self.0))
    }
    /// Events collected so far.
    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }
    /// Whether none was collected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sink for Collector {
    fn event(&self, ev: TraceEvent) {
        lock(&self.0).push(ev);
    }
}

/// A `tracing-subscriber` layer turning the engine's tracepoints (those in
/// the engine's catalogue, [`mmlab_engine::trace::EVENTS`]) into
/// [`TraceEvent`]s for a [`Sink`]. Use [`EventLayer::filtered`] so that
/// the events the filter does not select stay disabled at their call sites
/// (and cost one load and a branch).
pub struct EventLayer<S> {
    sink: S,
}

impl<S> std::fmt::Debug for EventLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventLayer(..)")
    }
}

/// The per-layer filter type of [`EventLayer::filtered`].
pub type SelectFilter = FilterFn<Box<dyn Fn(&Metadata<'_>) -> bool + Send + Sync>>;

/// The catalogue entry of a call site, if it is one of the engine's tracepoints.
fn desc(meta: &Metadata<'_>) -> Option<&'static EventDesc> {
    if !meta.is_event() {
        return None;
    }
    find_event(meta.target(), meta.name())
}

impl<S: Sink> EventLayer<S> {
    /// A layer handing events to `sink`.
    pub fn new(sink: S) -> Self {
        EventLayer { sink }
    }

    /// This layer with a per-layer filter enabling only the catalogue's
    /// events that `filter` selects.
    pub fn filtered<R>(self, filter: EventFilter) -> Filtered<Self, SelectFilter, R>
    where
        R: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let f: Box<dyn Fn(&Metadata<'_>) -> bool + Send + Sync> =
            Box::new(move |meta| desc(meta).is_some_and(|d| filter.selects(d.system, d.name)));
        self.with_filter(FilterFn::new(f))
    }
}

impl<S: Sink, R: Subscriber> Layer<R> for EventLayer<S> {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, R>) {
        let Some(d) = desc(event.metadata()) else { return };
        let mut f = Fields { ts: 0, cpu: 0, fields: Vec::with_capacity(8) };
        event.record(&mut f);
        self.sink.event(TraceEvent { ts: f.ts, cpu: f.cpu, system: d.system, name: d.name, fields: f.fields });
    }
}
