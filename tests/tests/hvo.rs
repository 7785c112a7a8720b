//! The hugetlb vmemmap optimisation (mmlab-vmemmap) on booted machines.
//!
//! Checked: the pages freed per folio size against the kernel's arithmetic
//! (2M: 8 vmemmap pages, 7 saved; 32M: 128, 127; 1G: 4096, 4095; 64K: not
//! optimizable), counted both by HVO's counters and by the allocator's free
//! pages; that struct-page reads follow the remap (fake heads) and that a
//! write to a read-only tail is a permission fault; that optimize → restore
//! leaves every list consistent and loses no page (the PTE tables of PMD
//! splits stay, as in the kernel, which never re-folds the vmemmap); that a
//! restore without memory fails cleanly and leaves the folio optimized;
//! the flush and grace-period counts of single and batched calls per
//! policy; and break-before-make on arm64 per mode.

use mmlab_engine::arch::arm64::pgtable::mmu::{self, FaultKind};
use mmlab_engine::{Cpu, Gfp, Machine, MachineConfig, Pfn};
use mmlab_pcp::{AllocatorConfig, FaultAttr, PageAllocator};
use mmlab_vmemmap::folio::{destroy_compound, prep_compound, vmemmap_pages_saved};
use mmlab_vmemmap::walker::get_page_unless_zero;
use mmlab_vmemmap::{Arm64Hvo, Folio, Hvo, HvoConfig, HvoCounts, HvoError, RcuPolicy};

fn boot(mem: &str) -> Machine {
    mmlab_tests::boot(MachineConfig::with(mem, 1).unwrap().bare()).unwrap()
}

fn free_pages(pa: &PageAllocator<'_>) -> i64 {
    pa.nr_free_pages() + pa.pcp_pages()
}

fn cfg(arm64: Arm64Hvo, rcu: RcuPolicy) -> HvoConfig {
    HvoConfig { hugetlb_optimize_vmemmap: true, rcu, arm64 }
}

/// A compound folio of `order` from the page allocator (contiguous range
/// above MAX_PAGE_ORDER, as gigantic folios are).
fn alloc_folio(m: &Machine, pa: &PageAllocator<'_>, cpu: &Cpu<'_>, order: u32) -> Folio {
    let pfn = if order <= mmlab_engine::MAX_PAGE_ORDER {
        pa.try_alloc_pages(cpu, Gfp::GFP_KERNEL, order).unwrap()
    } else {
        pa.alloc_contig_pages(cpu, 1 << order, Gfp::GFP_KERNEL).unwrap()
    };
    let f = Folio::new(m, pfn, order).unwrap();
    prep_compound(m, f).unwrap();
    f
}

fn free_folio(m: &Machine, pa: &PageAllocator<'_>, cpu: &Cpu<'_>, f: Folio) {
    destroy_compound(m, f).unwrap();
    if f.order <= mmlab_engine::MAX_PAGE_ORDER {
        pa.free_pages(cpu, f.pfn, f.order).unwrap();
    } else {
        pa.free_contig_range(cpu, f.pfn, f.nr_pages()).unwrap();
    }
}

/// Optimize one folio of `order` on a fresh machine of `mem`; check the
/// pages freed; restore and free it; check nothing was lost.
fn round_trip(mem: &str, order: u32) -> HvoCounts {
    let m = boot(mem);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let hvo = Hvo::new(&pa, cfg(Arm64Hvo::PauseCpus, RcuPolicy::V6_12));
    let boot_free = free_pages(&pa);
    let f = alloc_folio(&m, &pa, &cpu, order);
    let before = free_pages(&pa);
    let managed = pa.managed_pages();

    let optimized = hvo.hugetlb_vmemmap_optimize_folio(&cpu, f).unwrap();
    let c = hvo.counts();
    let saved = vmemmap_pages_saved(order);
    assert_eq!(optimized, saved > 0, "order {order}");
    assert_eq!(c.vmemmap_pages_freed - c.vmemmap_pages_allocated, saved, "order {order}: {c:?}");
    // The allocator sees the pages saved, less the PTE tables of the splits.
    assert_eq!(free_pages(&pa) - before, saved as i64 - c.vmemmap_pmd_splits as i64, "order {order}");
    // Boot memmap pages join the managed pages.
    assert_eq!(pa.managed_pages() - managed, c.vmemmap_boot_pages_freed);
    pa.check_invariants().unwrap();

    hvo.hugetlb_vmemmap_restore_folio(&cpu, f).unwrap();
    assert!(!f.test_vmemmap_optimized(&m));
    assert_eq!(hvo.nr_optimized(), 0);
    pa.check_invariants().unwrap();
    let c = hvo.counts();
    assert_eq!(free_pages(&pa) + c.vmemmap_pmd_splits as i64, before, "order {order}: {c:?}");
    free_folio(&m, &pa, &cpu, f);
    pa.check_invariants().unwrap();
    assert_eq!(free_pages(&pa) + c.vmemmap_pmd_splits as i64, boot_free, "order {order}");
    c
}

