//! What `map_mem()` decides from: the `NO_*_MAPPINGS` flags, the code
//! version, `rodata=`, KFENCE and the CPU (module docs of the parent).

use crate::addr::PAGE_SIZE;
use crate::arch::arm64::fixmap::{FixmapLayout, NR_PTE_SLOTS_LAZY};

/// `NO_BLOCK_MAPPINGS`: no PUD or PMD blocks.
pub const NO_BLOCK_MAPPINGS: u32 = 1 << 0;
/// `NO_CONT_MAPPINGS`: no contiguous runs.
pub const NO_CONT_MAPPINGS: u32 = 1 << 1;
/// `NO_EXEC_MAPPINGS`: PXNTable in the table descriptors.
pub const NO_EXEC_MAPPINGS: u32 = 1 << 2;

/// Which version of the linear-map code runs: Linux 7.2's (the default),
/// or the history the "faster linear map creation" reproduction measures:
/// v6.9-rc1, each of the three patches of its v1 applied on top of the ones
/// before it, and the series as merged for 6.10.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinearMapVariant {
    /// Linux v6.9-rc1.
    Base,
    /// v1 1/3 "arm64: mm: Don't remap pgtables per-cont(pte|pmd) block".
    NoContRemap,
    /// v1 2/3 "arm64: mm: Don't remap pgtables for allocate vs populate".
    NoAllocRemap,
    /// v1 3/3 "arm64: mm: Lazily clear pte table mappings from fixmap".
    LazyUnmap,
    /// The series as merged for Linux 6.10 (v3: no-cont-remap, "Batch dsb
    /// and isb when populating pgtables", no-alloc-remap; no lazy-unmap).
    #[serde(rename = "v6.10")]
    V6_10,
    /// Linux 7.2: 6.10's walk, with `PMD_TABLE_AF` in table descriptors, no
    /// block over an existing table and no contiguous bit over a valid
    /// non-contiguous entry; `map_mem()` maps the KFENCE pool first, then
    /// the kernel's linear alias (`[_text, __init_begin)` and `[__init_end,
    /// __bss_stop)`) with the memory's flags, then every memory range (no
    /// NOMAP carve-out); `force_pte_mapping()` decides page granularity
    /// (BBML2_NOABORT CPUs keep blocks).
    #[default]
    #[serde(rename = "v7.2")]
    V7_2,
}

impl LinearMapVariant {
    /// Every variant: the v1 patches in the order they apply, the series as
    /// merged, then 7.2.
    pub const ALL: [LinearMapVariant; 6] =
        [Self::Base, Self::NoContRemap, Self::NoAllocRemap, Self::LazyUnmap, Self::V6_10, Self::V7_2];
    /// The variants "Speed up boot with faster linear map creation" measured
    /// (its cover letters' columns): all but 7.2.
    pub const SERIES: [LinearMapVariant; 5] =
        [Self::Base, Self::NoContRemap, Self::NoAllocRemap, Self::LazyUnmap, Self::V6_10];
    /// The variants' names, in [`ALL`](Self::ALL) order.
    pub const NAMES: [&'static str; 6] = ["base", "no-cont-remap", "no-alloc-remap", "lazy-unmap", "v6.10", "v7.2"];

    /// The variant's name.
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
    /// The fixmap layout of its kernel (16 PTE slots with lazy-unmap, KVM's
    /// `FIX_VNCR` slots in 7.2).
    pub const fn fixmap_layout(self) -> FixmapLayout {
        match self {
            Self::V7_2 => FixmapLayout::V7_2,
            Self::LazyUnmap => FixmapLayout { nr_pte_slots: NR_PTE_SLOTS_LAZY, vncr: false },
            _ => FixmapLayout { nr_pte_slots: 1, vncr: false },
        }
    }
    /// `early_pgtable_alloc()` zeroes a new table through `FIX_PTE` and
    /// clears the slot again (before no-alloc-remap).
    pub(super) const fn zeroes_through_fix_pte(self) -> bool {
        matches!(self, Self::Base | Self::NoContRemap)
    }
    /// `init_pte()` writes with `__set_pte_nosync()`; the fixmap clear that
    /// ends the table's population publishes them (6.10 on).
    pub(super) const fn batches_pte_barriers(self) -> bool {
        matches!(self, Self::V6_10 | Self::V7_2)
    }
    /// Table descriptors carry `PMD_TABLE_AF` (7.2).
    pub(super) const fn sets_table_af(self) -> bool {
        matches!(self, Self::V7_2)
    }
    /// A later, coarser mapping keeps what an earlier one left: no block
    /// over a table, no contiguous bit over a valid non-contiguous entry
    /// (7.2's `init_pmd()`, `alloc_init_pud()` and `*_range_has_valid_noncont()`).
    pub(super) const fn keeps_existing_leaves(self) -> bool {
        matches!(self, Self::V7_2)
    }
}

impl std::str::FromStr for LinearMapVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| format!("unknown linear-map variant {s:?} (known: {})", Self::NAMES.join(", ")))
    }
}

