//! The emulated machine: the composition root. It owns what the kernel
//! keeps in globals (RAM, the memmap, memblock, each CPU's kernel and arch
//! data, the system's arm64 state, the trace clock, RCU) and wires the
//! layers together: it hands out CPU handles built from those pieces,
//! implements the traits lower layers reach it through
//! ([`TableMemory`] for the tables' RAM, [`EarlyAlloc`] and
//! [`MemblockTables`] for boot's pages), and registers the memmap as the
//! [`SecondaryTlb`](crate::arch::arm64::cpu::SecondaryTlb) every TLBI
//! reaches. Nothing below names this module.
//!
//! The kernel has no such object (its state is global); mmlab keeps one per
//! [`Machine`] so that tests can run several machines in one process.
//! Building one is boot, in `boot.rs` ([`Machine::boot`]); this file holds
//! the configuration, the run-time accessors and the sums of the per-CPU
//! counter families.

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::arch::arm64::barrier::{BarrierBackend, BarrierCounts};
use crate::arch::arm64::cpu::{ArchCpu, ArchCpuData, ArchSystem, Arm64, EarlyAlloc};
use crate::arch::arm64::pgtable::{PgtableAlloc, TableMemory};
use crate::arena::Arena;
use crate::arena::ArenaError;
use crate::counters::{CounterSet, PerCpuStat};
use crate::kernel::cpu::{Cpu, CpuData};
use crate::mm::banks::MemError;
use crate::mm::memblock::{Memblock, MemblockError};

mod boot;
pub mod params;
use crate::mm::memmap::Memmap;
use crate::mm::page::{PageExt, StructPage, pg};
use crate::mm::vmstat::VmCounts;
use crate::sync::Mutex;
use crate::trace::TraceClock;
use crossbeam::utils::CachePadded;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Why a machine could not be built.
#[derive(Debug)]
pub enum BootError {
    /// A configuration value out of range (the message says which).
    Config(String),
    /// Mapping the memmap at the vmemmap failed.
    Pgtable(crate::arch::arm64::pgtable::PgtableError),
    /// The host refused the RAM mapping.
    Arena(ArenaError),
    /// memblock could not place the memmap, the usemap or a table.
    Memblock(MemblockError),
    /// `map_mem()` could not build the linear map (`arm64.linear_map=1`).
    LinearMap(crate::arch::arm64::mmu::LinearMapError),
    /// RAM banks the machine cannot have.
    Mem(MemError),
}

impl std::fmt::Display for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootError::Config(s) => write!(f, "bad machine configuration: {s}"),
            BootError::Arena(e) => e.fmt(f),
            BootError::Memblock(e) => e.fmt(f),
            BootError::Pgtable(e) => write!(f, "building the vmemmap: {e}"),
            BootError::LinearMap(e) => write!(f, "building the linear map: {e}"),
            BootError::Mem(e) => write!(f, "bad memory: {e}"),
        }
    }
}
impl std::error::Error for BootError {}
impl From<MemblockError> for BootError {
    fn from(e: MemblockError) -> Self {
        BootError::Memblock(e)
    }
}

/// Largest emulated RAM accepted (1 TiB): the memmap alone would need 16 GiB.
pub use crate::mm::banks::MAX_MEM;
/// Most emulated CPUs.
pub const NR_CPUS: usize = 256;

