//! Page allocator micro-benchmarks.
//!
//! * `pcp/order0_alloc_free_pair/L`: `alloc_pages(GFP_KERNEL, 0)` +
//!   `free_pages` on CPU 0 (served by the per-cpu lists), with `L` order-0
//!   pages held live in a fragmented pattern.
//! * `buddy/order0_alloc_free_pair/L`: the same pair bypassing the pcp: one
//!   zone-lock hold for `rmqueue_buddy`, one for `free_one_page`, plus the
//!   page state `prep_new_page` / `free_pages` would set.
//! * `order4_alloc_free_pair/L`: `alloc_pages(GFP_KERNEL, 4)` + free (order 4
//!   is not cached on the pcp, so both halves take the zone lock).
//! * `buddy_system_allocator/order0_alloc_free_pair/L`: the baseline, the
//!   `buddy_system_allocator` crate's `FrameAllocator` over the same frames
//!   with the same live pattern.
//! * `boot/4G`, `boot/64G`: `Machine::boot` + `PageAllocator::boot` + drop.
//!   Host RSS after each boot is printed to stderr.
//!
//! The live set: allocate `2 * L` order-0 pages, shuffle them with a seeded
//! xoshiro256** (Fisher-Yates), free the second half. The `L` survivors are
//! scattered over the pool, so the freed half cannot merge back and the
//! order-0 free lists are fragmented. Every measured iteration allocates and
//! frees, leaving the allocator as it found it.

use buddy_system_allocator::FrameAllocator;
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group};
use mmlab_buddy::{AllocFlags, Fpi};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Gfp, Machine, MachineConfig, Migratetype, Pfn};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use std::hint::black_box;
use std::time::Duration;

/// Live order-0 pages held during the measurement.
const LIVE: [usize; 3] = [1_000, 10_000, 100_000];
/// Seed of the shuffle that picks the live set.
const SEED: u64 = 0x006d_6d6c_6162;
/// Memory of the machine for the alloc/free benches (1M frames).
const MEM: &str = "4G";

fn boot(mem: &str) -> Machine {
    mmlab_harness::stack::Stack::boot_machine(MachineConfig::with(mem, 2).expect("config"))
        .map(mmlab_harness::stack::Stack::into_machine)
        .expect("boot")
}

/// The seeded permutation of `0..n` (Fisher-Yates with xoshiro256**).
fn shuffled(n: usize) -> Vec<usize> {
    let mut rng = Xoshiro256StarStar::seed_from_u64(SEED);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// Allocate `2 * l` blocks with `alloc`, free the half the shuffle puts
/// last with `free`, and return the `l` survivors.
fn fragment<T: Copy>(l: usize, mut alloc: impl FnMut() -> T, mut free: impl FnMut(T)) -> Vec<T> {
    let pool: Vec<T> = (0..2 * l).map(|_| alloc()).collect();
    let perm = shuffled(2 * l);
    for &i in &perm[l..] {
        free(pool[i]);
    }
    perm[..l].iter().map(|&i| pool[i]).collect()
}

/// `L` live order-0 pages on `pa`, allocated through the front door.
fn live_set(pa: &PageAllocator<'_>, cpu: &mmlab_engine::Cpu<'_>, l: usize) -> Vec<Pfn> {
    fragment(
        l,
        || pa.alloc_pages(cpu, Gfp::GFP_KERNEL, 0).expect("live page"),
        |p| pa.free_pages(cpu, p, 0).expect("free"),
    )
}

fn release(pa: &PageAllocator<'_>, cpu: &mmlab_engine::Cpu<'_>, live: Vec<Pfn>) {
    for p in live {
        pa.free_pages(cpu, p, 0).expect("free live page");
    }
}

fn measured<'a>(c: &'a mut Criterion, name: &str) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(50);
    g
}

