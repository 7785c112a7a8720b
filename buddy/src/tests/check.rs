//! `check_free_lists()`, the invariant checker of the free lists (what the
//! kernel's `CONFIG_DEBUG_VM` checks and `__free_one_page()`'s merge rule
//! promise): a consistent zone passes and yields every free block; each
//! way of corrupting a hand-built zone is reported, naming the block or
//! counter at fault.
//!
//! Corrupt states are built with the raw list primitive
//! (`__add_to_free_list()` + `set_buddy_order()`, no merging) and by
//! writing a counter or a page's state directly.

use super::{BASE, free, label, machine, zone_over};
use crate::isolation::PbIsolateMode;
use crate::zone::{Fpi, Zone};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Migratetype, Pfn};
use std::sync::atomic::Ordering::Relaxed;

use Migratetype::{Cma, HighAtomic, Isolate, Movable, Unmovable};

/// A block put on `free_list[mt]` of `order` as it is, without looking
/// for its buddy, and counted as `account_freepages()` counts it.
fn put(zone: &Zone<'_>, pfn: u64, order: u32, mt: Migratetype) {
    let cpu = zone.m.cpu(0).unwrap();
    let mut z = zone.lock(&cpu);
    z.add_to_free_list(Pfn(pfn), order, mt, true);
    z.account_freepages(1 << order, mt);
}

/// `__free_pages_core()` of a block: its pages drop their boot reference,
/// so that isolation finds them movable.
fn free_core(zone: &Zone<'_>, pfn: u64, order: u32) {
    let cpu = zone.m.cpu(0).unwrap();
    zone.free_pages_core(&cpu, Pfn(pfn), order);
}

/// `set_migratetype_isolate()` of the pageblock of `pfn` (its free pages
/// only: nothing in it is allocated).
fn isolate(zone: &Zone<'_>, pfn: u64) {
    let cpu = zone.m.cpu(0).unwrap();
    let block = Pfn(pfn & !511);
    zone.set_migratetype_isolate(&cpu, block, PbIsolateMode::Other, block, Pfn(block.0 + 512)).unwrap();
}

/// The checker's complaint.
fn complaint(zone: &Zone<'_>) -> String {
    zone.check_free_lists().unwrap_err()
}

/// A zone as `__free_one_page()` and `set_migratetype_isolate()` leave it
/// passes, and the checker returns every free block, by order, then by
/// migratetype, then head first. The state holds a block whose buddy is
/// free at a lower order (B+2 of order 1 beside B of order 0: not
/// mergeable), upper-half blocks, HIGHATOMIC and CMA blocks of order > 0,
/// the two order-10 blocks ending the zone (MAX_PAGE_ORDER buddies never
/// merge) and an isolated free pageblock, the zone's first, whose 512
/// pages count in no counter while `nr_isolate_pageblock` is 1.
#[test]
fn a_consistent_zone_passes_and_lists_every_free_block() {
    let m = machine();
    let zone = Zone::new(&m);
    free_core(&zone, BASE, 9);
    isolate(&zone, BASE);
    let s = BASE + 0x1000;
    free(&zone, s, 0, Fpi::NONE);
    free(&zone, s + 2, 1, Fpi::NONE);
    let h = BASE + 0x2000;
    label(&zone, h, HighAtomic);
    free(&zone, h, 3, Fpi::NONE);
    let c = BASE + 0x2200;
    label(&zone, c, Cma);
    free(&zone, c + 4, 2, Fpi::NONE);
    free(&zone, BASE + 0x3800, 10, Fpi::NONE);
    free(&zone, BASE + 0x3c00, 10, Fpi::NONE);
    let blocks = zone.check_free_lists().unwrap();
    let blocks: Vec<(u64, u32)> = blocks.into_iter().map(|(p, o)| (p.0, o)).collect();
    assert_eq!(
        blocks,
        vec![(s, 0), (s + 2, 1), (c + 4, 2), (h, 3), (BASE, 9), (BASE + 0x3c00, 10), (BASE + 0x3800, 10)]
    );
    assert_eq!(zone.nr_free_pages(), 1 + 2 + 4 + 8 + 2048);
    assert_eq!(zone.nr_free_highatomic(), 8);
    assert_eq!(zone.nr_free_cma(), 4);
    assert_eq!(zone.nr_isolate_pageblock(), 1);
}

