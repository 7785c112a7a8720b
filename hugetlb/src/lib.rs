//! hugetlb pools (mm/hugetlb.c) on the emulated machine: the 2 MiB hstate,
//! its counters and free list, and `set_max_huge_pages` growing and
//! shrinking the pool as a write to `nr_hugepages` does.
//!
//! # The algorithm
//!
//! An hstate describes one huge page size. It counts the pages of its pool
//! (`nr_huge_pages`), those on its free list (`free_huge_pages`), those
//! promised to mappings but not yet faulted in (`resv_huge_pages`) and those
//! allocated beyond the persistent pool (`surplus_huge_pages`); the
//! persistent pool is `nr_huge_pages - surplus_huge_pages`.
//!
//! Writing a count to `nr_hugepages` (`set_max_huge_pages`, Linux 6.12):
//!
//! 1. **Grow.** Surplus pages are first made persistent, one by one
//!    (`adjust_pool_surplus(-1)`). The rest is allocated fresh, one folio at
//!    a time (`alloc_pool_huge_folio` → `alloc_buddy_hugetlb_folio`: an
//!    order-9 compound folio from the page allocator with
//!    `GFP_HIGHUSER_MOVABLE | __GFP_THISNODE | __GFP_COMP | __GFP_NOWARN |
//!    __GFP_RETRY_MAYFAIL`; `init_new_hugetlb_folio` makes it a hugetlb
//!    folio), and collected on one list. The whole list is then handed to
//!    `prep_and_add_allocated_folios`: HVO optimizes it as one batch
//!    (`hugetlb_vmemmap_optimize_folios`: one flush, one grace period), then
//!    each folio is accounted (`nr_huge_pages++`) and enqueued on the free
//!    list (`free_huge_pages++`). When an allocation fails the loop stops,
//!    what was allocated still joins the pool, and the write succeeds: the
//!    pool is as large as memory allowed and `nr_hugepages` reads that back.
//! 2. **Shrink.** The pool may not drop below what is in use or reserved
//!    (`min_count = resv + nr - free`, at least `count`). Free folios are
//!    taken off the free list down to that (`remove_pool_hugetlb_folio`:
//!    `free_huge_pages--`, `nr_huge_pages--`) onto one list, which
//!    `update_and_free_pages_bulk` frees as a batch: HVO restores every
//!    optimized folio's vmemmap (`hugetlb_vmemmap_restore_folios`, one
//!    flush), then each folio goes back to the buddy allocator. If the
//!    restore runs out of memory (`bulk_vmemmap_restore_error`), the folios
//!    already restored are freed first, to make room, and the batch is
//!    retried; if none were, folios are restored one at a time, and one that
//!    still cannot be is put back in the pool as a surplus page. Pages in
//!    use beyond `count` become surplus (`adjust_pool_surplus(+1)`), to be
//!    freed when they are released.
//! 3. `max_huge_pages` is set to the persistent pool reached.
//!
//! The kernel's free list is LIFO: `enqueue_hugetlb_folio` adds at the
//! head, `remove_pool_hugetlb_folio` takes the head.
//!
//! # Fidelity
//!
//! | piece | label |
//! |-------|-------|
//! | counters, grow/shrink order, one HVO batch per write, stop at ENOMEM and read back, restore-error path | faithful (Linux 6.12) |
//! | sizes | simplified: only 2 MiB (order 9, a PMD); 64K, 32M and 1G come later |
//! | nodes | simplified: one node, so `__GFP_THISNODE` and the per-node counters and `node_alloc_noretry` bitmap (only used within one write after a failure, which ends the write) change nothing |
//! | hugetlb folio state | simplified: `PG_head`/compound tails via `mmlab_vmemmap::folio::prep_compound`; no page type, no frozen refcount |
//! | locking | simplified: `&mut self` stands for `resize_lock` and `hugetlb_lock` |
//! | counters in [`HugetlbCounts`] | instrumented (mmlab's own) |

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod hugetlbpage;