/// How the machine is built.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    /// Bytes of RAM (`--mem`), default 4 GiB: the sum of `mem_banks`.
    pub mem_bytes: u64,
    /// The banks of RAM (a device tree memory node's `reg` entries); empty:
    /// one bank of `mem_bytes` at `PHYS_OFFSET` ([`MachineConfig::banks`]).
    pub mem_banks: Vec<crate::mm::banks::MemBank>,
    /// `CONFIG_DEFERRED_STRUCT_PAGE_INIT`: struct pages beyond the first
    /// section are initialised at first touch ([`crate::mm::memmap`]);
    /// off: all of them at boot.
    pub deferred_struct_page_init: bool,
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
    /// `arm64.tlbi_range` when set explicitly: the CPUs have FEAT_TLBIRANGE
    /// (range TLBIs). `None`: the cost profile's machine decides
    /// ([`MachineConfig::tlbi_range`]).
    pub tlbi_range: Option<bool>,
    /// `arm64.lpa2` when set explicitly: the CPUs have FEAT_LPA2, so the
    /// kernel runs with 52-bit VA and five levels
    /// ([`MachineConfig::va_layout`]). `None`: the cost profile's CPU decides.
    pub lpa2: Option<bool>,
    /// Entries in each CPU's TLB model (a contiguous run or a block is one).
    pub tlb_entries: usize,
    /// Modelled costs of TLBIs, their completion and grace periods.
    pub cost_profile: crate::arch::arm64::cost::CostProfile,
    /// `arm64.linear_map`: build the linear map at boot (`paging_init()` →
    /// `map_mem()`, [`crate::arch::arm64::mmu`]), as every arm64 kernel
    /// does (the default). Off: nothing is mapped at `PAGE_OFFSET` and no
    /// table page is taken for it (a faster boot for tests that do not
    /// need it).
    pub linear_map: bool,
    /// `arm64.linear_map_variant`: which version of the linear-map code runs.
    pub linear_map_variant: crate::arch::arm64::mmu::LinearMapVariant,
    /// `rodata=`: `on` (7.2's default, the former `full`) makes the linear
    /// map page-granular on CPUs without BBML2_NOABORT.
    pub rodata: crate::arch::arm64::mmu::Rodata,
    /// `kfence.sample_interval=` (ms): nonzero makes `map_mem()` allocate
    /// and page-map the 2 MiB KFENCE pool early; 0, Debian's default,
    /// starts KFENCE late, which keeps the linear map page-granular.
    pub kfence_sample_interval: u64,
    /// `arm64.split_mode` when set explicitly: how a permission change
    /// splits a linear-map block ([`crate::arch::arm64::pageattr::SplitMode`]).
    /// `None`: the cost profile's CPU decides ([`MachineConfig::split_mode`]).
    pub split_mode: Option<crate::arch::arm64::pageattr::SplitMode>,
    /// `debug_pagealloc=on`: `can_set_direct_map()` holds, so the linear map
    /// is page-granular whatever `rodata=` says.
    pub debug_pagealloc: bool,
    /// `arm64.kernel_image` when set explicitly: a kernel image in RAM at
    /// 0x40200000, reserved in memblock, mapped at `KIMAGE_VADDR` and
    /// carved out of the linear map ([`crate::arch::arm64::kimage`]).
    /// `None`: present when the real boot state is in force.
    pub kernel_image: Option<bool>,
    /// `boot.state`: start from the state a real boot leaves (early
    /// reservations, the kernel image's vmalloc areas: [`crate::mm::boot_state`])
    /// or from bare RAM.
    pub boot_state: crate::mm::boot_state::BootState,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            mem_bytes: 4 << 30,
            mem_banks: Vec::new(),
            deferred_struct_page_init: true,
            nr_cpus: 2,
            barrier_backend: BarrierBackend::default(),
            lock_stat: false,
            lazy_mmu_barrier_batching: true,
            tlbi_range: None,
            lpa2: None,
            // Neoverse N1's unified L2 TLB (Ampere Altra): 1280 entries.
            tlb_entries: 1280,
            cost_profile: crate::arch::arm64::cost::CostProfile::default(),
            linear_map: true,
            linear_map_variant: Default::default(),
            rodata: Default::default(),
            debug_pagealloc: false,
            kfence_sample_interval: 0,
            split_mode: None,
            kernel_image: None,
            boot_state: Default::default(),
        }
    }
}

