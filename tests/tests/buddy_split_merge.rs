//! Exact split (`expand`) and merge (`__free_one_page`) behaviour of the
//! buddy lists on a fresh 64 MiB machine, PFN by PFN.
//!
//! Layout of the 64 MiB machine, derived by hand from `Machine::boot` on
//! bare RAM with the linear map off (`.bare()`, `linear_map: false`): the
//! subject is the buddy allocator's split and merge on bare RAM, and with
//! the linear map on, `paging_init()` would take the fixmap's 3 tables and
//! the linear map's 34 (1 PUD + 1 PMD + 32 PTE for 64 MiB of 4 KiB pages)
//! from memblock below swapper_pg_dir, before the vmemmap's tables: the
//! free range under them would end 37 pages lower and every small block
//! below would move.
//!
//! RAM is PFN 0x40000..0x44000 (16,384 frames). memblock allocates top-down:
//! - the memmap (16,384 x 64 B = 1 MiB, 2 MiB aligned): (0x4400_0000 -
//!   1 MiB) rounded down to 2 MiB = 0x43e0_0000, PFN 0x43e00..0x43f00;
//! - the usemap (32 pageblocks -> 64 B, 64 B aligned): the last 64 bytes of
//!   RAM, 0x43ff_ffc0, in PFN 0x43fff;
//! - swapper_pg_dir (one page, page aligned): the highest free range is
//!   [0x43f0_0000, 0x43ff_ffc0); (0x43ff_ffc0 - 4 KiB) rounded down to 4 KiB
//!   = 0x43ff_e000, PFN 0x43ffe (the rest of the usemap's page, 0xfc0 bytes,
//!   is too small for a page);
//! - vmemmap_populate: 64M is a partial section (16,384 < 32,768 frames), so
//!   the 1 MiB of memmap is mapped with 4 KiB PTEs; the walk allocates the
//!   pud table (PFN 0x43ffd), the pmd table (0x43ffc) and the pte table
//!   (0x43ffb), each the next page down.
//!
//! Reserved: 256 + 1 + 4 = 261 frames. `__free_pages_memory` then frees
//! [0x40000, 0x43e00) as 15 order-10 blocks (0x40000, 0x40400, ..., 0x43800)
//! plus an order-9 block at 0x43c00, and [0x43f00, 0x43ffb) (251 frames) as
//! 0x43f00 o7, 0x43f80 o6, 0x43fc0 o5, 0x43fe0 o4, 0x43ff0 o3, 0x43ff8 o1
//! (an order-2 block at 0x43ff8 would reach the pte table page 0x43ffb) and
//! 0x43ffa o0. managed = 15,360 + 512 + 251 = 16,123 = 16,384 - 261. Boot
//! frees go to the list tail (FPI_TO_TAIL) in address order, so the head of
//! the order-10 list is 0x40000.

use mmlab_buddy::{Fpi, LockedZone};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Gfp, Machine, MachineConfig, Migratetype, Pfn};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

/// Post-boot buddyinfo of the 64 MiB machine (see the module comment):
/// one block at each of orders 0, 1, 3..7 and 9, none at 2 or 8, fifteen at 10.
const BOOT_BUDDYINFO: [u64; 11] = [1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 15];

/// The 64 MiB machine of the module comment: bare RAM, no linear map (its
/// tables would move every PFN the derivation names).
fn boot() -> Machine {
    let cfg = MachineConfig { linear_map: false, ..MachineConfig::with("64M", 2).expect("64M").bare() };
    mmlab_tests::boot(cfg).expect("the 64M machine boots")
}

fn pa(m: &Machine) -> PageAllocator<'_> {
    PageAllocator::boot(m, AllocatorConfig::default()).unwrap()
}

