//! Ports of tools/testing/memblock/tests/alloc_nid_api.c (Linux 7.2): its
//! range checks (`memblock_alloc_nid_range_checks()`) on one node of
//! memory, which the simulator runs for `memblock_alloc_try_nid()`,
//! `memblock_alloc_try_nid_raw()` (one call here) and, from
//! alloc_exact_nid_api.c, `memblock_alloc_exact_nid_raw()`; all ask for
//! `NUMA_NO_NODE`. Each case here runs with both functions
//! ([`NID_ALLOCS`]). The NUMA cases are in [`super::alloc_nid_numa`].

use super::*;

/// A `*_generic_check` case top-down and bottom-up, with each function.
fn both(case: fn(NidAlloc, bool)) {
    for f in NID_ALLOCS {
        case(f, false);
        case(f, true);
    }
}

#[test]
fn alloc_nid_top_down_simple_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let size = SZ_128;
        let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES * 2;
        let max_addr = min_addr + SZ_512;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        let (base, sz) = rgn(&m, Reserved, 0);
        assert_eq!((base, sz), (max_addr - size, size));
        assert_eq!(base + sz, max_addr);
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_top_down_end_misaligned_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let (size, misalign) = (SZ_128, SZ_2);
        let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES * 2;
        let max_addr = min_addr + SZ_512 + misalign;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        let (base, sz) = rgn(&m, Reserved, 0);
        assert_eq!((base, sz), (max_addr - size - misalign, size));
        assert!(base + sz < max_addr);
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

fn alloc_nid_exact_address_generic_check(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let size = SZ_1K;
    let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES;
    let max_addr = min_addr + size;
    assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
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
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let size = SZ_256;
        let min_addr = m.start_of_dram().0 + SZ_512;
        let max_addr = min_addr + SMP_CACHE_BYTES;
        // Does not fit: the lower limit is dropped.
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (max_addr - size, size));
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

fn alloc_nid_low_max_generic_check(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let size = SZ_1K;
    let min_addr = m.start_of_dram().0;
    let max_addr = min_addr + SMP_CACHE_BYTES;
    assert_eq!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr), None);
}

#[test]
fn alloc_nid_low_max_check() {
    both(alloc_nid_low_max_generic_check);
}

