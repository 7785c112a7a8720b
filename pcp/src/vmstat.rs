//! /proc/zoneinfo, printed from the zones and their pagesets as
//! `zoneinfo_show_print` (mm/vmstat.c) prints it, next to the pcp data it
//! reads; and `calculate_normal_threshold`, the vm stats threshold it shows.
//!
//! Every zone of the node is printed, in `enum zone_type` order, with
//! ZONE_DEVICE last as Debian's arm64 config builds it (always empty here).
//! An unpopulated zone ends after its `protection:` line, as the kernel's
//! does. The first populated zone carries the node's `per-node stats` when
//! the caller has them ([`zoneinfo_with`]; the harness passes the node
//! items of its /proc/vmstat); the per-zone vm stats are the caller's too,
//! with `nr_free_pages` alone by default ([`zoneinfo`]).

use crate::page_alloc::PageAllocator;
use crate::rules::KernelRules;
use mmlab_buddy::Zone;
use mmlab_engine::PAGE_SHIFT;
use std::fmt::Write as _;

/// `MAX_NR_ZONES` on arm64 with Debian's config (DMA, DMA32, Normal,
/// Movable, Device): the number of zones zoneinfo prints and of entries on
/// its `protection:` line. mmlab models the first four; ZONE_DEVICE never
/// has pages, so its `lowmem_reserve` entry equals Movable's.
pub const MAX_NR_ZONES: usize = 5;

/// `fls()`: position of the most significant set bit, 1-based; 0 for 0.
fn fls(x: u64) -> u32 {
    u64::BITS - x.leading_zeros()
}

/// `calculate_normal_threshold()`: the per-cpu vmstat drift threshold of a
/// zone with `managed_pages` pages on a machine with `online_cpus` CPUs,
/// `2 * fls(cpus) * (1 + fls(managed in 128 MiB units))`, at most 125.
pub fn calculate_normal_threshold(managed_pages: u64, online_cpus: usize) -> i32 {
    let mem = managed_pages >> (27 - PAGE_SHIFT);
    let threshold = 2 * fls(online_cpus as u64) * (1 + fls(mem));
    threshold.min(125) as i32
}

/// /proc/zoneinfo with `nr_free_pages` as the only per-zone vm stat and
/// no per-node stats: [`zoneinfo_with`] for what the page allocator alone
/// knows.
pub fn zoneinfo(pa: &PageAllocator<'_>) -> String {
    zoneinfo_with(pa, &[], &|z| vec![("nr_free_pages", z.nr_free_pages().max(0) as u64)])
}

