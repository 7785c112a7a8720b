//! lock_stat for vmalloc's shared locks, and for `vmap_lazy_nr`.
//!
//! # What is counted, and why
//!
//! Two CPUs running vmalloc and vfree side by side share a few cache lines
//! by the kernel's design: the free tree's lock (`free_vmap_area_lock`),
//! each vmap node's busy-tree lock (`vn->busy.lock`; the node is chosen by
//! the area's address, so every CPU uses every node), each node's pool
//! lock (`vn->pool_lock`) and lazy-list lock (`vn->lazy.lock`; both are the
//! allocating CPU's node's, shared through the purge and through frees of
//! areas another CPU allocated), and the global atomic `vmap_lazy_nr` that
//! every vfree adds to. Each time one of
//! them is taken on another CPU than the last, its cache line has to move
//! between the CPUs' caches, which costs far more than the uncontended
//! acquisition itself. CONFIG_LOCK_STAT counts exactly this: per lock
//! class, `acquisitions` and `acq-bounces` (acquisitions on another CPU
//! than the last), `contentions` (acquisitions that had to wait) and
//! `con-bounces` (those of them where another CPU had taken it last).
//! /proc/lock_stat prints them with wait and hold times, which are not
//! kept here.
//!
//! For `vmap_lazy_nr`, an atomic and not a lock, the same row reads: adds
//! as acquisitions, adds on another CPU than the previous add as
//! acquisition bounces, no contentions. Kernel lock_stat has no such row;
//! it is here because that line moves at every vfree of the other CPU.
//!
//! Counting is on with the machine's `lock_stat` switch only (as the
//! kernel's `kernel.lock_stat`), so that the default paths pay nothing.
//! The counters are per CPU, written by their CPU's thread alone, and
//! summed when read, like the vm events. The allocation and free paths
//! count, and the purge's pool and free-tree acquisitions (not its one
//! take of each lazy list per purge); error paths, reports and checks that
//! take the locks do not (the kernel's /proc readers would be counted).
//!
//! Fidelity: instrumented.

use mmlab_engine::counters::this_cpu_add;
use mmlab_engine::sync::LockAcq;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// vmalloc's lock classes, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum VmapLockClass {
    /// `free_vmap_area_lock`.
    FreeVmapArea,
    /// `&vn->busy.lock`.
    VnBusy,
    /// `&vn->pool_lock`.
    VnPool,
    /// `&vn->lazy.lock`.
    VnLazy,
    /// `vmap_lazy_nr` (an atomic add, see the module documentation).
    VmapLazyNr,
}

const NR_CLASSES: usize = 5;

impl VmapLockClass {
    /// Every class, in report order.
    pub const ALL: [VmapLockClass; NR_CLASSES] = [
        VmapLockClass::FreeVmapArea,
        VmapLockClass::VnBusy,
        VmapLockClass::VnPool,
        VmapLockClass::VnLazy,
        VmapLockClass::VmapLazyNr,
    ];

    /// The class name as /proc/lock_stat prints it.
    pub const fn name(self) -> &'static str {
        match self {
            VmapLockClass::FreeVmapArea => "free_vmap_area_lock",
            VmapLockClass::VnBusy => "&vn->busy.lock",
            VmapLockClass::VnPool => "&vn->pool_lock",
            VmapLockClass::VnLazy => "&vn->lazy.lock",
            VmapLockClass::VmapLazyNr => "vmap_lazy_nr (atomic add)",
        }
    }
}

mmlab_engine::counter_snapshot! {
    /// One lock class's row of /proc/lock_stat, without the wait and hold
    /// times, in the kernel's column order.
    pub struct LockClassStat {
        /// Contentions where another CPU had taken the lock last.
        pub con_bounces: u64,
        /// Acquisitions that found the lock held and waited.
        pub contentions: u64,
        /// Acquisitions where another CPU had taken the lock last: its cache
        /// line moved.
        pub acq_bounces: u64,
        /// Acquisitions.
        pub acquisitions: u64,
    }
}

/// The lock_stat rows of vmalloc's classes ([`VmapLockClass::ALL`] order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmallocLockStat(pub [LockClassStat; NR_CLASSES]);

