//! `__free_one_page()`, `buddy_merge_likely()`, `split_large_buddy()`,
//! `free_one_page()` and `__free_pages_core()`.

use super::{BASE, event, free, is_free_block, label, list, machine};
use crate::zone::{Fpi, Zone};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Migratetype, Pfn};

use Migratetype::{HighAtomic, Movable, Unmovable};

/// `__free_one_page()`: a block whose buddy is free merges with it, the
/// merged block starting at `pfn & buddy_pfn`; the second half freed being
/// the upper one, the merged head is not the page that was freed.
#[test]
fn free_one_page_merges_the_upper_half_into_the_lower() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 0, Fpi::NONE);
    assert_eq!(zone.nr_free_per_order()[0], 1);
    free(&zone, BASE + 1, 0, Fpi::NONE);
    assert!(is_free_block(&m, BASE, 1));
    assert!(!m.page(Pfn(BASE + 1)).is_buddy());
    assert_eq!(zone.nr_free_per_order()[..2], [0, 1]);
    assert_eq!(zone.nr_free_pages(), 2);
    assert_eq!(event(&m, VmEvent::BuddyMerge), 1);
    // B+3 then B+2: they merge at order 0 into [B+2, B+4), which merges
    // with [B, B+2) at order 1.
    free(&zone, BASE + 3, 0, Fpi::NONE);
    free(&zone, BASE + 2, 0, Fpi::NONE);
    assert!(is_free_block(&m, BASE, 2));
    assert_eq!(zone.nr_free_per_order()[..3], [0, 0, 1]);
    assert_eq!(event(&m, VmEvent::BuddyMerge), 3);
    zone.check_free_lists().unwrap();
}

/// `__free_one_page()` merges up to `MAX_PAGE_ORDER` and no further: two
/// free order-10 buddies stay two blocks.
#[test]
fn free_one_page_stops_at_max_page_order() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    free(&zone, BASE + 1024, 10, Fpi::NONE);
    assert_eq!(zone.nr_free_per_order()[10], 2);
    assert!(is_free_block(&m, BASE, 10) && is_free_block(&m, BASE + 1024, 10));
    assert_eq!(zone.nr_free_pages(), 2048);
    assert_eq!(event(&m, VmEvent::BuddyMerge), 0);
}

/// `__free_one_page()` at pageblock order: whole pageblocks of different
/// mergeable types merge, the buddy's pageblock taking the freed block's
/// type (`change_pageblock_range`), its pages moving between the counters.
#[test]
fn free_one_page_merges_pageblocks_of_mergeable_types_and_relabels_the_buddy() {
    let m = machine();
    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    label(&zone, y + 512, Unmovable);
    free(&zone, y, 9, Fpi::NONE);
    free(&zone, y + 512, 9, Fpi::NONE);
    assert_eq!(list(&zone, 10, Unmovable), vec![y]);
    assert!(list(&zone, 9, Movable).is_empty() && list(&zone, 10, Movable).is_empty());
    assert_eq!(zone.pageblock_migratetype(Pfn(y)), Unmovable);
    assert_eq!(zone.pageblock_migratetype(Pfn(y + 512)), Unmovable);
    assert_eq!(zone.nr_free_pages(), 1024);
    zone.check_free_lists().unwrap();
}

