//! Regression tests for the races and silent corruptions the
//! stress runs found (five defects), each written to fail on the code before its fix:
//!
//! 1. `vmap_lazy_nr` dipped below zero when a purge on another CPU took a
//!    lazily freed area before its pages were counted (debug: overflow
//!    panic; release: a count near 2^64). The deterministic proof is the
//!    loom model in vmalloc/src/lazy.rs; the test here races real threads.
//! 2. Two CPUs freeing one page at once both succeeded (refcount -1).
//! 3. `vm_unmap_ram` twice, or with a wrong count, returned Ok and could
//!    free a vmap block under a live mapping.
//! 4. `vmalloc(u64::MAX)` wrapped to a guard-only area (release) or
//!    panicked (debug).
//! 5. A CPU handle of another machine was accepted (and one with an id
//!    beyond this machine's CPUs panicked).

use mmlab_engine::arch::arm64::pgtable::{self, mmu};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Gfp, Machine, PAGE_SIZE, Pfn};
use mmlab_pcp::{AllocError, AllocatorConfig, FreeError, PageAllocator};
use mmlab_tests::{machine, scale};
use mmlab_vmalloc::{Vmalloc, VmallocConfig, VmallocError};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

fn pa(m: &Machine) -> PageAllocator<'_> {
    PageAllocator::boot(m, AllocatorConfig::default()).unwrap()
}

/// Defect 1: three CPUs vfree small areas and purge explicitly, as often as
/// they can, while a fourth thread watches `vmap_lazy_nr`. Before the fix
/// the free path put an area on the lazy list before counting it, and a
/// purge could subtract first: a debug build panicked with "attempt to add
/// with overflow" and the watcher read a count above 2^63.
#[test]
fn lazy_nr_never_goes_negative_under_concurrent_purges() {
    let m = machine("256M", 4);
    let pa = pa(&m);
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpus = m.all_cpus().unwrap();
    let stop = AtomicBool::new(false);
    let lowest = AtomicI64::new(0);
    let rounds = scale(4_000);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Relaxed) {
                lowest.fetch_min(vm.lazy_nr(), Relaxed);
                std::hint::spin_loop();
            }
        });
        let workers: Vec<_> = cpus
            .into_iter()
            .map(|cpu| {
                let vm = &vm;
                s.spawn(move || {
                    for i in 0..rounds {
                        let a = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
                        vm.vfree(&cpu, a).unwrap();
                        if i % 2 == 0 {
                            vm.purge_vmap_area_lazy(&cpu).unwrap();
                        }
                    }
                    cpu
                })
            })
            .collect();
        let cpus: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        stop.store(true, Relaxed);
        vm.purge_vmap_area_lazy(&cpus[0]).unwrap();
    });
    assert!(lowest.load(Relaxed) >= 0, "vmap_lazy_nr read {}", lowest.load(Relaxed));
    assert_eq!(vm.lazy_nr(), 0, "every lazy page was purged");
    vm.check().unwrap();
    pa.check_invariants().unwrap();
}

/// Defect 2: two CPUs free the same order-0 page at the same moment, many
/// times. Exactly one free may succeed; the other gets an error, and the
/// refcount never goes below zero.
#[test]
fn concurrent_double_free_has_exactly_one_winner() {
    let m = machine("64M", 2);
    let pa = pa(&m);
    let mut cpus = m.all_cpus().unwrap().into_iter();
    let (c0, c1) = (cpus.next().unwrap(), cpus.next().unwrap());
    let rounds = scale(20_000) as usize;
    let start = Barrier::new(2);
    let done = Barrier::new(2);
    let page = std::sync::atomic::AtomicU64::new(0);
    let side = |cpu, alloc| free_side(&m, &pa, cpu, alloc, rounds, &start, &done, &page);
    let (wins0, wins1) = std::thread::scope(|s| {
        let t0 = s.spawn(|| side(c0, true));
        let t1 = s.spawn(|| side(c1, false));
        (t0.join().unwrap(), t1.join().unwrap())
    });
    for (i, (a, b)) in wins0.iter().zip(&wins1).enumerate() {
        assert!(a ^ b, "round {i}: {} frees of one page succeeded", u8::from(*a) + u8::from(*b));
    }
    pa.check_invariants().unwrap();
}

