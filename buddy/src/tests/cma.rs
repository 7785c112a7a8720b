//! `isolate_freepages_range()` as `alloc_contig_frozen_range()` uses it
//! for CMA: the range's pageblocks isolated (a larger free block split at
//! their boundaries), then the free blocks covering the range taken whole.

use super::{BASE, event, free, is_free_block, label, list, machine, zone_over};
use crate::contig::ContigError;
use crate::zone::{Fpi, Zone};
use mmlab_engine::mm::PAGEBLOCK_NR_PAGES;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Migratetype, Pfn};

use Migratetype::{Cma, Movable};

/// `isolate_freepages_range()` on CPU 0: `(outer_start, outer_end)`.
fn isolate(zone: &Zone<'_>, start: u64, nr: u64) -> Result<(u64, u64), ContigError> {
    let cpu = zone.m.cpu(0).unwrap();
    let r = zone.lock(&cpu).isolate_freepages_range(Pfn(start), nr);
    r.map(|(s, e)| (s.0, e.0))
}

/// Every frame of `[s, e)` an order-0 page of type `mt` with refcount 1.
fn all_order0(zone: &Zone<'_>, s: u64, e: u64, mt: Migratetype) {
    for p in s..e {
        let page = zone.m.page(Pfn(p));
        assert_eq!((page.refcount(), page.ext()), (1, PageExt::Alloc(0, mt)), "pfn {p:#x}");
    }
}

/// A range inside a free order-10 block: isolating its pageblock
/// (`start_isolate_page_range()` rounds the range out to pageblocks:
/// [B+512, B+1024) for [B+520, B+530)) splits the block at the pageblock
/// boundary, so the lower pageblock goes back to the free lists as one
/// order-9 block and the outer range is the isolated pageblock, every frame
/// of it an order-0 page of the pageblock's type
/// (`split_free_frozen_pages()`). Nothing is counted as `pgalloc`.
#[test]
fn isolate_freepages_range_clips_a_large_block_to_the_pageblocks() {
    let m = machine();
    let zone = Zone::new(&m);
    assert_eq!(PAGEBLOCK_NR_PAGES, 512);
    label(&zone, BASE, Cma);
    label(&zone, BASE + 512, Cma);
    free(&zone, BASE, 10, Fpi::NONE);
    assert_eq!(zone.nr_free_cma(), 1024);
    let before = event(&m, VmEvent::pgalloc(zone.name));
    assert_eq!(isolate(&zone, BASE + 520, 10), Ok((BASE + 512, BASE + 1024)));
    all_order0(&zone, BASE + 512, BASE + 1024, Cma);
    assert_eq!(list(&zone, 9, Cma), vec![BASE]);
    assert_eq!(zone.nr_free_per_order()[9..], [1, 0]);
    assert_eq!((zone.nr_free_pages(), zone.nr_free_cma()), (512, 512));
    assert_eq!(event(&m, VmEvent::pgalloc(zone.name)), before);
    zone.check_free_lists().unwrap();
}

/// The upper side: a range in the lower pageblock of a free order-10
/// block isolates [B, B+512) and gives back the upper pageblock; a range
/// crossing the boundary isolates both pageblocks.
#[test]
fn isolate_freepages_range_rounds_the_end_up_to_a_pageblock() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    assert_eq!(isolate(&zone, BASE + 3, 1), Ok((BASE, BASE + 512)));
    all_order0(&zone, BASE, BASE + 512, Movable);
    assert!(is_free_block(&m, BASE + 512, 9));
    assert_eq!(zone.nr_free_pages(), 512);
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    // The range ends at a pageblock boundary: its end is not moved.
    assert_eq!(isolate(&zone, BASE + 500, 12), Ok((BASE, BASE + 512)));
    assert_eq!(zone.nr_free_pages(), 512);
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    assert_eq!(isolate(&zone, BASE + 511, 2), Ok((BASE, BASE + 1024)));
    all_order0(&zone, BASE, BASE + 1024, Movable);
    assert_eq!(zone.nr_free_pages(), 0);
}

/// Free blocks smaller than a pageblock are taken whole: the outer range
/// runs from the head of the first block to the end of the last
/// (`find_large_buddy()` / the walk of `isolate_freepages_range()`), the
/// frames outside the asked range left to the caller; the walk moves from
/// block to block.
#[test]
fn isolate_freepages_range_takes_small_blocks_whole() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 2, 1, Fpi::NONE);
    free(&zone, BASE + 4, 2, Fpi::NONE);
    free(&zone, BASE + 8, 3, Fpi::NONE);
    free(&zone, BASE + 16, 0, Fpi::NONE);
    assert_eq!(isolate(&zone, BASE + 3, 6), Ok((BASE + 2, BASE + 16)));
    all_order0(&zone, BASE + 2, BASE + 16, Movable);
    assert!(is_free_block(&m, BASE + 16, 0));
    assert_eq!(zone.nr_free_pages(), 1);
    zone.check_free_lists().unwrap();
}

/// A frame that is not free refuses the range (`-EBUSY`: mmlab cannot
/// migrate), naming the first one, and nothing changes.
#[test]
fn isolate_freepages_range_refuses_a_busy_frame() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 3, Fpi::NONE);
    assert_eq!(isolate(&zone, BASE + 6, 4), Err(ContigError::Busy { pfn: Pfn(BASE + 8) }));
    assert_eq!(isolate(&zone, BASE + 8, 1), Err(ContigError::Busy { pfn: Pfn(BASE + 8) }));
    assert!(is_free_block(&m, BASE, 3));
    assert_eq!(zone.nr_free_pages(), 8);
}

/// The range must be non-empty and inside the zone, its last frame
/// included.
#[test]
fn isolate_freepages_range_needs_the_range_inside_the_zone() {
    let m = machine();
    let zone = zone_over(&m, BASE, BASE + 2048);
    free(&zone, BASE + 1024, 10, Fpi::NONE);
    let oor = |start: u64, nr: u64| Err(ContigError::OutOfRange { start: Pfn(start), nr_pages: nr });
    assert_eq!(isolate(&zone, BASE + 1024, 0), oor(BASE + 1024, 0));
    assert_eq!(isolate(&zone, BASE - 1, 1), oor(BASE - 1, 1));
    assert_eq!(isolate(&zone, BASE + 2047, 2), oor(BASE + 2047, 2));
    assert_eq!(zone.nr_free_pages(), 1024);
    assert_eq!(isolate(&zone, BASE + 2046, 2), Ok((BASE + 1536, BASE + 2048)));
    assert_eq!(zone.nr_free_pages(), 512);
}
