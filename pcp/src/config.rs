//! The page allocator's configuration and its `--set` keys.
//!
//! [`AllocatorConfig`] holds what the kernel sets by sysctl or at boot
//! (`vm.percpu_pagelist_high_fraction`, `vm.min_free_kbytes`), which
//! release's pcp rules to follow, and mmlab's instrumented switches. Its
//! [`AllocatorConfig::KNOBS`] table lists the keys `--set` accepts for it,
//! each with its range, its kernel name and a setter that checks the value
//! as the kernel's sysctl handler does (`proc_dointvec_minmax`, then the
//! knob's own handler) before anything boots. The serialised form records
//! every setting under the names reports use.

use crate::error::SysctlError;
use crate::rules::KernelRules;
use crate::sizing::MIN_PERCPU_PAGELIST_HIGH_FRACTION;
use mmlab_engine::bool_knob;
use mmlab_engine::kernel::sysctl::{
    KernelName, Knob, KnobError, KnobTable, Parsed, ValueError, parse_from_str, parse_named, sysctl_int,
};

/// Allocator settings that are boot parameters or sysctls in the kernel.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct AllocatorConfig {
    /// Which kernel's version-dependent pcp rules to follow (`pcp.rules`).
    pub rules: KernelRules,
    /// `vm.percpu_pagelist_high_fraction` (0, or at least 8).
    pub percpu_pagelist_high_fraction: u32,
    /// Instrumented, not a kernel knob (`pcp.high`): pin every pageset's
    /// `high` (both `high_min` and `high_max`) to this many pages, as
    /// experiments that patch `nr_pcp_high()` to return a constant do.
    /// `None`: the kernel's sizing. Serialised as `high_override`.
    #[serde(rename = "high_override")]
    pub pcp_high_override: Option<i32>,
    /// `vm.min_free_kbytes` override (None: computed as the kernel does,
    /// `calculate_min_free_kbytes`, then khugepaged's raise with THP).
    pub min_free_kbytes: Option<u64>,
    /// `transparent_hugepage=` (boot parameter): `never` leaves
    /// `min_free_kbytes` at the square-root value; `always` (Debian's
    /// default) and `madvise` start khugepaged, whose
    /// `set_recommended_min_free_kbytes()` raises it (45,056 kB on the 4 GiB
    /// virt machine, as the real kernel reports). Default `always`, as
    /// Debian's arm64 config (`CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS`).
    /// Serialised when not the default.
    #[serde(skip_serializing_if = "Thp::is_default")]
    pub transparent_hugepage: Thp,
    /// Last-level cache bytes per CPU, for `PCPF_FREE_HIGH_BATCH`
    /// (`zone_pcp_update_cacheinfo`); 0 = no cache information (not
    /// serialised then).
    #[serde(skip_serializing_if = "is_zero")]
    pub llc_bytes_per_cpu: u64,
    /// `pcp.drain_pages_zone_batch`: `drain_pages_zone()` empties a pcp in
    /// rounds of `pcp->batch` pages instead of `batch <<
    /// CONFIG_PCP_BATCH_SCALE_MAX` (Joshua Hahn, "mm/page_alloc: Perform
    /// appropriate batching in drain_pages_zone", v2 2/4, Sep 2025; not in
    /// 7.2). Off, as mainline. Serialised when on.
    #[serde(skip_serializing_if = "is_false")]
    pub drain_pages_zone_batch: bool,
    /// Check every invariant after every operation (slow; tests). Not
    /// serialised when off.
    #[serde(skip_serializing_if = "is_false")]
    pub debug_checks: bool,
}

/// `transparent_hugepage=` values (mm/huge_memory.c `setup_transparent_hugepage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Thp {
    /// THP for every anonymous mapping (CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS,
    /// Debian's default).
    #[default]
    Always,
    /// THP only in `MADV_HUGEPAGE` regions; khugepaged still runs.
    Madvise,
    /// THP off: khugepaged does not start.
    Never,
}

