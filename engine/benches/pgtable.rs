//! Kernel page-table micro-benchmarks (barrier backend `count`).
//!
//! * `map_1g_4k/batched`, `map_1g_4k/unbatched`: map 1 GiB of vmalloc VA
//!   (`VMALLOC_START + 1 GiB`) to 1 GiB of RAM with 262,144 4 KiB PTEs the
//!   way `vmap_pte_range()` does: per PTE table, a lazy-MMU section around
//!   512 `set_pte` calls. `batched` is `lazy_mmu_barrier_batching` on (Linux
//!   6.16+: one `dsb ishst; isb` per section), `unbatched` off (one pair per
//!   PTE). The tables exist before the timing (one `map_range` in setup);
//!   every iteration starts from cleared PTEs, so the loop measures PTE
//!   writes only.
//! * `unmap_1g_4k/ptep_get_and_clear`: `vunmap_pte_range()`'s loop, an
//!   exchange with 0 per entry over the known PTE tables, then one
//!   `flush_tlb_kernel_range()` over the gigabyte.
//! * `unmap_1g_4k/unmap_range`: the engine's [`unmap_range`] over the
//!   gigabyte (its checking walk, then its clearing walk: one walk from the
//!   root per PTE table, a load per entry and a store per valid one), then
//!   its [`TlbFlush`] token.
//! * `aarch64_paging/map_1g_4k`, `aarch64_paging/unmap_1g_4k`: the same
//!   gigabyte mapped by the `aarch64-paging` crate on host memory (an
//!   inactive `Mapping` over `IdTranslation`, El1&0 upper range, root level
//!   0), with `Constraints::NO_BLOCK_MAPPINGS | NO_CONTIGUOUS_HINT` so that
//!   it writes 262,144 level-3 page descriptors through one `map_range`
//!   call. Its tables also exist before the timing: between iterations the
//!   range is cleared with invalid descriptors in two pieces per 2 MiB, so
//!   that no chunk is a whole block and the crate keeps (does not free) the
//!   level-3 tables. Not being active, the mapping does no BBM checks and no
//!   TLB maintenance (on x86_64 it would issue no barriers anyway).
//! * `pgtable/translate_hit`, `pgtable/read_u64_hit`: `mmu::translate` /
//!   `mmu::read_u64` of one kernel VA after a first access filled the
//!   soft-MMU cache, the result consumed as an `Option` (`.ok()`).
//! * `pgtable/translate_hit_result`: the same translation with the whole
//!   `Result<PhysAddr, Fault>` (32 bytes) handed to `black_box`. On x86_64
//!   the inlined Ok arm stores one tag byte that the copy then loads as a
//!   word: a failed store forward that costs more than the lookup itself
//!   (about 5 ns against 1.6 ns on the 2-core EPYC VM).
//!
//! The barrier counts of one map and one unmap of the gigabyte are printed
//! to stderr before the measurements.
//!
//! Profiling driver: `MMLAB_PGTABLE_DRIVER=map_batched|map_unbatched|unmap|
//! unmap_range|aarch64_map|translate|map_proto_slice|map_proto_floor`
//! (optionally `MMLAB_PGTABLE_ITERS`) runs that operation in a plain loop
//! instead of criterion and prints ns per page (per lookup for `translate`,
//! which also times the full-`Result` and bare `tlb::fast_lookup` variants).
//! The two `map_proto_*` modes are what-ifs for the engine's `set_pte`
//! (see [`map_ptes_proto`]). Under callgrind, e.g.
//! `valgrind --tool=callgrind --toggle-collect=*timed_op*`.

