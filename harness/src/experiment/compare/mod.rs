//! `mmlab compare`: one workload under two or more configurations, as a
//! mailing-list A/B table with the cause beside the effect.
//!
//! # How a comparison runs
//!
//! Every configuration (a *variant*: `--set` settings on top of the common
//! ones) gets a machine of its own, booted once: machine, page allocator and
//! vmalloc, like one booted kernel per side. A *row* is one test_vmalloc
//! case with its parameters (`fix_size_alloc_test p:16 h:0`); each run of a
//! row loads the module once on one variant's machine (selecting only that
//! case, so the counters belong to it) and leaves the machine as it found
//! it. Runs are interleaved — repetition 1 of every row on A, then B, then
//! repetition 2, … — so that slow drift of the host (frequency, other load,
//! cache state) lands on both sides alike instead of on whichever ran last.
//! Repetition `r` uses seed `seed + r` on every variant, so both sides see
//! the same random sizes. The first `warmup` repetitions are run and thrown
//! away (the first run on a machine also allocates the vmalloc range's page
//! tables, which later runs find in place, as a running kernel does).
//!
//! # Independent seeds (`--seeds A..B`)
//!
//! [`run_seeds`] runs one independent block per seed instead: every variant
//! boots afresh, runs `warmup` warm-up runs and then one kept run of every
//! row (A B A B ...), all with that seed. It costs a boot per seed, and buys
//! samples that depend on nothing but the build, the settings, the row and
//! the seed, so that jobs over disjoint seed ranges, written as shards
//! ([`crate::shard`]) and merged, give exactly the run over the union.
//!
//!
//! The value of a run is nanoseconds per call (per loop iteration of the
//! case, or per object for pcpu_alloc_test), in one of three kinds, kept
//! apart as everywhere in mmlab:
//! - `measured`: host wall time of the emulation;
//! - `modelled`: what the cost profile charges for what the emulation
//!   cannot execute — barriers under the `model` backend, TLBIs and their
//!   completion waits, `synchronize_rcu()` waits;
//! - `total` (default): the sum, the emulation's estimate of the call's cost
//!   on the profile's machine.
//!
//! [`crate::stats`] turns each side's runs into a mean and 95 % interval and
//! marks `(I)`/`(R)` where the intervals do not overlap. The counter
//! columns ([`COUNTERS`]) are per call, averaged over the runs; they are
//! counted, not timed, and explain the change. [`render`] prints an
//! outcome as a table, Markdown, CSV or JSON, and [`plot`] draws it.

use crate::settings::Configs;
use crate::stack::Stack;
use crate::stats::{Better, Comparison, Summary};
use crate::test_vmalloc::{self, CallUnit, Counters, Params, TEST_CASES};
use mmlab_engine::arch::arm64::barrier::ishst;
use mmlab_engine::{Machine, MachineConfig};
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::Vmalloc;

mod render;

pub use render::{Format, aligned, fmt_num, fmt_pct, markdown, plot, render, seed_ranges, table};

/// One configuration: `--set` settings applied after the common ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub label: String,
    pub sets: Vec<String>,
}

impl Variant {
    /// A variant from a space-separated `key=value ...` string.
    pub fn parse(label: &str, settings: &str) -> Variant {
        Variant { label: label.to_string(), sets: settings.split_whitespace().map(str::to_string).collect() }
    }
}

/// One line of the table: a single test_vmalloc case and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub label: String,
    /// `run_test_mask` selects exactly one case.
    pub params: Params,
}

impl Row {
    /// The row for case `index` with `params` (its mask is replaced),
    /// labelled as the published tables do: `name p:<nr_pages> h:<use_huge>`.
    pub fn case(index: usize, params: &Params) -> Row {
        let mut params = params.clone();
        params.run_test_mask = 1 << index;
        let label = format!("{} p:{} h:{}", TEST_CASES[index].name, params.pages(), u8::from(params.use_huge));
        Row { label, params }
    }

    /// Case index of the row.
    pub fn index(&self) -> usize {
        (self.params.run_test_mask as u32).trailing_zeros() as usize
    }

