//! Pageblock isolation (mm/page_isolation.c `set_migratetype_isolate()`,
//! `unset_migratetype_isolate()`, `has_unmovable_pages()`, and the helpers
//! of mm/page_alloc.c they use: `__move_freepages_block_isolate()`,
//! `find_large_buddy()`, `split_large_buddy()`, `__isolate_free_page()`,
//! `__putback_isolated_page()`), on hand-built pageblocks.
//!
//! The machine's frames below memblock's reservations start at refcount 0,
//! as `__free_pages_core()` leaves every frame it gives the allocator: a
//! frame no test frees or marks allocated is one `has_unmovable_pages()`
//! passes over, as it does the tail pages of a free block.

use super::{BASE, allocated, free, is_free_block, label, list};
use crate::zone::{Fpi, Zone};
use crate::{IsolateError, PbIsolateMode};
use mmlab_engine::mm::ZoneType;
use mmlab_engine::mm::page::{PageExt, pg};
use mmlab_engine::mm::zone_layout::ZoneSpan;
use mmlab_engine::{Machine, Migratetype, Pfn};

use Migratetype::{Cma, HighAtomic, Isolate, Movable, Unmovable};

/// `pageblock_nr_pages`.
const PB: u64 = 512;
/// A pageblock aligned to 2048 frames (order 11): its order-10 block's
/// buddy is `P + 1024`.
const P: u64 = BASE + 0x1000;

/// The bare machine, frames `BASE..BASE + 0x3e00` at refcount 0.
fn machine() -> Machine {
    let m = super::machine();
    for pfn in BASE..BASE + 0x3e00 {
        m.page(Pfn(pfn)).set_refcount(0);
    }
    m
}

/// `set_migratetype_isolate()` of the pageblock of `pfn` for `[start, end)`.
fn isolate(zone: &Zone<'_>, pfn: u64, mode: PbIsolateMode, start: u64, end: u64) -> Result<(), IsolateError> {
    let cpu = zone.m.cpu(0).unwrap();
    zone.set_migratetype_isolate(&cpu, Pfn(pfn), mode, Pfn(start), Pfn(end))
}

/// `set_migratetype_isolate()` of the whole pageblock at `block`, as
/// `start_isolate_page_range()` asks for the pageblocks inside its range.
fn isolate_block(zone: &Zone<'_>, block: u64) -> Result<(), IsolateError> {
    isolate(zone, block, PbIsolateMode::Other, block, block + PB)
}

fn unisolate(zone: &Zone<'_>, pfn: u64) {
    let cpu = zone.m.cpu(0).unwrap();
    zone.unset_migratetype_isolate(&cpu, Pfn(pfn));
}

/// `__isolate_free_page()` of the free block at `pfn`.
fn isolate_free_page(zone: &Zone<'_>, pfn: u64, order: u32) -> u64 {
    let cpu = zone.m.cpu(0).unwrap();
    zone.lock(&cpu).isolate_free_page(Pfn(pfn), order)
}

fn pb(zone: &Zone<'_>, pfn: u64) -> Migratetype {
    zone.pageblock_migratetype(Pfn(pfn))
}

/// An allocated frame (`Alloc(0, mt)`, refcount 1) whose `lru.next` is 0,
/// as a page-table page leaves it (its `_pt_pad_1` overlays
/// `compound_head` and is never set).
fn allocated_lru_0(m: &Machine, pfn: u64, mt: Migratetype) {
    allocated(m, pfn, 0, mt);
    m.page(Pfn(pfn)).set_lru_next(0);
}

