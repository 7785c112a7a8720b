//! /proc/vmstat in the layout of Linux 7.2 on arm64 (Debian's config, one
//! node: `CONFIG_NUMA`, `CONFIG_ZONE_DMA` and `DMA32`, THP, CMA, balloon,
//! zswap, memory tiering): `vmstat_start` in mm/vmstat.c prints the zone
//! stat items, the NUMA event items, the node stat items, the two dirty
//! thresholds, the memmap counters and the VM event items, one `name value`
//! line each.
//!
//! Every line the kernel prints is here, in its order ([`VMSTAT_ITEMS`], the
//! names of the 4G/2-CPU capture in `tests/data/arm64-peer/`). A line whose
//! name is one of mmlab's [`VmEvent`] counters prints that counter summed
//! over the CPUs (`pgalloc_dma`, `pgalloc_normal`, ..., `pgfree`); the ones below come from
//! the zone, vmalloc and hugetlb; everything else prints 0 (not modelled).
//! mmlab's own instrumented counters (refills, drains, merges, the zone
//! lock; not in the kernel's file) follow the kernel's lines, in
//! [`VmEvent::ALL`] order.
//!
//! | line | value | label |
//! |------|-------|-------|
//! | `nr_free_pages` | `NR_FREE_PAGES` summed over the zones | faithful |
//! | `nr_free_pages_blocks` | free pages in blocks of at least `pageblock_order` (`NR_FREE_PAGES_BLOCKS`, Linux 6.15), summed over the zones | faithful |
//! | `nr_free_cma` | `NR_FREE_CMA_PAGES` summed over the zones | faithful |
//! | `nr_vmalloc` | pages of `VM_ALLOC` areas (`NR_VMALLOC`) | faithful |
//! | `nr_hugetlb` | pages in the hugetlb pools (`NR_HUGETLB`) | faithful |
//! | names of [`VmEvent`] counters (`pgalloc_normal`, `pgfree`) | the counter | faithful |
//! | every other line | 0 | not modelled |

use mmlab_engine::mm::vmstat::{VmCounts, VmEvent};
use mmlab_pcp::PageAllocator;
use std::fmt;

/// The lines /proc/vmstat prints, in order (Linux 7.2, arm64, Debian's
/// config).
pub const VMSTAT_ITEMS: [&str; 192] = [
    "nr_free_pages",
    "nr_free_pages_blocks",
    "nr_zone_inactive_anon",
    "nr_zone_active_anon",
    "nr_zone_inactive_file",
    "nr_zone_active_file",
    "nr_zone_unevictable",
    "nr_zone_write_pending",
    "nr_mlock",
    "nr_zspages",
    "nr_free_cma",
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "numa_interleave",
    "numa_local",
    "numa_other",
    "nr_inactive_anon",
    "nr_active_anon",
    "nr_inactive_file",
    "nr_active_file",
    "nr_unevictable",
    "nr_slab_reclaimable",
    "nr_slab_unreclaimable",
    "nr_isolated_anon",
    "nr_isolated_file",
    "workingset_nodes",
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    "workingset_nodereclaim",
    "nr_anon_pages",
    "nr_mapped",
    "nr_file_pages",
    "nr_dirty",
    "nr_writeback",
    "nr_shmem",
    "nr_shmem_hugepages",
    "nr_shmem_pmdmapped",
    "nr_file_hugepages",
    "nr_file_pmdmapped",
    "nr_anon_transparent_hugepages",
    "nr_vmscan_write",
    "nr_vmscan_immediate_reclaim",
    "nr_dirtied",
    "nr_written",
    "nr_throttled_written",
    "nr_kernel_misc_reclaimable",
    "nr_foll_pin_acquired",
    "nr_foll_pin_released",
    "nr_vmalloc",
    "nr_kernel_stack",
    "nr_page_table_pages",
    "nr_sec_page_table_pages",
    "nr_iommu_pages",
    "nr_swapcached",
    "pgpromote_success",
    "pgpromote_candidate",
    "pgpromote_candidate_nrl",
    "pgdemote_kswapd",
    "pgdemote_direct",
    "pgdemote_khugepaged",
    "pgdemote_proactive",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgsteal_khugepaged",
    "pgsteal_proactive",
    "pgsteal_anon",
    "pgsteal_file",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgscan_khugepaged",
    "pgscan_proactive",
    "pgscan_anon",
    "pgscan_file",
    "pgrefill",
    "nr_hugetlb",
    "nr_balloon_pages",
    "nr_kernel_file_pages",
    "nr_gpu_active",
    "nr_gpu_reclaim",
    "nr_dirty_threshold",
    "nr_dirty_background_threshold",
    "nr_memmap_pages",
    "nr_memmap_boot_pages",
    "pgpgin",
    "pgpgout",
    "pswpin",
    "pswpout",
    "pgalloc_dma",
    "pgalloc_dma32",
    "pgalloc_normal",
    "pgalloc_movable",
    "pgalloc_device",
    "allocstall_dma",
    "allocstall_dma32",
    "allocstall_normal",
    "allocstall_movable",
    "allocstall_device",
    "pgskip_dma",
    "pgskip_dma32",
    "pgskip_normal",
    "pgskip_movable",
    "pgskip_device",
    "pgfree",
    "pgactivate",
    "pgdeactivate",
    "pglazyfree",
    "pgfault",
    "pgmajfault",
    "pglazyfreed",
    "pgreuse",
    "pgscan_direct_throttle",
    "zone_reclaim_success",
    "zone_reclaim_failed",
    "pginodesteal",
    "slabs_scanned",
    "kswapd_inodesteal",
    "kswapd_low_wmark_hit_quickly",
    "kswapd_high_wmark_hit_quickly",
    "pageoutrun",
    "pgrotated",
    "drop_pagecache",
    "drop_slab",
    "oom_kill",
    "numa_pte_updates",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "thp_migration_success",
    "thp_migration_fail",
    "thp_migration_split",
    "compact_migrate_scanned",
    "compact_free_scanned",
    "compact_isolated",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "compact_daemon_wake",
    "compact_daemon_migrate_scanned",
    "compact_daemon_free_scanned",
    "htlb_buddy_alloc_success",
    "htlb_buddy_alloc_fail",
    "cma_alloc_success",
    "cma_alloc_fail",
    "unevictable_pgs_culled",
    "unevictable_pgs_scanned",
    "unevictable_pgs_rescued",
    "unevictable_pgs_mlocked",
    "unevictable_pgs_munlocked",
    "unevictable_pgs_cleared",
    "unevictable_pgs_stranded",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_file_alloc",
    "thp_file_fallback",
    "thp_file_fallback_charge",
    "thp_file_mapped",
    "thp_split_page",
    "thp_split_page_failed",
    "thp_deferred_split_page",
    "thp_underused_split_page",
    "thp_split_pmd",
    "thp_scan_exceed_none_pte",
    "thp_scan_exceed_swap_pte",
    "thp_scan_exceed_share_pte",
    "thp_zero_page_alloc",
    "thp_zero_page_alloc_failed",
    "thp_swpout",
    "thp_swpout_fallback",
    "balloon_inflate",
    "balloon_deflate",
    "balloon_migrate",
    "swap_ra",
    "swap_ra_hit",
    "swpin_zero",
    "swpout_zero",
    "ksm_swpin_copy",
    "cow_ksm",
    "zswpin",
    "zswpout",
    "zswpwb",
    "nr_unstable",
];