/// A free block lies wholly inside its zone (`page_zone()` of every page
/// is the zone): a block whose head is in the zone but whose last page is
/// past `zone_end_pfn` is reported; one ending exactly at the end is not.
#[test]
fn a_block_reaching_past_the_zone_end_is_reported() {
    let m = machine();
    let end = BASE + 0x1004;
    let zone = zone_over(&m, BASE, end);
    put(&zone, BASE + 0x1000, 3, Movable);
    assert_eq!(complaint(&zone), "free block 0x41000 order 3 on Movable list: outside the zone");
    let zone = zone_over(&m, BASE + 0x2000, BASE + 0x2004);
    put(&zone, BASE + 0x2000, 2, Movable);
    assert_eq!(zone.check_free_lists().unwrap(), vec![(Pfn(BASE + 0x2000), 2)]);
    // Wholly below the zone's start.
    let zone = zone_over(&m, BASE + 0x3000, BASE + 0x3100);
    put(&zone, BASE + 0x2ff8, 3, Movable);
    assert_eq!(complaint(&zone), "free block 0x42ff8 order 3 on Movable list: outside the zone");
}

/// A free block of order n starts at a multiple of 2^n (the buddy
/// arithmetic `pfn ^ (1 << order)` depends on it).
#[test]
fn a_misaligned_block_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    put(&zone, BASE + 6, 2, Movable);
    assert_eq!(complaint(&zone), "free block 0x40006 order 2 on Movable list: not aligned to its order");
}

/// The head of a free block is PageBuddy with `buddy_order()` (page
/// private) its order: a listed block that lost PageBuddy, or whose
/// private names another order, is reported with both values.
#[test]
fn a_listed_head_without_page_buddy_or_its_order_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    put(&zone, BASE + 8, 2, Movable);
    m.page(Pfn(BASE + 8)).clear_buddy();
    assert_eq!(complaint(&zone), "free block 0x40008 order 2 on Movable list: PageBuddy=false private=2");
    m.page(Pfn(BASE + 8)).set_buddy();
    zone.check_free_lists().unwrap();
    m.page(Pfn(BASE + 8)).set_private(3);
    assert_eq!(complaint(&zone), "free block 0x40008 order 2 on Movable list: PageBuddy=true private=3");
}

/// mmlab's page state of a free head is `Buddy(order)`: a head whose
/// state says another order (or not free) is reported.
#[test]
fn a_head_whose_state_is_not_buddy_of_its_order_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    put(&zone, BASE + 8, 2, Movable);
    m.page(Pfn(BASE + 8)).set_ext(PageExt::Buddy(1));
    assert_eq!(complaint(&zone), "free block 0x40008 order 2 on Movable list: state Buddy(1)");
    m.page(Pfn(BASE + 8)).set_ext(PageExt::Tail);
    assert_eq!(complaint(&zone), "free block 0x40008 order 2 on Movable list: state Tail");
}

/// A free block is on the list of its pageblock's migratetype; an
/// order-10 block spans two pageblocks, and both must be of that type
/// (`__free_one_page()` relabels the buddy's pageblock when it merges
/// them, `change_pageblock_range()`): the second being another type is
/// reported, naming that type.
#[test]
fn a_block_over_a_pageblock_of_another_type_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    free(&zone, y, 10, Fpi::NONE);
    zone.check_free_lists().unwrap();
    label(&zone, y + 512, Unmovable);
    assert_eq!(complaint(&zone), "free block 0x41000 order 10 on Movable list: pageblock type is Unmovable");
    label(&zone, y + 512, Movable);
    label(&zone, y, HighAtomic);
    assert_eq!(complaint(&zone), "free block 0x41000 order 10 on Movable list: pageblock type is HighAtomic");
}

