//! The linear map built at boot (arch/arm64/mm/mmu.c `paging_init()` →
//! `map_mem()` → `__create_pgd_mapping()`), as in Linux v6.9-rc1 and with
//! each of the three patches of Ryan Roberts' "Speed up boot with faster
//! linear map creation" (v1, March 2024) applied in turn.
//!
//! # The algorithm
//!
//! `map_mem()` maps every memblock memory region at `PAGE_OFFSET + (pa -
//! PHYS_OFFSET)` in `swapper_pg_dir` with `PAGE_KERNEL` and the flags
//! `NO_EXEC_MAPPINGS` (table descriptors get PXNTable) plus, when
//! `can_set_direct_map()` (`rodata=full`, the default),
//! `NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS`: the whole linear map is then
//! made of 4 KiB PTEs, so that permissions can later change page by page.
//! With `rodata=on` or `rodata=off` PUD and PMD blocks and contiguous runs
//! are used wherever VA, PA and size are aligned.
//!
//! The walk goes down level by level. `__create_pgd_mapping_locked()`
//! steps over PGD entries (p4d is folded, so `alloc_init_p4d()` only passes
//! through); `alloc_init_pud()` allocates a PUD table if the PGD entry is
//! empty, maps the PUD table into `FIX_PUD`, and for each 1 GiB either
//! writes a block or calls `alloc_init_cont_pmd()`; that allocates a PMD
//! table if needed and, per 32 MiB (a contiguous-PMD run), calls
//! `init_pmd()`, which per 2 MiB writes a block or calls
//! `alloc_init_cont_pte()`; that allocates a PTE table if needed and, per
//! 64 KiB (a contiguous-PTE run), calls `init_pte()` to write the PTEs.
//! Tables are not reachable through the linear map while it is being
//! built, so every table is written through its level's fixmap slot, and
//! every `clear_fixmap` of a slot costs a TLBI and a completion wait (see
//! [`super::fixmap`]). Where the variants differ:
//!
//! | variant | table allocation (`early_pgtable_alloc`) | populating a PMD or PTE table |
//! |---|---|---|
//! | `base` (v6.9-rc1) | memblock page, zeroed through `FIX_PTE` (map, memset, clear: 1 TLBI) | mapped and cleared per 32 MiB / 64 KiB chunk: 32 TLBIs per full table |
//! | `no-cont-remap` (v1 1/3) | as base | mapped once per `alloc_init_cont_*` call: 1 TLBI |
//! | `no-alloc-remap` (v1 2/3) | mapped in its own level's slot, zeroed, `dsb ishst`, left mapped for the populate step | mapped only if it already existed; one clear: 1 TLBI per table |
//! | `lazy-unmap` (v1 3/3) | as no-alloc-remap, but a PTE table takes the next of 16 `FIX_PTE` slots | PTE slots are cleared 16 at a time with `clear_fixmap_nosync` and one `flush_tlb_kernel_range` over 16 pages (16 TLBIs, one `dsb ish`), and once more at the end of each `__create_pgd_mapping` |
//!
//! | `v6.10` (v3 as merged) | as no-alloc-remap | as no-alloc-remap, and `init_pte()` writes with `__set_pte_nosync()`: no barrier pair per PTE; the fixmap clear that ends the table publishes it |
//!
//! `v6.10` is what mainline still does on this path (checked in the 6.12
//! source and a 6.18 stable tree: only `PMD_TABLE_AF` in the table
//! descriptors was added), except that since 6.18 a system whose CPUs all
//! have BBML2_NOABORT keeps blocks with `rodata=full`
//! (`force_pte_mapping()`) and splits them on demand
//! ([`super::pageattr`]); Ampere Altra (Neoverse N1) has no BBML2, so its
//! linear map stays page-granular.
//!
//! Every leaf is written with `__set_pte()` / `set_pmd()` / `set_pud()`,
//! each followed by `dsb ishst; isb` (the barrier batching of the series'
//! v2 is not part of v1). Table descriptors are written with `set_p4d()`
//! (straight into `swapper_pg_dir`, which is still writable this early:
//! `set_swapper_pgd()` skips the fixmap while `rodata_is_rw`, so `FIX_PGD`
//! is not used; checked in 6.12), `set_pud()` and `set_pmd()`. Every
//! `clear_fixmap()` is `flush_tlb_kernel_range()` of one page, which in
//! these kernels is a loop of `tlbi vaale1is`, one per page, between `dsb
//! ishst` and `dsb ish; isb` (checked in 6.12's `asm/tlbflush.h`; range
//! TLBIs for kernel ranges came later), and `flush_tlb_all()` above
//! `MAX_DVM_OPS` pages.
//!
//! # Fidelity
//!
//! - *Faithful*: the walk, the order of table allocation, fixmap map and
//!   unmap, the entries and table descriptors written, and every barrier
//!   and TLBI of all four variants, for 4 KiB pages, 48-bit VA, 4 levels.
//! - *Simplified*: the kernel image is in RAM only with
//!   `arm64.kernel_image=1` ([`super::kimage`]): then `[_stext,
//!   __init_begin)` is left out of the regions and mapped after them as the
//!   kernel alias with `NO_CONT_MAPPINGS`; KFENCE is not configured, so no
//!   early pool is mapped; the
//!   kernel's BUGs (a live entry that cannot change) are errors. `map_mem()`
//!   runs after the memmap is placed (the [`crate::Machine`] needs it), where the
//!   kernel runs it before `sparse_init()`: the tables land at other
//!   addresses, their number and the operations are the same.
//! - *Instrumented*: [`LinearMapCounts`], the per-phase counts a tester of
//!   the series asked for.
//!
//! # Opt-in
//!
//! The linear map is built only with the machine knob `arm64.linear_map=1`
//! (`mmlab boot` turns it on unless told otherwise). It stays off by
//! default because turning it on changes every page count of every boot
//! (a 256 MiB machine loses 133 pages to its tables, so managed pages,
//! watermarks, pcp high_max, buddyinfo and every pfn in a trace move) and
//! the hand-derived numbers of 38 tests across the engine, harness and
//! integration tests; it also adds about 0.4 s to a 4 GiB boot in a debug
//! build. Making it the default is a later change with those tests.

