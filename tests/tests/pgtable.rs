//! arm64 page tables: barrier counts with and without lazy-MMU batching,
//! break-before-make, TLB entries needed per mapping kind, faults, and the
//! vmemmap routing of struct-page access.

use mmlab_engine::arch::arm64::memory::{VMALLOC_START, VaLayout};
const VMEMMAP_START: u64 = VaLayout::VA48.vmemmap_start();
use mmlab_engine::arch::arm64::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_RO, PAGE_SHARED};
use mmlab_engine::arch::arm64::pgtable::mmu::{self, Access, FaultKind};
use mmlab_engine::arch::arm64::pgtable::{
    self, AddressSpace, Desc, DescKind, Level, MapFlags, PgtableError, TableMemory, arch_enter_lazy_mmu_mode,
    arch_leave_lazy_mmu_mode, entry_pa, walk,
};
use mmlab_engine::arch::arm64::tlb::TlbFlush;
use mmlab_engine::counters::CounterSet;
use mmlab_engine::{Cpu, PAGE_SIZE, Pfn, PhysAddr};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

use mmlab_tests::{barrier_pairs as pairs, counting_machine as machine};

/// A PTE table for `va` in the kernel space, created by mapping one page
/// there and unmapping it again (the tables stay, as vmalloc's do).
fn pte_table_for<'m>(cpu: &Cpu<'m>, pa: &PageAllocator<'m>, va: u64) -> PhysAddr {
    let k = mmlab_engine::arch::arm64::pgtable::init_mm(cpu);
    let page = pa.alloc_pages(cpu, mmlab_engine::Gfp::GFP_KERNEL, 0).unwrap();
    pgtable::map_range(cpu, &k, pa, va, page.phys().0, PAGE_SIZE, PAGE_KERNEL, MapFlags::default()).unwrap().ignore();
    let pmd = walk(cpu.ram(), &k, va).steps[2].desc;
    pgtable::unmap_range(cpu, &k, va, PAGE_SIZE).unwrap().ignore();
    pa.free_pages(cpu, page, 0).unwrap();
    PhysAddr(pmd.addr())
}

#[test]
fn barrier_pairs_per_write_with_and_without_batching() {
    for batching in [true, false] {
        let m = machine("64M", batching);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let cpu = m.cpu(0).unwrap();
        let table = pte_table_for(&cpu, &pa, VMALLOC_START);
        let pte = |i: u64| Desc::page(0x4000_0000 + i * PAGE_SIZE, PAGE_KERNEL);

        // Outside a section: every valid kernel PTE write pays one pair.
        let b = cpu.arch_data().barriers.snapshot();
        for i in 0..8 {
            pgtable::set_pte(&cpu, entry_pa(table, i), pte(i as u64)).unwrap();
        }
        assert_eq!(pairs(&cpu, b), (8, 8), "batching={batching}: 8 single writes");

        // Clearing issues none.
        let b = cpu.arch_data().barriers.snapshot();
        for i in 0..8 {
            pgtable::ptep_get_and_clear(&cpu, entry_pa(table, i));
        }
        assert_eq!(pairs(&cpu, b), (0, 0), "clears issue no barriers");

        // set_ptes: one pair for the whole run.
        let b = cpu.arch_data().barriers.snapshot();
        pgtable::set_ptes(&cpu, entry_pa(table, 0), pte(0), 100, PAGE_SIZE).unwrap();
        assert_eq!(pairs(&cpu, b), (1, 1), "one pair per set_ptes run");
        for i in 0..100 {
            pgtable::pte_clear(&cpu, entry_pa(table, i));
        }

        // 64 single writes inside one lazy-MMU section.
        let b = cpu.arch_data().barriers.snapshot();
        arch_enter_lazy_mmu_mode(&cpu);
        for i in 0..64 {
            pgtable::set_pte(&cpu, entry_pa(table, i), pte(i as u64)).unwrap();
        }
        let inside = pairs(&cpu, b);
        arch_leave_lazy_mmu_mode(&cpu);
        if batching {
            assert_eq!(inside, (0, 0), "deferred inside the section");
            assert_eq!(pairs(&cpu, b), (1, 1), "one pair at the leave");
        } else {
            assert_eq!(pairs(&cpu, b), (64, 64), "before 6.16: one pair per write");
        }
        for i in 0..64 {
            pgtable::pte_clear(&cpu, entry_pa(table, i));
        }

        // A section with only clears owes nothing at its end.
        let b = cpu.arch_data().barriers.snapshot();
        arch_enter_lazy_mmu_mode(&cpu);
        pgtable::pte_clear(&cpu, entry_pa(table, 0));
        arch_leave_lazy_mmu_mode(&cpu);
        assert_eq!(pairs(&cpu, b), (0, 0));

        // Nesting: the inner leave flushes and ends batching for the rest of
        // the outer section (the kernel does not count nesting).
        let b = cpu.arch_data().barriers.snapshot();
        arch_enter_lazy_mmu_mode(&cpu);
        pgtable::set_pte(&cpu, entry_pa(table, 0), pte(0)).unwrap();
        arch_enter_lazy_mmu_mode(&cpu);
        pgtable::set_pte(&cpu, entry_pa(table, 1), pte(1)).unwrap();
        arch_leave_lazy_mmu_mode(&cpu);
        let after_inner = pairs(&cpu, b);
        pgtable::set_pte(&cpu, entry_pa(table, 2), pte(2)).unwrap();
        pgtable::set_pte(&cpu, entry_pa(table, 3), pte(3)).unwrap();
        arch_leave_lazy_mmu_mode(&cpu);
        if batching {
            assert_eq!(after_inner, (1, 1), "inner leave flushes the two writes");
            assert_eq!(pairs(&cpu, b), (3, 3), "two more unbatched writes, nothing left at the outer leave");
        } else {
            assert_eq!(pairs(&cpu, b), (4, 4));
        }
        for i in 0..4 {
            pgtable::pte_clear(&cpu, entry_pa(table, i));
        }

        // User (non-global, PTE_USER) writes issue no barriers at all.
        let b = cpu.arch_data().barriers.snapshot();
        pgtable::set_pte(&cpu, entry_pa(table, 5), Desc::page(0x4000_0000, pgtable::desc::PAGE_SHARED)).unwrap();
        assert_eq!(pairs(&cpu, b), (0, 0), "user entries rely on TLB maintenance");
    }
}

