//! `--set key=value` settings of the `mmlab` command.
//!
//! Every key is a boot parameter or sysctl of the machine or of the page
//! allocator (or of vmalloc), or an instrumented switch of the emulation.
//! The keys are not listed here: each crate owns its configuration and the
//! table of its keys, and this module only puts the three together:
//!
//! | keys | table | file |
//! |---|---|---|
//! | `percpu_pagelist_high_fraction`, `min_free_kbytes`, `pcp.*` | [`AllocatorConfig::KNOBS`] | `pcp/src/config.rs` |
//! | `lock_stat`, `barrier`, `cost_profile`, `arm64.*`, `tlb_entries` | [`MachineConfig::KNOBS`] | `engine/src/kernel/params.rs` |
//! | `vmap_allow_huge`, `vmalloc.*` | [`VmallocConfig::KNOBS`] | `vmalloc/src/config.rs` |
//! | `hugepagesz`, `hugepages`, `default_hugepagesz`, `hugetlb.*` | [`HugetlbConfig::KNOBS`] | `hugetlb/src/config.rs` |
//! | `hugetlb_optimize_vmemmap`, `hugetlb_vmemmap.*` | [`HvoConfig::KNOBS`] | `vmemmap/src/config.rs` |
//!
//! The hugetlb keys take effect where a command has hugetlb pools (`stat`,
//! `hugetlb`); the boot parameters are read in order, as on a command line.
//!
//! A row of a table holds the key, its values, its kernel name and a setter
//! that checks the value with the ranges the kernel enforces; the `--set`
//! help sentence ([`set_help`]), the list of valid keys in an error and the
//! checks all come from those rows. A [`Setting`] is parsed and checked when
//! the command line is read, before anything boots; a bad one is a typed
//! [`SettingsError`].
//!
//! [`Configs::new`] applies a list of settings in order and then settles the
//! barrier backend: the cost profile implies one (`native` executes the
//! barriers, the machine profiles model them) unless `barrier=` was given,
//! and a `model` backend always takes the profile's barrier costs.

use mmlab_buddy::knob::{Knob, KnobError, split_key_value, summarise};
use mmlab_engine::MachineConfig;
use mmlab_engine::arch::arm64::barrier::BarrierBackend;
use mmlab_hugetlb::HugetlbConfig;
use mmlab_pcp::AllocatorConfig;
use mmlab_vmalloc::VmallocConfig;
use mmlab_vmemmap::HvoConfig;
use std::fmt;

/// The order in which an error lists the valid keys. The tables' order is
/// the help sentence's; this listing keeps the order errors have always
/// printed (a test checks it names every key of the three tables once).
const LISTING_ORDER: &[&str] = &[
    "percpu_pagelist_high_fraction",
    "min_free_kbytes",
    "transparent_hugepage",
    "pcp.rules",
    "lock_stat",
    "barrier",
    "arm64.lazy_mmu_barrier_batching",
    "arm64.tlbi_range",
    "arm64.linear_map",
    "arm64.linear_map_variant",
    "rodata",
    "arm64.kernel_image",
    "boot.state",
    "debug_pagealloc",
    "deferred_struct_page_init",
    "tlb_entries",
    "cost_profile",
    "pcp.high",
    "vmap_allow_huge",
    "vmalloc.contpte",
    "vmalloc.huge_by_default",
    "vmalloc.align_size_to_huge",
    "vmalloc.large_order_pages",
    "vmalloc.free_pages_bulk",
    "vmalloc.pmd",
    "hugepagesz",
    "hugepages",
    "default_hugepagesz",
    "hugetlb.gigantic",
    "hugetlb.demote",
    "hugetlb_optimize_vmemmap",
    "hugetlb_vmemmap.rcu",
    "hugetlb_vmemmap.arm64",
];

/// The `--set` help sentence: every key of the allocator's, the machine's
/// and vmalloc's tables with the values it takes.
pub fn set_help() -> String {
    let keys = AllocatorConfig::KNOBS
        .summaries()
        .chain(MachineConfig::KNOBS.summaries())
        .chain(VmallocConfig::KNOBS.summaries())
        .chain(HugetlbConfig::KNOBS.summaries())
        .chain(HvoConfig::KNOBS.summaries());
    format!("A boot parameter or sysctl, repeatable: {}. With compare: applied to every configuration", summarise(keys))
}