mod create;

use super::fixmap::{Fixmap, FixmapCounts, FixmapError, FixmapLayout, NR_PTE_SLOTS_LAZY};
use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::{BarrierCounts, BarrierKind};
use crate::arch::arm64::cpu::{ArchCpu, EarlyAlloc};
use crate::arch::arm64::kimage::KernelImage;
use crate::arch::arm64::memory::{PAGE_END, PAGE_OFFSET, PHYS_OFFSET};
use crate::arch::arm64::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_RO, PgProt};
use crate::arch::arm64::pgtable::{Desc, Level, PgtableError};
use crate::arch::arm64::tlb::{TlbiCounts, TlbiKind};
use crate::counters::CounterSet;
use crate::mm::memblock::MemblockError;
use create::Walker;

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
    /// The fixmap layout it needs (16 PTE slots with lazy-unmap).
    pub const fn fixmap_layout(self) -> FixmapLayout {
        FixmapLayout { nr_pte_slots: if matches!(self, Self::LazyUnmap) { NR_PTE_SLOTS_LAZY } else { 1 } }
    }
    /// `early_pgtable_alloc()` zeroes a new table through `FIX_PTE` and
    /// clears the slot again (before no-alloc-remap).
    const fn zeroes_through_fix_pte(self) -> bool {
        matches!(self, Self::Base | Self::NoContRemap)
    }
    /// `init_pte()` writes with `__set_pte_nosync()`; the fixmap clear that
    /// ends the table's population publishes them (6.10 on).
    const fn batches_pte_barriers(self) -> bool {
        matches!(self, Self::V6_10 | Self::V7_2)
    }
    /// Table descriptors carry `PMD_TABLE_AF` (7.2).
    const fn sets_table_af(self) -> bool {
        matches!(self, Self::V7_2)
    }
    /// A later, coarser mapping keeps what an earlier one left: no block
    /// over a table, no contiguous bit over a valid non-contiguous entry
    /// (7.2's `init_pmd()`, `alloc_init_pud()` and `*_range_has_valid_noncont()`).
    const fn keeps_existing_leaves(self) -> bool {
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
        match self {
            Rodata::On => "on",
            Rodata::NoAlias => "noalias",
            Rodata::Off => "off",
        }
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

crate::counter_snapshot! {
    /// What `map_mem()` did (mmlab's own, instrumented; the breakdown of
    /// the series' cover letter and its testers).
    pub struct LinearMapCounts {
        /// PUD tables allocated from memblock.
        pub pgtable_pud: u64,
        /// PMD tables allocated.
        pub pgtable_pmd: u64,
        /// PTE tables allocated.
        pub pgtable_pte: u64,
        /// `set_fixmap` of a PTE-table slot (zeroing included).
        pub fixmap_map_pte: u64,
        /// `set_fixmap` of `FIX_PMD`.
        pub fixmap_map_pmd: u64,
        /// `set_fixmap` of `FIX_PUD`.
        pub fixmap_map_pud: u64,
        /// Clears of a PTE-table slot (with or without their own TLBI).
        pub fixmap_unmap_pte: u64,
        /// Clears of `FIX_PMD`.
        pub fixmap_unmap_pmd: u64,
        /// Clears of `FIX_PUD`.
        pub fixmap_unmap_pud: u64,
        /// Of the clears, `clear_fixmap_nosync` ones (lazy-unmap).
        pub fixmap_unmap_nosync: u64,
        /// `tlbi vaale1is` issued.
        pub tlbi_vaale1is: u64,
        /// TLBIs of every kind issued.
        pub tlbi_total: u64,
        /// `dsb ishst` issued.
        pub dsb_ishst: u64,
        /// `dsb ish` issued (each a wait for TLBI completion).
        pub dsb_ish: u64,
        /// `isb` issued.
        pub isb: u64,
        /// 4 KiB leaf PTEs written.
        pub pte_leaves: u64,
        /// PMD blocks written.
        pub pmd_blocks: u64,
        /// PUD blocks written.
        pub pud_blocks: u64,
        /// Leaves written with the contiguous bit.
        pub cont_leaves: u64,
    }
}

impl LinearMapCounts {
    /// All fixmap maps.
    pub fn fixmap_maps(&self) -> u64 {
        self.fixmap_map_pte + self.fixmap_map_pmd + self.fixmap_map_pud
    }
    /// All fixmap clears.
    pub fn fixmap_unmaps(&self) -> u64 {
        self.fixmap_unmap_pte + self.fixmap_unmap_pmd + self.fixmap_unmap_pud
    }
    /// Table pages of every level.
    pub fn pgtables(&self) -> u64 {
        self.pgtable_pud + self.pgtable_pmd + self.pgtable_pte
    }
}

/// The record of one `map_mem()`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinearMapReport {
    /// The variant that ran.
    pub variant: LinearMapVariant,
    /// `rodata=`.
    pub rodata: Rodata,
    /// The `NO_*_MAPPINGS` flags of the memory regions.
    pub flags: u32,
    /// The memory regions mapped, `[start, end)` physical (before 7.2: less
    /// the kernel's text and rodata when the image is in RAM).
    pub regions: Vec<(u64, u64)>,
    /// The kernel image's linear alias, mapped on its own: before 7.2
    /// `[_stext, __init_begin)` after the regions with `NO_CONT_MAPPINGS`
    /// only; in 7.2 `[_text, __init_begin)` and `[__init_end, __bss_stop)`
    /// before them, with the memory's flags. Empty without the image.
    pub kernel_alias: Vec<(u64, u64)>,
    /// The KFENCE pool (`kfence.sample_interval` nonzero, 7.2), mapped
    /// first at page granularity.
    pub kfence_pool: Option<(u64, u64)>,
    /// Counts of the phase.
    pub counts: LinearMapCounts,
    /// TLBIs by kind during the phase.
    pub tlbi: TlbiCounts,
    /// Barriers during the phase.
    pub barriers: BarrierCounts,
    /// Measured host time of the phase, in ns (not deterministic).
    pub host_ns: u64,
}

