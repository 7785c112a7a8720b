//! The allocation front door: `__alloc_pages()`, `get_page_from_freelist()`,
//! `rmqueue()`, `prep_new_page()` and the slow path, on machines whose
//! watermarks are set by hand around their free pages.

use super::{allocator, machine};
use crate::{AllocError, PageAllocator};
use mmlab_buddy::{Fpi, ZoneFlag};
use mmlab_engine::mm::MAX_PAGE_ORDER;
use mmlab_engine::mm::ZoneType;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Cpu, Gfp, Machine, MachineConfig, Migratetype};

use Migratetype::{HighAtomic, Movable, Unmovable};

pub(super) fn ev(m: &Machine, e: VmEvent) -> u64 {
    m.vm_events().get(e)
}

/// The free pages of zone `zt` a `GFP_KERNEL` allocation counts against a
/// watermark (`NR_FREE_PAGES` less the free CMA and HIGHATOMIC pages),
/// with every pcp list drained first.
pub(super) fn usable(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, zt: ZoneType) -> u64 {
    pa.drain_all_pages(cpu);
    let z = pa.zone_of(zt);
    (z.nr_free_pages() - z.nr_free_cma()) as u64 - free_highatomic(pa, zt)
}

fn free_highatomic(pa: &PageAllocator<'_>, zt: ZoneType) -> u64 {
    let counts = pa.zone_of(zt).nr_free_per_type();
    (0..=MAX_PAGE_ORDER).map(|o| counts[HighAtomic as usize][o as usize] << o).sum()
}

/// Set zone `zt`'s min, low and high watermarks (promo = high).
pub(super) fn marks(pa: &PageAllocator<'_>, zt: ZoneType, min: u64, low: u64, high: u64) {
    pa.zone_of(zt).set_watermarks([min, low, high, high], pa.min_free_kbytes());
}

/// `__alloc_pages()`: an order above `MAX_PAGE_ORDER` (10) is refused
/// before anything is looked at; order 10 itself is served.
#[test]
fn orders_above_max_page_order_are_refused() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let nr_free = pa.nr_free_pages();
    assert_eq!(
        pa.try_alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 11),
        Err(AllocError::OrderTooLarge { order: 11 })
    );
    assert_eq!(pa.nr_free_pages(), nr_free);
    let p = pa.try_alloc_pages(&cpu, Gfp::GFP_KERNEL, MAX_PAGE_ORDER).unwrap();
    assert_eq!(m.page(p).ext(), PageExt::Alloc(10, Unmovable));
    pa.free_pages(&cpu, p, MAX_PAGE_ORDER).unwrap();
    pa.check_invariants().unwrap();
}

/// `rmqueue()` above the watermarks: no slow path; PGALLOC counts pages
/// (2^order) whether the block comes from the pcp (orders 0-3) or from
/// the buddy lists (order 4, also counted by mmlab's `RmqueueBuddyPages`).
#[test]
fn the_fast_path_counts_pages_per_block() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let pgalloc = |o| ev(&m, VmEvent::pgalloc(pa.zone().zone_type())) - o;
    let (slow, base, buddy) = (ev(&m, VmEvent::AllocSlowpath), pgalloc(0), ev(&m, VmEvent::RmqueueBuddyPages));
    let a = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(pgalloc(base), 1);
    let b = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    assert_eq!(pgalloc(base), 1 + 4);
    assert_eq!(ev(&m, VmEvent::RmqueueBuddyPages), buddy);
    let c = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 4).unwrap();
    assert_eq!(pgalloc(base), 1 + 4 + 16);
    assert_eq!(ev(&m, VmEvent::RmqueueBuddyPages), buddy + 16);
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow);
    assert_eq!([m.page(a).ext(), m.page(c).ext()], [PageExt::Alloc(0, Unmovable), PageExt::Alloc(4, Unmovable)]);
    for (p, o) in [(a, 0), (b, 2), (c, 4)] {
        pa.free_pages(&cpu, p, o).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// `prep_new_page()` with `__GFP_ZERO`: all 2^order pages are cleared
/// (`kernel_init_pages()`), and PGZERO counts them.
#[test]
fn gfp_zero_clears_the_whole_block() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    let last = p.phys().0 + 4 * 4096 - 1;
    m.arena().write(mmlab_engine::PhysAddr(last), &[0xaa]);
    pa.free_pages(&cpu, p, 2).unwrap();
    let zero = ev(&m, VmEvent::PgZero);
    // The block went to the head of its pcp list: the next order-2
    // GFP_KERNEL allocation on this CPU gets it back.
    assert_eq!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO, 2), Some(p));
    let mut byte = [0xffu8];
    m.arena().read(mmlab_engine::PhysAddr(last), &mut byte);
    assert_eq!(byte, [0]);
    assert_eq!(ev(&m, VmEvent::PgZero), zero + 4);
    pa.free_pages(&cpu, p, 2).unwrap();
}

