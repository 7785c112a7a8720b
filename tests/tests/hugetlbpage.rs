//! arm64 huge PTEs in a user address space (mmlab_hugetlb::hugetlbpage,
//! arch/arm64/mm/hugetlbpage.c).
//!
//! Checked: one huge page of each size (64K contpte, 2M PMD block, 32M
//! contiguous PMDs, 1G PUD block) mapped into a user address space, walked
//! through the MMU model (every offset tried lands in the folio, one TLB
//! entry's span is the huge page), found again by `huge_pte_offset`, then
//! unmapped with `huge_ptep_clear_flush`; the TLBIs of each step by kind, per
//! size, with 6.12's and 6.16's flush scope and with and without range
//! TLBIs; `flush_hugetlb_tlb_range()` per size and release; the break-before-make checker never refuses a write of these
//! paths, and does refuse a live remap done without the break; a clear
//! without flush leaves a stale translation until the flush; every table
//! and page is given back.

use mmlab_engine::arch::arm64::pgtable::desc::bits::{PTE_AF, PTE_DIRTY, PTE_RDONLY};
use mmlab_engine::arch::arm64::pgtable::desc::{CONT_PMD_SIZE, CONT_PTE_SIZE, PAGE_SHARED, PMD_SIZE, PUD_SIZE};
use mmlab_engine::arch::arm64::pgtable::mmu::{self, Access, FaultKind};
use mmlab_engine::arch::arm64::pgtable::{self, AddressSpace, PgtableError, TableMemory};
use mmlab_engine::arch::arm64::tlb::TlbiKind;
use mmlab_engine::{Cpu, Gfp, Machine, MachineConfig, Pfn, PhysAddr};
use mmlab_hugetlb::hugetlbpage::{
    HugePteError, HugeTlbScope, arch_make_huge_pte, flush_hugetlb_tlb_range, free_pgtables, huge_pte_alloc,
    huge_pte_offset, huge_ptep_clear_flush, huge_ptep_get, huge_ptep_get_and_clear, num_contig_ptes, set_huge_pte_at,
};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

const USER: Access = Access { write: true, user: true };
const SIZES: [(u64, u32); 4] = [(CONT_PTE_SIZE, 4), (PMD_SIZE, 9), (CONT_PMD_SIZE, 13), (PUD_SIZE, 18)];

fn boot(tlbi_range: bool) -> Machine {
    let mut cfg = MachineConfig::with("2G", 1).unwrap().bare();
    cfg.tlbi_range = Some(tlbi_range);
    mmlab_tests::boot(cfg).unwrap()
}

fn free_pages(pa: &PageAllocator<'_>) -> i64 {
    pa.nr_free_pages() + pa.pcp_pages()
}

fn alloc_huge(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, order: u32) -> Pfn {
    if order <= mmlab_engine::MAX_PAGE_ORDER {
        pa.try_alloc_pages(cpu, Gfp::GFP_HIGHUSER_MOVABLE, order).unwrap()
    } else {
        pa.alloc_contig_pages(cpu, 1 << order, Gfp::GFP_HIGHUSER_MOVABLE).unwrap()
    }
}

fn free_huge(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, pfn: Pfn, order: u32) {
    if order <= mmlab_engine::MAX_PAGE_ORDER {
        pa.free_pages(cpu, pfn, order).unwrap();
    } else {
        pa.free_contig_range(cpu, pfn, 1 << order).unwrap();
    }
}

/// The TLBIs since `before`, as (kind, count), non-zero only.
fn tlbis_since(m: &Machine, before: &mmlab_engine::arch::arm64::tlb::TlbiCounts) -> Vec<(&'static str, u64)> {
    let now = m.tlbi_counts();
    TlbiKind::ALL.into_iter().map(|k| (k.name(), now.get(k) - before.get(k))).filter(|&(_, n)| n != 0).collect()
}

