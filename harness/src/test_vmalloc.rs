//! `mmlab test-vmalloc`: the kernel's vmalloc test module (lib/test_vmalloc.c,
//! Linux 6.17) run on the emulated machine, with the modes of
//! tools/testing/selftests/mm/test_vmalloc.sh.
//!
//! # What it does
//!
//! `nr_threads` workers start together (the module holds them on an SRCU read
//! section; here a [`Barrier`]). Worker `i` runs on emulated CPU `i`, on a
//! host thread of its own. Each worker shuffles the indexes of the eleven
//! test cases (unless `sequential_test_order`), with the module's shuffle:
//! for i from n-1 down to 1, swap with j uniform in `[0, i)` (never `j = i`),
//! then runs the cases whose bit is set in `run_test_mask`, each
//! `test_repeat_count` times, and stores avg = elapsed µs / repeat count.
//! Every loop iteration of every case does what the module's does (see
//! [`TEST_CASES`]); an allocation that fails makes the case return failure,
//! as the module's `return -1` does, never a panic.
//!
//! All workers share one [`Vmalloc`] and one [`PercpuAllocator`] on one
//! machine, as all kthreads share the kernel's.
//!
//! # Fidelity
//!
//! Faithful: the case list and mask bits, the per-iteration calls, sizes,
//! alignments, GFP flags, the setup/teardown of full_fit and long_busy_list
//! (their pointer arrays are vmalloc'd too), the shuffle, the repeat/loop
//! normalisation (`<= 0` → 1, `nr_threads` clamped to 1..=65535) and the K
//! (6.17) classification: passed if the case returned 0 and is not xfail,
//! xfailed if it returned non-zero and is xfail, failed otherwise.
//! Simplified: the pointer arrays' contents stay in host memory (the arrays
//! are allocated and mapped, the pointer stores are not emulated);
//! `kvfree_rcu` objects are freed after a grace period of the engine's RCU
//! (the workers report quiescent states at vmalloc/vfree, which may sleep);
//! `vm_map_ram_test`
//! returns failure where the module would dereference NULL.
//! Instrumented: times are measured host time of the emulation, not a
//! kernel's; the "cycles" are the host's counter ([`clock::ticks`]: TSC on
//! x86_64, CNTVCT_EL0 on aarch64 — the latter is what arm64's `get_cycles()`
//! reads).
//!
//! [`run`] also tears down what the run left behind so that the machine is
//! as it was found, apart from the page-table pages the vmalloc range
//! gained (the kernel never frees those either): empty percpu chunks are
//! destroyed, lazy vmap areas purged and every pcp list drained.

use mmlab_engine::barrier::BarrierCounts;
use mmlab_engine::clock;
use mmlab_engine::pgtable::{AddressSpace, mmu};
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::tlb::{TlbiCounts, TlbiKind};
use mmlab_engine::vmstat::{VmCounts, VmEvent};
use mmlab_engine::{Cpu, Gfp, Machine, PAGE_SIZE, Pfn};
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::percpu::PercpuAllocator;
use mmlab_vmalloc::{Vmalloc, VmallocCounts};
use std::fmt::Write as _;
use std::sync::Barrier;
use std::time::Instant;

/// One entry of the module's `test_case_array`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestCase {
    /// `test_name`.
    pub name: &'static str,
    /// Expected to fail.
    pub xfail: bool,
}

/// Number of test cases (K, 6.17).
pub const NR_TEST_CASES: usize = 11;

/// The module's `test_case_array`; bit `i` of `run_test_mask` selects entry `i`.
pub const TEST_CASES: [TestCase; NR_TEST_CASES] = [
    TestCase { name: "fix_size_alloc_test", xfail: false },
    TestCase { name: "full_fit_alloc_test", xfail: false },
    TestCase { name: "long_busy_list_alloc_test", xfail: false },
    TestCase { name: "random_size_alloc_test", xfail: false },
    TestCase { name: "fix_align_alloc_test", xfail: false },
    TestCase { name: "random_size_align_alloc_test", xfail: false },
    TestCase { name: "align_shift_alloc_test", xfail: true },
    TestCase { name: "pcpu_alloc_test", xfail: false },
    TestCase { name: "kvfree_rcu_1_arg_vmalloc_test", xfail: false },
    TestCase { name: "kvfree_rcu_2_arg_vmalloc_test", xfail: false },
    TestCase { name: "vm_map_ram_test", xfail: false },
];

/// `USHRT_MAX`: the module's bound on `nr_threads`.
const MAX_THREADS: i32 = u16::MAX as i32;
/// `THREAD_ALIGN << 1` on arm64 with VMAP_STACK and 16 KiB stacks.
const FIX_ALIGN: u64 = 64 << 10;
/// long_busy_list_alloc_test's busy areas.
const LONG_BUSY_LIST_AREAS: usize = 15000;
/// `offsetof(struct test_kvfree_rcu, array)`: after a 16-byte `rcu_head`.
const KVFREE_ARRAY_OFFSET: u64 = 16;
/// `BITS_PER_LONG`.
const BITS_PER_LONG: u32 = 64;

/// The module parameters, as given (ints and bools like the module's).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    pub run_test_mask: i32,
    pub nr_threads: i32,
    pub test_loop_count: i32,
    pub test_repeat_count: i32,
    pub sequential_test_order: bool,
    pub nr_pages: i32,
    pub use_huge: bool,
    /// Objects of pcpu_alloc_test: 35000 in K (a constant); a parameter
    /// (`nr_pcpu_objects`) in newer kernels (M).
    pub nr_pcpu_objects: i32,
    /// mmlab extension (instrumented, not in the module): long_busy_list
    /// sleeps this many ms between its two vmallocs and the two vfrees, as
    /// the `msleep(1)` experiment of the huge-vmalloc-by-default thread
    /// did. The sleep is emulated time (whole jiffies at HZ = 250, as
    /// msleep rounds): it is not measured or modelled (so it does not
    /// dilute the result), but the per-CPU vmstat work (`vmstat_update` →
    /// `decay_pcp_high`) runs once per emulated `sysctl_stat_interval`
    /// (1 s) that passes.
    pub msleep_before_free: u32,
    /// mmlab extension: sample the pages on the pcp lists every this many
    /// long_busy_list iterations (0: never), into
    /// [`WorkerReport::pcp_series`].
    pub pcp_sample_interval: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            run_test_mask: 7,
            nr_threads: 0,
            test_loop_count: 1_000_000,
            test_repeat_count: 1,
            sequential_test_order: false,
            nr_pages: 0,
            use_huge: false,
            nr_pcpu_objects: 35000,
            msleep_before_free: 0,
            pcp_sample_interval: 0,
        }
    }
}