use aarch64_paging::Mapping;
use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use mmlab_engine::arch::arm64::barrier::{BarrierBackend, BarrierCounts, BarrierKind};
use mmlab_engine::arch::arm64::memory::{PHYS_OFFSET, VMALLOC_START};
use mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL;
use mmlab_engine::arch::arm64::pgtable::mmu::{self, Access};
use mmlab_engine::arch::arm64::pgtable::{
    Desc, Level, MapFlags, PteTable, TableMemory, arch_enter_lazy_mmu_mode, arch_leave_lazy_mmu_mode, map_range,
    unmap_range, walk,
};
use mmlab_engine::arch::arm64::tlb::flush_tlb_kernel_range;
use mmlab_engine::machine::MemblockTables;
use mmlab_engine::{Cpu, Machine, MachineConfig, PAGE_SIZE, PhysAddr};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The mapped range: 1 GiB of vmalloc space, 1 GiB aligned.
const VA: u64 = VMALLOC_START + (1 << 30);
const SIZE: u64 = 1 << 30;
/// Its target: the first gigabyte of RAM.
const PA: u64 = PHYS_OFFSET;
const PAGES: u64 = SIZE / PAGE_SIZE;
const PTRS: usize = 512;
const PMD_SIZE: u64 = PAGE_SIZE * PTRS as u64;

fn boot(batching: bool) -> Machine {
    let cfg = MachineConfig {
        barrier_backend: BarrierBackend::Count,
        lazy_mmu_barrier_batching: batching,
        ..MachineConfig::with("2G", 2).expect("config")
    };
    mmlab_harness::stack::Stack::boot_machine(cfg).map(mmlab_harness::stack::Stack::into_machine).expect("boot")
}

/// Map the gigabyte once with `map_range` (allocating the tables from
/// memblock) and return the 512 PTE tables in VA order, the PTEs cleared.
fn prepare(m: &Machine, cpu: &Cpu<'_>) -> Vec<PhysAddr> {
    let asp = m.kernel_as();
    let flags = MapFlags { block: false, cont: false };
    map_range(cpu, &asp, &MemblockTables(m), VA, PA, SIZE, PAGE_KERNEL, flags).expect("map_range").ignore();
    let tables: Vec<PhysAddr> = (0..SIZE / PMD_SIZE)
        .map(|i| {
            let w = walk(m, &asp, VA + i * PMD_SIZE);
            let leaf = w.leaf.expect("mapped");
            assert_eq!(leaf.level, Level::Pte);
            PhysAddr(leaf.slot.0 & !(PAGE_SIZE - 1))
        })
        .collect();
    unmap_ptes(cpu, &tables);
    tables
}

/// `vmap_pte_range()` for every table: a lazy-MMU section around one
/// `set_pte` per entry.
fn map_ptes(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    let mut pa = PA;
    for &t in tables {
        // pte_offset_kernel() once per table, then set_pte_at() per entry.
        let table = PteTable::new(cpu.ram(), t);
        arch_enter_lazy_mmu_mode(cpu);
        for i in 0..PTRS {
            table.set_pte(cpu, i, Desc::page(pa, PAGE_KERNEL)).expect("set_pte");
            pa += PAGE_SIZE;
        }
        arch_leave_lazy_mmu_mode(cpu);
    }
}

/// Profiling only (driver `map_proto_slice`): what [`map_ptes`] would cost
/// if `set_pte` took the descriptor slot from a table slice checked once
/// per table (`Machine::table`) instead of an arena bounds check per entry.
/// Same BBM check and the same per-entry `queue_pte_barriers`. With
/// `per_table_barrier`, the barrier bookkeeping runs once per table instead
/// (as `set_ptes` does): the floor of the write loop.
fn map_ptes_proto(cpu: &Cpu<'_>, tables: &[PhysAddr], per_table_barrier: bool) {
    use mmlab_engine::arch::arm64::pgtable::desc::pgattr_change_is_safe;
    use mmlab_engine::arch::arm64::pgtable::queue_pte_barriers;
    use std::sync::atomic::Ordering::Relaxed;
    let m = cpu.ram();
    let mut pa = PA;
    for &t in tables {
        arch_enter_lazy_mmu_mode(cpu);
        for slot in m.table(t) {
            let new = Desc::page(pa, PAGE_KERNEL);
            assert!(pgattr_change_is_safe(slot.load(Relaxed), new.0), "bbm");
            slot.store(new.0, Relaxed);
            if !per_table_barrier && new.valid_not_user() {
                queue_pte_barriers(cpu);
            }
            pa += PAGE_SIZE;
        }
        if per_table_barrier {
            queue_pte_barriers(cpu);
        }
        arch_leave_lazy_mmu_mode(cpu);
    }
}

/// `vunmap_pte_range()` for every table: get-and-clear each entry.
fn unmap_ptes(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    for &t in tables {
        let table = PteTable::new(cpu.ram(), t);
        for i in 0..PTRS {
            black_box(table.get_and_clear(i));
        }
    }
}

