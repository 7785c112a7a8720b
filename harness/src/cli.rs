//! `--set key=value` settings of the `mmlab` command.
//!
//! Every key is a boot parameter or sysctl of the machine or of the page
//! allocator (or of vmalloc). Values are checked here, before anything
//! boots, with the ranges the kernel enforces.

use mmlab_engine::MachineConfig;
use mmlab_engine::barrier::BarrierBackend;
use mmlab_pcp::{AllocatorConfig, KernelRules, MIN_PERCPU_PAGELIST_HIGH_FRACTION, SysctlError};
use mmlab_vmalloc::VmallocConfig;

/// The keys `--set` accepts, with the values each takes.
pub const KEYS: &[(&str, &str)] = &[
    ("percpu_pagelist_high_fraction", "0 or at least 8"),
    ("min_free_kbytes", "0..=2147483647"),
    ("pcp.rules", "7.2|6.12"),
    ("lock_stat", "0|1"),
    ("barrier", "native|count|model"),
    ("arm64.lazy_mmu_barrier_batching", "0|1"),
    ("arm64.tlbi_range", "0|1"),
    ("tlb_entries", "1..=1048576"),
    ("cost_profile", "neoverse-n1|apple-m2-vm"),
    ("vmap_allow_huge", "on|off|1|0"),
    ("vmalloc.contpte", "on|off|1|0"),
    ("vmalloc.huge_by_default", "on|off|1|0"),
    ("vmalloc.align_size_to_huge", "on|off|1|0"),
];

fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(bad_value(key, value, "expected 0 or 1")),
    }
}

fn parse_on_off(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "on" | "1" => Ok(true),
        "off" | "0" => Ok(false),
        _ => Err(bad_value(key, value, "expected on, off, 1 or 0")),
    }
}

fn valid_keys() -> String {
    KEYS.iter().map(|(k, v)| format!("{k} ({v})")).collect::<Vec<_>>().join(", ")
}

fn bad_value(key: &str, value: &str, why: impl std::fmt::Display) -> String {
    format!("bad value {value:?} for {key}: {why}")
}

/// Apply one `key=value` to the configs.
pub fn apply_set(
    kv: &str,
    mc: &mut MachineConfig,
    ac: &mut AllocatorConfig,
    vc: &mut VmallocConfig,
) -> Result<(), String> {
    let Some((key, value)) = kv.split_once('=') else {
        return Err(format!("--set expects key=value, got {kv:?}; valid keys: {}", valid_keys()));
    };
    let (key, value) = (key.trim(), value.trim());
    match key {
        "percpu_pagelist_high_fraction" => {
            let v: u32 = value.parse().map_err(|e| bad_value(key, value, e))?;
            if v != 0 && v < MIN_PERCPU_PAGELIST_HIGH_FRACTION {
                return Err(SysctlError::HighFraction(v).to_string());
            }
            ac.percpu_pagelist_high_fraction = v;
        }
        "min_free_kbytes" => {
            // An int sysctl with a minimum of 0 (`proc_dointvec_minmax`).
            let v: u64 = value.parse().map_err(|e| bad_value(key, value, e))?;
            if v > i32::MAX as u64 {
                return Err(bad_value(key, value, format!("at most {}", i32::MAX)));
            }
            ac.min_free_kbytes = Some(v);
        }
        "pcp.rules" => {
            ac.rules = value.parse::<KernelRules>().map_err(|e| bad_value(key, value, e))?;
        }
        "lock_stat" => mc.lock_stat = parse_bool(key, value)?,
        "arm64.lazy_mmu_barrier_batching" => mc.lazy_mmu_barrier_batching = parse_bool(key, value)?,
        "arm64.tlbi_range" => mc.tlbi_range = parse_bool(key, value)?,
        "tlb_entries" => {
            let v: usize = value.parse().map_err(|e| bad_value(key, value, e))?;
            if !(1..=1 << 20).contains(&v) {
                return Err(bad_value(key, value, "expected 1..=1048576"));
            }
            mc.tlb_entries = v;
        }
        "cost_profile" => {
            mc.cost_profile = mmlab_engine::cost::CostProfile::by_name(value).ok_or_else(|| {
                bad_value(key, value, format!("known profiles: {}", mmlab_engine::cost::CostProfile::NAMES.join(", ")))
            })?;
        }
        "vmap_allow_huge" => vc.vmap_allow_huge = parse_on_off(key, value)?,
        "vmalloc.contpte" => vc.contpte = parse_on_off(key, value)?,
        "vmalloc.huge_by_default" => vc.huge_by_default = parse_on_off(key, value)?,
        "vmalloc.align_size_to_huge" => vc.align_size_to_huge = parse_on_off(key, value)?,
        "barrier" => {
            mc.barrier_backend = value
                .parse::<BarrierBackend>()
                .map_err(|_| bad_value(key, value, "not a barrier backend this build provides (native|count|model)"))?;
        }
        _ => {
            return Err(format!("unknown setting {key:?}; valid keys: {}", valid_keys()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(kv: &str) -> Result<(MachineConfig, AllocatorConfig), String> {
        let mut mc = MachineConfig::default();
        let mut ac = AllocatorConfig::default();
        apply_set(kv, &mut mc, &mut ac, &mut VmallocConfig::default()).map(|()| (mc, ac))
    }

    fn vset(kv: &str) -> Result<VmallocConfig, String> {
        let mut vc = VmallocConfig::default();
        apply_set(kv, &mut MachineConfig::default(), &mut AllocatorConfig::default(), &mut vc).map(|()| vc)
    }

    #[test]
    fn keys_and_values() {
        assert_eq!(set("percpu_pagelist_high_fraction=8").unwrap().1.percpu_pagelist_high_fraction, 8);
        assert_eq!(set("percpu_pagelist_high_fraction=0").unwrap().1.percpu_pagelist_high_fraction, 0);
        assert!(set("percpu_pagelist_high_fraction=3").unwrap_err().contains("at least 8"));
        assert_eq!(set("min_free_kbytes=4096").unwrap().1.min_free_kbytes, Some(4096));
        assert!(set("min_free_kbytes=-1").is_err());
        assert_eq!(set("pcp.rules=6.12").unwrap().1.rules, KernelRules::Linux6_12);
        assert!(set("pcp.rules=5.4").is_err());
        assert!(set("lock_stat=1").unwrap().0.lock_stat);
        assert!(set("lock_stat=yes").is_err());
        assert!(set("barrier=count").is_ok());
        assert!(set("barrier=fast").is_err());
        let e = set("foo=1").unwrap_err();
        assert!(e.contains("unknown setting \"foo\"") && e.contains("percpu_pagelist_high_fraction"));
        assert!(set("lock_stat").unwrap_err().contains("key=value"));
    }

    #[test]
    fn vmalloc_keys() {
        assert!(vset("vmalloc.huge_by_default=on").unwrap().huge_by_default);
        assert!(!vset("vmalloc.contpte=0").unwrap().contpte);
        assert!(!vset("vmalloc.align_size_to_huge=off").unwrap().align_size_to_huge);
        assert!(!vset("vmap_allow_huge=off").unwrap().vmap_allow_huge);
        assert!(vset("vmap_allow_huge=1").unwrap().vmap_allow_huge);
        assert!(vset("vmalloc.contpte=yes").unwrap_err().contains("on, off"));
    }
}