#[test]
fn break_before_make_violations_are_rejected_and_not_written() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let table = pte_table_for(&cpu, &pa, VMALLOC_START);
    let slot = entry_pa(table, 0);
    let old = Desc::page(0x4000_0000, PAGE_KERNEL);
    pgtable::set_pte(&cpu, slot, old).unwrap();
    // Another output address under a live entry.
    let new = Desc::page(0x4000_1000, PAGE_KERNEL);
    assert_eq!(pgtable::set_pte(&cpu, slot, new), Err(PgtableError::BreakBeforeMake { entry: slot, old, new }));
    assert_eq!(m.read_desc(slot), old, "nothing written");
    // Setting the contiguous bit on a live entry.
    let cont = Desc(old.0 | pgtable::desc::bits::PTE_CONT);
    assert!(matches!(pgtable::set_pte(&cpu, slot, cont), Err(PgtableError::BreakBeforeMake { .. })));
    // A permission change is allowed.
    pgtable::set_pte(&cpu, slot, Desc::page(0x4000_0000, PAGE_KERNEL_RO)).unwrap();
    // Break, then make: clear first, then any new entry is fine.
    pgtable::ptep_get_and_clear(&cpu, slot);
    pgtable::set_pte(&cpu, slot, new).unwrap();
    // set_ptes checks every entry before writing any.
    let b = m.read_desc(entry_pa(table, 1));
    assert!(pgtable::set_ptes(&cpu, entry_pa(table, 1), Desc::page(0x4100_0000, PAGE_KERNEL), 4, PAGE_SIZE).is_ok());
    assert!(pgtable::set_ptes(&cpu, entry_pa(table, 0), Desc::page(0x4200_0000, PAGE_KERNEL), 4, PAGE_SIZE).is_err());
    assert_eq!(m.read_desc(entry_pa(table, 1)), Desc::page(0x4100_0000, PAGE_KERNEL), "run left as it was");
    let _ = b;
    // A contiguous run must be aligned.
    assert!(matches!(
        pgtable::set_cont_ptes(&cpu, entry_pa(table, 16), VMALLOC_START + 0x10000, 0x4000_1000, PAGE_KERNEL),
        Err(PgtableError::ContAlignment { .. })
    ));
}

