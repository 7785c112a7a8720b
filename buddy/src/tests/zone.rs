//! `struct zone` and the primitives under its lock (buddy/src/zone.rs): the
//! `ALLOC_*` and `FPI_*` bits, the pageblock flags byte, the zone's span
//! and counters, `__add_to_free_list()`, `__del_page_from_free_list()`,
//! `move_to_free_list()` and `account_freepages()`.

use super::trace::events as trace_events;
use super::{BASE, free, is_free_block, label, list, machine};
use crate::PbIsolateMode;
use crate::zone::{
    AllocFlags, Fpi, PAGEBLOCK_MIGRATETYPE_MASK, PB_MIGRATE_ISOLATE, Zone, ZoneFlag, fl, pfnblock_flags_migratetype,
};
use mmlab_engine::mm::banks::MemBank;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::zone_layout::ZoneSpan;
use mmlab_engine::mm::{MIGRATE_TYPES, NR_PAGE_ORDERS, ZoneType};
use mmlab_engine::{Machine, MachineConfig, Migratetype, Pfn};
use std::sync::atomic::Ordering::Relaxed;

use Migratetype::{Cma, HighAtomic, Isolate, Movable, Reclaimable, Unmovable};

/// A zone `[BASE + 0x1000, BASE + 0x2000)` of the 64 MiB machine (pageblocks
/// 8 to 15 of its bitmap), half of it present, as `free_area_init_core()`
/// would set up a zone that does not start at the first frame of RAM.
fn inner_zone(m: &Machine) -> Zone<'_> {
    let span =
        ZoneSpan { zone: ZoneType::Dma, zone_start_pfn: BASE + 0x1000, spanned_pages: 0x1000, present_pages: 0x800 };
    Zone::from_span(m, span)
}

/// The `ALLOC_*` values of mm/internal.h: the watermark index in the low
/// two bits (`ALLOC_WMARK_MASK` is `ALLOC_NO_WATERMARKS - 1`), one bit for
/// each flag above it, and `ALLOC_RESERVES`, the flags that may go below
/// the min watermark: `ALLOC_NON_BLOCK | ALLOC_MIN_RESERVE |
/// ALLOC_HIGHATOMIC | ALLOC_OOM` = 0x238, without `ALLOC_NO_WATERMARKS`.
#[test]
fn alloc_flags_are_the_kernels_bits() {
    let bits = [
        (AllocFlags::WMARK_MIN, 0),
        (AllocFlags::WMARK_LOW, 1),
        (AllocFlags::WMARK_HIGH, 2),
        (AllocFlags::NO_WATERMARKS, 0x04),
        (AllocFlags::OOM, 0x08),
        (AllocFlags::NON_BLOCK, 0x10),
        (AllocFlags::MIN_RESERVE, 0x20),
        (AllocFlags::CPUSET, 0x40),
        (AllocFlags::CMA, 0x80),
        (AllocFlags::NOFRAGMENT, 0x100),
        (AllocFlags::HIGHATOMIC, 0x200),
        (AllocFlags::TRYLOCK, 0x400),
        (AllocFlags::KSWAPD, 0x800),
    ];
    for (f, v) in bits {
        assert_eq!(f.0, v);
    }
    assert_eq!(AllocFlags::WMARK_MASK, AllocFlags::NO_WATERMARKS.0 - 1);
    assert_eq!(AllocFlags::RESERVES.0, 0x238);
    assert_eq!(
        AllocFlags::RESERVES,
        AllocFlags::NON_BLOCK | AllocFlags::MIN_RESERVE | AllocFlags::HIGHATOMIC | AllocFlags::OOM
    );
    assert!(!AllocFlags::NO_WATERMARKS.has(AllocFlags::RESERVES));
}