/// `__move_freepages_block_isolate()` with `find_large_buddy()`: the upper
/// pageblock of a free order-10 block is a tail of a larger buddy; the block
/// is taken off whole and freed again a pageblock at a time
/// (`split_large_buddy()`), the isolated half to the ISOLATE list, out of
/// NR_FREE_PAGES, the other back to MOVABLE. Any frame of the pageblock
/// names it. `unset_migratetype_isolate()` then finds a free order-9 block
/// whose buddy is free and not isolated: it takes it off
/// (`__isolate_free_page()`) and frees it to the tail
/// (`__putback_isolated_page()`, FPI_TO_TAIL), where it merges back to
/// order 10 behind the order-10 block already listed.
#[test]
fn isolating_the_upper_half_of_a_free_order_10_block_splits_it() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x3000;
    free(&zone, q, 10, Fpi::NONE);
    free(&zone, P, 10, Fpi::NONE);
    assert_eq!(list(&zone, 10, Movable), vec![P, q]);
    isolate(&zone, P + PB + 7, PbIsolateMode::Other, P + PB, P + 2 * PB).unwrap();
    assert_eq!(list(&zone, 9, Movable), vec![P]);
    assert_eq!(list(&zone, 9, Isolate), vec![P + PB]);
    assert_eq!(list(&zone, 10, Movable), vec![q]);
    assert_eq!(zone.nr_free_pages(), 1024 + 512);
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    assert_eq!((pb(&zone, P), pb(&zone, P + PB)), (Movable, Isolate));
    assert_eq!(zone.pageblock_migratetype_unisolated(Pfn(P + PB)), Movable);
    zone.check_free_lists().unwrap();
    // Asked again through another frame of it: -EBUSY naming the
    // pageblock's first frame, and nothing changes.
    assert_eq!(isolate_block(&zone, P + PB + 9), Err(IsolateError::AlreadyIsolated { pfn: Pfn(P + PB) }));
    assert_eq!(zone.nr_isolate_pageblock(), 1);

    unisolate(&zone, P + PB + 3);
    assert_eq!(list(&zone, 10, Movable), vec![q, P]);
    assert!(list(&zone, 9, Movable).is_empty() && list(&zone, 9, Isolate).is_empty());
    assert_eq!(zone.nr_free_pages(), 2048);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    assert_eq!(pb(&zone, P + PB), Movable);
    zone.check_free_lists().unwrap();
}

/// `__move_freepages_block_isolate()` frees again only a block larger than
/// a pageblock: a pageblock that is one free order-9 block is moved
/// (`move_to_free_list()`, to the tail of the ISOLATE list, and back to the
/// tail of its own type's list when `unset_migratetype_isolate()` finds its
/// buddy not free).
#[test]
fn a_pageblock_that_is_one_free_order_9_block_is_moved_to_the_tail() {
    let m = machine();
    let zone = Zone::new(&m);
    let (q, r) = (BASE + 0x2000, BASE + 0x3000);
    free(&zone, P, 9, Fpi::NONE);
    free(&zone, q, 9, Fpi::NONE);
    assert_eq!(list(&zone, 9, Movable), vec![q, P]);
    isolate_block(&zone, P).unwrap();
    isolate_block(&zone, q).unwrap();
    assert_eq!(list(&zone, 9, Isolate), vec![P, q]);
    assert_eq!(zone.nr_free_pages(), 0);
    free(&zone, r, 9, Fpi::NONE);
    unisolate(&zone, P);
    assert_eq!(list(&zone, 9, Movable), vec![r, P]);
    assert_eq!(list(&zone, 9, Isolate), vec![q]);
    assert_eq!(zone.nr_free_pages(), 1024);
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    zone.check_free_lists().unwrap();
}

