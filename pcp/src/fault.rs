//! Fault injection for the page allocator: `fail_page_alloc`
//! (mm/fail_page_alloc.c on top of lib/fault-inject.c).
//!
//! # The algorithm
//!
//! The kernel decides in `prepare_alloc_pages()` whether an allocation is to
//! fail, before any list is looked at: `should_fail_alloc_page(gfp, order)`
//! first filters out what fail_page_alloc never fails (`__GFP_NOFAIL`;
//! orders below `min-order`; allocations that may reclaim when
//! `ignore-gfp-wait` is set, `__GFP_HIGHMEM` ones when `ignore-gfp-highmem`
//! is set), then asks the generic `should_fail()` of lib/fault-inject.c,
//! which applies its attributes in this order:
//!
//! 0. `probability` 0: nothing else is looked at (no budget is spent);
//! 1. `times`: once that many failures were injected, never again (-1: no
//!    limit);
//! 2. `space`: requests pass while the budget is larger than their size,
//!    each taking its size off it; fail_page_alloc passes `1 << order`, so
//!    the budget counts pages;
//! 3. `interval`: only every `interval`-th request that got this far is a
//!    candidate;
//! 4. `probability`: a candidate fails with this percentage.
//!
//! A failed allocation then takes the normal failure exit: the caller sees
//! NULL (here `None` or [`crate::AllocError::NoMemory`]) and must release
//! whatever it took before, which is what the error paths under test have
//! to get right.
//!
//! Before all of these, `fail-nth` (`/proc/self/task/<tid>/fail-nth`,
//! checked first by `should_fail_ex()`): while the task's countdown is
//! armed, each request that passed the filters counts it down and the one
//! that reaches zero fails, whatever the attributes say; the random path is
//! not consulted meanwhile. With `probability` 0 only fail-nth fails
//! anything: how syzkaller reproduces one chosen failure, and how
//! `mmlab replay` reproduces the failures a fuzz run injected.
//!
//! Fidelity: faithful attributes, filters, fail-nth and order of checks.
//! Simplified: the random draw comes from a seeded xoshiro256** stream of
//! this attribute (the kernel's `get_random_u32_below(100)`), so the same
//! seed fails the same allocations on every host; one task (mmlab's CPUs
//! are one caller), so fail-nth is the allocator's; the per-task filter
//! (`make-it-fail`) and the stack-trace filter are not modelled.
//! Instrumented: a list of fail-nth values (one write each, in turn: each
//! counts from the request after the previous one failed), the number of
//! requests that passed the filters, and the log of which of them failed
//! ([`crate::PageAllocator::take_fail_page_alloc_log`]).