/// `alloc_flags & ALLOC_X` is true when any bit is shared, `alloc_flags &
/// ALLOC_WMARK_MASK` is the watermark index whatever else is set, and
/// `|`/`|=` only add bits.
#[test]
fn alloc_flags_has_wmark_and_or() {
    let f = AllocFlags::WMARK_LOW | AllocFlags::CMA;
    assert_eq!(f.0, 0x81);
    assert!(f.has(AllocFlags::CMA));
    assert!(!f.has(AllocFlags::HIGHATOMIC));
    assert!(!f.has(AllocFlags::RESERVES));
    assert!(f.has(AllocFlags::RESERVES | AllocFlags::CMA));
    assert!(!AllocFlags::default().has(AllocFlags::CMA));
    assert_eq!(f.wmark(), 1);
    assert_eq!((AllocFlags::WMARK_HIGH | AllocFlags::KSWAPD | AllocFlags::NO_WATERMARKS).wmark(), 2);
    assert_eq!(AllocFlags::RESERVES.wmark(), 0);
    let mut g = AllocFlags::WMARK_MIN;
    g |= AllocFlags::NOFRAGMENT;
    g |= AllocFlags::KSWAPD;
    assert_eq!(g, AllocFlags(0x900));
    g |= AllocFlags::KSWAPD;
    assert_eq!(g.0, 0x900);
    // A bit set on both sides stays set once.
    assert_eq!(AllocFlags::RESERVES | AllocFlags::CMA | AllocFlags::OOM, AllocFlags(0x2b8));
}

/// `fpi_t` (mm/page_alloc.c): `FPI_NONE` 0, `FPI_SKIP_REPORT_NOTIFY`
/// BIT(0), `FPI_TO_TAIL` BIT(1), `FPI_TRYLOCK` BIT(2); `fpi_flags & FPI_X`.
#[test]
fn fpi_flags_are_the_kernels_bits() {
    assert_eq!(Fpi::NONE.0, 0);
    assert_eq!(Fpi::SKIP_REPORT_NOTIFY.0, 1);
    assert_eq!(Fpi::TO_TAIL.0, 2);
    assert_eq!(Fpi::TRYLOCK.0, 4);
    let f = Fpi(Fpi::TO_TAIL.0 | Fpi::TRYLOCK.0);
    assert!(f.has(Fpi::TO_TAIL) && f.has(Fpi::TRYLOCK));
    assert!(!f.has(Fpi::SKIP_REPORT_NOTIFY));
    assert!(!Fpi::NONE.has(Fpi::TO_TAIL));
    assert!(!Fpi::TO_TAIL.has(Fpi::NONE));
}

/// `get_pfnblock_migratetype()` on a pageblock's flags byte: bits 0-2 are
/// the migratetype (`PAGEBLOCK_MIGRATETYPE_MASK`), bit 3
/// (`PB_compact_skip`) is not part of it, and bit 4 (`PB_migrate_isolate`)
/// reads as MIGRATE_ISOLATE whatever the type bits hold.
#[test]
fn pfnblock_flags_byte_to_migratetype() {
    assert_eq!(PAGEBLOCK_MIGRATETYPE_MASK, 0b111);
    assert_eq!(PB_MIGRATE_ISOLATE, 0x10);
    for mt in [Unmovable, Movable, Reclaimable, HighAtomic, Cma] {
        assert_eq!(pfnblock_flags_migratetype(mt as u8), mt);
        assert_eq!(pfnblock_flags_migratetype(mt as u8 | 0x08), mt);
        assert_eq!(pfnblock_flags_migratetype(mt as u8 | PB_MIGRATE_ISOLATE), Isolate);
    }
}

/// `free_area[order].free_list[mt]`: one list per (order, type), 11 orders
/// by 6 types, all distinct: list `order * MIGRATE_TYPES + mt`.
#[test]
fn one_free_list_per_order_and_type() {
    assert_eq!(fl(0, Unmovable), 0);
    assert_eq!(fl(0, Movable), 1);
    assert_eq!(fl(1, Unmovable), 6);
    assert_eq!(fl(3, Cma), 22);
    assert_eq!(fl(10, Isolate), 65);
    let mut all: Vec<usize> =
        (0..NR_PAGE_ORDERS as u32).flat_map(|o| Migratetype::ALL.iter().map(move |&mt| fl(o, mt))).collect();
    all.sort_unstable();
    assert_eq!(all, (0..NR_PAGE_ORDERS * MIGRATE_TYPES).collect::<Vec<_>>());
}

