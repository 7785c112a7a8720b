//! Booting a machine for a sequence, running it, shrinking a failing one.
//!
//! # The algorithm
//!
//! [`run_ops`] boots a fresh machine from a [`Setup`] (memory, CPUs,
//! `--set` settings, fail_page_alloc armed with the seed), runs the ops
//! from one host thread switching between the CPU handles, runs the
//! checks every `check_every` ops, stops at the first violation, and if
//! there was none, frees everything and runs the end-of-run checks.
//!
//! [`shrink`] is delta debugging over the op list, keeping the
//! violation's kind (and, for a wrong outcome, the call): first the
//! sequence is cut after the violating op; then chunks are removed,
//! halving the chunk size down to single ops, and each time an op is
//! removed the ops that use a handle no remaining op binds are dropped
//! too; last, arguments are simplified one op at a time (CPU 0, order 0,
//! GFP_KERNEL, one page, size one page). Every candidate is a full run
//! on a fresh machine; a time budget bounds the whole.

use super::exec::{Coverage, ExecOptions, Executor, Hook, StepResult};
use super::generate::{GenConfig, Generator};
use super::op::{Call, Op};
use super::oracle::{Outcome, Violation};
use super::replay::Replay;
use crate::stack::Stack;
use mmlab_engine::kernel::rcu;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Gfp, MachineConfig, PAGE_SIZE};
use mmlab_pcp::{FaultAttr, PageAllocator};
use mmlab_vmalloc::percpu::PercpuAllocator;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The machine and settings a sequence runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setup {
    pub mem: String,
    pub cpus: usize,
    pub sets: Vec<String>,
    pub seed: u64,
    pub fault: Option<FaultAttr>,
    pub check_every: u64,
}

impl Setup {
    /// The replay header for this setup with `ops`.
    pub fn replay(&self, ops: Vec<Op>) -> Replay {
        Replay {
            mem: self.mem.clone(),
            cpus: self.cpus,
            sets: self.sets.clone(),
            seed: self.seed,
            fault: self.fault,
            check_every: self.check_every,
            comments: Vec::new(),
            ops,
        }
    }
    /// This setup with fail_page_alloc's random path off (`probability=0`,
    /// the other attributes and filters kept): the failures come only from
    /// the ops' `fail_nth=`, as a run recorded them ([`run_seed`]), so a
    /// shrunk list still fails the same requests of the ops it keeps.
    pub fn with_recorded_failures(&self) -> Setup {
        Setup { fault: self.fault.map(|a| FaultAttr { probability: 0, ..a }), ..self.clone() }
    }
    pub fn from_replay(r: &Replay) -> Setup {
        Setup {
            mem: r.mem.clone(),
            cpus: r.cpus,
            sets: r.sets.clone(),
            seed: r.seed,
            fault: r.fault,
            check_every: r.check_every,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// Ops run (skipped ones included).
    pub ops_run: u64,
    /// The first violation.
    pub violation: Option<Violation>,
    pub coverage: Coverage,
    /// The outcome of every op run, in order.
    pub outcomes: Vec<Outcome>,
    /// The ops during which fail_page_alloc injected failures: (op index,
    /// its failures as `fail_nth=` counts).
    pub fail_nth: Vec<(usize, Vec<u32>)>,
    /// hugetlb's and HVO's counters after the last op (before the end of
    /// the run frees everything), when the machine had hugetlb.
    pub hugetlb: Option<(mmlab_hugetlb::HugetlbCounts, mmlab_vmemmap::HvoCounts)>,
}

/// Boot the machine of `setup` (the allocator is booted by the caller, as
/// it borrows the machine).
///
/// # Errors
/// A bad memory size or setting, or a layer failing to boot.
pub fn boot(setup: &Setup) -> Result<Stack, String> {
    let (mem_bytes, mem_banks) = crate::cli::parse_mem(&setup.mem)?;
    let mc = MachineConfig { mem_bytes, mem_banks, nr_cpus: setup.cpus, ..Default::default() };
    let c = crate::settings::Configs::new(mc, &setup.sets)?;
    Ok(Stack::boot(&c)?)
}

/// Boot the page allocator and arm fault injection.
///
/// # Errors
/// The allocator failing to boot, or a bad fault attribute.
pub fn boot_allocator<'m>(b: &'m Stack, setup: &Setup) -> Result<PageAllocator<'m>, String> {
    let pa = b.allocator()?;
    if let Some(a) = setup.fault {
        pa.set_fail_page_alloc(Some(a)).map_err(|e| e.to_string())?;
    }
    Ok(pa)
}

