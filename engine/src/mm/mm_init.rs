//! Boot: building and initialising a [`Machine`] (mm/mm_init.c and the
//! arm64 `setup_arch()` steps before it), apart from the run-time code in
//! [`crate::machine`].
//!
//! [`Machine::boot`] does what arm64's `setup_arch()` / `bootmem_init()` and
//! mm_init's early steps do for the page allocator's benefit:
//!
//! 1. map the arena (RAM at [`PHYS_OFFSET`]) and register it with memblock;
//! 2. allocate the memmap (64 bytes per frame) and the pageblock flags from
//!    memblock, top-down, as sparse_init/vmemmap_populate and
//!    `setup_usemap()` do;
//! 3. initialise every struct page (`memmap_init_range()` →
//!    `__init_single_page()`: zone and node in `flags`, refcount 1, no page
//!    type, an empty `lru`), mark every pageblock MOVABLE, and mark reserved
//!    frames PG_reserved (`reserve_bootmem_region()`);
//! 4. with `arm64.linear_map=1` only, `paging_init()`: `early_fixmap_init()`
//!    and `map_mem()` build the linear map ([`crate::arch::arm64::mmu`]);
//! 5. map the memmap at the vmemmap (`vmemmap_populate()`).
//!
//! Handing the unreserved frames to the buddy allocator
//! (`memblock_free_all()`) is left to the allocator crate, which owns the
//! zone: it calls [`Machine::memblock`] and [`crate::memblock::Memblock::for_each_free_block`].
//!
//! Faithful: memmap contents and layout, memblock's top-down placement, the
//! order of initialisation. Simplified: one node, one zone (Normal), one
//! contiguous memmap (the vmemmap mapping of it arrives with the page tables).

use crate::addr::{PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr};
use crate::arena::{Arena, ArenaError};
use crate::cpu::CpuData;
use crate::layout::PHYS_OFFSET;
use crate::machine::{MAX_MEM, Machine, MachineConfig, NR_CPUS};
use crate::memblock::{Memblock, MemblockError};
use crate::mm::{Migratetype, PAGEBLOCK_ORDER, ZoneType};
use crate::page::{
    LRU_OFFSET, Memmap, NODES_PGSHIFT, PAGE_TYPE_NONE, PageExt, STRUCT_PAGE_SIZE, StructPage, ZONES_PGSHIFT, pg,
};
use crate::sync::Mutex;
use crate::trace::TraceClock;
use crossbeam::utils::CachePadded;
use std::sync::atomic::Ordering::Relaxed;

/// Why a machine could not be built.
#[derive(Debug)]
pub enum BootError {
    /// A configuration value out of range (the message says which).
    Config(String),
    /// Mapping the memmap at the vmemmap failed.
    Pgtable(crate::pgtable::PgtableError),
    /// The host refused the RAM mapping.
    Arena(ArenaError),
    /// memblock could not place the memmap, the usemap or a table.
    Memblock(MemblockError),
    /// `map_mem()` could not build the linear map (`arm64.linear_map=1`).
    LinearMap(crate::arch::arm64::mmu::LinearMapError),
}

impl std::fmt::Display for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootError::Config(s) => write!(f, "bad machine configuration: {s}"),
            BootError::Arena(e) => e.fmt(f),
            BootError::Memblock(e) => e.fmt(f),
            BootError::Pgtable(e) => write!(f, "building the vmemmap: {e}"),
            BootError::LinearMap(e) => write!(f, "building the linear map: {e}"),
        }
    }
}
impl std::error::Error for BootError {}
impl From<MemblockError> for BootError {
    fn from(e: MemblockError) -> Self {
        BootError::Memblock(e)
    }
}

