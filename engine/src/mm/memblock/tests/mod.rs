//! memblock's tests: the kernel's own memblock simulator cases
//! (tools/testing/memblock/tests/, Linux 7.2), ported one Rust test per
//! kernel case with the kernel's expected values, and mmlab's own.
//!
//! - [`basic_api`]: basic_api.c (add, reserve, remove, free, bottom-up,
//!   trim, overlaps, set_node);
//! - [`alloc_api`]: alloc_api.c (`memblock_alloc()` and
//!   `memblock_alloc_raw()`);
//! - [`alloc_helpers_api`]: alloc_helpers_api.c (`memblock_alloc_from()`);
//! - [`alloc_nid_api`]: alloc_nid_api.c's range checks, which the
//!   simulator runs for `memblock_alloc_try_nid()` (and `_raw`) and, from
//!   alloc_exact_nid_api.c, for `memblock_alloc_exact_nid_raw()`: each
//!   case here runs both ([`NID_ALLOCS`]);
//! - [`alloc_nid_numa`]: alloc_nid_api.c's NUMA cases
//!   (`memblock_alloc_try_nid()` on a node of [`setup_numa_memblock`]'s
//!   layout, falling back to any node, and `memblock_alloc_node()`);
//! - [`alloc_exact_nid_api`]: alloc_exact_nid_api.c's NUMA cases
//!   (`memblock_alloc_exact_nid_raw()`, which never leaves the node).
//!
//! Every case of the five kernel files is ported (basic_api.c's four that fill 128
//! regions adapted to arrays that do not double, said there). The
//! simulator runs its NUMA cases when built with `NUMA=1` (`CONFIG_NUMA`,
//! `CONFIG_NODES_SHIFT=4`), the configuration mmlab's memblock mirrors, and
//! without `--movable-node`, as here: `MEMBLOCK_HOTPLUG` memory is not
//! skipped (mmlab does not model `movable_node`; with it the simulator
//! adds the nodes without the flag, so the expected values are the same).
//!
//! The simulator runs every allocation case for a zeroing and a raw
//! variant; mmlab's memblock keeps no memory contents (module docs), so
//! the two are one call and each case runs once. Where a case runs in both
//! directions the port does too. The simulator's `SMP_CACHE_BYTES` is 32
//! (tools/include/linux/cache.h), and its memory is a 16 MiB host buffer of
//! which [`MEM_SIZE`] bytes are registered: here at [`MEM_BASE`].

use super::*;

mod alloc_api;
mod alloc_exact_nid_api;
mod alloc_helpers_api;
mod alloc_nid_api;
mod alloc_nid_numa;
mod basic_api;

pub(super) const SZ_2: u64 = 2;
pub(super) const SZ_4: u64 = 4;
pub(super) const SZ_8: u64 = 8;
pub(super) const SZ_16: u64 = 16;
pub(super) const SZ_32: u64 = 32;
pub(super) const SZ_64: u64 = 64;
pub(super) const SZ_128: u64 = 128;
pub(super) const SZ_256: u64 = 256;
pub(super) const SZ_512: u64 = 512;
pub(super) const SZ_1K: u64 = 1 << 10;
pub(super) const SZ_2K: u64 = 2 << 10;
pub(super) const SZ_4K: u64 = 4 << 10;
pub(super) const SZ_8K: u64 = 8 << 10;
pub(super) const SZ_16K: u64 = 16 << 10;
pub(super) const SZ_32K: u64 = 32 << 10;
pub(super) const SZ_64K: u64 = 64 << 10;
pub(super) const SZ_128K: u64 = 128 << 10;
pub(super) const SZ_512K: u64 = 512 << 10;
pub(super) const SZ_1M: u64 = 1 << 20;
pub(super) const SZ_2M: u64 = 2 << 20;
pub(super) const SZ_4M: u64 = 4 << 20;
pub(super) const SZ_8M: u64 = 8 << 20;
pub(super) const SZ_16M: u64 = 16 << 20;
pub(super) const SZ_32M: u64 = 32 << 20;
pub(super) const SZ_64M: u64 = 64 << 20;
pub(super) const SZ_128M: u64 = 128 << 20;
pub(super) const SZ_256M: u64 = 256 << 20;
pub(super) const SZ_512M: u64 = 512 << 20;
pub(super) const SZ_1G: u64 = 1 << 30;
pub(super) const SZ_2G: u64 = 2 << 30;

