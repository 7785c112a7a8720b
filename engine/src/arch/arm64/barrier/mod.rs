//! arm64 memory barriers (`dmb`, `dsb`, `isb`) under the kernel's names.
//!
//! # What the three barriers do
//!
//! arm64 has a weakly ordered memory model: a CPU may make its loads and
//! stores visible to other observers in a different order from the one the
//! program wrote them in. Three instructions restore order where it matters:
//!
//! - **`dmb <option>`** (data memory barrier) orders memory accesses. Accesses
//!   of the selected kinds that come before it are observed, by every observer
//!   in the selected domain, before those that come after it. It does not wait
//!   for anything to finish; it only constrains order, so it is the cheap one.
//! - **`dsb <option>`** (data synchronization barrier) is stronger: the CPU
//!   stops executing until the earlier accesses of the selected kinds have
//!   *completed*. With a full (non-`st`, non-`ld`) option it also waits for
//!   earlier cache and TLB maintenance, such as `tlbi`, to complete across the
//!   domain. It is the only way to know that an invalidation has taken effect
//!   on the other CPUs.
//! - **`isb`** (instruction synchronization barrier) flushes the pipeline, so
//!   instructions after it are fetched and executed again in the context that
//!   earlier changes established: system-register writes, completed TLB
//!   maintenance, and translation-table updates that a preceding `dsb` made
//!   visible to the table walker. It takes no domain, which is why [`isb`]
//!   here takes no option argument.
//!
//! An option combines a *domain* with an *access kind*. The domains are
//! `sy` (the full system), `ish` (inner shareable: all the CPUs one kernel
//! runs on), `osh` (outer shareable: also reaching DMA-capable agents) and
//! `nsh` (non-shareable: this CPU only). The access kinds are all accesses
//! (no suffix), stores only (`st`: earlier stores before later stores) and
//! loads only (`ld`: earlier loads before later loads and stores). The twelve
//! combinations are the zero-sized types [`Sy`] .. [`OshLd`], each with a
//! lowercase constant ([`sy`], [`ishst`], ...) so call sites read as in the
//! kernel: `dsb(backend, stats, ishst)`.
//!
//! # Where the kernel issues them
//!
//! - The SMP barriers: `smp_mb()` is `dmb(ish)`, `smp_wmb()` is
//!   `dmb(ishst)`, `smp_rmb()` is `dmb(ishld)`. The mandatory `mb()`, `wmb()`,
//!   `rmb()` use `dsb(sy)`, `dsb(st)`, `dsb(ld)`; `dma_wmb()` and `dma_rmb()`
//!   use `dmb(oshst)` and `dmb(oshld)`.
//! - Writing a valid kernel page-table entry: in arch/arm64, `__set_pte()`
//!   stores the descriptor and then (through `emit_pte_barriers()`) issues
//!   `dsb(ishst)` so the table walker can see the new entry, followed by
//!   `isb()` so this CPU does not keep running on a stale view of it. One
//!   such pair per PTE is what lazy-MMU batching hoists to one pair per batch.
//! - Invalidating the TLB: before the `tlbi` instructions a `dsb(ishst)`
//!   makes the cleared entries visible to walkers; after them a `dsb(ish)`
//!   waits until every CPU in the inner shareable domain has dropped the
//!   entries (`flush_tlb_kernel_range()`, `__flush_tlb_range()`), and kernel
//!   ranges add an `isb()`.
//!
//! # How each backend executes them
//!
//! Every call is first counted in the calling CPU's [`BarrierStats`]; the
//! [`BarrierBackend`] chosen at machine start then decides what else happens:
//!
//! - **`native`** on aarch64 is *faithful*: the exact instruction the kernel
//!   would issue (`dmb ishst`, `dsb ish`, `isb`, ...) runs through inline
//!   assembly, one instruction per call after inlining. On x86_64 it is
//!   *approximated* with the nearest fence, chosen as follows (x86 is TSO:
//!   loads are not reordered with other loads, stores not with other stores,
//!   and stores not with earlier loads; only a store followed by a load may
//!   be reordered):
//!
//!   | arm64                                  | x86_64                 | why it is the nearest                                        |
//!   |----------------------------------------|------------------------|--------------------------------------------------------------|
//!   | `dmb`/`dsb` with an `st` or `ld` option | `compiler_fence(SeqCst)` | the hardware already gives store-store and load-load/load-store order; only the compiler must be stopped from reordering |
//!   | `dmb sy`/`ish`/`osh`/`nsh`               | `fence(SeqCst)`        | a full barrier must also order earlier stores before later loads, which TSO does not; a sequentially consistent fence is the language's full barrier |
//!   | `dsb sy`/`ish`/`osh`/`nsh`               | `_mm_mfence()`         | `mfence` waits until all earlier loads and stores (including non-temporal stores and cache-line flushes) are globally visible before later accesses; that wait for completion is what `dsb` adds over `dmb`, and a `SeqCst` fence may instead be lowered to a locked read-modify-write |
//!   | `isb`                                  | `_mm_lfence()`         | `lfence` does not execute until all earlier instructions have completed locally and holds back later instructions until it has; it is the closest cheap analogue of a pipeline resynchronisation (fully serialising instructions such as `cpuid` are far costlier) |
//!
//!   On other host architectures every barrier becomes `fence(SeqCst)`.
//! - **`model`** is *modelled*: no instruction is executed; the cost in
//!   nanoseconds from [`ModelCosts`] for that barrier and option is added to
//!   the CPU's modelled-time counter ([`BarrierCounts::modelled_ns`]), kept
//!   apart from measured host time.
//! - **`count`** is *instrumented*: the barrier is only counted; nothing is
//!   executed and no time is modelled. Useful to compare barrier counts
//!   without paying for, or being perturbed by, the barriers themselves.
//!
//! # Example
//!
//! ```
//! use mmlab_engine::arch::arm64::barrier::{dsb, isb, ishst, BarrierBackend, BarrierKind, BarrierStats};
//!
//! let backend: BarrierBackend = "count".parse().unwrap();
//! let stats = BarrierStats::new();
//! // After writing a valid kernel PTE:
//! dsb(&backend, &stats, ishst);
//! isb(&backend, &stats);
//! let counts = stats.snapshot();
//! assert_eq!(counts.get(BarrierKind::Dsb, "ishst"), Some(1));
//! assert_eq!(counts.isb, 1);
//! assert_eq!(counts.to_string(), "dsb(ishst)  1\nisb         1\n");
//! ```
//!
//! The option types make misuse a compile error: `isb` takes no option, and
//! `dmb`/`dsb` accept only the twelve option types (see the `compile_fail`
//! examples on [`isb`] and [`dsb`]).