#[test]
fn tlb_entries_needed_for_1mib_by_mapping_kind() {
    let m = machine("256M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    // 2 MiB of physically contiguous, 2 MiB-aligned memory.
    let phys = pa.alloc_contig_pages(&cpu, 512, mmlab_engine::Gfp::GFP_KERNEL).unwrap().phys().0;
    let cases = [
        (MapFlags { block: false, cont: false }, 1 << 20, 256u64),
        (MapFlags { block: false, cont: true }, 1 << 20, 16),
        (MapFlags { block: true, cont: false }, 2 << 20, 1),
    ];
    let va = VMALLOC_START + (64 << 20);
    for (flags, size, want) in cases {
        // The block case replaces the (now empty) PTE table the earlier
        // cases left, freeing it as pmd_free_pte_page() does.
        pgtable::map_range(&cpu, &k, &pa, va, phys, size, PAGE_KERNEL, flags).unwrap().ignore();
        let leaves = pgtable::leaves(&m, &k, va, va + (1 << 20));
        assert_eq!(leaves.len() as u64, want, "{flags:?}: TLB entries to cover 1 MiB");
        pgtable::unmap_range(&cpu, &k, va, size).unwrap().ignore();
        assert!(pgtable::leaves(&m, &k, va, va + (1 << 20)).is_empty());
    }
    // The PTE table is gone: the block replaced it, and unmapping the block
    // left an empty pmd slot.
    let w = walk(&m, &k, va);
    assert_eq!(w.steps.last().unwrap().level, Level::Pmd);
    assert_eq!(w.steps.last().unwrap().desc, Desc::INVALID);
    // Freeing the table needed a walk-cache invalidation (tlbi vaae1is).
    assert!(m.tlbi_counts().get(mmlab_engine::arch::arm64::tlb::TlbiKind::Vaae1is) >= 1);
}

/// `for_each_leaf` reads each table once and visits exactly the leaf
/// entries that walks of every page of the range end at (a block, a
/// contiguous run's entries, pages, holes skipped), in address order,
/// from inside a block to inside a PTE table of another PMD; a Break stops
/// it. The linear map, whole, agrees too.
#[test]
fn for_each_leaf_visits_the_leaves_page_walks_reach() {
    use std::ops::ControlFlow;
    let m = machine("256M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let phys = pa.alloc_contig_pages(&cpu, 1024, mmlab_engine::Gfp::GFP_KERNEL).unwrap().phys().0;
    let va = VMALLOC_START + (64 << 20);
    let map = |off: u64, size: u64, block: bool, cont: bool| {
        pgtable::map_range(&cpu, &k, &pa, va + off, phys + off, size, PAGE_KERNEL, MapFlags { block, cont })
            .unwrap()
            .ignore();
    };
    map(0, 2 << 20, true, false); // a PMD block
    map(2 << 20, 1 << 20, false, true); // 16 contiguous runs
    map((3 << 20) + (64 << 10), 5 * PAGE_SIZE, false, false); // pages after a hole
    map((4 << 20) - 3 * PAGE_SIZE, 3 * PAGE_SIZE, false, false); // the last pages of that PMD
    let by_walks = |start: u64, end: u64| {
        let mut out: Vec<(u64, PhysAddr)> = Vec::new();
        let mut cur = start & !(PAGE_SIZE - 1);
        while cur < end {
            if let Some(l) = walk(&m, &k, cur).leaf {
                let base = cur & !(l.level.entry_size() - 1);
                if out.last() != Some(&(base, l.slot)) {
                    out.push((base, l.slot));
                }
            }
            cur += PAGE_SIZE;
        }
        out
    };
    let visited = |start: u64, end: u64| {
        let mut out: Vec<(u64, PhysAddr)> = Vec::new();
        pgtable::for_each_leaf(&m, &k, start, end, |base, l| {
            assert_eq!(l.pa.0, m.read_desc(l.slot).addr(), "pa is the entry's output address");
            out.push((base, l.slot));
            ControlFlow::Continue(())
        });
        out
    };
    let (start, end) = (va + (1 << 20), va + (4 << 20) - PAGE_SIZE);
    let want = by_walks(start, end);
    assert_eq!(want.len(), 1 + 256 + 5 + 2, "block, 256 contiguous entries, 5 + 2 pages");
    assert_eq!(visited(start, end), want);
    assert!(visited(va + (3 << 20), va + (3 << 20) + (64 << 10)).is_empty(), "a hole visits nothing");
    let mut n = 0;
    pgtable::for_each_leaf(&m, &k, start, end, |_, _| {
        n += 1;
        if n == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    assert_eq!(n, 3, "Break stops the visit");
    let lm = m.va_layout().page_offset();
    let linear = by_walks(lm, lm + (256 << 20));
    assert!(!linear.is_empty(), "the machine has a linear map");
    assert_eq!(visited(lm, lm + (256 << 20)), linear, "the linear map");
}

/// `unmap_range` checks only the entries whose contiguous run can stick
/// out of the range (the runs holding its first and last page): a cut at
/// either end is refused with the run's address and clears nothing, a range
/// that covers its runs whole is cleared, pages outside runs may be cut
/// anywhere, and `vunmap_range_noflush` clears up to the cut it meets.
#[test]
fn unmap_range_refuses_a_cut_contiguous_run_at_either_end() {
    let m = machine("256M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let run = 16 * PAGE_SIZE;
    let phys = pa.alloc_contig_pages(&cpu, 512, mmlab_engine::Gfp::GFP_KERNEL).unwrap().phys().0;
    let va = VMALLOC_START + (96 << 20);
    let cont = MapFlags { block: false, cont: true };
    // Four runs of 16 at va, then 16 single pages after them.
    pgtable::map_range(&cpu, &k, &pa, va, phys, 4 * run, PAGE_KERNEL, cont).unwrap().ignore();
    let pages = MapFlags::default();
    pgtable::map_range(&cpu, &k, &pa, va + 4 * run, phys + 4 * run, run, PAGE_KERNEL, pages).unwrap().ignore();
    let mapped = |a: u64| walk(&m, &k, a).leaf.is_some();
    let all_mapped = |from: u64, to: u64| (from..to).step_by(PAGE_SIZE as usize).all(mapped);
    let cut = |at: u64| Err(PgtableError::PartialHugeUnmap { va: at, level: Level::Pte });

    // The head cuts the first run, the tail the second: refused, untouched.
    assert_eq!(pgtable::unmap_range(&cpu, &k, va + PAGE_SIZE, 2 * run).map(TlbFlush::ignore), cut(va));
    assert_eq!(pgtable::unmap_range(&cpu, &k, va, run + PAGE_SIZE).map(TlbFlush::ignore), cut(va + run));
    assert_eq!(
        pgtable::unmap_range(&cpu, &k, va + 3 * run + PAGE_SIZE, 3 * PAGE_SIZE).map(TlbFlush::ignore),
        cut(va + 3 * run)
    );
    assert!(all_mapped(va, va + 5 * run));
    // The first run whole: cleared, the next untouched.
    pgtable::unmap_range(&cpu, &k, va, run).unwrap().ignore();
    assert!(!(va..va + run).step_by(PAGE_SIZE as usize).any(mapped));
    assert!(all_mapped(va + run, va + 5 * run));
    // Single pages may be cut anywhere, at both ends of the range.
    pgtable::unmap_range(&cpu, &k, va + 4 * run + 3 * PAGE_SIZE, 5 * PAGE_SIZE).unwrap().ignore();
    assert!(!mapped(va + 4 * run + 3 * PAGE_SIZE) && !mapped(va + 4 * run + 7 * PAGE_SIZE));
    assert!(mapped(va + 4 * run + 2 * PAGE_SIZE) && mapped(va + 4 * run + 8 * PAGE_SIZE));
    // The clearing walk alone clears the whole run before the cut it meets.
    assert_eq!(pgtable::vunmap_range_noflush(&cpu, &k, va + run, run + PAGE_SIZE), cut(va + 2 * run));
    assert!(!(va + run..va + 2 * run).step_by(PAGE_SIZE as usize).any(mapped));
    assert!(all_mapped(va + 2 * run, va + 4 * run));
    pgtable::unmap_range(&cpu, &k, va + 2 * run, 2 * run).unwrap().flush(&cpu);
    assert!(!(va..va + 4 * run).step_by(PAGE_SIZE as usize).any(mapped));
}

#[test]
fn read_only_mapping_faults_on_write_and_holes_fault_on_read() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let page = pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_KERNEL | mmlab_engine::Gfp::__GFP_ZERO, 0).unwrap();
    let va = VMALLOC_START + 0x10_0000;
    pgtable::map_range(&cpu, &k, &pa, va, page.phys().0, PAGE_SIZE, PAGE_KERNEL_RO, MapFlags::default())
        .unwrap()
        .ignore();
    m.arena().write(PhysAddr(page.phys().0 + 8), &0xfeed_u64.to_le_bytes());
    assert_eq!(mmu::read_u64(&cpu, &k, va + 8), Ok(0xfeed));
    let f = mmu::write_u64(&cpu, &k, va + 8, 1).unwrap_err();
    assert_eq!(f.kind, FaultKind::Permission { level: Level::Pte });
    assert_eq!(f.va, va + 8);
    assert_eq!(f.desc, Desc::page(page.phys().0, PAGE_KERNEL_RO));
    assert_eq!(mmu::read_u64(&cpu, &k, va + 8), Ok(0xfeed), "the failed write changed nothing");
    let hole = mmu::read_u64(&cpu, &k, va + PAGE_SIZE).unwrap_err();
    assert_eq!(hole.kind, FaultKind::Translation { level: Level::Pte });
    // A user access to a kernel page is a permission fault.
    let u = mmu::translate(&cpu, &k, va, Access { write: false, user: true }).unwrap_err();
    assert_eq!(u.kind, FaultKind::Permission { level: Level::Pte });
    // An address with no table at all faults at the top level (the linear
    // map's own PGD entry is 0; 0xffff400000000000 is entry 128).
    let none = mmu::read_u64(&cpu, &AddressSpace::kernel(k.pgd(), k.layout()), 0xffff_4000_0000_0000).unwrap_err();
    assert!(matches!(none.kind, FaultKind::Translation { .. }));
}

#[test]
fn struct_pages_are_reached_through_the_vmemmap() {
    // 256 MiB = two whole sections: each 2 MiB of memmap is one PMD block.
    let m = machine("256M", true);
    let k = m.kernel_as();
    let pfn = Pfn(0x40000 + 12345);
    let va = m.memmap().page_va(pfn);
    assert_eq!(va, VMEMMAP_START + 12345 * 64);
    let w = walk(&m, &k, va);
    let kinds: Vec<_> = w.steps.iter().map(|s| s.desc.kind(s.level)).collect();
    assert_eq!(kinds, [DescKind::Table, DescKind::Table, DescKind::Block], "pgd -> pud table -> pmd block");
    let pa = w.leaf.unwrap().pa;
    assert_eq!(m.vmemmap_pa(pfn), Some(pa));
    // The accessor's bytes are the arena's bytes at the translated address.
    let p = m.page(pfn);
    p.set_private(0x1122_3344_5566_7788);
    let mut raw = [0u8; 64];
    m.arena().read(pa, &mut raw);
    assert_eq!(u64::from_le_bytes(raw[40..48].try_into().unwrap()), 0x1122_3344_5566_7788);
    let cpu = m.cpu(0).unwrap();
    assert_eq!(mmu::read_u64(&cpu, &k, va + 40), Ok(0x1122_3344_5566_7788), "and what an MMU read at the VA sees");
    // A partial section (64 MiB) is mapped with base pages.
    let small = machine("64M", true);
    let w = walk(&small, &small.kernel_as(), small.memmap().page_va(Pfn(0x40000)));
    assert_eq!(w.leaf.unwrap().level, Level::Pte);
}

#[test]
fn a_vmemmap_remap_is_seen_after_its_tlb_flush_and_not_before() {
    // 64M: the memmap is mapped with 4 KiB PTEs, so one vmemmap page (64
    // struct pages) can be remapped on its own, as HVO does.
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let pfn = Pfn(0x40000 + 64 * 3 + 5);
    let va = m.memmap().page_va(pfn);
    let ptep = walk(&m, &k, va).leaf.unwrap().slot;
    let old = m.read_desc(ptep);
    // A copy of the vmemmap page in a fresh page, then a marker in the copy.
    let copy = pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_KERNEL, 0).unwrap().phys();
    let mut buf = vec![0u8; PAGE_SIZE as usize];
    m.arena().read(PhysAddr(old.addr()), &mut buf);
    m.arena().write(copy, &buf);
    let off = (va % PAGE_SIZE) + 40; // the struct page's `private`
    m.arena().write(PhysAddr(copy.0 + off), &0xabcd_u64.to_le_bytes());
    // Change the entry without TLB maintenance first: the cached
    // translation still sends struct-page accesses to the old page, as a
    // stale TLB entry would.
    pgtable::ptep_get_and_clear(&cpu, ptep);
    pgtable::set_pte(&cpu, ptep, Desc::page(copy.0, PAGE_KERNEL_RO)).unwrap();
    m.memmap().note_vmemmap_change();
    assert_ne!(m.page(pfn).private(), 0xabcd, "stale until the TLB is flushed");
    mmlab_engine::arch::arm64::tlb::TlbFlush::kernel_page(va).flush(&cpu);
    assert_eq!(m.page(pfn).private(), 0xabcd, "after the flush the accessor follows the tables");
    assert_eq!(m.vmemmap_pa(pfn), Some(PhysAddr(copy.0 + va % PAGE_SIZE)));
    // The remapped page is read-only: an MMU write there faults.
    let f = mmu::write_u64(&cpu, &k, va + 40, 1).unwrap_err();
    assert_eq!(f.kind, FaultKind::Permission { level: Level::Pte });
}

#[test]
fn mmu_reads_hit_the_tlb_model_after_the_first_walk() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let phys = pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_KERNEL | mmlab_engine::Gfp::__GFP_ZERO, 4).unwrap();
    let va = VMALLOC_START + (8 << 20);
    pgtable::map_range(
        &cpu,
        &k,
        &pa,
        va,
        phys.phys().0,
        16 * PAGE_SIZE,
        PAGE_KERNEL,
        MapFlags { block: false, cont: true },
    )
    .unwrap()
    .ignore();
    let before = cpu.arch_data().tlb.counts();
    // 16 pages of one contiguous run: one walk fills one 64 KiB entry, the
    // other 15 pages hit it in the model.
    for i in 0..16 {
        mmu::read_u64(&cpu, &k, va + i * PAGE_SIZE).unwrap();
    }
    let c = cpu.arch_data().tlb.counts();
    assert_eq!(c.fills - before.fills, 1, "one TLB entry for the whole run");
    assert_eq!(c.misses - before.misses, 1);
    assert_eq!(c.hits - before.hits, 15);
    // An unmap and its flush make the next access fault, on every CPU.
    pgtable::unmap_range(&cpu, &k, va, 16 * PAGE_SIZE).unwrap().flush(&cpu);
    assert!(mmu::read_u64(&cpu, &k, va).is_err());
    let cpu1 = m.cpu(1).unwrap();
    assert!(mmu::read_u64(&cpu1, &k, va + PAGE_SIZE).is_err());
}

