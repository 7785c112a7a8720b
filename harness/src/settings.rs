//! `--set key=value` settings of the `mmlab` command.
//!
//! Every key is a boot parameter or sysctl of the machine, the page
//! allocator, vmalloc or hugetlb, or an instrumented switch of the
//! emulation. The keys are not listed here: each crate owns its
//! configuration and the table of its keys, and this module only registers
//! the five tables together:
//!
//! | keys | table | file |
//! |---|---|---|
//! | `percpu_pagelist_high_fraction`, `min_free_kbytes`, `pcp.*` | [`AllocatorConfig::KNOBS`] | `pcp/src/config.rs` |
//! | `lock_stat`, `barrier`, `cost_profile`, `arm64.*`, `tlb_entries` | [`MachineConfig::KNOBS`] | `engine/src/kernel/params.rs` |
//! | `vmap_allow_huge`, `vmalloc.*` | [`VmallocConfig::KNOBS`] | `vmalloc/src/config.rs` |
//! | `hugepagesz`, `hugepages`, `default_hugepagesz`, `hugetlb.*` | [`HugetlbConfig::KNOBS`] | `hugetlb/src/config.rs` |
//! | `hugetlb_optimize_vmemmap`, `hugetlb_vmemmap.*` | [`HvoConfig::KNOBS`] | `vmemmap/src/config.rs` |
//!
//! The hugetlb keys take effect where a command brings hugetlb up (`stat`,
//! `hugetlb`, `peer`, `trace`); the others refuse them
//! (`GlobalOpts::refuse_hugetlb`) rather than show a setting they ignore.
//! `hugetlb_optimize_vmemmap=on` is refused on mainline arm64, which builds
//! no HVO. The boot parameters are read in order, as on a command line.
//!
//! Each table is registered once in [`REGISTRY`] (with where its struct
//! sits in [`Configs`]); a key is looked up there and nowhere else. A row
//! of a table holds the key, its values, its kernel name and a parser that
//! checks the value with the ranges the kernel enforces; the `--set` help
//! sentence ([`set_help`]), the key listing ([`listing`]) and the errors
//! all come from those rows. A [`Setting`] is parsed once, into its typed
//! value, when the command line is read, before anything boots; a bad one
//! is a typed [`SettingsError`] of one short line: a mistyped key with the
//! closest key ("did you mean"), a bad value with the values the knob
//! takes. Every boolean knob takes the same words, the kernel's
//! `kstrtobool()` set (`1|0|y|n|yes|no|true|false|on|off`).
//!
//! [`Configs::new`] applies a list of settings in order and then settles the
//! barrier backend: the cost profile implies one (`native` executes the
//! barriers, the machine profiles model them) unless `barrier=` was given,
//! and a `model` backend always takes the profile's barrier costs.

use mmlab_engine::MachineConfig;
use mmlab_engine::arch::arm64::barrier::BarrierBackend;
use mmlab_engine::kernel::sysctl::{
    AnyTable, BOOL_VALUES, KnobDoc, KnobError, Parsed, Registered, find_knob, summarise,
};
use mmlab_hugetlb::HugetlbConfig;
use mmlab_pcp::AllocatorConfig;
use mmlab_vmalloc::VmallocConfig;
use mmlab_vmemmap::HvoConfig;
use std::fmt;

static ALLOCATOR: Registered<Configs, AllocatorConfig> =
    Registered { table: AllocatorConfig::KNOBS, field: |c| &mut c.allocator };
static MACHINE: Registered<Configs, MachineConfig> =
    Registered { table: MachineConfig::KNOBS, field: |c| &mut c.machine };
static VMALLOC: Registered<Configs, VmallocConfig> =
    Registered { table: VmallocConfig::KNOBS, field: |c| &mut c.vmalloc };
static HUGETLB: Registered<Configs, HugetlbConfig> =
    Registered { table: HugetlbConfig::KNOBS, field: |c| &mut c.hugetlb };
