//! The /proc files printed from a zone's free lists, in the layouts Linux
//! prints them (mm/vmstat.c `frag_show_print`, `pagetypeinfo_showfree_print`,
//! `pagetypeinfo_showblockcount_print`): /proc/buddyinfo and
//! /proc/pagetypeinfo. They live next to the free areas they read, as
//! mm/vmstat.c reads `zone->free_area[]` directly.
//!
//! Each function returns the whole file for the zone as a `String`. All six
//! migratetypes are listed, as a kernel built with `CONFIG_CMA` and
//! `CONFIG_MEMORY_ISOLATION` (Debian's arm64 config) lists them; an
//! isolated pageblock counts as Isolate, its free blocks are on the Isolate
//! rows. The "Number of mixed blocks" table, which the kernel prints only
//! with page_owner, is absent.

use crate::Zone;
use mmlab_engine::mm::{MIGRATE_TYPES, Migratetype, NR_PAGE_ORDERS, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER};
use std::fmt::Write as _;

/// `pagetypeinfo_showfree_print` stops counting a free list at this many
/// blocks and prints `>100000`.
pub const PAGETYPEINFO_FREE_CAP: u64 = 100_000;

/// /proc/buddyinfo: `Node %d, zone %8s ` and `%6lu ` (free blocks) per order
/// 0..=10, trailing space kept, as `frag_show_print` prints it.
pub fn buddyinfo(z: &Zone<'_>) -> String {
    buddyinfo_zones(&[z])
}

/// /proc/buddyinfo of a node: one row per populated zone, lowest first
/// (`walk_zones_in_node` with `assert_populated`).
pub fn buddyinfo_zones(zones: &[&Zone<'_>]) -> String {
    let mut s = String::new();
    for z in zones.iter().filter(|z| z.is_populated()) {
        let _ = write!(s, "Node {}, zone {:>8} ", z.node(), z.zone_type().name());
        for n in z.nr_free_per_order() {
            let _ = write!(s, "{n:6} ");
        }
        s.push('\n');
    }
    s
}

/// /proc/pagetypeinfo: the pageblock geometry, the free blocks per
/// (migratetype, order) and the number of pageblocks of each type
/// (`pagetypeinfo_show`).
///
/// A free list of [`PAGETYPEINFO_FREE_CAP`] blocks or more is printed as
/// `>100000`, as the kernel, which stops walking the list there, does.
pub fn pagetypeinfo(z: &Zone<'_>) -> String {
    pagetypeinfo_zones(&[z])
}

/// /proc/pagetypeinfo of a node: the free table with rows for every
/// populated zone, then the block-count table with one row per populated
/// zone (`pagetypeinfo_showfree`, `pagetypeinfo_showblockcount`).
pub fn pagetypeinfo_zones(zones: &[&Zone<'_>]) -> String {
    let zones: Vec<&Zone<'_>> = zones.iter().copied().filter(|z| z.is_populated()).collect();
    let mut s = String::new();
    let _ = writeln!(s, "Page block order: {PAGEBLOCK_ORDER}");
    let _ = writeln!(s, "Pages per block:  {PAGEBLOCK_NR_PAGES}");
    s.push('\n');

    let _ = write!(s, "{:<43} ", "Free pages count per migrate type at order");
    for order in 0..NR_PAGE_ORDERS {
        let _ = write!(s, "{order:6} ");
    }
    s.push('\n');
    for z in &zones {
        let (node, name) = (z.node(), z.zone_type().name());
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
    }

    let _ = write!(s, "\n{:<23}", "Number of blocks type ");
    for mt in Migratetype::ALL {
        let _ = write!(s, "{:>12} ", mt.name());
    }
    s.push('\n');
    for z in &zones {
        let counts: [u64; MIGRATE_TYPES] = z.pageblock_counts();
        let _ = write!(s, "Node {}, zone {:>8} ", z.node(), z.zone_type().name());
        for c in counts {
            let _ = write!(s, "{c:12} ");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::{Machine, MachineConfig};

    /// A booted machine whose memblock memory is freed into `zone`, as
    /// `memblock_free_all` does.
    fn with_zone(mem: &str, f: impl FnOnce(&Zone<'_>)) {
        let m = Machine::boot(MachineConfig::with(mem, 1).unwrap()).unwrap();
        assert!(m.claim_memblock_free_all());
        let zone = Zone::new(&m);
        let cpu = m.cpu(0).unwrap();
        m.memblock().for_each_free_block(|pfn, order| zone.free_pages_core(&cpu, pfn, order));
        f(&zone);
    }

    /// Splits the rest of a line into `%6lu `-formatted fields.
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
    fn buddyinfo_line_format() {
        with_zone("64M", |z| {
            let s = buddyinfo(z);
            assert_eq!(s.lines().count(), 1);
            assert!(s.ends_with(" \n"));
            let rest = s.strip_prefix("Node 0, zone   Normal ").unwrap().strip_suffix('\n').unwrap();
            let fields = six_wide_fields(rest);
            assert_eq!(fields.len(), 11);
            let pages: u64 = fields.iter().enumerate().map(|(o, n)| n << o).sum();
            assert_eq!(pages as i64, z.nr_free_pages());
        });
    }

    #[test]
    fn pagetypeinfo_format() {
        with_zone("64M", |z| {
            let s = pagetypeinfo(z);
            let lines: Vec<&str> = s.lines().collect();
            assert_eq!(lines[0], "Page block order: 9");
            assert_eq!(lines[1], "Pages per block:  512");
            assert_eq!(lines[2], "");
            assert_eq!(
                lines[3],
                "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 "
            );
            let names = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "CMA", "Isolate"];
            for (i, n) in names.iter().enumerate() {
                let prefix = format!("Node    0, zone   Normal, type {n:>12} ");
                let rest = lines[4 + i].strip_prefix(&prefix).unwrap();
                assert_eq!(six_wide_fields(rest).len(), 11);
            }
            assert_eq!(lines[4], format!("Node    0, zone   Normal, type    Unmovable {}", "     0 ".repeat(11)));
            assert_eq!(lines[10], "");
            assert_eq!(
                lines[11],
                "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic          CMA      Isolate "
            );
            // 64M = 32 pageblocks, all Movable at boot.
            assert_eq!(
                lines[12],
                "Node 0, zone   Normal            0           32            0            0            0            0 "
            );
            assert_eq!(lines.len(), 13);
        });
    }
}