/// The parameter names `key=value` accepts (the last two are mmlab's).
pub const PARAM_NAMES: [&str; 10] = [
    "nr_threads",
    "sequential_test_order",
    "test_repeat_count",
    "test_loop_count",
    "nr_pages",
    "use_huge",
    "run_test_mask",
    "nr_pcpu_objects",
    "msleep_before_free",
    "pcp_sample_interval",
];

/// `kstrtobool()`, as module bool parameters are parsed.
fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "1" | "y" | "Y" | "yes" | "true" | "on" => Ok(true),
        "0" | "n" | "N" | "no" | "false" | "off" => Ok(false),
        _ => Err(format!("bad value {value:?} for {key}: expected a bool (0|1|y|n)")),
    }
}

fn parse_int(key: &str, value: &str) -> Result<i32, String> {
    // param_set_int: kstrtoint with base 0 (decimal, 0x hex, 0 octal).
    let (neg, digits) = match value.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let parsed = if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        i64::from_str_radix(h, 16)
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8)
    } else {
        digits.parse::<i64>()
    };
    let v = parsed.map_err(|e| format!("bad value {value:?} for {key}: {e}"))?;
    let v = if neg { -v } else { v };
    i32::try_from(v).map_err(|_| format!("bad value {value:?} for {key}: out of range for an int"))
}

impl Params {
    /// Apply one `key=value` (a module parameter, as modprobe takes it).
    pub fn set(&mut self, kv: &str) -> Result<(), String> {
        let Some((key, value)) = kv.split_once('=') else {
            return Err(format!(
                "test-vmalloc expects parameters as key=value, got {kv:?}; parameters: {}",
                PARAM_NAMES.join(", ")
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "nr_threads" => self.nr_threads = parse_int(key, value)?,
            "sequential_test_order" => self.sequential_test_order = parse_bool(key, value)?,
            "test_repeat_count" => self.test_repeat_count = parse_int(key, value)?,
            "test_loop_count" => self.test_loop_count = parse_int(key, value)?,
            "nr_pages" => self.nr_pages = parse_int(key, value)?,
            "use_huge" => self.use_huge = parse_bool(key, value)?,
            "run_test_mask" => {
                // The module tests bit i for each of its 11 cases and ignores
                // the rest: mask 0 (or only higher bits) loads, runs nothing
                // and reports nothing. mmlab refuses both rather than print
                // a run of nothing that looks like success.
                let v = parse_int(key, value)?;
                let all = (1u32 << NR_TEST_CASES) - 1;
                if v == 0 {
                    return Err(format!(
                        "run_test_mask={value} selects no test case (the module would run nothing); bits 0..={} select the {NR_TEST_CASES} cases, {all:#x} all of them",
                        NR_TEST_CASES - 1
                    ));
                }
                let extra = v as u32 & !all;
                if extra != 0 {
                    return Err(format!(
                        "run_test_mask={value} has bits {extra:#x} above the {NR_TEST_CASES} test cases of Linux 6.17 (the module ignores them); bits 0..={} select cases, {all:#x} all of them",
                        NR_TEST_CASES - 1
                    ));
                }
                self.run_test_mask = v;
            }
            "nr_pcpu_objects" => {
                let v = parse_int(key, value)?;
                if v <= 0 {
                    return Err(format!("bad value {value:?} for {key}: expected a positive number"));
                }
                self.nr_pcpu_objects = v;
            }
            "msleep_before_free" | "pcp_sample_interval" => {
                let v = parse_int(key, value)?;
                let v = u32::try_from(v)
                    .map_err(|_| format!("bad value {value:?} for {key}: expected 0 or a positive number"))?;
                if key == "msleep_before_free" {
                    self.msleep_before_free = v;
                } else {
                    self.pcp_sample_interval = v;
                }
            }
            _ => {
                return Err(format!("unknown test_vmalloc parameter {key:?}; parameters: {}", PARAM_NAMES.join(", ")));
            }
        }
        Ok(())
    }

    /// Workers: `clamp(nr_threads, 1, USHRT_MAX)`.
    pub fn threads(&self) -> usize {
        self.nr_threads.clamp(1, MAX_THREADS) as usize
    }
    /// `test_loop_count`, at least 1.
    pub fn loops(&self) -> u64 {
        self.test_loop_count.max(1) as u64
    }
    /// `test_repeat_count`, at least 1.
    pub fn repeats(&self) -> u64 {
        self.test_repeat_count.max(1) as u64
    }
    /// `nr_pages > 0 ? nr_pages : 1`.
    pub fn pages(&self) -> usize {
        self.nr_pages.max(1) as usize
    }
    /// Whether `run_test_mask` selects case `index`.
    pub fn selected(&self, index: usize) -> bool {
        (self.run_test_mask as u32) & (1 << index) != 0
    }

    /// mmlab's bound on the work of one case on one worker (see
    /// [`crate::cli::MAX_CALLS_PER_CASE`]): `test_loop_count ×
    /// test_repeat_count` after the module's normalisation.
    pub fn check_bounds(&self) -> Result<(), String> {
        let calls = self.loops().saturating_mul(self.repeats());
        if calls > crate::cli::MAX_CALLS_PER_CASE {
            return Err(format!(
                "test_loop_count={} x test_repeat_count={} = {calls} loop iterations per case and worker; mmlab runs at most {} (INT_MAX, the largest test_loop_count the module takes)",
                self.test_loop_count,
                self.test_repeat_count,
                crate::cli::MAX_CALLS_PER_CASE
            ));
        }
        // Each emulated second of msleep_before_free runs vmstat_update once
        // per CPU, a loop of its own: bound those runs the same way.
        let stat_runs = calls.saturating_mul(u64::from(self.msleep_before_free)) / 1000;
        if stat_runs > crate::cli::MAX_CALLS_PER_CASE {
            return Err(format!(
                "msleep_before_free={} over {calls} loop iterations is {stat_runs} emulated vmstat_update runs; mmlab runs at most {}",
                self.msleep_before_free,
                crate::cli::MAX_CALLS_PER_CASE
            ));
        }
        Ok(())
    }

    /// What the module's normalisation changed in values given explicitly
    /// (`init_test_configuration()`: `test_loop_count` and
    /// `test_repeat_count` `<= 0` become 1), as notes for the user.
    pub fn normalisation_notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        for (key, v) in [("test_loop_count", self.test_loop_count), ("test_repeat_count", self.test_repeat_count)] {
            if v <= 0 {
                n.push(format!("{key}={v} is taken as 1, as test_vmalloc.c's init_test_configuration() does"));
            }
        }
        n
    }

    /// The parameters after the module's normalisation, as `key=value`s.
    pub fn effective(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("run_test_mask", i64::from(self.run_test_mask)),
            ("nr_threads", self.threads() as i64),
            ("test_loop_count", self.loops() as i64),
            ("test_repeat_count", self.repeats() as i64),
            ("sequential_test_order", i64::from(self.sequential_test_order)),
            ("nr_pages", self.pages() as i64),
            ("use_huge", i64::from(self.use_huge)),
            ("nr_pcpu_objects", i64::from(self.nr_pcpu_objects)),
            ("msleep_before_free", i64::from(self.msleep_before_free)),
            ("pcp_sample_interval", i64::from(self.pcp_sample_interval)),
        ]
    }
}

