//! Ports of tools/testing/memblock/tests/alloc_nid_api.c's NUMA cases
//! (`__memblock_alloc_nid_numa_checks()`, Linux 7.2): allocations that ask
//! for a node of [`setup_numa_memblock`]'s eight, with the kernel's
//! expected values. `memblock_alloc_try_nid()` tries the node, then any
//! node, then both again without the lower limit. The kernel's
//! `*_top_down_*` and `*_bottom_up_*` cases are one test each; a
//! `*_generic_check` runs in both directions, as the kernel's wrappers run
//! it.
//!
//! Several of these cases are also alloc_exact_nid_api.c's (that file
//! repeats them for `memblock_alloc_exact_nid_raw()`, where the node is
//! found without a fall-back): their bodies take the function
//! ([`NidAlloc`]) and [`super::alloc_exact_nid_api`] runs them again.

use super::*;

fn both(case: fn(NidAlloc, bool), f: NidAlloc) {
    case(f, false);
    case(f, true);
}

/// `run_memblock_alloc_nid()` with `SMP_CACHE_BYTES` alignment, as every
/// NUMA case asks.
fn alloc_nid(m: &mut Memblock, f: NidAlloc, size: u64, min_addr: u64, max_addr: u64, nid: usize) -> Option<u64> {
    run_memblock_alloc_nid(m, f, size, SMP_CACHE_BYTES, min_addr, max_addr, nid as i32)
}

/// A node with room for the region: at its end.
pub(super) fn top_down_numa_simple(f: NidAlloc) {
    let mut m = setup_numa_memblock(false);
    let req_node = node(&m, 3);
    assert!(SZ_4 <= req_node.size);
    let size = req_node.size / SZ_4;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 3).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.end() - size, size));
    assert!(req_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_top_down_numa_simple_check() {
    top_down_numa_simple(NidAlloc::TryNid);
}

/// A node too small for the region: at the end of the last node big
/// enough (node 6; node 7 is too small too).
#[test]
fn alloc_nid_top_down_numa_small_node_check() {
    let mut m = setup_numa_memblock(false);
    let (req_node, exp_node) = (node(&m, 1), node(&m, 6));
    let size = SZ_2 * req_node.size;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 1).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (exp_node.end() - size, size));
    assert!(exp_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// A node fully reserved: at the end of the last node big enough and
/// free (node 6).
#[test]
fn alloc_nid_top_down_numa_node_reserved_check() {
    let mut m = setup_numa_memblock(false);
    let (req_node, exp_node) = (node(&m, 2), node(&m, 6));
    let size = req_node.size;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(req_node.base, req_node.size, "test");
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 2).is_some());
    let new_rgn = rgn(&m, Reserved, 1);
    assert_eq!(new_rgn, (exp_node.end() - size, size));
    assert!(exp_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), size + req_node.size);
}

/// A node half reserved (its lower half) with room left: at its end.
pub(super) fn top_down_numa_part_reserved(f: NidAlloc) {
    let mut m = setup_numa_memblock(false);
    let req_node = node(&m, 4);
    assert!(SZ_8 <= req_node.size);
    let r1 = (req_node.base.0, req_node.size / SZ_2);
    let size = r1.1 / SZ_4;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 4).is_some());
    let new_rgn = rgn(&m, Reserved, 1);
    assert_eq!(new_rgn, (req_node.end() - size, size));
    assert!(req_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), size + r1.1);
}

#[test]
fn alloc_nid_top_down_numa_part_reserved_check() {
    top_down_numa_part_reserved(NidAlloc::TryNid);
}

/// A node whose middle half is reserved, leaving two quarters too small:
/// at the end of the last node (node 7).
#[test]
fn alloc_nid_top_down_numa_part_reserved_fallback_check() {
    let mut m = setup_numa_memblock(false);
    let (req_node, exp_node) = (node(&m, 4), node(&m, NUMA_NODES - 1));
    assert!(SZ_4 <= req_node.size);
    let size = req_node.size / SZ_2;
    let r1 = (req_node.base.0 + size / SZ_2, size);
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 4).is_some());
    let new_rgn = rgn(&m, Reserved, 1);
    assert_eq!(new_rgn, (exp_node.end() - size, size));
    assert!(exp_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), size + r1.1);
}

