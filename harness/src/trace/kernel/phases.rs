//! A from-boot capture's phases, and the boot's own frees.
//!
//! A capture with `trace_event=` on the kernel command line (`# mmlab:
//! boot_trace=1`, scripts/arm64-peer/boot.sh with `PEER_BOOT_TRACE=1`)
//! starts in `start_kernel()`, after `mm_core_init()`: memblock_free_all()
//! has freed the memory memblock did not keep, untraced. What the trace
//! then shows, recognised from the events alone:
//!
//! | phase | recognised by |
//! |---|---|
//! | `start_kernel` | events before the first one of a task other than `<idle>`/`swapper` (the boot CPU alone, on its boot pageset: batch 1, high 0, so every allocation refills and every free drains) |
//! | `deferred init` | the frees of pages the trace never allocated by `pgdatinit*` or of order `MAX_PAGE_ORDER` (10): `deferred_init_memmap()` giving the memory above the first section to the buddy, from the first such free to the last |
//! | `CMA activation` | the frees of pageblocks (order 9) the trace never allocated: `cma_activate_area()` freeing the CMA area as MIGRATE_CMA |
//! | `userspace` | after the last free of a page the trace never allocated by `init`: `free_initmem()` is the last thing `kernel_init()` does before it runs `/init` |
//! | `early initcalls` | from the first task's event to the first order-0 refill of `batch << k` blocks (`batch` of the header, the end of boot's): the pagesets are still those `setup_per_cpu_pageset()` sized from the memory before deferred init (at 2G/3: batch 3, refills of 1, 3, 6, ..., 96 blocks) |
//! | `initcalls` | the rest: the pagesets sized as they stay (`init_per_zone_wmark_min()` and the pageset updates after it; 63, 126, ..., 1,007 blocks at 2G/3), the initcalls, the initramfs unpacked, the initrd freed |
//!
//! mmlab's pagesets are the end of boot's from the start (its boot runs
//! `init_per_zone_wmark_min()` before the replay), so the replay resyncs
//! where `initcalls` starts ([`BootPhases::resync_line`]): it empties its
//! pcp lists and fills them as the events from there on imply the kernel's
//! held (as at a mid-run trace's start, [`super::replay`]).
//!
//! The frees of deferred init and of the CMA area are memory that
//! mmlab's boot (`memblock_free_all()`, `cma_init_reserved_areas()`) has
//! already freed: they are counted per phase and not replayed, and the
//! drains they cause are counted with them. The other frees of pages the
//! trace never allocated (the initrd and the init sections given back by
//! `free_reserved_area()`, pages of `alloc_pages_bulk()`, which has no
//! `mm_page_alloc` event, and of `alloc_contig_range()`) are replayed as a
//! mid-run trace's are ([`super::replay::MidRun`]).

use super::parse::{KEvent, KEventKind};
use serde::Serialize;
use std::collections::HashSet;

/// `MAX_PAGE_ORDER` (arm64, 4K pages).
const MAX_PAGE_ORDER: u32 = 10;
/// `pageblock_order` (arm64, 4K pages).
const PAGEBLOCK_ORDER: u32 = 9;

/// A phase of the boot (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Phase {
    #[serde(rename = "start_kernel")]
    StartKernel,
    #[serde(rename = "early initcalls")]
    EarlyInitcalls,
    #[serde(rename = "initcalls")]
    Initcalls,
    #[serde(rename = "deferred init")]
    DeferredInit,
    #[serde(rename = "CMA activation")]
    CmaActivation,
    #[serde(rename = "userspace")]
    Userspace,
}

impl Phase {
    /// The report's name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::StartKernel => "start_kernel",
            Phase::EarlyInitcalls => "early initcalls",
            Phase::Initcalls => "initcalls",
            Phase::DeferredInit => "deferred init",
            Phase::CmaActivation => "CMA activation",
            Phase::Userspace => "userspace",
        }
    }
}