/// `rodata=` as Linux 7.2 parses it (arch/arm64 `arch_parse_debug_rodata()`):
/// `on`, the default, sets `rodata_full` too, so `can_set_direct_map()` holds
/// and, without BBML2_NOABORT, the linear map is page-granular; `noalias`
/// protects the image but leaves `rodata_full` clear (the linear map may
/// use blocks unless late KFENCE or debug_pagealloc forces pages); `off`
/// clears both (the image's text is mapped writable, `mark_rodata_ro()`
/// does not run). Before 6.15 the same three settings were spelled `full`,
/// `on` and `off`; 7.2 warns about `full` and keeps the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rodata {
    /// `rodata=on` (`rodata_enabled`, `rodata_full`).
    #[default]
    On,
    /// `rodata=noalias` (`rodata_enabled` only).
    NoAlias,
    /// `rodata=off`.
    Off,
}

impl Rodata {
    /// The values `rodata=` takes, as `--set` lists them.
    pub const NAMES: [(Rodata, &'static str); 3] =
        [(Rodata::On, "on"), (Rodata::NoAlias, "noalias"), (Rodata::Off, "off")];
    /// `rodata_full`.
    pub const fn full(self) -> bool {
        matches!(self, Rodata::On)
    }
    /// `rodata_enabled`.
    pub const fn enabled(self) -> bool {
        !matches!(self, Rodata::Off)
    }
    /// The `rodata=` spelling.
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize].1
    }
}

impl std::str::FromStr for Rodata {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(r, _)| *r)
            .ok_or_else(|| format!("unknown rodata setting {s:?} (on|noalias|off; 7.2's on is the former full)"))
    }
}

/// `KFENCE_POOL_SIZE`: `(CONFIG_KFENCE_NUM_OBJECTS + 1) * 2` pages, with
/// Debian's 255 objects: 2 MiB.
pub const KFENCE_POOL_SIZE: u64 = (255 + 1) * 2 * PAGE_SIZE;

/// What `map_mem()` decides from: the code version, the boot options and
/// the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapMemOptions {
    /// `arm64.linear_map_variant`.
    pub variant: LinearMapVariant,
    /// `rodata=`.
    pub rodata: Rodata,
    /// `debug_pagealloc=on`.
    pub debug_pagealloc: bool,
    /// `kfence.sample_interval=` in ms: nonzero allocates the KFENCE pool
    /// from memblock in `map_mem()` (`kfence_early_init`); 0 (Debian's
    /// `CONFIG_KFENCE_SAMPLE_INTERVAL`) leaves KFENCE to start late, which
    /// `can_set_direct_map()` answers with a page-granular linear map.
    pub kfence_sample_interval: u64,
    /// The CPUs have BBML2_NOABORT (`system_supports_bbml2_noabort()`).
    pub bbml2_noabort: bool,
}

impl MapMemOptions {
    /// `kfence_early_init`.
    pub const fn kfence_early_init(&self) -> bool {
        self.kfence_sample_interval != 0
    }
    /// Mirrors arch/arm64/mm/pageattr.c `can_set_direct_map()`:
    /// `rodata_full`, debug_pagealloc, or late KFENCE
    /// (`arm64_kfence_can_set_direct_map()`); mmlab has no realm.
    pub const fn can_set_direct_map(&self) -> bool {
        self.rodata.full() || self.debug_pagealloc || !self.kfence_early_init()
    }
    /// Mirrors arch/arm64/mm/mmu.c `force_pte_mapping()` (6.18+): page
    /// granularity unless every CPU has BBML2_NOABORT (then blocks are split
    /// on demand); always with debug_pagealloc. Before 7.2 (the series'
    /// variants), [`Self::can_set_direct_map`] alone decided.
    pub const fn force_pte_mapping(&self) -> bool {
        match self.variant {
            LinearMapVariant::V7_2 => self.debug_pagealloc || (!self.bbml2_noabort && self.can_set_direct_map()),
            _ => self.can_set_direct_map(),
        }
    }
    /// The linear-map flags `map_mem()` uses for memory: `NO_EXEC_MAPPINGS`,
    /// plus page granularity when [`Self::force_pte_mapping`].
    pub const fn map_mem_flags(&self) -> u32 {
        if self.force_pte_mapping() {
            NO_EXEC_MAPPINGS | NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS
        } else {
            NO_EXEC_MAPPINGS
        }
    }
}