static HVO: Registered<Configs, HvoConfig> = Registered { table: HvoConfig::KNOBS, field: |c| &mut c.hugetlb.hvo };

/// The knob registry: every crate's table, each registered once, in the
/// order `--help` lists them. A key is looked up here and nowhere else.
pub static REGISTRY: &[&dyn AnyTable<Configs>] = &[&ALLOCATOR, &MACHINE, &VMALLOC, &HUGETLB, &HVO];

/// Whether `key` is one of hugetlb's or HVO's (the settings that act only
/// where a command brings hugetlb up).
pub fn is_hugetlb_key(key: &str) -> bool {
    HugetlbConfig::KNOBS.0.iter().map(|k| k.key).chain(HvoConfig::KNOBS.0.iter().map(|k| k.key)).any(|k| k == key)
}

/// Every knob of the registry, in help order.
pub fn docs() -> impl Iterator<Item = KnobDoc> {
    REGISTRY.iter().flat_map(|t| t.docs())
}

/// The key listing: one line per knob, `key (values): kernel name`, in help
/// order.
pub fn listing() -> Vec<String> {
    docs().map(|d| format!("{}: {}", d.help(), d.kernel)).collect()
}

/// The `--set` help sentence: every key of the registry with the values it
/// takes.
pub fn set_help() -> String {
    format!(
        "A boot parameter or sysctl, repeatable: {}. A switch shown as on|off takes {}, as the kernel's \
         kstrtobool(). With compare: applied to every configuration",
        summarise(docs().map(|d| (d.key, d.summary))),
        BOOL_VALUES.replace('|', ", ")
    )
}

/// A `--set key=value` whose key is known, its value parsed once by its
/// knob into the typed value that [`Configs::from_settings`] applies.
#[derive(Clone, Debug)]
pub struct Setting {
    /// The argument as given.
    text: String,
    doc: KnobDoc,
    value: Parsed<Configs>,
}

impl Setting {
    /// The key, as its table spells it.
    pub fn key(&self) -> &'static str {
        self.doc.key
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

    /// Parse `key=value` with the registry's knob for the key.
    fn from_str(kv: &str) -> Result<Setting, SettingsError> {
        let (doc, value) = find_knob(REGISTRY, kv)?;
        Ok(Setting { text: kv.to_string(), doc, value })
    }
}

/// Parse every `key=value` of `sets`, in order.
///
/// # Errors
/// The first setting that does not parse ([`SettingsError`]).
pub fn parse(sets: &[String]) -> Result<Vec<Setting>, SettingsError> {
    sets.iter().map(|s| s.parse()).collect()
}

/// A `--set` that cannot be applied: the knob's error, one short line (a
/// mistyped key names the closest key; a bad value the values the knob
/// takes).
#[derive(Debug)]
pub struct SettingsError(pub KnobError);

