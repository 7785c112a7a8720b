//! Driving mmlab with a real kernel's allocation and free sequence, and
//! comparing each operation's allocator decisions.
//!
//! # Operations and their decisions
//!
//! The trace is read in order. An `mm_page_alloc` on CPU c is an
//! allocation; the `mm_page_alloc_zone_locked` events on c since c's
//! previous operation are its decisions (the kernel fires them inside
//! `rmqueue_bulk()` / `__rmqueue_smallest()`, before `mm_page_alloc`).
//! An `mm_page_free` (or `mm_page_free_batched`) on c is a free; the
//! `mm_page_pcpu_drain` events on c until c's next operation are its
//! decisions (fired in `free_pcppages_bulk()`, after `mm_page_free`).
//! `free_unref_folios()` fires `mm_page_free` for a whole batch first and
//! then commits each folio with `mm_page_free_batched`, drains following
//! that; so a free whose page is committed by a batched event further on
//! (before c's next allocation) is replayed at the batched event.
//!
//! mmlab runs each operation on the same CPU, at the same order, with a gfp
//! of the same migratetype; each allocated page is remembered by the
//! kernel's pfn, so the kernel's free of that pfn frees mmlab's page. The
//! kmem events mmlab emits during the call are its decisions.
//!
//! A decision is one of: an allocation served from the pcp list (`pcp`),
//! one that refilled the list first (`refill`: zone-locked blocks with
//! `percpu_refill=1`), one taken straight from the buddy lists under the
//! zone lock (`zone lock`: `percpu_refill=0`, the orders the pcp does not
//! cache); a free that stayed on the pcp list (`pcp`) or made it drain
//! (`drain`). "Equal" compares these classes; sizes (blocks refilled, pages
//! drained) are compared apart.
//!
//! # A trace starts mid-run
//!
//! Pages the trace frees but never allocates were allocated before it
//! started. With [`MidRun::Adopt`] (the default) mmlab allocates that many
//! pages of those orders before the replay, then empties its pcp lists, and
//! the trace's frees of them are replayed like any other: the pcp lists
//! then see the same frees the kernel's did. With [`MidRun::Skip`] they are
//! skipped with a counted warning. The pcp lists' contents when the trace
//! started are unknown either way, so the first refill or drain of each CPU
//! may differ; after it both lists hold what the same formulas left.

use super::parse::{KEvent, KEventKind, LineError, parse_line};
use super::phases::{BootFree, BootPhases};
use crate::trace::event::Collector;
use crate::trace::{EventFilter, EventLayer};
use mmlab_engine::{Cpu, Gfp, Pfn};
use mmlab_pcp::PageAllocator;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;

/// What to do with a line or event the replay cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Skip it and count a warning.
    Skip,
    /// Stop with its line number.
    Stop,
}

/// What to do with frees of pages the trace never allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MidRun {
    /// Allocate them in mmlab before the replay and replay their frees.
    Adopt,
    /// Skip their frees (a warning each).
    Skip,
}

/// A stop on bad input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Allocator decisions within one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Decisions {
    /// Blocks taken under the zone lock for a pcp refill.
    pub refill_blocks: u32,
    /// Blocks taken under the zone lock for the caller (not via the pcp).
    pub zone_locked_blocks: u32,
    /// Pages drained from a pcp list to the buddy lists.
    pub drained_pages: u64,
}

impl Decisions {
    /// The decision's class (see the module docs).
    pub fn class(&self, alloc: bool) -> &'static str {
        match (alloc, self.refill_blocks > 0, self.zone_locked_blocks > 0, self.drained_pages > 0) {
            (true, true, _, _) => "refill",
            (true, false, true, _) => "zone lock",
            (_, _, _, true) => "drain",
            _ => "pcp",
        }
    }
    /// The class with its size, for reports (`refill 63`, `drain 31`, `pcp`).
    pub fn describe(&self, alloc: bool) -> String {
        match self.class(alloc) {
            "refill" => format!("refill ({} blocks)", self.refill_blocks),
            "zone lock" => format!("zone lock ({} blocks)", self.zone_locked_blocks),
            "drain" => format!("drain ({} pages)", self.drained_pages),
            c => c.to_owned(),
        }
    }
}

