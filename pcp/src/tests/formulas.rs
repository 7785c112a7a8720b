//! `nr_pcp_alloc()`, `nr_pcp_high()`, `nr_pcp_free()`, the pageset's list
//! index and clamp, the kernel-version rules, and the sizing functions.

use super::{allocator, machine, set};
use crate::page_alloc::PageAllocator;
use crate::pageset::{
    NR_LOWORDER_PCP_LISTS, NR_PCP_LISTS, PCPF_FREE_HIGH_BATCH, PCPF_PREV_FREE_HIGH_ORDER, kclamp, order_to_pindex,
    pindex_to_order,
};
use crate::rules::KernelRules;
use crate::sizing::{zone_batchsize, zone_highsize};
use mmlab_buddy::ZoneFlag;
use mmlab_engine::Migratetype;

/// `nr_pcp_alloc()` with the reference sizes (batch 63, high_min 5,449,
/// high_max 375,000): the first order-0 refill raises high by the batch to
/// 5,512 and alloc_factor to 1, takes 63; the next takes 126.
#[test]
fn nr_pcp_alloc_reference_refills() {
    let m = machine();
    let pa = allocator(&m);
    let zi = pa.zonelist()[0] as usize;
    let z = pa.zone_at(zi);
    let mut g = pa.pcp_of(zi, 1).lock();
    let p = &mut *g;
    set(p, (0, 5_449, 375_000, 63, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 63);
    assert_eq!((p.high, p.alloc_factor), (5_512, 1));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 126);
    assert_eq!((p.high, p.alloc_factor), (5_638, 2));
    // Order 2: the batch without the factor, in blocks: 63 >> 2 = 15; high
    // still grows by the batch, alloc_factor does not.
    assert_eq!(pa.nr_pcp_alloc(z, p, 2), 15);
    assert_eq!((p.high, p.alloc_factor), (5_701, 2));
    // THP order: 63 >> 9 = 0, at least 2 blocks.
    assert_eq!(pa.nr_pcp_alloc(z, p, 9), 2);
    // ZONE_BELOW_HIGH: high is not raised.
    z.set_flag(ZoneFlag::BelowHigh);
    set(p, (0, 5_449, 375_000, 63, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 63);
    assert_eq!((p.high, p.alloc_factor), (5_449, 1));
    z.clear_flag(ZoneFlag::BelowHigh);
}

/// `nr_pcp_alloc()`: the order-0 batch is capped by what fits below high
/// (high − count − batch, at least batch), and alloc_factor grows only
/// while the scaled batch fits and it is below CONFIG_PCP_BATCH_SCALE_MAX.
#[test]
fn nr_pcp_alloc_caps() {
    let m = machine();
    let pa = allocator(&m);
    let zi = pa.zonelist()[0] as usize;
    let z = pa.zone_at(zi);
    let mut g = pa.pcp_of(zi, 1).lock();
    let p = &mut *g;
    // high_min == high_max (a fraction set): high stays.
    set(p, (1_000, 1_000, 1_000, 63, 950, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 63);
    assert_eq!((p.high, p.alloc_factor), (1_000, 1));
    // 126 does not fit in max(1,000 − 950 − 63, 63) = 63.
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 63);
    assert_eq!(p.alloc_factor, 1);
    // 1,000 − 800 − 63 = 137 ≥ 126.
    p.count = 800;
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 126);
    assert_eq!(p.alloc_factor, 2);
    p.count = 863;
    // 252 > 74: capped at max(1,000 − 863 − 63, 63) = 74.
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 74);
    // At the scale maximum the factor stays.
    set(p, (375_000, 375_000, 375_000, 63, 0, 0, 5));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 63 << 5);
    assert_eq!(p.alloc_factor, 5);
    // high below batch: one block.
    set(p, (10, 10, 10, 63, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 1);
    assert_eq!(pa.nr_pcp_alloc(z, p, 3), 1);
    // high == batch is not below it: 3 >> 0.
    set(p, (3, 3, 3, 3, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 3);
    // Batch 3 at order 3: max(3 >> 3, 2) = 2; batch 1 stays 1.
    set(p, (12, 12, 12, 3, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 3), 2);
    set(p, (4, 4, 4, 1, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 2), 1);
    // The boot pageset (high 0, batch 1): one block.
    set(p, (0, 0, 0, 1, 0, 0, 0));
    assert_eq!(pa.nr_pcp_alloc(z, p, 0), 1);
}

/// `nr_pcp_high()` in each of its cases.
#[test]
fn nr_pcp_high_cases() {
    let m = machine();
    let pa = allocator(&m);
    let zi = pa.zonelist()[0] as usize;
    let z = pa.zone_at(zi);
    let mut g = pa.pcp_of(zi, 1).lock();
    let p = &mut *g;
    let high = |p: &mut crate::pageset::PerCpuPages, free_high| {
        let batch = p.batch;
        PageAllocator::nr_pcp_high(z, p, batch, free_high)
    };
    // high 0 (boot pageset): 0.
    set(p, (0, 0, 0, 1, 5, 0, 0));
    assert_eq!(high(p, false), 0);
    // free_high: high − batch << 5, not below high_min; returns 0.
    set(p, (10_000, 5_449, 375_000, 63, 0, 0, 0));
    assert_eq!(high(p, true), 0);
    assert_eq!(p.high, 10_000 - 2_016);
    set(p, (6_000, 5_449, 375_000, 63, 0, 0, 0));
    assert_eq!(high(p, true), 0);
    assert_eq!(p.high, 5_449);
    // ZONE_RECLAIM_ACTIVE: high − max(free_count, batch), then min(4 × batch, high).
    z.set_flag(ZoneFlag::ReclaimActive);
    set(p, (10_000, 5_449, 375_000, 63, 0, 100, 0));
    assert_eq!(high(p, false), 252);
    assert_eq!(p.high, 9_900);
    set(p, (10_000, 5_449, 375_000, 63, 0, 10, 0));
    assert_eq!(high(p, false), 252);
    assert_eq!(p.high, 9_937);
    set(p, (150, 100, 1_000, 63, 0, 0, 0));
    assert_eq!(high(p, false), 100);
    assert_eq!(p.high, 100);
    z.clear_flag(ZoneFlag::ReclaimActive);
    // high_min == high_max: high.
    set(p, (0, 700, 700, 63, 0, 0, 0));
    assert_eq!(high(p, false), 700);
    // ZONE_BELOW_HIGH: high shrinks by max(free_count, batch); returns
    // max(count, high_min).
    z.set_flag(ZoneFlag::BelowHigh);
    set(p, (10_000, 5_449, 375_000, 63, 7_000, 2_000, 0));
    assert_eq!(high(p, false), 7_000);
    assert_eq!(p.high, 8_000);
    set(p, (10_000, 5_449, 375_000, 63, 10, 10, 0));
    assert_eq!(high(p, false), 5_449);
    assert_eq!(p.high, 9_937);
    z.clear_flag(ZoneFlag::BelowHigh);
    // At or over high: raise high to free_count + batch (clamped), return
    // the high before the raise.
    set(p, (5_449, 5_449, 375_000, 63, 5_449, 6_000, 0));
    assert_eq!(high(p, false), 5_449);
    assert_eq!(p.high, 6_063);
    set(p, (5_449, 5_449, 6_000, 63, 5_449, 6_000, 0));
    assert_eq!(high(p, false), 5_449);
    assert_eq!(p.high, 6_000);
    set(p, (5_449, 5_449, 375_000, 63, 5_448, 6_000, 0));
    assert_eq!(high(p, false), 5_449);
    assert_eq!(p.high, 5_449);
    set(p, (5_449, 5_449, 375_000, 63, 5_449, 5_000, 0));
    assert_eq!(high(p, false), 5_449);
    assert_eq!(p.high, 5_449);
}

/// `nr_pcp_free()`: free_high drains up to batch << 5; high below batch
/// drains one; else clamp(free_count, batch, high − batch), the kernel's
/// clamp giving the upper bound when the bounds cross.
#[test]
fn nr_pcp_free_cases() {
    let m = machine();
    let pa = allocator(&m);
    let zi = pa.zonelist()[0] as usize;
    let mut g = pa.pcp_of(zi, 1).lock();
    let p = &mut *g;
    set(p, (0, 0, 0, 63, 3_000, 0, 0));
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 5_449, true), 2_016);
    p.count = 100;
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 5_449, true), 100);
    p.free_count = 2_016;
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 5_449, false), 2_016);
    p.free_count = 10;
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 5_449, false), 63);
    p.free_count = 6_000;
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 5_449, false), 5_386);
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 62, false), 1);
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 63, false), 0);
    assert_eq!(PageAllocator::nr_pcp_free(p, 63, 100, false), 37);
    assert_eq!(kclamp(5, 63, 37), 37);
    assert_eq!(kclamp(50, 10, 37), 37);
    assert_eq!(kclamp(5, 10, 37), 10);
    assert_eq!(kclamp(20, 10, 37), 20);
}

