//! Speculative PFN walkers racing HVO: the race that "mm/hugetlb_vmemmap:
//! fix race with speculative PFN walkers" (bd225530a4c7, Linux 6.11) closed,
//! made visible.
//!
//! # The race
//!
//! A PFN walker such as compaction takes a reference on a page it does not
//! own: it looks at the struct page of some frame, sees a page in use, and
//! calls `get_page_unless_zero()`, whose atomic add is a *write* to the
//! struct page. Between the look and the write the page can be freed,
//! become part of a hugetlb folio, and have HVO remap that folio's tail
//! struct pages read-only. The write then hits a read-only vmemmap entry and
//! the kernel crashes (a compare-and-swap needs a writable mapping even when
//! it stores nothing). Since 6.11 the walker does its check and add under
//! `rcu_read_lock()`, and HVO waits for a grace period before it remaps, so
//! every walker that looked before the remap has finished its write first;
//! one that looks after it finds the folio's frozen count of 0 and writes
//! nothing.
//!
//! # The experiment ([`run`])
//!
//! CPU 0 is the updater. Each iteration it fills memory with order-0 pages
//! in use (order-9 blocks split into pages with a reference each, as
//! anonymous LRU pages are), frees them, allocates hugetlb folios from the
//! freed memory (`__GFP_COMP`, frozen to a count of 0 as 6.11's pool keeps
//! them), optimizes them in one batch (`hugetlb_vmemmap_optimize_folios`),
//! then restores and frees them. Every other CPU runs a walker thread:
//! compaction-like, it picks random frames from a seeded generator
//! (xoshiro256**, one stream per CPU), skips free and reserved pages, and
//! tries `get_page_unless_zero()` as the kernel of the [`RcuPolicy`] does it
//! (6.10: `atomic_add_unless()` alone; 6.11 on: under `rcu_read_lock()`,
//! after the fake-head and count check); a reference it gets is dropped at
//! once (`put_page()`, which frees the page if it was the last). The add
//! goes through the walker CPU's MMU ([`crate::walker`]): a write to a
//! read-only tail returns a permission fault, which is counted and recorded
//! with the frame and the CPU ([`WalkerFault`]) instead of crashing.
//!
//! # What is forced
//!
//! On real hardware the window between the check and the add is a few
//! instructions, and the race is rare. Two windows are offered:
//!
//! - [`RaceWindow::Forced`]: an explicit schedule. Each iteration, every
//!   walker checks one page the updater holds in use, then *stays between
//!   its check and its add as long as the updater lets it*: until the
//!   updater has optimized and flushed the batch, or until a grace period
//!   is in progress (the updater waiting for this walker: holding on longer
//!   could only delay the updater, never change the outcome). The updater
//!   frees the pages only once every walker is in its window. This is the
//!   worst interleaving the kernel allows, and it is deterministic: the
//!   walkers never allocate, so the page allocator's state and each
//!   walker's frame depend only on the seeds. Without a grace period
//!   (6.10) a walker whose page became a read-only tail faults; with one
//!   none can.
//! - [`RaceWindow::Spin`]: free running. Walkers loop until the updater is
//!   done, pausing a modelled number of spin-loop iterations between check
//!   and add; the host scheduler decides the interleaving. Faults without a
//!   grace period are then a matter of chance; with one there must be none.
//!
//! # Fidelity
//!
//! | piece | label |
//! |-------|-------|
//! | check order, rcu_read_lock placement per release, write through the MMU, frozen pool folios, put_page on the last reference | faithful (Linux 6.10 / 6.11+) |
//! | walker's choice of pages | simplified: random frames, skipping `PageBuddy` and `PG_reserved` (compaction also checks LRU/movable, which mmlab does not keep) |
//! | the window between check and add | instrumented: forced by a schedule, or a modelled spin pause |
//! | faults | instrumented: recorded as events; the kernel oopsed |
//! | the updater's workload | simplified: fill, free, allocate and optimize a batch, restore, free (no user mappings) |
//!
//! The 2026 policy ([`RcuPolicy::NoFakeHeads`]) drops the grace period
//! because its tails map a shared, always-zero tail page; mmlab keeps the
//! 6.12 remap under every policy, so this experiment says nothing about it.

