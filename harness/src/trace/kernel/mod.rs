//! `mmlab trace kernel FILE`: replay a real kernel's kmem trace and diff
//! the allocator's decisions.
//!
//! The trace is the kernel's ftrace text or `trace-cmd report` output of
//! `kmem:mm_page_alloc`, `mm_page_free`, `mm_page_free_batched`,
//! `mm_page_alloc_zone_locked` and `mm_page_pcpu_drain` ([`parse`]). mmlab
//! boots a machine to match the traced one, replays the allocations and
//! frees on the same CPUs ([`replay`]), and prints where the kernel
//! refilled a pcp list, drained one or took the zone lock and mmlab did
//! not, and the reverse, with a summary: decisions equal in percent, and
//! the first divergence with the trace lines around it.
//!
//! # The traced machine
//!
//! `# mmlab: key=value ...` comment lines in the trace describe the traced
//! machine (`scripts/capture-kernel-trace.sh` writes them): `kernel`,
//! `cpus`, `zone`, `managed`, `batch`, `high_min`, `high_max`,
//! `percpu_pagelist_high_fraction`, `max_pfn`, `pcp_count_cpuN`, and for a
//! capture of mmlab's own machine (scripts/arm64-peer/boot-kmem-trace.py)
//! `mem`, `boot_trace=1` (from boot, [`phases`]). mmlab boots, through the
//! one stack ([`crate::stack::Stack`]), the traced machine: `cpus=` and
//! `mem=` (so its zones are the kernel's, from the zone layout); `--cpus`
//! and `--mem` may be given only if they agree; without `cpus=` they are
//! needed (an error says so; the CPUs are never guessed from the events).
//! A trace without `mem=` (a host's, whose machine mmlab does not
//! emulate) boots 2G: the pcp sizes depend on the zone only through
//! `batch`, which is 63 from about 1 GiB of zone on, and through `high`,
//! which a set `percpu_pagelist_high_fraction` makes small and equal on
//! both. Then the traced `percpu_pagelist_high_fraction`, and mmlab's
//! default pcp rules (7.2) unless `--set pcp.rules=6.12` is given. The
//! whole file is read and checked before anything boots ([`check`]): every
//! header word a known key with a valid value, the values consistent, at
//! least one event, the events in time order. The header is checked
//! against the events ([`TraceError`]): an event on a CPU the header does
//! not have, more pages live at once than `managed=`, and for a capture of
//! mmlab's machine a managed count mmlab's boot does not reproduce, are
//! errors; so is a replay that skipped every operation. Each error names
//! the file, and the line where one is at fault. The report prints both machines' pcp sizes side
//! by side, and where each kernel refill and drain landed
//! ([`position`]).

pub mod check;
pub mod error;
pub mod parse;
pub mod phases;
pub mod position;
pub mod replay;

use super::configs;
use crate::cli::GlobalOpts;
use error::TraceError;
use phases::BootPhases;
use position::Positions;
use replay::{MidRun, OnError, OpRecord, Options, ReplayOutcome};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `mmlab trace kernel`.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelArgs {
    /// The trace: ftrace text or `trace-cmd report` output, read and
    /// checked whole (header, events, their order) before the machine boots.
    pub file: PathBuf,
    /// A line or event the replay cannot take (malformed, unknown event, a
    /// pfn outside the machine, a free of a page never allocated with
    /// --mid-run skip): skip it with a counted warning, or stop with its
    /// line number (a line that is not an event: before the boot). An
    /// event on a CPU the header does not have, a file without events and
    /// a replay that skipped every operation are always errors.
    #[arg(long, value_enum, default_value = "skip")]
    pub on_error: OnError,
    /// Frees of pages the trace never allocated (it started mid-run):
    /// allocate them in mmlab before the replay (adopt), or skip them. In a
    /// from-boot capture the frees of deferred init and of the CMA area are
    /// the boot's own and neither: they are counted, not replayed.
    #[arg(long, value_enum, default_value = "adopt")]
    pub mid_run: MidRun,
    /// Start with empty pcp lists instead of filling them as the trace
    /// implies they were when it started (see the replay module).
    #[arg(long)]
    pub cold_start: bool,
    /// Divergences to list (the summary counts all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub show: usize,
    /// Trace lines of context around the first divergence.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub context: usize,
    /// One JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// The traced machine, from the trace's `# mmlab:` lines.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TracedMachine(pub BTreeMap<String, String>);

impl TracedMachine {
    /// Read the `# mmlab:` lines of `text` as they are, unchecked
    /// ([`check::read`] checks them, and [`analyse`] reads them so).
    pub fn from_text(text: &str) -> Self {
        let mut m = BTreeMap::new();
        for l in text.lines().take_while(|l| l.trim_start().starts_with('#') || l.trim().is_empty()) {
            if let Some(kv) = parse::meta_line(l) {
                m.extend(kv);
            }
        }
        TracedMachine(m)
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }
    fn num(&self, k: &str) -> Option<u64> {
        check::header_number(self.get(k)?)
    }
}

/// The configuration mmlab booted.
#[derive(Clone, Debug, Serialize)]
pub struct Booted {
    pub mem: String,
    /// The populated zones and their managed pages, lowest first.
    pub zones: Vec<(String, u64)>,
    pub cpus: usize,
    pub sets: Vec<String>,
    pub pcp_rules: String,
    pub managed: u64,
    pub batch: i32,
    pub high_min: i32,
    pub high_max: i32,
}

/// Counts of one decision class.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ClassCount {
    pub kernel: u64,
    pub mmlab: u64,
    pub both: u64,
}