#[test]
fn a_user_address_space_with_its_asid() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let user = AddressSpace::alloc_user(&cpu, &pa, 5).unwrap();
    assert_eq!(user.asid(), Some(5));
    let page =
        pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_HIGHUSER_MOVABLE | mmlab_engine::Gfp::__GFP_ZERO, 0).unwrap();
    let va = 0x0000_7fff_0000_0000u64;
    let b = cpu.arch_data().barriers.snapshot();
    pgtable::map_range(&cpu, &user, &pa, va, page.phys().0, PAGE_SIZE, pgtable::desc::PAGE_SHARED, MapFlags::default())
        .unwrap()
        .ignore();
    // Three new tables (pud, pmd, pte) each queue a pair; the user PTE none.
    assert_eq!(pairs(&cpu, b), (3, 3));
    let leaf = walk(&m, &user, va).leaf.unwrap();
    assert!(leaf.desc.has(pgtable::desc::bits::PTE_NG) && leaf.desc.has(pgtable::desc::bits::PTE_USER));
    let el0 = Access { write: true, user: true };
    assert_eq!(mmu::translate(&cpu, &user, va, el0), Ok(page.phys()), "EL0 may write a PAGE_SHARED page (DBM)");
    // The same VA is not mapped in the kernel's space.
    assert!(mmu::translate(&cpu, &m.kernel_as(), va, Access::READ).is_err());
    let before = m.tlbi_counts();
    pgtable::unmap_range(&cpu, &user, va, PAGE_SIZE).unwrap().flush(&cpu);
    let t = m.tlbi_counts().delta(&before);
    assert_eq!(t.get(mmlab_engine::arch::arm64::tlb::TlbiKind::Vale1is), 1, "one page of ASID 5, last level");
    assert_eq!(t.total(), 1);
    assert!(mmu::translate(&cpu, &user, va, el0).is_err());
}

