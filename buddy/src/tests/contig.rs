//! `alloc_contig_range()` (its check, `split_free_pages()` and the
//! `__GFP_COMP` path), `pfn_range_valid_contig()` and
//! `alloc_contig_pages()`.

use super::{BASE, event, free, is_free_block, list, machine, zone_over};
use crate::contig::{ContigError, ContigScan};
use crate::zone::{Fpi, Zone};
use mmlab_engine::mm::page::{PageExt, pg};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::{MAX_PAGE_ORDER, NR_PAGE_ORDERS};
use mmlab_engine::{Machine, MachineConfig, Migratetype, Pfn};

use Migratetype::{Movable, Unmovable};

/// `alloc_contig_range()` through the locked zone, with its work.
fn take(zone: &Zone<'_>, start: u64, nr: u64, mt: Migratetype, comp: bool) -> (Result<(), ContigError>, ContigScan) {
    let cpu = zone.m.cpu(0).unwrap();
    let mut scan = ContigScan::default();
    let r = zone.lock(&cpu).take_contig_range_scan(Pfn(start), nr, mt, comp, &mut scan);
    (r, scan)
}

/// `alloc_contig_pages()` with `__GFP_COMP` as `comp`, with its work.
fn pages(zone: &Zone<'_>, nr: u64, comp: bool) -> (Result<u64, ContigError>, ContigScan) {
    let cpu = zone.m.cpu(0).unwrap();
    let mut scan = ContigScan::default();
    let r = zone.alloc_contig_pages_scan(&cpu, nr, Movable, comp, &mut scan);
    (r.map(|p| p.0), scan)
}

/// The counters of a `ContigScan`, in declaration order.
fn counts(s: &ContigScan) -> [u64; 8] {
    [
        s.ranges_scanned,
        s.pages_scanned,
        s.ranges_tried,
        s.ranges_busy,
        s.blocks_taken,
        s.pages_given_back,
        s.pages_prepped,
        s.ranges_allocated,
    ]
}

/// `alloc_contig_range()` of one frame inside a free order-10 block: the
/// block containing it (`find_large_buddy()`: the head is the frame with
/// its low `order` bits cleared) is taken whole, and the frames on either
/// side go back to the free lists as the largest aligned blocks that fit
/// (`free_contig_range()`): [B, B+2) and B+2 below, B+4 (order 2) up to
/// B+512 (order 9) above. The frame becomes an order-0 page of the asked
/// type with refcount 1 (`split_free_pages()`), counted once as `pgalloc`.
#[test]
fn alloc_contig_range_of_one_frame_gives_back_the_rest_of_its_block() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    let before = event(&m, VmEvent::pgalloc(zone.name));
    let (r, scan) = take(&zone, BASE + 3, 1, Unmovable, false);
    assert_eq!(r, Ok(()));
    let page = m.page(Pfn(BASE + 3));
    assert_eq!((page.refcount(), page.ext()), (1, PageExt::Alloc(0, Unmovable)));
    let mut want = [1u64; NR_PAGE_ORDERS];
    want[MAX_PAGE_ORDER as usize] = 0;
    assert_eq!(zone.nr_free_per_order(), want);
    assert!(is_free_block(&m, BASE, 1) && is_free_block(&m, BASE + 2, 0));
    for o in 2..10 {
        assert!(is_free_block(&m, BASE + (1 << o), o), "order {o}");
    }
    assert_eq!(zone.nr_free_pages(), 1023);
    // The frames given back keep their pageblock's type.
    assert_eq!(list(&zone, 9, Movable), vec![BASE + 512]);
    assert_eq!(event(&m, VmEvent::pgalloc(zone.name)), before + 1);
    // tried, taken 1 block, gave back 1023 frames, prepped 1, allocated.
    assert_eq!(counts(&scan), [0, 0, 1, 0, 1, 1023, 1, 1]);
    zone.check_free_lists().unwrap();
}