/// `__rmqueue_smallest` under the zone lock plus what `prep_new_page` records,
/// so that `check_invariants` sees the block as allocated.
fn take(z: &mut LockedZone<'_, '_>, order: u32) -> Pfn {
    let pfn = z.rmqueue_smallest(order, Migratetype::Movable).expect("a movable block");
    let p = z.zone().machine().page(pfn);
    p.set_refcount(1);
    p.set_ext(PageExt::Alloc(order as u8, Migratetype::Movable));
    pfn
}

/// `__free_one_page(FPI_NONE)` of a block taken with [`take`].
fn give(z: &mut LockedZone<'_, '_>, pfn: Pfn, order: u32) {
    z.zone().machine().page(pfn).set_refcount(0);
    z.free_one_page_locked(pfn, order, Migratetype::Movable, Fpi::NONE);
}

fn is_free_block(m: &Machine, pfn: Pfn, order: u32) -> bool {
    let p = m.page(pfn);
    p.is_buddy() && p.private() == order as u64 && p.ext() == PageExt::Buddy(order as u8)
}

/// The small blocks taken out so that only order-10 blocks remain (and the
/// orders they were taken at), in the order `take` returns them.
const SMALL: [(u64, u32); 8] =
    [(0x43ffa, 0), (0x43ff8, 1), (0x43ff0, 3), (0x43fe0, 4), (0x43fc0, 5), (0x43f80, 6), (0x43f00, 7), (0x43c00, 9)];

/// Take the [`SMALL`] blocks, checking each comes out where derived, so
/// that only order-10 blocks are left free.
fn take_small(z: &mut LockedZone<'_, '_>) {
    for (pfn, order) in SMALL {
        assert_eq!(take(z, order), Pfn(pfn));
    }
}

#[test]
fn boot_layout_is_as_derived() {
    let m = boot();
    let pa = pa(&m);
    assert_eq!(pa.managed_pages(), 16_123);
    assert_eq!(pa.nr_free_pages(), 16_123);
    assert_eq!(pa.zone().nr_free_per_order(), BOOT_BUDDYINFO);
    for (pfn, order) in SMALL {
        assert!(is_free_block(&m, Pfn(pfn), order), "{pfn:#x} order {order}");
    }
    for i in 0..15 {
        assert!(is_free_block(&m, Pfn(0x40000 + i * 1024), 10));
    }
    // Everything free is on the Movable lists (every pageblock boots MOVABLE).
    let per_type = pa.zone().nr_free_per_type();
    assert_eq!(per_type[Migratetype::Movable as usize], BOOT_BUDDYINFO);
    assert_eq!(per_type[Migratetype::Unmovable as usize], [0; 11]);
    pa.check_invariants().unwrap();
}

#[test]
fn smallest_order_is_taken_first_without_split() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = pa.zone().lock(&cpu);
    // __rmqueue_smallest scans upwards from the requested order: order 0 has
    // 0x43ffa, so no split happens.
    let p = take(&mut z, 0);
    assert_eq!(p, Pfn(0x43ffa));
    drop(z);
    let mut want = BOOT_BUDDYINFO;
    want[0] = 0;
    assert_eq!(pa.zone().nr_free_per_order(), want);
    assert_eq!(pa.nr_free_pages(), 16_122);
    pa.check_invariants().unwrap();
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, p, 0);
    drop(z);
    assert_eq!(pa.zone().nr_free_per_order(), BOOT_BUDDYINFO);
    pa.check_invariants().unwrap();
}