/// One replayed operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpRecord {
    /// The trace line of the operation's event.
    pub line: usize,
    pub cpu: usize,
    /// Allocation (else free).
    pub alloc: bool,
    pub order: u32,
    /// The kernel's pfn.
    pub pfn: u64,
    pub kernel: Decisions,
    pub mmlab: Decisions,
}

impl OpRecord {
    /// Same decision class on both sides.
    pub fn equal(&self) -> bool {
        self.kernel.class(self.alloc) == self.mmlab.class(self.alloc)
    }
}

/// Warnings by kind, with the first few lines.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Warnings {
    /// Count per kind.
    pub counts: BTreeMap<&'static str, u64>,
    /// The first warnings: (line, kind, message).
    pub first: Vec<(usize, &'static str, String)>,
}

/// How many warnings are kept with their line.
const FIRST_WARNINGS: usize = 10;

/// Warning kinds.
pub mod warn {
    pub const MALFORMED: &str = "malformed line";
    pub const UNKNOWN_EVENT: &str = "unknown event";
    pub const PFN_OUTSIDE: &str = "pfn outside the traced machine";
    /// Not a warning: always an error (the trace's CPU count is wrong).
    pub const CPU_OUTSIDE: &str = "event on a CPU outside the traced machine";
    /// Not a warning: always an error (mmlab has not the pages the trace implies).
    pub const ADOPT_FAILED: &str = "mmlab could not adopt the pages the trace frees without allocating them";
    pub const FREE_UNKNOWN: &str = "free of a page the trace never allocated";
    pub const ALLOC_LIVE: &str = "allocation of a pfn already live (its free was not traced)";
    pub const MMLAB_ALLOC_FAILED: &str = "mmlab could not allocate";
}

/// The outcome of a replay.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplayOutcome {
    /// Lines read.
    pub lines: usize,
    /// Events parsed.
    pub events: usize,
    /// The operations replayed, in order.
    pub ops: Vec<OpRecord>,
    /// Allocations the kernel failed (not replayed).
    pub kernel_failed_allocs: u64,
    /// Pages allocated before the replay for frees of pages the trace never allocated.
    pub adopted_pages: u64,
    /// Drain events before a CPU's first operation (not attributed).
    pub unattributed_drains: u64,
    /// Pages put on the pcp lists before the replay (warm start).
    pub warm_start_pages: u64,
    /// A from-boot capture: pages of the boot's own frees not replayed,
    /// by kind ("deferred init", "CMA activation"): mmlab's boot freed them.
    pub boot_free_pages: BTreeMap<&'static str, u64>,
    /// Pages the kernel drained right after those frees (not attributed).
    pub boot_free_drained_pages: u64,
    /// A from-boot capture: the line where mmlab's pcp lists were emptied
    /// and filled as the kernel's are implied to be, and the pages put on them.
    pub resync: Option<(usize, u64)>,
    pub warnings: Warnings,
}

struct Run<'a, 'm> {
    opts: Options,
    pa: &'a PageAllocator<'m>,
    cpus: &'a [Cpu<'m>],
    /// Each CPU's pcp count when the trace started, if the trace says.
    start_counts: Vec<Option<u64>>,
    /// A from-boot capture's boot frees (lines), not replayed.
    boot_frees: std::collections::HashMap<usize, BootFree>,
    /// A from-boot capture's resync line ([`BootPhases::resync_line`]).
    resync_line: Option<usize>,
    out: ReplayOutcome,
}

/// Replay options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub on_error: OnError,
    pub mid_run: MidRun,
    /// Fill the pcp lists as the trace implies they were when it started.
    pub warm_start: bool,
}

fn gfp_of(migratetype: i32) -> Gfp {
    let g = match migratetype {
        1 => Gfp::GFP_HIGHUSER_MOVABLE,
        2 => Gfp::GFP_KERNEL | Gfp::__GFP_RECLAIMABLE,
        _ => Gfp::GFP_KERNEL,
    };
    g | Gfp::__GFP_NOWARN
}

