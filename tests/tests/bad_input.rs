//! Bad input gets a typed error (or None) and changes nothing: no counter,
//! list or pcp moves, and `check_invariants` stays clean.
//!
//! 64 MiB machine, 2 CPUs, bare RAM with the linear map off, the machine
//! of buddy_split_merge.rs: the PFNs below are the allocator's layout on
//! bare RAM, derived there; with the linear map on, `paging_init()` takes
//! 37 more table pages (fixmap 3, linear map 1 PUD + 1 PMD + 32 PTE) below
//! swapper_pg_dir and every small boot block moves. RAM is PFN
//! 0x40000..0x44000; the memmap is
//! reserved at 0x43e00..0x43f00, the usemap at 0x43fff and the four
//! vmemmap page-table pages just below it (swapper_pg_dir 0x43ffe, pud
//! 0x43ffd, pmd 0x43ffc, pte 0x43ffb; see buddy_split_merge.rs);
//! managed = 16,384 - 261 = 16,123; batch 3 (16,123 >> 12 = 3); min
//! watermark 253 from min_free_kbytes (int_sqrt(16,123 x 4 x 16 =
//! 1,031,872) = 1,015; >> 2), raised to 787 by khugepaged (see
//! `exhaustion_stops_at_the_min_watermark`).

use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::{VmCounts, VmEvent};
use mmlab_engine::{Gfp, Machine, MachineConfig, Migratetype, PAGE_SIZE, Pfn};
use mmlab_pcp::{AllocError, AllocatorConfig, FreeError, PageAllocator, PagesetInfo};

/// The module comment's machine: bare RAM, no linear map (its tables
/// would move the PFNs derived here).
fn boot() -> Machine {
    let cfg = MachineConfig { linear_map: false, ..MachineConfig::with("64M", 2).expect("64M").bare() };
    mmlab_tests::boot(cfg).expect("the 64M machine boots")
}

fn pa(m: &Machine) -> PageAllocator<'_> {
    PageAllocator::boot(m, AllocatorConfig::default()).unwrap()
}

/// Everything a bad call must leave alone.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    buddyinfo: [u64; 11],
    per_type: [[u64; 11]; mmlab_engine::mm::MIGRATE_TYPES],
    nr_free: i64,
    pcp: Vec<PagesetInfo>,
    events: VmCounts,
}

fn snap(m: &Machine, pa: &PageAllocator<'_>) -> Snapshot {
    Snapshot {
        buddyinfo: pa.zone().nr_free_per_order(),
        per_type: pa.zone().nr_free_per_type(),
        nr_free: pa.nr_free_pages(),
        pcp: (0..m.nr_cpus()).map(|c| pa.pageset(c).unwrap()).collect(),
        events: m.vm_events(),
    }
}

/// Run a bad call, check its error and that nothing changed.
#[track_caller]
fn refused(m: &Machine, pa: &PageAllocator<'_>, got: impl FnOnce() -> Result<(), FreeError>, want: FreeError) {
    pa.check_invariants().unwrap();
    let before = snap(m, pa);
    assert_eq!(got(), Err(want));
    assert_eq!(snap(m, pa), before, "state changed by a refused {want:?}");
    pa.check_invariants().unwrap();
}

#[test]
fn double_free_on_pcp_list_and_in_buddy() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    // The first order-0 movable refill (3 pages: the boot order-0 block
    // 0x43ffa, then 0x43ff8 and 0x43ff9 from splitting the order-1 block at
    // 0x43ff8) hands out the head, 0x43ffa.
    // (GFP_KERNEL is unmovable: with every pageblock MOVABLE it would claim
    // the largest block, 0x40000, instead.)
    let p = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert_eq!(p, Pfn(0x43ffa));
    pa.free_pages(&cpu, p, 0).unwrap();
    assert_eq!(m.page(p).ext(), PageExt::Pcp(0));
    // On the pcp list.
    refused(&m, &pa, || pa.free_pages(&cpu, p, 0), FreeError::DoubleFree { pfn: p });
    // Drained: 0x43ffa's buddy 0x43ffb is the pte table page (reserved), so
    // it stays an order-0 buddy head (0x43ff8 and 0x43ff9 merge into an
    // order-1 block, whose order-1 buddy 0x43ffa is only order 0).
    pa.drain_local_pages(&cpu);
    assert_eq!(m.page(p).ext(), PageExt::Buddy(0));
    refused(&m, &pa, || pa.free_pages(&cpu, p, 0), FreeError::DoubleFree { pfn: p });
    // From the other CPU too.
    let cpu1 = m.cpu(1).unwrap();
    refused(&m, &pa, || pa.free_pages(&cpu1, p, 0), FreeError::DoubleFree { pfn: p });
    // An order-1 double free of the head of a free order-10 block: DoubleFree
    // is checked before the order.
    refused(&m, &pa, || pa.free_pages(&cpu, Pfn(0x40000), 1), FreeError::DoubleFree { pfn: Pfn(0x40000) });
}

