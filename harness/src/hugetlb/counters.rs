//! The counters of a hugetlb operation: a view over the crates' own typed
//! snapshots (as [`crate::test_vmalloc`]'s counters are), and the modelled
//! time they stand for.
//!
//! [`OpCounters`] holds each family's delta as its owner declares it:
//! hugetlb's pool events ([`HugetlbCounts`]) and contiguous-range work
//! ([`ContigScan`]), HVO's ([`HvoCounts`]), and the engine's vm events
//! ([`VmCounts`]), barriers ([`BarrierCounts`]), TLBIs ([`TlbiCounts`]) and
//! RCU counters ([`RcuCounts`]). [`Modelled`] splits the modelled time into
//! what the cost profile charges for grace periods, TLBIs (with their
//! completion waits) and barriers (the `model` backend only); measured host
//! time is kept apart by the caller.

use mmlab_buddy::ContigScan;
use mmlab_engine::Machine;
use mmlab_engine::arch::arm64::barrier::BarrierCounts;
use mmlab_engine::arch::arm64::tlb::TlbiCounts;
use mmlab_engine::counters::CounterSet;
use mmlab_engine::kernel::rcu::RcuCounts;
use mmlab_engine::mm::vmstat::VmCounts;
use mmlab_hugetlb::{Hugetlb, HugetlbCounts};
use mmlab_vmemmap::HvoCounts;
use serde::Serialize;

/// Counter deltas of one operation, each family in its owner's type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpCounters {
    /// hugetlb's pool events.
    pub hugetlb: HugetlbCounts,
    /// HVO: vmemmap pages freed and allocated, PMD splits, flushes,
    /// `synchronize_rcu()` calls.
    pub hvo: HvoCounts,
    /// Contiguous-range searches (gigantic folios).
    pub contig: ContigScan,
    /// The page allocator: buddy and pcp traffic, zone lock.
    pub vm: VmCounts,
    /// Barriers by instruction and option, and their modelled time.
    pub barriers: BarrierCounts,
    /// TLBIs by kind, and their modelled time with completion waits.
    pub tlbi: TlbiCounts,
    /// RCU: grace periods, `synchronize_rcu()` calls and their modelled
    /// wait.
    pub rcu: RcuCounts,
}

impl OpCounters {
    /// The machine's and `ht`'s counters now (totals over the CPUs).
    pub fn take(m: &Machine, ht: &Hugetlb<'_, '_>) -> OpCounters {
        OpCounters {
            hugetlb: ht.counts(),
            hvo: ht.hvo().counts(),
            contig: ht.contig_scan(),
            vm: m.vm_events(),
            barriers: m.barrier_counts(),
            tlbi: m.tlbi_counts(),
            rcu: m.rcu_counts(),
        }
    }

    /// The events between `before` and this snapshot, family by family.
    #[must_use]
    pub fn delta(&self, before: &OpCounters) -> OpCounters {
        OpCounters {
            hugetlb: self.hugetlb.delta(&before.hugetlb),
            hvo: self.hvo.delta(&before.hvo),
            contig: self.contig.delta(&before.contig),
            vm: self.vm.delta(&before.vm),
            barriers: self.barriers.delta(&before.barriers),
            tlbi: self.tlbi.delta(&before.tlbi),
            rcu: self.rcu.delta(&before.rcu),
        }
    }

    /// Add `other` into these counters.
    pub fn add(&mut self, other: &OpCounters) {
        self.hugetlb.add(&other.hugetlb);
        self.hvo.add(&other.hvo);
        self.contig.add(&other.contig);
        self.vm.add(&other.vm);
        self.barriers.add(&other.barriers);
        self.tlbi.add(&other.tlbi);
        self.rcu.add(&other.rcu);
    }

    /// The modelled time these counters stand for.
    pub fn modelled(&self) -> Modelled {
        Modelled::new(self.rcu.modelled_ns, self.tlbi.modelled_ns, self.barriers.modelled_ns)
    }
}

/// Modelled time, by what it models (ns). Never includes measured host
/// time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Modelled {
    /// RCU grace periods waited in `synchronize_rcu()` (the cost profile's
    /// `grace_period_ns` per call).
    pub grace_period_ns: u64,
    /// TLBIs with their completion waits.
    pub tlbi_ns: u64,
    /// Barriers (non-zero only with the `model` barrier backend; `native`
    /// executes them, so their time is in the measured time).
    pub barrier_ns: u64,
    /// The sum.
    pub total_ns: u64,
}

impl Modelled {
    /// The three parts and their sum.
    pub fn new(grace_period_ns: u64, tlbi_ns: u64, barrier_ns: u64) -> Modelled {
        Modelled { grace_period_ns, tlbi_ns, barrier_ns, total_ns: grace_period_ns + tlbi_ns + barrier_ns }
    }
}
