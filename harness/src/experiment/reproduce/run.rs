//! The runner: boots the published configurations, runs them, and fills one
//! typed result per reproduction, each measured row next to the published
//! row it answers and with its verdict under [`super::agreement`]'s rules.
//!
//! The A/B runs go through [`compare::run`] (interleaved runs, warm-up,
//! confidence intervals), on a 4 GiB, 2-CPU machine under a cost profile of
//! the hardware the posting measured on. The contpte TLB table is not an A/B
//! run: it maps one buffer per size three ways ([`Mapping`]) and walks it
//! through the TLB model of one CPU.

use super::Length;
use super::agreement::{self, Agreement, H1Verdict, MsleepVerdict, Tally};
use super::host_fit::{self, HostFit, HostRow, Split};
use super::model::{self, Event, EventCosts, Fit, FitRow};
use super::published::{self, BARRIER_BATCHING, Change, PCP_DRAIN, PublishedRegression, PublishedRow, Table};
use crate::compare::{self, CounterCol, Metric, Outcome, Row, RowResult, Spec, Variant};
use crate::stack::Stack;
use crate::stats::Mark;
use crate::test_vmalloc::{self, Params};
use mmlab_engine::arch::arm64::cost::CostProfile;
use mmlab_engine::arch::arm64::pgtable::desc::PMD_SIZE;
use mmlab_engine::arch::arm64::pgtable::{self, mmu};
use mmlab_engine::{Gfp, Machine, MachineConfig, PAGE_SIZE};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};

/// A counter per call on the base variant and on the new one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerCall {
    /// On the base (first) variant.
    pub base: f64,
    /// On the new variant.
    pub new: f64,
}

impl PerCall {
    /// `col` per call on variants 0 and `v` of `row`.
    fn of(row: &RowResult, v: usize, col: &CounterCol) -> Self {
        PerCall { base: row.counter_per_call(0, col), new: row.counter_per_call(v, col) }
    }
}

/// The change of variant 1 against the base on row `row` of `o`.
fn change(o: &Outcome, row: usize) -> Change {
    change_of(&o.rows[row], 1)
}

fn change_of(r: &RowResult, v: usize) -> Change {
    r.comparison(v, Metric::Total).map_or(Change::NONE, |c| Change::new(c.change_pct, c.mark))
}

/// The smallest change, percent, the deterministic metric calls a change
/// (the published tables' smallest significant change is 2.34 %).
pub const MODEL_RESOLUTION_PCT: f64 = 2.0;

/// The change of variant `v` against the base on `r` under the
/// deterministic metric of `profile` ([`model`]): the mean over the kept
/// runs of modelled ns per call; marked when at least
/// [`MODEL_RESOLUTION_PCT`].
pub fn model_change_of(r: &RowResult, v: usize, profile: &str) -> Change {
    model_change_plus(r, v, profile, 0.0)
}

/// The deterministic metric's mean ns per call of variant `v` of `r`.
pub fn model_ns_per_call(r: &RowResult, v: usize, profile: &str) -> f64 {
    let costs = EventCosts::for_profile(profile);
    let prof = CostProfile::by_name(profile).unwrap_or_else(CostProfile::ampere_altra);
    let s = &r.samples[v];
    s.iter().map(|x| model::modelled_ns(&costs, &prof, &x.counters) / x.calls.max(1) as f64).sum::<f64>()
        / s.len().max(1) as f64
}

/// [`model_change_of`] with `extra` ns per call added to both sides (time
/// the workload's own clock counts and mmlab does not: a sleep).
fn model_change_plus(r: &RowResult, v: usize, profile: &str, extra: f64) -> Change {
    let (b, n) = (model_ns_per_call(r, 0, profile) + extra, model_ns_per_call(r, v, profile) + extra);
    if b <= 0.0 || r.samples[0].is_empty() || r.samples[v].is_empty() {
        return Change::NONE;
    }
    let pct = 100.0 * (n - b) / b;
    let mark =
        (pct.abs() >= MODEL_RESOLUTION_PCT).then_some(if pct < 0.0 { Mark::Improvement } else { Mark::Regression });
    Change::new(pct, mark)
}

fn model_change(o: &Outcome, row: usize, profile: &str) -> Change {
    model_change_of(&o.rows[row], 1, profile)
}

/// The mean over variant `v`'s runs of `f` per call.
fn per_call(r: &RowResult, v: usize, f: &dyn Fn(&crate::test_vmalloc::Counters) -> f64) -> f64 {
    let s = &r.samples[v];
    s.iter().map(|x| f(&x.counters) / x.calls.max(1) as f64).sum::<f64>() / s.len().max(1) as f64
}

/// The calibration row of `r` (variant 1 against the base) for `published`.
fn fit_row(r: &RowResult, test: &'static str, published_pct: f64, profile: &str) -> FitRow {
    let prof = CostProfile::by_name(profile).unwrap_or_else(CostProfile::ampere_altra);
    let costs = EventCosts::for_profile(profile);
    let estimated = |c: &crate::test_vmalloc::Counters| -> f64 {
        Event::ALL.iter().filter(|e| !Event::FITTED.contains(e)).map(|&e| costs.ns(e) * Event::count(e, c) as f64).sum()
    };
    let per = |v: usize, f: &dyn Fn(&crate::test_vmalloc::Counters) -> f64| per_call(r, v, f);
    let counts = |v: usize| Event::FITTED.map(|e| per(v, &|c| Event::count(e, c) as f64));
    let fixed = |v: usize| per(v, &|c| model::profile_ns(&prof, c));
    let est = |v: usize| per(v, &estimated);
    FitRow {
        test,
        base: counts(0),
        new: counts(1),
        fixed: (fixed(0), fixed(1)),
        estimated: (est(0), est(1)),
        published_pct,
    }
}

