//! Ports of tools/testing/memblock/tests/alloc_nid_api.c (Linux 7.2): its
//! range checks (`memblock_alloc_nid_range_checks()`), which the simulator
//! runs for `memblock_alloc_try_nid()`, `memblock_alloc_try_nid_raw()`
//! and, from alloc_exact_nid_api.c, `memblock_alloc_exact_nid_raw()`: all
//! ask for `NUMA_NO_NODE`, so on one node the three are one call
//! ([`Memblock::alloc_try_nid`]). Of the NUMA cases, the one that asks for
//! no node (`alloc_nid_numa_split_all_reserved_generic_check()`, in both
//! files) is ported; the others ask for a node, which mmlab's allocations
//! cannot (module docs).

use super::*;

fn both(case: fn(bool)) {
    case(false);
    case(true);
}

#[test]
fn alloc_nid_top_down_simple_check() {
    let mut m = setup_memblock(false);
    let size = SZ_128;
    let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES * 2;
    let max_addr = min_addr + SZ_512;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    let (base, sz) = rgn(&m, Reserved, 0);
    assert_eq!((base, sz), (max_addr - size, size));
    assert_eq!(base + sz, max_addr);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_top_down_end_misaligned_check() {
    let mut m = setup_memblock(false);
    let (size, misalign) = (SZ_128, SZ_2);
    let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES * 2;
    let max_addr = min_addr + SZ_512 + misalign;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    let (base, sz) = rgn(&m, Reserved, 0);
    assert_eq!((base, sz), (max_addr - size - misalign, size));
    assert!(base + sz < max_addr);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

fn alloc_nid_exact_address_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let size = SZ_1K;
    let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES;
    let max_addr = min_addr + size;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    let (base, sz) = rgn(&m, Reserved, 0);
    assert_eq!((base, sz), (min_addr, size));
    assert_eq!(base + sz, max_addr);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_exact_address_check() {
    both(alloc_nid_exact_address_generic_check);
}

#[test]
fn alloc_nid_top_down_narrow_range_check() {
    let mut m = setup_memblock(false);
    let size = SZ_256;
    let min_addr = m.start_of_dram().0 + SZ_512;
    let max_addr = min_addr + SMP_CACHE_BYTES;
    // Does not fit: the lower limit is dropped.
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (max_addr - size, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

fn alloc_nid_low_max_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let size = SZ_1K;
    let min_addr = m.start_of_dram().0;
    let max_addr = min_addr + SMP_CACHE_BYTES;
    assert_eq!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr), None);
}

#[test]
fn alloc_nid_low_max_check() {
    both(alloc_nid_low_max_generic_check);
}

fn alloc_nid_min_reserved_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (r1_size, r2_size) = (SZ_128, SZ_64);
    let total_size = r1_size + r2_size;
    let max_addr = m.end_of_dram().0;
    let min_addr = max_addr - r2_size;
    let reserved_base = min_addr - r1_size;
    m.reserve_kern(PhysAddr(reserved_base), r1_size, "test");
    assert!(memblock_alloc_nid(&mut m, r2_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (reserved_base, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_min_reserved_check() {
    both(alloc_nid_min_reserved_generic_check);
}

fn alloc_nid_max_reserved_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (r1_size, r2_size) = (SZ_64, SZ_128);
    let total_size = r1_size + r2_size;
    let max_addr = m.end_of_dram().0 - r1_size;
    let min_addr = max_addr - r2_size;
    m.reserve_kern(PhysAddr(max_addr), r1_size, "test");
    assert!(memblock_alloc_nid(&mut m, r2_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (min_addr, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_max_reserved_check() {
    both(alloc_nid_max_reserved_generic_check);
}

#[test]
fn alloc_nid_top_down_reserved_with_space_check() {
    let mut m = setup_memblock(false);
    let (r3_size, gap_size) = (SZ_64, SMP_CACHE_BYTES);
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
    let r2_size = SZ_128;
    let r2 = (r1.0 - (r3_size + gap_size + r2_size), r2_size);
    let total_size = r1.1 + r2.1 + r3_size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc_nid(&mut m, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 1), (max_addr - r3_size, r1.1 + r3_size));
    assert_eq!(rgn(&m, Reserved, 0), r2);
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), total_size);
}

fn alloc_nid_reserved_full_merge_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let r3_size = SZ_64;
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
    let r2_size = SZ_128;
    let r2 = (r1.0 - (r3_size + r2_size), r2_size);
    let total_size = r1.1 + r2.1 + r3_size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc_nid(&mut m, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (r2.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_reserved_full_merge_check() {
    both(alloc_nid_reserved_full_merge_generic_check);
}

#[test]
fn alloc_nid_top_down_reserved_no_space_check() {
    let mut m = setup_memblock(false);
    let (r3_size, gap_size) = (SZ_256, SMP_CACHE_BYTES);
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
    let r2_size = SZ_128;
    let r2 = (r1.0 - (r2_size + gap_size), r2_size);
    let total_size = r1.1 + r2.1 + r3_size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc_nid(&mut m, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 1), r1);
    assert_eq!(rgn(&m, Reserved, 0), (r2.0 - r3_size, r2.1 + r3_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), total_size);
}

fn alloc_nid_reserved_all_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (r3_size, gap_size) = (SZ_256, SMP_CACHE_BYTES);
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES, SMP_CACHE_BYTES);
    let r2 = (m.start_of_dram().0, MEM_SIZE - (r1.1 + gap_size));
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(memblock_alloc_nid(&mut m, r3_size, SMP_CACHE_BYTES, min_addr, max_addr), None);
}

#[test]
fn alloc_nid_reserved_all_check() {
    both(alloc_nid_reserved_all_generic_check);
}

#[test]
fn alloc_nid_top_down_cap_max_check() {
    let mut m = setup_memblock(false);
    let size = SZ_256;
    let min_addr = m.end_of_dram().0 - SZ_1K;
    let max_addr = m.end_of_dram().0 + SZ_256;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - size, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_top_down_cap_min_check() {
    let mut m = setup_memblock(false);
    let size = SZ_1K;
    let min_addr = m.start_of_dram().0 - SZ_256;
    let max_addr = m.end_of_dram().0;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - size, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_simple_check() {
    let mut m = setup_memblock(true);
    let size = SZ_128;
    let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES * 2;
    let max_addr = min_addr + SZ_512;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    let (base, sz) = rgn(&m, Reserved, 0);
    assert_eq!((base, sz), (min_addr, size));
    assert!(base + sz < max_addr);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_start_misaligned_check() {
    let mut m = setup_memblock(true);
    let (size, misalign) = (SZ_128, SZ_2);
    let min_addr = m.start_of_dram().0 + misalign;
    let max_addr = min_addr + SZ_512;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    let (base, sz) = rgn(&m, Reserved, 0);
    assert_eq!((base, sz), (min_addr + (SMP_CACHE_BYTES - misalign), size));
    assert!(base + sz < max_addr);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_narrow_range_check() {
    let mut m = setup_memblock(true);
    let size = SZ_256;
    let min_addr = m.start_of_dram().0 + SZ_512;
    let max_addr = min_addr + SMP_CACHE_BYTES;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_reserved_with_space_check() {
    let mut m = setup_memblock(true);
    let (r3_size, gap_size) = (SZ_64, SMP_CACHE_BYTES);
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
    let r2_size = SZ_128;
    let r2 = (r1.0 - (r3_size + gap_size + r2_size), r2_size);
    let total_size = r1.1 + r2.1 + r3_size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc_nid(&mut m, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 1), (max_addr, r1.1));
    assert_eq!(rgn(&m, Reserved, 0), (r2.0, r2.1 + r3_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_bottom_up_reserved_no_space_check() {
    let mut m = setup_memblock(true);
    let (r3_size, gap_size) = (SZ_256, SMP_CACHE_BYTES);
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
    let r2_size = SZ_128;
    let r2 = (r1.0 - (r2_size + gap_size), r2_size);
    let total_size = r1.1 + r2.1 + r3_size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc_nid(&mut m, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, r3_size));
    assert_eq!(rgn(&m, Reserved, 1), r2);
    assert_eq!(rgn(&m, Reserved, 2), r1);
    assert_eq!(cnt(&m, Reserved), 3);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_bottom_up_cap_max_check() {
    let mut m = setup_memblock(true);
    let size = SZ_256;
    let min_addr = m.start_of_dram().0 + SZ_1K;
    let max_addr = m.end_of_dram().0 + SZ_256;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (min_addr, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_cap_min_check() {
    let mut m = setup_memblock(true);
    let size = SZ_1K;
    let min_addr = m.start_of_dram().0;
    let max_addr = m.end_of_dram().0 - SZ_256;
    assert!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// alloc_nid_api.c `node_fractions`: each node's share of [`MEM_SIZE`] in
/// basis points.
const NODE_FRACTIONS: [u64; 8] = [2500, 625, 1250, 1250, 625, 625, 2500, 625];

/// tests/common.c `setup_numa_memblock()` without `movable_node`: eight
/// nodes of `MEM_SIZE * fraction / 10000` bytes one after the other, each
/// `MEMBLOCK_HOTPLUG`.
fn setup_numa_memblock(bottom_up: bool) -> Memblock {
    let mut m = Memblock::default();
    m.set_bottom_up(bottom_up);
    let mut base = MEM_BASE;
    for (nid, frac) in NODE_FRACTIONS.iter().enumerate() {
        let size = MEM_SIZE * frac / 10000;
        m.add_node(PhysAddr(base), size, nid as i32, MemblockFlags::HOTPLUG);
        base += size;
    }
    m
}

/// alloc_nid_api.c and alloc_exact_nid_api.c
/// `*_numa_split_all_reserved_generic_check()`: the free range is big
/// enough but spans two nodes, so no free-range piece fits.
fn alloc_nid_numa_split_all_reserved_generic_check(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    assert_eq!(cnt(&m, Memory), 8);
    let next_node = m.memory()[7];
    let size = SZ_256;
    let r2_base = next_node.base.0 + SZ_128;
    let r2 = (r2_base, m.end_of_dram().0 - r2_base);
    let r1 = (m.start_of_dram().0, MEM_SIZE - (r2.1 + size));
    let (min_addr, max_addr) = (r1.0 + r1.1, r2.0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(memblock_alloc_nid(&mut m, size, SMP_CACHE_BYTES, min_addr, max_addr), None);
}

#[test]
fn alloc_nid_numa_split_all_reserved_check() {
    both(alloc_nid_numa_split_all_reserved_generic_check);
}