/// `rmqueue()`: `ZONE_BOOSTED_WATERMARK` is cleared (and kswapd woken) by
/// an allocation with `ALLOC_KSWAPD` (`__GFP_KSWAPD_RECLAIM`), and only by
/// such an allocation.
#[test]
fn a_boosted_watermark_is_cleared_by_kswapd_allocations_only() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let z = pa.zone();
    z.set_flag(ZoneFlag::BoostedWatermark);
    let no_kswapd = Gfp::GFP_KERNEL.difference(Gfp::__GFP_KSWAPD_RECLAIM);
    let a = pa.alloc_pages(&cpu, no_kswapd, 0).unwrap();
    assert!(z.test_flag(ZoneFlag::BoostedWatermark));
    let b = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert!(!z.test_flag(ZoneFlag::BoostedWatermark));
    pa.free_pages(&cpu, a, 0).unwrap();
    pa.free_pages(&cpu, b, 0).unwrap();
}

/// `get_page_from_freelist()`: a zone at or below its high watermark gets
/// `ZONE_BELOW_HIGH` and is still used above its low watermark; once set,
/// the high watermark is not looked at again (only the low one is).
#[test]
fn below_high_is_detected_on_allocation() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let zt = pa.zone().zone_type();
    let z = pa.zone();
    let f = usable(&pa, &cpu, zt);
    let slow = ev(&m, VmEvent::AllocSlowpath);
    // Above high: the flag stays clear.
    marks(&pa, zt, f - 300, f - 200, f - 100);
    let a = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert!(!z.test_flag(ZoneFlag::BelowHigh));
    // Between low and high: set, and the zone is used.
    let f = usable(&pa, &cpu, zt);
    marks(&pa, zt, f - 300, f - 200, f + 100);
    let b = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert!(z.test_flag(ZoneFlag::BelowHigh));
    // Flag set, zone above every mark: allocated after the low check.
    let f = usable(&pa, &cpu, zt);
    marks(&pa, zt, f - 300, f - 200, f - 100);
    let c = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert!(z.test_flag(ZoneFlag::BelowHigh));
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow);
    for p in [a, b, c] {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// `__alloc_pages_slowpath()` below every watermark: nothing is
/// allocated; a caller that may reclaim drains every pcp
/// (`__alloc_pages_direct_reclaim()` → `drain_all_pages()`) unless the
/// order is costly (above `PAGE_ALLOC_COSTLY_ORDER` = 3) and
/// `__GFP_NORETRY` is set; `GFP_ATOMIC` never drains.
#[test]
fn below_min_nothing_is_allocated_and_reclaimers_drain() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let zt = pa.zone().zone_type();
    let f = usable(&pa, &cpu, zt);
    // min/2 − min/8 (`__GFP_HIGH` and `ALLOC_NON_BLOCK`) is still above f.
    marks(&pa, zt, 4 * f, 5 * f, 6 * f);
    let nowarn = Gfp::__GFP_NOWARN;
    let cases = [
        (Gfp::GFP_KERNEL, 0, 1),
        (Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY, 0, 1),
        (Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY, 3, 1),
        (Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY, 4, 0),
        (Gfp::GFP_KERNEL, 4, 1),
        (Gfp::GFP_ATOMIC, 0, 0),
        (Gfp::GFP_ATOMIC, 1, 0),
    ];
    for (gfp, order, drains) in cases {
        let (slow, fail, all) =
            (ev(&m, VmEvent::AllocSlowpath), ev(&m, VmEvent::PgallocFail), ev(&m, VmEvent::DrainAllPages));
        assert_eq!(
            pa.try_alloc_pages(&cpu, gfp | nowarn, order),
            Err(AllocError::NoMemory { order, gfp: gfp | nowarn })
        );
        assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow + 1, "{gfp} {order}");
        assert_eq!(ev(&m, VmEvent::PgallocFail), fail + 1, "{gfp} {order}");
        assert_eq!(ev(&m, VmEvent::DrainAllPages), all + drains, "{gfp} {order}");
    }
    pa.check_invariants().unwrap();
}

