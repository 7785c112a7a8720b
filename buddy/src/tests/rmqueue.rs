//! `__rmqueue_smallest()`, `expand()`, `__rmqueue()` with its CMA, claim
//! and steal modes, `rmqueue_buddy()`, `boost_watermark()`, the pageblock
//! moves, and the highatomic reserve.

use super::{BASE, allocated, event, free, is_free_block, label, list, machine};
use crate::zone::{AllocFlags, Fpi, Zone, ZoneFlag};
use crate::{RmqueueMode, fallbacks, pcp_allowed_order};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::zone_layout::ZoneSpan;
use mmlab_engine::mm::{MIGRATE_TYPES, ZoneType};
use mmlab_engine::{Machine, Migratetype, Pfn};

use Migratetype::{Cma, HighAtomic, Isolate, Movable, Reclaimable, Unmovable};

/// `__rmqueue()` on CPU 0 from `mode`; the block's pfn and the mode after.
fn rmqueue(
    zone: &Zone<'_>,
    order: u32,
    mt: Migratetype,
    flags: AllocFlags,
    mode: RmqueueMode,
) -> (Option<u64>, RmqueueMode) {
    let cpu = zone.m.cpu(0).unwrap();
    let mut mode = mode;
    let p = zone.lock(&cpu).rmqueue(order, mt, flags, &mut mode);
    (p.map(|p| p.0), mode)
}

fn rmqueue_buddy(zone: &Zone<'_>, order: u32, mt: Migratetype, flags: AllocFlags) -> Option<u64> {
    let cpu = zone.m.cpu(0).unwrap();
    zone.lock(&cpu).rmqueue_buddy(order, mt, flags).map(|p| p.0)
}

fn pb(zone: &Zone<'_>, pfn: u64) -> Migratetype {
    zone.pageblock_migratetype(Pfn(pfn))
}

/// `pcp_allowed_order()`: 0..=PAGE_ALLOC_COSTLY_ORDER and the THP order.
#[test]
fn pcp_allowed_orders_are_0_to_3_and_9() {
    let allowed: Vec<u32> = (0..=10).filter(|&o| pcp_allowed_order(o)).collect();
    assert_eq!(allowed, vec![0, 1, 2, 3, 9]);
}

/// `fallbacks[]`, row by row.
#[test]
fn the_fallback_table() {
    assert_eq!(fallbacks(Unmovable), [Reclaimable, Movable]);
    assert_eq!(fallbacks(Movable), [Reclaimable, Unmovable]);
    assert_eq!(fallbacks(Reclaimable), [Unmovable, Movable]);
    assert_eq!(fallbacks(HighAtomic), [HighAtomic; 2]);
    assert_eq!(fallbacks(Cma), [Cma; 2]);
    assert_eq!(fallbacks(Isolate), [Isolate; 2]);
}

