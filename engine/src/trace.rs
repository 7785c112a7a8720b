//! kmem tracepoints: the page allocator's events, named and printed as Linux
//! prints them.
//!
//! The allocator crates report what they do by calling the plain functions in
//! this module — [`mm_page_alloc`], [`mm_page_free`], [`mm_page_free_batched`],
//! [`mm_page_alloc_zone_locked`], [`mm_page_pcpu_drain`] and
//! [`mm_page_alloc_extfrag`] — at the points where the kernel fires the
//! tracepoints of the same names (`include/trace/events/kmem.h`). Each function
//! emits one `tracing` event with target `kmem`, level `TRACE` and the kernel
//! event name as its metadata name. Its fields are `cpu`, `ts` and then the
//! values the kernel's record holds, under the kernel's names (`page`, `pfn`,
//! `order`, `gfp_flags`, `migratetype`, ...). Callers never touch `tracing`
//! themselves.
//!
//! Nothing is paid for a tracepoint nobody listens to. `tracing` guards every
//! event with, first, a comparison against its static maximum level (the
//! `max_level_*` / `release_max_level_*` cargo features remove `TRACE` events
//! from the binary altogether) and the global dynamic maximum level, which is
//! `OFF` while no subscriber exists: one relaxed atomic load and a branch.
//! When subscribers exist, each call site caches their combined interest, so
//! a site that no subscriber wants is again one load and a branch. The field
//! expressions — including the tick of the trace clock — are evaluated only
//! after these checks pass, so a disabled tracepoint neither formats anything
//! nor moves the clock.
//!
//! Time in a trace is logical. A [`TraceClock`] gives each emitted event the
//! next tick, and one tick counts as one microsecond when printed. Host time
//! would make two runs of the same seed differ in every line, and differ
//! again between an arm64 and an x86_64 host; a counter does not, so a
//! single-CPU trace for a given seed is byte-identical everywhere and two
//! traces can be compared with `diff`.
//!
//! [`KmemLayer`] is a `tracing-subscriber` layer that writes the events one
//! line each, either as the kernel's `trace` file shows them
//! ([`TraceFormat::Ftrace`]) or as JSON lines ([`TraceFormat::Json`]). An
//! ftrace line has the kernel's context columns — task `mmlab-<cpu>`, pid
//! `1000 + cpu`, the CPU, the five irq/preempt flag columns (always `.....`),
//! and the timestamp in seconds — followed by the event name and the text of
//! the event's `TP_printk`, value for value. A JSON line has `ts`, `cpu` and
//! `event` (`kmem:<name>`) followed by exactly the key/value pairs of the
//! printed text, in the same order, with numbers as JSON numbers, `page` as a
//! 16-digit hex string and `gfp_flags` as its printed names. `page` is the
//! struct page's address in the emulated vmemmap and is shown in full, as
//! `%p` shows it on a kernel booted with `no_hash_pointers`.
//!
//! [`capture`] runs a closure with a layer writing to memory installed on the
//! current thread and returns what was written; [`install_global`] installs a
//! layer for the whole process.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::Registry;

use crate::gfp::Gfp;

/// The `tracing` target every kmem event uses.
pub const TARGET: &str = "kmem";

/// `pageblock_order` of the emulated machine: arm64 with 4 KiB pages, where
/// it is min(PMD order 9, MAX_PAGE_ORDER 10). Printed by
/// `mm_page_alloc_extfrag`.
pub const PAGEBLOCK_ORDER: u32 = 9;

/// The pfn the kernel records for a failed allocation (`-1UL`).
const NO_PFN: u64 = u64::MAX;

// ===== clock =====

/// Deterministic logical clock for traces.
///
/// Every emitted event takes the next tick; a tick is one microsecond of
/// trace time, so the first event is stamped `0.000001`. Traces must be
/// identical for the same seed on every host and every run, which host
/// clocks cannot give; a counter that moves only when an event is actually
/// emitted can. Ticks are taken only inside enabled tracepoints, so turning
/// tracing off does not change any later timestamp's meaning and costs no
/// atomic operation.
#[derive(Debug, Default)]
pub struct TraceClock {
    now: AtomicU64,
}

impl TraceClock {
    /// A clock at 0 (no event emitted yet).
    pub const fn new() -> Self {
        TraceClock { now: AtomicU64::new(0) }
    }

