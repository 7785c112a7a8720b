//! Printing the kmem tracepoints as Linux prints them: ftrace text lines
//! and JSON lines.
//!
//! The engine emits the events ([`mmlab_engine::trace`]): one `tracing`
//! event per tracepoint, with target `kmem`, the kernel's event name as its
//! metadata name, and fields `cpu`, `ts` (a tick of the deterministic trace
//! clock) and then the values the kernel's record holds, under the kernel's
//! names. How they are printed is the harness's business, as the kernel's
//! tracefs output is separate from the code that fires the tracepoints, and
//! lives here.
//!
//! [`KmemLayer`] is a `tracing-subscriber` layer that writes the events one
//! line each, either as the kernel's `trace` file shows them
//! ([`TraceFormat::Ftrace`]) or as JSON lines ([`TraceFormat::Json`]). An
//! ftrace line has the kernel's context columns — task `mmlab-<cpu>`, pid
//! `1000 + cpu`, the CPU, the five irq/preempt flag columns (always `.....`),
//! and the timestamp in seconds (one clock tick is one microsecond) —
//! followed by the event name and the text of the event's `TP_printk`, value
//! for value, as the kernel's `trace_print_context()` and the event's
//! `TP_printk` lay them out. A JSON line has `ts`, `cpu` and `event`
//! (`kmem:<name>`) followed by exactly the key/value pairs of the printed
//! text, in the same order, with numbers as JSON numbers, `page` as a
//! 16-digit hex string and `gfp_flags` as its printed names; it is written
//! by serde_json through [`crate::output::json`]. `page` is the struct
//! page's address in the emulated vmemmap and is shown in full, as `%p`
//! shows it on a kernel booted with `no_hash_pointers`.
//!
//! [`capture`] runs a closure with a layer writing to memory installed on the
//! current thread and returns what was written; [`install_global`] installs a
//! layer for the whole process.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::output::json;

use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::trace::{NO_PFN, PAGEBLOCK_ORDER, TARGET};
use serde::ser::{Serialize, SerializeMap, Serializer};
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::Registry;

/// Locks `m`, taking the data even if a writer panicked while holding it:
/// a trace line half-written by a panicking thread is no reason to stop.
fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ===== output format =====

/// How [`KmemLayer`] writes events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Lines as `cat /sys/kernel/tracing/trace` prints them.
    Ftrace,
    /// One JSON object per line.
    Json,
}

/// Error from parsing a [`TraceFormat`] other than `ftrace` or `json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseTraceFormatError(pub String);

impl std::fmt::Display for ParseTraceFormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown trace format `{}` (expected `ftrace` or `json`)", self.0)
    }
}

impl std::error::Error for ParseTraceFormatError {}

impl FromStr for TraceFormat {
    type Err = ParseTraceFormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ftrace" => Ok(TraceFormat::Ftrace),
            "json" => Ok(TraceFormat::Json),
            _ => Err(ParseTraceFormatError(s.to_owned())),
        }
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TraceFormat::Ftrace => "ftrace",
            TraceFormat::Json => "json",
        })
    }
}

// ===== layer =====

/// Where a [`KmemLayer`] writes: a shared, locked writer. Keep a clone to
/// flush it after tracing, e.g. when it wraps a `BufWriter`.
#[derive(Clone)]
pub struct TraceSink(Arc<Mutex<Box<dyn Write + Send>>>);

impl TraceSink {
    /// Wraps a writer.
    pub fn new(writer: Box<dyn Write + Send>) -> Self {
        TraceSink(Arc::new(Mutex::new(writer)))
    }

    /// Flushes the underlying writer.
    pub fn flush(&self) -> io::Result<()> {
        lock(&self.0).flush()
    }
}

impl std::fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceSink(..)")
    }
}

/// A `tracing-subscriber` layer that writes kmem events as ftrace text or
/// JSON lines, one line (one `write_all`) per event.
///
/// It acts only on events whose target is `kmem` and whose name is one of
/// this module's tracepoints, and ignores everything else, so it can sit
/// beside other layers. On its own it does not tell `tracing` which call
/// sites it wants; use [`KmemLayer::filtered`] so that events of other
/// targets stay disabled (and cost nothing) in a subscriber that has only
/// this layer. Write errors are dropped: tracing must not change what the
/// emulation does.
pub struct KmemLayer {
    format: TraceFormat,
    sink: TraceSink,
}