/// `unset_migratetype_isolate()` of a pageblock that is not one free
/// pageblock-sized block (`pageblock_unisolate_and_move_free_pages()`):
/// every free block in it goes back to MOVABLE and into NR_FREE_PAGES, the
/// isolate bit is cleared. A first frame that is a free order-0 block is
/// not taken off and freed again (only orders from `pageblock_order` below
/// MAX_PAGE_ORDER are). A pageblock whose first frame heads no free block
/// and lies in none (`find_large_buddy()` finds nothing up to
/// MAX_PAGE_ORDER) is moved the same way.
#[test]
fn unisolating_a_partly_free_pageblock_moves_its_free_blocks_back() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, P, 0, Fpi::NONE);
    free(&zone, P + 8, 3, Fpi::NONE);
    free(&zone, P + PB + 2, 1, Fpi::NONE);
    assert_eq!(zone.nr_free_pages(), 11);
    isolate_block(&zone, P).unwrap();
    isolate_block(&zone, P + PB).unwrap();
    assert_eq!((list(&zone, 0, Isolate), list(&zone, 3, Isolate)), (vec![P], vec![P + 8]));
    assert_eq!(list(&zone, 1, Isolate), vec![P + PB + 2]);
    assert_eq!(zone.nr_free_pages(), 0);
    assert_eq!(zone.nr_isolate_pageblock(), 2);
    zone.check_free_lists().unwrap();

    unisolate(&zone, P);
    assert_eq!((list(&zone, 0, Movable), list(&zone, 3, Movable)), (vec![P], vec![P + 8]));
    assert!(list(&zone, 0, Isolate).is_empty() && list(&zone, 3, Isolate).is_empty());
    assert_eq!(pb(&zone, P), Movable);
    assert_eq!(zone.nr_free_pages(), 9);
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    unisolate(&zone, P + PB);
    assert_eq!(list(&zone, 1, Movable), vec![P + PB + 2]);
    assert_eq!(pb(&zone, P + PB), Movable);
    assert_eq!(zone.nr_free_pages(), 11);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    zone.check_free_lists().unwrap();
}

/// Two isolated pageblocks freed into merge on the ISOLATE lists (one type)
/// into an order-10 block. `unset_migratetype_isolate()` does not take a
/// MAX_PAGE_ORDER block off to free it again even with a free, not isolated
/// order-10 buddy: `__move_freepages_block_isolate()` splits it by
/// pageblock, the first back to MOVABLE, the second, still isolated, to
/// the ISOLATE list.
#[test]
fn unisolating_an_isolated_order_10_block_splits_it_by_pageblock() {
    let m = machine();
    let zone = Zone::new(&m);
    isolate_block(&zone, P).unwrap();
    isolate_block(&zone, P + PB).unwrap();
    free(&zone, P, 9, Fpi::NONE);
    free(&zone, P + PB, 9, Fpi::NONE);
    assert_eq!(list(&zone, 10, Isolate), vec![P]);
    assert_eq!(zone.nr_free_pages(), 0);
    free(&zone, P + 1024, 10, Fpi::NONE);
    assert_eq!(zone.nr_free_pages(), 1024);
    zone.check_free_lists().unwrap();

    unisolate(&zone, P);
    assert_eq!(list(&zone, 9, Movable), vec![P]);
    assert_eq!(list(&zone, 9, Isolate), vec![P + PB]);
    assert_eq!(list(&zone, 10, Movable), vec![P + 1024]);
    assert_eq!((pb(&zone, P), pb(&zone, P + PB)), (Movable, Isolate));
    assert_eq!(zone.nr_free_pages(), 1024 + 512);
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    zone.check_free_lists().unwrap();
    // The second: its buddy is free and MOVABLE, so it merges back.
    unisolate(&zone, P + PB);
    assert_eq!(list(&zone, 10, Movable), vec![P + 1024, P]);
    assert_eq!(zone.nr_free_pages(), 2048);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    zone.check_free_lists().unwrap();
}