/// Unmap plus the one TLB flush `vunmap` owes.
fn unmap_ptes_flush(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    unmap_ptes(cpu, tables);
    flush_tlb_kernel_range(cpu, VA, VA + SIZE);
}

fn unmap_with_unmap_range(cpu: &Cpu<'_>) {
    let asp = mmlab_engine::arch::arm64::pgtable::init_mm(cpu);
    unmap_range(cpu, &asp, VA, SIZE).expect("unmap_range").flush(cpu);
}

fn barrier_pairs(before: &BarrierCounts, after: &BarrierCounts) -> String {
    let d = |k, o| after.get(k, o).unwrap_or(0) - before.get(k, o).unwrap_or(0);
    format!(
        "dsb ishst {}, isb {}, dsb ish {}",
        d(BarrierKind::Dsb, "ishst"),
        d(BarrierKind::Isb, "sy"),
        d(BarrierKind::Dsb, "ish")
    )
}

/// Print the barriers of one map and one unmap of the gigabyte.
fn report_barriers(label: &str, cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    let b0 = cpu.system_barrier_counts();
    map_ptes(cpu, tables);
    let b1 = cpu.system_barrier_counts();
    unmap_ptes_flush(cpu, tables);
    let b2 = cpu.system_barrier_counts();
    map_ptes(cpu, tables);
    let b3 = cpu.system_barrier_counts();
    unmap_with_unmap_range(cpu);
    let b4 = cpu.system_barrier_counts();
    eprintln!("barriers per 1 GiB map ({label}): {}", barrier_pairs(&b0, &b1));
    eprintln!("barriers per 1 GiB unmap, ptep_get_and_clear + flush ({label}): {}", barrier_pairs(&b1, &b2));
    eprintln!("barriers per 1 GiB unmap, unmap_range + flush ({label}): {}", barrier_pairs(&b3, &b4));
}

fn gig_group<'a>(c: &'a mut Criterion, name: &str) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(PAGES));
    g
}

/// Time `op` only, running `setup` before each call.
fn timed(iters: u64, mut setup: impl FnMut(), mut op: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        setup();
        let t = Instant::now();
        timed_op(&mut op);
        total += t.elapsed();
    }
    total
}

/// The measured call, out of line so that a profiler can select it
/// (`--toggle-collect=*timed_op*`).
#[inline(never)]
fn timed_op(op: &mut impl FnMut()) {
    op();
}

fn bench_map(c: &mut Criterion) {
    let mut g = gig_group(c, "map_1g_4k");
    for (label, batching) in [("batched", true), ("unbatched", false)] {
        let m = boot(batching);
        let cpu = m.cpu(0).expect("cpu 0");
        let tables = prepare(&m, &cpu);
        report_barriers(label, &cpu, &tables);
        g.bench_function(label, |b| {
            b.iter_custom(|iters| timed(iters, || unmap_ptes(&cpu, &tables), || map_ptes(&cpu, &tables)))
        });
    }
    g.finish();
}

fn bench_unmap(c: &mut Criterion) {
    let mut g = gig_group(c, "unmap_1g_4k");
    let m = boot(true);
    let cpu = m.cpu(0).expect("cpu 0");
    let tables = prepare(&m, &cpu);
    g.bench_function("ptep_get_and_clear", |b| {
        b.iter_custom(|iters| timed(iters, || map_ptes(&cpu, &tables), || unmap_ptes_flush(&cpu, &tables)))
    });
    g.bench_function("unmap_range", |b| {
        b.iter_custom(|iters| timed(iters, || map_ptes(&cpu, &tables), || unmap_with_unmap_range(&cpu)))
    });
    g.finish();
}

type HostMapping = Mapping<IdTranslation<El1Attributes>, El1And0>;

/// `PAGE_KERNEL`'s attributes: normal memory (MAIR index 1 here),
/// inner-shareable, accessed, global, never executable.
const A64_FLAGS: El1Attributes = El1Attributes::ATTRIBUTE_INDEX_1
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::VALID)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::PXN)
    .union(El1Attributes::UXN);