/// `Zone::new` is the bare machine's one zone: node 0, ZONE_NORMAL, from
/// its first frame 0x40000 over 0x4000 frames (64 MiB), all present;
/// `zone_end_pfn()` = start + spanned, and `zone_spans_pfn()` is true for
/// `[start, end)` only.
#[test]
fn the_bare_machines_zone_spans_its_ram() {
    let m = machine();
    let zone = Zone::new(&m);
    assert!(std::ptr::eq(zone.machine(), &m));
    assert_eq!(zone.zone_type(), ZoneType::Normal);
    assert_eq!(zone.node(), 0);
    assert_eq!(zone.zone_start_pfn(), Pfn(BASE));
    assert_eq!(zone.spanned_pages(), 0x4000);
    assert_eq!(zone.present_pages(), 0x4000);
    assert_eq!(zone.zone_end_pfn(), Pfn(BASE + 0x4000));
    assert!(zone.is_populated());
    assert!(zone.spans(Pfn(BASE)) && zone.spans(Pfn(BASE + 0x3fff)));
    assert!(!zone.spans(Pfn(BASE + 0x4000)) && !zone.spans(Pfn(BASE - 1)) && !zone.spans(Pfn(0)));
}

/// `free_area_init_core()` for a zone of its own span: start, end and
/// `zone_spans_pfn()` follow the span, `populated_zone()` is
/// `present_pages != 0`, and its free lists are all 66 of them (one per
/// order and type, here filled one block each).
#[test]
fn a_zone_from_its_span() {
    let m = machine();
    let zone = inner_zone(&m);
    assert_eq!(zone.zone_type(), ZoneType::Dma);
    assert_eq!(zone.zone_start_pfn(), Pfn(BASE + 0x1000));
    assert_eq!(zone.zone_end_pfn(), Pfn(BASE + 0x2000));
    assert_eq!((zone.spanned_pages(), zone.present_pages()), (0x1000, 0x800));
    assert!(zone.is_populated());
    assert!(!zone.spans(Pfn(BASE + 0xfff)) && zone.spans(Pfn(BASE + 0x1000)));
    assert!(zone.spans(Pfn(BASE + 0x1fff)) && !zone.spans(Pfn(BASE + 0x2000)));
    // One block on every (order, type) list, the biggest first so that
    // each is aligned to its order (6 × 2,047 frames of the 16,384).
    let cpu = m.cpu(0).unwrap();
    {
        let mut z = zone.lock(&cpu);
        let mut next = BASE;
        for o in (0..NR_PAGE_ORDERS as u32).rev() {
            for &mt in &Migratetype::ALL {
                z.add_to_free_list(Pfn(next), o, mt, false);
                next += 1 << o;
            }
        }
    }
    assert_eq!(zone.nr_free_per_order(), [6; NR_PAGE_ORDERS]);
    assert_eq!(zone.nr_free_per_type(), [[1; NR_PAGE_ORDERS]; MIGRATE_TYPES]);
    // An empty zone (DMA32 on arm64): no present pages, spans nothing.
    let span = ZoneSpan { zone: ZoneType::Dma32, zone_start_pfn: BASE + 0x4000, spanned_pages: 0, present_pages: 0 };
    let empty = Zone::from_span(&m, span);
    assert!(!empty.is_populated());
    assert!(!empty.spans(Pfn(BASE + 0x4000)));
    assert_eq!(empty.pageblock_counts(), [0; MIGRATE_TYPES]);
}

/// `zone_managed_pages()` moves with `adjust_managed_page_count()` both
/// ways, and `managed_zone()` is `managed_pages != 0`.
#[test]
fn managed_pages_follow_adjust_managed_page_count() {
    let m = machine();
    let zone = Zone::new(&m);
    assert_eq!(zone.managed_pages(), 0);
    assert!(!zone.is_managed());
    zone.adjust_managed_page_count(16_384);
    assert_eq!(zone.managed_pages(), 16_384);
    assert!(zone.is_managed());
    zone.adjust_managed_page_count(-384);
    assert_eq!(zone.managed_pages(), 16_000);
    zone.adjust_managed_page_count(-16_000);
    assert_eq!(zone.managed_pages(), 0);
    assert!(!zone.is_managed());
}