/// tests/common.h `MEM_SIZE`: the memory `setup_memblock()` registers.
pub(super) const MEM_SIZE: u64 = SZ_32K;
/// Where the dummy physical memory lies (the simulator's `malloc()`
/// result; any base aligned to a page serves).
pub(super) const MEM_BASE: u64 = 0x4000_0000;
/// The simulator's `SMP_CACHE_BYTES` (tools/include/linux/cache.h).
pub(super) const SMP_CACHE_BYTES: u64 = 32;
/// `PAGE_ALIGN(INIT_MEMBLOCK_REGIONS * 2 * sizeof(struct memblock_region))`
/// (24-byte regions): what the kernel's doubled array takes.
pub(super) const DOUBLED_ARRAY_SIZE: u64 = (INIT_MEMBLOCK_REGIONS as u64 * 2 * 24).next_multiple_of(PAGE_SIZE);

/// tests/common.c `setup_memblock()`: a fresh memblock with [`MEM_SIZE`]
/// bytes of memory at [`MEM_BASE`], allocating in direction `bottom_up`
/// (`run_top_down()` / `run_bottom_up()`).
pub(super) fn setup_memblock(bottom_up: bool) -> Memblock {
    let mut m = Memblock::default();
    m.set_bottom_up(bottom_up);
    m.add(PhysAddr(MEM_BASE), MEM_SIZE);
    m
}

/// `memblock.<t>.regions[i]` as (base, size): (0, 0) past the end, the
/// kernel's zeroed dummy region in an empty array.
pub(super) fn rgn(m: &Memblock, t: MemblockType, i: usize) -> (u64, u64) {
    m.regions(t).get(i).map_or((0, 0), |r| (r.base.0, r.size))
}

/// `memblock.<t>.cnt`.
pub(super) fn cnt(m: &Memblock, t: MemblockType) -> usize {
    m.regions(t).len()
}

/// `memblock.<t>.total_size`, checked against the regions, with the
/// arrays' invariants: sorted, disjoint, and minimal (no two neighbours
/// that touch with the same node and flags).
pub(super) fn total(m: &Memblock, t: MemblockType) -> u64 {
    let a = m.array(t);
    assert_eq!(a.total_size, a.regions.iter().map(|r| r.size).sum::<u64>(), "{} total_size", t.name());
    for w in a.regions.windows(2) {
        assert!(w[0].end() <= w[1].base.0, "{}: {:?} overlaps {:?}", t.name(), w[0], w[1]);
        let mergeable = w[0].end() == w[1].base.0 && w[0].nid == w[1].nid && w[0].flags == w[1].flags;
        assert!(!mergeable, "{}: {:?} and {:?} were not merged", t.name(), w[0], w[1]);
    }
    a.total_size
}

use MemblockType::{Memory, Reserved};

/// include/linux/memblock.h `memblock_alloc()`: any node, from
/// `MEMBLOCK_LOW_LIMIT` to `MEMBLOCK_ALLOC_ACCESSIBLE`; the base or None.
pub(super) fn memblock_alloc(m: &mut Memblock, size: u64, align: u64) -> Option<u64> {
    m.alloc_try_nid(size, align, MEMBLOCK_LOW_LIMIT, MEMBLOCK_ALLOC_ACCESSIBLE, NUMA_NO_NODE, "test").ok().map(|p| p.0)
}