/// /proc/zoneinfo of every zone, as `zoneinfo_show_print` prints it.
///
/// With the default rules (Linux 7.2) each populated zone's pageset shows
/// count, high, batch, high_min and high_max, and its block ends with
/// `reserved_highatomic` and `free_highatomic`. With `pcp.rules=6.12` it
/// is 6.12's: `count: `, `high:  `, `batch: ` only, and the block ends at
/// `start_pfn`.
///
/// `node_stats` (name, value) go under `per-node stats` before the first
/// populated zone (nothing is printed when empty); `zone_stats` gives each
/// populated zone's vm stat lines. `cma` is `zone->cma_pages`. `vm stats threshold` is
/// [`calculate_normal_threshold`] for the machine's CPUs, all online.
/// `node_unreclaimable` is always 0: there is no kswapd to fail.
pub fn zoneinfo_with<'m>(
    pa: &PageAllocator<'m>,
    node_stats: &[(&str, u64)],
    zone_stats: &dyn Fn(&Zone<'m>) -> Vec<(&'static str, u64)>,
) -> String {
    let m = pa.machine();
    let new_layout = pa.rules() != KernelRules::Linux6_12;
    let mut s = String::new();
    let mut first_populated = true;
    let zones = pa.node().zones();
    for (zi, z) in zones.iter().enumerate() {
        let _ = write!(s, "Node {}, zone {:>8}", z.node(), z.zone_type().name());
        if z.is_populated() && first_populated && !node_stats.is_empty() {
            s.push_str("\n  per-node stats");
            for (name, v) in node_stats {
                let _ = write!(s, "\n      {name:<12} {v}");
            }
        }
        let free = z.nr_free_pages().max(0);
        zone_watermark_lines(&mut s, free, z);
        if !z.is_populated() {
            s.push('\n');
            continue;
        }
        first_populated = false;
        for (name, v) in zone_stats(z) {
            let _ = write!(s, "\n      {name:<12} {v}");
        }
        let threshold = calculate_normal_threshold(z.managed_pages(), m.nr_cpus());
        s.push_str("\n  pagesets");
        for cpu in 0..m.nr_cpus() {
            let Some(p) = pa.pageset_of(z.zone_type(), cpu) else { continue };
            if new_layout {
                let _ = write!(
                    s,
                    "\n    cpu: {cpu}\
                     \n              count:    {}\
                     \n              high:     {}\
                     \n              batch:    {}\
                     \n              high_min: {}\
                     \n              high_max: {}",
                    p.count, p.high, p.batch, p.high_min, p.high_max
                );
            } else {
                let _ = write!(
                    s,
                    "\n    cpu: {cpu}\
                     \n              count: {}\
                     \n              high:  {}\
                     \n              batch: {}",
                    p.count, p.high, p.batch
                );
            }
            let _ = write!(s, "\n  vm stats threshold: {threshold}");
        }
        let _ = write!(
            s,
            "\n  node_unreclaimable:  {}\
             \n  start_pfn:           {}",
            0,
            z.zone_start_pfn().0
        );
        if new_layout {
            let _ = write!(
                s,
                "\n  reserved_highatomic: {}\
                 \n  free_highatomic:     {}",
                z.nr_reserved_highatomic(),
                z.nr_free_highatomic().max(0)
            );
        }
        s.push('\n');
        debug_assert!(zi < MAX_NR_ZONES);
    }
    // ZONE_DEVICE: never populated.
    s.push_str("Node 0, zone   Device");
    s.push_str(
        "\n  pages free     0\n        boost    0\n        min      0\n        low      0\
         \n        high     0\n        promo    0\n        spanned  0\n        present  0\
         \n        managed  0\n        cma      0\n        protection: (0, 0, 0, 0, 0)\n",
    );
    s
}