/// Why the linear map could not be built (the kernel panics or BUGs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinearMapError {
    /// `early_pgtable_alloc()` found no page ("Failed to allocate page table page").
    Memblock(MemblockError),
    /// A fixmap operation failed.
    Fixmap(FixmapError),
    /// A table write was refused.
    Pgtable(PgtableError),
    /// A live entry of the wrong kind where the walk needs a table (the
    /// kernel's `BUG_ON(pmd_sect(pmd))` and friends).
    NotATable {
        /// The entry.
        entry: PhysAddr,
        /// What it holds.
        desc: Desc,
    },
    /// A table is missing where the walk has no allocator
    /// (`update_mapping_prot()`: the kernel's `BUG_ON(!pgtable_alloc)`).
    NoTableAllocator {
        /// The level of the table that would be needed.
        level: Level,
    },
    /// A memory region the linear map cannot cover.
    OutOfRange {
        /// First byte of the region.
        start: u64,
        /// One past its end.
        end: u64,
    },
}

impl std::fmt::Display for LinearMapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinearMapError::Memblock(e) => write!(f, "map_mem: failed to allocate page table page: {e}"),
            LinearMapError::Fixmap(e) => write!(f, "map_mem: {e}"),
            LinearMapError::Pgtable(e) => write!(f, "map_mem: {e}"),
            LinearMapError::NotATable { entry, desc } => {
                write!(f, "map_mem: entry at {entry} holds {:#018x} where a table belongs", desc.0)
            }
            LinearMapError::NoTableAllocator { level } => {
                write!(f, "update_mapping_prot: no {level:?} table where the mapping should already be")
            }
            LinearMapError::OutOfRange { start, end } => {
                write!(f, "map_mem: memory {start:#x}..{end:#x} is outside the linear map")
            }
        }
    }
}
impl std::error::Error for LinearMapError {}
impl From<FixmapError> for LinearMapError {
    fn from(e: FixmapError) -> Self {
        LinearMapError::Fixmap(e)
    }
}
impl From<PgtableError> for LinearMapError {
    fn from(e: PgtableError) -> Self {
        LinearMapError::Pgtable(e)
    }
}