/// `__rmqueue_smallest()` + `expand()`: order 0 from the only block, of
/// order 3, leaves the upper halves B+4 (order 2), B+2 (1) and B+1 (0);
/// order 2 from order 3 leaves B+4; an exact fit splits nothing.
#[test]
fn rmqueue_smallest_splits_down_keeping_the_lowest_piece() {
    let m = machine();
    let zone = Zone::new(&m);
    let b = BASE + 0x100;
    free(&zone, b, 3, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    let got = zone.lock(&cpu).rmqueue_smallest(0, Movable);
    assert_eq!(got, Some(Pfn(b)));
    assert_eq!(list(&zone, 2, Movable), vec![b + 4]);
    assert_eq!(list(&zone, 1, Movable), vec![b + 2]);
    assert_eq!(list(&zone, 0, Movable), vec![b + 1]);
    assert_eq!(zone.nr_free_pages(), 7);
    assert_eq!(event(&m, VmEvent::BuddySplit), 3);
    assert_eq!(event(&m, VmEvent::BuddyAlloc), 1);
    let c = BASE + 0x200;
    drop(cpu);
    free(&zone, c, 3, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    assert_eq!(zone.lock(&cpu).rmqueue_smallest(3, Movable), Some(Pfn(c)));
    assert_eq!(zone.nr_free_pages(), 7);
    assert_eq!(event(&m, VmEvent::BuddySplit), 3);
    drop(cpu);
    free(&zone, c, 3, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    // The order-2 list holds b+4 at its head: no split for order 2.
    assert_eq!(zone.lock(&cpu).rmqueue_smallest(2, Movable), Some(Pfn(b + 4)));
    assert_eq!(zone.lock(&cpu).rmqueue_smallest(2, Movable), Some(Pfn(c)));
    assert_eq!(list(&zone, 2, Movable), vec![c + 4]);
    assert_eq!(zone.nr_free_pages(), 7 + 8 - 4 - 4);
    assert_eq!(zone.lock(&cpu).rmqueue_smallest(4, Movable), None);
    assert_eq!(zone.lock(&cpu).rmqueue_smallest(0, Unmovable), None);
    drop(cpu);
    zone.check_free_lists().unwrap();
}

/// A pageblock at `q` of type `block` holding one free block of `order`
/// at `q`, and allocated movable blocks over `movable` pages from
/// `q + 256` (whole orders, as `prep_move_freepages_block()` counts them).
fn pageblock(m: &Machine, zone: &Zone<'_>, q: u64, block: Migratetype, order: u32, movable: &[(u64, u32)]) {
    label(zone, q, block);
    free(zone, q, order, Fpi::NONE);
    for &(pfn, o) in movable {
        allocated(m, pfn, o, Movable);
    }
}

/// `should_try_claim_block()`: a MOVABLE request claims a pageblock from a
/// free block of at least `pageblock_order / 2` = 4 ...
#[test]
fn movable_claims_from_order_4() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    // 16 free + 496 movable pages: claimable (alike = movable for MOVABLE).
    let fill = [(q + 16, 4), (q + 32, 5), (q + 64, 6), (q + 128, 7), (q + 256, 8)];
    pageblock(&m, &zone, q, Unmovable, 4, &fill);
    let (got, mode) = rmqueue(&zone, 0, Movable, AllocFlags::default(), RmqueueMode::Claim);
    assert_eq!((got, mode), (Some(q), RmqueueMode::Normal));
    assert_eq!(pb(&zone, q), Movable);
    assert_eq!(list(&zone, 3, Movable), vec![q + 8]);
    assert_eq!(list(&zone, 0, Movable), vec![q + 1]);
    assert_eq!(event(&m, VmEvent::ExtfragClaim), 1);
    assert_eq!(zone.nr_free_pages(), 15);
    zone.check_free_lists().unwrap();
}

/// ... and below order 4 it steals without relabelling.
#[test]
fn movable_steals_below_order_4() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    let fill = [(q + 8, 3), (q + 16, 4), (q + 32, 5), (q + 64, 6), (q + 128, 7), (q + 256, 8)];
    pageblock(&m, &zone, q, Unmovable, 3, &fill);
    let (got, mode) = rmqueue(&zone, 0, Movable, AllocFlags::default(), RmqueueMode::Normal);
    assert_eq!((got, mode), (Some(q), RmqueueMode::Steal));
    assert_eq!(pb(&zone, q), Unmovable);
    assert_eq!(list(&zone, 2, Unmovable), vec![q + 4]);
    assert_eq!(list(&zone, 0, Unmovable), vec![q + 1]);
    assert_eq!(event(&m, VmEvent::ExtfragClaim), 0);
    assert_eq!(event(&m, VmEvent::ExtfragSteal), 1);
    zone.check_free_lists().unwrap();
}

/// `__rmqueue_steal()`: the smallest fallback block at or above the
/// order; its remainder keeps the fallback type. Not with
/// `ALLOC_NOFRAGMENT`.
#[test]
fn steal_takes_the_smallest_fallback_block() {
    let m = machine();
    let zone = Zone::new(&m);
    let r = BASE + 0x1000;
    label(&zone, r, Unmovable);
    free(&zone, r, 1, Fpi::NONE);
    free(&zone, r + 8, 3, Fpi::NONE);
    assert_eq!(rmqueue(&zone, 0, Movable, AllocFlags::NOFRAGMENT, RmqueueMode::Normal), (None, RmqueueMode::Normal));
    let (got, mode) = rmqueue(&zone, 0, Movable, AllocFlags::default(), RmqueueMode::Normal);
    assert_eq!((got, mode), (Some(r), RmqueueMode::Steal));
    assert_eq!(list(&zone, 0, Unmovable), vec![r + 1]);
    assert_eq!(list(&zone, 3, Unmovable), vec![r + 8]);
    assert_eq!(zone.nr_free_pages(), 9);
}

/// An UNMOVABLE request claims from any order (`should_try_claim_block`)
/// when the free and "alike" pages of the pageblock reach half of it
/// (`try_to_claim_block`); for a MOVABLE pageblock, alike is what is
/// neither free nor movable: 128 free + 384 other pages.
#[test]
fn unmovable_claims_a_movable_pageblock_with_half_free_or_alike() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    pageblock(&m, &zone, q, Movable, 7, &[]);
    let (got, _) = rmqueue(&zone, 0, Unmovable, AllocFlags::default(), RmqueueMode::Normal);
    assert_eq!(got, Some(q));
    assert_eq!(pb(&zone, q), Unmovable);
    assert_eq!(list(&zone, 6, Unmovable), vec![q + 64]);
    assert_eq!(event(&m, VmEvent::ExtfragClaim), 1);
}

