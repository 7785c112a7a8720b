//! vmalloc: placement, mapping kinds and their barrier counts, lazy freeing
//! and purges, order-0 frees of huge allocations, and bad input.

use mmlab_engine::arch::arm64::memory::VMALLOC_START;
use mmlab_engine::arch::arm64::pgtable::{self, mmu};
use mmlab_engine::arch::arm64::tlb::TlbiKind;
use mmlab_engine::counters::CounterSet;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, PAGE_SIZE};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{Vmalloc, VmallocConfig, VmallocError};

use mmlab_tests::{barrier_pairs as pairs, counting_machine as machine};

#[test]
fn lowest_address_first_with_a_guard_page_and_memory_that_works() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let a = vm.vmalloc(&cpu, 1).unwrap();
    assert_eq!(a, VMALLOC_START, "the lowest free address");
    let b = vm.vmalloc(&cpu, 3 * PAGE_SIZE).unwrap();
    assert_eq!(b, VMALLOC_START + 2 * PAGE_SIZE, "after a's page and its guard page");
    let k = m.kernel_as();
    mmu::write_u64(&cpu, &k, b + 2 * PAGE_SIZE + 8, 0x5151).unwrap();
    assert_eq!(mmu::read_u64(&cpu, &k, b + 2 * PAGE_SIZE + 8), Ok(0x5151));
    assert!(mmu::read_u64(&cpu, &k, b + 3 * PAGE_SIZE).is_err(), "the guard page is not mapped");
    let z = vm.vzalloc(&cpu, PAGE_SIZE).unwrap();
    assert_eq!(mmu::read_u64(&cpu, &k, z + 16), Ok(0));
    vm.vfree(&cpu, b).unwrap();
    assert_eq!(vm.lazy_nr(), 4, "three pages and the guard wait for a purge");
    // The freed range is not reused before a purge.
    let c = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    assert!(c > z);
    vm.check().unwrap();
    for x in [a, c, z] {
        vm.vfree(&cpu, x).unwrap();
    }
    assert!(vm.purge_vmap_area_lazy(&cpu).unwrap());
    assert_eq!(vm.lazy_nr(), 0);
    vm.check().unwrap();
    pa.check_invariants().unwrap();
}

#[test]
fn barrier_pairs_per_vmalloc_batched_and_unbatched() {
    for batching in [true, false] {
        let m = machine("64M", batching);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        let cpu = m.cpu(0).unwrap();
        // Warm up: the first vmalloc allocates the pud, pmd and pte tables.
        let w = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
        vm.vfree(&cpu, w).unwrap();
        for pages in [1u64, 16, 64, 256] {
            let b = cpu.arch_data().barriers.snapshot();
            let a = vm.vmalloc(&cpu, pages * PAGE_SIZE).unwrap();
            // All of it lies in one PTE table (the range is 2 MiB aligned and
            // nothing here crosses a table boundary).
            assert!(pgtable::Level::Pte.index(a) as u64 + pages <= 512);
            let want = if batching { 1 } else { pages };
            assert_eq!(pairs(&cpu, b), (want, want), "batching={batching} pages={pages}");
            vm.vfree(&cpu, a).unwrap();
        }
    }
}

/// The lazy-MMU thread-flag atomics of one vmalloc+vfree (6.16's arm64
/// hooks): the map's section sets `TIF_LAZY_MMU`, sets and test-and-clears
/// `TIF_LAZY_MMU_PENDING` and clears `TIF_LAZY_MMU` (4); the unmap's section,
/// clears only, sets and clears `TIF_LAZY_MMU` (2). Before 6.16 arm64 had no
/// hooks: none. vm_map_ram and vm_unmap_ram take the same sections and are
/// counted as calls, with their PTEs.
#[test]
fn lazy_mmu_flag_atomics_and_vm_map_ram_counts() {
    for batching in [true, false] {
        let m = machine("64M", batching);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        let cpu = m.cpu(0).unwrap();
        let ops = || m.vm_events().get(VmEvent::LazyMmuFlagOps);
        let w = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
        vm.vfree(&cpu, w).unwrap();
        let o = ops();
        let a = vm.vmalloc(&cpu, 16 * PAGE_SIZE).unwrap();
        let mapped = ops() - o;
        vm.vfree(&cpu, a).unwrap();
        let per_call = if batching { (4, 6) } else { (0, 0) };
        assert_eq!((mapped, ops() - o), per_call, "batching={batching}: one section per PTE table, 16 pages");

        let mut pages = vec![None; 2];
        assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut pages), 2);
        let pages: Vec<_> = pages.into_iter().flatten().collect();
        let (c, o) = (vm.counts(), ops());
        let r = vm.vm_map_ram(&cpu, &pages).unwrap();
        vm.vm_unmap_ram(&cpu, r, 2).unwrap();
        let d = vm.counts().delta(&c);
        assert_eq!((d.vm_map_rams, d.vm_unmap_rams, d.pte_entries), (1, 1, 4), "two PTEs written, two cleared");
        assert_eq!((d.vmallocs, d.vfrees), (0, 0), "vm_map_ram is not a vmalloc");
        assert_eq!(ops() - o, per_call.1);
        assert!(vm.vm_unmap_ram(&cpu, r, 2).is_err());
        assert_eq!(vm.counts().delta(&c).vm_unmap_rams, 1, "a refused unmap is not counted");
        for p in pages {
            pa.free_pages(&cpu, p, 0).unwrap();
        }
    }
}