/// `alloc_contig_range()` over several free blocks of different orders:
/// the check walks block by block (the next frame looked at is the one
/// after the block just found), every frame of the range becomes its own
/// page, and only what sticks out of the first and last blocks goes back.
#[test]
fn alloc_contig_range_walks_block_by_block() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 4, 2, Fpi::NONE);
    free(&zone, BASE + 8, 3, Fpi::NONE);
    free(&zone, BASE + 16, 4, Fpi::NONE);
    assert_eq!(zone.nr_free_pages(), 28);
    let before = event(&m, VmEvent::pgalloc(zone.name));
    let (r, scan) = take(&zone, BASE + 5, 15, Movable, false);
    assert_eq!(r, Ok(()));
    for p in BASE + 5..BASE + 20 {
        let page = m.page(Pfn(p));
        assert_eq!((page.refcount(), page.ext()), (1, PageExt::Alloc(0, Movable)), "pfn {p:#x}");
    }
    // Given back: B+4 below, [B+20, B+32) above as B+20 (2) and B+24 (3).
    assert!(is_free_block(&m, BASE + 4, 0));
    assert!(is_free_block(&m, BASE + 20, 2) && is_free_block(&m, BASE + 24, 3));
    assert_eq!(zone.nr_free_per_order()[..5], [1, 0, 1, 1, 0]);
    assert_eq!(zone.nr_free_pages(), 13);
    assert_eq!(event(&m, VmEvent::pgalloc(zone.name)), before + 15);
    assert_eq!(counts(&scan), [0, 0, 1, 0, 3, 13, 15, 1]);
    zone.check_free_lists().unwrap();
}

/// `alloc_contig_range()` refuses a range with a frame that is not free
/// (mmlab cannot migrate it: `-EBUSY`), naming the first such frame, and
/// changes nothing; the attempt is counted as tried and busy.
#[test]
fn alloc_contig_range_refuses_a_busy_frame_and_changes_nothing() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 3, Fpi::NONE);
    let before = event(&m, VmEvent::pgalloc(zone.name));
    let (r, scan) = take(&zone, BASE + 4, 8, Movable, false);
    assert_eq!(r, Err(ContigError::Busy { pfn: Pfn(BASE + 8) }));
    assert_eq!(counts(&scan), [0, 0, 1, 1, 0, 0, 0, 0]);
    // Busy at the first frame too.
    let (r, _) = take(&zone, BASE + 8, 1, Movable, false);
    assert_eq!(r, Err(ContigError::Busy { pfn: Pfn(BASE + 8) }));
    assert!(is_free_block(&m, BASE, 3));
    assert_eq!(zone.nr_free_pages(), 8);
    assert_eq!(event(&m, VmEvent::pgalloc(zone.name)), before);
    // Through Zone::alloc_contig_range, the same.
    let cpu = m.cpu(0).unwrap();
    assert_eq!(zone.alloc_contig_range(&cpu, Pfn(BASE + 7), 2, Movable), Err(ContigError::Busy { pfn: Pfn(BASE + 8) }));
    assert!(is_free_block(&m, BASE, 3));
    // And a range it can have: the wrapper takes it.
    assert_eq!(zone.alloc_contig_range(&cpu, Pfn(BASE + 6), 2, Movable), Ok(()));
    assert_eq!(m.page(Pfn(BASE + 7)).ext(), PageExt::Alloc(0, Movable));
    assert_eq!(zone.nr_free_pages(), 6);
}

/// `alloc_contig_range()` needs `[start, end)` non-empty and inside the
/// zone (`zone_spans_pfn()` of the first and the last frame): a range
/// ending at the zone's last frame is fine, one frame further is not.
/// Nothing is counted for a refused range.
#[test]
fn alloc_contig_range_needs_the_range_inside_the_zone() {
    let m = machine();
    let zone = zone_over(&m, BASE, BASE + 0x1000);
    let end = zone.zone_end_pfn().0;
    free(&zone, end - 1024, 10, Fpi::NONE);
    let oor = |start: u64, nr: u64| Err(ContigError::OutOfRange { start: Pfn(start), nr_pages: nr });
    let (r, scan) = take(&zone, BASE, 0, Movable, false);
    assert_eq!(r, oor(BASE, 0));
    assert_eq!(counts(&scan), [0; 8]);
    assert_eq!(take(&zone, BASE - 1, 2, Movable, false).0, oor(BASE - 1, 2));
    assert_eq!(take(&zone, end - 1, 2, Movable, false).0, oor(end - 1, 2));
    assert_eq!(take(&zone, end, 1, Movable, false).0, oor(end, 1));
    assert_eq!(take(&zone, end - 2, 2, Movable, false).0, Ok(()));
    assert_eq!(zone.nr_free_pages(), 1022);
}