impl std::fmt::Debug for KmemLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmemLayer").field("format", &self.format).finish_non_exhaustive()
    }
}

/// The per-layer filter type [`KmemLayer::filtered`] uses.
pub type KmemFilter = FilterFn<fn(&Metadata<'_>) -> bool>;

fn is_kmem(meta: &Metadata<'_>) -> bool {
    meta.target() == TARGET
}

impl KmemLayer {
    /// A layer writing to `writer`.
    pub fn new(format: TraceFormat, writer: Box<dyn Write + Send>) -> Self {
        Self::with_sink(format, TraceSink::new(writer))
    }

    /// A layer writing to an existing sink.
    pub fn with_sink(format: TraceFormat, sink: TraceSink) -> Self {
        KmemLayer { format, sink }
    }

    /// The sink this layer writes to.
    pub fn sink(&self) -> TraceSink {
        self.sink.clone()
    }

    /// This layer with a per-layer filter enabling only target `kmem`.
    pub fn filtered<S>(self) -> Filtered<Self, KmemFilter, S>
    where
        S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        self.with_filter(FilterFn::new(is_kmem as fn(&Metadata<'_>) -> bool))
    }

    /// Formats one event, or `None` if it is not a kmem tracepoint.
    fn render(&self, event: &Event<'_>) -> Option<String> {
        let meta = event.metadata();
        if meta.target() != TARGET {
            return None;
        }
        let kind = Kind::from_name(meta.name())?;
        let mut rec = Record::default();
        event.record(&mut rec);
        let pairs = kind.pairs(&rec);
        Some(match self.format {
            TraceFormat::Ftrace => ftrace_line(meta.name(), &rec, &pairs),
            TraceFormat::Json => json_line(meta.name(), &rec, &pairs),
        })
    }
}

impl<S: Subscriber> Layer<S> for KmemLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if let Some(line) = self.render(event) {
            // Errors are dropped on purpose; see the type's doc.
            let _ = lock(&self.sink.0).write_all(line.as_bytes());
        }
    }
}

/// The values an event carried, by the kernel's field names. Signed values
/// are kept as their two's-complement bits.
#[derive(Default)]
pub(crate) struct Record {
    cpu: u64,
    ts: u64,
    page: u64,
    pfn: u64,
    order: u64,
    gfp_flags: u64,
    migratetype: u64,
    percpu_refill: u64,
    alloc_order: u64,
    fallback_order: u64,
    alloc_migratetype: u64,
    fallback_migratetype: u64,
    change_ownership: u64,
}

impl Record {
    pub(crate) fn set(&mut self, name: &str, v: u64) {
        let slot = match name {
            "cpu" => &mut self.cpu,
            "ts" => &mut self.ts,
            "page" => &mut self.page,
            "pfn" => &mut self.pfn,
            "order" => &mut self.order,
            "gfp_flags" => &mut self.gfp_flags,
            "migratetype" => &mut self.migratetype,
            "percpu_refill" => &mut self.percpu_refill,
            "alloc_order" => &mut self.alloc_order,
            "fallback_order" => &mut self.fallback_order,
            "alloc_migratetype" => &mut self.alloc_migratetype,
            "fallback_migratetype" => &mut self.fallback_migratetype,
            "change_ownership" => &mut self.change_ownership,
            _ => return,
        };
        *slot = v;
    }
}

impl Visit for Record {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), value as u64);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), u64::from(value));
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Alloc,
    Free,
    FreeBatched,
    ZoneLocked,
    PcpuDrain,
    Extfrag,
}

/// One `key=value` of a printed event.
pub(crate) enum Val {
    /// `%p`: 16 hex digits (a JSON string).
    Ptr(u64),
    /// `0x%lx` (a JSON number).
    Hex(u64),
    /// `%d` / `%u`.
    Int(i64),
    /// `%lu` of a full 64-bit value.
    UInt(u64),
    /// `%s` (a JSON string).
    Str(String),
}