#[test]
fn contpte_and_pmd_huge_mappings() {
    // The addresses below are derived from VMALLOC_START: bare RAM, no
    // kernel image areas before the first vmalloc.
    let m = mmlab_tests::boot(mmlab_engine::MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        ..mmlab_engine::MachineConfig::with("256M", 2).unwrap().bare()
    })
    .unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let w = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    vm.vfree(&cpu, w).unwrap();
    // 1 MiB with VM_ALLOW_HUGE_VMAP: 16 contiguous 64 KiB runs, each mapped
    // by its own vmap_pte_range (one lazy section, one pair each).
    let zl = m.vm_events().get(VmEvent::ZoneLockAcquire);
    let b = cpu.arch_data().barriers.snapshot();
    let entries = |vm: &Vmalloc| vm.counts().pte_entries;
    let e0 = entries(&vm);
    let a = vm.vmalloc_huge(&cpu, 1 << 20, Gfp::GFP_KERNEL).unwrap();
    assert_eq!(entries(&vm) - e0, 256, "a contiguous run writes all 16 of its PTEs");
    assert_eq!(a % (64 << 10), 0, "64 KiB aligned");
    assert_eq!(pgtable::leaves(&m, &k, a, a + (1 << 20)).len(), 16, "16 TLB entries for 1 MiB");
    assert_eq!(pairs(&cpu, b), (16, 16));
    // 7.2 takes the 256 pages as one order-8 block (vmalloc.large_order_pages),
    // not as 16 order-4 blocks with one zone-lock hold each (6.x): the
    // mapping is the same 16 contiguous runs.
    let zl = m.vm_events().get(VmEvent::ZoneLockAcquire) - zl;
    assert!((1..16).contains(&zl), "{zl} zone-lock holds");
    let area = vm.areas().into_iter().find(|x| x.addr == a).unwrap();
    assert_eq!(area.page_order, 4);
    assert_eq!(area.pages.len(), 256);
    // The same size without the huge flag: 256 PTEs, one pair.
    let b = cpu.arch_data().barriers.snapshot();
    let s = vm.vmalloc(&cpu, 1 << 20).unwrap();
    assert_eq!(pgtable::leaves(&m, &k, s, s + (1 << 20)).len(), 256);
    // It starts at PTE index 0x111 (after the 1 MiB area, its guard and the
    // 64 KiB alignment gap), so it spans two PTE tables, the second new:
    // pmd_populate's pair outside the sections plus one pair per section.
    assert_eq!(pgtable::Level::Pte.index(s), 0x111);
    assert_eq!(pairs(&cpu, b), (3, 3));
    // 2 MiB huge: one PMD block, one leaf entry written.
    let e0 = entries(&vm);
    let h = vm.vmalloc_huge(&cpu, 2 << 20, Gfp::GFP_KERNEL).unwrap();
    assert_eq!(entries(&vm) - e0, 1, "one PMD entry for 512 pages");
    assert_eq!(h % (2 << 20), 0);
    let leaves = pgtable::leaves(&m, &k, h, h + (2 << 20));
    assert_eq!(leaves, vec![(h, 2 << 20)], "one block");
    mmu::write_u64(&cpu, &k, h + (1 << 20), 7).unwrap();
    assert_eq!(mmu::read_u64(&cpu, &k, h + (1 << 20)), Ok(7));
    // Every page of a huge vmalloc comes back as an order-0 free.
    let freed = m.vm_events().get(VmEvent::Pgfree);
    vm.vfree(&cpu, a).unwrap();
    assert_eq!(m.vm_events().get(VmEvent::Pgfree) - freed, 256, "256 order-0 frees of one page each");
    let e0 = entries(&vm);
    for x in [s, h] {
        vm.vfree(&cpu, x).unwrap();
    }
    assert_eq!(entries(&vm) - e0, 256 + 1, "each vfree clears the entries its vmalloc wrote");
    vm.purge_vmap_area_lazy(&cpu).expect("a CPU of this machine");
    vm.check().unwrap();
    pa.check_invariants().unwrap();
}

