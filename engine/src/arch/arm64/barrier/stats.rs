//! The per-CPU barrier counters ([`BarrierStats`], bumped by the barrier
//! functions in the parent module) and their snapshot ([`BarrierCounts`]):
//! executions per instruction and option, and the modelled time of the
//! `model` backend, kept apart from measured time.

use core::fmt;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use super::options::{BarrierKind, DMB_ENTRY_NAMES, DSB_ENTRY_NAMES, DmbOption, DsbOption, NR_OPTIONS, option_index};
use crate::counters::{CounterSet, PerCpuStat};

/// Barrier counts and modelled barrier time of one emulated CPU.
///
/// Written only by the thread running that CPU and read by anyone (reports,
/// other CPUs). Because there is a single writer, a counter is bumped with a
/// relaxed load followed by a relaxed store rather than `fetch_add`
/// ([`this_cpu_add`](crate::counters::this_cpu_add)): that is
/// a plain load, add and store on both arm64 and x86_64, with no atomic
/// read-modify-write (no `ldadd`/`lock xadd`) whose cost would disturb the
/// barrier measurements. Readers see each counter untorn but possibly
/// stale, and a [`snapshot`](Self::snapshot) taken while the owner is
/// running is not one instant across counters. If two threads did write the
/// same `BarrierStats`, increments could be lost (never undefined
/// behaviour); keep one per CPU.
///
/// Aligned to a cache line so that different CPUs' stats do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct BarrierStats {
    pub(super) dmb: [AtomicU64; NR_OPTIONS],
    pub(super) dsb: [AtomicU64; NR_OPTIONS],
    pub(super) isb: AtomicU64,
    pub(super) modelled_ns: AtomicU64,
}

impl BarrierStats {
    /// All counters zero.
    pub const fn new() -> Self {
        BarrierStats {
            dmb: [const { AtomicU64::new(0) }; NR_OPTIONS],
            dsb: [const { AtomicU64::new(0) }; NR_OPTIONS],
            isb: AtomicU64::new(0),
            modelled_ns: AtomicU64::new(0),
        }
    }

    /// A plain copy of the counters (each read relaxed; see the type docs).
    pub fn snapshot(&self) -> BarrierCounts {
        PerCpuStat::snapshot(self)
    }
}

impl PerCpuStat for BarrierStats {
    type Counts = BarrierCounts;
    fn snapshot(&self) -> BarrierCounts {
        BarrierCounts {
            dmb: core::array::from_fn(|i| self.dmb[i].load(Relaxed)),
            dsb: core::array::from_fn(|i| self.dsb[i].load(Relaxed)),
            isb: self.isb.load(Relaxed),
            modelled_ns: self.modelled_ns.load(Relaxed),
        }
    }
}

/// A plain copy of [`BarrierStats`]: counts per barrier and option, and the
/// modelled time. Add snapshots of several CPUs to get machine totals
/// ([`CounterSet::add`]); serialised as a map of every counter's name
/// (`"dsb(ishst)"`, ..., `"isb"`, `"modelled_ns"`) to its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BarrierCounts {
    /// `dmb` count per option, indexed by [`BarrierOption::INDEX`](super::options::BarrierOption::INDEX).
    pub dmb: [u64; NR_OPTIONS],
    /// `dsb` count per option, indexed by [`BarrierOption::INDEX`](super::options::BarrierOption::INDEX).
    pub dsb: [u64; NR_OPTIONS],
    /// `isb` count.
    pub isb: u64,
    /// Modelled barrier time in ns (only the model backend adds to it).
    pub modelled_ns: u64,
}

impl BarrierCounts {
    /// Number of barriers of all kinds (excluding `modelled_ns`, which is a
    /// time).
    pub fn total(&self) -> u64 {
        self.dmb.iter().sum::<u64>() + self.dsb.iter().sum::<u64>() + self.isb
    }

    /// `dsb` count of option `O` (`counts.dsb_count(ishst)`), typed.
    pub const fn dsb_count<O: DsbOption>(&self, _o: O) -> u64 {
        self.dsb[O::INDEX]
    }

