//! Instruction counts per operation, for `scripts/instructions.sh`.
//!
//! Run under callgrind (`valgrind --tool=callgrind`), this program runs each
//! operation in two out-of-line spans, `ir_<op>_n1` with `N1` operations and
//! `ir_<op>_n2` with `N2`, after a warm-up outside both. The script reads
//! the inclusive instruction count of each span from `callgrind_annotate`
//! and reports `(Ir(n2) - Ir(n1)) / (units(n2) - units(n1))`: the cost of
//! one operation (or one page, for map and unmap) with the fixed cost of a
//! span (the call, the timer-free loop set-up, a final flush) cancelled.
//! Each span touches its own tag (`black_box(1u8)` or `2u8`) so that the
//! compiler cannot fold the two identical spans of an operation into one.
//! Without valgrind it just runs (a smoke test: `--quick` runs every span
//! with small counts).
//!
//! The operations are those of the criterion benches, with the same set-up:
//!
//! * `pcp_pair`: `alloc_pages(GFP_KERNEL, 0)` + `free_pages` on CPU 0, 1,000
//!   order-0 pages live in a fragmented pattern (pcp/benches/page_alloc.rs).
//! * `buddy_pair`: the same pair bypassing the pcp (`rmqueue_buddy` and
//!   `free_one_page` under the zone lock, with the page state
//!   `prep_new_page` / `free_pages` set), after `drain_all_pages`.
//! * `bsa_pair` (peer): the `buddy_system_allocator` crate's
//!   `FrameAllocator::alloc(1)` + `dealloc` over the same frames.
//! * `map_pte`: `vmap_pte_range()`'s loop, per page: a lazy-MMU section
//!   around 512 `set_pte` per table, the tables present and cleared
//!   (engine/benches/pgtable.rs `map_ptes`).
//! * `unmap_range`: the engine's `unmap_range` + its flush, per page.
//! * `a64_unmap` (peer): the `aarch64-paging` crate writing invalid
//!   descriptors over the same pages, two `map_range` calls per 2 MiB
//!   (engine/benches/pgtable.rs `a64_unmap`).
//! * `fix_size_p1`: test_vmalloc's `fix_size_alloc_test` iteration with one
//!   page: `vmalloc(4096)`, write a byte, `vfree` (vmalloc/benches). The
//!   spans start after a lazy purge and are too short to reach
//!   `lazy_max_pages`: purges are the next row.
//! * `lazy_purge_area`: `purge_vmap_area_lazy()` per lazy area (one-page
//!   areas left by `fix_size_p1`), the amortised share a `vfree` pays; each
//!   span on a machine of its own after the same warm-up.
//! * `long_busy_list`: one `long_busy_list_alloc_test` iteration with 15,000
//!   one-page areas live (vmalloc 100 pages and 1 page, write, vfree both),
//!   after a purge, as `fix_size_p1`.

use aarch64_paging::Mapping;
use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
use buddy_system_allocator::FrameAllocator;
use mmlab_buddy::{AllocFlags, Fpi};
use mmlab_engine::arch::arm64::barrier::BarrierBackend;
use mmlab_engine::arch::arm64::memory::{PHYS_OFFSET, VMALLOC_START};
use mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL;
use mmlab_engine::arch::arm64::pgtable::{
    Desc, Level, MapFlags, PteTable, arch_enter_lazy_mmu_mode, arch_leave_lazy_mmu_mode, map_range, mmu, unmap_range,
    walk,
};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Cpu, Gfp, Machine, MachineConfig, Migratetype, PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};
use std::hint::black_box;

/// Seed of the shuffle that picks the live set (as pcp/benches).
const SEED: u64 = 0x006d_6d6c_6162;
/// Live order-0 pages during the pair spans.
const LIVE: usize = 1_000;
/// Entries per table, bytes a PTE table maps.
const PTRS: usize = 512;
const PMD_SIZE: u64 = PAGE_SIZE * PTRS as u64;
/// The mapped range of the map/unmap spans: vmalloc VA 1 GiB aligned.
const VA: u64 = VMALLOC_START + (1 << 30);
const PA: u64 = PHYS_OFFSET;

/// Operation counts of the two spans, and units per operation.
#[derive(Clone, Copy)]
struct Counts {
    n1: u64,
    n2: u64,
}