/// The knob a key names, in the table of the configuration it sets.
#[derive(Clone, Copy, Debug)]
enum Target {
    Machine(&'static Knob<MachineConfig>),
    Allocator(&'static Knob<AllocatorConfig>),
    Vmalloc(&'static Knob<VmallocConfig>),
    Hugetlb(&'static Knob<HugetlbConfig>),
    Hvo(&'static Knob<HvoConfig>),
}

impl Target {
    fn find(key: &str) -> Option<Target> {
        AllocatorConfig::KNOBS
            .get(key)
            .map(Target::Allocator)
            .or_else(|| MachineConfig::KNOBS.get(key).map(Target::Machine))
            .or_else(|| VmallocConfig::KNOBS.get(key).map(Target::Vmalloc))
            .or_else(|| HugetlbConfig::KNOBS.get(key).map(Target::Hugetlb))
            .or_else(|| HvoConfig::KNOBS.get(key).map(Target::Hvo))
    }

    fn key(self) -> &'static str {
        match self {
            Target::Machine(k) => k.key,
            Target::Allocator(k) => k.key,
            Target::Vmalloc(k) => k.key,
            Target::Hugetlb(k) => k.key,
            Target::Hvo(k) => k.key,
        }
    }

    /// `key (values)` as an error lists it.
    fn help(self) -> String {
        match self {
            Target::Machine(k) => k.help(),
            Target::Allocator(k) => k.help(),
            Target::Vmalloc(k) => k.help(),
            Target::Hugetlb(k) => k.help(),
            Target::Hvo(k) => k.help(),
        }
    }

    fn apply(self, c: &mut Configs, value: &str) -> Result<(), KnobError> {
        match self {
            Target::Machine(k) => k.apply(&mut c.machine, value),
            Target::Allocator(k) => k.apply(&mut c.allocator, value),
            Target::Vmalloc(k) => k.apply(&mut c.vmalloc, value),
            Target::Hugetlb(k) => k.apply(&mut c.hugetlb, value),
            Target::Hvo(k) => k.apply(&mut c.hugetlb.hvo, value),
        }
    }
}

/// A `--set key=value` whose key is known and whose value its knob takes.
#[derive(Clone, Debug)]
pub struct Setting {
    /// The argument as given.
    text: String,
    target: Target,
    value: String,
}

impl Setting {
    /// The key, as its table spells it.
    pub fn key(&self) -> &'static str {
        self.target.key()
    }

    /// The argument as given (reports record it so).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Setting {
    type Err = SettingsError;

    /// Parse `key=value` and check the value with its knob's setter.
    fn from_str(kv: &str) -> Result<Setting, SettingsError> {
        let (key, value) = split_key_value(kv)?;
        let target = Target::find(key).ok_or_else(|| KnobError::UnknownKey(key.to_string()))?;
        target.apply(&mut Configs::scratch(), value)?;
        Ok(Setting { text: kv.to_string(), target, value: value.to_string() })
    }
}

/// Parse every `key=value` of `sets`, in order.
///
/// # Errors
/// The first setting that does not parse ([`SettingsError`]).
pub fn parse(sets: &[String]) -> Result<Vec<Setting>, SettingsError> {
    sets.iter().map(|s| s.parse()).collect()
}

/// A `--set` that cannot be applied: the knob's error, printed as the
/// command always printed it (a bad key or a missing `=` also lists the
/// valid keys).
#[derive(Debug)]
pub struct SettingsError(pub KnobError);

impl From<KnobError> for SettingsError {
    fn from(e: KnobError) -> Self {
        SettingsError(e)
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        if matches!(self.0, KnobError::NotKeyValue(_) | KnobError::UnknownKey(_)) {
            let keys: Vec<String> = LISTING_ORDER.iter().filter_map(|k| Target::find(k)).map(Target::help).collect();
            write!(f, "; valid keys: {}", keys.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for SettingsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<SettingsError> for String {
    fn from(e: SettingsError) -> String {
        e.to_string()
    }
}

/// Machine, allocator, vmalloc and hugetlb configuration built from
/// settings.
#[derive(Clone, Debug)]
pub struct Configs {
    /// The machine (memory, CPUs, barriers, TLB, costs).
    pub machine: MachineConfig,
    /// The page allocator.
    pub allocator: AllocatorConfig,
    /// vmalloc.
    pub vmalloc: VmallocConfig,
    /// hugetlb and HVO.
    pub hugetlb: HugetlbConfig,
}

impl Configs {
    /// Every configuration at its default, to check a value on.
    fn scratch() -> Configs {
        Configs {
            machine: MachineConfig::default(),
            allocator: AllocatorConfig::default(),
            vmalloc: VmallocConfig::default(),
            hugetlb: HugetlbConfig::default(),
        }
    }

    /// Start from `machine` (memory size and CPUs already chosen), parse and
    /// apply `sets` in order, then settle the barrier backend (module docs).
    ///
    /// # Errors
    /// The first setting that does not parse ([`SettingsError`]).
    pub fn new(machine: MachineConfig, sets: &[String]) -> Result<Configs, SettingsError> {
        Configs::from_settings(machine, &parse(sets)?)
    }

    /// The configurations of the global options: `--mem` (one size or
    /// banks), `--cpus` (`default_cpus` when absent) and every `--set`;
    /// warnings about settings that do nothing are printed to stderr.
    ///
    /// # Errors
    /// A bad `--mem` or `--set`, as text for the command line.
    pub fn from_options(
        mem: &str,
        cpus: Option<usize>,
        sets: &[String],
        default_cpus: usize,
    ) -> Result<Configs, String> {
        let (mem_bytes, mem_banks) = crate::cli::parse_mem(mem)?;
        let mc = MachineConfig { mem_bytes, mem_banks, nr_cpus: cpus.unwrap_or(default_cpus), ..Default::default() };
        let c = Configs::from_settings(mc, &parse(sets)?)?;
        for w in warnings(&c) {
            eprintln!("mmlab: warning: {w}");
        }
        Ok(c)
    }

    /// As [`Configs::new`], with settings parsed already.
    ///
    /// # Errors
    /// A knob's setter refusing a value; settings from [`parse`] were
    /// checked by that same setter, which depends on the value alone.
    pub fn from_settings(machine: MachineConfig, sets: &[Setting]) -> Result<Configs, SettingsError> {
        let mut c = Configs { machine, ..Configs::scratch() };
        for s in sets {
            s.target.apply(&mut c, &s.value)?;
        }
        let explicit_barrier = sets.iter().any(|s| s.key() == "barrier");
        let profile = c.machine.cost_profile;
        c.machine.barrier_backend = match c.machine.barrier_backend {
            _ if !explicit_barrier => profile.barrier_backend(),
            BarrierBackend::Model(_) => BarrierBackend::Model(profile.barriers),
            b => b,
        };
        Ok(c)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_pcp::KernelRules;

    fn configs(kv: &str) -> Result<Configs, String> {
        Ok(Configs::new(MachineConfig::default(), &[kv.to_string()])?)
    }

    fn set(kv: &str) -> Result<(MachineConfig, AllocatorConfig), String> {
        configs(kv).map(|c| (c.machine, c.allocator))
    }

    fn vset(kv: &str) -> Result<VmallocConfig, String> {
        configs(kv).map(|c| c.vmalloc)
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
    fn hugetlb_keys() {
        let c = Configs::new(
            MachineConfig::default(),
            &[
                "hugepagesz=1G".to_string(),
                "hugepages=2".to_string(),
                "hugepagesz=2M".to_string(),
                "hugepages=8".to_string(),
                "hugetlb_vmemmap.rcu=v6.11".to_string(),
                "hugetlb_optimize_vmemmap=off".to_string(),
                "hugetlb.gigantic=v6.11".to_string(),
            ],
        )
        .unwrap();
        assert_eq!(c.hugetlb.resolved_hugepages(), [0, 8, 0, 2]);
        assert_eq!(c.hugetlb.hvo.rcu, mmlab_vmemmap::RcuPolicy::V6_11);
        assert!(!c.hugetlb.hvo.hugetlb_optimize_vmemmap);
        assert_eq!(c.hugetlb.gigantic, mmlab_hugetlb::GiganticAlloc::V6_11);
        assert!(configs("hugepagesz=3M").unwrap_err().contains("hugepagesz"));
        assert!(configs("hugetlb_vmemmap.rcu=v6.9").unwrap_err().contains("v6.10, v6.11"));
        // A count twice for one size: refused in order, as the kernel does.
        let twice = Configs::new(MachineConfig::default(), &["hugepages=1".to_string(), "hugepages=2".to_string()]);
        assert!(twice.unwrap_err().to_string().contains("specified twice"));
    }

    #[test]
    fn pcp_high_override() {
        assert_eq!(set("pcp.high=512").unwrap().1.pcp_high_override, Some(512));
        assert!(set("pcp.high=0").is_err());
        assert!(set("pcp.high=-5").is_err());
    }

    /// The listing names every key of the three tables once, and the help
    /// sentence and the messages read as they always have.
    #[test]
    fn help_listing_and_messages() {
        let mut keys: Vec<&str> = AllocatorConfig::KNOBS
            .knobs()
            .iter()
            .map(|k| k.key)
            .chain(MachineConfig::KNOBS.knobs().iter().map(|k| k.key))
            .chain(VmallocConfig::KNOBS.knobs().iter().map(|k| k.key))
            .chain(HugetlbConfig::KNOBS.knobs().iter().map(|k| k.key))
            .chain(HvoConfig::KNOBS.knobs().iter().map(|k| k.key))
            .collect();
        let mut listed = LISTING_ORDER.to_vec();
        keys.sort_unstable();
        listed.sort_unstable();
        assert_eq!(keys, listed);
        assert!(set_help().contains("pcp.high (pages), transparent_hugepage (always|madvise|never"));
        assert!(set_help().contains(
            "lock_stat (0|1), barrier (native|count|model), cost_profile \
             (native|apple-m2|ampere-altra), arm64.lazy_mmu_barrier_batching, arm64.tlbi_range, arm64.linear_map (0|1), \
             arm64.linear_map_variant (base|no-cont-remap|no-alloc-remap|lazy-unmap|v6.10), rodata (full|on|off), \
             boot.state (real|bare), arm64.kernel_image, debug_pagealloc, deferred_struct_page_init (0|1), tlb_entries, \
             vmap_allow_huge, vmalloc.contpte, vmalloc.pmd, vmalloc.huge_by_default, vmalloc.align_size_to_huge, \
             vmalloc.large_order_pages, vmalloc.free_pages_bulk \
             (on|off), hugepagesz"
        ));
        assert!(set_help().contains(
            "hugepagesz (<size>), hugepages (<count>), default_hugepagesz (<size>), hugetlb.gigantic, hugetlb.demote \
             (v6.11|v6.12), hugetlb_optimize_vmemmap (on|off), hugetlb_vmemmap.rcu (v6.10|v6.11|v6.12|v6.12-draft|2026), \
             hugetlb_vmemmap.arm64 (off|pause|unsafe). With compare"
        ));
        let e = set("nope=1").unwrap_err();
        assert!(e.starts_with(
            "unknown setting \"nope\"; valid keys: percpu_pagelist_high_fraction (0 or 8..=2147483647), \
             min_free_kbytes (0..=2147483647; above RAM every allocation fails its watermark, as in the kernel), \
             transparent_hugepage (always|madvise|never), pcp.rules (7.2|6.12), lock_stat (0|1),"
        ));
        assert!(e.contains(
            "vmalloc.align_size_to_huge (on|off|1|0), vmalloc.large_order_pages (on|off|1|0), vmalloc.free_pages_bulk (on|off|1|0), \
             vmalloc.pmd (on|off|1|0), hugepagesz"
        ));
        assert!(e.ends_with("hugetlb_vmemmap.arm64 (off|pause|unsafe)"), "{e}");
        assert_eq!(
            set("percpu_pagelist_high_fraction=3").unwrap_err(),
            "percpu_pagelist_high_fraction must be 0 or at least 8, got 3"
        );
        assert_eq!(set("tlb_entries=x").unwrap_err(), "bad value \"x\" for tlb_entries: invalid digit found in string");
        let s: Setting = " lock_stat = 1".parse().unwrap();
        assert_eq!((s.key(), s.as_str()), ("lock_stat", " lock_stat = 1"));
    }

    #[test]
    fn the_profile_picks_the_barrier_backend() {
        let with = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            Configs::new(MachineConfig::default(), &sets).map(|c| c.machine.barrier_backend)
        };
        let m2 = mmlab_engine::arch::arm64::cost::CostProfile::apple_m2();
        let with = |sets: &[&str]| with(sets).map_err(|e| e.to_string());
        assert_eq!(with(&[]), Ok(BarrierBackend::Native));
        assert_eq!(with(&["cost_profile=apple-m2"]), Ok(BarrierBackend::Model(m2.barriers)));
        // An explicit backend wins, in either order; model takes the profile's costs.
        assert_eq!(with(&["barrier=count", "cost_profile=apple-m2"]), Ok(BarrierBackend::Count));
        assert_eq!(with(&["cost_profile=m2", "barrier=native"]), Ok(BarrierBackend::Native));
        assert_eq!(
            with(&["barrier=model"]),
            Ok(BarrierBackend::Model(mmlab_engine::arch::arm64::cost::CostProfile::native().barriers))
        );
        assert!(with(&["cost_profile=x86"]).unwrap_err().contains("native, apple-m2, ampere-altra"));
    }
}
