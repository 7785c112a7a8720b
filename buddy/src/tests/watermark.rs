//! `__setup_per_zone_wmarks()`, `wmark_pages()`, `__zone_watermark_ok()`
//! and `zone_watermark_fast()`.

use super::{BASE, free, label, machine};
use crate::watermark::{int_sqrt, mult_frac};
use crate::zone::{AllocFlags, Fpi, Zone};
use crate::{WMARK_HIGH, WMARK_LOW, WMARK_MIN, WMARK_PROMO};
use mmlab_engine::Migratetype;
use std::sync::atomic::Ordering::Relaxed;

/// `__setup_per_zone_wmarks()` on a lowmem-only zone: min = pages_min =
/// min_free_kbytes >> 2; delta = max(min / 4, managed × 10 / 10000);
/// low, high, promo = min + 1, 2, 3 × delta; the boost cleared.
#[test]
fn setup_per_zone_wmarks_exact() {
    let m = machine();
    let zone = Zone::new(&m);
    // The 4 GiB example of watermark.rs: delta from the scale factor.
    zone.adjust_managed_page_count(1_032_191);
    zone.watermark_boost.store(7, Relaxed);
    zone.setup_per_zone_wmarks(8_127);
    let raw = |i| zone.watermark_raw(i);
    assert_eq!([raw(WMARK_MIN), raw(WMARK_LOW), raw(WMARK_HIGH), raw(WMARK_PROMO)], [2_031, 3_063, 4_095, 5_127]);
    assert_eq!(zone.watermark_boost(), 0);
    assert_eq!(zone.min_free_kbytes(), 8_127);
    // 16,384 managed pages: delta = 2,031 / 4 = 507 > 16.
    let m = machine();
    let zone = Zone::new(&m);
    zone.adjust_managed_page_count(16_384);
    zone.setup_per_zone_wmarks(8_127);
    let raw = |i| zone.watermark_raw(i);
    assert_eq!([raw(WMARK_MIN), raw(WMARK_LOW), raw(WMARK_HIGH), raw(WMARK_PROMO)], [2_031, 2_538, 3_045, 3_552]);
    assert_eq!(zone.min_free_kbytes(), 8_127);
}

/// `mult_frac()` keeps the remainder's share; `int_sqrt()` is the floor.
#[test]
fn mult_frac_and_int_sqrt_by_hand() {
    assert_eq!(mult_frac(1_032_191, 10, 10_000), 1_032);
    assert_eq!(mult_frac(1_000, 15_000, 10_000), 1_500);
    assert_eq!(mult_frac(9_999, 3, 10_000), 2);
    assert_eq!((0..=10).map(int_sqrt).collect::<Vec<_>>(), vec![0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3]);
    assert_eq!(int_sqrt(u32::MAX as u64 * u32::MAX as u64), u32::MAX as u64);
    assert_eq!(int_sqrt(u64::MAX), u32::MAX as u64);
    // The f64 estimate of √(k² − 1) rounds up to k for large k.
    assert_eq!(int_sqrt(u32::MAX as u64 * u32::MAX as u64 - 1), u32::MAX as u64 - 1);
    assert_eq!(int_sqrt(66_060_224), 8_127);
    assert_eq!(int_sqrt(66_060_128), 8_127);
    assert_eq!(int_sqrt(66_060_128), int_sqrt(8_127 * 8_127));
    assert_eq!(int_sqrt(8_127 * 8_127 - 1), 8_126);
}

/// `wmark_pages()` = `_watermark[i]` + `watermark_boost`; `set_watermarks`
/// clears the boost, `wakeup_kswapd` (no reclaim here) drops it.
#[test]
fn wmark_pages_add_the_boost() {
    let m = machine();
    let zone = Zone::new(&m);
    zone.watermark_boost.store(3, Relaxed);
    zone.set_watermarks([10, 20, 30, 40], 99);
    assert_eq!(zone.watermark_boost(), 0);
    assert_eq!(zone.min_free_kbytes(), 99);
    zone.watermark_boost.store(5, Relaxed);
    assert_eq!(zone.watermark_boost(), 5);
    assert_eq!(
        [zone.watermark_raw(0), zone.watermark_raw(1), zone.watermark_raw(2), zone.watermark_raw(3)],
        [10, 20, 30, 40]
    );
    assert_eq!(
        [zone.min_wmark_pages(), zone.low_wmark_pages(), zone.high_wmark_pages(), zone.promo_wmark_pages()],
        [15, 25, 35, 45]
    );
    assert_eq!(zone.wmark_pages(WMARK_HIGH), 35);
    zone.wakeup_kswapd();
    assert_eq!(zone.watermark_boost(), 0);
    assert_eq!(zone.low_wmark_pages(), 20);
}