/// `order_to_pindex()` / `pindex_to_order()`: 3 × order + type for orders
/// 0..=3, then the two THP lists (movable second).
#[test]
fn pcp_list_indices() {
    use Migratetype::{Movable, Reclaimable, Unmovable};
    assert_eq!((NR_LOWORDER_PCP_LISTS, NR_PCP_LISTS), (12, 14));
    // struct per_cpu_pages' flag bits.
    assert_eq!((PCPF_PREV_FREE_HIGH_ORDER, PCPF_FREE_HIGH_BATCH), (1, 2));
    assert_eq!(order_to_pindex(Unmovable, 0), 0);
    assert_eq!(order_to_pindex(Movable, 0), 1);
    assert_eq!(order_to_pindex(Reclaimable, 3), 11);
    assert_eq!(order_to_pindex(Movable, 2), 7);
    assert_eq!(order_to_pindex(Unmovable, 9), 12);
    assert_eq!(order_to_pindex(Reclaimable, 9), 12);
    assert_eq!(order_to_pindex(Movable, 9), 13);
    let orders: Vec<u32> = (0..NR_PCP_LISTS).map(pindex_to_order).collect();
    assert_eq!(orders, vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 9, 9]);
}

/// The pageset's lazy clamp of high and its zoneinfo snapshot.
#[test]
fn clamp_high_and_info() {
    let m = machine();
    let pa = allocator(&m);
    let zi = pa.zonelist()[0] as usize;
    let mut g = pa.pcp_of(zi, 1).lock();
    let p = &mut *g;
    set(p, (0, 100, 200, 7, 3, 4, 2));
    assert_eq!(p.clamp_high(), 100);
    p.high = 300;
    assert_eq!(p.clamp_high(), 200);
    p.high = 150;
    assert_eq!(p.clamp_high(), 150);
    let i = p.info();
    assert_eq!(
        (i.count, i.high, i.batch, i.high_min, i.high_max, i.free_count, i.alloc_factor),
        (3, 150, 7, 100, 200, 4, 2)
    );
}