#[test]
fn order0_from_order10_splits_into_one_half_per_order_and_merges_back() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = pa.zone().lock(&cpu);
    // Empty every order below 10: taking at orders 0, 1, 3..7 and 9 hits
    // exact matches (no split), in this order.
    take_small(&mut z);
    drop(z);
    let only_big = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15];
    assert_eq!(pa.zone().nr_free_per_order(), only_big);
    let free_before = pa.nr_free_pages();
    assert_eq!(free_before, 15 * 1024);
    pa.check_invariants().unwrap();

    // Order 0 now splits the head of the order-10 list, 0x40000: expand()
    // puts the upper halves 0x40000 + 2^k at order k for k = 9..0 and the
    // caller keeps 0x40000.
    let mut z = pa.zone().lock(&cpu);
    let p = take(&mut z, 0);
    drop(z);
    assert_eq!(p, Pfn(0x40000));
    assert_eq!(pa.zone().nr_free_per_order(), [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 14]);
    assert_eq!(pa.nr_free_pages(), free_before - 1);
    for k in 0..10u32 {
        let half = Pfn(0x40000 + (1 << k));
        assert!(is_free_block(&m, half, k), "upper half {half} at order {k}");
    }
    // pfn + 512, +256, ..., +1 explicitly, as the kernel's expand() loop does.
    let halves: Vec<u64> = (0..10).rev().map(|k| 0x40000 + (1u64 << k)).collect();
    assert_eq!(halves, [0x40200, 0x40100, 0x40080, 0x40040, 0x40020, 0x40010, 0x40008, 0x40004, 0x40002, 0x40001]);
    assert_eq!(m.page(p).ext(), PageExt::Alloc(0, Migratetype::Movable));
    pa.check_invariants().unwrap();

    // Freeing it merges with each half in turn (10 merge steps) back to the
    // order-10 block; order 10 = MAX_PAGE_ORDER goes to the list head, so
    // the next order-0 request splits the same block again.
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, p, 0);
    drop(z);
    assert_eq!(pa.zone().nr_free_per_order(), only_big);
    assert_eq!(pa.nr_free_pages(), free_before);
    assert!(is_free_block(&m, Pfn(0x40000), 10));
    for k in 0..10u32 {
        assert!(!m.page(Pfn(0x40000 + (1 << k))).is_buddy());
    }
    pa.check_invariants().unwrap();
    let mut z = pa.zone().lock(&cpu);
    assert_eq!(take(&mut z, 0), Pfn(0x40000));
    give(&mut z, Pfn(0x40000), 0);
    // Put the small blocks back: the boot state returns exactly.
    for (pfn, order) in SMALL {
        give(&mut z, Pfn(pfn), order);
    }
    drop(z);
    assert_eq!(pa.zone().nr_free_per_order(), BOOT_BUDDYINFO);
    assert_eq!(pa.nr_free_pages(), 16_123);
    pa.check_invariants().unwrap();
}

#[test]
fn order3_split_keeps_lowest_piece() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = pa.zone().lock(&cpu);
    take_small(&mut z);
    // Order 3 from order 10 inserts 10 - 3 = 7 halves: 0x40000 + 2^k at
    // order k for k = 9..3.
    let p = take(&mut z, 3);
    drop(z);
    assert_eq!(p, Pfn(0x40000));
    assert_eq!(pa.zone().nr_free_per_order(), [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 14]);
    for k in 3..10u32 {
        assert!(is_free_block(&m, Pfn(0x40000 + (1 << k)), k));
    }
    pa.check_invariants().unwrap();
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, p, 3);
    drop(z);
    assert_eq!(pa.zone().nr_free_per_order(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15]);
}

#[test]
fn buddies_merge_only_when_both_are_free() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = pa.zone().lock(&cpu);
    take_small(&mut z);
    // 0x40000 splits the order-10 block; 0x40001 is then the head of the
    // order-0 list: the two buddies of one order-1 pair.
    let a = take(&mut z, 0);
    let b = take(&mut z, 0);
    drop(z);
    assert_eq!((a, b), (Pfn(0x40000), Pfn(0x40001)));
    assert_eq!(pa.zone().nr_free_per_order(), [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 14]);
    pa.check_invariants().unwrap();

    // Free a: its buddy b (a ^ 1) is allocated, so no merge: a sits alone at
    // order 0.
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, a, 0);
    drop(z);
    assert!(is_free_block(&m, a, 0));
    assert_eq!(pa.zone().nr_free_per_order(), [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 14]);
    pa.check_invariants().unwrap();

    // Free b: merges with a (order 1 at 0x40000), then with 0x40002 (o1),
    // 0x40004 (o2), ... 0x40200 (o9): one order-10 block again.
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, b, 0);
    drop(z);
    assert!(is_free_block(&m, Pfn(0x40000), 10));
    assert!(!m.page(a.add(1)).is_buddy());
    assert_eq!(pa.zone().nr_free_per_order(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15]);
    pa.check_invariants().unwrap();
}

