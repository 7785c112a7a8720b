//! Ports of tools/testing/memblock/tests/alloc_helpers_api.c (Linux 7.2):
//! `memblock_alloc_from()`, one test per kernel case with its expected
//! values; a `*_generic_check` case runs top-down and bottom-up.

use super::*;

fn alloc_from(m: &mut Memblock, size: u64, align: u64, min_addr: u64) -> Option<u64> {
    m.alloc_from(size, align, min_addr, "test").ok().map(|p| p.0)
}

fn alloc_from_simple_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let size = SZ_16;
    let min_addr = m.end_of_dram().0 - SMP_CACHE_BYTES;
    assert!(alloc_from(&mut m, size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (min_addr, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_from_simple_check() {
    alloc_from_simple_generic_check(false);
    alloc_from_simple_generic_check(true);
}

fn alloc_from_misaligned_generic_check(bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let size = SZ_32;
    // A misaligned address.
    let min_addr = m.end_of_dram().0 - (SMP_CACHE_BYTES * 2 - 1);
    assert!(alloc_from(&mut m, size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - SMP_CACHE_BYTES, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_from_misaligned_check() {
    alloc_from_misaligned_generic_check(false);
    alloc_from_misaligned_generic_check(true);
}

#[test]
fn alloc_from_top_down_high_addr_check() {
    let mut m = setup_memblock(false);
    let size = SZ_32;
    // Too close to the end of memory: memory wins over the lower limit.
    let min_addr = m.end_of_dram().0 - SZ_16;
    assert!(alloc_from(&mut m, size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - SMP_CACHE_BYTES, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_from_top_down_no_space_above_check() {
    let mut m = setup_memblock(false);
    let (r1_size, r2_size) = (SZ_64, SZ_2);
    let total_size = r1_size + r2_size;
    let min_addr = m.end_of_dram().0 - SMP_CACHE_BYTES * 2;
    // No space above this address.
    m.reserve_kern(PhysAddr(min_addr), r2_size, "test");
    assert!(alloc_from(&mut m, r1_size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (min_addr - r1_size, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_from_top_down_min_addr_cap_check() {
    let mut m = setup_memblock(false);
    let r1_size = SZ_64;
    let start_addr = m.start_of_dram().0;
    let min_addr = start_addr - SMP_CACHE_BYTES * 3;
    m.reserve_kern(PhysAddr(start_addr + r1_size), MEM_SIZE - r1_size, "test");
    assert!(alloc_from(&mut m, r1_size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (start_addr, MEM_SIZE));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), MEM_SIZE);
}

#[test]
fn alloc_from_bottom_up_high_addr_check() {
    let mut m = setup_memblock(true);
    let size = SZ_32;
    let min_addr = m.end_of_dram().0 - SZ_8;
    assert!(alloc_from(&mut m, size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_from_bottom_up_no_space_above_check() {
    let mut m = setup_memblock(true);
    let r1_size = SZ_64;
    let min_addr = m.start_of_dram().0 + SZ_128;
    let r2_size = m.end_of_dram().0 - min_addr;
    // No space above this address.
    m.reserve(PhysAddr(min_addr - SMP_CACHE_BYTES), r2_size, "test");
    assert!(alloc_from(&mut m, r1_size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, r1_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), r1_size + r2_size);
}

#[test]
fn alloc_from_bottom_up_min_addr_cap_check() {
    let mut m = setup_memblock(true);
    let r1_size = SZ_64;
    let start_addr = m.start_of_dram().0;
    let min_addr = start_addr - SMP_CACHE_BYTES * 3;
    assert!(alloc_from(&mut m, r1_size, SMP_CACHE_BYTES, min_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (start_addr, r1_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), r1_size);
}