/// The modes of test_vmalloc.sh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `sequential_test_order=1 test_repeat_count=3`.
    Performance,
    /// `test_loop_count=10000 test_repeat_count=10`.
    Smoke,
    /// `nr_threads=$NUM_CPUS test_repeat_count=20`.
    Stress,
}

impl Mode {
    /// The parameters the script passes for this mode, for a machine of
    /// `cpus` CPUs.
    pub fn params(self, cpus: usize) -> Vec<String> {
        match self {
            Mode::Performance => vec!["sequential_test_order=1".into(), "test_repeat_count=3".into()],
            Mode::Smoke => vec!["test_loop_count=10000".into(), "test_repeat_count=10".into()],
            Mode::Stress => vec![format!("nr_threads={cpus}"), "test_repeat_count=20".into()],
        }
    }
}

/// Parameters and machine size from the command line: the mode's
/// parameters first, then the explicit `key=value`s (which override them;
/// test_vmalloc.sh takes either a mode or parameters, mmlab takes both).
/// `cpus` is `--cpus` if given; the result's CPU count is `cpus`, else
/// max(2, nr_threads) (in stress mode without `--cpus`: 2, and
/// `nr_threads` = that count, as the script uses the machine's CPU count).
pub fn resolve(args: &[String], mode: Option<Mode>, cpus: Option<usize>) -> Result<(Params, usize), String> {
    let mut p = Params::default();
    if let Some(mode) = mode {
        for kv in mode.params(cpus.unwrap_or(2)) {
            p.set(&kv)?;
        }
    }
    for kv in args {
        p.set(kv)?;
    }
    p.check_bounds()?;
    let threads = p.threads();
    let nr_cpus = cpus.unwrap_or(threads.max(2));
    if nr_cpus > mmlab_engine::machine::NR_CPUS {
        return Err(format!(
            "nr_threads={threads}: each worker runs on an emulated CPU of its own, and a machine has at most {} CPUs",
            mmlab_engine::machine::NR_CPUS
        ));
    }
    if threads > nr_cpus {
        return Err(format!(
            "nr_threads={threads} needs at least {threads} CPUs (each worker runs on an emulated CPU of its own); got --cpus {nr_cpus}"
        ));
    }
    Ok((p, nr_cpus))
}

/// One case's results on one worker (`struct test_case_data`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseResult {
    /// Index in [`TEST_CASES`] (mask bit).
    pub index: usize,
    pub name: &'static str,
    pub passed: u64,
    pub failed: u64,
    pub xfailed: u64,
    pub repeat: u64,
    pub loops: u64,
    /// Measured host µs per repetition (elapsed / repeat, rounded down).
    pub avg_usec: u64,
    /// Measured host ns of all repetitions.
    pub elapsed_ns: u64,
    /// Why the case returned failure the first time it did (the kernel's
    /// log would show the allocator's warning).
    pub first_error: Option<String>,
}

/// One worker's results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerReport {
    /// Worker id = emulated CPU id.
    pub worker: usize,
    /// Selected cases in run order (after the shuffle).
    pub run_order: Vec<&'static str>,
    /// Selected cases in mask-bit order (the order the module prints).
    pub cases: Vec<CaseResult>,
    /// Host counter ticks from the first case's start to the last's end.
    pub cycles: u64,
    /// `(iteration, pcp pages)` samples of long_busy_list (`pcp_sample_interval`).
    pub pcp_series: Vec<(u64, i64)>,
}

/// Counter deltas over the workers' run (teardown excluded).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// Barriers by kind ("dsb(ishst)", "isb", ...), non-zero only.
    #[serde(with = "crate::shard::static_names")]
    pub barriers: Vec<(&'static str, u64)>,
    /// Modelled barrier time (model backend only), ns.
    pub barrier_modelled_ns: u64,
    /// TLBIs by kind, non-zero only.
    #[serde(with = "crate::shard::static_names")]
    pub tlbis: Vec<(&'static str, u64)>,
    /// Modelled TLBI time (cost profile), ns.
    pub tlbi_modelled_ns: u64,
    pub pcp_refill: u64,
    pub pcp_refill_pages: u64,
    pub pcp_drain: u64,
    pub pcp_drain_pages: u64,
    /// Pages freed onto pcp lists (`pgfree - free_one_page_pages`).
    pub pcp_free_pages: u64,
    /// Pages allocated straight from the buddy lists (bypassing the pcp).
    pub rmqueue_buddy_pages: u64,
    /// `decay_pcp_high` runs that drained (with `msleep_before_free`).
    pub pcp_decay_drain: u64,
    pub zone_lock_acquire: u64,
    pub zone_lock_contended: u64,
    /// Measured host ns, 0 unless `lock_stat`.
    pub zone_lock_hold_ns: u64,
    pub buddy_merge: u64,
    pub pgalloc_normal: u64,
    pub pgfree: u64,
    /// Page allocations that returned NULL.
    pub pgalloc_fail: u64,
    pub vmallocs: u64,
    pub vfrees: u64,
    pub vmalloc_purges: u64,
    pub purged_pages: u64,
    pub huge_fallbacks: u64,
    /// RCU grace periods.
    pub grace_periods: u64,
    /// `synchronize_rcu()` calls (each waited for a grace period).
    pub synchronize_rcu: u64,
    /// Modelled time of those waits (cost profile), ns.
    pub rcu_modelled_ns: u64,
}

impl Counters {
    /// All modelled time: barriers (model backend), TLBIs with their
    /// completion waits, and `synchronize_rcu()` waits; ns.
    pub fn modelled_ns(&self) -> u64 {
        self.barrier_modelled_ns + self.tlbi_modelled_ns + self.rcu_modelled_ns
    }

    /// Barriers of one kind (for example `"dsb(ishst)"`).
    pub fn barrier(&self, name: &str) -> u64 {
        self.barriers.iter().find(|(k, _)| *k == name).map_or(0, |&(_, n)| n)
    }

    /// TLBIs of every kind.
    pub fn tlbi_total(&self) -> u64 {
        self.tlbis.iter().map(|&(_, n)| n).sum()
    }
}

/// What the machine looked like when run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineInfo {
    pub nr_cpus: usize,
    pub mem_bytes: u64,
    pub host_arch: &'static str,
    pub barrier_backend: &'static str,
    pub cost_profile: &'static str,
    pub vmap_allow_huge: bool,
    pub contpte: bool,
    pub huge_by_default: bool,
    pub align_size_to_huge: bool,
}

