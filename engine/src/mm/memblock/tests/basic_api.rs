//! Ports of tools/testing/memblock/tests/basic_api.c (Linux 7.2): one test
//! per kernel case, named as the kernel names it, with its expected
//! values. The four cases that fill 128 regions (`*_many_*`,
//! `*_all_locations_*`) check the regions and totals the kernel expects
//! with one difference, said at each: mmlab's arrays grow without
//! `memblock_double_array()`, so the kernel's reservation of the doubled
//! array (and `max`) is absent.

use super::*;

#[test]
fn memblock_initialization_check() {
    let m = Memblock::default();
    assert_eq!(cnt(&m, Memory), 0);
    assert_eq!(Memory.name(), "memory");
    assert_eq!(cnt(&m, Reserved), 0);
    assert_eq!(Reserved.name(), "reserved");
    assert!(!m.bottom_up());
    assert_eq!(m.current_limit(), MEMBLOCK_ALLOC_ANYWHERE);
}

#[test]
fn memblock_add_simple_check() {
    let (base, size) = (SZ_1G, SZ_4M);
    let mut m = Memblock::default();
    m.add(PhysAddr(base), size);
    assert_eq!(rgn(&m, Memory, 0), (base, size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), size);
}

#[test]
fn memblock_add_node_simple_check() {
    let (base, size) = (SZ_1M, SZ_16M);
    let mut m = Memblock::default();
    m.add_node(PhysAddr(base), size, 1, MemblockFlags::HOTPLUG);
    assert_eq!(rgn(&m, Memory, 0), (base, size));
    assert_eq!(m.memory()[0].nid, 1);
    assert_eq!(m.memory()[0].flags, MemblockFlags::HOTPLUG);
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), size);
}

#[test]
fn memblock_add_disjoint_check() {
    let r1 = (SZ_1G, SZ_8K);
    let r2 = (SZ_1G + SZ_16K, SZ_8K);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), r1);
    assert_eq!(rgn(&m, Memory, 1), r2);
    assert_eq!(cnt(&m, Memory), 2);
    assert_eq!(total(&m, Memory), r1.1 + r2.1);
}

#[test]
fn memblock_add_overlap_top_check() {
    let r1 = (SZ_512M, SZ_1G);
    let r2 = (SZ_256M, SZ_512M);
    let total_size = (r1.0 - r2.0) + r1.1;
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), (r2.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

#[test]
fn memblock_add_overlap_bottom_check() {
    let r1 = (SZ_128M, SZ_512M);
    let r2 = (SZ_256M, SZ_1G);
    let total_size = (r2.0 - r1.0) + r2.1;
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

#[test]
fn memblock_add_within_check() {
    let r1 = (SZ_8M, SZ_32M);
    let r2 = (SZ_16M, SZ_1M);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), r1);
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), r1.1);
}

#[test]
fn memblock_add_twice_check() {
    let r = (SZ_16K, SZ_2M);
    let mut m = Memblock::default();
    m.add(PhysAddr(r.0), r.1);
    m.add(PhysAddr(r.0), r.1);
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), r.1);
}