/// The rules that changed between 6.12 and 7.2.
#[test]
fn kernel_rules_by_release() {
    assert_eq!(KernelRules::Linux6_12.free_high_threshold(63, 5_449), 63);
    assert_eq!(KernelRules::Linux7_2.free_high_threshold(63, 5_449), 63 + 2_724);
    assert_eq!(KernelRules::Linux6_12.free_drain_chunk(63), None);
    assert_eq!(KernelRules::Linux7_2.free_drain_chunk(63), Some(63));
    assert_eq!(KernelRules::Linux7_2.free_drain_chunk(0), Some(1));
    assert_eq!(KernelRules::Linux6_12.release(), "6.12");
    assert_eq!(KernelRules::Linux7_2.to_string(), "7.2");
    assert_eq!("6.12".parse::<KernelRules>(), Ok(KernelRules::Linux6_12));
    assert_eq!("7.2".parse::<KernelRules>(), Ok(KernelRules::Linux7_2));
    assert!("7.1".parse::<KernelRules>().unwrap_err().contains("7.1"));
    assert_eq!(KernelRules::default(), KernelRules::Linux7_2);
}

/// `zone_batchsize()` around its steps and `zone_highsize()`'s split.
#[test]
fn batch_and_high_sizes() {
    // managed >> 12: 1 → 1; 3 → 4 → 4 → 3; 63 → 94 → 64 → 63; 64 → 96 → 64 → 63.
    assert_eq!(zone_batchsize(8_191), 1);
    assert_eq!(zone_batchsize(12_288), 3);
    assert_eq!(zone_batchsize(258_048), 63);
    assert_eq!(zone_batchsize(262_144), 63);
    assert_eq!(zone_batchsize(0), 1);
    // 21 → 31 → 16 → 15; 22 → 33 → 32 → 31.
    assert_eq!(zone_batchsize(21 << 12), 15);
    assert_eq!(zone_batchsize(22 << 12), 31);
    // No CPU of the node online: split over the online CPUs.
    assert_eq!(zone_highsize(16_384, 900, 3, 0, 0, 3, 0), 300);
    assert_eq!(zone_highsize(16_384, 900, 3, 0, 0, 0, 0), 900);
    // fraction 8: managed / 8 over the CPUs.
    assert_eq!(zone_highsize(16_384, 900, 3, 2, 0, 2, 8), 1_024);
    // Capped at INT_MAX.
    assert_eq!(zone_highsize(u64::MAX, 0, 1, 1, 0, 1, 8), i32::MAX);
}