/// The per-zone items (`zone_stat_item` and the NUMA events): the first
/// lines of /proc/vmstat, and the vm stats of each populated zone in
/// /proc/zoneinfo.
pub const ZONE_STAT_ITEMS: std::ops::Range<usize> = 0..17;
/// The per-node items (`node_stat_item`): /proc/vmstat's middle lines, and
/// zoneinfo's `per-node stats`.
pub const NODE_STAT_ITEMS: std::ops::Range<usize> = 17..84;

/// The lines computed from something other than a [`VmEvent`] counter.
pub const VMSTAT_MODELLED: [&str; 5] =
    ["nr_free_pages", "nr_free_pages_blocks", "nr_free_cma", "nr_vmalloc", "nr_hugetlb"];

/// One `name value` line of /proc/vmstat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VmstatLine {
    /// The item's name.
    pub name: &'static str,
    /// Its value.
    pub value: u64,
    /// mmlab computes it (else it is 0 because mmlab does not model it).
    pub modelled: bool,
}

/// /proc/vmstat's values: the kernel's lines, then mmlab's own counters.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Vmstat {
    /// The kernel's lines, in [`VMSTAT_ITEMS`] order.
    pub kernel: Vec<VmstatLine>,
    /// mmlab's instrumented counters that the kernel does not have.
    pub mmlab: Vec<VmstatLine>,
}

impl Vmstat {
    /// Collect the values (`vmstat_start`): the zone's, the event counters
    /// summed over CPUs, `nr_vmalloc` and `nr_hugetlb` pages.
    pub fn collect(events: &VmCounts, pa: &PageAllocator<'_>, nr_vmalloc: u64, nr_hugetlb: u64) -> Vmstat {
        let blocks: u64 = pa.populated_zones().map(nr_free_pages_blocks).sum();
        let event = |name: &str| VmEvent::ALL.iter().copied().find(|e| e.name() == name);
        let kernel = VMSTAT_ITEMS
            .iter()
            .map(|&name| {
                let v = match name {
                    "nr_free_pages" => Some(pa.nr_free_pages().max(0) as u64),
                    "nr_free_pages_blocks" => Some(blocks),
                    "nr_free_cma" => Some(pa.populated_zones().map(|z| z.nr_free_cma().max(0) as u64).sum()),
                    "nr_vmalloc" => Some(nr_vmalloc),
                    "nr_hugetlb" => Some(nr_hugetlb),
                    _ => event(name).map(|e| events.get(e)),
                };
                VmstatLine { name, value: v.unwrap_or(0), modelled: v.is_some() }
            })
            .collect();
        let mmlab = VmEvent::ALL
            .iter()
            .filter(|e| !VMSTAT_ITEMS.contains(&e.name()))
            .map(|&e| VmstatLine { name: e.name(), value: events.get(e), modelled: true })
            .collect();
        Vmstat { kernel, mmlab }
    }

    /// The value of line `name` (kernel or mmlab).
    pub fn get(&self, name: &str) -> Option<u64> {
        self.kernel.iter().chain(&self.mmlab).find(|l| l.name == name).map(|l| l.value)
    }
}

/// `NR_FREE_PAGES_BLOCKS` of one zone: free pages in blocks of at least
/// `pageblock_order`, isolated pageblocks left out
/// ([`mmlab_buddy::Zone::nr_free_pages_blocks`]).
pub fn nr_free_pages_blocks(z: &mmlab_buddy::Zone<'_>) -> u64 {
    z.nr_free_pages_blocks()
}

impl fmt::Display for Vmstat {
    /// `vmstat_show`: `name value` per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in self.kernel.iter().chain(&self.mmlab) {
            writeln!(f, "{} {}", l.name, l.value)?;
        }
        Ok(())
    }
}