/// `zone->lowmem_reserve[]` holds what `setup_per_zone_lowmem_reserve()`
/// wrote (the reference DMA zone's row: 976 against Normal and Movable),
/// zero until then; `zone->cma_pages` adds up the CMA pageblocks
/// `init_cma_reserved_pageblock()` gives it.
#[test]
fn lowmem_reserve_and_cma_pages_are_kept() {
    let m = machine();
    let zone = Zone::new(&m);
    assert_eq!(zone.lowmem_reserve(), [0; 4]);
    zone.set_lowmem_reserve([0, 0, 976, 976]);
    assert_eq!(zone.lowmem_reserve(), [0, 0, 976, 976]);
    zone.set_lowmem_reserve([1, 2, 3, 4]);
    assert_eq!(zone.lowmem_reserve(), [1, 2, 3, 4]);
    assert_eq!(zone.cma_pages(), 0);
    zone.add_cma_pages(1024);
    zone.add_cma_pages(512);
    assert_eq!(zone.cma_pages(), 1536);
}

/// `set_bit()`/`clear_bit()`/`test_bit()` on `zone->flags`: bit
/// `ZONE_BOOSTED_WATERMARK` (0), `ZONE_RECLAIM_ACTIVE` (1),
/// `ZONE_BELOW_HIGH` (2), each alone.
#[test]
fn zone_flags_are_one_bit_each() {
    let m = machine();
    let zone = Zone::new(&m);
    let word = || zone.flags.load(Relaxed);
    zone.set_flag(ZoneFlag::BelowHigh);
    assert_eq!(word(), 0b100);
    assert!(zone.test_flag(ZoneFlag::BelowHigh));
    assert!(!zone.test_flag(ZoneFlag::ReclaimActive) && !zone.test_flag(ZoneFlag::BoostedWatermark));
    zone.set_flag(ZoneFlag::ReclaimActive);
    assert_eq!(word(), 0b110);
    zone.clear_flag(ZoneFlag::BelowHigh);
    assert_eq!(word(), 0b010);
    assert!(zone.test_flag(ZoneFlag::ReclaimActive) && !zone.test_flag(ZoneFlag::BelowHigh));
    zone.set_flag(ZoneFlag::BoostedWatermark);
    assert_eq!(word(), 0b011);
    zone.clear_flag(ZoneFlag::ReclaimActive);
    assert_eq!(word(), 0b001);
    assert!(zone.test_flag(ZoneFlag::BoostedWatermark) && !zone.test_flag(ZoneFlag::ReclaimActive));
    zone.clear_flag(ZoneFlag::BoostedWatermark);
    assert_eq!(word(), 0);
}

/// One flags byte per pageblock of 512 frames (`pfn_to_bitidx()`):
/// `set_pageblock_migratetype()` writes the type bits and clears the
/// isolate bit; `set_pageblock_isolate()`/`clear_pageblock_isolate()`
/// (`toggle_pageblock_isolate()`) change the isolate bit alone, so the
/// type comes back unchanged; `get_pfnblock_migratetype()` reads ISOLATE
/// while it is set, `__get_pfnblock_flags_mask(.., MIGRATETYPE_MASK)` the
/// type under it.
#[test]
fn pageblock_flags_per_pageblock() {
    let m = machine();
    let zone = Zone::new(&m);
    let a = BASE + 0x1000; // pageblock 8
    label(&zone, a, Reclaimable);
    assert_eq!(zone.pageblock_flags[8].load(Relaxed), 2);
    assert_eq!(zone.pageblock_migratetype(Pfn(a + 511)), Reclaimable);
    assert_eq!(zone.pageblock_migratetype(Pfn(a + 512)), Movable);
    assert_eq!(zone.pageblock_migratetype(Pfn(a - 1)), Movable);
    zone.toggle_pageblock_isolate(Pfn(a + 7), true);
    assert_eq!(zone.pageblock_flags[8].load(Relaxed), 0x12);
    assert_eq!(zone.pageblock_migratetype(Pfn(a)), Isolate);
    assert!(zone.get_pageblock_isolate(Pfn(a + 300)));
    assert_eq!(zone.pageblock_migratetype_unisolated(Pfn(a)), Reclaimable);
    assert!(!zone.get_pageblock_isolate(Pfn(a + 512)));
    assert_eq!(zone.pageblock_migratetype_unisolated(Pfn(a + 512)), Movable);
    zone.toggle_pageblock_isolate(Pfn(a), false);
    assert_eq!(zone.pageblock_flags[8].load(Relaxed), 2);
    assert!(!zone.get_pageblock_isolate(Pfn(a)));
    assert_eq!(zone.pageblock_migratetype(Pfn(a)), Reclaimable);
    // An isolated Unmovable pageblock: type bits 0.
    label(&zone, a, Unmovable);
    zone.toggle_pageblock_isolate(Pfn(a), true);
    assert_eq!(zone.pageblock_migratetype_unisolated(Pfn(a)), Unmovable);
    assert_eq!(zone.pageblock_migratetype(Pfn(a)), Isolate);
    // set_pageblock_migratetype() clears the isolate bit.
    label(&zone, a, HighAtomic);
    assert_eq!(zone.pageblock_flags[8].load(Relaxed), 3);
    assert!(!zone.get_pageblock_isolate(Pfn(a)));
    let cpu = m.cpu(0).unwrap();
    zone.set_pageblock_cma(&cpu, Pfn(a + 0x200));
    assert_eq!(zone.pageblock_migratetype(Pfn(a + 0x200)), Cma);
    assert_eq!(zone.pageblock_flags[9].load(Relaxed), 4);
    assert_eq!(zone.pageblock_migratetype(Pfn(a)), HighAtomic);
}