/// A range over the end of the requested node and the start of the next:
/// the lower limit is dropped, and the region ends where the node does.
pub(super) fn top_down_numa_split_range_low(f: NidAlloc) {
    let mut m = setup_numa_memblock(false);
    let req_node = node(&m, 2);
    let size = SZ_512;
    let req_node_end = req_node.end();
    let min_addr = req_node_end - SZ_256;
    let max_addr = min_addr + size;
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 2).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node_end - size, size));
    assert!(req_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_top_down_numa_split_range_low_check() {
    top_down_numa_split_range_low(NidAlloc::TryNid);
}

/// A range over the end of a node and the start of the requested one: the
/// lower limit is dropped (on any node by then), and the region ends where
/// the first node does.
#[test]
fn alloc_nid_top_down_numa_split_range_high_check() {
    let mut m = setup_numa_memblock(false);
    let exp_node = node(&m, 2);
    let size = SZ_512;
    let exp_node_end = exp_node.end();
    let min_addr = exp_node_end - SZ_256;
    let max_addr = min_addr + size;
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 3).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (exp_node_end - size, size));
    assert!(exp_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// A range over two other nodes (5 and 6), the requested node below it:
/// no room in the range on any node, so the lower limit is dropped, and
/// the region ends where the requested node does.
pub(super) fn top_down_numa_no_overlap_split(f: NidAlloc) {
    let mut m = setup_numa_memblock(false);
    let (req_node, node2) = (node(&m, 2), node(&m, 6));
    let size = SZ_512;
    let min_addr = node2.base.0 - SZ_256;
    let max_addr = min_addr + size;
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 2).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.end() - size, size));
    assert!(req_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_top_down_numa_no_overlap_split_check() {
    top_down_numa_no_overlap_split(NidAlloc::TryNid);
}

/// The range is nodes 2 to 5, the requested node (`nid`) outside it: on
/// any node, at the end of the range.
fn top_down_numa_no_overlap(nid: usize) {
    let mut m = setup_numa_memblock(false);
    let (min_node, max_node) = (node(&m, 2), node(&m, 5));
    let size = SZ_64;
    let (min_addr, max_addr) = (min_node.base.0, max_node.end());
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, nid).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (max_addr - size, size));
    assert!(max_node.base.0 <= new_rgn.0);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// The requested node (0) below the range.
#[test]
fn alloc_nid_top_down_numa_no_overlap_low_check() {
    top_down_numa_no_overlap(0);
}

/// The requested node (7) above the range.
#[test]
fn alloc_nid_top_down_numa_no_overlap_high_check() {
    top_down_numa_no_overlap(7);
}

/// Bottom-up: a node with room for the region: at its start.
pub(super) fn bottom_up_numa_simple(f: NidAlloc) {
    let mut m = setup_numa_memblock(true);
    let req_node = node(&m, 3);
    assert!(SZ_4 <= req_node.size);
    let size = req_node.size / SZ_4;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 3).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= req_node.end());
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_numa_simple_check() {
    bottom_up_numa_simple(NidAlloc::TryNid);
}

/// Bottom-up: a node too small: at the start of the first node big
/// enough (node 0).
#[test]
fn alloc_nid_bottom_up_numa_small_node_check() {
    let mut m = setup_numa_memblock(true);
    let (req_node, exp_node) = (node(&m, 1), node(&m, 0));
    let size = SZ_2 * req_node.size;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 1).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (exp_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= exp_node.end());
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// Bottom-up: a node fully reserved: at the start of node 0.
#[test]
fn alloc_nid_bottom_up_numa_node_reserved_check() {
    let mut m = setup_numa_memblock(true);
    let (req_node, exp_node) = (node(&m, 2), node(&m, 0));
    let size = req_node.size;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(req_node.base, req_node.size, "test");
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 2).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (exp_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= exp_node.end());
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), size + req_node.size);
}

/// Bottom-up: a node half reserved (its lower half, a kernel reservation
/// on that node): right after the reservation, merged with it (same node,
/// same flags).
pub(super) fn bottom_up_numa_part_reserved(f: NidAlloc) {
    let mut m = setup_numa_memblock(true);
    let req_node = node(&m, 4);
    assert!(SZ_8 <= req_node.size);
    let r1 = (req_node.base.0, req_node.size / SZ_2);
    let size = r1.1 / SZ_4;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    let total_size = size + r1.1;
    m.reserve_nid(PhysAddr(r1.0), r1.1, 4, MemblockFlags::RSRV_KERN, "test");
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 4).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.base.0, total_size));
    assert!(new_rgn.0 + new_rgn.1 <= req_node.end());
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_bottom_up_numa_part_reserved_check() {
    bottom_up_numa_part_reserved(NidAlloc::TryNid);
}

/// Bottom-up: a node whose middle half is reserved: at the start of
/// node 0.
#[test]
fn alloc_nid_bottom_up_numa_part_reserved_fallback_check() {
    let mut m = setup_numa_memblock(true);
    let (req_node, exp_node) = (node(&m, 4), node(&m, 0));
    assert!(SZ_4 <= req_node.size);
    let size = req_node.size / SZ_2;
    let r1 = (req_node.base.0 + size / SZ_2, size);
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 4).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (exp_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= exp_node.end());
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), size + r1.1);
}

