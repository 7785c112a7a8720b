//! Gigantic hugetlb folios (32M, 1G) allocated and freed as Linux 6.11 and
//! 6.12 do (`hugetlb.gigantic`), on booted machines.
//!
//! Checked, per release: `nr_hugepages` of the size reads back the count
//! written, then 0; every frame comes back (buddyinfo after a pcp drain is
//! the post-boot one, HVO off) and the allocator's invariants hold; and the
//! work each release does, counted: the same contiguous-range search in
//! both (`pfn_range_valid_contig` reads each struct page of a candidate),
//! but 6.11 prepares every frame as an order-0 page, freezes every page's
//! reference, and frees page by page through `free_contig_range` (one
//! order-0 free per frame, via the pcp lists), where 6.12 prepares only the
//! head (`__GFP_COMP`) and frees the folio with one `folio_put`, given back
//! one pageblock (order 9) at a time. Those per-page counts are what the
//! published 700 x 1G timings (alloc 13.5 s -> 10.6 s, free 11.3 s ->
//! 1.5 s; seeds.md §4) come from.

use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Machine, MachineConfig};
use mmlab_hugetlb::{GiganticAlloc, HugePageSize, Hugetlb, HugetlbConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::{Arm64Hvo, HvoConfig, RcuPolicy};

fn boot(mem: &str) -> Machine {
    mmlab_tests::boot(MachineConfig::with(mem, 1).unwrap().bare()).unwrap()
}

fn cfg(gigantic: GiganticAlloc, hvo_on: bool) -> HugetlbConfig {
    let mut c = HugetlbConfig::with_hvo(HvoConfig {
        hugetlb_optimize_vmemmap: hvo_on,
        rcu: RcuPolicy::V6_12,
        // Built in (as LKP's kernels), on or off by the sysctl.
        arm64: Arm64Hvo::PauseCpus,
    });
    c.gigantic = gigantic;
    c
}

/// What one grow-then-shrink did.
struct Trip {
    counts: mmlab_hugetlb::HugetlbCounts,
    scan: mmlab_buddy::ContigScan,
    /// Zone-lock acquisitions, pcp drains and buddy merges while shrinking.
    free_zone_locks: u64,
    free_pcp_drain_pages: u64,
    free_one_page_pages: u64,
}

/// Grow `size` to `n` and back to 0 under `gigantic`, HVO off; check the
/// counters at each step and that buddyinfo is the post-boot one after.
fn round_trip(mem: &str, size: HugePageSize, n: u64, gigantic: GiganticAlloc) -> Trip {
    let m = boot(mem);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let boot_info = pa.zone().nr_free_per_order();
    let boot_free = pa.nr_free_pages();
    let mut ht = Hugetlb::new(&pa, cfg(gigantic, false));
    assert_eq!(ht.set_max_huge_pages_of(&cpu, size, n).unwrap(), n);
    let h = ht.hstate_of(size);
    assert_eq!((h.nr_huge_pages, h.free_huge_pages, h.max_huge_pages), (n, n, n));
    assert!(h.free_folios().all(|f| f.order == size.order() && f.pfn.0 % f.nr_pages() == 0));
    assert_eq!(pa.nr_free_pages(), boot_free - (n << size.order()) as i64);
    pa.check_invariants().unwrap();
    let ev = |e| m.vm_events().get(e);
    let (locks0, drain0, fop0) =
        (ev(VmEvent::ZoneLockAcquire), ev(VmEvent::PcpDrainPages), ev(VmEvent::FreeOnePagePages));
    assert_eq!(ht.set_max_huge_pages_of(&cpu, size, 0).unwrap(), 0);
    let trip = Trip {
        counts: ht.counts(),
        scan: ht.contig_scan(),
        free_zone_locks: ev(VmEvent::ZoneLockAcquire) - locks0,
        free_pcp_drain_pages: ev(VmEvent::PcpDrainPages) - drain0,
        free_one_page_pages: ev(VmEvent::FreeOnePagePages) - fop0,
    };
    let h = ht.hstate_of(size);
    assert_eq!((h.nr_huge_pages, h.free_huge_pages, h.max_huge_pages), (0, 0, 0));
    pa.check_invariants().unwrap();
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.nr_free_pages(), boot_free, "every frame back");
    assert_eq!(pa.zone().nr_free_per_order(), boot_info, "buddyinfo as after boot");
    trip
}