/// Kernel decisions of one class matched by mmlab decisions of the same
/// class on the same CPU within [`position::LAG_WINDOW`] operations (either way):
/// the same decision, made a little earlier or later because the pcp
/// lists' contents at the start of the trace were not known exactly.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LagMatch {
    /// Kernel decisions of the class.
    pub kernel: u64,
    /// Of those, matched within the window.
    pub matched: u64,
    /// Mean |lag| of the matched ones, in operations of that CPU.
    pub mean_lag: f64,
}

use position::LAG_WINDOW;

/// Greedy in-order matching of the kernel's and mmlab's `class` decisions.
fn lag_match(ops: &[OpRecord], class: &str) -> LagMatch {
    let mut m = LagMatch::default();
    let mut lag_sum = 0usize;
    let cpus: std::collections::BTreeSet<usize> = ops.iter().map(|o| o.cpu).collect();
    for cpu in cpus {
        let mine: Vec<&OpRecord> = ops.iter().filter(|o| o.cpu == cpu).collect();
        let k: Vec<usize> = (0..mine.len()).filter(|&i| mine[i].kernel.class(mine[i].alloc) == class).collect();
        let mut mm: std::collections::VecDeque<usize> =
            (0..mine.len()).filter(|&i| mine[i].mmlab.class(mine[i].alloc) == class).collect();
        m.kernel += k.len() as u64;
        for i in k {
            while mm.front().is_some_and(|&j| j + LAG_WINDOW < i) {
                mm.pop_front();
            }
            if let Some(&j) = mm.front()
                && j <= i + LAG_WINDOW
            {
                mm.pop_front();
                m.matched += 1;
                lag_sum += i.abs_diff(j);
            }
        }
    }
    m.mean_lag = if m.matched == 0 { 0.0 } else { lag_sum as f64 / m.matched as f64 };
    m
}

/// What `trace kernel` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub file: String,
    pub traced: TracedMachine,
    pub booted: Booted,
    pub outcome: ReplayOutcome,
    /// Per class ("alloc pcp", "alloc refill", ..., "free drain").
    pub classes: BTreeMap<String, ClassCount>,
    pub equal: u64,
    /// Same class and same size (blocks refilled, pages drained).
    pub equal_sizes: u64,
    pub first_divergence: Option<usize>,
    /// Refills, drains and zone-lock allocations matched within the window.
    pub lag_matches: BTreeMap<String, LagMatch>,
    /// A from-boot capture's phases.
    pub phases: Option<BootPhases>,
    /// Refills and drains at exactly the kernel's operation ([`position`]).
    pub positions: BTreeMap<String, Positions>,
}

impl Report {
    /// Decisions equal, in percent of the operations (100 with none).
    pub fn equal_percent(&self) -> f64 {
        if self.outcome.ops.is_empty() { 100.0 } else { 100.0 * self.equal as f64 / self.outcome.ops.len() as f64 }
    }
}

/// The most pages allocated in the trace and not yet freed, and the line
/// where that was first reached.
fn peak_live(evs: &[parse::KEvent]) -> (u64, usize) {
    let mut live: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    let (mut now, mut peak, mut at) = (0u64, 0u64, 0usize);
    for e in evs {
        match e.kind {
            parse::KEventKind::Alloc { order, .. }
                if !e.null_page && order < 32 && live.insert(e.pfn, order).is_none() =>
            {
                now += 1 << order;
            }
            parse::KEventKind::Free { .. } => {
                if let Some(o) = live.remove(&e.pfn) {
                    now -= 1 << o;
                }
            }
            _ => {}
        }
        if now > peak {
            (peak, at) = (now, e.line);
        }
    }
    (peak, at)
}