fn alloc_nid_min_reserved_generic_check(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (r1_size, r2_size) = (SZ_128, SZ_64);
    let total_size = r1_size + r2_size;
    let max_addr = m.end_of_dram().0;
    let min_addr = max_addr - r2_size;
    let reserved_base = min_addr - r1_size;
    m.reserve_kern(PhysAddr(reserved_base), r1_size, "test");
    assert!(memblock_alloc_nid(&mut m, f, r2_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
    assert_eq!(rgn(&m, Reserved, 0), (reserved_base, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn alloc_nid_min_reserved_check() {
    both(alloc_nid_min_reserved_generic_check);
}

fn alloc_nid_max_reserved_generic_check(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (r1_size, r2_size) = (SZ_64, SZ_128);
    let total_size = r1_size + r2_size;
    let max_addr = m.end_of_dram().0 - r1_size;
    let min_addr = max_addr - r2_size;
    m.reserve_kern(PhysAddr(max_addr), r1_size, "test");
    assert!(memblock_alloc_nid(&mut m, f, r2_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
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
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let (r3_size, gap_size) = (SZ_64, SMP_CACHE_BYTES);
        let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
        let r2_size = SZ_128;
        let r2 = (r1.0 - (r3_size + gap_size + r2_size), r2_size);
        let total_size = r1.1 + r2.1 + r3_size;
        let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
        m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
        m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
        assert!(memblock_alloc_nid(&mut m, f, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 1), (max_addr - r3_size, r1.1 + r3_size));
        assert_eq!(rgn(&m, Reserved, 0), r2);
        assert_eq!(cnt(&m, Reserved), 2);
        assert_eq!(total(&m, Reserved), total_size);
    }
}

fn alloc_nid_reserved_full_merge_generic_check(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let r3_size = SZ_64;
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
    let r2_size = SZ_128;
    let r2 = (r1.0 - (r3_size + r2_size), r2_size);
    let total_size = r1.1 + r2.1 + r3_size;
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
    m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
    assert!(memblock_alloc_nid(&mut m, f, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
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
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let (r3_size, gap_size) = (SZ_256, SMP_CACHE_BYTES);
        let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
        let r2_size = SZ_128;
        let r2 = (r1.0 - (r2_size + gap_size), r2_size);
        let total_size = r1.1 + r2.1 + r3_size;
        let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
        m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
        m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
        assert!(memblock_alloc_nid(&mut m, f, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 1), r1);
        assert_eq!(rgn(&m, Reserved, 0), (r2.0 - r3_size, r2.1 + r3_size));
        assert_eq!(cnt(&m, Reserved), 2);
        assert_eq!(total(&m, Reserved), total_size);
    }
}

fn alloc_nid_reserved_all_generic_check(f: NidAlloc, bottom_up: bool) {
    let mut m = setup_memblock(bottom_up);
    let (r3_size, gap_size) = (SZ_256, SMP_CACHE_BYTES);
    let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES, SMP_CACHE_BYTES);
    let r2 = (m.start_of_dram().0, MEM_SIZE - (r1.1 + gap_size));
    let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(memblock_alloc_nid(&mut m, f, r3_size, SMP_CACHE_BYTES, min_addr, max_addr), None);
}

#[test]
fn alloc_nid_reserved_all_check() {
    both(alloc_nid_reserved_all_generic_check);
}

#[test]
fn alloc_nid_top_down_cap_max_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let size = SZ_256;
        let min_addr = m.end_of_dram().0 - SZ_1K;
        let max_addr = m.end_of_dram().0 + SZ_256;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - size, size));
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_top_down_cap_min_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(false);
        let size = SZ_1K;
        let min_addr = m.start_of_dram().0 - SZ_256;
        let max_addr = m.end_of_dram().0;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (m.end_of_dram().0 - size, size));
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_bottom_up_simple_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let size = SZ_128;
        let min_addr = m.start_of_dram().0 + SMP_CACHE_BYTES * 2;
        let max_addr = min_addr + SZ_512;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        let (base, sz) = rgn(&m, Reserved, 0);
        assert_eq!((base, sz), (min_addr, size));
        assert!(base + sz < max_addr);
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_bottom_up_start_misaligned_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let (size, misalign) = (SZ_128, SZ_2);
        let min_addr = m.start_of_dram().0 + misalign;
        let max_addr = min_addr + SZ_512;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        let (base, sz) = rgn(&m, Reserved, 0);
        assert_eq!((base, sz), (min_addr + (SMP_CACHE_BYTES - misalign), size));
        assert!(base + sz < max_addr);
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_bottom_up_narrow_range_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let size = SZ_256;
        let min_addr = m.start_of_dram().0 + SZ_512;
        let max_addr = min_addr + SMP_CACHE_BYTES;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, size));
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_bottom_up_reserved_with_space_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let (r3_size, gap_size) = (SZ_64, SMP_CACHE_BYTES);
        let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
        let r2_size = SZ_128;
        let r2 = (r1.0 - (r3_size + gap_size + r2_size), r2_size);
        let total_size = r1.1 + r2.1 + r3_size;
        let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
        m.reserve_kern(PhysAddr(r1.0), r1.1, "test");
        m.reserve_kern(PhysAddr(r2.0), r2.1, "test");
        assert!(memblock_alloc_nid(&mut m, f, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 1), (max_addr, r1.1));
        assert_eq!(rgn(&m, Reserved, 0), (r2.0, r2.1 + r3_size));
        assert_eq!(cnt(&m, Reserved), 2);
        assert_eq!(total(&m, Reserved), total_size);
    }
}

#[test]
fn alloc_nid_bottom_up_reserved_no_space_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let (r3_size, gap_size) = (SZ_256, SMP_CACHE_BYTES);
        let r1 = (m.end_of_dram().0 - SMP_CACHE_BYTES * 2, SMP_CACHE_BYTES);
        let r2_size = SZ_128;
        let r2 = (r1.0 - (r2_size + gap_size), r2_size);
        let total_size = r1.1 + r2.1 + r3_size;
        let (min_addr, max_addr) = (r2.0 + r2.1, r1.0);
        m.reserve(PhysAddr(r1.0), r1.1, "test");
        m.reserve(PhysAddr(r2.0), r2.1, "test");
        assert!(memblock_alloc_nid(&mut m, f, r3_size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, r3_size));
        assert_eq!(rgn(&m, Reserved, 1), r2);
        assert_eq!(rgn(&m, Reserved, 2), r1);
        assert_eq!(cnt(&m, Reserved), 3);
        assert_eq!(total(&m, Reserved), total_size);
    }
}

#[test]
fn alloc_nid_bottom_up_cap_max_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let size = SZ_256;
        let min_addr = m.start_of_dram().0 + SZ_1K;
        let max_addr = m.end_of_dram().0 + SZ_256;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (min_addr, size));
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}

#[test]
fn alloc_nid_bottom_up_cap_min_check() {
    for f in NID_ALLOCS {
        let mut m = setup_memblock(true);
        let size = SZ_1K;
        let min_addr = m.start_of_dram().0;
        let max_addr = m.end_of_dram().0 - SZ_256;
        assert!(memblock_alloc_nid(&mut m, f, size, SMP_CACHE_BYTES, min_addr, max_addr).is_some());
        assert_eq!(rgn(&m, Reserved, 0), (m.start_of_dram().0, size));
        assert_eq!(cnt(&m, Reserved), 1);
        assert_eq!(total(&m, Reserved), size);
    }
}