/// The [`host_fit::HostRow`] of `r` (variant 1 against the base).
fn host_row(r: &RowResult, test: &'static str, profile: &str) -> HostRow {
    let prof = CostProfile::by_name(profile).unwrap_or_else(CostProfile::ampere_altra);
    let per = |v: usize, f: &dyn Fn(&crate::test_vmalloc::Counters) -> f64| per_call(r, v, f);
    let counts = |v: usize| Event::ALL.map(|e| per(v, &|c| Event::count(e, c) as f64));
    let host = |v: usize| r.summary(v, Metric::Measured).map_or(f64::NAN, |s| s.mean);
    let fixed = |v: usize| per(v, &|c| model::profile_ns(&prof, c));
    HostRow { test, base: counts(0), new: counts(1), host_ns: (host(0), host(1)), profile_ns: (fixed(0), fixed(1)) }
}

/// Pages a quick-mode h:1 row frees per run (see [`row_for`]).
const STEADY_STATE_PAGES: i32 = 300_000;
/// Pages of one PMD block (2 MiB): from there on, h:1 maps PMD blocks of
/// order 9, which the pcp caches.
const PMD_PAGES: i32 = (PMD_SIZE / PAGE_SIZE) as i32;

/// The test_vmalloc row a published label names, with quick-mode loops
/// chosen so that one run takes about a millisecond or more (the long
/// setups of full_fit and long_busy_list get enough loops to matter, and
/// the h:1 rows with 64 KiB blocks enough to reach the pcp's steady state).
///
/// # Errors
///
/// A label that names no test_vmalloc case or has a field other than
/// `p:<pages>` and `h:<0|1>`.
pub fn row_for(label: &str, len: Length) -> Result<Row, String> {
    let mut it = label.split_whitespace();
    let name = it.next().unwrap_or_default();
    let index = test_vmalloc::TEST_CASES
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| format!("no test_vmalloc case {name:?}"))?;
    let mut p = Params { sequential_test_order: true, ..Params::default() };
    for kv in it {
        match kv.split_once(':') {
            Some(("p", v)) => p.nr_pages = v.parse().map_err(|_| format!("bad p: in {label:?}"))?,
            Some(("h", v)) => p.use_huge = v == "1",
            _ => return Err(format!("bad row label {label:?}")),
        }
    }
    let pages = p.pages() as i32;
    let loops = match name {
        // 64 KiB contpte blocks bypass the pcp and come back into it as
        // order-0 pages, so the pcp only fills until it reaches its high
        // mark and drains from then on. The published runs (500,000 loops)
        // measured that steady state. Here, after the rows before them,
        // runs of 8,000 and 12,800 pages (p:16, p:64) ended before their
        // first drain: the pcp can take up to `high_max` pages (15,347 on
        // this machine). Twenty times that makes the fill under 5 % of the
        // run.
        "fix_size_alloc_test" if p.use_huge && pages < PMD_PAGES => (STEADY_STATE_PAGES / pages).max(200),
        "fix_size_alloc_test" => (8000 / pages).max(200),
        "long_busy_list_alloc_test" => 20_000,
        "full_fit_alloc_test" => 50_000,
        "random_size_alloc_test" => 1000,
        "pcpu_alloc_test" => 1,
        _ => 3000,
    };
    p.test_loop_count = len.scaled(loops);
    p.nr_pcpu_objects = len.scaled(2000);
    Ok(Row::case(index, &p))
}

fn sets(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// The comparison every reproduction runs: 4 GiB, 2 CPUs, one warm-up.
/// Every reproduction here takes vmalloc's order-0 pages in bulk and frees
/// them one by one at order 0, as the kernels of the published experiments
/// did ("vfree frees them as order-0 pages into the pcp lists", seeds.md
/// §2), not with 7.2's large-order allocations and `free_pages_bulk` (a
/// `common` setting given after these wins).
fn spec(common: &[&str], variants: Vec<Variant>, rows: Vec<Row>, len: Length, seed: u64) -> Spec {
    let mut all = vec!["vmalloc.large_order_pages=off".to_string(), "vmalloc.free_pages_bulk=off".to_string()];
    all.extend(sets(common));
    let common = all;
    Spec {
        machine: MachineConfig { mem_bytes: 4 << 30, nr_cpus: 2, ..Default::default() },
        common,
        variants,
        rows,
        repeats: len.repeats,
        warmup: 1,
        seed,
        metric: Metric::Total,
    }
}

fn progress(name: &'static str) -> impl FnMut(&str) {
    move |p| eprintln!("mmlab reproduce {name}: {p}")
}

fn counters(names: &[&str]) -> Result<Vec<CounterCol>, String> {
    names.iter().map(|c| compare::counter(c)).collect()
}

// ===== barrier-batching =====

/// What one published row of the series' table measured here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BarrierMeasured {
    /// Our change under the `apple-m2` profile, deterministic metric
    /// ([`model`]); the verdict is on it.
    pub apple_m2: Change,
    /// Measured host time (+ the profile's modelled part), apple-m2.
    pub apple_m2_host: Change,
    /// The verdict of the host-time change.
    pub apple_m2_host_agreement: Agreement,
    /// Its verdict against the published M2 change.
    pub apple_m2_agreement: Agreement,
    /// Our change under the `ampere-altra` profile, deterministic metric.
    pub ampere_altra: Change,
    /// Measured host time (+ the profile's modelled part), ampere-altra.
    pub ampere_altra_host: Change,
    /// The verdict of the host-time change.
    pub ampere_altra_host_agreement: Agreement,
    /// Its verdict against the published Altra change.
    pub ampere_altra_agreement: Agreement,
    /// Mean time per call before the series, ampere-altra profile, ns.
    pub altra_before_ns: f64,
}

