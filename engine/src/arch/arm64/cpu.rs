//! The arm64 half of an emulated CPU: what arch code needs of the CPU it
//! runs on, and nothing of the layers above.
//!
//! The kernel's arch code runs on "this CPU" and reaches its state through
//! per-CPU variables and system-wide capabilities
//! (`system_supports_tlb_range()`, the boot options). mmlab passes that
//! state explicitly, as an [`ArchCpu`] handle:
//!
//! - [`Arm64`]: the system-wide part, fixed at boot: how barriers execute,
//!   whether lazy-MMU sections batch their barriers, FEAT_TLBIRANGE, the
//!   cost profile of what userspace cannot execute.
//! - [`ArchCpuData`]: one CPU's own arch state: its barrier counters, its
//!   TLB model with its TLBI counters, its lazy-MMU flags.
//! - [`ArchCpu`]: a CPU's view of both, with the RAM its tables live in,
//!   the vm event counters it bumps, the trace clock, every CPU's TLB (a
//!   broadcast TLBI reaches them all) and the [`SecondaryTlb`] that
//!   broadcasts also reach.
//!
//! The kernel's CPU handle ([`crate::kernel::cpu::Cpu`]) contains an
//! `ArchCpu` and dereferences to it, so arch functions take `&ArchCpu` and
//! a caller passes its `&Cpu`. Nothing here names a type of the kernel, mm
//! or machine layers except two leaves of mm: the vm event counters
//! ([`crate::mm::vmstat`], which every layer counts into, as
//! `count_vm_event()` is called from arch code too) and memblock's error
//! ([`EarlyAlloc`] hands boot code memblock's pages).

use crate::arch::arm64::barrier::{self, BarrierBackend, BarrierCounts, BarrierStats, DmbOption, DsbOption};
use crate::arch::arm64::cost::CostProfile;
use crate::arch::arm64::tlb::model::CpuTlb;
use crate::arch::arm64::tlb::tlbi::TlbiCounts;
use crate::arena::Arena;
use crate::counters::CounterSet;
use crate::mm::memblock::MemblockError;
use crate::mm::vmstat::{VmEvent, VmEvents};
use crate::trace::TraceClock;
use crossbeam::utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::AtomicBool;

/// The system-wide arm64 state, fixed at boot: CPU features and the boot
/// options arch code consults.
#[derive(Clone, Debug)]
pub struct Arm64 {
    /// How dmb/dsb/isb execute.
    pub barrier_backend: BarrierBackend,
    /// `arm64.lazy_mmu_barrier_batching`: lazy-MMU sections defer the
    /// `dsb ishst; isb` of valid kernel PTE writes to their end (6.16+).
    pub lazy_mmu_barrier_batching: bool,
    /// FEAT_TLBIRANGE (`system_supports_tlb_range()`).
    pub tlbi_range: bool,
    /// Modelled costs of TLBIs, their completion and grace periods.
    pub cost_profile: CostProfile,
    /// `swapper_pg_dir`: the kernel's root table.
    pub swapper_pg_dir: crate::addr::PhysAddr,
    /// The VA layout the kernel runs with (`vabits_actual`: 52 with
    /// FEAT_LPA2, five levels; 48 without, four).
    pub va: crate::arch::arm64::memory::VaLayout,
}

/// Per-CPU lazy-MMU state: `TIF_LAZY_MMU` and `TIF_LAZY_MMU_PENDING`.
/// Only the owning CPU's thread touches it.
#[derive(Debug, Default)]
pub struct LazyMmu {
    pub(crate) active: AtomicBool,
    pub(crate) pending: AtomicBool,
}

/// One CPU's arch state.
#[derive(Debug)]
pub struct ArchCpuData {
    /// dmb/dsb/isb counts and modelled barrier time.
    pub barriers: BarrierStats,
    /// This CPU's TLB model, its TLBI counters and its soft-MMU cache.
    pub tlb: CpuTlb,
    /// Lazy-MMU state (`TIF_LAZY_MMU`, `TIF_LAZY_MMU_PENDING`).
    pub lazy_mmu: LazyMmu,
}

impl ArchCpuData {
    /// A CPU's arch state with a TLB model of `tlb_entries` entries.
    pub fn new(tlb_entries: usize) -> ArchCpuData {
        ArchCpuData { barriers: BarrierStats::new(), tlb: CpuTlb::new(tlb_entries), lazy_mmu: LazyMmu::default() }
    }
}

/// A cache of translations outside the CPUs' TLBs that broadcast TLB
/// maintenance must reach. [`crate::arch::arm64::tlb::flush::tlbi`] calls
/// it with the VA range `[start, end)` of every op that covers addresses
/// (`[0, u64::MAX)` for `vmalle1is`; ASID-only ops cover none). Mirrors the
/// arm64 flush functions' call of
/// `mmu_notifier_arch_invalidate_secondary_tlbs()`; the one registered at
/// boot is the memmap's (the struct-page accessor's cached vmemmap
/// translations). It lets the TLB code reach state owned by a higher layer
/// without naming it.
pub trait SecondaryTlb: Sync + std::fmt::Debug {
    /// Drop what is cached for `[start, end)`.
    fn invalidate_range(&self, start: u64, end: u64);
}

