//! hugetlb pools (mmlab-hugetlb) on booted machines.
//!
//! Checked: a write of N to `nr_hugepages` and back to 0, with HVO off and
//! on (arm64 with remote CPUs paused), leaves the counters exact at each
//! step (`nr_huge_pages` = `free_huge_pages` = N, then 0), gives every page
//! back (the allocator's free pages equal those before, less the PTE tables
//! of vmemmap PMD splits, which the kernel keeps) and keeps the allocator's
//! invariants; with HVO off only the batch's two `flush_tlb_all` reach the
//! vmemmap code; HVO frees 7 vmemmap pages per 2 MiB folio in one batch per
//! write; a count beyond memory stops where the allocator runs out, reads
//! back what it reached, and still shrinks to 0 without a loss.

use mmlab_engine::{Machine, MachineConfig};
use mmlab_hugetlb::{HUGETLB_PAGE_ORDER, Hugetlb, HugetlbConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::{Arm64Hvo, HvoConfig, RcuPolicy};

fn boot(mem: &str) -> Machine {
    Machine::boot(MachineConfig::with(mem, 1).unwrap()).unwrap()
}

fn free_pages(pa: &PageAllocator<'_>) -> i64 {
    pa.zone().nr_free_pages() + pa.pcp_pages()
}

fn cfg(hvo_on: bool) -> HugetlbConfig {
    HugetlbConfig::with_hvo(HvoConfig {
        hugetlb_optimize_vmemmap: hvo_on,
        rcu: RcuPolicy::V6_12,
        arm64: if hvo_on { Arm64Hvo::PauseCpus } else { Arm64Hvo::Off },
    })
}

/// Grow to `n`, check, shrink to 0, check nothing was lost.
fn round_trip(mem: &str, n: u64, hvo_on: bool) {
    let m = boot(mem);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let mut ht = Hugetlb::new(&pa, cfg(hvo_on));
    let before = free_pages(&pa);

    assert_eq!(ht.set_max_huge_pages(&cpu, n).unwrap(), n);
    let h = ht.hstate();
    assert_eq!((h.nr_huge_pages, h.free_huge_pages, h.surplus_huge_pages, h.resv_huge_pages), (n, n, 0, 0));
    assert_eq!(h.max_huge_pages, n);
    assert_eq!(h.free_folios().count() as u64, n);
    assert!(h.free_folios().all(|f| f.order == HUGETLB_PAGE_ORDER));
    let c = ht.hvo().counts();
    let saved = if hvo_on { 7 * n } else { 0 };
    assert_eq!(c.folios_optimized, if hvo_on { n } else { 0 }, "{c:?}");
    assert_eq!(c.vmemmap_pages_freed - c.vmemmap_pages_allocated, saved, "{c:?}");
    assert_eq!(
        free_pages(&pa),
        before - (n << HUGETLB_PAGE_ORDER) as i64 + saved as i64 - c.vmemmap_pmd_splits as i64,
        "{c:?}"
    );
    pa.check_invariants().unwrap();
    let hc = ht.counts();
    assert_eq!((hc.pool_folios_allocated, hc.prep_and_add_batches, hc.pool_alloc_failures), (n, 1, 0));

    assert_eq!(ht.set_max_huge_pages(&cpu, 0).unwrap(), 0);
    let h = ht.hstate();
    assert_eq!((h.nr_huge_pages, h.free_huge_pages, h.surplus_huge_pages, h.max_huge_pages), (0, 0, 0, 0));
    let c = ht.hvo().counts();
    assert_eq!(c.folios_restored, if hvo_on { n } else { 0 });
    assert_eq!(ht.hvo().nr_optimized(), 0);
    assert_eq!((ht.counts().pool_folios_freed, ht.counts().free_bulk_batches), (n, 1));
    pa.check_invariants().unwrap();
    assert_eq!(free_pages(&pa) + c.vmemmap_pmd_splits as i64, before, "every page back: {c:?}");
    if !hvo_on {
        // hugetlb_vmemmap_optimize_folios() still flushes twice per batch,
        // as in 6.12; nothing else happens to the vmemmap.
        assert_eq!(c.flush_tlb_all, 2, "{c:?}");
        let mut rest = c;
        rest.flush_tlb_all = 0;
        assert_eq!(rest, Default::default(), "HVO off touches no vmemmap");
    }
}

#[test]
fn grow_and_shrink_hvo_off() {
    round_trip("256M", 16, false);
}

#[test]
fn grow_and_shrink_hvo_on() {
    round_trip("256M", 16, true);
}

/// A partial section: the memmap is PTE-mapped, so HVO splits nothing and
/// the free pages come back exactly.
#[test]
fn grow_and_shrink_hvo_on_pte_mapped_vmemmap() {
    round_trip("64M", 8, true);
}

/// Growing in two writes and shrinking in two: counters exact at each step.
#[test]
fn partial_grow_and_shrink() {
    let m = boot("256M");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let mut ht = Hugetlb::new(&pa, cfg(true));
    let before = free_pages(&pa);
    for (count, batches) in [(4, 1), (10, 2), (6, 2), (0, 2)] {
        assert_eq!(ht.set_max_huge_pages(&cpu, count).unwrap(), count);
        let h = ht.hstate();
        assert_eq!((h.nr_huge_pages, h.free_huge_pages), (count, count));
        assert_eq!(ht.counts().prep_and_add_batches, batches);
        pa.check_invariants().unwrap();
    }
    assert_eq!(ht.counts().free_bulk_batches, 2);
    assert_eq!(free_pages(&pa) + ht.hvo().counts().vmemmap_pmd_splits as i64, before);
}

/// More pages than memory: the pool grows as far as it can, the write
/// succeeds, `nr_hugepages` reads back what it reached; nothing is lost.
#[test]
fn count_beyond_memory_stops_at_what_fits() {
    for hvo_on in [false, true] {
        let m = boot("64M");
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let cpu = m.cpu(0).unwrap();
        let mut ht = Hugetlb::new(&pa, cfg(hvo_on));
        let before = free_pages(&pa);
        let reached = ht.set_max_huge_pages(&cpu, 1000).unwrap();
        assert!(reached > 0 && reached < 32, "64M holds fewer than 32 x 2M: {reached}");
        let h = ht.hstate();
        assert_eq!((h.nr_huge_pages, h.free_huge_pages, h.max_huge_pages), (reached, reached, reached));
        assert_eq!(ht.counts().pool_alloc_failures, 1, "the first failure ends the write");
        assert_eq!(ht.counts().pool_folios_allocated, reached);
        pa.check_invariants().unwrap();
        // Asking again for the same: one more try, same result.
        assert_eq!(ht.set_max_huge_pages(&cpu, 1000).unwrap(), reached);
        assert_eq!(ht.set_max_huge_pages(&cpu, 0).unwrap(), 0);
        pa.check_invariants().unwrap();
        assert_eq!(free_pages(&pa) + ht.hvo().counts().vmemmap_pmd_splits as i64, before, "hvo {hvo_on}");
    }
}

/// `hugepages=` at init, and its knob.
#[test]
fn boot_parameter() {
    let m = boot("64M");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let mut c = cfg(false);
    c.set("hugepages", "3").unwrap();
    let mut ht = Hugetlb::new(&pa, c);
    assert_eq!(ht.hugetlb_init(&cpu).unwrap(), [0, 3, 0, 0]);
    assert_eq!(ht.hstate().name(), "hugepages-2048kB");
    assert_eq!(ht.set_max_huge_pages(&cpu, 0).unwrap(), 0);
    pa.check_invariants().unwrap();
}