/// `__free_one_page()`: a HIGHATOMIC pageblock never merges with a
/// pageblock of another type (`migratetype_is_mergeable`), but two
/// HIGHATOMIC ones do.
#[test]
fn free_one_page_keeps_highatomic_apart_from_other_types() {
    let m = machine();
    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    label(&zone, y, HighAtomic);
    free(&zone, y, 9, Fpi::NONE);
    free(&zone, y + 512, 9, Fpi::NONE);
    assert_eq!(list(&zone, 9, HighAtomic), vec![y]);
    assert_eq!(list(&zone, 9, Movable), vec![y + 512]);
    assert_eq!(zone.nr_free_pages(), 1024);
    assert_eq!(zone.nr_free_highatomic(), 512);
    // The same the other way round: Movable freed next to HighAtomic.
    let w = BASE + 0x2000;
    label(&zone, w + 512, HighAtomic);
    free(&zone, w + 512, 9, Fpi::NONE);
    free(&zone, w, 9, Fpi::NONE);
    assert_eq!(list(&zone, 9, HighAtomic), vec![w + 512, y]);
    // Two HIGHATOMIC pageblocks are one type: they merge.
    let v = BASE + 0x3000;
    label(&zone, v, HighAtomic);
    label(&zone, v + 512, HighAtomic);
    free(&zone, v, 9, Fpi::NONE);
    free(&zone, v + 512, 9, Fpi::NONE);
    assert_eq!(list(&zone, 10, HighAtomic), vec![v]);
    assert_eq!(zone.nr_free_highatomic(), 512 + 512 + 1024);
    zone.check_free_lists().unwrap();
}

/// `buddy_merge_likely()`: a block that did not merge goes to the tail
/// when the block of the next order up has a free buddy (counted as
/// `buddy_free_tail`), to the head otherwise.
#[test]
fn buddy_merge_likely_puts_the_block_at_the_tail() {
    let m = machine();
    let zone = Zone::new(&m);
    // Not likely: B+5's order-1 parent [B+4, B+6) has buddy B+6, not free.
    free(&zone, BASE + 5, 0, Fpi::NONE);
    // The order-1 buddy of B's parent block [B, B+2) is B+2: free.
    free(&zone, BASE + 2, 1, Fpi::NONE);
    let tails = event(&m, VmEvent::BuddyFreeTail);
    free(&zone, BASE, 0, Fpi::NONE);
    assert_eq!(list(&zone, 0, Movable), vec![BASE + 5, BASE]);
    assert_eq!(event(&m, VmEvent::BuddyFreeTail), tails + 1);
    // Not likely again: B+9's parent [B+8, B+10) has buddy B+10, not free.
    free(&zone, BASE + 9, 0, Fpi::NONE);
    assert_eq!(list(&zone, 0, Movable), vec![BASE + 9, BASE + 5, BASE]);
    assert_eq!(event(&m, VmEvent::BuddyFreeTail), tails + 1);
    zone.check_free_lists().unwrap();
}

/// `buddy_merge_likely()` with the parent block the upper half of its own
/// pair: B+0x12's parent [B+0x12, B+0x14) has its buddy below, at B+0x10.
#[test]
fn buddy_merge_likely_finds_a_buddy_below() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 0x15, 0, Fpi::NONE);
    free(&zone, BASE + 0x10, 1, Fpi::NONE);
    free(&zone, BASE + 0x12, 0, Fpi::NONE);
    assert_eq!(list(&zone, 0, Movable), vec![BASE + 0x15, BASE + 0x12]);
    zone.check_free_lists().unwrap();
}

/// `buddy_merge_likely()` is false at `MAX_PAGE_ORDER - 1` and above: an
/// order-9 block goes to the head although its parent's order-10 buddy is
/// free.
#[test]
fn buddy_merge_likely_is_false_from_max_order_minus_one() {
    let m = machine();
    let zone = Zone::new(&m);
    let x = BASE + 0x2000;
    free(&zone, x + 1024, 10, Fpi::NONE);
    free(&zone, BASE + 0x3000, 9, Fpi::NONE);
    free(&zone, x, 9, Fpi::NONE);
    assert_eq!(list(&zone, 9, Movable), vec![x, BASE + 0x3000]);
    // Order 8 is below it: y's parent [y, y+512) has its order-9 buddy
    // y+512 free, so y goes to the tail.
    let y = BASE + 0x1000;
    free(&zone, y + 512, 9, Fpi::NONE);
    free(&zone, BASE + 0x3400, 8, Fpi::NONE);
    free(&zone, y, 8, Fpi::NONE);
    assert_eq!(list(&zone, 8, Movable), vec![BASE + 0x3400, y]);
    zone.check_free_lists().unwrap();
}