/// The function alloc_nid_api.c's `run_memblock_alloc_nid()` calls, as its
/// test flags choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NidAlloc {
    /// `memblock_alloc_try_nid()` and `memblock_alloc_try_nid_raw()`
    /// (`TEST_F_NONE`, `TEST_F_RAW`: one call here).
    TryNid,
    /// `memblock_alloc_exact_nid_raw()` (`TEST_F_RAW | TEST_F_EXACT`).
    ExactNid,
}

/// Both: the functions the simulator runs alloc_nid_api.c's range checks
/// with (`memblock_alloc_nid_checks()` and
/// `memblock_alloc_exact_nid_range_checks()`).
pub(super) const NID_ALLOCS: [NidAlloc; 2] = [NidAlloc::TryNid, NidAlloc::ExactNid];

/// alloc_nid_api.c `run_memblock_alloc_nid()`: the base or None.
pub(super) fn run_memblock_alloc_nid(
    m: &mut Memblock,
    f: NidAlloc,
    size: u64,
    align: u64,
    min_addr: u64,
    max_addr: u64,
    nid: i32,
) -> Option<u64> {
    let r = match f {
        NidAlloc::TryNid => m.alloc_try_nid(size, align, min_addr, max_addr, nid, "test"),
        NidAlloc::ExactNid => m.alloc_exact_nid_raw(size, align, min_addr, max_addr, nid, "test"),
    };
    r.ok().map(|p| p.0)
}

/// [`run_memblock_alloc_nid`] with `NUMA_NO_NODE`, as the range checks ask.
pub(super) fn memblock_alloc_nid(
    m: &mut Memblock,
    f: NidAlloc,
    size: u64,
    align: u64,
    min_addr: u64,
    max_addr: u64,
) -> Option<u64> {
    run_memblock_alloc_nid(m, f, size, align, min_addr, max_addr, NUMA_NO_NODE)
}

/// tests/common.h `NUMA_NODES`.
pub(super) const NUMA_NODES: usize = 8;

/// alloc_nid_api.c and alloc_exact_nid_api.c `node_fractions`: each node's
/// share of [`MEM_SIZE`] in basis points.
pub(super) const NODE_FRACTIONS: [u64; NUMA_NODES] = [2500, 625, 1250, 1250, 625, 625, 2500, 625];

/// tests/common.c `setup_numa_memblock()` without `movable_node` (the
/// simulator's default): a fresh memblock with [`NUMA_NODES`] nodes of
/// `MEM_SIZE * fraction / 10000` bytes one after the other from
/// [`MEM_BASE`], node `i` being memory region `i`, each
/// `MEMBLOCK_HOTPLUG`, allocating in direction `bottom_up`.
pub(super) fn setup_numa_memblock(bottom_up: bool) -> Memblock {
    let mut m = Memblock::default();
    m.set_bottom_up(bottom_up);
    let mut base = MEM_BASE;
    for (nid, frac) in NODE_FRACTIONS.iter().enumerate() {
        let size = MEM_SIZE * frac / 10000;
        m.add_node(PhysAddr(base), size, nid as i32, MemblockFlags::HOTPLUG);
        base += size;
    }
    assert_eq!(cnt(&m, Memory), NUMA_NODES);
    m
}

/// `&memblock.memory.regions[i]`: node `i` after [`setup_numa_memblock`].
pub(super) fn node(m: &Memblock, i: usize) -> Region {
    m.memory()[i]
}

// mmlab's own cases.