impl Machine {
    /// Build and boot a machine (see the module documentation).
    ///
    /// # Errors
    ///
    /// [`BootError::Config`] for a memory size that is not a multiple of 2 MiB in 16 MiB..=1 TiB or
    /// a CPU count outside 1..=`NR_CPUS`; [`BootError::Arena`] if the host refuses the RAM mapping;
    /// [`BootError::Memblock`] or [`BootError::Pgtable`] if the memmap, the usemap or the vmemmap
    /// tables cannot be placed.
    pub fn boot(config: MachineConfig) -> Result<Machine, BootError> {
        let mem = config.mem_bytes;
        if !(16 << 20..=MAX_MEM).contains(&mem) || !mem.is_multiple_of(2 << 20) {
            return Err(BootError::Config(format!("mem must be a multiple of 2M between 16M and 1T, got {mem:#x}")));
        }
        if config.nr_cpus == 0 || config.nr_cpus > NR_CPUS {
            return Err(BootError::Config(format!("cpus must be between 1 and {NR_CPUS}, got {}", config.nr_cpus)));
        }
        let arena = Arena::new(PhysAddr(PHYS_OFFSET), mem).map_err(BootError::Arena)?;
        let mut mb = Memblock::default();
        mb.add(arena.base(), mem);

        let start_pfn = arena.base().pfn();
        let nr_pages = mem >> PAGE_SHIFT;
        // The memmap: vmemmap_populate() backs it with PMD-sized blocks.
        let memmap_bytes = (nr_pages * STRUCT_PAGE_SIZE).next_multiple_of(PAGE_SIZE);
        let memmap_pa = mb.alloc(memmap_bytes, 2 << 20, "memmap")?;
        // Pageblock flags (usemap), one byte per pageblock here.
        let nr_pageblocks = nr_pages.div_ceil(1 << PAGEBLOCK_ORDER) as usize;
        let usemap_pa = mb.alloc((nr_pageblocks as u64).next_multiple_of(64), 64, "usemap")?;

        let pages = arena.slice::<StructPage>(memmap_pa, nr_pages as usize);
        // SAFETY: `pages` lies in `arena`, which the Machine owns and drops
        // after the Memmap (field order), and whose mapping never moves.
        let memmap = unsafe { Memmap::new(pages, start_pfn, &arena) };

        let nr_cpus = config.nr_cpus;
        let cpus = (0..config.nr_cpus).map(|_| CachePadded::new(CpuData::new(&config))).collect();
        // swapper_pg_dir: one page, zeroed, from memblock.
        let swapper_pg_dir = mb.alloc(PAGE_SIZE, PAGE_SIZE, "pgtable")?;
        arena.zero(swapper_pg_dir, PAGE_SIZE);
        let mut m = Machine {
            config,
            memmap,
            pageblock_flags: usemap_pa,
            nr_pageblocks,
            arena,
            memblock: Mutex::new(mb),
            swapper_pg_dir,
            vmemmap_dirty: std::sync::atomic::AtomicBool::new(false),
            // The struct-page accessor caches vmemmap translations: TLBIs
            // must reach it.
            secondary_tlb: Machine::vmemmap_tlbi,
            memblock_released: std::sync::atomic::AtomicBool::new(false),
            cpus,
            trace_clock: TraceClock::new(),
            rcu: crate::rcu::RcuState::new(nr_cpus),
            fixmap: Mutex::new(None),
            linear_map: None,
        };
        m.memmap_init();
        m.memmap.set_pgd(swapper_pg_dir);
        if m.config.linear_map {
            // paging_init() on the boot CPU: early_fixmap_init(), map_mem().
            let (fixmap, report) = {
                let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
                crate::arch::arm64::mmu::paging_init(&cpu0).map_err(BootError::LinearMap)?
            };
            *m.fixmap.lock() = Some(fixmap);
            m.linear_map = Some(report);
        }
        {
            // bootmem_init() → sparse_init() on the boot CPU: map the memmap
            // at the vmemmap.
            let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
            crate::mm::sparse_vmemmap::vmemmap_populate(&cpu0, memmap_pa).map_err(BootError::Pgtable)?;
        }
        Ok(m)
    }

    /// `memmap_init_range()` + `reserve_bootmem_region()`.
    fn memmap_init(&self) {
        let flags = (ZoneType::Normal as u64) << ZONES_PGSHIFT | 0 << NODES_PGSHIFT;
        let start = self.memmap.start_pfn().0;
        for pfn in start..self.memmap.end_pfn().0 {
            let p = self.memmap.page(Pfn(pfn));
            p.set_flags(flags);
            p.set_refcount(1);
            p.set_page_type(PAGE_TYPE_NONE);
            let lru = self.memmap.page_va(Pfn(pfn)) + LRU_OFFSET;
            p.set_lru_next(lru);
            p.set_lru_prev(lru);
        }
        for b in self.pageblock_flags() {
            b.store(Migratetype::Movable as u8, Relaxed);
        }
        for r in self.memblock.lock().reserved() {
            for pfn in r.base.0 >> PAGE_SHIFT..r.end().div_ceil(PAGE_SIZE) {
                let p = self.memmap.page(Pfn(pfn));
                p.set_flag(pg::PG_RESERVED);
                p.set_ext(PageExt::Reserved);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_lays_out_memmap_and_reservations() {
        let m = Machine::boot(MachineConfig::with("64M", 2).unwrap()).unwrap();
        let mb = m.memblock();
        let mut names: Vec<_> = mb.reserved().iter().map(|r| r.name).collect();
        names.sort();
        // The memmap, the usemap, and the vmemmap's tables: swapper_pg_dir
        // plus one pud, one pmd and one pte table (64M is a partial section,
        // mapped with base pages), taken one below the other and merged into
        // one region as memblock_merge_regions() does.
        assert_eq!(names, ["memmap", "pgtable", "usemap"]);
        let tables = mb.reserved().iter().find(|r| r.name == "pgtable").unwrap();
        assert_eq!(tables.size, 4 * PAGE_SIZE);
        // 16384 frames x 64 B = 1 MiB of memmap at the top 2 MiB-aligned slot.
        let memmap = *mb.reserved().iter().find(|r| r.name == "memmap").unwrap();
        assert_eq!(memmap.size, 1 << 20);
        assert_eq!(memmap.base.0, PHYS_OFFSET + (62 << 20));
        let pfn = memmap.base.pfn();
        assert!(m.page(pfn).test_flag(pg::PG_RESERVED));
        assert_eq!(m.page(pfn).ext(), PageExt::Reserved);
        let free = m.page(Pfn(PHYS_OFFSET >> PAGE_SHIFT));
        assert!(!free.test_flag(pg::PG_RESERVED));
        assert_eq!(free.zonenum(), ZoneType::Normal as u32);
        assert_eq!(free.refcount(), 1);
        assert_eq!(m.pageblock_flags().len(), 32);
        assert_eq!(m.memmap().page_va(Pfn(0x40001)), crate::layout::VMEMMAP_START + 64);
    }

    #[test]
    fn bad_configs_are_errors() {
        assert!(Machine::boot(MachineConfig::with("1M", 1).unwrap()).is_err());
        assert!(Machine::boot(MachineConfig::with("64M", 0).unwrap()).is_err());
        assert!(MachineConfig::with("lots", 1).is_err());
    }
}