/// The user address the huge page of size index `i` is mapped at.
fn user_addr(i: usize) -> u64 {
    (i as u64 + 1) << 32
}

/// Map one page of each size, walk it, unmap it; the TLBIs of the map and
/// of the unmap for each size.
type Tlbis = Vec<(&'static str, u64)>;
fn map_walk_unmap(tlbi_range: bool, scope: HugeTlbScope) -> Vec<(Tlbis, Tlbis)> {
    let m = boot(tlbi_range);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let before = free_pages(&pa);
    // The folios first, the gigantic one before anything fragments memory.
    let pfns: Vec<Pfn> = SIZES.iter().rev().map(|&(_, order)| alloc_huge(&pa, &cpu, order)).collect();
    let asp = AddressSpace::alloc_user(&cpu, &pa, 7).unwrap();
    let mut out = Vec::new();
    for (i, (size, order)) in SIZES.into_iter().enumerate() {
        let pfn = pfns[SIZES.len() - 1 - i];
        let addr = user_addr(i);
        let ptep = huge_pte_alloc(&cpu, &asp, &pa, addr, size).unwrap();
        let pte = arch_make_huge_pte(pfn.phys().0, PAGE_SHARED, size).unwrap();
        let t0 = m.tlbi_counts();
        set_huge_pte_at(&cpu, &asp, addr, ptep, pte, size, scope).unwrap();
        let map = tlbis_since(&m, &t0);
        // Through the MMU model: each offset lands in the folio; the leaf
        // covers the whole huge page (one TLB entry).
        for off in [0, 4096 + 24, size / 2 + 8, size - 8] {
            let got = mmu::translate(&cpu, &asp, addr + off, USER).unwrap();
            assert_eq!(got.0, pfn.phys().0 + off, "size {size:#x} offset {off:#x}");
            assert_eq!(huge_pte_offset(&m, &asp, addr + off, size), Some(ptep), "size {size:#x}");
        }
        let leaf = pgtable::walk(&m, &asp, addr + size - 1).leaf.unwrap();
        assert_eq!(leaf.span(), size);
        assert_eq!(huge_ptep_get(&m, ptep, size).addr(), pfn.phys().0);
        let t0 = m.tlbi_counts();
        let old = huge_ptep_clear_flush(&cpu, &asp, addr, ptep, size, scope).unwrap();
        let unmap = tlbis_since(&m, &t0);
        assert_eq!(old.addr(), pfn.phys().0);
        let (n, pgsize) = num_contig_ptes(size).unwrap();
        for j in 0..n {
            assert!(!m.read_desc(mmlab_engine::PhysAddr(ptep.0 + 8 * j as u64)).is_valid());
        }
        // Flushed: the next access walks and finds nothing.
        let e = mmu::translate(&cpu, &asp, addr + pgsize * (n as u64 - 1), USER).unwrap_err();
        assert!(matches!(e.kind, FaultKind::Translation { .. }), "{e}");
        free_huge(&pa, &cpu, pfn, order);
        out.push((map, unmap));
    }
    // pgd, one PUD table, PMD tables for 64K, 2M and 32M, one PTE table.
    assert_eq!(free_pgtables(&cpu, &asp, &pa), 6);
    pa.check_invariants().unwrap();
    assert_eq!(free_pages(&pa), before, "every table and page back");
    out
}

/// Without range TLBIs the scopes differ most: 6.12 breaks 64K and 32M runs
/// even when mapping fresh (4 KiB stride, all levels; a 32M run is past
/// MAX_DVM_OPS strides so the whole ASID goes); 6.16 flushes the entry size
/// at the last level and skips the break over empty entries.
#[test]
fn tlbis_per_size_without_range_ops() {
    let r = map_walk_unmap(false, HugeTlbScope::V6_12);
    // 64K: 16 x vae1is to map (break over empty entries) and to unmap.
    assert_eq!(r[0], (vec![("vae1is", 16)], vec![("vae1is", 16)]));
    // 2M block: none to map, one flush_tlb_page to unmap.
    assert_eq!(r[1], (vec![], vec![("vale1is", 1)]));
    // 32M: 8192 strides of 4 KiB: flush_tlb_mm.
    assert_eq!(r[2], (vec![("aside1is", 1)], vec![("aside1is", 1)]));
    // 1G block: as 2M.
    assert_eq!(r[3], (vec![], vec![("vale1is", 1)]));

    let r = map_walk_unmap(false, HugeTlbScope::V6_16);
    assert_eq!(r[0], (vec![], vec![("vale1is", 16)]));
    assert_eq!(r[1], (vec![], vec![("vale1is", 1)]));
    // 32M: 16 strides of 2 MiB, last level.
    assert_eq!(r[2], (vec![], vec![("vale1is", 16)]));
    assert_eq!(r[3], (vec![], vec![("vale1is", 1)]));
}

/// With FEAT_TLBIRANGE a run's flush is one range op.
#[test]
fn tlbis_per_size_with_range_ops() {
    let r = map_walk_unmap(true, HugeTlbScope::V6_12);
    assert_eq!(r[0], (vec![("rvae1is", 1)], vec![("rvae1is", 1)]));
    assert_eq!(r[2], (vec![("rvae1is", 1)], vec![("rvae1is", 1)]));
    // 6.12 unmaps a block with flush_tlb_page(): one single op either way.
    assert_eq!(r[1], (vec![], vec![("vale1is", 1)]));
    let r = map_walk_unmap(true, HugeTlbScope::V6_16);
    assert_eq!(r[0], (vec![], vec![("rvale1is", 1)]));
    // 6.16 to 7.2 unmap a block through get_clear_contig_flush(): 512
    // pages at the 2 MiB stride (262144 at 1 GiB) are more than one page,
    // so __flush_tlb_range_op() issues one range op.
    assert_eq!(r[1], (vec![], vec![("rvale1is", 1)]));
    assert_eq!(r[2], (vec![], vec![("rvale1is", 1)]));
    assert_eq!(r[3], (vec![], vec![("rvale1is", 1)]));
}

/// Map one huge page of each size and fill the TLB through it, clear it
/// without a flush (`huge_ptep_get_and_clear`, as `unmap_hugepage_range`
/// does), then `flush_hugetlb_tlb_range()` over it: the TLBIs of the flush
/// per size. The stale translation is gone after it.
fn flush_per_size(tlbi_range: bool, scope: HugeTlbScope) -> Vec<Tlbis> {
    let m = boot(tlbi_range);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let pfns: Vec<Pfn> = SIZES.iter().rev().map(|&(_, order)| alloc_huge(&pa, &cpu, order)).collect();
    let asp = AddressSpace::alloc_user(&cpu, &pa, 5).unwrap();
    let mut out = Vec::new();
    for (i, (size, order)) in SIZES.into_iter().enumerate() {
        let pfn = pfns[SIZES.len() - 1 - i];
        let addr = user_addr(i);
        let ptep = huge_pte_alloc(&cpu, &asp, &pa, addr, size).unwrap();
        let pte = arch_make_huge_pte(pfn.phys().0, PAGE_SHARED, size).unwrap();
        set_huge_pte_at(&cpu, &asp, addr, ptep, pte, size, scope).unwrap();
        let last = addr + size - 8;
        assert_eq!(mmu::translate(&cpu, &asp, last, USER).unwrap().0, pfn.phys().0 + size - 8);
        huge_ptep_get_and_clear(&cpu, ptep, size).unwrap();
        assert!(mmu::translate(&cpu, &asp, last, USER).is_ok(), "stale until the flush");
        let t0 = m.tlbi_counts();
        flush_hugetlb_tlb_range(&cpu, 5, addr, addr + size, size, scope);
        out.push(tlbis_since(&m, &t0));
        assert!(mmu::translate(&cpu, &asp, last, USER).is_err(), "size {size:#x}: flushed");
        free_huge(&pa, &cpu, pfn, order);
    }
    free_pgtables(&cpu, &asp, &pa);
    pa.check_invariants().unwrap();
    out
}

/// `flush_hugetlb_tlb_range()` per release, one huge page of each size
/// (64K, 2M, 32M, 1G), without range TLBIs. 6.12 (asm/hugetlb.h as
/// released) flushes 2M and 1G at their own stride, one op each, and the
/// contiguous sizes at 4 KiB: 16 ops for 64K, and for 32M 8192 strides,
/// MAX_DVM_OPS (512) or more, so flush_tlb_mm(). 6.16 to 7.2 flush 32M at
/// the PMD stride: 16 ops. None is last level (vae1is). Before this was
/// modelled, 6.12 flushed every size at 4 KiB: 2M and 1G became
/// flush_tlb_mm() (aside1is) too.
#[test]
fn flush_hugetlb_tlb_range_per_size_and_release() {
    let v612 = flush_per_size(false, HugeTlbScope::V6_12);
    assert_eq!(v612, vec![vec![("vae1is", 16)], vec![("vae1is", 1)], vec![("aside1is", 1)], vec![("vae1is", 1)]]);
    let v616 = flush_per_size(false, HugeTlbScope::V6_16);
    assert_eq!(v616, vec![vec![("vae1is", 16)], vec![("vae1is", 1)], vec![("vae1is", 16)], vec![("vae1is", 1)]]);
    // With FEAT_TLBIRANGE every one is a single range op (32M at 4 KiB is
    // 8192 pages, below MAX_TLBI_RANGE_PAGES).
    for scope in [HugeTlbScope::V6_12, HugeTlbScope::V6_16] {
        assert_eq!(flush_per_size(true, scope), vec![vec![("rvae1is", 1)]; 4], "{scope:?}");
    }
}

/// `huge_ptep_clear_flush()` of a block whose entry is not valid: 6.12's
/// `ptep_clear_flush()` flushes only a valid entry; 6.16 to 7.2 flush
/// whatever the entry was (one vale1is, last level, at the block's stride).
#[test]
fn clear_flush_of_an_invalid_block_per_release() {
    let m = boot(false);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let asp = AddressSpace::alloc_user(&cpu, &pa, 4).unwrap();
    for (i, size) in [(1, PMD_SIZE), (3, PUD_SIZE)] {
        let addr = user_addr(i);
        let ptep = huge_pte_alloc(&cpu, &asp, &pa, addr, size).unwrap();
        for (scope, n) in [(HugeTlbScope::V6_12, 0), (HugeTlbScope::V6_16, 1)] {
            let t0 = m.tlbi_counts();
            let old = huge_ptep_clear_flush(&cpu, &asp, addr, ptep, size, scope).unwrap();
            assert!(!old.is_valid());
            let got = tlbis_since(&m, &t0);
            let expect = if n == 0 { vec![] } else { vec![("vale1is", n)] };
            assert_eq!(got, expect, "size {size:#x} {scope:?}");
        }
    }
    assert_eq!(
        huge_ptep_clear_flush(&cpu, &asp, user_addr(1), PhysAddr(0), 4 << 20, HugeTlbScope::V6_16),
        Err(HugePteError::InvalidSize { size: 4 << 20 })
    );
    free_pgtables(&cpu, &asp, &pa);
    pa.check_invariants().unwrap();
}

/// Remapping a live huge page: set_huge_pte_at breaks a contiguous run
/// itself; a block must be cleared and flushed first, and a remap without
/// that (or a raw write over a live run) is refused by the checker and
/// changes nothing.
#[test]
fn remap_needs_break_before_make() {
    let m = boot(false);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let before = free_pages(&pa);
    let asp = AddressSpace::alloc_user(&cpu, &pa, 9).unwrap();
    for (i, (size, order)) in SIZES.into_iter().enumerate().take(3) {
        let (a, b) = (alloc_huge(&pa, &cpu, order), alloc_huge(&pa, &cpu, order));
        let addr = user_addr(i);
        let ptep = huge_pte_alloc(&cpu, &asp, &pa, addr, size).unwrap();
        let scope = HugeTlbScope::V6_16;
        set_huge_pte_at(
            &cpu,
            &asp,
            addr,
            ptep,
            arch_make_huge_pte(a.phys().0, PAGE_SHARED, size).unwrap(),
            size,
            scope,
        )
        .unwrap();
        assert_eq!(mmu::translate(&cpu, &asp, addr + 8, USER).unwrap().0, a.phys().0 + 8);
        let new = arch_make_huge_pte(b.phys().0, PAGE_SHARED, size).unwrap();
        let (n, pgsize) = num_contig_ptes(size).unwrap();
        if n > 1 {
            // A raw write over the live run: refused, nothing written.
            let e = pgtable::set_ptes(&cpu, ptep, new, n, pgsize).unwrap_err();
            assert!(matches!(e, PgtableError::BreakBeforeMake { .. }), "{e}");
            // set_huge_pte_at does the break itself: clear 16, flush, write.
            let t0 = m.tlbi_counts();
            set_huge_pte_at(&cpu, &asp, addr, ptep, new, size, scope).unwrap();
            assert_eq!(tlbis_since(&m, &t0), vec![("vale1is", 16)], "size {size:#x}");
        } else {
            let e = set_huge_pte_at(&cpu, &asp, addr, ptep, new, size, scope).unwrap_err();
            assert!(matches!(e, HugePteError::Pgtable(PgtableError::BreakBeforeMake { .. })), "{e}");
            assert_eq!(mmu::translate(&cpu, &asp, addr + 8, USER).unwrap().0, a.phys().0 + 8, "unchanged");
            huge_ptep_clear_flush(&cpu, &asp, addr, ptep, size, scope).unwrap();
            set_huge_pte_at(&cpu, &asp, addr, ptep, new, size, scope).unwrap();
        }
        // The old translation is gone everywhere: the flush reached the TLB.
        assert_eq!(mmu::translate(&cpu, &asp, addr + 8, USER).unwrap().0, b.phys().0 + 8);
        huge_ptep_clear_flush(&cpu, &asp, addr, ptep, size, scope).unwrap();
        free_huge(&pa, &cpu, a, order);
        free_huge(&pa, &cpu, b, order);
    }
    free_pgtables(&cpu, &asp, &pa);
    pa.check_invariants().unwrap();
    assert_eq!(free_pages(&pa), before);
}

/// huge_ptep_get_and_clear does not flush: the translation stays in the
/// TLB until flush_hugetlb_tlb_range; dirty and young come back gathered
/// from every entry of a run.
#[test]
fn get_and_clear_leaves_the_flush_to_the_caller() {
    let m = boot(false);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let asp = AddressSpace::alloc_user(&cpu, &pa, 3).unwrap();
    let pfn = alloc_huge(&pa, &cpu, 4);
    let addr = user_addr(0);
    let ptep = huge_pte_alloc(&cpu, &asp, &pa, addr, CONT_PTE_SIZE).unwrap();
    // Read-only, not yet young: AF and dirty set by "hardware" on entry 5 only.
    let pte = arch_make_huge_pte(pfn.phys().0, PAGE_SHARED, CONT_PTE_SIZE).unwrap();
    let clean = mmlab_engine::arch::arm64::pgtable::Desc((pte.0 & !PTE_AF) | PTE_RDONLY);
    set_huge_pte_at(&cpu, &asp, addr, ptep, clean, CONT_PTE_SIZE, HugeTlbScope::V6_16).unwrap();
    let e5 = mmlab_engine::PhysAddr(ptep.0 + 8 * 5);
    m.desc_slot(e5).fetch_or(PTE_AF | PTE_DIRTY, std::sync::atomic::Ordering::Relaxed);
    let got = huge_ptep_get(&m, ptep, CONT_PTE_SIZE);
    assert!(got.has(PTE_AF) && got.has(PTE_DIRTY) && !m.read_desc(ptep).has(PTE_AF));
    // Fill the TLB through entry 5 (young), then clear without a flush.
    mmu::translate(&cpu, &asp, addr + 5 * 4096, Access { write: false, user: true }).unwrap();
    let old = huge_ptep_get_and_clear(&cpu, ptep, CONT_PTE_SIZE).unwrap();
    assert!(old.has(PTE_AF) && old.has(PTE_DIRTY), "gathered from entry 5");
    let stale = mmu::translate(&cpu, &asp, addr + 9 * 4096, Access { write: false, user: true });
    assert_eq!(stale.unwrap().0, pfn.phys().0 + 9 * 4096, "the TLB entry outlives the cleared run");
    flush_hugetlb_tlb_range(&cpu, 3, addr, addr + CONT_PTE_SIZE, CONT_PTE_SIZE, HugeTlbScope::V6_16);
    assert!(mmu::translate(&cpu, &asp, addr + 9 * 4096, Access { write: false, user: true }).is_err());
    free_huge(&pa, &cpu, pfn, 4);
    free_pgtables(&cpu, &asp, &pa);
    pa.check_invariants().unwrap();
}

/// Sizes arm64 does not offer and unaligned or kernel addresses are typed
/// errors; nothing is allocated or written.
#[test]
fn bad_sizes_and_addresses() {
    let m = mmlab_tests::boot(MachineConfig::with("64M", 1).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let asp = AddressSpace::alloc_user(&cpu, &pa, 1).unwrap();
    let before = free_pages(&pa);
    let four_m = 4 << 20;
    assert_eq!(huge_pte_alloc(&cpu, &asp, &pa, 0, four_m), Err(HugePteError::InvalidSize { size: four_m }));
    assert_eq!(num_contig_ptes(four_m), Err(HugePteError::InvalidSize { size: four_m }));
    assert_eq!(
        arch_make_huge_pte(0x1000, PAGE_SHARED, PMD_SIZE),
        Err(HugePteError::Unaligned { addr: 0x1000, size: PMD_SIZE })
    );
    let unaligned = user_addr(0) + CONT_PTE_SIZE;
    assert!(matches!(huge_pte_alloc(&cpu, &asp, &pa, unaligned, PMD_SIZE), Err(HugePteError::Unaligned { .. })));
    let kernel = 0xffff_0000_0000_0000;
    assert!(matches!(huge_pte_alloc(&cpu, &asp, &pa, kernel, PMD_SIZE), Err(HugePteError::Unaligned { .. })));
    assert_eq!(free_pages(&pa), before, "no table allocated");
    assert_eq!(huge_pte_offset(&m, &asp, user_addr(0), PMD_SIZE), None);
    // A 2M block in the way of a 64K mapping's PTE table.
    let pfn = alloc_huge(&pa, &cpu, 9);
    let ptep = huge_pte_alloc(&cpu, &asp, &pa, user_addr(0), PMD_SIZE).unwrap();
    let pte = arch_make_huge_pte(pfn.phys().0, PAGE_SHARED, PMD_SIZE).unwrap();
    set_huge_pte_at(&cpu, &asp, user_addr(0), ptep, pte, PMD_SIZE, HugeTlbScope::V6_12).unwrap();
    assert!(matches!(
        huge_pte_alloc(&cpu, &asp, &pa, user_addr(0), CONT_PTE_SIZE),
        Err(HugePteError::LeafInTheWay { .. })
    ));
    huge_ptep_clear_flush(&cpu, &asp, user_addr(0), ptep, PMD_SIZE, HugeTlbScope::V6_12).unwrap();
    free_huge(&pa, &cpu, pfn, 9);
    free_pgtables(&cpu, &asp, &pa);
    pa.check_invariants().unwrap();
}