/// Print one span's identity for the script: op, span, operations, units.
fn announce(op: &str, span: &str, n: u64, units: u64) {
    println!("span\t{op}\tir_{op}_{span}\t{n}\t{units}");
}

fn boot(mem: &str, backend: Option<BarrierBackend>) -> Machine {
    let mut cfg = MachineConfig::with(mem, 2).expect("config");
    if let Some(b) = backend {
        cfg.barrier_backend = b;
    }
    mmlab_harness::stack::Stack::boot_machine(cfg).map(mmlab_harness::stack::Stack::into_machine).expect("boot")
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

/// Allocate `2 * l`, free the half the shuffle puts last, keep the rest.
fn fragment<T: Copy>(l: usize, mut alloc: impl FnMut() -> T, mut free: impl FnMut(T)) -> Vec<T> {
    let pool: Vec<T> = (0..2 * l).map(|_| alloc()).collect();
    let perm = shuffled(2 * l);
    for &i in &perm[l..] {
        free(pool[i]);
    }
    perm[..l].iter().map(|&i| pool[i]).collect()
}

// ---------------------------------------------------------------------------
// Page allocator pairs
// ---------------------------------------------------------------------------

#[inline(always)]
fn pcp_pairs(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: u64) {
    for _ in 0..n {
        let p = pa.alloc_pages(cpu, Gfp::GFP_KERNEL, 0).expect("alloc");
        pa.free_pages(cpu, black_box(p), 0).expect("free");
    }
}
#[inline(never)]
fn ir_pcp_pair_n1(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: u64) {
    black_box(1u8);
    pcp_pairs(pa, cpu, n)
}
#[inline(never)]
fn ir_pcp_pair_n2(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: u64) {
    black_box(2u8);
    pcp_pairs(pa, cpu, n)
}

#[inline(always)]
fn buddy_pairs(m: &Machine, pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: u64) {
    let zone = pa.zone();
    let mt = Migratetype::Unmovable;
    for _ in 0..n {
        let p = zone.lock(cpu).rmqueue_buddy(0, mt, AllocFlags::WMARK_LOW).expect("alloc");
        let page = m.page(p);
        page.set_refcount(1);
        page.set_ext(PageExt::Alloc(0, mt));
        let p = black_box(p);
        let page = m.page(p);
        assert_eq!(page.put_testzero(), Some(true));
        page.set_ext(PageExt::Tail);
        zone.free_one_page(cpu, p, 0, Fpi::NONE);
    }
}
#[inline(never)]
fn ir_buddy_pair_n1(m: &Machine, pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: u64) {
    black_box(1u8);
    buddy_pairs(m, pa, cpu, n)
}
#[inline(never)]
fn ir_buddy_pair_n2(m: &Machine, pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: u64) {
    black_box(2u8);
    buddy_pairs(m, pa, cpu, n)
}

#[inline(always)]
fn bsa_pairs(fa: &mut FrameAllocator<32>, n: u64) {
    for _ in 0..n {
        let f = fa.alloc(1).expect("alloc");
        fa.dealloc(black_box(f), 1);
    }
}
#[inline(never)]
fn ir_bsa_pair_n1(fa: &mut FrameAllocator<32>, n: u64) {
    black_box(1u8);
    bsa_pairs(fa, n)
}
#[inline(never)]
fn ir_bsa_pair_n2(fa: &mut FrameAllocator<32>, n: u64) {
    black_box(2u8);
    bsa_pairs(fa, n)
}

fn pairs(c: Counts) {
    let m = boot("4G", None);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
    let cpu = m.cpu(0).expect("cpu 0");
    let live = fragment(
        LIVE,
        || pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).expect("live page"),
        |p: Pfn| pa.free_pages(&cpu, p, 0).expect("free"),
    );
    pcp_pairs(&pa, &cpu, 1_000);
    announce("pcp_pair", "n1", c.n1, c.n1);
    ir_pcp_pair_n1(&pa, &cpu, c.n1);
    announce("pcp_pair", "n2", c.n2, c.n2);
    ir_pcp_pair_n2(&pa, &cpu, c.n2);

    pa.drain_all_pages(&cpu);
    buddy_pairs(&m, &pa, &cpu, 1_000);
    announce("buddy_pair", "n1", c.n1, c.n1);
    ir_buddy_pair_n1(&m, &pa, &cpu, c.n1);
    announce("buddy_pair", "n2", c.n2, c.n2);
    ir_buddy_pair_n2(&m, &pa, &cpu, c.n2);
    for p in live {
        pa.free_pages(&cpu, p, 0).expect("free live page");
    }

    let start = (PHYS_OFFSET >> PAGE_SHIFT) as usize;
    let mut fa = FrameAllocator::<32>::new();
    fa.add_frame(start, start + ((4usize << 30) >> PAGE_SHIFT));
    let fa = std::cell::RefCell::new(fa);
    let _live = fragment(LIVE, || fa.borrow_mut().alloc(1).expect("live frame"), |f| fa.borrow_mut().dealloc(f, 1));
    let mut fa = fa.borrow_mut();
    bsa_pairs(&mut fa, 1_000);
    announce("bsa_pair", "n1", c.n1, c.n1);
    ir_bsa_pair_n1(&mut fa, c.n1);
    announce("bsa_pair", "n2", c.n2, c.n2);
    ir_bsa_pair_n2(&mut fa, c.n2);
}

