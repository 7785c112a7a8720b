//! `mmlab trace pages` and `mmlab replay --trace`: the kmem tracepoints as
//! Linux prints them, ftrace text lines or JSON lines.
//!
//! The engine emits the events ([`mmlab_engine::trace`]); how they are
//! printed is the harness's business, as the kernel's tracefs output is
//! separate from the code that fires the tracepoints. There is one printer
//! for every command: the event layer ([`crate::trace::event::EventLayer`])
//! turns each tracepoint into a [`TraceEvent`] and [`crate::trace::text`]
//! prints it. This module selects the kmem events (`-e kmem:*` of the other
//! `trace` commands, [`kmem_events`]) and writes them one line each in a
//! [`TraceFormat`]:
//!
//! [`capture`] runs a closure with such a layer writing to memory installed
//! on the current thread and returns what was written; [`install_global`]
//! installs one for the whole process.

use std::io::{self, Write};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use crate::trace::event::{EventLayer, Sink, TraceEvent, lock};
use crate::trace::filter::EventFilter;
use crate::trace::text;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;

// ===== output format =====

/// How `trace pages` writes events.
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

// ===== the kmem sink =====

/// Where the kmem lines go: a shared, locked writer. Keep a clone to flush
/// it after tracing, e.g. when it wraps a `BufWriter`.
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

/// Writes each event as one line (one `write_all`) in a [`TraceFormat`].
/// Write errors are dropped: tracing must not change what the emulation
/// does.
struct Lines {
    format: TraceFormat,
    sink: TraceSink,
}

impl Sink for Lines {
    fn event(&self, ev: TraceEvent) {
        let line = match self.format {
            TraceFormat::Ftrace => text::ftrace(&ev),
            TraceFormat::Json => text::json(&ev),
        };
        let _ = lock(&self.sink.0).write_all(line.as_bytes());
    }
}

/// The events `trace pages` prints: `kmem:*`.
pub fn kmem_events() -> EventFilter {
    EventFilter::none().with_system("kmem")
}

/// The subscriber: the event layer, filtered to [`kmem_events`] (every other
/// call site stays disabled), writing lines to `sink`.
fn kmem_subscriber(format: TraceFormat, sink: TraceSink) -> impl tracing::Subscriber + Send + Sync {
    Registry::default().with(EventLayer::new(Lines { format, sink }).filtered(kmem_events()))
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

/// Runs `f` with the kmem printer writing to memory as the current
/// thread's subscriber, and returns `f`'s result with everything written.
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
    let subscriber = kmem_subscriber(format, TraceSink::new(Box::new(buf.clone())));
    let r = tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        f()
    });
    let bytes = std::mem::take(&mut *lock(&buf.0));
    (r, String::from_utf8_lossy(&bytes).into_owned())
}

/// Installs the kmem printer writing to `writer` as the process-wide
/// subscriber. Returns the sink so the caller can flush it at the end (the
/// global subscriber is never dropped).
///
/// # Errors
///
/// The `tracing` error if a global subscriber is already set.
pub fn install_global(
    format: TraceFormat,
    writer: Box<dyn Write + Send>,
) -> Result<TraceSink, tracing::subscriber::SetGlobalDefaultError> {
    let sink = TraceSink::new(writer);
    tracing::subscriber::set_global_default(kmem_subscriber(format, sink.clone()))?;
    Ok(sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::mm::gfp::Gfp;
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

    /// Even unfiltered, the event layer prints only the catalogue's events.
    #[test]
    fn unfiltered_layer_ignores_other_targets() {
        let buf = MemBuf::default();
        let layer = EventLayer::new(Lines { format: TraceFormat::Ftrace, sink: TraceSink::new(Box::new(buf.clone())) });
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

    /// `trace pages` selects exactly the kmem system, with the same filter
    /// words as `-e`.
    #[test]
    fn kmem_filter_is_the_e_filter() {
        assert_eq!(kmem_events(), EventFilter::parse(&["kmem:*"]).unwrap());
        assert!(kmem_events().names().all(|n| n.starts_with("kmem:")));
        assert_eq!(kmem_events().names().count(), 6);
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
