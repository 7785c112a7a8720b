//! The free side of the front door: `__free_pages()` and its refusals,
//! the still-referenced split, `split_page()`, the page checks behind
//! `free_pages_bulk()` and `free_contig_range()`, and the contiguous
//! allocations.

use super::{allocator, machine};
use crate::FreeError;
use mmlab_buddy::ContigError;
use mmlab_engine::mm::MAX_PAGE_ORDER;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Gfp, Machine, Migratetype, Pfn};

use Migratetype::Unmovable;

/// A frame memblock reserved at boot.
fn reserved_pfn(m: &Machine) -> Pfn {
    let mem = m.memmap();
    (0..mem.nr_pages())
        .map(|i| mem.start_pfn().add(i))
        .find(|&p| mem.pfn_valid(p) && m.page(p).ext() == PageExt::Reserved)
        .unwrap()
}

/// `__free_pages()`'s refusals, nothing changed by any: an order above
/// `MAX_PAGE_ORDER`, a frame that is not RAM, another order than the
/// allocation's, a reserved frame, a tail page, a block freed already.
#[test]
fn bad_frees_are_refused() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let big = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, MAX_PAGE_ORDER).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    let free = pa.nr_free_pages() + pa.pcp_pages();
    assert_eq!(pa.free_pages(&cpu, big, 11), Err(FreeError::OrderTooLarge { order: 11 }));
    assert_eq!(pa.free_pages(&cpu, Pfn(0), 0), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
    assert_eq!(pa.free_pages(&cpu, p, 1), Err(FreeError::WrongOrder { pfn: p, allocated: 2, freed: 1 }));
    let r = reserved_pfn(&m);
    assert_eq!(pa.free_pages(&cpu, r, 0), Err(FreeError::Reserved { pfn: r }));
    assert_eq!(pa.free_pages(&cpu, p.add(1), 0), Err(FreeError::NotAllocated { pfn: p.add(1) }));
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free);
    assert_eq!(m.page(p).ext(), PageExt::Alloc(2, Unmovable));
    pa.free_pages(&cpu, big, MAX_PAGE_ORDER).unwrap();
    pa.free_pages(&cpu, p, 2).unwrap();
    assert_eq!(pa.free_pages(&cpu, p, 2), Err(FreeError::DoubleFree { pfn: p }));
    pa.check_invariants().unwrap();
}

/// `__free_pages()` of a non-compound block whose first page is still
/// referenced: the upper halves are freed, largest first (order 2 at +4,
/// order 1 at +2, order 0 at +1), and the first page stays with its
/// holder as an order-0 page.
#[test]
fn a_still_referenced_block_frees_its_upper_halves() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 3).unwrap();
    assert_eq!(pa.get_page(p), Ok(2));
    // Empty lists and no run of frees behind: no drain, no free_high.
    pa.drain_local_pages(&cpu);
    pa.pcp_of(pa.zonelist()[0] as usize, 0).lock().free_count = 0;
    let count = 0;
    pa.free_pages(&cpu, p, 3).unwrap();
    let ext = |i: u64| m.page(p.add(i)).ext();
    assert_eq!(
        [ext(0), ext(1), ext(2), ext(4)],
        [PageExt::Alloc(0, Unmovable), PageExt::Pcp(0), PageExt::Pcp(1), PageExt::Pcp(2)]
    );
    assert_eq!(pa.pageset(0).unwrap().count, count + 7);
    assert_eq!(m.page(p).refcount(), 1);
    pa.check_invariants().unwrap();
    pa.free_pages(&cpu, p, 0).unwrap();
    assert_eq!(ext(0), PageExt::Pcp(0));
    pa.check_invariants().unwrap();
}

