//! The pool of one hstate: growing and shrinking it (`set_max_huge_pages`),
//! the batch paths (`prep_and_add_allocated_folios`,
//! `update_and_free_pages_bulk`) and the single-folio free path
//! (`update_and_free_hugetlb_folio`, deferred to `free_hpage_workfn` for an
//! optimized folio in atomic context). See the crate docs.

use crate::error::HugetlbError;
use crate::hstate::HugePageSize;
use crate::hugetlb::Hugetlb;
use mmlab_engine::{Cpu, Gfp};
use mmlab_vmemmap::folio::{destroy_compound, prep_compound};
use mmlab_vmemmap::{Folio, HvoError};

impl<'m> Hugetlb<'_, 'm> {
    /// The GFP mask of `alloc_pool_huge_folio` for `size`:
    /// `htlb_alloc_mask()` (`GFP_HIGHUSER_MOVABLE` for sizes that can
    /// migrate, `GFP_HIGHUSER` for gigantic ones; `__GFP_COMP |
    /// __GFP_NOWARN`), `__GFP_THISNODE`, and `__GFP_RETRY_MAYFAIL` while
    /// trying hard. Without `__GFP_COMP` for gigantic sizes before 6.12.
    pub fn pool_alloc_gfp_of(&self, size: HugePageSize) -> Gfp {
        let base = if size.is_gigantic() { Gfp::GFP_HIGHUSER } else { Gfp::GFP_HIGHUSER_MOVABLE };
        let mut gfp = base | Gfp::__GFP_THISNODE | Gfp::__GFP_NOWARN | Gfp::__GFP_RETRY_MAYFAIL;
        if !size.is_gigantic() || self.cfg.gigantic == crate::GiganticAlloc::V6_12 {
            gfp |= Gfp::__GFP_COMP;
        }
        gfp
    }

    /// The GFP mask of the 2 MiB pool (kept for callers of the 2 MiB-only
    /// crate).
    pub fn pool_alloc_gfp() -> Gfp {
        Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_THISNODE | Gfp::__GFP_COMP | Gfp::__GFP_NOWARN | Gfp::__GFP_RETRY_MAYFAIL
    }

    /// `prep_compound_page()`'s tail writes for a hugetlb folio, counted.
    pub(crate) fn prep_compound(&mut self, folio: Folio) -> Result<(), HugetlbError> {
        prep_compound(self.pa.machine(), folio)?;
        self.counts.compound_tails_prepped += folio.nr_pages() - 1;
        Ok(())
    }

    /// The tail clearing when a compound folio is taken apart, counted.
    pub(crate) fn destroy_compound(&mut self, folio: Folio) -> Result<(), HugetlbError> {
        destroy_compound(self.pa.machine(), folio)?;
        self.counts.compound_tails_cleared += folio.nr_pages() - 1;
        Ok(())
    }

    /// `alloc_buddy_hugetlb_folio()` / `alloc_gigantic_folio()` and
    /// `init_new_hugetlb_folio()` (`only_alloc_fresh_hugetlb_folio`): a
    /// fresh compound folio of `size`, or `None` when memory has run out.
    pub(crate) fn only_alloc_fresh_hugetlb_folio(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
    ) -> Result<Option<Folio>, HugetlbError> {
        if size.is_gigantic() {
            return self.alloc_gigantic_folio(cpu, size);
        }
        let Some(pfn) = self.pa.alloc_pages(cpu, self.pool_alloc_gfp_of(size), size.order()) else {
            return Ok(None);
        };
        let folio = Folio::new(self.pa.machine(), pfn, size.order())?;
        self.prep_compound(folio)?;
        Ok(Some(folio))
    }

    /// `alloc_pool_huge_folio()`: one fresh folio for the pool, counted.
    fn alloc_pool_huge_folio(&mut self, cpu: &Cpu<'m>, size: HugePageSize) -> Result<Option<Folio>, HugetlbError> {
        let r = self.only_alloc_fresh_hugetlb_folio(cpu, size)?;
        match r {
            Some(f) => {
                self.counts.pool_folios_allocated += 1;
                let clock = self.pa.machine().trace_clock();
                mmlab_engine::trace::mmlab::hugetlb_alloc_folio(cpu.id(), clock, f.pfn.0, f.order, false);
            }
            None => self.counts.pool_alloc_failures += 1,
        }
        Ok(r)
    }

    /// `prep_and_add_allocated_folios()`: optimize the batch's vmemmap in
    /// one go, then account and enqueue each folio.
    pub(crate) fn prep_and_add_allocated_folios(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        folios: Vec<Folio>,
    ) -> Result<(), HugetlbError> {
        if folios.is_empty() {
            return Ok(());
        }
        self.counts.prep_and_add_batches += 1;
        let r = self.hvo.hugetlb_vmemmap_optimize_folios(cpu, &folios);
        // The folios join the pool whatever HVO did: none is lost.
        let h = self.h(size);
        for folio in folios {
            // __prep_account_new_huge_page()
            h.nr_huge_pages += 1;
            h.enqueue_hugetlb_folio(folio);
        }
        r.map_err(HugetlbError::from)
    }

    /// `hugetlb_free_folio()` for a folio whose vmemmap is restored: take
    /// the compound page apart and give the frames back (see
    /// [`crate::gigantic`] for the gigantic sizes).
    fn hugetlb_free_folio(&mut self, cpu: &Cpu<'m>, size: HugePageSize, folio: Folio) -> Result<(), HugetlbError> {
        if size.is_gigantic() {
            self.free_gigantic_folio(cpu, folio)?;
        } else {
            self.destroy_compound(folio)?;
            self.pa
                .free_pages(cpu, folio.pfn, folio.order)
                .map_err(|err| HugetlbError::Free { pfn: folio.pfn, err })?;
        }
        self.counts.pool_folios_freed += 1;
        mmlab_engine::trace::mmlab::hugetlb_free_folio(
            cpu.id(),
            self.pa.machine().trace_clock(),
            folio.pfn.0,
            folio.order,
        );
        Ok(())
    }

    /// `__update_and_free_hugetlb_folio()`: restore an optimized folio's
    /// vmemmap (a single-folio restore, with its grace period); if that
    /// cannot be done the folio goes back to the pool as a free surplus
    /// page; otherwise it is freed.
    pub(crate) fn __update_and_free_hugetlb_folio(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        folio: Folio,
    ) -> Result<(), HugetlbError> {
        if folio.test_vmemmap_optimized(self.pa.machine()) {
            match self.hvo.hugetlb_vmemmap_restore_folio(cpu, folio) {
                Ok(()) => {}
                Err(HvoError::NoMemory) => {
                    self.counts.restore_failed_to_surplus += 1;
                    self.h(size).add_hugetlb_folio(folio, true);
                    return Ok(());
                }
                Err(e) => {
                    self.h(size).add_hugetlb_folio(folio, true);
                    return Err(e.into());
                }
            }
        }
        self.hugetlb_free_folio(cpu, size, folio)
    }

    /// `update_and_free_hugetlb_folio()`: free a folio already out of the
    /// pool's counts. An optimized folio freed in atomic context waits on
    /// `hpage_freelist` for [`Hugetlb::flush_free_hpage_work`] (its
    /// restore allocates).
    pub(crate) fn update_and_free_hugetlb_folio(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        folio: Folio,
        atomic: bool,
    ) -> Result<(), HugetlbError> {
        if !folio.test_vmemmap_optimized(self.pa.machine()) || !atomic {
            return self.__update_and_free_hugetlb_folio(cpu, size, folio);
        }
        self.counts.free_deferred += 1;
        self.hpage_freelist.push((size, folio));
        Ok(())
    }

    /// `flush_free_hpage_work()` → `free_hpage_workfn()`: free every folio
    /// waiting on `hpage_freelist`, one at a time (each restore with its
    /// own grace period).
    ///
    /// # Errors
    /// A bug reported by HVO or the page allocator; the folios not reached
    /// stay queued.
    pub fn flush_free_hpage_work(&mut self, cpu: &Cpu<'m>) -> Result<(), HugetlbError> {
        if self.hpage_freelist.is_empty() {
            return Ok(());
        }
        self.counts.free_hpage_work_runs += 1;
        // llist_del_all() hands the list over newest first.
        while let Some((size, folio)) = self.hpage_freelist.pop() {
            self.__update_and_free_hugetlb_folio(cpu, size, folio)?;
        }
        Ok(())
    }

    /// `bulk_vmemmap_restore_error()`: make progress after a batch restore
    /// ran out of memory.
    fn bulk_vmemmap_restore_error(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        folios: &mut Vec<Folio>,
        non_hvo: &mut Vec<Folio>,
    ) -> Result<(), HugetlbError> {
        self.counts.bulk_restore_errors += 1;
        if !non_hvo.is_empty() {
            // Free what is restored: it may give the rest room.
            for folio in std::mem::take(non_hvo) {
                self.hugetlb_free_folio(cpu, size, folio)?;
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
                    self.h(size).add_hugetlb_folio(folio, true);
                }
                Err(e) => {
                    self.h(size).add_hugetlb_folio(folio, false);
                    return Err(e.into());
                }
                Ok(()) => {
                    self.hugetlb_free_folio(cpu, size, folio)?;
                    break;
                }
            }
        }
        Ok(())
    }

    /// `update_and_free_pages_bulk()`: restore the batch's vmemmap, then
    /// free every folio to the page allocator.
    pub(crate) fn update_and_free_pages_bulk(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        mut folios: Vec<Folio>,
    ) -> Result<(), HugetlbError> {
        if folios.is_empty() {
            return Ok(());
        }
        self.counts.free_bulk_batches += 1;
        let mut non_hvo = Vec::new();
        loop {
            match self.hvo.hugetlb_vmemmap_restore_folios(cpu, &mut folios, &mut non_hvo) {
                Ok(_) => break,
                Err(HvoError::NoMemory) => self.bulk_vmemmap_restore_error(cpu, size, &mut folios, &mut non_hvo)?,
                Err(e) => {
                    // Not lost: back into the pool as they were.
                    let h = self.h(size);
                    for f in folios.drain(..).chain(non_hvo.drain(..)) {
                        h.add_hugetlb_folio(f, false);
                    }
                    return Err(e.into());
                }
            }
        }
        for folio in non_hvo {
            self.hugetlb_free_folio(cpu, size, folio)?;
        }
        Ok(())
    }

    /// `set_max_huge_pages()`: a write of `count` to `nr_hugepages` of
    /// `size`. Grows the pool as far as memory allows or shrinks it as far
    /// as pages in use and reservations allow; returns `nr_huge_pages`
    /// afterwards (what `nr_hugepages` reads back).
    ///
    /// # Errors
    /// Only a bug reported by HVO or the page allocator; the counters stay
    /// consistent with the free list.
    pub fn set_max_huge_pages_of(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        count: u64,
    ) -> Result<u64, HugetlbError> {
        let m = self.pa.machine();
        let _slice = mmlab_engine::trace::mmlab::func(cpu.id(), m.trace_clock(), "set_max_huge_pages");
        self.flush_free_hpage_work(cpu)?;
        let h = self.h(size);
        while h.surplus_huge_pages > 0 && count > h.persistent_huge_pages() {
            if !h.adjust_pool_surplus(-1) {
                break;
            }
        }

        let mut allocated = Vec::new();
        while count > self.hstate_of(size).persistent_huge_pages() + allocated.len() as u64 {
            match self.alloc_pool_huge_folio(cpu, size) {
                Ok(Some(folio)) => allocated.push(folio),
                Ok(None) => {
                    self.prep_and_add_allocated_folios(cpu, size, allocated)?;
                    let h = self.h(size);
                    h.max_huge_pages = h.persistent_huge_pages();
                    return Ok(h.nr_huge_pages);
                }
                Err(e) => {
                    self.prep_and_add_allocated_folios(cpu, size, allocated)?;
                    return Err(e);
                }
            }
        }
        self.prep_and_add_allocated_folios(cpu, size, allocated)?;

        let h = self.h(size);
        let min_count = (h.resv_huge_pages + h.nr_huge_pages - h.free_huge_pages).max(count);
        let mut to_free = Vec::new();
        while min_count < h.persistent_huge_pages() {
            let Some(folio) = h.remove_pool_hugetlb_folio(false) else { break };
            to_free.push(folio);
        }
        self.update_and_free_pages_bulk(cpu, size, to_free)?;
        self.flush_free_hpage_work(cpu)?;

        let h = self.h(size);
        while count < h.persistent_huge_pages() {
            if !h.adjust_pool_surplus(1) {
                break;
            }
        }
        h.max_huge_pages = h.persistent_huge_pages();
        Ok(h.nr_huge_pages)
    }
}
