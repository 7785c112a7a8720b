//! Lazily freed vmap areas and `vmap_lazy_nr` (mm/vmalloc.c).
//!
//! # The algorithm
//!
//! `free_vmap_area_noflush()` does not give an unmapped range back at once:
//! the TLB may still hold translations for it, and flushing the kernel's
//! TLB on every vfree would cost a broadcast TLBI each time. The range goes
//! on its vmap node's lazy list instead, and `vmap_lazy_nr` counts the pages
//! waiting. When the count passes `lazy_max_pages()`, a purge takes every
//! node's list, flushes the TLB once over their span, returns the ranges and
//! subtracts what it returned.
//!
//! The order of the two steps on the free side matters, and the kernel's is
//! this: first add the pages to the counter (`atomic_long_add_return`), then
//! insert the area into the lazy list under the node's lock. A purge on
//! another CPU can only take the area after that insertion, that is after
//! the addition (the list lock orders the two), so it can never subtract
//! pages that were not yet added: the counter never goes below zero, even
//! for a moment. The opposite order (insert, then add) lets a purge take the
//! area and subtract its pages first; the counter then dips below zero,
//! which an unsigned counter shows as a value near 2^64 and a debug build
//! as an overflow panic. The counter is signed, as the kernel's
//! `atomic_long_t`, so a bug of that kind reads as a negative number.
//!
//! Relaxed atomics are enough: the happens-before edge from the free's
//! addition to the purge's subtraction comes from the list lock, and
//! coherence of the one atomic does the rest. The loom model at the end of
//! this file checks exactly this (`RUSTFLAGS="--cfg loom" cargo test -p
//! mmlab-vmalloc --lib --release loom`).
//!
//! Fidelity: faithful order of accounting and insertion; simplified in that
//! each node's lazy areas are a vector rather than a tree sorted by address
//! (the purge only needs their span and each range).

use crossbeam::utils::CachePadded;
use mmlab_engine::sync::atomic::{AtomicI64, Ordering::Relaxed};
use mmlab_engine::sync::{LastCpu, LockAcq, Mutex};

/// A lazily freed range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LazyArea {
    /// Start address.
    pub start: u64,
    /// Size including the guard page.
    pub size: u64,
    /// The vmap node whose pool takes the range back after the purge.
    pub vn: usize,
}

impl LazyArea {
    /// Pages of VA space the range holds.
    pub fn pages(&self) -> i64 {
        (self.size >> mmlab_engine::PAGE_SHIFT) as i64
    }
}

/// One node's lazy list, and the CPU that last took its lock through
/// [`LazyAreas::add_stat`].
type LazyList = (Vec<LazyArea>, LastCpu);

/// The lazy lists of every vmap node (`vmap_nodes[i].lazy`) and
/// `vmap_lazy_nr`.
#[derive(Debug)]
pub(crate) struct LazyAreas {
    nodes: Box<[CachePadded<Mutex<LazyList>>]>,
    nr: CachePadded<AtomicI64>,
    /// The CPU of the last [`LazyAreas::add_stat`], beside `nr`.
    nr_last: LastCpu,
}

impl LazyAreas {
    /// Empty lists for `nodes` vmap nodes.
    pub fn new(nodes: usize) -> LazyAreas {
        LazyAreas {
            nodes: (0..nodes).map(|_| CachePadded::new(Mutex::new((Vec::new(), LastCpu::new())))).collect(),
            nr: CachePadded::new(AtomicI64::new(0)),
            nr_last: LastCpu::new(),
        }
    }

    /// The accounting of `free_vmap_area_noflush()`: add the pages to
    /// `vmap_lazy_nr`, then put the area on node `node`'s list. Returns the
    /// count after the addition, for the caller's `lazy_max_pages()` test.
    pub fn add(&self, node: usize, area: LazyArea) -> i64 {
        #[cfg(shuttle)]
        if Self::insert_first() {
            self.nodes[node].lock().0.push(area);
            return self.nr.fetch_add(area.pages(), Relaxed) + area.pages();
        }
        let nr = self.nr.fetch_add(area.pages(), Relaxed) + area.pages();
        self.nodes[node].lock().0.push(area);
        nr
    }

    /// [`add`](Self::add) on behalf of CPU `cpu`, with lock_stat's view of
    /// the two shared lines it touches (see the `lockstat` module): the
    /// add to `vmap_lazy_nr` (never contended) and the acquisition of the
    /// node's lock.
    pub fn add_stat(&self, node: usize, area: LazyArea, cpu: usize) -> (i64, LockAcq, LockAcq) {
        #[cfg(shuttle)]
        if Self::insert_first() {
            let lock_acq = {
                let mut g = self.nodes[node].lock();
                g.0.push(area);
                LockAcq { contended: false, bounced: g.1.note(cpu) }
            };
            let nr = self.nr.fetch_add(area.pages(), Relaxed) + area.pages();
            return (nr, LockAcq { contended: false, bounced: self.nr_last.swap(cpu) }, lock_acq);
        }
        let nr = self.nr.fetch_add(area.pages(), Relaxed) + area.pages();
        let nr_acq = LockAcq { contended: false, bounced: self.nr_last.swap(cpu) };
        let l = &self.nodes[node];
        let (mut g, contended) = match l.try_lock() {
            Some(g) => (g, false),
            None => (l.lock(), true),
        };
        let lock_acq = LockAcq { contended, bounced: g.1.note(cpu) };
        g.0.push(area);
        (nr, nr_acq, lock_acq)
    }