/// A published row of the series' table and what it measured here.
#[derive(Clone, Debug, PartialEq)]
pub struct BarrierRow {
    /// The published row.
    pub published: PublishedRow,
    /// `dsb ishst` (+ `isb`) pairs per call before → after, apple-m2 runs.
    pub barrier_pairs: PerCall,
    /// The changes and verdicts, or the failure of a run.
    pub measured: Result<BarrierMeasured, String>,
}

/// `reproduce barrier-batching`: the series' test_vmalloc table, before →
/// after, under both cost profiles.
#[derive(Clone, Debug)]
pub struct BarrierBatching {
    /// The published table.
    pub table: Table<PublishedRow>,
    /// Kept runs per side.
    pub repeats: usize,
    /// One row per published row, in its order.
    pub rows: Vec<BarrierRow>,
    /// The verdicts on Apple M2, summed.
    pub apple_m2: Tally,
    /// The verdicts on Ampere Altra, summed.
    pub ampere_altra: Tally,
    /// The host-time verdicts on Apple M2, summed.
    pub apple_m2_host: Tally,
    /// The host-time verdicts on Ampere Altra, summed.
    pub ampere_altra_host: Tally,
    /// The calibration rows (Apple M2 column).
    pub fit_rows: Vec<FitRow>,
    /// The shipped `apple-m2` costs on this run's calibration rows.
    pub shipped: Fit,
    /// The costs refitted on this run's calibration rows.
    pub refit: Fit,
    /// The Altra column predicted with the shipped costs (not refitted).
    pub altra_predicted: Fit,
    /// What the published Altra h:1 rows imply for the 64 KiB block path.
    pub altra_block_path: Vec<ImpliedBlockPath>,
    /// What the published Altra rows where only the lazy-MMU thread-flag
    /// atomics change (the p:1 rows) imply for one atomic, ns: (test,
    /// published change, implied ns).
    pub altra_lazy_mmu: Vec<(&'static str, f64, f64)>,
    /// The events priced by measured host time, fitted on each profile's
    /// run (apple-m2, ampere-altra).
    pub host_fit: (HostFit, HostFit),
    /// The rows whose model and host-time verdicts differ, split into
    /// events: (profile, split, model verdict, host verdict).
    pub host_splits: Vec<(&'static str, Split, Agreement, Agreement)>,
    /// The apple-m2 comparison.
    pub m2_outcome: Outcome,
    /// The ampere-altra comparison.
    pub altra_outcome: Outcome,
}

/// The cost of the 64 KiB block path ([`model::BLOCK_PATH`]) on the Altra
/// that one published h:1 row implies, every other cost kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImpliedBlockPath {
    pub test: &'static str,
    /// The implied Altra cost of the block path over the M2's (the model
    /// takes [`model::ALTRA_OVER_M2`] for every path).
    pub over_m2: f64,
    /// ns per block, implied.
    pub implied_ns: f64,
    /// ns per block, modelled.
    pub modelled_ns: f64,
}

impl ImpliedBlockPath {
    /// The block path of `row` (Altra costs `c`) against its published
    /// change; `None` without order-4 blocks on the new side.
    fn of(row: &FitRow, c: &[f64; model::NR_FITTED]) -> Option<ImpliedBlockPath> {
        let (count, cost) = (
            |e: Event| e.fitted_index().map_or(0.0, |i| row.new[i]),
            |e: Event| e.fitted_index().map_or(0.0, |i| c[i]),
        );
        // One order-4 block is 16 pages taken from the buddy straight.
        let blocks = count(Event::BuddyPage) / 16.0;
        if blocks <= 0.0 {
            return None;
        }
        let scale = model::implied_block_scale(row, c)?;
        let per_block: f64 = model::BLOCK_PATH.iter().map(|&e| cost(e) * count(e)).sum::<f64>() / blocks;
        Some(ImpliedBlockPath {
            test: row.test,
            over_m2: scale * model::ALTRA_OVER_M2,
            implied_ns: scale * per_block,
            modelled_ns: per_block,
        })
    }
}

/// Whether the lazy-MMU thread-flag atomics are the only counted work
/// that changes on `row` at costs `c`: they grow, and everything else
/// together moves the modelled time by under 0.5 %.
fn only_lazy_mmu_changes(row: &FitRow, c: &[f64; model::NR_FITTED]) -> bool {
    let Some(lazy) = Event::LazyMmuFlagOp.fitted_index() else { return false };
    let base: f64 = row.base.iter().zip(c).map(|(x, w)| x * w).sum::<f64>() + row.fixed.0 + row.estimated.0;
    let other: f64 =
        (0..model::NR_FITTED).filter(|&i| i != lazy).map(|i| (row.new[i] - row.base[i]) * c[i]).sum::<f64>()
            + (row.fixed.1 - row.fixed.0)
            + (row.estimated.1 - row.estimated.0);
    row.new[lazy] > row.base[lazy] && other.abs() < 0.005 * base
}

impl BarrierBatching {
    /// The row of the published test `test` (`fix_size_alloc_test p:16 h:0`).
    pub fn row(&self, test: &str) -> Option<&BarrierRow> {
        self.rows.iter().find(|r| r.published.test == test)
    }

