//! Pageblock isolation: `set_migratetype_isolate()` and
//! `unset_migratetype_isolate()` (mm/page_isolation.c) with the helpers of
//! mm/page_alloc.c they call (`__move_freepages_block_isolate()`,
//! `find_large_buddy()`, `__isolate_free_page()`,
//! `__putback_isolated_page()`), Linux 7.2.
//!
//! # The algorithm
//!
//! An isolated pageblock keeps its migratetype; a bit of its own
//! (`PB_migrate_isolate`, since 6.16) makes `get_pfnblock_migratetype()`
//! read MIGRATE_ISOLATE. Its free blocks sit on the ISOLATE lists, where
//! nothing allocates from, and they are in none of the zone's free-page
//! counters: `account_freepages()` returns at once for ISOLATE, so
//! `NR_FREE_PAGES` (and `NR_FREE_CMA_PAGES`, `nr_free_highatomic`,
//! `NR_FREE_PAGES_BLOCKS`) count only the free pages of pageblocks that are
//! not isolated, and the watermarks never see pages nobody may take.
//!
//! *Isolating* a block moves its free blocks from its type's lists to the
//! ISOLATE lists (they leave the counters), then sets the bit. A free block
//! larger than a pageblock (order 10 here, two pageblocks) is taken off its
//! list whole, the bit is set, and it is freed again one pageblock at a
//! time (`split_large_buddy()`): the isolated half goes to the ISOLATE
//! list uncounted, the other half back to its type, counted; an isolated
//! and a non-isolated block never merge at or above `pageblock_order`.
//! A page freed into an isolated block (the pcp is bypassed) goes to the
//! ISOLATE lists and is not counted.
//!
//! *Unisolating* is the reverse move: the free blocks go back to the
//! block's own type and are counted again. When the pageblock is one free
//! block of `pageblock_order` whose buddy is free and not isolated, it is
//! taken off (`__isolate_free_page()`, no watermark check for ISOLATE) and
//! freed at the tail of its list (`__putback_isolated_page()`) so that it
//! merges, which a move would not do.
//!
//! | piece | fidelity |
//! |---|---|
//! | the isolate bit, the list moves, the accounting, the large-buddy split | faithful |
//! | `has_unmovable_pages()` | simplified: an allocated page is movable if it was allocated movable (the stand-in for PageLRU / movable_ops, as in `prep_move_freepages_block`) or is a hugetlb folio (arm64 migrates all its hstates); reserved pages and holes are unmovable; no HWPoison or PageOffline |
//! | `start_isolate_page_range()`, migration, `test_pages_isolated()` | not modelled: one pageblock at a time |

mod error;

pub use error::{IsolateError, PbIsolateMode};

use crate::zone::{Fpi, LockedZone, Zone};
use mmlab_engine::mm::page::{PageExt, pg};
use mmlab_engine::mm::{MAX_PAGE_ORDER, Migratetype, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER, ZoneType};
use mmlab_engine::{Cpu, Pfn};

#[inline]
fn pageblock_start(pfn: Pfn) -> Pfn {
    Pfn(pfn.0 & !(PAGEBLOCK_NR_PAGES - 1))
}

impl LockedZone<'_, '_> {
    /// Whether `pfn` has a struct page in this zone that heads a free block.
    fn is_buddy_head(&self, pfn: Pfn) -> bool {
        self.zone.spans(pfn) && self.zone.m.memmap().pfn_valid(pfn) && self.zone.m.page(pfn).is_buddy()
    }

    /// `find_large_buddy()`: the head of a free block that starts below
    /// `start` and covers it, else `start`.
    fn find_large_buddy(&self, start: Pfn) -> Pfn {
        let mut order = if start.0 == 0 { MAX_PAGE_ORDER } else { start.0.trailing_zeros() };
        let mut pfn = start.0;
        while !self.is_buddy_head(Pfn(pfn)) {
            order += 1;
            if order > MAX_PAGE_ORDER {
                return start;
            }
            pfn &= !0u64 << order;
        }
        let o = self.zone.m.page(Pfn(pfn)).private();
        if pfn + (1 << o) > start.0 { Pfn(pfn) } else { start }
    }

    /// `__move_freepages_block_isolate()`: isolate (or unisolate) the
    /// pageblock of `pfn`, moving its free blocks to the ISOLATE lists (or
    /// back to its own type's). A free block larger than the pageblock is
    /// split into pageblocks and freed again, each half by its own type.
    /// False when the block is in that state already or straddles the zone.
    pub fn move_freepages_block_isolate(&mut self, pfn: Pfn, isolate: bool) -> bool {
        if isolate == self.zone.get_pageblock_isolate(pfn) {
            return false;
        }
        let Some((start, _, _)) = self.prep_move_freepages_block(pfn) else {
            return false;
        };
        // pageblock_order < MAX_PAGE_ORDER: a free block may span two.
        let buddy = self.find_large_buddy(start);
        if self.is_buddy_head(buddy) {
            let order = self.zone.m.page(buddy).private() as u32;
            if order > PAGEBLOCK_ORDER {
                let mt = self.zone.pageblock_migratetype(buddy);
                self.del_page_from_free_list(buddy, order, mt);
                self.zone.toggle_pageblock_isolate(pfn, isolate);
                self.split_large_buddy(buddy, order, Fpi::NONE);
                return true;
            }
        }
        let own = self.zone.pageblock_migratetype_unisolated(start);
        let (from, to) = if isolate { (own, Migratetype::Isolate) } else { (Migratetype::Isolate, own) };
        self.move_freepages_block_unlabelled(start, from, to);
        self.zone.toggle_pageblock_isolate(start, isolate);
        true
    }