use core::fmt;
use core::str::FromStr;

use crate::counters::this_cpu_add as bump;

mod options;
mod stats;
pub use options::*;
pub use stats::{BarrierCounts, BarrierStats};

/// Modelled cost, in nanoseconds, of each barrier and option, used by
/// [`BarrierBackend::Model`]. Arrays are indexed by [`BarrierOption::INDEX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelCosts {
    /// ns per `dmb`, by option.
    pub dmb: [u32; NR_OPTIONS],
    /// ns per `dsb`, by option.
    pub dsb: [u32; NR_OPTIONS],
    /// ns per `isb`.
    pub isb: u32,
}

impl Default for ModelCosts {
    /// Placeholder costs, to be replaced by measured values from the
    /// cost-profile work. They are order-of-magnitude guesses for a
    /// Neoverse-class core near 3 GHz, not measurements: a `dmb` with an
    /// empty store buffer costs a few ns, more for a full or system-wide
    /// one; a `dsb` must wait for completion across its domain and costs
    /// tens of ns for `ish` (more for `osh`/`sy`, less for the CPU-local
    /// `nsh`); an `isb` refills the pipeline, around ten ns. The
    /// uncertainty is large: real costs depend on outstanding stores and
    /// maintenance and on the interconnect.
    fn default() -> Self {
        //           sy  st  ld  ish ishst ishld nsh nshst nshld osh oshst oshld
        let dmb = [8, 4, 3, 6, 3, 2, 4, 2, 2, 7, 4, 3];
        let dsb = [40, 30, 20, 30, 20, 15, 10, 8, 8, 35, 25, 20];
        ModelCosts { dmb, dsb, isb: 10 }
    }
}

/// How barriers execute, chosen once at machine start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BarrierBackend {
    /// Faithful on aarch64 (the real instruction); the nearest fence on
    /// x86_64; `fence(SeqCst)` elsewhere.
    #[default]
    Native,
    /// Instrumented: count only, execute nothing.
    Count,
    /// Modelled: count, execute nothing, add the configured cost to the
    /// CPU's modelled time.
    Model(ModelCosts),
}