    /// Advances by one tick and returns the new time (the first call returns 1).
    #[inline]
    pub fn tick(&self) -> u64 {
        self.now.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The time of the last tick taken (0 if none).
    #[inline]
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// Back to 0, as at the start of a run.
    pub fn reset(&self) {
        self.now.store(0, Ordering::Relaxed);
    }
}

// ===== tracepoints =====

/// A page allocation finished, successfully (`pfn` is `Some`) or not.
///
/// Mirrors the `kmem:mm_page_alloc` tracepoint fired at the end of
/// mm/page_alloc.c `__alloc_pages_noprof()`. For a failed allocation the
/// kernel records pfn `-1UL` and prints `page=0000000000000000 pfn=0x0`; so
/// does this event (`page` is then ignored).
#[inline]
pub fn mm_page_alloc(
    cpu: usize,
    clock: &TraceClock,
    page: u64,
    pfn: Option<u64>,
    order: u32,
    gfp: Gfp,
    migratetype: i32,
) {
    tracing::event!(
        name: "mm_page_alloc",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = if pfn.is_some() { page } else { 0 },
        pfn = pfn.unwrap_or(NO_PFN),
        order = order,
        gfp_flags = u64::from(gfp.0),
        migratetype = migratetype,
    );
}

/// A page block of `order` is being freed.
///
/// Mirrors the `kmem:mm_page_free` tracepoint fired in mm/page_alloc.c
/// `free_pages_prepare()` for every free.
#[inline]
pub fn mm_page_free(cpu: usize, clock: &TraceClock, page: u64, pfn: u64, order: u32) {
    tracing::event!(
        name: "mm_page_free",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        order = order,
    );
}

/// A folio freed through the batched path; printed with a literal `order=0`
/// whatever its order, as the kernel does.
///
/// Mirrors the `kmem:mm_page_free_batched` tracepoint fired in mm/page_alloc.c
/// `free_unref_folios()`.
#[inline]
pub fn mm_page_free_batched(cpu: usize, clock: &TraceClock, page: u64, pfn: u64) {
    tracing::event!(
        name: "mm_page_free_batched",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
    );
}

/// A block was taken off a buddy free list with the zone lock held;
/// `percpu_refill` says whether it goes to a pcp list.
///
/// Mirrors the `kmem:mm_page_alloc_zone_locked` tracepoint fired in
/// mm/page_alloc.c `__rmqueue_smallest()`.
#[inline]
pub fn mm_page_alloc_zone_locked(
    cpu: usize,
    clock: &TraceClock,
    page: u64,
    pfn: u64,
    order: u32,
    migratetype: i32,
    percpu_refill: bool,
) {
    tracing::event!(
        name: "mm_page_alloc_zone_locked",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        order = order,
        migratetype = migratetype,
        percpu_refill = i32::from(percpu_refill),
    );
}

/// A page is moved from a pcp list back to the buddy lists.
///
/// Mirrors the `kmem:mm_page_pcpu_drain` tracepoint fired per page in
/// mm/page_alloc.c `free_pcppages_bulk()`; `pfn` is the page's own pfn, before
/// any merging with its buddy.
#[inline]
pub fn mm_page_pcpu_drain(cpu: usize, clock: &TraceClock, page: u64, pfn: u64, order: u32, migratetype: i32) {
    tracing::event!(
        name: "mm_page_pcpu_drain",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        order = order,
        migratetype = migratetype,
    );
}

/// An allocation fell back to another migratetype's free list.
/// `change_ownership` is whether the pageblock now has the allocation's type;
/// the printed `fragmenting` is `fallback_order < pageblock_order`.
///
/// Mirrors the `kmem:mm_page_alloc_extfrag` tracepoint fired in
/// mm/page_alloc.c `__rmqueue_fallback()` (and the steal/claim helpers of
/// later kernels).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn mm_page_alloc_extfrag(
    cpu: usize,
    clock: &TraceClock,
    page: u64,
    pfn: u64,
    alloc_order: i32,
    fallback_order: i32,
    alloc_migratetype: i32,
    fallback_migratetype: i32,
    change_ownership: bool,
) {
    tracing::event!(
        name: "mm_page_alloc_extfrag",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        alloc_order = alloc_order,
        fallback_order = fallback_order,
        alloc_migratetype = alloc_migratetype,
        fallback_migratetype = fallback_migratetype,
        change_ownership = i32::from(change_ownership),
    );
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
        self.0.lock().flush()
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
            let _ = self.sink.0.lock().write_all(line.as_bytes());
        }
    }
}