/// Boot, replay, compare. Stops (Err) on a header that disagrees with the
/// events or the command line, and on bad input with `--on-error stop`.
pub fn analyse(g: &GlobalOpts, a: &KernelArgs, text: &str) -> Result<Report, TraceError> {
    // The whole file first: nothing boots for a trace that is refused.
    let checked = check::read(text)?;
    let traced = TracedMachine(checked.header.clone());
    let evs = &checked.events;
    let traced_cpus = checked.num("cpus");
    let cpus = match (g.cpus, traced_cpus) {
        (Some(c), Some(t)) if c as u64 != t => {
            return Err(TraceError::MachineOption {
                option: "--cpus",
                given: c.to_string(),
                traced: format!("cpus={t}"),
            });
        }
        (Some(c), _) => c,
        (None, Some(t)) => usize::try_from(t).unwrap_or(usize::MAX),
        (None, None) => return Err(TraceError::NoCpuCount),
    };
    let file = a.file.display().to_string();
    let replay_error = |error| TraceError::Replay { file: file.clone(), error };
    check::check_cpus(evs, cpus).map_err(replay_error)?;
    if a.on_error == OnError::Stop {
        check::check_lines(&checked.bad).map_err(replay_error)?;
    }
    let mem = match (&g.mem, traced.get("mem")) {
        (Some(m), Some(t)) if m != t => {
            return Err(TraceError::MachineOption { option: "--mem", given: m.clone(), traced: format!("mem={t}") });
        }
        (Some(m), _) => m.clone(),
        (None, Some(t)) => t.to_owned(),
        (None, None) => "2G".to_owned(),
    };
    if let Some(managed) = checked.num("managed") {
        let (live, line) = peak_live(evs);
        if live > managed {
            return Err(TraceError::ManagedTooSmall { line, live, managed });
        }
    }
    let boot_trace = traced.get("boot_trace") == Some("1");
    let phases = if boot_trace { Some(phases::recognise(evs, checked.num("batch"))) } else { None };
    let mut sets = Vec::new();
    if let Some(f) = traced.get("percpu_pagelist_high_fraction")
        && !g.set.iter().any(|s| s.starts_with("percpu_pagelist_high_fraction="))
    {
        sets.push(format!("percpu_pagelist_high_fraction={f}"));
    }
    sets.extend(g.set.iter().cloned());
    let g2 = GlobalOpts {
        mem: Some(mem.clone()),
        cpus: Some(cpus),
        set: sets.clone(),
        seed: g.seed,
        ..GlobalOpts::default()
    };
    let c = configs(&g2, cpus).map_err(TraceError::Boot)?;
    let pcp_rules = c.allocator.rules.to_string();
    let stack = crate::stack::Stack::boot(&c).map_err(|e| TraceError::Boot(e.to_string()))?;
    let m = stack.machine();
    let pa = stack.allocator().map_err(|e| TraceError::Boot(e.to_string()))?;
    let ps = pa.pageset(0).unwrap_or_default();
    let booted = Booted {
        mem,
        zones: pa.populated_zones().map(|z| (z.zone_type().name().to_owned(), z.managed_pages())).collect(),
        cpus,
        sets,
        pcp_rules,
        managed: pa.managed_pages(),
        batch: ps.batch,
        high_min: ps.high_min,
        high_max: ps.high_max,
    };
    if traced.get("mem").is_some()
        && let Some(managed) = checked.num("managed")
        && managed != booted.managed
    {
        return Err(TraceError::ManagedDiffers { traced: managed, mmlab: booted.managed });
    }
    let hw = m.all_cpus().map_err(|e| TraceError::Boot(e.to_string()))?;
    let start_counts: Vec<Option<u64>> = (0..cpus).map(|c| traced.num(&format!("pcp_count_cpu{c}"))).collect();
    let opts = Options { on_error: a.on_error, mid_run: a.mid_run, warm_start: !a.cold_start };
    let outcome = replay::replay(text, &pa, &hw, traced.num("max_pfn"), &start_counts, opts, phases.as_ref())
        .map_err(replay_error)?;
    if outcome.ops.is_empty() {
        let w: Vec<String> = outcome.warnings.counts.iter().map(|(k, n)| format!("{n} x {k}")).collect();
        return Err(TraceError::NothingReplayed { events: outcome.events, warnings: w.join(", ") });
    }
    let mut classes: BTreeMap<String, ClassCount> = BTreeMap::new();
    let (mut equal, mut equal_sizes, mut first) = (0, 0, None);
    for (i, op) in outcome.ops.iter().enumerate() {
        let kind = if op.alloc { "alloc" } else { "free" };
        let (k, mm) = (op.kernel.class(op.alloc), op.mmlab.class(op.alloc));
        classes.entry(format!("{kind} {k}")).or_default().kernel += 1;
        classes.entry(format!("{kind} {mm}")).or_default().mmlab += 1;
        if op.equal() {
            equal += 1;
            classes.entry(format!("{kind} {k}")).or_default().both += 1;
            equal_sizes += u64::from(op.kernel == op.mmlab);
        } else if first.is_none() {
            first = Some(i);
        }
    }
    Ok(Report {
        file: a.file.display().to_string(),
        traced,
        booted,
        classes,
        equal,
        equal_sizes,
        first_divergence: first,
        lag_matches: ["refill", "zone lock", "drain"]
            .iter()
            .map(|c| (c.to_string(), lag_match(&outcome.ops, c)))
            .filter(|(_, m)| m.kernel > 0)
            .collect(),
        positions: ["refill", "drain"]
            .iter()
            .map(|c| (c.to_string(), position::positions(&outcome.ops, c, phases.as_ref())))
            .collect(),
        phases,
        outcome,
    })
}