#[test]
fn never_allocated_page() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    // 0x40001 lies inside the free order-10 block at 0x40000 and was never
    // handed out.
    refused(&m, &pa, || pa.free_pages(&cpu, Pfn(0x40001), 0), FreeError::NotAllocated { pfn: Pfn(0x40001) });
    refused(&m, &pa, || pa.free_pages(&cpu, Pfn(0x40123), 3), FreeError::NotAllocated { pfn: Pfn(0x40123) });
    // get_page on it is refused as well.
    assert_eq!(pa.get_page(Pfn(0x40001)), Err(FreeError::NotAllocated { pfn: Pfn(0x40001) }));
}

#[test]
fn tail_pages_and_wrong_order() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    // Order 2 through the pcp: the movable refill takes max(3 >> 2, 2) = 2
    // order-2 blocks. There is no boot order-2 block (0x43ff8..0x43ffb holds
    // the pte table page 0x43ffb), so the first splits the boot order-3 block
    // 0x43ff0 (keeping 0x43ff0, putting 0x43ff4 at order 2) and the second
    // is 0x43ff4; the head, 0x43ff0, is handed out and 0x43ff4 stays parked.
    let p = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 2).unwrap();
    assert_eq!(p, Pfn(0x43ff0));
    assert_eq!(pa.pageset(0).unwrap().count, 4);
    assert_eq!(m.page(p).ext(), PageExt::Alloc(2, Migratetype::Movable));
    for t in 1..4 {
        let tail = p.add(t);
        assert_eq!(m.page(tail).ext(), PageExt::Tail);
        refused(&m, &pa, || pa.free_pages(&cpu, tail, 0), FreeError::NotAllocated { pfn: tail });
        refused(&m, &pa, || pa.free_pages(&cpu, tail, 2), FreeError::NotAllocated { pfn: tail });
    }
    for o in [0, 1, 3, 10] {
        refused(&m, &pa, || pa.free_pages(&cpu, p, o), FreeError::WrongOrder { pfn: p, allocated: 2, freed: o });
    }
    // Still allocated and freeable at the right order.
    assert_eq!(m.page(p).refcount(), 1);
    pa.free_pages(&cpu, p, 2).unwrap();
    pa.check_invariants().unwrap();
}

#[test]
fn order_too_large() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let before = snap(&m, &pa);
    assert_eq!(
        pa.try_alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 11),
        Err(AllocError::OrderTooLarge { order: 11 })
    );
    assert_eq!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 11), None);
    assert_eq!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 64), None);
    assert_eq!(snap(&m, &pa), before);
    refused(&m, &pa, || pa.free_pages(&cpu, Pfn(0x40000), 11), FreeError::OrderTooLarge { order: 11 });
    refused(&m, &pa, || pa.free_pages(&cpu, Pfn(0x40000), u32::MAX), FreeError::OrderTooLarge { order: u32::MAX });
    // Order 10 (MAX_PAGE_ORDER) itself is fine: the buddy path, the head of
    // the order-10 list (0x40000).
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 10).unwrap();
    assert_eq!(p, Pfn(0x40000));
    pa.free_pages(&cpu, p, 10).unwrap();
    assert_eq!(pa.zone().nr_free_per_order(), before.buddyinfo);
}