#[test]
fn purge_triggers_past_lazy_max_pages_with_one_flush() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    // 2 CPUs: fls(2) * 8192 = 16384 pages.
    assert_eq!(vm.lazy_max_pages(), 16384);
    // Each 1-page vmalloc takes 2 pages of VA (guard); 8192 vfrees make
    // exactly 16384 lazy pages, which is not yet over the limit.
    for _ in 0..8192 {
        let a = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
        vm.vfree(&cpu, a).unwrap();
    }
    assert_eq!(vm.counts().purges, 0);
    assert_eq!(vm.lazy_nr(), 16384);
    let before = m.tlbi_counts();
    let a = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    vm.vfree(&cpu, a).unwrap();
    assert_eq!(vm.counts().purges, 1, "the 8193rd vfree goes over and purges");
    assert_eq!(vm.lazy_nr(), 0);
    let t = m.tlbi_counts().delta(&before);
    // One flush_tlb_kernel_range over 16386 pages. The default profile's
    // CPU (Neoverse N1) has no range TLBIs, so past MAX_DVM_OPS (512) pages
    // the kernel flushes everything: one vmalle1is. (With FEAT_TLBIRANGE,
    // as the M2, it would be one range op per scale with pages left.)
    assert!(t.get(TlbiKind::Vmalle1is) == 1 && t.total() == 1, "{t}");
    vm.check().unwrap();
}

#[test]
fn bad_input_changes_nothing() {
    let m = machine("32M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let free0 = pa.nr_free_pages() + pa.pcp_pages();
    let a = vm.vmalloc(&cpu, 3 * PAGE_SIZE).unwrap();
    assert_eq!(vm.vfree(&cpu, a + PAGE_SIZE), Err(VmallocError::InsideArea { addr: a + PAGE_SIZE, start: a }));
    assert_eq!(
        vm.vfree(&cpu, VMALLOC_START + (1 << 30)),
        Err(VmallocError::NotVmalloc { addr: VMALLOC_START + (1 << 30) })
    );
    assert_eq!(vm.vunmap(&cpu, a), Err(VmallocError::WrongKind { addr: a }));
    vm.vfree(&cpu, a).unwrap();
    assert_eq!(vm.vfree(&cpu, a), Err(VmallocError::DoubleFree { addr: a }));
    assert_eq!(vm.vmalloc(&cpu, 0), Err(VmallocError::ZeroSize));
    assert!(matches!(vm.vmalloc(&cpu, 1 << 40), Err(VmallocError::TooLarge { .. })));
    assert_eq!(
        vm.__vmalloc_node(&cpu, PAGE_SIZE, 3 * PAGE_SIZE, Gfp::GFP_KERNEL),
        Err(VmallocError::BadAlign { align: 3 * PAGE_SIZE })
    );
    // Out of memory halfway: ask for more pages than are free.
    let free_pages = (pa.nr_free_pages() + pa.pcp_pages()) as u64;
    let r = vm.vmalloc(&cpu, (free_pages - 64) * PAGE_SIZE);
    assert!(matches!(r, Err(VmallocError::NoMemory { .. })), "{r:?}");
    vm.purge_vmap_area_lazy(&cpu).expect("a CPU of this machine");
    pa.drain_all_pages(&cpu);
    vm.check().unwrap();
    pa.check_invariants().unwrap();
    // Every page came back, except the vmalloc range's page tables, which
    // stay (as the kernel's do).
    let tables = pgtable::stats(&m, &m.kernel_as()).tables.iter().sum::<u64>() as i64;
    // swapper_pg_dir; the vmemmap's pud, pmd, pte (32M: a partial
    // section); the linear map's pud, pmd and 16 pte tables (one per
    // 2 MiB); the fixmap's bm_pud, bm_pmd and three bm_pte (7.2's slots
    // span three PMDs).
    let boot_tables = 1 + 3 + (1 + 1 + 16) + 5;
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free0 - (tables - boot_tables));
}