impl Run<'_, '_> {
    fn warn(&mut self, line: usize, kind: &'static str, msg: String) -> Result<(), ReplayError> {
        if self.opts.on_error == OnError::Stop {
            return Err(ReplayError { line, message: format!("{kind}: {msg}") });
        }
        *self.out.warnings.counts.entry(kind).or_default() += 1;
        if self.out.warnings.first.len() < FIRST_WARNINGS {
            self.out.warnings.first.push((line, kind, msg));
        }
        Ok(())
    }
}

fn decisions(events: Vec<crate::trace::TraceEvent>) -> Decisions {
    let mut d = Decisions::default();
    for e in events {
        match e.name {
            "mm_page_alloc_zone_locked" if e.u("percpu_refill") != 0 => d.refill_blocks += 1,
            "mm_page_alloc_zone_locked" => d.zone_locked_blocks += 1,
            "mm_page_pcpu_drain" => d.drained_pages += 1 << e.u("order"),
            _ => {}
        }
    }
    d
}

/// Whether the free at `i` is committed by an `mm_page_free_batched` of
/// the same pfn on the same CPU before that CPU's next allocation.
fn committed_later(evs: &[KEvent], i: usize) -> bool {
    let (cpu, pfn) = (evs[i].cpu, evs[i].pfn);
    let mut seen = 0;
    for e in evs[i + 1..].iter().filter(|e| e.cpu == cpu) {
        match e.kind {
            KEventKind::FreeBatched if e.pfn == pfn => return true,
            KEventKind::Alloc { .. } => return false,
            _ => {}
        }
        seen += 1;
        if seen > 256 {
            return false;
        }
    }
    false
}

/// Parse `text` and replay it on `pa` over `cpus` (mmlab CPU i plays the
/// kernel's CPU i). `max_pfn`: the traced machine's end of memory, if
/// known; `start_counts`: each CPU's pcp count when the trace started, if
/// known (for the warm start).
///
/// # Errors
/// With [`OnError::Stop`], the first line the replay cannot take.
pub fn replay<'m>(
    text: &str,
    pa: &PageAllocator<'m>,
    cpus: &[Cpu<'m>],
    max_pfn: Option<u64>,
    start_counts: &[Option<u64>],
    opts: Options,
    boot: Option<&BootPhases>,
) -> Result<ReplayOutcome, ReplayError> {
    let mut run = Run {
        opts,
        pa,
        cpus,
        start_counts: start_counts.to_vec(),
        boot_frees: boot.map(|b| b.boot_frees.clone()).unwrap_or_default(),
        resync_line: boot.and_then(BootPhases::resync_line),
        out: ReplayOutcome::default(),
    };
    let mut evs = Vec::new();
    for (i, l) in text.lines().enumerate() {
        run.out.lines += 1;
        match parse_line(i + 1, l) {
            Ok(Some(e)) => evs.push(e),
            Ok(None) => {}
            Err(LineError::UnknownEvent(name)) => {
                run.warn(i + 1, warn::UNKNOWN_EVENT, LineError::UnknownEvent(name).to_string())?
            }
            Err(LineError::Malformed(m)) => run.warn(i + 1, warn::MALFORMED, m)?,
        }
    }
    run.out.events = evs.len();
    // Events on CPUs or pfns outside the machines are dropped up front.
    let mut kept = Vec::with_capacity(evs.len());
    for e in evs {
        if e.cpu >= cpus.len() {
            return Err(ReplayError {
                line: e.line,
                message: format!(
                    "{}: CPU {} on a machine of {} CPUs (the trace's `# mmlab: cpus=` or --cpus is wrong)",
                    warn::CPU_OUTSIDE,
                    e.cpu,
                    cpus.len()
                ),
            });
        } else if let Some(max) = max_pfn
            && e.pfn >= max
        {
            run.warn(e.line, warn::PFN_OUTSIDE, format!("pfn {:#x} (the traced machine ends at {max:#x})", e.pfn))?;
        } else {
            kept.push(e);
        }
    }
    let collector = Collector::new();
    let filter = EventFilter::parse(&["kmem:mm_page_alloc_zone_locked", "kmem:mm_page_pcpu_drain"])
        .expect("the replay's events are in the catalogue");
    let subscriber = Registry::default().with(EventLayer::new(collector.clone()).filtered(filter));
    tracing::subscriber::with_default(subscriber, || run.go(&kept, &collector))?;
    Ok(run.out)
}

