//! The shuttle backend of the [`sync`](super) facade (`--cfg shuttle`).
//!
//! Shuttle runs every thread of a test as a coroutine on one host thread
//! and picks, at each scheduling point, which one runs next; its random
//! and PCT schedulers pick from a seed, and the decisions it made (the
//! schedule) replay the execution exactly. Here the scheduling points are
//! the facade's: each [`Mutex`] and [`SpinLock`](super::SpinLock)
//! acquisition, each operation on the facade's atomics (shuttle's own),
//! each [`sched_point`](super::sched_point) (the struct page accessors
//! that arbitrate a free), and each turn of an RCU grace-period wait
//! (`synchronize_rcu()`, `rcu_barrier()`: the waiter yields until the other
//! CPUs have reported, where other builds sleep on a condition variable).
//!
//! Points count only in the *controlled* phase ([`set_controlled`]): the
//! boot of the machine inside an execution runs on one shuttle thread, and
//! its hundreds of thousands of lock acquisitions would only lengthen every
//! schedule (and spread PCT's few priority changes over steps where no
//! other CPU can run).
//!
//! [`Revert`] switches an old race fix back off, for a shuttle test to show
//! that the scheduler finds the race; it exists in this build alone.

use std::cell::Cell;

/// A sleeping lock with parking_lot's interface whose waiters yield to
/// shuttle's scheduler instead of blocking the one host thread.
#[derive(Debug, Default)]
pub struct Mutex<T>(parking_lot::Mutex<T>);

/// Its guard (parking_lot's: releasing is not a scheduling point, the next
/// acquisition is).
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub const fn new(v: T) -> Self {
        Mutex(parking_lot::Mutex::new(v))
    }

    /// `mutex_lock()`: a scheduling point, then try until free, yielding to
    /// the scheduler between tries.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        point();
        loop {
            if let Some(g) = self.0.try_lock() {
                return g;
            }
            spin_wait();
        }
    }

    /// `mutex_trylock()`: a scheduling point, then one try.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        point();
        self.0.try_lock()
    }

    /// The value, the lock consumed.
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }

    /// The value through an exclusive borrow.
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut()
    }
}

thread_local! {
    /// Whether scheduling points count on this host thread (the one that
    /// runs every shuttle thread of an execution).
    static CONTROLLED: Cell<bool> = const { Cell::new(false) };
    /// The reverted fixes, one bit per [`Revert`].
    static REVERTED: Cell<u32> = const { Cell::new(0) };
}

/// Start (`true`) or end the controlled phase on this host thread: from now
/// on each scheduling point lets shuttle switch to another thread. A test
/// turns it on after the boot, before it spawns the CPUs' threads, and off
/// after joining them; each execution starts with it off.
pub fn set_controlled(on: bool) {
    CONTROLLED.with(|c| c.set(on));
}

/// Whether the controlled phase is on.
pub fn controlled() -> bool {
    CONTROLLED.with(Cell::get)
}

/// A scheduling point: in the controlled phase of a running execution,
/// shuttle's scheduler picks the thread that runs next.
#[inline]
pub fn point() {
    if controlled() {
        shuttle_engine::runtime::thread::switch_if_not_stopping();
    }
}

/// One step of a wait for a lock another thread holds: in the controlled
/// phase a yield to shuttle's scheduler (PCT lowers the waiter's priority,
/// so that the holder runs); else a spin hint (with one host thread and no
/// other shuttle thread running, a lock can only be held by a caller that
/// took it twice).
#[inline]
pub fn spin_wait() {
    if controlled() && !shuttle_engine::runtime::execution::ExecutionState::should_stop() {
        shuttle::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// An old race fix that a shuttle test may switch back off, to show that
/// the scheduler finds the race the fix closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revert {
    /// vmalloc's lazy free puts the area on its node's lazy list before
    /// adding its pages to `vmap_lazy_nr` (the order before a87edc3): a
    /// purge on another CPU can take the area and subtract its pages first,
    /// and the counter dips below zero.
    LazyInsertBeforeAdd,
    /// `put_page_testzero()` is a plain decrement (before a87edc3): two
    /// CPUs freeing one page both pass the state check, both decrement, and
    /// both frees succeed with the refcount at -1.
    PutTestzeroDecrement,
}

impl Revert {
    fn bit(self) -> u32 {
        match self {
            Revert::LazyInsertBeforeAdd => 1,
            Revert::PutTestzeroDecrement => 2,
        }
    }
}

/// Switch `fix` back off (`true`) or on again, on this host thread.
pub fn set_reverted(fix: Revert, reverted: bool) {
    REVERTED.with(|r| r.set(if reverted { r.get() | fix.bit() } else { r.get() & !fix.bit() }));
}

/// Whether `fix` is switched off on this host thread.
#[inline]
pub fn reverted(fix: Revert) -> bool {
    REVERTED.with(|r| r.get() & fix.bit() != 0)
}