#[test]
fn vm_map_ram_uses_vmap_blocks_and_vmallocinfo_shows_them() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let mut pages = vec![None; 3];
    assert_eq!(pa.alloc_pages_bulk(&cpu, Gfp::GFP_KERNEL, &mut pages), 3);
    let pages: Vec<_> = pages.into_iter().flatten().collect();
    // 3 pages take 4 (2^get_order) from a 4 MiB block aligned to 4 MiB.
    let a = vm.vm_map_ram(&cpu, &pages).unwrap();
    assert_eq!(a % mmlab_vmalloc::VMAP_BLOCK_SIZE, 0);
    let b = vm.vm_map_ram(&cpu, &pages).unwrap();
    assert_eq!(b, a + 4 * PAGE_SIZE, "bump allocation in the same block");
    mmu::write_u64(&cpu, &k, b + 2 * PAGE_SIZE, 0x61).unwrap();
    assert_eq!(mmu::read_u64(&cpu, &k, a + 2 * PAGE_SIZE), Ok(0x61), "both map the same pages");
    let info = vm.vmallocinfo();
    assert!(info.contains(&format!("0x{a:016x}-0x{:016x} 4194304 vm_map_ram\n", a + (4 << 20))), "{info}");
    vm.vm_unmap_ram(&cpu, a, 3).unwrap();
    vm.vm_unmap_ram(&cpu, b, 3).unwrap();
    // Unmapped without a flush: the translation this CPU cached for a + 2
    // pages is stale but still hits, as on hardware; a page never touched
    // walks and faults. (The block is dirty, not reusable, until the purge.)
    assert!(mmu::translate(&cpu, &k, a + 2 * PAGE_SIZE, mmu::Access::READ).is_ok());
    assert!(mmu::translate(&cpu, &k, a, mmu::Access::READ).is_err());
    // A vmalloc area shows with its caller, pages and flags.
    let v = vm.vmalloc(&cpu, 3 * PAGE_SIZE).unwrap();
    let info = vm.vmallocinfo();
    assert!(
        info.contains(&format!("0x{v:016x}-0x{:016x}   16384 vmalloc pages=3 vmalloc N0=3\n", v + 4 * PAGE_SIZE)),
        "{info}"
    );
    let mi = vm.meminfo();
    assert!(mi.starts_with("VmallocTotal:   "), "{mi}");
    assert!(mi.contains("VmallocUsed:          12 kB\n"), "{mi}");
    assert!(mi.ends_with("VmallocChunk:          0 kB\n"), "{mi}");
    vm.vfree(&cpu, v).unwrap();
    assert!(vm.vmallocinfo().contains("unpurged vm_area"));
    vm.check().unwrap();
    for p in pages {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
}

