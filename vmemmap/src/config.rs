//! HVO's switches and their `--set` keys.
//!
//! [`HvoConfig`] holds the one knob the kernel has for HVO
//! (`vm.hugetlb_optimize_vmemmap`, also the `hugetlb_free_vmemmap=` boot
//! parameter) and two switches that select between kernel code paths:
//!
//! - `hugetlb_vmemmap.rcu` ([`RcuPolicy`]): where `synchronize_rcu()` sits,
//!   by the kernel release that put it there;
//! - `hugetlb_vmemmap.arm64` ([`Arm64Hvo`]): whether and how HVO runs on
//!   arm64, where rewriting live vmemmap entries needs break-before-make.
//!
//! The fields are declared in the order reports print them.

use mmlab_engine::bool_knob;
use mmlab_engine::kernel::sysctl::{KernelName, Knob, KnobError, KnobTable, Parsed, parse_named};

/// Where HVO waits for an RCU grace period before it remaps a folio's
/// vmemmap, by the kernel that did it (see the crate docs for the race the
/// grace period closes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RcuPolicy {
    /// Linux 6.10 and before: no grace period (the speculative-PFN-walker
    /// race is open).
    V6_10,
    /// Linux 6.11, bd225530a4c7 "mm/hugetlb_vmemmap: fix race with
    /// speculative PFN walkers": a `synchronize_rcu()` at the top of
    /// `hugetlb_vmemmap_optimize_folio()` and `_restore_folio()` whether or
    /// not the folio is optimized (also with HVO off: the -34.3 %
    /// vm-scalability regression), and one per batch.
    V6_11,
    /// Linux 6.12, c2a967f6ab0e "mm/hugetlb_vmemmap: don't synchronize_rcu()
    /// without HVO": `VMEMMAP_SYNCHRONIZE_RCU`, only for folios actually
    /// remapped, once per batch.
    V6_12,
    /// The draft of the 6.12 fix posted in the thread, with the typo
    /// `flags &= VMEMMAP_SYNCHRONIZE_RCU` (for `&= ~`): after the first
    /// folio of a batch the grace period stays on and every other flag
    /// (the deferred TLB flush) is dropped.
    V6_12Draft,
    /// 2026 (Kiryl Shutsemau, "hugetlb: Remove VMEMMAP_SYNCHRONIZE_RCU"):
    /// fake heads are gone, so no grace period is needed. Simplified: the
    /// remap itself keeps the 6.12 layout.
    NoFakeHeads,
}

impl RcuPolicy {
    /// Every policy with its `--set` value, in history order.
    pub const ALL: [(RcuPolicy, &'static str); 5] = [
        (RcuPolicy::V6_10, "v6.10"),
        (RcuPolicy::V6_11, "v6.11"),
        (RcuPolicy::V6_12, "v6.12"),
        (RcuPolicy::V6_12Draft, "v6.12-draft"),
        (RcuPolicy::NoFakeHeads, "2026"),
    ];

    /// The `--set` value.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, _)| *p == self).map_or("?", |(_, n)| n)
    }
}

/// HVO on arm64. Mainline arm64 does not select
/// `ARCH_WANT_OPTIMIZE_HUGETLB_VMEMMAP` (060a2c92d1b6 "arm64: mm: hugetlb:
/// Disable HUGETLB_PAGE_OPTIMIZE_VMEMMAP"): changing the output address of
/// a live vmemmap entry without break-before-make is UNPREDICTABLE, and the
/// break cannot be done while other CPUs use the memmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Arm64Hvo {
    /// Mainline: no hstate is optimizable, nothing is remapped.
    Off,
    /// Yu Zhao's RFC (2024-08, "[RFC PATCH 3/4] arm64: pause remote CPUs to
    /// update vmemmap"): every entry change is a break-before-make with the
    /// other CPUs paused (`vmemmap_update_pte`/`_pmd`: clear, flush that
    /// entry's range, write), and the generic deferred flushes become
    /// no-ops (`vmemmap_flush_tlb_all`/`_range`).
    PauseCpus,
    /// The generic code as other architectures run it: live entries are
    /// rewritten in place. The engine's break-before-make checker refuses
    /// each such write; HVO records it as a [`crate::BbmViolation`] and
    /// then does the write anyway, as the kernel would (instrumented: on
    /// hardware the result is UNPREDICTABLE).
    Unsafe,
}

