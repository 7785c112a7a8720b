//! The `mmlab trace` command: which workload, which events, which output.
//!
//! ```text
//! mmlab trace pages --ops N [--format ftrace|json]       kmem events of the random workload (as before)
//! mmlab trace random --ops N [OUT]                       every layer, the random page workload
//! mmlab trace test-vmalloc [KEY=VALUE...] [OUT]          every layer, lib/test_vmalloc.c
//! mmlab trace replay FILE [OUT]                          every layer, a replay file (mmlab fuzz / replay)
//! mmlab trace kernel FILE [--on-error skip|stop]         replay a real kernel's kmem trace, diff the decisions
//! OUT: [-e EVENT]... [--format ftrace|json|perfetto] [-o FILE] [--perfetto FILE] [--plot FILE.svg] [--stats]
//! ```
//!
//! Events are selected as `set_event` takes them ([`super::filter`]). The
//! workload runs with a process-wide subscriber, so the events of every
//! thread (test_vmalloc's workers) are traced. `--stats` prints the number
//! of events and the events per second of measured host time to stderr.

pub use super::configs;
use super::event::{Collector, EventLayer, Sink, TraceEvent, lock};
use super::filter::EventFilter;
use super::{kernel, perfetto, plot, text};
use crate::cli::GlobalOpts;
use crate::output::trace::{TraceFormat, install_global};
use crate::stack::Stack;
use crate::workload::RandomWorkload;
use crate::{cli, test_vmalloc};
use mmlab_engine::Machine;
use mmlab_pcp::PageAllocator;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;

/// `mmlab trace`.
#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub what: TraceCmd,
}