impl MachineConfig {
    /// Config with `mem` parsed like `mem=` (e.g. "4G") or as banks
    /// (`2G,2G@0x100000000`, [`crate::mm::banks`]) and `cpus` CPUs. The
    /// banks are checked at boot.
    ///
    /// # Errors
    ///
    /// [`BootError::Mem`] if `mem` does not parse.
    pub fn with(mem: &str, cpus: usize) -> Result<MachineConfig, BootError> {
        let banks = crate::mm::banks::parse_banks(mem).map_err(BootError::Mem)?;
        let mem_bytes = banks.iter().fold(0u64, |a, b| a.saturating_add(b.size));
        let single = banks.len() == 1 && banks[0].base == crate::arch::arm64::memory::PHYS_OFFSET;
        Ok(MachineConfig {
            mem_bytes,
            mem_banks: if single { Vec::new() } else { banks },
            nr_cpus: cpus,
            ..Default::default()
        })
    }

    /// The same configuration with `boot.state=bare`: no emulated boot
    /// reservations (tests that derive counts by hand on bare RAM use it).
    pub fn bare(self) -> MachineConfig {
        MachineConfig { boot_state: crate::mm::boot_state::BootState::Bare, ..self }
    }

    /// Whether the CPUs have FEAT_TLBIRANGE (`system_supports_tlb_range()`):
    /// `arm64.tlbi_range` if set, else the cost profile's CPU
    /// ([`crate::arch::arm64::cost::CpuFeatures`]).
    pub fn tlbi_range(&self) -> bool {
        self.tlbi_range.unwrap_or(self.cost_profile.features.tlbi_range)
    }

    /// How `set_memory_*()` splits a linear-map block: `arm64.split_mode`
    /// if set, else what 6.18+ does on the cost profile's CPU
    /// (`split_kernel_leaf_mapping()` when it has BBML2_NOABORT, no split
    /// otherwise). `bbml2-noabort` also lets `map_mem()` use blocks with
    /// `rodata=on` ([`MachineConfig::map_mem_options`]), as on such a CPU.
    pub fn split_mode(&self) -> crate::arch::arm64::pageattr::SplitMode {
        use crate::arch::arm64::pageattr::SplitMode;
        self.split_mode.unwrap_or(if self.cost_profile.features.bbm_level >= 2 {
            SplitMode::Bbml2NoAbort
        } else {
            SplitMode::None
        })
    }

    /// The VA layout the kernel picks at boot: 52-bit VA and five levels
    /// when the CPUs have FEAT_LPA2 (`arm64.lpa2` if set, else the cost
    /// profile's CPU), 48-bit and four otherwise.
    pub fn va_layout(&self) -> crate::arch::arm64::memory::VaLayout {
        crate::arch::arm64::memory::VaLayout::new(self.lpa2.unwrap_or(self.cost_profile.features.lpa2))
    }

    /// The kernel command line this machine boots with: the peer runs'
    /// ([`crate::mm::boot_state::PEER_CMDLINE`]) and the boot parameters
    /// mmlab models that differ from their defaults. `setup_command_line()`
    /// keeps two copies in memblock, so its length is part of the boot.
    pub fn cmdline(&self) -> String {
        let mut c = crate::mm::boot_state::PEER_CMDLINE.to_string();
        if self.rodata != crate::arch::arm64::mmu::Rodata::On {
            c += &format!(" rodata={}", self.rodata.name());
        }
        if self.kfence_sample_interval != 0 {
            c += &format!(" kfence.sample_interval={}", self.kfence_sample_interval);
        }
        if self.debug_pagealloc {
            c += " debug_pagealloc=on";
        }
        c
    }