// ---------------------------------------------------------------------------
// Bad input to the table operations is refused with a
// typed error and changes nothing.
// ---------------------------------------------------------------------------

/// Free pages once every pcp list is drained (tables freed by a refused call
/// land on the pcp lists first).
fn free_after_drain(cpu: &Cpu<'_>, pa: &PageAllocator<'_>) -> i64 {
    pa.drain_all_pages(cpu);
    pa.nr_free_pages()
}

/// A table allocator that hands out `budget` tables from the page allocator,
/// then runs out (`PgtableError::NoMemory` inside map_range).
struct FailingTables<'a, 'm> {
    pa: &'a PageAllocator<'m>,
    budget: std::cell::Cell<u32>,
}

impl<'m> pgtable::PgtableAlloc<Cpu<'m>> for FailingTables<'_, 'm> {
    fn alloc_table(&self, cpu: &Cpu<'m>) -> Option<PhysAddr> {
        let left = self.budget.get();
        if left == 0 {
            return None;
        }
        self.budget.set(left - 1);
        self.pa.alloc_table(cpu)
    }
    fn free_table(&self, cpu: &Cpu<'m>, pa: PhysAddr) {
        self.pa.free_table(cpu, pa);
    }
}

#[test]
fn map_range_refuses_an_address_of_the_other_half() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let page = pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_KERNEL, 0).unwrap();
    let free = free_after_drain(&cpu, &pa);
    let kstats = pgtable::stats(&m, &k);
    // VMALLOC_START with the top 16 bits cleared: a user (TTBR0) address
    // whose table indexes are those of VMALLOC_START.
    let user_va = VMALLOC_START & ((1 << 48) - 1);
    let r = pgtable::map_range(&cpu, &k, &pa, user_va, page.phys().0, PAGE_SIZE, PAGE_KERNEL, MapFlags::default());
    assert_eq!(r, Err(PgtableError::OutsideAddressSpace { va: user_va, size: PAGE_SIZE, kernel: true }));
    assert!(walk(&m, &k, VMALLOC_START).leaf.is_none(), "the kernel address it aliases stays unmapped");
    // A range that starts in the kernel half and wraps out of it, or
    // starts between the halves, is refused too.
    let between = 0x0001_0000_0000_0000u64;
    assert!(matches!(
        pgtable::map_range(&cpu, &k, &pa, between, page.phys().0, PAGE_SIZE, PAGE_KERNEL, MapFlags::default()),
        Err(PgtableError::OutsideAddressSpace { kernel: true, .. })
    ));
    assert_eq!(pgtable::stats(&m, &k), kstats);
    assert_eq!(pgtable::unmap_range(&cpu, &k, user_va, PAGE_SIZE).map(|f| f.ignore()).unwrap_err(), r.unwrap_err());

    // And a kernel address into a user space.
    let user = AddressSpace::alloc_user(&cpu, &pa, 7).unwrap();
    let ustats = pgtable::stats(&m, &user);
    let r =
        pgtable::map_range(&cpu, &user, &pa, VMALLOC_START, page.phys().0, PAGE_SIZE, PAGE_KERNEL, MapFlags::default());
    assert_eq!(r, Err(PgtableError::OutsideAddressSpace { va: VMALLOC_START, size: PAGE_SIZE, kernel: false }));
    // The last user page is fine; one more page crosses out of the half.
    let top = (1u64 << 48) - PAGE_SIZE;
    let flags = MapFlags::default();
    pgtable::map_range(&cpu, &user, &pa, top - PAGE_SIZE, page.phys().0, 2 * PAGE_SIZE, PAGE_SHARED, flags)
        .unwrap()
        .ignore();
    pgtable::unmap_range(&cpu, &user, top - PAGE_SIZE, 2 * PAGE_SIZE).unwrap().flush(&cpu);
    assert!(matches!(
        pgtable::map_range(&cpu, &user, &pa, top, page.phys().0, 2 * PAGE_SIZE, PAGE_SHARED, MapFlags::default()),
        Err(PgtableError::BadRange { .. }) | Err(PgtableError::OutsideAddressSpace { kernel: false, .. })
    ));
    assert!(walk(&m, &user, top).leaf.is_none());
    assert_eq!(pgtable::stats(&m, &user).pages, ustats.pages);
    assert_eq!(pgtable::stats(&m, &k), kstats);
    pa.free_pages(&cpu, page, 0).unwrap();
    assert_eq!(free_after_drain(&cpu, &pa), free + 1 - 4, "only the user pgd and its top page's three tables stay");
    pa.check_invariants().unwrap();
}

