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
            pcpu.check().unwrap_or_else(|e| panic!("step {step}: {e}"));
        }
    }
    for p in live {
        pcpu.free_percpu(&vm, &cpu, p).unwrap();
    }
    pcpu.check().unwrap();
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
    pcpu.check().unwrap();
    for p in ptrs {
        pcpu.free_percpu(&vm, &cpu, p).unwrap();
    }
    pcpu.shrink(&vm, &cpu).unwrap();
    vm.check().unwrap();
}
