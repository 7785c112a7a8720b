//! `free_pages_bulk()`: runs of consecutive frames freed as the largest
//! naturally aligned blocks (`free_prepared_contig_range`).

use super::{allocator, machine};
use crate::FreeError;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, Pfn};

/// An order-`order` block split into order-0 pages (`split_page`).
fn pages(pa: &crate::PageAllocator<'_>, cpu: &mmlab_engine::Cpu<'_>, order: u32) -> u64 {
    let p = pa.alloc_pages(cpu, Gfp::GFP_KERNEL, order).unwrap();
    pa.split_page(p, order).unwrap();
    p.0
}

fn run(start: u64, end: u64) -> Vec<Pfn> {
    (start..end).map(Pfn).collect()
}

/// 16 pages from an order-4 boundary: one order-4 free, to the buddy
/// lists (order 4 is not cached on the pcp).
#[test]
fn an_aligned_run_of_16_is_one_order_4_free() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pages(&pa, &cpu, 4);
    let before = m.vm_events().get(VmEvent::FreeOnePagePages);
    pa.free_pages_bulk(&cpu, &run(p, p + 16)).unwrap();
    assert_eq!(m.vm_events().get(VmEvent::FreeOnePagePages), before + 16);
    assert!(m.page(Pfn(p + 15)).ext() != PageExt::Alloc(0, mmlab_engine::Migratetype::Unmovable));
    pa.check_invariants().unwrap();
}

/// Seven pages from p + 1: blocks p + 1 (order 0), p + 2 (1), p + 4 (2),
/// each on the pcp, the tail pages plain; then p alone and p + 8..p + 16
/// (order 3) from one array with a gap.
#[test]
fn unaligned_runs_are_cut_by_alignment_and_length() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pages(&pa, &cpu, 4);
    let count = pa.pageset(0).unwrap().count;
    pa.free_pages_bulk(&cpu, &run(p + 1, p + 8)).unwrap();
    assert_eq!(pa.pageset(0).unwrap().count, count + 7);
    let ext = |pfn: u64| m.page(Pfn(pfn)).ext();
    assert_eq!([ext(p + 1), ext(p + 2), ext(p + 4)], [PageExt::Pcp(0), PageExt::Pcp(1), PageExt::Pcp(2)]);
    assert_eq!([ext(p + 3), ext(p + 5), ext(p + 6), ext(p + 7)], [PageExt::Tail; 4]);
    let mut gap = vec![Pfn(p)];
    gap.extend(run(p + 8, p + 16));
    pa.free_pages_bulk(&cpu, &gap).unwrap();
    assert_eq!([ext(p), ext(p + 8), ext(p + 15)], [PageExt::Pcp(0), PageExt::Pcp(3), PageExt::Tail]);
    assert_eq!(pa.pageset(0).unwrap().count, count + 16);
    pa.check_invariants().unwrap();
}

/// A page still referenced stays with its holder and cuts the stretch; a
/// page listed twice is a double free found at its second drop, after the
/// pages before it were freed.
#[test]
fn referenced_pages_stay_and_a_repeat_is_a_double_free() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let r = pages(&pa, &cpu, 2);
    assert_eq!(pa.get_page(Pfn(r + 1)), Ok(2));
    pa.free_pages_bulk(&cpu, &run(r, r + 4)).unwrap();
    let ext = |pfn: u64| m.page(Pfn(pfn)).ext();
    assert_eq!([ext(r), ext(r + 2)], [PageExt::Pcp(0), PageExt::Pcp(1)]);
    assert!(matches!(ext(r + 1), PageExt::Alloc(0, _)));
    assert_eq!(m.page(Pfn(r + 1)).refcount(), 1);
    let s = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    let t = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(pa.free_pages_bulk(&cpu, &[t, s, s]), Err(FreeError::DoubleFree { pfn: s }));
    assert_eq!([ext(s.0), ext(t.0)], [PageExt::Pcp(0), PageExt::Pcp(0)]);
    pa.free_pages(&cpu, Pfn(r + 1), 0).unwrap();
    pa.check_invariants().unwrap();
}