#[test]
fn map_range_refused_for_break_before_make_changes_nothing() {
    let m = machine("256M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let phys = pa.alloc_contig_pages(&cpu, 1024, mmlab_engine::Gfp::GFP_KERNEL).unwrap().phys().0;
    assert!(phys.is_multiple_of(2 << 20));
    let other = pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_KERNEL, 0).unwrap().phys().0;

    // Case 1, pages: the range crosses from a PMD with no PTE table yet
    // into one whose PTE table maps a page elsewhere (the conflict). The
    // first table is allocated and four PTEs are written before the
    // conflict is found.
    let base = VMALLOC_START + (64 << 20);
    let conflict = base + (2 << 20) + 2 * PAGE_SIZE;
    pgtable::map_range(&cpu, &k, &pa, conflict, other, PAGE_SIZE, PAGE_KERNEL, MapFlags::default()).unwrap().ignore();
    let stats = pgtable::stats(&m, &k);
    let free = free_after_drain(&cpu, &pa);
    let va = base + (2 << 20) - 4 * PAGE_SIZE;
    let tlbi = m.tlbi_counts();
    let r = pgtable::map_range(&cpu, &k, &pa, va, phys, 8 * PAGE_SIZE, PAGE_KERNEL, MapFlags::default());
    assert!(matches!(r, Err(PgtableError::BreakBeforeMake { .. })), "{r:?}");
    // The four translations it made and took back may have been cached:
    // the range is flushed, and the freed table leaves no walk cache entry.
    let t = m.tlbi_counts().delta(&tlbi);
    assert!(t.get(mmlab_engine::arch::arm64::tlb::TlbiKind::Vaae1is) >= 1 && t.total() >= 2, "{t:?}");
    for i in 0..8 {
        let leaf = walk(&m, &k, va + i * PAGE_SIZE).leaf;
        if va + i * PAGE_SIZE == conflict {
            assert_eq!(leaf.unwrap().pa.0, other, "the live entry is untouched");
        } else {
            assert!(leaf.is_none(), "page {i} left mapped after the refused call");
        }
    }
    assert_eq!(pgtable::stats(&m, &k), stats, "tables as before the call");
    assert_eq!(free_after_drain(&cpu, &pa), free, "the PTE table the call allocated was freed");

    // Case 2, blocks: the first 2 MiB slot holds an empty PTE table (left
    // by a map and unmap), which a block replaces; the second holds a
    // block of other memory (phys, where the call wants phys + 2 MiB).
    // The table must come back, still allocated.
    let va = VMALLOC_START + (128 << 20);
    pgtable::map_range(&cpu, &k, &pa, va, other, PAGE_SIZE, PAGE_KERNEL, MapFlags::default()).unwrap().ignore();
    pgtable::unmap_range(&cpu, &k, va, PAGE_SIZE).unwrap().flush(&cpu);
    let pte_table = walk(&m, &k, va).steps[2].desc;
    assert_eq!(pte_table.kind(Level::Pmd), DescKind::Table);
    let blocks = MapFlags { block: true, cont: false };
    pgtable::map_range(&cpu, &k, &pa, va + (2 << 20), phys, 2 << 20, PAGE_KERNEL, blocks).unwrap().ignore();
    let stats = pgtable::stats(&m, &k);
    let free = free_after_drain(&cpu, &pa);
    let r = pgtable::map_range(&cpu, &k, &pa, va, phys, 4 << 20, PAGE_KERNEL, blocks);
    assert!(matches!(r, Err(PgtableError::BreakBeforeMake { .. })), "{r:?}");
    assert_eq!(walk(&m, &k, va).steps[2].desc, pte_table, "the empty PTE table is back in its slot");
    assert_eq!(walk(&m, &k, va + (2 << 20)).leaf.unwrap().desc, Desc::block(phys, PAGE_KERNEL));
    assert!(walk(&m, &k, va).leaf.is_none());
    assert_eq!(pgtable::stats(&m, &k), stats);
    assert_eq!(free_after_drain(&cpu, &pa), free, "the replaced table page was not freed");
    assert!(matches!(m.page(mmlab_engine::Pfn(pte_table.pfn())).ext(), mmlab_engine::mm::page::PageExt::Alloc(0, _)));
    pa.check_invariants().unwrap();
}

