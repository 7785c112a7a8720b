//! `isolate_freepages_range()` as `alloc_contig_frozen_range()` uses it for
//! CMA (mm/page_alloc.c, mm/compaction.c, Linux 7.2): the range's
//! pageblocks are isolated first (a free block larger than a pageblock is
//! split at the pageblock boundaries), then the free blocks that cover the
//! range are taken whole. The caller frees the head and the tail outside
//! the range (`free_contig_range()`), which the kernel counts as `pgfree`;
//! nothing here counts `pgalloc`: the kernel's contiguous allocations do not
//! (`cma_alloc()` counts `cma_alloc_success` instead).
//!
//! Simplified: the isolation and the take run under one zone-lock hold, the
//! pageblocks never show MIGRATE_ISOLATE, and a frame in use refuses the
//! range (mmlab cannot migrate).

use super::ContigError;
use crate::zone::{Fpi, LockedZone};
use mmlab_engine::Pfn;
use mmlab_engine::mm::PAGEBLOCK_NR_PAGES;
use mmlab_engine::mm::memblock::free_pages_memory;
use mmlab_engine::mm::page::PageExt;

impl LockedZone<'_, '_> {
    /// `start_isolate_page_range()` + `isolate_freepages_range()` for
    /// `[start, start + nr)`: take the free blocks that cover the range,
    /// clipped to its pageblocks (the parts of a larger block outside them go
    /// back to the free lists, as the isolation's split leaves them), and
    /// make every frame of `[outer_start, outer_end)` an allocated order-0
    /// page of the pageblock's migratetype. Returns `(outer_start,
    /// outer_end)`; the frames outside `[start, start + nr)` are the
    /// caller's to free. On error nothing has changed.
    ///
    /// # Errors
    /// [`ContigError::OutOfRange`] for an empty range or one that leaves the
    /// zone; [`ContigError::Busy`] for a frame not in a free block.
    pub fn isolate_freepages_range(&mut self, start: Pfn, nr: u64) -> Result<(Pfn, Pfn), ContigError> {
        let end = start.0.saturating_add(nr);
        if nr == 0 || !self.zone.spans(start) || !self.zone.spans(Pfn(end - 1)) {
            return Err(ContigError::OutOfRange { start, nr_pages: nr });
        }
        // The isolated pageblocks.
        let iso_start = start.0 & !(PAGEBLOCK_NR_PAGES - 1);
        let iso_end = end.next_multiple_of(PAGEBLOCK_NR_PAGES);
        let mut blocks = Vec::new();
        let mut p = start.0;
        while p < end {
            if !self.zone.m.memmap().pfn_valid(Pfn(p)) {
                return Err(ContigError::Busy { pfn: Pfn(p) });
            }
            let Some((head, o)) = self.free_block_containing(Pfn(p)) else {
                return Err(ContigError::Busy { pfn: Pfn(p) });
            };
            blocks.push((head, o));
            p = head.0 + (1 << o);
        }
        let outer_start = blocks[0].0.0.max(iso_start);
        let outer_end = p.min(iso_end);
        for (head, o) in blocks {
            let mt = self.zone.pageblock_migratetype(head);
            self.del_page_from_free_list(head, o, mt);
            let (bs, be) = (head.0, head.0 + (1 << o));
            let give_back = |s: u64, e: u64, z: &mut Self| {
                free_pages_memory(s, e, &mut |pfn, order| {
                    let t = z.zone.pageblock_migratetype(pfn);
                    z.free_one_page_locked(pfn, order, t, Fpi::NONE)
                });
            };
            if bs < outer_start {
                give_back(bs, outer_start, self);
            }
            if be > outer_end {
                give_back(outer_end, be, self);
            }
        }
        // split_free_frozen_pages(): every frame its own page.
        for pfn in outer_start..outer_end {
            let page = self.zone.m.page(Pfn(pfn));
            page.set_refcount(1);
            page.set_ext(PageExt::Alloc(0, self.zone.pageblock_migratetype(Pfn(pfn))));
        }
        Ok((Pfn(outer_start), Pfn(outer_end)))
    }
}
