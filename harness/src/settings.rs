//! `--set key=value` settings of the `mmlab` command.
//!
//! Every key is a boot parameter or sysctl of the machine or of the page
//! allocator (or of vmalloc), or an instrumented switch of the emulation
//! (named as such below). Values are checked here, before anything boots,
//! with the ranges the kernel enforces.
//!
//! [`Configs::new`] applies a list of settings in order and then settles the
//! barrier backend: the cost profile implies one (`native` executes the
//! barriers, the machine profiles model them) unless `barrier=` was given,
//! and a `model` backend always takes the profile's barrier costs.

use mmlab_engine::MachineConfig;
use mmlab_engine::barrier::BarrierBackend;
use mmlab_pcp::{AllocatorConfig, KernelRules, MIN_PERCPU_PAGELIST_HIGH_FRACTION, SysctlError};
use mmlab_vmalloc::VmallocConfig;

/// The keys `--set` accepts, with the values each takes.
pub const KEYS: &[(&str, &str)] = &[
    ("percpu_pagelist_high_fraction", "0 or 8..=2147483647"),
    ("min_free_kbytes", "0..=2147483647; above RAM every allocation fails its watermark, as in the kernel"),
    ("pcp.rules", "7.2|6.12"),
    ("lock_stat", "0|1"),
    ("barrier", "native|count|model"),
    ("arm64.lazy_mmu_barrier_batching", "0|1"),
    ("arm64.tlbi_range", "0|1"),
    ("tlb_entries", "1..=1048576"),
    ("cost_profile", "native|apple-m2|ampere-altra"),
    ("pcp.high", "pages, 1..=1073741824 (instrumented: pins high_min = high_max)"),
    ("vmap_allow_huge", "on|off|1|0"),
    ("vmalloc.contpte", "on|off|1|0"),
    ("vmalloc.huge_by_default", "on|off|1|0"),
    ("vmalloc.align_size_to_huge", "on|off|1|0"),
    ("vmalloc.pmd", "on|off|1|0"),
];

/// Machine, allocator and vmalloc configuration built from settings.
#[derive(Clone, Debug)]
pub struct Configs {
    pub machine: MachineConfig,
    pub allocator: AllocatorConfig,
    pub vmalloc: VmallocConfig,
}

impl Configs {
    /// Start from `machine` (memory size and CPUs already chosen), apply
    /// `sets` in order, then settle the barrier backend (module docs).
    pub fn new(machine: MachineConfig, sets: &[String]) -> Result<Configs, String> {
        let mut c = Configs { machine, allocator: AllocatorConfig::default(), vmalloc: VmallocConfig::default() };
        let mut explicit_barrier = false;
        for kv in sets {
            apply_set(kv, &mut c.machine, &mut c.allocator, &mut c.vmalloc)?;
            explicit_barrier |= kv.split_once('=').is_some_and(|(k, _)| k.trim() == "barrier");
        }
        let profile = c.machine.cost_profile;
        c.machine.barrier_backend = match c.machine.barrier_backend {
            _ if !explicit_barrier => profile.barrier_backend(),
            BarrierBackend::Model(_) => BarrierBackend::Model(profile.barriers),
            b => b,
        };
        Ok(c)
    }
}

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

/// A value `proc_dointvec_minmax` with a minimum of 0 takes: 0..=INT_MAX.
fn sysctl_int(key: &str, value: &str) -> Result<u32, String> {
    let v: i64 = value.parse().map_err(|e| bad_value(key, value, format!("Invalid argument (EINVAL): {e}")))?;
    u32::try_from(v).ok().filter(|&v| v <= i32::MAX as u32).ok_or_else(|| {
        bad_value(key, value, format!("Invalid argument (EINVAL): the sysctl is an int in 0..={}", i32::MAX))
    })
}

/// Settings the kernel accepts but that leave the machine unable to do
/// much, worth a warning before the run: `min_free_kbytes` at or above the
/// machine's RAM (every watermark is then above the managed pages, and
/// every allocation that checks watermarks fails, as on a kernel).
pub fn warnings(c: &Configs) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(k) = c.allocator.min_free_kbytes
        && k.saturating_mul(1024) >= c.machine.mem_bytes
    {
        w.push(format!(
            "min_free_kbytes={k} ({} MiB) is not below the machine's RAM ({} MiB): as in the kernel \
             (min_free_kbytes_sysctl_handler -> setup_per_zone_wmarks), the watermarks exceed the managed \
             pages and every allocation that checks them fails",
            k >> 10,
            c.machine.mem_bytes >> 20
        ));
    }
    w
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
            // percpu_pagelist_high_fraction_sysctl_handler: proc_dointvec_minmax
            // (an int, minimum 0) refuses anything else with -EINVAL.
            let v = sysctl_int(key, value)?;
            if v != 0 && v < MIN_PERCPU_PAGELIST_HIGH_FRACTION {
                return Err(SysctlError::HighFraction(v).to_string());
            }
            ac.percpu_pagelist_high_fraction = v;
        }
        "min_free_kbytes" => {
            // An int sysctl with a minimum of 0 (`proc_dointvec_minmax`) and
            // no maximum: a value above RAM is taken, and
            // setup_per_zone_wmarks() then puts every watermark above the
            // managed pages ([`warnings`] says so).
            ac.min_free_kbytes = Some(u64::from(sysctl_int(key, value)?));
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
        "vmalloc.pmd" => vc.pmd = parse_on_off(key, value)?,
        "pcp.high" => {
            let v: i32 = value.parse().map_err(|e| bad_value(key, value, e))?;
            if !(1..=1 << 30).contains(&v) {
                return Err(bad_value(key, value, "expected 1..=1073741824 pages"));
            }
            ac.pcp_high_override = Some(v);
        }
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
        for kv in ["percpu_pagelist_high_fraction=2147483648", "percpu_pagelist_high_fraction=4294967296"] {
            assert!(set(kv).unwrap_err().contains("EINVAL"), "{kv}");
        }
        assert_eq!(
            set("percpu_pagelist_high_fraction=2147483647").unwrap().1.percpu_pagelist_high_fraction,
            i32::MAX as u32
        );
        assert!(set("min_free_kbytes=2147483648").unwrap_err().contains("EINVAL"));
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
        assert!(!vset("vmalloc.pmd=off").unwrap().pmd);
    }

    #[test]
    fn pcp_high_override() {
        assert_eq!(set("pcp.high=512").unwrap().1.pcp_high_override, Some(512));
        assert!(set("pcp.high=0").is_err());
        assert!(set("pcp.high=-5").is_err());
    }

    #[test]
    fn the_profile_picks_the_barrier_backend() {
        let with = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            Configs::new(MachineConfig::default(), &sets).map(|c| c.machine.barrier_backend)
        };
        let m2 = mmlab_engine::cost::CostProfile::apple_m2();
        assert_eq!(with(&[]), Ok(BarrierBackend::Native));
        assert_eq!(with(&["cost_profile=apple-m2"]), Ok(BarrierBackend::Model(m2.barriers)));
        // An explicit backend wins, in either order; model takes the profile's costs.
        assert_eq!(with(&["barrier=count", "cost_profile=apple-m2"]), Ok(BarrierBackend::Count));
        assert_eq!(with(&["cost_profile=m2", "barrier=native"]), Ok(BarrierBackend::Native));
        assert_eq!(
            with(&["barrier=model"]),
            Ok(BarrierBackend::Model(mmlab_engine::cost::CostProfile::native().barriers))
        );
        assert!(with(&["cost_profile=x86"]).unwrap_err().contains("native, apple-m2, ampere-altra"));
    }
}