    /// Calls per run: loop iterations (objects for pcpu_alloc_test) times
    /// repetitions times workers.
    pub fn calls(&self) -> u64 {
        let per = match TEST_CASES[self.index()].unit {
            CallUnit::PcpuObject => self.params.nr_pcpu_objects.max(1) as u64,
            CallUnit::Loop => self.params.loops(),
        };
        per * self.params.repeats() * self.params.threads() as u64
    }
}

/// Rows from test_vmalloc parameters where a value may be a comma list:
/// the cartesian product of the lists, then one row per case the mask
/// selects (in mask-bit order). `nr_pages=1,4 use_huge=0,1
/// run_test_mask=1` gives four rows of fix_size_alloc_test.
pub fn rows_from_args(args: &[String]) -> Result<Vec<Row>, String> {
    let mut sets: Vec<Vec<String>> = vec![Vec::new()];
    for kv in args {
        let Some((k, vs)) = kv.split_once('=') else {
            return Err(format!("workload parameters are key=value, got {kv:?}"));
        };
        let values: Vec<&str> = vs.split(',').map(str::trim).filter(|v| !v.is_empty()).collect();
        if values.is_empty() {
            return Err(format!("no value for {k}"));
        }
        sets = sets
            .into_iter()
            .flat_map(|s| values.iter().map(move |v| [s.clone(), vec![format!("{k}={v}")]].concat()))
            .collect();
    }
    let mut rows = Vec::new();
    for set in sets {
        let mut p = Params::default();
        for kv in &set {
            p.set(kv)?;
        }
        p.check_bounds()?;
        for index in (0..TEST_CASES.len()).filter(|&i| p.selected(i)) {
            rows.push(Row::case(index, &p));
        }
    }
    if rows.is_empty() {
        return Err("run_test_mask selects no test case".to_string());
    }
    Ok(rows)
}

/// Which time a comparison is about (module docs); `compare --metric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    Total,
    Measured,
    Modelled,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Total => "total",
            Metric::Measured => "measured",
            Metric::Modelled => "modelled",
        }
    }
}

/// Everything a comparison needs.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Memory size and CPUs (other fields come from the settings).
    pub machine: MachineConfig,
    /// Settings every variant starts from (`--set`).
    pub common: Vec<String>,
    /// The base first, then the variants compared with it.
    pub variants: Vec<Variant>,
    pub rows: Vec<Row>,
    /// Kept runs per row and variant.
    pub repeats: usize,
    /// Runs per row and variant thrown away first.
    pub warmup: usize,
    pub seed: u64,
    pub metric: Metric,
}

impl Spec {
    /// Parse every variant's settings (the common ones, then its own), as
    /// the command line is read: a bad key or value is reported before
    /// anything boots, labelled with the first variant it spoils.
    ///
    /// # Errors
    /// `label: ` and the [`SettingsError`](crate::settings::SettingsError).
    pub fn check_settings(&self) -> Result<(), String> {
        for v in &self.variants {
            let sets: Vec<String> = self.common.iter().chain(&v.sets).cloned().collect();
            crate::settings::parse(&sets).map_err(|e| format!("{}: {e}", v.label))?;
        }
        Ok(())
    }
}

/// One run of one row on one variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The seed the run used.
    pub seed: u64,
    /// Measured host ns of the case (all workers' mean).
    pub measured_ns: f64,
    /// Modelled ns ([`Counters::modelled_ns`]).
    pub modelled_ns: f64,
    pub counters: Counters,
    pub calls: u64,
    /// The case failed (the module's `return -1`), with its reason.
    pub failure: Option<String>,
}

impl Sample {
    /// ns per call of `metric`.
    pub fn value(&self, metric: Metric) -> f64 {
        let ns = match metric {
            Metric::Total => self.measured_ns + self.modelled_ns,
            Metric::Measured => self.measured_ns,
            Metric::Modelled => self.modelled_ns,
        };
        ns / self.calls.max(1) as f64
    }
}

/// A counter column: name, meaning, and how to read it from a run.
#[derive(Clone, Copy, Debug)]
pub struct CounterCol {
    /// The column's name in every output (table, CSV header, JSON key):
    /// an output format, kept as it was even where it differs from the
    /// counter's own name (see [`COUNTERS`]).
    pub name: &'static str,
    pub what: &'static str,
    /// The typed accessor of the counter the column shows.
    pub get: fn(&Counters) -> u64,
}

