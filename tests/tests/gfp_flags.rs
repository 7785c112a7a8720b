//! The gfp flags the allocator honours: __GFP_ZERO, the mobility bits, and
//! the slow-path behaviour of direct-reclaim, __GFP_NORETRY, __GFP_NOFAIL
//! and non-blocking requests (mm/page_alloc.c `__alloc_pages_slowpath`; mmlab
//! has nothing to reclaim, so "reclaim" is draining the pcp lists).

use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, Machine, Migratetype, PAGE_SIZE, Pfn};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

fn boot(m: &Machine) -> PageAllocator<'_> {
    PageAllocator::boot(m, AllocatorConfig::default()).unwrap()
}

#[test]
fn gfp_zero_clears_the_page_and_plain_alloc_does_not() {
    let m = mmlab_tests::machine("32M", 1);
    let pa = boot(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    m.arena().write(p.phys(), &[0xa5; PAGE_SIZE as usize]);
    pa.free_pages(&cpu, p, 0).unwrap();
    // The pcp list is LIFO: the same page comes back, still dirty.
    let q = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(q, p);
    let mut buf = [0u8; PAGE_SIZE as usize];
    m.arena().read(q.phys(), &mut buf);
    assert!(buf.iter().all(|&b| b == 0xa5), "without __GFP_ZERO the old contents stay");
    pa.free_pages(&cpu, q, 0).unwrap();
    let before = m.vm_events().get(VmEvent::PgZero);
    let r = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO, 0).unwrap();
    assert_eq!(r, p);
    m.arena().read(r.phys(), &mut buf);
    assert!(buf.iter().all(|&b| b == 0), "__GFP_ZERO must clear the page");
    assert_eq!(m.vm_events().get(VmEvent::PgZero) - before, 1);
}

#[test]
fn mobility_bits_choose_the_migratetype() {
    let m = mmlab_tests::machine("32M", 1);
    let pa = boot(&m);
    let cpu = m.cpu(0).unwrap();
    for (gfp, mt) in [
        (Gfp::GFP_KERNEL, Migratetype::Unmovable),
        (Gfp::GFP_HIGHUSER_MOVABLE, Migratetype::Movable),
        (Gfp::GFP_KERNEL | Gfp::__GFP_RECLAIMABLE, Migratetype::Reclaimable),
    ] {
        let p = pa.alloc_pages(&cpu, gfp, 1).unwrap();
        assert_eq!(m.page(p).ext(), PageExt::Alloc(1, mt), "{gfp}");
        // Unmovable and reclaimable requests claimed a pageblock of their own.
        assert_eq!(pa.zone().pageblock_migratetype(p), mt, "{gfp}");
        pa.free_pages(&cpu, p, 1).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// Park `n` pages on CPU 1's pcp list, then raise the min watermark to 50
/// pages above the buddy's free count: the zone passes only if the pcp pages
/// come back. Returns the pages parked.
fn pages_parked_on_cpu1_behind_the_watermark(pa: &PageAllocator<'_>, m: &Machine, n: usize) -> Vec<Pfn> {
    let cpu1 = m.cpu(1).unwrap();
    let pages: Vec<Pfn> = (0..n).map(|_| pa.alloc_pages(&cpu1, Gfp::GFP_KERNEL, 0).unwrap()).collect();
    for &p in &pages {
        pa.free_pages(&cpu1, p, 0).unwrap();
    }
    // The freed pages plus what the last refill left on the list.
    assert!(pa.pageset(1).unwrap().count as usize >= n, "all parked, none drained");
    let free = pa.nr_free_pages() as u64;
    pa.set_min_free_kbytes((free + 50) * 4).unwrap();
    assert_eq!(pa.zone().min_wmark_pages(), free + 50);
    pages
}

#[test]
fn direct_reclaim_drains_the_pcp_lists_once_and_succeeds() {
    let m = mmlab_tests::machine("32M", 2);
    let pa = boot(&m);
    pages_parked_on_cpu1_behind_the_watermark(&pa, &m, 100);
    let cpu0 = m.cpu(0).unwrap();
    let drains = m.vm_events().get(VmEvent::DrainAllPages);
    let p = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 0);
    assert!(p.is_some(), "GFP_KERNEL may drain the pcp lists and must then pass the min watermark");
    assert_eq!(m.vm_events().get(VmEvent::DrainAllPages) - drains, 1);
    assert_eq!(pa.pageset(1).unwrap().count, 0, "CPU 1's parked pages went back to the buddy");
    pa.check_invariants().unwrap();
}

#[test]
fn nonblocking_and_costly_noretry_requests_do_not_drain() {
    let m = mmlab_tests::machine("32M", 2);
    let pa = boot(&m);
    pages_parked_on_cpu1_behind_the_watermark(&pa, &m, 100);
    let parked = pa.pageset(1).unwrap().count;
    let cpu0 = m.cpu(0).unwrap();
    let drains = m.vm_events().get(VmEvent::DrainAllPages);
    let fails = m.vm_events().get(VmEvent::PgallocFail);
    // GFP_NOWAIT cannot enter direct reclaim.
    assert_eq!(pa.alloc_pages(&cpu0, Gfp::GFP_NOWAIT | Gfp::__GFP_NOWARN, 0), None);
    // A costly order with __GFP_NORETRY gives up before direct reclaim.
    assert_eq!(pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY | Gfp::__GFP_NOWARN, 4), None);
    assert_eq!(m.vm_events().get(VmEvent::DrainAllPages), drains, "no drain for either");
    assert_eq!(m.vm_events().get(VmEvent::PgallocFail) - fails, 2);
    assert_eq!(pa.pageset(1).unwrap().count, parked, "the parked pages stay parked");
    // __GFP_NORETRY at a cheap order still reclaims (drains) once.
    assert!(pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY | Gfp::__GFP_NOWARN, 0).is_some());
    assert_eq!(m.vm_events().get(VmEvent::DrainAllPages) - drains, 1);
    pa.check_invariants().unwrap();
}

#[test]
fn nofail_dips_into_the_reserves_where_gfp_kernel_fails() {
    let m = mmlab_tests::machine("32M", 1);
    let pa = boot(&m);
    let cpu = m.cpu(0).unwrap();
    let free = pa.nr_free_pages() as u64;
    pa.set_min_free_kbytes((free + 50) * 4).unwrap();
    assert_eq!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 0), None);
    // min - min/2 - min/4 of that is far below the free count.
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOFAIL, 0);
    assert!(p.is_some(), "__GFP_NOFAIL must use the reserves");
    pa.free_pages(&cpu, p.unwrap(), 0).unwrap();
    pa.check_invariants().unwrap();
}