/// Run ops from `next` on a fresh machine (see the module documentation).
/// `next(i, last)` makes op `i` knowing the result of op `i - 1` (a
/// generator follows it: [`Generator::observe`]); `on_step` sees each op
/// and its result, with the details of successes if `details`
/// ([`ExecOptions::details`]).
///
/// [`Generator::observe`]: crate::fuzz::generate::Generator::observe
pub fn run_ops(
    setup: &Setup,
    next: &mut dyn FnMut(usize, Option<&StepResult>) -> Option<Op>,
    hook: Option<Hook>,
    on_step: &mut dyn FnMut(usize, &Op, &StepResult),
    details: bool,
) -> Result<RunOutcome, String> {
    let b = boot(setup)?;
    let pa = boot_allocator(&b, setup)?;
    let vm = b.vmalloc(&pa);
    let percpu = PercpuAllocator::new();
    // The buddy lists the end of the run compares with are those before
    // hugetlb_init() grows the boot pools (`hugepages=`): the run ends with
    // every pool empty.
    let cpu0 = b.machine().cpu(0).map_err(|e| e.to_string())?;
    pa.drain_all_pages(&cpu0);
    drop(cpu0);
    let boot_buddyinfo = pa.zone().nr_free_per_order();
    let (ht, _) = b.hugetlb(&pa)?;
    let cpus = b.machine().all_cpus().map_err(|e| e.to_string())?;
    let opts = ExecOptions { fault_injection: setup.fault.is_some(), exclusive: true, lane: 0, lanes: 1, details };
    let mut ex = Executor::new(&pa, &vm, &percpu, cpus, opts);
    ex.set_boot_buddyinfo(boot_buddyinfo);
    ex.set_hugetlb(ht);
    if let Some(h) = hook {
        ex.set_hook(h);
    }
    let mut out = RunOutcome::default();
    let mut i = 0;
    let mut last: Option<StepResult> = None;
    while let Some(op) = next(i, last.as_ref()) {
        let mut r = ex.step(i, &op);
        on_step(i, &op, &r);
        out.outcomes.push(r.outcome);
        if !r.fail_nth.is_empty() {
            out.fail_nth.push((i, std::mem::take(&mut r.fail_nth)));
        }
        out.ops_run += 1;
        if let Some(v) = r.violation.take() {
            out.violation = Some(v);
            out.coverage = ex.coverage();
            return Ok(out);
        }
        i += 1;
        if setup.check_every > 0
            && (i as u64).is_multiple_of(setup.check_every)
            && let Err(mut v) = ex.check()
        {
            v.op_index = Some(i - 1);
            out.violation = Some(v);
            out.coverage = ex.coverage();
            return Ok(out);
        }
        last = Some(r);
    }
    out.hugetlb = ex.hugetlb_counts();
    out.violation = ex.finish().err();
    out.coverage = ex.coverage();
    Ok(out)
}