/// The counter columns `--counters` can show (per call): the one table of
/// compare's column names, each mapped to a typed accessor of the counter
/// it shows (a field of the owning crate's snapshot in [`Counters`]). Where
/// the column name is not the counter's own name (the engine's
/// vmstat/tracepoint name, defined once with its type), this table is the
/// documented alias:
///
/// | column           | counter (owner)                                            |
/// |------------------|------------------------------------------------------------|
/// | `barrier_pairs`  | `dsb(ishst)` ([`BarrierCounts::dsb_count`]`(ishst)`)       |
/// | `tlbi`           | all TLBI kinds summed ([`TlbiCounts::total`])              |
/// | `pcp_drains`     | `pcp_drain` ([`VmEvent::PcpDrain`])                        |
/// | `buddy_pages`    | `rmqueue_buddy_pages` ([`VmEvent::RmqueueBuddyPages`])     |
/// | `zone_lock`      | `zone_lock_acquire` ([`VmEvent::ZoneLockAcquire`])         |
/// | `buddy_merges`   | `buddy_merge` ([`VmEvent::BuddyMerge`])                    |
/// | `sync_rcu`       | `synchronize_rcu` ([`RcuCounts::synchronize_rcu`])         |
///
/// The other columns carry the counter's own name (`pcp_free_pages` is the
/// harness's derived quantity, [`Counters::pcp_free_pages`]).
///
/// [`BarrierCounts::dsb_count`]: mmlab_engine::arch::arm64::barrier::BarrierCounts::dsb_count
/// [`TlbiCounts::total`]: mmlab_engine::arch::arm64::tlb::TlbiCounts::total
/// [`VmEvent::PcpDrain`]: mmlab_engine::mm::vmstat::VmEvent::PcpDrain
/// [`VmEvent::RmqueueBuddyPages`]: mmlab_engine::mm::vmstat::VmEvent::RmqueueBuddyPages
/// [`VmEvent::ZoneLockAcquire`]: mmlab_engine::mm::vmstat::VmEvent::ZoneLockAcquire
/// [`VmEvent::BuddyMerge`]: mmlab_engine::mm::vmstat::VmEvent::BuddyMerge
/// [`RcuCounts::synchronize_rcu`]: mmlab_engine::kernel::rcu::RcuCounts::synchronize_rcu
pub const COUNTERS: [CounterCol; 11] = [
    CounterCol { name: "barrier_pairs", what: "dsb ishst (+ isb) pairs", get: |c| c.barriers.dsb_count(ishst) },
    CounterCol { name: "tlbi", what: "TLBI instructions", get: |c| c.tlbi.total() },
    CounterCol { name: "pcp_drains", what: "free_pcppages_bulk calls", get: |c| c.vm.pcp_drain },
    CounterCol { name: "pcp_drain_pages", what: "pages drained from pcp to buddy", get: |c| c.vm.pcp_drain_pages },
    CounterCol { name: "pcp_free_pages", what: "pages freed onto pcp lists", get: Counters::pcp_free_pages },
    CounterCol {
        name: "buddy_pages",
        what: "pages taken straight from buddy lists",
        get: |c| c.vm.rmqueue_buddy_pages,
    },
    CounterCol {
        name: "pcp_refill_pages",
        what: "pages moved buddy to pcp by refills",
        get: |c| c.vm.pcp_refill_pages,
    },
    CounterCol { name: "zone_lock", what: "zone->lock acquisitions", get: |c| c.vm.zone_lock_acquire },
    CounterCol {
        name: "zone_lock_hold_ns",
        what: "zone->lock hold time, measured (lock_stat=1)",
        get: |c| c.vm.zone_lock_hold_ns,
    },
    CounterCol { name: "buddy_merges", what: "merge steps in __free_one_page", get: |c| c.vm.buddy_merge },
    CounterCol { name: "sync_rcu", what: "synchronize_rcu() calls", get: |c| c.rcu.synchronize_rcu },
];

/// The counter column called `name`.
pub fn counter(name: &str) -> Result<CounterCol, String> {
    COUNTERS
        .iter()
        .copied()
        .find(|c| c.name == name)
        .ok_or_else(|| format!("unknown counter {name:?}; counters: {}", COUNTERS.map(|c| c.name).join(", ")))
}

