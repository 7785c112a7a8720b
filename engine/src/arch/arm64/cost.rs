//! Cost profiles: modelled nanoseconds for the effects userspace cannot execute.
//!
//! A TLBI broadcast to every CPU of the inner shareable domain, and the wait
//! in the `dsb ish` that follows it until every CPU has dropped the entries,
//! cannot be executed or observed from a user process. RCU grace periods of
//! the emulated kernel do not exist either. mmlab therefore always *models*
//! them: each TLBI adds its cost to the issuing CPU's TLBI time
//! ([`crate::arch::arm64::tlb::TlbiCounts::modelled_ns`]), and the first `dsb ish` after
//! one or more TLBIs adds the completion wait ([`CostProfile::dsb_ish_after_tlbi_ns`])
//! to the same counter. That counter is kept apart from the barrier
//! backend's modelled time ([`crate::arch::arm64::barrier::BarrierCounts::modelled_ns`])
//! and from measured host time, so a report can say which is which.
//!
//! The cost structure is: a per-kind issue cost for every TLBI, plus one
//! completion wait per `dsb ish` that has broadcast maintenance outstanding.
//! That is the structure the kernel's `MAX_DVM_OPS` limit and the range
//! instructions are designed around (many issues are cheaper than many
//! waits, and one range op is cheaper than many issues); the individual
//! numbers are below.
//!
//! # Where the numbers come from
//!
//! The only published figures that isolate TLB maintenance on arm64 are in
//! Ryan Roberts' "Speed up boot with faster linear map creation" (2024;
//! reference `kernel-hugetlb-vmemmap-linearmap.md` §4.1, `seeds.md` §3). With
//! `rodata=full` the linear map is page-granular: one PTE table per 2 MiB
//! and one PMD table per 1 GiB of RAM. Before the series every table was
//! fixmapped and unfixmapped once per 64 KiB (PTE) or 32 MiB (PMD) chunk,
//! 32 times per table; *no-cont-remap* cut that to once, saving 31 cycles
//! per table. A cycle is a fixmap set (PTE write, `dsb ishst; isb`) and a
//! fixmap clear (`dsb ishst; tlbi vaale1is; dsb ish; isb`). So
//! `(base - no-cont-remap) / (31 * tables)` is the cost of one cycle:
//!
//! | machine | tables (PTE + PMD) | saved ms | ns per cycle |
//! |---|---|---|---|
//! | Altra VM 64G (v1) | 32768 + 64 | 2191 - 429 = 1762 | 1732 |
//! | Altra metal 512G (v1) | 262144 + 512 | 17443 - 3796 = 13647 | 1676 |
//! | Altra VM 64G (v3, *no-alloc-remap*: 1 cycle per table) | 32832 | 161 - 104 = 57 | 1736 |
//! | Apple M2 VM 16G (v1) | 8192 + 16 | 151 - 77 = 74 | 291 |
//!
//! The *batch-barriers* step (v3) removed one `dsb ishst; isb` pair per PTE
//! written and nothing else: `(no-cont-remap - batch-barriers) / PTEs`
//! gives (435 - 161) ms / 16.78 M = 16.3 ns on Altra VM 64G,
//! (3779 - 1654) ms / 134.2 M = 15.8 ns on Altra metal 512G and
//! (78 - 11) ms / 4.19 M = 16.0 ns on Apple M2 VM 16G.
//!
//! Subtracting two barrier pairs (≈ 32 ns) from a cycle leaves the TLBI plus
//! its completion wait: ≈ 1670 ns on Altra, ≈ 260 ns on M2. How that splits
//! between issuing the TLBI and waiting in `dsb ish` is **not** published;
//! mmlab assigns a small issue cost (an estimate) and the rest to the wait.
//!
//! | field | `ampere-altra` | `apple-m2` | source |
//! |---|---|---|---|
//! | `tlbi_ns` (every single-VA, ASID and all kind) | 30 | 10 | **estimate** (issue of one DVM message; not separable in published data) |
//! | `tlbi_ns` (range kinds) | 40 | 15 | **estimate**: a little above a single op |
//! | `dsb_ish_after_tlbi_ns` | 1640 | 250 | derived: cycle cost above - 2 barrier pairs - `tlbi_ns` |
//! | `barriers.dsb[ishst]` + `barriers.isb` | 6 + 10 | 6 + 10 | derived sum 16 ns (batch-barriers, above); the split is an **estimate** |
//! | other barrier options | [`ModelCosts::default`] | [`ModelCosts::default`] | **estimate** (see there) |
//! | `grace_period_ns` | 10.5 ms | 10.5 ms | derived: demoting 100 x 1 GiB took 538.158 s with 513 `synchronize_rcu()` per page and 0.900 s with 2 (c0f398c3b2cf, reference §1.7): 537.3 s / 51100 calls |
//!
//! The Apple M2 figures were taken in a VM (the only M2 setup published);
//! the Altra figures agree between VM and bare metal to 3 %, so one profile
//! stands for both.
//!
//! # The three profiles and the barrier backend
//!
//! | profile | barriers | TLBIs, completion, grace periods | use |
//! |---|---|---|---|
//! | `native` (default) | executed: the real `dmb`/`dsb`/`isb` on an arm64 host, the nearest fence on x86_64; their time is in the *measured* time, none is modelled | modelled with the `ampere-altra` numbers (no host can execute a broadcast TLBI from user space) | an arm64 host, or a count of what happens |
//! | `apple-m2` | modelled (barrier backend `model` with the costs above; nothing executes) | modelled, M2 numbers | reproducing the M2 columns on any host |
//! | `ampere-altra` | modelled, Altra numbers | modelled, Altra numbers | reproducing the Altra columns on any host |
//!
//! [`CostProfile::barrier_backend`] is the backend a profile implies; an
//! explicit `--set barrier=...` overrides it (and `barrier=model` always
//! uses the profile's barrier costs).
//!
//! # CPU features
//!
//! A profile also carries the features of its machine ([`CpuFeatures`]),
//! so a run priced as a machine also issues the TLBIs that machine's
//! kernel issues: the Neoverse N1 of the Altra (and `native`, which prices
//! TLBIs as the Altra) has no FEAT_TLBIRANGE, so the kernel flushes a range
//! one page at a time up to `MAX_DVM_OPS` and the whole TLB above it; the
//! M2 has range TLBIs. `arm64.tlbi_range` set explicitly overrides the
//! profile ([`crate::MachineConfig::tlbi_range`]).
//!
//! | feature | `ampere-altra`, `native` | `apple-m2` | source |
//! |---|---|---|---|
//! | FEAT_TLBIRANGE | no | yes | Neoverse N1 TRM (Armv8.2: ID_AA64ISAR0_EL1.TLB = 0); Apple M1 and later implement Armv8.4's range TLBIs |
//! | BBM level the kernel uses | 0 | 0 | `has_bbml2_noabort()`: an allow-list of CPUs (Linux 6.18); N1 is Armv8.2 (no FEAT_BBM), Apple cores are not listed |
//! | FEAT_LPA2 | no | no | Armv8.7; neither core (so 48-bit VA, 4 levels, as mmlab models) |