/// What to trace.
#[derive(clap::Subcommand, Debug)]
pub enum TraceCmd {
    /// The page allocator's kmem events (mm_page_alloc, mm_page_free, ...)
    /// of a seeded random workload, as ftrace text or JSON lines.
    Pages {
        /// Operations (allocations plus frees), at most 10^9.
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = cli::parse_ops)]
        ops: u64,
        /// Output: ftrace text or JSON lines.
        #[arg(long, value_parser = cli::trace_format(), default_value = "ftrace")]
        format: TraceFormat,
    },
    /// Every layer's events of the seeded random page workload.
    Random {
        /// Operations (allocations plus frees), at most 10^9.
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = cli::parse_ops)]
        ops: u64,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Every layer's events of lib/test_vmalloc.c (parameters as for
    /// `mmlab test-vmalloc`).
    #[command(name = "test-vmalloc")]
    TestVmalloc {
        /// Module parameters (KEY=VALUE), as `mmlab test-vmalloc` takes them.
        #[arg(value_name = "KEY=VALUE")]
        params: Vec<String>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Every layer's events of hugetlb sysfs writes (as `mmlab hugetlb`
    /// takes them: `2M/nr_hugepages=64 2M/nr_hugepages=0`); pools that
    /// `--set hugepages=` grows at boot are not traced.
    Hugetlb {
        /// The writes, in order (FILE=VALUE).
        #[arg(value_name = "FILE=VALUE", required = true)]
        writes: Vec<String>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Every layer's events of a replay file (as `mmlab fuzz` writes and
    /// `mmlab replay` runs); its op results go to stderr.
    Replay {
        /// The replay file.
        file: PathBuf,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Replay a real kernel's kmem trace (ftrace text or `trace-cmd report`)
    /// on the same CPUs, pages matched by pfn, and print where mmlab's
    /// refill, drain and zone-lock decisions differ from the kernel's.
    Kernel(kernel::KernelArgs),
}

/// Output options of the workload commands.
#[derive(clap::Args, Debug, Clone)]
pub struct OutArgs {
    /// Events to trace, as set_event takes them (repeatable, or
    /// comma-separated): kmem:mm_page_alloc, vmalloc:*, !kmem:mm_page_free,
    /// all. Default: kmem, vmalloc, rcu, mmlab_rcu, mmlab_tlb, mmlab_hvo, mmlab_hugetlb,
    /// mmlab_func (plus mmlab_state for a timeline or plot); barriers
    /// (mmlab_barrier) only when named.
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// ftrace text, JSON lines, or a Perfetto/Chrome trace-event timeline.
    #[arg(long, value_enum, default_value = "ftrace")]
    pub format: OutFormat,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write a Perfetto timeline to FILE.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    /// Also draw FILE-buddyinfo.svg (free blocks per order over time) and
    /// FILE-pcp.svg (pcp count and high per CPU over time).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Print the number of events and events per second (measured host
    /// time) to stderr.
    #[arg(long)]
    pub stats: bool,
}

/// `--format` of the workload commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutFormat {
    /// Lines as /sys/kernel/tracing/trace shows them.
    Ftrace,
    /// One JSON object per line.
    Json,
    /// A Chrome trace-event JSON file for ui.perfetto.dev.
    Perfetto,
}

/// Runs `mmlab trace`; returns whether the run found a failure (a failed
/// test case, a violation, or a replay stopped on bad input).
pub fn run(g: &GlobalOpts, a: &TraceArgs) -> Result<bool, String> {
    match &a.what {
        &TraceCmd::Pages { ops, format } => pages(g, ops, format),
        TraceCmd::Random { ops, out } => traced(out, |start| {
            let c = configs(g, 2)?;
            let stack = Stack::boot(&c)?;
            let pa = stack.allocator()?;
            start()?;
            random(stack.machine(), &pa, *ops, g.seed())?;
            Ok(false)
        }),
        TraceCmd::TestVmalloc { params, out } => {
            let (p, nr_cpus) = test_vmalloc::resolve(params, None, g.cpus)?;
            traced(out, |start| {
                let mut c = configs(g, nr_cpus)?;
                c.machine.nr_cpus = nr_cpus;
                let stack = Stack::boot(&c)?;
                let pa = stack.allocator()?;
                let vm = stack.vmalloc(&pa);
                start()?;
                let report = test_vmalloc::run(stack.machine(), &pa, &vm, &p, g.seed())?;
                Ok(report.any_failed())
            })
        }
        TraceCmd::Hugetlb { writes, out } => {
            let c = configs(g, 2)?;
            let writes =
                crate::hugetlb::parse_writes(writes, c.hugetlb.default_hugepagesz).map_err(|e| e.to_string())?;
            traced(out, |start| {
                let stack = Stack::boot(&c)?;
                let pa = stack.allocator()?;
                let (mut ht, _) = stack.hugetlb(&pa)?;
                start()?;
                let done = crate::hugetlb::run_writes(stack.machine(), &mut ht, &writes)?;
                Ok(done.iter().any(|w| w.error.is_some()))
            })
        }
        TraceCmd::Replay { file, out } => {
            if g.machine_given() || g.seed.is_some() {
                return Err("trace replay takes the machine, seed and settings from the file; --set, --cpus, --mem \
                            and --seed do not apply"
                    .into());
            }
            // The whole file is checked before the output is opened.
            let r = crate::fuzz::cli::load_replay(file)?;
            // The replay boots its own machine: its boot is traced too.
            traced(out, |start| {
                start()?;
                crate::fuzz::cli::run_replay(&r, io::stderr())
            })
        }
        TraceCmd::Kernel(k) => kernel::run(g, k),
    }
}

/// The seeded random page workload over every CPU (its pages stay allocated).
fn random(m: &Machine, pa: &PageAllocator<'_>, ops: u64, seed: u64) -> Result<(), String> {
    let cpus = m.all_cpus().map_err(|e| e.to_string())?;
    RandomWorkload::new(ops, seed, pa.managed_pages() / 2).run(pa, &cpus, |_| {});
    Ok(())
}

/// `trace pages`: exactly what it always printed.
fn pages(g: &GlobalOpts, ops: u64, format: TraceFormat) -> Result<bool, String> {
    let c = configs(g, 2)?;
    let stack = Stack::boot(&c)?;
    let pa = stack.allocator()?;
    let sink = install_global(format, Box::new(BufWriter::new(io::stdout())))
        .map_err(|e| format!("cannot install the trace layer: {e}"))?;
    random(stack.machine(), &pa, ops, g.seed())?;
    match sink.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(false),
    }
}

/// A text output shared between the sink and the caller that flushes it.
type SharedOut = Arc<Mutex<Box<dyn Write + Send>>>;

