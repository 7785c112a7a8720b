//! `check_invariants()` on hand-corrupted allocators: each corruption
//! reported with its exact message (mmlab's own checker; the kernel's
//! nearest are `bad_page()` and `check_new_page()`).

use super::{allocator, machine};
use crate::pageset::order_to_pindex;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Gfp, Machine, MachineConfig, Migratetype, Pfn};

use Migratetype::Unmovable;

/// A pcp block with a reference, or not in the pcp state, or a pcp count
/// that disagrees with the lists: reported with the CPU and list.
#[test]
fn pcp_lists_are_checked_entry_by_entry() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = m.cpu(1).unwrap();
    let zi = pa.zonelist()[0] as usize;
    pa.drain_local_pages(&cpu1);
    let p = pa.alloc_pages(&cpu1, Gfp::GFP_KERNEL, 0).unwrap();
    pa.free_pages(&cpu1, p, 0).unwrap();
    let pindex = order_to_pindex(Unmovable, 0);
    assert_eq!(pa.check_invariants(), Ok(()));
    let page = m.page(p);
    page.set_refcount(1);
    assert_eq!(pa.check_invariants(), Err(format!("cpu 1 pcp list {pindex}: pfn {p} state Pcp(0) buddy false ref 1")));
    page.set_refcount(0);
    page.set_ext(PageExt::Alloc(0, Unmovable));
    assert_eq!(
        pa.check_invariants(),
        Err(format!("cpu 1 pcp list {pindex}: pfn {p} state Alloc(0, Unmovable) buddy false ref 0"))
    );
    page.set_ext(PageExt::Pcp(0));
    let count = pa.pageset(1).unwrap().count;
    pa.pcp_of(zi, 1).lock().count += 1;
    assert_eq!(pa.check_invariants(), Err(format!("cpu 1: pcp count {} but {count} pages on its lists", count + 1)));
    pa.pcp_of(zi, 1).lock().count -= 1;
    assert_eq!(pa.check_invariants(), Ok(()));
}

/// Frames outside every list: an allocation's head with no reference, a
/// tail that is not a tail page, a pcp-state frame on no list (lost), a
/// block running past the end of RAM; an allocation that ends at the last
/// frame is fine.
#[test]
fn every_frame_is_accounted_for() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 1).unwrap();
    let head = m.page(p);
    head.set_refcount(0);
    assert_eq!(pa.check_invariants(), Err(format!("allocated pfn {p} has refcount 0")));
    head.set_refcount(1);
    let tail = m.page(p.add(1));
    tail.set_ext(PageExt::Alloc(0, Unmovable));
    assert_eq!(pa.check_invariants(), Err(format!("tail {} of allocation {p} is Alloc(0, Unmovable)", p.add(1))));
    tail.set_ext(PageExt::Tail);
    head.set_ext(PageExt::Pcp(1));
    assert_eq!(
        pa.check_invariants(),
        Err(format!("pfn {p} is lost: state Pcp(1), not on any free list, pcp list or allocation"))
    );
    head.set_ext(PageExt::Alloc(1, Unmovable));
    assert_eq!(pa.check_invariants(), Ok(()));
    // The last frame of RAM as an order-0 allocation, then as order 1.
    let mem = m.memmap();
    let last = mem.start_pfn().add(mem.nr_pages() - 1);
    let lp = m.page(last);
    let (ext, refs) = (lp.ext(), lp.refcount());
    assert_eq!(ext, PageExt::Reserved);
    lp.set_refcount(1);
    lp.set_ext(PageExt::Alloc(0, Unmovable));
    assert_eq!(pa.check_invariants(), Ok(()));
    lp.set_ext(PageExt::Alloc(1, Unmovable));
    assert_eq!(pa.check_invariants(), Err(format!("allocated block {last} order 1 runs past the end of RAM")));
    lp.set_ext(ext);
    lp.set_refcount(refs);
    pa.free_pages(&cpu, p, 1).unwrap();
    assert_eq!(pa.check_invariants(), Ok(()));
}

/// Two banks with a section-sized hole between them (no struct pages
/// there): the walk steps over the hole and still sees the frames after it.
#[test]
fn the_walk_steps_over_a_hole() {
    let m = Machine::boot(MachineConfig::with("64M,64M@0x50000000", 2).unwrap()).unwrap();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let hole = Pfn(0x4800_0000 >> 12);
    assert!(!m.memmap().pfn_valid(hole));
    assert_eq!(pa.check_invariants(), Ok(()));
    let bank2 = 0x5000_0000 >> 12;
    let p = Pfn(bank2 + 0x2000);
    pa.alloc_contig_range(&cpu, p, 1, Gfp::GFP_KERNEL).unwrap();
    // An order-1 allocation before it, past the middle of the span: the
    // walk goes on from its end (2 frames on), not from anywhere else.
    let q = Pfn(bank2 + 0x1000);
    pa.alloc_contig_range(&cpu, q, 2, Gfp::GFP_KERNEL).unwrap();
    m.page(q).set_ext(PageExt::Alloc(1, Unmovable));
    m.page(q.add(1)).set_ext(PageExt::Tail);
    m.page(q.add(1)).set_refcount(0);
    assert!(2 * (q.0 - m.memmap().start_pfn().0) > m.memmap().nr_pages());
    assert_eq!(pa.check_invariants(), Ok(()));
    m.page(p).set_ext(PageExt::Pcp(0));
    assert_eq!(
        pa.check_invariants(),
        Err(format!("pfn {p} is lost: state Pcp(0), not on any free list, pcp list or allocation"))
    );
    m.page(p).set_ext(PageExt::Alloc(0, Unmovable));
    assert_eq!(pa.check_invariants(), Ok(()));
}