/// `__phys_to_virt()` for the linear map.
#[inline]
pub const fn phys_to_virt(pa: u64) -> u64 {
    (pa - PHYS_OFFSET) | PAGE_OFFSET
}

/// `p?d_addr_end()`: the next `size` boundary after `addr`, or `end`.
#[inline]
const fn addr_end(addr: u64, end: u64, size: u64) -> u64 {
    let boundary = (addr.wrapping_add(size)) & !(size - 1);
    if boundary.wrapping_sub(1) < end.wrapping_sub(1) { boundary } else { end }
}

/// Mirrors arch/arm64/mm/mmu.c `map_mem()` (in the version `opts.variant`
/// names), under the caller's `fixmap_lock` (the `&mut Fixmap`): every
/// memblock memory region at `PAGE_OFFSET` with `PAGE_KERNEL`
/// (`__map_memblock()` → `__create_pgd_mapping()`), with the kernel image's
/// alias handled as that version does (module docs). Returns what the phase
/// did.
///
/// # Errors
///
/// A [`LinearMapError`] where the kernel would panic or BUG: no memblock
/// page for a table, a region outside the linear map, a live entry that
/// cannot change.
pub fn map_mem(
    cpu: &ArchCpu<'_>,
    early: &dyn EarlyAlloc,
    fixmap: &mut Fixmap,
    opts: &MapMemOptions,
    image: Option<&KernelImage>,
) -> Result<LinearMapReport, LinearMapError> {
    let flags = opts.map_mem_flags();
    let v7_2 = opts.variant == LinearMapVariant::V7_2;
    let (t0, b0, f0) = (cpu.system_tlbi_counts(), cpu.system_barrier_counts(), fixmap.counts());
    let start = std::time::Instant::now();
    let mut regions: Vec<(u64, u64)> = Vec::new();
    let mut kernel_alias: Vec<(u64, u64)> = Vec::new();
    let mut kfence_pool = None;
    let mut w = Walker::new(cpu, Some(early), fixmap, opts.variant);
    let map = |w: &mut Walker<'_, '_>, (s, e): (u64, u64), flags: u32| {
        if s < PHYS_OFFSET || e <= s || e - PHYS_OFFSET > PAGE_END - PAGE_OFFSET {
            return Err(LinearMapError::OutOfRange { start: s, end: e });
        }
        w.create_pgd_mapping(s, phys_to_virt(s), e - s, PAGE_KERNEL, flags)
    };
    if v7_2 {
        // arm64_kfence_map_pool(): memblock_phys_alloc(), then pages only.
        if opts.kfence_early_init() {
            let pa = early.alloc(KFENCE_POOL_SIZE, PAGE_SIZE, "kfence").map_err(LinearMapError::Memblock)?;
            let pool = (pa.0, pa.0 + KFENCE_POOL_SIZE);
            map(&mut w, pool, NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS | NO_EXEC_MAPPINGS)?;
            kfence_pool = Some(pool);
        }
        if let Some(k) = image {
            kernel_alias = vec![(k.phys, k.init_begin()), (k.init_end(), k.bss_stop())];
            for &a in &kernel_alias {
                map(&mut w, a, flags)?;
            }
        }
        regions = early.memory();
        for &r in &regions {
            map(&mut w, r, flags)?;
        }
    } else {
        // memblock_mark_nomap(kernel_start, ...): for_each_mem_range() skips it.
        let alias = image.map(|k| (k.stext(), k.init_begin()));
        for (s, e) in early.memory() {
            match alias {
                Some((ks, ke)) if ks < e && s < ke => {
                    regions.extend([(s, ks.max(s)), (ke.min(e), e)].into_iter().filter(|(a, b)| a < b));
                }
                _ => regions.push((s, e)),
            }
        }
        for &r in &regions {
            map(&mut w, r, flags)?;
        }
        if let Some(a) = alias {
            // The alias of [_stext, __init_begin): non-executable leaves,
            // blocks allowed, no contiguous runs, no PXNTable.
            map(&mut w, a, NO_CONT_MAPPINGS)?;
            kernel_alias.push(a);
        }
    }
    let host_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut counts = w.counts;
    let (tlbi, barriers) = (cpu.system_tlbi_counts().delta(&t0), cpu.system_barrier_counts().delta(&b0));
    let fx: FixmapCounts = fixmap.counts().delta(&f0);
    counts.fixmap_map_pte = fx.map_pte;
    counts.fixmap_map_pmd = fx.map_pmd;
    counts.fixmap_map_pud = fx.map_pud;
    counts.fixmap_unmap_pte = fx.unmap_pte;
    counts.fixmap_unmap_pmd = fx.unmap_pmd;
    counts.fixmap_unmap_pud = fx.unmap_pud;
    counts.fixmap_unmap_nosync = fx.unmap_nosync;
    counts.tlbi_vaale1is = tlbi.get(TlbiKind::Vaale1is);
    counts.tlbi_total = tlbi.total();
    counts.dsb_ishst = barriers.get(BarrierKind::Dsb, "ishst").unwrap_or(0);
    counts.dsb_ish = barriers.get(BarrierKind::Dsb, "ish").unwrap_or(0);
    counts.isb = barriers.get(BarrierKind::Isb, "").unwrap_or(0);
    Ok(LinearMapReport {
        variant: opts.variant,
        rodata: opts.rodata,
        flags,
        regions,
        kernel_alias,
        kfence_pool,
        counts,
        tlbi,
        barriers,
        host_ns,
    })
}