/// A zone with 1 free HIGHATOMIC page, 2 free CMA pages and a free MOVABLE
/// order-2 block (7 free pages), and a lowmem reserve of 50 against
/// allocations that could use zone index 2.
fn small_zone(m: &mmlab_engine::Machine) -> Zone<'_> {
    let zone = Zone::new(m);
    label(&zone, BASE + 0x1000, Migratetype::HighAtomic);
    free(&zone, BASE + 0x1000, 0, Fpi::NONE);
    label(&zone, BASE + 0x2000, Migratetype::Cma);
    free(&zone, BASE + 0x2000, 1, Fpi::NONE);
    free(&zone, BASE, 2, Fpi::NONE);
    zone.set_lowmem_reserve([0, 0, 50, 0]);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_highatomic(), zone.nr_free_cma()), (7, 1, 2));
    zone
}

/// `__zone_watermark_ok()` at its boundary (free − unusable must exceed
/// the mark): the unusable pages per flag, the mark lowered for the
/// reserve flags, the lowmem reserve.
#[test]
fn zone_watermark_ok_boundaries() {
    let m = machine();
    let zone = small_zone(&m);
    // The smallest free count that passes, per (order, flags, zone index).
    let pass = |order: u32, flags: AllocFlags, hz: usize| {
        let first = (0..1000).find(|&f| zone.zone_watermark_ok_free(order, 100, hz, flags, f)).unwrap();
        assert!((first..first + 50).all(|f| zone.zone_watermark_ok_free(order, 100, hz, flags, f)));
        first
    };
    // 3 unusable (highatomic 1 + CMA 2): free − 3 > 100.
    assert_eq!(pass(0, AllocFlags::default(), 0), 104);
    // Lowmem reserve 50 for zone index 2.
    assert_eq!(pass(0, AllocFlags::default(), 2), 154);
    // ALLOC_CMA: only the highatomic page is unusable.
    assert_eq!(pass(0, AllocFlags::CMA, 0), 102);
    // Order 2: 2^2 − 1 more unusable.
    assert_eq!(pass(2, AllocFlags::default(), 0), 107);
    // The reserve flags make the highatomic page usable (CMA stays out).
    assert_eq!(pass(0, AllocFlags::NON_BLOCK, 0), 103);
    assert_eq!(pass(0, AllocFlags::HIGHATOMIC, 0), 103);
    // ALLOC_MIN_RESERVE: mark − mark / 2 = 50.
    assert_eq!(pass(0, AllocFlags::MIN_RESERVE, 0), 53);
    // ... and ALLOC_NON_BLOCK: 50 − 50 / 4 = 38.
    assert_eq!(pass(0, AllocFlags::MIN_RESERVE | AllocFlags::NON_BLOCK, 0), 41);
    // ALLOC_OOM: mark − mark / 2.
    assert_eq!(pass(0, AllocFlags::OOM, 0), 53);
    assert_eq!(pass(0, AllocFlags::OOM | AllocFlags::MIN_RESERVE, 0), 28);
    // Every reserve flag: 100 → 50 → 38 → 19.
    assert_eq!(pass(0, AllocFlags::RESERVES, 0), 22);
    assert_eq!(pass(0, AllocFlags::RESERVES | AllocFlags::CMA, 0), 20);
    // zone_watermark_ok() reads NR_FREE_PAGES (7): 7 − 3 > 3, not > 4.
    assert!(zone.zone_watermark_ok(0, 3, 0, AllocFlags::default()));
    assert!(!zone.zone_watermark_ok(0, 4, 0, AllocFlags::default()));
}

/// `__zone_watermark_ok()` for order > 0 also needs a free block of at
/// least that order on a list the request may use: the MOVABLE,
/// UNMOVABLE and RECLAIMABLE lists always, HIGHATOMIC with `ALLOC_OOM` or
/// `ALLOC_HIGHATOMIC`, CMA with `ALLOC_CMA`.
#[test]
fn zone_watermark_ok_needs_a_block_of_the_order() {
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, BASE + 0x1000, Migratetype::HighAtomic);
    free(&zone, BASE + 0x1000, 3, Fpi::NONE);
    label(&zone, BASE + 0x2000, Migratetype::Cma);
    free(&zone, BASE + 0x2000, 4, Fpi::NONE);
    free(&zone, BASE, 2, Fpi::NONE);
    let ok = |order: u32, flags: AllocFlags| zone.zone_watermark_ok_free(order, 0, 0, flags, 10_000);
    assert!(ok(0, AllocFlags::default()));
    assert!(ok(2, AllocFlags::default()));
    assert!(!ok(3, AllocFlags::default()));
    assert!(ok(3, AllocFlags::HIGHATOMIC));
    assert!(ok(3, AllocFlags::OOM));
    assert!(!ok(3, AllocFlags::NON_BLOCK | AllocFlags::MIN_RESERVE));
    assert!(ok(3, AllocFlags::CMA));
    assert!(ok(4, AllocFlags::CMA));
    assert!(!ok(4, AllocFlags::HIGHATOMIC));
    assert!(!ok(5, AllocFlags::CMA | AllocFlags::HIGHATOMIC));
    // Only MOVABLE blocks: the highatomic or CMA permission adds nothing.
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 3, Fpi::NONE);
    let ok = |order: u32, flags: AllocFlags| zone.zone_watermark_ok_free(order, 0, 0, flags, 10_000);
    assert!(ok(3, AllocFlags::default()));
    assert!(!ok(4, AllocFlags::HIGHATOMIC | AllocFlags::CMA));
}