#[test]
fn buddy_parked_on_a_pcp_list_blocks_the_merge() {
    let m = boot();
    let pa = pa(&m);
    let cpus = m.all_cpus().unwrap();
    let mut z = pa.zone().lock(&cpus[0]);
    take_small(&mut z);
    drop(z);
    // pcp sizing on 64M: batch = rounddown_pow2(3 + 1) - 1 = 3 (b = 16,123 >> 12
    // = 3). The first order-0 movable allocation on CPU 0 refills 3 blocks:
    // 0x40000 (splits the order-10 block), 0x40001 (order-0 half), and
    // 0x40002 (splits the order-1 half at 0x40002, leaving 0x40003 at
    // order 0). The list head, 0x40000, is returned; 0x40001 and 0x40002
    // stay on CPU 0's pcp list.
    let p = pa.alloc_pages(&cpus[0], Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert_eq!(p, Pfn(0x40000));
    assert_eq!(pa.pageset(0).unwrap().count, 2);
    assert_eq!(m.page(Pfn(0x40001)).ext(), PageExt::Pcp(0));
    assert_eq!(m.page(Pfn(0x40002)).ext(), PageExt::Pcp(0));
    assert!(is_free_block(&m, Pfn(0x40003), 0));
    assert_eq!(pa.zone().nr_free_per_order(), [1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 14]);

    // Free p on CPU 1 (to CPU 1's pcp), then drain CPU 1: p reaches the buddy
    // lists, but its buddy 0x40001 is on CPU 0's pcp list (not PageBuddy),
    // so it stays an order-0 block.
    pa.free_pages(&cpus[1], p, 0).unwrap();
    assert_eq!(pa.pageset(1).unwrap().count, 1);
    pa.drain_local_pages(&cpus[1]);
    assert_eq!(pa.pageset(1).unwrap().count, 0);
    assert!(is_free_block(&m, p, 0));
    assert_eq!(pa.zone().nr_free_per_order(), [2, 0, 1, 1, 1, 1, 1, 1, 1, 1, 14]);
    pa.check_invariants().unwrap();

    // Drain CPU 0 (tail first: 0x40002 merges with 0x40003 into an order-1
    // block; 0x40001 then merges with 0x40000 and on up to order 10).
    pa.drain_local_pages(&cpus[0]);
    assert_eq!(pa.pageset(0).unwrap().count, 0);
    assert_eq!(pa.zone().nr_free_per_order(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15]);
    assert!(is_free_block(&m, Pfn(0x40000), 10));
    pa.check_invariants().unwrap();
}

#[test]
fn merge_likely_block_goes_to_the_tail() {
    // buddy_merge_likely: after the merge loop stops at order o (< 9), the
    // block goes to the list tail iff the buddy of the order-(o+1) block
    // containing it is itself a free order-(o+1) block.
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let mut z = pa.zone().lock(&cpu);
    take_small(&mut z);
    // Four order-0 pages 0x40000..0x40003 (the split leaves 0x40004 at o2, ...).
    let a = take(&mut z, 0); // 0x40000, leaves 0x40001 at o0, 0x40002 at o1
    let b = take(&mut z, 0); // 0x40001
    let c = take(&mut z, 0); // 0x40002 (splits the o1 at 0x40002, 0x40003 to o0)
    let d = take(&mut z, 0); // 0x40003
    assert_eq!([a, b, c, d], [Pfn(0x40000), Pfn(0x40001), Pfn(0x40002), Pfn(0x40003)]);
    // A second order-0 block elsewhere to give the order-0 list a head:
    // take 0x40004 (splits o2 at 0x40004 -> keeps 0x40004, 0x40006 at o1,
    // 0x40005 at o0).
    let e = take(&mut z, 0);
    assert_eq!(e, Pfn(0x40004));
    // Free c (0x40002): buddy 0x40003 (d) is allocated -> stays at order 0.
    // merge likely? h = 0x40002 & 0x40003 = 0x40002; order-1 buddy of h is
    // 0x40000, not free -> head. Now free a (0x40000): buddy 0x40001 is
    // allocated -> order 0; h = 0x40000, order-1 buddy 0x40002 is free only
    // at order 0 -> not likely -> head. Free d (0x40003): merges with c into
    // o1 at 0x40002; then buddy 0x40000 at o1? No (it is o0) -> stop at o1;
    // h = 0x40002 & 0x40000 = 0x40000, order-2 buddy 0x40004 is allocated ->
    // head.
    give(&mut z, c, 0);
    give(&mut z, a, 0);
    give(&mut z, d, 0);
    drop(z);
    assert!(is_free_block(&m, a, 0));
    assert!(is_free_block(&m, c, 1));
    let before_tail = m.vm_events().get(mmlab_engine::mm::vmstat::VmEvent::BuddyFreeTail);
    // Free e (0x40004): buddy 0x40005 is free at o0 -> o1 at 0x40004; buddy
    // 0x40006 free at o1 -> o2 at 0x40004; buddy 0x40000 at o2? no -> stop
    // at order 2. h = 0x40004 & 0x40000 = 0x40000; its order-3 buddy is
    // 0x40008, a free order-3 block -> merge likely -> tail.
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, e, 0);
    drop(z);
    assert!(is_free_block(&m, e, 2));
    assert_eq!(m.vm_events().get(mmlab_engine::mm::vmstat::VmEvent::BuddyFreeTail), before_tail + 1);
    // Free b: merges with a (o0) -> o1 at 0x40000, with c (o1 at 0x40002)
    // -> o2, with e (o2 at 0x40004) -> o3, and on up to order 10.
    let mut z = pa.zone().lock(&cpu);
    give(&mut z, b, 0);
    drop(z);
    assert_eq!(pa.zone().nr_free_per_order(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15]);
    pa.check_invariants().unwrap();
}