/// `has_unmovable_pages()`: a page with a reference that was not allocated
/// movable (not LRU, not movable_ops) refuses the isolation with -EBUSY
/// naming it, and nothing changes; allocated movable, it does not. A
/// PG_reserved page refuses it whatever its count. The compound-tail test
/// reads bit 0 of `lru.next` only: a page-table page, whose `lru.next` is
/// 0, is no tail and is unmovable.
#[test]
fn unmovable_and_reserved_pages_refuse_isolation() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, P + 8, 3, Fpi::NONE);
    allocated(&m, P + 100, 0, Unmovable);
    assert_eq!(isolate_block(&zone, P), Err(IsolateError::Unmovable { pfn: Pfn(P + 100) }));
    assert_eq!(list(&zone, 3, Movable), vec![P + 8]);
    assert_eq!(zone.nr_free_pages(), 8);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    assert_eq!(pb(&zone, P), Movable);
    // Allocated movable: isolated.
    allocated(&m, P + 100, 0, Movable);
    isolate_block(&zone, P).unwrap();
    assert_eq!(list(&zone, 3, Isolate), vec![P + 8]);
    assert_eq!(zone.nr_free_pages(), 0);
    assert_eq!(zone.nr_isolate_pageblock(), 1);

    let q = BASE + 0x2000;
    m.page(Pfn(q + 5)).set_ext(PageExt::Reserved);
    assert_eq!(isolate_block(&zone, q), Err(IsolateError::Unmovable { pfn: Pfn(q + 5) }));
    m.page(Pfn(q + 5)).set_refcount(1);
    assert_eq!(isolate_block(&zone, q), Err(IsolateError::Unmovable { pfn: Pfn(q + 5) }));

    let r = BASE + 0x3000;
    allocated_lru_0(&m, r + 511, Unmovable);
    assert_eq!(isolate_block(&zone, r), Err(IsolateError::Unmovable { pfn: Pfn(r + 511) }));
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    zone.check_free_lists().unwrap();
}

/// `has_unmovable_pages()` on a hugetlb folio: arm64 migrates every hstate
/// (`hugepage_migration_supported()`), so a compound head is movable even
/// when the folio was allocated without `__GFP_MOVABLE` (a gigantic
/// hstate's, 32 MiB here, are: `htlb_alloc_mask()`), and its tails
/// (`compound_head` with bit 0 set, refcount 0) are passed over.
#[test]
fn a_hugetlb_folio_allocated_unmovable_does_not_refuse_isolation() {
    let m = machine();
    let zone = Zone::new(&m);
    let head = BASE + 0x2000;
    allocated(&m, head, 13, Unmovable);
    m.page(Pfn(head)).set_flag(pg::PG_HEAD);
    let head_lru = m.page(Pfn(head)).lru_next();
    for t in head + 1..head + PB {
        m.page(Pfn(t)).set_lru_next(head_lru | 1);
    }
    isolate_block(&zone, head).unwrap();
    assert_eq!(pb(&zone, head), Isolate);
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    // Without PG_head the same page is an unmovable allocation.
    m.page(Pfn(head)).clear_flag(pg::PG_HEAD);
    unisolate(&zone, head);
    assert_eq!(isolate_block(&zone, head), Err(IsolateError::Unmovable { pfn: Pfn(head) }));
}

/// `has_unmovable_pages()` in ZONE_MOVABLE: once reserved pages are ruled
/// out, every page is taken as movable, an unmovable allocation included
/// (as with `movablecore`).
#[test]
fn in_zone_movable_only_reserved_pages_refuse_isolation() {
    let m = machine();
    let span = ZoneSpan { zone: ZoneType::Movable, zone_start_pfn: BASE, spanned_pages: 0x4000, present_pages: 0x4000 };
    let zone = Zone::from_span(&m, span);
    allocated(&m, P + 3, 0, Unmovable);
    allocated_lru_0(&m, P + 4, Unmovable);
    isolate_block(&zone, P).unwrap();
    assert_eq!(zone.nr_isolate_pageblock(), 1);
    let q = BASE + 0x2000;
    m.page(Pfn(q + 7)).set_ext(PageExt::Reserved);
    assert_eq!(isolate_block(&zone, q), Err(IsolateError::Unmovable { pfn: Pfn(q + 7) }));
    assert_eq!(zone.nr_isolate_pageblock(), 1);
}