/// 64 free + 320 movable: alike = 512 − 384 = 128, 192 < 256: no claim,
/// a steal.
#[test]
fn unmovable_steals_when_the_pageblock_is_mostly_movable() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    pageblock(&m, &zone, q, Movable, 6, &[(q + 64, 6), (q + 256, 8)]);
    let (got, mode) = rmqueue(&zone, 0, Unmovable, AllocFlags::default(), RmqueueMode::Normal);
    assert_eq!((got, mode), (Some(q), RmqueueMode::Steal));
    assert_eq!(pb(&zone, q), Movable);
    assert_eq!(list(&zone, 5, Movable), vec![q + 32]);
    assert_eq!(event(&m, VmEvent::ExtfragClaim), 0);
}

/// A MOVABLE request at order 4 and an UNMOVABLE pageblock with 128 free
/// and 128 movable pages: exactly half, which is enough.
#[test]
fn movable_claims_at_exactly_half_the_pageblock() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    pageblock(&m, &zone, q, Unmovable, 7, &[(q + 128, 7)]);
    let (got, mode) = rmqueue(&zone, 4, Movable, AllocFlags::default(), RmqueueMode::Normal);
    assert_eq!((got, mode), (Some(q), RmqueueMode::Normal));
    assert_eq!(pb(&zone, q), Movable);
    assert_eq!(list(&zone, 6, Movable), vec![q + 64]);
    assert_eq!(list(&zone, 5, Movable), vec![q + 32]);
    assert_eq!(list(&zone, 4, Movable), vec![q + 16]);
}

/// `try_to_claim_block()` from a block of pageblock order or more: the
/// whole block is relabelled (every pageblock of it) and split into the
/// request's type.
#[test]
fn claiming_a_max_order_block_relabels_both_pageblocks() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    label(&zone, q, Unmovable);
    label(&zone, q + 512, Unmovable);
    free(&zone, q, 10, Fpi::NONE);
    let (got, _) = rmqueue(&zone, 0, Movable, AllocFlags::default(), RmqueueMode::Normal);
    assert_eq!(got, Some(q));
    assert_eq!((pb(&zone, q), pb(&zone, q + 512)), (Movable, Movable));
    assert_eq!(list(&zone, 9, Movable), vec![q + 512]);
    assert_eq!(list(&zone, 0, Movable), vec![q + 1]);
    assert_eq!(zone.nr_free_pages(), 1023);
    assert_eq!(event(&m, VmEvent::ExtfragClaim), 1);
    zone.check_free_lists().unwrap();
}

/// `__rmqueue_claim()` with `ALLOC_NOFRAGMENT` looks only at blocks of
/// pageblock order and up; without it an order-8 block is claimed.
#[test]
fn nofragment_claims_only_whole_pageblocks() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    pageblock(&m, &zone, q, Movable, 8, &[]);
    assert_eq!(rmqueue(&zone, 0, Unmovable, AllocFlags::NOFRAGMENT, RmqueueMode::Normal).0, None);
    assert_eq!(pb(&zone, q), Movable);
    assert_eq!(rmqueue(&zone, 0, Unmovable, AllocFlags::default(), RmqueueMode::Normal).0, Some(q));
    assert_eq!(pb(&zone, q), Unmovable);
}