/// Bottom-up: a range over the end of the requested node and the start of
/// the next: the lower limit is dropped, and the region starts where the
/// node does.
pub(super) fn bottom_up_numa_split_range_low(f: NidAlloc) {
    let mut m = setup_numa_memblock(true);
    let req_node = node(&m, 2);
    let size = SZ_512;
    let req_node_end = req_node.end();
    let min_addr = req_node_end - SZ_256;
    let max_addr = min_addr + size;
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 2).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= req_node_end);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_numa_split_range_low_check() {
    bottom_up_numa_split_range_low(NidAlloc::TryNid);
}

/// Bottom-up: a range over the end of node 2 and the start of the
/// requested node 3: the lower limit is dropped (on any node by then), and
/// the region starts where memory does (node 0). The kernel bounds its end
/// by the end of the requested node, as here.
#[test]
fn alloc_nid_bottom_up_numa_split_range_high_check() {
    let mut m = setup_numa_memblock(true);
    let (req_node, exp_node) = (node(&m, 3), node(&m, 0));
    let size = SZ_512;
    let exp_node_end = req_node.end();
    let min_addr = req_node.base.0 - SZ_256;
    let max_addr = min_addr + size;
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, 3).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (exp_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= exp_node_end);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// Bottom-up: a range over nodes 5 and 6, the requested node below it: the
/// lower limit is dropped, and the region starts where the requested node
/// does.
pub(super) fn bottom_up_numa_no_overlap_split(f: NidAlloc) {
    let mut m = setup_numa_memblock(true);
    let (req_node, node2) = (node(&m, 2), node(&m, 6));
    let size = SZ_512;
    let min_addr = node2.base.0 - SZ_256;
    let max_addr = min_addr + size;
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, 2).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (req_node.base.0, size));
    assert!(new_rgn.0 + new_rgn.1 <= req_node.end());
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

#[test]
fn alloc_nid_bottom_up_numa_no_overlap_split_check() {
    bottom_up_numa_no_overlap_split(NidAlloc::TryNid);
}

/// Bottom-up: the range is nodes 2 to 5, the requested node (`nid`)
/// outside it: on any node, at the start of the range.
fn bottom_up_numa_no_overlap(nid: usize) {
    let mut m = setup_numa_memblock(true);
    let (min_node, max_node) = (node(&m, 2), node(&m, 5));
    let size = SZ_64;
    let (min_addr, max_addr) = (min_node.base.0, max_node.end());
    assert!(alloc_nid(&mut m, NidAlloc::TryNid, size, min_addr, max_addr, nid).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (min_addr, size));
    assert!(new_rgn.0 + new_rgn.1 <= min_node.end());
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), size);
}

/// Bottom-up: the requested node (0) below the range.
#[test]
fn alloc_nid_bottom_up_numa_no_overlap_low_check() {
    bottom_up_numa_no_overlap(0);
}

/// Bottom-up: the requested node (7) above the range.
#[test]
fn alloc_nid_bottom_up_numa_no_overlap_high_check() {
    bottom_up_numa_no_overlap(7);
}

/// Half of all memory, which no node holds: no allocation.
pub(super) fn numa_large_region_generic(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let size = MEM_SIZE / SZ_2;
    let (min_addr, max_addr) = (m.start_of_dram().0, m.end_of_dram().0);
    assert_eq!(alloc_nid(&mut m, f, size, min_addr, max_addr, 3), None);
}

#[test]
fn alloc_nid_numa_large_region_check() {
    both(numa_large_region_generic, NidAlloc::TryNid);
}