/// What one variant ran with.
#[derive(Clone, Debug)]
pub struct VariantInfo {
    pub label: String,
    pub sets: Vec<String>,
    pub configs: Configs,
    /// CPU 0's pageset bounds at boot: `(high_min, high_max)`.
    pub pcp_high: (i32, i32),
}

/// Results of one row.
#[derive(Clone, Debug)]
pub struct RowResult {
    pub row: Row,
    /// Kept samples, one vector per variant (in [`Spec::variants`] order).
    pub samples: Vec<Vec<Sample>>,
}

impl RowResult {
    /// Summary of variant `v`'s values (`None` if a run failed).
    pub fn summary(&self, v: usize, metric: Metric) -> Option<Summary> {
        let xs: Vec<f64> = self.samples[v].iter().map(|s| s.value(metric)).collect();
        Summary::of(&xs)
    }

    /// Variant `v` (≥ 1) against the base.
    pub fn comparison(&self, v: usize, metric: Metric) -> Option<Comparison> {
        Some(Comparison::of(self.summary(0, metric)?, self.summary(v, metric)?, Better::Lower))
    }

    /// Mean per call of a counter on variant `v`.
    pub fn counter_per_call(&self, v: usize, col: &CounterCol) -> f64 {
        let s = &self.samples[v];
        if s.is_empty() {
            return 0.0;
        }
        s.iter().map(|x| (col.get)(&x.counters) as f64 / x.calls.max(1) as f64).sum::<f64>() / s.len() as f64
    }

    /// The first failure on any variant.
    pub fn failure(&self) -> Option<(usize, &str)> {
        self.samples.iter().enumerate().find_map(|(v, s)| s.iter().find_map(|x| x.failure.as_deref().map(|f| (v, f))))
    }
}

/// A finished comparison.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub spec: Spec,
    pub variants: Vec<VariantInfo>,
    pub rows: Vec<RowResult>,
    pub host_arch: String,
    pub git_rev: String,
    /// Measured host time of the whole comparison, ms (merged shards: the
    /// sum of theirs).
    pub wall_ms: u64,
    /// `--seeds` mode: the seeds, ascending (one independent block each,
    /// [`run_seeds`]); `None` for `--repeat` mode.
    pub seeds: Option<Vec<u64>>,
}

impl Outcome {
    /// Whether a test case failed on some run.
    pub fn any_failed(&self) -> bool {
        self.rows.iter().any(|r| r.failure().is_some())
    }
}

/// The git revision the binary was built from.
pub const GIT_REV: &str = env!("MMLAB_GIT_REV");

/// Check a spec and settle every variant's configuration (nothing boots).
fn prepare(spec: &Spec, progress: &mut impl FnMut(&str)) -> Result<Vec<VariantInfo>, String> {
    if spec.variants.len() < 2 {
        return Err("compare needs a base and at least one other configuration".to_string());
    }
    if spec.rows.is_empty() {
        return Err("compare needs at least one test".to_string());
    }
    if let Some(r) = spec.rows.iter().find(|r| {
        let mask = r.params.run_test_mask as u32;
        !mask.is_power_of_two() || mask.trailing_zeros() as usize >= TEST_CASES.len()
    }) {
        return Err(format!("row {:?}: run_test_mask must select exactly one test case", r.label));
    }
    let threads = spec.rows.iter().map(|r| r.params.threads()).max().unwrap_or(1);
    if threads > spec.machine.nr_cpus {
        return Err(format!("nr_threads={threads} needs {threads} CPUs; --cpus is {}", spec.machine.nr_cpus));
    }
    let mut infos = Vec::new();
    for v in &spec.variants {
        let sets: Vec<String> = spec.common.iter().chain(&v.sets).cloned().collect();
        let configs = Configs::new(spec.machine.clone(), &sets).map_err(|e| format!("{}: {e}", v.label))?;
        for w in crate::settings::warnings(&configs) {
            progress(&format!("warning: {}: {w}", v.label));
        }
        infos.push(VariantInfo { label: v.label.clone(), sets: v.sets.clone(), configs, pcp_high: (0, 0) });
    }
    Ok(infos)
}