/// Run `nops` generated ops of `setup.seed` (fewer if `deadline` passes),
/// the generator following each result ([`Generator::observe`]): what
/// `mmlab fuzz` runs per seed. Returns the outcome and the ops run, each
/// with the failures fail_page_alloc injected into it as its `fail_nth=`
/// (so that the ops replay the same with `probability=0`:
/// [`Setup::with_recorded_failures`]).
///
/// # Errors
/// The machine failing to boot.
pub fn run_seed(
    setup: &Setup,
    gcfg: &GenConfig,
    nops: u64,
    deadline: Option<Instant>,
    on_step: &mut dyn FnMut(usize, &Op, &StepResult),
) -> Result<(RunOutcome, Vec<Op>), String> {
    let mut rng = Xoshiro256StarStar::seed_from_u64(setup.seed);
    let mut genr = Generator::new(gcfg.clone());
    let mut ops: Vec<Op> = Vec::new();
    let out = run_ops(
        setup,
        &mut |i, last| {
            if let (Some(op), Some(r)) = (ops.last(), last) {
                genr.observe(op, r.bound);
            }
            let stop = i as u64 >= nops || (i > 0 && i % 1024 == 0 && deadline.is_some_and(|d| Instant::now() >= d));
            if stop {
                return None;
            }
            let op = genr.next_op(&mut rng)?;
            ops.push(op.clone());
            Some(op)
        },
        None,
        on_step,
        false,
    )?;
    for (i, nth) in &out.fail_nth {
        if let Some(op) = ops.get_mut(*i) {
            op.fail_nth.clone_from(nth);
        }
    }
    Ok((out, ops))
}

/// One lane of a multi-CPU run (`mmlab fuzz --threads N`, or the shuttle
/// test's controlled threads): which lane of how many, the run's seed (the
/// lane's stream is `seed ^ lane * 0x9e3779b9`), its ops and deadline, and
/// the executor options shared by the lanes.
#[derive(Clone, Copy, Debug)]
pub struct Lane {
    pub lane: usize,
    pub lanes: usize,
    pub seed: u64,
    pub nops: u64,
    pub deadline: Option<Instant>,
    pub opts: ExecOptions,
}

/// `gcfg` for lanes that share a machine: they bring up no hugetlb
/// ("hugetlb" leaves its calls out), keep no common model of the linear
/// map ("set_memory"), and a freed area may be another lane's now (the
/// wrong calls on freed handles are left out).
pub fn lane_gen_config(mut gcfg: GenConfig) -> GenConfig {
    for k in [
        "double_free",
        "vfree_twice",
        "vfree_after_kvfree_rcu",
        "vm_unmap_ram_twice",
        "vunmap_vmalloc",
        "vrealloc_freed",
        "hugetlb",
        "set_memory",
        // A frame free now may be another lane's by the time the call runs.
        "dma_remap_unallocated",
        // The I/O port windows are one space all lanes would map in.
        "pci_iospace",
        "pci_remap_iospace_again",
    ] {
        if !gcfg.exclude.iter().any(|e| e == k) {
            gcfg.exclude.push(k.to_string());
        }
    }
    gcfg
}

/// One lane on `cpu` of a machine other lanes share, in three steps:
/// [`LaneRun::new`] (its own generator for one CPU, and an executor that is
/// not exclusive: no snapshots around refused calls, checks only at the
/// end), [`LaneRun::run`] (the ops, stopping at the first violation) and
/// [`LaneRun::end`] (give back everything the lane holds). The caller
/// runs the final checks once every lane has ended; `gcfg` is a
/// [`lane_gen_config`].
///
/// The steps are apart for the shuttle test (tests/tests/shuttle.rs): it
/// sets the lanes up and ends them outside the controlled phase, so that
/// only the racing ops are scheduling points. `mmlab fuzz --threads`
/// runs all three on each lane's thread ([`run_lane`]).
pub struct LaneRun<'a, 'm> {
    ex: Executor<'a, 'm>,
    genr: Generator,
    rng: Xoshiro256StarStar,
    lane: Lane,
    out: RunOutcome,
    /// The lane's CPU is idle (between `run` and `end`).
    idle: bool,
}

impl std::fmt::Debug for LaneRun<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneRun").field("lane", &self.lane).field("ops_run", &self.out.ops_run).finish_non_exhaustive()
    }
}