#[test]
fn memblock_add_between_check() {
    let r1 = (SZ_1G, SZ_8K);
    let r2 = (SZ_1G + SZ_16K, SZ_8K);
    let r3 = (SZ_1G + SZ_8K, SZ_8K);
    let total_size = r1.1 + r2.1 + r3.1;
    let mut m = Memblock::default();
    for r in [r1, r2, r3] {
        m.add(PhysAddr(r.0), r.1);
    }
    assert_eq!(rgn(&m, Memory, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

#[test]
fn memblock_add_near_max_check() {
    let r = (PHYS_ADDR_MAX - SZ_1M, SZ_2M);
    let total_size = PHYS_ADDR_MAX - r.0;
    let mut m = Memblock::default();
    m.add(PhysAddr(r.0), r.1);
    assert_eq!(rgn(&m, Memory, 0), (r.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

/// The kernel's 129th add doubles `memblock.memory` and reserves the new
/// array (reserved: one region of [`DOUBLED_ARRAY_SIZE`] bytes); here the
/// array grows and nothing is reserved. The memory regions are the
/// kernel's.
#[test]
fn memblock_add_many_check() {
    let r = (SZ_16K, SZ_16K);
    let (size, gap_size) = (SZ_64, SZ_64);
    let mut m = Memblock::default();
    let mut base = MEM_BASE.next_multiple_of(PAGE_SIZE);
    let new_memory_regions_size = DOUBLED_ARRAY_SIZE;
    m.add(PhysAddr(base), new_memory_regions_size);
    base += new_memory_regions_size + gap_size;
    for i in 0..INIT_MEMBLOCK_REGIONS as u64 {
        m.add(PhysAddr(base), size);
        base += size + gap_size;
        assert_eq!(cnt(&m, Memory) as u64, i + 2);
        assert_eq!(total(&m, Memory), new_memory_regions_size + (i + 1) * size);
    }
    // Kernel: reserved.cnt 1, total_size new_memory_regions_size.
    assert_eq!((cnt(&m, Reserved), total(&m, Reserved)), (0, 0));
    m.add(PhysAddr(r.0), r.1);
    assert_eq!(rgn(&m, Memory, 0), r);
    assert_eq!(cnt(&m, Memory), INIT_MEMBLOCK_REGIONS + 2);
    assert_eq!(total(&m, Memory), INIT_MEMBLOCK_REGIONS as u64 * size + new_memory_regions_size + r.1);
}

#[test]
fn memblock_reserve_simple_check() {
    let r = (SZ_2G, SZ_128M);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r.0), r.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), r);
}

#[test]
fn memblock_reserve_disjoint_check() {
    let r1 = (SZ_256M, SZ_16M);
    let r2 = (SZ_512M, SZ_512M);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), r1);
    assert_eq!(rgn(&m, Reserved, 1), r2);
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), r1.1 + r2.1);
}

#[test]
fn memblock_reserve_overlap_top_check() {
    let r1 = (SZ_1G, SZ_1G);
    let r2 = (SZ_128M, SZ_1G);
    let total_size = (r1.0 - r2.0) + r1.1;
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), (r2.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn memblock_reserve_overlap_bottom_check() {
    let r1 = (SZ_2K, SZ_128K);
    let r2 = (SZ_128K, SZ_128K);
    let total_size = (r2.0 - r1.0) + r2.1;
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn memblock_reserve_within_check() {
    let r1 = (SZ_1M, SZ_8M);
    let r2 = (SZ_2M, SZ_64K);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), r1);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), r1.1);
}

#[test]
fn memblock_reserve_twice_check() {
    let r = (SZ_16K, SZ_2M);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r.0), r.1, "test");
    m.reserve(PhysAddr(r.0), r.1, "test");
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), r.1);
}

