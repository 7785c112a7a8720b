//! The deterministic logical clock every tracepoint stamps its events with.

use std::sync::atomic::{AtomicU64, Ordering};

/// Deterministic logical clock for traces.
///
/// Every emitted event takes the next tick; a tick is one microsecond of
/// trace time, so the first event is stamped `0.000001`. Traces must be
/// identical for the same seed on every host and every run, which host
/// clocks cannot give; a counter that moves only when an event is actually
/// emitted can. Ticks are taken only inside enabled tracepoints, so turning
/// tracing off does not change any later timestamp's meaning and costs no
/// atomic operation.
#[derive(Debug, Default)]
pub struct TraceClock {
    now: AtomicU64,
}

impl TraceClock {
    /// A clock at 0 (no event emitted yet).
    pub const fn new() -> Self {
        TraceClock { now: AtomicU64::new(0) }
    }

    /// Advances by one tick and returns the new time (the first call returns 1).
    #[inline]
    pub fn tick(&self) -> u64 {
        self.now.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The time of the last tick taken (0 if none).
    #[inline]
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// Back to 0, as at the start of a run.
    pub fn reset(&self) {
        self.now.store(0, Ordering::Relaxed);
    }
}