/// `pagetypeinfo_showblockcount_print()`: the zone's pageblocks counted by
/// type (isolated ones as Isolate), from the zone's first pageblock to its
/// last only, on the bare machine all 32 and in a zone of pageblocks 8-15
/// those 8.
#[test]
fn pageblock_counts_cover_the_zone() {
    let m = machine();
    let zone = Zone::new(&m);
    assert_eq!(zone.pageblock_counts(), [0, 32, 0, 0, 0, 0]);
    label(&zone, BASE, Unmovable);
    label(&zone, BASE + 0x1200, Reclaimable);
    label(&zone, BASE + 0x1400, HighAtomic);
    label(&zone, BASE + 0x1600, Cma);
    zone.toggle_pageblock_isolate(Pfn(BASE + 0x3e00), true);
    assert_eq!(zone.pageblock_counts(), [1, 27, 1, 1, 1, 1]);
    let inner = inner_zone(&m);
    // Pageblocks 8-15: B+0x1200 (9), B+0x1400 (10), B+0x1600 (11).
    assert_eq!(inner.pageblock_counts(), [0, 5, 1, 1, 1, 0]);
}

/// `pagetypeinfo_showblockcount_print()` skips a pageblock whose first
/// frame has no struct page (`pfn_valid()` false): two 64 MiB banks at
/// 1 GiB and 1.25 GiB leave the 128 MiB section between them without a
/// memmap, so of the 160 pageblocks the zone spans 96 are counted.
#[test]
fn pageblock_counts_skip_a_hole_without_struct_pages() {
    let base = MachineConfig::with("128M", 1).unwrap().bare();
    let banks = vec![MemBank { base: 0x4000_0000, size: 64 << 20 }, MemBank { base: 0x5000_0000, size: 64 << 20 }];
    let m = Machine::boot(MachineConfig { linear_map: false, mem_banks: banks, ..base }).unwrap();
    let zone = Zone::new(&m);
    assert_eq!(zone.spanned_pages(), 0x14000);
    assert!(!m.memmap().pfn_valid(Pfn(0x48000)) && m.memmap().pfn_valid(Pfn(0x50000)));
    assert_eq!(zone.pageblock_counts().iter().sum::<u64>(), 96);
}