#[test]
fn memblock_reserve_between_check() {
    let r1 = (SZ_1G, SZ_8K);
    let r2 = (SZ_1G + SZ_16K, SZ_8K);
    let r3 = (SZ_1G + SZ_8K, SZ_8K);
    let total_size = r1.1 + r2.1 + r3.1;
    let mut m = Memblock::default();
    for r in [r1, r2, r3] {
        m.reserve(PhysAddr(r.0), r.1, "test");
    }
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn memblock_reserve_near_max_check() {
    let r = (PHYS_ADDR_MAX - SZ_1M, SZ_2M);
    let total_size = PHYS_ADDR_MAX - r.0;
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r.0), r.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), (r.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

/// The kernel's 129th reservation doubles the array and reserves it:
/// `INIT_MEMBLOCK_REGIONS + 2` regions and `129 * MEM_SIZE +`
/// [`DOUBLED_ARRAY_SIZE`] bytes; here one region and the array's bytes
/// fewer, at every step after it.
#[test]
fn memblock_reserve_many_check() {
    let r = (SZ_16K, SZ_16K);
    let n = INIT_MEMBLOCK_REGIONS as u64;
    let mut m = Memblock::default();
    m.add(PhysAddr(MEM_BASE), MEM_SIZE);
    let mut memory_base = SZ_128K;
    for i in 0..n {
        m.reserve(PhysAddr(memory_base), MEM_SIZE, "test");
        assert_eq!(cnt(&m, Reserved) as u64, i + 1);
        assert_eq!(total(&m, Reserved), (i + 1) * MEM_SIZE);
        memory_base += MEM_SIZE * 2;
    }
    m.reserve(PhysAddr(memory_base), MEM_SIZE, "test");
    assert_eq!(cnt(&m, Reserved) as u64, n + 2 - 1);
    assert_eq!(total(&m, Reserved), (n + 1) * MEM_SIZE);
    m.reserve(PhysAddr(r.0), r.1, "test");
    assert_eq!(rgn(&m, Reserved, 0), r);
    assert_eq!(cnt(&m, Reserved) as u64, n + 3 - 1);
    assert_eq!(total(&m, Reserved), (n + 1) * MEM_SIZE + r.1);
}

/// tests/basic_api.c `MEMORY_BASE(idx)`: 32 KiB blocks 32 KiB apart.
const fn memory_base(idx: u64) -> u64 {
    SZ_128K + (MEM_SIZE * 2) * idx
}

/// As [`memblock_reserve_many_check`], with the 129th block left out at
/// each place in turn and reserved last.
#[test]
fn memblock_reserve_all_locations_check() {
    let r = (SZ_16K, SZ_16K);
    let n = INIT_MEMBLOCK_REGIONS as u64;
    for skip in 0..n + 1 {
        let mut m = Memblock::default();
        m.add(PhysAddr(MEM_BASE), MEM_SIZE);
        for i in (0..n + 1).filter(|&i| i != skip) {
            m.reserve(PhysAddr(memory_base(i)), MEM_SIZE, "test");
            let expect = if i < skip { i + 1 } else { i };
            assert_eq!(cnt(&m, Reserved) as u64, expect);
            assert_eq!(total(&m, Reserved), expect * MEM_SIZE);
        }
        m.reserve(PhysAddr(memory_base(skip)), MEM_SIZE, "test");
        assert_eq!(cnt(&m, Reserved) as u64, n + 2 - 1, "skip {skip}");
        assert_eq!(total(&m, Reserved), (n + 1) * MEM_SIZE);
        m.reserve(PhysAddr(r.0), r.1, "test");
        assert_eq!(rgn(&m, Reserved, 0), r);
        assert_eq!(cnt(&m, Reserved) as u64, n + 3 - 1);
        assert_eq!(total(&m, Reserved), (n + 1) * MEM_SIZE + r.1);
    }
}

/// The kernel case checks that the doubled array is placed in
/// `memory.regions[0]`, not over the block about to be reserved; there is
/// no doubled array here, so what remains is the reservations, block
/// `skip` last, between two memory regions.
#[test]
fn memblock_reserve_many_may_conflict_check() {
    let r = (SZ_16K, SZ_16K);
    let n = INIT_MEMBLOCK_REGIONS as u64;
    let offset = MEM_BASE.next_multiple_of(PAGE_SIZE);
    let at = |idx: u64| offset + (MEM_SIZE * 2) * idx;
    for skip in 1..=n + 1 {
        let mut m = Memblock::default();
        m.add(PhysAddr(at(0)), MEM_SIZE);
        m.add(PhysAddr(at(skip)), MEM_SIZE);
        for i in (1..=n + 1).filter(|&i| i != skip) {
            m.reserve(PhysAddr(at(i)), MEM_SIZE, "test");
            let expect = if i < skip { i } else { i - 1 };
            assert_eq!(cnt(&m, Reserved) as u64, expect);
            assert_eq!(total(&m, Reserved), expect * MEM_SIZE);
        }
        m.reserve(PhysAddr(at(skip)), MEM_SIZE, "test");
        assert_eq!(cnt(&m, Reserved) as u64, n + 2 - 1, "skip {skip}");
        assert_eq!(total(&m, Reserved), (n + 1) * MEM_SIZE);
        // Kernel: regions[0] is the doubled array, ending at at(0) + 32K.
        assert_eq!(rgn(&m, Reserved, 0), (at(1), MEM_SIZE));
        m.reserve(PhysAddr(r.0), r.1, "test");
        assert_eq!(rgn(&m, Reserved, 0), r);
        assert_eq!(cnt(&m, Reserved) as u64, n + 3 - 1);
        assert_eq!(total(&m, Reserved), (n + 1) * MEM_SIZE + r.1);
    }
}

#[test]
fn memblock_remove_simple_check() {
    let r1 = (SZ_2K, SZ_4K);
    let r2 = (SZ_128K, SZ_4M);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    m.remove(PhysAddr(r1.0), r1.1);
    assert_eq!(rgn(&m, Memory, 0), r2);
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), r2.1);
}

