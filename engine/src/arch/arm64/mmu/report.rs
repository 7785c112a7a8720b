//! What one `map_mem()` did and why it could fail (module docs of the
//! parent).

use super::options::{LinearMapVariant, Rodata};
use crate::addr::PhysAddr;
use crate::arch::arm64::barrier::BarrierCounts;
use crate::arch::arm64::fixmap::FixmapError;
use crate::arch::arm64::pgtable::{Desc, Level, PgtableError};
use crate::arch::arm64::tlb::TlbiCounts;
use crate::mm::memblock::MemblockError;

crate::counter_snapshot! {
    /// What `map_mem()` did (mmlab's own, instrumented; the breakdown of
    /// the series' cover letter and its testers).
    pub struct LinearMapCounts {
        /// P4D tables allocated from memblock (five levels only).
        pub pgtable_p4d: u64,
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
        self.pgtable_p4d + self.pgtable_pud + self.pgtable_pmd + self.pgtable_pte
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