/// The booted side of one variant: machine, page allocator and vmalloc.
type Side<'a, 'm> = (&'m Machine, &'a PageAllocator<'m>, &'a Vmalloc<'a, 'm>);

/// Boot a machine, page allocator and vmalloc per variant and hand them to
/// `f`, with CPU 0's pageset bounds of each; everything is dropped after.
fn with_booted<R>(
    infos: &[VariantInfo],
    f: impl FnOnce(&[Side<'_, '_>], Vec<(i32, i32)>) -> Result<R, String>,
) -> Result<R, String> {
    let stacks = infos
        .iter()
        .map(|i| Stack::boot(&i.configs).map_err(|e| format!("{}: {e}", i.label)))
        .collect::<Result<Vec<_>, _>>()?;
    let allocators = stacks
        .iter()
        .zip(infos)
        .map(|(s, i)| s.allocator().map_err(|e| format!("{}: {e}", i.label)))
        .collect::<Result<Vec<_>, _>>()?;
    let pcp_high = allocators.iter().map(|pa| pa.pageset(0).map_or((0, 0), |p| (p.high_min, p.high_max))).collect();
    let vms: Vec<Vmalloc<'_, '_>> = allocators.iter().zip(&stacks).map(|(pa, s)| s.vmalloc(pa)).collect();
    let sides: Vec<Side<'_, '_>> =
        stacks.iter().zip(&allocators).zip(&vms).map(|((s, pa), vm)| (s.machine(), pa, vm)).collect();
    f(&sides, pcp_high)
}

/// One run of every row on every side (rows outer, sides inner: A B A B),
/// with `seed`; the samples are pushed when `keep`.
fn run_rows(sides: &[Side<'_, '_>], rows: &mut [RowResult], seed: u64, keep: bool) -> Result<(), String> {
    for rr in rows.iter_mut() {
        for (v, &(m, pa, vm)) in sides.iter().enumerate() {
            let rep = test_vmalloc::run(m, pa, vm, &rr.row.params, seed)?;
            if keep {
                rr.samples[v].push(sample_of(&rep, &rr.row, seed));
            }
        }
    }
    Ok(())
}

/// Run a comparison; `progress` gets a line per repetition.
pub fn run(spec: Spec, mut progress: impl FnMut(&str)) -> Result<Outcome, String> {
    if spec.repeats < 2 {
        return Err(format!(
            "--repeat {}: the 95 % interval and the (I)/(R) marks need at least 2 kept runs per side",
            spec.repeats
        ));
    }
    let mut infos = prepare(&spec, &mut progress)?;
    let t0 = std::time::Instant::now();
    let mut rows: Vec<RowResult> =
        spec.rows.iter().map(|r| RowResult { row: r.clone(), samples: vec![Vec::new(); infos.len()] }).collect();
    let pcp_high = with_booted(&infos, |sides, pcp_high| {
        for rep in 0..spec.warmup + spec.repeats {
            let keep = rep >= spec.warmup;
            let seed = spec.seed.wrapping_add((rep.saturating_sub(spec.warmup)) as u64);
            progress(&format!(
                "{} {}/{}",
                if keep { "run" } else { "warm-up" },
                if keep { rep - spec.warmup + 1 } else { rep + 1 },
                if keep { spec.repeats } else { spec.warmup }
            ));
            run_rows(sides, &mut rows, seed, keep)?;
        }
        Ok(pcp_high)
    })?;
    for (i, h) in infos.iter_mut().zip(pcp_high) {
        i.pcp_high = h;
    }
    let wall_ms = t0.elapsed().as_millis() as u64;
    Ok(Outcome {
        spec,
        variants: infos,
        rows,
        host_arch: std::env::consts::ARCH.to_string(),
        git_rev: GIT_REV.to_string(),
        wall_ms,
        seeds: None,
    })
}