/// `__add_to_free_list()` + `set_buddy_order()`: the block gets PageBuddy
/// and its order, goes to the head (or with `tail`, the tail) of its
/// (order, type) list, and `nr_free` of the order counts it;
/// `get_page_from_free_area()` is the head, `free_area_empty()` tells an
/// empty list. `__del_page_from_free_list()` takes it out again, clearing
/// PageBuddy and the order.
#[test]
fn add_to_free_list_and_del_page_from_free_list() {
    let m = machine();
    let zone = Zone::new(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    assert!(z.free_area_empty(3, Movable));
    assert_eq!(z.first_free(3, Movable), None);
    z.add_to_free_list(Pfn(BASE), 3, Movable, false);
    assert!(is_free_block(&m, BASE, 3));
    assert_eq!(z.inner.nr_free[3], 1);
    assert!(!z.free_area_empty(3, Movable));
    assert!(z.free_area_empty(3, Unmovable) && z.free_area_empty(2, Movable));
    z.add_to_free_list(Pfn(BASE + 8), 3, Movable, false);
    z.add_to_free_list(Pfn(BASE + 16), 3, Movable, true);
    assert_eq!(z.first_free(3, Movable), Some(Pfn(BASE + 8)));
    assert_eq!(z.inner.nr_free[3], 3);
    z.add_to_free_list(Pfn(BASE + 32), 5, Unmovable, true);
    assert_eq!(z.inner.nr_free[..6], [0, 0, 0, 3, 0, 1]);
    // The lists only; the vmstat counters are account_freepages()'s.
    assert_eq!(zone.nr_free_pages(), 0);
    drop(z);
    assert_eq!(list(&zone, 3, Movable), vec![BASE + 8, BASE, BASE + 16]);
    assert_eq!(zone.nr_free_per_order()[..6], [0, 0, 0, 3, 0, 1]);
    let mut per_type = [[0; NR_PAGE_ORDERS]; MIGRATE_TYPES];
    per_type[Movable as usize][3] = 3;
    per_type[Unmovable as usize][5] = 1;
    assert_eq!(zone.nr_free_per_type(), per_type);
    let mut z = zone.lock(&cpu);
    z.del_from_free_list_raw(Pfn(BASE), 3, Movable);
    assert_eq!(z.inner.nr_free[3], 2);
    let p = m.page(Pfn(BASE));
    assert!(!p.is_buddy());
    assert_eq!((p.private(), p.ext()), (0, PageExt::Tail));
    z.del_from_free_list_raw(Pfn(BASE + 8), 3, Movable);
    assert_eq!(z.first_free(3, Movable), Some(Pfn(BASE + 16)));
    z.del_from_free_list_raw(Pfn(BASE + 16), 3, Movable);
    assert_eq!(z.inner.nr_free[3], 0);
    assert!(z.free_area_empty(3, Movable));
}

/// `account_freepages()`: `NR_FREE_PAGES` counts the pages of every type
/// but MIGRATE_ISOLATE (whose pages count nowhere), HIGHATOMIC pages also
/// in `nr_free_highatomic`, CMA pages also in `NR_FREE_CMA_PAGES`;
/// `del_page_from_free_list()` takes `1 << order` off them.
#[test]
fn account_freepages_per_type() {
    let m = machine();
    let zone = Zone::new(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    let counters = |z: &crate::LockedZone<'_, '_>| {
        (z.zone().nr_free_pages(), z.zone().nr_free_highatomic(), z.zone().nr_free_cma())
    };
    z.account_freepages(8, Movable);
    assert_eq!(counters(&z), (8, 0, 0));
    z.account_freepages(4, HighAtomic);
    assert_eq!(counters(&z), (12, 4, 0));
    z.account_freepages(2, Cma);
    assert_eq!(counters(&z), (14, 4, 2));
    z.account_freepages(512, Isolate);
    assert_eq!(counters(&z), (14, 4, 2));
    z.account_freepages(3, Unmovable);
    z.account_freepages(3, Reclaimable);
    assert_eq!(counters(&z), (20, 4, 2));
    z.account_freepages(-3, HighAtomic);
    z.account_freepages(-2, Cma);
    assert_eq!(counters(&z), (15, 1, 0));
    // del_page_from_free_list() of an order-2 CMA block and an order-3
    // HIGHATOMIC one.
    z.add_to_free_list(Pfn(BASE + 0x1000), 2, Cma, false);
    z.account_freepages(4, Cma);
    z.add_to_free_list(Pfn(BASE + 0x1008), 3, HighAtomic, false);
    z.account_freepages(8, HighAtomic);
    assert_eq!(counters(&z), (27, 9, 4));
    z.del_page_from_free_list(Pfn(BASE + 0x1000), 2, Cma);
    assert_eq!(counters(&z), (23, 9, 0));
    z.del_page_from_free_list(Pfn(BASE + 0x1008), 3, HighAtomic);
    assert_eq!(counters(&z), (15, 1, 0));
    assert_eq!(z.inner.nr_free[..4], [0; 4]);
}

/// `move_to_free_list()`: the block goes to the tail of the new type's
/// list of the same order (`nr_free` unchanged) and its `1 << order` pages
/// leave the old type's counters for the new one's: Movable to HIGHATOMIC
/// adds 4 to `nr_free_highatomic`, to ISOLATE takes 4 off `NR_FREE_PAGES`.
#[test]
fn move_to_free_list_moves_the_block_and_its_pages() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 2, Fpi::NONE);
    free(&zone, BASE + 0x10, 2, Fpi::NONE);
    free(&zone, BASE + 0x20, 2, Fpi::NONE);
    assert_eq!(zone.nr_free_pages(), 12);
    let cpu = m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    z.add_to_free_list(Pfn(BASE + 0x1000), 2, HighAtomic, false);
    z.account_freepages(4, HighAtomic);
    z.move_to_free_list(Pfn(BASE + 0x10), 2, Movable, HighAtomic);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_highatomic()), (16, 8));
    assert_eq!(z.inner.nr_free[2], 4);
    z.move_to_free_list(Pfn(BASE), 2, Movable, Isolate);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_highatomic()), (12, 8));
    z.move_to_free_list(Pfn(BASE), 2, Isolate, Cma);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_cma()), (16, 4));
    z.move_to_free_list(Pfn(BASE + 0x1000), 2, HighAtomic, Unmovable);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_highatomic()), (16, 4));
    assert!(is_free_block(&m, BASE + 0x10, 2));
    drop(z);
    assert_eq!(list(&zone, 2, HighAtomic), vec![BASE + 0x10]);
    assert_eq!(list(&zone, 2, Movable), vec![BASE + 0x20]);
    assert_eq!(list(&zone, 2, Cma), vec![BASE]);
    assert_eq!(list(&zone, 2, Unmovable), vec![BASE + 0x1000]);
    // To the tail: a second move lands behind the first.
    let mut z = zone.lock(&cpu);
    z.move_to_free_list(Pfn(BASE + 0x20), 2, Movable, HighAtomic);
    drop(z);
    assert_eq!(list(&zone, 2, HighAtomic), vec![BASE + 0x10, BASE + 0x20]);
    assert_eq!(zone.nr_free_highatomic(), 8);
}

