//! A cheap host cycle counter for lock hold times (measured host time).
//!
//! x86_64 reads the TSC, aarch64 the virtual counter `CNTVCT_EL0`; both are
//! converted to nanoseconds with a factor found once per process. Reading it
//! costs a few nanoseconds, which is why lock timing is a switch
//! (`lock_stat`, after the kernel's CONFIG_LOCK_STAT) and off by default.

use std::sync::OnceLock;
use std::time::Instant;

/// Raw counter ticks.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no memory effects and is available on every
        // x86_64 CPU; it only reads the time-stamp counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: CNTVCT_EL0 is readable at EL0 on Linux (the kernel enables
        // EL0 access to the virtual counter); the read has no side effects.
        unsafe { core::arch::asm!("mrs {v}, cntvct_el0", v = out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds per tick, measured once against the host's monotonic clock.
fn ns_per_tick() -> f64 {
    static F: OnceLock<f64> = OnceLock::new();
    *F.get_or_init(|| {
        let (t0, c0) = (Instant::now(), ticks());
        while t0.elapsed().as_micros() < 2000 {
            std::hint::spin_loop();
        }
        let (ns, c) = (t0.elapsed().as_nanos() as f64, ticks().wrapping_sub(c0));
        if c == 0 { 1.0 } else { ns / c as f64 }
    })
}

/// Convert a tick count to nanoseconds.
#[inline]
pub fn ticks_to_ns(t: u64) -> u64 {
    (t as f64 * ns_per_tick()) as u64
}

#[cfg(test)]
mod tests {
    /// The counter advances across a sleep, and its conversion agrees with
    /// the host's monotonic clock over the same interval to within 2x. Not
    /// a bound on the sleep itself: a loaded host or qemu-user may stretch
    /// it, and the 2 ms calibration may be off by tens of percent there
    /// (one run under qemu-aarch64 read a 5 ms sleep as 4.0 ms).
    #[test]
    fn advances_and_converts() {
        let (t0, a) = (std::time::Instant::now(), super::ticks());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (d, wall) = (super::ticks().wrapping_sub(a), t0.elapsed().as_nanos() as f64);
        assert!(d > 0, "the counter did not advance");
        let ns = super::ticks_to_ns(d) as f64;
        assert!((0.5..=2.0).contains(&(ns / wall)), "{ns} ns by the counter against {wall} ns by Instant");
    }
}
