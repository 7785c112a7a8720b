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
//! 1. `times`: once that many failures were injected, never again (-1: no
//!    limit);
//! 2. `space`: the first `space` bytes of requests pass (each request takes
//!    its size off the budget);
//! 3. `interval`: only every `interval`-th request that got this far is a
//!    candidate;
//! 4. `probability`: a candidate fails with this percentage.
//!
//! A failed allocation then takes the normal failure exit: the caller sees
//! NULL (here `None` or [`crate::AllocError::NoMemory`]) and must release
//! whatever it took before, which is what the error paths under test have
//! to get right.
//!
//! Fidelity: faithful attributes, filters and order of checks. Simplified:
//! the random draw comes from a seeded xoshiro256** stream of this attribute
//! (the kernel's `get_random_u32_below(100)`), so the same seed fails the
//! same allocations on every host; the per-task filter (`make-it-fail`) and
//! the stack-trace filter are not modelled.

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
    /// `space`: bytes of requests let through before any failure.
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
        });
        self.armed.store(st.is_some(), Relaxed);
        Ok(())
    }

    /// Failures injected since the attributes were set.
    pub(crate) fn injected(&self) -> u64 {
        self.state.lock().as_ref().map_or(0, |s| s.injected)
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
        // should_fail(): times, space, interval, probability.
        if s.times == 0 {
            return false;
        }
        let size = mmlab_engine::PAGE_SIZE << order;
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
        if s.times > 0 {
            s.times -= 1;
        }
        s.injected += 1;
        true
    }
}