#[test]
fn alloc_is_top_down_and_aligned() {
    let mut m = Memblock::default();
    m.add(PhysAddr(0x4000_0000), 64 << 20);
    let a = m.alloc(0x1800, 0x1000, "a").unwrap();
    assert_eq!(a, PhysAddr(0x4000_0000 + (64 << 20) - 0x2000));
    let b = m.alloc(2 << 20, 2 << 20, "b").unwrap();
    assert_eq!(b, PhysAddr(0x4000_0000 + (60 << 20)));
    assert_eq!(m.reserved_pages(), 2 + 512);
    assert_eq!(
        m.free_ranges(),
        vec![
            (0x4000_0000, 0x4000_0000 + (60 << 20)),
            (0x4000_0000 + (62 << 20), 0x4000_0000 + (64 << 20) - 0x2000),
            // the tail of the page that `a` only partly uses
            (0x4000_0000 + (64 << 20) - 0x800, 0x4000_0000 + (64 << 20)),
        ]
    );
    assert!(matches!(m.alloc(1 << 30, 4096, "huge"), Err(MemblockError::NoSpace { .. })));
    // A reservation over an allocation is merged into it where the flags
    // match (memblock_reserve_kern()) and kept apart where they do not.
    m.reserve_kern(PhysAddr(0x4000_0000 + (60 << 20)), 4096, "overlap");
    assert_eq!(cnt(&m, Reserved), 2);
    m.reserve(PhysAddr(0x4000_0000 + (62 << 20)), 4096, "plain");
    assert_eq!(cnt(&m, Reserved), 3);
    assert_eq!(total(&m, Reserved), 0x1800 + (2 << 20) + 4096);
}

#[test]
fn neighbours_merge_whoever_reserved_them() {
    let mut m = Memblock::default();
    m.add(PhysAddr(0x4000_0000), 64 << 20);
    m.add(PhysAddr(0x1_0000_0000), 16 << 20);
    // Page after page, top-down: one region.
    for _ in 0..1000 {
        m.alloc(PAGE_SIZE, PAGE_SIZE, "pgtable").unwrap();
    }
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(rgn(&m, Reserved, 0).0, 0x1_0000_0000 + (16 << 20) - 1000 * PAGE_SIZE);
    // Another owner's allocation joins it too: regions know no owners.
    let top = 0x1_0000_0000 + (16 << 20);
    m.alloc(PAGE_SIZE, PAGE_SIZE, "memmap").unwrap();
    assert_eq!(rgn(&m, Reserved, 0), (top - 1001 * PAGE_SIZE, 1001 * PAGE_SIZE));
    // A plain reservation below it has other flags: a second region. A
    // range overlapping both and the hole between the banks is accepted.
    m.reserve(PhysAddr(top - 1003 * PAGE_SIZE), PAGE_SIZE, "kernel");
    assert_eq!(cnt(&m, Reserved), 2);
    m.reserve(PhysAddr(0x8000_0000), 1 << 20, "hole");
    m.reserve(PhysAddr(top - PAGE_SIZE), 2 * PAGE_SIZE, "x");
    assert_eq!(rgn(&m, Reserved, 3), (top, PAGE_SIZE), "only what no region covered was added");
    assert_eq!(total(&m, Reserved), 1001 * PAGE_SIZE + PAGE_SIZE + (1 << 20) + PAGE_SIZE);
    // When the upper bank is full, allocation falls to the lower one.
    m.reserve(PhysAddr(0x1_0000_0000), 16 << 20, "fill");
    let low = m.alloc(15 << 20, PAGE_SIZE, "low").unwrap();
    assert_eq!(low.0, 0x4000_0000 + (64 << 20) - (15 << 20));
    assert!(matches!(m.alloc(60 << 20, PAGE_SIZE, "big"), Err(MemblockError::NoSpace { .. })));
    // The log keeps who asked for what, in order.
    let pg: u64 = m.reservations().filter(|r| r.name == "pgtable").map(|r| r.size).sum();
    assert_eq!(pg, 1000 * PAGE_SIZE);
    let mm: Vec<_> = m.reservations().filter(|r| r.name == "memmap").map(|r| (r.base.0, r.size)).collect();
    assert_eq!(mm, [(top - 1001 * PAGE_SIZE, PAGE_SIZE)]);
    let owners: Vec<&str> = m.reservations().skip(1000).map(|r| r.name).collect();
    assert_eq!(owners, ["memmap", "kernel", "hole", "x", "fill", "low"]);
}