/// `__rmqueue()` with `ALLOC_CMA`: the CMA lists first only when they hold
/// more than half of the free pages; exactly half is not more.
#[test]
fn cma_first_when_more_than_half_of_free_pages_are_cma() {
    let m = machine();
    let zone = Zone::new(&m);
    let c = BASE + 0x1000;
    let b = BASE + 0x2000;
    label(&zone, c, Cma);
    free(&zone, c, 9, Fpi::NONE);
    free(&zone, b, 9, Fpi::NONE);
    // 512 CMA of 1024 free: the movable lists first.
    assert_eq!(rmqueue(&zone, 0, Movable, AllocFlags::CMA, RmqueueMode::Normal), (Some(b), RmqueueMode::Normal));
    // 512 of 1023: CMA first.
    assert_eq!(rmqueue(&zone, 0, Movable, AllocFlags::CMA, RmqueueMode::Normal), (Some(c), RmqueueMode::Normal));
    // Without ALLOC_CMA the CMA lists are never used.
    let m2 = machine();
    let zone2 = Zone::new(&m2);
    label(&zone2, c, Cma);
    free(&zone2, c, 9, Fpi::NONE);
    assert_eq!(rmqueue(&zone2, 0, Movable, AllocFlags::default(), RmqueueMode::Normal).0, None);
    assert_eq!(rmqueue(&zone2, 0, Movable, AllocFlags::CMA, RmqueueMode::Normal).0, Some(c));
}

/// `__rmqueue()`: with `ALLOC_CMA` and CMA at most half of the free pages,
/// an empty MOVABLE list is followed by the CMA lists (mode CMA) before
/// any claim; a call in CLAIM mode starts at the claim.
#[test]
fn cma_before_claim_and_modes_skip_what_failed() {
    let m = machine();
    let zone = Zone::new(&m);
    let c = BASE + 0x1000;
    let u = BASE + 0x2000;
    label(&zone, c, Cma);
    free(&zone, c, 9, Fpi::NONE);
    label(&zone, u, Unmovable);
    label(&zone, u + 512, Unmovable);
    free(&zone, u, 10, Fpi::NONE);
    assert_eq!(rmqueue(&zone, 0, Movable, AllocFlags::CMA, RmqueueMode::Normal), (Some(c), RmqueueMode::Cma));
    assert_eq!(rmqueue(&zone, 0, Movable, AllocFlags::CMA, RmqueueMode::Claim), (Some(u), RmqueueMode::Normal));
    // Steal mode goes straight to stealing: c+1 (CMA) is not a fallback,
    // and the claimed block's remainder is MOVABLE now, so nothing.
    assert_eq!(rmqueue(&zone, 0, Movable, AllocFlags::CMA, RmqueueMode::Steal), (None, RmqueueMode::Steal));
}

/// `rmqueue_buddy()`: HIGHATOMIC first with `ALLOC_HIGHATOMIC`; the
/// reserve last for `ALLOC_OOM` or `ALLOC_NON_BLOCK`, never otherwise.
#[test]
fn rmqueue_buddy_uses_the_highatomic_reserve_first_or_last() {
    let m = machine();
    let zone = Zone::new(&m);
    let h = BASE + 0x1000;
    label(&zone, h, HighAtomic);
    free(&zone, h, 0, Fpi::NONE);
    free(&zone, h + 2, 0, Fpi::NONE);
    assert_eq!(rmqueue_buddy(&zone, 0, Movable, AllocFlags::default()), None);
    free(&zone, BASE, 0, Fpi::NONE);
    assert_eq!(rmqueue_buddy(&zone, 0, Movable, AllocFlags::HIGHATOMIC), Some(h + 2));
    assert_eq!(rmqueue_buddy(&zone, 0, Movable, AllocFlags::default()), Some(BASE));
    assert_eq!(rmqueue_buddy(&zone, 0, Movable, AllocFlags::WMARK_LOW), None);
    assert_eq!(rmqueue_buddy(&zone, 0, Movable, AllocFlags::OOM), Some(h));
    free(&zone, h, 0, Fpi::NONE);
    assert_eq!(rmqueue_buddy(&zone, 0, Movable, AllocFlags::NON_BLOCK), Some(h));
}

/// `boost_watermark()`: +pageblock_nr_pages per fragmenting claim, up to
/// max(high × 15000 / 10000, pageblock_nr_pages); nothing on a zone of
/// fewer than 4 pageblocks or with a high watermark of 0.
/// `ZONE_BOOSTED_WATERMARK` is set only for `ALLOC_KSWAPD`.
#[test]
fn boost_watermark_per_fragmenting_claim() {
    let claim3 = |managed: i64, high: u64, flags: AllocFlags| {
        let m = machine();
        let zone = Zone::new(&m);
        zone.adjust_managed_page_count(managed);
        zone.set_watermarks([0, 0, high, 0], 0);
        let mut boosts = Vec::new();
        for i in 0..3 {
            let q = BASE + 0x1000 + i * 0x200;
            pageblock(&m, &zone, q, Movable, 7, &[]);
            assert_eq!(rmqueue(&zone, 7, Unmovable, flags, RmqueueMode::Normal).0, Some(q));
            boosts.push(zone.watermark_boost());
        }
        (boosts, zone.test_flag(ZoneFlag::BoostedWatermark))
    };
    assert_eq!(claim3(2048, 1000, AllocFlags::KSWAPD), (vec![512, 1024, 1500], true));
    assert_eq!(claim3(2048, 1000, AllocFlags::default()), (vec![512, 1024, 1500], false));
    assert_eq!(claim3(2047, 1000, AllocFlags::KSWAPD), (vec![0, 0, 0], false));
    assert_eq!(claim3(2048, 100, AllocFlags::KSWAPD), (vec![512, 512, 512], true));
    assert_eq!(claim3(2048, 0, AllocFlags::KSWAPD), (vec![0, 0, 0], false));
}