impl From<KnobError> for SettingsError {
    fn from(e: KnobError) -> Self {
        SettingsError(e)
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
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
    /// Every configuration at its default.
    fn defaults() -> Configs {
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
    /// A boot parameter refused in the state the earlier ones left
    /// (`hugepages=` twice for one size); every other value was checked
    /// when it was parsed.
    pub fn from_settings(machine: MachineConfig, sets: &[Setting]) -> Result<Configs, SettingsError> {
        let mut c = Configs { machine, ..Configs::defaults() };
        for s in sets {
            s.value.apply(&mut c)?;
        }
        // vm.hugetlb_optimize_vmemmap exists only where HVO is built: not on
        // mainline arm64 (`hugetlb_vmemmap.arm64=off`, the default). Asking
        // for it on there is refused; `=off` says what the machine is.
        if let Some(s) = sets.iter().rev().find(|s| s.key() == "hugetlb_optimize_vmemmap")
            && c.hugetlb.hvo.hugetlb_optimize_vmemmap
            && c.hugetlb.hvo.arm64 == mmlab_vmemmap::Arm64Hvo::Off
        {
            return Err(SettingsError(KnobError::Refused {
                key: "hugetlb_optimize_vmemmap",
                value: s.as_str().split_once('=').map_or("", |(_, v)| v).to_string(),
                source: "hugetlb_optimize_vmemmap: arm64 does not build HVO (it does not select \
                         ARCH_WANT_OPTIMIZE_HUGETLB_VMEMMAP, 060a2c92d1b6), so the kernel has no \
                         /proc/sys/vm/hugetlb_optimize_vmemmap; add --set hugetlb_vmemmap.arm64=pause (the 2024 \
                         RFC) or =unsafe to model HVO on arm64"
                    .into(),
            }));
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
        assert!(set("lock_stat=yes").unwrap().0.lock_stat);
        assert!(set("barrier=count").is_ok());
        assert!(set("barrier=fast").is_err());
        assert_eq!(set("foo=1").unwrap_err(), "unknown setting \"foo\" (`mmlab --help` lists the keys under --set)");
        assert!(set("lock_stat").unwrap_err().contains("key=value"));
    }

    #[test]
    fn vmalloc_keys() {
        assert!(vset("vmalloc.huge_by_default=on").unwrap().huge_by_default);
        assert!(!vset("vmalloc.contpte=0").unwrap().contpte);
        assert!(!vset("vmalloc.align_size_to_huge=off").unwrap().align_size_to_huge);
        assert!(!vset("vmap_allow_huge=off").unwrap().vmap_allow_huge);
        assert!(vset("vmap_allow_huge=1").unwrap().vmap_allow_huge);
        assert!(vset("vmalloc.contpte=maybe").unwrap_err().contains("(1|0|y|n|yes|no|true|false|on|off)"));
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
        assert!(configs("hugetlb_vmemmap.rcu=v6.9").unwrap_err().contains("(v6.10|v6.11|"));
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

    /// The registry holds every key of the five tables once, and the help
    /// sentence and the listing come from it.
    #[test]
    fn one_registry_help_and_listing() {
        let mut keys: Vec<&str> = AllocatorConfig::KNOBS
            .knobs()
            .iter()
            .map(|k| k.key)
            .chain(MachineConfig::KNOBS.knobs().iter().map(|k| k.key))
            .chain(VmallocConfig::KNOBS.knobs().iter().map(|k| k.key))
            .chain(HugetlbConfig::KNOBS.knobs().iter().map(|k| k.key))
            .chain(HvoConfig::KNOBS.knobs().iter().map(|k| k.key))
            .collect();
        let mut listed: Vec<&str> = docs().map(|d| d.key).collect();
        // As many as the tables hold (33 before any ported patch's switch).
        assert!(listed.len() >= 33 && listed.len() == keys.len());
        keys.sort_unstable();
        listed.sort_unstable();
        listed.dedup();
        assert_eq!(keys, listed, "every key once");
        let help = set_help();
        assert!(help.contains("pcp.high (pages), transparent_hugepage (always|madvise|never"));
        assert!(help.contains(
            "lock_stat (on|off), barrier (native|count|model), cost_profile \
             (native|apple-m2|ampere-altra), arm64.lazy_mmu_barrier_batching, arm64.tlbi_range, arm64.lpa2, arm64.linear_map (on|off), \
             arm64.linear_map_variant (base|no-cont-remap|no-alloc-remap|lazy-unmap|v6.10|v7.2), rodata (on|noalias|off), \
             kfence.sample_interval, arm64.split_mode (none|bbml2-noabort|break-before-make), boot.state (real|bare), arm64.kernel_image, debug_pagealloc, deferred_struct_page_init (on|off), tlb_entries, \
             vmap_allow_huge, vmalloc.contpte, vmalloc.pmd, vmalloc.huge_by_default, vmalloc.align_size_to_huge, \
             vmalloc.large_order_pages, vmalloc.free_pages_bulk \
             (on|off), hugepagesz"
        ));
        assert!(help.contains(
            "hugepagesz (<size>), hugepages (<count>), default_hugepagesz (<size>), hugetlb.gigantic, hugetlb.demote \
             (v6.11|v6.12), hugetlb_optimize_vmemmap (on|off), hugetlb_vmemmap.rcu (v6.10|v6.11|v6.12|v6.12-draft|2026), \
             hugetlb_vmemmap.arm64 (off|pause|unsafe). A switch shown as on|off takes 1, 0, y, n, yes, no, true, false, \
             on, off, as the kernel's kstrtobool(). With compare"
        ));
        let l = listing();
        assert_eq!(l.len(), keys.len());
        assert_eq!(
            l[3],
            "pcp.high (pages, 1..=1073741824 (instrumented: pins high_min = high_max)): instrumented: nr_pcp_high() patched to return a constant"
        );
        assert!(
            l.iter().any(
                |l| l == "lock_stat (1|0|y|n|yes|no|true|false|on|off): sysctl kernel.lock_stat (CONFIG_LOCK_STAT)"
            )
        );
    }

    /// A mistyped key: one short line with the closest key, never the
    /// listing of every key.
    #[test]
    fn mistyped_key_did_you_mean() {
        assert_eq!(set("pcp.rule=6.12").unwrap_err(), "unknown setting \"pcp.rule\"; did you mean pcp.rules?");
        assert_eq!(set("lcok_stat=1").unwrap_err(), "unknown setting \"lcok_stat\"; did you mean lock_stat?");
        assert_eq!(
            set("hugetlb_vmemmap.rc=v6.11").unwrap_err(),
            "unknown setting \"hugetlb_vmemmap.rc\"; did you mean hugetlb_vmemmap.rcu?"
        );
        assert_eq!(
            set("vmalloc.contptes=on").unwrap_err(),
            "unknown setting \"vmalloc.contptes\"; did you mean vmalloc.contpte?"
        );
        for kv in ["pcp.rule=6.12", "nope=1", "lock_stat", "vmalloc.contpte=maybe", "tlb_entries=x"] {
            let e = set(kv).unwrap_err();
            assert!(e.len() < 120 && !e.contains('\n'), "{kv}: one short line, got {e}");
        }
        assert_eq!(set("lock_stat").unwrap_err(), "--set expects key=value, got \"lock_stat\"");
    }

    /// A bad value: one short line naming the key and the values it takes.
    #[test]
    fn bad_value_names_key_and_values() {
        assert_eq!(
            set("vmalloc.contpte=maybe").unwrap_err(),
            "bad value \"maybe\" for vmalloc.contpte (1|0|y|n|yes|no|true|false|on|off)"
        );
        assert_eq!(
            set("tlb_entries=x").unwrap_err(),
            "bad value \"x\" for tlb_entries (1..=1048576): invalid digit found in string"
        );
        assert_eq!(
            set("pcp.rules=6.21").unwrap_err(),
            "bad value \"6.21\" for pcp.rules (7.2|6.12); did you mean 6.12?"
        );
        assert_eq!(
            configs("hugetlb_vmemmap.rcu=v6.9").unwrap_err(),
            "bad value \"v6.9\" for hugetlb_vmemmap.rcu (v6.10|v6.11|v6.12|v6.12-draft|2026)"
        );
        assert_eq!(
            set("percpu_pagelist_high_fraction=3").unwrap_err(),
            "percpu_pagelist_high_fraction must be 0 or at least 8, got 3"
        );
    }

    /// One spelling rule: every boolean knob of every table takes every
    /// word of kstrtobool's set, and refuses anything else.
    #[test]
    fn every_boolean_knob_takes_kstrtobool_words() {
        let bools: Vec<KnobDoc> = docs().filter(|d| d.values == BOOL_VALUES).collect();
        assert!(bools.len() >= 15, "{bools:?}");
        // HVO's sysctl exists where HVO is built: on arm64 with the RFC.
        let with =
            |kv: String| Configs::new(MachineConfig::default(), &["hugetlb_vmemmap.arm64=pause".to_string(), kv]);
        for d in &bools {
            for word in BOOL_VALUES.split('|') {
                assert!(with(format!("{}={word}", d.key)).is_ok(), "{}={word}", d.key);
            }
            assert!(with(format!("{}=maybe", d.key)).is_err(), "{}", d.key);
        }
        let e = configs("hugetlb_optimize_vmemmap=on").unwrap_err();
        assert!(e.contains("arm64 does not build HVO") && e.contains("hugetlb_vmemmap.arm64=pause"), "{e}");
        assert!(configs("hugetlb_optimize_vmemmap=off").is_ok(), "off says what the machine is");
        assert!(!set("arm64.lazy_mmu_barrier_batching=off").unwrap().0.lazy_mmu_barrier_batching);
        assert!(set("lock_stat=true").unwrap().0.lock_stat);
        assert!(!vset("vmalloc.contpte=n").unwrap().contpte);
        assert!(!configs("hugetlb_optimize_vmemmap=no").unwrap().hugetlb.hvo.hugetlb_optimize_vmemmap);
        // And a switch that is not boolean keeps its own words.
        assert!(set("rodata=on").is_ok() && set("rodata=yes").is_err());
    }

    /// No silent alias: `cost_profile=m2` is refused with the name it is
    /// probably short for.
    #[test]
    fn no_silent_aliases() {
        assert_eq!(
            set("cost_profile=m2").unwrap_err(),
            "bad value \"m2\" for cost_profile (native|apple-m2|ampere-altra); did you mean apple-m2?"
        );
        assert!(set("cost_profile=altra").is_err());
        assert!(set("cost_profile=default").is_err());
        assert_eq!(set("cost_profile=ampere-altra").unwrap().0.cost_profile.name, "ampere-altra");
    }

    /// A setting is parsed once: the parsed value applies to any base
    /// configuration without its text, and a `Setting` keeps its text.
    #[test]
    fn parsed_once_then_applied() {
        let sets = parse(&["tlb_entries=48".to_string(), "hugepages=3".to_string()]).unwrap();
        let a = Configs::from_settings(MachineConfig { nr_cpus: 3, ..Default::default() }, &sets).unwrap();
        let b = Configs::from_settings(MachineConfig::default(), &sets).unwrap();
        assert_eq!((a.machine.tlb_entries, a.machine.nr_cpus, b.machine.tlb_entries), (48, 3, 48));
        assert_eq!(a.hugetlb.resolved_hugepages(), [0, 3, 0, 0]);
        let s: Setting = " lock_stat = 1".parse().unwrap();
        assert_eq!((s.key(), s.as_str()), ("lock_stat", " lock_stat = 1"));
    }

    /// `--mem` errors carry the option once.
    #[test]
    fn mem_error_prefix_once() {
        let e = Configs::from_options("4GB", None, &[], 2).unwrap_err();
        assert_eq!(e, "--mem 4GB: invalid size \"4GB\": expected a number with an optional K/M/G/T suffix");
        let e = Configs::from_options("64M,4097@0x100000000", None, &[], 2).unwrap_err();
        assert!(e.starts_with("--mem 64M,4097@0x100000000: memory bank"), "{e}");
        assert_eq!(e.matches("--mem").count(), 1, "{e}");
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
        assert_eq!(with(&["cost_profile=apple-m2", "barrier=native"]), Ok(BarrierBackend::Native));
        assert_eq!(
            with(&["barrier=model"]),
            Ok(BarrierBackend::Model(mmlab_engine::arch::arm64::cost::CostProfile::native().barriers))
        );
        assert!(with(&["cost_profile=x86"]).unwrap_err().contains("(native|apple-m2|ampere-altra)"));
    }
}