impl BarrierBackend {
    /// The name used on the command line: "native", "count" or "model".
    pub const fn name(&self) -> &'static str {
        match self {
            BarrierBackend::Native => "native",
            BarrierBackend::Count => "count",
            BarrierBackend::Model(_) => "model",
        }
    }
}

impl fmt::Display for BarrierBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for a barrier backend name that is not "native", "count" or
/// "model".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseBarrierBackendError {
    name: String,
}

impl ParseBarrierBackendError {
    /// The name that was not recognised.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ParseBarrierBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown barrier backend `{}` (expected native, count or model)", self.name)
    }
}

impl std::error::Error for ParseBarrierBackendError {}

impl FromStr for BarrierBackend {
    type Err = ParseBarrierBackendError;

    /// Parses "native", "count" or "model" (exact, lowercase). "model"
    /// uses [`ModelCosts::default`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(BarrierBackend::Native),
            "count" => Ok(BarrierBackend::Count),
            "model" => Ok(BarrierBackend::Model(ModelCosts::default())),
            _ => Err(ParseBarrierBackendError { name: s.to_owned() }),
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Native barriers executed by this thread (tests only), so tests can
    /// tell whether a backend executed anything.
    static NATIVE_EXECUTIONS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

#[inline(always)]
fn note_native() {
    #[cfg(test)]
    NATIVE_EXECUTIONS.with(|c| c.set(c.get() + 1));
}

/// The real instructions. `index` is always a constant after inlining, so
/// the `match` folds to the one instruction.
#[cfg(target_arch = "aarch64")]
mod native {
    use core::arch::asm;

    #[inline(always)]
    pub(super) fn dmb(index: usize) {
        // SAFETY: `dmb` only orders this CPU's memory accesses; it reads and
        // writes no memory or registers, does not touch the stack or the
        // flags, and is permitted at EL0. Leaving out `nomem` keeps it a
        // compiler barrier as well, which is what a barrier must be.
        unsafe {
            match index {
                1 => asm!("dmb st", options(nostack, preserves_flags)),
                2 => asm!("dmb ld", options(nostack, preserves_flags)),
                3 => asm!("dmb ish", options(nostack, preserves_flags)),
                4 => asm!("dmb ishst", options(nostack, preserves_flags)),
                5 => asm!("dmb ishld", options(nostack, preserves_flags)),
                6 => asm!("dmb nsh", options(nostack, preserves_flags)),
                7 => asm!("dmb nshst", options(nostack, preserves_flags)),
                8 => asm!("dmb nshld", options(nostack, preserves_flags)),
                9 => asm!("dmb osh", options(nostack, preserves_flags)),
                10 => asm!("dmb oshst", options(nostack, preserves_flags)),
                11 => asm!("dmb oshld", options(nostack, preserves_flags)),
                // 0 (sy). Nothing else reaches here (INDEX < 12 is checked at
                // compile time), and the strongest option would be safe if it
                // did.
                _ => asm!("dmb sy", options(nostack, preserves_flags)),
            }
        }
    }

    #[inline(always)]
    pub(super) fn dsb(index: usize) {
        // SAFETY: `dsb` waits for this CPU's earlier accesses and
        // maintenance to complete; it reads and writes no memory or
        // registers, does not touch the stack or the flags, and is permitted
        // at EL0. No `nomem`, so it is a compiler barrier too.
        unsafe {
            match index {
                1 => asm!("dsb st", options(nostack, preserves_flags)),
                2 => asm!("dsb ld", options(nostack, preserves_flags)),
                3 => asm!("dsb ish", options(nostack, preserves_flags)),
                4 => asm!("dsb ishst", options(nostack, preserves_flags)),
                5 => asm!("dsb ishld", options(nostack, preserves_flags)),
                6 => asm!("dsb nsh", options(nostack, preserves_flags)),
                7 => asm!("dsb nshst", options(nostack, preserves_flags)),
                8 => asm!("dsb nshld", options(nostack, preserves_flags)),
                9 => asm!("dsb osh", options(nostack, preserves_flags)),
                10 => asm!("dsb oshst", options(nostack, preserves_flags)),
                11 => asm!("dsb oshld", options(nostack, preserves_flags)),
                // 0 (sy); see `dmb`.
                _ => asm!("dsb sy", options(nostack, preserves_flags)),
            }
        }
    }