/// `__free_one_page()` merges a block with its buddy whenever the buddy is
/// free at the same order: two free order-0 buddies left apart are
/// reported, naming the first one walked and its buddy.
#[test]
fn free_order_0_buddies_left_apart_are_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    put(&zone, BASE + 4, 0, Movable);
    put(&zone, BASE + 5, 0, Movable);
    assert_eq!(
        complaint(&zone),
        "free block 0x40004 order 0 on Movable list: buddy 0x40005 is free at the same order but not merged"
    );
}

/// Below `pageblock_order` buddies share a pageblock and always merge,
/// isolated or not: two order-0 buddies on the ISOLATE list of an
/// isolated pageblock left apart are reported (only whole isolated
/// pageblocks may stay apart).
#[test]
fn free_buddies_inside_an_isolated_pageblock_left_apart_are_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    free_core(&zone, y, 9);
    isolate(&zone, y);
    zone.check_free_lists().unwrap();
    // Take the isolated block off and put two of its pages back unmerged.
    let cpu = m.cpu(0).unwrap();
    zone.lock(&cpu).del_from_free_list_raw(Pfn(y), 9, Isolate);
    drop(cpu);
    put(&zone, y + 2, 0, Isolate);
    put(&zone, y + 3, 0, Isolate);
    assert_eq!(
        complaint(&zone),
        "free block 0x41002 order 0 on Isolate list: buddy 0x41003 is free at the same order but not merged"
    );
}

/// At `pageblock_order` two free pageblocks merge when their types are
/// mergeable (`migratetype_is_mergeable()`: UNMOVABLE, MOVABLE,
/// RECLAIMABLE, whatever the mix) or equal: MOVABLE beside UNMOVABLE, and
/// HIGHATOMIC beside HIGHATOMIC, left apart are reported. HIGHATOMIC
/// beside MOVABLE may stay apart.
#[test]
fn pageblock_buddies_of_mergeable_or_equal_types_left_apart_are_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    label(&zone, y + 512, Unmovable);
    put(&zone, y, 9, Movable);
    put(&zone, y + 512, 9, Unmovable);
    assert_eq!(
        complaint(&zone),
        "free block 0x41200 order 9 on Unmovable list: buddy 0x41000 is free at the same order but not merged"
    );

    let zone = Zone::new(&m);
    let w = BASE + 0x2000;
    label(&zone, w, HighAtomic);
    label(&zone, w + 512, HighAtomic);
    put(&zone, w, 9, HighAtomic);
    put(&zone, w + 512, 9, HighAtomic);
    assert_eq!(
        complaint(&zone),
        "free block 0x42000 order 9 on HighAtomic list: buddy 0x42200 is free at the same order but not merged"
    );

    let zone = Zone::new(&m);
    let v = BASE + 0x3000;
    label(&zone, v + 512, HighAtomic);
    put(&zone, v, 9, Movable);
    put(&zone, v + 512, 9, HighAtomic);
    assert_eq!(zone.check_free_lists().unwrap(), vec![(Pfn(v), 9), (Pfn(v + 512), 9)]);
}

/// Isolating a pageblock moves its free pages, it does not merge them:
/// after isolating both halves of a free order-10 block, the two order-9
/// blocks sit apart on the ISOLATE list, and that is consistent.
#[test]
fn two_isolated_pageblocks_may_stay_apart() {
    let m = machine();
    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    free_core(&zone, y, 10);
    isolate(&zone, y);
    isolate(&zone, y + 512);
    // The second moved to the tail of the ISOLATE list (`move_to_free_list()`).
    assert_eq!(zone.check_free_lists().unwrap(), vec![(Pfn(y), 9), (Pfn(y + 512), 9)]);
    assert_eq!(zone.nr_free_pages(), 0);
    assert_eq!(zone.nr_isolate_pageblock(), 2);
}