use crate::arch::arm64::barrier::{BarrierBackend, IshSt, ModelCosts};
use crate::arch::arm64::tlb::tlbi::{NR_TLBI_KINDS, TlbiKind};

/// Modelled costs of one machine type; see the module documentation for the
/// source of every number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostProfile {
    /// Profile name as given on the command line.
    pub name: &'static str,
    /// ns to issue one TLBI, by [`TlbiKind`] (indexed by `kind as usize`).
    pub tlbi_ns: [u32; NR_TLBI_KINDS],
    /// ns that the first `dsb ish` after broadcast TLBIs waits for them to
    /// complete on every CPU.
    pub dsb_ish_after_tlbi_ns: u32,
    /// Barrier costs for the `model` barrier backend.
    pub barriers: ModelCosts,
    /// ns of one RCU grace period (`synchronize_rcu()`).
    pub grace_period_ns: u64,
    /// The barriers execute on the host (their time is measured), rather
    /// than being modelled with [`CostProfile::barriers`].
    pub native_barriers: bool,
    /// The CPU features of the machine: the defaults of the machine's
    /// switches (`arm64.tlbi_range`) unless they are set explicitly.
    pub features: CpuFeatures,
}

/// The arm64 CPU features of a profile's machine that change what the
/// kernel does (the ID register fields `cpufeature.c` reads at boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CpuFeatures {
    /// FEAT_TLBIRANGE (`ID_AA64ISAR0_EL1.TLB` = 2; Armv8.4): the kernel's
    /// `system_supports_tlb_range()`, range TLBIs in `__flush_tlb_range_op`.
    pub tlbi_range: bool,
    /// The break-before-make level the kernel can rely on: 2 only where
    /// `has_bbml2_noabort()` accepts the CPU (FEAT_BBM level 2 *and* the
    /// kernel's allow-list of CPUs whose level 2 never raises a TLB conflict
    /// abort, Linux 6.18+), else 0.
    pub bbm_level: u8,
    /// FEAT_LPA2 (52-bit addresses with 4 KiB pages; Armv8.7): the kernel
    /// runs with 52-bit VA and 5 levels (`arm64.lpa2`,
    /// [`crate::machine::MachineConfig::va_layout`]).
    pub lpa2: bool,
}