// ---------------------------------------------------------------------------
// Page tables
// ---------------------------------------------------------------------------

/// Map `tables * 2 MiB` from `VA` once (tables from memblock), return the
/// PTE tables in VA order with their entries cleared.
fn prepare_tables(m: &Machine, cpu: &Cpu<'_>, tables: u64) -> Vec<PhysAddr> {
    let asp = m.kernel_as();
    let flags = MapFlags { block: false, cont: false };
    map_range(cpu, &asp, &mmlab_engine::machine::MemblockTables(m), VA, PA, tables * PMD_SIZE, PAGE_KERNEL, flags)
        .expect("map")
        .ignore();
    let t: Vec<PhysAddr> = (0..tables)
        .map(|i| {
            let leaf = walk(m, &asp, VA + i * PMD_SIZE).leaf.expect("mapped");
            assert_eq!(leaf.level, Level::Pte);
            PhysAddr(leaf.slot.0 & !(PAGE_SIZE - 1))
        })
        .collect();
    clear_ptes(cpu, &t);
    t
}

fn clear_ptes(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    for &t in tables {
        let table = PteTable::new(cpu.ram(), t);
        for i in 0..PTRS {
            black_box(table.get_and_clear(i));
        }
    }
}

#[inline(always)]
fn map_ptes(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    let mut pa = PA;
    for &t in tables {
        let table = PteTable::new(cpu.ram(), t);
        arch_enter_lazy_mmu_mode(cpu);
        for i in 0..PTRS {
            table.set_pte(cpu, i, Desc::page(pa, PAGE_KERNEL)).expect("set_pte");
            pa += PAGE_SIZE;
        }
        arch_leave_lazy_mmu_mode(cpu);
    }
}
#[inline(never)]
fn ir_map_pte_n1(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    black_box(1u8);
    map_ptes(cpu, tables)
}
#[inline(never)]
fn ir_map_pte_n2(cpu: &Cpu<'_>, tables: &[PhysAddr]) {
    black_box(2u8);
    map_ptes(cpu, tables)
}

#[inline(always)]
fn unmap(cpu: &Cpu<'_>, tables: u64) {
    let asp = mmlab_engine::arch::arm64::pgtable::init_mm(cpu);
    unmap_range(cpu, &asp, VA, tables * PMD_SIZE).expect("unmap_range").flush(cpu);
}
#[inline(never)]
fn ir_unmap_range_n1(cpu: &Cpu<'_>, tables: u64) {
    black_box(1u8);
    unmap(cpu, tables)
}
#[inline(never)]
fn ir_unmap_range_n2(cpu: &Cpu<'_>, tables: u64) {
    black_box(2u8);
    unmap(cpu, tables)
}

type HostMapping = Mapping<IdTranslation<El1Attributes>, El1And0>;
const A64_FLAGS: El1Attributes = El1Attributes::ATTRIBUTE_INDEX_1
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::VALID)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::PXN)
    .union(El1Attributes::UXN);
const A64_PAGES_ONLY: Constraints = Constraints::NO_BLOCK_MAPPINGS.union(Constraints::NO_CONTIGUOUS_HINT);

