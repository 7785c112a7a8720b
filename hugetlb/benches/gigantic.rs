//! Gigantic pool benchmarks: a write of `nr_hugepages` growing a pool of
//! 8 x 1 GiB pages from empty, and the write shrinking it back to 0, per
//! gigantic release and HVO setting.
//!
//! * `gigantic/grow_8x1G/<release>[+hvo]`: `set_max_huge_pages_of(1G, 8)`
//!   from an empty pool (`echo 8 > hugepages-1048576kB/nr_hugepages`).
//! * `gigantic/shrink_8x1G/<release>[+hvo]`: `set_max_huge_pages_of(1G, 0)`
//!   from a pool of 8.
//!
//! `<release>` is `hugetlb.gigantic`: `v6.11` (order-0 pages prepared,
//! frozen and freed one at a time) or `v6.12` (`__GFP_COMP`, one
//! `folio_put`). `+hvo` turns HVO on with arm64's remote-CPU pause (the
//! 2024 RFC), grace-period policy 6.12. The machine has 10 GiB (the memmap
//! of every 1 GiB is 16 MiB; HVO frees 4095 of its 4096 pages).
//!
//! Each measured iteration times one write; the opposite write that puts
//! the pool back runs untimed. The time is measured host time only: the
//! modelled grace periods and TLBIs of an HVO write are not added (the
//! harness's `mmlab hugetlb` reports them beside the measured time).

use criterion::{BenchmarkId, Criterion, SamplingMode};
use mmlab_engine::MachineConfig;
use mmlab_hugetlb::{GiganticAlloc, HugePageSize, Hugetlb, HugetlbConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::{Arm64Hvo, HvoConfig, RcuPolicy};
use std::time::{Duration, Instant};

/// 1 GiB pages in the pool.
const PAGES: u64 = 8;
/// The machine's RAM: the pages plus room for the memmap and the rest.
const MEM: &str = "10G";
const G1: HugePageSize = HugePageSize::Pud1G;

fn config(gigantic: GiganticAlloc, hvo: bool) -> HugetlbConfig {
    let mut c = HugetlbConfig::with_hvo(HvoConfig {
        hugetlb_optimize_vmemmap: hvo,
        rcu: RcuPolicy::V6_12,
        arm64: if hvo { Arm64Hvo::PauseCpus } else { Arm64Hvo::Off },
    });
    c.gigantic = gigantic;
    c
}

fn benches(c: &mut Criterion) {
    let m = mmlab_harness::stack::Stack::boot_machine(MachineConfig::with(MEM, 1).expect("config"))
        .map(mmlab_harness::stack::Stack::into_machine)
        .expect("boot");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("page allocator");
    let cpu = m.cpu(0).expect("cpu 0");
    let mut g = c.benchmark_group("gigantic");
    g.sampling_mode(SamplingMode::Flat).sample_size(10).warm_up_time(Duration::from_millis(500));
    for (release, name) in GiganticAlloc::ALL {
        for hvo in [false, true] {
            let label = format!("{name}{}", if hvo { "+hvo" } else { "" });
            let mut ht = Hugetlb::new(&pa, config(release, hvo));
            let mut write = |n: u64| {
                let got = ht.set_max_huge_pages_of(&cpu, G1, n).expect("nr_hugepages write");
                assert_eq!(got, n, "the machine holds {PAGES} x 1G");
            };
            g.bench_function(BenchmarkId::new("grow_8x1G", &label), |b| {
                b.iter_custom(|iters| {
                    let mut t = Duration::ZERO;
                    for _ in 0..iters {
                        let t0 = Instant::now();
                        write(PAGES);
                        t += t0.elapsed();
                        write(0);
                    }
                    t
                })
            });
            g.bench_function(BenchmarkId::new("shrink_8x1G", &label), |b| {
                b.iter_custom(|iters| {
                    let mut t = Duration::ZERO;
                    for _ in 0..iters {
                        write(PAGES);
                        let t0 = Instant::now();
                        write(0);
                        t += t0.elapsed();
                    }
                    t
                })
            });
            pa.check_invariants().expect("invariants after the pool is empty");
        }
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