#[test]
fn percpu_allocations_share_offsets_across_units_and_free_cleanly() {
    use mmlab_vmalloc::percpu::{PCPU_UNIT_SIZE, PercpuAllocator, PercpuError};
    let m = machine("256M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let pcpu = PercpuAllocator::new();
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let a = pcpu.alloc_percpu(&vm, &cpu, 8, 8).unwrap();
    let b = pcpu.alloc_percpu(&vm, &cpu, 100, 64).unwrap();
    assert_eq!(b % 64, 0);
    assert_eq!(b - a, 64, "first fit: 8 bytes at 0, then the next 64-byte boundary");
    // Each CPU has its own copy at the same offset in its unit.
    mmu::write_u64(&cpu, &k, PercpuAllocator::per_cpu_ptr(a, 1), 11).unwrap();
    assert_eq!(mmu::read_u64(&cpu, &k, a), Ok(0));
    assert_eq!(mmu::read_u64(&cpu, &k, a + PCPU_UNIT_SIZE), Ok(11));
    // Freeing a re-opens exactly its slots; b keeps its size.
    pcpu.free_percpu(&vm, &cpu, a).unwrap();
    assert_eq!(pcpu.alloc_percpu(&vm, &cpu, 64, 4).unwrap(), a);
    assert_eq!(pcpu.free_percpu(&vm, &cpu, b + 4), Err(PercpuError::NotPercpu { ptr: b + 4 }));
    assert!(matches!(pcpu.alloc_percpu(&vm, &cpu, 0, 4), Err(PercpuError::BadRequest { .. })));
    // Alignments below 4 are raised to 4 first, as pcpu_alloc does; 12 is refused.
    assert!(matches!(pcpu.alloc_percpu(&vm, &cpu, 8, 12), Err(PercpuError::BadRequest { .. })));
    // pcpu_alloc_test's shape at a smaller count: many sizes and alignments.
    let mut rng = mmlab_engine::rng::Xoshiro256StarStar::seed_from_u64(3);
    let mut ptrs = vec![];
    for _ in 0..2000 {
        let size = 1 + rng.below(1024);
        let align = 1u64 << (1 + rng.below(11));
        let p = pcpu.alloc_percpu(&vm, &cpu, size, align).unwrap();
        assert_eq!(p % align.max(4), 0);
        ptrs.push(p);
    }
    assert!(pcpu.nr_chunks() > 1);
    for p in ptrs {
        pcpu.free_percpu(&vm, &cpu, p).unwrap();
    }
    pcpu.free_percpu(&vm, &cpu, a).unwrap();
    pcpu.free_percpu(&vm, &cpu, b).unwrap();
    assert_eq!(pcpu.nr_chunks(), 1, "empty chunks are destroyed, one is kept");
    vm.check().unwrap();
}

#[test]
fn two_cpus_filling_the_same_table_slots_lose_nothing() {
    // Both CPUs vmalloc into fresh parts of the range at once, so both
    // need the same missing pmd/pte tables; the loser of each race must
    // free its table and use the winner's (__pte_alloc_kernel).
    let m = machine("512M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let free0 = pa.nr_free_pages() + pa.pcp_pages();
    let tables0: u64 = pgtable::stats(&m, &m.kernel_as()).tables.iter().sum();
    let n = mmlab_tests::scale(3000);
    let addrs: Vec<Vec<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|c| {
                let (m, vm) = (&m, &vm);
                s.spawn(move || {
                    let cpu = m.cpu(c).unwrap();
                    (0..n).map(|_| vm.vmalloc(&cpu, 3 * PAGE_SIZE).unwrap()).collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    for &a in addrs.iter().flatten() {
        mmu::write_u64(&cpu, &k, a + 2 * PAGE_SIZE, a).unwrap();
        assert_eq!(mmu::read_u64(&cpu, &k, a + 2 * PAGE_SIZE), Ok(a));
    }
    for &a in addrs.iter().flatten() {
        vm.vfree(&cpu, a).unwrap();
    }
    vm.purge_vmap_area_lazy(&cpu).expect("a CPU of this machine");
    pa.drain_all_pages(&cpu);
    vm.check().unwrap();
    pa.check_invariants().unwrap();
    let tables: u64 = pgtable::stats(&m, &m.kernel_as()).tables.iter().sum();
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free0 - (tables - tables0) as i64, "only kept tables are gone");
}

#[test]
fn kvfree_rcu_frees_only_after_a_grace_period() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let a = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    mmu::write_u64(&cpu, &k, a + 16, 0x77).unwrap();
    vm.kvfree_rcu(&cpu, a).unwrap();
    assert_eq!(vm.kvfree_pending(), 1, "queued, not freed: a reader may still hold it");
    assert_eq!(mmu::read_u64(&cpu, &k, a + 16), Ok(0x77), "still mapped and intact");
    assert_eq!(vm.kvfree_rcu(&cpu, a), Err(VmallocError::DoubleFree { addr: a }));
    // This CPU passes a quiescent state (the only online CPU): the grace
    // period ends, and the next vfree frees the queued object first.
    mmlab_engine::kernel::rcu::rcu_quiescent_state(&cpu);
    let gp = m.rcu_counts().grace_periods;
    assert!(gp >= 1);
    let b = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    vm.vfree(&cpu, b).unwrap();
    assert_eq!(vm.kvfree_pending(), 0);
    assert_eq!(vm.vfree(&cpu, a), Err(VmallocError::DoubleFree { addr: a }), "a was freed by the RCU path");
    // The mightsleep form queues too (the kernel's bulk path; it waits for
    // a grace period itself only when no bulk page can be had), and its
    // might_sleep() is a quiescent state that ends the grace period at once
    // on this one-CPU machine; nothing waited in synchronize_rcu.
    let c = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    let sync_before = m.rcu_counts().synchronize_rcu;
    vm.kvfree_rcu_mightsleep(&cpu, c).unwrap();
    assert_eq!(vm.kvfree_pending(), 1);
    mmlab_engine::kernel::rcu::rcu_quiescent_state(&cpu);
    let d = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    vm.vfree(&cpu, d).unwrap();
    assert_eq!(vm.kvfree_pending(), 0);
    assert!(m.rcu_counts().grace_periods > gp);
    assert_eq!(m.rcu_counts().synchronize_rcu, sync_before);
    vm.purge_vmap_area_lazy(&cpu).expect("a CPU of this machine");
    vm.check().unwrap();
}

/// `vrealloc()` of an area queued by `kvfree_rcu()` is a use after free,
/// refused as `vfree` refuses it; before the fix (found by `mmlab fuzz`) a
/// shrink went ahead on memory the queue frees later, and a grow allocated
/// the new area, failed to free the old one, and lost the new one.
#[test]
fn vrealloc_of_an_area_queued_by_kvfree_rcu_is_a_double_free() {
    let m = machine("64M", false);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let a = vm.vmalloc(&cpu, 3 * PAGE_SIZE).unwrap();
    mmu::write_u64(&cpu, &k, a + 8, 0x5a).unwrap();
    vm.kvfree_rcu(&cpu, a).unwrap();
    pa.drain_all_pages(&cpu);
    let free = pa.nr_free_pages();
    let busy = vm.areas().len();
    for size in [PAGE_SIZE, 2 * PAGE_SIZE, 3 * PAGE_SIZE, 8 * PAGE_SIZE] {
        assert_eq!(vm.vrealloc(&cpu, Some(a), size, Gfp::GFP_KERNEL), Err(VmallocError::DoubleFree { addr: a }));
    }
    pa.drain_all_pages(&cpu);
    assert_eq!((pa.nr_free_pages(), vm.areas().len(), vm.kvfree_pending()), (free, busy, 1), "nothing changed");
    assert_eq!(vm.areas().iter().find(|x| x.addr == a).map(|x| x.pages.len()), Some(3));
    assert_eq!(mmu::read_u64(&cpu, &k, a + 8), Ok(0x5a));
    vm.kvfree_rcu_barrier(&cpu).unwrap();
    assert_eq!(vm.vrealloc(&cpu, Some(a), PAGE_SIZE, Gfp::GFP_KERNEL), Err(VmallocError::DoubleFree { addr: a }));
    vm.purge_vmap_area_lazy(&cpu).unwrap();
    vm.check().unwrap();
}

#[test]
fn purged_small_ranges_go_to_their_node_pool() {
    // Two CPUs: two vmap nodes, so purged ranges of up to 256 pages wait in
    // the pool of the node that allocated them (node_pool_add_va) and are
    // handed out again first to that node's CPUs (node_alloc).
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
    let a = vm.vmalloc(&c0, PAGE_SIZE).unwrap();
    let spacer = vm.vmalloc(&c0, PAGE_SIZE).unwrap();
    vm.vfree(&c0, a).unwrap();
    let before = vm.free_bytes();
    assert!(vm.purge_vmap_area_lazy(&c0).unwrap());
    assert_eq!(vm.free_bytes(), before, "the range went to node 0's pool, not the free tree");
    vm.check().unwrap();
    let b = vm.vmalloc(&c1, PAGE_SIZE).unwrap();
    assert_ne!(b, a, "CPU 1's node pool is empty: the tree serves it");
    let c = vm.vmalloc(&c0, PAGE_SIZE).unwrap();
    assert_eq!(c, a, "CPU 0 gets its node's pooled range back");
    for x in [b, c, spacer] {
        vm.vfree(&c0, x).unwrap();
    }
    vm.check().unwrap();
}

/// Bad input is refused: vmap and vm_map_ram of pages that are not RAM, or not
/// allocated, are refused before anything is taken (the kernel maps any
/// pfn it is given; mmlab would map a hole or a free page).
#[test]
fn vmap_and_vm_map_ram_refuse_pages_outside_ram_or_free() {
    use mmlab_engine::Pfn;
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let good = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    let free_page = {
        let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
        pa.free_pages(&cpu, p, 0).unwrap();
        p
    };
    let memmap = m.memblock().reservations().find(|r| r.name == "memmap").unwrap().base.pfn();
    let end = m.memmap().end_pfn();
    let stats = pgtable::stats(&m, &k);
    let free_va = vm.free_bytes();
    let nr_free = pa.nr_free_pages() + pa.pcp_pages();
    let cases: [(Vec<Pfn>, VmallocError); 5] = [
        (vec![good, Pfn(0)], VmallocError::InvalidPfn { pfn: Pfn(0) }),
        (vec![good, end], VmallocError::InvalidPfn { pfn: end }),
        (vec![Pfn(u64::MAX >> 12)], VmallocError::InvalidPfn { pfn: Pfn(u64::MAX >> 12) }),
        (vec![good, free_page], VmallocError::PageNotAllocated { pfn: free_page }),
        (vec![memmap, good], VmallocError::PageNotAllocated { pfn: memmap }),
    ];
    for (pages, want) in &cases {
        assert_eq!(vm.vmap(&cpu, pages, pgtable::desc::PAGE_KERNEL), Err(*want));
        assert_eq!(vm.vm_map_ram(&cpu, pages), Err(*want));
        // A vm_map_ram that would need an area of its own, too.
        let mut many = vec![good; 70];
        many.extend(pages);
        assert_eq!(vm.vm_map_ram(&cpu, &many), Err(*want));
    }
    assert_eq!(vm.free_bytes(), free_va, "no virtual space taken");
    assert!(vm.areas().is_empty());
    assert!(!vm.vmallocinfo().contains("vm_map_ram"), "no vmap block taken");
    assert_eq!(pgtable::stats(&m, &k), stats, "no table touched");
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), nr_free);
    vm.check().unwrap();
    pa.check_invariants().unwrap();

    // Pages inside a higher-order allocation are allocated pages: vmap
    // takes them, as the kernel's does.
    let block = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    let a = vm.vmap(&cpu, &[block.add(3), block.add(1), good], pgtable::desc::PAGE_KERNEL).unwrap();
    mmu::write_u64(&cpu, &k, a + 16, 0x77).unwrap();
    assert_eq!(
        m.arena().word(mmlab_engine::PhysAddr(block.add(3).phys().0 + 16)).load(std::sync::atomic::Ordering::Relaxed),
        0x77
    );
    vm.vunmap(&cpu, a).unwrap();
    vm.check().unwrap();
}

/// `vrealloc()` as 7.2's test_vmalloc vrealloc_test calls it: a grow past
/// the pages reallocates and copies, a shrink across a page boundary unmaps
/// and frees the tail (with one TLB flush), a shrink or grow within the
/// pages stays in place; every page comes back.
#[test]
fn vrealloc_grows_by_copy_and_shrinks_in_place() {
    let m = machine("64M", true);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    // Warm up the vmalloc range's tables, then count from a drained state.
    let w = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
    vm.vfree(&cpu, w).unwrap();
    pa.drain_all_pages(&cpu);
    let free_before = pa.nr_free_pages();
    let before = m.vm_events();

    let p = vm.vrealloc(&cpu, None, PAGE_SIZE, Gfp::GFP_KERNEL).unwrap().unwrap();
    mmu::write_u64(&cpu, &k, p + 8, 0xa5a5).unwrap();
    let q = vm.vrealloc(&cpu, Some(p), 4 * PAGE_SIZE, Gfp::GFP_KERNEL).unwrap().unwrap();
    assert_ne!(q, p, "growing past the allocated pages moves the area");
    assert_eq!(mmu::read_u64(&cpu, &k, q + 8), Ok(0xa5a5), "the contents were copied");
    assert_eq!(vm.areas().iter().find(|a| a.addr == q).map(|a| a.pages.len()), Some(4));

    let tlbis = m.tlbi_counts();
    let entries = vm.counts().pte_entries;
    assert_eq!(vm.vrealloc(&cpu, Some(q), PAGE_SIZE, Gfp::GFP_KERNEL), Ok(Some(q)), "a shrink stays in place");
    assert_eq!(vm.counts().pte_entries - entries, 3, "the three tail PTEs cleared");
    assert!(m.tlbi_counts().delta(&tlbis).total() > 0, "the unmapped tail is flushed at once (vunmap_range)");
    let area = vm.areas().into_iter().find(|a| a.addr == q).unwrap();
    assert_eq!((area.pages.len(), area.requested_size), (1, PAGE_SIZE), "the three tail pages are freed");
    assert!(mmu::read_u64(&cpu, &k, q + PAGE_SIZE).is_err(), "the tail is unmapped");
    assert_eq!(vm.vrealloc(&cpu, Some(q), PAGE_SIZE / 2, Gfp::GFP_KERNEL), Ok(Some(q)));
    assert_eq!(vm.vrealloc(&cpu, Some(q), PAGE_SIZE, Gfp::GFP_KERNEL), Ok(Some(q)), "a grow within the page");
    assert_eq!(mmu::read_u64(&cpu, &k, q + 8), Ok(0xa5a5));
    // GFP_NOFS does not free tail pages (kmemleak may allocate with GFP_KERNEL).
    let r = vm.vrealloc(&cpu, None, 3 * PAGE_SIZE, Gfp::GFP_KERNEL).unwrap().unwrap();
    assert_eq!(vm.vrealloc(&cpu, Some(r), PAGE_SIZE, Gfp::GFP_NOFS), Ok(Some(r)));
    assert_eq!(vm.areas().iter().find(|a| a.addr == r).map(|a| a.pages.len()), Some(3));
    assert_eq!(vm.vrealloc(&cpu, Some(r), 2 * PAGE_SIZE, Gfp::GFP_KERNEL), Ok(Some(r)), "within the pages");

    assert_eq!(
        vm.vrealloc(&cpu, Some(q + PAGE_SIZE), PAGE_SIZE, Gfp::GFP_KERNEL),
        Err(VmallocError::InsideArea { addr: q + PAGE_SIZE, start: q })
    );
    assert_eq!(vm.vrealloc(&cpu, Some(q), 0, Gfp::GFP_KERNEL), Ok(None), "size 0 frees");
    assert_eq!(vm.vrealloc(&cpu, Some(r), 0, Gfp::GFP_KERNEL), Ok(None));
    // 1 + 4 + 3 pages allocated, 1 + 3 + 1 + 3 freed.
    let d = m.vm_events().delta(&before);
    assert_eq!((d.pgalloc(), d.pgfree), (8, 8));
    vm.purge_vmap_area_lazy(&cpu).unwrap();
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.nr_free_pages(), free_before, "no page is lost");
    vm.check().unwrap();
    pa.check_invariants().unwrap();
}