fn op_line(op: &OpRecord) -> String {
    format!(
        "line {:>6}  cpu{} {:<5} order={} pfn={:#x}: kernel {}, mmlab {}",
        op.line,
        op.cpu,
        if op.alloc { "alloc" } else { "free" },
        op.order,
        op.pfn,
        op.kernel.describe(op.alloc),
        op.mmlab.describe(op.alloc)
    )
}

/// The text report.
pub fn render(r: &Report, text: &str, a: &KernelArgs) -> String {
    let mut s = String::new();
    let t = &r.traced;
    let v = |k: &str| t.get(k).unwrap_or("?").to_owned();
    let _ = writeln!(s, "mmlab trace kernel: {}", r.file);
    if t.0.is_empty() {
        let _ = writeln!(s, "traced machine: not described (no `# mmlab:` lines)");
    } else {
        let _ = writeln!(
            s,
            "traced machine: Linux {}, {} CPUs, zone {}: managed {} pages, pcp batch {} high_min {} high_max {}, \
             vm.percpu_pagelist_high_fraction={}",
            v("kernel"),
            v("cpus"),
            v("zone"),
            v("managed"),
            v("batch"),
            v("high_min"),
            v("high_max"),
            v("percpu_pagelist_high_fraction")
        );
    }
    let b = &r.booted;
    let _ = writeln!(
        s,
        "mmlab booted:   mem={} cpus={} pcp.rules={}{}{}: managed {} pages, pcp batch {} high_min {} high_max {}",
        b.mem,
        b.cpus,
        b.pcp_rules,
        if b.sets.is_empty() { "" } else { " " },
        b.sets.join(" "),
        b.managed,
        b.batch,
        b.high_min,
        b.high_max
    );
    let zones: Vec<String> = b.zones.iter().map(|(z, n)| format!("{z} {n}")).collect();
    let _ = writeln!(s, "mmlab zones:    {} (managed pages)", zones.join(", "));
    let o = &r.outcome;
    let allocs = o.ops.iter().filter(|op| op.alloc).count();
    let _ = writeln!(
        s,
        "replayed:       {} operations ({} allocations, {} frees) from {} events on {} lines; {} pages adopted \
         (freed by the trace, allocated before it); {} pages on the pcp lists at the start (inferred); {} failed \
         kernel allocations not replayed",
        o.ops.len(),
        allocs,
        o.ops.len() - allocs,
        o.events,
        o.lines,
        o.adopted_pages,
        o.warm_start_pages,
        o.kernel_failed_allocs
    );
    if let Some(p) = &r.phases {
        let _ = writeln!(s, "from boot:      phases recognised (trace lines):");
        for seg in &p.segments {
            let _ = writeln!(
                s,
                "  {:<15} lines {:>6}..{:<6} {:>6} events",
                seg.phase.name(),
                seg.first_line,
                seg.last_line,
                seg.events
            );
        }
        let freed: Vec<String> = o.boot_free_pages.iter().map(|(k, n)| format!("{n} pages of {k}")).collect();
        let _ = writeln!(
            s,
            "boot's frees:   not replayed (mmlab's boot freed them): {}; the kernel drained {} pages after them",
            if freed.is_empty() { "none".to_owned() } else { freed.join(", ") },
            o.boot_free_drained_pages
        );
        if let Some((line, pages)) = o.resync {
            let _ = writeln!(
                s,
                "resync:         at line {line} (the kernel's pagesets become the end of boot's, mmlab's): mmlab's pcp \
                 lists emptied and filled with {pages} pages (inferred)"
            );
        }
    }
    for (kind, n) in &o.warnings.counts {
        let _ = writeln!(s, "warning:        {n} x {kind}");
    }
    for (line, kind, msg) in &o.warnings.first {
        let _ = writeln!(s, "  line {line}: {kind}: {msg}");
    }
    let _ = writeln!(s, "\n{:<18} {:>8} {:>8} {:>8}", "decision", "kernel", "mmlab", "both");
    for (class, c) in &r.classes {
        let _ = writeln!(s, "{class:<18} {:>8} {:>8} {:>8}", c.kernel, c.mmlab, c.both);
    }
    let n = o.ops.len();
    let _ = writeln!(
        s,
        "\ndecisions equal: {} of {} ({:.1} %); with equal sizes (blocks refilled, pages drained): {} ({:.1} %)",
        r.equal,
        n,
        r.equal_percent(),
        r.equal_sizes,
        if n == 0 { 100.0 } else { 100.0 * r.equal_sizes as f64 / n as f64 }
    );
    for (class, m) in &r.lag_matches {
        let _ = writeln!(
            s,
            "kernel {class}s matched by mmlab within {LAG_WINDOW} operations: {} of {} ({:.1} %), mean lag {:.1} \
             operations",
            m.matched,
            m.kernel,
            100.0 * m.matched as f64 / m.kernel as f64,
            m.mean_lag
        );
    }
    for (class, p) in &r.positions {
        if p.kernel == 0 {
            continue;
        }
        let misses: Vec<String> = p.misses.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            s,
            "kernel {class}s at exactly the same operation in mmlab: {} of {} ({} with the same size); mmlab made {}; \
             missed: {}",
            p.exact,
            p.kernel,
            p.exact_size,
            p.mmlab,
            if misses.is_empty() { "none".to_owned() } else { misses.join(", ") }
        );
        if !p.by_phase.is_empty() {
            let by: Vec<String> = p.by_phase.iter().map(|(k, (n, exact))| format!("{k} {exact} of {n}")).collect();
            let _ = writeln!(s, "  by phase, exact of the kernel's: {}", by.join(", "));
        }
    }
    if r.positions.values().any(|p| !p.misses.is_empty()) {
        let _ = writeln!(
            s,
            "misses: earlier = mmlab made it at an earlier operation of the CPU (within {LAG_WINDOW}), later = at a \
             later one, absent = neither"
        );
        if r.phases.is_some() {
            let _ = writeln!(
                s,
                "        before the resync the kernel's pagesets are not mmlab's: the boot pageset (batch 1, high 0) \
                 in start_kernel until setup_per_cpu_pageset(), then pagesets sized from the memory before deferred \
                 init; after it, the lists' contents and pcp->alloc_factor are inferred, not traced"
            );
        }
    }
    match r.first_divergence {
        None => {
            let _ = writeln!(s, "no divergence");
        }
        Some(i) => {
            let op = &o.ops[i];
            let _ = writeln!(s, "first divergence: {}", op_line(op));
            let lines: Vec<&str> = text.lines().collect();
            let lo = op.line.saturating_sub(a.context + 1);
            let hi = (op.line + a.context).min(lines.len());
            for (j, l) in lines.iter().enumerate().take(hi).skip(lo) {
                let _ = writeln!(s, "  {} {:>6}: {}", if j + 1 == op.line { '>' } else { ' ' }, j + 1, l.trim_end());
            }
            let _ = writeln!(s, "divergences (first {}):", a.show);
            for op in o.ops.iter().filter(|op| !op.equal()).take(a.show) {
                let _ = writeln!(s, "  {}", op_line(op));
            }
        }
    }
    s
}

/// Runs `mmlab trace kernel`; returns Ok(false) (a diff is not a failure).
pub fn run(g: &GlobalOpts, a: &KernelArgs) -> Result<bool, String> {
    let text = std::fs::read(&a.file).map_err(|e| format!("reading {}: {e}", a.file.display()))?;
    let text = String::from_utf8_lossy(&text);
    // Every error names the file (a replay stop names it already).
    let r = analyse(g, a, &text).map_err(|e| match e {
        TraceError::Replay { .. } => e.to_string(),
        e => format!("{}: {e}", a.file.display()),
    })?;
    let out = if a.json { crate::output::json::to_line(&r) } else { render(&r, &text, a) };
    let mut so = std::io::stdout().lock();
    use std::io::Write;
    match so.write_all(out.as_bytes()).and_then(|()| so.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(false),
    }
}