const A64_PAGES_ONLY: Constraints = Constraints::NO_BLOCK_MAPPINGS.union(Constraints::NO_CONTIGUOUS_HINT);

fn a64_mapping() -> HostMapping {
    let mut map = Mapping::with_asid_and_va_range(IdTranslation::new(), 1, 0, El1And0, VaRange::Upper);
    a64_map(&mut map);
    a64_unmap(&mut map);
    map
}

fn a64_map(map: &mut HostMapping) {
    let range = MemoryRegion::new(VA as usize, (VA + SIZE) as usize);
    map.map_range(&range, PhysicalAddress(PA as usize), A64_FLAGS, A64_PAGES_ONLY).expect("aarch64-paging map");
}

/// Invalid descriptors over the gigabyte, keeping the level-3 tables: each
/// 2 MiB in two pieces, neither of which the crate sees as a whole block
/// (an unmap of a whole block frees the subtable under it).
fn a64_unmap(map: &mut HostMapping) {
    for i in 0..SIZE / PMD_SIZE {
        let b = (VA + i * PMD_SIZE) as usize;
        let mid = b + PAGE_SIZE as usize;
        for (s, e) in [(b, mid), (mid, b + PMD_SIZE as usize)] {
            map.map_range(&MemoryRegion::new(s, e), PhysicalAddress(0), El1Attributes::empty(), A64_PAGES_ONLY)
                .expect("aarch64-paging unmap");
        }
    }
}

/// Check that the crate really wrote 262,144 level-3 pages.
fn a64_check(map: &HostMapping) {
    let mut pages = 0u64;
    let range = MemoryRegion::new(VA as usize, (VA + SIZE) as usize);
    map.walk_range(&range, &mut |_, d, level| {
        if level == 3 && d.is_valid() {
            pages += 1;
        }
        Ok(())
    })
    .expect("walk");
    assert_eq!(pages, PAGES, "aarch64-paging must map 4 KiB pages only");
}

fn bench_aarch64_paging(c: &mut Criterion) {
    let mut g = gig_group(c, "aarch64_paging");
    let mut map = a64_mapping();
    a64_map(&mut map);
    a64_check(&map);
    a64_unmap(&mut map);
    let map = std::cell::RefCell::new(map);
    g.bench_function("map_1g_4k", |b| {
        b.iter_custom(|iters| timed(iters, || a64_unmap(&mut map.borrow_mut()), || a64_map(&mut map.borrow_mut())))
    });
    g.bench_function("unmap_1g_4k", |b| {
        b.iter_custom(|iters| timed(iters, || a64_map(&mut map.borrow_mut()), || a64_unmap(&mut map.borrow_mut())))
    });
    g.finish();
}

fn bench_translate(c: &mut Criterion) {
    let m = boot(true);
    let cpu = m.cpu(0).expect("cpu 0");
    let asp = m.kernel_as();
    let tables = prepare(&m, &cpu);
    map_ptes(&cpu, &tables);
    let va = VA + 0x1234 * PAGE_SIZE + 0x18;
    let want = PhysAddr(PA + 0x1234 * PAGE_SIZE + 0x18);
    // The first access walks the tables and fills the TLB model and the
    // soft-MMU slot; the measured ones hit the slot.
    assert_eq!(mmu::translate(&cpu, &asp, va, Access::READ), Ok(want));
    let mut g = c.benchmark_group("pgtable");
    g.warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    // The PA, as a caller consumes it.
    g.bench_function("translate_hit", |b| {
        b.iter(|| mmu::translate(&cpu, black_box(&asp), black_box(va), Access::READ).ok())
    });
    // The whole 32-byte Result<PhysAddr, Fault> handed to black_box: the Ok
    // arm writes one tag byte that a wider load reads back, a failed store
    // forward on x86_64 (see the module docs).
    g.bench_function("translate_hit_result", |b| {
        b.iter(|| mmu::translate(&cpu, black_box(&asp), black_box(va), Access::READ))
    });
    g.bench_function("read_u64_hit", |b| b.iter(|| mmu::read_u64(&cpu, black_box(&asp), black_box(va)).ok()));
    // The TLB model, without the soft-MMU slot: a hit (one set probed), and
    // a miss, walk and fill (a cycle of 8,192 pages over the default model's
    // 256 sets of 5 ways: 32 pages per set, so every access misses).
    g.bench_function("translate_tlb_model_hit", |b| {
        b.iter(|| mmu::translate_uncached(&cpu, black_box(&asp), black_box(va), Access::READ).ok())
    });
    let sweep = || {
        for i in 0..8192 {
            black_box(mmu::translate_uncached(&cpu, &asp, VA + i * PAGE_SIZE, Access::READ).ok());
        }
    };
    sweep();
    let before = cpu.arch_data().tlb.counts().misses;
    sweep();
    assert_eq!(cpu.arch_data().tlb.counts().misses - before, 8192, "every access of the cycle misses");
    let mut i = 0u64;
    g.bench_function("translate_tlb_model_miss", |b| {
        b.iter(|| {
            i = (i + 1) % 8192;
            mmu::translate_uncached(&cpu, black_box(&asp), black_box(VA + i * PAGE_SIZE), Access::READ).ok()
        })
    });
    g.finish();
}