/// Mirrors the linear-map part of arch/arm64/mm/mmu.c `paging_init()` (with
/// `early_fixmap_init()` from `setup_arch()` before it): set up the
/// fixmap, its static tables from `statics` (the image's `.pgtbl`, or
/// memblock on a machine without the image), then `map_mem()`. Called from
/// boot when the machine's `arm64.linear_map` knob is on (the default).
///
/// # Errors
///
/// As [`map_mem`], and a fixmap that cannot be set up.
pub fn paging_init(
    cpu: &ArchCpu<'_>,
    early: &dyn EarlyAlloc,
    statics: &dyn EarlyAlloc,
    opts: &MapMemOptions,
    image: Option<&KernelImage>,
) -> Result<(Fixmap, LinearMapReport), LinearMapError> {
    let mut fixmap = Fixmap::early_fixmap_init(cpu, statics, opts.variant.fixmap_layout())?;
    let report = map_mem(cpu, early, &mut fixmap, opts, image)?;
    Ok((fixmap, report))
}

/// How many table pages `map_mem()` will take from memblock for `memory`
/// when it maps page by page ([`MapMemOptions::force_pte_mapping`]): one
/// PTE table per 2 MiB, one PMD table per 1 GiB and one PUD table per
/// 512 GiB of linear-map address touched. `None` when blocks are allowed
/// (the count then depends on alignment, the alias and the KFENCE pool).
pub fn map_mem_table_pages(opts: &MapMemOptions, memory: &[(u64, u64)]) -> Option<u64> {
    if !opts.force_pte_mapping() {
        return None;
    }
    let mut total = 0;
    for shift in [Level::Pmd.shift(), Level::Pud.shift(), Level::Pgd.shift()] {
        let mut blocks: Vec<u64> = Vec::new();
        for &(s, e) in memory {
            let (first, last) = ((s - PHYS_OFFSET) >> shift, (e - 1 - PHYS_OFFSET) >> shift);
            blocks.extend(first..=last);
        }
        blocks.sort_unstable();
        blocks.dedup();
        total += blocks.len() as u64;
    }
    Some(total)
}