use crate::config::{HvoConfig, RcuPolicy};
use crate::folio::Folio;
use crate::hvo::{Hvo, HvoCounts, HvoError};
use crate::walker::{CountCheck, page_count_writable, page_ref_atomic_add_unless};
use mmlab_engine::arch::arm64::pgtable::mmu::{self, Access, Fault, FaultKind};
use mmlab_engine::mm::page::{PageExt, pg};
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Cpu, Gfp, Machine, Pfn, PhysAddr, kernel::rcu};
use mmlab_pcp::{FreeError, PageAllocator};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// The order of the folios and of the blocks split into in-use pages.
const ORDER: u32 = 9;
/// Offset of `_refcount` in struct page.
const REFCOUNT_OFFSET: u64 = 52;
/// Frames a forced walker tries before giving up on finding a page in use.
const MAX_PICKS: u32 = 4096;
/// Fault events kept in a report (the counters count all).
pub const MAX_FAULTS_KEPT: usize = 64;
/// Blocks of memory left free each iteration, so that restoring the batch
/// always finds its pages.
const HEADROOM_BLOCKS: usize = 2;

/// How long a walker stays between its check and its atomic add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RaceWindow {
    /// The schedule of the module docs: as long as the updater lets it.
    Forced,
    /// Free running, with a modelled pause of this many spin-loop
    /// iterations.
    Spin(u32),
}

/// One experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RaceConfig {
    /// HVO's switches; `rcu` selects both the updater's grace periods and
    /// the walkers' `page_ref_add_unless()`.
    pub hvo: HvoConfig,
    /// Walker threads, on CPUs 1..=walkers.
    pub walkers: usize,
    /// Updater iterations.
    pub iterations: u32,
    /// Seed of the walkers' generators.
    pub seed: u64,
    /// The window between check and add.
    pub window: RaceWindow,
    /// At most this many folios per iteration (and as many blocks of pages
    /// in use); fewer if memory runs out first.
    pub max_folios: u32,
}

mmlab_engine::counter_snapshot! {
    /// A walker's events (mmlab's own, instrumented).
    pub struct WalkerCounts {
        /// Frames picked.
        pub picks: u64,
        /// Skipped before the check: free (`PageBuddy`) or reserved.
        pub skipped_not_candidate: u64,
        /// The check found the excluded count (0).
        pub skipped_zero: u64,
        /// The check found a fake head (6.11+).
        pub skipped_fake_head: u64,
        /// The check passed: the walker went on to the atomic add.
        pub armed: u64,
        /// The add found the count at 0 by then and stored nothing.
        pub not_added: u64,
        /// References taken.
        pub refs_taken: u64,
        /// References dropped (`put_page`).
        pub refs_dropped: u64,
        /// Writes that faulted: the kernel crashed here.
        pub faults: u64,
    }
}

/// A walker's write that faulted (the kernel crashed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WalkerFault {
    /// The walker's CPU.
    pub cpu: usize,
    /// The frame whose struct page it wrote.
    pub pfn: u64,
    /// The vmemmap address written (`&page->_refcount`).
    pub va: u64,
    /// The updater's iteration.
    pub iteration: u32,
    /// The fault (`Permission`, for a read-only tail).
    pub kind: &'static str,
    /// The level of the leaf.
    pub level: &'static str,
    /// The leaf descriptor.
    pub desc: u64,
}

impl WalkerFault {
    fn new(cpu: usize, pfn: Pfn, iteration: u32, f: Fault) -> WalkerFault {
        let (kind, level) = match f.kind {
            FaultKind::Permission { level } => ("Permission", level.name()),
            FaultKind::Translation { level } => ("Translation", level.name()),
            FaultKind::AccessFlag { level } => ("AccessFlag", level.name()),
            FaultKind::ExternalAbort { .. } => ("ExternalAbort", "-"),
        };
        WalkerFault { cpu, pfn: pfn.0, va: f.va, iteration, kind, level, desc: f.desc.0 }
    }
}