/// `free_area[order].nr_free` counts the blocks of that order on all the
/// order's lists: one too many is reported with both numbers.
#[test]
fn a_wrong_nr_free_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    put(&zone, BASE + 8, 3, Movable);
    zone.lock.lock_unaccounted().nr_free[3] += 1;
    assert_eq!(complaint(&zone), "order 3: nr_free 2 but 1 blocks on the lists");
}

/// `account_freepages()`: NR_FREE_PAGES is the pages on every list but
/// the ISOLATE ones. A counter one off, or pages of an isolated pageblock
/// counted, are reported.
#[test]
fn a_wrong_nr_free_pages_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    put(&zone, BASE + 8, 3, Movable);
    zone.nr_free_pages.fetch_add(1, Relaxed);
    assert_eq!(complaint(&zone), "NR_FREE_PAGES 9 but 8 pages on the lists of pageblocks not isolated");

    let zone = Zone::new(&m);
    let y = BASE + 0x1000;
    free_core(&zone, y, 9);
    isolate(&zone, y);
    assert_eq!(zone.nr_free_pages(), 0);
    zone.nr_free_pages.fetch_add(512, Relaxed);
    assert_eq!(complaint(&zone), "NR_FREE_PAGES 512 but 0 pages on the lists of pageblocks not isolated");
}

/// `account_freepages()`: NR_FREE_CMA_PAGES is the pages on the CMA lists.
#[test]
fn a_wrong_nr_free_cma_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, BASE, Cma);
    put(&zone, BASE + 16, 4, Cma);
    zone.check_free_lists().unwrap();
    zone.nr_free_cma.fetch_sub(1, Relaxed);
    assert_eq!(complaint(&zone), "NR_FREE_CMA_PAGES 15 but 16 pages on the CMA lists");
}

/// `account_freepages()`: `nr_free_highatomic` is the pages on the
/// HIGHATOMIC lists.
#[test]
fn a_wrong_nr_free_highatomic_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, BASE, HighAtomic);
    put(&zone, BASE + 32, 5, HighAtomic);
    zone.check_free_lists().unwrap();
    zone.nr_free_highatomic.fetch_add(2, Relaxed);
    assert_eq!(complaint(&zone), "nr_free_highatomic 34 but 32 on the lists");
}

/// `zone->nr_isolate_pageblock` counts the zone's pageblocks with the
/// isolate bit: a bit set behind the counter's back is reported.
#[test]
fn an_isolate_bit_not_counted_is_reported() {
    let m = machine();
    let zone = Zone::new(&m);
    zone.toggle_pageblock_isolate(Pfn(BASE), true);
    assert_eq!(complaint(&zone), "nr_isolate_pageblock 0 but 1 pageblocks have the isolate bit");
    zone.lock.lock_unaccounted().nr_isolate_pageblock = 1;
    zone.check_free_lists().unwrap();
    zone.toggle_pageblock_isolate(Pfn(BASE + 0x3e00), true);
    assert_eq!(complaint(&zone), "nr_isolate_pageblock 1 but 2 pageblocks have the isolate bit");
}

/// The pageblocks of a zone whose ends are not pageblock-aligned include
/// the partial first and last ones (`zone_start_pfn` rounded down to a
/// pageblock, up to `zone_end_pfn`): isolate bits on both are counted.
#[test]
fn the_partial_pageblocks_at_the_zone_ends_are_counted() {
    let m = machine();
    let zone = zone_over(&m, BASE + 0x100, BASE + 0x1080);
    zone.toggle_pageblock_isolate(Pfn(BASE + 0x1000), true);
    assert_eq!(complaint(&zone), "nr_isolate_pageblock 0 but 1 pageblocks have the isolate bit");
    zone.toggle_pageblock_isolate(Pfn(BASE), true);
    assert_eq!(complaint(&zone), "nr_isolate_pageblock 0 but 2 pageblocks have the isolate bit");
    zone.lock.lock_unaccounted().nr_isolate_pageblock = 2;
    assert_eq!(zone.check_free_lists().unwrap(), vec![]);
}
