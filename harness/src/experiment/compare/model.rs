//! What a comparison is made of: its spec (variants, rows, metric,
//! counters) and what it produced (samples, row results, the outcome).

use crate::settings::Configs;
use crate::stats::{Better, Comparison, Summary};
use crate::test_vmalloc::{CallUnit, Counters, Params, TEST_CASES};
use mmlab_engine::MachineConfig;
use mmlab_engine::arch::arm64::barrier::ishst;

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
///
/// # Errors
/// Naming the parameter: a word that is not `key=value`, a key given
/// twice, an empty list element (`nr_pages=1,,2`), a value listed twice, a
/// value test_vmalloc refuses ([`Params::set`]), or two rows that run the
/// same (`nr_pages=0,1`: the module takes 0 as 1).
pub fn rows_from_args(args: &[String]) -> Result<Vec<Row>, String> {
    let mut sets: Vec<Vec<String>> = vec![Vec::new()];
    let mut keys: Vec<&str> = Vec::new();
    for kv in args {
        let Some((k, vs)) = kv.split_once('=') else {
            return Err(format!("workload parameters are key=value, got {kv:?}"));
        };
        let k = k.trim();
        if keys.contains(&k) {
            return Err(format!("{k} given twice; give its values as one comma list ({k}=A,B,...)"));
        }
        keys.push(k);
        let values: Vec<&str> = vs.split(',').map(str::trim).collect();
        if values.iter().all(|v| v.is_empty()) {
            return Err(format!("no value for {k}"));
        }
        if let Some(i) = values.iter().position(|v| v.is_empty()) {
            return Err(format!("{kv}: value {} of {k}'s list is empty", i + 1));
        }
        for (i, v) in values.iter().enumerate() {
            if let Some(j) = values[..i].iter().position(|x| x == v) {
                return Err(format!("{kv}: {v} is listed twice in {k}'s list (values {} and {})", j + 1, i + 1));
            }
        }
        sets = sets
            .into_iter()
            .flat_map(|s| values.iter().map(move |v| [s.clone(), vec![format!("{k}={v}")]].concat()))
            .collect();
    }
    let mut rows: Vec<(Row, String)> = Vec::new();
    for set in sets {
        let mut p = Params::default();
        for kv in &set {
            p.set(kv)?;
        }
        p.check_bounds()?;
        p.check_threads()?;
        for index in (0..TEST_CASES.len()).filter(|&i| p.selected(i)) {
            let row = Row::case(index, &p);
            let given = set.join(" ");
            if let Some((_, first)) =
                rows.iter().find(|(r, _)| r.index() == index && r.params.effective() == row.params.effective())
            {
                return Err(format!(
                    "`{first}` and `{given}` run the same {} (test_vmalloc.c takes them alike): one row twice",
                    TEST_CASES[index].name
                ));
            }
            rows.push((row, given));
        }
    }
    if rows.is_empty() {
        return Err("run_test_mask selects no test case".to_string());
    }
    Ok(rows.into_iter().map(|(r, _)| r).collect())
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
    /// [`run_seeds`](super::run_seeds)); `None` for `--repeat` mode.
    pub seeds: Option<Vec<u64>>,
}

impl Outcome {
    /// Whether a test case failed on some run.
    pub fn any_failed(&self) -> bool {
        self.rows.iter().any(|r| r.failure().is_some())
    }
}