/// What an experiment saw.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RaceReport {
    /// The configuration.
    pub config: RaceConfig,
    /// The walkers' generator.
    pub rng: &'static str,
    /// The walkers' events, summed.
    pub walkers: WalkerCounts,
    /// Each walker's events, by CPU (CPU 1 first).
    pub per_walker: Vec<WalkerCounts>,
    /// The first [`MAX_FAULTS_KEPT`] faults, by iteration then CPU.
    pub fault_events: Vec<WalkerFault>,
    /// Forced window: walkers whose checked page was a read-only tail once
    /// the batch was optimized (each would fault without a grace period).
    pub exposed: u64,
    /// Forced window: walkers that found no page in use to check.
    pub gave_up: u64,
    /// Folios allocated and optimized over all iterations.
    pub folios: u64,
    /// HVO's counters.
    pub hvo: HvoCounts,
}

/// Why an experiment could not run or did not finish cleanly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaceError {
    /// Fewer CPUs than walkers + 1, or no walker.
    Cpus {
        /// Walkers asked for.
        walkers: usize,
        /// CPUs the machine has.
        nr_cpus: usize,
    },
    /// A walker CPU's handle is held elsewhere.
    CpuBusy(usize),
    /// HVO failed (a restore without memory, or a bug).
    Hvo(HvoError),
    /// A page could not be freed (a bug).
    Free(FreeError),
    /// Pages were lost or an allocator invariant broke.
    Invariants(String),
}

impl std::fmt::Display for RaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RaceError::Cpus { walkers, nr_cpus } => {
                write!(
                    f,
                    "{walkers} walkers need {} CPUs (and at least 1 walker); the machine has {nr_cpus}",
                    walkers + 1
                )
            }
            RaceError::CpuBusy(c) => write!(f, "cpu {c} is in use"),
            RaceError::Hvo(e) => write!(f, "{e}"),
            RaceError::Free(e) => write!(f, "{e}"),
            RaceError::Invariants(e) => write!(f, "invariant broken: {e}"),
        }
    }
}
impl std::error::Error for RaceError {}

impl From<HvoError> for RaceError {
    fn from(e: HvoError) -> Self {
        RaceError::Hvo(e)
    }
}
impl From<FreeError> for RaceError {
    fn from(e: FreeError) -> Self {
        RaceError::Free(e)
    }
}

/// The schedule the updater and the walkers share.
#[derive(Debug)]
struct Schedule {
    /// Iterations opened for arming (the walkers' iteration + 1).
    opened: AtomicU32,
    /// Iterations whose batch is optimized and flushed.
    optimized: AtomicU32,
    /// Walkers in their window (or given up) this iteration.
    armed: AtomicU32,
    /// Walkers finished this iteration.
    done: AtomicU32,
    /// Each walker's checked frame this iteration, plus one (0: none).
    armed_pfn: Vec<AtomicU64>,
    stop: AtomicBool,
}

/// Wait, yielding the host CPU, until `cond` holds.
fn wait_until(cond: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !cond() {
        spins += 1;
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

/// One walker: its CPU, its generator and its events.
struct Walker<'h, 'a, 'm> {
    hvo: &'h Hvo<'a, 'm>,
    cpu: Cpu<'m>,
    rng: Xoshiro256StarStar,
    counts: WalkerCounts,
    faults: Vec<WalkerFault>,
    iteration: u32,
}

/// What one [`Walker::isolate_one`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Skipped,
    Armed,
}

