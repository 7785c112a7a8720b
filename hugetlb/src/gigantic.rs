//! Gigantic folios (32M and 1G: above `MAX_PAGE_ORDER`, so not from the
//! buddy free lists but from a contiguous range), allocated and freed as
//! each kernel release did ([`GiganticAlloc`]).
//!
//! # Up to Linux 6.11
//!
//! Allocate: `alloc_gigantic_folio` → `alloc_contig_pages(nr)` finds a
//! range (`pfn_range_valid_contig` reads every struct page of each
//! candidate), `alloc_contig_range` takes its free blocks and prepares
//! every frame as an order-0 page (`split_free_pages`); then
//! `prep_compound_gigantic_folio` walks every page again: freeze its
//! reference (`page_ref_freeze(p, 1)`) and point it at the head. Free:
//! `destroy_compound_gigantic_folio` walks every tail (clear its flags,
//! mapping and compound head, `set_page_refcounted`), then
//! `free_gigantic_folio` → `free_contig_range` frees every page as an
//! order-0 page (through the pcp lists, which drain to the buddy as they
//! fill).
//!
//! # Linux 6.12 (cf54f310d0d3, "mm/hugetlb: use __GFP_COMP for gigantic folios")
//!
//! Allocate: `folio_alloc_gigantic` → `alloc_contig_pages` with
//! `__GFP_COMP`: the same search, but the range comes back as one compound
//! page (`prep_new_page` of the head, `prep_compound_page` pointing the
//! tails at it); `folio_ref_freeze(folio, 1)` once. Free:
//! `hugetlb_free_folio` → `folio_put`: `free_tail_page_prepare` per tail,
//! then the whole folio goes to `free_one_page`, which `split_large_buddy`
//! gives back one pageblock (order 9) at a time: 512 block frees for 1G.
//!
//! The counters ([`crate::HugetlbCounts`], [`Hugetlb::contig_scan`]) count
//! each of these per-page and per-block steps, so that the published
//! 700 x 1G timings (alloc 13.5 s → 10.6 s, free 11.3 s → 1.5 s) can be
//! set against the work each release does.

use crate::config::GiganticAlloc;
use crate::error::HugetlbError;
use crate::hstate::HugePageSize;
use crate::hugetlb::Hugetlb;
use mmlab_buddy::ContigError;
use mmlab_engine::Cpu;
use mmlab_vmemmap::Folio;

impl<'m> Hugetlb<'_, 'm> {
    /// `alloc_gigantic_folio()` (and, before 6.12,
    /// `prep_compound_gigantic_folio()`): a compound folio of `size` from a
    /// contiguous range, or `None` when no range can be had.
    ///
    /// # Errors
    /// A bug reported by the page allocator.
    pub(crate) fn alloc_gigantic_folio(
        &mut self,
        cpu: &Cpu<'m>,
        size: HugePageSize,
    ) -> Result<Option<Folio>, HugetlbError> {
        let order = size.order();
        let gfp = self.pool_alloc_gfp_of(size);
        let mut retried = false;
        loop {
            let r = match self.cfg.gigantic {
                GiganticAlloc::V6_12 => self.pa.folio_alloc_gigantic(cpu, order, gfp, &mut self.contig),
                GiganticAlloc::V6_11 => self.pa.alloc_contig_pages_scan(cpu, 1 << order, gfp, &mut self.contig),
            };
            let pfn = match r {
                Ok(pfn) => pfn,
                Err(ContigError::NoRange { .. } | ContigError::Busy { .. }) => return Ok(None),
                Err(e) => return Err(HugetlbError::Contig(e)),
            };
            let folio = Folio::new(self.pa.machine(), pfn, order)?;
            if self.cfg.gigantic == GiganticAlloc::V6_11 {
                // __prep_compound_gigantic_folio(): freeze each page's
                // reference; a page someone else holds fails the folio.
                if let Err(err) = self.pa.join_allocation(pfn, order) {
                    self.pa
                        .free_contig_range(cpu, pfn, folio.nr_pages())
                        .map_err(|e| HugetlbError::Free { pfn, err: e })?;
                    if retried {
                        return Err(HugetlbError::Free { pfn, err });
                    }
                    retried = true;
                    continue;
                }
                self.counts.gigantic_refs_frozen += folio.nr_pages();
            }
            self.prep_compound(folio)?;
            self.counts.gigantic_folios_allocated += 1;
            return Ok(Some(folio));
        }
    }

    /// `free_gigantic_folio()` / `hugetlb_free_folio()` for a gigantic
    /// folio whose vmemmap is restored: tail by tail and page by page up to
    /// 6.11, one `folio_put` from 6.12.
    ///
    /// # Errors
    /// A bug: the page allocator refused the frames.
    pub(crate) fn free_gigantic_folio(&mut self, cpu: &Cpu<'m>, folio: Folio) -> Result<(), HugetlbError> {
        let pfn = folio.pfn;
        let free_err = |err| HugetlbError::Free { pfn, err };
        self.destroy_compound(folio)?;
        match self.cfg.gigantic {
            GiganticAlloc::V6_11 => {
                // __destroy_compound_gigantic_folio(): set_page_refcounted()
                // on each tail; free_contig_range(): __free_page() each.
                self.pa.split_allocation(pfn, folio.order, 0).map_err(free_err)?;
                self.counts.gigantic_refs_unfrozen += folio.nr_pages() - 1;
                self.pa.free_contig_range(cpu, pfn, folio.nr_pages()).map_err(free_err)?;
                self.counts.contig_order0_frees += folio.nr_pages();
            }
            GiganticAlloc::V6_12 => {
                self.pa.folio_put(cpu, pfn).map_err(free_err)?;
                self.counts.gigantic_folio_puts += 1;
            }
        }
        self.counts.gigantic_folios_freed += 1;
        Ok(())
    }
}
