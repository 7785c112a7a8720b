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
//! `percpu_pagelist_high_fraction`, `max_pfn`, `pcp_count_cpuN`. mmlab boots with those CPUs
//! (else one more than the highest CPU in the trace), `--mem` if given
//! (else 2G: the pcp sizes depend on the zone only through `batch`, which
//! is 63 from about 1 GiB of zone on, and through `high`, which a set
//! `percpu_pagelist_high_fraction` makes small and equal on both), the
//! traced `percpu_pagelist_high_fraction`, and mmlab's default pcp rules
//! (7.2) unless `--set pcp.rules=6.12` is given. The report prints both
//! machines' pcp sizes side by side.

pub mod parse;
pub mod replay;

use super::configs;
use crate::cli::GlobalOpts;
use replay::{MidRun, OnError, OpRecord, Options, ReplayOutcome};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `mmlab trace kernel`.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelArgs {
    /// The trace: ftrace text or `trace-cmd report` output.
    pub file: PathBuf,
    /// A line or event the replay cannot take (malformed, unknown event, a
    /// pfn or CPU outside the machine, a free of a page never allocated
    /// with --mid-run skip): skip it with a counted warning, or stop with
    /// its line number.
    #[arg(long, value_enum, default_value = "skip")]
    pub on_error: OnError,
    /// Frees of pages the trace never allocated (it started mid-run):
    /// allocate them in mmlab before the replay (adopt), or skip them.
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
    /// Read the `# mmlab:` lines of `text`.
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
        let v = self.get(k)?;
        match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    }
}

/// The configuration mmlab booted.
#[derive(Clone, Debug, Serialize)]
pub struct Booted {
    pub mem: String,
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
/// class on the same CPU within [`LAG_WINDOW`] operations (either way):
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

/// The window of [`LagMatch`], in operations of one CPU: two pcp batches.
pub const LAG_WINDOW: usize = 128;

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
}

impl Report {
    /// Decisions equal, in percent of the operations (100 with none).
    pub fn equal_percent(&self) -> f64 {
        if self.outcome.ops.is_empty() { 100.0 } else { 100.0 * self.equal as f64 / self.outcome.ops.len() as f64 }
    }
}

/// Boot, replay, compare. Stops (Err) only on bad input with `--on-error stop`.
pub fn analyse(g: &GlobalOpts, a: &KernelArgs, text: &str) -> Result<Report, String> {
    let traced = TracedMachine::from_text(text);
    let max_cpu = text.lines().filter_map(|l| parse::parse_line(0, l).ok().flatten()).map(|e| e.cpu).max();
    let cpus = g.cpus.or(traced.num("cpus").map(|c| c as usize)).unwrap_or(max_cpu.map_or(1, |c| c + 1));
    let cpus = cpus.clamp(1, mmlab_engine::machine::NR_CPUS);
    let mem = g.mem.clone().unwrap_or_else(|| "2G".to_owned());
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
    let c = configs(&g2, cpus)?;
    let pcp_rules = c.allocator.rules.to_string();
    let stack = crate::stack::Stack::boot(&c)?;
    let m = stack.machine();
    let pa = stack.allocator()?;
    let ps = pa.pageset(0).unwrap_or_default();
    let booted = Booted {
        mem,
        cpus,
        sets,
        pcp_rules,
        managed: pa.managed_pages(),
        batch: ps.batch,
        high_min: ps.high_min,
        high_max: ps.high_max,
    };
    let hw = m.all_cpus().map_err(|e| e.to_string())?;
    let start_counts: Vec<Option<u64>> = (0..cpus).map(|c| traced.num(&format!("pcp_count_cpu{c}"))).collect();
    let opts = Options { on_error: a.on_error, mid_run: a.mid_run, warm_start: !a.cold_start };
    let outcome = replay::replay(text, &pa, &hw, traced.num("max_pfn"), &start_counts, opts)
        .map_err(|e| format!("{}: {e}", a.file.display()))?;
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
    let r = analyse(g, a, &text)?;
    let out = if a.json { crate::output::json::to_line(&r) } else { render(&r, &text, a) };
    let mut so = std::io::stdout().lock();
    use std::io::Write;
    match so.write_all(out.as_bytes()).and_then(|()| so.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(false),
    }
}