    /// Whether a run failed.
    pub fn failed(&self) -> bool {
        self.rows.iter().any(|r| r.measured.is_err())
    }
}

/// Runs `reproduce barrier-batching`.
///
/// # Errors
///
/// What [`compare::run`] returns.
pub fn barrier_batching(len: Length, seed: u64) -> Result<BarrierBatching, String> {
    let table = BARRIER_BATCHING;
    let rows = table.rows.iter().map(|r| row_for(r.test, len)).collect::<Result<Vec<_>, _>>()?;
    let variants = vec![
        Variant::parse("before", "arm64.lazy_mmu_barrier_batching=0 vmalloc.contpte=off"),
        Variant::parse("after", "arm64.lazy_mmu_barrier_batching=1 vmalloc.contpte=on"),
    ];
    let m2 = compare::run(
        spec(&["cost_profile=apple-m2"], variants.clone(), rows.clone(), len, seed),
        progress("barrier-batching (apple-m2)"),
    )?;
    let altra = compare::run(
        spec(&["cost_profile=ampere-altra"], variants, rows, len, seed),
        progress("barrier-batching (ampere-altra)"),
    )?;
    let pairs = compare::counter("barrier_pairs")?;
    let (mut t_m2, mut t_altra) = (Tally::default(), Tally::default());
    let (mut th_m2, mut th_altra) = (Tally::default(), Tally::default());
    let (mut fit_rows, mut altra_rows) = (Vec::new(), Vec::new());
    let (mut host_m2, mut host_altra) = (Vec::new(), Vec::new());
    let mut differ = Vec::new();
    let mut out = Vec::new();
    for (i, p) in table.rows.iter().enumerate() {
        let barrier_pairs = PerCall::of(&m2.rows[i], 1, &pairs);
        let measured = if let Some((_, f)) = m2.rows[i].failure().or(altra.rows[i].failure()) {
            Err(f.to_string())
        } else {
            let (c_m2, c_al) = (model_change(&m2, i, "apple-m2"), model_change(&altra, i, "ampere-altra"));
            let (a_m2, a_al) = (Agreement::judge(c_m2, p.apple_m2), Agreement::judge(c_al, p.ampere_altra));
            t_m2.add(p.test, a_m2);
            t_altra.add(p.test, a_al);
            let (h_m2, h_al) = (change(&m2, i), change(&altra, i));
            let (ha_m2, ha_al) = (Agreement::judge(h_m2, p.apple_m2), Agreement::judge(h_al, p.ampere_altra));
            th_m2.add(p.test, ha_m2);
            th_altra.add(p.test, ha_al);
            fit_rows.push(fit_row(&m2.rows[i], p.test, p.apple_m2.pct, "apple-m2"));
            altra_rows.push(fit_row(&altra.rows[i], p.test, p.ampere_altra.pct, "ampere-altra"));
            host_m2.push(host_row(&m2.rows[i], p.test, "apple-m2"));
            host_altra.push(host_row(&altra.rows[i], p.test, "ampere-altra"));
            if a_m2 != ha_m2 {
                differ.push(("apple-m2", host_m2.len() - 1, a_m2, ha_m2));
            }
            if a_al != ha_al {
                differ.push(("ampere-altra", host_altra.len() - 1, a_al, ha_al));
            }
            Ok(BarrierMeasured {
                apple_m2: c_m2,
                apple_m2_agreement: a_m2,
                apple_m2_host: h_m2,
                apple_m2_host_agreement: ha_m2,
                ampere_altra: c_al,
                ampere_altra_agreement: a_al,
                ampere_altra_host: h_al,
                ampere_altra_host_agreement: ha_al,
                altra_before_ns: altra.rows[i].summary(0, Metric::Total).map_or(f64::NAN, |s| s.mean),
            })
        };
        out.push(BarrierRow { published: *p, barrier_pairs, measured });
    }
    let altra_costs = model::M2_FITTED_NS.map(|c| c * model::ALTRA_OVER_M2);
    let host_fit = (host_fit::fit(&host_m2), host_fit::fit(&host_altra));
    let host_splits = differ
        .into_iter()
        .map(|(profile, i, a, ha)| {
            let (rows, fit) = if profile == "apple-m2" { (&host_m2, &host_fit.0) } else { (&host_altra, &host_fit.1) };
            (profile, host_fit::split(&rows[i], fit, &EventCosts::for_profile(profile)), a, ha)
        })
        .collect();
    Ok(BarrierBatching {
        table,
        repeats: len.repeats,
        rows: out,
        apple_m2: t_m2,
        ampere_altra: t_altra,
        apple_m2_host: th_m2,
        ampere_altra_host: th_altra,
        shipped: model::fit_residuals(&fit_rows, model::M2_FITTED_NS),
        refit: model::fit(&fit_rows, model::M2_FITTED_NS),
        altra_predicted: model::fit_residuals(&altra_rows, altra_costs),
        host_fit,
        host_splits,
        altra_block_path: altra_rows
            .iter()
            .filter(|r| {
                let published = table.rows.iter().find(|p| p.test == r.test);
                r.test.ends_with("h:1") && published.is_some_and(|p| p.ampere_altra.mark.is_some())
            })
            .filter_map(|r| ImpliedBlockPath::of(r, &altra_costs))
            .collect(),
        altra_lazy_mmu: altra_rows
            .iter()
            .filter(|r| only_lazy_mmu_changes(r, &altra_costs))
            .filter_map(|r| {
                Some((r.test, r.published_pct, model::implied_cost(r, &altra_costs, Event::LazyMmuFlagOp)?))
            })
            .collect(),
        fit_rows,
        m2_outcome: m2,
        altra_outcome: altra,
    })
}

// ===== contpte =====

/// How a vmalloc'd buffer is mapped in the TLB table of `contpte`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// 4 KiB PTEs (`vmap_allow_huge` off).
    Pte,
    /// Contiguous PTEs, PMD blocks off (`vmalloc_huge`).
    Contpte,
    /// The kernel's choice: PMD blocks where they fit, else contpte.
    Pmd,
}