#[test]
fn drained_upper_half_becomes_a_plain_tail() {
    // Same set-up as buddy_parked_on_a_pcp_list_blocks_the_merge: CPU 0's
    // pcp holds 0x40001 and 0x40002, and 0x40000 is freed to the buddy
    // lists (via CPU 1) while its buddy 0x40001 is still parked.
    let m = boot();
    let pa = pa(&m);
    let cpus = m.all_cpus().unwrap();
    let mut z = pa.zone().lock(&cpus[0]);
    take_small(&mut z);
    drop(z);
    let p = pa.alloc_pages(&cpus[0], Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    pa.free_pages(&cpus[1], p, 0).unwrap();
    pa.drain_local_pages(&cpus[1]);
    // Draining CPU 0 frees 0x40001, which merges *into* 0x40000 (its lower
    // buddy): in the kernel it is then just a page inside a free block
    // (no PageBuddy, no state); the merged head 0x40000 carries the order.
    pa.drain_local_pages(&cpus[0]);
    assert!(is_free_block(&m, Pfn(0x40000), 10));
    assert_eq!(m.page(Pfn(0x40001)).ext(), PageExt::Tail, "0x40001 keeps its pcp state after the merge");
    // The visible failure: the next order-1 allocation splits the merged
    // block and hands out 0x40000..0x40001; its tail must be a plain tail.
    let q = pa.alloc_pages(&cpus[0], Gfp::GFP_HIGHUSER_MOVABLE, 1).unwrap();
    assert_eq!(q, Pfn(0x40000));
    pa.check_invariants().unwrap();
}