    /// The order before a87edc3 (insert, then add), switched back on by a
    /// shuttle test ([`mmlab_engine::sync::sched::Revert`]).
    #[cfg(shuttle)]
    fn insert_first() -> bool {
        mmlab_engine::sync::sched::reverted(mmlab_engine::sync::sched::Revert::LazyInsertBeforeAdd)
    }

    /// Take every node's areas (`list_replace_init` of each lazy list in
    /// `__purge_vmap_area_lazy`). The caller holds `vmap_purge_lock` and
    /// hands the pages it returns to [`LazyAreas::purged`].
    pub fn take_all(&self) -> Vec<LazyArea> {
        let mut all = Vec::new();
        for l in self.nodes.iter() {
            all.append(&mut l.lock().0);
        }
        all
    }

    /// The purge returned `pages`: `atomic_long_sub(nr, &vmap_lazy_nr)`.
    pub fn purged(&self, pages: i64) {
        self.nr.fetch_sub(pages, Relaxed);
    }

    /// `vmap_lazy_nr`.
    pub fn nr(&self) -> i64 {
        self.nr.load(Relaxed)
    }

    /// Whether an area starting at `start` waits on a lazy list.
    pub fn contains(&self, start: u64) -> bool {
        self.nodes.iter().any(|l| l.lock().0.iter().any(|a| a.start == start))
    }

    /// A copy of every waiting area (reports and checks).
    pub fn snapshot(&self) -> Vec<LazyArea> {
        self.nodes.iter().flat_map(|l| l.lock().0.clone()).collect()
    }

    /// A copy of each node's list (`vn->lazy.head`), node by node.
    pub fn snapshot_by_node(&self) -> Vec<Vec<LazyArea>> {
        self.nodes.iter().map(|l| l.lock().0.clone()).collect()
    }
}

/// loom models of the accounting. Built only with `--cfg loom`, where the
/// engine's `sync` facade hands out loom's Mutex and atomics.
#[cfg(all(test, loom))]
mod loom_model {
    use super::{LazyArea, LazyAreas};
    use loom::sync::Arc;

    const AREA: LazyArea = LazyArea { start: 0x1000, size: 3 << mmlab_engine::PAGE_SHIFT, vn: 0 };

    /// A purge as `__purge_vmap_area_lazy` runs it, with the check the
    /// kernel's signed counter makes possible.
    fn purge(l: &LazyAreas) {
        let taken: i64 = l.take_all().iter().map(LazyArea::pages).sum();
        l.purged(taken);
        assert!(l.nr() >= 0, "vmap_lazy_nr went negative: {}", l.nr());
    }

    /// Two CPUs free one area each while a third purges: in every
    /// interleaving the counter stays non-negative and ends equal to the
    /// pages still on the lists. The second CPU frees with lock_stat's
    /// `add_stat`, which must keep `add`'s order.
    #[test]
    fn loom_free_and_purge_never_go_negative() {
        loom::model(|| {
            let l = Arc::new(LazyAreas::new(2));
            let frees: Vec<_> = (0..2)
                .map(|n| {
                    let l = l.clone();
                    loom::thread::spawn(move || {
                        let area = LazyArea { vn: n, ..AREA };
                        if n == 0 {
                            l.add(n, area);
                        } else {
                            l.add_stat(n, area, n);
                        }
                    })
                })
                .collect();
            purge(&l);
            for f in frees {
                f.join().unwrap();
            }
            let left: i64 = l.snapshot().iter().map(LazyArea::pages).sum();
            assert_eq!(l.nr(), left);
        });
    }

    /// The order this module replaced (insert, then add) is caught by the
    /// same model: loom finds the interleaving where the purge subtracts
    /// first.
    #[test]
    #[should_panic(expected = "vmap_lazy_nr went negative")]
    fn loom_insert_before_add_goes_negative() {
        loom::model(|| {
            let l = Arc::new(LazyAreas::new(1));
            let l2 = l.clone();
            let free = loom::thread::spawn(move || {
                l2.nodes[0].lock().0.push(AREA);
                l2.nr.fetch_add(AREA.pages(), super::Relaxed);
            });
            purge(&l);
            free.join().unwrap();
        });
    }
}