pub use config::HugetlbConfig;

use mmlab_engine::{Cpu, Gfp, Pfn};
use mmlab_pcp::{FreeError, PageAllocator};
use mmlab_vmemmap::folio::{destroy_compound, prep_compound};
use mmlab_vmemmap::{Folio, FolioError, Hvo, HvoError};

/// `HUGETLB_PAGE_ORDER` on arm64 with 4 KiB pages: a PMD, 2 MiB.
pub const HUGETLB_PAGE_ORDER: u32 = 9;

mmlab_engine::counter_snapshot! {
    /// hugetlb's pool events.
    pub struct HugetlbCounts {
        /// mmlab's own, instrumented: folios allocated from the page
        /// allocator for the pool (`alloc_pool_huge_folio` successes).
        pub pool_folios_allocated: u64,
        /// mmlab's own, instrumented: `alloc_pool_huge_folio` failures (each
        /// ends a grow).
        pub pool_alloc_failures: u64,
        /// mmlab's own, instrumented: folios given back to the page
        /// allocator (`update_and_free_hugetlb_folio`).
        pub pool_folios_freed: u64,
        /// mmlab's own, instrumented: `prep_and_add_allocated_folios` calls.
        pub prep_and_add_batches: u64,
        /// mmlab's own, instrumented: `update_and_free_pages_bulk` calls.
        pub free_bulk_batches: u64,
        /// mmlab's own, instrumented: `bulk_vmemmap_restore_error` calls.
        pub bulk_restore_errors: u64,
        /// mmlab's own, instrumented: folios kept as surplus because their
        /// vmemmap could not be restored.
        pub restore_failed_to_surplus: u64,
    }
}

/// Why a hugetlb operation failed. Running out of memory is not one (the
/// kernel stops where memory runs out); these report a bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugetlbError {
    /// HVO reported a bug.
    Hvo(HvoError),
    /// A folio the pool holds is not a valid folio, or is still optimized
    /// when it is freed.
    Folio(FolioError),
    /// The page allocator refused to take a pool folio back.
    Free {
        /// The folio's head frame.
        pfn: Pfn,
        /// Why.
        err: FreeError,
    },
}

impl std::fmt::Display for HugetlbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HugetlbError::Hvo(e) => write!(f, "hugetlb vmemmap: {e:?}"),
            HugetlbError::Folio(e) => write!(f, "hugetlb folio: {e}"),
            HugetlbError::Free { pfn, err } => write!(f, "freeing hugetlb folio {pfn}: {err:?}"),
        }
    }
}
impl std::error::Error for HugetlbError {}

impl From<HvoError> for HugetlbError {
    fn from(e: HvoError) -> Self {
        HugetlbError::Hvo(e)
    }
}
impl From<FolioError> for HugetlbError {
    fn from(e: FolioError) -> Self {
        HugetlbError::Folio(e)
    }
}

/// One huge page size and its pool (`struct hstate`, one node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hstate {
    order: u32,
    /// `max_huge_pages`: the persistent pool the last write reached.
    pub max_huge_pages: u64,
    /// `nr_huge_pages`: pages in the pool, surplus included.
    pub nr_huge_pages: u64,
    /// `free_huge_pages`: pages on the free list.
    pub free_huge_pages: u64,
    /// `resv_huge_pages`: pages reserved for mappings, not yet faulted.
    pub resv_huge_pages: u64,
    /// `surplus_huge_pages`: pages beyond the persistent pool.
    pub surplus_huge_pages: u64,
    /// `hugepage_freelists[0]`; the last element is the list head.
    hugepage_freelist: Vec<Folio>,
}