impl Kind {
    pub(crate) fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "mm_page_alloc" => Kind::Alloc,
            "mm_page_free" => Kind::Free,
            "mm_page_free_batched" => Kind::FreeBatched,
            "mm_page_alloc_zone_locked" => Kind::ZoneLocked,
            "mm_page_pcpu_drain" => Kind::PcpuDrain,
            "mm_page_alloc_extfrag" => Kind::Extfrag,
            _ => return None,
        })
    }

    /// The printed pairs, in `TP_printk` order, with its conversions
    /// (`%d` of a 32-bit field reinterprets its low 32 bits as signed).
    pub(crate) fn pairs(self, r: &Record) -> Vec<(&'static str, Val)> {
        let d = |v: u64| Val::Int(i64::from(v as u32 as i32));
        let u = |v: u64| Val::Int(i64::from(v as u32));
        // NULL page and pfn 0 when the kernel recorded -1UL.
        let (page, pfn) = if r.pfn == NO_PFN { (0, 0) } else { (r.page, r.pfn) };
        match self {
            Kind::Alloc => vec![
                ("page", Val::Ptr(page)),
                ("pfn", Val::Hex(pfn)),
                ("order", d(r.order)),
                ("migratetype", d(r.migratetype)),
                ("gfp_flags", Val::Str(Gfp::from_bits_retain(r.gfp_flags as u32).to_string())),
            ],
            Kind::Free => vec![("page", Val::Ptr(r.page)), ("pfn", Val::Hex(r.pfn)), ("order", d(r.order))],
            Kind::FreeBatched => vec![("page", Val::Ptr(r.page)), ("pfn", Val::Hex(r.pfn)), ("order", Val::Int(0))],
            Kind::ZoneLocked => vec![
                ("page", Val::Ptr(page)),
                ("pfn", Val::Hex(pfn)),
                ("order", u(r.order)),
                ("migratetype", d(r.migratetype)),
                ("percpu_refill", d(r.percpu_refill)),
            ],
            Kind::PcpuDrain => vec![
                ("page", Val::Ptr(r.page)),
                ("pfn", Val::Hex(r.pfn)),
                ("order", d(r.order)),
                ("migratetype", d(r.migratetype)),
            ],
            Kind::Extfrag => {
                let fallback_order = r.fallback_order as u32 as i32;
                vec![
                    ("page", Val::Ptr(r.page)),
                    ("pfn", Val::Hex(r.pfn)),
                    ("alloc_order", d(r.alloc_order)),
                    ("fallback_order", d(r.fallback_order)),
                    ("pageblock_order", Val::Int(i64::from(PAGEBLOCK_ORDER))),
                    ("alloc_migratetype", d(r.alloc_migratetype)),
                    ("fallback_migratetype", d(r.fallback_migratetype)),
                    ("fragmenting", Val::Int(i64::from(i64::from(fallback_order) < i64::from(PAGEBLOCK_ORDER)))),
                    ("change_ownership", d(r.change_ownership)),
                ]
            }
        }
    }
}

/// `<comm>-<pid> [cpu] flags secs.usecs: name:`, the start of a line as the
/// kernel's `trace_print_context()` lays it out with the default options
/// (mmlab's CPU `cpu` runs as task `mmlab-<cpu>`, pid 1000 + cpu).
pub(crate) fn ftrace_context(name: &str, cpu: u64, ts: u64) -> String {
    let mut s = String::with_capacity(160);
    let comm = format!("mmlab-{cpu}");
    let _ = write!(
        s,
        "{comm:>16}-{pid:<7} [{cpu:03}] ..... {sec:5}.{usec:06}: {name}:",
        pid = 1000 + cpu,
        sec = ts / 1_000_000,
        usec = ts % 1_000_000,
    );
    s
}

/// `<comm>-<pid> [cpu] flags secs.usecs: name: text`, as the kernel's
/// `trace_print_context()` lays it out with the default options.
pub(crate) fn ftrace_line(name: &str, r: &Record, pairs: &[(&'static str, Val)]) -> String {
    let mut s = ftrace_context(name, r.cpu, r.ts);
    for (key, val) in pairs {
        let _ = match val {
            Val::Ptr(p) => write!(s, " {key}={p:016x}"),
            Val::Hex(v) => write!(s, " {key}={v:#x}"),
            Val::Int(v) => write!(s, " {key}={v}"),
            Val::UInt(v) => write!(s, " {key}={v}"),
            Val::Str(v) => write!(s, " {key}={v}"),
        };
    }
    s.push('\n');
    s
}

/// One event as a JSON object: `ts`, `cpu`, `event`, then the printed pairs
/// in their order (serialised as a map so that the order is kept).
struct JsonEvent<'a> {
    name: &'a str,
    rec: &'a Record,
    pairs: &'a [(&'static str, Val)],
}

