//! /proc files of the emulated machine, in the layouts Linux prints them
//! (mm/vmstat.c: `frag_show_print`, `pagetypeinfo_show*`,
//! `zoneinfo_show_print`, `vmstat_show`).
//!
//! Each function returns the whole file as a `String`. The emulated machine
//! has one node with one populated zone, Normal; the files show what the
//! kernel would show for that zone, with these differences, all because mmlab
//! does not model the thing in question:
//!
//! - only the four migratetypes mmlab models are listed (Unmovable, Movable,
//!   Reclaimable, HighAtomic); the kernel adds CMA only with `CONFIG_CMA` and
//!   Isolate only with `CONFIG_MEMORY_ISOLATION`;
//! - /proc/zoneinfo shows the Normal zone only: the kernel also prints a short
//!   block for each empty zone (DMA, DMA32, Movable) and the `per-node stats`
//!   of the node before the first populated zone;
//! - of the per-zone vm stats only `nr_free_pages` is printed (the LRU, mlock,
//!   bounce, zspages and CMA counters do not exist here);
//! - /proc/vmstat has `nr_free_pages` followed by mmlab's event counters
//!   ([`mmlab_engine::vmstat::VmEvent`]), not the kernel's full list.

use mmlab_engine::Machine;
use mmlab_engine::PAGE_SHIFT;
use mmlab_engine::mm::{MIGRATE_TYPES, Migratetype, NR_PAGE_ORDERS, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER};
use mmlab_pcp::{KernelRules, PageAllocator};
use std::fmt::Write as _;

/// `MAX_NR_ZONES` on arm64 as mmlab models it (DMA, DMA32, Normal, Movable):
/// the number of entries of `zone->lowmem_reserve[]` that the zoneinfo
/// `protection:` line prints. A kernel built with `CONFIG_ZONE_DEVICE` has
/// a fifth.
pub const MAX_NR_ZONES: usize = 4;

/// `pagetypeinfo_showfree_print` stops counting a free list at this many
/// blocks and prints `>100000`.
pub const PAGETYPEINFO_FREE_CAP: u64 = 100_000;

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