    /// What `map_mem()` decides from ([`crate::arch::arm64::mmu::MapMemOptions`]):
    /// the variant, `rodata=`, `debug_pagealloc`, `kfence.sample_interval`
    /// and whether the CPU has BBML2_NOABORT ([`MachineConfig::split_mode`]).
    pub fn map_mem_options(&self) -> crate::arch::arm64::mmu::MapMemOptions {
        crate::arch::arm64::mmu::MapMemOptions {
            variant: self.linear_map_variant,
            rodata: self.rodata,
            debug_pagealloc: self.debug_pagealloc,
            kfence_sample_interval: self.kfence_sample_interval,
            bbml2_noabort: self.split_mode() == crate::arch::arm64::pageattr::SplitMode::Bbml2NoAbort,
        }
    }

    /// The boot state in force for these banks: `boot.state`, unless the
    /// machine is too small for the real one (then bare, with the reason).
    pub fn boot_state_in_force(&self) -> (crate::mm::boot_state::BootState, Option<String>) {
        use crate::mm::boot_state::{BootState, real_boot_fits};
        match self.boot_state {
            BootState::Bare => (BootState::Bare, None),
            BootState::Real => {
                let b = self.banks();
                match b.first().map_or(Err(String::new()), |b| real_boot_fits(b.base, b.size)) {
                    Ok(()) => (BootState::Real, None),
                    Err(why) => (BootState::Bare, Some(why)),
                }
            }
        }
    }

    /// Whether the kernel image is in RAM: `arm64.kernel_image` if set,
    /// else whether the real boot state is in force.
    pub fn kernel_image(&self) -> bool {
        self.kernel_image.unwrap_or_else(|| self.boot_state_in_force().0 == crate::mm::boot_state::BootState::Real)
    }

    /// The banks of RAM: `mem_banks`, or one bank of `mem_bytes` at
    /// `PHYS_OFFSET`.
    pub fn banks(&self) -> Vec<crate::mm::banks::MemBank> {
        if self.mem_banks.is_empty() {
            vec![crate::mm::banks::MemBank { base: crate::arch::arm64::memory::PHYS_OFFSET, size: self.mem_bytes }]
        } else {
            self.mem_banks.clone()
        }
    }
}

/// Errors when taking a CPU handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuError {
    /// No such CPU.
    NoSuchCpu {
        /// The id asked for.
        cpu: usize,
        /// CPUs the machine has.
        nr_cpus: usize,
    },
    /// A handle for this CPU is alive elsewhere.
    InUse {
        /// The id asked for.
        cpu: usize,
    },
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
    /// The system-wide arm64 state (features, barrier backend, costs).
    pub(crate) arch: Arm64,
    pub(crate) config: MachineConfig,
    /// Each CPU's arch state (barriers, TLB, lazy MMU), by id.
    pub(crate) arch_cpus: Box<[CachePadded<ArchCpuData>]>,
    // Declared before `arena` so that it is dropped first: it points into it.
    pub(crate) memmap: Memmap,
    pub(crate) pageblock_flags: PhysAddr,
    pub(crate) nr_pageblocks: usize,
    /// The zones' spans as `free_area_init()` set them.
    pub(crate) zone_spans: [crate::mm::zone_layout::ZoneSpan; crate::mm::zone_layout::NR_ZONE_TYPES],
    pub(crate) arena: Arena,
    pub(crate) memblock: Mutex<Memblock>,
    /// `memblock_free_all()` has handed memblock's free memory to a page
    /// allocator (it may happen once per machine).
    pub(crate) memblock_released: std::sync::atomic::AtomicBool,
    pub(crate) cpus: Box<[CachePadded<CpuData>]>,
    pub(crate) trace_clock: TraceClock,
    pub(crate) rcu: crate::kernel::rcu::RcuState,
    /// The fixmap, behind `fixmap_lock` (present once the linear map was
    /// built: `arm64.linear_map=1`).
    pub(crate) fixmap: Mutex<Option<crate::arch::arm64::fixmap::Fixmap>>,
    /// What `map_mem()` did at boot, if it ran.
    pub(crate) linear_map: Option<crate::arch::arm64::mmu::LinearMapReport>,
    /// The boot steps as they ran.
    pub(crate) boot_phases: Vec<crate::mm::mm_init::BootPhase>,
    /// The boot state the machine was built with ([`crate::mm::boot_state`]).
    pub(crate) boot_state: crate::mm::boot_state::BootStateReport,
    /// Table pages taken from memblock at the kernel's point in boot, before
    /// mmlab's own order reaches the code that uses them: the linear map's
    /// (`early_pgtable_alloc()` in `paging_init()`, top-down) and then the
    /// vmemmap's (`memmap_alloc()` in `sparse_init()`). Handed out first by
    /// [`Machine::early_table_page`] and [`EarlyAlloc`].
    pub(crate) table_pool: Mutex<std::collections::VecDeque<PhysAddr>>,
}