/// 64K: 16 struct pages, a quarter of a vmemmap page: not optimizable.
#[test]
fn folio_64k_is_not_optimizable() {
    let c = round_trip("64M", 4);
    assert_eq!(c, HvoCounts::default());
}

/// 2M on a 64M machine (a partial section: the memmap is PTE-mapped): 8
/// vmemmap pages freed, 1 fresh head allocated, 7 saved, no split; the
/// restore allocates the 7 back.
#[test]
fn folio_2m_pte_mapped_vmemmap() {
    let c = round_trip("64M", 9);
    assert_eq!((c.vmemmap_pages_freed, c.vmemmap_boot_pages_freed), (8, 8), "{c:?}");
    assert_eq!(c.vmemmap_pages_allocated, 1 + 7);
    assert_eq!((c.vmemmap_pmd_splits, c.folios_optimized, c.folios_restored), (0, 1, 1));
    assert_eq!(c.synchronize_rcu, 2, "one grace period per single-folio call (6.12)");
}

/// 2M on a 256M machine (whole sections: the memmap is PMD-mapped): the
/// first optimization splits the block (one PTE table page kept).
#[test]
fn folio_2m_pmd_mapped_vmemmap() {
    let c = round_trip("256M", 9);
    assert_eq!((c.vmemmap_pages_freed, c.vmemmap_pmd_splits), (8, 1), "{c:?}");
    // PauseCpus: 1 PMD and 8 PTEs rewritten with break-before-make, then 7
    // PTEs restored; every generic flush is the RFC's no-op.
    assert_eq!(c.remote_cpu_pauses, 1 + 8 + 7);
    assert_eq!(c.flush_tlb_kernel_range_bbm, c.remote_cpu_pauses);
    assert_eq!(c.flush_tlb_kernel_range_remap + c.flush_tlb_kernel_range_split + c.flush_tlb_all, 0);
}

/// 32M (order 13, contiguous range): 128 vmemmap pages, 127 saved.
#[test]
fn folio_32m() {
    let c = round_trip("256M", 13);
    assert_eq!((c.vmemmap_pages_freed, c.vmemmap_pages_allocated), (128, 1 + 127), "{c:?}");
}

/// 1G (order 18): 4096 vmemmap pages over 8 PMD blocks (8 splits), 4095
/// saved.
#[test]
fn folio_1g() {
    let c = round_trip("2G", 18);
    assert_eq!((c.vmemmap_pages_freed, c.vmemmap_pmd_splits), (4096, 8), "{c:?}");
    assert_eq!(c.vmemmap_pages_allocated, 1 + 4095);
}

/// Struct-page reads follow the remap; a write to a read-only tail faults.
#[test]
fn tails_read_the_head_copy_and_are_read_only() {
    let m = boot("256M");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let hvo = Hvo::new(&pa, cfg(Arm64Hvo::PauseCpus, RcuPolicy::V6_12));
    let f = alloc_folio(&m, &pa, &cpu, 9);
    let tail = f.pfn.add(64);
    let head_flags = m.page(f.pfn).flags();
    assert!(hvo.hugetlb_vmemmap_optimize_folio(&cpu, f).unwrap());
    // The struct-page accessor now reads the head's copy at the first
    // struct page of each tail vmemmap page: a fake head.
    assert_eq!(m.page(tail).flags(), head_flags);
    assert_eq!(m.memmap().page_fixed_fake_head(tail), f.pfn);
    assert_eq!(m.memmap().page_fixed_fake_head(f.pfn), f.pfn);
    // A kernel write through the vmemmap is a permission fault.
    let va = m.memmap().page_va(tail.add(1)) + 52;
    let e = mmu::write_u64(&cpu, &m.kernel_as(), va & !7, 0).unwrap_err();
    assert!(matches!(e.kind, FaultKind::Permission { .. }), "{e}");
    // The head stays writable; a walker skips fake heads and zero counts.
    mmu::write_u64(&cpu, &m.kernel_as(), m.memmap().page_va(f.pfn) + 24, 0).unwrap();
    assert_eq!(get_page_unless_zero(&cpu, &m, tail), Ok(false));
    assert_eq!(get_page_unless_zero(&cpu, &m, tail.add(1)), Ok(false));
    hvo.hugetlb_vmemmap_restore_folio(&cpu, f).unwrap();
    // Restored tails read as plain tails again, and are writable.
    assert!(!m.page(tail).test_flag(mmlab_engine::mm::page::pg::PG_HEAD));
    assert_eq!(m.page(tail).lru_next(), m.memmap().page_va(f.pfn) | 1);
    mmu::write_u64(&cpu, &m.kernel_as(), va & !7, 0).unwrap();
    free_folio(&m, &pa, &cpu, f);
    pa.check_invariants().unwrap();
}