/// The result of [`run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub params: Params,
    pub seed: u64,
    pub machine: MachineInfo,
    pub workers: Vec<WorkerReport>,
    pub counters: Counters,
    /// Measured host time of the whole run (workers only), µs.
    pub wall_usec: u64,
}

impl Report {
    /// Whether a case that is not expected to fail failed (or an xfail case
    /// passed): the command's exit status is 1 then.
    pub fn any_failed(&self) -> bool {
        self.workers.iter().flat_map(|w| &w.cases).any(|c| c.failed > 0)
    }
}

struct Snapshot {
    ev: VmCounts,
    barriers: BarrierCounts,
    tlbi: TlbiCounts,
    vm: VmallocCounts,
    rcu: mmlab_engine::rcu::RcuCounts,
}

impl Snapshot {
    fn take(m: &Machine, vm: &Vmalloc<'_, '_>) -> Snapshot {
        Snapshot {
            ev: m.vm_events(),
            barriers: m.barrier_counts(),
            tlbi: m.tlbi_counts(),
            vm: vm.counts(),
            rcu: m.rcu_counts(),
        }
    }

    fn delta(&self, before: &Snapshot) -> Counters {
        let ev = self.ev.delta(&before.ev);
        let (a, b) = (&self.barriers, &before.barriers);
        let bar = BarrierCounts {
            dmb: std::array::from_fn(|i| a.dmb[i].wrapping_sub(b.dmb[i])),
            dsb: std::array::from_fn(|i| a.dsb[i].wrapping_sub(b.dsb[i])),
            isb: a.isb.wrapping_sub(b.isb),
            modelled_ns: a.modelled_ns.wrapping_sub(b.modelled_ns),
        };
        let tlbis = TlbiKind::ALL
            .iter()
            .map(|&k| (k.name(), self.tlbi.get(k).wrapping_sub(before.tlbi.get(k))))
            .filter(|&(_, n)| n != 0)
            .collect();
        Counters {
            barriers: bar.iter().collect(),
            barrier_modelled_ns: bar.modelled_ns,
            tlbis,
            tlbi_modelled_ns: self.tlbi.modelled_ns.wrapping_sub(before.tlbi.modelled_ns),
            pcp_refill: ev.get(VmEvent::PcpRefill),
            pcp_refill_pages: ev.get(VmEvent::PcpRefillPages),
            pcp_drain: ev.get(VmEvent::PcpDrain),
            pcp_drain_pages: ev.get(VmEvent::PcpDrainPages),
            pcp_free_pages: ev.get(VmEvent::Pgfree) - ev.get(VmEvent::FreeOnePagePages),
            rmqueue_buddy_pages: ev.get(VmEvent::RmqueueBuddyPages),
            pcp_decay_drain: ev.get(VmEvent::PcpDecayDrain),
            zone_lock_acquire: ev.get(VmEvent::ZoneLockAcquire),
            zone_lock_contended: ev.get(VmEvent::ZoneLockContended),
            zone_lock_hold_ns: ev.get(VmEvent::ZoneLockHoldNs),
            buddy_merge: ev.get(VmEvent::BuddyMerge),
            pgalloc_normal: ev.get(VmEvent::PgallocNormal),
            pgfree: ev.get(VmEvent::Pgfree),
            pgalloc_fail: ev.get(VmEvent::PgallocFail),
            vmallocs: self.vm.vmallocs - before.vm.vmallocs,
            vfrees: self.vm.vfrees - before.vm.vfrees,
            vmalloc_purges: self.vm.purges - before.vm.purges,
            purged_pages: self.vm.purged_pages - before.vm.purged_pages,
            huge_fallbacks: self.vm.huge_fallbacks - before.vm.huge_fallbacks,
            grace_periods: self.rcu.grace_periods - before.rcu.grace_periods,
            synchronize_rcu: self.rcu.synchronize_rcu - before.rcu.synchronize_rcu,
            rcu_modelled_ns: self.rcu.modelled_ns - before.rcu.modelled_ns,
        }
    }
}

