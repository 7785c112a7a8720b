//! Surplus pages, overcommit, reservations, and the allocator the fault
//! path uses (mm/hugetlb.c, Linux 6.12).
//!
//! - `nr_overcommit_hugepages` caps `surplus_huge_pages`: pages allocated
//!   beyond the persistent pool when a fault or a reservation finds none
//!   free. Gigantic sizes cannot overcommit (the write is `-EINVAL`, the
//!   allocation refused).
//! - `alloc_surplus_hugetlb_folio`: under the cap, allocate one fresh folio
//!   and prepare it alone (`prep_new_hugetlb_folio`: HVO of that one folio,
//!   `hugetlb_vmemmap_optimize_folio`, with its own grace period — the
//!   6.11 policy's grace period even with HVO off: the -34.3 % regression),
//!   then count it surplus.
//! - Reservations (`hugetlb_acct_memory`, as `hugetlb_reserve_pages` and
//!   `hugetlb_unreserve_pages` call it): reserving `delta` pages needs
//!   `resv + delta` free pages; `gather_surplus_pages` allocates surplus
//!   pages for the difference (all or nothing: on failure the ones it got
//!   are freed) and puts them on the free list. Unreserving
//!   (`return_unused_surplus_pages`) drops the reservation and frees as
//!   many free surplus pages, as a batch.
//! - `alloc_hugetlb_folio` (a fault): a mapping that holds a reservation
//!   takes a free page and consumes its reservation; one without may only
//!   take a page nobody reserved; when none is free, a surplus page is
//!   allocated. The fault is taken to succeed, so the reservation is
//!   consumed for good (`HPG_restore_reserve` is cleared once the folio is
//!   mapped); a mapping gives back only the reservations it never used,
//!   with `hugetlb_acct_memory(-n)`.
//!   `free_huge_folio` (the last unmap), while the pool has surplus pages,
//!   frees the folio out of the pool
//!   (`remove_hugetlb_folio(…, true)`, `update_and_free_hugetlb_folio`:
//!   an optimized folio waits for `free_hpage_workfn`, whose restore has
//!   its own grace period); otherwise it goes back on the free list.
//!
//! Simplified: a reservation is a count the caller holds (no resv_map,
//! subpool, cgroup or memory policy; `vma_has_reserves` is the caller's
//! `reserved` flag).

use crate::error::HugetlbError;
use crate::hstate::HugePageSize;
use crate::hugetlb::{Hugetlb, InUse};
use mmlab_engine::Cpu;
use mmlab_vmemmap::Folio;