impl Hstate {
    /// An empty hstate of `order` (`hugetlb_add_hstate`).
    pub fn new(order: u32) -> Hstate {
        Hstate {
            order,
            max_huge_pages: 0,
            nr_huge_pages: 0,
            free_huge_pages: 0,
            resv_huge_pages: 0,
            surplus_huge_pages: 0,
            hugepage_freelist: Vec::new(),
        }
    }
    /// `huge_page_order()`.
    pub fn huge_page_order(&self) -> u32 {
        self.order
    }
    /// `pages_per_huge_page()`.
    pub fn pages_per_huge_page(&self) -> u64 {
        1 << self.order
    }
    /// The sysfs directory name (`hugepages-2048kB`), as
    /// `hugetlb_add_hstate` names it.
    pub fn name(&self) -> String {
        format!("hugepages-{}kB", self.pages_per_huge_page() * (mmlab_engine::PAGE_SIZE / 1024))
    }
    /// `persistent_huge_pages()`.
    pub fn persistent_huge_pages(&self) -> u64 {
        self.nr_huge_pages - self.surplus_huge_pages
    }
    /// The free list, head first.
    pub fn free_folios(&self) -> impl Iterator<Item = Folio> + '_ {
        self.hugepage_freelist.iter().rev().copied()
    }
    /// `enqueue_hugetlb_folio()`: to the head of the free list.
    fn enqueue_hugetlb_folio(&mut self, folio: Folio) {
        self.hugepage_freelist.push(folio);
        self.free_huge_pages += 1;
    }
    /// `remove_pool_hugetlb_folio()` (with `remove_hugetlb_folio(…,
    /// false)`): take the head of the free list out of the pool.
    fn remove_pool_hugetlb_folio(&mut self) -> Option<Folio> {
        let folio = self.hugepage_freelist.pop()?;
        self.free_huge_pages -= 1;
        self.nr_huge_pages -= 1;
        Some(folio)
    }
    /// `add_hugetlb_folio()`: a folio back into the pool (and onto the free
    /// list), as surplus if `adjust_surplus`.
    fn add_hugetlb_folio(&mut self, folio: Folio, adjust_surplus: bool) {
        self.nr_huge_pages += 1;
        if adjust_surplus {
            self.surplus_huge_pages += 1;
        }
        self.enqueue_hugetlb_folio(folio);
    }
    /// `adjust_pool_surplus()` on one node: `delta` -1 makes a surplus page
    /// persistent, +1 a persistent page surplus. Returns whether it could.
    fn adjust_pool_surplus(&mut self, delta: i32) -> bool {
        if delta < 0 {
            if self.surplus_huge_pages == 0 {
                return false;
            }
            self.surplus_huge_pages -= 1;
        } else {
            if self.surplus_huge_pages >= self.nr_huge_pages {
                return false;
            }
            self.surplus_huge_pages += 1;
        }
        true
    }
}

/// The hugetlb subsystem of one machine: the 2 MiB hstate over a page
/// allocator, with HVO.
#[derive(Debug)]
pub struct Hugetlb<'a, 'm> {
    pa: &'a PageAllocator<'m>,
    hvo: Hvo<'a, 'm>,
    cfg: HugetlbConfig,
    hstate: Hstate,
    counts: HugetlbCounts,
}

impl<'a, 'm> Hugetlb<'a, 'm> {
    /// hugetlb over `pa` with an empty 2 MiB hstate (`hugetlb_init` before
    /// any pages; see [`Hugetlb::hugetlb_hstate_alloc_pages`]).
    pub fn new(pa: &'a PageAllocator<'m>, cfg: HugetlbConfig) -> Hugetlb<'a, 'm> {
        Hugetlb {
            pa,
            hvo: Hvo::new(pa, cfg.hvo),
            cfg,
            hstate: Hstate::new(HUGETLB_PAGE_ORDER),
            counts: HugetlbCounts::default(),
        }
    }

    /// `hugetlb_hstate_alloc_pages()`: grow the pool to the `hugepages=`
    /// boot parameter. Returns the pages reached.
    ///
    /// # Errors
    /// As [`Hugetlb::set_max_huge_pages`].
    pub fn hugetlb_hstate_alloc_pages(&mut self, cpu: &Cpu<'m>) -> Result<u64, HugetlbError> {
        self.set_max_huge_pages(cpu, self.cfg.hugepages)
    }