/// A worker's random stream: worker 0 uses `seed` itself.
fn worker_seed(seed: u64, worker: usize) -> u64 {
    seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The module's `shuffle_array`: j = get_random_u32_below(i), never i.
fn shuffle_array(arr: &mut [usize], rng: &mut Xoshiro256StarStar) {
    for i in (1..arr.len()).rev() {
        let j = rng.below(i as u64) as usize;
        arr.swap(i, j);
    }
}

/// Run test_vmalloc on `m` with `nr_threads` workers on CPUs 0..nr_threads
/// (none of which the caller may hold), then tear down (see the module
/// documentation). Errors only for a machine that cannot host the workers.
pub fn run<'m>(
    m: &'m Machine,
    pa: &PageAllocator<'m>,
    vm: &Vmalloc<'_, 'm>,
    params: &Params,
    seed: u64,
) -> Result<Report, String> {
    let nthreads = params.threads();
    if nthreads > m.nr_cpus() {
        return Err(format!("nr_threads={nthreads} needs {nthreads} CPUs; the machine has {}", m.nr_cpus()));
    }
    let cpus = (0..nthreads).map(|i| m.cpu(i)).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    let pcpu = PercpuAllocator::new();
    let before = Snapshot::take(m, vm);
    let start_barrier = Barrier::new(nthreads);
    let t0 = Instant::now();
    let workers: Vec<WorkerReport> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .into_iter()
            .enumerate()
            .map(|(i, cpu)| {
                let (pcpu, start_barrier) = (&pcpu, &start_barrier);
                std::thread::Builder::new()
                    .name(format!("vmalloc_test/{i}"))
                    .spawn_scoped(s, move || {
                        let ctx = Ctx {
                            cpu: &cpu,
                            vm,
                            pa,
                            pcpu,
                            asp: m.kernel_as(),
                            p: params,
                            rng: Xoshiro256StarStar::seed_from_u64(worker_seed(seed, i)),
                            slept_ms: 0,
                            pcp_series: Vec::new(),
                        };
                        worker(i, ctx, start_barrier)
                    })
                    .expect("spawn a worker thread")
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let wall_usec = t0.elapsed().as_micros() as u64;
    let counters = Snapshot::take(m, vm).delta(&before);
    // Teardown: the module's objects are all gone; what the allocators
    // cache goes back too.
    let cpu = m.cpu(0).map_err(|e| e.to_string())?;
    vm.kvfree_rcu_barrier(&cpu).map_err(|e| format!("teardown: {e}"))?;
    pcpu.shrink(vm, &cpu).map_err(|e| format!("teardown: {e}"))?;
    vm.purge_vmap_area_lazy(&cpu).expect("a CPU of this machine");
    pa.drain_all_pages(&cpu);
    let cfg = m.config();
    let vcfg = vm.config();
    Ok(Report {
        params: params.clone(),
        seed,
        machine: MachineInfo {
            nr_cpus: m.nr_cpus(),
            mem_bytes: cfg.mem_bytes,
            host_arch: std::env::consts::ARCH,
            barrier_backend: cfg.barrier_backend.name(),
            cost_profile: cfg.cost_profile.name,
            vmap_allow_huge: vcfg.vmap_allow_huge,
            contpte: vcfg.contpte,
            huge_by_default: vcfg.huge_by_default,
            align_size_to_huge: vcfg.align_size_to_huge,
        },
        workers,
        counters,
        wall_usec,
    })
}

/// `test_func()`: one worker.
fn worker(id: usize, mut ctx: Ctx<'_, '_, '_>, start: &Barrier) -> WorkerReport {
    let mut order: [usize; NR_TEST_CASES] = std::array::from_fn(|i| i);
    if !ctx.p.sequential_test_order {
        shuffle_array(&mut order, &mut ctx.rng);
    }
    let (repeat, loops) = (ctx.p.repeats(), ctx.p.loops());
    let mut cases: Vec<Option<CaseResult>> = vec![None; NR_TEST_CASES];
    start.wait();
    let t_start = clock::ticks();
    for &index in &order {
        if !ctx.p.selected(index) {
            continue;
        }
        let tc = TEST_CASES[index];
        let mut r = CaseResult {
            index,
            name: tc.name,
            passed: 0,
            failed: 0,
            xfailed: 0,
            repeat,
            loops,
            avg_usec: 0,
            elapsed_ns: 0,
            first_error: None,
        };
        let kt = Instant::now();
        for _ in 0..repeat {
            let ret = ctx.run_case(index);
            match (&ret, tc.xfail) {
                (Ok(()), false) => r.passed += 1,
                (Err(_), true) => r.xfailed += 1,
                _ => r.failed += 1,
            }
            if let Err(e) = ret
                && r.first_error.is_none()
            {
                r.first_error = Some(e);
            }
        }
        r.elapsed_ns = kt.elapsed().as_nanos() as u64;
        r.avg_usec = r.elapsed_ns / 1000 / repeat;
        cases[index] = Some(r);
    }
    let t_stop = clock::ticks();
    WorkerReport {
        worker: id,
        run_order: order.iter().filter(|&&i| ctx.p.selected(i)).map(|&i| TEST_CASES[i].name).collect(),
        cases: cases.into_iter().flatten().collect(),
        cycles: t_stop.wrapping_sub(t_start),
        pcp_series: std::mem::take(&mut ctx.pcp_series),
    }
}

/// A case's return value: `Err` is the module's `return -1`, with the reason.
type CaseRet = Result<(), String>;

/// What a case runs with: its CPU, the shared allocators, its random stream.
struct Ctx<'r, 'a, 'm> {
    cpu: &'r Cpu<'m>,
    vm: &'r Vmalloc<'a, 'm>,
    pa: &'r PageAllocator<'m>,
    pcpu: &'r PercpuAllocator,
    asp: AddressSpace,
    p: &'r Params,
    rng: Xoshiro256StarStar,
    /// Emulated time slept (`msleep_before_free`), ms.
    slept_ms: u64,
    pcp_series: Vec<(u64, i64)>,
}

impl Ctx<'_, '_, '_> {
    fn run_case(&mut self, index: usize) -> CaseRet {
        match index {
            0 => self.fix_size_alloc_test(),
            1 => self.full_fit_alloc_test(),
            2 => self.long_busy_list_alloc_test(),
            3 => self.random_size_alloc_test(),
            4 => self.fix_align_alloc_test(),
            5 => self.random_size_align_alloc_test(),
            6 => self.align_shift_alloc_test(),
            7 => self.pcpu_alloc_test(),
            8 => self.kvfree_rcu_1_arg_vmalloc_test(),
            9 => self.kvfree_rcu_2_arg_vmalloc_test(),
            10 => self.vm_map_ram_test(),
            _ => unreachable!("test case index {index}"),
        }
    }

    fn vmalloc(&self, size: u64) -> Result<u64, String> {
        self.vm.vmalloc(self.cpu, size).map_err(|e| e.to_string())
    }

    fn vmalloc_node(&self, size: u64, align: u64) -> Result<u64, String> {
        self.vm.__vmalloc_node(self.cpu, size, align, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO).map_err(|e| e.to_string())
    }

    fn vfree(&self, addr: u64) -> CaseRet {
        self.vm.vfree(self.cpu, addr).map_err(|e| e.to_string())
    }

    /// `vfree()` of a pointer that may be NULL (a failed allocation).
    fn vfree_opt(&self, addr: Option<u64>) -> CaseRet {
        addr.map_or(Ok(()), |a| self.vfree(a))
    }

    /// `msleep(ms)` in emulated time: the task sleeps
    /// `msecs_to_jiffies(ms) + 1` jiffies (HZ = 250, arm64's defconfig, so
    /// msleep(1) is 8 ms), and every `sysctl_stat_interval` (HZ jiffies =
    /// 1 s) that passes runs this CPU's `vmstat_update`, whose
    /// `refresh_cpu_vm_stats` decays the pcp high (`decay_pcp_high`).
    fn msleep(&mut self, ms: u32) {
        const HZ: u64 = 250;
        const STAT_INTERVAL_MS: u64 = 1000;
        if ms == 0 {
            return;
        }
        let jiffies = (u64::from(ms) * HZ).div_ceil(1000) + 1;
        let before = self.slept_ms / STAT_INTERVAL_MS;
        self.slept_ms += jiffies * 1000 / HZ;
        for _ in before..self.slept_ms / STAT_INTERVAL_MS {
            self.pa.decay_pcp_high(self.cpu);
        }
    }

    /// `*(u8 *)va = v`.
    fn poke(&self, va: u64, v: u8) -> CaseRet {
        mmu::write_bytes(self.cpu, &self.asp, va, &[v]).map_err(|e| format!("write to {va:#x}: {e}"))
    }

    fn fix_size_alloc_test(&mut self) -> CaseRet {
        let size = self.p.pages() as u64 * PAGE_SIZE;
        for _ in 0..self.p.loops() {
            let ptr = if self.p.use_huge {
                self.vm.vmalloc_huge(self.cpu, size, Gfp::GFP_KERNEL).map_err(|e| e.to_string())?
            } else {
                self.vmalloc(size)?
            };
            self.poke(ptr, 0)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    fn full_fit_alloc_test(&mut self) -> CaseRet {
        // fls(num_online_cpus()) * (32 MiB / PAGE_SIZE) = lazy_max_pages().
        let fls = u64::BITS - (self.cpu.machine().nr_cpus() as u64).leading_zeros();
        let junk_length = (u64::from(fls) * ((32 << 20) / PAGE_SIZE)) as usize;
        let ptr_array = self.vmalloc(8 * junk_length as u64)?;
        let junk_array = match self.vmalloc(8 * junk_length as u64) {
            Ok(a) => a,
            Err(e) => {
                self.vfree(ptr_array)?;
                return Err(e);
            }
        };
        let mut ptr = Vec::with_capacity(junk_length);
        let mut junk = Vec::with_capacity(junk_length);
        for _ in 0..junk_length {
            ptr.push(self.vmalloc(PAGE_SIZE).ok());
            junk.push(self.vmalloc(PAGE_SIZE).ok());
        }
        let mut rv = Ok(());
        for &j in &junk {
            rv = rv.and(self.vfree_opt(j));
        }
        if rv.is_ok() {
            rv = (|| {
                for _ in 0..self.p.loops() {
                    let tmp = self.vmalloc(PAGE_SIZE)?;
                    self.poke(tmp, 1)?;
                    self.vfree(tmp)?;
                }
                Ok(())
            })();
        }
        for &p in &ptr {
            rv = rv.and(self.vfree_opt(p));
        }
        rv.and(self.vfree(ptr_array)).and(self.vfree(junk_array))
    }

    fn long_busy_list_alloc_test(&mut self) -> CaseRet {
        let array = self.vmalloc(8 * LONG_BUSY_LIST_AREAS as u64)?;
        let ptr: Vec<Option<u64>> = (0..LONG_BUSY_LIST_AREAS).map(|_| self.vmalloc(PAGE_SIZE).ok()).collect();
        let rv = (|| {
            for i in 0..self.p.loops() {
                let every = u64::from(self.p.pcp_sample_interval);
                if every != 0 && i % every == 0 {
                    self.pcp_series.push((i, self.pa.pcp_pages()));
                }
                let ptr_1 = self.vmalloc(100 * PAGE_SIZE)?;
                let ptr_2 = match self.vmalloc(PAGE_SIZE) {
                    Ok(p) => p,
                    Err(e) => {
                        self.vfree(ptr_1)?;
                        return Err(e);
                    }
                };
                self.poke(ptr_1, 0)?;
                self.poke(ptr_2, 1)?;
                self.msleep(self.p.msleep_before_free);
                self.vfree(ptr_1)?;
                self.vfree(ptr_2)?;
            }
            Ok(())
        })();
        let mut rv = rv;
        for &p in &ptr {
            rv = rv.and(self.vfree_opt(p));
        }
        rv.and(self.vfree(array))
    }

    fn random_size_alloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            // get_random_u32_inclusive(1, 100)
            let n = 1 + self.rng.below(100);
            let p = self.vmalloc(n * PAGE_SIZE)?;
            self.poke(p, 1)?;
            self.vfree(p)?;
        }
        Ok(())
    }

    fn fix_align_alloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let ptr = self.vmalloc_node(5 * PAGE_SIZE, FIX_ALIGN)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    fn random_size_align_alloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            // get_random_u8()
            let rnd = self.rng.next_u64() as u8;
            let align = 1u64 << (rnd % 23);
            let size = (u64::from(rnd % 10) + 1) * PAGE_SIZE;
            let ptr = self.vmalloc_node(size, align)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    /// Expected to fail: an alignment beyond the vmalloc range.
    fn align_shift_alloc_test(&mut self) -> CaseRet {
        for i in 0..BITS_PER_LONG {
            let ptr = self.vmalloc_node(PAGE_SIZE, 1u64 << i).map_err(|e| format!("align 1<<{i}: {e}"))?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    fn pcpu_alloc_test(&mut self) -> CaseRet {
        let n = self.p.nr_pcpu_objects.max(1) as usize;
        let array = self.vmalloc(8 * n as u64)?;
        let mut rv = Ok(());
        let mut pcpu = Vec::with_capacity(n);
        for _ in 0..n {
            // get_random_u32_inclusive(1, PAGE_SIZE / 4)
            let size = 1 + self.rng.below(PAGE_SIZE / 4);
            // 1 << get_random_u32_inclusive(1, 11)
            let align = 1u64 << (1 + self.rng.below(11));
            match self.pcpu.alloc_percpu(self.vm, self.cpu, size, align) {
                Ok(p) => pcpu.push(p),
                Err(e) => {
                    if rv.is_ok() {
                        rv = Err(e.to_string());
                    }
                }
            }
        }
        for p in pcpu {
            if let Err(e) = self.pcpu.free_percpu(self.vm, self.cpu, p)
                && rv.is_ok()
            {
                rv = Err(e.to_string());
            }
        }
        rv.and(self.vfree(array))
    }

    fn kvfree_rcu_1_arg_vmalloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let p = self.vmalloc(PAGE_SIZE)?;
            self.poke(p + KVFREE_ARRAY_OFFSET, b'a')?;
            self.vm.kvfree_rcu_mightsleep(self.cpu, p).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn kvfree_rcu_2_arg_vmalloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let p = self.vmalloc(PAGE_SIZE)?;
            self.poke(p + KVFREE_ARRAY_OFFSET, b'a')?;
            self.vm.kvfree_rcu(self.cpu, p).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn vm_map_ram_test(&mut self) -> CaseRet {
        let map_nr_pages = self.p.pages();
        let mut slots: Vec<Option<Pfn>> = vec![None; map_nr_pages];
        let nr_allocated = self.pa.alloc_pages_bulk(self.cpu, Gfp::GFP_KERNEL, &mut slots);
        let pages: Vec<Pfn> = slots.iter().flatten().copied().collect();
        let mut rv = if nr_allocated != map_nr_pages {
            Err(format!("alloc_pages_bulk: {nr_allocated} of {map_nr_pages} pages"))
        } else {
            (|| {
                for _ in 0..self.p.loops() {
                    let v = self.vm.vm_map_ram(self.cpu, &pages).map_err(|e| format!("vm_map_ram: {e}"))?;
                    self.poke(v, b'a')?;
                    self.vm.vm_unmap_ram(self.cpu, v, map_nr_pages).map_err(|e| format!("vm_unmap_ram: {e}"))?;
                }
                Ok(())
            })()
        };
        for p in pages {
            if let Err(e) = self.pa.free_pages(self.cpu, p, 0)
                && rv.is_ok()
            {
                rv = Err(format!("__free_page: {e}"));
            }
        }
        rv
    }
}

/// The module's pr_info lines, with a header saying what is measured and
/// what is counted, and the counters at the end (as `#` lines).
pub fn render_text(r: &Report, settings: &[String]) -> String {
    let mut s = String::new();
    let mi = &r.machine;
    let params: Vec<String> = r.params.effective().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(
        s,
        "# mmlab test-vmalloc: lib/test_vmalloc.c (Linux 6.17) on an emulated arm64 machine: {} CPUs, {} MiB, seed {}",
        mi.nr_cpus,
        mi.mem_bytes >> 20,
        r.seed
    );
    let _ = writeln!(s, "# parameters: {}", params.join(" "));
    let _ = writeln!(
        s,
        "# vmalloc: vmap_allow_huge={} contpte={} huge_by_default={} align_size_to_huge={}; barrier backend {}; cost profile {}; host {}{}",
        u8::from(mi.vmap_allow_huge),
        u8::from(mi.contpte),
        u8::from(mi.huge_by_default),
        u8::from(mi.align_size_to_huge),
        mi.barrier_backend,
        mi.cost_profile,
        mi.host_arch,
        if settings.is_empty() { String::new() } else { format!("; --set {}", settings.join(" --set ")) }
    );
    let _ = writeln!(
        s,
        "# avg usec and cycles are MEASURED host time of the emulation (wall clock; cycles = host counter ticks), not kernel time."
    );
    let _ = writeln!(
        s,
        "# Counters below are counted events of the emulation (barriers, TLBIs, pcp refills/drains, zone lock, merges, purges);"
    );
    let _ = writeln!(
        s,
        "# *_modelled_ns are MODELLED (cost profile / model backend); zone_lock_hold_ns is measured host time (lock_stat=1 only)."
    );
    for w in &r.workers {
        for c in &w.cases {
            let _ = writeln!(
                s,
                "Summary: {} passed: {} failed: {} xfailed: {} repeat: {} loops: {} avg: {} usec",
                c.name, c.passed, c.failed, c.xfailed, c.repeat, c.loops, c.avg_usec
            );
        }
        let _ = writeln!(s, "All test took worker{}={} cycles", w.worker, w.cycles);
    }
    for w in &r.workers {
        for c in &w.cases {
            if let Some(e) = &c.first_error {
                let kind = if TEST_CASES[c.index].xfail { "expected failure" } else { "failure" };
                let _ = writeln!(s, "# worker{} {}: {kind}: {e}", w.worker, c.name);
            }
        }
    }
    let c = &r.counters;
    let _ = writeln!(s, "# counters over the run (workers only; teardown excluded), {} usec wall:", r.wall_usec);
    let bars: Vec<String> = c.barriers.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(s, "#   barriers: {} (modelled {} ns)", or_none(&bars), c.barrier_modelled_ns);
    let tlbis: Vec<String> = c.tlbis.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(s, "#   tlbi: {} (modelled {} ns)", or_none(&tlbis), c.tlbi_modelled_ns);
    for (k, v) in counter_fields(c) {
        let _ = writeln!(s, "#   {k}: {v}");
    }
    s
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() { "none".to_string() } else { v.join(" ") }
}

/// The scalar counters by name, in report order.
fn counter_fields(c: &Counters) -> [(&'static str, u64); 24] {
    [
        ("pcp_refill", c.pcp_refill),
        ("pcp_refill_pages", c.pcp_refill_pages),
        ("pcp_drain", c.pcp_drain),
        ("pcp_drain_pages", c.pcp_drain_pages),
        ("pcp_free_pages", c.pcp_free_pages),
        ("rmqueue_buddy_pages", c.rmqueue_buddy_pages),
        ("pcp_decay_drain", c.pcp_decay_drain),
        ("zone_lock_acquire", c.zone_lock_acquire),
        ("zone_lock_contended", c.zone_lock_contended),
        ("zone_lock_hold_ns", c.zone_lock_hold_ns),
        ("buddy_merge", c.buddy_merge),
        ("pgalloc_normal", c.pgalloc_normal),
        ("pgfree", c.pgfree),
        ("pgalloc_fail", c.pgalloc_fail),
        ("vmallocs", c.vmallocs),
        ("vfrees", c.vfrees),
        ("vmalloc_purges", c.vmalloc_purges),
        ("purged_pages", c.purged_pages),
        ("huge_fallbacks", c.huge_fallbacks),
        ("grace_periods", c.grace_periods),
        ("synchronize_rcu", c.synchronize_rcu),
        ("rcu_modelled_ns", c.rcu_modelled_ns),
        ("barrier_modelled_ns", c.barrier_modelled_ns),
        ("tlbi_modelled_ns", c.tlbi_modelled_ns),
    ]
}

/// A JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    mmlab_engine::trace::json_str(&mut o, s);
    o
}

fn json_map(pairs: &[(&str, u64)]) -> String {
    let v: Vec<String> = pairs.iter().map(|(k, n)| format!("{}:{n}", json_str(k))).collect();
    format!("{{{}}}", v.join(","))
}

/// The report as one JSON object (one line).
pub fn render_json(r: &Report, settings: &[String]) -> String {
    let mi = &r.machine;
    let params: Vec<String> = r.params.effective().iter().map(|(k, v)| format!("{}:{v}", json_str(k))).collect();
    let sets: Vec<String> = settings.iter().map(|s| json_str(s)).collect();
    let workers: Vec<String> = r
        .workers
        .iter()
        .map(|w| {
            let cases: Vec<String> = w
                .cases
                .iter()
                .map(|c| {
                    format!(
                        "{{\"name\":{},\"passed\":{},\"failed\":{},\"xfailed\":{},\"repeat\":{},\"loops\":{},\"avg_usec\":{},\"error\":{}}}",
                        json_str(c.name),
                        c.passed,
                        c.failed,
                        c.xfailed,
                        c.repeat,
                        c.loops,
                        c.avg_usec,
                        c.first_error.as_deref().map_or("null".to_string(), json_str)
                    )
                })
                .collect();
            let order: Vec<String> = w.run_order.iter().map(|n| json_str(n)).collect();
            format!(
                "{{\"worker\":{},\"cycles\":{},\"run_order\":[{}],\"tests\":[{}]}}",
                w.worker,
                w.cycles,
                order.join(","),
                cases.join(",")
            )
        })
        .collect();
    let c = &r.counters;
    let mut counters: Vec<String> =
        vec![format!("\"barriers\":{}", json_map(&c.barriers)), format!("\"tlbi\":{}", json_map(&c.tlbis))];
    counters.extend(counter_fields(c).iter().map(|(k, v)| format!("{}:{v}", json_str(k))));
    format!(
        concat!(
            "{{\"tool\":\"mmlab test-vmalloc\",\"module\":\"lib/test_vmalloc.c (Linux 6.17)\",",
            "\"params\":{{{}}},\"seed\":{},",
            "\"machine\":{{\"cpus\":{},\"mem_bytes\":{},\"host_arch\":{},\"barrier_backend\":{},\"cost_profile\":{},",
            "\"vmalloc\":{{\"vmap_allow_huge\":{},\"contpte\":{},\"huge_by_default\":{},\"align_size_to_huge\":{}}},",
            "\"set\":[{}]}},",
            "\"time\":{{\"kind\":\"measured host wall time of the emulation\",\"wall_usec\":{}}},",
            "\"workers\":[{}],",
            "\"counters\":{{\"scope\":\"workers only, teardown excluded\",{}}},",
            "\"failed\":{}}}\n"
        ),
        params.join(","),
        r.seed,
        mi.nr_cpus,
        mi.mem_bytes,
        json_str(mi.host_arch),
        json_str(mi.barrier_backend),
        json_str(mi.cost_profile),
        mi.vmap_allow_huge,
        mi.contpte,
        mi.huge_by_default,
        mi.align_size_to_huge,
        sets.join(","),
        r.wall_usec,
        workers.join(","),
        counters.join(","),
        r.any_failed()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse_like_module_parameters() {
        let mut p = Params::default();
        p.set("run_test_mask=0x7ff").unwrap();
        assert_eq!(p.run_test_mask, 2047);
        p.set("use_huge=Y").unwrap();
        assert!(p.use_huge);
        p.set("nr_threads=-3").unwrap();
        assert_eq!(p.threads(), 1);
        p.set("test_loop_count=0").unwrap();
        assert_eq!(p.loops(), 1);
        assert!(p.set("bogus=1").unwrap_err().contains("unknown test_vmalloc parameter"));
        assert!(p.set("nr_pages=x").is_err());
        assert!(p.set("use_huge=2").is_err());
        assert!(p.set("nr_pages").unwrap_err().contains("key=value"));
    }

    #[test]
    fn modes_then_explicit_overrides() {
        let (p, cpus) = resolve(&[], Some(Mode::Performance), None).unwrap();
        assert!(p.sequential_test_order && p.repeats() == 3 && cpus == 2);
        let (p, cpus) = resolve(&["test_repeat_count=5".into()], Some(Mode::Smoke), None).unwrap();
        assert_eq!((p.loops(), p.repeats(), cpus), (10000, 5, 2));
        let (p, cpus) = resolve(&[], Some(Mode::Stress), Some(4)).unwrap();
        assert_eq!((p.threads(), p.repeats(), cpus), (4, 20, 4));
        let (p, cpus) = resolve(&["nr_threads=3".into()], None, None).unwrap();
        assert_eq!((p.threads(), cpus), (3, 3));
        assert!(resolve(&["nr_threads=3".into()], None, Some(2)).is_err());
        assert!(resolve(&["nr_threads=300".into()], None, None).is_err());
    }

    #[test]
    fn shuffle_never_keeps_the_last_in_place() {
        // j in [0, i): the element at i always moves (Sattolo's algorithm),
        // so the result is a single cycle and no index stays put.
        for seed in 0..200 {
            let mut rng = Xoshiro256StarStar::seed_from_u64(seed);
            let mut a: [usize; NR_TEST_CASES] = std::array::from_fn(|i| i);
            shuffle_array(&mut a, &mut rng);
            assert!(a.iter().enumerate().all(|(i, &v)| i != v), "{a:?}");
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
