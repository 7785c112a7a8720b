//! Contiguous ranges of frames: `alloc_contig_range()` / `alloc_contig_pages()`
//! (mm/page_alloc.c), needed for gigantic hugetlb pages (32 MiB, 1 GiB).
//!
//! The kernel isolates the range's pageblocks, migrates pages in use out of
//! it, drains the pcp lists, then takes the free blocks that cover the range
//! and gives back the parts that stick out. mmlab cannot migrate, so a range
//! with a frame in use (or parked on a pcp list: the caller drains first) is
//! refused as busy, and nothing changes. Simplified: no MIGRATE_ISOLATE
//! pageblocks; the whole check-and-take runs under one zone-lock hold.
//!
//! Without `__GFP_COMP` every frame of the range becomes an order-0 page of
//! its own (`split_free_pages`: one `post_alloc_hook` and
//! `set_page_refcounted` per frame). With it (Linux 6.12, "mm/contig_alloc:
//! support __GFP_COMP", the first patch of Yu Zhao's series whose third is
//! cf54f310d0d3 "mm/hugetlb: use __GFP_COMP for gigantic folios") the range
//! must be exactly a naturally aligned power of two and comes back as one
//! allocation of that order (`prep_new_page` of the head); anything else is
//! refused (`-EINVAL`). [`ContigScan`] counts the work of each call.

mod cma;
mod error;
mod scan;

pub use error::ContigError;
pub use scan::ContigScan;

use crate::zone::{Fpi, LockedZone, Zone};
use mmlab_engine::mm::memblock::free_pages_memory;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::{MAX_PAGE_ORDER, Migratetype, PAGEBLOCK_NR_PAGES};
use mmlab_engine::{Cpu, Pfn};

impl LockedZone<'_, '_> {
    /// The free block containing `pfn`, as (head, order).
    fn free_block_containing(&self, pfn: Pfn) -> Option<(Pfn, u32)> {
        (0..=MAX_PAGE_ORDER)
            .map(|o| (Pfn(pfn.0 & !((1u64 << o) - 1)), o))
            .find(|&(head, o)| self.is_free_block(head, o))
    }

    /// Take `[start, start + nr)` out of the free lists; every frame becomes
    /// an allocated order-0 page of type `mt` with refcount 1. On error
    /// nothing has changed.
    ///
    /// # Errors
    /// [`ContigError::OutOfRange`] for an empty range or one that leaves the zone;
    /// [`ContigError::Busy`] for a frame not in a free block.
    pub fn take_contig_range(&mut self, start: Pfn, nr: u64, mt: Migratetype) -> Result<(), ContigError> {
        self.take_contig_range_scan(start, nr, mt, false, &mut ContigScan::default())
    }

    /// [`LockedZone::take_contig_range`], as one compound allocation of
    /// order `log2(nr)` if `comp` (`__GFP_COMP`): the head an allocated page
    /// of that order with refcount 1, every other frame a tail. The work is
    /// added to `scan`.
    ///
    /// # Errors
    /// As [`LockedZone::take_contig_range`], and
    /// [`ContigError::NotCompound`] when `comp` and the range is not a
    /// naturally aligned power of two no larger than the free blocks around
    /// it (the kernel's outer range must equal the range).
    pub fn take_contig_range_scan(
        &mut self,
        start: Pfn,
        nr: u64,
        mt: Migratetype,
        comp: bool,
        scan: &mut ContigScan,
    ) -> Result<(), ContigError> {
        let end = start.0.saturating_add(nr);
        if nr == 0 || !self.zone.spans(start) || !self.zone.spans(Pfn(end - 1)) {
            return Err(ContigError::OutOfRange { start, nr_pages: nr });
        }
        scan.ranges_tried += 1;
        // Check first: every frame must sit in a free block.
        let mut blocks = Vec::new();
        let mut p = start.0;
        while p < end {
            // A frame of a hole (no struct page: !pfn_valid) is never free.
            if !self.zone.m.memmap().pfn_valid(Pfn(p)) {
                scan.ranges_busy += 1;
                return Err(ContigError::Busy { pfn: Pfn(p) });
            }
            let Some((head, o)) = self.free_block_containing(Pfn(p)) else {
                scan.ranges_busy += 1;
                return Err(ContigError::Busy { pfn: Pfn(p) });
            };
            blocks.push((head, o));
            p = head.0 + (1 << o);
        }
        if comp {
            let outer = (blocks[0].0.0, p);
            if !nr.is_power_of_two() || !start.0.is_multiple_of(nr) || outer != (start.0, end) {
                return Err(ContigError::NotCompound { start, nr_pages: nr });
            }
        }
        // Take the blocks, give back what sticks out.
        scan.blocks_taken += blocks.len() as u64;
        for (head, o) in blocks {
            let bmt = self.zone.pageblock_migratetype(head);
            self.del_page_from_free_list(head, o, bmt);
            let (bs, be) = (head.0, head.0 + (1 << o));
            let give_back = |s: u64, e: u64, z: &mut Self| {
                free_pages_memory(s, e, &mut |pfn, order| {
                    let t = z.zone.pageblock_migratetype(pfn);
                    z.free_one_page_locked(pfn, order, t, Fpi::NONE)
                });
            };
            if bs < start.0 {
                give_back(bs, start.0, self);
                scan.pages_given_back += start.0 - bs;
            }
            if be > end {
                give_back(end, be, self);
                scan.pages_given_back += be - end;
            }
        }
        if comp {
            // prep_new_page() of the head; the tails stay tails.
            let head = self.zone.m.page(start);
            head.set_refcount(1);
            head.set_ext(PageExt::Alloc(nr.trailing_zeros() as u8, mt));
            scan.pages_prepped += 1;
        } else {
            // split_free_pages(): every frame its own page.
            for p in start.0..end {
                let page = self.zone.m.page(Pfn(p));
                page.set_refcount(1);
                page.set_ext(PageExt::Alloc(0, mt));
            }
            scan.pages_prepped += nr;
        }
        scan.ranges_allocated += 1;
        self.cpu.count(VmEvent::pgalloc(self.zone.name), nr);
        Ok(())
    }
}