impl Machine {
    /// The VA layout the kernel runs with (`vabits_actual`, levels).
    pub fn va_layout(&self) -> crate::arch::arm64::memory::VaLayout {
        self.arch.va
    }

    /// The fixmap's slots (`enum fixed_addresses`) of the machine's kernel
    /// (`arm64.linear_map_variant`), whether or not it built a fixmap.
    pub fn fixmap_layout(&self) -> crate::arch::arm64::fixmap::FixmapLayout {
        self.config.linear_map_variant.fixmap_layout()
    }

    /// The kernel's address space (`init_mm`: `swapper_pg_dir`, no ASID).
    #[inline]
    pub fn kernel_as(&self) -> crate::arch::arm64::pgtable::AddressSpace {
        crate::arch::arm64::pgtable::AddressSpace::kernel(self.arch.swapper_pg_dir, self.arch.va)
    }

    /// `early_pgtable_alloc()`: a zeroed page from memblock for a table,
    /// marked reserved in its struct page. Only valid before the page
    /// allocator takes over memblock's free memory.
    ///
    /// # Errors
    ///
    /// [`MemblockError::NoSpace`] if memblock has no free page left.
    pub fn early_table_page(&self) -> Result<PhysAddr, MemblockError> {
        let pa = EarlyAlloc::alloc(self, PAGE_SIZE, PAGE_SIZE, "pgtable")?;
        self.arena.zero(pa, PAGE_SIZE);
        Ok(pa)
    }

    /// Claim the one `memblock_free_all()` of this machine: true for the
    /// first caller, false ever after. A page allocator calls this before
    /// taking memblock's free memory, so that a second allocator on the
    /// same machine cannot free the same frames again (in the kernel
    /// `memblock_free_all()` runs once, from `mm_core_init()`).
    pub fn claim_memblock_free_all(&self) -> bool {
        let first = !self.memblock_released.swap(true, Relaxed);
        if first {
            // Struct pages first touched from now on are free pages, as
            // deferred_init_memmap() → __free_pages_core() leaves them.
            self.memmap.set_deferred_freed();
        }
        first
    }
    /// Whether `memblock_free_all()` has run (memblock's free memory now
    /// belongs to a page allocator).
    pub fn memblock_released(&self) -> bool {
        self.memblock_released.load(Relaxed)
    }