fn a64_map(map: &mut HostMapping, tables: u64) {
    let range = MemoryRegion::new(VA as usize, (VA + tables * PMD_SIZE) as usize);
    map.map_range(&range, PhysicalAddress(PA as usize), A64_FLAGS, A64_PAGES_ONLY).expect("aarch64-paging map");
}

/// Invalid descriptors, each 2 MiB in two pieces so that the level-3
/// tables are kept (as the criterion bench does).
#[inline(always)]
fn a64_unmap(map: &mut HostMapping, tables: u64) {
    for i in 0..tables {
        let b = (VA + i * PMD_SIZE) as usize;
        let mid = b + PAGE_SIZE as usize;
        for (s, e) in [(b, mid), (mid, b + PMD_SIZE as usize)] {
            map.map_range(&MemoryRegion::new(s, e), PhysicalAddress(0), El1Attributes::empty(), A64_PAGES_ONLY)
                .expect("aarch64-paging unmap");
        }
    }
}
#[inline(never)]
fn ir_a64_unmap_n1(map: &mut HostMapping, tables: u64) {
    black_box(1u8);
    a64_unmap(map, tables)
}
#[inline(never)]
fn ir_a64_unmap_n2(map: &mut HostMapping, tables: u64) {
    black_box(2u8);
    a64_unmap(map, tables)
}

fn pgtables(c: Counts) {
    let m = boot("2G", Some(BarrierBackend::Count));
    let cpu = m.cpu(0).expect("cpu 0");
    let tables = prepare_tables(&m, &cpu, c.n2);
    let (t1, t2) = (&tables[..c.n1 as usize], &tables[..]);
    let pages = |n: u64| n * PTRS as u64;
    // Warm-up: one round trip over all of it.
    map_ptes(&cpu, t2);
    unmap(&cpu, c.n2);
    announce("map_pte", "n1", c.n1, pages(c.n1));
    ir_map_pte_n1(&cpu, t1);
    clear_ptes(&cpu, t1);
    announce("map_pte", "n2", c.n2, pages(c.n2));
    ir_map_pte_n2(&cpu, t2);
    clear_ptes(&cpu, t2);

    map_ptes(&cpu, t1);
    announce("unmap_range", "n1", c.n1, pages(c.n1));
    ir_unmap_range_n1(&cpu, c.n1);
    map_ptes(&cpu, t2);
    announce("unmap_range", "n2", c.n2, pages(c.n2));
    ir_unmap_range_n2(&cpu, c.n2);

    let mut map = Mapping::with_asid_and_va_range(IdTranslation::new(), 1, 0, El1And0, VaRange::Upper);
    a64_map(&mut map, c.n2);
    a64_unmap(&mut map, c.n2);
    a64_map(&mut map, c.n1);
    announce("a64_unmap", "n1", c.n1, pages(c.n1));
    ir_a64_unmap_n1(&mut map, c.n1);
    a64_map(&mut map, c.n2);
    announce("a64_unmap", "n2", c.n2, pages(c.n2));
    ir_a64_unmap_n2(&mut map, c.n2);
}

// ---------------------------------------------------------------------------
// vmalloc
// ---------------------------------------------------------------------------

#[inline(always)]
fn fix_size(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>, n: u64) {
    let k = mmlab_engine::arch::arm64::pgtable::init_mm(cpu);
    for _ in 0..n {
        let a = vm.vmalloc(cpu, PAGE_SIZE).expect("vmalloc");
        mmu::write_bytes(cpu, &k, a, &[1]).expect("write");
        vm.vfree(cpu, black_box(a)).expect("vfree");
    }
}
#[inline(never)]
fn ir_fix_size_p1_n1(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>, n: u64) {
    black_box(1u8);
    fix_size(vm, cpu, n)
}
#[inline(never)]
fn ir_fix_size_p1_n2(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>, n: u64) {
    black_box(2u8);
    fix_size(vm, cpu, n)
}

#[inline(always)]
fn purge(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>) {
    assert!(vm.purge_vmap_area_lazy(cpu).expect("purge"), "lazy areas to purge");
}
#[inline(never)]
fn ir_lazy_purge_area_n1(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>) {
    black_box(1u8);
    purge(vm, cpu)
}
#[inline(never)]
fn ir_lazy_purge_area_n2(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>) {
    black_box(2u8);
    purge(vm, cpu)
}

