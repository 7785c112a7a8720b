//! The published numbers `reproduce hvo` is held against (`seeds.md` §4,
//! reference `kernel-hugetlb-vmemmap-linearmap.md` §1.7), as data, with
//! where each comes from.
//!
//! - The LKP report on bd225530a4c7 ("mm/hugetlb_vmemmap: fix race with
//!   speculative PFN walkers", linux-next 875fa64577; oe-lkp, 2024-07-09):
//!   vm-scalability anon-cow-rand-hugetlb (runtime 300s, size 512G) on a
//!   128-thread Ice Lake (lkp-icl-2sp2, 256G), kconfig x86_64-rhel-8.3.
//!   Every huge page in that test is a surplus page (its meminfo:
//!   `HugePages_Surp` = `HugePages_Total` = 43743).
//! - LKP's run of Yu Zhao's v2 fix (2024-07-19, the patch that became
//!   c2a967f6ab0e "mm/hugetlb_vmemmap: don't synchronize_rcu() without
//!   HVO"): one table with the parent, the race fix and the fix
//!   ([`ANON_COW_V2`]).
//! - Yu Zhao's 700 x 1G alloc/free timings before and after what became
//!   cf54f310d0d3 "mm/hugetlb: use __GFP_COMP for gigantic folios"
//!   (2024-08-03; the commit's own changelog: 500 x 1G without HVO, alloc
//!   ~13 s → ~10 s, free ~15 s → <1 s).
//! - c0f398c3b2cf "mm/hugetlb_vmemmap: batch HVO work when demoting":
//!   demoting 100 x 1G into 2M, 513 → 2 `synchronize_rcu()` per page.
//!
//! The HVO setting of the LKP run: the fix's changelog says the wrappers
//! "are meant to be called regardless of whether HVO is enabled ...
//! Otherwise, it regresses use cases not enabling HVO", i.e. the regressed
//! runs had HVO off (the kconfig itself is not in the reference corpus).

use super::super::published::{Change, Source};
use crate::stats::Mark;
use mmlab_vmemmap::RcuPolicy;

/// The LKP report of the regression.
pub const LKP_REPORT: Source = Source {
    section: "§4",
    posting: "LKP: [mm/hugetlb_vmemmap] 875fa64577: vm-scalability.throughput -34.3% regression (2024-07-09)",
};

/// The race fix's throughput change in the LKP report (6842353 →
/// 4498326).
pub const REPORT_REGRESSION: Change = Change::new(-34.3, Some(Mark::Regression));

/// The report's voluntary context switches, parent → race fix (14514 →
/// 650265).
pub const REPORT_VOLUNTARY_CS: (u64, u64) = (14514, 650265);

/// One kernel of LKP's v2 table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PublishedKernel {
    /// The grace-period policy of that kernel.
    pub policy: RcuPolicy,
    /// The commit LKP ran.
    pub commit: &'static str,
    /// `vm-scalability.throughput`.
    pub throughput: u64,
    /// The change against the parent, as LKP printed it.
    pub change: Change,
    /// `vm-scalability.time.voluntary_context_switches`.
    pub voluntary_cs: u64,
    /// `proc-vmstat.htlb_buddy_alloc_success`: huge pages allocated.
    pub htlb_buddy_alloc_success: u64,
    /// `vm-scalability.time.user_time`, s.
    pub user_time_s: f64,
    /// `vm-scalability.time.system_time`, s.
    pub system_time_s: f64,
    /// `meminfo.MemTotal`, kB.
    pub mem_total_kb: f64,
}

/// LKP's v2 table (2024-07-19): parent, race fix, Yu Zhao's v2 fix.
pub const ANON_COW_V2: [PublishedKernel; 3] = [
    PublishedKernel {
        policy: RcuPolicy::V6_10,
        commit: "5a4d8944d6b1e (parent)",
        throughput: 6863720,
        change: Change::new(0.0, None),
        voluntary_cs: 14412,
        htlb_buddy_alloc_success: 507357,
        user_time_s: 19012.0,
        system_time_s: 2740.0,
        mem_total_kb: 2.307e8,
    },
    PublishedKernel {
        policy: RcuPolicy::V6_11,
        commit: "bd225530a4c71 (race fix)",
        throughput: 4532485,
        change: Change::new(-34.0, Some(Mark::Regression)),
        voluntary_cs: 653187,
        htlb_buddy_alloc_success: 507357,
        user_time_s: 16746.0,
        system_time_s: 365.06,
        mem_total_kb: 2.307e8,
    },
    PublishedKernel {
        policy: RcuPolicy::V6_12,
        commit: "9a5b87b521401 (v2 fix = c2a967f6ab0e)",
        throughput: 7805408,
        change: Change::new(13.7, Some(Mark::Improvement)),
        voluntary_cs: 12025,
        htlb_buddy_alloc_success: 516000,
        user_time_s: 16747.0,
        system_time_s: 2298.0,
        mem_total_kb: 2.637e8,
    },
];

/// The benchmark's own work per huge page allocated, in ns: the parent
/// run's user time over its huge-page allocations
/// (19012 s / 507357 = 37.47 ms). The emulation charges it to every fault
/// as modelled time, so that a grace period weighs against the work the
/// benchmark does between faults as it did on LKP's machine.
pub fn bench_work_per_fault_ns() -> u64 {
    let p = ANON_COW_V2[0];
    (p.user_time_s * 1e9 / p.htlb_buddy_alloc_success as f64).round() as u64
}

/// Allocating and freeing N x 1G before and after cf54f310d0d3.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PublishedGigantic {
    /// Pages.
    pub pages: u64,
    /// `echo N > nr_hugepages`: before, after (s).
    pub alloc_s: (f64, f64),
    /// `echo 0 > nr_hugepages`: before, after (s).
    pub free_s: (f64, f64),
}

/// Yu Zhao's figures in the thread (2024-08-03).
pub const GIGANTIC_700: PublishedGigantic =
    PublishedGigantic { pages: 700, alloc_s: (13.500, 10.643), free_s: (11.269, 1.541) };

/// Where they come from.
pub const GIGANTIC_SOURCE: Source =
    Source { section: "§4", posting: "Yu Zhao, 700 x 1G alloc/free, the patch that became cf54f310d0d3 (2024-08-03)" };

/// The change of a published before/after pair of times, in percent
/// (negative is faster), taken as significant.
pub fn before_after(pair: (f64, f64)) -> Change {
    let pct = 100.0 * (pair.1 - pair.0) / pair.0;
    Change::new(pct, Some(if pct < 0.0 { Mark::Improvement } else { Mark::Regression }))
}

/// Demoting 1G pages into 2M before and after c0f398c3b2cf.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PublishedDemote {
    /// Pages demoted.
    pub pages: u64,
    /// `synchronize_rcu()` calls per page: unbatched, batched.
    pub syncs_per_page: (u64, u64),
    /// `time echo N > demote`, real: unbatched, batched (s).
    pub real_s: (f64, f64),
}

/// c0f398c3b2cf's changelog.
pub const DEMOTE_100: PublishedDemote =
    PublishedDemote { pages: 100, syncs_per_page: (513, 2), real_s: (538.158, 0.900) };

/// Where it comes from.
pub const DEMOTE_SOURCE: Source =
    Source { section: "§4", posting: "c0f398c3b2cf mm/hugetlb_vmemmap: batch HVO work when demoting (v6.12)" };
