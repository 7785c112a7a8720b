//! The `mmlab fuzz` and `mmlab replay` commands: argument parsing, the
//! seed loop with progress and summary, JSON lines, the threaded mode,
//! and replaying a file.
//!
//! # The seed loop
//!
//! Seeds are run one after the other (`--seeds A..B`, or from `--seed`
//! upwards until `--time` runs out); each seed is an independent sequence
//! of `--ops` operations on a freshly booted machine. Progress goes to
//! stderr once a second. A violation is shrunk (unless `--no-shrink`),
//! written as `fuzz-seed<S>-<kind>.replay` in `--out-dir`, and stops the
//! loop unless `--keep-going`. `--jsonl FILE` appends one JSON object per
//! seed, so shards run anywhere merge by concatenating their files.

use super::args::{self, SeedRange};
use super::exec::{Coverage, ExecOptions, Executor, Tally};
use super::generate::GenConfig;
use super::op::Op;
use super::oracle::Outcome;
use super::replay::{Replay, parse_fault_attr};
use super::run::{self, RunOutcome, Setup, ShrinkBudget};
use mmlab_vmalloc::percpu::PercpuAllocator;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `mmlab fuzz` (the limits are [`super::args`]'s).
#[derive(clap::Args, Debug, Clone)]
pub struct FuzzArgs {
    /// Operations per seed, 1..=10^9; without --time, --ops x seeds x
    /// --threads is at most 10^9.
    #[arg(long, value_name = "N", default_value_t = 100_000, allow_negative_numbers = true,
          value_parser = args::parse_fuzz_ops)]
    pub ops: u64,
    /// Run seeds from --seed upwards until this much time has passed
    /// (`90s`, `10m`, `1.5h`, `2d`, or seconds; more than 0, at most 7d);
    /// with --seeds, stop early. At least one seed is started.
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true, value_parser = args::parse_duration)]
    pub time: Option<Duration>,
    /// Run seeds A..B (B excluded; `A..=B` includes it), each an
    /// independent sequence of --ops operations (not with --seed).
    #[arg(long, value_name = "A..B", value_parser = args::parse_seeds)]
    pub seeds: Option<SeedRange>,
    /// Run every check (invariants, conservation) every K operations (0:
    /// only at the end).
    #[arg(long, value_name = "K", default_value_t = 10_000, allow_negative_numbers = true,
          value_parser = crate::cli::parse_count)]
    pub check_every: u64,
    /// Arm fail_page_alloc with the kernel's attribute names, e.g.
    /// `probability=10,interval=1,times=-1,space=0,min-order=0,ignore-gfp-wait=0`
    /// (unset ones keep the kernel's defaults; probability must be set);
    /// seeded from the run's seed.
    #[arg(long, value_name = "ATTRS", value_parser = args::parse_fail_page_alloc)]
    pub fail_page_alloc: Option<String>,
    /// Append one JSON line per seed (seed, revision, settings, ops,
    /// violations, coverage) to FILE.
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// Where replay files of violations are written: an existing
    /// directory, checked before the run [default: .].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Time limit of shrinking one violation, in seconds, at most 604800
    /// (7 days) [default: 60].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = args::parse_shrink_time)]
    pub shrink_time: Option<u64>,
    /// Write the unshrunk sequence.
    #[arg(long)]
    pub no_shrink: bool,
    /// Go on with the next seed after a violation.
    #[arg(long)]
    pub keep_going: bool,
    /// Host threads running their own seeded streams at once on one
    /// machine, each on its own CPU, 1..=--cpus (race hunting; NOT
    /// replayable: --out-dir, --no-shrink and --shrink-time do not apply).
    #[arg(long, value_name = "N", default_value_t = 1, allow_negative_numbers = true,
          value_parser = args::parse_threads)]
    pub threads: usize,
    /// Wrong calls mixed in per 64 operations, 0..=64 (0: none).
    #[arg(long, value_name = "N", default_value_t = 8, allow_negative_numbers = true,
          value_parser = args::parse_wrong)]
    pub wrong: u64,
    /// Leave out these wrong-call kinds (comma list): double_free,
    /// wrong_order, tail_page, bogus_pfn, order_too_large, vfree_inside,
    /// vfree_bogus, vfree_twice, vfree_after_kvfree_rcu, vfree_vmap, vunmap_vmalloc,
    /// vm_unmap_ram_twice, vm_unmap_ram_wrong_count, bad_sysctl, bad_size,
    /// size_overflow, unmap_range_partial (not with --wrong 0).
    #[arg(long, value_name = "LIST", value_parser = args::parse_exclude)]
    pub exclude: Option<String>,
    /// Pages the sequence keeps live at most [default: a third of RAM].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::cli::parse_count)]
    pub max_live_pages: Option<u64>,
}

