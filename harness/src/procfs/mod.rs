//! /proc files of the emulated machine, in the layouts Linux prints them
//! (mm/vmstat.c: `frag_show_print`, `pagetypeinfo_show*`,
//! `zoneinfo_show_print`, `vmstat_show`).
//!
//! Each function returns the whole file as a `String`. The printers live
//! next to the data they read, as mm/vmstat.c reads the zone: buddyinfo and
//! pagetypeinfo in [`mmlab_buddy::procfs`], zoneinfo in
//! [`mmlab_pcp::vmstat`] (their docs list where the layout differs from the
//! kernel's, always because mmlab does not model the thing in question);
//! here they are called for every zone of the node. /proc/meminfo
//! ([`meminfo`]) and /proc/vmstat ([`vmstat`](mod@vmstat)) print every line of the
//! Linux 7.2 arm64 layout, with 0 for what mmlab does not model (each
//! module's table lists what it does).

pub mod meminfo;
pub mod vmstat;

pub use meminfo::Meminfo;
pub use vmstat::Vmstat;

use mmlab_engine::Machine;
use mmlab_pcp::PageAllocator;
use std::fmt::Write as _;

/// /proc/buddyinfo ([`mmlab_buddy::procfs::buddyinfo_zones`] of the node).
pub fn buddyinfo(pa: &PageAllocator<'_>) -> String {
    let zones: Vec<_> = pa.node().zones().iter().collect();
    mmlab_buddy::procfs::buddyinfo_zones(&zones)
}

/// /proc/pagetypeinfo ([`mmlab_buddy::procfs::pagetypeinfo_zones`] of the node).
pub fn pagetypeinfo(pa: &PageAllocator<'_>) -> String {
    let zones: Vec<_> = pa.node().zones().iter().collect();
    mmlab_buddy::procfs::pagetypeinfo_zones(&zones)
}

/// /proc/zoneinfo in the Linux 7.2 layout ([`mmlab_pcp::vmstat::zoneinfo_with`]):
/// the `per-node stats` are the node lines of `vmstat` ([`vmstat::NODE_STAT_ITEMS`]),
/// each populated zone's vm stats the zone lines ([`vmstat::ZONE_STAT_ITEMS`]) with
/// that zone's `nr_free_pages` and `nr_free_pages_blocks`, 0 for the rest.
pub fn zoneinfo_with(pa: &PageAllocator<'_>, vmstat: &Vmstat) -> String {
    let node: Vec<(&str, u64)> = vmstat.kernel[vmstat::NODE_STAT_ITEMS].iter().map(|l| (l.name, l.value)).collect();
    mmlab_pcp::vmstat::zoneinfo_with(pa, &node, &|z| {
        vmstat::VMSTAT_ITEMS[vmstat::ZONE_STAT_ITEMS]
            .iter()
            .map(|&name| {
                let v = match name {
                    "nr_free_pages" => z.nr_free_pages().max(0) as u64,
                    "nr_free_pages_blocks" => vmstat::nr_free_pages_blocks(z),
                    "nr_free_cma" => z.nr_free_cma().max(0) as u64,
                    _ => 0,
                };
                (name, v)
            })
            .collect()
    })
}

/// /proc/zoneinfo with no vmalloc area and no hugetlb pool ([`zoneinfo_with`]).
pub fn zoneinfo(m: &Machine, pa: &PageAllocator<'_>) -> String {
    zoneinfo_with(pa, &Vmstat::collect(&m.vm_events(), pa, 0, 0))
}