#[test]
fn invalid_and_reserved_pfns() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    for pfn in [Pfn(0), Pfn(0x3ffff), Pfn(0x44000), Pfn(u64::MAX)] {
        refused(&m, &pa, || pa.free_pages(&cpu, pfn, 0), FreeError::InvalidPfn { pfn });
        assert_eq!(pa.get_page(pfn), Err(FreeError::InvalidPfn { pfn }));
    }
    let reserved: Vec<_> = m.memblock().reserved().to_vec();
    // Sorted by address: the memmap, the pte, pmd and pud tables and
    // swapper_pg_dir (allocated top-down in the reverse order, merged into
    // one region as memblock_merge_regions() does), the usemap.
    let owner = |base| m.memblock().reservations().find(|l| l.base == base).unwrap().name;
    assert_eq!(reserved.iter().map(|r| owner(r.base)).collect::<Vec<_>>(), ["memmap", "pgtable", "usemap"]);
    let memmap = reserved[0].base.pfn();
    assert_eq!(memmap, Pfn(0x43e00));
    assert_eq!(reserved[1].size, 4 * PAGE_SIZE);
    let tables: Vec<Pfn> = (0..4).map(|i| reserved[1].base.pfn().add(i)).collect();
    assert_eq!(tables, [Pfn(0x43ffb), Pfn(0x43ffc), Pfn(0x43ffd), Pfn(0x43ffe)]);
    let usemap = reserved[2].base.pfn();
    assert_eq!(usemap, Pfn(0x43fff));
    for pfn in [memmap, memmap.add(255), tables[0], tables[3], usemap] {
        refused(&m, &pa, || pa.free_pages(&cpu, pfn, 0), FreeError::Reserved { pfn });
    }
    refused(&m, &pa, || pa.free_pages(&cpu, memmap, 8), FreeError::Reserved { pfn: memmap });
    refused(&m, &pa, || pa.free_contig_range(&cpu, memmap, 4), FreeError::Reserved { pfn: memmap });
    refused(&m, &pa, || pa.free_contig_range(&cpu, tables[0], 4), FreeError::Reserved { pfn: tables[0] });
}

#[test]
fn split_order2_frees_each_page() {
    // split_page gives every page its own reference; freeing them one by
    // one (and a double free of one of them) behaves as for order-0 pages.
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    pa.split_page(p, 2).unwrap();
    for t in 0..4 {
        assert_eq!(m.page(p.add(t)).ext(), PageExt::Alloc(0, Migratetype::Unmovable));
    }
    refused(&m, &pa, || pa.free_pages(&cpu, p, 2), FreeError::WrongOrder { pfn: p, allocated: 0, freed: 2 });
    for t in 0..4 {
        pa.free_pages(&cpu, p.add(t), 0).unwrap();
    }
    refused(&m, &pa, || pa.free_pages(&cpu, p.add(2), 0), FreeError::DoubleFree { pfn: p.add(2) });
}

/// Allocate order-0 GFP_KERNEL pages until None; returns the pages.
fn exhaust(m: &Machine, pa: &PageAllocator<'_>, cpu: &mmlab_engine::Cpu<'_>) -> Vec<Pfn> {
    let managed = pa.managed_pages();
    let mut pages = Vec::new();
    while let Some(p) = pa.alloc_pages(cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 0) {
        pages.push(p);
        assert!(pages.len() as u64 <= managed, "allocated more than managed");
    }
    assert_eq!(m.vm_events().get(VmEvent::PgallocFail), 1);
    pages
}

#[test]
fn exhausting_memory() {
    let m = boot();
    let pa = pa(&m);
    let cpus = m.all_cpus().unwrap();
    let boot_buddyinfo = pa.zone().nr_free_per_order();
    let managed = pa.managed_pages();
    let pages = exhaust(&m, &pa, &cpus[0]);
    // The failed attempt went through the slow path, which drained every pcp
    // (direct-reclaim stand-in): nothing is left parked.
    assert_eq!(pa.pcp_pages(), 0);
    let free = pa.nr_free_pages();
    // Failure means the min watermark check (with any boost) failed.
    assert!(free <= pa.zone().min_wmark_pages() as i64, "free {free}");
    assert_eq!(pages.len() as u64 + free as u64, managed, "every page is allocated or free");
    pa.check_invariants().unwrap();
    // Failing again changes nothing but the failure counters.
    let gfp = Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN;
    let before = snap(&m, &pa);
    assert_eq!(pa.try_alloc_pages(&cpus[1], gfp, 0), Err(AllocError::NoMemory { order: 0, gfp }));
    assert_eq!(pa.alloc_pages(&cpus[1], gfp, 3), None);
    let after = snap(&m, &pa);
    assert_eq!((after.buddyinfo, after.per_type, after.nr_free), (before.buddyinfo, before.per_type, before.nr_free));
    assert_eq!(after.events.get(VmEvent::PgallocFail), 3);
    assert_eq!(after.events.pgalloc(), before.events.pgalloc());
    pa.check_invariants().unwrap();

    // Free everything: nothing was lost.
    for (i, p) in pages.iter().enumerate() {
        pa.free_pages(&cpus[i % 2], *p, 0).unwrap();
    }
    pa.drain_all_pages(&cpus[0]);
    assert_eq!(pa.nr_free_pages() as u64, managed);
    assert_eq!(pa.zone().nr_free_per_order(), boot_buddyinfo);
    pa.check_invariants().unwrap();
}

