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
//!   runs after the memmap is placed (the [`Machine`] needs it), where the
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

use super::fixmap::{Fixmap, FixmapCounts, FixmapError, FixmapLayout, FixmapPage, NR_PTE_SLOTS_LAZY, fix_to_virt};
use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::{BarrierCounts, BarrierKind, ishst};
use crate::arch::arm64::memory::{PAGE_END, PAGE_OFFSET, PHYS_OFFSET};
use crate::arch::arm64::pgtable::desc::bits::{PMD_TYPE_TABLE, TABLE_PXN, TABLE_UXN};
use crate::arch::arm64::pgtable::desc::{
    CONT_PMD_SIZE, CONT_PTE_SIZE, DescKind, PAGE_KERNEL, PMD_SIZE, PUD_SIZE, PgProt,
};
use crate::arch::arm64::pgtable::{
    Desc, Level, PgtableError, entry_pa, set_pgd, set_pmd, set_pte, set_pte_nosync, set_pud,
};
use crate::arch::arm64::tlb::{TlbiCounts, TlbiKind};
use crate::counters::CounterSet;
use crate::kernel::cpu::Cpu;
use crate::machine::Machine;
use crate::mm::memblock::MemblockError;
use crate::mm::page::{PageExt, pg};

/// `NO_BLOCK_MAPPINGS`: no PUD or PMD blocks.
pub const NO_BLOCK_MAPPINGS: u32 = 1 << 0;
/// `NO_CONT_MAPPINGS`: no contiguous runs.
pub const NO_CONT_MAPPINGS: u32 = 1 << 1;
/// `NO_EXEC_MAPPINGS`: PXNTable in the table descriptors.
pub const NO_EXEC_MAPPINGS: u32 = 1 << 2;

/// Which version of the linear-map code runs: v6.9-rc1, or one of the three
/// patches of "Speed up boot with faster linear map creation" (v1), each
/// applied on top of the ones before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinearMapVariant {
    /// Linux v6.9-rc1.
    #[default]
    Base,
    /// v1 1/3 "arm64: mm: Don't remap pgtables per-cont(pte|pmd) block".
    NoContRemap,
    /// v1 2/3 "arm64: mm: Don't remap pgtables for allocate vs populate".
    NoAllocRemap,
    /// v1 3/3 "arm64: mm: Lazily clear pte table mappings from fixmap".
    LazyUnmap,
    /// The series as merged for Linux 6.10 (v3: no-cont-remap, "Batch dsb
    /// and isb when populating pgtables", no-alloc-remap; no lazy-unmap),
    /// which is still mainline's code for this path (checked in 6.12 and
    /// a 6.18 stable tree) on CPUs without BBML2_NOABORT.
    #[serde(rename = "v6.10")]
    V6_10,
}