impl Serialize for JsonEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3 + self.pairs.len()))?;
        map.serialize_entry("ts", &self.rec.ts)?;
        map.serialize_entry("cpu", &self.rec.cpu)?;
        map.serialize_entry("event", &format!("{TARGET}:{}", self.name))?;
        for (key, val) in self.pairs {
            match val {
                Val::Ptr(p) => map.serialize_entry(key, &format!("{p:016x}"))?,
                Val::Hex(v) => map.serialize_entry(key, v)?,
                Val::Int(v) => map.serialize_entry(key, v)?,
                Val::UInt(v) => map.serialize_entry(key, v)?,
                Val::Str(v) => map.serialize_entry(key, v)?,
            }
        }
        map.end()
    }
}

pub(crate) fn json_line(name: &str, rec: &Record, pairs: &[(&'static str, Val)]) -> String {
    json::to_line(&JsonEvent { name, rec, pairs })
}

// ===== installing =====

/// An in-memory writer shared with the caller of [`capture`].
#[derive(Clone, Default)]
struct MemBuf(Arc<Mutex<Vec<u8>>>);

impl Write for MemBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with a [`KmemLayer`] writing to memory as the current thread's
/// subscriber, and returns `f`'s result with everything written.
///
/// Only events emitted on this thread while `f` runs are captured.
pub fn capture<R>(format: TraceFormat, f: impl FnOnce() -> R) -> (R, String) {
    // `tracing` caches each callsite's interest process-wide. A callsite
    // first hit on a thread without a subscriber while another thread's
    // scoped one is being set up can keep a stale "never", and its events
    // are then lost to this capture (seen under qemu-aarch64, where the
    // timing differs). Captures run one at a time, and the cache is rebuilt
    // once this capture's dispatcher is current.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let buf = MemBuf::default();
    let layer = KmemLayer::new(format, Box::new(buf.clone()));
    let subscriber = Registry::default().with(layer.filtered());
    let r = tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        f()
    });
    let bytes = std::mem::take(&mut *lock(&buf.0));
    (r, String::from_utf8_lossy(&bytes).into_owned())
}