/// `prep_move_freepages_block()`: the pageblock's start, its free pages
/// and its movable allocated pages; None when the pageblock is not wholly
/// in the zone. `move_freepages_block()` moves every free block of the
/// pageblock (and nothing after it) and returns the pages moved.
#[test]
fn move_freepages_block_moves_the_pageblock_and_no_more() {
    let m = machine();
    let zone = Zone::new(&m);
    let p = BASE + 0x1000;
    free(&zone, p + 1, 0, Fpi::NONE);
    free(&zone, p + 8, 3, Fpi::NONE);
    free(&zone, p + 512, 0, Fpi::NONE);
    allocated(&m, p + 16, 2, Movable);
    allocated(&m, p + 20, 0, Unmovable);
    let cpu = m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    assert_eq!(z.prep_move_freepages_block(Pfn(p + 100)), Some((Pfn(p), 9, 4)));
    assert_eq!(z.move_freepages_block(Pfn(p + 100), Movable, Reclaimable), Some(9));
    drop(z);
    drop(cpu);
    assert_eq!(list(&zone, 0, Reclaimable), vec![p + 1]);
    assert_eq!(list(&zone, 3, Reclaimable), vec![p + 8]);
    assert_eq!(list(&zone, 0, Movable), vec![p + 512]);
    assert_eq!((pb(&zone, p), pb(&zone, p + 512)), (Reclaimable, Movable));
    assert_eq!(zone.nr_free_pages(), 10);
    zone.check_free_lists().unwrap();
}

/// `prep_move_freepages_block()` at the zone's edges (`zone_spans_pfn` of
/// the pageblock's first and last page).
#[test]
fn prep_move_freepages_block_needs_the_whole_pageblock_in_the_zone() {
    let m = machine();
    let span = |start: u64, end: u64| ZoneSpan {
        zone: ZoneType::Normal,
        zone_start_pfn: start,
        spanned_pages: end - start,
        present_pages: end - start,
    };
    let cpu = m.cpu(0).unwrap();
    let exact = Zone::from_span(&m, span(BASE, BASE + 1024));
    assert_eq!(exact.lock(&cpu).prep_move_freepages_block(Pfn(BASE + 517)), Some((Pfn(BASE + 512), 0, 0)));
    let starts_inside = Zone::from_span(&m, span(BASE + 256, BASE + 1024));
    assert_eq!(starts_inside.lock(&cpu).prep_move_freepages_block(Pfn(BASE + 300)), None);
    assert!(starts_inside.lock(&cpu).prep_move_freepages_block(Pfn(BASE + 600)).is_some());
    let ends_inside = Zone::from_span(&m, span(BASE, BASE + 768));
    assert_eq!(ends_inside.lock(&cpu).prep_move_freepages_block(Pfn(BASE + 600)), None);
}