/// /proc/vmstat ([`Vmstat`]) with no vmalloc area and no hugetlb pool.
pub fn vmstat(m: &Machine, pa: &PageAllocator<'_>) -> String {
    Vmstat::collect(&m.vm_events(), pa, 0, 0).to_string()
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
        "barrier backend: {}\ncost profile: {}\nlazy_mmu_barrier_batching: {}\ntlbi_range: {}{}\nbbm_level: {}\nlpa2: {}{}\n\n",
        cfg.barrier_backend,
        cfg.cost_profile.name,
        u8::from(cfg.lazy_mmu_barrier_batching),
        u8::from(cfg.tlbi_range()),
        if cfg.tlbi_range.is_some() { " (set)" } else { " (profile)" },
        cfg.cost_profile.features.bbm_level,
        u8::from(cfg.va_layout().lpa2()),
        if cfg.lpa2.is_some() { " (set)" } else { " (profile)" },
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
            mmlab_engine::arch::arm64::barrier::BarrierBackend::Model(_) => "model backend",
            _ => "0 unless the model backend is chosen",
        }
    );
    let _ = writeln!(s, "modelled TLBI time:    {} ns (profile {})", t.modelled_ns, cfg.cost_profile.name);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::Stack;
    use mmlab_engine::MachineConfig;

    fn boot(mem: &str, cpus: usize) -> Stack {
        Stack::boot_machine(MachineConfig::with(mem, cpus).unwrap()).unwrap()
    }

    #[test]
    fn vmstat_starts_with_nr_free_pages() {
        let s = boot("64M", 1);
        let (m, pa) = (s.machine(), s.allocator().unwrap());
        let s = vmstat(m, &pa);
        assert_eq!(s.lines().next().unwrap(), format!("nr_free_pages {}", pa.nr_free_pages()));
        assert!(s.lines().all(|l| l.split(' ').count() == 2));
        assert!(s.contains("\npgfree "));
        // The kernel's lines, in its order, then mmlab's own.
        let names: Vec<&str> = s.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(&names[..vmstat::VMSTAT_ITEMS.len()], &vmstat::VMSTAT_ITEMS[..]);
        assert_eq!(names[vmstat::VMSTAT_ITEMS.len()], "pgalloc_fail");
        // Free pages in blocks of at least a pageblock: whole pageblocks,
        // most of the free memory after boot.
        let v = Vmstat::collect(&m.vm_events(), &pa, 0, 0);
        let (blocks, free) = (v.get("nr_free_pages_blocks").unwrap(), v.get("nr_free_pages").unwrap());
        assert!(blocks % 512 == 0 && blocks <= free && blocks > free * 9 / 10, "{blocks} {free}");
        assert_eq!(v.get("pgalloc_dma"), Some(0));
    }

    #[test]
    fn meminfo_has_every_line_in_the_kernels_order() {
        let s = boot("64M", 1);
        let pa = s.allocator().unwrap();
        let hm = mmlab_hugetlb::sysfs::HugetlbMeminfo {
            hugepages_total: 2,
            hugepages_free: 2,
            hugepages_rsvd: 0,
            hugepages_surp: 0,
            hugepagesize_kb: 2048,
            hugetlb_kb: 4096,
        };
        let mi = Meminfo::collect(&pa, mmlab_vmalloc::VmallocMeminfo::default(), hm);
        let s = mi.to_string();
        let names: Vec<&str> = s.lines().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(&names[..50], &meminfo::MEMINFO_KB_ITEMS[..]);
        assert_eq!(
            names[50..],
            ["HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "Hugepagesize", "Hugetlb"]
        );
        let total = pa.managed_pages();
        assert!(s.starts_with(&format!("MemTotal:       {:8} kB\n", total * 4)), "{s}");
        assert!(s.contains("\nHardwareCorrupted:     0 kB\n"), "{s}");
        // vm_commit_limit(): half of what hugetlb does not hold.
        assert_eq!(mi.get("CommitLimit"), Some((total - 1024) / 2 * 4));
        assert!(mi.get("MemAvailable").unwrap() < mi.get("MemFree").unwrap());
    }

    #[test]
    fn costs_names_the_profile_and_counts_the_flush() {
        let mut cfg = MachineConfig::with("64M", 2).unwrap();
        cfg.cost_profile = mmlab_engine::arch::arm64::cost::CostProfile::by_name("apple-m2").unwrap();
        cfg.barrier_backend = mmlab_engine::arch::arm64::barrier::BarrierBackend::Count;
        // No linear map: its fixmap clears would add to the counts read.
        cfg.linear_map = false;
        let s = Stack::boot_machine(cfg).unwrap();
        let m = s.machine();
        let cpu = m.cpu(0).unwrap();
        mmlab_engine::arch::arm64::tlb::flush_tlb_kernel_range(
            &cpu,
            mmlab_engine::arch::arm64::memory::VMALLOC_START,
            mmlab_engine::arch::arm64::memory::VMALLOC_START + 4096,
        );
        let s = costs(m);
        assert!(s.contains("cost profile: apple-m2\n"), "{s}");
        assert!(s.contains("barrier backend: count\n"), "{s}");
        assert!(s.contains("tlbi vaale1is    1\n"), "{s}");
        assert!(s.contains("dsb(ish)         1\n"), "{s}");
        let t = m.tlbi_counts().modelled_ns;
        assert!(t > 0);
        assert!(s.contains(&format!("modelled TLBI time:    {t} ns (profile apple-m2)")), "{s}");
    }
}