/// The vmalloc-range mappings the boot makes besides vmalloc: an ioremap
/// aligned to its size's power of two, with a guard page, `phys=` and
/// `ioremap` in /proc/vmallocinfo, lazily freed by `iounmap`; a DMA remap
/// (`dma-coherent`, no `pages=`); a percpu chunk's area at the top of the
/// range, without a guard page and without pages of its own.
#[test]
fn ioremap_dma_remap_and_percpu_areas_print_as_the_kernels() {
    let m = mmlab_tests::bare_machine("64M", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    // GICD on the virt machine: 64 KiB at 0x08000000.
    let gic = vm.ioremap(&cpu, 0x0800_0000, 0x1_0000, "__ioremap_prot+0x6c/0xe0").unwrap();
    assert_eq!(gic % 0x1_0000, 0);
    // The page offset is kept; the area is one page and a guard page.
    let uart = vm.ioremap(&cpu, 0x0900_0010, 0x100, "__ioremap_prot+0x6c/0xe0").unwrap();
    assert_eq!(uart % PAGE_SIZE, 0x10);
    let info = vm.vmallocinfo();
    assert!(info.contains(&format!(
        "0x{gic:016x}-0x{:016x}   69632 __ioremap_prot+0x6c/0xe0 phys=0x0000000008000000 ioremap\n",
        gic + 0x1_1000
    )));
    let pages: Vec<_> = (0..4).map(|_| pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap()).collect();
    pa.free_pages(&cpu, pages[1], 0).unwrap();
    let first = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 2).unwrap();
    pa.split_page(first, 2).unwrap();
    let dma = vm.dma_common_contiguous_remap(&cpu, first, 4, "dma_common_contiguous_remap+0x9c/0xd0").unwrap();
    assert!(vm.vmallocinfo().contains(&format!(
        "0x{dma:016x}-0x{:016x}   20480 dma_common_contiguous_remap+0x9c/0xd0 dma-coherent\n",
        dma + 5 * PAGE_SIZE
    )));
    let end = mmlab_engine::arch::arm64::memory::VaLayout::VA48.vmalloc_end();
    let chunk = vm.pcpu_get_vm_areas(&cpu, 2 * 147_456, PAGE_SIZE).unwrap();
    assert_eq!(chunk, end - 2 * 147_456);
    assert!(
        vm.vmallocinfo()
            .ends_with(&format!("0x{chunk:016x}-0x{end:016x}  294912 pcpu_get_vm_areas+0x0/0x10c8 vmalloc\n"))
    );
    vm.pcpu_map_pages(&cpu, chunk, &pages[2..]).unwrap();
    assert_eq!(vm.pcpu_map_pages(&cpu, gic, &pages[2..]), Err(VmallocError::NotVmalloc { addr: gic }));
    // None of them is vmalloc's: vfree refuses them, nr_vmalloc has none.
    assert_eq!(vm.vfree(&cpu, gic), Err(VmallocError::WrongKind { addr: gic }));
    assert_eq!(vm.meminfo_counts().nr_vmalloc, 0);
    vm.iounmap(&cpu, uart).unwrap();
    assert!(vm.vmallocinfo().contains(&format!(
        "0x{:016x}-0x{:016x}    8192 unpurged vm_area\n",
        uart - 0x10,
        uart - 0x10 + 2 * PAGE_SIZE
    )));
    assert_eq!(vm.iounmap(&cpu, dma), Err(VmallocError::WrongKind { addr: dma }));
    vm.check().unwrap();
}