impl Run<'_, '_> {
    fn go(&mut self, evs: &[KEvent], col: &Collector) -> Result<(), ReplayError> {
        let mut live: HashMap<u64, (Pfn, u32)> = HashMap::new();
        if self.opts.mid_run == MidRun::Adopt {
            self.adopt(evs, &mut live)?;
        }
        let warm = if self.opts.warm_start { self.warm_start_alloc(evs, 0, true)? } else { Vec::new() };
        // Empty every pcp list, then put the warm-start pages back on theirs.
        self.out.warm_start_pages = self.fill_lists(warm);
        let n = self.cpus.len();
        let mut pre = vec![Decisions::default(); n];
        let mut last_op: Vec<Option<usize>> = vec![None; n];
        let mut batched: HashMap<(usize, u64), u32> = HashMap::new();
        // A CPU whose last event was a boot free that is not replayed.
        let mut after_boot_free = vec![false; n];
        col.take();
        for (i, e) in evs.iter().enumerate() {
            let c = e.cpu;
            if let Some(line) = self.resync_line
                && e.line >= line
                && self.out.resync.is_none()
            {
                let pages = self.warm_start_alloc(evs, i, false)?;
                let n = self.fill_lists(pages);
                col.take();
                self.out.resync = Some((e.line, n));
            }
            if let Some(kind) = self.boot_frees.get(&e.line)
                && let KEventKind::Free { order } = e.kind
            {
                let name = match kind {
                    BootFree::DeferredInit => "deferred init",
                    BootFree::Cma => "CMA activation",
                };
                *self.out.boot_free_pages.entry(name).or_default() += 1 << order;
                after_boot_free[c] = true;
                continue;
            }
            if !matches!(e.kind, KEventKind::PcpuDrain { .. }) {
                after_boot_free[c] = false;
            }
            match &e.kind {
                KEventKind::ZoneLocked { percpu_refill, .. } => {
                    if *percpu_refill {
                        pre[c].refill_blocks += 1;
                    } else {
                        pre[c].zone_locked_blocks += 1;
                    }
                }
                KEventKind::Alloc { order, migratetype, .. } => {
                    let kernel = std::mem::take(&mut pre[c]);
                    if e.null_page {
                        self.out.kernel_failed_allocs += 1;
                        continue;
                    }
                    if let Some((p, o)) = live.remove(&e.pfn) {
                        self.warn(e.line, warn::ALLOC_LIVE, format!("pfn {:#x}", e.pfn))?;
                        let _ = self.pa.free_pages(&self.cpus[c], p, o);
                        col.take();
                    }
                    let got = self.pa.alloc_pages(&self.cpus[c], gfp_of(*migratetype), *order);
                    let mmlab = decisions(col.take());
                    let Some(p) = got else {
                        self.warn(e.line, warn::MMLAB_ALLOC_FAILED, format!("order {order} on cpu {c}"))?;
                        continue;
                    };
                    live.insert(e.pfn, (p, *order));
                    last_op[c] = Some(self.out.ops.len());
                    self.out.ops.push(OpRecord {
                        line: e.line,
                        cpu: c,
                        alloc: true,
                        order: *order,
                        pfn: e.pfn,
                        kernel,
                        mmlab,
                    });
                }
                KEventKind::Free { order } => {
                    if committed_later(evs, i) {
                        batched.insert((c, e.pfn), *order);
                    } else {
                        self.free(e, *order, &mut live, &mut last_op, col)?;
                    }
                }
                KEventKind::FreeBatched => {
                    let order = batched.remove(&(c, e.pfn)).unwrap_or(0);
                    self.free(e, order, &mut live, &mut last_op, col)?;
                }
                KEventKind::PcpuDrain { order, .. } if after_boot_free[c] => {
                    self.out.boot_free_drained_pages += 1 << order;
                }
                KEventKind::PcpuDrain { order, .. } => match last_op[c] {
                    Some(j) => self.out.ops[j].kernel.drained_pages += 1 << order,
                    None => self.out.unattributed_drains += 1,
                },
            }
        }
        Ok(())
    }

