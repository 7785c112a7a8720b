//! The emulated machine and its early boot.
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
//!    frames PG_reserved (`reserve_bootmem_region()`).
//!
//! Handing the unreserved frames to the buddy allocator
//! (`memblock_free_all()`) is left to the allocator crate, which owns the
//! zone: it calls [`Machine::memblock`] and [`crate::memblock::Memblock::for_each_free_block`].
//!
//! Faithful: memmap contents and layout, memblock's top-down placement, the
//! order of initialisation. Simplified: one node, one zone (Normal), one
//! contiguous memmap (the vmemmap mapping of it arrives with the page tables).

use crate::addr::{PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr, memparse};
use crate::arena::{Arena, ArenaError};
use crate::barrier::{BarrierBackend, BarrierCounts};
use crate::cpu::{Cpu, CpuData};
use crate::layout::PHYS_OFFSET;
use crate::memblock::{Memblock, MemblockError};
use crate::mm::{Migratetype, PAGEBLOCK_ORDER, ZoneType};
use crate::page::{
    LRU_OFFSET, Memmap, NODES_PGSHIFT, PAGE_TYPE_NONE, PageExt, STRUCT_PAGE_SIZE, StructPage, ZONES_PGSHIFT, pg,
};
use crate::sync::Mutex;
use crate::trace::TraceClock;
use crate::vmstat::VmCounts;
use crossbeam::utils::CachePadded;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Largest emulated RAM accepted (1 TiB): the memmap alone would need 16 GiB.
pub const MAX_MEM: u64 = 1 << 40;
/// Most emulated CPUs.
pub const NR_CPUS: usize = 256;

/// How the machine is built.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    /// Bytes of RAM (`--mem`), default 4 GiB.
    pub mem_bytes: u64,
    /// Number of CPUs (`--cpus`), default 2.
    pub nr_cpus: usize,
    /// How dmb/dsb/isb execute.
    pub barrier_backend: BarrierBackend,
    /// Measure lock hold times (CONFIG_LOCK_STAT); costs a counter read per
    /// acquisition and release.
    pub lock_stat: bool,
    /// `arm64.lazy_mmu_barrier_batching`: lazy-MMU sections defer the
    /// `dsb ishst; isb` of valid kernel PTE writes to their end (Linux 6.16+).
    /// Off gives the behaviour before 6.16: one pair per write.
    pub lazy_mmu_barrier_batching: bool,
    /// `arm64.tlbi_range`: the CPUs have FEAT_TLBIRANGE (range TLBIs).
    pub tlbi_range: bool,
    /// Entries in each CPU's TLB model (a contiguous run or a block is one).
    pub tlb_entries: usize,
    /// Modelled costs of TLBIs, their completion and grace periods.
    pub cost_profile: crate::cost::CostProfile,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            mem_bytes: 4 << 30,
            nr_cpus: 2,
            barrier_backend: BarrierBackend::default(),
            lock_stat: false,
            lazy_mmu_barrier_batching: true,
            tlbi_range: true,
            // Neoverse N1's unified L2 TLB (Ampere Altra): 1280 entries.
            tlb_entries: 1280,
            cost_profile: crate::cost::CostProfile::default(),
        }
    }
}

impl MachineConfig {
    /// Config with `mem` parsed like `mem=` (e.g. "4G") and `cpus` CPUs.
    pub fn with(mem: &str, cpus: usize) -> Result<MachineConfig, BootError> {
        let mem_bytes = memparse(mem).map_err(BootError::Config)?;
        Ok(MachineConfig { mem_bytes, nr_cpus: cpus, ..Default::default() })
    }
}

/// Why a machine could not be built.
#[derive(Debug)]
pub enum BootError {
    Config(String),
    Pgtable(crate::pgtable::PgtableError),
    Arena(ArenaError),
    Memblock(MemblockError),
}

impl std::fmt::Display for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootError::Config(s) => write!(f, "bad machine configuration: {s}"),
            BootError::Arena(e) => e.fmt(f),
            BootError::Memblock(e) => e.fmt(f),
            BootError::Pgtable(e) => write!(f, "building the vmemmap: {e}"),
        }
    }
}
impl std::error::Error for BootError {}
impl From<MemblockError> for BootError {
    fn from(e: MemblockError) -> Self {
        BootError::Memblock(e)
    }
}

/// Errors when taking a CPU handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuError {
    /// No such CPU.
    NoSuchCpu { cpu: usize, nr_cpus: usize },
    /// A handle for this CPU is alive elsewhere.
    InUse { cpu: usize },
}

impl std::fmt::Display for CpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuError::NoSuchCpu { cpu, nr_cpus } => write!(f, "cpu {cpu} does not exist (nr_cpus={nr_cpus})"),
            CpuError::InUse { cpu } => write!(f, "cpu {cpu} is already driven by another handle"),
        }
    }
}
impl std::error::Error for CpuError {}