/// The values an event carried, by the kernel's field names. Signed values
/// are kept as their two's-complement bits.
#[derive(Default)]
struct Record {
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
    fn set(&mut self, name: &str, v: u64) {
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
enum Kind {
    Alloc,
    Free,
    FreeBatched,
    ZoneLocked,
    PcpuDrain,
    Extfrag,
}

/// One `key=value` of a printed event.
enum Val {
    /// `%p`: 16 hex digits (a JSON string).
    Ptr(u64),
    /// `0x%lx` (a JSON number).
    Hex(u64),
    /// `%d` / `%u`.
    Int(i64),
    /// `%s` (a JSON string).
    Str(String),
}

impl Kind {
    fn from_name(name: &str) -> Option<Kind> {
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
    fn pairs(self, r: &Record) -> Vec<(&'static str, Val)> {
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
                ("gfp_flags", Val::Str(Gfp(r.gfp_flags as u32).to_string())),
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

/// `<comm>-<pid> [cpu] flags secs.usecs: name: text`, as the kernel's
/// `trace_print_context()` lays it out with the default options.
fn ftrace_line(name: &str, r: &Record, pairs: &[(&'static str, Val)]) -> String {
    let mut s = String::with_capacity(160);
    let comm = format!("mmlab-{}", r.cpu);
    let _ = write!(
        s,
        "{comm:>16}-{pid:<7} [{cpu:03}] ..... {sec:5}.{usec:06}: {name}:",
        pid = 1000 + r.cpu,
        cpu = r.cpu,
        sec = r.ts / 1_000_000,
        usec = r.ts % 1_000_000,
    );
    for (key, val) in pairs {
        let _ = match val {
            Val::Ptr(p) => write!(s, " {key}={p:016x}"),
            Val::Hex(v) => write!(s, " {key}={v:#x}"),
            Val::Int(v) => write!(s, " {key}={v}"),
            Val::Str(v) => write!(s, " {key}={v}"),
        };
    }
    s.push('\n');
    s
}

fn json_line(name: &str, r: &Record, pairs: &[(&'static str, Val)]) -> String {
    let mut s = String::with_capacity(200);
    let _ = write!(s, "{{\"ts\":{},\"cpu\":{},\"event\":", r.ts, r.cpu);
    json_str(&mut s, &format!("{TARGET}:{name}"));
    for (key, val) in pairs {
        s.push(',');
        json_str(&mut s, key);
        s.push(':');
        let _ = match val {
            Val::Ptr(p) => write!(s, "\"{p:016x}\""),
            Val::Hex(v) => write!(s, "{v}"),
            Val::Int(v) => write!(s, "{v}"),
            Val::Str(v) => {
                json_str(&mut s, v);
                Ok(())
            }
        };
    }
    s.push_str("}\n");
    s
}

/// Appends `v` as a JSON string literal (shared by the JSON reports).
pub fn json_str(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

// ===== installing =====

/// An in-memory writer shared with the caller of [`capture`].
#[derive(Clone, Default)]
struct MemBuf(Arc<Mutex<Vec<u8>>>);

impl Write for MemBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
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
    let buf = MemBuf::default();
    let layer = KmemLayer::new(format, Box::new(buf.clone()));
    let subscriber = Registry::default().with(layer.filtered());
    let r = tracing::subscriber::with_default(subscriber, f);
    let bytes = std::mem::take(&mut *buf.0.lock());
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
        clock.now.store(1_234_566, Ordering::Relaxed);
        let ((), text) = capture(TraceFormat::Ftrace, || {
            mm_page_free(0, &clock, PAGE, PFN, 0);
        });
        assert!(text.contains(" .....     1.234567: mm_page_free:"), "{text}");
        assert_eq!(clock.now(), 1_234_567);
    }

    #[test]
    fn disabled_events_do_not_advance_the_clock() {
        let clock = TraceClock::new();
        // A scoped subscriber that wants nothing: as good as none, and
        // unaffected by other tests' subscribers on other threads.
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            mm_page_alloc(0, &clock, PAGE, Some(PFN), 0, Gfp::GFP_KERNEL, 0);
            mm_page_free(0, &clock, PAGE, PFN, 0);
            mm_page_free_batched(0, &clock, PAGE, PFN);
            mm_page_alloc_zone_locked(0, &clock, PAGE, PFN, 0, 0, false);
            mm_page_pcpu_drain(0, &clock, PAGE, PFN, 0, 0);
            mm_page_alloc_extfrag(0, &clock, PAGE, PFN, 0, 0, 0, 0, false);
        });
        assert_eq!(clock.now(), 0);
        // A subscriber whose only layer is the filtered kmem layer, on a
        // non-kmem event: the field expressions are not evaluated either.
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
        let out = String::from_utf8(buf.0.lock().clone()).unwrap();
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
    fn json_escaping() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
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