/// A restore that cannot allocate its pages fails with ENOMEM, leaves the
/// folio optimized and every list consistent; it succeeds once memory is
/// back.
#[test]
fn restore_without_memory_leaves_the_folio_optimized() {
    let m = boot("64M");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let hvo = Hvo::new(&pa, cfg(Arm64Hvo::PauseCpus, RcuPolicy::V6_12));
    let f = alloc_folio(&m, &pa, &cpu, 9);
    assert!(hvo.hugetlb_vmemmap_optimize_folio(&cpu, f).unwrap());
    let free = free_pages(&pa);
    // Fail the 4th page allocation from now on: 3 pages are taken and given back.
    let attr = FaultAttr {
        probability: 100,
        interval: 1,
        times: -1,
        space: 3,
        min_order: 0,
        ignore_gfp_reclaim: false,
        ..FaultAttr::default()
    };
    pa.set_fail_page_alloc(Some(attr)).unwrap();
    assert_eq!(hvo.hugetlb_vmemmap_restore_folio(&cpu, f), Err(HvoError::NoMemory));
    assert!(pa.fail_page_alloc_injected() > 0);
    assert!(f.test_vmemmap_optimized(&m));
    assert_eq!(hvo.nr_optimized(), 1);
    assert_eq!(free_pages(&pa), free, "the partial page list was given back");
    assert_eq!(hvo.counts().restore_enomem, 1);
    pa.check_invariants().unwrap();
    // The batch reports the failure and keeps the folio on the input list.
    let (mut list, mut done) = (vec![f], Vec::new());
    assert_eq!(hvo.hugetlb_vmemmap_restore_folios(&cpu, &mut list, &mut done), Err(HvoError::NoMemory));
    assert_eq!((list.len(), done.len()), (1, 0));
    pa.set_fail_page_alloc(None).unwrap();
    assert_eq!(hvo.hugetlb_vmemmap_restore_folios(&cpu, &mut list, &mut done), Ok(1));
    assert_eq!((list.len(), done.len()), (0, 1));
    free_folio(&m, &pa, &cpu, f);
    pa.check_invariants().unwrap();
}

/// Optimize and restore `n` 2M folios in one batch each under `rcu`; the
/// counters of each phase.
fn batch(rcu: RcuPolicy, n: usize) -> (HvoCounts, HvoCounts) {
    let m = boot("256M");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let hvo = Hvo::new(&pa, cfg(Arm64Hvo::Unsafe, rcu));
    let folios: Vec<Folio> = (0..n).map(|_| alloc_folio(&m, &pa, &cpu, 9)).collect();
    let before = free_pages(&pa);
    hvo.hugetlb_vmemmap_optimize_folios(&cpu, &folios).unwrap();
    let opt = hvo.counts();
    assert_eq!(opt.folios_optimized, n as u64);
    assert_eq!(free_pages(&pa) - before, 7 * n as i64 - opt.vmemmap_pmd_splits as i64);
    pa.check_invariants().unwrap();
    let (mut list, mut done) = (folios.clone(), Vec::new());
    assert_eq!(hvo.hugetlb_vmemmap_restore_folios(&cpu, &mut list, &mut done), Ok(n));
    assert_eq!(done, folios);
    let all = hvo.counts();
    assert_eq!(free_pages(&pa) + all.vmemmap_pmd_splits as i64, before);
    for f in folios {
        free_folio(&m, &pa, &cpu, f);
    }
    pa.check_invariants().unwrap();
    (opt, all.delta(&opt))
}