/// `has_unmovable_pages()`: a MIGRATE_CMA pageblock is unmovable as a whole
/// (the first frame checked is returned) except for a CMA allocation
/// (PB_ISOLATE_MODE_CMA_ALLOC), which isolates it: its free pages leave
/// NR_FREE_CMA_PAGES too, and come back to MIGRATE_CMA after.
#[test]
fn a_cma_pageblock_is_isolated_only_for_a_cma_allocation() {
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, P, Cma);
    free(&zone, P + 8, 3, Fpi::NONE);
    assert_eq!(zone.nr_free_cma(), 8);
    for mode in [PbIsolateMode::Other, PbIsolateMode::MemOffline] {
        assert_eq!(isolate(&zone, P + 3, mode, P, P + PB), Err(IsolateError::Unmovable { pfn: Pfn(P + 3) }));
    }
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    isolate(&zone, P + 3, PbIsolateMode::CmaAlloc, P, P + PB).unwrap();
    assert_eq!(list(&zone, 3, Isolate), vec![P + 8]);
    assert_eq!((zone.nr_free_cma(), zone.nr_free_pages()), (0, 0));
    assert_eq!(zone.pageblock_migratetype_unisolated(Pfn(P)), Cma);
    unisolate(&zone, P);
    assert_eq!(list(&zone, 3, Cma), vec![P + 8]);
    assert_eq!((zone.nr_free_cma(), zone.nr_free_pages()), (8, 8));
    zone.check_free_lists().unwrap();
}

/// `set_migratetype_isolate()` checks for unmovable pages only where the
/// asked range and the pageblock overlap (`isolate_single_pageblock()`
/// passes a range that may start inside the pageblock or run past it): an
/// unmovable page at the range's end, in the next pageblock, or before
/// the range's start refuses nothing.
#[test]
fn only_the_range_inside_the_pageblock_is_checked() {
    let m = machine();
    let zone = Zone::new(&m);
    allocated(&m, P + PB, 0, Unmovable);
    isolate_block(&zone, P).unwrap();
    unisolate(&zone, P);
    isolate(&zone, P, PbIsolateMode::Other, P, P + 4 * PB).unwrap();
    unisolate(&zone, P);
    // A free order-9 pageblock is stepped over in one go, to the end.
    free(&zone, P, 9, Fpi::NONE);
    isolate_block(&zone, P).unwrap();
    assert_eq!(zone.nr_free_pages(), 0);
    unisolate(&zone, P);
    assert_eq!(zone.nr_free_pages(), 512);
    assert_eq!(zone.nr_isolate_pageblock(), 0);
    // The pageblock of the unmovable page, asked from the frame after it.
    isolate(&zone, P + PB + 1, PbIsolateMode::Other, P + PB + 1, P + 4 * PB).unwrap();
    assert_eq!(pb(&zone, P + PB), Isolate);
    unisolate(&zone, P + PB);
    // From a range that starts before it: checked whole.
    assert_eq!(
        isolate(&zone, P + PB, PbIsolateMode::Other, P, P + 4 * PB),
        Err(IsolateError::Unmovable { pfn: Pfn(P + PB) })
    );
    assert_eq!(zone.nr_isolate_pageblock(), 0);
}

/// `__isolate_free_page()` outside an isolated pageblock obeys the min
/// watermark as an allocation would, with an order-0 check against
/// `_watermark[WMARK_MIN] + 2^order` (ALLOC_CMA): it takes the block only
/// while NR_FREE_PAGES is above that, and returns the pages taken. Inside
/// an isolated pageblock there is no check.
#[test]
fn isolate_free_page_obeys_the_min_watermark_outside_isolated_blocks() {
    let m = machine();
    let zone = Zone::new(&m);
    zone.set_watermarks([10, 20, 30, 40], 0);
    let (q, r) = (BASE + 0x2000, BASE + 0x3000);
    free(&zone, P, 3, Fpi::NONE);
    free(&zone, q, 3, Fpi::NONE);
    free(&zone, r, 1, Fpi::NONE);
    // 18 free pages: not above 10 + 8.
    assert_eq!(isolate_free_page(&zone, P, 3), 0);
    assert!(is_free_block(&m, P, 3));
    assert_eq!(list(&zone, 3, Movable), vec![q, P]);
    assert_eq!(zone.nr_free_pages(), 18);
    // 19: taken.
    free(&zone, r + 2, 0, Fpi::NONE);
    assert_eq!(isolate_free_page(&zone, P, 3), 8);
    assert!(!m.page(Pfn(P)).is_buddy());
    assert_eq!(list(&zone, 3, Movable), vec![q]);
    assert_eq!(zone.nr_free_pages(), 11);
    // 11 free pages, an order-2 block of an isolated pageblock: no check.
    let s = BASE + 0x2800;
    free(&zone, s + 4, 2, Fpi::NONE);
    isolate_block(&zone, s).unwrap();
    assert_eq!(zone.nr_free_pages(), 11);
    assert_eq!(isolate_free_page(&zone, s + 4, 2), 4);
    assert!(list(&zone, 2, Isolate).is_empty());
    assert_eq!(zone.nr_free_pages(), 11);
    zone.check_free_lists().unwrap();
}