impl Walker<'_, '_, '_> {
    /// One compaction-like step: pick a frame, try `get_page_unless_zero()`
    /// with `window` between its check and its add, drop a reference taken.
    fn isolate_one(&mut self, window: &mut dyn FnMut(Pfn)) -> Step {
        let m = self.hvo.machine();
        let mem = m.memmap();
        let (start, n) = (mem.start_pfn().0, mem.nr_pages());
        let pfn = Pfn(start + self.rng.below(n));
        self.counts.picks += 1;
        if !mem.pfn_valid(pfn) {
            self.counts.skipped_not_candidate += 1;
            return Step::Skipped;
        }
        let candidate = self.hvo.remote_cpu_section(|| {
            let p = m.page(pfn);
            !p.is_buddy() && !p.test_flag(pg::PG_RESERVED)
        });
        if !candidate {
            self.counts.skipped_not_candidate += 1;
            return Step::Skipped;
        }
        let taken = self.get_page_unless_zero(pfn, window);
        if taken == Some(true) {
            self.put_page(pfn);
        }
        if taken.is_some() { Step::Armed } else { Step::Skipped }
    }

    /// `get_page_unless_zero()` of the walker's release, with `window`
    /// between check and add. `None`: the check said no; else whether a
    /// reference was taken (a fault is recorded and takes none).
    fn get_page_unless_zero(&mut self, pfn: Pfn, window: &mut dyn FnMut(Pfn)) -> Option<bool> {
        let m = self.hvo.machine();
        let cpu = &self.cpu;
        // 6.10: page_ref_add_unless() is atomic_add_unless() alone, whose
        // first step reads the count; 6.11 on: under rcu_read_lock, the
        // fake-head and count check first.
        let pre_fix = self.hvo.config().rcu == RcuPolicy::V6_10;
        if !pre_fix {
            rcu::rcu_read_lock(cpu);
        }
        let check = self.hvo.remote_cpu_section(|| {
            if pre_fix {
                if m.page(pfn).refcount() == 0 { CountCheck::Excluded } else { CountCheck::Writable }
            } else {
                page_count_writable(m, pfn, 0)
            }
        });
        let r = match check {
            CountCheck::FakeHead => {
                self.counts.skipped_fake_head += 1;
                None
            }
            CountCheck::Excluded => {
                self.counts.skipped_zero += 1;
                None
            }
            CountCheck::Writable => {
                self.counts.armed += 1;
                window(pfn);
                match self.hvo.remote_cpu_section(|| page_ref_atomic_add_unless(cpu, self.hvo.machine(), pfn, 1, 0)) {
                    Ok(true) => {
                        self.counts.refs_taken += 1;
                        Some(true)
                    }
                    Ok(false) => {
                        self.counts.not_added += 1;
                        Some(false)
                    }
                    Err(f) => {
                        self.counts.faults += 1;
                        self.faults.push(WalkerFault::new(cpu.id(), pfn, self.iteration, f));
                        Some(false)
                    }
                }
            }
        };
        if !pre_fix {
            rcu::rcu_read_unlock(cpu);
        }
        r
    }

    /// `put_page()`: drop the reference; the last one frees the page (for a
    /// block the owner already freed with `__free_pages()`, only its first
    /// page is left, at order 0).
    fn put_page(&mut self, pfn: Pfn) {
        let pa = self.hvo.page_allocator();
        let m = self.hvo.machine();
        self.counts.refs_dropped += 1;
        self.hvo.remote_cpu_section(|| {
            let p = m.page(pfn);
            if let PageExt::Alloc(0, _) = p.ext() {
                // __free_pages(page, 0): drops the reference, frees on the
                // last. It cannot fail for a page we hold a reference to.
                let _ = pa.free_pages(&self.cpu, pfn, 0);
            } else if p.put_testzero() == Some(true) {
                // The owner let go in between: `__free_pages()` saw our
                // reference and leaves the first page to us at order 0. It
                // marks the page so first; between its own decrement and
                // that mark the page still reads as the whole block, so
                // wait for the mark (a few instructions) rather than free
                // the block a second time.
                let mut ext = p.ext();
                for _ in 0..1_000_000 {
                    if !matches!(ext, PageExt::Alloc(o, _) if o > 0) {
                        break;
                    }
                    std::hint::spin_loop();
                    ext = p.ext();
                }
                if let PageExt::Alloc(order, _) = ext {
                    p.set_refcount(1);
                    let _ = pa.free_pages(&self.cpu, pfn, u32::from(order));
                }
            }
        });
    }
}