impl Mapping {
    /// The three, in the table's column order.
    pub const ALL: [Mapping; 3] = [Mapping::Pte, Mapping::Contpte, Mapping::Pmd];

    /// The column heading.
    pub fn column(self) -> &'static str {
        match self {
            Mapping::Pte => "4K PTEs",
            Mapping::Contpte => "contpte",
            Mapping::Pmd => "PMD (kernel's choice)",
        }
    }

    /// The vmalloc switches, and whether the buffer comes from
    /// `vmalloc_huge` rather than `vmalloc`.
    fn config(self) -> (VmallocConfig, bool) {
        match self {
            Mapping::Pte => (VmallocConfig { vmap_allow_huge: false, ..VmallocConfig::default() }, false),
            Mapping::Contpte => (VmallocConfig { pmd: false, ..VmallocConfig::default() }, true),
            Mapping::Pmd => (VmallocConfig::default(), true),
        }
    }
}

/// TLB entries and TLB-model misses for one buffer mapped one way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbCount {
    /// TLB entries needed to cover the buffer.
    pub entries: u64,
    /// Misses touching each 4 KiB page once, after a flush.
    pub misses_first: u64,
    /// Misses of a second pass.
    pub misses_second: u64,
}

impl TlbCount {
    /// Misses of both passes.
    pub fn misses(&self) -> u64 {
        self.misses_first + self.misses_second
    }
}

/// One buffer size of the TLB table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlbRow {
    /// Buffer size, bytes.
    pub size: u64,
    /// By [`Mapping::ALL`] order.
    pub counts: [TlbCount; 3],
}

impl TlbRow {
    /// The counts of `mapping`.
    pub fn get(&self, mapping: Mapping) -> TlbCount {
        self.counts[mapping as usize]
    }

    /// How many times fewer entries contpte needs than 4 KiB PTEs.
    pub fn ratio(&self) -> f64 {
        self.get(Mapping::Pte).entries as f64 / self.get(Mapping::Contpte).entries.max(1) as f64
    }
}

/// `reproduce contpte`: the TLB table and the h:1 cost.
#[derive(Clone, Debug)]
pub struct Contpte {
    /// Entries of the emulated TLB.
    pub tlb_entries: usize,
    /// 64 KiB to 8 MiB, doubling.
    pub tlb: Vec<TlbRow>,
    /// Whether contpte needs [`published::CONTPTE_TLB_RATIO`] times fewer
    /// entries at every size.
    pub tlb_agrees: bool,
    /// fix_size h:1, contpte off → on.
    pub h1: Outcome,
    /// The counter columns of its table; the first is the zone lock.
    pub h1_counters: Vec<CounterCol>,
    /// zone->lock acquisitions per call, per h:1 row, off → on.
    pub h1_zone_lock: Vec<PerCall>,
    /// Rows slower with contpte.
    pub h1_regressed: usize,
    /// The change per h:1 row, deterministic metric.
    pub h1_model: Vec<Change>,
    /// What contpte alone cost per row on the Altra in the published table
    /// ([`published::contpte_alone`]), and our verdict against it.
    pub h1_published: Vec<(Option<Change>, Agreement)>,
    /// The largest change of host time, percent.
    pub h1_host_worst_pct: f64,
    /// Whether zone->lock acquisitions per call went up in every row.
    pub h1_zone_lock_up: bool,
    /// The verdict.
    pub h1_verdict: H1Verdict,
}

impl Contpte {
    /// The TLB row of a `size`-byte buffer.
    pub fn tlb_row(&self, size: u64) -> Option<&TlbRow> {
        self.tlb.iter().find(|r| r.size == size)
    }
}

/// Touch every 4 KiB page of `[va, va + size)` twice, through the TLB
/// model of `cpu`, after flushing it; count the misses of each pass.
fn touch_twice(m: &Machine, cpu: &mmlab_engine::Cpu<'_>, va: u64, size: u64) -> Result<TlbCount, String> {
    let k = m.kernel_as();
    mmlab_engine::arch::arm64::tlb::flush_tlb_all(cpu);
    let entries = mmlab_engine::arch::arm64::tlb::tlb_entries_needed(pgtable::leaves(m, &k, va, va + size));
    let mut misses = [0u64; 2];
    for pass in &mut misses {
        let before = cpu.arch_data().tlb.counts().misses;
        for off in (0..size).step_by(PAGE_SIZE as usize) {
            mmu::translate_uncached(cpu, &k, va + off, mmu::Access::READ).map_err(|e| e.to_string())?;
        }
        *pass = cpu.arch_data().tlb.counts().misses - before;
    }
    Ok(TlbCount { entries, misses_first: misses[0], misses_second: misses[1] })
}

