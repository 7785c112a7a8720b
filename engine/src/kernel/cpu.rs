//! Emulated CPUs.
//!
//! An emulated CPU is a [`Cpu`] handle: its id, a reference to the machine and
//! to the CPU's own data (event counters, barrier counters). Every operation
//! that the kernel would run on some CPU takes the handle, which is the proof
//! of which CPU's per-cpu data it touches, like Asterinas' CPU guard or the
//! kernel's `preempt_disable()` + `this_cpu_ptr()`.
//!
//! At most one handle exists per CPU at a time ([`crate::Machine::cpu`]
//! refuses a second), and a handle can be sent to a thread but not shared
//! between threads (`!Sync`). Together these make each CPU's counters
//! single-writer, so they are updated with plain relaxed stores.
//! `nr_threads = N` means N threads, each holding one handle.

use crate::arch::arm64::barrier::{self, BarrierStats, DmbOption, DsbOption};
use crate::machine::Machine;
use crate::mm::vmstat::{VmEvent, VmEvents};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// A CPU's own data (`DEFINE_PER_CPU` state that is not an allocator's).
#[derive(Debug)]
pub struct CpuData {
    claimed: AtomicBool,
    /// vmstat-style event counters.
    pub events: VmEvents,
    /// dmb/dsb/isb counts and modelled barrier time.
    pub barriers: BarrierStats,
    /// This CPU's TLB model, its TLBI counters and its soft-MMU cache.
    pub tlb: crate::arch::arm64::tlb::CpuTlb,
    /// Lazy-MMU state (`TIF_LAZY_MMU`, `TIF_LAZY_MMU_PENDING`).
    pub lazy_mmu: crate::arch::arm64::pgtable::LazyMmu,
    /// RCU state (`rcu_data`) and counters.
    pub rcu: crate::kernel::rcu::RcuCpu,
}

impl CpuData {
    pub(crate) fn new(cfg: &crate::machine::MachineConfig) -> CpuData {
        CpuData {
            claimed: AtomicBool::new(false),
            events: VmEvents::default(),
            barriers: BarrierStats::new(),
            tlb: crate::arch::arm64::tlb::CpuTlb::new(cfg.tlb_entries),
            lazy_mmu: crate::arch::arm64::pgtable::LazyMmu::default(),
            rcu: crate::kernel::rcu::RcuCpu::new(),
        }
    }

    pub(crate) fn try_claim(&self) -> bool {
        self.claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }
}

/// Handle of one emulated CPU; see the module documentation.
#[derive(Debug)]
pub struct Cpu<'m> {
    id: usize,
    machine: &'m Machine,
    data: &'m CpuData,
    _not_sync: PhantomData<Cell<()>>,
}

impl<'m> Cpu<'m> {
    pub(crate) fn new(id: usize, machine: &'m Machine, data: &'m CpuData) -> Cpu<'m> {
        Cpu { id, machine, data, _not_sync: PhantomData }
    }
    /// `smp_processor_id()`.
    #[inline]
    pub fn id(&self) -> usize {
        self.id
    }
    /// The machine this CPU belongs to.
    #[inline]
    pub fn machine(&self) -> &'m Machine {
        self.machine
    }
    /// This CPU's counters.
    #[inline]
    pub fn events(&self) -> &'m VmEvents {
        &self.data.events
    }
    /// This CPU's data.
    #[inline]
    pub fn data(&self) -> &'m CpuData {
        self.data
    }
    /// `count_vm_events()` on this CPU.
    #[inline]
    pub fn count(&self, e: VmEvent, n: u64) {
        self.data.events.add(e, n)
    }
    /// `dmb(opt)` on this CPU, executed by the machine's barrier backend.
    #[inline]
    pub fn dmb<O: DmbOption>(&self, o: O) {
        barrier::dmb(&self.machine.config().barrier_backend, &self.data.barriers, o);
        crate::trace::mmlab::dmb(self.id, self.machine.trace_clock(), O::NAME);
    }
    /// `dsb(opt)` on this CPU.
    #[inline]
    pub fn dsb<O: DsbOption>(&self, o: O) {
        barrier::dsb(&self.machine.config().barrier_backend, &self.data.barriers, o);
        crate::trace::mmlab::dsb(self.id, self.machine.trace_clock(), O::NAME);
    }
    /// `isb()` on this CPU.
    #[inline]
    pub fn isb(&self) {
        barrier::isb(&self.machine.config().barrier_backend, &self.data.barriers);
        crate::trace::mmlab::isb(self.id, self.machine.trace_clock());
    }
}

impl Drop for Cpu<'_> {
    fn drop(&mut self) {
        // Offline for RCU before another handle can be taken.
        crate::kernel::rcu::rcu_cpu_offline(self);
        self.data.claimed.store(false, Ordering::Release);
    }
}