/// `check_allocated()`: the head or any page inside a live allocation is
/// allocated (the head found at the first aligned frame below that is not
/// a tail page); a frame that is not RAM, a reserved one, a free block's
/// head or tail page are not.
#[test]
fn check_allocated_finds_the_head() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 3).unwrap();
    for i in 0..8 {
        assert_eq!(pa.check_allocated(p.add(i)), Ok(()), "+{i}");
    }
    assert_eq!(pa.check_allocated(Pfn(0)), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
    let r = reserved_pfn(&m);
    assert_eq!(pa.check_allocated(r), Err(FreeError::Reserved { pfn: r }));
    pa.free_pages(&cpu, p, 3).unwrap();
    for i in [0, 5, 7] {
        assert_eq!(pa.check_allocated(p.add(i)), Err(FreeError::NotAllocated { pfn: p.add(i) }), "+{i}");
    }
    pa.check_invariants().unwrap();
}

/// `split_page()`: each of the 2^order pages becomes an order-0 page with
/// its own reference; a block of another order or a free frame is refused.
#[test]
fn split_page_checks_the_order() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    assert_eq!(pa.split_page(p, 1), Err(FreeError::WrongOrder { pfn: p, allocated: 2, freed: 1 }));
    assert_eq!(pa.split_page(Pfn(0), 0), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
    assert_eq!(m.page(p.add(3)).ext(), PageExt::Tail);
    pa.split_page(p, 2).unwrap();
    for i in 0..4 {
        assert_eq!((m.page(p.add(i)).ext(), m.page(p.add(i)).refcount()), (PageExt::Alloc(0, Unmovable), 1));
    }
    for i in 0..4 {
        pa.free_pages(&cpu, p.add(i), 0).unwrap();
    }
    assert_eq!(pa.split_page(p, 0), Err(FreeError::NotAllocated { pfn: p }));
    pa.check_invariants().unwrap();
}

/// `free_pages_bulk()` checks every page before freeing any: a frame that
/// is not RAM (after a run of good ones), a page of another order, a free
/// page, a reserved page or a tail page refuses the whole array.
#[test]
fn free_pages_bulk_refuses_a_bad_page_anywhere() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    pa.split_page(p, 2).unwrap();
    let big = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 1).unwrap();
    let gone = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    pa.free_pages(&cpu, gone, 0).unwrap();
    let r = reserved_pfn(&m);
    let free = pa.nr_free_pages() + pa.pcp_pages();
    let good = [p, p.add(1), p.add(2)];
    let cases = [
        (vec![p, Pfn(0)], FreeError::InvalidPfn { pfn: Pfn(0) }),
        (vec![p, big, p.add(3)], FreeError::WrongOrder { pfn: big, allocated: 1, freed: 0 }),
        (vec![p, p.add(1), gone], FreeError::DoubleFree { pfn: gone }),
        (vec![r, p], FreeError::Reserved { pfn: r }),
        (vec![p.add(3), big.add(1)], FreeError::NotAllocated { pfn: big.add(1) }),
        ([&good[..], &[p.add(3), big]].concat(), FreeError::WrongOrder { pfn: big, allocated: 1, freed: 0 }),
    ];
    for (pages, err) in cases {
        assert_eq!(pa.free_pages_bulk(&cpu, &pages), Err(err), "{pages:?}");
        assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free, "{pages:?}");
    }
    // One run: the valid prefix is checked, then the first invalid frame.
    assert_eq!(pa.check_order0_run(p, 4), Ok(()));
    assert_eq!(pa.check_order0_run(Pfn(0), 2), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
    pa.free_pages_bulk(&cpu, &[p, p.add(1), p.add(2), p.add(3)]).unwrap();
    pa.free_pages(&cpu, big, 1).unwrap();
    pa.check_invariants().unwrap();
}

/// `free_contig_range()`: every page must be a live order-0 page with one
/// reference, checked before anything is freed.
#[test]
fn free_contig_range_checks_first() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_contig_pages(&cpu, 16, Gfp::GFP_KERNEL).unwrap();
    for i in 0..16 {
        assert_eq!(m.page(p.add(i)).ext(), PageExt::Alloc(0, Unmovable), "+{i}");
    }
    assert_eq!(pa.get_page(p.add(5)), Ok(2));
    let free = pa.nr_free_pages() + pa.pcp_pages();
    assert_eq!(pa.free_contig_range(&cpu, p, 16), Err(FreeError::WrongOrder { pfn: p.add(5), allocated: 0, freed: 0 }));
    assert_eq!(pa.free_contig_range(&cpu, Pfn(0), 1), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free);
    pa.free_pages(&cpu, p.add(5), 0).unwrap();
    pa.free_contig_range(&cpu, p, 16).unwrap();
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free + 16);
    pa.check_invariants().unwrap();
}