/// The h:1 rows of `reproduce contpte`: the series' rows mapped with 64 KiB
/// blocks.
pub const H1_PAGES: [u32; 3] = [16, 64, 256];

/// Runs `reproduce contpte`.
///
/// # Errors
///
/// A boot, vmalloc or translation failure, or what [`compare::run`] returns.
pub fn contpte(len: Length, seed: u64) -> Result<Contpte, String> {
    let mc = MachineConfig { mem_bytes: 1 << 30, nr_cpus: 2, ..Default::default() };
    let tlb_entries = mc.tlb_entries;
    let stack = Stack::boot_machine(mc)?;
    let m = stack.machine();
    let pa = stack.allocator()?;
    // One vmalloc (with the boot's areas), its switches set per mapping.
    let mut state = stack.vmalloc(&pa).into_state();
    let cpu = m.cpu(0).map_err(|e| e.to_string())?;
    let mut tlb = Vec::new();
    for shift in 16..=23 {
        let size = 1u64 << shift;
        let mut counts = [TlbCount::default(); 3];
        for (slot, mapping) in counts.iter_mut().zip(Mapping::ALL) {
            let (vc, huge) = mapping.config();
            let vm = Vmalloc::resume(&pa, vc, state);
            let va = if huge { vm.vmalloc_huge(&cpu, size, Gfp::GFP_KERNEL) } else { vm.vmalloc(&cpu, size) }
                .map_err(|e| e.to_string())?;
            *slot = touch_twice(m, &cpu, va, size)?;
            vm.vfree(&cpu, va).map_err(|e| e.to_string())?;
            vm.purge_vmap_area_lazy(&cpu).expect("a CPU of this machine");
            state = vm.into_state();
        }
        tlb.push(TlbRow { size, counts });
    }
    let tlb_agrees = tlb.iter().all(|r| r.ratio() == published::CONTPTE_TLB_RATIO);
    // The h:1 cost.
    let rows = H1_PAGES
        .iter()
        .map(|p| row_for(&format!("fix_size_alloc_test p:{p} h:1"), len))
        .collect::<Result<Vec<_>, _>>()?;
    let variants =
        vec![Variant::parse("contpte-off", "vmalloc.contpte=off"), Variant::parse("contpte-on", "vmalloc.contpte=on")];
    let h1 = compare::run(
        spec(&["cost_profile=ampere-altra", "lock_stat=1"], variants, rows, len, seed),
        progress("contpte"),
    )?;
    let h1_counters = counters(&["zone_lock", "buddy_pages", "pcp_refill_pages", "pcp_free_pages", "tlbi"])?;
    let h1_zone_lock: Vec<PerCall> = h1.rows.iter().map(|r| PerCall::of(r, 1, &h1_counters[0])).collect();
    let h1_model: Vec<Change> = (0..h1.rows.len()).map(|i| model_change(&h1, i, "ampere-altra")).collect();
    let h1_regressed = h1_model.iter().filter(|c| c.pct > 0.0).count();
    let h1_zone_lock_up = h1_zone_lock.iter().all(|z| z.new > z.base);
    let h1_host_worst_pct = (0..h1.rows.len()).map(|i| change(&h1, i).pct).fold(f64::NAN, f64::max);
    let h1_published: Vec<(Option<Change>, Agreement)> = H1_PAGES
        .iter()
        .zip(&h1_model)
        .map(|(&p, &ours)| {
            let published = published::contpte_alone(p, true);
            (published, published.map_or(Agreement::Disagrees, |c| Agreement::judge(ours, c)))
        })
        .collect();
    let verdicts: Vec<Agreement> = h1_published.iter().map(|(_, a)| *a).collect();
    let h1_verdict = H1Verdict::judge(&verdicts, h1_zone_lock_up);
    Ok(Contpte {
        tlb_entries,
        tlb,
        tlb_agrees,
        h1,
        h1_counters,
        h1_zone_lock,
        h1_regressed,
        h1_model,
        h1_published,
        h1_host_worst_pct,
        h1_zone_lock_up,
        h1_verdict,
    })
}

// ===== pcp-drain =====

/// A published long_busy_list regression and ours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegressionRow {
    /// The published regression.
    pub published: PublishedRegression,
    /// Our change against mainline, deterministic metric.
    pub ours: Change,
    /// The change of host time.
    pub ours_host: Change,
    /// The verdict.
    pub agreement: Agreement,
}

/// One pcp high of the sensitivity sweep: mainline vs huge-by-default.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    /// How the high is set, as the table labels it.
    pub label: &'static str,
    /// Our change, deterministic metric.
    pub change: Change,
    /// The change of host time.
    pub change_host: Change,
    /// pcp pages drained per iteration, mainline → huge.
    pub drain_pages: PerCall,
    /// CPU 0's pageset `(high_min, high_max)` at boot.
    pub pcp_high: (i32, i32),
    /// Whether a run failed.
    pub failed: bool,
}