/// An alloc/free pair of `ORDER` through the front door (the pcp for
/// cacheable orders), at each live-set size. `ORDER` is a constant, as at
/// the kernel's call sites.
fn bench_front_door_pair<const ORDER: u32>(c: &mut Criterion, name: &str) {
    let mut g = measured(c, name);
    for l in LIVE {
        let m = boot(MEM);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
        let cpu = m.cpu(0).expect("cpu 0");
        let live = live_set(&pa, &cpu, l);
        g.bench_with_input(BenchmarkId::from_parameter(l), &l, |b, _| {
            b.iter(|| {
                let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, ORDER).expect("alloc");
                pa.free_pages(&cpu, black_box(p), ORDER).expect("free");
            })
        });
        release(&pa, &cpu, live);
    }
    g.finish();
}

fn bench_pcp(c: &mut Criterion) {
    bench_front_door_pair::<0>(c, "pcp/order0_alloc_free_pair");
}

fn bench_buddy(c: &mut Criterion) {
    let mut g = measured(c, "buddy/order0_alloc_free_pair");
    let mt = Migratetype::Unmovable;
    for l in LIVE {
        let m = boot(MEM);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
        let cpu = m.cpu(0).expect("cpu 0");
        let live = live_set(&pa, &cpu, l);
        // Everything cached on a pcp goes back to the buddy lists, so the
        // pair sees the fragmented free lists.
        pa.drain_all_pages(&cpu);
        let zone = pa.zone();
        g.bench_with_input(BenchmarkId::from_parameter(l), &l, |b, _| {
            b.iter(|| {
                // rmqueue() → rmqueue_buddy() under one zone-lock hold.
                let p = zone.lock(&cpu).rmqueue_buddy(0, mt, AllocFlags::WMARK_LOW).expect("alloc");
                // prep_new_page()
                let page = m.page(p);
                page.set_refcount(1);
                page.set_ext(PageExt::Alloc(0, mt));
                let p = black_box(p);
                // __free_pages() → free_one_page() under a second hold.
                let page = m.page(p);
                assert_eq!(page.put_testzero(), Some(true));
                page.set_ext(PageExt::Tail);
                zone.free_one_page(&cpu, p, 0, Fpi::NONE);
            })
        });
        release(&pa, &cpu, live);
    }
    g.finish();
}

fn bench_order4(c: &mut Criterion) {
    bench_front_door_pair::<4>(c, "order4_alloc_free_pair");
}

