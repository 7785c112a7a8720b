//! Ports of tools/testing/memblock/tests/alloc_api.c (Linux 7.2):
//! `memblock_alloc()` (and `memblock_alloc_raw()`, the same call here), one
//! test per kernel case with its expected values; a `*_generic_check` case
//! runs top-down and bottom-up, as the kernel's wrappers run it.

use super::*;

fn both(case: fn(bool)) {
    case(false);
    case(true);
}

#[test]
fn alloc_top_down_simple_check() {
    let mut m = setup_memblock(false);
    let size = SZ_2;
    let expected_start = m.end_of_dram().0 - SMP_CACHE_BYTES;
    assert!(memblock_alloc(&mut m, size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (expected_start, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_top_down_disjoint_check() {
    let mut m = setup_memblock(false);
    let r2_size = SZ_16;
    let alignment = SMP_CACHE_BYTES * 2;
    let r1 = (m.end_of_dram().0 - SZ_2, SZ_2);
    let expected_start = m.end_of_dram().0 - alignment;
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    assert!(memblock_alloc(&mut m, r2_size, alignment).is_some());
    assert_eq!(rgn(&m, Reserved, 1), r1);
    assert_eq!(rgn(&m, Reserved, 0), (expected_start, r2_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), r1.1 + r2_size);
}

#[test]
fn alloc_top_down_before_check() {
    let mut m = setup_memblock(false);
    // The first region ends at an aligned address, to test merging.
    let (r1_size, r2_size) = (SMP_CACHE_BYTES, SZ_512);
    let total_size = r1_size + r2_size;
    m.reserve_kern(PhysAddr(m.end_of_dram().0 - total_size), r1_size, "test");
    assert!(memblock_alloc(&mut m, r2_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - total_size, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_top_down_after_check() {
    let mut m = setup_memblock(false);
    let r2_size = SZ_512;
    // The first region starts at an aligned address, to test merging.
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES, SZ_8);
    let total_size = r1.1 + r2_size;
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    assert!(memblock_alloc(&mut m, r2_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (r1.0 - r2_size, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_top_down_second_fit_check() {
    let mut m = setup_memblock(false);
    let r3_size = SZ_1K;
    let r1 = (m.end_of_dram().0 - SZ_512, SZ_512);
    let r2 = (r1.0 - SZ_512, SZ_256);
    let total_size = r1.1 + r2.1 + r3_size;
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc(&mut m, r3_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (r2.0 - r3_size, r2.1 + r3_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), total_size);
}

fn alloc_in_between_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let gap_size = SMP_CACHE_BYTES;
    let r3_size = SZ_64;
    // Just enough space for the new region between the two.
    let rgn_size = (MEM_SIZE - (2 * gap_size + r3_size)) / 2;
    let r1 = (m.end_of_dram().0 - (gap_size + rgn_size), rgn_size);
    let r2 = (m.start_of_dram().0 + gap_size, rgn_size);
    let total_size = r1.1 + r2.1 + r3_size;
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc(&mut m, r3_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (r1.0 - r2.1 - r3_size, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_in_between_check() {
    both(alloc_in_between_generic_check);
}

fn alloc_small_gaps_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (region_size, gap_size) = (SZ_1K, SZ_256);
    let mut region_end = m.start_of_dram().0;
    while region_end < m.end_of_dram().0 {
        m.reserve(PhysAddr(region_end + gap_size), region_size, "test");
        region_end += gap_size + region_size;
    }
    assert_eq!(memblock_alloc(&mut m, region_size, SMP_CACHE_BYTES), None);
}

#[test]
fn alloc_small_gaps_check() {
    both(alloc_small_gaps_generic_check);
}

fn alloc_all_reserved_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    // Simulate full memory.
    m.reserve(m.start_of_dram(), MEM_SIZE, "test");
    assert_eq!(memblock_alloc(&mut m, SZ_256, SMP_CACHE_BYTES), None);
}

#[test]
fn alloc_all_reserved_check() {
    both(alloc_all_reserved_generic_check);
}

fn alloc_no_space_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let available_size = SZ_256;
    let reserved_size = MEM_SIZE - available_size;
    // Simulate almost-full memory.
    m.reserve(m.start_of_dram(), reserved_size, "test");
    assert_eq!(memblock_alloc(&mut m, SZ_1K, SMP_CACHE_BYTES), None);
}

#[test]
fn alloc_no_space_check() {
    both(alloc_no_space_generic_check);
}

fn alloc_limited_space_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let available_size = SZ_256;
    let reserved_size = MEM_SIZE - available_size;
    m.reserve_kern(m.start_of_dram(), reserved_size, "test");
    assert!(memblock_alloc(&mut m, available_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, MEM_SIZE));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), MEM_SIZE);
}

#[test]
fn alloc_limited_space_check() {
    both(alloc_limited_space_generic_check);
}

fn alloc_no_memory_generic_check(bottom_up: bool) {
    let mut m = Memblock::default();
    m.set_bottom_up(bottom_up);
    assert_eq!(memblock_alloc(&mut m, SZ_1K, SMP_CACHE_BYTES), None);
    assert_eq!(rgn(&m, Reserved, 0), (0, 0));
    assert_eq!(total(&m, Reserved), 0);
}

#[test]
fn alloc_no_memory_check() {
    both(alloc_no_memory_generic_check);
}

fn alloc_too_large_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    assert_eq!(memblock_alloc(&mut m, MEM_SIZE + SZ_2, SMP_CACHE_BYTES), None);
    assert_eq!(rgn(&m, Reserved, 0), (0, 0));
    assert_eq!(total(&m, Reserved), 0);
}

#[test]
fn alloc_too_large_check() {
    both(alloc_too_large_generic_check);
}

#[test]
fn alloc_bottom_up_simple_check() {
    let mut m = setup_memblock(true);
    assert!(memblock_alloc(&mut m, SZ_2, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, SZ_2));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), SZ_2);
}

#[test]
fn alloc_bottom_up_disjoint_check() {
    let mut m = setup_memblock(true);
    let r2_size = SZ_16;
    let alignment = SMP_CACHE_BYTES * 2;
    let r1 = (m.start_of_dram().0 + SZ_2, SZ_2);
    let expected_start = m.start_of_dram().0 + alignment;
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    assert!(memblock_alloc(&mut m, r2_size, alignment).is_some());
    assert_eq!(rgn(&m, Reserved, 0), r1);
    assert_eq!(rgn(&m, Reserved, 1), (expected_start, r2_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), r1.1 + r2_size);
}

#[test]
fn alloc_bottom_up_before_check() {
    let mut m = setup_memblock(true);
    let (r1_size, r2_size) = (SZ_512, SZ_128);
    let total_size = r1_size + r2_size;
    m.reserve_kern(PhysAddr(m.start_of_dram().0 + r1_size), r2_size, "test");
    assert!(memblock_alloc(&mut m, r1_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_bottom_up_after_check() {
    let mut m = setup_memblock(true);
    let r2_size = SZ_512;
    // The first region starts at an aligned address, to test merging.
    let r1 = (m.start_of_dram().0 + SMP_CACHE_BYTES, SZ_64);
    let total_size = r1.1 + r2_size;
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    assert!(memblock_alloc(&mut m, r2_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_bottom_up_second_fit_check() {
    let mut m = setup_memblock(true);
    let r3_size = SZ_1K;
    let r1 = (m.start_of_dram().0, SZ_512);
    let r2 = (r1.0 + r1.1 + SZ_512, SZ_256);
    let total_size = r1.1 + r2.1 + r3_size;
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc(&mut m, r3_size, SMP_CACHE_BYTES).is_some());
    assert_eq!(rgn(&m, Reserved, 1), (r2.0, r2.1 + r3_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), total_size);
}