    /// The name of `dsb` with option `O` in [`iter`](Self::iter) and in
    /// reports (`"dsb(ishst)"` for `ishst`), typed.
    pub const fn dsb_name<O: DsbOption>(_o: O) -> &'static str {
        DSB_ENTRY_NAMES[O::INDEX]
    }

    /// `dmb` count of option `O`, typed.
    pub const fn dmb_count<O: DmbOption>(&self, _o: O) -> u64 {
        self.dmb[O::INDEX]
    }

    /// Count for `kind` with the option called `option` ("ishst", ...).
    /// For [`BarrierKind::Isb`] the option must be "" (or "sy", the only
    /// option the architecture defines for `isb`). `None` for an unknown
    /// option name.
    pub fn get(&self, kind: BarrierKind, option: &str) -> Option<u64> {
        match kind {
            BarrierKind::Dmb => option_index(option).map(|i| self.dmb[i]),
            BarrierKind::Dsb => option_index(option).map(|i| self.dsb[i]),
            BarrierKind::Isb => matches!(option, "" | "sy").then_some(self.isb),
        }
    }

    /// The non-zero barrier counts as (`"dsb(ishst)"`, count), `dmb` options
    /// first in [`OPTION_NAMES`](super::options::OPTION_NAMES) order, then `dsb`, then `"isb"`. Does not
    /// include `modelled_ns`.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + use<> {
        let counts = *self;
        let dmb = DMB_ENTRY_NAMES.into_iter().zip(counts.dmb);
        let dsb = DSB_ENTRY_NAMES.into_iter().zip(counts.dsb);
        dmb.chain(dsb).chain(core::iter::once(("isb", counts.isb))).filter(|&(_, n)| n != 0)
    }
}

impl serde::Serialize for BarrierCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::counters::serialize_counters(self, s)
    }
}

impl CounterSet for BarrierCounts {
    fn add(&mut self, rhs: &BarrierCounts) {
        for (a, b) in self.dmb.iter_mut().zip(rhs.dmb) {
            *a += b;
        }
        for (a, b) in self.dsb.iter_mut().zip(rhs.dsb) {
            *a += b;
        }
        self.isb += rhs.isb;
        self.modelled_ns += rhs.modelled_ns;
    }

    fn delta(&self, before: &BarrierCounts) -> BarrierCounts {
        BarrierCounts {
            dmb: core::array::from_fn(|i| self.dmb[i].wrapping_sub(before.dmb[i])),
            dsb: core::array::from_fn(|i| self.dsb[i].wrapping_sub(before.dsb[i])),
            isb: self.isb.wrapping_sub(before.isb),
            modelled_ns: self.modelled_ns.wrapping_sub(before.modelled_ns),
        }
    }

    /// Every count, zero or not, in the order of [`BarrierCounts::iter`],
    /// then `modelled_ns`.
    fn for_each_counter(&self, f: &mut dyn FnMut(&'static str, u64)) {
        let mut c = *self;
        c.slots().for_each(|(name, n)| f(name, *n));
    }

    fn set_counter(&mut self, name: &str, value: u64) -> bool {
        self.slots().find(|&(n, _)| n == name).map(|(_, slot)| *slot = value).is_some()
    }
}

impl BarrierCounts {
    /// Every counter by name, in [`CounterSet::for_each_counter`] order:
    /// the one list of the names, for reading and for writing back.
    fn slots(&mut self) -> impl Iterator<Item = (&'static str, &mut u64)> {
        let dmb = DMB_ENTRY_NAMES.into_iter().zip(&mut self.dmb);
        let dsb = DSB_ENTRY_NAMES.into_iter().zip(&mut self.dsb);
        dmb.chain(dsb).chain([("isb", &mut self.isb), ("modelled_ns", &mut self.modelled_ns)])
    }
}

impl fmt::Display for BarrierCounts {
    /// One line per non-zero count, `dsb(ishst)  123`, names padded to one
    /// column; then `modelled_ns  N` if any time was modelled. Every line
    /// ends in a newline; all-zero counts print nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, n) in self.iter() {
            writeln!(f, "{name:<10}  {n}")?;
        }
        if self.modelled_ns != 0 {
            writeln!(f, "modelled_ns  {}", self.modelled_ns)?;
        }
        Ok(())
    }
}