/// Installs a [`KmemLayer`] writing to `writer` as the process-wide
/// subscriber. Returns the sink so the caller can flush it at the end (the
/// global subscriber is never dropped). Fails if a global subscriber is
/// already set.
///
/// # Errors
///
/// The `tracing` error if a global subscriber is already set.
pub fn install_global(
    format: TraceFormat,
    writer: Box<dyn Write + Send>,
) -> Result<TraceSink, tracing::subscriber::SetGlobalDefaultError> {
    let layer = KmemLayer::new(format, writer);
    let sink = layer.sink();
    tracing::subscriber::set_global_default(Registry::default().with(layer.filtered()))?;
    Ok(sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::trace::{
        TraceClock, mm_page_alloc, mm_page_alloc_extfrag, mm_page_alloc_zone_locked, mm_page_free,
        mm_page_free_batched, mm_page_pcpu_drain,
    };

    const PAGE: u64 = 0xffff_fdff_c100_0000;
    const PFN: u64 = 0x40000;

    fn both(f: impl Fn()) -> (String, String) {
        let ((), text) = capture(TraceFormat::Ftrace, &f);
        let ((), json) = capture(TraceFormat::Json, &f);
        (text, json)
    }

    #[test]
    fn mm_page_alloc_lines() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_alloc(0, &clock, PAGE, Some(PFN), 0, Gfp::GFP_KERNEL, 1);
        });
        assert_eq!(
            text,
            "         mmlab-0-1000    [000] .....     0.000001: mm_page_alloc: \
             page=fffffdffc1000000 pfn=0x40000 order=0 migratetype=1 gfp_flags=GFP_KERNEL\n"
        );
        assert_eq!(
            json,
            "{\"ts\":1,\"cpu\":0,\"event\":\"kmem:mm_page_alloc\",\"page\":\"fffffdffc1000000\",\
             \"pfn\":262144,\"order\":0,\"migratetype\":1,\"gfp_flags\":\"GFP_KERNEL\"}\n"
        );
    }

    #[test]
    fn mm_page_alloc_failed_and_composite_flags() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_alloc(3, &clock, PAGE, None, 4, Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_ZERO, 1);
        });
        assert_eq!(
            text,
            "         mmlab-3-1003    [003] .....     0.000001: mm_page_alloc: \
             page=0000000000000000 pfn=0x0 order=4 migratetype=1 \
             gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO\n"
        );
        assert_eq!(
            json,
            "{\"ts\":1,\"cpu\":3,\"event\":\"kmem:mm_page_alloc\",\"page\":\"0000000000000000\",\
             \"pfn\":0,\"order\":4,\"migratetype\":1,\"gfp_flags\":\"GFP_HIGHUSER_MOVABLE|__GFP_ZERO\"}\n"
        );
    }

    #[test]
    fn mm_page_free_lines() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_free(1, &clock, PAGE + 64, PFN + 1, 2);
        });
        assert_eq!(
            text,
            "         mmlab-1-1001    [001] .....     0.000001: mm_page_free: \
             page=fffffdffc1000040 pfn=0x40001 order=2\n"
        );
        assert_eq!(
            json,
            "{\"ts\":1,\"cpu\":1,\"event\":\"kmem:mm_page_free\",\"page\":\"fffffdffc1000040\",\
             \"pfn\":262145,\"order\":2}\n"
        );
    }

    #[test]
    fn mm_page_free_batched_lines() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_free_batched(0, &clock, PAGE, PFN);
        });
        assert_eq!(
            text,
            "         mmlab-0-1000    [000] .....     0.000001: mm_page_free_batched: \
             page=fffffdffc1000000 pfn=0x40000 order=0\n"
        );
        assert_eq!(
            json,
            "{\"ts\":1,\"cpu\":0,\"event\":\"kmem:mm_page_free_batched\",\
             \"page\":\"fffffdffc1000000\",\"pfn\":262144,\"order\":0}\n"
        );
    }

    #[test]
    fn mm_page_alloc_zone_locked_lines() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_alloc_zone_locked(12, &clock, PAGE, PFN, 3, 0, true);
        });
        assert_eq!(
            text,
            "        mmlab-12-1012    [012] .....     0.000001: mm_page_alloc_zone_locked: \
             page=fffffdffc1000000 pfn=0x40000 order=3 migratetype=0 percpu_refill=1\n"
        );
        assert_eq!(
            json,
            "{\"ts\":1,\"cpu\":12,\"event\":\"kmem:mm_page_alloc_zone_locked\",\
             \"page\":\"fffffdffc1000000\",\"pfn\":262144,\"order\":3,\"migratetype\":0,\
             \"percpu_refill\":1}\n"
        );
    }

    #[test]
    fn mm_page_pcpu_drain_lines() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_pcpu_drain(0, &clock, PAGE, PFN, 0, 1);
        });
        assert_eq!(
            text,
            "         mmlab-0-1000    [000] .....     0.000001: mm_page_pcpu_drain: \
             page=fffffdffc1000000 pfn=0x40000 order=0 migratetype=1\n"
        );
        assert_eq!(
            json,
            "{\"ts\":1,\"cpu\":0,\"event\":\"kmem:mm_page_pcpu_drain\",\
             \"page\":\"fffffdffc1000000\",\"pfn\":262144,\"order\":0,\"migratetype\":1}\n"
        );
    }

    #[test]
    fn mm_page_alloc_extfrag_lines() {
        let clock = TraceClock::new();
        let (text, json) = both(|| {
            clock.reset();
            mm_page_alloc_extfrag(0, &clock, PAGE, PFN, 0, 3, 0, 1, false);
            mm_page_alloc_extfrag(0, &clock, PAGE, PFN, 0, 9, 0, 1, true);
        });
        assert_eq!(
            text,
            "         mmlab-0-1000    [000] .....     0.000001: mm_page_alloc_extfrag: \
             page=fffffdffc1000000 pfn=0x40000 alloc_order=0 fallback_order=3 \
             pageblock_order=9 alloc_migratetype=0 fallback_migratetype=1 fragmenting=1 \
             change_ownership=0\n\
             \x20        mmlab-0-1000    [000] .....     0.000002: mm_page_alloc_extfrag: \
             page=fffffdffc1000000 pfn=0x40000 alloc_order=0 fallback_order=9 \
             pageblock_order=9 alloc_migratetype=0 fallback_migratetype=1 fragmenting=0 \
             change_ownership=1\n"
        );
        assert_eq!(
            json.lines().next().unwrap(),
            "{\"ts\":1,\"cpu\":0,\"event\":\"kmem:mm_page_alloc_extfrag\",\
             \"page\":\"fffffdffc1000000\",\"pfn\":262144,\"alloc_order\":0,\"fallback_order\":3,\
             \"pageblock_order\":9,\"alloc_migratetype\":0,\"fallback_migratetype\":1,\
             \"fragmenting\":1,\"change_ownership\":0}"
        );
        assert_eq!(json.lines().count(), 2);
    }

    #[test]
    fn timestamps_roll_into_seconds() {
        let clock = TraceClock::new();
        for _ in 0..1_234_566 {
            clock.tick();
        }
        let ((), text) = capture(TraceFormat::Ftrace, || {
            mm_page_free(0, &clock, PAGE, PFN, 0);
        });
        assert!(text.contains(" .....     1.234567: mm_page_free:"), "{text}");
        assert_eq!(clock.now(), 1_234_567);
    }

    /// (With no subscriber at all, the engine's own test checks the same.)
    #[test]
    fn disabled_events_do_not_advance_the_clock() {
        let clock = TraceClock::new();
        // A subscriber whose only layer is the filtered kmem layer, on a
        // non-kmem event: the field expressions are not evaluated.
        let ((), text) = capture(TraceFormat::Ftrace, || {
            tracing::event!(target: "other", tracing::Level::TRACE, ts = clock.tick());
        });
        assert_eq!(text, "");
        assert_eq!(clock.now(), 0);
        // Enabled again: ticks resume from where they were.
        let ((), _) = capture(TraceFormat::Json, || {
            mm_page_free(0, &clock, PAGE, PFN, 0);
        });
        assert_eq!(clock.now(), 1);
        clock.reset();
        assert_eq!(clock.now(), 0);
        assert_eq!(clock.tick(), 1);
    }

    #[test]
    fn unfiltered_layer_ignores_other_targets() {
        let buf = MemBuf::default();
        let layer = KmemLayer::new(TraceFormat::Ftrace, Box::new(buf.clone()));
        let clock = TraceClock::new();
        tracing::subscriber::with_default(Registry::default().with(layer), || {
            // Same name and fields as a kmem event, wrong target.
            tracing::event!(
                name: "mm_page_free",
                target: "kmem_other",
                tracing::Level::TRACE,
                cpu = 0u64,
                ts = 1u64,
                page = PAGE,
                pfn = PFN,
                order = 0u32,
            );
            // Right target, unknown event name.
            tracing::event!(name: "mm_page_mystery", target: "kmem", tracing::Level::TRACE, ts = 1u64);
            mm_page_free(0, &clock, PAGE, PFN, 0);
        });
        let out = String::from_utf8(lock(&buf.0).clone()).unwrap();
        assert_eq!(
            out,
            "         mmlab-0-1000    [000] .....     0.000001: mm_page_free: \
             page=fffffdffc1000000 pfn=0x40000 order=0\n"
        );
    }

    #[test]
    fn sequence_is_deterministic() {
        let run = || {
            let clock = TraceClock::new();
            capture(TraceFormat::Ftrace, || {
                for i in 0..4u64 {
                    mm_page_alloc_zone_locked(0, &clock, PAGE + 64 * i, PFN + i, 0, 1, true);
                }
                for i in 0..4u64 {
                    mm_page_pcpu_drain(0, &clock, PAGE + 64 * i, PFN + i, 0, 1);
                }
            })
            .1
        };
        let a = run();
        assert_eq!(a, run());
        assert_eq!(a.lines().count(), 8);
        assert!(a.lines().last().unwrap().contains("     0.000008: mm_page_pcpu_drain: "));
    }

    #[test]
    fn format_parse() {
        assert_eq!("ftrace".parse(), Ok(TraceFormat::Ftrace));
        assert_eq!("json".parse(), Ok(TraceFormat::Json));
        let e = "xml".parse::<TraceFormat>().unwrap_err();
        assert_eq!(e.to_string(), "unknown trace format `xml` (expected `ftrace` or `json`)");
        assert_eq!(TraceFormat::Json.to_string(), "json");
    }
}