fn bench_bsa(c: &mut Criterion) {
    let mut g = measured(c, "buddy_system_allocator/order0_alloc_free_pair");
    // The same frame numbers as the 4 GiB machine: 1M frames from PHYS_OFFSET.
    let start = (mmlab_engine::arch::arm64::memory::PHYS_OFFSET >> mmlab_engine::PAGE_SHIFT) as usize;
    let frames = (4usize << 30) >> mmlab_engine::PAGE_SHIFT;
    for l in LIVE {
        let mut fa = FrameAllocator::<32>::new();
        fa.add_frame(start, start + frames);
        let live = {
            let fa = std::cell::RefCell::new(&mut fa);
            fragment(l, || fa.borrow_mut().alloc(1).expect("live frame"), |f| fa.borrow_mut().dealloc(f, 1))
        };
        g.bench_with_input(BenchmarkId::from_parameter(l), &l, |b, _| {
            b.iter(|| {
                let f = fa.alloc(1).expect("alloc");
                fa.dealloc(black_box(f), 1);
            })
        });
        for f in live {
            fa.dealloc(f, 1);
        }
    }
    g.finish();
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

/// Reset VmHWM to the current RSS (Linux ≥ 4.0: write 5 to clear_refs).
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn report_rss(mem: &str) {
    reset_hwm();
    let (before, _) = rss_kib();
    let t = std::time::Instant::now();
    let m = boot(mem);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
    let took = t.elapsed();
    let (rss, hwm) = rss_kib();
    eprintln!(
        "rss after {mem} boot: VmRSS {:.1} MiB (+{:.1} MiB over {:.1} MiB before), VmHWM {:.1} MiB, boot {:.3} s, {} managed pages",
        rss as f64 / 1024.0,
        rss.saturating_sub(before) as f64 / 1024.0,
        before as f64 / 1024.0,
        hwm as f64 / 1024.0,
        took.as_secs_f64(),
        pa.managed_pages()
    );
    drop(pa);
    drop(m);
}

fn bench_boot(c: &mut Criterion) {
    report_rss("4G");
    report_rss("64G");
    let mut g = c.benchmark_group("boot");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    for mem in ["4G", "64G"] {
        g.bench_function(mem, |b| {
            b.iter(|| {
                let m = boot(mem);
                let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
                black_box(&pa);
                drop(pa);
                drop(m);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_pcp, bench_buddy, bench_order4, bench_bsa, bench_boot);

/// Profiling driver: `MMLAB_PAIR_DRIVER=pcp|buddy|order4|bsa` (optionally
/// `MMLAB_PAIR_LIVE`, `MMLAB_PAIR_ITERS`) runs that pair in a plain loop with
/// the same setup instead of criterion, e.g. under
/// `valgrind --tool=callgrind --toggle-collect=*pair_loop*`.
fn driver(kind: &str) {
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let l = env("MMLAB_PAIR_LIVE", 1_000);
    let iters = env("MMLAB_PAIR_ITERS", 1_000_000);
    let t = std::time::Instant::now();
    if kind == "bsa" {
        let start = (mmlab_engine::arch::arm64::memory::PHYS_OFFSET >> mmlab_engine::PAGE_SHIFT) as usize;
        let mut fa = FrameAllocator::<32>::new();
        fa.add_frame(start, start + ((4usize << 30) >> mmlab_engine::PAGE_SHIFT));
        let fa = std::cell::RefCell::new(fa);
        let _live = fragment(l, || fa.borrow_mut().alloc(1).expect("live frame"), |f| fa.borrow_mut().dealloc(f, 1));
        let mut fa = fa.borrow_mut();
        pair_loop(iters, || {
            let f = fa.alloc(1).expect("alloc");
            fa.dealloc(black_box(f), 1);
        });
    } else {
        let m = boot(MEM);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
        let cpu = m.cpu(0).expect("cpu 0");
        let _live = live_set(&pa, &cpu, l);
        let mt = Migratetype::Unmovable;
        match kind {
            "pcp" | "order4" => {
                let order = if kind == "pcp" { 0 } else { 4 };
                pair_loop(iters, || {
                    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, order).expect("alloc");
                    pa.free_pages(&cpu, black_box(p), order).expect("free");
                });
            }
            "buddy" => {
                pa.drain_all_pages(&cpu);
                let zone = pa.zone();
                pair_loop(iters, || {
                    let p = zone.lock(&cpu).rmqueue_buddy(0, mt, AllocFlags::WMARK_LOW).expect("alloc");
                    let page = m.page(p);
                    page.set_refcount(1);
                    page.set_ext(PageExt::Alloc(0, mt));
                    let p = black_box(p);
                    let page = m.page(p);
                    assert_eq!(page.put_testzero(), Some(true));
                    page.set_ext(PageExt::Tail);
                    zone.free_one_page(&cpu, p, 0, Fpi::NONE);
                });
            }
            _ => panic!("MMLAB_PAIR_DRIVER: pcp, buddy, order4 or bsa"),
        }
    }
    eprintln!("{kind} L={l}: {iters} pairs in {:?} (setup included)", t.elapsed());
}

#[inline(never)]
fn pair_loop(iters: usize, mut f: impl FnMut()) {
    let t = std::time::Instant::now();
    for _ in 0..iters {
        f();
    }
    let ns = t.elapsed().as_nanos() as f64 / iters as f64;
    eprintln!("pair_loop: {ns:.1} ns/pair");
}

fn main() {
    if let Ok(kind) = std::env::var("MMLAB_PAIR_DRIVER") {
        driver(&kind);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