/// `__alloc_pages_slowpath()` between min and low: `GFP_KERNEL` is served
/// at the min watermark; a high-order `GFP_ATOMIC` allocation (no direct
/// reclaim, no `__GFP_NOMEMALLOC`: `ALLOC_HIGHATOMIC`) reserves its
/// pageblock as MIGRATE_HIGHATOMIC (`reserve_highatomic_pageblock()`), a
/// high-order `GFP_KERNEL` one does not; an order-0 `GFP_ATOMIC` refills
/// the pcp as usual. With `__GFP_NOFAIL` below min, the last reserve is
/// given back (`unreserve_highatomic_pageblock(force)`); without force the
/// kernel keeps one pageblock.
#[test]
fn the_slow_path_serves_at_min_and_reserves_highatomic_blocks() {
    // 256 MiB: managed / 100 is at least a pageblock, so a reserve is allowed.
    let m = Machine::boot(MachineConfig::with("256M", 2).unwrap()).unwrap();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let zt = pa.zone().zone_type();
    let z = pa.zone();
    let f = usable(&pa, &cpu, zt);
    marks(&pa, zt, f - 300, f + 100, f + 200);
    let (slow, fail) = (ev(&m, VmEvent::AllocSlowpath), ev(&m, VmEvent::PgallocFail));
    let a = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(m.page(a).ext(), PageExt::Alloc(0, Unmovable));
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow + 1);
    let b = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 1).unwrap();
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow + 2);
    assert_ne!(z.pageblock_migratetype(b), HighAtomic);
    assert_eq!(z.nr_reserved_highatomic(), 0);
    let c = pa.alloc_pages(&cpu, Gfp::GFP_ATOMIC, 1).unwrap();
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow + 3);
    assert_eq!(z.pageblock_migratetype(c), HighAtomic);
    assert_eq!(z.nr_reserved_highatomic(), 512);
    pa.drain_local_pages(&cpu);
    let refills = ev(&m, VmEvent::PcpRefill);
    let d = pa.alloc_pages(&cpu, Gfp::GFP_ATOMIC, 0).unwrap();
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow + 4);
    assert_eq!(ev(&m, VmEvent::PcpRefill), refills + 1);
    assert_eq!(ev(&m, VmEvent::PgallocFail), fail);
    // Below min: only __GFP_NOFAIL's last try gives the reserve back.
    marks(&pa, zt, 4 * f, 5 * f, 6 * f);
    let nowarn = Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN;
    assert_eq!(pa.alloc_pages(&cpu, nowarn, 0), None);
    assert_eq!(z.nr_reserved_highatomic(), 512);
    assert_eq!(pa.alloc_pages(&cpu, nowarn | Gfp::__GFP_NOFAIL, 0), None);
    assert_eq!(z.nr_reserved_highatomic(), 0);
    assert_eq!(z.pageblock_migratetype(c), Unmovable);
    for (p, o) in [(a, 0), (b, 1), (c, 1), (d, 0)] {
        pa.free_pages(&cpu, p, o).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// `get_page_from_freelist()`'s retry: when the first pass with
/// `ALLOC_NOFRAGMENT` finds nothing in any zone (ZONE_NORMAL holds only
/// halves of movable pageblocks, ZONE_DMA is below its watermarks), the
/// zonelist is walked again without it and the pcp refill falls back to
/// a movable block; no slow path.
#[test]
fn the_second_pass_without_nofragment_falls_back() {
    let m = Machine::boot(MachineConfig::with("4G", 2).unwrap()).unwrap();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    assert_eq!(pa.zonelist(), [ZoneType::Normal, ZoneType::Dma]);
    pa.drain_all_pages(&cpu);
    let z = pa.zone_of(ZoneType::Normal);
    // Take every free block of the pcp types from ZONE_NORMAL and give
    // back the first half of each whole movable pageblock, at order 8.
    {
        let mut lz = z.lock(&cpu);
        let mut taken = Vec::new();
        for order in (0..=MAX_PAGE_ORDER).rev() {
            for mt in [Unmovable, Movable, Migratetype::Reclaimable] {
                while let Some(pfn) = lz.rmqueue_smallest(order, mt) {
                    taken.push((pfn, order));
                }
            }
        }
        for (pfn, order) in taken {
            if order >= 9 && z.pageblock_migratetype(pfn) == Movable {
                for pb in (0..1u64 << order).step_by(512) {
                    lz.free_one_page_locked(pfn.add(pb), 8, Movable, Fpi::NONE);
                }
            }
        }
    }
    let f = usable(&pa, &cpu, ZoneType::Normal);
    assert!(f > 10_000 && z.nr_free_per_type()[Unmovable as usize].iter().all(|&n| n == 0));
    let huge = 1 << 40;
    marks(&pa, ZoneType::Dma, huge, huge, huge);
    let (slow, refills, buddy) =
        (ev(&m, VmEvent::AllocSlowpath), ev(&m, VmEvent::PcpRefill), ev(&m, VmEvent::RmqueueBuddyPages));
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(pa.page_zone(p).zone_type(), ZoneType::Normal);
    assert_eq!(m.page(p).ext(), PageExt::Alloc(0, Unmovable));
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow);
    // The first pass's empty refill and the second's.
    assert_eq!(ev(&m, VmEvent::PcpRefill), refills + 2);
    assert_eq!(ev(&m, VmEvent::RmqueueBuddyPages), buddy);
    assert!(pa.pageset_of(ZoneType::Normal, 1).unwrap().count > 0);
}