/// The pcp highs of the sweep: the table's label and the `--set` that
/// gives it (none: the kernel's own sizing).
const PCP_HIGH_SWEEP: [(&str, Option<&str>); 6] = [
    ("kernel sizing (high_min..high_max)", None),
    ("percpu_pagelist_high_fraction=8", Some("percpu_pagelist_high_fraction=8")),
    ("percpu_pagelist_high_fraction=64", Some("percpu_pagelist_high_fraction=64")),
    ("pcp.high=512", Some("pcp.high=512")),
    ("pcp.high=2048", Some("pcp.high=2048")),
    ("pcp.high=8192", Some("pcp.high=8192")),
];

/// The loop counts of the fewer-iterations rows of `reproduce pcp-drain`.
pub const FEWER_LOOPS: [i32; 3] = [10, 100, 1000];

/// long_busy_list with fewer iterations, mainline → huge-by-default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FewerRow {
    /// `test_loop_count`.
    pub loops: i32,
    /// The change, deterministic metric (the set-up timed with the loop, as
    /// `test_func` times it).
    pub change: Change,
    /// pcp pages drained per iteration.
    pub drain_pages: PerCall,
}

/// `reproduce pcp-drain`: the regression, its cause, the pcp-high sweep,
/// the msleep(1) variant and fix_size p:512.
#[derive(Clone, Debug)]
pub struct PcpDrain {
    /// Kept runs per side of the main runs.
    pub repeats: usize,
    /// long_busy_list: mainline, huge-by-default, huge-no-patch1.
    pub main: Outcome,
    /// The counter columns of its table (the first four also of
    /// [`PcpDrain::slept_p512`]'s).
    pub counters: Vec<CounterCol>,
    /// The published regressions and ours.
    pub regressions: Vec<RegressionRow>,
    /// pcp pages drained per iteration, mainline → huge-by-default.
    pub drain_pages: PerCall,
    /// Pages taken straight from the buddy lists per iteration, mainline →
    /// huge-by-default.
    pub buddy_pages: PerCall,
    /// Whether huge-by-default drains more (the published cause).
    pub cause_agrees: bool,
    /// Kept runs per side of the sweep.
    pub sweep_repeats: usize,
    /// The sweep, one row per pcp high.
    pub sweep: Vec<SweepRow>,
    /// long_busy_list with msleep(1) before the vfrees, and fix_size p:512.
    pub slept_p512: Outcome,
    /// The change with the sleep, deterministic metric.
    pub slept: Change,
    /// The change with the sleep, host time.
    pub slept_host: Change,
    /// The change with the sleep, deterministic metric plus the slept time
    /// ([`MSLEEP_1_NS`] per iteration), as test_vmalloc's clock counts it.
    pub slept_in_ktime: Change,
    /// pcp pages drained per iteration with the sleep, huge-by-default.
    pub slept_drain_pages: f64,
    /// How the sleep's reduction of the regression is reproduced.
    pub msleep: MsleepVerdict,
    /// long_busy_list with fewer iterations (the posting: fewer iterations
    /// reduce or remove the regression), fewest first.
    pub fewer: Vec<FewerRow>,
    /// Whether the fewest iterations reduce the regression.
    pub fewer_agrees: bool,
    /// Their comparison.
    pub fewer_outcome: Outcome,
    /// The fix_size p:512 change, deterministic metric.
    pub p512: Change,
    /// The fix_size p:512 change, host time.
    pub p512_host: Change,
    /// Whether p:512 improves, as published.
    pub p512_agrees: bool,
    /// The first iterations' pcp, mainline and huge-by-default.
    pub traces: Vec<super::pcp_trace::PcpTrace>,
    /// long_busy_list mainline → huge-by-default with 7.2's vmalloc
    /// (`vmalloc.large_order_pages=on`, `vmalloc.free_pages_bulk=on`),
    /// deterministic metric.
    pub bulk: Change,
    /// The same, host time.
    pub bulk_host: Change,
    /// pcp pages drained per iteration with 7.2's vmalloc.
    pub bulk_drain_pages: PerCall,
    /// zone-lock acquisitions per iteration with 7.2's vmalloc.
    pub bulk_zone_lock: PerCall,
}

impl PcpDrain {
    /// Whether a run failed.
    pub fn failed(&self) -> bool {
        self.main.any_failed()
            || self.sweep.iter().any(|r| r.failed)
            || self.slept_p512.any_failed()
            || self.fewer_outcome.any_failed()
    }
}

fn huge_variants() -> Vec<Variant> {
    vec![
        Variant::parse("mainline", ""),
        Variant::parse("huge-by-default", "vmalloc.huge_by_default=on vmalloc.align_size_to_huge=off"),
    ]
}

/// What one `msleep(1)` sleeps at HZ=250, ns: `msecs_to_jiffies(1) + 1`
/// = 2 jiffies = 8 ms (the emulated sleep of test_vmalloc's `msleep`).
/// test_vmalloc's `test_func` takes `ktime_get()` around the whole test
/// function, so a sleep in its loop is inside the reported time.
pub const MSLEEP_1_NS: f64 = 8_000_000.0;

