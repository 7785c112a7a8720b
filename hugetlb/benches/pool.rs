//! hugetlb pool benchmarks: one write of `nr_hugepages` growing a pool of
//! 4,000 x 2 MiB pages, and one shrinking it back to 0, as
//! `scripts/host-hugetlb-timing.sh` times the host kernel doing
//! (`echo 4000 > nr_hugepages`, `echo 0 > nr_hugepages`).
//!
//! * `pool_2m/grow_4000/<hvo>`: `set_max_huge_pages(4000)` on an empty pool
//!   (only the grow is timed; each iteration shrinks back untimed).
//! * `pool_2m/shrink_4000/<hvo>`: `set_max_huge_pages(0)` on a full pool
//!   (only the shrink is timed).
//!
//! `<hvo>`: `hvo_off` (`vm.hugetlb_optimize_vmemmap=0`), `hvo_on` (the
//! generic remap that x86_64 runs, `hugetlb_vmemmap.arm64=unsafe`: live
//! entries rewritten in place, each recorded as a break-before-make
//! violation), `hvo_on_pause` (the arm64 RFC: every entry change a
//! break-before-make with remote CPUs paused). Grace periods follow 6.12
//! (one per batch).
//!
//! The machine (10 GiB, one CPU) boots once per configuration, outside the
//! timing, and one grow/shrink round runs before the measurement: the
//! kernel keeps the vmemmap PMD splits of its first HVO (the PTE tables
//! stay), and so does mmlab, so the timed rounds are the steady state, as
//! on a host that already ran HVO once. The counters of one round (HVO,
//! grace periods with their modelled time, TLBIs) are printed to stderr
//! before the measurements: the measured host time of a write excludes the
//! modelled grace period (10.5 ms each), which the host's own timing
//! includes.
//!
//! Profiling driver: `MMLAB_POOL_DRIVER=off|on|pause` (optionally
//! `MMLAB_POOL_ROUNDS`, default 5) runs grow/shrink rounds in a plain loop
//! and prints ms per write, e.g. under
//! `valgrind --tool=callgrind --toggle-collect=*pool_round*`.

use criterion::{Criterion, SamplingMode, criterion_group};
use mmlab_engine::{Cpu, Machine, MachineConfig};
use mmlab_hugetlb::{Hugetlb, HugetlbConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::{Arm64Hvo, HvoConfig, RcuPolicy};
use std::time::{Duration, Instant};

/// The pool size, in 2 MiB pages.
const N: u64 = 4000;
/// The machine's memory.
const MEM: &str = "10G";

/// The HVO configurations, by bench name.
fn configs() -> [(&'static str, HugetlbConfig); 3] {
    let hvo = |on: bool, arm64| HvoConfig { hugetlb_optimize_vmemmap: on, rcu: RcuPolicy::V6_12, arm64 };
    [
        ("hvo_off", HugetlbConfig::with_hvo(hvo(false, Arm64Hvo::Off))),
        ("hvo_on", HugetlbConfig::with_hvo(hvo(true, Arm64Hvo::Unsafe))),
        ("hvo_on_pause", HugetlbConfig::with_hvo(hvo(true, Arm64Hvo::PauseCpus))),
    ]
}

fn boot() -> Machine {
    mmlab_harness::stack::Stack::boot_machine(MachineConfig::with(MEM, 1).expect("config"))
        .map(mmlab_harness::stack::Stack::into_machine)
        .expect("boot")
}

/// One grow and one shrink; their host times.
#[inline(never)]
fn pool_round<'m>(ht: &mut Hugetlb<'_, 'm>, cpu: &Cpu<'m>) -> (Duration, Duration) {
    let t0 = Instant::now();
    assert_eq!(ht.set_max_huge_pages(cpu, N).expect("grow"), N);
    let t1 = Instant::now();
    assert_eq!(ht.set_max_huge_pages(cpu, 0).expect("shrink"), 0);
    (t1 - t0, t1.elapsed())
}

/// The counters of one round, to stderr.
fn report_round<'m>(name: &str, m: &'m Machine, ht: &mut Hugetlb<'_, 'm>, cpu: &Cpu<'m>) {
    let (h0, r0, t0) = (ht.hvo().counts(), m.rcu_counts(), m.tlbi_counts().total());
    let (g, s) = pool_round(ht, cpu);
    let (h, r) = (ht.hvo().counts().delta(&h0), m.rcu_counts().delta(&r0));
    eprintln!(
        "pool_2m/{name}: one round: grow {:.1} ms, shrink {:.1} ms (measured); synchronize_rcu {} \
         (modelled {:.1} ms, kept apart); vmemmap pages freed {} allocated {}; PMD splits {}; \
         flush_tlb_all {}; TLBIs {}; bbm_violations {}; remote_cpu_pauses {}",
        g.as_secs_f64() * 1e3,
        s.as_secs_f64() * 1e3,
        h.synchronize_rcu,
        r.modelled_ns as f64 / 1e6,
        h.vmemmap_pages_freed,
        h.vmemmap_pages_allocated,
        h.vmemmap_pmd_splits,
        h.flush_tlb_all,
        m.tlbi_counts().total() - t0,
        h.bbm_violations,
        h.remote_cpu_pauses,
    );
}

fn bench_pool(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool_2m");
    g.sample_size(10).sampling_mode(SamplingMode::Flat).measurement_time(Duration::from_secs(8));
    for (name, cfg) in configs() {
        let m = boot();
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
        let cpu = m.cpu(0).expect("cpu 0");
        let mut ht = Hugetlb::new(&pa, cfg);
        // Warm: the first HVO splits the vmemmap PMDs for good.
        pool_round(&mut ht, &cpu);
        report_round(name, &m, &mut ht, &cpu);
        g.bench_function(format!("grow_{N}/{name}"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| pool_round(&mut ht, &cpu).0).sum())
        });
        g.bench_function(format!("shrink_{N}/{name}"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| pool_round(&mut ht, &cpu).1).sum())
        });
        pa.check_invariants().expect("invariants");
    }
    g.finish();
}

criterion_group!(benches, bench_pool);

/// Plain loop for profilers (see the module docs).
fn driver(kind: &str) {
    let rounds: u32 = std::env::var("MMLAB_POOL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let name = match kind {
        "off" => "hvo_off",
        "on" => "hvo_on",
        "pause" => "hvo_on_pause",
        other => panic!("MMLAB_POOL_DRIVER={other}: expected off, on or pause"),
    };
    let cfg = configs().into_iter().find(|c| c.0 == name).expect("config").1;
    let t = Instant::now();
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
    let cpu = m.cpu(0).expect("cpu 0");
    eprintln!("boot {MEM}: {:.2} s", t.elapsed().as_secs_f64());
    let mut ht = Hugetlb::new(&pa, cfg);
    for i in 0..rounds {
        let (g, s) = pool_round(&mut ht, &cpu);
        println!("round {i} {name}: grow {:.2} ms shrink {:.2} ms", g.as_secs_f64() * 1e3, s.as_secs_f64() * 1e3);
    }
}

fn main() {
    if let Ok(kind) = std::env::var("MMLAB_POOL_DRIVER") {
        driver(&kind);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
