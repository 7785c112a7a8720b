//! Boot benchmarks at the sizes of the "faster linear map creation" series
//! (seeds.md §3): `Machine::boot` with the linear map (`map_mem()`,
//! `rodata=full`: page-granular, 4 KiB PTEs for all of RAM) plus
//! `PageAllocator::boot` (`memblock_free_all()` and the deferred struct
//! pages' frees), then drop.
//!
//! * `boot_linear_map/<mem>/<variant>`: criterion, 10 samples, for 16G and
//!   64G with the base (v6.9-rc1) and lazy-unmap variants.
//! * Before the groups, one boot of each of 16G, 64G, 256G and 512G (base
//!   variant) prints its measured time and the host's VmHWM for that boot
//!   (reset through /proc/self/clear_refs first), with the `map_mem()`
//!   counts: `MMLAB_BOOT_SIZES=16G,64G` picks other sizes, `none` skips.
//!
//! The barrier backend is the default (`native`: real barriers on arm64,
//! fences on x86_64), as `mmlab boot` runs.

use criterion::{Criterion, SamplingMode, criterion_group};
use mmlab_engine::MachineConfig;
use mmlab_engine::arch::arm64::mmu::{LinearMapVariant, Rodata};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use std::hint::black_box;
use std::time::Duration;

fn config(mem: &str, variant: LinearMapVariant) -> MachineConfig {
    MachineConfig {
        linear_map: true,
        linear_map_variant: variant,
        rodata: Rodata::On,
        ..MachineConfig::with(mem, 2).expect("config")
    }
}

/// `(VmRSS, VmHWM)` in KiB from /proc/self/status.
fn rss_kib() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn report(mem: &str) {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let (before, _) = rss_kib();
    let t = std::time::Instant::now();
    let m = mmlab_harness::stack::Stack::boot_machine(config(mem, LinearMapVariant::Base))
        .map(mmlab_harness::stack::Stack::into_machine)
        .expect("boot");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
    let took = t.elapsed();
    let (_, hwm) = rss_kib();
    let lm = m.linear_map_report().expect("linear map");
    let c = &lm.counts;
    eprintln!(
        "boot {mem} (linear map, rodata=full, base): {:.3} s (map_mem {:.3} s), VmHWM {:.1} MiB ({:.1} MiB before), \
         {} managed pages; map_mem: {} PTE + {} PMD + {} PUD tables, {} TLBIs; struct pages initialised early/at first \
         touch: {} / {} of {} vmemmap pages",
        took.as_secs_f64(),
        lm.host_ns as f64 / 1e9,
        hwm as f64 / 1024.0,
        before as f64 / 1024.0,
        pa.managed_pages(),
        c.pgtable_pte,
        c.pgtable_pmd,
        c.pgtable_pud,
        c.tlbi_total,
        m.memmap().deferred_init_counts().early,
        m.memmap().deferred_init_counts().deferred,
        m.memmap().deferred_init_counts().present,
    );
}

fn bench_boot(c: &mut Criterion) {
    let sizes = std::env::var("MMLAB_BOOT_SIZES").unwrap_or_else(|_| "16G,64G,256G,512G".to_string());
    for mem in sizes.split(',').filter(|s| *s != "none" && !s.is_empty()) {
        report(mem);
    }
    let mut g = c.benchmark_group("boot_linear_map");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(5));
    for mem in ["16G", "64G"] {
        for v in [LinearMapVariant::Base, LinearMapVariant::LazyUnmap] {
            g.bench_function(format!("{mem}/{}", v.name()), |b| {
                b.iter(|| {
                    let m = mmlab_harness::stack::Stack::boot_machine(config(mem, v))
                        .map(mmlab_harness::stack::Stack::into_machine)
                        .expect("boot");
                    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
                    black_box(&pa);
                    drop(pa);
                    drop(m);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench_boot);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