    /// The boot state the machine was built with: what is emulated of a
    /// real boot (reservations, the kernel image's vmalloc areas).
    pub fn boot_state(&self) -> &crate::mm::boot_state::BootStateReport {
        &self.boot_state
    }
    /// The kernel image in RAM, if there is one.
    pub fn kernel_image(&self) -> Option<&crate::arch::arm64::kimage::KernelImage> {
        self.boot_state.kernel_image.as_ref()
    }
    /// The CMA area (`dma_contiguous_default_area`) as
    /// `dma_contiguous_reserve()` placed it: first frame and pages. Its
    /// pages are reserved in memblock, so `memblock_free_all()` leaves them
    /// out; `cma_init_reserved_areas()` frees them as MIGRATE_CMA.
    pub fn cma_area(&self) -> Option<(Pfn, u64)> {
        self.boot_state.cma.map(|(pfn, n)| (Pfn(pfn), n))
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
    /// The zones of node 0 as arm64's `zone_sizes_init()` and
    /// `free_area_init()` laid them out (DMA, DMA32, Normal, Movable).
    pub fn zone_spans(&self) -> &[crate::mm::zone_layout::ZoneSpan; crate::mm::zone_layout::NR_ZONE_TYPES] {
        &self.zone_spans
    }
    /// Number of CPUs.
    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }
    /// Take the handle of CPU `id`.
    ///
    /// # Errors
    ///
    /// [`CpuError::NoSuchCpu`] for an id beyond the machine's CPUs; [`CpuError::InUse`] while
    /// another handle of that CPU is alive.
    pub fn cpu(&self, id: usize) -> Result<Cpu<'_>, CpuError> {
        let data = self.cpus.get(id).ok_or(CpuError::NoSuchCpu { cpu: id, nr_cpus: self.cpus.len() })?;
        if !data.try_claim() {
            return Err(CpuError::InUse { cpu: id });
        }
        let sys = ArchSystem {
            arch: &self.arch,
            cpus: &self.arch_cpus,
            ram: &self.arena,
            clock: &self.trace_clock,
            // The struct-page accessor caches vmemmap translations: TLBIs
            // must reach it.
            secondary_tlb: &self.memmap,
            id: self as *const Machine as usize,
        };
        let arch = ArchCpu::new(id, sys, &data.events);
        Ok(Cpu::new(arch, data, &self.rcu, self.config.lock_stat))
    }
    /// Whether `cpu` is a handle of this machine (and not of another one
    /// in the same process). Allocators check it at their entry points, so
    /// a foreign handle is refused before it can index per-cpu data or
    /// write into the other machine's tables.
    #[inline]
    pub fn owns(&self, cpu: &Cpu<'_>) -> bool {
        cpu.system_id() == self as *const Machine as usize
    }
    /// Handles of every CPU, in id order.
    ///
    /// # Errors
    ///
    /// [`CpuError::InUse`] if a handle of any CPU is alive.
    pub fn all_cpus(&self) -> Result<Vec<Cpu<'_>>, CpuError> {
        (0..self.nr_cpus()).map(|i| self.cpu(i)).collect()
    }
    /// The logical clock of trace timestamps.
    #[inline]
    pub fn trace_clock(&self) -> &TraceClock {
        &self.trace_clock
    }
    /// Counters of one per-CPU stat family summed over CPUs: `stat` picks
    /// the family out of a CPU's data. The one aggregation behind
    /// [`vm_events`](Self::vm_events), [`tlbi_counts`](Self::tlbi_counts),
    /// [`rcu_counts`](Self::rcu_counts) and
    /// [`barrier_counts`](Self::barrier_counts).
    ///
    /// Mirrors mm/vmstat.c `sum_vm_events()` (a loop over the CPUs adding
    /// each one's counters).
    pub fn sum_cpus<S: PerCpuStat>(&self, stat: impl Fn(&CpuData) -> &S) -> S::Counts {
        sum_stat(self.cpus.iter().map(|c| &**c), stat)
    }
    /// As [`sum_cpus`](Self::sum_cpus), over each CPU's arch state.
    pub fn sum_arch_cpus<S: PerCpuStat>(&self, stat: impl Fn(&ArchCpuData) -> &S) -> S::Counts {
        sum_stat(self.arch_cpus.iter().map(|c| &**c), stat)
    }
    /// CPU `id`'s arch state, without taking its handle (for reports).
    pub fn arch_cpu_data(&self, id: usize) -> Option<&ArchCpuData> {
        self.arch_cpus.get(id).map(|c| &**c)
    }
    /// Event counters summed over CPUs (/proc/vmstat).
    pub fn vm_events(&self) -> VmCounts {
        self.sum_cpus(|c| &c.events)
    }
    /// Event counters of one CPU.
    pub fn cpu_vm_events(&self, cpu: usize) -> Option<VmCounts> {
        self.cpus.get(cpu).map(|c| c.events.snapshot())
    }
    /// TLBI counts and modelled TLBI time summed over CPUs (each counted on
    /// the issuing CPU).
    pub fn tlbi_counts(&self) -> crate::arch::arm64::tlb::TlbiCounts {
        self.sum_arch_cpus(|c| c.tlb.tlbi_stats())
    }
    /// The RCU state (`rcu_state`).
    #[inline]
    pub fn rcu(&self) -> &crate::kernel::rcu::RcuState {
        &self.rcu
    }
    /// RCU counters summed over CPUs, with the machine-wide grace-period and
    /// invoked-callback counts.
    pub fn rcu_counts(&self) -> crate::kernel::rcu::RcuCounts {
        crate::kernel::rcu::RcuCounts {
            grace_periods: self.rcu.gp_completed(),
            callbacks_invoked: self.rcu.callbacks_invoked(),
            ..sum_stat(self.rcu.rdp.iter().map(|c| &**c), |c| c)
        }
    }
    /// Barrier counts summed over CPUs.
    pub fn barrier_counts(&self) -> BarrierCounts {
        self.sum_arch_cpus(|c| &c.barriers)
    }
    /// The physical address the struct page of `pfn` lives at, by a walk
    /// of the kernel tables at its vmemmap address (after a remap such as
    /// HVO's, the shared page's).
    pub fn vmemmap_pa(&self, pfn: Pfn) -> Option<PhysAddr> {
        self.memmap.vmemmap_pa(self, &self.kernel_as(), pfn)
    }
    /// What `map_mem()` did at boot, if the linear map was built
    /// (`arm64.linear_map=1`).
    pub fn linear_map_report(&self) -> Option<&crate::arch::arm64::mmu::LinearMapReport> {
        self.linear_map.as_ref()
    }
    /// The fixmap's set/clear counts, if the fixmap was set up (with the
    /// linear map).
    pub fn fixmap_counts(&self) -> Option<crate::arch::arm64::fixmap::FixmapCounts> {
        self.fixmap.lock().as_ref().map(|f| f.counts())
    }
}