impl CpuFeatures {
    /// Neoverse N1 (Ampere Altra): Armv8.2, so none of the three.
    pub const NEOVERSE_N1: CpuFeatures = CpuFeatures { tlbi_range: false, bbm_level: 0, lpa2: false };
    /// Apple M2: FEAT_TLBIRANGE (Armv8.4 and later); not on the kernel's
    /// BBML2_NOABORT allow-list; no FEAT_LPA2.
    pub const APPLE_M2: CpuFeatures = CpuFeatures { tlbi_range: true, bbm_level: 0, lpa2: false };
}

/// `tlbi_ns` with one value for single ops and one for range ops.
const fn tlbi_costs(single: u32, range: u32) -> [u32; NR_TLBI_KINDS] {
    let mut a = [single; NR_TLBI_KINDS];
    a[TlbiKind::Rvale1is as usize] = range;
    a[TlbiKind::Rvae1is as usize] = range;
    a[TlbiKind::Rvaale1is as usize] = range;
    a
}

/// [`ModelCosts::default`] with the PTE-write pair set to the derived 16 ns.
fn pte_pair_barriers() -> ModelCosts {
    use crate::arch::arm64::barrier::BarrierOption;
    let mut b = ModelCosts::default();
    b.dsb[IshSt::INDEX] = 6;
    b.isb = 10;
    b
}

/// Grace period derived from the demote figures (module docs).
const GRACE_PERIOD_NS: u64 = 10_500_000;