impl<'m> Hugetlb<'_, 'm> {
    /// `nr_overcommit_hugepages_store()`.
    ///
    /// # Errors
    /// [`HugetlbError::GiganticOvercommit`] for 32M and 1G; nothing is
    /// changed.
    pub fn set_nr_overcommit_hugepages(&mut self, size: HugePageSize, n: u64) -> Result<(), HugetlbError> {
        if size.is_gigantic() {
            return Err(HugetlbError::GiganticOvercommit { size });
        }
        self.h(size).nr_overcommit_huge_pages = n;
        Ok(())
    }

    /// `alloc_surplus_hugetlb_folio()` → `alloc_fresh_hugetlb_folio()` →
    /// `prep_new_hugetlb_folio()`: one fresh folio beyond the persistent
    /// pool, counted in `nr_huge_pages` and `surplus_huge_pages`, not on the
    /// free list. `None` at the overcommit cap, for a gigantic size, or
    /// when memory has run out.
    ///
    /// # Errors
    /// A bug reported by HVO or the page allocator.
    pub(crate) fn alloc_surplus_hugetlb_folio(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
    ) -> Result<Option<Folio>, HugetlbError> {
        let h = self.hstate_of(size);
        if size.is_gigantic() || h.surplus_huge_pages >= h.nr_overcommit_huge_pages {
            self.counts.surplus_refused += 1;
            return Ok(None);
        }
        let Some(folio) = self.only_alloc_fresh_hugetlb_folio(cpu, size)? else {
            return Ok(None);
        };
        // __prep_new_hugetlb_folio(): HVO of this one folio.
        let r = self.hvo.hugetlb_vmemmap_optimize_folio(cpu, folio);
        let h = self.h(size);
        h.nr_huge_pages += 1;
        h.surplus_huge_pages += 1;
        self.counts.surplus_allocated += 1;
        let clock = self.pa.machine().trace_clock();
        mmlab_engine::trace::mmlab::hugetlb_alloc_folio(cpu.id(), clock, folio.pfn.0, folio.order, true);
        r?;
        Ok(Some(folio))
    }

    /// `free_huge_folio()` of a folio out of the free list (handed out, or
    /// a surplus page `gather_surplus_pages` did not need).
    fn free_huge_folio_inner(&mut self, cpu: &Cpu<'m>, size: HugePageSize, folio: Folio) -> Result<(), HugetlbError> {
        self.counts.free_huge_folio_calls += 1;
        let h = self.h(size);
        if h.surplus_huge_pages > 0 {
            // remove_hugetlb_folio(h, folio, true): not on the free list.
            h.surplus_huge_pages -= 1;
            h.nr_huge_pages -= 1;
            return self.update_and_free_hugetlb_folio(cpu, size, folio, true);
        }
        h.enqueue_hugetlb_folio(folio);
        Ok(())
    }

    /// `alloc_hugetlb_folio()`: one huge page of `size` for a fault in a
    /// mapping; `reserved` says the mapping holds a reservation for it
    /// (from [`Hugetlb::hugetlb_acct_memory`]), which the page then
    /// consumes. Without one only an unreserved free page or a surplus page
    /// will do.
    ///
    /// # Errors
    /// [`HugetlbError::NoMemory`] when no page could be had (the fault's
    /// `VM_FAULT_OOM`), also for `reserved` with no reservation left;
    /// nothing is changed. A bug reported by HVO or the page allocator.
    pub fn alloc_hugetlb_folio(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        reserved: bool,
    ) -> Result<Folio, HugetlbError> {
        let h = self.h(size);
        if reserved && h.resv_huge_pages == 0 {
            return Err(HugetlbError::NoMemory);
        }
        // dequeue_hugetlb_folio_vma()
        let mut folio = None;
        if reserved || h.available_huge_pages() > 0 {
            folio = h.dequeue_hugetlb_folio();
        }
        let folio = match folio {
            Some(f) => f,
            None => match self.alloc_surplus_hugetlb_folio(cpu, size)? {
                Some(f) => f,
                None => return Err(HugetlbError::NoMemory),
            },
        };
        if reserved {
            self.h(size).resv_huge_pages -= 1;
        }
        self.active.insert(folio.pfn, InUse { size });
        self.counts.folios_handed_out += 1;
        Ok(folio)
    }

    /// `free_huge_folio()`: the last reference to a folio handed out by
    /// [`Hugetlb::alloc_hugetlb_folio`] is gone.
    ///
    /// # Errors
    /// [`HugetlbError::NotInUse`] for a folio not handed out (nothing is
    /// changed); a bug reported by HVO or the page allocator.
    pub fn free_huge_folio(&mut self, cpu: &Cpu<'m>, folio: Folio) -> Result<(), HugetlbError> {
        let Some(u) = self.active.get(&folio.pfn).copied().filter(|u| u.size.order() == folio.order) else {
            return Err(HugetlbError::NotInUse { pfn: folio.pfn });
        };
        self.active.remove(&folio.pfn);
        self.free_huge_folio_inner(cpu, u.size, folio)
    }

    /// `gather_surplus_pages()`: make `resv + delta` pages free, allocating
    /// surplus pages for the difference, and commit the reservation.
    fn gather_surplus_pages(&mut self, cpu: &Cpu<'m>, size: HugePageSize, delta: u64) -> Result<(), HugetlbError> {
        let h = self.hstate_of(size);
        let mut needed = (h.resv_huge_pages + delta) as i64 - h.free_huge_pages as i64;
        if needed <= 0 {
            self.h(size).resv_huge_pages += delta;
            return Ok(());
        }
        self.counts.gather_surplus_calls += 1;
        let mut list = Vec::new();
        let mut alloc_ok = true;
        let ok = loop {
            for _ in 0..needed {
                match self.alloc_surplus_hugetlb_folio(cpu, size)? {
                    Some(f) => list.push(f),
                    None => {
                        alloc_ok = false;
                        break;
                    }
                }
            }
            let h = self.hstate_of(size);
            needed = (h.resv_huge_pages + delta) as i64 - (h.free_huge_pages + list.len() as u64) as i64;
            if needed > 0 {
                if alloc_ok {
                    continue;
                }
                break false;
            }
            break true;
        };
        if ok {
            // Commit, and put the pages needed on the free list.
            let mut take = needed + list.len() as i64;
            let h = self.h(size);
            h.resv_huge_pages += delta;
            while take > 0 {
                let Some(f) = (!list.is_empty()).then(|| list.remove(0)) else { break };
                h.enqueue_hugetlb_folio(f);
                take -= 1;
            }
        }
        // The rest goes back (they are surplus, so out of the pool).
        for f in list {
            self.free_huge_folio_inner(cpu, size, f)?;
        }
        if ok { Ok(()) } else { Err(HugetlbError::NoMemory) }
    }

    /// `return_unused_surplus_pages()`: drop `unused` reserved pages, and
    /// free as many free surplus pages, as one batch.
    fn return_unused_surplus_pages(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
        unused: u64,
    ) -> Result<(), HugetlbError> {
        self.counts.return_unused_surplus_calls += 1;
        let h = self.h(size);
        h.resv_huge_pages -= unused.min(h.resv_huge_pages);
        let nr = unused.min(h.surplus_huge_pages);
        let mut list = Vec::new();
        for _ in 0..nr {
            let Some(f) = h.remove_pool_hugetlb_folio(true) else { break };
            list.push(f);
        }
        self.update_and_free_pages_bulk(cpu, size, list)
    }

    /// `hugetlb_acct_memory()`: reserve `delta` pages of `size` (`delta` >
    /// 0, as `hugetlb_reserve_pages` does for a new mapping) or give back
    /// `-delta` reserved pages (`hugetlb_unreserve_pages`).
    ///
    /// # Errors
    /// [`HugetlbError::NoMemory`] when the reservation cannot be backed
    /// (not enough free pages and surplus pages; nothing reserved then),
    /// or when giving back more than is reserved (nothing changed). A bug
    /// reported by HVO or the page allocator.
    pub fn hugetlb_acct_memory(&mut self, cpu: &Cpu<'m>, size: HugePageSize, delta: i64) -> Result<(), HugetlbError> {
        match delta {
            0 => Ok(()),
            d if d > 0 => {
                let d = d as u64;
                self.gather_surplus_pages(cpu, size, d)?;
                // allowed_mems_nr(): one node, every free page.
                if d > self.hstate_of(size).free_huge_pages {
                    self.return_unused_surplus_pages(cpu, size, d)?;
                    return Err(HugetlbError::NoMemory);
                }
                Ok(())
            }
            d => {
                let d = d.unsigned_abs();
                if d > self.hstate_of(size).resv_huge_pages {
                    return Err(HugetlbError::NoMemory);
                }
                self.return_unused_surplus_pages(cpu, size, d)
            }
        }
    }
}