/// A run of trace lines in one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub phase: Phase,
    /// First and last trace line (1-based) of the run.
    pub first_line: usize,
    pub last_line: usize,
    /// Events in the run.
    pub events: usize,
}

/// What the boot freed that mmlab's boot has free already.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BootFree {
    /// `deferred_init_memmap()`.
    DeferredInit,
    /// `cma_activate_area()`.
    Cma,
}

/// The phases of a from-boot capture and the lines of its boot frees.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BootPhases {
    /// The runs, in trace order.
    pub segments: Vec<Segment>,
    /// Lines of the frees of memory mmlab's boot has freed, with their kind.
    #[serde(skip)]
    pub boot_frees: std::collections::HashMap<usize, BootFree>,
    /// The first line with the end of boot's pagesets ([`Self::resync_line`]).
    pub sized_from: Option<usize>,
}

/// The first event of the first order-0 pcp refill of `batch << k` blocks
/// (the zone-locked events before one allocation on one CPU), as an index
/// into `evs`.
fn first_sized_refill(evs: &[KEvent], batch: u64) -> Option<usize> {
    if batch == 0 {
        return None;
    }
    let sized = |n: u64| n.is_multiple_of(batch) && (n / batch).is_power_of_two();
    let mut run: std::collections::HashMap<usize, (usize, u64)> = std::collections::HashMap::new();
    for (i, e) in evs.iter().enumerate() {
        match e.kind {
            KEventKind::ZoneLocked { order: 0, percpu_refill: true, .. } => {
                run.entry(e.cpu).or_insert((i, 0)).1 += 1;
            }
            KEventKind::Alloc { .. } => {
                if let Some((first, n)) = run.remove(&e.cpu)
                    && sized(n)
                {
                    return Some(first);
                }
            }
            _ => {}
        }
    }
    None
}

impl BootPhases {
    /// The line where the kernel's pagesets become the end of boot's
    /// (mmlab's): the first order-0 refill of `batch << k` blocks.
    pub fn resync_line(&self) -> Option<usize> {
        self.sized_from
    }

    /// The phase of trace line `line`.
    pub fn phase_of(&self, line: usize) -> Option<Phase> {
        let i = self.segments.partition_point(|s| s.last_line < line);
        self.segments.get(i).filter(|s| s.first_line <= line).map(|s| s.phase)
    }
}

/// The frees of pages the trace never allocated, in order: (index in
/// `evs`, kind or None for the others).
fn never_allocated(evs: &[KEvent]) -> Vec<(usize, Option<BootFree>)> {
    let mut live: HashSet<u64> = HashSet::new();
    let mut out = Vec::new();
    for (i, e) in evs.iter().enumerate() {
        match e.kind {
            KEventKind::Alloc { order, .. } if !e.null_page && order <= MAX_PAGE_ORDER => {
                live.extend(e.pfn..e.pfn + (1 << order));
            }
            KEventKind::Free { order } if order <= MAX_PAGE_ORDER => {
                let known = live.contains(&e.pfn);
                for p in e.pfn..e.pfn + (1 << order) {
                    live.remove(&p);
                }
                if !known {
                    let kind = if e.comm.starts_with("pgdatinit") || order == MAX_PAGE_ORDER {
                        Some(BootFree::DeferredInit)
                    } else if order == PAGEBLOCK_ORDER {
                        Some(BootFree::Cma)
                    } else {
                        None
                    };
                    out.push((i, kind));
                }
            }
            _ => {}
        }
    }
    out
}