/// The walkers' thread body under the forced schedule.
fn walker_forced(w: &mut Walker<'_, '_, '_>, slot: usize, s: &Schedule) {
    let m = w.hvo.machine();
    rcu::rcu_idle_enter(&w.cpu);
    loop {
        let it = w.iteration;
        wait_until(|| s.opened.load(Acquire) > it || s.stop.load(Acquire));
        if s.stop.load(Acquire) {
            break;
        }
        rcu::rcu_idle_exit(&w.cpu);
        let mut arrived = false;
        let mut window = |pfn: Pfn| {
            s.armed_pfn[slot].store(pfn.0 + 1, Relaxed);
            s.armed.fetch_add(1, Release);
            arrived = true;
            // Hold the window until the batch is optimized, or until the
            // updater waits for this CPU in a grace period.
            wait_until(|| s.optimized.load(Acquire) > it || m.rcu().gp_in_progress() || s.stop.load(Acquire));
        };
        for _ in 0..MAX_PICKS {
            let step = w.isolate_one(&mut window);
            rcu::rcu_quiescent_state(&w.cpu);
            if step == Step::Armed {
                break;
            }
        }
        if !arrived {
            s.armed.fetch_add(1, Release);
        }
        rcu::rcu_quiescent_state(&w.cpu);
        rcu::rcu_idle_enter(&w.cpu);
        w.iteration += 1;
        s.done.fetch_add(1, Release);
    }
    rcu::rcu_idle_exit(&w.cpu);
}

/// The walkers' thread body, free running.
fn walker_spin(w: &mut Walker<'_, '_, '_>, pause: u32, s: &Schedule) {
    let mut window = |_: Pfn| {
        for i in 0..pause {
            std::hint::spin_loop();
            if i % 256 == 255 {
                std::thread::yield_now();
            }
        }
    };
    while !s.stop.load(Acquire) {
        w.iteration = s.opened.load(Relaxed);
        w.isolate_one(&mut window);
        rcu::rcu_quiescent_state(&w.cpu);
    }
}