/// `get_page_from_freelist()`'s retry runs only when the first pass with
/// `ALLOC_NOFRAGMENT` found nothing: on a machine whose first pass sets it
/// (RAM above 4 GiB), an allocation the first pass serves takes one block,
/// counted once.
#[test]
fn a_first_pass_that_succeeds_is_not_retried() {
    let m = Machine::boot(MachineConfig::with("4G", 2).unwrap()).unwrap();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let pgalloc = VmEvent::pgalloc(ZoneType::Normal);
    for order in [0, 3] {
        let free = usable(&pa, &cpu, ZoneType::Normal);
        let before = ev(&m, pgalloc);
        let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, order).unwrap();
        assert_eq!(pa.page_zone(p).zone_type(), ZoneType::Normal);
        assert_eq!(ev(&m, pgalloc), before + (1 << order));
        pa.drain_all_pages(&cpu);
        assert_eq!(usable(&pa, &cpu, ZoneType::Normal), free - (1 << order));
        pa.free_pages(&cpu, p, order).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// `drain_local_pages()`, `drain_all_pages()` and `decay_pcp_high()` walk
/// every populated zone (`for_each_populated_zone`), not only the first.
#[test]
fn drains_walk_every_populated_zone() {
    let m = Machine::boot(MachineConfig::with("4G", 2).unwrap()).unwrap();
    let pa = allocator(&m);
    let (cpu0, cpu1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
    let counts = |cpu| [ZoneType::Dma, ZoneType::Normal].map(|zt| pa.pageset_of(zt, cpu).unwrap().count);
    let fill = |cpu: &Cpu<'_>| {
        for gfp in [Gfp::GFP_KERNEL, Gfp::GFP_KERNEL | Gfp::__GFP_DMA] {
            let p = pa.alloc_pages(cpu, gfp, 0).unwrap();
            pa.free_pages(cpu, p, 0).unwrap();
        }
    };
    fill(&cpu1);
    assert!(counts(1).iter().all(|&c| c > 0));
    pa.drain_local_pages(&cpu1);
    assert_eq!(counts(1), [0, 0]);
    fill(&cpu1);
    pa.drain_all_pages(&cpu0);
    assert_eq!(counts(1), [0, 0]);
    // decay: each zone's high above high_min comes down by an eighth.
    fill(&cpu1);
    let high = |zt| pa.pageset_of(zt, 1).unwrap();
    let before = [high(ZoneType::Dma), high(ZoneType::Normal)];
    for (zt, p) in [ZoneType::Dma, ZoneType::Normal].into_iter().zip(before) {
        pa.pcp_of(zt as usize, 1).lock().high = p.high_min + 800;
    }
    pa.decay_pcp_high(&cpu1);
    for (zt, p) in [ZoneType::Dma, ZoneType::Normal].into_iter().zip(before) {
        assert_eq!(high(zt).high, (p.high_min + 800 - (p.high_min + 800) / 8).max(p.high_min), "{zt:?}");
    }
    pa.check_invariants().unwrap();
}
