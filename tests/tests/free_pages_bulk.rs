//! `free_pages_bulk()` (Linux 7.2): contiguous runs of an order-0 page array
//! go back as aligned blocks, through the pcp for the pcp's orders and to
//! the buddy for the rest; a still-referenced page stays with its holder;
//! bad input changes nothing.

use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, Pfn};
use mmlab_pcp::{AllocatorConfig, FreeError, PageAllocator};
use mmlab_tests::counting_machine as machine;

/// An order-`order` block split into order-0 pages, as vmalloc makes them.
fn split_block(pa: &PageAllocator<'_>, cpu: &mmlab_engine::Cpu<'_>, order: u32) -> Vec<Pfn> {
    let p = pa.alloc_pages(cpu, Gfp::GFP_KERNEL, order).unwrap();
    pa.split_page(p, order).unwrap();
    (0..1u64 << order).map(|i| p.add(i)).collect()
}

#[test]
fn a_split_pageblock_returns_as_one_block_through_the_pcp() {
    // A pcp high above the block, so that it stays on the list (at the
    // 64M machine's own high it would be drained back at once).
    let m = machine("64M", true);
    let cfg = AllocatorConfig { pcp_high_override: Some(2048), ..AllocatorConfig::default() };
    let pa = PageAllocator::boot(&m, cfg).unwrap();
    let cpu = m.cpu(0).unwrap();
    let pages = split_block(&pa, &cpu, 9);
    let (free0, pcp0) = (pa.nr_free_pages(), pa.pcp_pages());
    let ev0 = m.vm_events();
    pa.free_pages_bulk(&cpu, &pages).unwrap();
    let d = m.vm_events().delta(&ev0);
    assert_eq!(d.pgfree, 512, "every page is counted");
    assert_eq!(d.pcp_drain, 0);
    assert_eq!(pa.pcp_pages() - pcp0, 512, "one order-9 block on the pcp (the pageblock order is a pcp order)");
    assert!(matches!(m.page(pages[0]).ext(), PageExt::Pcp(9)), "{:?}", m.page(pages[0]).ext());
    assert_eq!(m.page(pages[1]).ext(), PageExt::Tail);
    // The next order-9 allocation takes it straight back.
    assert_eq!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 9), Some(pages[0]));
    pa.free_pages(&cpu, pages[0], 9).unwrap();
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free0 + pcp0 + 512);
    pa.check_invariants().unwrap();
}

#[test]
fn runs_are_cut_into_aligned_blocks_and_referenced_pages_stay() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let block = split_block(&pa, &cpu, 6);
    let base = block[0];
    // Pages 1..=22 of the 64, with page 9 held by someone else: the runs are
    // [1, 9) and [10, 23), freed as 1 (o0), 2 (o1), 4 (o2), 8 (o0); 10 (o1),
    // 12 (o2), 16 (o2), 20 (o1), 22 (o0).
    let arr: Vec<Pfn> = (1..23).map(|i| base.add(i)).collect();
    assert_eq!(pa.get_page(base.add(9)), Ok(2));
    let z0 = m.vm_events().get(VmEvent::ZoneLockAcquire);
    pa.free_pages_bulk(&cpu, &arr).unwrap();
    let ext = |i: u64| m.page(base.add(i)).ext();
    assert_eq!(ext(1), PageExt::Pcp(0));
    assert_eq!(ext(2), PageExt::Pcp(1));
    assert_eq!(ext(4), PageExt::Pcp(2));
    assert_eq!(ext(8), PageExt::Pcp(0));
    assert!(matches!(ext(9), PageExt::Alloc(0, _)), "the held page stays allocated");
    assert_eq!(m.page(base.add(9)).refcount(), 1);
    assert_eq!(ext(10), PageExt::Pcp(1));
    assert_eq!(ext(12), PageExt::Pcp(2));
    assert_eq!(ext(16), PageExt::Pcp(2));
    assert_eq!(ext(20), PageExt::Pcp(1));
    assert_eq!(ext(22), PageExt::Pcp(0));
    assert_eq!(m.vm_events().get(VmEvent::ZoneLockAcquire), z0, "orders 0-3 stay on the pcp");
    // A 16-page aligned run is order 4: not a pcp order, to the buddy.
    let big = split_block(&pa, &cpu, 4);
    pa.free_pages_bulk(&cpu, &big).unwrap();
    assert!(matches!(m.page(big[0]).ext(), PageExt::Buddy(_)), "{:?}", m.page(big[0]).ext());
    assert!(m.vm_events().get(VmEvent::ZoneLockAcquire) > z0);
    // The rest of the first block, one page at a time.
    for i in (0..64).filter(|i| *i == 0 || *i == 9 || *i >= 23) {
        pa.free_pages(&cpu, base.add(i), 0).unwrap();
    }
    pa.check_invariants().unwrap();
}

#[test]
fn bad_input_changes_nothing() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let pages = split_block(&pa, &cpu, 2);
    let free = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    pa.free_pages(&cpu, free, 0).unwrap();
    let (nr_free, pcp) = (pa.nr_free_pages(), pa.pcp_pages());
    let mut bad = pages.clone();
    bad.push(free);
    assert_eq!(pa.free_pages_bulk(&cpu, &bad), Err(FreeError::DoubleFree { pfn: free }));
    let block = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 1).unwrap();
    assert!(matches!(pa.free_pages_bulk(&cpu, &[pages[0], block]), Err(FreeError::WrongOrder { .. })));
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages() + 2, nr_free + pcp, "only the order-1 allocation is gone");
    assert!(pages.iter().all(|&p| m.page(p).refcount() == 1), "nothing was freed");
    // A page listed twice: the pages before it go back, the second drop is refused.
    let twice = [pages[0], pages[1], pages[1]];
    assert_eq!(pa.free_pages_bulk(&cpu, &twice), Err(FreeError::DoubleFree { pfn: pages[1] }));
    pa.free_pages_bulk(&cpu, &pages[2..]).unwrap();
    pa.free_pages(&cpu, block, 1).unwrap();
    pa.check_invariants().unwrap();
}