/// `alloc_contig_range()` with `__GFP_COMP`: a naturally aligned power of
/// two covered exactly by free blocks comes back as one page of order
/// log2(nr) (`prep_new_page()` of the head only; 2048 frames: order 11,
/// above `MAX_PAGE_ORDER`, as for a gigantic folio), counted as `nr`
/// pages of `pgalloc`.
#[test]
fn alloc_contig_range_gfp_comp_makes_one_page_of_the_range() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    free(&zone, BASE + 1024, 10, Fpi::NONE);
    let before = event(&m, VmEvent::pgalloc(zone.name));
    let (r, scan) = take(&zone, BASE, 2048, Movable, true);
    assert_eq!(r, Ok(()));
    let head = m.page(Pfn(BASE));
    assert_eq!((head.refcount(), head.ext()), (1, PageExt::Alloc(11, Movable)));
    // The tails are not prepared as pages of their own.
    assert_ne!(m.page(Pfn(BASE + 1024)).ext(), PageExt::Alloc(0, Movable));
    assert_eq!(zone.nr_free_pages(), 0);
    assert_eq!(event(&m, VmEvent::pgalloc(zone.name)), before + 2048);
    assert_eq!(counts(&scan), [0, 0, 1, 0, 2, 0, 1, 1]);
}

/// `alloc_contig_range()` with `__GFP_COMP` refuses (`-EINVAL`) a range
/// that is not a power of two, not aligned to its size, or not exactly
/// the free blocks covering it (outer_start/outer_end differ), even when
/// the same range without `__GFP_COMP` can be had; nothing is taken.
#[test]
fn alloc_contig_range_gfp_comp_refuses_anything_but_an_exact_aligned_block() {
    let m = machine();
    let zone = Zone::new(&m);
    let inval = |start: u64, nr: u64| Err(ContigError::NotCompound { start: Pfn(start), nr_pages: nr });
    // [B+2, B+5): 3 frames, exactly B+2 (order 1) and B+4 (order 0), and
    // B+2 is a multiple of 3: only "not a power of two" refuses it.
    assert_eq!((BASE + 2) % 3, 0);
    free(&zone, BASE + 2, 1, Fpi::NONE);
    free(&zone, BASE + 4, 0, Fpi::NONE);
    let (r, scan) = take(&zone, BASE + 2, 3, Movable, true);
    assert_eq!(r, inval(BASE + 2, 3));
    assert_eq!(counts(&scan), [0, 0, 1, 0, 0, 0, 0, 0]);
    assert_eq!(zone.nr_free_pages(), 3);
    // [B+2, B+6): exactly B+2 and B+4 (both order 1 once B+5 is free), a
    // power of two, but B+2 is not a multiple of 4.
    free(&zone, BASE + 5, 0, Fpi::NONE);
    assert!(is_free_block(&m, BASE + 4, 1));
    assert_eq!(take(&zone, BASE + 2, 4, Movable, true).0, inval(BASE + 2, 4));
    assert_eq!(zone.nr_free_pages(), 4);
    // Without __GFP_COMP the same range is fine.
    assert_eq!(take(&zone, BASE + 2, 4, Movable, false).0, Ok(()));
    assert_eq!(zone.nr_free_pages(), 0);
    // [B+8, B+12) inside the free order-3 block at B+8: aligned power of
    // two, but the block covering it is larger.
    free(&zone, BASE + 8, 3, Fpi::NONE);
    assert_eq!(take(&zone, BASE + 8, 4, Movable, true).0, inval(BASE + 8, 4));
    assert_eq!(take(&zone, BASE + 12, 4, Movable, true).0, inval(BASE + 12, 4));
    assert!(is_free_block(&m, BASE + 8, 3));
    // The whole block is one order-3 page.
    assert_eq!(take(&zone, BASE + 8, 8, Movable, true).0, Ok(()));
    assert_eq!(m.page(Pfn(BASE + 8)).ext(), PageExt::Alloc(3, Movable));
}