#[test]
fn memblock_remove_absent_check() {
    let r1 = (SZ_512K, SZ_4M);
    let r2 = (SZ_64M, SZ_1G);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.remove(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), r1);
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), r1.1);
}

#[test]
fn memblock_remove_overlap_top_check() {
    let r1 = (SZ_32M, SZ_32M);
    let r2 = (SZ_16M, SZ_32M);
    let (r1_end, r2_end) = (r1.0 + r1.1, r2.0 + r2.1);
    let total_size = r1_end - r2_end;
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.remove(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), (r1.0 + r2.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

#[test]
fn memblock_remove_overlap_bottom_check() {
    let r1 = (SZ_2M, SZ_64M);
    let r2 = (SZ_32M, SZ_256M);
    let total_size = r2.0 - r1.0;
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.remove(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

#[test]
fn memblock_remove_within_check() {
    let r1 = (SZ_1M, SZ_32M);
    let r2 = (SZ_16M, SZ_1M);
    let r1_size = r2.0 - r1.0;
    let r2_size = (r1.0 + r1.1) - (r2.0 + r2.1);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.remove(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), (r1.0, r1_size));
    assert_eq!(rgn(&m, Memory, 1), (r2.0 + r2.1, r2_size));
    assert_eq!(cnt(&m, Memory), 2);
    assert_eq!(total(&m, Memory), r1_size + r2_size);
}

#[test]
fn memblock_remove_only_region_check() {
    let r1 = (SZ_2K, SZ_4K);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.remove(PhysAddr(r1.0), r1.1);
    assert_eq!(rgn(&m, Memory, 0), (0, 0));
    assert_eq!(cnt(&m, Memory), 0);
    assert_eq!(total(&m, Memory), 0);
}

#[test]
fn memblock_remove_near_max_check() {
    let r1 = (PHYS_ADDR_MAX - SZ_2M, SZ_2M);
    let r2 = (PHYS_ADDR_MAX - SZ_1M, SZ_2M);
    let total_size = r1.1 - (PHYS_ADDR_MAX - r2.0);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.remove(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Memory, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Memory), 1);
    assert_eq!(total(&m, Memory), total_size);
}

#[test]
fn memblock_remove_overlap_two_check() {
    let r1 = (SZ_16M, SZ_32M);
    let r2 = (SZ_64M, SZ_64M);
    let r3 = (SZ_32M, SZ_64M);
    let (r2_end, r3_end) = (r2.0 + r2.1, r3.0 + r3.1);
    let (new_r1_size, new_r2_size) = (r3.0 - r1.0, r2_end - r3_end);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    m.remove(PhysAddr(r3.0), r3.1);
    assert_eq!(rgn(&m, Memory, 0), (r1.0, new_r1_size));
    assert_eq!(rgn(&m, Memory, 1), (r3_end, new_r2_size));
    assert_eq!(cnt(&m, Memory), 2);
    assert_eq!(total(&m, Memory), new_r1_size + new_r2_size);
}

#[test]
fn memblock_free_simple_check() {
    let r1 = (SZ_4M, SZ_1M);
    let r2 = (SZ_8M, SZ_1M);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    m.free(PhysAddr(r1.0), r1.1);
    assert_eq!(rgn(&m, Reserved, 0), r2);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), r2.1);
}

#[test]
fn memblock_free_absent_check() {
    let r1 = (SZ_2M, SZ_8K);
    let r2 = (SZ_16M, SZ_128M);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.free(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Reserved, 0), r1);
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), r1.1);
}