#[inline(always)]
fn long_busy(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>, n: u64) {
    let k = mmlab_engine::arch::arm64::pgtable::init_mm(cpu);
    for _ in 0..n {
        let x = vm.vmalloc(cpu, 100 * PAGE_SIZE).expect("vmalloc");
        let y = vm.vmalloc(cpu, PAGE_SIZE).expect("vmalloc");
        mmu::write_bytes(cpu, &k, x, &[1]).expect("write");
        mmu::write_bytes(cpu, &k, y, &[1]).expect("write");
        vm.vfree(cpu, black_box(x)).expect("vfree");
        vm.vfree(cpu, black_box(y)).expect("vfree");
    }
}
#[inline(never)]
fn ir_long_busy_list_n1(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>, n: u64) {
    black_box(1u8);
    long_busy(vm, cpu, n)
}
#[inline(never)]
fn ir_long_busy_list_n2(vm: &Vmalloc<'_, '_>, cpu: &Cpu<'_>, n: u64) {
    black_box(2u8);
    long_busy(vm, cpu, n)
}

fn vmalloc(fix: Counts, busy: Counts, busy_areas: usize) {
    let m = boot("4G", Some(BarrierBackend::Count));
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).expect("cpu 0");
    fix_size(&vm, &cpu, 1_000);
    let _ = vm.purge_vmap_area_lazy(&cpu);
    announce("fix_size_p1", "n1", fix.n1, fix.n1);
    ir_fix_size_p1_n1(&vm, &cpu, fix.n1);
    let _ = vm.purge_vmap_area_lazy(&cpu);
    announce("fix_size_p1", "n2", fix.n2, fix.n2);
    ir_fix_size_p1_n2(&vm, &cpu, fix.n2);
    let _ = vm.purge_vmap_area_lazy(&cpu);

    // Each purge span starts from the same state, a machine of its own
    // after the same warm-up: a purge also decays the node pools the earlier
    // purges filled, so a second purge on this machine costs less per area
    // than the first (the two spans once gave -1.8 instructions per area).
    for (span, n) in [("n1", fix.n1), ("n2", fix.n2)] {
        let m = boot("4G", Some(BarrierBackend::Count));
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).expect("allocator");
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        let cpu = m.cpu(0).expect("cpu 0");
        fix_size(&vm, &cpu, 1_000);
        let _ = vm.purge_vmap_area_lazy(&cpu);
        fix_size(&vm, &cpu, n);
        announce("lazy_purge_area", span, n, n);
        if span == "n1" { ir_lazy_purge_area_n1(&vm, &cpu) } else { ir_lazy_purge_area_n2(&vm, &cpu) }
    }

    let live: Vec<u64> = (0..busy_areas).map(|_| vm.vmalloc(&cpu, PAGE_SIZE).expect("busy area")).collect();
    long_busy(&vm, &cpu, 10);
    let _ = vm.purge_vmap_area_lazy(&cpu);
    announce("long_busy_list", "n1", busy.n1, busy.n1);
    ir_long_busy_list_n1(&vm, &cpu, busy.n1);
    let _ = vm.purge_vmap_area_lazy(&cpu);
    announce("long_busy_list", "n2", busy.n2, busy.n2);
    ir_long_busy_list_n2(&vm, &cpu, busy.n2);
    for a in live {
        vm.vfree(&cpu, a).expect("vfree busy area");
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (pair, tables, fix, busy, busy_areas) = if quick {
        (Counts { n1: 10, n2: 30 }, Counts { n1: 1, n2: 2 }, Counts { n1: 10, n2: 30 }, Counts { n1: 2, n2: 4 }, 100)
    } else {
        // fix_size's n2 and long_busy_list's n2 stay under lazy_max_pages
        // (16,384 pages with 2 CPUs): 2 and 104 pages lazy per iteration.
        (
            Counts { n1: 1_000, n2: 3_000 },
            Counts { n1: 4, n2: 12 },
            Counts { n1: 2_000, n2: 6_000 },
            Counts { n1: 20, n2: 60 },
            15_000,
        )
    };
    pairs(pair);
    pgtables(tables);
    vmalloc(fix, busy, busy_areas);
    println!("done");
}