/// The per-page work of each release for `n` folios of `size`.
fn check_work(size: HugePageSize, n: u64) {
    let pages = n << size.order();
    let tails = pages - n;
    let old = round_trip(if size == HugePageSize::Pud1G { "2G" } else { "256M" }, size, n, GiganticAlloc::V6_11);
    let new = round_trip(if size == HugePageSize::Pud1G { "2G" } else { "256M" }, size, n, GiganticAlloc::V6_12);
    for t in [&old, &new] {
        let (c, s) = (t.counts, t.scan);
        assert_eq!((c.gigantic_folios_allocated, c.gigantic_folios_freed), (n, n));
        // The same search: each allocation starts at the zone start, reads
        // the head of every folio taken before (PageHuge: skip), then every
        // frame of the free range it takes; free blocks of MAX_PAGE_ORDER
        // are taken, nothing outside the range.
        assert_eq!((s.ranges_allocated, s.ranges_tried, s.ranges_busy, s.pages_given_back), (n, n, 0, 0), "{s:?}");
        assert_eq!(s.ranges_scanned, n * (n + 1) / 2, "{s:?}");
        assert_eq!(s.pages_scanned, pages + n * (n - 1) / 2, "{s:?}");
        assert_eq!(s.blocks_taken, pages >> 10, "{s:?}");
        // Tails are pointed at the head and cleared again in both.
        assert_eq!((c.compound_tails_prepped, c.compound_tails_cleared), (tails, tails));
    }
    // 6.11: every frame prepared as an order-0 page, every reference frozen
    // and given back, every frame freed alone through the pcp lists.
    let (c, s) = (old.counts, old.scan);
    assert_eq!(s.pages_prepped, pages);
    assert_eq!((c.gigantic_refs_frozen, c.gigantic_refs_unfrozen), (pages, tails));
    assert_eq!((c.contig_order0_frees, c.gigantic_folio_puts), (pages, 0));
    assert!(old.free_pcp_drain_pages > pages / 2, "the pcp lists fill and drain: {}", old.free_pcp_drain_pages);
    // 6.12: the head alone, one folio_put per folio, given back in
    // pageblocks under one zone-lock hold each folio.
    let (c, s) = (new.counts, new.scan);
    assert_eq!(s.pages_prepped, n);
    assert_eq!((c.gigantic_refs_frozen, c.gigantic_refs_unfrozen), (0, 0));
    assert_eq!((c.contig_order0_frees, c.gigantic_folio_puts), (0, n));
    assert_eq!(new.free_one_page_pages, pages);
    assert_eq!(new.free_pcp_drain_pages, 0);
    assert!(new.free_zone_locks <= n + 1, "{}", new.free_zone_locks);
    assert!(old.free_zone_locks > 10 * new.free_zone_locks, "{} vs {}", old.free_zone_locks, new.free_zone_locks);
}

#[test]
fn one_gig_per_release() {
    check_work(HugePageSize::Pud1G, 1);
}

#[test]
fn thirty_two_meg_per_release() {
    check_work(HugePageSize::ContPmd32M, 4);
}

/// With HVO on (arm64 with remote CPUs paused): 4095 vmemmap pages saved
/// per 1G folio whichever release allocated it, and all come back.
#[test]
fn one_gig_with_hvo() {
    for g in [GiganticAlloc::V6_11, GiganticAlloc::V6_12] {
        let m = boot("2G");
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let cpu = m.cpu(0).unwrap();
        let before = pa.nr_free_pages() + pa.pcp_pages();
        let mut ht = Hugetlb::new(&pa, cfg(g, true));
        assert_eq!(ht.set_max_huge_pages_of(&cpu, HugePageSize::Pud1G, 1).unwrap(), 1);
        let c = ht.hvo().counts();
        assert_eq!((c.folios_optimized, c.vmemmap_pages_freed - c.vmemmap_pages_allocated), (1, 4095), "{c:?}");
        pa.check_invariants().unwrap();
        assert_eq!(ht.set_max_huge_pages_of(&cpu, HugePageSize::Pud1G, 0).unwrap(), 0);
        let c = ht.hvo().counts();
        assert_eq!(c.folios_restored, 1);
        pa.check_invariants().unwrap();
        assert_eq!(pa.nr_free_pages() + pa.pcp_pages() + c.vmemmap_pmd_splits as i64, before, "{g:?}");
    }
}

/// A 2G machine holds one 1G range (the memmap and tables sit at the top
/// of the second): asking for 3 reaches 1, reads it back, and the search
/// is counted; the knob names the releases.
#[test]
fn one_gig_beyond_memory() {
    let m = boot("2G");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let mut c = HugetlbConfig::default();
    c.set("hugetlb.gigantic", "v6.11").unwrap();
    c.set("hugetlb_optimize_vmemmap", "off").unwrap();
    assert_eq!(c.gigantic.name(), "v6.11");
    let mut ht = Hugetlb::new(&pa, c);
    assert_eq!(ht.set_max_huge_pages_of(&cpu, HugePageSize::Pud1G, 3).unwrap(), 1);
    assert_eq!(ht.counts().pool_alloc_failures, 1);
    let s = ht.contig_scan();
    // First search: 0x40000, every frame read, taken. Second: 0x40000 is a
    // huge page (one read), 0x80000 runs into the memmap and page tables
    // at the top of RAM (read up to the first reserved frame); no try.
    assert_eq!((s.ranges_scanned, s.ranges_tried, s.ranges_allocated), (3, 1, 1), "{s:?}");
    let first_reserved = (0x80000..0xc0000)
        .find(|&p| m.page(mmlab_engine::Pfn(p)).ext() == mmlab_engine::mm::page::PageExt::Reserved)
        .unwrap();
    assert_eq!(s.pages_scanned, (1 << 18) + 1 + (first_reserved - 0x80000 + 1), "{s:?}");
    assert_eq!(ht.set_max_huge_pages_of(&cpu, HugePageSize::Pud1G, 0).unwrap(), 0);
    pa.check_invariants().unwrap();
}
