//! `alloc_pages_bulk()`: the empty slots of an array filled from one pcp
//! list under one lock hold, or one page the normal way.

use super::alloc::{ev, marks, usable};
use super::{allocator, machine};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, Migratetype, Pfn};

/// `alloc_pages_bulk()`: every empty slot is filled with an order-0 page,
/// pre-filled slots (leading or not) are kept and counted; PGALLOC counts
/// the pages taken; an array with no empty slot allocates nothing.
#[test]
fn alloc_pages_bulk_fills_the_empty_slots() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let pgalloc = || ev(&m, VmEvent::pgalloc(pa.zone().zone_type()));
    let (base, slow) = (pgalloc(), ev(&m, VmEvent::AllocSlowpath));
    let mut a = [None; 10];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut a), 10);
    let pages: Vec<Pfn> = a.iter().map(|p| p.unwrap()).collect();
    let mut sorted = pages.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 10);
    assert!(pages.iter().all(|&p| m.page(p).ext() == PageExt::Alloc(0, Migratetype::Unmovable)));
    assert_eq!(pgalloc(), base + 10);
    let mut b = [Some(pages[0]), Some(pages[1]), None, None, None, Some(pages[5]), None, None, None, None];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut b), 10);
    assert_eq!([b[0], b[1], b[5]], [Some(pages[0]), Some(pages[1]), Some(pages[5])]);
    assert!(b.iter().all(Option::is_some));
    assert_eq!(pgalloc(), base + 17);
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut b), 10);
    assert_eq!(pgalloc(), base + 17);
    assert_eq!(ev(&m, VmEvent::AllocSlowpath), slow);
    let mut all: Vec<Pfn> = pages.clone();
    all.extend([2, 3, 4, 6, 7, 8, 9].map(|i| b[i].unwrap()));
    pa.free_pages_bulk(&cpu, &all).unwrap();
    pa.check_invariants().unwrap();
}

/// `alloc_pages_bulk()`: one empty slot left goes to the single-page
/// allocator at once (no bulk attempt); with more, a pcp that cannot be
/// locked sends it to the single-page allocator too (`failed`), which
/// fills one slot.
#[test]
fn alloc_pages_bulk_one_page_the_normal_way() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let zi = pa.zonelist()[0] as usize;
    let x = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    let mut one = [Some(x), None];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut one), 2);
    assert!(one[1].is_some() && one[1] != Some(x));
    let mut solo = [None];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut solo), 1);
    let (c, d);
    {
        // The pcp held (as by a remote drain): only trylocks fail.
        let _held = pa.pcp_of(zi, 1).lock();
        let fails = ev(&m, VmEvent::PcpTrylockFail);
        let mut last = [Some(x), None];
        assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut last), 2);
        assert_eq!(ev(&m, VmEvent::PcpTrylockFail), fails + 1);
        let mut four = [None; 4];
        assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut four), 1);
        assert_eq!(ev(&m, VmEvent::PcpTrylockFail), fails + 1 + 2);
        assert!(four[0].is_some() && four[1..].iter().all(Option::is_none));
        (c, d) = (last[1].unwrap(), four[0].unwrap());
    }
    pa.free_pages_bulk(&cpu, &[x, one[1].unwrap(), solo[0].unwrap(), c, d]).unwrap();
    pa.check_invariants().unwrap();
}

/// `alloc_pages_bulk()`: the zone must have room for every missing page
/// above its watermark (`zone_watermark_fast(mark + nr_pages -
/// nr_populated)`); otherwise one page the normal way.
#[test]
fn alloc_pages_bulk_needs_room_for_the_batch() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(1).unwrap();
    let zt = pa.zone().zone_type();
    let x = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    let y = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    let mut taken = vec![x, y];
    // Two of ten pre-filled: 8 missing. usable − 9 + 8 < usable: room.
    let f = usable(&pa, &cpu, zt);
    marks(&pa, zt, f - 30, f - 9, f - 5);
    let mut a = [Some(x), Some(y), None, None, None, None, None, None, None, None];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut a), 10);
    taken.extend(a[2..].iter().map(|p| p.unwrap()));
    // usable − 6 + 8 > usable: one page.
    let f = usable(&pa, &cpu, zt);
    marks(&pa, zt, f - 30, f - 6, f - 5);
    let mut b = [Some(x), Some(y), None, None, None, None, None, None, None, None];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut b), 3);
    assert!(b[3..].iter().all(Option::is_none));
    taken.push(b[2].unwrap());
    taken.sort();
    for p in taken {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    pa.check_invariants().unwrap();
}