impl Thp {
    fn is_default(&self) -> bool {
        *self == Thp::Always
    }
    /// `hugepage_pmd_enabled()`: whether khugepaged runs and raises
    /// `min_free_kbytes`.
    pub fn hugepage_pmd_enabled(self) -> bool {
        self != Thp::Never
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

impl serde::Serialize for KernelRules {
    /// As the release it names (`"7.2"`, `"6.12"`).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.release())
    }
}

impl AllocatorConfig {
    /// The `--set` keys of the page allocator, in help order.
    pub const KNOBS: KnobTable<AllocatorConfig> = KnobTable(&[
        Knob {
            key: "percpu_pagelist_high_fraction",
            values: "0 or 8..=2147483647",
            summary: "0 or 8..=INT_MAX, else EINVAL as the sysctl",
            kernel: KernelName::Sysctl("vm.percpu_pagelist_high_fraction"),
            parser: parse_high_fraction,
        },
        Knob {
            key: "min_free_kbytes",
            values: "0..=2147483647; above RAM every allocation fails its watermark, as in the kernel",
            summary: "0..=INT_MAX; at or above RAM it is taken, as the kernel takes it, with a warning: the \
                      watermarks then exceed the managed pages and every allocation fails its watermark check",
            kernel: KernelName::Sysctl("vm.min_free_kbytes"),
            parser: |key, value| {
                Ok(Parsed::new(u64::from(sysctl_int(key, value)?), |c: &mut AllocatorConfig, v| {
                    c.min_free_kbytes = Some(v);
                }))
            },
        },
        Knob {
            key: "pcp.rules",
            values: "7.2|6.12",
            summary: "7.2|6.12",
            kernel: KernelName::Code("the pcp rules of that release (mm/page_alloc.c)"),
            parser: |key, value| Ok(Parsed::new(parse_from_str(key, value)?, |c: &mut AllocatorConfig, r| c.rules = r)),
        },
        Knob {
            key: "pcp.high",
            values: "pages, 1..=1073741824 (instrumented: pins high_min = high_max)",
            summary: "pages",
            kernel: KernelName::Instrumented("nr_pcp_high() patched to return a constant"),
            parser: parse_pcp_high,
        },
        Knob {
            key: "transparent_hugepage",
            values: "always|madvise|never",
            summary: "always|madvise|never (default always, as Debian's); always and madvise add khugepaged's min_free_kbytes raise",
            kernel: KernelName::BootParam("transparent_hugepage= (set_recommended_min_free_kbytes() when not never)"),
            parser: |key, value| {
                let all = [(Thp::Always, "always"), (Thp::Madvise, "madvise"), (Thp::Never, "never")];
                Ok(Parsed::new(parse_named(key, value, &all)?, |c: &mut AllocatorConfig, t| c.transparent_hugepage = t))
            },
        },
        bool_knob!(
            AllocatorConfig,
            "pcp.drain_pages_zone_batch",
            KernelName::Code("drain_pages_zone in rounds of pcp->batch (Joshua Hahn, Sep 2025; off: batch << 5, 7.2)"),
            drain_pages_zone_batch
        ),
    ]);