/// Counters of one per-CPU stat family summed over `cpus`: the one loop
/// behind every per-CPU sum (mm/vmstat.c `sum_vm_events()`).
fn sum_stat<'a, T: 'a, S: PerCpuStat>(cpus: impl Iterator<Item = &'a T>, stat: impl Fn(&T) -> &S) -> S::Counts {
    let mut s = S::Counts::default();
    for c in cpus {
        s.add(&stat(c).snapshot());
    }
    s
}

impl TableMemory for Machine {
    #[inline]
    fn ram(&self) -> &Arena {
        &self.arena
    }
}

/// The boot allocator for arch boot code: pages from memblock, marked
/// reserved (`memblock_phys_alloc()` before the page allocator runs).
impl EarlyAlloc for Machine {
    fn alloc(&self, size: u64, align: u64, what: &'static str) -> Result<PhysAddr, MemblockError> {
        let pooled = if (size, what) == (PAGE_SIZE, "pgtable") { self.table_pool.lock().pop_front() } else { None };
        let pa = match pooled {
            Some(pa) => pa,
            None => self.memblock.lock().alloc(size, align, what)?,
        };
        for pfn in pa.pfn().0..(pa.0 + size).div_ceil(PAGE_SIZE) {
            let p = self.memmap.page(Pfn(pfn));
            p.set_flag(pg::PG_RESERVED);
            p.set_ext(PageExt::Reserved);
        }
        Ok(pa)
    }
    fn memory(&self) -> Vec<(u64, u64)> {
        self.memblock.lock().memory().iter().map(|r| (r.base.0, r.end())).collect()
    }
}