#[test]
fn memblock_free_overlap_top_check() {
    let r1 = (SZ_8M, SZ_32M);
    let r2 = (SZ_1M, SZ_8M);
    let total_size = (r1.1 + r1.0) - (r2.0 + r2.1);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.free(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Reserved, 0), (r2.0 + r2.1, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn memblock_free_overlap_bottom_check() {
    let r1 = (SZ_8M, SZ_32M);
    let r2 = (SZ_32M, SZ_32M);
    let total_size = r2.0 - r1.0;
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.free(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn memblock_free_within_check() {
    let r1 = (SZ_1M, SZ_8M);
    let r2 = (SZ_4M, SZ_1M);
    let r1_size = r2.0 - r1.0;
    let r2_size = (r1.0 + r1.1) - (r2.0 + r2.1);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.free(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, r1_size));
    assert_eq!(rgn(&m, Reserved, 1), (r2.0 + r2.1, r2_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), r1_size + r2_size);
}

#[test]
fn memblock_free_only_region_check() {
    let r1 = (SZ_2K, SZ_4K);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.free(PhysAddr(r1.0), r1.1);
    assert_eq!(rgn(&m, Reserved, 0), (0, 0));
    assert_eq!(cnt(&m, Reserved), 0);
    assert_eq!(total(&m, Reserved), 0);
}

#[test]
fn memblock_free_near_max_check() {
    let r1 = (PHYS_ADDR_MAX - SZ_2M, SZ_2M);
    let r2 = (PHYS_ADDR_MAX - SZ_1M, SZ_2M);
    let total_size = r1.1 - (PHYS_ADDR_MAX - r2.0);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.free(PhysAddr(r2.0), r2.1);
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, total_size));
    assert_eq!(cnt(&m, Reserved), 1);
    assert_eq!(total(&m, Reserved), total_size);
}

#[test]
fn memblock_free_overlap_two_check() {
    let r1 = (SZ_16M, SZ_32M);
    let r2 = (SZ_64M, SZ_64M);
    let r3 = (SZ_32M, SZ_64M);
    let (r2_end, r3_end) = (r2.0 + r2.1, r3.0 + r3.1);
    let (new_r1_size, new_r2_size) = (r3.0 - r1.0, r2_end - r3_end);
    let mut m = Memblock::default();
    m.reserve(PhysAddr(r1.0), r1.1, "test");
    m.reserve(PhysAddr(r2.0), r2.1, "test");
    m.free(PhysAddr(r3.0), r3.1);
    assert_eq!(rgn(&m, Reserved, 0), (r1.0, new_r1_size));
    assert_eq!(rgn(&m, Reserved, 1), (r3_end, new_r2_size));
    assert_eq!(cnt(&m, Reserved), 2);
    assert_eq!(total(&m, Reserved), new_r1_size + new_r2_size);
}

#[test]
fn memblock_set_bottom_up_check() {
    let mut m = Memblock::default();
    m.set_bottom_up(false);
    assert!(!m.bottom_up);
    m.set_bottom_up(true);
    assert!(m.bottom_up);
}

#[test]
fn memblock_bottom_up_check() {
    let mut m = Memblock::default();
    m.set_bottom_up(false);
    assert_eq!(m.bottom_up(), m.bottom_up);
    assert!(!m.bottom_up());
    m.set_bottom_up(true);
    assert_eq!(m.bottom_up(), m.bottom_up);
    assert!(m.bottom_up());
}

#[test]
fn memblock_trim_memory_aligned_check() {
    let alignment = SMP_CACHE_BYTES;
    let r = (alignment, alignment * 4);
    let mut m = Memblock::default();
    m.add(PhysAddr(r.0), r.1);
    m.trim_memory(alignment).unwrap();
    assert_eq!(rgn(&m, Memory, 0), r);
    assert_eq!(cnt(&m, Memory), 1);
}

#[test]
fn memblock_trim_memory_too_small_check() {
    let alignment = SMP_CACHE_BYTES;
    let r1 = (alignment, alignment * 2);
    let r2 = (alignment * 4, alignment - SZ_2);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    m.trim_memory(alignment).unwrap();
    assert_eq!(rgn(&m, Memory, 0), r1);
    assert_eq!(cnt(&m, Memory), 1);
    total(&m, Memory);
}

#[test]
fn memblock_trim_memory_unaligned_base_check() {
    let alignment = SMP_CACHE_BYTES;
    let offset = SZ_2;
    let r1 = (alignment, alignment * 2);
    let r2 = (alignment * 4 + offset, alignment * 2 - offset);
    let new_r2_base = r2.0 + (alignment - offset);
    let new_r2_size = r2.1 - (alignment - offset);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    m.trim_memory(alignment).unwrap();
    assert_eq!(rgn(&m, Memory, 0), r1);
    assert_eq!(rgn(&m, Memory, 1), (new_r2_base, new_r2_size));
    assert_eq!(cnt(&m, Memory), 2);
    total(&m, Memory);
}

#[test]
fn memblock_trim_memory_unaligned_end_check() {
    let alignment = SMP_CACHE_BYTES;
    let offset = SZ_2;
    let r1 = (alignment, alignment * 2);
    let r2 = (alignment * 4, alignment * 2 - offset);
    let new_r2_size = r2.1 - (alignment - offset);
    let mut m = Memblock::default();
    m.add(PhysAddr(r1.0), r1.1);
    m.add(PhysAddr(r2.0), r2.1);
    m.trim_memory(alignment).unwrap();
    assert_eq!(rgn(&m, Memory, 0), r1);
    assert_eq!(rgn(&m, Memory, 1), (r2.0, new_r2_size));
    assert_eq!(cnt(&m, Memory), 2);
    total(&m, Memory);
}

#[test]
fn memblock_overlaps_region_check() {
    let mut m = Memblock::default();
    m.add(PhysAddr(SZ_1G), SZ_4M);
    let overlaps = |base: u64, size: u64| m.overlaps_region(Memory, PhysAddr(base), size);
    // Far away.
    assert!(!overlaps(SZ_1M, SZ_1M));
    assert!(!overlaps(SZ_2G, SZ_1M));
    // Neighbour.
    assert!(!overlaps(SZ_1G - SZ_1M, SZ_1M));
    assert!(!overlaps(SZ_1G + SZ_4M, SZ_1M));
    // Partial overlap.
    assert!(overlaps(SZ_1G - SZ_1M, SZ_2M));
    assert!(overlaps(SZ_1G + SZ_2M, SZ_2M));
    // Total overlap.
    assert!(overlaps(SZ_1G, SZ_4M));
    assert!(overlaps(SZ_1G - SZ_2M, SZ_8M));
    assert!(overlaps(SZ_1G + SZ_1M, SZ_1M));
}

/// The kernel runs this case with `CONFIG_NUMA` (regions carry a node id,
/// as they do here).
#[test]
fn memblock_set_node_check() {
    let mut m = Memblock::default();
    m.add(PhysAddr(MEM_BASE), MEM_SIZE);
    let start = m.start_of_dram().0;
    let half = m.phys_mem_size() / 2;
    // Split the range equally between nodes 0 and 1.
    m.set_node(PhysAddr(start), half, Memory, 0);
    m.set_node(PhysAddr(start + half), half, Memory, 1);
    assert_eq!(cnt(&m, Memory), 2);
    assert_eq!(rgn(&m, Memory, 0), (start, half));
    assert_eq!(m.memory()[0].nid, 0);
    assert_eq!(rgn(&m, Memory, 1), (start + half, half));
    assert_eq!(m.memory()[1].nid, 1);
    // 126 reservations, the last across the node boundary.
    for i in 0..125 {
        m.reserve(PhysAddr(start + SZ_16 * i), SZ_8, "test");
    }
    m.reserve(PhysAddr(start + half - SZ_8), SZ_16, "test");
    // memmap_init_reserved_pages(): each reservation gets its memory's node.
    for r in m.memory().to_vec() {
        m.set_node(r.base, r.size, Reserved, r.nid);
    }
    let n = cnt(&m, Reserved);
    for (i, r) in m.reserved().iter().enumerate() {
        assert!(numa_valid_node(r.nid));
        assert_eq!(r.nid, if i == n - 1 { 1 } else { 0 });
    }
    total(&m, Reserved);
}