    /// The configuration.
    pub fn config(&self) -> HugetlbConfig {
        self.cfg
    }
    /// The 2 MiB hstate.
    pub fn hstate(&self) -> &Hstate {
        &self.hstate
    }
    /// HVO, with its counters.
    pub fn hvo(&self) -> &Hvo<'a, 'm> {
        &self.hvo
    }
    /// The pool's counters.
    pub fn counts(&self) -> HugetlbCounts {
        self.counts
    }

    /// The GFP mask of `alloc_pool_huge_folio` → `alloc_buddy_hugetlb_folio`
    /// (`htlb_alloc_mask()` of a migratable size, `__GFP_THISNODE`, the
    /// `__GFP_COMP` of `__folio_alloc`, `__GFP_NOWARN`, and
    /// `__GFP_RETRY_MAYFAIL` while trying hard).
    pub fn pool_alloc_gfp() -> Gfp {
        Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_THISNODE | Gfp::__GFP_COMP | Gfp::__GFP_NOWARN | Gfp::__GFP_RETRY_MAYFAIL
    }

    /// `alloc_pool_huge_folio()` → `only_alloc_fresh_hugetlb_folio()`: a
    /// fresh compound folio from the page allocator, made a hugetlb folio
    /// (`init_new_hugetlb_folio`). `None` when memory has run out.
    fn alloc_pool_huge_folio(&mut self, cpu: &Cpu<'m>) -> Result<Option<Folio>, HugetlbError> {
        let order = self.hstate.order;
        let Some(pfn) = self.pa.alloc_pages(cpu, Self::pool_alloc_gfp(), order) else {
            self.counts.pool_alloc_failures += 1;
            return Ok(None);
        };
        let folio = Folio::new(self.pa.machine(), pfn, order)?;
        prep_compound(self.pa.machine(), folio)?;
        self.counts.pool_folios_allocated += 1;
        Ok(Some(folio))
    }

    /// `prep_and_add_allocated_folios()`: optimize the batch's vmemmap in
    /// one go, then account and enqueue each folio.
    fn prep_and_add_allocated_folios(&mut self, cpu: &Cpu<'m>, folios: Vec<Folio>) -> Result<(), HugetlbError> {
        if folios.is_empty() {
            return Ok(());
        }
        self.counts.prep_and_add_batches += 1;
        let r = self.hvo.hugetlb_vmemmap_optimize_folios(cpu, &folios);
        // The folios join the pool whatever HVO did: none is lost.
        for folio in folios {
            // __prep_account_new_huge_page()
            self.hstate.nr_huge_pages += 1;
            self.hstate.enqueue_hugetlb_folio(folio);
        }
        r.map_err(HugetlbError::from)
    }

    /// `update_and_free_hugetlb_folio()` / `__update_and_free_hugetlb_folio()`
    /// for a folio whose vmemmap is already restored: back to the buddy.
    fn update_and_free_hugetlb_folio(&mut self, cpu: &Cpu<'m>, folio: Folio) -> Result<(), HugetlbError> {
        destroy_compound(self.pa.machine(), folio)?;
        self.pa.free_pages(cpu, folio.pfn, folio.order).map_err(|err| HugetlbError::Free { pfn: folio.pfn, err })?;
        self.counts.pool_folios_freed += 1;
        Ok(())
    }