impl LinearMapVariant {
    /// Every variant: the v1 patches in the order they apply, then the
    /// series as merged.
    pub const ALL: [LinearMapVariant; 5] =
        [Self::Base, Self::NoContRemap, Self::NoAllocRemap, Self::LazyUnmap, Self::V6_10];
    /// The variants' names, in [`ALL`](Self::ALL) order.
    pub const NAMES: [&'static str; 5] = ["base", "no-cont-remap", "no-alloc-remap", "lazy-unmap", "v6.10"];

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
    /// ends the table's population publishes them (6.10).
    const fn batches_pte_barriers(self) -> bool {
        matches!(self, Self::V6_10)
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

/// `rodata=`: `full` (the default, `CONFIG_RODATA_FULL_DEFAULT_ENABLED`)
/// also makes the linear map page-granular; `on` and `off` leave it with
/// blocks (they differ only for the kernel image, which mmlab does not map).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rodata {
    /// `rodata=full`.
    #[default]
    Full,
    /// `rodata=on`.
    On,
    /// `rodata=off`.
    Off,
}

impl std::str::FromStr for Rodata {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Rodata::Full),
            "on" => Ok(Rodata::On),
            "off" => Ok(Rodata::Off),
            _ => Err(format!("unknown rodata setting {s:?} (full|on|off)")),
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
    /// The regions mapped, `[start, end)` physical (memory banks, less the
    /// kernel's text and rodata when the image is in RAM).
    pub regions: Vec<(u64, u64)>,
    /// The linear alias of the kernel's `[_stext, __init_begin)`, mapped
    /// after the regions with `NO_CONT_MAPPINGS` only (`arm64.kernel_image=1`).
    pub kernel_alias: Option<(u64, u64)>,
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

/// One `__create_pgd_mapping()` with the state the variants keep: the
/// lazy-unmap patch's next free PTE slot (`pte_slot_next`).
struct Walker<'a, 'm> {
    cpu: &'a Cpu<'m>,
    fixmap: &'a mut Fixmap,
    variant: LinearMapVariant,
    layout: FixmapLayout,
    pte_slot_next: usize,
    counts: LinearMapCounts,
}

impl<'a, 'm> Walker<'a, 'm> {
    fn new(cpu: &'a Cpu<'m>, fixmap: &'a mut Fixmap, variant: LinearMapVariant) -> Self {
        let layout = fixmap.layout();
        Walker { cpu, fixmap, variant, layout, pte_slot_next: layout.fix_pte_begin(), counts: Default::default() }
    }

    /// `clear_pte_fixmap_slots()` (lazy-unmap): clear every PTE slot used
    /// since the last batch without a TLBI each, then flush them with one
    /// `flush_tlb_kernel_range()`; start again at `FIX_PTE_BEGIN`.
    fn clear_pte_fixmap_slots(&mut self) -> Result<(), LinearMapError> {
        let begin = self.layout.fix_pte_begin();
        let (start, end) = (fix_to_virt(begin), fix_to_virt(self.pte_slot_next));
        for idx in (self.pte_slot_next + 1..=begin).rev() {
            self.fixmap.clear_fixmap_nosync(self.cpu, idx)?;
        }
        super::fixmap::flush_tlb_kernel_range_v6_9(self.cpu, start, end);
        self.pte_slot_next = begin;
        Ok(())
    }

    /// `pte_fixmap_slot()` (lazy-unmap): the next PTE slot, flushing the
    /// batch first when all 16 are in use.
    fn pte_fixmap_slot(&mut self) -> Result<usize, LinearMapError> {
        if self.pte_slot_next < self.layout.fix_pte_end() {
            self.clear_pte_fixmap_slots()?;
        }
        let slot = self.pte_slot_next;
        self.pte_slot_next -= 1;
        Ok(slot)
    }

    /// The slot a table of `level` is mapped in.
    fn slot(&mut self, level: Level) -> Result<usize, LinearMapError> {
        Ok(match level {
            Level::Pte if self.variant == LinearMapVariant::LazyUnmap => self.pte_fixmap_slot()?,
            Level::Pte => self.layout.fix_pte_begin(),
            Level::Pmd => self.layout.fix_pmd(),
            Level::Pud => self.layout.fix_pud(),
            Level::Pgd => self.layout.fix_pgd(),
        })
    }

    /// `p?d_set_fixmap()` / `early_pgtable_map()`: map the table at `pa`.
    fn map(&mut self, level: Level, pa: PhysAddr) -> Result<FixmapPage, LinearMapError> {
        let slot = self.slot(level)?;
        Ok(self.fixmap.set_fixmap(self.cpu, slot, pa)?)
    }

    /// `p?d_clear_fixmap()` / `early_pgtable_unmap()`; a no-op for PTE
    /// tables with lazy-unmap (their slots are cleared in batches).
    fn unmap(&mut self, level: Level, page: FixmapPage) -> Result<(), LinearMapError> {
        if level == Level::Pte && self.variant == LinearMapVariant::LazyUnmap {
            return Ok(());
        }
        Ok(self.fixmap.clear_fixmap(self.cpu, page.idx)?)
    }

    /// `early_pgtable_alloc()`: a page from memblock for a table of `level`
    /// (`memblock_phys_alloc_range(PAGE_SIZE, PAGE_SIZE, 0,
    /// MEMBLOCK_ALLOC_NOLEAKTRACE)`), zeroed. Up to no-cont-remap it is
    /// zeroed through `FIX_PTE` and unmapped again (None); from
    /// no-alloc-remap on it is zeroed in its own level's slot, published
    /// with `dsb ishst` and handed back still mapped.
    fn pgtable_alloc(&mut self, level: Level) -> Result<(PhysAddr, Option<FixmapPage>), LinearMapError> {
        let m = self.cpu.machine();
        let pa = m.memblock().alloc(PAGE_SIZE, PAGE_SIZE, "pgtable").map_err(LinearMapError::Memblock)?;
        let p = m.page(pa.pfn());
        p.set_flag(pg::PG_RESERVED);
        p.set_ext(PageExt::Reserved);
        match level {
            Level::Pud => self.counts.pgtable_pud += 1,
            Level::Pmd => self.counts.pgtable_pmd += 1,
            _ => self.counts.pgtable_pte += 1,
        }
        if self.variant.zeroes_through_fix_pte() {
            let fix_pte = self.layout.fix_pte_begin();
            let page = self.fixmap.set_fixmap(self.cpu, fix_pte, pa)?;
            m.arena().zero(page.pa, PAGE_SIZE);
            // The clear's barriers also publish the zeroes to the walker.
            self.fixmap.clear_fixmap(self.cpu, fix_pte)?;
            Ok((pa, None))
        } else {
            let page = self.map(level, pa)?;
            m.arena().zero(page.pa, PAGE_SIZE);
            self.cpu.dsb(ishst);
            Ok((pa, Some(page)))
        }
    }

    /// The table below `entry` (a `level` entry): the existing one, or a
    /// new one allocated and installed with `set_p?d` (`__p?d_populate`).
    fn table_below(
        &mut self,
        entry: PhysAddr,
        level: Level,
        flags: u32,
    ) -> Result<(PhysAddr, Option<FixmapPage>), LinearMapError> {
        let m = self.cpu.machine();
        let d = m.read_desc(entry);
        match d.kind(level) {
            DescKind::Table => Ok((PhysAddr(d.addr()), None)),
            DescKind::Invalid => {
                let next = level.next().unwrap_or(Level::Pte);
                let (pa, mapped) = self.pgtable_alloc(next)?;
                let pxn = if flags & NO_EXEC_MAPPINGS != 0 { TABLE_PXN } else { 0 };
                let t = Desc::table(pa.0, PMD_TYPE_TABLE | TABLE_UXN | pxn);
                match level {
                    Level::Pgd => set_pgd(self.cpu, entry, t)?,
                    Level::Pud => set_pud(self.cpu, entry, t)?,
                    _ => set_pmd(self.cpu, entry, t)?,
                }
                Ok((pa, mapped))
            }
            _ => Err(LinearMapError::NotATable { entry, desc: d }),
        }
    }

    /// Mirrors `init_pte()`: one `__set_pte()` per page, with its barriers.
    fn init_pte(
        &mut self,
        t: &FixmapPage,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
    ) -> Result<(), LinearMapError> {
        let nosync = self.variant.batches_pte_barriers();
        loop {
            let (entry, pte) = (t.entry(Level::Pte.index(addr)), Desc::page(phys, prot));
            if nosync {
                set_pte_nosync(self.cpu, entry, pte)?
            } else {
                set_pte(self.cpu, entry, pte)?
            }
            self.counts.pte_leaves += 1;
            self.counts.cont_leaves += u64::from(prot.is_cont());
            phys += PAGE_SIZE;
            addr += PAGE_SIZE;
            if addr == end {
                return Ok(());
            }
        }
    }

    /// Mirrors `alloc_init_cont_pte()`: the PTE table under the PMD entry
    /// `pmd`, then per 64 KiB chunk the contiguous bit if allowed and
    /// `init_pte()`.
    fn alloc_init_cont_pte(
        &mut self,
        pmd: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(pmd, Level::Pmd, flags)?;
        let per_chunk = self.variant == LinearMapVariant::Base;
        let mut table = match (per_chunk, mapped) {
            (false, Some(t)) => Some(t),
            (false, None) => Some(self.map(Level::Pte, pa)?),
            (true, _) => None,
        };
        loop {
            let next = addr_end(addr, end, CONT_PTE_SIZE);
            let cont = (addr | next | phys) & (CONT_PTE_SIZE - 1) == 0 && flags & NO_CONT_MAPPINGS == 0;
            let p = if cont { prot.mkcont() } else { prot };
            if per_chunk {
                let t = self.map(Level::Pte, pa)?;
                self.init_pte(&t, addr, next, phys, p)?;
                self.unmap(Level::Pte, t)?;
            } else if let Some(t) = table.as_ref() {
                let t = *t;
                self.init_pte(&t, addr, next, phys, p)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        if let Some(t) = table.take() {
            self.unmap(Level::Pte, t)?;
        }
        Ok(())
    }

    /// Mirrors `init_pmd()`: per 2 MiB a block (`pmd_set_huge`) if aligned
    /// and allowed, else `alloc_init_cont_pte()`.
    fn init_pmd(
        &mut self,
        t: &FixmapPage,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        loop {
            let next = addr_end(addr, end, PMD_SIZE);
            let entry = t.entry(Level::Pmd.index(addr));
            if (addr | next | phys) & (PMD_SIZE - 1) == 0 && flags & NO_BLOCK_MAPPINGS == 0 {
                set_pmd(self.cpu, entry, Desc::block(phys, prot))?;
                self.counts.pmd_blocks += 1;
                self.counts.cont_leaves += u64::from(prot.is_cont());
            } else {
                self.alloc_init_cont_pte(entry, addr, next, phys, prot, flags)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                return Ok(());
            }
        }
    }

    /// Mirrors `alloc_init_cont_pmd()`: the PMD table under the PUD entry
    /// `pud`, then per 32 MiB chunk the contiguous bit if allowed and
    /// `init_pmd()`; the base kernel maps `FIX_PMD` per chunk.
    fn alloc_init_cont_pmd(
        &mut self,
        pud: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(pud, Level::Pud, flags)?;
        let per_chunk = self.variant == LinearMapVariant::Base;
        let table = match (per_chunk, mapped) {
            (false, Some(t)) => Some(t),
            (false, None) => Some(self.map(Level::Pmd, pa)?),
            (true, _) => None,
        };
        loop {
            let next = addr_end(addr, end, CONT_PMD_SIZE);
            let cont = (addr | next | phys) & (CONT_PMD_SIZE - 1) == 0 && flags & NO_CONT_MAPPINGS == 0;
            let p = if cont { prot.mkcont() } else { prot };
            match table {
                Some(t) => self.init_pmd(&t, addr, next, phys, p, flags)?,
                None => {
                    let t = self.map(Level::Pmd, pa)?;
                    self.init_pmd(&t, addr, next, phys, p, flags)?;
                    self.unmap(Level::Pmd, t)?;
                }
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        if let Some(t) = table {
            self.unmap(Level::Pmd, t)?;
        }
        Ok(())
    }

    /// Mirrors `alloc_init_pud()` (reached through the folded
    /// `alloc_init_p4d()`): the PUD table under the PGD entry `pgd`, mapped
    /// in `FIX_PUD` once, then per 1 GiB a block (`pud_set_huge`) if aligned
    /// and allowed, else `alloc_init_cont_pmd()`.
    fn alloc_init_pud(
        &mut self,
        pgd: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(pgd, Level::Pgd, flags)?;
        let t = match mapped {
            Some(t) => t,
            None => self.map(Level::Pud, pa)?,
        };
        loop {
            let next = addr_end(addr, end, PUD_SIZE);
            let entry = t.entry(Level::Pud.index(addr));
            if (addr | next | phys) & (PUD_SIZE - 1) == 0 && flags & NO_BLOCK_MAPPINGS == 0 {
                set_pud(self.cpu, entry, Desc::block(phys, prot))?;
                self.counts.pud_blocks += 1;
            } else {
                self.alloc_init_cont_pmd(entry, addr, next, phys, prot, flags)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        self.unmap(Level::Pud, t)
    }

    /// Mirrors `__create_pgd_mapping_locked()`: per PGD entry
    /// `alloc_init_p4d()` → `alloc_init_pud()`; with lazy-unmap, the
    /// `cleanup` op (`clear_pte_fixmap_slots()`) at the end.
    fn create_pgd_mapping(
        &mut self,
        phys: u64,
        virt: u64,
        size: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let pgdir = self.cpu.machine().kernel_as().pgd();
        let (mut addr, end, mut phys) = (virt, virt + size, phys);
        loop {
            let next = addr_end(addr, end, Level::Pgd.entry_size());
            self.alloc_init_pud(entry_pa(pgdir, Level::Pgd.index(addr)), addr, next, phys, prot, flags)?;
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        if self.variant == LinearMapVariant::LazyUnmap {
            self.clear_pte_fixmap_slots()?;
        }
        Ok(())
    }
}

/// Mirrors arch/arm64/mm/pageattr.c `can_set_direct_map()`: `rodata_full`
/// or `debug_pagealloc_enabled()` (mmlab has no KFENCE and no realm).
pub const fn can_set_direct_map(rodata: Rodata, debug_pagealloc: bool) -> bool {
    matches!(rodata, Rodata::Full) || debug_pagealloc
}

/// The linear-map flags `map_mem()` uses for memory: `NO_EXEC_MAPPINGS`,
/// plus page granularity when [`can_set_direct_map`].
pub const fn map_mem_flags(rodata: Rodata, debug_pagealloc: bool) -> u32 {
    if can_set_direct_map(rodata, debug_pagealloc) {
        NO_EXEC_MAPPINGS | NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS
    } else {
        NO_EXEC_MAPPINGS
    }
}

/// Mirrors arch/arm64/mm/mmu.c `map_mem()` (v6.9-rc1 or a variant): map
/// every memblock memory region at `PAGE_OFFSET` with `PAGE_KERNEL`
/// (`__map_memblock()` → `__create_pgd_mapping()`), under the caller's
/// `fixmap_lock` (the `&mut Fixmap`). Returns what the phase did.
///
/// # Errors
///
/// A [`LinearMapError`] where the kernel would panic or BUG: no memblock
/// page for a table, a region outside the linear map, a live entry that
/// cannot change.
pub fn map_mem(
    cpu: &Cpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    rodata: Rodata,
) -> Result<LinearMapReport, LinearMapError> {
    let m = cpu.machine();
    let flags = map_mem_flags(rodata, m.config().debug_pagealloc);
    let kernel_alias = m.kernel_image().map(|k| (k.stext(), k.init_begin()));
    // memblock_mark_nomap(kernel_start, ...): for_each_mem_range() skips it.
    let mut regions: Vec<(u64, u64)> = Vec::new();
    for r in m.memblock().memory() {
        let (s, e) = (r.base.0, r.end());
        match kernel_alias {
            Some((ks, ke)) if ks < e && s < ke => {
                regions.extend([(s, ks.max(s)), (ke.min(e), e)].into_iter().filter(|(a, b)| a < b));
            }
            _ => regions.push((s, e)),
        }
    }
    let (t0, b0, f0) = (m.tlbi_counts(), m.barrier_counts(), fixmap.counts());
    let start = std::time::Instant::now();
    let mut w = Walker::new(cpu, fixmap, variant);
    for &(s, e) in &regions {
        if s < PHYS_OFFSET || e <= s || e - PHYS_OFFSET > PAGE_END - PAGE_OFFSET {
            return Err(LinearMapError::OutOfRange { start: s, end: e });
        }
        w.create_pgd_mapping(s, phys_to_virt(s), e - s, PAGE_KERNEL, flags)?;
    }
    if let Some((ks, ke)) = kernel_alias {
        // The alias of [_stext, __init_begin): non-executable leaves,
        // blocks allowed, no contiguous runs, no PXNTable.
        w.create_pgd_mapping(ks, phys_to_virt(ks), ke - ks, PAGE_KERNEL, NO_CONT_MAPPINGS)?;
    }
    let host_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut counts = w.counts;
    let (tlbi, barriers) = (m.tlbi_counts().delta(&t0), m.barrier_counts().delta(&b0));
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
    Ok(LinearMapReport { variant, rodata, flags, regions, kernel_alias, counts, tlbi, barriers, host_ns })
}

/// Mirrors the linear-map part of arch/arm64/mm/mmu.c `paging_init()` (with
/// `early_fixmap_init()` from `setup_arch()` before it): set up the
/// fixmap, then `map_mem(swapper_pg_dir)`. Called from boot when the
/// machine's `arm64.linear_map` knob is on.
pub(crate) fn paging_init(cpu: &Cpu<'_>) -> Result<(Fixmap, LinearMapReport), LinearMapError> {
    let cfg = cpu.machine().config();
    let (variant, rodata) = (cfg.linear_map_variant, cfg.rodata);
    let mut fixmap = Fixmap::early_fixmap_init(cpu, variant.fixmap_layout())?;
    let report = map_mem(cpu, &mut fixmap, variant, rodata)?;
    Ok((fixmap, report))
}

impl Machine {
    /// What `map_mem()` did at boot, if the linear map was built
    /// (`arm64.linear_map=1`).
    pub fn linear_map_report(&self) -> Option<&LinearMapReport> {
        self.linear_map.as_ref()
    }
}