#[test]
fn range_limits_bottom_up_and_free() {
    let mut m = Memblock::default();
    m.add(PhysAddr(0x4000_0000), 1 << 30);
    // Top-down below a limit, aligned: the CMA placement.
    let cma = m.alloc_range(64 << 20, 2 << 20, 0, 0x7000_0000, "cma").unwrap();
    assert_eq!(cma.0, 0x7000_0000 - (64 << 20));
    // Bottom-up from a floor; the direction is restored.
    let b = m.alloc_range_bottom_up(4096, 4096, 0x4000_1800, u64::MAX, "b").unwrap();
    assert_eq!(b.0, 0x4000_2000);
    assert!(!m.bottom_up());
    assert!(m.alloc_range_bottom_up(4096, 4096, 0x8000_0000, u64::MAX, "c").is_err());
    assert!(m.alloc_range(4096, 4096, 0x7000_0000, 0x7000_0000, "d").is_err());
    // Freeing the middle of a region splits it; freeing again frees nothing.
    m.reserve(PhysAddr(0x5000_0000), 5 * PAGE_SIZE, "kernel");
    assert_eq!(m.free(PhysAddr(0x5000_1000), 2 * PAGE_SIZE), 2 * PAGE_SIZE);
    assert_eq!(m.free(PhysAddr(0x5000_1000), 2 * PAGE_SIZE), 0);
    let k: Vec<(u64, u64)> = m.reserved().iter().filter(|r| r.base.0 >> 28 == 5).map(|r| (r.base.0, r.size)).collect();
    assert_eq!(k, [(0x5000_0000, PAGE_SIZE), (0x5000_3000, 2 * PAGE_SIZE)]);
    assert_eq!(m.reserved_pages(), 16384 + 1 + 3);
    // A free across an allocation and a plain reservation takes what each
    // had there.
    assert_eq!(m.free(PhysAddr(0x4000_0000), 0x1000_1000), 0x1000 + PAGE_SIZE);
    let log: Vec<String> = m.debug_log().iter().rev().take(2).map(|l| l.to_string()).collect();
    assert_eq!(log[0], "memblock_phys_free: [0x0000000040000000-0x0000000050000fff]");
    assert_eq!(log[1], "memblock_phys_free: [0x0000000050001000-0x0000000050002fff]");
    assert_eq!(
        m.reservations().nth(1).unwrap().to_string(),
        "__memblock_reserve: [0x0000000040002000-0x0000000040002fff] nid=-1 flags=20 b"
    );
}

