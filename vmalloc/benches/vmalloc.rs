//! test_vmalloc's per-iteration work as criterion benchmarks (count backend):
//! fix_size_alloc_test p:1, p:16, p:512 (vmalloc, write a byte, vfree) and
//! one long_busy_list_alloc_test iteration (vmalloc 100 pages + 1 page with
//! 15,000 one-page areas live, write, vfree both). Lazy purges happen inside
//! the measured loop when lazy_max_pages is crossed, as in the module.

use criterion::{BenchmarkId, Criterion, criterion_group};
use mmlab_engine::arch::arm64::barrier::BarrierBackend;
use mmlab_engine::arch::arm64::pgtable::mmu;
use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};
use std::hint::black_box;
use std::time::Duration;

fn machine() -> Machine {
    let cfg = MachineConfig { barrier_backend: BarrierBackend::Count, ..MachineConfig::with("4G", 2).unwrap() };
    mmlab_harness::stack::Stack::boot_machine(cfg).map(mmlab_harness::stack::Stack::into_machine).unwrap()
}

fn fix_size(c: &mut Criterion) {
    let m = machine();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let mut g = c.benchmark_group("fix_size_alloc_test");
    g.measurement_time(Duration::from_secs(3));
    for pages in [1u64, 16, 512] {
        g.bench_with_input(BenchmarkId::from_parameter(format!("p:{pages}")), &pages, |b, &pages| {
            b.iter(|| {
                let a = vm.vmalloc(&cpu, pages * PAGE_SIZE).unwrap();
                mmu::write_bytes(&cpu, &k, a, &[1]).unwrap();
                vm.vfree(&cpu, black_box(a)).unwrap();
            })
        });
    }
    g.finish();
}

fn long_busy_list(c: &mut Criterion) {
    let m = machine();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let busy: Vec<u64> = (0..15_000).map(|_| vm.vmalloc(&cpu, PAGE_SIZE).unwrap()).collect();
    let mut g = c.benchmark_group("long_busy_list_alloc_test");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("iteration", |b| {
        b.iter(|| {
            let x = vm.vmalloc(&cpu, 100 * PAGE_SIZE).unwrap();
            let y = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
            mmu::write_bytes(&cpu, &k, x, &[1]).unwrap();
            mmu::write_bytes(&cpu, &k, y, &[1]).unwrap();
            vm.vfree(&cpu, black_box(x)).unwrap();
            vm.vfree(&cpu, black_box(y)).unwrap();
        })
    });
    g.finish();
    for a in busy {
        vm.vfree(&cpu, a).unwrap();
    }
}

criterion_group!(benches, fix_size, long_busy_list);

/// Profiling driver: `MMLAB_VMALLOC_DRIVER=<pages>` runs fix_size p:<pages>
/// in a plain loop (`valgrind --tool=callgrind --toggle-collect='*driver_loop*'`).
#[inline(never)]
fn driver_loop(pages: u64, iters: u64) {
    let m = machine();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let t = std::time::Instant::now();
    for _ in 0..iters {
        let a = vm.vmalloc(&cpu, pages * PAGE_SIZE).unwrap();
        mmu::write_bytes(&cpu, &k, a, &[1]).unwrap();
        vm.vfree(&cpu, black_box(a)).unwrap();
    }
    eprintln!("p:{pages}: {:?} per iteration", t.elapsed() / iters as u32);
}

fn main() {
    if let Ok(p) = std::env::var("MMLAB_VMALLOC_DRIVER") {
        let iters = std::env::var("MMLAB_VMALLOC_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
        driver_loop(p.parse().expect("pages"), iters);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