#[test]
fn map_range_out_of_table_memory_changes_nothing() {
    let m = machine("256M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let phys = pa.alloc_contig_pages(&cpu, 4096, mmlab_engine::Gfp::GFP_KERNEL).unwrap().phys().0;
    // A fresh 1 GiB region: 16 MiB there need a pmd table and eight PTE
    // tables (and a pud table if the pgd entry has none), so every budget
    // below fails part-way, after mapping budget - 1 tables' worth or so.
    let va = VMALLOC_START + (5u64 << 30);
    for budget in 0..9 {
        let stats = pgtable::stats(&m, &k);
        let free = free_after_drain(&cpu, &pa);
        let tables = FailingTables { pa: &pa, budget: std::cell::Cell::new(budget) };
        let r = pgtable::map_range(&cpu, &k, &tables, va, phys, 16 << 20, PAGE_KERNEL, MapFlags::default());
        assert_eq!(r, Err(PgtableError::NoMemory), "budget {budget}");
        assert_eq!(pgtable::stats(&m, &k), stats, "budget {budget}: tables as before");
        assert_eq!(free_after_drain(&cpu, &pa), free, "budget {budget}: every table allocated was freed");
        assert!(pgtable::leaves(&m, &k, va, va + (16 << 20)).is_empty(), "budget {budget}");
    }
    // With enough tables the same call works.
    let tables = FailingTables { pa: &pa, budget: std::cell::Cell::new(16) };
    pgtable::map_range(&cpu, &k, &tables, va, phys, 16 << 20, PAGE_KERNEL, MapFlags::default()).unwrap().ignore();
    assert_eq!(pgtable::leaves(&m, &k, va, va + (16 << 20)).len(), 4096);
    pa.check_invariants().unwrap();
}

#[test]
fn output_addresses_outside_ram_are_errors_not_panics() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let va = VMALLOC_START + 0x20_0000;
    let table = pte_table_for(&cpu, &pa, va);
    let slot = entry_pa(table, Level::Pte.index(va));
    // A leaf may point outside RAM (device memory, ioremap): the write is
    // accepted, and an access through it is an external abort.
    let device = 0x1000_0000u64;
    let dev = Desc::page(device, pgtable::desc::pgprot_device(pgtable::desc::PROT_DEFAULT));
    pgtable::set_pte(&cpu, slot, dev).unwrap();
    let want = FaultKind::ExternalAbort { pa: PhysAddr(device + 8) };
    assert_eq!(mmu::read_u64(&cpu, &k, va + 8).unwrap_err().kind, want);
    assert_eq!(mmu::write_u64(&cpu, &k, va + 8, 1).unwrap_err().kind, want);
    let mut buf = [0u8; 16];
    assert_eq!(mmu::read_bytes(&cpu, &k, va + 8, &mut buf).unwrap_err().kind, want);
    assert_eq!(mmu::write_bytes(&cpu, &k, va + 8, &buf).unwrap_err().kind, want);
    // The translation itself is fine: the PA is what the leaf says.
    assert_eq!(mmu::translate(&cpu, &k, va + 8, Access::READ), Ok(PhysAddr(device + 8)));
    // A PA past the end of RAM, too.
    pgtable::ptep_get_and_clear(&cpu, slot);
    let past = m.arena().end().0 + (1 << 30);
    pgtable::set_pte(&cpu, slot, Desc::page(past, PAGE_KERNEL)).unwrap();
    TlbFlush::kernel_page(va).flush(&cpu);
    assert_eq!(mmu::read_u64(&cpu, &k, va).unwrap_err().kind, FaultKind::ExternalAbort { pa: PhysAddr(past) });
    pgtable::ptep_get_and_clear(&cpu, slot);
    TlbFlush::kernel_page(va).flush(&cpu);

    // A table descriptor must point at RAM: mmlab walks tables in its arena.
    let pmd_slot = walk(&m, &k, va).steps[2].slot;
    let pmd_before = m.read_desc(pmd_slot);
    let next = va + (2 << 20);
    let pmd_next = entry_pa(PhysAddr(pmd_slot.0 & !(PAGE_SIZE - 1)), Level::Pmd.index(next));
    let bad = Desc::table(device, pgtable::desc::KERNEL_TABLE);
    assert_eq!(
        pgtable::set_pmd(&cpu, pmd_next, bad),
        Err(PgtableError::TableOutsideRam { entry: pmd_next, table: PhysAddr(device) })
    );
    assert_eq!(
        pgtable::set_pud(&cpu, pmd_next, bad),
        Err(PgtableError::TableOutsideRam { entry: pmd_next, table: PhysAddr(device) })
    );
    assert_eq!(m.read_desc(pmd_next), Desc::INVALID, "nothing written");
    assert_eq!(m.read_desc(pmd_slot), pmd_before);
    assert!(walk(&m, &k, next).leaf.is_none());
    // A block outside RAM is a leaf: accepted.
    pgtable::set_pmd(&cpu, pmd_next, Desc::block(0x20_0000, PAGE_KERNEL)).unwrap();
    assert!(matches!(mmu::read_u64(&cpu, &k, next).unwrap_err().kind, FaultKind::ExternalAbort { .. }));
    pgtable::pte_clear(&cpu, pmd_next);
    TlbFlush::kernel_range(next, next + (2 << 20)).flush(&cpu);

    // The descriptor address itself outside RAM.
    for bad_slot in [PhysAddr(device), PhysAddr(past), PhysAddr(table.0 + 4)] {
        let e = Err(PgtableError::SlotOutsideRam { entry: bad_slot });
        assert_eq!(pgtable::set_pte(&cpu, bad_slot, Desc::page(0x4000_0000, PAGE_KERNEL)), e);
        assert_eq!(pgtable::set_ptes(&cpu, bad_slot, Desc::page(0x4000_0000, PAGE_KERNEL), 2, PAGE_SIZE), e);
        assert_eq!(pgtable::set_pmd(&cpu, bad_slot, Desc::block(0x4000_0000, PAGE_KERNEL)), e);
        assert_eq!(pgtable::set_pgd(&cpu, bad_slot, Desc::INVALID), e);
    }
}
