//! loom model of the pcp <-> buddy hand-off (`--cfg loom` only).
//!
//! Pages move between a CPU's pcp lists and the zone's buddy lists in two
//! directions, each under the same two locks taken in the same order (the
//! pageset's, then the zone's):
//!
//! - **refill**, `rmqueue_bulk()` from `__rmqueue_pcplist()`: the local CPU
//!   holds its pageset (`pcp_spin_trylock`; if that fails it allocates from
//!   the buddy alone, `rmqueue_buddy()`), takes `batch` pages off the free
//!   lists under the zone lock, subtracting them from `NR_FREE_PAGES`, and
//!   adds them to `pcp->count`;
//! - **drain**, `free_pcppages_bulk()`: on a free that pushes `pcp->count`
//!   past `high` (`free_frozen_page_commit()`, in chunks of `batch` as 7.2
//!   does, [`KernelRules::free_drain_chunk`]) and from a remote CPU's
//!   `drain_pages_zone()` (chunks of `batch << CONFIG_PCP_BATCH_SCALE_MAX`,
//!   dropping and re-taking the pageset lock between chunks), pages go back
//!   to the free lists under the zone lock, added to `NR_FREE_PAGES` and
//!   taken from `pcp->count`.
//!
//! The model keeps the real structure of the hand-off and nothing else:
//! the pageset and the zone are the engine's `sync::Mutex` (loom's in this
//! build), `NR_FREE_PAGES` the facade's atomic, the lists vectors of page
//! numbers. loom runs every interleaving of a CPU allocating and freeing
//! through its pageset while another CPU drains it, and checks that no page
//! is lost or doubled, that `pcp->count` equals the pages on the pcp list
//! and `NR_FREE_PAGES` the pages on the free lists, both whenever the zone
//! lock is taken and at the end, and that no interleaving deadlocks.

use crate::rules::KernelRules;
use mmlab_engine::sync::Mutex;
use mmlab_engine::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::atomic::AtomicUsize;

/// `struct per_cpu_pages`, reduced to one list.
#[derive(Debug)]
struct Pcp {
    list: Vec<u32>,
    count: i32,
    batch: i32,
    high: i32,
}

/// The zone: its free lists (one, of order-0 pages) and `NR_FREE_PAGES`.
#[derive(Debug)]
struct Zone {
    free: Mutex<Vec<u32>>,
    nr_free_pages: AtomicI64,
}

#[derive(Debug)]
struct Machine {
    zone: Zone,
    pcp: [Mutex<Pcp>; 2],
}

/// Pages of the model: 4 on the free lists, 2 on CPU 0's pcp list.
const FREE: [u32; 4] = [10, 11, 12, 13];
const ON_PCP: [u32; 2] = [20, 21];

impl Machine {
    fn new() -> Machine {
        let pcp = |list: Vec<u32>| Mutex::new(Pcp { count: list.len() as i32, list, batch: 2, high: 3 });
        Machine {
            zone: Zone { free: Mutex::new(FREE.to_vec()), nr_free_pages: AtomicI64::new(FREE.len() as i64) },
            pcp: [pcp(ON_PCP.to_vec()), pcp(Vec::new())],
        }
    }