/// The range is exactly the requested node 6, between two kernel
/// reservations on that node: the region fills it and the three merge.
pub(super) fn numa_reserved_full_merge_generic(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let (nid_req, nid_next) = (6, 7);
    let (req_node, next_node) = (node(&m, nid_req), node(&m, nid_next));
    let size = req_node.size;
    let r1 = (next_node.base.0, SZ_128);
    let r2 = (r1.0 - (size + SZ_128), SZ_128);
    let total_size = r1.1 + r2.1 + size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve_nid(PhysAddr(r1.0), r1.1, nid_req as i32, MemblockFlags::RSRV_KERN, "test");
    m.reserve_nid(PhysAddr(r2.0), r2.1, nid_req as i32, MemblockFlags::RSRV_KERN, "test");
    assert!(alloc_nid(&mut m, f, size, min_addr, max_addr, nid_req).is_some());
    let new_rgn = rgn(&m, Reserved, 0);
    assert_eq!(new_rgn, (r2.0, total_size));
    assert!(new_rgn.0 <= req_node.base.0);
    assert!(req_node.end() <= new_rgn.0 + new_rgn.1);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_numa_reserved_full_merge_check() {
    both(numa_reserved_full_merge_generic, NidAlloc::TryNid);
}

/// No node asked for: the free range is big enough but spans two nodes
/// (6 and 7), so no free-range piece fits: no allocation.
pub(super) fn numa_split_all_reserved_generic(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let next_node = node(&m, 7);
    let size = SZ_256;
    let r2_base = next_node.base.0 + SZ_128;
    let r2 = (r2_base, m.end_of_dram().0 - r2_base);
    let r1 = (m.start_of_dram().0, MEM_SIZE - (r2.1 + size));
    let (min_addr, max_addr) = (r1.0 + r1.1, r2.0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(run_memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr, NUMA_NO_NODE), None);
}

#[test]
fn alloc_nid_numa_split_all_reserved_check() {
    both(numa_split_all_reserved_generic, NidAlloc::TryNid);
}

/// `memblock_alloc_node()` on node 2 succeeds; the kernel then checks the
/// node's id (`CONFIG_NUMA`). mmlab also checks what the case is named
/// for: the reservation is on node 2.
fn alloc_node_on_correct_nid(bottom_up: bool) {
    let mut m = setup_numa_memblock(bottom_up);
    let nid_req = 2;
    let size = SZ_512;
    assert!(m.alloc_node(size, SMP_CACHE_BYTES, nid_req, "test").is_ok());
    assert_eq!(nid_req, node(&m, 2).nid);
    // mmlab's: the reservation carries the node and lies in it.
    let r = m.reserved()[0];
    assert_eq!(r.nid, nid_req);
    assert!(node(&m, 2).base <= r.base && r.end() <= node(&m, 2).end());
}

#[test]
fn alloc_node_numa_on_correct_nid() {
    alloc_node_on_correct_nid(false);
    alloc_node_on_correct_nid(true);
}

// mmlab's own NUMA cases.

/// What the kernel's cases do not look at: a reservation on the node asked
/// for carries its id, one made after the fall-back to any node has none
/// (`memblock_reserve_kern()`), and so the two do not merge; the
/// `memblock=debug` lines say so.
#[test]
fn reservation_node_follows_the_fall_back() {
    let mut m = setup_numa_memblock(false);
    let n1 = node(&m, 1);
    // Node 1 fits 1K: reserved on node 1.
    let a = m.alloc_try_nid(SZ_1K, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, 1, "a").unwrap();
    assert_eq!(a.0, n1.end() - SZ_1K);
    // Node 1 has 1K left, not 2K: any node, top-down: the end of node 7.
    let b = m.alloc_try_nid(SZ_2K, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, 1, "b").unwrap();
    assert_eq!(b.0, m.end_of_dram().0 - SZ_2K);
    let nids: Vec<i32> = m.reserved().iter().map(|r| r.nid).collect();
    assert_eq!(nids, [1, NUMA_NO_NODE]);
    let lines: Vec<String> = m.reservations().map(|l| l.to_string()).collect();
    assert!(lines[0].ends_with(" nid=1 flags=20 a"), "{}", lines[0]);
    assert!(lines[1].ends_with(" nid=-1 flags=20 b"), "{}", lines[1]);
    // Exact: node 1's last 1K, then nothing.
    let c = m.alloc_exact_nid_raw(SZ_1K, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, 1, "c").unwrap();
    assert_eq!(c, n1.base);
    assert_eq!(rgn(&m, Reserved, 0), (n1.base.0, n1.size), "c merged with a: same node, same flags");
    assert!(matches!(
        m.alloc_exact_nid_raw(SMP_CACHE_BYTES, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, 1, "d"),
        Err(MemblockError::NoSpace { .. })
    ));
}

/// A node id that is neither a node nor `NUMA_NO_NODE` is refused, before
/// anything is reserved; the highest node id is accepted.
#[test]
fn bad_node_is_refused() {
    let mut m = setup_numa_memblock(false);
    for nid in [MAX_NUMNODES, -2, i32::MIN] {
        let e = MemblockError::BadNode { nid, name: "bad" };
        assert_eq!(m.alloc_try_nid(SZ_64, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, nid, "bad"), Err(e.clone()));
        assert_eq!(m.alloc_exact_nid_raw(SZ_64, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, nid, "bad"), Err(e));
    }
    assert_eq!(
        MemblockError::BadNode { nid: 16, name: "bad" }.to_string(),
        "memblock: node 16 asked for bad is not a node id nor NUMA_NO_NODE"
    );
    assert_eq!(cnt(&m, Reserved), 0);
    // Node 15 has no memory: any node will do, unless it must be node 15.
    assert!(m.alloc_node(SZ_64, SMP_CACHE_BYTES, MAX_NUMNODES - 1, "n15").is_ok());
    assert!(m.alloc_exact_nid_raw(SZ_64, SMP_CACHE_BYTES, 0, MEMBLOCK_ALLOC_ANYWHERE, MAX_NUMNODES - 1, "x").is_err());
}