/// `reserve_highatomic_pageblock()`: only on a zone of at least 100
/// pageblocks (managed / 100 ≥ pageblock_nr_pages), up to managed / 100
/// rounded up to whole pageblocks; below pageblock order the whole
/// pageblock and its free pages move, at or above it the block's
/// pageblocks are relabelled; never a CMA pageblock.
#[test]
fn reserve_highatomic_pageblock_limits() {
    fn setup(m: &Machine, managed: i64) -> Zone<'_> {
        let zone = Zone::new(m);
        zone.adjust_managed_page_count(managed);
        zone
    }
    let reserve = |zone: &Zone<'_>, pfn: u64, order: u32| {
        let cpu = zone.m.cpu(0).unwrap();
        zone.lock(&cpu).reserve_highatomic_pageblock(Pfn(pfn), order);
    };
    let p = BASE + 0x1000;
    let m = machine();
    let zone = setup(&m, 51_199);
    reserve(&zone, p, 0);
    assert_eq!((zone.nr_reserved_highatomic(), pb(&zone, p)), (0, Movable));

    let m = machine();
    let zone = setup(&m, 51_200);
    free(&zone, p + 1, 0, Fpi::NONE);
    free(&zone, p + 8, 3, Fpi::NONE);
    reserve(&zone, p, 0);
    assert_eq!((zone.nr_reserved_highatomic(), pb(&zone, p)), (512, HighAtomic));
    assert_eq!(list(&zone, 3, HighAtomic), vec![p + 8]);
    assert_eq!(zone.nr_free_highatomic(), 9);
    assert_eq!(event(&m, VmEvent::HighatomicReserve), 1);
    // The limit is 512 pages: a second pageblock is not reserved.
    reserve(&zone, p + 512, 0);
    assert_eq!((zone.nr_reserved_highatomic(), pb(&zone, p + 512)), (512, Movable));

    let m = machine();
    let zone = setup(&m, 102_400);
    reserve(&zone, p, 10);
    assert_eq!(zone.nr_reserved_highatomic(), 1024);
    assert_eq!((pb(&zone, p), pb(&zone, p + 512)), (HighAtomic, HighAtomic));
    assert_eq!(event(&m, VmEvent::HighatomicReserve), 1);

    let m = machine();
    let zone = setup(&m, 102_400);
    label(&zone, p, Cma);
    reserve(&zone, p, 0);
    assert_eq!((zone.nr_reserved_highatomic(), pb(&zone, p)), (0, Cma));
    assert_eq!(MIGRATE_TYPES, 6);
}

/// `unreserve_highatomic_pageblock()`: without `force` the last pageblock
/// of the reserve stays; each call gives back one pageblock (the first
/// HIGHATOMIC free block by order decides which), moving all its free
/// blocks; an order-10 block gives back both of its pageblocks.
#[test]
fn unreserve_highatomic_pageblock_gives_back_one_pageblock() {
    let m = machine();
    let zone = Zone::new(&m);
    zone.adjust_managed_page_count(102_400);
    let p = BASE + 0x1000;
    let p2 = BASE + 0x2000;
    free(&zone, p + 1, 0, Fpi::NONE);
    free(&zone, p + 8, 3, Fpi::NONE);
    free(&zone, p2 + 32, 5, Fpi::NONE);
    let unreserve = |force: bool| {
        let cpu = m.cpu(0).unwrap();
        zone.lock(&cpu).unreserve_highatomic_pageblock(Movable, force)
    };
    {
        let cpu = m.cpu(0).unwrap();
        let mut z = zone.lock(&cpu);
        z.reserve_highatomic_pageblock(Pfn(p), 0);
        z.reserve_highatomic_pageblock(Pfn(p2), 0);
    }
    assert_eq!(zone.nr_reserved_highatomic(), 1024);
    assert!(unreserve(false));
    assert_eq!(zone.nr_reserved_highatomic(), 512);
    assert_eq!((pb(&zone, p), pb(&zone, p2)), (Movable, HighAtomic));
    assert_eq!(list(&zone, 0, Movable), vec![p + 1]);
    assert_eq!(list(&zone, 3, Movable), vec![p + 8]);
    assert!(!unreserve(false));
    assert_eq!((zone.nr_reserved_highatomic(), pb(&zone, p2)), (512, HighAtomic));
    assert!(unreserve(true));
    assert_eq!((zone.nr_reserved_highatomic(), pb(&zone, p2)), (0, Movable));
    assert!(!unreserve(true));
    assert_eq!(zone.nr_free_highatomic(), 0);

    // An order-10 reserve freed whole.
    let q = BASE + 0x3000;
    {
        let cpu = m.cpu(0).unwrap();
        zone.lock(&cpu).reserve_highatomic_pageblock(Pfn(q), 10);
    }
    free(&zone, q, 10, Fpi::NONE);
    assert_eq!(list(&zone, 10, HighAtomic), vec![q]);
    assert!(unreserve(true));
    assert_eq!(zone.nr_reserved_highatomic(), 0);
    assert_eq!((pb(&zone, q), pb(&zone, q + 512)), (Movable, Movable));
    assert_eq!(list(&zone, 10, Movable), vec![q]);
    assert!(is_free_block(&m, q, 10));
    zone.check_free_lists().unwrap();
}
