//! Locks and atomics, behind one facade so that a model checker (loom) or a
//! controlled scheduler (shuttle) can replace them.
//!
//! Built with `RUSTFLAGS="--cfg loom"`, [`Mutex`] and the [`atomic`] types
//! are loom's, so code written against this module (vmalloc's lazy-area
//! accounting, for one) can be model-checked as it is. Such a build only
//! runs loom models: loom's primitives work inside `loom::model` alone, so a
//! whole machine is never booted under it.
//!
//! Built with `RUSTFLAGS="--cfg shuttle"`, every interleaving point of the
//! concurrent paths is a scheduling point of shuttle's scheduler (see
//! `sync::sched`, present only in that build): the [`atomic`] types are
//! shuttle's; [`Mutex`] and [`SpinLock`] switch to the scheduler before each
//! acquisition and yield to it while they wait; the struct page accessors
//! that arbitrate a free call [`sched_point`]; [`thread_local!`] is
//! shuttle's, so each shuttle thread (an emulated CPU) has its own. A whole
//! machine boots inside a shuttle execution, and a failing interleaving is
//! named by the scheduler's seed and replayed from its schedule
//! (tests/tests/shuttle.rs, scripts/shuttle.sh).
//!
//! mmlab's sleeping locks are parking_lot's. [`SpinLock`] is the kernel's
//! `spinlock_t`: a test-and-set lock whose release is a plain store, for the
//! per-cpu pagesets (taken with `trylock` on the local fast path,
//! `pcp_spin_trylock`, and spun on by remote drains), vmalloc's
//! `free_vmap_area_lock` and vmap-node busy and pool locks, each CPU's TLB
//! model, and inside the zone lock
//! ([`crate::kernel::lockstat::StatMutex`], which adds lock_stat's
//! accounting on top).
//! A waiter spins as the kernel's would, rather than sleeping in the host
//! kernel (a parked waiter costs a futex wait and a wake, microseconds, for a
//! hold of tens of nanoseconds); after a while it yields the host CPU, since
//! the holder's host thread may have been descheduled.

#[cfg(not(any(loom, shuttle)))]
pub use parking_lot::{Mutex, MutexGuard};

#[cfg(loom)]
pub use loom_lock::{Mutex, MutexGuard};

#[cfg(all(shuttle, not(loom)))]
pub use sched::{Mutex, MutexGuard};

/// Thread-locals: std's, or shuttle's under `--cfg shuttle` (one per shuttle
/// thread, where std's would be shared by every shuttle thread of the one
/// host thread that runs them).
#[cfg(not(shuttle))]
pub use std::thread_local;

#[cfg(shuttle)]
pub use shuttle::thread_local;

/// A scheduling point for shuttle: nothing in other builds. Called where two
/// CPUs race through memory the facade does not own (the struct pages in
/// the arena), so that shuttle can switch CPUs between a check and the
/// update it guards.
#[inline(always)]
pub fn sched_point() {
    #[cfg(shuttle)]
    sched::point();
}

/// The shuttle backend (`--cfg shuttle` only): scheduling points, the
/// controlled phase, and the test-only reverts of old race fixes.
#[cfg(shuttle)]
pub mod sched;

/// Atomics (`std::sync::atomic`, or loom's under `--cfg loom`, shuttle's
/// under `--cfg shuttle`).
pub mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    #[cfg(all(shuttle, not(loom)))]
    pub use shuttle::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    #[cfg(not(any(loom, shuttle)))]
    pub use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

/// loom's Mutex with parking_lot's interface (no poisoning).
#[cfg(loom)]
mod loom_lock {
    /// A mutex checked by loom.
    #[derive(Debug)]
    pub struct Mutex<T>(loom::sync::Mutex<T>);
    /// Its guard.
    pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        /// A new unlocked mutex.
        pub fn new(v: T) -> Self {
            Mutex(loom::sync::Mutex::new(v))
        }
        /// Lock, blocking.
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
        /// Lock if free.
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok()
        }
    }
    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }
}

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A test-and-set spin lock (`spinlock_t`): `try_lock` is one compare-exchange,
/// unlock one release store.
///
/// [`lock_stat`](SpinLock::lock_stat) takes it the way CONFIG_LOCK_STAT's
/// `lock_acquired()` and `lock_contended()` see an acquisition: whether it
/// had to wait, and whether the lock was last taken on another CPU (a
/// *bounce*: the lock's cache line, and usually the data it guards, had to
/// come from that CPU's cache). The last CPU is a word beside the lock
/// flag, written only by the holder.
pub struct SpinLock<T> {
    locked: AtomicBool,
    /// The CPU that last took the lock and said so ([`SpinLock::lock_stat`],
    /// [`SpinGuard::note_cpu`]).
    last_cpu: LastCpu,
    value: UnsafeCell<T>,
}

/// lock_stat's record of the CPU that last took a lock (the kernel's
/// `lock->cpu`), or that last wrote a shared atomic: the CPU plus one, 0
/// for none yet. Each method records `cpu` and returns whether another
/// CPU was recorded before (a bounce).
#[derive(Debug, Default)]
pub struct LastCpu(AtomicU32);

impl LastCpu {
    /// No CPU recorded yet.
    pub const fn new() -> LastCpu {
        LastCpu(AtomicU32::new(0))
    }