/// The batch's flushes and grace periods, by kernel release.
#[test]
fn batched_flushes_and_grace_periods_per_policy() {
    // 6.12: one grace period per batch; split flush + remap flush = 2
    // flush_tlb_all, no per-folio range flush; restore: 1 + 1.
    let (o, r) = batch(RcuPolicy::V6_12, 4);
    assert_eq!((o.synchronize_rcu, o.flush_tlb_all, o.flush_tlb_kernel_range_remap), (1, 2, 0), "{o:?}");
    assert_eq!(o.flush_tlb_kernel_range_split, 0);
    assert_eq!((r.synchronize_rcu, r.flush_tlb_all, r.flush_tlb_kernel_range_remap), (1, 1, 0), "{r:?}");
    // 6.11: one unconditional grace period per batch as well.
    let (o, r) = batch(RcuPolicy::V6_11, 4);
    assert_eq!((o.synchronize_rcu, r.synchronize_rcu), (1, 1));
    // The draft's typo: the grace period stays on and the deferred flush is
    // lost after the first folio: one each per folio from then on.
    let (o, r) = batch(RcuPolicy::V6_12Draft, 4);
    assert_eq!((o.synchronize_rcu, o.flush_tlb_kernel_range_remap), (4, 3), "{o:?}");
    assert_eq!((r.synchronize_rcu, r.flush_tlb_kernel_range_remap), (4, 3), "{r:?}");
    // Before the race fix and after fake heads went: none.
    let (o, r) = batch(RcuPolicy::V6_10, 4);
    assert_eq!((o.synchronize_rcu, r.synchronize_rcu), (0, 0));
    let (o, _) = batch(RcuPolicy::NoFakeHeads, 2);
    assert_eq!(o.synchronize_rcu, 0);
}

/// 6.11 waited for a grace period even where nothing was remapped (HVO
/// off: the surplus-page regression); 6.12 does not.
#[test]
fn grace_period_without_hvo_only_in_6_11() {
    for (rcu, expect) in [(RcuPolicy::V6_11, 2), (RcuPolicy::V6_12, 0)] {
        let m = boot("64M");
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let cpu = m.cpu(0).unwrap();
        let mut c = cfg(Arm64Hvo::PauseCpus, rcu);
        c.hugetlb_optimize_vmemmap = false;
        let hvo = Hvo::new(&pa, c);
        let f = alloc_folio(&m, &pa, &cpu, 9);
        assert!(!hvo.hugetlb_vmemmap_optimize_folio(&cpu, f).unwrap());
        hvo.hugetlb_vmemmap_restore_folio(&cpu, f).unwrap();
        assert_eq!(hvo.counts().synchronize_rcu, expect, "{rcu:?}");
        assert_eq!(hvo.counts().vmemmap_pages_freed, 0);
    }
}

/// arm64: off as in mainline (nothing remapped); unsafe remaps live entries
/// and the break-before-make checker reports each; pause does them safely.
#[test]
fn break_before_make_on_arm64() {
    for (mode, violations) in [(Arm64Hvo::Off, 0), (Arm64Hvo::Unsafe, 1 + 8 + 7), (Arm64Hvo::PauseCpus, 0)] {
        let m = boot("256M");
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let cpu = m.cpu(0).unwrap();
        let hvo = Hvo::new(&pa, cfg(mode, RcuPolicy::V6_12));
        let f = alloc_folio(&m, &pa, &cpu, 9);
        assert_eq!(hvo.hugetlb_vmemmap_optimize_folio(&cpu, f).unwrap(), mode != Arm64Hvo::Off);
        hvo.hugetlb_vmemmap_restore_folio(&cpu, f).unwrap();
        let c = hvo.counts();
        assert_eq!(c.bbm_violations, violations, "{mode:?}: {c:?}");
        let v = hvo.bbm_violations();
        assert_eq!(v.len() as u64, violations);
        if mode == Arm64Hvo::Unsafe {
            // The PMD block -> table split, then the head PTE to the fresh page.
            assert_eq!(v[0].level, mmlab_engine::arch::arm64::pgtable::Level::Pmd);
            assert_eq!(v[1].va, m.memmap().page_va(f.pfn));
            assert_eq!((c.flush_tlb_kernel_range_split, c.flush_tlb_kernel_range_remap), (1, 2));
        }
        free_folio(&m, &pa, &cpu, f);
        pa.check_invariants().unwrap();
    }
}

/// Bad folios are typed errors.
#[test]
fn bad_folios_are_errors() {
    let m = boot("64M");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let hvo = Hvo::new(&pa, cfg(Arm64Hvo::PauseCpus, RcuPolicy::V6_12));
    assert!(Folio::new(&m, Pfn(1), 9).is_err());
    let bad = Folio { pfn: Pfn(u64::MAX >> 20), order: 9 };
    assert!(matches!(hvo.hugetlb_vmemmap_optimize_folio(&cpu, bad), Err(HvoError::Folio(_))));
    assert!(matches!(hvo.hugetlb_vmemmap_restore_folio(&cpu, bad), Err(HvoError::Folio(_))));
    assert!(hvo.hugetlb_vmemmap_optimize_folios(&cpu, &[bad]).is_err());
    assert_eq!(hvo.counts(), HvoCounts::default());
    pa.check_invariants().unwrap();
}