impl CostProfile {
    /// Names accepted by [`CostProfile::by_name`] (aliases aside).
    pub const NAMES: [&'static str; 3] = ["native", "apple-m2", "ampere-altra"];

    /// Barriers executed on the host; TLBIs and grace periods modelled with
    /// the Ampere Altra numbers, and its CPU features (no FEAT_TLBIRANGE).
    pub fn native() -> CostProfile {
        CostProfile { name: "native", native_barriers: true, ..Self::ampere_altra() }
    }

    /// Ampere Altra (Neoverse N1), from the Altra VM and metal figures.
    pub fn ampere_altra() -> CostProfile {
        CostProfile {
            name: "ampere-altra",
            tlbi_ns: tlbi_costs(30, 40),
            dsb_ish_after_tlbi_ns: 1640,
            barriers: pte_pair_barriers(),
            grace_period_ns: GRACE_PERIOD_NS,
            native_barriers: false,
            features: CpuFeatures::NEOVERSE_N1,
        }
    }

    /// Apple M2 running a VM, from the M2 VM figures.
    pub fn apple_m2() -> CostProfile {
        CostProfile {
            name: "apple-m2",
            tlbi_ns: tlbi_costs(10, 15),
            dsb_ish_after_tlbi_ns: 250,
            barriers: pte_pair_barriers(),
            grace_period_ns: GRACE_PERIOD_NS,
            native_barriers: false,
            features: CpuFeatures::APPLE_M2,
        }
    }

    /// The profile called `name` (or one of its aliases: `neoverse-n1`,
    /// `altra` for `ampere-altra`; `apple-m2-vm`, `m2` for `apple-m2`).
    pub fn by_name(name: &str) -> Option<CostProfile> {
        match name {
            "native" | "default" => Some(Self::native()),
            "ampere-altra" | "altra" | "neoverse-n1" => Some(Self::ampere_altra()),
            "apple-m2" | "m2" | "apple-m2-vm" => Some(Self::apple_m2()),
            _ => None,
        }
    }

    /// The barrier backend this profile implies: `native` executes the
    /// barriers, the machine profiles model them with their costs.
    pub fn barrier_backend(&self) -> BarrierBackend {
        if self.native_barriers { BarrierBackend::Native } else { BarrierBackend::Model(self.barriers) }
    }

    /// Modelled ns to issue one TLBI of `kind`.
    #[inline]
    pub fn tlbi_cost_ns(&self, kind: TlbiKind) -> u64 {
        u64::from(self.tlbi_ns[kind as usize])
    }
}

impl Default for CostProfile {
    /// `native`: its TLBI numbers are those of the Neoverse N1 (Altra), the
    /// machine whose TLB size is the default `tlb_entries`.
    fn default() -> Self {
        Self::native()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::arm64::barrier::BarrierOption;

    #[test]
    fn profiles_follow_the_derivation() {
        for name in CostProfile::NAMES {
            let p = CostProfile::by_name(name).unwrap();
            assert_eq!(p.name, name);
            // A PTE-write barrier pair is the derived 16 ns.
            assert_eq!(p.barriers.dsb[IshSt::INDEX] + p.barriers.isb, 16);
            // Range ops cost more than one single op but far less than two.
            let single = p.tlbi_cost_ns(TlbiKind::Vaale1is);
            let range = p.tlbi_cost_ns(TlbiKind::Rvaale1is);
            assert!(range > single && range < 2 * single, "{name}");
        }
        // One fixmap-clear cycle: two barrier pairs, one TLBI, one wait.
        let n1 = CostProfile::ampere_altra();
        let cycle = 32 + n1.tlbi_cost_ns(TlbiKind::Vaale1is) + u64::from(n1.dsb_ish_after_tlbi_ns);
        assert!((1670..=1740).contains(&cycle), "{cycle}");
        let m2 = CostProfile::apple_m2();
        let cycle = 32 + m2.tlbi_cost_ns(TlbiKind::Vaale1is) + u64::from(m2.dsb_ish_after_tlbi_ns);
        assert!((280..=300).contains(&cycle), "{cycle}");
        assert_eq!(CostProfile::by_name("neoverse-n1"), Some(n1));
        assert_eq!(CostProfile::by_name("x86"), None);
        // native models TLBIs like the Altra but executes its barriers.
        let native = CostProfile::default();
        assert_eq!((native.name, native.tlbi_ns, native.dsb_ish_after_tlbi_ns), ("native", n1.tlbi_ns, 1640));
        assert_eq!(native.barrier_backend(), BarrierBackend::Native);
        // The Altra's N1 has no range TLBIs; native prices and flushes as it.
        assert!(!n1.features.tlbi_range && !native.features.tlbi_range && m2.features.tlbi_range);
        assert_eq!(native.features, n1.features);
        assert_eq!(m2.barrier_backend(), BarrierBackend::Model(m2.barriers));
    }
}