    /// For a holder of the lock it belongs to: a relaxed load and, on a
    /// change, a store (the lock orders the holders).
    #[inline]
    pub fn note(&self, cpu: usize) -> bool {
        let me = Self::tag(cpu);
        let last = self.0.load(Ordering::Relaxed);
        if last != me {
            self.0.store(me, Ordering::Relaxed);
        }
        last != 0 && last != me
    }

    /// For a shared atomic with no lock around it: one swap.
    #[inline]
    pub fn swap(&self, cpu: usize) -> bool {
        let me = Self::tag(cpu);
        let last = self.0.swap(me, Ordering::Relaxed);
        last != 0 && last != me
    }

    fn tag(cpu: usize) -> u32 {
        u32::try_from(cpu).map_or(u32::MAX, |c| c.saturating_add(1))
    }
}

/// What one acquisition by [`SpinLock::lock_stat`] met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockAcq {
    /// The lock was held: the CPU waited (`lock_contended()`).
    pub contended: bool,
    /// Another CPU took the lock last (lock_stat's acquisition bounce; with
    /// `contended`, a contention bounce).
    pub bounced: bool,
}

// SAFETY: the lock hands out access to `value` to one holder at a time
// (acquire on lock, release on unlock), so sharing the lock between threads
// is sound whenever T itself may be sent between them.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("SpinLock").field("value", &*g).finish(),
            None => f.write_str("SpinLock(<locked>)"),
        }
    }
}

/// Guard of a [`SpinLock`].
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for SpinGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T> SpinLock<T> {
    /// `DEFINE_SPINLOCK` around `v`.
    pub const fn new(v: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), last_cpu: LastCpu::new(), value: UnsafeCell::new(v) }
    }

    /// `spin_lock()` by CPU `cpu`, as lock_stat sees it (see the type's
    /// documentation): the guard, and whether this acquisition waited and
    /// whether it bounced.
    #[inline]
    pub fn lock_stat(&self, cpu: usize) -> (SpinGuard<'_, T>, LockAcq) {
        let (guard, contended) = match self.try_lock() {
            Some(g) => (g, false),
            None => (self.lock(), true),
        };
        let bounced = guard.note_cpu(cpu);
        (guard, LockAcq { contended, bounced })
    }

    /// `spin_trylock()`.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        sched_point();
        // Build the guard only on success: a guard dropped after a failed
        // attempt would release somebody else's lock.
        match self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(SpinGuard { lock: self }),
            Err(_) => None,
        }
    }

    /// `spin_lock()`: spin (yielding the host CPU after a while, since an
    /// emulated CPU's thread can be descheduled while holding it).
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            self.wait_unlocked(&mut spins);
        }
    }

    /// Wait until the lock looks free: spin, then yield the host CPU.
    #[cfg(not(shuttle))]
    #[inline]
    fn wait_unlocked(&self, spins: &mut u32) {
        while self.locked.load(Ordering::Relaxed) {
            *spins += 1;
            if *spins < 128 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Under shuttle every emulated CPU runs on one host thread: a waiter
    /// hands the CPU to shuttle's scheduler (as a yield, so that PCT lowers
    /// its priority and the holder runs) and tries again.
    #[cfg(shuttle)]
    #[inline]
    fn wait_unlocked(&self, spins: &mut u32) {
        *spins += 1;
        sched::spin_wait();
    }
}

impl<T> SpinGuard<'_, T> {
    /// Record that CPU `cpu` holds the lock now; returns whether another
    /// CPU held it last (a lock_stat bounce). Plain [`SpinLock::lock`]
    /// callers that never call it leave the record as it was.
    #[inline]
    pub fn note_cpu(&self, cpu: usize) -> bool {
        self.lock.last_cpu.note(cpu)
    }
}

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock, so
        // no other reference to the value is live.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for Deref; `&mut self` makes this the only access.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::{LockAcq, SpinLock};

    #[test]
    fn spinlock_excludes_and_counts() {
        let l = SpinLock::new(0u64);
        {
            let g = l.try_lock().unwrap();
            assert!(l.try_lock().is_none(), "second trylock must fail while held");
            drop(g);
        }
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*l.lock(), 20_000);
    }

    #[test]
    fn lock_stat_counts_a_bounce_when_another_cpu_took_the_lock_last() {
        let l = SpinLock::new(());
        let acq = |cpu| l.lock_stat(cpu).1;
        let clean = LockAcq { contended: false, bounced: false };
        assert_eq!(acq(0), clean, "the first acquisition has no previous CPU");
        assert_eq!(acq(0), clean, "same CPU again: the line stayed");
        assert_eq!(acq(1), LockAcq { contended: false, bounced: true });
        assert_eq!(acq(1), clean);
        assert_eq!(acq(0), LockAcq { contended: false, bounced: true });
        // A plain lock() leaves the last CPU as it was.
        drop(l.lock());
        assert_eq!(acq(0), clean);
        // From another thread (whether or not it had to wait for this
        // one's guard): a bounce.
        let g = l.lock_stat(0).0;
        std::thread::scope(|s| {
            let h = s.spawn(|| l.lock_stat(1).1);
            drop(g);
            assert!(h.join().expect("no panic").bounced);
        });
        assert_eq!(acq(1), clean);
    }
}
