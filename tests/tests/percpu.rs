//! The percpu allocator (mm/percpu.c): its chunk hints stay exact under a
//! random alloc/free sequence, and a search costs one bitmap scan per
//! allocation however many chunks exist.

use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_tests::{machine, scale};
use mmlab_vmalloc::percpu::PercpuAllocator;
use mmlab_vmalloc::{Vmalloc, VmallocConfig};

/// test_vmalloc's `pcpu_alloc_test` draw: size in [1, PAGE_SIZE / 4], align
/// `1 << [1, 11]`.
fn draw(rng: &mut Xoshiro256StarStar) -> (u64, u64) {
    (1 + rng.below(1024), 1 << (1 + rng.below(11)))
}

#[test]
fn hints_stay_exact_under_random_alloc_and_free() {
    let m = machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let pcpu = PercpuAllocator::new();
    let mut rng = Xoshiro256StarStar::seed_from_u64(9);
    let mut live = Vec::new();
    for step in 0..scale(4000) {
        if live.is_empty() || rng.below(5) < 3 {
            let (size, align) = draw(&mut rng);
            let p = pcpu.alloc_percpu(&vm, &cpu, size, align).unwrap();
            assert_eq!(p % align, 0, "{size} bytes at align {align} came back at {p:#x}");
            live.push(p);
        } else {
            let p = live.swap_remove(rng.below(live.len() as u64) as usize);
            pcpu.free_percpu(&vm, &cpu, p).unwrap();
        }
        if step % 97 == 0 {
            pcpu.check(&vm).unwrap_or_else(|e| panic!("step {step}: {e}"));
        }
    }
    for p in live {
        pcpu.free_percpu(&vm, &cpu, p).unwrap();
    }
    pcpu.check(&vm).unwrap();
    assert_eq!(pcpu.nr_chunks(), 1, "every chunk but the last is destroyed when it empties");
    pcpu.shrink(&vm, &cpu).unwrap();
    assert_eq!(pcpu.nr_chunks(), 0);
    let c = pcpu.counts();
    assert_eq!(c.chunks_created, c.chunks_destroyed);
    assert_eq!(c.allocs, c.frees);
}

/// The regression: with a size-only chunk filter, 35,000 objects of
/// test_vmalloc's draw scanned every partly used chunk per allocation (debug
/// runs of `test-vmalloc run_test_mask=128 nr_threads=3` took hours). The
/// alignment-aware hint makes every scan succeed.
#[test]
fn one_bitmap_scan_per_allocation() {
    let m = machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let pcpu = PercpuAllocator::new();
    let mut rng = Xoshiro256StarStar::seed_from_u64(2);
    let n = scale(12_000);
    let ptrs: Vec<u64> = (0..n)
        .map(|_| {
            let (size, align) = draw(&mut rng);
            pcpu.alloc_percpu(&vm, &cpu, size, align).unwrap()
        })
        .collect();
    let c = pcpu.counts();
    assert!(c.chunks_created > 20 || n < 12_000, "the workload spans many chunks ({})", c.chunks_created);
    assert_eq!(c.chunk_scans, c.allocs, "one successful scan per allocation");
    pcpu.check(&vm).unwrap();
    for p in ptrs {
        pcpu.free_percpu(&vm, &cpu, p).unwrap();
    }
    pcpu.shrink(&vm, &cpu).unwrap();
    vm.check().unwrap();
}

/// A chunk's area is the chunk's: `pcpu_get_vm_areas()` makes it (top down,
/// kind Percpu), so `vfree()` of it is refused and changes nothing, no
/// vmalloc lands on it, and the check sees the chunk own its area. Before,
/// the chunk was a plain vmalloc area: `vfree` returned Ok, the next
/// vmalloc of the same size took the same address under live objects, and
/// every check passed (found by probing the fuzzer's calls, issue 29).
#[test]
fn a_live_chunks_area_cannot_be_vfreed_or_reused() {
    let m = machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let pcpu = PercpuAllocator::new();
    // Twice: the first round leaves the page tables of the two ranges
    // (kernel tables are not freed); the second must give back every page.
    let mut free_before = 0;
    for round in 0..2 {
        pa.drain_all_pages(&cpu);
        if round == 1 {
            free_before = pa.nr_free_pages();
        }
        let p = pcpu.alloc_percpu(&vm, &cpu, 64, 8).unwrap();
        let area = vm.areas().into_iter().find(|a| a.addr <= p && p < a.addr + a.size).unwrap();
        assert_eq!(area.kind, mmlab_vmalloc::AreaKind::Percpu);
        assert_eq!(area.size, 2 * mmlab_vmalloc::percpu::PCPU_UNIT_SIZE);
        assert_eq!(area.caller, "pcpu_get_vm_areas+0x0/0x10c8");
        assert_eq!(vm.vfree(&cpu, area.addr), Err(mmlab_vmalloc::VmallocError::WrongKind { addr: area.addr }));
        pcpu.check(&vm).unwrap();
        let v = vm.vmalloc(&cpu, area.size).unwrap();
        assert!(v + area.size <= area.addr || v >= area.addr + area.size, "vmalloc {v:#x} overlaps the chunk");
        // The chunk's data is still mapped and zeroed as pcpu_alloc left it.
        let mut b = [0xffu8; 64];
        mmlab_engine::arch::arm64::pgtable::mmu::read_bytes(&cpu, &m.kernel_as(), p, &mut b).unwrap();
        assert_eq!(b, [0; 64]);
        vm.vfree(&cpu, v).unwrap();
        pcpu.free_percpu(&vm, &cpu, p).unwrap();
        pcpu.shrink(&vm, &cpu).unwrap();
        assert!(vm.areas().iter().all(|a| a.kind != mmlab_vmalloc::AreaKind::Percpu));
        vm.purge_vmap_area_lazy(&cpu).unwrap();
        vm.check().unwrap();
    }
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.nr_free_pages(), free_before, "the units' pages and the metadata came back");
}