/// The boot allocator (memblock) as arch boot code sees it: the linear
/// map and the fixmap take their table pages from it, and `map_mem()`
/// walks its memory regions.
pub trait EarlyAlloc {
    /// A page from memblock, marked reserved in its struct page and not
    /// zeroed (`memblock_phys_alloc()`); `what` names the caller.
    ///
    /// # Errors
    ///
    /// [`MemblockError`] when memblock has no page left.
    fn alloc_page(&self, what: &'static str) -> Result<crate::addr::PhysAddr, MemblockError> {
        self.alloc(crate::addr::PAGE_SIZE, crate::addr::PAGE_SIZE, what)
    }
    /// `size` bytes aligned to `align` from memblock, top-down, each page
    /// marked reserved, not zeroed (`memblock_phys_alloc()`).
    ///
    /// # Errors
    ///
    /// [`MemblockError`] when memblock has no such range left.
    fn alloc(&self, size: u64, align: u64, what: &'static str) -> Result<crate::addr::PhysAddr, MemblockError>;
    /// The memory regions as `[start, end)` (`for_each_mem_range()`).
    fn memory(&self) -> Vec<(u64, u64)>;
}

/// The arm64 view of one emulated CPU; see the module documentation.
///
/// Like the kernel's CPU handle that contains it, it is neither `Copy` nor
/// `Sync`: its counters have one writer, the thread driving the CPU.
#[derive(Debug)]
pub struct ArchCpu<'m> {
    id: usize,
    arch: &'m Arm64,
    data: &'m ArchCpuData,
    cpus: &'m [CachePadded<ArchCpuData>],
    ram: &'m Arena,
    events: &'m VmEvents,
    clock: &'m TraceClock,
    secondary_tlb: &'m dyn SecondaryTlb,
    system_id: usize,
    _not_sync: PhantomData<Cell<()>>,
}

/// What an [`ArchCpu`] is built from: the system's state, shared by every
/// CPU of a machine.
#[derive(Clone, Copy, Debug)]
pub struct ArchSystem<'m> {
    /// The system-wide arm64 state.
    pub arch: &'m Arm64,
    /// Every CPU's arch state, by id.
    pub cpus: &'m [CachePadded<ArchCpuData>],
    /// The RAM the tables live in.
    pub ram: &'m Arena,
    /// The logical clock of trace timestamps.
    pub clock: &'m TraceClock,
    /// The secondary TLB that broadcast TLBIs reach.
    pub secondary_tlb: &'m dyn SecondaryTlb,
    /// A number naming the system (its owner's address), the same for
    /// every CPU of it: one compare tells a foreign CPU handle.
    pub id: usize,
}

impl<'m> ArchCpu<'m> {
    /// CPU `id` of `sys`, counting its vm events into `events`. `id` must be
    /// below `sys.cpus.len()`.
    pub fn new(id: usize, sys: ArchSystem<'m>, events: &'m VmEvents) -> ArchCpu<'m> {
        ArchCpu {
            id,
            arch: sys.arch,
            data: &sys.cpus[id],
            cpus: sys.cpus,
            ram: sys.ram,
            events,
            clock: sys.clock,
            secondary_tlb: sys.secondary_tlb,
            system_id: sys.id,
            _not_sync: PhantomData,
        }
    }
    /// `smp_processor_id()`.
    #[inline]
    pub fn id(&self) -> usize {
        self.id
    }
    /// The system-wide arm64 state.
    #[inline]
    pub fn arch(&self) -> &'m Arm64 {
        self.arch
    }
    /// This CPU's arch state.
    #[inline]
    pub fn arch_data(&self) -> &'m ArchCpuData {
        self.data
    }
    /// Every CPU's arch state, in id order (for broadcasts).
    #[inline]
    pub fn all_arch_data(&self) -> impl Iterator<Item = &'m ArchCpuData> + 'm {
        self.cpus.iter().map(|c| &**c)
    }
    /// The RAM the tables live in.
    #[inline]
    pub fn ram(&self) -> &'m Arena {
        self.ram
    }
    /// This CPU's vm event counters.
    #[inline]
    pub fn events(&self) -> &'m VmEvents {
        self.events
    }
    /// `count_vm_events()` on this CPU.
    #[inline]
    pub fn count(&self, e: VmEvent, n: u64) {
        self.events.add(e, n)
    }
    /// The logical clock of trace timestamps.
    #[inline]
    pub fn trace_clock(&self) -> &'m TraceClock {
        self.clock
    }
    /// The secondary TLB that broadcast TLBIs reach.
    #[inline]
    pub fn secondary_tlb(&self) -> &'m dyn SecondaryTlb {
        self.secondary_tlb
    }
    /// The number naming this CPU's system ([`ArchSystem::id`]).
    #[inline]
    pub fn system_id(&self) -> usize {
        self.system_id
    }
    /// `dmb(opt)` on this CPU, executed by the system's barrier backend.
    #[inline]
    pub fn dmb<O: DmbOption>(&self, o: O) {
        barrier::dmb(&self.arch.barrier_backend, &self.data.barriers, o);
        crate::trace::mmlab::dmb(self.id, self.clock, O::NAME);
    }
    /// `dsb(opt)` on this CPU.
    #[inline]
    pub fn dsb<O: DsbOption>(&self, o: O) {
        barrier::dsb(&self.arch.barrier_backend, &self.data.barriers, o);
        crate::trace::mmlab::dsb(self.id, self.clock, O::NAME);
    }
    /// `isb()` on this CPU.
    #[inline]
    pub fn isb(&self) {
        barrier::isb(&self.arch.barrier_backend, &self.data.barriers);
        crate::trace::mmlab::isb(self.id, self.clock);
    }
    /// TLBI counts summed over every CPU of the system.
    pub fn system_tlbi_counts(&self) -> TlbiCounts {
        let mut s = TlbiCounts::default();
        for c in self.cpus.iter() {
            s.add(&c.tlb.tlbi_stats().snapshot());
        }
        s
    }
    /// Barrier counts summed over every CPU of the system.
    pub fn system_barrier_counts(&self) -> BarrierCounts {
        let mut s = BarrierCounts::default();
        for c in self.cpus.iter() {
            s.add(&c.barriers.snapshot());
        }
        s
    }
}
