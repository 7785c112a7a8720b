//! Ports of tools/testing/memblock/tests/alloc_exact_nid_api.c's NUMA cases
//! (`__memblock_alloc_exact_nid_numa_checks()`, Linux 7.2):
//! `memblock_alloc_exact_nid_raw()` on a node of [`setup_numa_memblock`]'s
//! eight, with the kernel's expected values. The node is tried above the
//! lower limit, then below it, and never left. The range checks the file
//! runs (`memblock_alloc_exact_nid_range_checks()`, alloc_nid_api.c's) are
//! in [`super::alloc_nid_api`]. Where a case is the same as one of
//! alloc_nid_api.c's, it runs that body (in [`super::alloc_nid_numa`]) with
//! [`NidAlloc::ExactNid`].

use super::alloc_nid_numa::*;
use super::*;

fn both(case: fn(bool)) {
    case(false);
    case(true);
}

fn exact(m: &mut Memblock, size: u64, min_addr: u64, max_addr: u64, nid: usize) -> Option<u64> {
    run_memblock_alloc_nid(m, NidAlloc::ExactNid, size, SMP_CACHE_BYTES, min_addr, max_addr, nid as i32)
}

#[test]
fn alloc_exact_nid_top_down_numa_simple_check() {
    top_down_numa_simple(NidAlloc::ExactNid);
}

#[test]
fn alloc_exact_nid_top_down_numa_part_reserved_check() {
    top_down_numa_part_reserved(NidAlloc::ExactNid);
}

#[test]
fn alloc_exact_nid_top_down_numa_split_range_low_check() {
    top_down_numa_split_range_low(NidAlloc::ExactNid);
}

#[test]
fn alloc_exact_nid_top_down_numa_no_overlap_split_check() {
    top_down_numa_no_overlap_split(NidAlloc::ExactNid);
}

/// The range is nodes 2 to 5, the requested node 0 below it: nothing on
/// node 0 in the range, so the lower limit is dropped, and the region ends
/// where node 0 does.
#[test]
fn alloc_exact_nid_top_down_numa_no_overlap_low_check() {
    let mut m = setup_numa_memblock(false);
    let (req_node, min_node, max_node) = (node(&m, 0), node(&m, 2), node(&m, 5));
    let size = SZ_64;
    let (min_addr, max_addr) = (min_node.base.0, max_node.end());
    assert!(exact(&mut m, size, min_addr, max_addr, 0).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (req_node.end() - size, size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_exact_nid_bottom_up_numa_simple_check() {
    bottom_up_numa_simple(NidAlloc::ExactNid);
}

#[test]
fn alloc_exact_nid_bottom_up_numa_part_reserved_check() {
    bottom_up_numa_part_reserved(NidAlloc::ExactNid);
}

#[test]
fn alloc_exact_nid_bottom_up_numa_split_range_low_check() {
    bottom_up_numa_split_range_low(NidAlloc::ExactNid);
}

#[test]
fn alloc_exact_nid_bottom_up_numa_no_overlap_split_check() {
    bottom_up_numa_no_overlap_split(NidAlloc::ExactNid);
}

/// Bottom-up: the range is nodes 2 to 5, the requested node 0 below it:
/// the lower limit is dropped, and the region starts where node 0 does.
#[test]
fn alloc_exact_nid_bottom_up_numa_no_overlap_low_check() {
    let mut m = setup_numa_memblock(true);
    let (req_node, min_node, max_node) = (node(&m, 0), node(&m, 2), node(&m, 5));
    let size = SZ_64;
    let (min_addr, max_addr) = (min_node.base.0, max_node.end());
    assert!(exact(&mut m, size, min_addr, max_addr, 0).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= req_node.end());
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// Twice the size of node 1: no allocation (no other node is tried).
fn alloc_exact_nid_numa_small_node_generic_check(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let size = SZ_2 * node(&m, 1).size;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    assert_eq!(exact(&mut m, size, min_addr, max_addr, 1), None);
}

#[test]
fn alloc_exact_nid_numa_small_node_check() {
    both(alloc_exact_nid_numa_small_node_generic_check);
}

/// Node 2 fully reserved: no allocation.
fn alloc_exact_nid_numa_node_reserved_generic_check(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let req_node = node(&m, 2);
    let size = req_node.size;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(req_node.base, req_node.size, "test");
    assert_eq!(exact(&mut m, size, min_addr, max_addr, 2), None);
}

#[test]
fn alloc_exact_nid_numa_node_reserved_check() {
    both(alloc_exact_nid_numa_node_reserved_generic_check);
}

/// Node 4's middle half reserved, leaving two quarters too small for half
/// the node: no allocation.
fn alloc_exact_nid_numa_part_reserved_fail_generic_check(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let req_node = node(&m, 4);
    assert!(SZ_4 <= req_node.size);
    let size = req_node.size / SZ_2;
    let r1 = (req_node.base.0 + size / SZ_2, size);
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    assert_eq!(exact(&mut m, size, min_addr, max_addr, 4), None);
}

#[test]
fn alloc_exact_nid_numa_part_reserved_fail_check() {
    both(alloc_exact_nid_numa_part_reserved_fail_generic_check);
}

/// A range over the end of node 2 and the first 256 bytes of the
/// requested node 3: below `max_addr` node 3 has only those 256 bytes, so
/// no allocation.
fn alloc_exact_nid_numa_split_range_high_generic_check(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let req_node = node(&m, 3);
    let size = SZ_512;
    let min_addr = req_node.base.0 - SZ_256;
    let max_addr = min_addr + size;
    assert_eq!(exact(&mut m, size, min_addr, max_addr, 3), None);
}

#[test]
fn alloc_exact_nid_numa_split_range_high_check() {
    both(alloc_exact_nid_numa_split_range_high_generic_check);
}

/// The range is nodes 2 to 5, the requested node 7 above it: no
/// allocation.
fn alloc_exact_nid_numa_no_overlap_high_generic_check(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let (min_node, max_node) = (node(&m, 2), node(&m, 5));
    let size = SZ_64;
    let (min_addr, max_addr) = (min_node.base.0, max_node.end());
    assert_eq!(exact(&mut m, size, min_addr, max_addr, 7), None);
}

#[test]
fn alloc_exact_nid_numa_no_overlap_high_check() {
    both(alloc_exact_nid_numa_no_overlap_high_generic_check);
}

#[test]
fn alloc_exact_nid_numa_large_region_check() {
    numa_large_region_generic(NidAlloc::ExactNid, false);
    numa_large_region_generic(NidAlloc::ExactNid, true);
}

#[test]
fn alloc_exact_nid_numa_reserved_full_merge_check() {
    numa_reserved_full_merge_generic(NidAlloc::ExactNid, false);
    numa_reserved_full_merge_generic(NidAlloc::ExactNid, true);
}

#[test]
fn alloc_exact_nid_numa_split_all_reserved_check() {
    numa_split_all_reserved_generic(NidAlloc::ExactNid, false);
    numa_split_all_reserved_generic(NidAlloc::ExactNid, true);
}