/// Recognise the phases of a from-boot capture (module docs); `batch`: the
/// end of boot's pcp batch (the header's), if known.
pub fn recognise(evs: &[KEvent], batch: Option<u64>) -> BootPhases {
    let mut p = BootPhases::default();
    if evs.is_empty() {
        return p;
    }
    let never = never_allocated(evs);
    let span = |kind: BootFree| {
        let mut it = never.iter().filter(|(_, k)| *k == Some(kind)).map(|&(i, _)| i);
        let first = it.next()?;
        Some((first, it.next_back().unwrap_or(first)))
    };
    let deferred = span(BootFree::DeferredInit);
    let cma = span(BootFree::Cma);
    for &(i, k) in &never {
        if let Some(k) = k {
            p.boot_frees.insert(evs[i].line, k);
        }
    }
    let first_task = evs.iter().position(|e| e.comm != "<idle>" && !e.comm.starts_with("swapper")).unwrap_or(evs.len());
    let userspace =
        never.iter().filter(|&&(i, k)| k.is_none() && evs[i].comm == "init").map(|&(i, _)| i + 1).next_back();
    let sized = batch.and_then(|b| first_sized_refill(evs, b));
    p.sized_from = sized.map(|i| evs[i].line);
    let within = |r: Option<(usize, usize)>, i: usize| r.is_some_and(|(a, b)| a <= i && i <= b);
    for (i, e) in evs.iter().enumerate() {
        let phase = if i < first_task {
            Phase::StartKernel
        } else if within(deferred, i) {
            Phase::DeferredInit
        } else if within(cma, i) {
            Phase::CmaActivation
        } else if userspace.is_some_and(|u| i >= u) {
            Phase::Userspace
        } else if sized.is_some_and(|s| i < s) {
            Phase::EarlyInitcalls
        } else {
            Phase::Initcalls
        };
        match p.segments.last_mut() {
            Some(s) if s.phase == phase => {
                s.last_line = e.line;
                s.events += 1;
            }
            _ => p.segments.push(Segment { phase, first_line: e.line, last_line: e.line, events: 1 }),
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::kernel::parse::parse_line;

    #[test]
    fn phases_of_a_small_boot() {
        let text = "\
<idle> [000] 0.000000: mm_page_alloc: pfn=0x100 order=0 migratetype=0 gfp_flags=GFP_KERNEL
init [000] 0.1: mm_page_alloc: pfn=0x101 order=0 migratetype=0 gfp_flags=GFP_KERNEL
pgdatinit0 [001] 0.2: mm_page_free: pfn=0x400 order=10
pgdatinit0 [001] 0.2: mm_page_free: pfn=0x800 order=0
init [000] 0.3: mm_page_free: pfn=0xa00 order=9
init [000] 0.4: mm_page_free: pfn=0x101 order=0
init [000] 0.5: mm_page_alloc_zone_locked: pfn=0x103 order=0 migratetype=0 percpu_refill=1
init [000] 0.5: mm_page_alloc_zone_locked: pfn=0x104 order=0 migratetype=0 percpu_refill=1
init [000] 0.5: mm_page_alloc: pfn=0x103 order=0 migratetype=0 gfp_flags=GFP_KERNEL
init [000] 0.5: mm_page_free: pfn=0xc00 order=0
cat [001] 0.6: mm_page_alloc: pfn=0x102 order=0 migratetype=1 gfp_flags=GFP_KERNEL
";
        let evs: Vec<KEvent> = text.lines().enumerate().filter_map(|(i, l)| parse_line(i + 1, l).unwrap()).collect();
        let p = recognise(&evs, Some(2));
        let phases: Vec<(Phase, usize, usize)> =
            p.segments.iter().map(|s| (s.phase, s.first_line, s.last_line)).collect();
        assert_eq!(
            phases,
            [
                (Phase::StartKernel, 1, 1),
                (Phase::EarlyInitcalls, 2, 2),
                (Phase::DeferredInit, 3, 4),
                (Phase::CmaActivation, 5, 5),
                (Phase::EarlyInitcalls, 6, 6),
                (Phase::Initcalls, 7, 10),
                (Phase::Userspace, 11, 11)
            ]
        );
        assert_eq!(p.boot_frees.len(), 3);
        assert_eq!(p.boot_frees[&5], BootFree::Cma);
        assert_eq!(p.phase_of(4), Some(Phase::DeferredInit));
        assert_eq!(p.resync_line(), Some(7));
    }
}