criterion_group!(benches, bench_map, bench_unmap, bench_aarch64_paging, bench_translate);

fn driver(kind: &str) {
    let iters: u64 = std::env::var("MMLAB_PGTABLE_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let t = Instant::now();
    match kind {
        "map_batched" | "map_unbatched" | "unmap" | "unmap_range" | "translate" | "map_proto_slice"
        | "map_proto_floor" => {
            let m = boot(kind != "map_unbatched");
            let cpu = m.cpu(0).expect("cpu 0");
            let tables = prepare(&m, &cpu);
            match kind {
                "map_proto_slice" | "map_proto_floor" => {
                    let floor = kind == "map_proto_floor";
                    driver_loop(iters, PAGES, || unmap_ptes(&cpu, &tables), || map_ptes_proto(&cpu, &tables, floor))
                }
                "unmap" => driver_loop(iters, PAGES, || map_ptes(&cpu, &tables), || unmap_ptes_flush(&cpu, &tables)),
                "unmap_range" => driver_loop(iters, PAGES, || map_ptes(&cpu, &tables), || unmap_with_unmap_range(&cpu)),
                "translate" => {
                    map_ptes(&cpu, &tables);
                    let asp = m.kernel_as();
                    let _ = mmu::translate(&cpu, &asp, VA, Access::READ);
                    let n = iters * 1_000_000;
                    driver_loop(
                        1,
                        n,
                        || {},
                        || {
                            for _ in 0..n {
                                black_box(mmu::translate(&cpu, black_box(&asp), black_box(VA), Access::READ).ok());
                            }
                        },
                    );
                    driver_loop(
                        1,
                        n,
                        || {},
                        || {
                            for _ in 0..n {
                                black_box(mmu::translate(&cpu, black_box(&asp), black_box(VA), Access::READ)).ok();
                            }
                        },
                    );
                    driver_loop(
                        1,
                        n,
                        || {},
                        || {
                            for _ in 0..n {
                                black_box(cpu.arch_data().tlb.fast_lookup(black_box(VA), 0, false));
                            }
                        },
                    );
                }
                _ => driver_loop(iters, PAGES, || unmap_ptes(&cpu, &tables), || map_ptes(&cpu, &tables)),
            }
        }
        "aarch64_map" => {
            let mut map = a64_mapping();
            let map = std::cell::RefCell::new(&mut map);
            driver_loop(iters, PAGES, || a64_unmap(&mut map.borrow_mut()), || a64_map(&mut map.borrow_mut()))
        }
        _ => panic!("MMLAB_PGTABLE_DRIVER: map_batched, map_unbatched, unmap, unmap_range, aarch64_map or translate"),
    }
    eprintln!("{kind}: {iters} iterations in {:?} (setup included)", t.elapsed());
}

/// `iters` times: `setup` untimed, then `op` (which does `per` units) timed.
#[inline(never)]
fn driver_loop(iters: u64, per: u64, setup: impl FnMut(), op: impl FnMut()) {
    let d = timed(iters, setup, op);
    eprintln!("driver_loop: {:.2} ns/unit", d.as_nanos() as f64 / (iters * per) as f64);
}

fn main() {
    if let Ok(kind) = std::env::var("MMLAB_PGTABLE_DRIVER") {
        driver(&kind);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