    /// `bulk_vmemmap_restore_error()`: make progress after a batch restore
    /// ran out of memory.
    fn bulk_vmemmap_restore_error(
        &mut self,
        cpu: &Cpu<'m>,
        folios: &mut Vec<Folio>,
        non_hvo: &mut Vec<Folio>,
    ) -> Result<(), HugetlbError> {
        self.counts.bulk_restore_errors += 1;
        if !non_hvo.is_empty() {
            // Free what is restored: it may give the rest room.
            for folio in std::mem::take(non_hvo) {
                self.update_and_free_hugetlb_folio(cpu, folio)?;
            }
            return Ok(());
        }
        // One at a time: a folio that cannot be restored stays in the pool
        // as surplus; after the first that can, retry the batch.
        while let Some(folio) = folios.first().copied() {
            folios.remove(0);
            match self.hvo.hugetlb_vmemmap_restore_folio(cpu, folio) {
                Err(HvoError::NoMemory) => {
                    self.counts.restore_failed_to_surplus += 1;
                    self.hstate.add_hugetlb_folio(folio, true);
                }
                Err(e) => return Err(e.into()),
                Ok(()) => {
                    self.update_and_free_hugetlb_folio(cpu, folio)?;
                    break;
                }
            }
        }
        Ok(())
    }

    /// `update_and_free_pages_bulk()`: restore the batch's vmemmap, then
    /// free every folio to the buddy allocator.
    fn update_and_free_pages_bulk(&mut self, cpu: &Cpu<'m>, mut folios: Vec<Folio>) -> Result<(), HugetlbError> {
        if folios.is_empty() {
            return Ok(());
        }
        self.counts.free_bulk_batches += 1;
        let mut non_hvo = Vec::new();
        loop {
            match self.hvo.hugetlb_vmemmap_restore_folios(cpu, &mut folios, &mut non_hvo) {
                Ok(_) => break,
                Err(HvoError::NoMemory) => self.bulk_vmemmap_restore_error(cpu, &mut folios, &mut non_hvo)?,
                Err(e) => {
                    // Not lost: back into the pool as they were.
                    for f in folios.drain(..).chain(non_hvo.drain(..)) {
                        self.hstate.add_hugetlb_folio(f, false);
                    }
                    return Err(e.into());
                }
            }
        }
        for folio in non_hvo {
            self.update_and_free_hugetlb_folio(cpu, folio)?;
        }
        Ok(())
    }

    /// `set_max_huge_pages()`: a write of `count` to `nr_hugepages`. Grows
    /// the pool as far as memory allows or shrinks it as far as pages in
    /// use and reservations allow; returns `nr_huge_pages` afterwards (what
    /// `nr_hugepages` reads back).
    ///
    /// # Errors
    /// Only a bug reported by HVO or the page allocator; the counters stay
    /// consistent with the free list.
    pub fn set_max_huge_pages(&mut self, cpu: &Cpu<'m>, count: u64) -> Result<u64, HugetlbError> {
        let h = &mut self.hstate;
        while h.surplus_huge_pages > 0 && count > h.persistent_huge_pages() {
            if !h.adjust_pool_surplus(-1) {
                break;
            }
        }

        let mut allocated = Vec::new();
        while count > self.hstate.persistent_huge_pages() + allocated.len() as u64 {
            match self.alloc_pool_huge_folio(cpu) {
                Ok(Some(folio)) => allocated.push(folio),
                Ok(None) => {
                    self.prep_and_add_allocated_folios(cpu, allocated)?;
                    self.hstate.max_huge_pages = self.hstate.persistent_huge_pages();
                    return Ok(self.hstate.nr_huge_pages);
                }
                Err(e) => {
                    self.prep_and_add_allocated_folios(cpu, allocated)?;
                    return Err(e);
                }
            }
        }
        self.prep_and_add_allocated_folios(cpu, allocated)?;

        let h = &mut self.hstate;
        let min_count = (h.resv_huge_pages + h.nr_huge_pages - h.free_huge_pages).max(count);
        let mut to_free = Vec::new();
        while min_count < h.persistent_huge_pages() {
            let Some(folio) = h.remove_pool_hugetlb_folio() else { break };
            to_free.push(folio);
        }
        self.update_and_free_pages_bulk(cpu, to_free)?;

        let h = &mut self.hstate;
        while count < h.persistent_huge_pages() {
            if !h.adjust_pool_surplus(1) {
                break;
            }
        }
        h.max_huge_pages = h.persistent_huge_pages();
        Ok(h.nr_huge_pages)
    }
}
