//! 7.2's `vm_area_alloc_pages()` takes an area's pages as the largest
//! blocks that fit first (`vmalloc.large_order_pages`), and 7.2's `vfree()`
//! gives each contiguous run back as aligned blocks
//! (`vmalloc.free_pages_bulk`): a 100-page vmalloc is three blocks out and
//! the same three blocks back, with no page lost; off, the pages come one
//! by one from the pcp.

use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Machine, PAGE_SIZE, Pfn, arch::arm64::pgtable};
use mmlab_pcp::{AllocatorConfig, FaultAttr, PageAllocator};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};

/// The frame behind each page of `[addr, addr + pages * 4 KiB)`.
fn frames(m: &Machine, addr: u64, pages: u64) -> Vec<Pfn> {
    let asp = m.kernel_as();
    (0..pages).map(|i| Pfn(pgtable::walk(m, &asp, addr + i * PAGE_SIZE).leaf.expect("mapped").pa.0 >> 12)).collect()
}

/// Page-table pages of the kernel's tables.
fn tables(m: &Machine) -> i64 {
    pgtable::stats(m, &m.kernel_as()).tables.iter().sum::<u64>() as i64
}

/// The lengths of the runs of consecutive frames in `f`.
fn runs(f: &[Pfn]) -> Vec<usize> {
    let mut out = vec![1];
    for w in f.windows(2) {
        if w[1].0 == w[0].0 + 1 {
            *out.last_mut().unwrap() += 1;
        } else {
            out.push(1);
        }
    }
    out
}

#[test]
fn a_100_page_vmalloc_is_three_blocks_out_and_back() {
    let m = mmlab_tests::machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    pa.drain_all_pages(&cpu);
    let free0 = pa.nr_free_pages() + pa.pcp_pages();
    let tables0 = tables(&m);
    let ev0 = m.vm_events();
    let a = vm.vmalloc(&cpu, 100 * PAGE_SIZE).unwrap();
    let f = frames(&m, a, 100);
    // Orders 6, 5 and 2 (ilog2 of the pages left each time), each block
    // aligned to its size.
    let mut at = 0;
    for order in [6u32, 5, 2] {
        let head = f[at];
        assert_eq!(head.0 % (1 << order), 0, "order-{order} block at {head} is aligned");
        assert_eq!(&f[at..at + (1 << order)], &(0..1u64 << order).map(|i| head.add(i)).collect::<Vec<_>>()[..]);
        at += 1 << order;
    }
    let d = m.vm_events().delta(&ev0);
    assert_eq!(d.get(VmEvent::PcpDrain), 0);
    vm.vfree(&cpu, a).unwrap();
    // The blocks go back whole: nothing drained, nothing lost.
    assert_eq!(m.vm_events().delta(&ev0).get(VmEvent::PcpDrain), 0);
    // Every page is back but the page tables the area needed, which stay.
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages() + tables(&m) - tables0, free0);
    pa.check_invariants().unwrap();
}

#[test]
fn off_the_pages_come_from_the_pcp_one_by_one() {
    let m = mmlab_tests::machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cfg = VmallocConfig { large_order_pages: false, ..VmallocConfig::default() };
    let vm = Vmalloc::new(&pa, cfg);
    let cpu = m.cpu(0).unwrap();
    // Warm the pcp with a first area, so that the second's pages come off
    // the order-0 list, last freed first (not in ascending runs).
    let a = vm.vmalloc(&cpu, 100 * PAGE_SIZE).unwrap();
    vm.vfree(&cpu, a).unwrap();
    let b = vm.vmalloc(&cpu, 100 * PAGE_SIZE).unwrap();
    let r = runs(&frames(&m, b, 100));
    assert!(r.iter().all(|&n| n < 64), "no 64-page block: {r:?}");
    vm.vfree(&cpu, b).unwrap();
    pa.check_invariants().unwrap();
}

#[test]
fn a_failed_large_order_falls_back_to_smaller_ones() {
    // fail_page_alloc fails every request of order 5 and above: order 6
    // fails, then order 5, and the 100 pages come as order-4 blocks and
    // one order-2 block, the area whole.
    let m = mmlab_tests::machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let attr = FaultAttr { probability: 100, times: -1, min_order: 5, ..FaultAttr::default() };
    pa.set_fail_page_alloc(Some(attr)).unwrap();
    let a = vm.vmalloc(&cpu, 100 * PAGE_SIZE).unwrap();
    assert_eq!(pa.fail_page_alloc_injected(), 2, "one failure per order, 6 then 5");
    pa.set_fail_page_alloc(None).unwrap();
    let f = frames(&m, a, 100);
    for (at, order) in [(0, 4u32), (16, 4), (32, 4), (48, 4), (64, 4), (80, 4), (96, 2)] {
        assert_eq!(f[at].0 % (1 << order), 0, "page {at}: an aligned order-{order} block");
    }
    vm.vfree(&cpu, a).unwrap();
    pa.check_invariants().unwrap();
}
