//! Locks, behind one facade so that a model checker (loom) can replace them.
//!
//! mmlab's locks are parking_lot's. The zone lock is wrapped in a
//! [`StatMutex`], which counts acquisitions and contention on the acquiring
//! CPU and, when the machine's `lock_stat` switch is on (after the kernel's
//! CONFIG_LOCK_STAT), the time the lock was held, in measured host time.

pub use parking_lot::{Mutex, MutexGuard};

use crate::clock;
use crate::cpu::Cpu;
use crate::vmstat::{VmEvent, VmEvents};
use std::ops::{Deref, DerefMut};

/// A mutex that accounts its use to the CPU that takes it.
#[derive(Debug)]
pub struct StatMutex<T> {
    inner: Mutex<T>,
    acquire: VmEvent,
    contended: VmEvent,
    hold_ns: VmEvent,
}

/// Guard of a [`StatMutex`]; dropping it releases the lock and books the hold time.
#[derive(Debug)]
pub struct StatGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    events: &'a VmEvents,
    hold_ns: VmEvent,
    start: Option<u64>,
}

impl<T> StatMutex<T> {
    /// Wrap `v`; the three counters record acquisitions, contended
    /// acquisitions and hold time.
    pub fn new(v: T, acquire: VmEvent, contended: VmEvent, hold_ns: VmEvent) -> Self {
        StatMutex { inner: Mutex::new(v), acquire, contended, hold_ns }
    }

    /// `spin_lock_irqsave()` on behalf of `cpu`.
    #[inline]
    pub fn lock<'a>(&'a self, cpu: &Cpu<'a>) -> StatGuard<'a, T> {
        let events = cpu.events();
        let guard = match self.inner.try_lock() {
            Some(g) => g,
            None => {
                events.add(self.contended, 1);
                self.inner.lock()
            }
        };
        events.add(self.acquire, 1);
        let start = cpu.machine().config().lock_stat.then(clock::ticks);
        StatGuard { guard, events, hold_ns: self.hold_ns, start }
    }

    /// Lock without accounting (reports and invariant checks, which the
    /// kernel would not run on the allocation path).
    pub fn lock_unaccounted(&self) -> MutexGuard<'_, T> {
        self.inner.lock()
    }
}

impl<T> Deref for StatGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.guard
    }
}
impl<T> DerefMut for StatGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for StatGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if let Some(s) = self.start {
            self.events.add(self.hold_ns, clock::ticks_to_ns(clock::ticks().wrapping_sub(s)));
        }
    }
}