    /// `pageblock_isolate_and_move_free_pages()`.
    pub fn pageblock_isolate_and_move_free_pages(&mut self, pfn: Pfn) -> bool {
        self.move_freepages_block_isolate(pfn, true)
    }

    /// `pageblock_unisolate_and_move_free_pages()`.
    pub fn pageblock_unisolate_and_move_free_pages(&mut self, pfn: Pfn) -> bool {
        self.move_freepages_block_isolate(pfn, false)
    }

    /// `__isolate_free_page()`: take the free block at `pfn` of `order`
    /// off its list (outside an isolated pageblock only while the zone
    /// stays above its min watermark plus the block); a block of at least
    /// half a pageblock relabels its mergeable pageblocks MOVABLE. Returns
    /// the pages taken, 0 when the watermark refused.
    pub(crate) fn isolate_free_page(&mut self, pfn: Pfn, order: u32) -> u64 {
        let mt = self.zone.pageblock_migratetype(pfn);
        if !mt.is_isolate() {
            let mark = self.zone.watermark_raw(crate::WMARK_MIN) + (1 << order);
            if !self.zone.zone_watermark_ok(0, mark, 0, crate::AllocFlags::CMA) {
                return 0;
            }
        }
        self.del_page_from_free_list(pfn, order, mt);
        if order + 1 >= PAGEBLOCK_ORDER {
            let end = pfn.0 + (1 << order) - 1;
            let mut p = pfn.0;
            while p < end {
                let bmt = self.zone.pageblock_migratetype(Pfn(p));
                if bmt.is_mergeable() {
                    self.move_freepages_block(Pfn(p), bmt, Migratetype::Movable);
                }
                p += PAGEBLOCK_NR_PAGES;
            }
        }
        1 << order
    }

    /// `__putback_isolated_page()`: free a block [`Self::isolate_free_page`]
    /// took back to the tail of `mt`'s list, merging as any free does.
    pub(crate) fn putback_isolated_page(&mut self, pfn: Pfn, order: u32, mt: Migratetype) {
        self.free_one_page_locked(pfn, order, mt, Fpi(Fpi::SKIP_REPORT_NOTIFY.0 | Fpi::TO_TAIL.0));
    }
}

impl<'m> Zone<'m> {
    /// `page_is_unmovable()` for the frame `pfn` of this zone; `step` is
    /// how far the caller may skip (a free block's size).
    fn page_is_unmovable(&self, pfn: Pfn, mode: PbIsolateMode, step: &mut u64) -> bool {
        let _ = mode; // HWPoison and PageOffline (MEM_OFFLINE) are not modelled.
        if !self.m.memmap().pfn_valid(pfn) {
            return true; // a hole: the kernel's struct page is PG_reserved
        }
        let page = self.m.page(pfn);
        if page.ext() == PageExt::Reserved {
            return true;
        }
        if self.name == ZoneType::Movable {
            return false;
        }
        // A hugetlb folio (the only compound pages here): arm64 migrates
        // every hstate it offers (arch_hugetlb_migration_supported).
        if page.test_flag(pg::PG_HEAD) || page.lru_next() & 1 == 1 {
            return false;
        }
        if page.refcount() == 0 {
            if page.is_buddy() {
                *step = 1 << page.private();
            }
            return false;
        }
        !matches!(page.ext(), PageExt::Alloc(_, Migratetype::Movable))
    }

    /// `has_unmovable_pages()`: the first unmovable page of `[start, end)`,
    /// which lies in one pageblock. A CMA pageblock is unmovable as a whole
    /// except for a CMA allocation.
    pub fn has_unmovable_pages(&self, start: Pfn, end: Pfn, mode: PbIsolateMode) -> Option<Pfn> {
        if self.pageblock_migratetype(start).is_cma() {
            return (mode != PbIsolateMode::CmaAlloc).then_some(start);
        }
        let mut pfn = start.0;
        while pfn < end.0 {
            let mut step = 1;
            if self.page_is_unmovable(Pfn(pfn), mode, &mut step) {
                return Some(Pfn(pfn));
            }
            pfn += step;
        }
        None
    }

