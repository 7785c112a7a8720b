//! Gigantic allocations: contiguous ranges as one compound allocation
//! (`__GFP_COMP`, Linux 6.12), freeing an allocation above
//! `MAX_PAGE_ORDER` in one go (`folio_put` → `__free_pages_ok` →
//! `split_large_buddy`), and the allocator's record of a range changing
//! shape (a set of order-0 pages becoming one compound page and back, a
//! compound page split into smaller ones).
//!
//! The kernel records none of that shape outside the struct pages
//! themselves (refcounts and `compound_head`); mmlab's allocator keeps its
//! own per-frame record ([`PageExt`]) for `check_invariants`, so the
//! callers that reshape an allocation (hugetlb's gigantic prep and destroy,
//! demote) say so through [`PageAllocator::join_allocation`] and
//! [`PageAllocator::split_allocation`]. Instrumented: those two.

use crate::error::FreeError;
use crate::gfp::gfp_mt;
use crate::page_alloc::PageAllocator;
use mmlab_buddy::{ContigError, ContigScan};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Cpu, Gfp, Pfn};

impl<'m> PageAllocator<'m> {
    /// `alloc_contig_pages()`: drain the pcps, then find and take `nr` free
    /// contiguous frames: with `__GFP_COMP` in `gfp` one allocation of order
    /// `log2(nr)`, else `nr` order-0 pages. The work is added to `scan`.
    ///
    /// # Errors
    /// [`ContigError::ForeignCpu`], [`ContigError::NoRange`], or
    /// [`ContigError::NotCompound`] for `__GFP_COMP` with `nr` not a power
    /// of two; nothing is changed.
    pub fn alloc_contig_pages_scan(
        &self,
        cpu: &Cpu<'m>,
        nr: u64,
        gfp: Gfp,
        scan: &mut ContigScan,
    ) -> Result<Pfn, ContigError> {
        if self.foreign(cpu) {
            return Err(ContigError::ForeignCpu { cpu: cpu.id() });
        }
        self.drain_all_pages(cpu);
        let comp = gfp.contains(Gfp::__GFP_COMP);
        let r = self.alloc_contig_pages_zones(gfp, |z| z.alloc_contig_pages_scan(cpu, nr, gfp_mt(gfp), comp, scan));
        self.after_op();
        r
    }

    /// `folio_alloc_gigantic()` (include/linux/gfp.h, 6.12): a compound
    /// allocation of `2^order` frames from `alloc_contig_pages` with
    /// `__GFP_COMP` added.
    ///
    /// # Errors
    /// As [`PageAllocator::alloc_contig_pages_scan`].
    pub fn folio_alloc_gigantic(
        &self,
        cpu: &Cpu<'m>,
        order: u32,
        gfp: Gfp,
        scan: &mut ContigScan,
    ) -> Result<Pfn, ContigError> {
        self.alloc_contig_pages_scan(cpu, 1u64 << order.min(63), gfp | Gfp::__GFP_COMP, scan)
    }

    /// The order a live allocation at `pfn` was recorded with.
    fn allocation_order(&self, pfn: Pfn) -> Result<u32, FreeError> {
        if !self.m.memmap().pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        match self.m.page(pfn).ext() {
            PageExt::Alloc(o, _) => Ok(o as u32),
            PageExt::Buddy(_) | PageExt::Pcp(_) => Err(FreeError::DoubleFree { pfn }),
            PageExt::Reserved => Err(FreeError::Reserved { pfn }),
            PageExt::Tail => Err(FreeError::NotAllocated { pfn }),
        }
    }