/// The block every zone prints: free pages, watermarks, sizes and the
/// `protection:` row (`lowmem_reserve[]`, ZONE_DEVICE's entry equal to
/// Movable's).
fn zone_watermark_lines(s: &mut String, free: i64, z: &Zone<'_>) {
    let _ = write!(
        s,
        "\n  pages free     {free}\
         \n        boost    {}\
         \n        min      {}\
         \n        low      {}\
         \n        high     {}\
         \n        promo    {}\
         \n        spanned  {}\
         \n        present  {}\
         \n        managed  {}\
         \n        cma      {}",
        z.watermark_boost(),
        z.min_wmark_pages(),
        z.low_wmark_pages(),
        z.high_wmark_pages(),
        z.promo_wmark_pages(),
        z.spanned_pages(),
        z.present_pages(),
        z.managed_pages(),
        z.cma_pages(),
    );
    let r = z.lowmem_reserve();
    let _ = write!(s, "\n        protection: ({}, {}, {}, {}, {})", r[0], r[1], r[2], r[3], r[3]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AllocatorConfig;
    use mmlab_engine::{Machine, MachineConfig};

    fn boot(mem: &str, cpus: usize) -> Machine {
        Machine::boot(MachineConfig::with(mem, cpus).unwrap()).unwrap()
    }

    #[test]
    fn threshold_matches_kernel_table() {
        // Rows of the table in mm/vmstat.c, by its "fls(mem)+1" column (the
        // zone-size column of some rows does not match the formula).
        let gib = |g: u64| (g << 30) >> PAGE_SHIFT;
        let mib = |m: u64| (m << 20) >> PAGE_SHIFT;
        assert_eq!(calculate_normal_threshold(gib(1) - 1, 1), 8);
        assert_eq!(calculate_normal_threshold(gib(1) - 1, 2), 16);
        assert_eq!(calculate_normal_threshold(gib(3), 2), 24);
        assert_eq!(calculate_normal_threshold(gib(12), 2), 32);
        assert_eq!(calculate_normal_threshold(1000, 2), 4);
        assert_eq!(calculate_normal_threshold(gib(12), 4), 48);
        assert_eq!(calculate_normal_threshold(mib(1536), 4), 30);
        assert_eq!(calculate_normal_threshold(mib(1536), 64), 70);
        assert_eq!(calculate_normal_threshold(gib(3), 64), 84);
        assert_eq!(calculate_normal_threshold(mib(100), 16), 10);
        assert_eq!(calculate_normal_threshold(gib(12), 1024), 125);
    }

    #[test]
    fn zoneinfo_format() {
        let m = boot("64M", 2);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let z = pa.zone();
        let s = zoneinfo(&pa);
        let lines: Vec<&str> = s.lines().collect();
        // 64 MiB at 1 GiB: all of it is DMA.
        assert_eq!(lines[0], "Node 0, zone      DMA");
        assert_eq!(lines[1], format!("  pages free     {}", z.nr_free_pages()));
        assert_eq!(lines[2], "        boost    0");
        assert_eq!(lines[3], format!("        min      {}", z.min_wmark_pages()));
        assert_eq!(lines[4], format!("        low      {}", z.low_wmark_pages()));
        assert_eq!(lines[5], format!("        high     {}", z.high_wmark_pages()));
        assert_eq!(lines[6], format!("        promo    {}", z.promo_wmark_pages()));
        assert_eq!(lines[7], "        spanned  16384");
        assert_eq!(lines[8], "        present  16384");
        assert_eq!(lines[9], format!("        managed  {}", z.managed_pages()));
        assert_eq!(lines[10], "        cma      0");
        assert_eq!(lines[11], "        protection: (0, 0, 0, 0, 0)");
        assert_eq!(lines[12], format!("      nr_free_pages {}", z.nr_free_pages()));
        assert_eq!(lines[13], "  pagesets");
        let p = pa.pageset(0).unwrap();
        let threshold = calculate_normal_threshold(z.managed_pages(), 2);
        let cpu0 = [
            "    cpu: 0".to_string(),
            "              count:    0".to_string(),
            "              high:     0".to_string(),
            format!("              batch:    {}", p.batch),
            format!("              high_min: {}", p.high_min),
            format!("              high_max: {}", p.high_max),
            format!("  vm stats threshold: {threshold}"),
        ];
        assert_eq!(&lines[14..21], &cpu0);
        assert_eq!(lines[21], "    cpu: 1");
        assert_eq!(lines[28], "  node_unreclaimable:  0");
        assert_eq!(lines[29], format!("  start_pfn:           {}", 0x40000));
        assert_eq!(lines[30], "  reserved_highatomic: 0");
        assert_eq!(lines[31], "  free_highatomic:     0");
        // Then DMA32, Normal, Movable and Device, empty: 12 lines each.
        assert_eq!(lines[32], "Node 0, zone    DMA32");
        assert_eq!(lines[44], "Node 0, zone   Normal");
        assert_eq!(lines[56], "Node 0, zone  Movable");
        assert_eq!(lines[59], "        min      32");
        assert_eq!(lines[68], "Node 0, zone   Device");
        assert_eq!(lines.len(), 80);
        assert!(s.ends_with("protection: (0, 0, 0, 0, 0)\n"));
    }

    #[test]
    fn zoneinfo_6_12_layout() {
        let m = boot("64M", 1);
        let cfg = AllocatorConfig { rules: KernelRules::Linux6_12, ..Default::default() };
        let pa = PageAllocator::boot(&m, cfg).unwrap();
        let s = zoneinfo(&pa);
        assert!(s.contains("\n    cpu: 0\n              count: 0\n              high:  0\n              batch: "));
        assert!(!s.contains("high_min"));
        assert!(s.contains(&format!("  start_pfn:           {}\nNode 0, zone    DMA32\n", 0x40000)));
    }
}
