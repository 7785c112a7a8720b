//! `NodeZones` (node 0's `pglist_data`) on a machine with RAM on both
//! sides of the 4 GiB line, so that two zones are populated, and the
//! node-wide /proc/buddyinfo.

use crate::NodeZones;
use mmlab_engine::mm::ZoneType;
use mmlab_engine::{Machine, MachineConfig, Pfn};

/// 64 MiB at 1 GiB (ZONE_DMA, below the 32-bit limit) and 64 MiB at
/// 4 GiB (ZONE_NORMAL), memblock's free memory given to the zones.
fn two_zone_machine() -> Machine {
    let m = Machine::boot(MachineConfig::with("64M,64M@0x100000000", 1).unwrap()).unwrap();
    assert!(m.claim_memblock_free_all());
    m
}

/// `page_zone()` reads the zone number in the frame's page flags: a frame
/// of the bank above 4 GiB is in ZONE_NORMAL, one of the bank at 1 GiB in
/// ZONE_DMA; `memblock_free_all()` frees each block into that zone.
#[test]
fn page_zone_and_memblock_free_all_follow_the_frames_zone() {
    let m = two_zone_machine();
    let node = NodeZones::new(&m);
    assert_eq!(node.page_zone(&m, Pfn(0x40000)).zone_type(), ZoneType::Dma);
    assert_eq!(node.page_zone(&m, Pfn(0x100000)).zone_type(), ZoneType::Normal);
    assert_eq!(node.page_zone(&m, Pfn(0x103fff)).zone_type(), ZoneType::Normal);
    assert_eq!(node.zone(ZoneType::Normal).zone_start_pfn(), Pfn(0x100000));
    assert_eq!(node.zone(ZoneType::Dma).zone_start_pfn(), Pfn(0x40000));
    let cpu = m.cpu(0).unwrap();
    node.memblock_free_all(&cpu);
    let managed = node.managed();
    // Every page of the DMA bank is free memory of the DMA zone; memblock
    // allocates top-down, so its 845 reserved pages (the memmap and the
    // boot allocations) are at the top of the Normal bank.
    assert_eq!(managed[ZoneType::Dma as usize], 0x4000);
    assert_eq!(managed[ZoneType::Dma32 as usize], 0);
    assert_eq!(managed[ZoneType::Normal as usize], 0x4000 - 845);
    assert_eq!(managed[ZoneType::Movable as usize], 0);
    for z in node.zones() {
        assert_eq!(z.nr_free_pages() as u64, z.managed_pages(), "{}", z.zone_type().name());
        z.check_free_lists().unwrap();
    }
}

/// `build_zonelists()` for one node: the ZONELIST_FALLBACK order is the
/// populated zones from the highest down, Normal then DMA.
#[test]
fn the_zonelist_is_normal_then_dma() {
    let m = two_zone_machine();
    let node = NodeZones::new(&m);
    let cpu = m.cpu(0).unwrap();
    node.memblock_free_all(&cpu);
    assert_eq!(node.zonelist(), vec![ZoneType::Normal, ZoneType::Dma]);
}

/// /proc/buddyinfo (`frag_show()`): one row per populated zone, lowest
/// first; the DMA bank is 16 free order-10 blocks, the Normal bank the
/// same less memblock's 845 pages at its top (845 = 512 + 256 + 64 + 8 +
/// 4 + 1, so one order-10 block is split into blocks of orders 7, 5, 4, 1
/// and 0: 179 pages).
#[test]
fn buddyinfo_of_the_node_has_a_row_per_populated_zone() {
    let m = two_zone_machine();
    let node = NodeZones::new(&m);
    let cpu = m.cpu(0).unwrap();
    node.memblock_free_all(&cpu);
    let zones: Vec<_> = node.zones().iter().collect();
    let b = crate::procfs::buddyinfo_zones(&zones);
    let rows: Vec<&str> = b.lines().collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], format!("Node 0, zone      DMA {}    16 ", "     0 ".repeat(10)));
    assert_eq!(
        rows[1],
        "Node 0, zone   Normal      1      1      0      0      1      1      0      1      0      0     15 "
    );
    assert_eq!(crate::procfs::buddyinfo(node.zone(ZoneType::Normal)), format!("{}\n", rows[1]));
    let p = crate::procfs::pagetypeinfo_zones(&zones);
    assert!(p.contains("Node    0, zone   Normal, type      Movable      1      1      0      0      1      1      0      1      0      0     15 \n"), "{p}");
    assert!(
        p.ends_with(
            "Node 0, zone   Normal            0           32            0            0            0            0 \n"
        ),
        "{p}"
    );
}