/// Arguments of `mmlab replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The replay file.
    pub file: PathBuf,
    /// Print the kmem tracepoints (as `mmlab trace pages`) on stdout; the
    /// op results then go to stderr.
    #[arg(long)]
    pub trace: bool,
}

/// The settings part of a JSON line.
#[derive(Serialize, Debug)]
struct JsonSettings {
    mem: String,
    cpus: usize,
    set: Vec<String>,
    fail_page_alloc: Option<String>,
    check_every: u64,
    threads: usize,
    wrong_per_64: u64,
    exclude: Vec<String>,
}

/// One JSON line per seed.
#[derive(Serialize, Debug)]
struct JsonSeed {
    seed: u64,
    revision: &'static str,
    settings: JsonSettings,
    ops: u64,
    elapsed_s: f64,
    violations: Vec<String>,
    replay: Option<String>,
    coverage_ops: BTreeMap<String, u64>,
    coverage_outcomes: BTreeMap<String, u64>,
}

/// The global options, resolved with fuzz's defaults (64M, 4 CPUs).
#[derive(Debug, Clone)]
struct Resolved {
    mem: String,
    mem_bytes: u64,
    cpus: usize,
    sets: Vec<String>,
    seed: u64,
    /// The run record every JSON line carries.
    run: crate::provenance::RunRecord,
}

fn gen_config(g: &Resolved, a: &FuzzArgs) -> GenConfig {
    // --exclude was checked by its parser.
    let exclude: Vec<String> = a
        .exclude
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    GenConfig {
        nr_cpus: g.cpus,
        max_live_pages: a.max_live_pages.unwrap_or(g.mem_bytes / mmlab_engine::PAGE_SIZE / 3),
        wrong_per_64: a.wrong,
        exclude,
        hvo: false,
        reserved_pfn: super::generate::reserved_pfn(&g.mem),
    }
}