#[test]

fn exhaustion_stops_at_the_min_watermark() {
    // Without reclaim, order-0 GFP_KERNEL allocations succeed while
    // NR_FREE_PAGES > min (787: khugepaged's 5,632 pages capped at 5 % of
    // nr_free_buffer_pages on this 64M machine, pcp_sizing.rs) at the slow
    // path's ALLOC_WMARK_MIN check.
    // Once the movable pageblocks are used up, unmovable requests claim
    // partial pageblocks, which boosts the watermarks by 512
    // (boost_watermark); the kernel wakes kswapd, whose balance_pgdat
    // removes the boost again; mmlab says "the boost simply lapses" but keeps
    // zone->watermark_boost forever, so allocation stops at min + 512.
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    let min = pa.zone().min_wmark_pages() as i64;
    assert_eq!(min, 787);
    exhaust(&m, &pa, &cpu);
    let free = pa.nr_free_pages();
    assert_eq!(pa.zone().watermark_boost(), 0, "boost outlived the allocation that set it");
    // A refill takes at most batch << 5 = 96 pages past a passing check.
    assert!(free <= min && free > min - 96, "free {free} min {min}");
}

#[test]
fn bulk_edge_cases() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    // Nothing to fill: returns the number already populated, touches nothing.
    let before = snap(&m, &pa);
    let mut full = [Some(Pfn(0x40000)); 4];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut full), 4);
    let mut empty: [Option<Pfn>; 0] = [];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut empty), 0);
    assert_eq!(snap(&m, &pa), before);
    // A partly filled array: only the None slots are filled.
    let mut arr = [None, None, None, None, None];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut arr), 5);
    let got: Vec<Pfn> = arr.iter().map(|p| p.unwrap()).collect();
    for &p in &got {
        assert_eq!(m.page(p).ext(), PageExt::Alloc(0, Migratetype::Unmovable));
        assert_eq!(m.page(p).refcount(), 1);
    }
    pa.check_invariants().unwrap();
    for p in got {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// Bad input must be refused, not corrupt state: a second `PageAllocator::boot` on one machine would
/// run `memblock_free_all` again, re-initialise the list heads the live
/// allocator uses, and free every frame a second time. It is refused, the
/// live allocator untouched.
#[test]
fn second_allocator_boot_on_one_machine_is_refused() {
    let m = boot();
    let pa = pa(&m);
    let cpu = m.cpu(0).unwrap();
    // Some pages out, some on the pcp lists, so that lists are non-trivial.
    let held: Vec<Pfn> = (0..40).map(|_| pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap()).collect();
    for &p in &held[..20] {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    drop(cpu);
    let before = snap(&m, &pa);
    let again = PageAllocator::boot(&m, AllocatorConfig::default());
    assert_eq!(again.as_ref().err(), Some(&mmlab_pcp::SysctlError::AlreadyBooted));
    drop(again);
    assert_eq!(snap(&m, &pa), before, "the refused boot changed the live allocator");
    pa.check_invariants().unwrap();
    // The live allocator still works end to end: empty every list and
    // fill them again.
    let cpu = m.cpu(0).unwrap();
    let all = exhaust(&m, &pa, &cpu);
    assert!(all.len() > 15_000, "got {}", all.len());
    for p in all.into_iter().chain(held[20..].iter().copied()) {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    pa.drain_all_pages(&cpu);
    pa.check_invariants().unwrap();
    assert_eq!(pa.nr_free_pages(), pa.managed_pages() as i64);
}

/// A boot refused because CPU 0 is busy claims nothing: the machine can
/// still get its allocator afterwards.
#[test]
fn allocator_boot_refused_for_a_busy_cpu0_leaves_the_machine_bootable() {
    let m = boot();
    let cpu0 = m.cpu(0).unwrap();
    assert_eq!(PageAllocator::boot(&m, AllocatorConfig::default()).err(), Some(mmlab_pcp::SysctlError::BootCpuBusy));
    drop(cpu0);
    let pa = pa(&m);
    assert_eq!(pa.nr_free_pages(), pa.managed_pages() as i64);
    pa.check_invariants().unwrap();
}
