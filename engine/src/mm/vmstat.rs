//! Event counters in the style of /proc/vmstat.
//!
//! The kernel counts events per CPU (`count_vm_events`) and sums the CPUs when
//! /proc/vmstat is read. mmlab does the same: every emulated CPU owns a
//! [`VmEvents`] array that only its own thread writes (with
//! [`this_cpu_add`]: a relaxed load and a store, no read-modify-write: there
//! is a single writer), and readers add the CPUs up
//! ([`Machine::sum_cpus`](crate::Machine::sum_cpus)). Counters whose names
//! exist in the kernel's /proc/vmstat keep them; the rest are mmlab's
//! instrumentation of the allocator's inner steps (refills, drains, merges,
//! the zone lock), named after the kernel function they count.
//!
//! Each counter is declared once, below: its [`VmEvent`] (the index the hot
//! path bumps) and its name, which is the field of the snapshot type
//! [`VmCounts`] (a [`counter_snapshot!`](crate::counter_snapshot)) and the
//! name printed and serialised.

use crate::counters::{CounterSet, PerCpuStat, this_cpu_add};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! vm_events {
    ($($(#[$m:meta])* $id:ident => $field:ident,)*) => {
        /// One counter of [`VmEvents`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum VmEvent { $($(#[$m])* $id,)* }
        impl VmEvent {
            /// Every counter, in report order.
            pub const ALL: &'static [VmEvent] = &[$(VmEvent::$id,)*];
            /// The name printed in vmstat-style reports (the field of
            /// [`VmCounts`]).
            pub const fn name(self) -> &'static str {
                match self { $(VmEvent::$id => stringify!($field),)* }
            }
        }

        $crate::counter_snapshot! {
            /// A plain copy of counters (one CPU's or a sum), one field per
            /// [`VmEvent`], named as /proc/vmstat prints it.
            pub struct VmCounts { $($(#[$m])* pub $field: u64,)* }
        }

        impl VmCounts {
            /// Value of one counter.
            pub const fn get(&self, e: VmEvent) -> u64 {
                match e { $(VmEvent::$id => self.$field,)* }
            }
        }

        impl PerCpuStat for VmEvents {
            type Counts = VmCounts;
            fn snapshot(&self) -> VmCounts {
                VmCounts { $($field: self.get(VmEvent::$id),)* }
            }
        }
    };
}

vm_events! {
    /// Pages allocated from zone DMA (`PGALLOC_DMA`).
    PgallocDma => pgalloc_dma,
    /// Pages allocated from zone DMA32 (`PGALLOC_DMA32`).
    PgallocDma32 => pgalloc_dma32,
    /// Pages allocated from zone Normal (`PGALLOC_NORMAL`).
    PgallocNormal => pgalloc_normal,
    /// Pages allocated from zone Movable (`PGALLOC_MOVABLE`).
    PgallocMovable => pgalloc_movable,
    /// Pages freed (`PGFREE`).
    Pgfree => pgfree,
    /// Allocations that returned NULL (`warn_alloc` or silent).
    PgallocFail => pgalloc_fail,
    /// Entries to `__alloc_pages_slowpath`.
    AllocSlowpath => alloc_slowpath,
    /// `rmqueue_bulk` calls that refilled a pcp list.
    PcpRefill => pcp_refill,
    /// Pages moved from the buddy lists to a pcp list by refills.
    PcpRefillPages => pcp_refill_pages,
    /// `free_pcppages_bulk` calls.
    PcpDrain => pcp_drain,
    /// Pages moved from pcp lists back to the buddy lists.
    PcpDrainPages => pcp_drain_pages,
    /// Pages freed straight to the buddy lists under the zone lock
    /// (`free_one_page`): orders the pcp does not cache, or a pcp trylock
    /// failure. `pgfree` minus these is what went onto pcp lists (counted
    /// this way so the pcp free path carries no extra counter).
    FreeOnePagePages => free_one_page_pages,
    /// Pages allocated straight from the buddy lists under the zone lock
    /// (`rmqueue_buddy`): orders the pcp does not cache, or a pcp miss
    /// that could not refill.
    RmqueueBuddyPages => rmqueue_buddy_pages,
    /// Frees that took the free_high path in `free_frozen_page_commit`.
    PcpFreeHigh => pcp_free_high,
    /// `pcp_spin_trylock` failures (allocation or free went to the buddy).
    PcpTrylockFail => pcp_trylock_fail,
    /// `decay_pcp_high` runs that drained pages.
    PcpDecayDrain => pcp_decay_drain,
    /// `drain_all_pages` calls.
    DrainAllPages => drain_all_pages,
    /// `zone->lock` acquisitions.
    ZoneLockAcquire => zone_lock_acquire,
    /// `zone->lock` acquisitions that found the lock held.
    ZoneLockContended => zone_lock_contended,
    /// Time `zone->lock` was held, in ns (only with `lock_stat`).
    ZoneLockHoldNs => zone_lock_hold_ns,
    /// `zone->lock` acquisitions on another CPU than the one that took it
    /// last: lock_stat's acq-bounces (only with `lock_stat`).
    ZoneLockAcqBounce => zone_lock_acq_bounce,
    /// Contended `zone->lock` acquisitions on another CPU than the one that
    /// took it last: lock_stat's con-bounces (only with `lock_stat`).
    ZoneLockConBounce => zone_lock_con_bounce,
    /// Buddy blocks taken by `__rmqueue_smallest`.
    BuddyAlloc => buddy_alloc,
    /// Halves put back by `expand` (one per split step).
    BuddySplit => buddy_split,
    /// Merge steps in `__free_one_page`.
    BuddyMerge => buddy_merge,
    /// Blocks placed at the tail by `buddy_merge_likely`.
    BuddyFreeTail => buddy_free_tail,
    /// `__rmqueue_claim` successes (fallback that took over a pageblock).
    ExtfragClaim => extfrag_claim,
    /// `__rmqueue_steal` successes (fallback without taking the pageblock).
    ExtfragSteal => extfrag_steal,
    /// Pageblocks reserved as MIGRATE_HIGHATOMIC.
    HighatomicReserve => highatomic_reserve,
    /// Pages zeroed for `__GFP_ZERO`.
    PgZero => pgzero,
    /// `cma_alloc()` calls that got their range (`CMA_ALLOC_SUCCESS`).
    CmaAllocSuccess => cma_alloc_success,
    /// `cma_alloc()` calls that found no free range (`CMA_ALLOC_FAIL`).
    CmaAllocFail => cma_alloc_fail,
    /// Atomic read-modify-writes of the lazy-MMU thread flags (arm64, the
    /// 6.16 form the barrier-batching series merged): `set_thread_flag(
    /// TIF_LAZY_MMU)` on entering a section and `clear_thread_flag` on
    /// leaving it, `TIF_LAZY_MMU_PENDING` set by the first deferred barrier
    /// pair and test-and-cleared when it is issued. None with
    /// `arm64.lazy_mmu_barrier_batching` off, where arm64 had no lazy-MMU
    /// hooks. (The later generic nesting of sections keeps the section
    /// state in the task, without atomics; mmlab counts the 6.16 form, the
    /// kernel of the published batching figures.)
    LazyMmuFlagOps => lazy_mmu_flag_ops,
}

/// Number of counters.
pub const NR_VM_EVENTS: usize = VmEvent::ALL.len();

/// One CPU's counters.
#[derive(Debug)]
pub struct VmEvents {
    v: [AtomicU64; NR_VM_EVENTS],
}

impl Default for VmEvents {
    fn default() -> Self {
        VmEvents { v: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl VmEvent {
    /// `PGALLOC` of zone `zt` (`__count_zid_vm_events(PGALLOC, zone_idx(zone), n)`).
    #[inline]
    pub const fn pgalloc(zt: crate::mm::ZoneType) -> VmEvent {
        match zt {
            crate::mm::ZoneType::Dma => VmEvent::PgallocDma,
            crate::mm::ZoneType::Dma32 => VmEvent::PgallocDma32,
            crate::mm::ZoneType::Normal => VmEvent::PgallocNormal,
            crate::mm::ZoneType::Movable => VmEvent::PgallocMovable,
        }
    }
}

impl VmCounts {
    /// Pages allocated from every zone: the sum of the `pgalloc_*` lines.
    pub const fn pgalloc(&self) -> u64 {
        self.pgalloc_dma + self.pgalloc_dma32 + self.pgalloc_normal + self.pgalloc_movable
    }
}

impl VmEvents {
    /// `count_vm_events()`. Only the owning CPU's thread calls this.
    #[inline]
    pub fn add(&self, e: VmEvent, n: u64) {
        this_cpu_add(&self.v[e as usize], n);
    }
    /// Current value.
    #[inline]
    pub fn get(&self, e: VmEvent) -> u64 {
        self.v[e as usize].load(Relaxed)
    }
    /// Copy of all counters.
    pub fn snapshot(&self) -> VmCounts {
        PerCpuStat::snapshot(self)
    }
}

impl VmCounts {
    /// Counters as (name, value), in report order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        VmEvent::ALL.iter().map(|e| (e.name(), self.get(*e)))
    }
}

impl std::fmt::Display for VmCounts {
    /// One `name value` line per counter, as /proc/vmstat prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut res = Ok(());
        self.for_each_counter(&mut |n, v| {
            if res.is_ok() {
                res = writeln!(f, "{n} {v}");
            }
        });
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_snapshot_delta() {
        let e = VmEvents::default();
        e.add(VmEvent::Pgfree, 3);
        e.add(VmEvent::Pgfree, 4);
        let a = e.snapshot();
        e.add(VmEvent::BuddyMerge, 1);
        let b = e.snapshot();
        assert_eq!(a.get(VmEvent::Pgfree), 7);
        assert_eq!(a.pgfree, 7);
        let d = b.delta(&a);
        assert_eq!(d.get(VmEvent::BuddyMerge), 1);
        assert_eq!(d.get(VmEvent::Pgfree), 0);
        let mut s = a;
        s.add(&b);
        assert_eq!(s.get(VmEvent::Pgfree), 14);
        assert!(b.to_string().contains("pgfree 7\n"));
        assert_eq!(VmCounts::FIELDS, VmEvent::ALL.iter().map(|e| e.name()).collect::<Vec<_>>());
    }
}