/// The seed of CPU `cpu`'s walker.
fn walker_seed(seed: u64, cpu: usize) -> u64 {
    mmlab_engine::rng::SplitMix64(seed ^ (cpu as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).next_u64()
}

/// `folio_ref_freeze(folio, count)`: set the head's count from `count` to 0
/// with one compare-and-swap through the updater's MMU.
fn folio_ref_freeze(cpu: &Cpu<'_>, m: &Machine, pfn: Pfn, count: i32) -> Result<bool, Fault> {
    let va = m.memmap().page_va(pfn) + REFCOUNT_OFFSET;
    let pa = mmu::translate(cpu, &mmlab_engine::arch::arm64::pgtable::init_mm(cpu), va, Access::WRITE)?;
    let word = m.arena().word(PhysAddr(pa.0 & !7));
    Ok(word.fetch_update(Relaxed, Relaxed, |w| ((w >> 32) as u32 as i32 == count).then_some(w & 0xffff_ffff)).is_ok())
}

/// Run the experiment on `pa`'s machine: the updater on `cpu`, walkers on
/// CPUs 1..=`cfg.walkers`.
///
/// # Errors
/// [`RaceError::Cpus`] or [`RaceError::CpuBusy`] before anything runs;
/// [`RaceError::Hvo`] / [`RaceError::Free`] if the updater's work failed
/// (walkers are stopped and every page is given back first where it can
/// be); [`RaceError::Invariants`] if pages were lost.
pub fn run<'m>(pa: &PageAllocator<'m>, cpu: &Cpu<'m>, cfg: &RaceConfig) -> Result<RaceReport, RaceError> {
    let m = pa.machine();
    if cfg.walkers == 0 || cfg.walkers + 1 > m.nr_cpus() || cpu.id() != 0 {
        return Err(RaceError::Cpus { walkers: cfg.walkers, nr_cpus: m.nr_cpus() });
    }
    let mut cpus = Vec::with_capacity(cfg.walkers);
    for id in 1..=cfg.walkers {
        cpus.push(m.cpu(id).map_err(|_| RaceError::CpuBusy(id))?);
    }
    let hvo = Hvo::new(pa, cfg.hvo);
    pa.drain_all_pages(cpu);
    let free_before = pa.nr_free_pages() + pa.pcp_pages();
    let s = Schedule {
        opened: AtomicU32::new(0),
        optimized: AtomicU32::new(0),
        armed: AtomicU32::new(0),
        done: AtomicU32::new(0),
        armed_pfn: (0..cfg.walkers).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
    };
    let outs: Mutex<Vec<(usize, WalkerCounts, Vec<WalkerFault>)>> = Mutex::new(Vec::new());
    let mut folios_total = 0;
    let mut exposed = 0;
    let mut gave_up = 0;
    let result = std::thread::scope(|sc| {
        for (slot, wcpu) in cpus.into_iter().enumerate() {
            let (hvo, s, outs) = (&hvo, &s, &outs);
            sc.spawn(move || {
                let id = wcpu.id();
                let mut w = Walker {
                    hvo,
                    rng: Xoshiro256StarStar::seed_from_u64(walker_seed(cfg.seed, id)),
                    cpu: wcpu,
                    counts: WalkerCounts::default(),
                    faults: Vec::new(),
                    iteration: 0,
                };
                match cfg.window {
                    RaceWindow::Forced => walker_forced(&mut w, slot, s),
                    RaceWindow::Spin(pause) => walker_spin(&mut w, pause, s),
                }
                outs.lock().unwrap_or_else(|e| e.into_inner()).push((id, w.counts, w.faults));
            });
        }
        let r = (|| {
            for it in 0..cfg.iterations {
                let it_r = iteration(&hvo, cpu, cfg, &s, it)?;
                folios_total += it_r.0;
                exposed += it_r.1;
                gave_up += it_r.2;
            }
            Ok::<(), RaceError>(())
        })();
        s.stop.store(true, Release);
        r
    });
    result?;
    pa.drain_all_pages(cpu);
    let c = hvo.counts();
    let free_after = pa.nr_free_pages() + pa.pcp_pages();
    // The PTE tables of vmemmap PMD splits stay, as in the kernel.
    if free_after + c.vmemmap_pmd_splits as i64 != free_before {
        return Err(RaceError::Invariants(format!(
            "free pages {free_before} before, {free_after} after, {} PMD splits",
            c.vmemmap_pmd_splits
        )));
    }
    pa.check_invariants().map_err(RaceError::Invariants)?;
    let mut outs = outs.into_inner().unwrap_or_else(|e| e.into_inner());
    outs.sort_by_key(|o| o.0);
    let mut total = WalkerCounts::default();
    let mut faults = Vec::new();
    for (_, c, f) in &outs {
        total.add(c);
        faults.extend_from_slice(f);
    }
    if total.refs_taken != total.refs_dropped {
        return Err(RaceError::Invariants(format!(
            "walkers took {} references and dropped {}",
            total.refs_taken, total.refs_dropped
        )));
    }
    faults.sort_by_key(|f| (f.iteration, f.cpu, f.pfn));
    faults.truncate(MAX_FAULTS_KEPT);
    Ok(RaceReport {
        config: *cfg,
        rng: Xoshiro256StarStar::NAME,
        walkers: total,
        per_walker: outs.iter().map(|o| o.1).collect(),
        fault_events: faults,
        exposed,
        gave_up,
        folios: folios_total,
        hvo: c,
    })
}

