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
//! | `initcalls` | the rest: the initcalls, the initramfs unpacked, the initrd freed |
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
}

impl BootPhases {
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

/// Recognise the phases of a from-boot capture (module docs).
pub fn recognise(evs: &[KEvent]) -> BootPhases {
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
init [000] 0.5: mm_page_free: pfn=0xc00 order=0
cat [001] 0.6: mm_page_alloc: pfn=0x102 order=0 migratetype=1 gfp_flags=GFP_KERNEL
";
        let evs: Vec<KEvent> = text.lines().enumerate().filter_map(|(i, l)| parse_line(i + 1, l).unwrap()).collect();
        let p = recognise(&evs);
        let phases: Vec<(Phase, usize, usize)> =
            p.segments.iter().map(|s| (s.phase, s.first_line, s.last_line)).collect();
        assert_eq!(
            phases,
            [
                (Phase::StartKernel, 1, 1),
                (Phase::Initcalls, 2, 2),
                (Phase::DeferredInit, 3, 4),
                (Phase::CmaActivation, 5, 5),
                (Phase::Initcalls, 6, 7),
                (Phase::Userspace, 8, 8)
            ]
        );
        assert_eq!(p.boot_frees.len(), 3);
        assert_eq!(p.boot_frees[&5], BootFree::Cma);
        assert_eq!(p.phase_of(4), Some(Phase::DeferredInit));
    }
}
