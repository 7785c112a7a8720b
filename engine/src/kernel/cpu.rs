//! Emulated CPUs.
//!
//! An emulated CPU is a [`Cpu`] handle: its arch view (id, barriers, TLB,
//! lazy-MMU state: [`ArchCpu`]), its own data (event counters) and the RCU
//! state it reports to. It holds no reference to the machine. Every operation
//! that the kernel would run on some CPU takes the handle, which is the proof
//! of which CPU's per-cpu data it touches, like Asterinas' CPU guard or the
//! kernel's `preempt_disable()` + `this_cpu_ptr()`.
//!
//! At most one handle exists per CPU at a time (`Machine::cpu`
//! refuses a second), and a handle can be sent to a thread but not shared
//! between threads (`!Sync`). Together these make each CPU's counters
//! single-writer, so they are updated with plain relaxed stores.
//! `nr_threads = N` means N threads, each holding one handle.

use crate::arch::arm64::cpu::ArchCpu;
use crate::kernel::rcu::tree::{RcuCpu, RcuState};
use crate::mm::vmstat::VmEvents;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// A CPU's own data (`DEFINE_PER_CPU` state that is not an allocator's,
/// RCU's or the arch code's: those keep their own).
#[derive(Debug, Default)]
pub struct CpuData {
    claimed: AtomicBool,
    /// vmstat-style event counters.
    pub events: VmEvents,
}

impl CpuData {
    /// Try to become the one handle of this CPU.
    pub(crate) fn try_claim(&self) -> bool {
        self.claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }
}

/// Handle of one emulated CPU; see the module documentation. It contains
/// the CPU's arch view ([`ArchCpu`]) and dereferences to it, so arch
/// functions that take `&ArchCpu` take a `&Cpu` as well.
#[derive(Debug)]
pub struct Cpu<'m> {
    arch: ArchCpu<'m>,
    data: &'m CpuData,
    rcu: &'m RcuState,
    rcu_data: &'m RcuCpu,
    lock_stat: bool,
    _not_sync: PhantomData<Cell<()>>,
}

impl<'m> Cpu<'m> {
    /// The handle of a claimed CPU: its arch view, its kernel data, the
    /// RCU state it reports to, and whether locks keep lock_stat. Comes
    /// online for RCU at once.
    pub(crate) fn new(arch: ArchCpu<'m>, data: &'m CpuData, rcu: &'m RcuState, lock_stat: bool) -> Cpu<'m> {
        rcu.cpu_online(arch.id());
        let rcu_data = rcu.cpu(arch.id());
        Cpu { arch, data, rcu, rcu_data, lock_stat, _not_sync: PhantomData }
    }
    /// This CPU's data.
    #[inline]
    pub fn data(&self) -> &'m CpuData {
        self.data
    }
    /// The RCU state (`rcu_state`).
    #[inline]
    pub fn rcu_state(&self) -> &'m RcuState {
        self.rcu
    }
    /// This CPU's RCU data (`rcu_data`).
    #[inline]
    pub fn rcu_data(&self) -> &'m RcuCpu {
        self.rcu_data
    }
    /// Whether the machine's `lock_stat` switch is on (CONFIG_LOCK_STAT).
    #[inline]
    pub fn lock_stat(&self) -> bool {
        self.lock_stat
    }
}

impl<'m> std::ops::Deref for Cpu<'m> {
    type Target = ArchCpu<'m>;
    #[inline]
    fn deref(&self) -> &ArchCpu<'m> {
        &self.arch
    }
}

impl Drop for Cpu<'_> {
    fn drop(&mut self) {
        // Offline for RCU before another handle can be taken.
        self.rcu.cpu_offline(self.arch.id(), self.arch.trace_clock());
        self.data.claimed.store(false, Ordering::Release);
    }
}