/// `pfn_range_valid_contig()`: a candidate passes unless a frame is
/// outside the zone, reserved (`PageReserved`) or part of a huge page
/// (`PageHuge`: a head, or a tail whose `compound_head` has bit 0 set);
/// pages merely in use pass. The scan reads one struct page per frame and
/// stops at the first that fails.
#[test]
fn pfn_range_valid_contig_stops_at_the_first_unsuitable_frame() {
    let m = machine();
    let zone = Zone::new(&m);
    let mut scan = ContigScan::default();
    assert!(zone.pfn_range_valid_contig(Pfn(BASE), 8, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (1, 8));
    // In use, and on a list (an even lru.next): still a candidate.
    m.page(Pfn(BASE + 1)).set_ext(PageExt::Alloc(0, Movable));
    m.page(Pfn(BASE + 1)).set_refcount(1);
    m.page(Pfn(BASE + 2)).set_lru_next(0xffff_0000_1000_0100);
    assert!(zone.pfn_range_valid_contig(Pfn(BASE), 8, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (2, 16));
    // Reserved at B+5: 6 frames read.
    m.page(Pfn(BASE + 5)).set_ext(PageExt::Reserved);
    assert!(!zone.pfn_range_valid_contig(Pfn(BASE), 8, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (3, 22));
    // A compound head at B+3: 4 frames read.
    m.page(Pfn(BASE + 3)).set_flag(pg::PG_HEAD);
    assert!(!zone.pfn_range_valid_contig(Pfn(BASE), 8, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (4, 26));
    // A tail (compound_head | 1) at B+2: 3 frames read.
    m.page(Pfn(BASE + 2)).set_lru_next(0xffff_0000_1000_0101);
    assert!(!zone.pfn_range_valid_contig(Pfn(BASE), 8, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (5, 29));
    // Leaving the zone: the last two frames are in it, the third is not.
    let small = zone_over(&m, BASE, BASE + 0x1000);
    assert!(!small.pfn_range_valid_contig(Pfn(BASE + 0xffe), 4, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (6, 32));
    // A range of other frames is still fine.
    assert!(zone.pfn_range_valid_contig(Pfn(BASE + 8), 3, &mut scan));
    assert_eq!((scan.ranges_scanned, scan.pages_scanned), (7, 35));
}

/// `alloc_contig_pages()`: candidates are the multiples of `nr` (a power
/// of two) from the zone's start, each checked by
/// `pfn_range_valid_contig()` then tried; a busy candidate moves on to the
/// next, and the first that can be had is returned.
#[test]
fn alloc_contig_pages_tries_the_aligned_candidates_in_order() {
    let m = machine();
    // A zone starting at B+3: the first multiple of 8 in it is B+8.
    let zone = zone_over(&m, BASE + 3, BASE + 0x1000);
    free(&zone, BASE + 16, 3, Fpi::NONE);
    free(&zone, BASE + 12, 2, Fpi::NONE);
    let (r, scan) = pages(&zone, 8, false);
    assert_eq!(r, Ok(BASE + 16));
    // B+8: valid, busy at B+8; B+16: taken.
    assert_eq!(counts(&scan), [2, 16, 2, 1, 1, 0, 8, 1]);
    assert_eq!(m.page(Pfn(BASE + 23)).ext(), PageExt::Alloc(0, Movable));
    assert_eq!(zone.nr_free_pages(), 4);
    // [B+12, B+16) is left: the third multiple of 4 (B+4, B+8 busy).
    let (r, scan) = pages(&zone, 4, false);
    assert_eq!(r, Ok(BASE + 12));
    assert_eq!(counts(&scan), [3, 12, 3, 2, 1, 0, 4, 1]);
    // Nothing left: every candidate is tried and found busy.
    let (r, scan) = pages(&zone, 512, false);
    assert_eq!(r, Err(ContigError::NoRange { nr_pages: 512 }));
    // Candidates B+512 .. B+0xe00 (B itself is outside the zone).
    assert_eq!(counts(&scan), [7, 7 * 512, 7, 7, 0, 0, 0, 0]);
}

/// `alloc_contig_pages()` for a size that is not a power of two: the
/// candidates are pageblock-aligned (`pageblock_nr_pages`, 512).
#[test]
fn alloc_contig_pages_aligns_other_sizes_to_pageblocks() {
    let m = machine();
    let zone = Zone::new(&m);
    // [B+1, B+4) is free, but not at a pageblock boundary.
    free(&zone, BASE + 1, 0, Fpi::NONE);
    free(&zone, BASE + 2, 1, Fpi::NONE);
    free(&zone, BASE + 1024, 2, Fpi::NONE);
    let (r, scan) = pages(&zone, 3, false);
    assert_eq!(r, Ok(BASE + 1024));
    // B, B+512 busy; B+1024 taken, one frame given back.
    assert_eq!(counts(&scan), [3, 9, 3, 2, 1, 1, 3, 1]);
    assert!(is_free_block(&m, BASE + 1027, 0));
}

/// `alloc_contig_pages()`: the last candidate ends exactly at the zone's
/// end (`zone_spans_last_pfn()`), and a request as large as the zone is
/// allowed; 0 frames, or more than the zone spans, find nothing.
#[test]
fn alloc_contig_pages_reaches_the_end_of_the_zone() {
    let m = machine();
    let zone = zone_over(&m, BASE, BASE + 2048);
    free(&zone, BASE + 1024, 10, Fpi::NONE);
    let (r, scan) = pages(&zone, 1024, false);
    assert_eq!(r, Ok(BASE + 1024));
    assert_eq!(counts(&scan)[..4], [2, 2048, 2, 1]);
    let m = machine();
    let zone = zone_over(&m, BASE, BASE + 2048);
    free(&zone, BASE, 10, Fpi::NONE);
    free(&zone, BASE + 1024, 10, Fpi::NONE);
    assert_eq!(pages(&zone, 0, false).0, Err(ContigError::NoRange { nr_pages: 0 }));
    assert_eq!(pages(&zone, 2049, false).0, Err(ContigError::NoRange { nr_pages: 2049 }));
    assert_eq!(pages(&zone, 2048, false).0, Ok(BASE));
    assert_eq!(zone.nr_free_pages(), 0);
}

/// `alloc_contig_pages()` with `__GFP_COMP`: the size must be a power of
/// two (`-EINVAL` otherwise, before any candidate); the range found is one
/// page of order log2(nr).
#[test]
fn alloc_contig_pages_gfp_comp() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 1024, 10, Fpi::NONE);
    let (r, scan) = pages(&zone, 3, true);
    assert_eq!(r, Err(ContigError::NotCompound { start: Pfn(BASE), nr_pages: 3 }));
    assert_eq!(counts(&scan), [0; 8]);
    let (r, scan) = pages(&zone, 1024, true);
    assert_eq!(r, Ok(BASE + 1024));
    assert_eq!(m.page(Pfn(BASE + 1024)).ext(), PageExt::Alloc(10, Movable));
    assert_eq!(counts(&scan), [2, 2048, 2, 1, 1, 0, 1, 1]);
}

/// `alloc_contig_pages()` with `__GFP_COMP` goes on after a candidate
/// that `alloc_contig_range()` refuses with `-EINVAL` (the range lies
/// inside a larger free block, so the range taken is not the range asked
/// for), as after a busy one: the kernel's loop tries the next candidate
/// whatever `__alloc_contig_pages()` returned. The order-10 block stays
/// free and whole; the exact order-3 block further up is the answer.
#[test]
fn alloc_contig_pages_gfp_comp_goes_past_a_refused_candidate() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE, 10, Fpi::NONE);
    free(&zone, BASE + 2048, 3, Fpi::NONE);
    let (r, scan) = pages(&zone, 8, true);
    assert_eq!(r, Ok(BASE + 2048));
    assert_eq!(m.page(Pfn(BASE + 2048)).ext(), PageExt::Alloc(3, Movable));
    assert!(is_free_block(&m, BASE, 10));
    assert_eq!(zone.nr_free_pages(), 1024);
    assert_eq!((scan.ranges_scanned, scan.ranges_allocated), (257, 1));
}

/// `alloc_contig_pages()` without `__GFP_COMP` (the plain entry point):
/// the first aligned candidate that is free, every frame its own page.
#[test]
fn alloc_contig_pages_returns_the_first_free_candidate() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 32, 4, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    assert_eq!(zone.alloc_contig_pages(&cpu, 16, Unmovable), Ok(Pfn(BASE + 32)));
    assert_eq!(m.page(Pfn(BASE + 47)).ext(), PageExt::Alloc(0, Unmovable));
    assert_eq!(zone.nr_free_pages(), 0);
    assert_eq!(zone.alloc_contig_pages(&cpu, 16, Unmovable), Err(ContigError::NoRange { nr_pages: 16 }));
}

/// `alloc_contig_range()` over a hole in the memory map (a section with
/// no memory: `pfn_valid()` false) is busy at the hole's first frame,
/// even though the frame before it is free; nothing changes.
#[test]
fn alloc_contig_range_is_busy_at_a_hole() {
    // Two 128 MiB banks with a 128 MiB hole between them: PFN 0x48000 is
    // the hole's first frame, one section (32768 frames) long.
    let cfg = MachineConfig {
        linear_map: false,
        ..MachineConfig::with("128M@0x40000000,128M@0x50000000", 1).unwrap().bare()
    };
    let m = Machine::boot(cfg).unwrap();
    assert!(m.claim_memblock_free_all());
    assert!(m.memmap().pfn_valid(Pfn(0x47fff)) && !m.memmap().pfn_valid(Pfn(0x48000)));
    let zone = Zone::new(&m);
    assert!(zone.spans(Pfn(0x48000)));
    free(&zone, 0x47ffe, 1, Fpi::NONE);
    let (r, scan) = take(&zone, 0x47ffe, 4, Movable, false);
    assert_eq!(r, Err(ContigError::Busy { pfn: Pfn(0x48000) }));
    assert_eq!(counts(&scan), [0, 0, 1, 1, 0, 0, 0, 0]);
    assert!(is_free_block(&m, 0x47ffe, 1));
    assert_eq!(zone.nr_free_pages(), 2);
}