    /// Apply `value` to the knob `key` ([`AllocatorConfig::KNOBS`]).
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`], [`KnobError::BadValue`], or
    /// [`KnobError::Refused`] with a [`SysctlError`] source; `self` is then
    /// unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KnobError> {
        Self::KNOBS.set(self, key, value)
    }
}

/// `percpu_pagelist_high_fraction_sysctl_handler`: `proc_dointvec_minmax`
/// (an int, minimum 0) refuses anything else with -EINVAL; then a value
/// below [`MIN_PERCPU_PAGELIST_HIGH_FRACTION`] other than 0 is refused.
fn parse_high_fraction(key: &'static str, value: &str) -> Result<Parsed<AllocatorConfig>, KnobError> {
    let v = sysctl_int(key, value)?;
    if v != 0 && v < MIN_PERCPU_PAGELIST_HIGH_FRACTION {
        return Err(KnobError::Refused {
            key,
            value: value.to_string(),
            source: Box::new(SysctlError::HighFraction(v)),
        });
    }
    Ok(Parsed::new(v, |c: &mut AllocatorConfig, v| c.percpu_pagelist_high_fraction = v))
}

/// `pcp.high=`: 1 to 2^30 pages.
fn parse_pcp_high(key: &'static str, value: &str) -> Result<Parsed<AllocatorConfig>, KnobError> {
    let v: i32 = value.parse().map_err(|e| KnobError::bad_value(key, value, ValueError::NotInt(e)))?;
    if !(1..=1 << 30).contains(&v) {
        return Err(KnobError::bad_value(key, value, ValueError::OutOfRange));
    }
    Ok(Parsed::new(v, |c: &mut AllocatorConfig, v| c.pcp_high_override = Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(kv: &str) -> Result<AllocatorConfig, String> {
        let mut c = AllocatorConfig::default();
        AllocatorConfig::KNOBS.apply(&mut c, kv).map(|()| c).map_err(|e| e.to_string())
    }

    /// The keys, values and messages of the harness's `--set` today.
    #[test]
    fn keys_values_and_messages() {
        assert_eq!(set("percpu_pagelist_high_fraction=8").unwrap().percpu_pagelist_high_fraction, 8);
        assert_eq!(set("percpu_pagelist_high_fraction=0").unwrap().percpu_pagelist_high_fraction, 0);
        assert_eq!(
            set("percpu_pagelist_high_fraction=3").unwrap_err(),
            "percpu_pagelist_high_fraction must be 0 or at least 8, got 3"
        );
        for kv in ["percpu_pagelist_high_fraction=2147483648", "min_free_kbytes=2147483648"] {
            assert!(set(kv).unwrap_err().contains("EINVAL"), "{kv}");
        }
        assert_eq!(set("min_free_kbytes=4096").unwrap().min_free_kbytes, Some(4096));
        assert_eq!(
            set("min_free_kbytes=x").unwrap_err(),
            "bad value \"x\" for min_free_kbytes (0..=2147483647; above RAM every allocation fails its watermark, as in \
             the kernel): Invalid argument (EINVAL): invalid digit found in string"
        );
        assert_eq!(set("pcp.rules=6.12").unwrap().rules, KernelRules::Linux6_12);
        assert_eq!(set("pcp.rules=5.4").unwrap_err(), "bad value \"5.4\" for pcp.rules (7.2|6.12)");
        assert_eq!(set("pcp.high=512").unwrap().pcp_high_override, Some(512));
        let values = "pages, 1..=1073741824 (instrumented: pins high_min = high_max)";
        assert_eq!(set("pcp.high=0").unwrap_err(), format!("bad value \"0\" for pcp.high ({values})"));
        assert_eq!(
            set("pcp.high=x").unwrap_err(),
            format!("bad value \"x\" for pcp.high ({values}): invalid digit found in string")
        );
        let e = AllocatorConfig::default().set("percpu_pagelist_high_fraction", "3").unwrap_err();
        let src = std::error::Error::source(&e).unwrap();
        assert_eq!(src.downcast_ref::<SysctlError>(), Some(&SysctlError::HighFraction(3)));
    }

    #[test]
    fn help_and_serialised_form() {
        let help: Vec<String> = AllocatorConfig::KNOBS.help().collect();
        assert_eq!(help[2], "pcp.rules (7.2|6.12)");
        assert_eq!(AllocatorConfig::KNOBS.knobs().len(), 6);
        let c = set("pcp.high=64").unwrap();
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"rules":"7.2","percpu_pagelist_high_fraction":0,"high_override":64,"min_free_kbytes":null}"#
        );
        let c = set("pcp.drain_pages_zone_batch=on").unwrap();
        assert!(c.drain_pages_zone_batch && !AllocatorConfig::default().drain_pages_zone_batch);
        assert!(
            serde_json::to_string(&c).unwrap().ends_with(r#""min_free_kbytes":null,"drain_pages_zone_batch":true}"#)
        );
        let c = set("transparent_hugepage=never").unwrap();
        assert_eq!(c.transparent_hugepage, Thp::Never);
        assert!(!c.transparent_hugepage.hugepage_pmd_enabled() && Thp::Always.hugepage_pmd_enabled());
        assert!(
            serde_json::to_string(&c).unwrap().ends_with(r#""min_free_kbytes":null,"transparent_hugepage":"never"}"#)
        );
        assert_eq!(
            set("transparent_hugepage=sometimes").unwrap_err(),
            "bad value \"sometimes\" for transparent_hugepage (always|madvise|never)"
        );
    }
}