    #[inline(always)]
    pub(super) fn isb() {
        // SAFETY: `isb` only flushes this CPU's pipeline; it reads and writes
        // no memory or registers, does not touch the stack or the flags, and
        // is permitted at EL0. No `nomem`, so it is a compiler barrier too.
        unsafe { asm!("isb", options(nostack, preserves_flags)) }
    }
}

/// The nearest x86_64 fences; the module docs explain each choice.
#[cfg(target_arch = "x86_64")]
mod native {
    use core::arch::x86_64::{_mm_lfence, _mm_mfence};
    use core::sync::atomic::Ordering::SeqCst;
    use core::sync::atomic::{compiler_fence, fence};

    #[inline(always)]
    pub(super) fn dmb(index: usize) {
        if super::options::is_full_option(index) {
            fence(SeqCst);
        } else {
            // TSO already orders what an `st`/`ld` barrier asks for.
            compiler_fence(SeqCst);
        }
    }

    #[inline(always)]
    pub(super) fn dsb(index: usize) {
        if super::options::is_full_option(index) {
            // SAFETY: `mfence` needs SSE2, which every x86_64 CPU has (it is
            // part of the x86_64 baseline); the instruction only orders and
            // waits for memory accesses and touches no memory or registers.
            unsafe { _mm_mfence() };
        } else {
            compiler_fence(SeqCst);
        }
    }

    #[inline(always)]
    pub(super) fn isb() {
        // SAFETY: `lfence` needs SSE2, which every x86_64 CPU has (it is part
        // of the x86_64 baseline); the instruction only holds back later
        // instructions and touches no memory or registers.
        unsafe { _mm_lfence() };
    }
}

/// Any other host: a full fence for everything.
#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
mod native {
    use core::sync::atomic::{Ordering::SeqCst, fence};

    #[inline(always)]
    pub(super) fn dmb(_index: usize) {
        fence(SeqCst);
    }

    #[inline(always)]
    pub(super) fn dsb(_index: usize) {
        fence(SeqCst);
    }