/// The kernel image's own table pages, which are part of the image and
/// not memblock's (arch/arm64/kernel/vmlinux.lds.S): the fixmap's
/// `bm_pud`/`bm_pmd`/`bm_pte[]` (in the kernel's bss; mmlab puts them
/// right after `__bss_stop`, as `.pgtbl`), then `init_pg_dir`
/// (`INIT_DIR_SIZE`: 12 pages), whose pages after the first hold
/// `map_kernel()`'s tables. A bump allocator over one of those ranges,
/// zeroing each page.
#[derive(Debug)]
pub(crate) struct ImageTables<'m> {
    m: &'m Machine,
    next: std::cell::Cell<u64>,
    end: u64,
}

impl<'m> ImageTables<'m> {
    /// The fixmap's static tables.
    fn pgtbl_size(m: &Machine) -> u64 {
        m.fixmap_layout().nr_static_tables() as u64 * PAGE_SIZE
    }
    /// `.pgtbl`: the fixmap's static tables.
    pub(crate) fn pgtbl(m: &'m Machine, k: &crate::arch::arm64::kimage::KernelImage) -> Self {
        ImageTables { m, next: std::cell::Cell::new(k.bss_stop()), end: k.bss_stop() + Self::pgtbl_size(m) }
    }
    /// `init_pg_dir` past its root page: `map_kernel()`'s tables.
    pub(crate) fn init_pg_dir(m: &'m Machine, k: &crate::arch::arm64::kimage::KernelImage) -> Self {
        let root = k.bss_stop() + Self::pgtbl_size(m);
        ImageTables { m, next: std::cell::Cell::new(root + PAGE_SIZE), end: root + 12 * PAGE_SIZE }
    }
    fn take(&self, what: &'static str) -> Result<PhysAddr, MemblockError> {
        let pa = self.next.get();
        if pa + PAGE_SIZE > self.end {
            return Err(MemblockError::NoSpace { size: PAGE_SIZE, align: PAGE_SIZE, name: what });
        }
        self.next.set(pa + PAGE_SIZE);
        self.m.arena.zero(PhysAddr(pa), PAGE_SIZE);
        Ok(PhysAddr(pa))
    }
}

impl EarlyAlloc for ImageTables<'_> {
    fn alloc(&self, size: u64, align: u64, what: &'static str) -> Result<PhysAddr, MemblockError> {
        if size != PAGE_SIZE || align != PAGE_SIZE {
            return Err(MemblockError::NoSpace { size, align, name: what });
        }
        self.take(what)
    }
    fn memory(&self) -> Vec<(u64, u64)> {
        self.m.memory()
    }
}

impl<C: ?Sized> PgtableAlloc<C> for ImageTables<'_> {
    fn alloc_table(&self, _cpu: &C) -> Option<PhysAddr> {
        self.take("init_pg_dir").ok()
    }
    fn free_table(&self, _cpu: &C, _pa: PhysAddr) {
        // A page of the image: never freed.
    }
}

/// `early_pgtable_alloc()`: table pages from `Machine`'s memblock, during
/// boot (zeroed, reserved). Only valid before the page allocator takes
/// over memblock's free memory.
#[derive(Debug, Clone, Copy)]
pub struct MemblockTables<'m>(pub &'m Machine);

impl<C: ?Sized> PgtableAlloc<C> for MemblockTables<'_> {
    fn alloc_table(&self, _cpu: &C) -> Option<PhysAddr> {
        self.0.early_table_page().ok()
    }
    fn free_table(&self, _cpu: &C, _pa: PhysAddr) {
        // memblock_free of a boot table: the page stays reserved (simplified).
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        use crate::arch::arm64::barrier::{BarrierBackend, BarrierKind, ish, ishst};
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
        assert_eq!(c1.arch_data().barriers.snapshot().total(), 2);
    }
}
