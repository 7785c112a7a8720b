//! lock_stat: the zone lock's accounting, after the kernel's
//! CONFIG_LOCK_STAT (`kernel/locking/lockdep.c`).
//!
//! A [`StatMutex`] is a [`SpinLock`] that counts acquisitions and
//! contention on the acquiring CPU and, when the machine's `lock_stat`
//! switch is on, the time the lock was held (measured host time) and
//! lock_stat's bounces ([`SpinLock::lock_stat`]).

use crate::clock;
use crate::kernel::cpu::Cpu;
use crate::mm::vmstat::{VmEvent, VmEvents};
use crate::sync::{SpinGuard, SpinLock};
use std::ops::{Deref, DerefMut};

/// A spinlock that accounts its use to the CPU that takes it.
#[derive(Debug)]
pub struct StatMutex<T> {
    inner: SpinLock<T>,
    events: StatEvents,
}

/// The counters a [`StatMutex`] books its acquisitions in: acquisitions and
/// contended acquisitions always; with the machine's `lock_stat` switch,
/// hold time (measured host ns) and lock_stat's acquisition and contention
/// bounces (see [`SpinLock::lock_stat`]).
#[derive(Clone, Copy, Debug)]
pub struct StatEvents {
    /// Acquisitions.
    pub acquire: VmEvent,
    /// Acquisitions that found the lock held.
    pub contended: VmEvent,
    /// Hold time, ns (with `lock_stat`).
    pub hold_ns: VmEvent,
    /// Acquisitions on another CPU than the last (with `lock_stat`).
    pub acq_bounce: VmEvent,
    /// Contended ones of those (with `lock_stat`).
    pub con_bounce: VmEvent,
}

/// Guard of a [`StatMutex`]; dropping it releases the lock and books the hold time.
#[derive(Debug)]
pub struct StatGuard<'a, T> {
    guard: SpinGuard<'a, T>,
    events: &'a VmEvents,
    hold_ns: VmEvent,
    start: Option<u64>,
}

impl<T> StatMutex<T> {
    /// Wrap `v`, booking into `events`.
    pub fn new(v: T, events: StatEvents) -> Self {
        StatMutex { inner: SpinLock::new(v), events }
    }

    /// `spin_lock_irqsave()` on behalf of `cpu`.
    #[inline]
    pub fn lock<'a>(&'a self, cpu: &Cpu<'a>) -> StatGuard<'a, T> {
        let events = cpu.events();
        let mut contended = false;
        let guard = match self.inner.try_lock() {
            Some(g) => g,
            None => {
                contended = true;
                events.add(self.events.contended, 1);
                self.inner.lock()
            }
        };
        events.add(self.events.acquire, 1);
        let start = if cpu.lock_stat() {
            self.book_bounce(&guard, cpu, contended);
            Some(clock::ticks())
        } else {
            None
        };
        StatGuard { guard, events, hold_ns: self.events.hold_ns, start }
    }

    /// lock_stat's bounces of an acquisition by `cpu` that holds `guard`.
    #[inline(never)]
    fn book_bounce(&self, guard: &SpinGuard<'_, T>, cpu: &Cpu<'_>, contended: bool) {
        if guard.note_cpu(cpu.id()) {
            let events = cpu.events();
            events.add(self.events.acq_bounce, 1);
            if contended {
                events.add(self.events.con_bounce, 1);
            }
        }
    }

    /// Lock without accounting (reports and invariant checks, which the
    /// kernel would not run on the allocation path).
    pub fn lock_unaccounted(&self) -> SpinGuard<'_, T> {
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