/// `zone_watermark_fast()`: the order-0 shortcut (free less the reserved
/// pages against mark + lowmem reserve) then the full check; for order > 0
/// only the full check, which needs a block of the order.
#[test]
fn zone_watermark_fast_boundaries() {
    let m = machine();
    let zone = small_zone(&m);
    let fast_pass = |order: u32, flags: AllocFlags, hz: usize, mark: u64| {
        // nr_free_pages is 7: vary the mark instead of the free count.
        let _ = order;
        zone.zone_watermark_fast(order, mark, hz, flags)
    };
    // 7 − 3 = 4 > 3, not > 4.
    assert!(fast_pass(0, AllocFlags::default(), 0, 3));
    assert!(!fast_pass(0, AllocFlags::default(), 0, 4));
    assert!(!fast_pass(0, AllocFlags::default(), 0, 100));
    // ALLOC_CMA: 7 − 1 = 6 > 5, not > 6.
    assert!(fast_pass(0, AllocFlags::CMA, 0, 5));
    assert!(!fast_pass(0, AllocFlags::CMA, 0, 6));
    // Nothing reserved (ALLOC_CMA | ALLOC_HIGHATOMIC): 7 > 6.
    assert!(fast_pass(0, AllocFlags::CMA | AllocFlags::HIGHATOMIC, 0, 6));
    assert!(!fast_pass(0, AllocFlags::CMA | AllocFlags::HIGHATOMIC, 0, 7));
    // Lowmem reserve 50 at zone index 2: never with 7 free pages.
    assert!(!fast_pass(0, AllocFlags::default(), 2, 0));
    // The full check still lowers the mark for __GFP_HIGH: 7 − 2 > 8 − 4.
    assert!(fast_pass(0, AllocFlags::MIN_RESERVE, 0, 8));
    // Order 2: 7 − 3 − 3 = 1 > 0, and the order-2 MOVABLE block is there.
    assert!(fast_pass(2, AllocFlags::default(), 0, 0));
    // Order 3: enough pages, no block.
    assert!(!fast_pass(3, AllocFlags::CMA | AllocFlags::HIGHATOMIC, 0, 0));
}

/// `zone_watermark_fast()` ignores the boost for an order-0 `__GFP_HIGH`
/// (`ALLOC_MIN_RESERVE`) check against the min watermark: min 8 raw, 28
/// boosted; 7 free pages, 2 of them CMA, so 5 usable. Halved for
/// `ALLOC_MIN_RESERVE`: 5 > 8 / 2 passes, 5 > 28 / 2 does not.
#[test]
fn zone_watermark_fast_ignores_the_boost_for_gfp_high_at_min() {
    let m = machine();
    let zone = small_zone(&m);
    zone.set_watermarks([8, 30, 40, 50], 0);
    let min_high = AllocFlags::WMARK_MIN | AllocFlags::MIN_RESERVE;
    assert!(zone.zone_watermark_fast(0, zone.min_wmark_pages(), 0, min_high));
    assert!(!zone.zone_watermark_fast(0, 11, 0, min_high));
    zone.watermark_boost.store(20, Relaxed);
    assert_eq!(zone.min_wmark_pages(), 28);
    assert!(zone.zone_watermark_fast(0, zone.min_wmark_pages(), 0, min_high));
    // Not without ALLOC_MIN_RESERVE, not against another mark, not for
    // order 1 (6 usable pages would pass 8 / 2), not without a boost.
    assert!(!zone.zone_watermark_fast(0, zone.min_wmark_pages(), 0, AllocFlags::WMARK_MIN | AllocFlags::OOM));
    assert!(!zone.zone_watermark_fast(0, zone.low_wmark_pages(), 0, AllocFlags::WMARK_LOW | AllocFlags::MIN_RESERVE));
    assert!(!zone.zone_watermark_fast(1, zone.min_wmark_pages(), 0, min_high | AllocFlags::CMA));
    zone.watermark_boost.store(0, Relaxed);
    assert!(!zone.zone_watermark_fast(0, 28, 0, min_high));
}