/// One updater iteration. Returns (folios, exposed walkers, walkers that
/// gave up).
fn iteration(
    hvo: &Hvo<'_, '_>,
    cpu: &Cpu<'_>,
    cfg: &RaceConfig,
    s: &Schedule,
    it: u32,
) -> Result<(u64, u64, u64), RaceError> {
    let pa = hvo.page_allocator();
    let m = hvo.machine();
    let forced = cfg.window == RaceWindow::Forced;
    let max = cfg.max_folios as usize;
    // Pages in use: order-9 blocks split into order-0 pages with a reference
    // each (anonymous LRU pages, say).
    let lru_gfp = Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_NOWARN | Gfp::__GFP_NORETRY;
    let mut blocks = Vec::new();
    while blocks.len() < max {
        let Some(pfn) = pa.alloc_pages(cpu, lru_gfp, ORDER) else { break };
        pa.split_page(pfn, ORDER)?;
        blocks.push(pfn);
    }
    if forced {
        s.armed.store(0, Relaxed);
        s.done.store(0, Relaxed);
        for a in &s.armed_pfn {
            a.store(0, Relaxed);
        }
        s.opened.store(it + 1, Release);
        wait_until(|| s.armed.load(Acquire) as usize == cfg.walkers);
    } else {
        s.opened.store(it + 1, Release);
    }
    // Free them (the walkers may hold a reference to some: put_page()).
    for &b in &blocks {
        for i in 0..1u64 << ORDER {
            pa.free_pages(cpu, b.add(i), 0)?;
        }
    }
    pa.drain_local_pages(cpu);
    // hugetlb folios from the freed memory, frozen, compound; leave a few
    // blocks free for the restore.
    let gfp = Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_COMP | Gfp::__GFP_NOWARN | Gfp::__GFP_RETRY_MAYFAIL;
    let mut folios = Vec::new();
    while folios.len() < max {
        let Some(pfn) = pa.alloc_pages(cpu, gfp, ORDER) else { break };
        let folio = Folio::new(m, pfn, ORDER).map_err(HvoError::Folio)?;
        while !folio_ref_freeze(cpu, m, pfn, 1).map_err(|_| HvoError::Corrupt { va: m.memmap().page_va(pfn) })? {
            // A walker holds a speculative reference: it drops it at once.
            std::thread::yield_now();
        }
        crate::folio::prep_compound(m, folio).map_err(HvoError::Folio)?;
        folios.push(folio);
    }
    let mut spare = Vec::new();
    for _ in 0..HEADROOM_BLOCKS.min(folios.len()) {
        spare.extend(folios.pop());
    }
    release_folios(hvo, cpu, spare)?;
    let r = hvo.hugetlb_vmemmap_optimize_folios(cpu, &folios);
    let mut exposed = 0;
    let mut gave_up = 0;
    if forced {
        for a in &s.armed_pfn {
            match a.load(Acquire) {
                0 => gave_up += 1,
                p => {
                    let va = m.memmap().page_va(Pfn(p - 1)) + REFCOUNT_OFFSET;
                    if let Err(f) = mmu::translate_walk(cpu, &m.kernel_as(), va, Access::WRITE)
                        && matches!(f.kind, FaultKind::Permission { .. })
                    {
                        exposed += 1;
                    }
                }
            }
        }
    }
    s.optimized.store(it + 1, Release);
    if forced {
        wait_until(|| s.done.load(Acquire) as usize == cfg.walkers);
    }
    let n = folios.len() as u64;
    let freed = release_folios(hvo, cpu, folios);
    r?;
    freed?;
    Ok((n, exposed, gave_up))
}

/// Restore a batch (`update_and_free_pages_bulk`: on ENOMEM, free the
/// folios already restored to make room, and retry), unfreeze, undo the
/// compound page and free each folio.
fn release_folios(hvo: &Hvo<'_, '_>, cpu: &Cpu<'_>, mut folios: Vec<Folio>) -> Result<(), RaceError> {
    let pa = hvo.page_allocator();
    let m = hvo.machine();
    loop {
        let mut done = Vec::new();
        let r = hvo.hugetlb_vmemmap_restore_folios(cpu, &mut folios, &mut done);
        for f in &done {
            m.page(f.pfn).set_refcount(1); // folio_ref_unfreeze(folio, 1)
            crate::folio::destroy_compound(m, *f).map_err(HvoError::Folio)?;
            pa.free_pages(cpu, f.pfn, f.order)?;
        }
        match r {
            Ok(_) => return Ok(()),
            Err(HvoError::NoMemory) if !done.is_empty() => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