/// `FPI_TO_TAIL` puts the block at the tail without counting it as a
/// likely merge.
#[test]
fn fpi_to_tail_goes_to_the_tail_uncounted() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 5, 0, Fpi::NONE);
    free(&zone, BASE + 9, 0, Fpi::TO_TAIL);
    assert_eq!(list(&zone, 0, Movable), vec![BASE + 5, BASE + 9]);
    // A likely merge with FPI_TO_TAIL: still uncounted.
    free(&zone, BASE + 2, 1, Fpi::NONE);
    free(&zone, BASE, 0, Fpi::TO_TAIL);
    assert_eq!(list(&zone, 0, Movable), vec![BASE + 5, BASE + 9, BASE]);
    assert_eq!(event(&m, VmEvent::BuddyFreeTail), 0);
}

/// `split_large_buddy()`: a block above pageblock order is freed one
/// pageblock at a time with each pageblock's own type; a HIGHATOMIC half
/// then stays apart. At or below pageblock order the block is freed whole
/// with its pageblock's type.
#[test]
fn split_large_buddy_frees_each_pageblock_with_its_type() {
    let m = machine();
    let zone = Zone::new(&m);
    let cpu = m.cpu(0).unwrap();
    let z = BASE + 0x1000;
    label(&zone, z + 512, HighAtomic);
    zone.lock(&cpu).split_large_buddy(Pfn(z), 10, Fpi::NONE);
    assert_eq!(list(&zone, 9, Movable), vec![z]);
    assert_eq!(list(&zone, 9, HighAtomic), vec![z + 512]);
    assert!(list(&zone, 10, Movable).is_empty());
    assert_eq!(zone.nr_free_pages(), 1024);
    // Nothing beyond the block was freed.
    assert!(!m.page(Pfn(z + 1024)).is_buddy());
    let h = BASE + 0x2000;
    label(&zone, h, HighAtomic);
    zone.lock(&cpu).split_large_buddy(Pfn(h), 3, Fpi::NONE);
    assert_eq!(list(&zone, 3, HighAtomic), vec![h]);
    assert_eq!(zone.nr_free_pages(), 1032);
    zone.check_free_lists().unwrap();
}

/// `free_one_page()`: takes the lock, frees, counts `PGFREE` pages.
#[test]
fn free_one_page_counts_pgfree_pages() {
    let m = machine();
    let zone = Zone::new(&m);
    let cpu = m.cpu(0).unwrap();
    zone.free_one_page(&cpu, Pfn(BASE + 8), 3, Fpi::NONE);
    assert!(is_free_block(&m, BASE + 8, 3));
    assert_eq!(event(&m, VmEvent::Pgfree), 8);
    assert_eq!(event(&m, VmEvent::FreeOnePagePages), 8);
}

/// `__free_pages_core()`: each page of the block drops to refcount 0, the
/// zone manages 2^order pages more, and the block goes to the tail.
#[test]
fn free_pages_core_makes_the_block_managed_and_puts_it_at_the_tail() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 0x100, 3, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    for p in BASE + 0x200..=BASE + 0x208 {
        m.page(Pfn(p)).set_refcount(1);
    }
    zone.free_pages_core(&cpu, Pfn(BASE + 0x200), 3);
    for p in BASE + 0x200..BASE + 0x208 {
        assert_eq!(m.page(Pfn(p)).refcount(), 0, "{p:#x}");
    }
    assert_eq!(m.page(Pfn(BASE + 0x208)).refcount(), 1);
    assert_eq!(zone.managed_pages(), 8);
    assert_eq!(list(&zone, 3, Movable), vec![BASE + 0x100, BASE + 0x200]);
    assert_eq!(event(&m, VmEvent::BuddyFreeTail), 0);
}