    /// `folio_put()` of a folio whose last reference this is, at any order:
    /// up to `MAX_PAGE_ORDER` as `__free_pages()`; above it (a gigantic
    /// compound allocation) through `free_frozen_pages` → `__free_pages_ok`
    /// → `free_one_page`, which `split_large_buddy` gives back one pageblock
    /// at a time (512 order-9 frees for 1 GiB, merging into order-10
    /// blocks).
    ///
    /// # Errors
    /// A [`FreeError`] for a frame that is not the head of a live
    /// allocation, one with other references, or a CPU of another machine;
    /// nothing is changed.
    pub fn folio_put(&self, cpu: &Cpu<'m>, pfn: Pfn) -> Result<(), FreeError> {
        if self.foreign(cpu) {
            return Err(FreeError::ForeignCpu { cpu: cpu.id() });
        }
        let order = self.allocation_order(pfn)?;
        if order <= mmlab_engine::MAX_PAGE_ORDER {
            return self.free_pages(cpu, pfn, order);
        }
        let p = self.m.page(pfn);
        if p.refcount() != 1 {
            return Err(FreeError::DoubleFree { pfn });
        }
        p.set_refcount(0);
        self.free_frozen_pages(cpu, pfn, p, order);
        self.after_op();
        Ok(())
    }

    /// Record `2^order` live order-0 pages from `pfn` as one allocation of
    /// `order`: what `__prep_compound_gigantic_folio` (mm/hugetlb.c, up to
    /// 6.11) makes of them by freezing each page's reference
    /// (`page_ref_freeze(p, 1)`) and pointing the tails at the head. Every
    /// page is checked first.
    ///
    /// # Errors
    /// [`FreeError::NotAllocated`] (or another [`FreeError`]) for a page
    /// that is not a live order-0 page with exactly one reference (the
    /// kernel's "unexpected inflated ref count"); nothing is changed.
    pub fn join_allocation(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        let nr = 1u64 << order.min(40);
        let mut mt = None;
        for i in 0..nr {
            let q = pfn.add(i);
            if self.allocation_order(q)? != 0 {
                return Err(FreeError::WrongOrder { pfn: q, allocated: self.allocation_order(q)?, freed: 0 });
            }
            if self.m.page(q).refcount() != 1 {
                return Err(FreeError::NotAllocated { pfn: q });
            }
            if let PageExt::Alloc(_, t) = self.m.page(q).ext()
                && i == 0
            {
                mt = Some(t);
            }
        }
        let Some(mt) = mt else { return Err(FreeError::NotAllocated { pfn }) };
        for i in 1..nr {
            let t = self.m.page(pfn.add(i));
            t.set_refcount(0);
            t.set_ext(PageExt::Tail);
        }
        self.m.page(pfn).set_ext(PageExt::Alloc(order as u8, mt));
        Ok(())
    }

    /// Record the live allocation of `order` at `pfn` as `2^(order -
    /// new_order)` allocations of `new_order`, each with one reference: the
    /// allocator's side of `split_page()` (`new_order` 0), of
    /// `__destroy_compound_gigantic_folio` (`set_page_refcounted` on each
    /// tail, up to 6.11), and of demote (`split_page_owner` and a compound
    /// page per piece).
    ///
    /// # Errors
    /// [`FreeError::WrongOrder`] when the allocation is not of `order` or
    /// `new_order > order`, or another [`FreeError`] for a frame that is
    /// not the head of a live allocation; nothing is changed.
    pub fn split_allocation(&self, pfn: Pfn, order: u32, new_order: u32) -> Result<(), FreeError> {
        let allocated = self.allocation_order(pfn)?;
        if allocated != order || new_order > order {
            return Err(FreeError::WrongOrder { pfn, allocated, freed: order });
        }
        let PageExt::Alloc(_, mt) = self.m.page(pfn).ext() else {
            return Err(FreeError::NotAllocated { pfn });
        };
        let step = 1u64 << new_order;
        let mut i = 0;
        while i < 1u64 << order {
            let p = self.m.page(pfn.add(i));
            p.set_refcount(1);
            p.set_ext(PageExt::Alloc(new_order as u8, mt));
            i += step;
        }
        Ok(())
    }
}