/// `page_is_buddy()`'s test, `PageBuddy(page) && buddy_order(page) ==
/// order`, for a frame the zone spans: false for another order, for a
/// page not on a free list, and for a free block outside the zone.
#[test]
fn is_free_block_needs_pagebuddy_the_order_and_the_zone() {
    let m = machine();
    let zone = inner_zone(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    z.add_to_free_list(Pfn(BASE + 0x1000), 3, Movable, false);
    assert!(z.is_free_block(Pfn(BASE + 0x1000), 3));
    assert!(!z.is_free_block(Pfn(BASE + 0x1000), 2));
    assert!(!z.is_free_block(Pfn(BASE + 0x1008), 0));
    assert!(!z.is_free_block(Pfn(BASE + 0x1008), 3));
    // A PageBuddy order-3 page outside the zone's span.
    z.add_to_free_list(Pfn(BASE + 0x800), 3, Movable, false);
    assert!(is_free_block(&m, BASE + 0x800, 3));
    assert!(!z.is_free_block(Pfn(BASE + 0x800), 3));
}

/// `zone->nr_reserved_highatomic`: `reserve_highatomic_pageblock()` adds
/// a pageblock (512) for a block below pageblock order, read the same
/// with the lock held or not; `zone->nr_isolate_pageblock` counts what
/// `set_migratetype_isolate()` isolated until `unset_migratetype_isolate()`.
#[test]
fn reserved_highatomic_and_isolated_pageblock_counts() {
    let m = machine();
    let zone = Zone::new(&m);
    // 1 % of managed pages must reach a pageblock for any reserve.
    zone.adjust_managed_page_count(60_000);
    free(&zone, BASE + 0x1000, 9, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    // __free_pages_core(): refcount 0, as has_unmovable_pages() wants.
    zone.free_pages_core(&cpu, Pfn(BASE + 0x2000), 9);
    {
        let mut z = zone.lock(&cpu);
        assert_eq!(z.nr_reserved_highatomic(), 0);
        z.reserve_highatomic_pageblock(Pfn(BASE + 0x1000), 3);
        assert_eq!(z.nr_reserved_highatomic(), 512);
    }
    assert_eq!(zone.nr_reserved_highatomic(), 512);
    assert_eq!(zone.nr_free_highatomic(), 512);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    let (b, e) = (Pfn(BASE + 0x2000), Pfn(BASE + 0x2200));
    zone.set_migratetype_isolate(&cpu, b, PbIsolateMode::Other, b, e).unwrap();
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    assert_eq!(zone.nr_free_pages(), 512);
    zone.unset_migratetype_isolate(&cpu, b);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    assert_eq!(zone.nr_free_pages(), 1024);
}

/// `NR_FREE_PAGES_BLOCKS`: the free pages in blocks of pageblock order
/// (9) and up, of every type but ISOLATE: an order-9 Movable block and an
/// order-10 Unmovable one make 1,536; an order-8 block and an isolated
/// order-10 block add nothing.
#[test]
fn nr_free_pages_blocks_counts_whole_pageblocks() {
    let m = machine();
    let zone = Zone::new(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    z.add_to_free_list(Pfn(BASE), 8, Movable, false);
    z.add_to_free_list(Pfn(BASE + 0x200), 9, Movable, false);
    z.add_to_free_list(Pfn(BASE + 0x400), 10, Unmovable, false);
    z.add_to_free_list(Pfn(BASE + 0x800), 10, Isolate, false);
    drop(z);
    assert_eq!(zone.nr_free_pages_blocks(), 1536);
}

/// Releasing `zone->lock` reports the zone's free blocks per order
/// (mmlab's `buddyinfo` gauge): what /proc/buddyinfo would print then.
#[test]
fn unlock_reports_the_free_blocks_per_order() {
    let m = machine();
    let zone = Zone::new(&m);
    let cpu = m.cpu(0).unwrap();
    let e = trace_events("buddyinfo", || {
        let mut z = zone.lock(&cpu);
        z.add_to_free_list(Pfn(BASE), 3, Movable, false);
        z.add_to_free_list(Pfn(BASE + 0x400), 10, Movable, false);
    });
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].get("free3").map(String::as_str), Some("1"));
    assert_eq!(e[0].get("free10").map(String::as_str), Some("1"));
    assert_eq!(e[0].get("free0").map(String::as_str), Some("0"));
}

/// `ALLOC_NO_WATERMARKS` is not an `ALLOC_RESERVES` flag: for
/// `__zone_watermark_unusable_free()` free HIGHATOMIC pages stay unusable
/// to it, as in the ZONE_BELOW_HIGH check `get_page_from_freelist()` makes
/// with a PF_MEMALLOC allocation's flags: 1,024 free pages of which 512
/// are in a HIGHATOMIC pageblock do not pass a mark of 600, while
/// `ALLOC_HIGHATOMIC` may count them.
#[test]
fn no_watermarks_does_not_make_highatomic_pages_usable() {
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, BASE + 0x1000, HighAtomic);
    free(&zone, BASE + 0x1000, 9, Fpi::NONE);
    free(&zone, BASE + 0x2000, 9, Fpi::NONE);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_highatomic()), (1024, 512));
    assert!(!zone.zone_watermark_ok(0, 600, 0, AllocFlags::NO_WATERMARKS));
    assert!(!zone.zone_watermark_fast(0, 600, 0, AllocFlags::NO_WATERMARKS));
    assert!(zone.zone_watermark_ok(0, 600, 0, AllocFlags::HIGHATOMIC));
    assert!(zone.zone_watermark_ok(0, 511, 0, AllocFlags::NO_WATERMARKS));
}
