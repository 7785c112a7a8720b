//! Types shared by every layer of the page allocator: orders, migratetypes,
//! zones and nodes, with the kernel's names and numbers (include/linux/mmzone.h).

use std::fmt;

/// `MAX_PAGE_ORDER`: the largest buddy block is 2^10 pages (4 MiB).
pub const MAX_PAGE_ORDER: u32 = 10;
/// `NR_PAGE_ORDERS`: entries of `zone->free_area[]`.
pub const NR_PAGE_ORDERS: usize = MAX_PAGE_ORDER as usize + 1;
/// `PAGE_ALLOC_COSTLY_ORDER`.
pub const PAGE_ALLOC_COSTLY_ORDER: u32 = 3;
/// `HPAGE_PMD_ORDER` with 4 KiB pages (2 MiB).
pub const HPAGE_PMD_ORDER: u32 = 9;
/// `pageblock_order`: min(HPAGE_PMD_ORDER, MAX_PAGE_ORDER).
pub const PAGEBLOCK_ORDER: u32 = 9;
/// `pageblock_nr_pages`.
pub const PAGEBLOCK_NR_PAGES: u64 = 1 << PAGEBLOCK_ORDER;

/// `enum migratetype`. ISOLATE is read from its own pageblock bit
/// (`PB_migrate_isolate`, Linux 6.16); see `mmlab_buddy::isolation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Migratetype {
    /// `MIGRATE_UNMOVABLE`: kernel allocations that cannot move.
    Unmovable = 0,
    /// `MIGRATE_MOVABLE`: user and page-cache pages that migration can move.
    Movable = 1,
    /// `MIGRATE_RECLAIMABLE`: slab caches that shrinkers can free.
    Reclaimable = 2,
    /// `MIGRATE_HIGHATOMIC`: the reserve for high-order atomic allocations.
    HighAtomic = 3,
    /// `MIGRATE_CMA`: pageblocks of a CMA area; only movable allocations
    /// (`ALLOC_CMA`) take them, and nothing falls back into them.
    Cma = 4,
    /// `MIGRATE_ISOLATE`: pageblocks isolated for migration or offlining;
    /// nothing is allocated from them and frees bypass the pcp.
    Isolate = 5,
}

/// `MIGRATE_PCPTYPES`: the types that have pcp lists.
pub const MIGRATE_PCPTYPES: usize = 3;
/// `MIGRATE_TYPES` (with CONFIG_CMA and CONFIG_MEMORY_ISOLATION, as
/// Debian's arm64 config builds it).
pub const MIGRATE_TYPES: usize = 6;

impl Migratetype {
    /// All types in index order.
    pub const ALL: [Migratetype; MIGRATE_TYPES] = [
        Migratetype::Unmovable,
        Migratetype::Movable,
        Migratetype::Reclaimable,
        Migratetype::HighAtomic,
        Migratetype::Cma,
        Migratetype::Isolate,
    ];
    /// The numeric value the kernel prints in tracepoints.
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }
    /// Inverse of [`Migratetype::index`]; values out of range map to Movable,
    /// as pageblock flags with unknown bits would be treated.
    #[inline]
    pub const fn from_index(i: usize) -> Migratetype {
        const T: [Migratetype; 8] = [
            Migratetype::Unmovable,
            Migratetype::Movable,
            Migratetype::Reclaimable,
            Migratetype::HighAtomic,
            Migratetype::Cma,
            Migratetype::Isolate,
            Migratetype::Movable,
            Migratetype::Movable,
        ];
        if i < 8 { T[i] } else { Migratetype::Movable }
    }
    /// `migratetype_names[]`.
    pub const fn name(self) -> &'static str {
        match self {
            Migratetype::Unmovable => "Unmovable",
            Migratetype::Movable => "Movable",
            Migratetype::Reclaimable => "Reclaimable",
            Migratetype::HighAtomic => "HighAtomic",
            Migratetype::Cma => "CMA",
            Migratetype::Isolate => "Isolate",
        }
    }
    /// `is_migrate_cma()`.
    #[inline]
    pub const fn is_cma(self) -> bool {
        matches!(self, Migratetype::Cma)
    }
    /// `is_migrate_isolate()`.
    #[inline]
    pub const fn is_isolate(self) -> bool {
        matches!(self, Migratetype::Isolate)
    }
    /// `is_migrate_highatomic()`.
    #[inline]
    pub const fn is_highatomic(self) -> bool {
        matches!(self, Migratetype::HighAtomic)
    }
    /// `migratetype_is_mergeable()`: below `MIGRATE_PCPTYPES`.
    #[inline]
    pub const fn is_mergeable(self) -> bool {
        (self as usize) < MIGRATE_PCPTYPES
    }
}

impl fmt::Display for Migratetype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `enum zone_type` (arm64 with ZONE_DMA and ZONE_DMA32 built). Which zones
/// are populated follows from the machine's RAM (`zone_sizes_init`): DMA up
/// to the 32-bit limit, DMA32 empty on the virt machine, Normal above 4 GiB,
/// Movable empty (no `movablecore=`). ZONE_DEVICE is not modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[repr(u8)]
pub enum ZoneType {
    /// `ZONE_DMA`: RAM below `arm64_dma_phys_limit`.
    Dma = 0,
    /// `ZONE_DMA32`: present but empty on arm64 when DMA reaches 4 GiB.
    Dma32 = 1,
    /// `ZONE_NORMAL`: RAM above the 32-bit limit.
    Normal = 2,
    /// `ZONE_MOVABLE`: empty (no `kernelcore=`/`movablecore=`).
    Movable = 3,
}

impl ZoneType {
    /// Every zone type, in `enum zone_type` order (the index is `zone_idx()`).
    pub const ALL: [ZoneType; 4] = [ZoneType::Dma, ZoneType::Dma32, ZoneType::Normal, ZoneType::Movable];
    /// The name /proc files print.
    pub const fn name(self) -> &'static str {
        match self {
            ZoneType::Dma => "DMA",
            ZoneType::Dma32 => "DMA32",
            ZoneType::Normal => "Normal",
            ZoneType::Movable => "Movable",
        }
    }
}

/// A NUMA node id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeId(pub u32);