/// Size 0 is a no-op, sizes are capped at `PHYS_ADDR_MAX`, bad
/// alignments are errors, alignment 0 is `SMP_CACHE_BYTES`, and an
/// allocation of 0 bytes finds a place and reserves nothing (as the
/// kernel's does).
#[test]
fn edge_input_as_the_kernel_takes_it() {
    let mut m = Memblock::default();
    m.add(PhysAddr(0x4000_0000), 0);
    m.reserve(PhysAddr(0x4000_0000), 0, "none");
    assert_eq!((cnt(&m, Memory), cnt(&m, Reserved)), (0, 0));
    m.add(PhysAddr(u64::MAX - 0xfff), 0x2000);
    assert_eq!(rgn(&m, Memory, 0), (u64::MAX - 0xfff, 0xfff));
    assert_eq!(m.end_of_dram().0, u64::MAX);
    m.remove(PhysAddr(0), u64::MAX);
    assert_eq!((cnt(&m, Memory), total(&m, Memory)), (0, 0));
    m.add(PhysAddr(0x4000_0000), 1 << 20);
    let e = MemblockError::BadAlign { align: 3, name: "odd" };
    assert_eq!(m.alloc(64, 3, "odd"), Err(e.clone()));
    assert_eq!(e.to_string(), "memblock: alignment 0x3 for odd is not a power of two");
    assert!(matches!(m.trim_memory(0), Err(MemblockError::BadAlign { align: 0, .. })));
    // arm64's SMP_CACHE_BYTES, not the simulator's.
    assert_eq!(m.alloc(1, 0, "a0"), Ok(PhysAddr(0x4010_0000 - super::SMP_CACHE_BYTES)));
    let before = m.reserved().to_vec();
    // The top of the highest free range, here the end of RAM, rounded down.
    assert_eq!(m.alloc(0, 4096, "zero"), Ok(PhysAddr(0x4010_0000)));
    assert_eq!(m.reserved(), before);
    assert_eq!(m.alloc(1 << 21, 4096, "big"), Err(MemblockError::NoSpace { size: 1 << 21, align: 4096, name: "big" }));
    // The first page is never handed out.
    let mut low = Memblock::default();
    low.add(PhysAddr(0), 2 * PAGE_SIZE);
    low.set_bottom_up(true);
    assert_eq!(low.alloc(PAGE_SIZE, PAGE_SIZE, "p"), Ok(PhysAddr(PAGE_SIZE)));
    assert!(low.alloc(PAGE_SIZE, PAGE_SIZE, "p").is_err());
}

#[test]
fn nomap_memory_is_neither_allocated_nor_freed() {
    let mut m = Memblock::default();
    m.add(PhysAddr(0x4000_0000), 4 << 20);
    m.mark_nomap(PhysAddr(0x4030_0000), 1 << 20);
    assert_eq!(cnt(&m, Memory), 2);
    assert!(m.is_memory(PhysAddr(0x4030_0000)) && !m.is_map_memory(PhysAddr(0x4030_0000)));
    assert_eq!(m.alloc(PAGE_SIZE, PAGE_SIZE, "t"), Ok(PhysAddr(0x4030_0000 - PAGE_SIZE)));
    assert_eq!(m.free_ranges(), [(0x4000_0000, 0x4030_0000 - PAGE_SIZE)]);
    m.clear_nomap(PhysAddr(0x4000_0000), 4 << 20);
    assert_eq!(rgn(&m, Memory, 0), (0x4000_0000, 4 << 20));
    assert_eq!(cnt(&m, Memory), 1);
    assert!(m.is_region_memory(PhysAddr(0x4000_0000), 4 << 20));
    assert!(!m.is_region_memory(PhysAddr(0x4000_0000), (4 << 20) + 1));
    assert!(m.is_reserved(PhysAddr(0x4030_0000 - 1)) && !m.is_reserved(PhysAddr(0x4030_0000)));
    assert!(m.is_region_reserved(PhysAddr(0x4000_0000), 0x30_0000) && !m.is_region_reserved(PhysAddr(0x4030_0000), 1));
    m.mark_hotplug(PhysAddr(0x4000_0000), 1 << 20);
    assert!(m.memory()[0].is_hotpluggable());
    m.clear_hotplug(PhysAddr(0x4000_0000), 1 << 20);
    assert_eq!(cnt(&m, Memory), 1);
}

#[test]
fn free_blocks_are_largest_aligned() {
    let mut got = vec![];
    free_pages_memory(0x40003, 0x40c05, &mut |p, o| got.push((p.0, o)));
    assert_eq!(
        got,
        vec![
            (0x40003, 0),
            (0x40004, 2),
            (0x40008, 3),
            (0x40010, 4),
            (0x40020, 5),
            (0x40040, 6),
            (0x40080, 7),
            (0x40100, 8),
            (0x40200, 9),
            (0x40400, 10),
            (0x40800, 10),
            (0x40c00, 2),
            (0x40c04, 0),
        ]
    );
    let total: u64 = got.iter().map(|(_, o)| 1u64 << o).sum();
    assert_eq!(total, 0x40c05 - 0x40003);
}