impl<'a, 'm> LaneRun<'a, 'm> {
    /// The lane's executor and generator (`Executor::new` drains every
    /// CPU's pcp lists: set lanes up before any of them runs).
    pub fn new(
        pa: &'a PageAllocator<'m>,
        vm: &'a mmlab_vmalloc::Vmalloc<'a, 'm>,
        percpu: &'a PercpuAllocator,
        cpu: mmlab_engine::Cpu<'m>,
        gcfg: &GenConfig,
        lane: Lane,
    ) -> LaneRun<'a, 'm> {
        let opts = ExecOptions { exclusive: false, lane: lane.lane as u64, lanes: lane.lanes as u64, ..lane.opts };
        LaneRun {
            ex: Executor::new(pa, vm, percpu, vec![cpu], opts),
            genr: Generator::new(GenConfig { nr_cpus: 1, ..gcfg.clone() }),
            rng: Xoshiro256StarStar::seed_from_u64(lane.seed ^ (lane.lane as u64).wrapping_mul(0x9e37_79b9)),
            lane,
            out: RunOutcome::default(),
            idle: false,
        }
    }

    /// Run the lane's ops (until its count, its deadline or a violation);
    /// then the lane's CPU goes idle (`rcu_idle_enter()`), so that a grace
    /// period another lane waits for does not wait for this one until it
    /// ends.
    pub fn run(&mut self) {
        for i in 0..self.lane.nops as usize {
            if i > 0 && i % 1024 == 0 && self.lane.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let Some(op) = self.genr.next_op(&mut self.rng) else { break };
            let r = self.ex.step(i, &op);
            self.genr.observe(&op, r.bound);
            self.out.ops_run += 1;
            if let Some(v) = r.violation {
                self.out.violation = Some(v);
                break;
            }
        }
        // A call that panicked may have left a read-side section open (a
        // violation already): such a CPU stays watched.
        for cpu in self.ex.cpus() {
            if cpu.rcu_data().read_depth() == 0 {
                rcu::rcu_idle_enter(cpu);
                self.idle = true;
            }
        }
    }

    /// Give back everything the lane holds (its CPU watched by RCU again);
    /// what it ran and found.
    pub fn end(mut self) -> RunOutcome {
        if self.idle {
            for cpu in self.ex.cpus() {
                rcu::rcu_idle_exit(cpu);
            }
        }
        if let Err(e) = self.ex.release_all() {
            self.out.violation.get_or_insert(e);
        }
        self.out.coverage = self.ex.coverage();
        self.out
    }
}

/// A whole lane on this thread: [`LaneRun`]'s three steps.
pub fn run_lane<'a, 'm>(
    pa: &'a PageAllocator<'m>,
    vm: &'a mmlab_vmalloc::Vmalloc<'a, 'm>,
    percpu: &'a PercpuAllocator,
    cpu: mmlab_engine::Cpu<'m>,
    gcfg: &GenConfig,
    lane: Lane,
) -> RunOutcome {
    let mut l = LaneRun::new(pa, vm, percpu, cpu, gcfg, lane);
    l.run();
    l.end()
}

/// Run a fixed list.
pub fn run_list(setup: &Setup, ops: &[Op], hook: Option<Hook>) -> Result<RunOutcome, String> {
    run_ops(setup, &mut |i, _| ops.get(i).cloned(), hook, &mut |_, _, _| {}, false)
}

/// Run a fixed list, showing each step to `on_step`.
pub fn run_list_with(
    setup: &Setup,
    ops: &[Op],
    on_step: &mut dyn FnMut(usize, &Op, &StepResult),
) -> Result<RunOutcome, String> {
    run_ops(setup, &mut |i, _| ops.get(i).cloned(), None, on_step, true)
}

/// Drop ops that use a handle no op before them binds (repeat until none).
pub fn drop_orphans(ops: Vec<Op>) -> Vec<Op> {
    let mut bound = HashSet::new();
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        if op.uses().iter().all(|h| bound.contains(h)) {
            if let Some(h) = op.binds() {
                bound.insert(h);
            }
            out.push(op);
        }
    }
    out
}

/// Shrinking limits.
#[derive(Clone, Copy, Debug)]
pub struct ShrinkBudget {
    pub time: Duration,
}