/// One side of the double-free race: the allocating side takes a page
/// before each round, then both free it at once.
#[allow(clippy::too_many_arguments)]
fn free_side<'m>(
    m: &Machine,
    pa: &PageAllocator<'m>,
    cpu: mmlab_engine::Cpu<'m>,
    alloc: bool,
    rounds: usize,
    start: &Barrier,
    done: &Barrier,
    page: &std::sync::atomic::AtomicU64,
) -> Vec<bool> {
    let mut wins = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        if alloc {
            page.store(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap().0, Relaxed);
        }
        start.wait();
        let pfn = Pfn(page.load(Relaxed));
        let r = pa.free_pages(&cpu, pfn, 0);
        assert!(matches!(r, Ok(()) | Err(FreeError::DoubleFree { .. } | FreeError::NotAllocated { .. })), "{r:?}");
        wins.push(r.is_ok());
        assert!(m.page(pfn).refcount() >= 0, "refcount of pfn {pfn} went negative");
        done.wait();
    }
    wins
}

/// Defect 3: a second `vm_unmap_ram` of the same mapping and one with the
/// wrong count are refused with nothing changed, however often they are
/// repeated; the block's other mapping stays mapped and the checker sees
/// the block's state.
#[test]
fn vm_unmap_ram_twice_or_with_a_wrong_count_is_refused() {
    let m = machine("64M", 2);
    let pa = pa(&m);
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let pages = |n| (0..n).map(|_| pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap()).collect::<Vec<Pfn>>();
    let (pa_a, pa_b) = (pages(4), pages(3));
    let a = vm.vm_map_ram(&cpu, &pa_a).unwrap();
    let b = vm.vm_map_ram(&cpu, &pa_b).unwrap();
    assert_eq!(b, a + 4 * PAGE_SIZE, "both in one vmap block");
    mmu::write_u64(&cpu, &k, b, 0xb0b).unwrap();

    assert_eq!(
        vm.vm_unmap_ram(&cpu, b, 1),
        Err(VmallocError::WrongCount { addr: b, mapped: 3, given: 1 }),
        "b has 3 pages"
    );
    assert_eq!(
        vm.vm_unmap_ram(&cpu, b, 4),
        Err(VmallocError::WrongCount { addr: b, mapped: 3, given: 4 }),
        "same order"
    );
    assert_eq!(vm.vm_unmap_ram(&cpu, b + PAGE_SIZE, 2), Err(VmallocError::NotVmalloc { addr: b + PAGE_SIZE }));
    vm.vm_unmap_ram(&cpu, a, 4).unwrap();
    let info = vm.vmallocinfo();
    let lazy = vm.lazy_nr();
    // Before the fix each repeat counted 4 more dirty pages: 256 repeats
    // made the block "fully dirty" and freed it under b.
    for _ in 0..300 {
        assert_eq!(vm.vm_unmap_ram(&cpu, a, 4), Err(VmallocError::DoubleFree { addr: a }));
        assert_eq!(vm.vm_unmap_ram(&cpu, a, 1), Err(VmallocError::DoubleFree { addr: a }));
    }
    assert_eq!(vm.vmallocinfo(), info);
    assert_eq!(vm.lazy_nr(), lazy);
    assert_eq!(mmu::read_u64(&cpu, &k, b), Ok(0xb0b), "b is still mapped");
    vm.check().unwrap();

    // A mapping of its own (over VMAP_MAX_ALLOC pages) and a wrong count.
    let big = pages(65);
    let c = vm.vm_map_ram(&cpu, &big).unwrap();
    assert_eq!(vm.vm_unmap_ram(&cpu, c, 64), Err(VmallocError::WrongCount { addr: c, mapped: 65, given: 64 }));
    assert_eq!(vm.vm_unmap_ram(&cpu, c, 66), Err(VmallocError::WrongCount { addr: c, mapped: 65, given: 66 }));
    vm.check().unwrap();
    vm.vm_unmap_ram(&cpu, c, 65).unwrap();
    assert_eq!(vm.vm_unmap_ram(&cpu, c, 65), Err(VmallocError::DoubleFree { addr: c }));
    vm.vm_unmap_ram(&cpu, b, 3).unwrap();
    vm.check().unwrap();
    for p in pa_a.into_iter().chain(pa_b).chain(big) {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// The checker sees a vmap block's state: a live mapping's pages are mapped,
/// and nothing outside them is.
#[test]
fn vmap_block_check_sees_a_stray_mapping() {
    let m = machine("64M", 2);
    let pa = pa(&m);
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    let a = vm.vm_map_ram(&cpu, &[p]).unwrap();
    vm.check().unwrap();
    // Map a page of the block that no vm_map_ram handed out, behind the
    // allocator's back.
    let stray = a + 8 * PAGE_SIZE;
    let k = m.kernel_as();
    pgtable::map_range(&cpu, &k, &pa, stray, p.phys().0, PAGE_SIZE, pgtable::desc::PAGE_KERNEL, Default::default())
        .unwrap()
        .ignore();
    let e = vm.check().unwrap_err();
    assert!(e.contains("not part of a live vm_map_ram mapping"), "{e}");
    pgtable::unmap_range(&cpu, &k, stray, PAGE_SIZE).unwrap().ignore();
    vm.check().unwrap();
}

/// Defect 4: sizes and counts near 2^64 are refused, not wrapped.
#[test]
fn huge_sizes_and_counts_are_refused_without_wrapping() {
    let m = machine("64M", 2);
    let pa = pa(&m);
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let free = pa.nr_free_pages();
    for size in [u64::MAX, u64::MAX - PAGE_SIZE + 2, 1 << 63] {
        assert_eq!(vm.vmalloc(&cpu, size), Err(VmallocError::TooLarge { size }));
        assert_eq!(vm.vmalloc_huge(&cpu, size, Gfp::GFP_KERNEL), Err(VmallocError::TooLarge { size }));
    }
    assert!(matches!(
        vm.__vmalloc_node(&cpu, PAGE_SIZE, 1 << 63, Gfp::GFP_KERNEL),
        Err(VmallocError::NoVmapSpace { .. })
    ));
    assert!(vm.vm_unmap_ram(&cpu, !(PAGE_SIZE - 1), usize::MAX).is_err());
    assert!(vm.vm_unmap_ram(&cpu, mmlab_engine::arch::arm64::memory::VMALLOC_START, usize::MAX).is_err());
    assert!(vm.areas().is_empty());
    assert_eq!(pa.nr_free_pages(), free);
    vm.check().unwrap();
}

/// Defect 5: a handle of another machine, or of a CPU this machine does not
/// have, is refused by every entry point before it touches anything.
#[test]
fn cpu_handles_of_another_machine_are_refused() {
    let a = machine("64M", 2);
    let b = machine("64M", 4);
    let pa_a = pa(&a);
    let pa_b = pa(&b);
    let vm_a = Vmalloc::new(&pa_a, VmallocConfig::default());
    let b3 = b.cpu(3).unwrap();
    let a0 = a.cpu(0).unwrap();
    let free_a = pa_a.nr_free_pages();
    let free_b = pa_b.nr_free_pages();
    let tables_b = pgtable::stats(&b, &b.kernel_as());

    assert_eq!(pa_a.try_alloc_pages(&b3, Gfp::GFP_KERNEL, 0), Err(AllocError::ForeignCpu { cpu: 3 }));
    assert_eq!(pa_a.alloc_pages(&b3, Gfp::GFP_KERNEL, 0), None);
    let mut bulk = [None; 8];
    assert_eq!(pa_a.alloc_pages_bulk(&b3, Gfp::GFP_KERNEL, &mut bulk), 0);
    let p = pa_a.alloc_pages(&a0, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(pa_a.free_pages(&b3, p, 0), Err(FreeError::ForeignCpu { cpu: 3 }));
    assert!(matches!(a.page(p).ext(), PageExt::Alloc(0, _)));
    pa_a.drain_all_pages(&b3);
    pa_a.drain_local_pages(&b3);
    assert!(!pa_a.decay_pcp_high(&b3));

    assert_eq!(vm_a.vmalloc(&b3, PAGE_SIZE), Err(VmallocError::ForeignCpu { cpu: 3 }));
    assert_eq!(vm_a.vmap(&b3, &[p], pgtable::desc::PAGE_KERNEL), Err(VmallocError::ForeignCpu { cpu: 3 }));
    assert_eq!(vm_a.vm_map_ram(&b3, &[p]), Err(VmallocError::ForeignCpu { cpu: 3 }));
    let v = vm_a.vmalloc(&a0, PAGE_SIZE).unwrap();
    assert_eq!(vm_a.vfree(&b3, v), Err(VmallocError::ForeignCpu { cpu: 3 }));
    assert_eq!(vm_a.purge_vmap_area_lazy(&b3), Err(VmallocError::ForeignCpu { cpu: 3 }));
    vm_a.vfree(&a0, v).unwrap();
    pa_a.free_pages(&a0, p, 0).unwrap();

    assert_eq!(pgtable::stats(&b, &b.kernel_as()), tables_b, "nothing was written into b's tables");
    assert_eq!(pa_b.nr_free_pages(), free_b);
    vm_a.purge_vmap_area_lazy(&a0).unwrap();
    pa_a.drain_all_pages(&a0);
    assert!(pa_a.nr_free_pages() <= free_a);
    pa_a.check_invariants().unwrap();
    pa_b.check_invariants().unwrap();
    vm_a.check().unwrap();
}