impl Arm64Hvo {
    /// Every mode with its `--set` value.
    pub const ALL: [(Arm64Hvo, &'static str); 3] =
        [(Arm64Hvo::Off, "off"), (Arm64Hvo::PauseCpus, "pause"), (Arm64Hvo::Unsafe, "unsafe")];

    /// The `--set` value.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, _)| *p == self).map_or("?", |(_, n)| n)
    }
}

/// HVO's switches (`--set hugetlb_optimize_vmemmap=…`, `hugetlb_vmemmap.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HvoConfig {
    /// `vm.hugetlb_optimize_vmemmap` (`vmemmap_optimize_enabled`; the
    /// `hugetlb_free_vmemmap=` boot parameter sets it at boot). On here,
    /// as with `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP_DEFAULT_ON`.
    pub hugetlb_optimize_vmemmap: bool,
    /// `hugetlb_vmemmap.rcu`: the grace-period policy (6.12 by default).
    pub rcu: RcuPolicy,
    /// `hugetlb_vmemmap.arm64`: HVO on arm64 (off, as in mainline).
    pub arm64: Arm64Hvo,
}

impl Default for HvoConfig {
    fn default() -> Self {
        HvoConfig { hugetlb_optimize_vmemmap: true, rcu: RcuPolicy::V6_12, arm64: Arm64Hvo::Off }
    }
}

impl HvoConfig {
    /// The `--set` keys of HVO, in help order (the fields' order).
    pub const KNOBS: KnobTable<HvoConfig> = KnobTable(&[
        bool_knob!(
            HvoConfig,
            "hugetlb_optimize_vmemmap",
            KernelName::Sysctl("vm.hugetlb_optimize_vmemmap"),
            hugetlb_optimize_vmemmap
        ),
        Knob {
            key: "hugetlb_vmemmap.rcu",
            values: "v6.10|v6.11|v6.12|v6.12-draft|2026",
            summary: "v6.10|v6.11|v6.12|v6.12-draft|2026",
            kernel: KernelName::Code("VMEMMAP_SYNCHRONIZE_RCU in mm/hugetlb_vmemmap.c, by release"),
            parser: |key, value| {
                Ok(Parsed::new(parse_named(key, value, &RcuPolicy::ALL)?, |c: &mut HvoConfig, p| c.rcu = p))
            },
        },
        Knob {
            key: "hugetlb_vmemmap.arm64",
            values: "off|pause|unsafe",
            summary: "off|pause|unsafe",
            kernel: KernelName::Code("arm64 ARCH_WANT_OPTIMIZE_HUGETLB_VMEMMAP; Yu Zhao's 2024 RFC vmemmap_update_pte"),
            parser: |key, value| {
                Ok(Parsed::new(parse_named(key, value, &Arm64Hvo::ALL)?, |c: &mut HvoConfig, m| c.arm64 = m))
            },
        },
    ]);

    /// Apply `value` to the knob `key` ([`HvoConfig::KNOBS`]).
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] or [`KnobError::BadValue`]; `self` is then
    /// unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KnobError> {
        Self::KNOBS.set(self, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_and_defaults() {
        let mut c = HvoConfig::default();
        assert_eq!(c.arm64, Arm64Hvo::Off, "mainline arm64 has no HVO");
        c.set("hugetlb_vmemmap.rcu", "v6.11").unwrap();
        c.set("hugetlb_vmemmap.arm64", "pause").unwrap();
        c.set("hugetlb_optimize_vmemmap", "0").unwrap();
        assert_eq!((c.rcu, c.arm64, c.hugetlb_optimize_vmemmap), (RcuPolicy::V6_11, Arm64Hvo::PauseCpus, false));
        let before = c;
        assert!(c.set("hugetlb_vmemmap.rcu", "v6.13").is_err());
        assert!(c.set("hugetlb_vmemmap.nope", "1").is_err());
        assert_eq!(c, before, "a refused value changes nothing");
        assert_eq!(HvoConfig::KNOBS.help().count(), 3);
        assert_eq!(RcuPolicy::V6_12Draft.name(), "v6.12-draft");
        assert_eq!(
            serde_json::to_string(&HvoConfig::default()).unwrap(),
            r#"{"hugetlb_optimize_vmemmap":true,"rcu":"V6_12","arm64":"Off"}"#
        );
    }
}