/// Runs `reproduce pcp-drain`.
///
/// # Errors
///
/// What [`compare::run`] and [`test_vmalloc::run`] return.
pub fn pcp_drain(len: Length, seed: u64) -> Result<PcpDrain, String> {
    let lbl = row_for("long_busy_list_alloc_test p:1 h:0", len)?;
    let common = ["cost_profile=ampere-altra", "lock_stat=1"];
    let mut variants = huge_variants();
    variants.push(Variant::parse("huge-no-patch1", "vmalloc.huge_by_default=on vmalloc.align_size_to_huge=on"));
    let main = compare::run(spec(&common, variants, vec![lbl.clone()], len, seed), progress("pcp-drain"))?;
    let counters = counters(&[
        "buddy_pages",
        "pcp_free_pages",
        "pcp_drains",
        "pcp_drain_pages",
        "zone_lock",
        "zone_lock_hold_ns",
        "buddy_merges",
    ])?;
    let regressions = PCP_DRAIN
        .rows
        .iter()
        .enumerate()
        .map(|(v, p)| {
            let ours = model_change_of(&main.rows[0], v + 1, "ampere-altra");
            let ours_host = change_of(&main.rows[0], v + 1);
            RegressionRow { published: *p, ours, ours_host, agreement: Agreement::judge(ours, p.change) }
        })
        .collect();
    let drain = compare::counter("pcp_drain_pages")?;
    let drain_pages = PerCall::of(&main.rows[0], 1, &drain);
    let buddy_pages = PerCall::of(&main.rows[0], 1, &compare::counter("buddy_pages")?);

    // The pcp high sweep.
    let short = Length { repeats: len.repeats.min(3), ..len };
    let mut sweep_row = lbl.clone();
    sweep_row.params.test_loop_count /= 2;
    let mut sweep = Vec::new();
    for (label, set) in PCP_HIGH_SWEEP {
        let mut common: Vec<&str> = common.to_vec();
        common.extend(set);
        let o = compare::run(
            spec(&common, huge_variants(), vec![sweep_row.clone()], short, seed),
            progress("pcp-drain sweep"),
        )?;
        sweep.push(SweepRow {
            label,
            change: model_change(&o, 0, "ampere-altra"),
            change_host: change(&o, 0),
            drain_pages: PerCall::of(&o.rows[0], 1, &drain),
            pcp_high: o.variants[0].pcp_high,
            failed: o.any_failed(),
        });
    }

    // Time between vmalloc and vfree.
    let mut slept = lbl.clone();
    slept.params.msleep_before_free = 1;
    slept.label = "long_busy_list_alloc_test msleep(1) before vfree".to_string();
    let p512 = row_for("fix_size_alloc_test p:512 h:0", len)?;
    let o2 = compare::run(
        spec(&common, huge_variants(), vec![slept, p512], len, seed),
        progress("pcp-drain msleep, p:512"),
    )?;
    let slept = model_change(&o2, 0, "ampere-altra");
    let slept_host = change(&o2, 0);
    let slept_drain_pages = o2.rows[0].counter_per_call(1, &drain);
    let slept_in_ktime = model_change_plus(&o2.rows[0], 1, "ampere-altra", MSLEEP_1_NS);
    let without = model_change(&main, 0, "ampere-altra").pct;
    let msleep = MsleepVerdict::judge(slept, slept_in_ktime, slept_drain_pages, without, drain_pages.new);
    // Fewer iterations: the pcp fills for its first ~high / 96 iterations
    // before the drains start, and the set-up of 15,000 one-page areas is
    // timed with the loop.
    let fewer_rows: Vec<Row> = FEWER_LOOPS
        .iter()
        .map(|&n| {
            let mut r = lbl.clone();
            r.params.test_loop_count = n;
            r.label = format!("long_busy_list_alloc_test loops={n}");
            r
        })
        .collect();
    let o3 = compare::run(spec(&common, huge_variants(), fewer_rows, short, seed), progress("pcp-drain fewer loops"))?;
    let fewer: Vec<FewerRow> = FEWER_LOOPS
        .iter()
        .enumerate()
        .map(|(i, &loops)| FewerRow {
            loops,
            change: model_change(&o3, i, "ampere-altra"),
            drain_pages: PerCall::of(&o3.rows[i], 1, &drain),
        })
        .collect();
    let fewer_agrees = fewer.first().is_some_and(|f| agreement::fewer_agrees(f.change, without));
    let p512 = model_change(&o2, 1, "ampere-altra");
    let p512_host = change(&o2, 1);
    // 7.2's vmalloc: large-order allocations first, and vfree's
    // free_pages_bulk: the blocks go back whole.
    let mut common72 = common.to_vec();
    common72.extend(["vmalloc.large_order_pages=on", "vmalloc.free_pages_bulk=on"]);
    let o72 =
        compare::run(spec(&common72, huge_variants(), vec![lbl.clone()], short, seed), progress("pcp-drain 7.2"))?;
    let bulk = model_change(&o72, 0, "ampere-altra");
    let bulk_host = change(&o72, 0);
    let bulk_drain_pages = PerCall::of(&o72.rows[0], 1, &drain);
    let bulk_zone_lock = PerCall::of(&o72.rows[0], 1, &compare::counter("zone_lock")?);
    // The pcp of the test's CPU, iteration by iteration, one run each.
    let traces = super::pcp_trace::pcp_traces(&main, &lbl, seed)?;
    Ok(PcpDrain {
        repeats: len.repeats,
        main,
        counters,
        regressions,
        cause_agrees: drain_pages.new > drain_pages.base,
        drain_pages,
        buddy_pages,
        sweep_repeats: short.repeats,
        sweep,
        slept_p512: o2,
        slept,
        slept_host,
        slept_in_ktime,
        slept_drain_pages,
        msleep,
        fewer,
        fewer_agrees,
        fewer_outcome: o3,
        p512,
        p512_host,
        p512_agrees: p512.pct < 0.0,
        traces,
        bulk,
        bulk_host,
        bulk_drain_pages,
        bulk_zone_lock,
    })
}