impl<'m> Zone<'m> {
    /// `alloc_contig_range()`: allocate exactly `[start, start + nr)`.
    /// The caller drains the pcp lists first.
    ///
    /// # Errors
    /// As [`crate::LockedZone::take_contig_range`]; nothing is changed.
    pub fn alloc_contig_range(&self, cpu: &Cpu<'m>, start: Pfn, nr: u64, mt: Migratetype) -> Result<(), ContigError> {
        self.lock(cpu).take_contig_range(start, nr, mt)
    }

    /// `pfn_range_valid_contig()`: every frame of the candidate is in this
    /// zone, not reserved and not part of a huge page (one struct page read
    /// per frame, counted; the scan stops at the first that fails). Other
    /// pages in use pass; `alloc_contig_range` finds them busy.
    ///
    /// `PageHuge()` is read as "part of a compound page" (`PG_head`, or a
    /// tail's `compound_head` with bit 0 set): in mmlab only hugetlb makes
    /// compound pages.
    pub fn pfn_range_valid_contig(&self, start: Pfn, nr: u64, scan: &mut ContigScan) -> bool {
        scan.ranges_scanned += 1;
        for p in start.0..start.0 + nr {
            scan.pages_scanned += 1;
            if !self.spans(Pfn(p)) {
                return false;
            }
            let page = self.m.page(Pfn(p));
            let compound = page.test_flag(mmlab_engine::mm::page::pg::PG_HEAD) || page.lru_next() & 1 == 1;
            if page.ext() == PageExt::Reserved || compound {
                return false;
            }
        }
        true
    }

    /// `alloc_contig_pages()` with `__GFP_COMP` as `comp`, its work added
    /// to `scan`: candidates at every multiple of `nr` (or of a pageblock
    /// when `nr` is not a power of two) from the zone start, each checked
    /// by [`Zone::pfn_range_valid_contig`] and then tried.
    ///
    /// # Errors
    /// [`ContigError::NoRange`] when no candidate could be had;
    /// [`ContigError::NotCompound`] for `comp` with `nr` not a power of
    /// two. Nothing is changed.
    pub fn alloc_contig_pages_scan(
        &self,
        cpu: &Cpu<'m>,
        nr: u64,
        mt: Migratetype,
        comp: bool,
        scan: &mut ContigScan,
    ) -> Result<Pfn, ContigError> {
        if nr == 0 || nr > self.spanned_pages {
            return Err(ContigError::NoRange { nr_pages: nr });
        }
        if comp && !nr.is_power_of_two() {
            return Err(ContigError::NotCompound { start: Pfn(self.zone_start_pfn), nr_pages: nr });
        }
        let align = if nr.is_power_of_two() { nr } else { PAGEBLOCK_NR_PAGES };
        let mut pfn = self.zone_start_pfn.next_multiple_of(align);
        while pfn + nr <= self.zone_end_pfn().0 {
            if self.pfn_range_valid_contig(Pfn(pfn), nr, scan) {
                // Whatever refused this candidate (a busy frame, or with
                // `comp` a free block larger than the range), the kernel's
                // loop goes on to the next.
                if self.lock(cpu).take_contig_range_scan(Pfn(pfn), nr, mt, comp, scan).is_ok() {
                    return Ok(Pfn(pfn));
                }
            }
            pfn += align;
        }
        Err(ContigError::NoRange { nr_pages: nr })
    }

    /// `alloc_contig_pages()`: the first naturally aligned free range of
    /// `nr` frames (pageblock-aligned if `nr` is not a power of two).
    ///
    /// # Errors
    /// [`ContigError::NoRange`] when no free range of `nr` frames exists (or `nr` is 0 or larger
    /// than the zone); nothing is changed.
    pub fn alloc_contig_pages(&self, cpu: &Cpu<'m>, nr: u64, mt: Migratetype) -> Result<Pfn, ContigError> {
        self.alloc_contig_pages_scan(cpu, nr, mt, false, &mut ContigScan::default())
    }
}