/// Writes each event as a line, and/or keeps it for a timeline or plot.
struct CliSink {
    writer: Option<(OutFormat, SharedOut)>,
    keep: Option<Collector>,
    count: Arc<AtomicU64>,
}

impl Sink for CliSink {
    fn event(&self, ev: TraceEvent) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some((f, w)) = &self.writer {
            let line = if *f == OutFormat::Json { text::json(&ev) } else { text::ftrace(&ev) };
            // Errors are dropped: tracing must not change the run.
            let _ = lock(w).write_all(line.as_bytes());
        }
        if let Some(c) = &self.keep {
            c.event(ev);
        }
    }
}

/// Where text goes: `-o FILE` or stdout.
fn open_output(path: Option<&PathBuf>) -> Result<Box<dyn Write + Send>, String> {
    Ok(match path {
        Some(p) => Box::new(BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("--output: cannot write {}: {e}", p.display()))?,
        )),
        None => Box::new(BufWriter::new(io::stdout())),
    })
}

/// Run `work` with the tracing `out` asks for installed process-wide from
/// the moment `work` calls its argument (after booting: boot is not
/// traced), then write the timeline and plots.
fn traced(
    out: &OutArgs,
    work: impl FnOnce(&mut dyn FnMut() -> Result<(), String>) -> Result<bool, String>,
) -> Result<bool, String> {
    for p in [&out.perfetto, &out.output].into_iter().flatten() {
        cli::check_writable("output", p)?;
    }
    if let Some(p) = &out.plot {
        cli::check_dir_writable("--plot", p)?;
    }
    let timeline = out.format == OutFormat::Perfetto || out.perfetto.is_some() || out.plot.is_some();
    let base =
        if timeline { EventFilter::default_set().with_system("mmlab_state") } else { EventFilter::default_set() };
    let filter = EventFilter::parse_from(base, &out.events).map_err(|e| format!("--event: {e}"))?;
    let writer = match out.format {
        OutFormat::Perfetto => None,
        f => Some((f, Arc::new(Mutex::new(open_output(out.output.as_ref())?)))),
    };
    let text_out = writer.as_ref().map(|(_, w)| w.clone());
    let keep = timeline.then(Collector::new);
    let count = Arc::new(AtomicU64::new(0));
    let mut sink = Some(CliSink { writer, keep: keep.clone(), count: count.clone() });
    let mut t0 = None;
    let failed = work(&mut || {
        let Some(sink) = sink.take() else { return Ok(()) };
        let subscriber = Registry::default().with(EventLayer::new(sink).filtered(filter.clone()));
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|e| format!("cannot install the trace layer: {e}"))?;
        t0 = Some(Instant::now());
        Ok(())
    })?;
    let secs = t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
    // The global subscriber lives on: flush what it wrote.
    if let Some(w) = text_out
        && let Err(e) = lock(&w).flush()
        && e.kind() != io::ErrorKind::BrokenPipe
    {
        return Err(format!("writing output: {e}"));
    }
    let n = count.load(Ordering::Relaxed);
    if out.stats {
        eprintln!(
            "mmlab trace: {n} events in {secs:.3} s of host time ({:.0} events/s, tracing and workload together)",
            n as f64 / secs.max(1e-9)
        );
    }
    if let Some(c) = keep {
        let events = c.take();
        let title = "mmlab trace";
        if out.format == OutFormat::Perfetto || out.perfetto.is_some() {
            let json = perfetto::to_json(&perfetto::build(&events, title));
            match (&out.perfetto, out.format) {
                (Some(p), _) => std::fs::write(p, &json).map_err(|e| format!("--perfetto {}: {e}", p.display()))?,
                (None, _) => write_to(out.output.as_ref(), &json)?,
            }
            if out.perfetto.is_some() && out.format == OutFormat::Perfetto {
                write_to(out.output.as_ref(), &json)?;
            }
        }
        if let Some(p) = &out.plot {
            for (path, svg) in plot::plots(&events, p) {
                std::fs::write(&path, svg).map_err(|e| format!("--plot {}: {e}", path.display()))?;
            }
        }
    }
    Ok(failed)
}

fn write_to(path: Option<&PathBuf>, s: &str) -> Result<(), String> {
    let mut w = open_output(path)?;
    match w.write_all(s.as_bytes()).and_then(|()| w.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(()),
    }
}