/// Shrink `ops` (which fail with `target`) to a small list failing the
/// same way. `make_hook` gives each candidate run its hook (tests).
pub fn shrink(
    setup: &Setup,
    ops: Vec<Op>,
    target: &Violation,
    budget: ShrinkBudget,
    make_hook: &dyn Fn() -> Option<Hook>,
) -> (Vec<Op>, Violation) {
    let t0 = Instant::now();
    let sig = target.signature();
    let mut best_v = target.clone();
    // Quiet panics while candidates run.
    let prev_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let test = |cand: &[Op], best_v: &mut Violation| -> Option<usize> {
        if t0.elapsed() > budget.time {
            return None;
        }
        match run_list(setup, cand, make_hook()) {
            Ok(RunOutcome { violation: Some(v), .. }) if v.signature() == sig => {
                let cut = v.op_index.map_or(cand.len(), |i| i + 1);
                *best_v = v;
                Some(cut)
            }
            _ => None,
        }
    };
    let mut ops = ops;
    if let Some(i) = target.op_index {
        ops.truncate(i + 1);
    }
    let mut chunk = (ops.len() / 2).max(1);
    loop {
        let mut removed = false;
        let mut i = 0;
        while i < ops.len() && t0.elapsed() < budget.time {
            let end = (i + chunk).min(ops.len());
            let mut cand: Vec<Op> = ops[..i].to_vec();
            cand.extend_from_slice(&ops[end..]);
            let cand = drop_orphans(cand);
            if cand.len() < ops.len()
                && let Some(cut) = test(&cand, &mut best_v)
            {
                ops = cand;
                ops.truncate(cut);
                removed = true;
            } else {
                i += chunk;
            }
        }
        if t0.elapsed() >= budget.time || (chunk == 1 && !removed) {
            break;
        }
        if !removed {
            chunk = (chunk / 2).max(1);
        }
    }
    // Simplify arguments.
    for i in 0..ops.len() {
        for cand_op in simpler(&ops[i]) {
            if t0.elapsed() >= budget.time {
                break;
            }
            let mut cand = ops.clone();
            cand[i] = cand_op;
            if let Some(cut) = test(&cand, &mut best_v) {
                ops = cand;
                ops.truncate(cut);
                break;
            }
        }
        if i + 1 >= ops.len() {
            break;
        }
    }
    std::panic::set_hook(prev_hook);
    (ops, best_v)
}

/// Simpler variants of one op, simplest first.
fn simpler(op: &Op) -> Vec<Op> {
    let mut v = Vec::new();
    let with = |call: Call| Op { cpu: op.cpu, call, expect: op.expect.clone(), fail_nth: op.fail_nth.clone() };
    if op.cpu != 0 {
        v.push(Op { cpu: 0, ..op.clone() });
    }
    if !op.fail_nth.is_empty() {
        v.push(Op { fail_nth: Vec::new(), ..op.clone() });
    }
    match &op.call {
        Call::AllocPages { order, gfp, out } if *gfp != Gfp::GFP_KERNEL => {
            v.push(with(Call::AllocPages { order: *order, gfp: Gfp::GFP_KERNEL, out: *out }));
        }
        Call::AllocPagesBulk { nr, gfp, out } if *nr > 1 => {
            v.push(with(Call::AllocPagesBulk { nr: 1, gfp: *gfp, out: *out }));
        }
        Call::Vmalloc { size, out } if *size > PAGE_SIZE => {
            v.push(with(Call::Vmalloc { size: PAGE_SIZE, out: *out }));
            v.push(with(Call::Vmalloc { size: size / 2, out: *out }));
        }
        Call::Vzalloc { size, out } => v.push(with(Call::Vmalloc { size: *size, out: *out })),
        Call::VmallocHuge { size, out, .. } | Call::VmallocNode { size, out, .. } => {
            v.push(with(Call::Vmalloc { size: *size, out: *out }));
        }
        Call::Vmap { pages, out } if pages.len() > 1 => {
            v.push(with(Call::Vmap { pages: pages[..1].to_vec(), out: *out }))
        }
        _ => {}
    }
    v
}
