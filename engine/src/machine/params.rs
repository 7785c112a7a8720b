//! The machine's `--set` keys.
//!
//! The kernel takes its machine-wide switches on the command line
//! (`kernel/params.c` parses `key=value` boot parameters for `early_param`
//! and `__setup` handlers) or as sysctls. mmlab's machine has a few of each
//! kind and some of its own: the barrier backend and the cost profile say
//! how architectural effects execute and what they cost, and the TLB
//! model's size is a property of the emulated CPU. [`MachineConfig::KNOBS`]
//! lists them in one [`KnobTable`], with
//! the values each takes, its kernel name and a setter that checks the
//! value before anything boots; the harness's `--set` help and its errors
//! come from it, as the allocator crates' keys come from theirs.

use crate::arch::arm64::barrier::BarrierBackend;
use crate::arch::arm64::cost::CostProfile;
use crate::arch::arm64::mmu::Rodata;
use crate::bool_knob;
use crate::kernel::sysctl::{KernelName, Knob, KnobError, KnobTable, Parsed, ValueError, parse_from_str, parse_named};
use crate::machine::MachineConfig;

/// The largest TLB model `tlb_entries` takes.
const MAX_TLB_ENTRIES: usize = 1 << 20;

impl MachineConfig {
    /// The `--set` keys of the machine, in the order the command's help
    /// lists them.
    pub const KNOBS: KnobTable<MachineConfig> = KnobTable(&[
        bool_knob!(MachineConfig, "lock_stat", KernelName::Sysctl("kernel.lock_stat (CONFIG_LOCK_STAT)"), lock_stat),
        Knob {
            key: "barrier",
            values: "native|count|model",
            summary: "native|count|model",
            kernel: KernelName::Instrumented("how dmb/dsb/isb execute: the instruction, a count, or a modelled cost"),
            parser: |key, value| {
                Ok(Parsed::new(parse_from_str::<BarrierBackend>(key, value)?, |c: &mut MachineConfig, b| {
                    c.barrier_backend = b;
                }))
            },
        },
        Knob {
            key: "cost_profile",
            values: "native|apple-m2|ampere-altra",
            summary: "native|apple-m2|ampere-altra",
            kernel: KernelName::Instrumented("the modelled costs of TLBIs, their completion and grace periods"),
            parser: parse_cost_profile,
        },
        bool_knob!(
            MachineConfig,
            "arm64.lazy_mmu_barrier_batching",
            KernelName::Code("arm64 lazy-MMU mode deferring the PTE barriers (Linux 6.16)"),
            lazy_mmu_barrier_batching
        ),
        bool_knob!(
            MachineConfig,
            "arm64.tlbi_range",
            KernelName::Code(
                "arm64 system_supports_tlb_range(): FEAT_TLBIRANGE (default: the cost profile's CPU; Altra/native 0, M2 1)",
            ),
            |c, v| c.tlbi_range = Some(v)
        ),
        bool_knob!(
            MachineConfig,
            "arm64.lpa2",
            KernelName::Code(
                "arm64 FEAT_LPA2 (qemu -cpu max): vabits_actual 52, five levels of tables, no SH bits in descriptors \
                 (default: the cost profile's CPU, 0 for all three)",
            ),
            |c, v| c.lpa2 = Some(v)
        ),
        bool_knob!(
            MachineConfig,
            "arm64.linear_map",
            KernelName::Code(
                "arm64 paging_init() -> map_mem(): the linear map built through the fixmap (default 1; 0 leaves PAGE_OFFSET \
                 unmapped)"
            ),
            linear_map
        ),
        Knob {
            key: "arm64.linear_map_variant",
            values: "base|no-cont-remap|no-alloc-remap|lazy-unmap|v6.10|v7.2",
            summary: "base|no-cont-remap|no-alloc-remap|lazy-unmap|v6.10|v7.2",
            kernel: KernelName::Code(
                "map_mem() and map_kernel() of v6.9-rc1, \"Speed up boot with faster linear map creation\" v1 1/3..3/3, \
                 the series as merged for 6.10, or 7.2 (the default)",
            ),
            parser: |key, value| {
                Ok(Parsed::new(parse_from_str(key, value)?, |c: &mut MachineConfig, v| c.linear_map_variant = v))
            },
        },
        Knob {
            key: "rodata",
            values: "on|noalias|off",
            summary: "on|noalias|off",
            kernel: KernelName::BootParam(
                "rodata= as 7.2 parses it (on, the default: the former full, a page-granular linear map; noalias: \
                 blocks allowed)",
            ),
            parser: |key, value| {
                Ok(Parsed::new(parse_named(key, value, &Rodata::NAMES)?, |c: &mut MachineConfig, v| c.rodata = v))
            },
        },
        Knob {
            key: "kfence.sample_interval",
            values: "0..=4294967295",
            summary: "",
            kernel: KernelName::BootParam(
                "kfence.sample_interval= in ms (Debian: 0, KFENCE starts late; nonzero: map_mem() maps a 2 MiB pool \
                 page by page)",
            ),
            parser: |key, value| {
                let v: u32 = value.parse().map_err(|e| KnobError::bad_value(key, value, ValueError::NotInt(e)))?;
                Ok(Parsed::new(u64::from(v), |c: &mut MachineConfig, v| c.kfence_sample_interval = v))
            },
        },
        Knob {
            key: "arm64.split_mode",
            values: "none|bbml2-noabort|break-before-make",
            summary: "none|bbml2-noabort|break-before-make",
            kernel: KernelName::Code(
                "set_memory_*() on a linear-map block: refused (no BBML2_NOABORT), split_kernel_leaf_mapping() (6.18+, \
                 BBML2_NOABORT CPUs; blocks with rodata=on) or mmlab's break-before-make split (default: the cost \
                 profile's CPU, none for all three)",
            ),
            parser: |key, value| {
                Ok(Parsed::new(parse_from_str(key, value)?, |c: &mut MachineConfig, v| c.split_mode = Some(v)))
            },
        },
        Knob {
            key: "boot.state",
            values: "real|bare",
            summary: "real|bare",
            kernel: KernelName::Code(
                "the state a real boot leaves: kernel image, initrd, DTB, CMA and swiotlb in memblock, the image's \
                 vmalloc areas (default real; bare: none)",
            ),
            parser: |key, value| {
                Ok(Parsed::new(parse_from_str(key, value)?, |c: &mut MachineConfig, v| c.boot_state = v))
            },
        },
        bool_knob!(
            MachineConfig,
            "arm64.kernel_image",
            KernelName::Code(
                "the kernel image in RAM at 0x40200000 (Debian 7.2's sizes), reserved and carved out of map_mem() \
                 (default: with boot.state=real)",
            ),
            |c, v| c.kernel_image = Some(v)
        ),
        bool_knob!(
            MachineConfig,
            "debug_pagealloc",
            KernelName::BootParam("debug_pagealloc=on (can_set_direct_map(): a page-granular linear map)"),
            debug_pagealloc
        ),
        bool_knob!(
            MachineConfig,
            "deferred_struct_page_init",
            KernelName::Code(
                "CONFIG_DEFERRED_STRUCT_PAGE_INIT: struct pages past the first section initialised later (here: at first touch)",
            ),
            deferred_struct_page_init
        ),
        Knob {
            key: "tlb_entries",
            values: "1..=1048576",
            summary: "",
            kernel: KernelName::Instrumented("the entries of each CPU's TLB model"),
            parser: parse_tlb_entries,
        },
    ]);
}

