//! /proc/meminfo in the layout of Linux 7.2 on arm64 (Debian's config, the
//! `virt` machine): `meminfo_proc_show` in fs/proc/meminfo.c, then
//! `hugetlb_report_meminfo` (mm/hugetlb.c) in the kernel's position. arm64
//! prints no `DirectMap` lines (`arch_report_meminfo` is x86's and s390's).
//!
//! Every line the kernel prints is here, in its order ([`MEMINFO_KB_ITEMS`],
//! the names of the 4G/2-CPU capture in `tests/data/arm64-peer/`); the
//! values come from [`Meminfo`], which serialises.
//!
//! | line | value | label |
//! |------|-------|-------|
//! | `MemTotal` | managed pages of the zones (`totalram_pages()`) | faithful to mmlab's memblock; the real boot reserves more (kernel image, CMA, early allocations), so the number differs |
//! | `MemFree` | `NR_FREE_PAGES` | faithful |
//! | `MemAvailable` | `si_mem_available()` with no page cache and no reclaimable slab: free pages minus `totalreserve_pages` (high watermark plus the largest lowmem reserve, per zone) | simplified |
//! | `CommitLimit` | `vm_commit_limit()`: (totalram - hugetlb pages) x `overcommit_ratio` (50) / 100, no swap | faithful |
//! | `VmallocTotal`, `VmallocUsed`, `VmallocChunk` | [`mmlab_vmalloc::VmallocMeminfo`] | faithful |
//! | `HugePages_*`, `Hugepagesize`, `Hugetlb` | [`mmlab_hugetlb::sysfs::HugetlbMeminfo`] | faithful |
//! | `CmaTotal`, `CmaFree` | `totalcma_pages`, `NR_FREE_CMA_PAGES` of the zones | faithful |
//! | everything else (page cache, anon, slab, stacks, user page tables, swap, zswap, THP, balloon, GPU) | 0 | not modelled |

use mmlab_hugetlb::sysfs::HugetlbMeminfo;
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::VmallocMeminfo;
use std::fmt;

/// The kB lines `meminfo_proc_show` prints before the hugetlb ones, in
/// order (Linux 7.2, arm64, Debian's config).
pub const MEMINFO_KB_ITEMS: [&str; 50] = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "Active(anon)",
    "Inactive(anon)",
    "Active(file)",
    "Inactive(file)",
    "Unevictable",
    "Mlocked",
    "SwapTotal",
    "SwapFree",
    "Zswap",
    "Zswapped",
    "Dirty",
    "Writeback",
    "AnonPages",
    "Mapped",
    "Shmem",
    "KReclaimable",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "SecPageTables",
    "NFS_Unstable",
    "Bounce",
    "WritebackTmp",
    "CommitLimit",
    "Committed_AS",
    "VmallocTotal",
    "VmallocUsed",
    "VmallocChunk",
    "Percpu",
    "HardwareCorrupted",
    "AnonHugePages",
    "ShmemHugePages",
    "ShmemPmdMapped",
    "FileHugePages",
    "FilePmdMapped",
    "CmaTotal",
    "CmaFree",
    "Balloon",
    "GPUActive",
    "GPUReclaim",
];

/// The lines mmlab computes (the rest print 0).
pub const MEMINFO_MODELLED: [&str; 7] =
    ["MemTotal", "MemFree", "MemAvailable", "CommitLimit", "VmallocTotal", "VmallocUsed", "VmallocChunk"];

/// `sysctl_overcommit_ratio`'s default.
const OVERCOMMIT_RATIO: u64 = 50;

/// One kB line of /proc/meminfo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MeminfoLine {
    /// The name before the colon.
    pub name: &'static str,
    /// The value in kB.
    pub kb: u64,
    /// mmlab computes it (else it is 0 because mmlab does not model it).
    pub modelled: bool,
}

/// /proc/meminfo's values.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Meminfo {
    /// The kB lines, in [`MEMINFO_KB_ITEMS`] order.
    pub lines: Vec<MeminfoLine>,
    /// The hugetlb lines.
    pub hugetlb: HugetlbMeminfo,
}

impl Meminfo {
    /// Collect the values (`meminfo_proc_show`): the zone's counters, the
    /// vmalloc and the hugetlb ones.
    pub fn collect(pa: &PageAllocator<'_>, vmalloc: VmallocMeminfo, hugetlb: HugetlbMeminfo) -> Meminfo {
        let kb = mmlab_engine::PAGE_SIZE >> 10;
        let totalram = pa.managed_pages();
        let free = pa.nr_free_pages().max(0) as u64;
        // calculate_totalreserve_pages(): per zone the largest lowmem
        // reserve plus the high watermark, at most the managed pages.
        let totalreserve: u64 = pa
            .node()
            .zones()
            .iter()
            .map(|z| {
                let max = z.lowmem_reserve()[z.zone_type() as usize..].iter().copied().max().unwrap_or(0);
                (max + z.high_wmark_pages()).min(z.managed_pages())
            })
            .sum();
        let hugetlb_pages = hugetlb.hugetlb_kb / kb;
        let value = |name: &str| -> Option<u64> {
            Some(match name {
                "MemTotal" => totalram * kb,
                "MemFree" => free * kb,
                "MemAvailable" => free.saturating_sub(totalreserve) * kb,
                "CommitLimit" => totalram.saturating_sub(hugetlb_pages) * OVERCOMMIT_RATIO / 100 * kb,
                "VmallocTotal" => vmalloc.vmalloc_total_kb,
                "VmallocUsed" => vmalloc.vmalloc_used_kb,
                "VmallocChunk" => vmalloc.vmalloc_chunk_kb,
                "CmaTotal" => pa.node().zones().iter().map(|z| z.cma_pages()).sum::<u64>() * kb,
                "CmaFree" => pa.node().zones().iter().map(|z| z.nr_free_cma().max(0) as u64).sum::<u64>() * kb,
                _ => return None,
            })
        };
        let lines = MEMINFO_KB_ITEMS
            .iter()
            .map(|&name| {
                let v = value(name);
                MeminfoLine { name, kb: v.unwrap_or(0), modelled: v.is_some() }
            })
            .collect();
        Meminfo { lines, hugetlb }
    }

    /// The value of the kB line `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.lines.iter().find(|l| l.name == name).map(|l| l.kb)
    }
}

impl fmt::Display for Meminfo {
    /// `show_val_kb()`: the name and colon padded to 16 columns, the value
    /// 8 wide (`HardwareCorrupted` is printed with `%5lu` after one space).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            if l.name == "HardwareCorrupted" {
                writeln!(f, "{}: {:5} kB", l.name, l.kb)?;
            } else {
                writeln!(f, "{:<16}{:8} kB", format!("{}:", l.name), l.kb)?;
            }
        }
        write!(f, "{}", self.hugetlb)
    }
}