    /// The zone lock, with the check every holder may make: the counter
    /// matches the lists (both change only under this lock).
    fn zone_lock(&self) -> mmlab_engine::sync::MutexGuard<'_, Vec<u32>> {
        let g = self.zone.free.lock();
        assert_eq!(self.zone.nr_free_pages.load(Relaxed), g.len() as i64, "NR_FREE_PAGES off the free lists");
        g
    }

    /// `rmqueue_bulk()`: up to `count` pages to the pcp list under one
    /// zone-lock hold.
    fn rmqueue_bulk(&self, pcp: &mut Pcp, count: i32) {
        let mut free = self.zone_lock();
        let mut got = 0;
        while got < count {
            let Some(pfn) = free.pop() else { break };
            pcp.list.push(pfn);
            got += 1;
        }
        self.zone.nr_free_pages.fetch_sub(i64::from(got), Relaxed);
        drop(free);
        pcp.count += got;
    }

    /// `free_pcppages_bulk()`: `count` pages from the pcp list back to the
    /// free lists under one zone-lock hold.
    fn free_pcppages_bulk(&self, pcp: &mut Pcp, count: i32) {
        let count = count.min(pcp.count);
        let mut free = self.zone_lock();
        for _ in 0..count {
            free.push(pcp.list.pop().expect("pcp->count says there is a page"));
        }
        self.zone.nr_free_pages.fetch_add(i64::from(count), Relaxed);
        drop(free);
        pcp.count -= count;
    }

    /// `rmqueue()` on `cpu`: the pcp path if its pageset's trylock
    /// succeeds (refilling an empty list with `batch` pages), else
    /// `rmqueue_buddy()`.
    fn alloc(&self, cpu: usize) -> Option<u32> {
        if let Some(mut pcp) = self.pcp[cpu].try_lock() {
            if pcp.list.is_empty() {
                let batch = pcp.batch;
                self.rmqueue_bulk(&mut pcp, batch);
            }
            let pfn = pcp.list.pop()?;
            pcp.count -= 1;
            return Some(pfn);
        }
        let mut free = self.zone_lock();
        let pfn = free.pop()?;
        self.zone.nr_free_pages.fetch_sub(1, Relaxed);
        Some(pfn)
    }

    /// `free_frozen_page_commit()` on `cpu`: onto the pcp list, then drain
    /// past `high` in chunks of `batch`; `free_one_page()` if the trylock
    /// fails.
    fn free(&self, cpu: usize, pfn: u32) {
        let Some(mut pcp) = self.pcp[cpu].try_lock() else {
            let mut free = self.zone_lock();
            free.push(pfn);
            self.zone.nr_free_pages.fetch_add(1, Relaxed);
            return;
        };
        pcp.list.push(pfn);
        pcp.count += 1;
        while pcp.count > pcp.high {
            let excess = pcp.count - pcp.high;
            let chunk = KernelRules::Linux7_2.free_drain_chunk(pcp.batch).map_or(excess, |c| c.min(excess));
            self.free_pcppages_bulk(&mut pcp, chunk);
        }
    }

    /// `drain_pages_zone()` of CPU `target`'s pageset, from any CPU: chunk
    /// by chunk, the pageset lock dropped between chunks.
    fn drain_pages_zone(&self, target: usize) {
        loop {
            let mut pcp = self.pcp[target].lock();
            let count = pcp.count;
            if count > 0 {
                let round = pcp.batch;
                self.free_pcppages_bulk(&mut pcp, count.min(round));
            }
            let left = pcp.count;
            drop(pcp);
            if count == 0 || left == 0 {
                break;
            }
        }
    }

    /// Every page is in exactly one place (or, `partial`, in at most one:
    /// another CPU may hold some), and each counter matches its list.
    /// Takes the locks in the allocator's order: the pagesets, then the
    /// zone.
    fn check(&self, held: &[u32], partial: bool) {
        let pcps: Vec<_> = self.pcp.iter().map(|p| p.lock()).collect();
        let free = self.zone_lock();
        let mut all: Vec<u32> = free.iter().copied().chain(held.iter().copied()).collect();
        for p in &pcps {
            assert_eq!(p.count, p.list.len() as i32, "pcp->count off its list");
            all.extend(p.list.iter().copied());
        }
        all.sort_unstable();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n, "a page in two places");
        if partial {
            return;
        }
        let mut want: Vec<u32> = FREE.iter().chain(ON_PCP.iter()).copied().collect();
        want.sort_unstable();
        assert_eq!(all, want, "a page lost or doubled");
    }
}

/// Interleavings loom ran in the last model (printed by the test).
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

/// CPU 0 allocates three pages (the third refills its emptied list from the
/// buddy) and frees them (the last free pushes it past `high` and drains a
/// chunk) while CPU 1 allocates a page through its own pageset (a refill
/// racing CPU 0's for the zone lock), drains CPU 0's pageset and frees its
/// page: in every interleaving the pages and both counters are conserved
/// and the checks in between see them consistent.
#[test]
fn loom_pcp_refill_and_remote_drain_conserve_pages() {
    EXPLORED.store(0, std::sync::atomic::Ordering::Relaxed);
    loom::model(|| {
        EXPLORED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let m = loom::sync::Arc::new(Machine::new());
        let m1 = m.clone();
        let drain = loom::thread::spawn(move || {
            let mine = m1.alloc(1).expect("CPU 1's page");
            m1.drain_pages_zone(0);
            m1.free(1, mine);
        });
        let held: Vec<u32> = (0..3).filter_map(|_| m.alloc(0)).collect();
        assert_eq!(held.len(), 3, "six pages, at most five taken: no allocation may fail");
        m.check(&held, true);
        for &p in &held {
            m.free(0, p);
        }
        drain.join().expect("the drain");
        m.check(&[], false);
    });
    let n = EXPLORED.load(std::sync::atomic::Ordering::Relaxed);
    println!("loom: pcp <-> buddy hand-off, {n} interleavings explored");
    assert!(n > 10, "loom explored only {n} interleavings: the CPUs did not race");
}

/// The same model with the drain's pageset lock left out (a drain that
/// trusted the zone lock alone) loses the race: loom finds the interleaving
/// where the drain and the refill update `pcp->count` at once.
#[test]
#[should_panic(expected = "pcp->count off its list")]
fn loom_drain_without_the_pageset_lock_is_caught() {
    loom::model(|| {
        let m = loom::sync::Arc::new(Machine::new());
        let m1 = m.clone();
        let drain = loom::thread::spawn(move || {
            // Read the pageset without its lock, as a broken drain would:
            // a copy of the count, then the pages back, then the count
            // written from the stale copy.
            let (count, batch) = {
                let p = m1.pcp[0].lock();
                (p.count, p.batch)
            };
            if count > 0 {
                let n = count.min(batch);
                let pages: Vec<u32> = {
                    let mut p = m1.pcp[0].lock();
                    let k = (n as usize).min(p.list.len());
                    let at = p.list.len() - k;
                    p.list.split_off(at)
                };
                let mut free = m1.zone_lock();
                free.extend(&pages);
                m1.zone.nr_free_pages.fetch_add(pages.len() as i64, Relaxed);
                drop(free);
                m1.pcp[0].lock().count = count - pages.len() as i32;
            }
        });
        let held: Vec<u32> = (0..3).filter_map(|_| m.alloc(0)).collect();
        for &p in &held {
            m.free(0, p);
        }
        drain.join().expect("the drain");
        m.check(&[], false);
    });
}