/// `cost_profile=`: a profile by its name in [`CostProfile::NAMES`], as
/// listed (the engine's other names for them, `m2`, `altra`, are not
/// taken: a value means one thing).
fn parse_cost_profile(key: &'static str, value: &str) -> Result<Parsed<MachineConfig>, KnobError> {
    let names = CostProfile::NAMES.map(|n| (n, n));
    let name = parse_named(key, value, &names)?;
    let profile = CostProfile::by_name(name)
        .ok_or_else(|| KnobError::bad_value(key, value, ValueError::NotOneOf { suggestion: None }))?;
    Ok(Parsed::new(profile, |c: &mut MachineConfig, p| c.cost_profile = p))
}

/// `tlb_entries=`: 1 to 2^20 entries.
fn parse_tlb_entries(key: &'static str, value: &str) -> Result<Parsed<MachineConfig>, KnobError> {
    let v: usize = value.parse().map_err(|e| KnobError::bad_value(key, value, ValueError::NotInt(e)))?;
    if !(1..=MAX_TLB_ENTRIES).contains(&v) {
        return Err(KnobError::bad_value(key, value, ValueError::OutOfRange));
    }
    Ok(Parsed::new(v, |c: &mut MachineConfig, v| c.tlb_entries = v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(kv: &str) -> Result<MachineConfig, String> {
        let mut c = MachineConfig::default();
        MachineConfig::KNOBS.apply(&mut c, kv).map(|()| c).map_err(|e| e.to_string())
    }

    #[test]
    fn keys_values_and_messages() {
        assert!(set("lock_stat=1").unwrap().lock_stat);
        assert!(set("lock_stat=yes").unwrap().lock_stat);
        assert!(!set("lock_stat=false").unwrap().lock_stat);
        assert_eq!(
            set("lock_stat=maybe").unwrap_err(),
            "bad value \"maybe\" for lock_stat (1|0|y|n|yes|no|true|false|on|off)"
        );
        assert_eq!(set("barrier=count").unwrap().barrier_backend, BarrierBackend::Count);
        assert_eq!(set("barrier=fast").unwrap_err(), "bad value \"fast\" for barrier (native|count|model)");
        assert_eq!(set("cost_profile=apple-m2").unwrap().cost_profile.name, "apple-m2");
        // No aliases: `m2` is refused, with the name it is probably short for.
        assert_eq!(
            set("cost_profile=m2").unwrap_err(),
            "bad value \"m2\" for cost_profile (native|apple-m2|ampere-altra); did you mean apple-m2?"
        );
        assert_eq!(
            set("cost_profile=x86").unwrap_err(),
            "bad value \"x86\" for cost_profile (native|apple-m2|ampere-altra)"
        );
        assert!(!set("arm64.lazy_mmu_barrier_batching=off").unwrap().lazy_mmu_barrier_batching);
        assert!(set("arm64.lazy_mmu_barrier_batching=on").unwrap().lazy_mmu_barrier_batching);
        assert!(!set("arm64.lazy_mmu_barrier_batching=0").unwrap().lazy_mmu_barrier_batching);
        assert!(!set("arm64.tlbi_range=0").unwrap().tlbi_range());
        // The profile decides unless the switch is set, in either order.
        assert!(!set("cost_profile=ampere-altra").unwrap().tlbi_range());
        assert!(set("cost_profile=apple-m2").unwrap().tlbi_range());
        assert!(!MachineConfig::default().tlbi_range());
        assert_eq!(MachineConfig::default().va_layout(), crate::arch::arm64::memory::VaLayout::VA48);
        assert_eq!(set("arm64.lpa2=1").unwrap().va_layout(), crate::arch::arm64::memory::VaLayout::VA52);
        let mut c = MachineConfig::default();
        MachineConfig::KNOBS.apply(&mut c, "arm64.tlbi_range=1").unwrap();
        MachineConfig::KNOBS.apply(&mut c, "cost_profile=ampere-altra").unwrap();
        assert!(c.tlbi_range());
        assert_eq!(set("tlb_entries=48").unwrap().tlb_entries, 48);
        assert!(set("arm64.linear_map=1").unwrap().linear_map);
        assert!(MachineConfig::default().linear_map, "every arm64 kernel builds the linear map");
        assert!(!set("arm64.linear_map=0").unwrap().linear_map);
        assert_eq!(
            set("arm64.linear_map_variant=lazy-unmap").unwrap().linear_map_variant,
            crate::arch::arm64::mmu::LinearMapVariant::LazyUnmap
        );
        assert_eq!(
            set("arm64.linear_map_variant=fast").unwrap_err(),
            "bad value \"fast\" for arm64.linear_map_variant (base|no-cont-remap|no-alloc-remap|lazy-unmap|v6.10|v7.2)"
        );
        assert_eq!(set("rodata=off").unwrap().rodata, Rodata::Off);
        assert_eq!(set("rodata=noalias").unwrap().rodata, Rodata::NoAlias);
        assert_eq!(MachineConfig::default().rodata, Rodata::On);
        assert_eq!(
            set("rodata=no").unwrap_err(),
            "bad value \"no\" for rodata (on|noalias|off); did you mean noalias?"
        );
        // 7.2 has no rodata=full (its on is the former full).
        assert_eq!(set("rodata=full").unwrap_err(), "bad value \"full\" for rodata (on|noalias|off)");
        assert_eq!(set("kfence.sample_interval=100").unwrap().kfence_sample_interval, 100);
        use crate::arch::arm64::pageattr::SplitMode;
        assert_eq!(MachineConfig::default().split_mode(), SplitMode::None);
        let bbml2 = set("arm64.split_mode=bbml2-noabort").unwrap();
        assert_eq!(bbml2.split_mode(), SplitMode::Bbml2NoAbort);
        assert!(bbml2.map_mem_options().bbml2_noabort, "blocks allowed with rodata=on");
        assert_eq!(set("arm64.split_mode=break-before-make").unwrap().split_mode(), SplitMode::BreakBeforeMake);
        assert!(!set("arm64.split_mode=break-before-make").unwrap().map_mem_options().bbml2_noabort);
        assert!(set("arm64.split_mode=bbml2").is_err());
        assert_eq!(MachineConfig::default().kfence_sample_interval, 0);
        assert!(set("kfence.sample_interval=-1").is_err());
        assert_eq!(
            set("tlb_entries=x").unwrap_err(),
            "bad value \"x\" for tlb_entries (1..=1048576): invalid digit found in string"
        );
        assert_eq!(set("tlb_entries=0").unwrap_err(), "bad value \"0\" for tlb_entries (1..=1048576)");
        assert_eq!(set("tlb_entries=1048577").unwrap_err(), "bad value \"1048577\" for tlb_entries (1..=1048576)");
    }
}