    #[inline(always)]
    pub(super) fn isb() {
        fence(SeqCst);
    }
}

/// `dmb(option)`: data memory barrier. Counts it in `stats`, then executes
/// it as `backend` says (see the module docs).
///
/// Mirrors arch/arm64 `dmb(opt)`.
#[inline]
pub fn dmb<O: DmbOption>(backend: &BarrierBackend, stats: &BarrierStats, _o: O) {
    const { assert!(O::INDEX < NR_OPTIONS) };
    bump(&stats.dmb[O::INDEX], 1);
    match backend {
        BarrierBackend::Native => {
            note_native();
            native::dmb(O::INDEX);
        }
        BarrierBackend::Count => {}
        BarrierBackend::Model(costs) => bump(&stats.modelled_ns, u64::from(costs.dmb[O::INDEX])),
    }
}

/// `dsb(option)`: data synchronization barrier. Counts it in `stats`, then
/// executes it as `backend` says (see the module docs).
///
/// Mirrors arch/arm64 `dsb(opt)`.
///
/// Only the barrier option types are accepted:
///
/// ```compile_fail,E0277
/// use mmlab_engine::arch::arm64::barrier::{dsb, BarrierBackend, BarrierStats};
/// let (backend, stats) = (BarrierBackend::Count, BarrierStats::new());
/// dsb(&backend, &stats, 3u32); // not an option: does not compile
/// ```
///
/// and no type outside this module can become one (the traits are sealed):
///
/// ```compile_fail,E0277
/// use mmlab_engine::arch::arm64::barrier::{BarrierOption, DsbOption};
/// #[derive(Clone, Copy, Debug)]
/// struct Mine;
/// impl BarrierOption for Mine {
///     const NAME: &'static str = "mine";
///     const INDEX: usize = 0;
/// }
/// impl DsbOption for Mine {}
/// ```
///
/// whereas the real options compile:
///
/// ```
/// use mmlab_engine::arch::arm64::barrier::{dsb, ish, BarrierBackend, BarrierStats};
/// let (backend, stats) = (BarrierBackend::Count, BarrierStats::new());
/// dsb(&backend, &stats, ish);
/// ```
#[inline]
pub fn dsb<O: DsbOption>(backend: &BarrierBackend, stats: &BarrierStats, _o: O) {
    const { assert!(O::INDEX < NR_OPTIONS) };
    bump(&stats.dsb[O::INDEX], 1);
    match backend {
        BarrierBackend::Native => {
            note_native();
            native::dsb(O::INDEX);
        }
        BarrierBackend::Count => {}
        BarrierBackend::Model(costs) => bump(&stats.modelled_ns, u64::from(costs.dsb[O::INDEX])),
    }
}

/// `isb()`: instruction synchronization barrier. Counts it in `stats`, then
/// executes it as `backend` says (see the module docs).
///
/// Mirrors arch/arm64 `isb()`. It takes no option:
///
/// ```compile_fail,E0061
/// use mmlab_engine::arch::arm64::barrier::{isb, ish, BarrierBackend, BarrierStats};
/// let (backend, stats) = (BarrierBackend::Count, BarrierStats::new());
/// isb(&backend, &stats, ish); // does not compile
/// ```
///
/// ```
/// use mmlab_engine::arch::arm64::barrier::{isb, BarrierBackend, BarrierStats};
/// let (backend, stats) = (BarrierBackend::Count, BarrierStats::new());
/// isb(&backend, &stats);
/// ```
#[inline]
pub fn isb(backend: &BarrierBackend, stats: &BarrierStats) {
    bump(&stats.isb, 1);
    match backend {
        BarrierBackend::Native => {
            note_native();
            native::isb();
        }
        BarrierBackend::Count => {}
        BarrierBackend::Model(costs) => bump(&stats.modelled_ns, u64::from(costs.isb)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::CounterSet;

    fn native_executions() -> u64 {
        NATIVE_EXECUTIONS.with(|c| c.get())
    }

    /// Issues every `dmb` and `dsb` option once, and one `isb`.
    fn all_barriers(backend: &BarrierBackend, stats: &BarrierStats) {
        dmb(backend, stats, sy);
        dmb(backend, stats, st);
        dmb(backend, stats, ld);
        dmb(backend, stats, ish);
        dmb(backend, stats, ishst);
        dmb(backend, stats, ishld);
        dmb(backend, stats, nsh);
        dmb(backend, stats, nshst);
        dmb(backend, stats, nshld);
        dmb(backend, stats, osh);
        dmb(backend, stats, oshst);
        dmb(backend, stats, oshld);
        dsb(backend, stats, sy);
        dsb(backend, stats, st);
        dsb(backend, stats, ld);
        dsb(backend, stats, ish);
        dsb(backend, stats, ishst);
        dsb(backend, stats, ishld);
        dsb(backend, stats, nsh);
        dsb(backend, stats, nshst);
        dsb(backend, stats, nshld);
        dsb(backend, stats, osh);
        dsb(backend, stats, oshst);
        dsb(backend, stats, oshld);
        isb(backend, stats);
    }

    #[test]
    fn option_names_and_indices_agree() {
        fn check<O: DmbOption + DsbOption>(_o: O, seen: &mut [bool; NR_OPTIONS]) {
            assert_eq!(OPTION_NAMES[O::INDEX], O::NAME);
            assert_eq!(option_index(O::NAME), Some(O::INDEX));
            assert!(!seen[O::INDEX], "index {} used twice", O::INDEX);
            seen[O::INDEX] = true;
        }
        let mut seen = [false; NR_OPTIONS];
        check(sy, &mut seen);
        check(st, &mut seen);
        check(ld, &mut seen);
        check(ish, &mut seen);
        check(ishst, &mut seen);
        check(ishld, &mut seen);
        check(nsh, &mut seen);
        check(nshst, &mut seen);
        check(nshld, &mut seen);
        check(osh, &mut seen);
        check(oshst, &mut seen);
        check(oshld, &mut seen);
        assert!(seen.iter().all(|&s| s));
        assert_eq!(IshSt::NAME, "ishst");
        assert_eq!(option_index("bogus"), None);
        for i in 0..NR_OPTIONS {
            assert_eq!(DMB_ENTRY_NAMES[i], format!("dmb({})", OPTION_NAMES[i]));
            assert_eq!(DSB_ENTRY_NAMES[i], format!("dsb({})", OPTION_NAMES[i]));
            assert_eq!(is_full_option(i), !OPTION_NAMES[i].ends_with(['t', 'd']));
        }
    }

    #[test]
    fn counts_per_option_after_a_sequence() {
        let backend = BarrierBackend::Count;
        let stats = BarrierStats::new();
        for _ in 0..3 {
            dmb(&backend, &stats, ishst);
        }
        dmb(&backend, &stats, ish);
        dsb(&backend, &stats, ishst);
        dsb(&backend, &stats, ishst);
        dsb(&backend, &stats, ish);
        dsb(&backend, &stats, sy);
        isb(&backend, &stats);
        isb(&backend, &stats);

        let c = stats.snapshot();
        let mut dmb_expected = [0; NR_OPTIONS];
        dmb_expected[IshSt::INDEX] = 3;
        dmb_expected[Ish::INDEX] = 1;
        let mut dsb_expected = [0; NR_OPTIONS];
        dsb_expected[IshSt::INDEX] = 2;
        dsb_expected[Ish::INDEX] = 1;
        dsb_expected[Sy::INDEX] = 1;
        assert_eq!(c.dmb, dmb_expected);
        assert_eq!(c.dsb, dsb_expected);
        assert_eq!(c.isb, 2);
        assert_eq!(c.modelled_ns, 0);
        assert_eq!(c.total(), 10);
        assert_eq!(c.get(BarrierKind::Dmb, "ishst"), Some(3));
        assert_eq!(c.get(BarrierKind::Dsb, "ishst"), Some(2));
        assert_eq!(c.get(BarrierKind::Dsb, "ishld"), Some(0));
        assert_eq!(c.get(BarrierKind::Isb, ""), Some(2));
        assert_eq!(c.get(BarrierKind::Isb, "ish"), None);
        assert_eq!(c.get(BarrierKind::Dmb, "nope"), None);
    }

    #[test]
    fn every_option_counts_once_on_every_backend() {
        for backend in [BarrierBackend::Native, BarrierBackend::Count, BarrierBackend::Model(ModelCosts::default())] {
            let stats = BarrierStats::new();
            all_barriers(&backend, &stats);
            let c = stats.snapshot();
            assert_eq!(c.dmb, [1; NR_OPTIONS], "{backend}");
            assert_eq!(c.dsb, [1; NR_OPTIONS], "{backend}");
            assert_eq!(c.isb, 1, "{backend}");
            assert_eq!(c.total(), 25, "{backend}");
        }
    }

    #[test]
    fn count_backend_counts_without_executing() {
        let stats = BarrierStats::new();
        let before = native_executions();
        all_barriers(&BarrierBackend::Count, &stats);
        assert_eq!(native_executions(), before);
        assert_eq!(stats.snapshot().total(), 25);
        assert_eq!(stats.snapshot().modelled_ns, 0);

        // The native backend, by contrast, executes each one.
        let stats = BarrierStats::new();
        all_barriers(&BarrierBackend::Native, &stats);
        assert_eq!(native_executions(), before + 25);
        assert_eq!(stats.snapshot().total(), 25);
        assert_eq!(stats.snapshot().modelled_ns, 0);
    }

    #[test]
    fn model_adds_exactly_the_configured_ns() {
        let costs = ModelCosts {
            dmb: core::array::from_fn(|i| i as u32 + 1),
            dsb: core::array::from_fn(|i| 100 * (i as u32 + 1)),
            isb: 7_000,
        };
        let backend = BarrierBackend::Model(costs);
        let stats = BarrierStats::new();
        let before = native_executions();

        dmb(&backend, &stats, ishst); // 5
        dmb(&backend, &stats, ishst); // 5
        dsb(&backend, &stats, ishst); // 500
        dsb(&backend, &stats, oshld); // 1200
        isb(&backend, &stats); // 7000
        assert_eq!(stats.snapshot().modelled_ns, 5 + 5 + 500 + 1200 + 7000);
        assert_eq!(native_executions(), before, "model must not execute");

        let stats = BarrierStats::new();
        all_barriers(&backend, &stats);
        let expected: u64 = (1..=12).sum::<u64>() + 100 * (1..=12).sum::<u64>() + 7_000;
        assert_eq!(stats.snapshot().modelled_ns, expected);

        // Default costs: one PTE-write barrier pair.
        let d = ModelCosts::default();
        let backend = BarrierBackend::Model(d);
        let stats = BarrierStats::new();
        dsb(&backend, &stats, ishst);
        isb(&backend, &stats);
        let ns = stats.snapshot().modelled_ns;
        assert_eq!(ns, u64::from(d.dsb[IshSt::INDEX] + d.isb));
        assert!(ns > 0);
    }

    #[test]
    fn snapshots_add() {
        let backend = BarrierBackend::Model(ModelCosts::default());
        let a = BarrierStats::new();
        let b = BarrierStats::new();
        dsb(&backend, &a, ishst);
        isb(&backend, &a);
        dsb(&backend, &b, ishst);
        dsb(&backend, &b, ish);
        dmb(&backend, &b, ishld);

        let (sa, sb) = (a.snapshot(), b.snapshot());
        let mut sum = sa;
        sum.add(&sb);
        assert_eq!(sum.dsb[IshSt::INDEX], 2);
        assert_eq!(sum.dsb[Ish::INDEX], 1);
        assert_eq!(sum.dmb[IshLd::INDEX], 1);
        assert_eq!(sum.isb, 1);
        assert_eq!(sum.total(), sa.total() + sb.total());
        assert_eq!(sum.total(), 5);
        assert_eq!(sum.modelled_ns, sa.modelled_ns + sb.modelled_ns);

        assert_eq!(sum.delta(&sb), sa);
        assert_eq!(sa.delta(&BarrierCounts::default()), sa);
        assert_eq!(sa.dsb_count(ishst), 1);
        assert_eq!(BarrierCounts::dsb_name(ishst), "dsb(ishst)");
    }

    #[test]
    fn per_cpu_stats_from_threads() {
        const CPUS: usize = 4;
        const N: u64 = 1_000;
        let stats: Vec<BarrierStats> = (0..CPUS).map(|_| BarrierStats::new()).collect();
        std::thread::scope(|s| {
            for st_ in &stats {
                s.spawn(move || {
                    for _ in 0..N {
                        dsb(&BarrierBackend::Native, st_, ishst);
                        isb(&BarrierBackend::Native, st_);
                    }
                });
            }
        });
        let total = stats.iter().map(BarrierStats::snapshot).fold(BarrierCounts::default(), |mut a, b| {
            a.add(&b);
            a
        });
        assert_eq!(total.dsb[IshSt::INDEX], CPUS as u64 * N);
        assert_eq!(total.isb, CPUS as u64 * N);
        assert_eq!(total.total(), 2 * CPUS as u64 * N);
    }

    #[test]
    fn display_names() {
        let c = BarrierCounts {
            dmb: core::array::from_fn(|i| u64::from(i == Ld::INDEX)),
            dsb: core::array::from_fn(|i| if i == IshSt::INDEX { 123 } else { 0 }),
            isb: 5,
            modelled_ns: 0,
        };
        let names: Vec<_> = c.iter().collect();
        assert_eq!(names, [("dmb(ld)", 1), ("dsb(ishst)", 123), ("isb", 5)].to_vec());
        assert_eq!(c.to_string(), "dmb(ld)     1\ndsb(ishst)  123\nisb         5\n");

        let with_time = BarrierCounts { modelled_ns: 42, ..c };
        assert!(with_time.to_string().ends_with("isb         5\nmodelled_ns  42\n"));
        assert_eq!(BarrierCounts::default().to_string(), "");
        assert_eq!(BarrierCounts::default().iter().count(), 0);

        assert_eq!(BarrierKind::Dsb.to_string(), "dsb");
        assert_eq!(BarrierKind::Isb.name(), "isb");
    }

    #[test]
    fn backend_parse_and_display() {
        assert_eq!("native".parse(), Ok(BarrierBackend::Native));
        assert_eq!("count".parse(), Ok(BarrierBackend::Count));
        assert_eq!("model".parse(), Ok(BarrierBackend::Model(ModelCosts::default())));
        for b in [BarrierBackend::Native, BarrierBackend::Count, BarrierBackend::Model(ModelCosts::default())] {
            assert_eq!(b.to_string().parse::<BarrierBackend>(), Ok(b));
        }

        let err = "fast".parse::<BarrierBackend>().unwrap_err();
        assert_eq!(err.name(), "fast");
        assert!(err.to_string().contains("`fast`"), "{err}");
        assert!(err.to_string().contains("native, count or model"), "{err}");
        assert!("".parse::<BarrierBackend>().is_err());
        assert!("Native".parse::<BarrierBackend>().is_err());
        assert!("model ".parse::<BarrierBackend>().is_err());
        assert_eq!(BarrierBackend::default(), BarrierBackend::Native);
    }
}