/// Mirrors arch/arm64/mm/mmu.c `update_mapping_prot()`: walk the kernel's
/// existing tables for `[virt, virt + size)` (no table allocator: every
/// table must exist) writing `prot`, which may differ from what is there
/// only in permission bits, then `flush_tlb_kernel_range()` the range.
///
/// # Errors
///
/// [`LinearMapError::NoTableAllocator`] where a table is missing, or a
/// change that is not a permission change ([`LinearMapError::Pgtable`]).
pub fn update_mapping_prot(
    cpu: &ArchCpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    phys: u64,
    virt: u64,
    size: u64,
    prot: PgProt,
) -> Result<(), LinearMapError> {
    // Before 7.2 the walk refused contiguous runs here; 7.2 allows them
    // where no valid non-contiguous entry is (the walker's check).
    let flags = if variant == LinearMapVariant::V7_2 { 0 } else { NO_CONT_MAPPINGS };
    let mut w = Walker::new(cpu, None, fixmap, variant);
    w.create_pgd_mapping(phys, virt, size, prot, flags)?;
    crate::arch::arm64::tlb::flush::flush_tlb_kernel_range(cpu, virt, virt + size);
    Ok(())
}

/// Mirrors arch/arm64/mm/mmu.c `mark_linear_text_alias_ro()` (from
/// `smp_cpus_done()`): the linear alias of `[_text, __init_begin)` loses
/// its write permission.
///
/// # Errors
///
/// As [`update_mapping_prot`].
pub fn mark_linear_text_alias_ro(
    cpu: &ArchCpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    k: &KernelImage,
) -> Result<(), LinearMapError> {
    let (s, e) = if variant == LinearMapVariant::V7_2 { (k.phys, k.init_begin()) } else { (k.stext(), k.init_begin()) };
    update_mapping_prot(cpu, fixmap, variant, s, phys_to_virt(s), e - s, PAGE_KERNEL_RO)
}

/// Mirrors arch/arm64/mm/mmu.c `mark_rodata_ro()` (from `mark_readonly()`
/// when `rodata_enabled`): the image's `[__start_rodata, __init_begin)`
/// read-only at `KIMAGE_VADDR`; in 7.2 also `[_text, _stext)` there and the
/// linear alias of `[__init_end, __bss_stop)`.
///
/// # Errors
///
/// As [`update_mapping_prot`].
pub fn mark_rodata_ro(
    cpu: &ArchCpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    k: &KernelImage,
) -> Result<(), LinearMapError> {
    let rodata = k.stext() + k.text;
    update_mapping_prot(cpu, fixmap, variant, rodata, k.va(rodata), k.init_begin() - rodata, PAGE_KERNEL_RO)?;
    if variant != LinearMapVariant::V7_2 {
        return Ok(());
    }
    update_mapping_prot(cpu, fixmap, variant, k.phys, k.va(k.phys), k.head, PAGE_KERNEL_RO)?;
    update_mapping_prot(
        cpu,
        fixmap,
        variant,
        k.init_end(),
        phys_to_virt(k.init_end()),
        k.bss_stop() - k.init_end(),
        PAGE_KERNEL_RO,
    )
}