fn zone_name(pa: &PageAllocator<'_>) -> &'static str {
    pa.zone().zone_type().name()
}

/// /proc/buddyinfo: `Node %d, zone %8s ` and `%6lu ` (free blocks) per order
/// 0..=10, trailing space kept, as `frag_show_print` prints it.
pub fn buddyinfo(pa: &PageAllocator<'_>) -> String {
    let z = pa.zone();
    let mut s = String::new();
    let _ = write!(s, "Node {}, zone {:>8} ", z.node(), zone_name(pa));
    for n in z.nr_free_per_order() {
        let _ = write!(s, "{n:6} ");
    }
    s.push('\n');
    s
}

/// /proc/pagetypeinfo: the pageblock geometry, the free blocks per
/// (migratetype, order) and the number of pageblocks of each type.
///
/// A free list of `PAGETYPEINFO_FREE_CAP` blocks or more is printed as
/// `>100000`, as the kernel, which stops walking the list there, does. Only
/// the four modelled migratetypes appear (no CMA, no Isolate, which the
/// kernel prints only when configured), and there is no "Number of mixed
/// blocks" table (the kernel prints it only with page_owner).
pub fn pagetypeinfo(pa: &PageAllocator<'_>) -> String {
    let z = pa.zone();
    let node = z.node();
    let name = zone_name(pa);
    let mut s = String::new();
    let _ = writeln!(s, "Page block order: {PAGEBLOCK_ORDER}");
    let _ = writeln!(s, "Pages per block:  {PAGEBLOCK_NR_PAGES}");
    s.push('\n');

    let _ = write!(s, "{:<43} ", "Free pages count per migrate type at order");
    for order in 0..NR_PAGE_ORDERS {
        let _ = write!(s, "{order:6} ");
    }
    s.push('\n');
    let free = z.nr_free_per_type();
    for mt in Migratetype::ALL {
        let _ = write!(s, "Node {node:4}, zone {name:>8}, type {:>12} ", mt.name());
        for &n in &free[mt.index()] {
            if n >= PAGETYPEINFO_FREE_CAP {
                let _ = write!(s, ">{PAGETYPEINFO_FREE_CAP:6} ");
            } else {
                let _ = write!(s, "{n:6} ");
            }
        }
        s.push('\n');
    }

    let _ = write!(s, "\n{:<23}", "Number of blocks type ");
    for mt in Migratetype::ALL {
        let _ = write!(s, "{:>12} ", mt.name());
    }
    s.push('\n');
    let counts: [u64; MIGRATE_TYPES] = z.pageblock_counts();
    let _ = write!(s, "Node {node}, zone {name:>8} ");
    for c in counts {
        let _ = write!(s, "{c:12} ");
    }
    s.push('\n');
    s
}

/// /proc/zoneinfo for the Normal zone, as `zoneinfo_show_print` prints it.
///
/// With the default rules (Linux 7.2) this is the current layout: every
/// pageset shows count, high, batch, high_min and high_max, and the block
/// ends with `reserved_highatomic` and `free_highatomic`. With
/// `pcp.rules=6.12` it is 6.12's: `count: `, `high:  `, `batch: ` only, and
/// the block ends at `start_pfn`.
///
/// `protection:` has [`MAX_NR_ZONES`] entries, all 0 (the only zone has no
/// lowmem reserve against higher zones; `cma` is 0. Of the per-zone vm stats
/// only `nr_free_pages` is printed; the per-node stats and the empty zones
/// are omitted (see the module documentation). `vm stats threshold` is
/// [`calculate_normal_threshold`] for the machine's CPUs, all online.
/// `node_unreclaimable` is always 0: there is no kswapd to fail.
pub fn zoneinfo(pa: &PageAllocator<'_>) -> String {
    let z = pa.zone();
    let m = pa.machine();
    let new_layout = pa.rules() != KernelRules::Linux6_12;
    let free = z.nr_free_pages().max(0);
    let mut s = String::new();
    let _ = write!(s, "Node {}, zone {:>8}", z.node(), zone_name(pa));
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
        0,
    );
    s.push_str("\n        protection: (0");
    for _ in 1..MAX_NR_ZONES {
        s.push_str(", 0");
    }
    s.push(')');
    let _ = write!(s, "\n      {:<12} {free}", "nr_free_pages");

    let threshold = calculate_normal_threshold(z.managed_pages(), m.nr_cpus());
    s.push_str("\n  pagesets");
    for cpu in 0..m.nr_cpus() {
        let Some(p) = pa.pageset(cpu) else { continue };
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
    s
}

/// /proc/vmstat: `nr_free_pages N`, then mmlab's event counters summed over
/// CPUs, one `name value` line each.
pub fn vmstat(m: &Machine, pa: &PageAllocator<'_>) -> String {
    let mut s = format!("nr_free_pages {}\n", pa.zone().nr_free_pages().max(0));
    let _ = write!(s, "{}", m.vm_events());
    s
}

/// Barrier and TLBI counts with the modelled time each accounts for, kept
/// apart and labelled: the barrier backend's time (modelled only with the
/// `model` backend; with `native` the barriers really ran and their time is
/// in the measured host time of whatever ran them) and the TLBI time, which
/// is always modelled, from the named cost profile.
pub fn costs(m: &Machine) -> String {
    let cfg = m.config();
    let b = m.barrier_counts();
    let t = m.tlbi_counts();
    let mut s = format!(
        "barrier backend: {}\ncost profile: {}\nlazy_mmu_barrier_batching: {}\ntlbi_range: {}\n\n",
        cfg.barrier_backend,
        cfg.cost_profile.name,
        u8::from(cfg.lazy_mmu_barrier_batching),
        u8::from(cfg.tlbi_range)
    );
    for (name, v) in b.iter() {
        let _ = writeln!(s, "{name:<16} {v}");
    }
    for (kind, v) in t.iter().filter(|(_, v)| *v > 0) {
        let _ = writeln!(s, "tlbi {:<11} {v}", kind.to_string());
    }
    let _ = writeln!(
        s,
        "\nmodelled barrier time: {} ns ({})",
        b.modelled_ns,
        match cfg.barrier_backend {
            mmlab_engine::barrier::BarrierBackend::Model(_) => "model backend",
            _ => "0 unless the model backend is chosen",
        }
    );
    let _ = writeln!(s, "modelled TLBI time:    {} ns (profile {})", t.modelled_ns, cfg.cost_profile.name);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::MachineConfig;
    use mmlab_pcp::AllocatorConfig;

    fn boot(mem: &str, cpus: usize) -> Machine {
        Machine::boot(MachineConfig::with(mem, cpus).unwrap()).unwrap()
    }

    /// Splits `line` after its prefix into `%6lu `-formatted fields.
    fn six_wide_fields(rest: &str) -> Vec<u64> {
        assert_eq!(rest.len() % 7, 0, "fields are 7 characters: {rest:?}");
        rest.as_bytes()
            .chunks(7)
            .map(|f| {
                let f = std::str::from_utf8(f).unwrap();
                assert!(f.ends_with(' '), "field {f:?}");
                f[..6].trim_start().parse().unwrap()
            })
            .collect()
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
    fn buddyinfo_line_format() {
        let m = boot("64M", 2);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let s = buddyinfo(&pa);
        assert_eq!(s.lines().count(), 1);
        assert!(s.ends_with(" \n"));
        let rest = s.strip_prefix("Node 0, zone   Normal ").unwrap().strip_suffix('\n').unwrap();
        let fields = six_wide_fields(rest);
        assert_eq!(fields.len(), 11);
        let pages: u64 = fields.iter().enumerate().map(|(o, n)| n << o).sum();
        assert_eq!(pages as i64, pa.zone().nr_free_pages());
    }

    #[test]
    fn pagetypeinfo_format() {
        let m = boot("64M", 1);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let s = pagetypeinfo(&pa);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Page block order: 9");
        assert_eq!(lines[1], "Pages per block:  512");
        assert_eq!(lines[2], "");
        assert_eq!(
            lines[3],
            "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 "
        );
        let names = ["Unmovable", "Movable", "Reclaimable", "HighAtomic"];
        for (i, n) in names.iter().enumerate() {
            let prefix = format!("Node    0, zone   Normal, type {n:>12} ");
            let rest = lines[4 + i].strip_prefix(&prefix).unwrap();
            assert_eq!(six_wide_fields(rest).len(), 11);
        }
        assert_eq!(lines[4], format!("Node    0, zone   Normal, type    Unmovable {}", "     0 ".repeat(11)));
        assert_eq!(lines[8], "");
        assert_eq!(lines[9], "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic ");
        // 64M = 32 pageblocks, all Movable at boot.
        assert_eq!(lines[10], "Node 0, zone   Normal            0           32            0            0 ");
        assert_eq!(lines.len(), 11);
    }

    #[test]
    fn zoneinfo_format() {
        let m = boot("64M", 2);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let z = pa.zone();
        let s = zoneinfo(&pa);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Node 0, zone   Normal");
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
        assert_eq!(lines[11], "        protection: (0, 0, 0, 0)");
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
        assert_eq!(lines.len(), 32);
        assert!(s.ends_with("0\n"));
    }

    #[test]
    fn zoneinfo_6_12_layout() {
        let m = boot("64M", 1);
        let cfg = AllocatorConfig { rules: KernelRules::Linux6_12, ..Default::default() };
        let pa = PageAllocator::boot(&m, cfg).unwrap();
        let s = zoneinfo(&pa);
        assert!(s.contains("\n    cpu: 0\n              count: 0\n              high:  0\n              batch: "));
        assert!(!s.contains("high_min"));
        assert!(s.ends_with(&format!("  start_pfn:           {}\n", 0x40000)));
    }

    #[test]
    fn vmstat_starts_with_nr_free_pages() {
        let m = boot("64M", 1);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let s = vmstat(&m, &pa);
        assert_eq!(s.lines().next().unwrap(), format!("nr_free_pages {}", pa.zone().nr_free_pages()));
        assert!(s.lines().all(|l| l.split(' ').count() == 2));
        assert!(s.contains("\npgfree "));
    }

    #[test]
    fn costs_names_the_profile_and_counts_the_flush() {
        let mut cfg = MachineConfig::with("64M", 2).unwrap();
        cfg.cost_profile = mmlab_engine::cost::CostProfile::by_name("apple-m2").unwrap();
        cfg.barrier_backend = mmlab_engine::barrier::BarrierBackend::Count;
        let m = Machine::boot(cfg).unwrap();
        let cpu = m.cpu(0).unwrap();
        mmlab_engine::tlb::flush_tlb_kernel_range(
            &cpu,
            mmlab_engine::layout::VMALLOC_START,
            mmlab_engine::layout::VMALLOC_START + 4096,
        );
        let s = costs(&m);
        assert!(s.contains("cost profile: apple-m2\n"), "{s}");
        assert!(s.contains("barrier backend: count\n"), "{s}");
        assert!(s.contains("tlbi vaale1is    1\n"), "{s}");
        assert!(s.contains("dsb(ish)         1\n"), "{s}");
        let t = m.tlbi_counts().modelled_ns;
        assert!(t > 0);
        assert!(s.contains(&format!("modelled TLBI time:    {t} ns (profile apple-m2)")), "{s}");
    }
}