/// One lock class's row of a lock_stat table: its /proc/lock_stat name and
/// counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LockStatRow {
    /// The class name.
    pub class: &'static str,
    /// Its counts.
    #[serde(flatten)]
    pub counts: LockClassStat,
}

impl VmallocLockStat {
    /// One row per class, in report order.
    pub fn rows(&self) -> impl Iterator<Item = LockStatRow> + '_ {
        VmapLockClass::ALL.iter().map(|c| LockStatRow { class: c.name(), counts: self.0[*c as usize] })
    }

    /// The events between `before` and this snapshot.
    #[must_use]
    pub fn delta(&self, before: &VmallocLockStat) -> VmallocLockStat {
        VmallocLockStat(std::array::from_fn(|i| self.0[i].delta(&before.0[i])))
    }

    /// The row of `class`.
    pub fn get(&self, class: VmapLockClass) -> LockClassStat {
        self.0[class as usize]
    }
}

impl serde::Serialize for VmallocLockStat {
    /// As a list of [`LockStatRow`]s.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.rows())
    }
}

/// The per-CPU counters behind [`VmallocLockStat`].
#[derive(Debug)]
pub(crate) struct LockStats {
    /// `[cpu][class][con_bounces, contentions, acq_bounces, acquisitions]`.
    per_cpu: Box<[[[AtomicU64; 4]; NR_CLASSES]]>,
}

impl LockStats {
    pub fn new(nr_cpus: usize) -> LockStats {
        LockStats { per_cpu: (0..nr_cpus).map(|_| Default::default()).collect() }
    }

    /// Book one acquisition of `class` by `cpu` (its own thread only).
    #[inline]
    pub fn note(&self, cpu: usize, class: VmapLockClass, acq: LockAcq) {
        let [con_bounces, contentions, acq_bounces, acquisitions] = &self.per_cpu[cpu][class as usize];
        this_cpu_add(acquisitions, 1);
        if acq.bounced {
            this_cpu_add(acq_bounces, 1);
        }
        if acq.contended {
            this_cpu_add(contentions, 1);
            if acq.bounced {
                this_cpu_add(con_bounces, 1);
            }
        }
    }

    /// The counts summed over the CPUs.
    pub fn snapshot(&self) -> VmallocLockStat {
        let mut out = VmallocLockStat::default();
        for cpu in self.per_cpu.iter() {
            for (row, c) in out.0.iter_mut().zip(cpu) {
                row.add(&LockClassStat {
                    con_bounces: c[0].load(Relaxed),
                    contentions: c[1].load(Relaxed),
                    acq_bounces: c[2].load(Relaxed),
                    acquisitions: c[3].load(Relaxed),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{LockStats, VmapLockClass};
    use mmlab_engine::sync::LockAcq;

    #[test]
    fn lock_stats_sum_the_cpus_per_class() {
        let s = LockStats::new(2);
        let (plain, bounced) = (LockAcq::default(), LockAcq { contended: false, bounced: true });
        s.note(0, VmapLockClass::VnBusy, plain);
        s.note(1, VmapLockClass::VnBusy, bounced);
        s.note(1, VmapLockClass::VnBusy, LockAcq { contended: true, bounced: true });
        s.note(0, VmapLockClass::FreeVmapArea, LockAcq { contended: true, bounced: false });
        let before = s.snapshot();
        let busy = before.get(VmapLockClass::VnBusy);
        assert_eq!((busy.acquisitions, busy.acq_bounces, busy.contentions, busy.con_bounces), (3, 2, 1, 1));
        let free = before.get(VmapLockClass::FreeVmapArea);
        assert_eq!((free.acquisitions, free.acq_bounces, free.contentions, free.con_bounces), (1, 0, 1, 0));
        s.note(0, VmapLockClass::VmapLazyNr, bounced);
        let d = s.snapshot().delta(&before);
        assert_eq!(d.get(VmapLockClass::VmapLazyNr).acq_bounces, 1);
        assert_eq!(d.get(VmapLockClass::VnBusy).acquisitions, 0);
        let json = serde_json::to_string(&d).expect("serialises");
        assert!(json.starts_with(r#"[{"class":"free_vmap_area_lock","con_bounces":0"#), "{json}");
        assert_eq!(d.rows().map(|r| r.class).last(), Some("vmap_lazy_nr (atomic add)"));
    }
}