/// `mmlab fuzz`; returns whether a violation was found. Every option is
/// checked ([`check`]) before the first seed boots.
pub fn fuzz(opts: &crate::cli::GlobalOpts, a: &FuzzArgs) -> Result<bool, String> {
    let d = crate::cli::MachineDefaults::FUZZ;
    let c = opts.configs(d)?;
    let g = &Resolved {
        mem: opts.mem.clone().unwrap_or_else(|| d.mem.to_string()),
        mem_bytes: c.machine.mem_bytes,
        cpus: c.machine.nr_cpus,
        sets: opts.set.clone(),
        seed: opts.seed(),
        run: opts.record(&c),
    };
    let explicit_seed = opts.seed.filter(|_| opts.config.is_none());
    let plan = check(a, explicit_seed, g.seed, g.cpus)?;
    let mut gcfg = gen_config(g, a);
    let hvo = c.hugetlb.hvo;
    gcfg.hvo = hvo.hugetlb_optimize_vmemmap && hvo.arm64 != mmlab_vmemmap::Arm64Hvo::Off && a.threads <= 1;
    let deadline = a.time.map(|d| Instant::now() + d);
    let SeedRange { first, last } = plan.seeds;
    if a.threads > 1 {
        gcfg = run::lane_gen_config(gcfg);
    }
    let mut jsonl = match &a.jsonl {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("--jsonl: opening {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let t0 = Instant::now();
    let mut total_ops = 0u64;
    let mut violations = 0u64;
    let mut seeds_run = 0u64;
    let mut coverage = Coverage::default();
    let mut last_progress = Instant::now();
    let mut seen_ops = Tally::default();
    let mut seen_outcomes = Tally::default();
    for seed in first..=last {
        // The first seed always starts: no run does nothing.
        if seed != first && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let fault = a.fail_page_alloc.as_deref().map(|s| parse_fault_attr(s, seed)).transpose()?;
        let setup =
            Setup { mem: g.mem.clone(), cpus: g.cpus, sets: g.sets.clone(), seed, fault, check_every: a.check_every };
        let st = Instant::now();
        let (out, ops) = if a.threads > 1 {
            (run_threads(&setup, &gcfg, a.ops, a.threads, deadline)?, Vec::new())
        } else {
            let base_ops = total_ops;
            run::run_seed(&setup, &gcfg, a.ops, deadline, &mut |i, op, res| {
                seen_ops.bump(op.name());
                seen_outcomes.bump(res.outcome.name());
                if i % 4096 == 0 && last_progress.elapsed() >= Duration::from_secs(1) {
                    last_progress = Instant::now();
                    let done = base_ops + i as u64;
                    eprintln!(
                        "mmlab fuzz: seed {seed} op {i}: {done} ops, {:.0} ops/s, {violations} violations, \
                         coverage {} calls {} outcomes",
                        done as f64 / t0.elapsed().as_secs_f64(),
                        seen_ops.len(),
                        seen_outcomes.len()
                    );
                }
            })?
        };
        seeds_run += 1;
        total_ops += out.ops_run;
        coverage.add(&out.coverage);
        let mut replay_path = None;
        let mut vtext = Vec::new();
        if let Some(v) = &out.violation {
            violations += 1;
            eprintln!("mmlab fuzz: seed {seed}: VIOLATION {v}");
            vtext.push(v.to_string());
            if let Some(dir) = &plan.out_dir {
                let path = write_violation(&setup, ops, v, dir, plan.shrink)?;
                eprintln!("mmlab fuzz: replay written to {}", path.display());
                stdout_line(&path.display().to_string())?;
                replay_path = Some(path.display().to_string());
            } else {
                eprintln!("mmlab fuzz: threaded runs are not replayable; rerun the seed with --threads 1");
            }
        }
        if let Some(f) = jsonl.as_mut() {
            let rec = JsonSeed {
                seed,
                revision: crate::compare::GIT_REV,
                settings: JsonSettings {
                    mem: g.mem.clone(),
                    cpus: g.cpus,
                    set: g.sets.clone(),
                    fail_page_alloc: a.fail_page_alloc.clone(),
                    check_every: a.check_every,
                    threads: a.threads,
                    wrong_per_64: a.wrong,
                    exclude: gcfg.exclude.clone(),
                },
                ops: out.ops_run,
                elapsed_s: st.elapsed().as_secs_f64(),
                violations: vtext,
                replay: replay_path,
                coverage_ops: out.coverage.ops.clone(),
                coverage_outcomes: out.coverage.outcomes.clone(),
            };
            let line = g.run.insert_after_first(&serde_json::to_string(&rec).map_err(|e| format!("--jsonl: {e}"))?);
            writeln!(f, "{line}").map_err(|e| format!("--jsonl: {e}"))?;
        }
        if out.violation.is_some() && !a.keep_going {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    stdout_line(&format!(
        "mmlab fuzz: {seeds_run} seed(s) from {first}, {total_ops} ops in {secs:.1} s ({:.0} ops/s), {violations} \
         violation(s); mem={} cpus={} check_every={} threads={}",
        total_ops as f64 / secs.max(1e-9),
        g.mem,
        g.cpus,
        a.check_every,
        a.threads
    ))?;
    stdout_line(&format!("ops:      {}", map_line(&coverage.ops)))?;
    stdout_line(&format!("outcomes: {}", map_line(&coverage.outcomes)))?;
    Ok(violations > 0)
}

/// One line on stdout; a closed pipe (`| head`) is not an error.
fn stdout_line(line: &str) -> Result<(), String> {
    match writeln!(std::io::stdout().lock(), "{line}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(()),
    }
}

fn map_line(m: &BTreeMap<String, u64>) -> String {
    m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// Shrink (within `shrink`, unless `None`) and write the replay file
/// into `dir`.
fn write_violation(
    setup: &Setup,
    ops: Vec<Op>,
    v: &super::oracle::Violation,
    dir: &Path,
    shrink: Option<Duration>,
) -> Result<PathBuf, String> {
    let n = ops.len();
    // The failures the run injected are in the ops (fail_nth=); the replay
    // and the shrinker make them that way, not from the random stream.
    let recorded = setup.with_recorded_failures();
    let setup = &recorded;
    let (ops, v) = match shrink {
        None => (ops, v.clone()),
        Some(time) => {
            eprintln!("mmlab fuzz: shrinking {n} ops (at most {} s)", time.as_secs());
            let (s, v2) = run::shrink(setup, ops, v, ShrinkBudget { time }, &|| None);
            eprintln!("mmlab fuzz: shrunk to {} ops", s.len());
            (s, v2)
        }
    };
    let replay = annotate(setup, ops, &v);
    let path = dir.join(format!("fuzz-seed{}-{}.replay", setup.seed, v.kind));
    std::fs::write(&path, replay.to_string()).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// A replay of `ops` with the observed error outcomes as `expect=`, the
/// skipped ops removed, and the violation as a comment.
pub fn annotate(setup: &Setup, ops: Vec<Op>, v: &super::oracle::Violation) -> Replay {
    let out = run::run_list(setup, &ops, None).unwrap_or_default();
    let mut kept = Vec::new();
    for (i, mut op) in ops.into_iter().enumerate() {
        match out.outcomes.get(i) {
            Some(Outcome::Skipped) => continue,
            Some(o) if o.is_error() && Some(i) != v.op_index && *o != Outcome::Panic => {
                op.expect = Some(o.name().to_string())
            }
            _ => {}
        }
        kept.push(op);
    }
    let recorded = kept.iter().any(|op| !op.fail_nth.is_empty());
    let mut r = setup.replay(kept);
    if recorded {
        r.comments.push(
            "fail_page_alloc: the failures the run injected are the ops' fail_nth= (probability=0 makes no others)"
                .to_string(),
        );
    }
    r.comments.push(format!("violation: {v}"));
    r.comments.push(format!("revision: {}", crate::compare::GIT_REV));
    r
}

/// `--threads N`: N host threads, each with its own stream (seed ^ thread)
/// and CPU, on one machine; the end-of-run checks after they join.
fn run_threads(
    setup: &Setup,
    gcfg: &GenConfig,
    nops: u64,
    threads: usize,
    deadline: Option<Instant>,
) -> Result<RunOutcome, String> {
    let b = run::boot(setup)?;
    let pa = run::boot_allocator(&b, setup)?;
    let vm = b.vmalloc(&pa);
    let percpu = PercpuAllocator::new();
    let boot_buddyinfo = pa.zone().nr_free_per_order();
    let opts = ExecOptions {
        fault_injection: setup.fault.is_some(),
        exclusive: false,
        lane: 0,
        lanes: threads as u64,
        details: false,
    };
    let results: Vec<Result<RunOutcome, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (pa, vm, percpu, m) = (&pa, &vm, &percpu, b.machine());
                let lane = run::Lane { lane: t, lanes: threads, seed: setup.seed, nops, deadline, opts };
                s.spawn(move || -> Result<RunOutcome, String> {
                    let cpu = m.cpu(t).map_err(|e| e.to_string())?;
                    Ok(run::run_lane(pa, vm, percpu, cpu, gcfg, lane))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a fuzz thread panicked".to_string()))).collect()
    });
    let mut total = RunOutcome::default();
    for r in results {
        let r = r?;
        total.ops_run += r.ops_run;
        total.coverage.add(&r.coverage);
        if total.violation.is_none() {
            total.violation = r.violation;
        }
    }
    if total.violation.is_none() {
        let cpus = b.machine().all_cpus().map_err(|e| e.to_string())?;
        let mut ex = Executor::new(&pa, &vm, &percpu, cpus, ExecOptions { exclusive: true, lane: 0, lanes: 1, ..opts });
        ex.set_boot_buddyinfo(boot_buddyinfo);
        total.violation = ex.finish().err();
    }
    Ok(total)
}

/// Read and check a whole replay file ([`Replay::parse`]: every line, the
/// CPUs, settings and `expect=` outcomes) before anything runs; errors
/// name the file and line.
///
/// # Errors
/// The file unreadable, a bad line, or no operation at all.
pub fn load_replay(file: &Path) -> Result<Replay, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let r = Replay::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if r.ops.is_empty() {
        return Err(format!("{}: no operations: a replay runs at least one after its header", file.display()));
    }
    Ok(r)
}

/// `mmlab replay FILE`; returns whether a violation was found.
pub fn replay(a: &ReplayArgs, out: impl Write) -> Result<bool, String> {
    run_replay(&load_replay(&a.file)?, out)
}

/// Run a replay checked by [`load_replay`], each op's result to `out`;
/// returns whether a violation was found.
pub fn run_replay(r: &Replay, mut out: impl Write) -> Result<bool, String> {
    let setup = Setup::from_replay(r);
    let mut werr = None;
    let res = run::run_list_with(&setup, &r.ops, &mut |i, op, res| {
        let mut line = format!("{:5} {op}  => {}", i + 1, res.outcome);
        if !res.detail.is_empty() {
            line.push_str(&format!(" ({})", res.detail));
        }
        if let Some(v) = &res.violation {
            line.push_str(&format!("\n      VIOLATION {v}"));
        }
        if let Err(e) = writeln!(out, "{line}") {
            werr.get_or_insert(e);
        }
    })?;
    if let Some(e) = werr
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(format!("writing output: {e}"));
    }
    let summary = match &res.violation {
        Some(v) => format!("mmlab replay: {} ops, VIOLATION {v}", res.ops_run),
        None => format!("mmlab replay: {} ops, no violation (end-of-run checks passed)", res.ops_run),
    };
    let _ = writeln!(out, "{summary}");
    Ok(res.violation.is_some())
}

/// Check the options of `mmlab fuzz` together, on a machine of `cpus`
/// CPUs, before anything runs (module docs); `seed` is `--seed` as given
/// on the command line (not from `--config`).
///
/// # Errors
/// The first option refused, named with the limit it broke.
pub fn check(a: &FuzzArgs, seed: Option<u64>, default_seed: u64, cpus: usize) -> Result<args::Plan, args::OptionError> {
    if a.threads > cpus {
        return args::refuse("--threads", format!("{} threads need as many CPUs (--cpus {cpus})", a.threads));
    }
    if a.seeds.is_some() && seed.is_some() {
        return args::refuse("--seed", "--seeds A..B gives every run its own seed".to_string());
    }
    if a.exclude.is_some() && a.wrong == 0 {
        return args::refuse("--exclude", "--wrong 0 mixes in no wrong calls to leave out".to_string());
    }
    if a.no_shrink && a.shrink_time.is_some() {
        return args::refuse("--shrink-time", "--no-shrink writes the sequence unshrunk".to_string());
    }
    if a.threads > 1 {
        let why = format!("--threads {} runs are not replayable: no replay file is written", a.threads);
        if a.out_dir.is_some() {
            return args::refuse("--out-dir", why);
        }
        if a.no_shrink {
            return args::refuse("--no-shrink", why);
        }
        if a.shrink_time.is_some() {
            return args::refuse("--shrink-time", why);
        }
    }
    let seeds = match (a.seeds, a.time) {
        (Some(r), _) => r,
        (None, Some(_)) => SeedRange { first: default_seed, last: u64::MAX },
        (None, None) => SeedRange { first: default_seed, last: default_seed },
    };
    if a.time.is_none() {
        let total = u128::from(a.ops) * seeds.count() * a.threads as u128;
        if total > u128::from(crate::cli::MAX_WORKLOAD_OPS) {
            let (option, what) = match a.seeds {
                Some(r) => ("--seeds", format!("{} seeds ({r}) x --ops {}", seeds.count(), a.ops)),
                None => ("--ops", format!("{} ops", a.ops)),
            };
            let threads = if a.threads > 1 { format!(" x --threads {}", a.threads) } else { String::new() };
            return args::refuse(
                option,
                format!(
                    "{what}{threads} = {total} operations; a run without --time does at most {} \
                     (10^9): give fewer seeds or ops, split the seeds into shards, or bound the run with --time",
                    crate::cli::MAX_WORKLOAD_OPS
                ),
            );
        }
    }
    let out_dir = if a.threads > 1 {
        None
    } else {
        let dir = a.out_dir.clone().unwrap_or_else(|| std::path::PathBuf::from("."));
        crate::cli::check_out_dir(&dir).map_err(|message| args::OptionError { option: "--out-dir", message })?;
        Some(dir)
    };
    let shrink =
        (!a.no_shrink).then(|| std::time::Duration::from_secs(a.shrink_time.unwrap_or(args::DEFAULT_SHRINK_SECS)));
    Ok(args::Plan { seeds, out_dir, shrink })
}
