//! Running test_vmalloc: `nr_threads` workers start together (the module
//! holds them on an SRCU read section; here a [`Barrier`]), worker `i` on
//! emulated CPU `i` and a host thread of its own. Each shuffles the case
//! order with the module's `shuffle_array` (unless
//! `sequential_test_order`), runs the selected cases `test_repeat_count`
//! times each and keeps avg = elapsed µs / repeat count. The counters of
//! the whole run are the difference of two snapshots of the machine's,
//! taken before the workers start and after they end; the teardown after
//! that is not counted.

use super::cases::{Ctx, PcpSample, TEST_CASES};
use super::counters::Counters;
use super::params::NR_TEST_CASES;
use super::params::Params;
use mmlab_engine::Machine;
use mmlab_engine::clock;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::percpu::PercpuAllocator;
use mmlab_vmalloc::{LockClassStat, LockStatRow, Vmalloc, VmallocLockStat};
use std::sync::Barrier;
use std::time::Instant;

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
    /// Samples of the pcp during long_busy_list (`pcp_sample_interval`).
    pub pcp_series: Vec<PcpSample>,
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
    /// lock_stat's rows over the workers' run (vmalloc's lock classes,
    /// then `&zone->lock`), when the machine's `lock_stat` switch is on.
    pub lock_stat: Option<Vec<LockStatRow>>,
    /// Measured host time of the whole run (workers only), µs.
    pub wall_usec: u64,
}

/// The lock_stat rows of a run: vmalloc's classes from `vmalloc`, then
/// `&zone->lock` from the page allocator's events in `counters`.
fn lock_stat_rows(vmalloc: &VmallocLockStat, counters: &Counters) -> Vec<LockStatRow> {
    let v = &counters.vm;
    let zone = LockClassStat {
        con_bounces: v.zone_lock_con_bounce,
        contentions: v.zone_lock_contended,
        acq_bounces: v.zone_lock_acq_bounce,
        acquisitions: v.zone_lock_acquire,
    };
    vmalloc.rows().chain([LockStatRow { class: "&zone->lock", counts: zone }]).collect()
}

impl Report {
    /// The lock_stat row of `class`, if lock_stat was on.
    pub fn lock_stat_row(&self, class: &str) -> Option<LockClassStat> {
        self.lock_stat.as_ref()?.iter().find(|r| r.class == class).map(|r| r.counts)
    }

    /// Whether a case that is not expected to fail failed: the command's
    /// exit status is 1 then.
    pub fn any_failed(&self) -> bool {
        self.workers.iter().flat_map(|w| &w.cases).any(|c| c.failed > 0)
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
    let before = Counters::take(m, vm);
    let locks_before = vm.lock_stat();
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
    let counters = Counters::take(m, vm).delta(&before);
    let lock_stat = m.config().lock_stat.then(|| lock_stat_rows(&vm.lock_stat().delta(&locks_before), &counters));
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
        lock_stat,
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
            // 7.2: a case that returns 0 passed, xfail or not.
            match (&ret, tc.xfail) {
                (Ok(()), _) => r.passed += 1,
                (Err(_), true) => r.xfailed += 1,
                (Err(_), false) => r.failed += 1,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