use mmlab_engine::Gfp;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The attributes of `/sys/kernel/debug/fail_page_alloc/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultAttr {
    /// `probability`: percent of candidate requests that fail (0..=100).
    pub probability: u32,
    /// `interval`: only every n-th request is a candidate (0 or 1: all).
    pub interval: u64,
    /// `times`: failures to inject in all; -1 for no limit.
    pub times: i64,
    /// `space`: a budget, in pages for fail_page_alloc (each request of
    /// order `o` takes `1 << o` off it while the budget exceeds that).
    pub space: u64,
    /// `min-order`: smaller orders never fail (the kernel's default is 1).
    pub min_order: u32,
    /// `ignore-gfp-wait`: allocations that may direct-reclaim never fail
    /// (the kernel's default is on).
    pub ignore_gfp_reclaim: bool,
    /// `ignore-gfp-highmem`: `__GFP_HIGHMEM` allocations never fail
    /// (default on).
    pub ignore_gfp_highmem: bool,
    /// Seed of the attribute's random stream.
    pub seed: u64,
}

impl Default for FaultAttr {
    /// The kernel's defaults after `fail_page_alloc` is enabled by writing
    /// `probability`: everything else as `FAULT_ATTR_INITIALIZER` and
    /// fail_page_alloc's own initialiser leave it.
    fn default() -> Self {
        FaultAttr {
            probability: 0,
            interval: 1,
            times: 1,
            space: 0,
            min_order: 1,
            ignore_gfp_reclaim: true,
            ignore_gfp_highmem: true,
            seed: 0,
        }
    }
}

/// Why a fault attribute was refused (the debugfs files refuse the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAttrError {
    /// `probability` above 100.
    Probability(u32),
    /// `times` below -1.
    Times(i64),
}

impl std::fmt::Display for FaultAttrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultAttrError::Probability(p) => {
                write!(f, "fail_page_alloc probability {p} is not a percentage (0..=100)")
            }
            FaultAttrError::Times(t) => write!(f, "fail_page_alloc times {t}: must be -1 (no limit) or at least 0"),
        }
    }
}
impl std::error::Error for FaultAttrError {}

/// `fail_page_alloc`: off, or armed with its attributes and the state
/// `should_fail()` keeps between calls. The allocation path reads one
/// relaxed flag when it is off.
#[derive(Debug, Default)]
pub(crate) struct FailPageAlloc {
    armed: AtomicBool,
    state: Mutex<Option<FaultState>>,
}

#[derive(Debug)]
struct FaultState {
    attr: FaultAttr,
    /// Failures still to inject (`attr->times`), -1 for no limit.
    times: i64,
    /// `attr->space` left.
    space: u64,
    /// `attr->count`: requests that reached the interval check.
    count: u64,
    /// Failures injected so far.
    injected: u64,
    rng: Xoshiro256StarStar,
    /// Requests that passed the filters (numbered from 1).
    filtered: u64,
    /// Which of them failed, oldest first (taken by the caller).
    log: Vec<u64>,
    /// fail-nth countdowns still to run, the next one last.
    nth: Vec<u64>,
}

impl FailPageAlloc {
    /// Arm with `attr` (None: disarm). The counters start afresh.
    pub(crate) fn set(&self, attr: Option<FaultAttr>) -> Result<(), FaultAttrError> {
        if let Some(attr) = attr {
            if attr.probability > 100 {
                return Err(FaultAttrError::Probability(attr.probability));
            }
            if attr.times < -1 {
                return Err(FaultAttrError::Times(attr.times));
            }
        }
        let mut st = self.state.lock();
        *st = attr.map(|attr| FaultState {
            attr,
            times: attr.times,
            space: attr.space,
            count: 0,
            injected: 0,
            rng: Xoshiro256StarStar::seed_from_u64(attr.seed),
            filtered: 0,
            log: Vec::new(),
            nth: Vec::new(),
        });
        self.armed.store(st.is_some(), Relaxed);
        Ok(())
    }

    /// Failures injected since the attributes were set.
    pub(crate) fn injected(&self) -> u64 {
        self.state.lock().as_ref().map_or(0, |s| s.injected)
    }

    /// Write `nth` to fail-nth, one value after another (0s are ignored, as
    /// the kernel's write of 0 disarms); replaces what was pending.
    /// Nothing happens while disarmed.
    pub(crate) fn set_fail_nth(&self, nth: &[u32]) {
        if let Some(s) = self.state.lock().as_mut() {
            s.nth = nth.iter().rev().filter(|&&n| n > 0).map(|&n| u64::from(n)).collect();
        }
    }

    /// Requests that passed the filters, and the failures logged since the
    /// last call (their numbers among those requests, oldest first).
    pub(crate) fn take_log(&self) -> (u64, Vec<u64>) {
        self.state.lock().as_mut().map_or((0, Vec::new()), |s| (s.filtered, std::mem::take(&mut s.log)))
    }

    /// `should_fail_alloc_page()`: false at the cost of one relaxed load
    /// when disarmed.
    #[inline(always)]
    pub(crate) fn should_fail_alloc_page(&self, gfp: Gfp, order: u32) -> bool {
        self.armed.load(Relaxed) && self.should_fail_slow(gfp, order)
    }

    /// The filters of fail_page_alloc, then lib/fault-inject.c's
    /// `should_fail()`.
    #[cold]
    #[inline(never)]
    fn should_fail_slow(&self, gfp: Gfp, order: u32) -> bool {
        let mut st = self.state.lock();
        let Some(s) = st.as_mut() else { return false };
        let a = s.attr;
        if gfp.contains(Gfp::__GFP_NOFAIL) || order < a.min_order {
            return false;
        }
        if a.ignore_gfp_highmem && gfp.contains(Gfp::__GFP_HIGHMEM) {
            return false;
        }
        if a.ignore_gfp_reclaim && gfp.contains(Gfp::__GFP_DIRECT_RECLAIM) {
            return false;
        }
        s.filtered += 1;
        // should_fail_ex(): fail-nth first, then probability 0 short-cuts
        // everything, then times, space, interval, probability.
        if let Some(n) = s.nth.last_mut() {
            *n -= 1;
            if *n > 0 {
                return false;
            }
            s.nth.pop();
            return s.inject();
        }
        if a.probability == 0 || s.times == 0 {
            return false;
        }
        // __should_fail_alloc_page() passes the size in pages.
        let size = 1u64 << order;
        if s.space > size {
            s.space -= size;
            return false;
        }
        if a.interval > 1 {
            s.count += 1;
            if !s.count.is_multiple_of(a.interval) {
                return false;
            }
        }
        if u64::from(a.probability) <= s.rng.below(100) {
            return false;
        }
        s.inject()
    }
}

impl FaultState {
    /// should_fail_ex()'s `fail:` exit: spend one of `times`, count, log.
    fn inject(&mut self) -> bool {
        if self.times > 0 {
            self.times -= 1;
        }
        self.injected += 1;
        self.log.push(self.filtered);
        true
    }
}

#[cfg(test)]
mod tests {
    //! The semantics of lib/fault-inject.c `should_fail_ex()` and
    //! mm/fail_page_alloc.c `__should_fail_alloc_page()` (read from the
    //! kernel source): filters first (min-order, __GFP_NOFAIL, highmem,
    //! reclaim), then probability 0, times, space (in pages), interval,
    //! probability; `times` is only spent by a failure.
    use super::*;

    /// Armed with `attr`; the flag fast path must agree with the slow path.
    fn armed(attr: FaultAttr) -> FailPageAlloc {
        let f = FailPageAlloc::default();
        f.set(Some(attr)).unwrap();
        f
    }

    /// Fail everything that gets through the filters.
    fn always() -> FaultAttr {
        FaultAttr { probability: 100, times: -1, min_order: 0, ignore_gfp_reclaim: false, ..FaultAttr::default() }
    }

    fn run(f: &FailPageAlloc, gfp: Gfp, order: u32, n: usize) -> Vec<bool> {
        (0..n).map(|_| f.should_fail_alloc_page(gfp, order)).collect()
    }

    fn count(f: &FailPageAlloc) -> u64 {
        f.state.lock().as_ref().unwrap().count
    }
    fn space(f: &FailPageAlloc) -> u64 {
        f.state.lock().as_ref().unwrap().space
    }

    #[test]
    fn defaults_are_the_kernels() {
        let d = FaultAttr::default();
        assert_eq!((d.probability, d.interval, d.times, d.space), (0, 1, 1, 0), "FAULT_ATTR_INITIALIZER");
        assert_eq!((d.min_order, d.ignore_gfp_reclaim, d.ignore_gfp_highmem), (1, true, true));
        // Only probability written: order >= 1 without direct reclaim fails
        // once (times = 1); GFP_KERNEL (may reclaim) and order 0 never.
        let f = armed(FaultAttr { probability: 100, ..d });
        assert!(!f.should_fail_alloc_page(Gfp::GFP_KERNEL, 3));
        assert!(!f.should_fail_alloc_page(Gfp::GFP_ATOMIC, 0));
        assert!(f.should_fail_alloc_page(Gfp::GFP_ATOMIC, 1));
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 1, 10), [false; 10], "times = 1 is spent");
        assert_eq!(f.injected(), 1);
    }

    #[test]
    fn disarmed_never_fails_and_rearming_starts_afresh() {
        let f = FailPageAlloc::default();
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 5), [false; 5]);
        f.set(Some(FaultAttr { times: 2, ..always() })).unwrap();
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 3), [true, true, false]);
        f.set(None).unwrap();
        assert!(!f.armed.load(Relaxed));
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 5), [false; 5]);
        assert_eq!(f.injected(), 0, "disarmed: nothing counted");
        f.set(Some(FaultAttr { times: 2, ..always() })).unwrap();
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 3), [true, true, false], "times starts again");
        assert_eq!(f.injected(), 2);
    }

    #[test]
    fn fail_nth_fails_the_nth_filtered_request_before_the_attributes() {
        // probability 0: only fail-nth fails; filtered requests don't count.
        let f = armed(FaultAttr { probability: 0, times: -1, ..always() });
        f.set_fail_nth(&[3, 1]);
        assert!(!f.should_fail_alloc_page(Gfp::GFP_ATOMIC | Gfp::__GFP_NOFAIL, 0), "filtered: not counted");
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 5), [false, false, true, true, false]);
        assert_eq!(f.take_log(), (5, vec![3, 4]));
        assert_eq!(f.take_log(), (5, vec![]), "the log is taken");
        // While counting down, the random path is not consulted: always()
        // would fail every request.
        let f = armed(always());
        f.set_fail_nth(&[2]);
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 3), [false, true, true]);
        // A fail-nth failure spends `times`, as the kernel's fail: exit does.
        let f = armed(FaultAttr { probability: 0, times: 1, ..always() });
        f.set_fail_nth(&[1, 1]);
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 2), [true, true]);
        assert_eq!(f.injected(), 2);
        // times stays at 0 once spent (not -1: no limit), so after fail-nth
        // the attributes inject nothing more.
        let f = armed(FaultAttr { times: 1, ..always() });
        f.set_fail_nth(&[1, 1]);
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 4), [true, true, false, false]);
        // A 0 written to fail-nth is no countdown.
        let f = armed(FaultAttr { probability: 0, times: -1, ..always() });
        f.set_fail_nth(&[0, 2]);
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 3), [false, true, false]);
        // Disarmed: nothing pending, nothing counted.
        let f = FailPageAlloc::default();
        f.set_fail_nth(&[1]);
        assert_eq!(run(&f, Gfp::GFP_ATOMIC, 0, 2), [false, false]);
        assert_eq!(f.take_log(), (0, vec![]));
    }

    #[test]
    fn bad_attributes_are_refused_and_the_old_setting_stays() {
        let f = armed(FaultAttr { times: 1, ..always() });
        assert_eq!(f.set(Some(FaultAttr { probability: 101, ..always() })), Err(FaultAttrError::Probability(101)));
        assert_eq!(f.set(Some(FaultAttr { times: -2, ..always() })), Err(FaultAttrError::Times(-2)));
        assert!(f.should_fail_alloc_page(Gfp::GFP_KERNEL, 0), "still armed with times = 1");
        assert!(!f.should_fail_alloc_page(Gfp::GFP_KERNEL, 0));
    }

    #[test]
    fn nofail_never_fails_and_spends_nothing() {
        let f = armed(FaultAttr { interval: 2, space: 3, times: 1, ..always() });
        for order in 0..=10 {
            assert!(!f.should_fail_alloc_page(Gfp::GFP_KERNEL | Gfp::__GFP_NOFAIL, order));
            assert!(!f.should_fail_alloc_page(Gfp::GFP_ATOMIC | Gfp::__GFP_NOFAIL, order));
        }
        assert_eq!((space(&f), count(&f), f.injected()), (3, 0, 0), "filtered before should_fail");
    }

    #[test]
    fn min_order_and_the_ignore_flags_filter_before_should_fail() {
        let f = armed(FaultAttr { min_order: 2, ..always() });
        assert!(!f.should_fail_alloc_page(Gfp::GFP_KERNEL, 0));
        assert!(!f.should_fail_alloc_page(Gfp::GFP_KERNEL, 1));
        assert!(f.should_fail_alloc_page(Gfp::GFP_KERNEL, 2));
        assert!(f.should_fail_alloc_page(Gfp::GFP_KERNEL, 10));

        let f = armed(FaultAttr { ignore_gfp_reclaim: true, ignore_gfp_highmem: false, ..always() });
        assert!(!f.should_fail_alloc_page(Gfp::GFP_KERNEL, 0), "may direct-reclaim");
        assert!(!f.should_fail_alloc_page(Gfp::__GFP_DIRECT_RECLAIM, 0));
        assert!(f.should_fail_alloc_page(Gfp::GFP_NOWAIT, 0), "kswapd reclaim only is not ignored");
        assert!(f.should_fail_alloc_page(Gfp::GFP_ATOMIC | Gfp::__GFP_HIGHMEM, 0));

        let f = armed(FaultAttr { ignore_gfp_highmem: true, ..always() });
        assert!(!f.should_fail_alloc_page(Gfp::GFP_HIGHUSER_MOVABLE, 0));
        assert!(!f.should_fail_alloc_page(Gfp::GFP_ATOMIC | Gfp::__GFP_HIGHMEM, 0));
        assert!(f.should_fail_alloc_page(Gfp::GFP_KERNEL, 0));
        assert_eq!(f.injected(), 1);
    }

    #[test]
    fn times_counts_failures_only() {
        let f = armed(FaultAttr { times: 3, interval: 2, ..always() });
        // Every second request is a candidate; three of them fail.
        let got = run(&f, Gfp::GFP_KERNEL, 0, 10);
        assert_eq!(got, [false, true, false, true, false, true, false, false, false, false]);
        assert_eq!(f.injected(), 3);
        // times == 0 is checked before interval: the count stops moving.
        let c = count(&f);
        assert_eq!(c, 6, "requests 7.. never reached the interval check");
        let f = armed(FaultAttr { times: -1, ..always() });
        assert_eq!(run(&f, Gfp::GFP_KERNEL, 0, 100), vec![true; 100], "-1: no limit");
    }

    #[test]
    fn space_is_a_budget_in_pages_spent_before_the_interval() {
        // Order 0 takes 1 off a budget of 10 while the budget exceeds 1:
        // nine requests pass, the tenth is the first candidate.
        let f = armed(FaultAttr { space: 10, ..always() });
        let got = run(&f, Gfp::GFP_KERNEL, 0, 11);
        assert_eq!(got[..9], [false; 9]);
        assert_eq!(got[9..], [true, true]);
        assert_eq!(space(&f), 1, "a budget not larger than the size stays");
        // Order 2 takes 4 pages: 10 -> 6 -> 2, then 2 > 4 is false.
        let f = armed(FaultAttr { space: 10, ..always() });
        assert_eq!(run(&f, Gfp::GFP_KERNEL, 2, 3), [false, false, true]);
        // A large request passes a budget only if the budget exceeds it.
        let f = armed(FaultAttr { space: 512, ..always() });
        assert!(f.should_fail_alloc_page(Gfp::GFP_KERNEL, 9), "512 > 512 is false");
        // Space passes before the interval counts: with space 3 and
        // interval 2, two requests pass on space, then every second fails.
        let f = armed(FaultAttr { space: 3, interval: 2, ..always() });
        assert_eq!(run(&f, Gfp::GFP_KERNEL, 0, 6), [false, false, false, true, false, true]);
        assert_eq!(count(&f), 4);
    }

    #[test]
    fn interval_fails_every_nth_candidate() {
        for interval in [0u64, 1] {
            let f = armed(FaultAttr { interval, ..always() });
            assert_eq!(run(&f, Gfp::GFP_KERNEL, 0, 4), [true; 4], "interval {interval}: every request");
            assert_eq!(count(&f), 0, "the count only moves for interval > 1");
        }
        let f = armed(FaultAttr { interval: 3, ..always() });
        let got = run(&f, Gfp::GFP_KERNEL, 0, 9);
        assert_eq!(got, [false, false, true, false, false, true, false, false, true]);
    }

    #[test]
    fn probability_draws_from_a_seeded_stream() {
        // Probability 0 returns before anything is spent (should_fail_ex).
        let f = armed(FaultAttr { probability: 0, space: 5, interval: 2, ..always() });
        assert_eq!(run(&f, Gfp::GFP_KERNEL, 0, 100), vec![false; 100]);
        assert_eq!((space(&f), count(&f)), (5, 0));
        // 100 always fails; a fraction fails about that often, the same
        // requests for the same seed, other ones for another seed.
        let f = armed(always());
        assert!(run(&f, Gfp::GFP_KERNEL, 0, 1000).iter().all(|&x| x));
        let draw =
            |p: u32, seed: u64| run(&armed(FaultAttr { probability: p, seed, ..always() }), Gfp::GFP_KERNEL, 0, 10_000);
        for p in [1u32, 10, 50, 90] {
            let n = draw(p, 7).iter().filter(|&&x| x).count() as f64;
            let want = 100.0 * f64::from(p);
            assert!((n - want).abs() < 4.0 * (want * (1.0 - f64::from(p) / 100.0)).sqrt() + 5.0, "p {p}: {n} of 10000");
        }
        assert_eq!(draw(30, 42), draw(30, 42), "deterministic per seed");
        assert_ne!(draw(30, 42), draw(30, 43));
        // The interval picks the candidates, the probability draws only for
        // them: with interval 2 no odd request ever fails.
        let got =
            run(&armed(FaultAttr { probability: 50, interval: 2, seed: 1, ..always() }), Gfp::GFP_KERNEL, 0, 1000);
        assert!(got.iter().step_by(2).all(|&x| !x));
        assert!(got.iter().skip(1).step_by(2).any(|&x| x));
    }
}