/// The machine: RAM, memmap, memblock, CPUs, barrier backend, trace clock.
#[derive(Debug)]
pub struct Machine {
    config: MachineConfig,
    // Declared before `arena` so that it is dropped first: it points into it.
    memmap: Memmap,
    pageblock_flags: PhysAddr,
    nr_pageblocks: usize,
    arena: Arena,
    memblock: Mutex<Memblock>,
    /// `swapper_pg_dir`: the kernel's root table.
    swapper_pg_dir: PhysAddr,
    /// The vmemmap tables changed since the struct-page accessor last synced.
    pub(crate) vmemmap_dirty: std::sync::atomic::AtomicBool,
    /// `memblock_free_all()` has handed memblock's free memory to a page
    /// allocator (it may happen once per machine).
    memblock_released: std::sync::atomic::AtomicBool,
    cpus: Box<[CachePadded<CpuData>]>,
    trace_clock: TraceClock,
    rcu: crate::rcu::RcuState,
}

impl Machine {
    /// Build and boot a machine (see the module documentation).
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
        let m = Machine {
            config,
            memmap,
            pageblock_flags: usemap_pa,
            nr_pageblocks,
            arena,
            memblock: Mutex::new(mb),
            swapper_pg_dir,
            vmemmap_dirty: std::sync::atomic::AtomicBool::new(false),
            memblock_released: std::sync::atomic::AtomicBool::new(false),
            cpus,
            trace_clock: TraceClock::new(),
            rcu: crate::rcu::RcuState::new(nr_cpus),
        };
        m.memmap_init();
        m.memmap.set_pgd(swapper_pg_dir);
        {
            // paging_init() on the boot CPU: map the memmap at the vmemmap.
            let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
            crate::pgtable::vmemmap::vmemmap_populate(&cpu0, memmap_pa).map_err(BootError::Pgtable)?;
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

    /// The kernel's address space (`init_mm`: `swapper_pg_dir`, no ASID).
    #[inline]
    pub fn kernel_as(&self) -> crate::pgtable::AddressSpace {
        crate::pgtable::AddressSpace::kernel(self.swapper_pg_dir)
    }

    /// `early_pgtable_alloc()`: a zeroed page from memblock for a table,
    /// marked reserved in its struct page. Only valid before the page
    /// allocator takes over memblock's free memory.
    pub fn early_table_page(&self) -> Result<PhysAddr, MemblockError> {
        let pa = self.memblock.lock().alloc(PAGE_SIZE, PAGE_SIZE, "pgtable")?;
        self.arena.zero(pa, PAGE_SIZE);
        let p = self.memmap.page(pa.pfn());
        p.set_flag(pg::PG_RESERVED);
        p.set_ext(PageExt::Reserved);
        Ok(pa)
    }

    /// Claim the one `memblock_free_all()` of this machine: true for the
    /// first caller, false ever after. A page allocator calls this before
    /// taking memblock's free memory, so that a second allocator on the
    /// same machine cannot free the same frames again (in the kernel
    /// `memblock_free_all()` runs once, from `mm_core_init()`).
    pub fn claim_memblock_free_all(&self) -> bool {
        !self.memblock_released.swap(true, Relaxed)
    }
    /// Whether `memblock_free_all()` has run (memblock's free memory now
    /// belongs to a page allocator).
    pub fn memblock_released(&self) -> bool {
        self.memblock_released.load(Relaxed)
    }

    /// The configuration the machine was built with.
    #[inline]
    pub fn config(&self) -> &MachineConfig {
        &self.config
    }
    /// The struct-page accessor.
    #[inline]
    pub fn memmap(&self) -> &Memmap {
        &self.memmap
    }
    /// `pfn_to_page()`.
    #[inline]
    pub fn page(&self, pfn: Pfn) -> &StructPage {
        self.memmap.page(pfn)
    }
    /// Emulated RAM.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }
    /// The boot allocator (locked).
    pub fn memblock(&self) -> crate::sync::MutexGuard<'_, Memblock> {
        self.memblock.lock()
    }
    /// Pageblock flags, one byte per pageblock from the first frame of RAM:
    /// the migratetype in the low bits (`NR_PAGEBLOCK_BITS` simplified).
    #[inline]
    pub fn pageblock_flags(&self) -> &[AtomicU8] {
        // Callers on hot paths (the zone) keep the slice rather than
        // calling this for every lookup.
        self.arena.slice::<AtomicU8>(self.pageblock_flags, self.nr_pageblocks)
    }
    /// Number of CPUs.
    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }
    /// Take the handle of CPU `id`.
    pub fn cpu(&self, id: usize) -> Result<Cpu<'_>, CpuError> {
        let data = self.cpus.get(id).ok_or(CpuError::NoSuchCpu { cpu: id, nr_cpus: self.cpus.len() })?;
        if !data.try_claim() {
            return Err(CpuError::InUse { cpu: id });
        }
        let cpu = Cpu::new(id, self, data);
        crate::rcu::rcu_cpu_online(&cpu);
        Ok(cpu)
    }
    /// Whether `cpu` is a handle of this machine (and not of another one
    /// in the same process). Allocators check it at their entry points, so
    /// a foreign handle is refused before it can index per-cpu data or
    /// write into the other machine's tables.
    #[inline]
    pub fn owns(&self, cpu: &Cpu<'_>) -> bool {
        std::ptr::eq(cpu.machine(), self)
    }
    /// Handles of every CPU, in id order.
    pub fn all_cpus(&self) -> Result<Vec<Cpu<'_>>, CpuError> {
        (0..self.nr_cpus()).map(|i| self.cpu(i)).collect()
    }
    /// The logical clock of trace timestamps.
    #[inline]
    pub fn trace_clock(&self) -> &TraceClock {
        &self.trace_clock
    }
    /// Event counters summed over CPUs (/proc/vmstat).
    pub fn vm_events(&self) -> VmCounts {
        let mut s = VmCounts::default();
        for c in self.cpus.iter() {
            s += c.events.snapshot();
        }
        s
    }
    /// Event counters of one CPU.
    pub fn cpu_vm_events(&self, cpu: usize) -> Option<VmCounts> {
        self.cpus.get(cpu).map(|c| c.events.snapshot())
    }
    /// The data of CPU `id`, without taking its handle (for broadcasts such
    /// as TLBIs, and for reports).
    pub fn cpu_data(&self, id: usize) -> Option<&CpuData> {
        self.cpus.get(id).map(|c| &**c)
    }
    /// Every CPU's data, in id order.
    pub fn all_cpu_data(&self) -> impl Iterator<Item = &CpuData> + '_ {
        self.cpus.iter().map(|c| &**c)
    }
    /// TLBI counts and modelled TLBI time summed over CPUs (each counted on
    /// the issuing CPU).
    pub fn tlbi_counts(&self) -> crate::tlb::TlbiCounts {
        let mut s = crate::tlb::TlbiCounts::default();
        for c in self.cpus.iter() {
            s += c.tlb.tlbi_stats().snapshot();
        }
        s
    }
    /// The RCU state (`rcu_state`).
    #[inline]
    pub fn rcu(&self) -> &crate::rcu::RcuState {
        &self.rcu
    }
    /// RCU counters summed over CPUs, with the machine-wide grace-period and
    /// invoked-callback counts.
    pub fn rcu_counts(&self) -> crate::rcu::RcuCounts {
        let mut s = crate::rcu::RcuCounts {
            grace_periods: self.rcu.gp_completed(),
            callbacks_invoked: self.rcu.callbacks_invoked(),
            ..Default::default()
        };
        for c in self.cpus.iter() {
            s += c.rcu.snapshot();
        }
        s
    }
    /// Barrier counts summed over CPUs.
    pub fn barrier_counts(&self) -> BarrierCounts {
        let mut s = BarrierCounts::default();
        for c in self.cpus.iter() {
            s += c.barriers.snapshot();
        }
        s
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
        // mapped with base pages).
        assert_eq!(names, ["memmap", "pgtable", "pgtable", "pgtable", "pgtable", "usemap"]);
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
    fn cpu_handles_are_exclusive() {
        let m = Machine::boot(MachineConfig::with("16M", 2).unwrap()).unwrap();
        let c0 = m.cpu(0).unwrap();
        assert_eq!(m.cpu(0).unwrap_err(), CpuError::InUse { cpu: 0 });
        assert_eq!(m.cpu(2).unwrap_err(), CpuError::NoSuchCpu { cpu: 2, nr_cpus: 2 });
        drop(c0);
        assert!(m.cpu(0).is_ok());
    }

    #[test]
    fn barriers_are_counted_per_cpu() {
        use crate::barrier::{BarrierBackend, BarrierKind, ish, ishst};
        let cfg = MachineConfig { barrier_backend: BarrierBackend::Count, ..MachineConfig::with("16M", 2).unwrap() };
        let m = Machine::boot(cfg).unwrap();
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        let boot = m.barrier_counts();
        c0.dsb(ishst);
        c0.isb();
        c1.dsb(ishst);
        c1.dmb(ish);
        let all = m.barrier_counts();
        let d = |k, o| all.get(k, o).unwrap() - boot.get(k, o).unwrap();
        assert_eq!(d(BarrierKind::Dsb, "ishst"), 2);
        assert_eq!(d(BarrierKind::Isb, "sy"), 1);
        assert_eq!(d(BarrierKind::Dmb, "ish"), 1);
        assert_eq!(c1.data().barriers.snapshot().total(), 2);
    }

    #[test]
    fn bad_configs_are_errors() {
        assert!(Machine::boot(MachineConfig::with("1M", 1).unwrap()).is_err());
        assert!(Machine::boot(MachineConfig::with("64M", 0).unwrap()).is_err());
        assert!(MachineConfig::with("lots", 1).is_err());
    }
}