/// `__isolate_free_page()` of a block of at least half a pageblock
/// (`order >= pageblock_order - 1`) gives each pageblock the block lies in
/// to MOVABLE if its type is mergeable (`move_freepages_block()`: the
/// pageblock's other free pages go along), and no other pageblock; a
/// smaller block changes no pageblock.
#[test]
fn isolate_free_page_of_half_a_pageblock_or_more_relabels_it_movable() {
    // Order 8: the whole pageblock, and its free page outside the block.
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, P, Unmovable);
    free(&zone, P, 8, Fpi::NONE);
    free(&zone, P + 256 + 5, 0, Fpi::NONE);
    assert_eq!(isolate_free_page(&zone, P, 8), 256);
    assert_eq!(pb(&zone, P), Movable);
    assert_eq!(list(&zone, 0, Movable), vec![P + 261]);
    assert!(list(&zone, 0, Unmovable).is_empty());
    assert_eq!(zone.nr_free_pages(), 1);
    zone.check_free_lists().unwrap();
    // Order 7: below half a pageblock, nothing relabelled.
    label(&zone, P + PB, Unmovable);
    free(&zone, P + PB, 7, Fpi::NONE);
    free(&zone, P + PB + 200, 0, Fpi::NONE);
    assert_eq!(isolate_free_page(&zone, P + PB, 7), 128);
    assert_eq!(pb(&zone, P + PB), Unmovable);
    assert_eq!(list(&zone, 0, Unmovable), vec![P + PB + 200]);

    // Order 9: its own pageblock only, not the next one.
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, P, Unmovable);
    label(&zone, P + PB, Unmovable);
    free(&zone, P, 9, Fpi::NONE);
    free(&zone, P + PB + 1, 0, Fpi::NONE);
    assert_eq!(isolate_free_page(&zone, P, 9), 512);
    assert_eq!((pb(&zone, P), pb(&zone, P + PB)), (Movable, Unmovable));
    assert_eq!(list(&zone, 0, Unmovable), vec![P + PB + 1]);
    zone.check_free_lists().unwrap();

    // Order 10: both of its pageblocks; a HIGHATOMIC one keeps its type.
    let m = machine();
    let zone = Zone::new(&m);
    label(&zone, P, Unmovable);
    label(&zone, P + PB, Unmovable);
    free(&zone, P, 10, Fpi::NONE);
    free(&zone, BASE + 0x3000, 0, Fpi::NONE);
    assert_eq!(list(&zone, 10, Unmovable), vec![P]);
    assert_eq!(isolate_free_page(&zone, P, 10), 1024);
    assert_eq!((pb(&zone, P), pb(&zone, P + PB)), (Movable, Movable));
    assert_eq!(zone.nr_free_pages(), 1);
    let h = BASE + 0x2000;
    label(&zone, h, HighAtomic);
    label(&zone, h + PB, HighAtomic);
    free(&zone, h, 10, Fpi::NONE);
    free(&zone, BASE + 0x3400, 10, Fpi::NONE);
    assert_eq!(isolate_free_page(&zone, h, 10), 1024);
    assert_eq!((pb(&zone, h), pb(&zone, h + PB)), (HighAtomic, HighAtomic));
    assert_eq!(zone.nr_free_pages(), 1025);
    zone.check_free_lists().unwrap();
}