    fn free(
        &mut self,
        e: &KEvent,
        order: u32,
        live: &mut HashMap<u64, (Pfn, u32)>,
        last_op: &mut [Option<usize>],
        col: &Collector,
    ) -> Result<(), ReplayError> {
        let Some((p, o)) = live.remove(&e.pfn) else {
            return self.warn(e.line, warn::FREE_UNKNOWN, format!("pfn {:#x} order {order}", e.pfn));
        };
        col.take();
        let r = self.pa.free_pages(&self.cpus[e.cpu], p, o);
        let mmlab = decisions(col.take());
        if r.is_err() {
            return self.warn(e.line, warn::FREE_UNKNOWN, format!("pfn {:#x}: mmlab refused the free", e.pfn));
        }
        last_op[e.cpu] = Some(self.out.ops.len());
        self.out.ops.push(OpRecord {
            line: e.line,
            cpu: e.cpu,
            alloc: false,
            order: o,
            pfn: e.pfn,
            kernel: Decisions::default(),
            mmlab,
        });
        Ok(())
    }

    /// Allocate, before the replay, the pages the trace frees without
    /// allocating them, then empty every pcp list.
    fn adopt(&mut self, evs: &[KEvent], live: &mut HashMap<u64, (Pfn, u32)>) -> Result<(), ReplayError> {
        let mut allocated: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let mut want: Vec<(usize, u64, u32)> = Vec::new();
        let mut batched_order: HashMap<u64, u32> = HashMap::new();
        for e in evs.iter().filter(|e| !self.boot_frees.contains_key(&e.line)) {
            match e.kind {
                KEventKind::Alloc { .. } if !e.null_page => {
                    allocated.insert(e.pfn);
                }
                KEventKind::Free { order } => {
                    batched_order.insert(e.pfn, order);
                    if !allocated.remove(&e.pfn) && !live.contains_key(&e.pfn) {
                        want.push((e.line, e.pfn, order));
                        live.insert(e.pfn, (Pfn(0), order));
                    }
                }
                KEventKind::FreeBatched => {
                    if !batched_order.contains_key(&e.pfn) && !allocated.remove(&e.pfn) && !live.contains_key(&e.pfn) {
                        want.push((e.line, e.pfn, 0));
                        live.insert(e.pfn, (Pfn(0), 0));
                    }
                    batched_order.remove(&e.pfn);
                }
                _ => {}
            }
        }
        live.clear();
        let cpu = &self.cpus[0];
        for (line, pfn, order) in want {
            match self.pa.alloc_pages(cpu, Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_NOWARN, order) {
                Some(p) => {
                    live.insert(pfn, (p, order));
                    self.out.adopted_pages += 1 << order;
                }
                None => {
                    return Err(ReplayError {
                        line,
                        message: format!(
                            "{}: pfn {pfn:#x} order {order}, after {} pages adopted of {} free (the trace frees more \
                             memory it never allocated than mmlab has; a capture from boot needs `# mmlab: \
                             boot_trace=1` so that the boot's own frees are recognised)",
                            warn::ADOPT_FAILED,
                            self.out.adopted_pages,
                            self.out.adopted_pages + self.pa.nr_free_pages().max(0) as u64
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Infer how many pages each CPU's pcp list of each order and
    /// migratetype held at the event `from` of `evs` (the trace's start,
    /// or a from-boot capture's resync point), and allocate that many
    /// pages per CPU (to be freed onto the lists after they are emptied).
    /// At the trace's start, when it gives the CPU's pcp count, the pages
    /// not accounted for by the lists the trace uses are added as
    /// unmovable order-0 pages, so the count that `high` is compared with
    /// starts the same.
    ///
    /// Until a list is first refilled or drained, its length is its start
    /// length plus the frees to it minus the allocations from it, and it
    /// is empty just before its first refill; so the start length is
    /// allocations minus frees at that refill (exact), or the largest
    /// excess of allocations over frees seen before a drain or the end (a
    /// lower bound). A free goes to the list of its page's migratetype as
    /// the trace allocated it (movable for pages allocated before the
    /// trace, and for MIGRATE_CMA pages, as `free_frozen_page_commit()`
    /// puts them). The lists are those of the orders the pcp keeps
    /// (0 to `PAGE_ALLOC_COSTLY_ORDER`, and `pageblock_order`).
    fn warm_start_alloc(
        &mut self,
        evs: &[KEvent],
        from: usize,
        with_counts: bool,
    ) -> Result<Vec<Vec<(Pfn, u32)>>, ReplayError> {
        type List = (usize, u32, usize);
        let pcp_order = |o: u32| o <= 3 || o == 9;
        let pcp_mt = |mt: i32| if (0..3).contains(&mt) { mt as usize } else { 1 };
        let n = self.cpus.len();
        let mut bal: BTreeMap<List, i64> = BTreeMap::new();
        let mut need: BTreeMap<List, i64> = BTreeMap::new();
        let mut done: std::collections::HashSet<List> = std::collections::HashSet::new();
        let mut drained = vec![false; n];
        let mut mt_of: HashMap<u64, usize> = HashMap::new();
        let mut order_of: HashMap<u64, u32> = HashMap::new();
        for e in &evs[..from] {
            if let KEventKind::Alloc { migratetype, .. } = e.kind {
                mt_of.insert(e.pfn, pcp_mt(migratetype));
            }
        }
        for e in &evs[from..] {
            let c = e.cpu;
            if drained[c] {
                continue;
            }
            match e.kind {
                KEventKind::Alloc { order, migratetype, .. } if !e.null_page && pcp_order(order) => {
                    let l = (c, order, pcp_mt(migratetype));
                    mt_of.insert(e.pfn, l.2);
                    if !done.contains(&l) {
                        let b = bal.entry(l).or_default();
                        *b -= 1;
                        let b = *b;
                        let nd = need.entry(l).or_default();
                        *nd = (*nd).max(-b);
                    }
                }
                KEventKind::Free { .. } | KEventKind::FreeBatched => {
                    // A batched commit repeats the mm_page_free before it: counted once.
                    let order = match e.kind {
                        KEventKind::Free { order } => {
                            order_of.insert(e.pfn, order);
                            order
                        }
                        _ if order_of.remove(&e.pfn).is_some() => continue,
                        _ => 0,
                    };
                    let l = (c, order, mt_of.get(&e.pfn).copied().unwrap_or(1));
                    if pcp_order(order) && !done.contains(&l) {
                        *bal.entry(l).or_default() += 1;
                    }
                }
                KEventKind::ZoneLocked { order, migratetype, percpu_refill: true } => {
                    let l = (c, order, pcp_mt(migratetype));
                    if done.insert(l) {
                        need.insert(l, (-bal.get(&l).copied().unwrap_or(0)).max(0));
                    }
                }
                KEventKind::PcpuDrain { .. } => drained[c] = true,
                _ => {}
            }
        }
        // Pages the lists held that the trace never touches: the rest of
        // the CPU's count, as unmovable order-0 pages.
        for c in 0..n {
            if with_counts && let Some(Some(count)) = self.start_counts.get(c) {
                // Below high, so that putting them back drains nothing.
                let high = self.pa.pageset(c).map_or(0, |p| i64::from(p.high.max(p.high_min)));
                let known: i64 = need.iter().filter(|(l, _)| l.0 == c).map(|(l, k)| k << l.1).sum();
                *need.entry((c, 0, 0)).or_default() += ((*count as i64).min(high - 1) - known).max(0);
            }
        }
        let mut pages = vec![Vec::new(); n];
        for (&(c, order, mt), &k) in &need {
            for _ in 0..k {
                match self.pa.alloc_pages(&self.cpus[c], gfp_of(mt as i32), order) {
                    Some(p) => pages[c].push((p, order)),
                    None => {
                        self.warn(0, warn::MMLAB_ALLOC_FAILED, format!("warm start of cpu {c}"))?;
                        break;
                    }
                }
            }
        }
        Ok(pages)
    }

    /// Empty every pcp list and put `pages` on their CPUs' lists.
    fn fill_lists(&mut self, pages: Vec<Vec<(Pfn, u32)>>) -> u64 {
        self.pa.drain_all_pages(&self.cpus[0]);
        let mut n = 0;
        for (c, pages) in pages.into_iter().enumerate() {
            for (p, order) in pages {
                if self.pa.free_pages(&self.cpus[c], p, order).is_ok() {
                    n += 1 << order;
                }
            }
        }
        n
    }
}
