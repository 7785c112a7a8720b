//! mm/mm_init.c's part of boot: where deferred struct-page init starts,
//! `memmap_init()`, and the record of each boot step ([`BootPhase`]).
//! The steps are run in order by `Machine::boot` ([`crate::machine`]).

use crate::addr::{PAGE_SHIFT, PAGE_SIZE, Pfn};
use crate::mm::Migratetype;
use crate::mm::memblock::Memblock;
use crate::mm::memmap::Memmap;
use crate::mm::memmap::PAGES_PER_SECTION;
use crate::mm::page::{PageExt, pg};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Mirrors the part of mm/mm_init.c `defer_init()` that picks
/// `pgdat->first_deferred_pfn`: counting the frames of RAM (`banks`, PFN
/// ranges in address order) from the start of the zone, the first section
/// boundary after more than `PAGES_PER_SECTION` frames; `u64::MAX` if RAM
/// ends first (nothing deferred).
pub fn first_deferred_pfn(banks: &[(u64, u64)]) -> u64 {
    let mut counted = 0u64;
    for &(s, e) in banks {
        let need = PAGES_PER_SECTION.saturating_sub(counted);
        let p = (s + need).next_multiple_of(PAGES_PER_SECTION);
        if p < e {
            return p;
        }
        counted += e - s;
    }
    u64::MAX
}

/// `memmap_init()`: the struct pages below `first_deferred_pfn`
/// (`memmap_init_range()` → `__init_single_page()`), the struct pages of
/// present sections outside RAM as reserved (`init_unavailable_range()`),
/// every pageblock MOVABLE, and reserved memory PG_reserved
/// (`reserve_bootmem_region()`, which initialises a deferred struct page
/// first: `init_deferred_page()`, here its first touch). `banks` are the
/// RAM banks as PFN ranges.
pub fn memmap_init(memmap: &Memmap, pageblock_flags: &[AtomicU8], memblock: &Memblock, banks: &[(u64, u64)]) {
    memmap.init_early();
    for piece in memmap.pieces() {
        let mut pfn = piece.start_pfn;
        for &(s, e) in banks.iter().filter(|(s, e)| *e > piece.start_pfn && *s < piece.end_pfn) {
            init_unavailable_range(memmap, pfn, s.max(pfn));
            pfn = pfn.max(e);
        }
        init_unavailable_range(memmap, pfn, piece.end_pfn);
    }
    for b in pageblock_flags {
        b.store(Migratetype::Movable as u8, Relaxed);
    }
    for r in memblock.reserved() {
        for pfn in r.base.0 >> PAGE_SHIFT..r.end().div_ceil(PAGE_SIZE) {
            let p = memmap.page(Pfn(pfn));
            p.set_flag(pg::PG_RESERVED);
            p.set_ext(PageExt::Reserved);
        }
    }
}

/// Mirrors mm/mm_init.c `init_unavailable_range()`: struct pages of
/// frames `[start, end)` that a present section has but RAM does not,
/// initialised and reserved.
fn init_unavailable_range(memmap: &Memmap, start: u64, end: u64) {
    for pfn in start..end {
        let p = memmap.page(Pfn(pfn));
        p.set_flag(pg::PG_RESERVED);
        p.set_ext(PageExt::Reserved);
    }
}

/// One step of boot as it ran (instrumented): its name, the kernel
/// function it mirrors, the measured host time and what it issued.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BootPhase {
    /// mmlab's name of the step.
    pub name: &'static str,
    /// The kernel function(s) it mirrors.
    pub kernel: &'static str,
    /// Measured host time, ns (not deterministic).
    pub host_ns: u64,
    /// TLBIs issued, with their modelled time.
    pub tlbi: crate::arch::arm64::tlb::TlbiCounts,
    /// Barriers issued, with their modelled time (model backend only).
    pub barriers: crate::arch::arm64::barrier::BarrierCounts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::arm64::memory::PHYS_OFFSET;
    use crate::mm::ZoneType;
    use crate::{Machine, MachineConfig};

    #[test]
    fn boot_lays_out_memmap_and_reservations() {
        let m = Machine::boot(MachineConfig::with("64M", 2).unwrap()).unwrap();
        let mb = m.memblock();
        let mut names: Vec<_> = mb.reservations().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        // The memmap, the usemap, and the tables (64M boots bare: no image,
        // so they come from memblock): swapper_pg_dir; the fixmap's bm_pud,
        // bm_pmd and three bm_pte; the linear map's one pud, one pmd and 32 pte
        // tables (2 MiB each, page by page); the vmemmap's pud, pmd and pte
        // tables (64M is a partial section, mapped with base pages). Taken
        // one below the other, the tables are one region whoever took them,
        // as memblock_merge_regions() leaves it.
        assert_eq!(names, ["fixmap", "memmap", "pgtable", "usemap"]);
        assert_eq!(mb.reserved().len(), 3);
        assert_eq!(mb.reserved()[1].size, (1 + 5 + 34 + 3) * PAGE_SIZE);
        let tables: u64 = mb.reservations().filter(|r| r.name == "pgtable").map(|r| r.size).sum();
        assert_eq!(tables, (1 + 34 + 3) * PAGE_SIZE);
        // 16384 frames x 64 B = 1 MiB of memmap at the top 2 MiB-aligned slot.
        let memmap = *mb.reservations().find(|r| r.name == "memmap").unwrap();
        assert_eq!(memmap.size, 1 << 20);
        assert_eq!(memmap.base.0, PHYS_OFFSET + (62 << 20));
        let pfn = memmap.base.pfn();
        assert!(m.page(pfn).test_flag(pg::PG_RESERVED));
        assert_eq!(m.page(pfn).ext(), PageExt::Reserved);
        let free = m.page(Pfn(PHYS_OFFSET >> PAGE_SHIFT));
        assert!(!free.test_flag(pg::PG_RESERVED));
        // 64 MiB at 1 GiB lies below the 32-bit limit: ZONE_DMA (zone_sizes_init).
        assert_eq!(free.zonenum(), ZoneType::Dma as u32);
        assert_eq!(m.zone_spans()[0].present_pages, 16384);
        assert_eq!(m.zone_spans()[2].spanned_pages, 0);
        assert_eq!(free.refcount(), 1);
        assert_eq!(m.pageblock_flags().len(), 32);
        assert_eq!(m.memmap().page_va(Pfn(0x40001)), crate::arch::arm64::memory::VaLayout::VA48.vmemmap_start() + 64);
    }

    #[test]
    fn bad_configs_are_errors() {
        assert!(Machine::boot(MachineConfig::with("1M", 1).unwrap()).is_err());
        assert!(Machine::boot(MachineConfig::with("64M", 0).unwrap()).is_err());
        assert!(MachineConfig::with("lots", 1).is_err());
    }
}