/// `alloc_contig_range()`: exactly the range asked for, or `Busy` for a
/// frame in use; a start that is not RAM is out of range.
#[test]
fn alloc_contig_range_takes_exactly_the_range() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_contig_pages(&cpu, 32, Gfp::GFP_KERNEL).unwrap();
    pa.free_contig_range(&cpu, p, 32).unwrap();
    pa.alloc_contig_range(&cpu, p.add(8), 8, Gfp::GFP_KERNEL).unwrap();
    for i in 8..16 {
        assert_eq!(m.page(p.add(i)).ext(), PageExt::Alloc(0, Unmovable), "+{i}");
    }
    assert!(!matches!(m.page(p.add(7)).ext(), PageExt::Alloc(..)));
    assert!(matches!(pa.alloc_contig_range(&cpu, p, 16, Gfp::GFP_KERNEL), Err(ContigError::Busy { .. })));
    assert_eq!(
        pa.alloc_contig_range(&cpu, Pfn(0), 1, Gfp::GFP_KERNEL),
        Err(ContigError::OutOfRange { start: Pfn(0), nr_pages: 1 })
    );
    pa.free_contig_range(&cpu, p.add(8), 8).unwrap();
    pa.check_invariants().unwrap();
}

/// `cma_activate_area()` checks the whole range first: a start or a size
/// that is not pageblock-aligned, then any page that memblock did not
/// reserve, refuses it with nothing changed.
#[test]
fn cma_activate_area_checks_the_range() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 9).unwrap();
    let managed = pa.managed_pages();
    assert_eq!(pa.cma_activate_area(&cpu, p.add(1), 512), Err(FreeError::InvalidPfn { pfn: p.add(1) }));
    assert_eq!(pa.cma_activate_area(&cpu, p, 511), Err(FreeError::InvalidPfn { pfn: p }));
    assert_eq!(pa.cma_activate_area(&cpu, p, 512), Err(FreeError::NotAllocated { pfn: p }));
    assert_eq!(pa.managed_pages(), managed);
    assert_eq!(m.page(p).ext(), PageExt::Alloc(9, Unmovable));
    pa.free_pages(&cpu, p, 9).unwrap();
    pa.check_invariants().unwrap();
}

/// `free_reserved_page()` and `free_reserved_area()`: each reserved page
/// of the range is handed to the allocator (freed, counted as managed);
/// a frame that is not RAM or not reserved is refused.
#[test]
fn free_reserved_area_frees_each_page() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let mem = m.memmap();
    let r = (0..mem.nr_pages() - 2)
        .map(|i| mem.start_pfn().add(i))
        .find(|&p| (0..3).all(|k| m.page(p.add(k)).ext() == PageExt::Reserved))
        .unwrap();
    let managed = pa.managed_pages();
    assert_eq!(pa.free_reserved_page(&cpu, Pfn(0)), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
    let q = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(pa.free_reserved_page(&cpu, q), Err(FreeError::NotAllocated { pfn: q }));
    assert_eq!(pa.managed_pages(), managed);
    pa.free_reserved_area(&cpu, r.phys().0, 2 << 12).unwrap();
    assert_eq!(pa.managed_pages(), managed + 2);
    assert!([r, r.add(1)].iter().all(|&p| m.page(p).ext() != PageExt::Reserved));
    assert_eq!(m.page(r.add(2)).ext(), PageExt::Reserved);
    pa.free_reserved_page(&cpu, r.add(2)).unwrap();
    assert_eq!(pa.managed_pages(), managed + 3);
    assert_ne!(m.page(r.add(2)).ext(), PageExt::Reserved);
    pa.free_pages(&cpu, q, 0).unwrap();
    pa.check_invariants().unwrap();
}