/// Run a comparison as independent seeded blocks, one per seed in `seeds`
/// (the `--seeds` mode, module docs): for each seed, boot every variant
/// afresh, run `spec.warmup` warm-up runs and then one kept run of every row
/// on every side, all with that seed. A sample is thus a function of the
/// build, the settings, the row and its seed alone (its counted and
/// modelled parts exactly, for single-worker rows), which is what lets
/// shards over disjoint seed sets merge into the run over their union.
/// `spec.repeats` and `spec.seed` are ignored (the outcome's are the number
/// of seeds and the first seed). A single seed is allowed (a shard); a table
/// needs two.
pub fn run_seeds(mut spec: Spec, seeds: &[u64], mut progress: impl FnMut(&str)) -> Result<Outcome, String> {
    let mut seeds = seeds.to_vec();
    seeds.sort_unstable();
    seeds.dedup();
    let (Some(&first), n) = (seeds.first(), seeds.len()) else {
        return Err("--seeds: no seed".to_string());
    };
    if n > crate::cli::MAX_RUNS {
        return Err(format!("--seeds: {n} seeds; at most {}", crate::cli::MAX_RUNS));
    }
    spec.seed = first;
    spec.repeats = n;
    let mut infos = prepare(&spec, &mut progress)?;
    let t0 = std::time::Instant::now();
    let mut rows: Vec<RowResult> =
        spec.rows.iter().map(|r| RowResult { row: r.clone(), samples: vec![Vec::new(); infos.len()] }).collect();
    for (k, &seed) in seeds.iter().enumerate() {
        progress(&format!("seed {seed} ({}/{n})", k + 1));
        let pcp_high = with_booted(&infos, |sides, pcp_high| {
            for _ in 0..spec.warmup {
                run_rows(sides, &mut rows, seed, false)?;
            }
            run_rows(sides, &mut rows, seed, true)?;
            Ok(pcp_high)
        })?;
        for (i, h) in infos.iter_mut().zip(pcp_high) {
            i.pcp_high = h;
        }
    }
    let wall_ms = t0.elapsed().as_millis() as u64;
    Ok(Outcome {
        spec,
        variants: infos,
        rows,
        host_arch: std::env::consts::ARCH.to_string(),
        git_rev: GIT_REV.to_string(),
        wall_ms,
        seeds: Some(seeds),
    })
}

fn sample_of(rep: &test_vmalloc::Report, row: &Row, seed: u64) -> Sample {
    let cases: Vec<&test_vmalloc::CaseResult> = rep.workers.iter().flat_map(|w| &w.cases).collect();
    let measured = cases.iter().map(|c| c.elapsed_ns as f64).sum::<f64>() / cases.len().max(1) as f64;
    let failure = cases
        .iter()
        .find_map(|c| (c.failed > 0).then(|| c.first_error.clone().unwrap_or_else(|| "failed".to_string())));
    // Modelled time is charged per CPU; with several workers, the mean.
    let modelled = rep.counters.modelled_ns() as f64 / rep.workers.len().max(1) as f64;
    Sample {
        seed,
        measured_ns: measured,
        modelled_ns: modelled,
        counters: rep.counters,
        calls: row.calls() / rep.workers.len().max(1) as u64,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_expand_lists_and_masks() {
        let args: Vec<String> =
            ["run_test_mask=1", "nr_pages=1,4", "use_huge=0,1"].iter().map(|s| s.to_string()).collect();
        let rows = rows_from_args(&args).unwrap();
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "fix_size_alloc_test p:1 h:0",
                "fix_size_alloc_test p:1 h:1",
                "fix_size_alloc_test p:4 h:0",
                "fix_size_alloc_test p:4 h:1"
            ]
        );
        let rows = rows_from_args(&["run_test_mask=0x5".to_string()]).unwrap();
        assert_eq!(rows.iter().map(Row::index).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(rows[1].params.run_test_mask, 4);
        assert!(rows_from_args(&["run_test_mask=0".to_string()]).is_err());
        assert!(rows_from_args(&["nr_pages=".to_string()]).is_err());
        assert!(rows_from_args(&["bogus=1".to_string()]).is_err());
    }

    #[test]
    fn calls_per_run() {
        let mut p = Params { test_loop_count: 100, test_repeat_count: 3, nr_pcpu_objects: 7, ..Params::default() };
        assert_eq!(Row::case(0, &p).calls(), 300);
        assert_eq!(Row::case(7, &p).calls(), 21);
        p.nr_threads = 2;
        assert_eq!(Row::case(0, &p).calls(), 600);
    }
}