    /// `set_migratetype_isolate()`: isolate the pageblock of `pfn` if
    /// `[start, end)` (clipped to that pageblock) holds no unmovable page:
    /// its free pages move to the ISOLATE lists and leave `NR_FREE_PAGES`,
    /// and `nr_isolate_pageblock` counts it. One zone-lock hold on `cpu`.
    ///
    /// # Errors
    /// [`IsolateError`] (the kernel's `-EBUSY`); nothing is changed.
    pub fn set_migratetype_isolate(
        &self,
        cpu: &Cpu<'m>,
        pfn: Pfn,
        mode: PbIsolateMode,
        start: Pfn,
        end: Pfn,
    ) -> Result<(), IsolateError> {
        if !self.spans(pfn) {
            return Err(IsolateError::OutOfZone { pfn });
        }
        let block = pageblock_start(pfn);
        let mut z = self.lock(cpu);
        if self.pageblock_migratetype(pfn).is_isolate() {
            return Err(IsolateError::AlreadyIsolated { pfn: block });
        }
        let check_start = Pfn(pfn.0.max(start.0));
        let check_end = Pfn((block.0 + PAGEBLOCK_NR_PAGES).min(end.0));
        if let Some(p) = self.has_unmovable_pages(check_start, check_end, mode) {
            return Err(IsolateError::Unmovable { pfn: p });
        }
        if !z.pageblock_isolate_and_move_free_pages(pfn) {
            return Err(IsolateError::StraddlesZone { pfn: block });
        }
        z.inner.nr_isolate_pageblock += 1;
        Ok(())
    }

    /// `unset_migratetype_isolate()`: give the isolated pageblock of `pfn`
    /// back to its own migratetype, its free pages counted again. A
    /// pageblock that is one free block whose buddy is free and not
    /// isolated is freed again so that the two merge. Nothing happens to
    /// a pageblock that is not isolated (or not in this zone).
    pub fn unset_migratetype_isolate(&self, cpu: &Cpu<'m>, pfn: Pfn) {
        if !self.spans(pfn) {
            return;
        }
        let block = pageblock_start(pfn);
        let mut z = self.lock(cpu);
        if !self.pageblock_migratetype(block).is_isolate() {
            return;
        }
        let mut isolated_order = None;
        if z.is_buddy_head(block) {
            let order = self.m.page(block).private() as u32;
            let buddy = Pfn(block.0 ^ (1 << order));
            if (PAGEBLOCK_ORDER..MAX_PAGE_ORDER).contains(&order)
                && z.is_free_block(buddy, order)
                && !self.pageblock_migratetype(buddy).is_isolate()
                && z.isolate_free_page(block, order) != 0
            {
                isolated_order = Some(order);
            }
        }
        match isolated_order {
            // Isolating it succeeded, so the move cannot fail on the
            // zone's bounds (the kernel's WARN_ON_ONCE).
            None => _ = z.pageblock_unisolate_and_move_free_pages(block),
            Some(order) => {
                self.toggle_pageblock_isolate(block, false);
                let mt = self.pageblock_migratetype(block);
                z.putback_isolated_page(block, order, mt);
            }
        }
        z.inner.nr_isolate_pageblock -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::{Machine, MachineConfig};
    use std::sync::atomic::Ordering::Relaxed;

    /// The checker holds the kernel's invariant: NR_FREE_PAGES is the pages
    /// on the lists of pageblocks not isolated. The accounting before the
    /// fix (an isolated block's pages still counted) fails it.
    #[test]
    fn the_checker_refuses_free_pages_of_an_isolated_block_in_nr_free_pages() {
        let m = Machine::boot(MachineConfig::with("64M", 1).unwrap().bare()).unwrap();
        assert!(m.claim_memblock_free_all());
        let zone = Zone::new(&m);
        let cpu = m.cpu(0).unwrap();
        m.memblock().for_each_free_block(|pfn, order| zone.free_pages_core(&cpu, pfn, order));
        let (head, _) = zone.check_free_lists().unwrap().into_iter().find(|&(_, o)| o == 10).unwrap();
        let free = zone.nr_free_pages();
        zone.set_migratetype_isolate(&cpu, head, PbIsolateMode::Other, head, head.add(PAGEBLOCK_NR_PAGES)).unwrap();
        assert_eq!(zone.nr_free_pages(), free - PAGEBLOCK_NR_PAGES as i64);
        zone.check_free_lists().unwrap();
        // What the old account_freepages() left: the isolated pages counted.
        zone.nr_free_pages.fetch_add(PAGEBLOCK_NR_PAGES as i64, Relaxed);
        let e = zone.check_free_lists().unwrap_err();
        assert!(e.contains("NR_FREE_PAGES") && e.contains("not isolated"), "{e}");
        zone.nr_free_pages.fetch_sub(PAGEBLOCK_NR_PAGES as i64, Relaxed);
        // A pageblock that lost its isolate bit behind the lists' back:
        // its free block sits on the wrong list (and looks unmerged).
        zone.toggle_pageblock_isolate(head, false);
        let e = zone.check_free_lists().unwrap_err();
        assert!(e.contains(&head.to_string()), "{e}");
        zone.toggle_pageblock_isolate(head, true);
        zone.unset_migratetype_isolate(&cpu, head);
        assert_eq!(zone.nr_free_pages(), free);
        zone.check_free_lists().unwrap();
    }
}
