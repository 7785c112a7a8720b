//! Taking blocks off the free lists: `__rmqueue_smallest`, `expand`, the
//! claim and steal fallbacks, `__rmqueue`, `rmqueue_buddy`, and the
//! highatomic reserve.

mod fallback;

use fallback::Fallback;
pub use fallback::RmqueueMode;

use crate::zone::{AllocFlags, LockedZone};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::{
    HPAGE_PMD_ORDER, MAX_PAGE_ORDER, MIGRATE_PCPTYPES, Migratetype, PAGE_ALLOC_COSTLY_ORDER, PAGEBLOCK_NR_PAGES,
    PAGEBLOCK_ORDER,
};
use mmlab_engine::{Pfn, trace};

/// `pcp_allowed_order()`: orders cached on pcp lists (0..=3 and the THP order).
#[inline]
pub const fn pcp_allowed_order(order: u32) -> bool {
    order <= PAGE_ALLOC_COSTLY_ORDER || order == HPAGE_PMD_ORDER
}

/// `fallbacks[]`: the types each type falls back to, in order.
pub const fn fallbacks(mt: Migratetype) -> [Migratetype; 2] {
    use Migratetype::*;
    match mt {
        Unmovable => [Reclaimable, Movable],
        Movable => [Reclaimable, Unmovable],
        Reclaimable => [Unmovable, Movable],
        // HIGHATOMIC, CMA and ISOLATE never fall back (the kernel's table
        // has no row for them); nothing falls back into them either.
        HighAtomic => [HighAtomic, HighAtomic],
        Cma => [Cma, Cma],
        Isolate => [Isolate, Isolate],
    }
}

/// `should_try_claim_block()`.
fn should_try_claim_block(order: u32, start_mt: Migratetype) -> bool {
    order >= PAGEBLOCK_ORDER
        || order >= PAGEBLOCK_ORDER / 2
        || matches!(start_mt, Migratetype::Reclaimable | Migratetype::Unmovable)
}

impl LockedZone<'_, '_> {
    #[inline]
    fn page_va(&self, pfn: Pfn) -> u64 {
        self.zone.m.memmap().page_va(pfn)
    }

    /// `expand()`: split a block of order `high` down to `low`, putting each
    /// upper half on the head of `mt`'s list. Returns the pages put back.
    #[inline]
    pub(crate) fn expand(&mut self, pfn: Pfn, low: u32, mut high: u32, mt: Migratetype) -> u64 {
        let mut added = 0;
        while high > low {
            high -= 1;
            let size = 1u64 << high;
            self.add_to_free_list(pfn.add(size), high, mt, false);
            added += size;
        }
        if added != 0 {
            self.cpu.count(VmEvent::BuddySplit, added.count_ones() as u64);
        }
        added
    }

    /// `page_del_and_expand()`.
    #[inline]
    pub(crate) fn page_del_and_expand(&mut self, pfn: Pfn, low: u32, high: u32, mt: Migratetype) {
        self.del_from_free_list_raw(pfn, high, mt);
        let kept = (1u64 << high) - self.expand(pfn, low, high, mt);
        self.account_freepages(-(kept as i64), mt);
    }

    /// `__rmqueue_smallest()`: the first block of type `mt` at the lowest
    /// order ≥ `order`, split down to `order`.
    #[inline]
    pub fn rmqueue_smallest(&mut self, order: u32, mt: Migratetype) -> Option<Pfn> {
        let mut cur = order;
        while cur <= MAX_PAGE_ORDER {
            if let Some(pfn) = self.first_free(cur, mt) {
                self.page_del_and_expand(pfn, order, cur, mt);
                self.cpu.count(VmEvent::BuddyAlloc, 1);
                let m = self.zone.m;
                trace::mm_page_alloc_zone_locked(
                    self.cpu.id(),
                    m.trace_clock(),
                    self.page_va(pfn),
                    pfn.0,
                    order,
                    mt as i32,
                    pcp_allowed_order(order) && (mt as usize) < MIGRATE_PCPTYPES,
                );
                return Some(pfn);
            }
            cur += 1;
        }
        None
    }

    /// `find_suitable_fallback()` for one order.
    fn find_suitable_fallback(&self, order: u32, mt: Migratetype, claimable: bool) -> Fallback {
        if claimable && !should_try_claim_block(order, mt) {
            return Fallback::TooLowToClaim;
        }
        if self.inner.nr_free[order as usize] == 0 || mt.is_highatomic() {
            return Fallback::NoBlock;
        }
        for f in fallbacks(mt) {
            if !self.free_area_empty(order, f) {
                return Fallback::Found(f);
            }
        }
        Fallback::NoBlock
    }

    /// `change_pageblock_range()`.
    pub(crate) fn change_pageblock_range(&self, pfn: Pfn, order: u32, mt: Migratetype) {
        let n = 1u64 << order.saturating_sub(PAGEBLOCK_ORDER);
        for i in 0..n {
            self.zone.set_pageblock_migratetype(pfn.add(i * PAGEBLOCK_NR_PAGES), mt);
        }
    }

    /// `prep_move_freepages_block()`: the pageblock's start, and its free and
    /// movable pages. "Movable" here means allocated with a movable gfp, which
    /// is what PageLRU/__PageMovable stand for on a real system.
    pub(crate) fn prep_move_freepages_block(&self, pfn: Pfn) -> Option<(Pfn, u64, u64)> {
        let start = pfn.0 & !(PAGEBLOCK_NR_PAGES - 1);
        let end = start + PAGEBLOCK_NR_PAGES;
        if !self.zone.spans(Pfn(start)) || !self.zone.spans(Pfn(end - 1)) {
            return None;
        }
        let (mut free, mut movable) = (0, 0);
        let mut p = start;
        while p < end {
            let page = self.zone.m.page(Pfn(p));
            if page.is_buddy() {
                let nr = 1 << page.private();
                free += nr;
                p += nr;
                continue;
            }
            if let PageExt::Alloc(o, Migratetype::Movable) = page.ext() {
                // An allocated movable block stands for its 2^o LRU pages.
                movable += 1 << o;
                p += 1 << o;
                continue;
            }
            p += 1;
        }
        Some((Pfn(start), free, movable))
    }

    /// `__move_freepages_block()` and the caller's
    /// `set_pageblock_migratetype()`: move every free block of the
    /// pageblock at `start` from `old`'s lists to `new`'s and label the
    /// pageblock `new` (6.12 labels inside, 7.x in every caller: same
    /// result). Returns pages moved.
    pub(crate) fn move_freepages_block_at(&mut self, start: Pfn, old: Migratetype, new: Migratetype) -> u64 {
        let moved = self.move_freepages_block_unlabelled(start, old, new);
        self.zone.set_pageblock_migratetype(start, new);
        moved
    }

    /// `__move_freepages_block()`: move every free block of the pageblock at
    /// `start` from `old`'s lists to `new`'s; the pageblock's flags are the
    /// caller's business (isolation toggles its own bit). Returns pages moved.
    pub(crate) fn move_freepages_block_unlabelled(&mut self, start: Pfn, old: Migratetype, new: Migratetype) -> u64 {
        let mut moved = 0;
        let mut p = start.0;
        let end = start.0 + PAGEBLOCK_NR_PAGES;
        while p < end {
            let page = self.zone.m.page(Pfn(p));
            if !page.is_buddy() {
                p += 1;
                continue;
            }
            let order = page.private() as u32;
            self.move_to_free_list(Pfn(p), order, old, new);
            p += 1 << order;
            moved += 1 << order;
        }
        moved
    }

    /// `move_freepages_block()`; None if the block straddles the zone.
    pub(crate) fn move_freepages_block(&mut self, pfn: Pfn, old: Migratetype, new: Migratetype) -> Option<u64> {
        let (start, _, _) = self.prep_move_freepages_block(pfn)?;
        Some(self.move_freepages_block_at(start, old, new))
    }

    /// `boost_watermark()` with `watermark_boost_factor` = 15000.
    fn boost_watermark(&self) -> bool {
        let z = self.zone;
        let managed = z.managed_pages();
        if PAGEBLOCK_NR_PAGES * 4 > managed {
            return false;
        }
        let high = z.watermark[crate::WMARK_HIGH].load(std::sync::atomic::Ordering::Relaxed);
        let max_boost = crate::watermark::mult_frac(high, crate::watermark::WATERMARK_BOOST_FACTOR, 10000);
        if max_boost == 0 {
            return false;
        }
        let max_boost = max_boost.max(PAGEBLOCK_NR_PAGES);
        let b = z.watermark_boost.load(std::sync::atomic::Ordering::Relaxed);
        z.watermark_boost.store((b + PAGEBLOCK_NR_PAGES).min(max_boost), std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// `try_to_claim_block()`.
    fn try_to_claim_block(
        &mut self,
        pfn: Pfn,
        cur: u32,
        order: u32,
        start: Migratetype,
        block: Migratetype,
        alloc_flags: AllocFlags,
    ) -> Option<Pfn> {
        if cur >= PAGEBLOCK_ORDER {
            self.del_from_free_list_raw(pfn, cur, block);
            self.account_freepages(-(1 << cur), block);
            self.change_pageblock_range(pfn, cur, start);
            let added = self.expand(pfn, order, cur, start);
            self.account_freepages(added as i64, start);
            return Some(pfn);
        }
        if self.boost_watermark() && alloc_flags.has(AllocFlags::KSWAPD) {
            self.zone.set_flag(crate::ZoneFlag::BoostedWatermark);
        }
        let (bstart, free, movable) = self.prep_move_freepages_block(pfn)?;
        let alike = if start == Migratetype::Movable {
            movable
        } else if block == Migratetype::Movable {
            PAGEBLOCK_NR_PAGES - (free + movable)
        } else {
            0
        };
        if free + alike >= 1 << (PAGEBLOCK_ORDER - 1) {
            self.move_freepages_block_at(bstart, block, start);
            return self.rmqueue_smallest(order, start);
        }
        None
    }

    fn trace_extfrag(&self, pfn: Pfn, order: u32, cur: u32, start: Migratetype, fallback: Migratetype) {
        let m = self.zone.m;
        trace::mm_page_alloc_extfrag(
            self.cpu.id(),
            m.trace_clock(),
            self.page_va(pfn),
            pfn.0,
            order as i32,
            cur as i32,
            start as i32,
            fallback as i32,
            self.zone.pageblock_migratetype(pfn) == start,
        );
    }

    /// `__rmqueue_claim()`: largest fallback block first, claimed for `start`.
    fn rmqueue_claim(&mut self, order: u32, start: Migratetype, alloc_flags: AllocFlags) -> Option<Pfn> {
        let min_order =
            if order < PAGEBLOCK_ORDER && alloc_flags.has(AllocFlags::NOFRAGMENT) { PAGEBLOCK_ORDER } else { order };
        for cur in (min_order..=MAX_PAGE_ORDER).rev() {
            let f = match self.find_suitable_fallback(cur, start, true) {
                Fallback::NoBlock => continue,
                Fallback::TooLowToClaim => break,
                Fallback::Found(f) => f,
            };
            let pfn = self.first_free(cur, f)?;
            if let Some(page) = self.try_to_claim_block(pfn, cur, order, start, f, alloc_flags) {
                self.cpu.count(VmEvent::ExtfragClaim, 1);
                self.trace_extfrag(page, order, cur, start, f);
                return Some(page);
            }
        }
        None
    }

    /// `__rmqueue_steal()`: smallest fallback block, remainder keeps its type.
    fn rmqueue_steal(&mut self, order: u32, start: Migratetype) -> Option<Pfn> {
        for cur in order..=MAX_PAGE_ORDER {
            let Fallback::Found(f) = self.find_suitable_fallback(cur, start, false) else {
                continue;
            };
            let pfn = self.first_free(cur, f)?;
            self.page_del_and_expand(pfn, order, cur, f);
            self.cpu.count(VmEvent::ExtfragSteal, 1);
            self.trace_extfrag(pfn, order, cur, start, f);
            return Some(pfn);
        }
        None
    }

    /// `__rmqueue()`: with `ALLOC_CMA`, the CMA lists first when they hold
    /// more than half of the zone's free pages; then the wanted type, the
    /// CMA lists, claim, steal, each mode starting where `mode` says the
    /// last call found pages.
    #[inline]
    pub fn rmqueue(
        &mut self,
        order: u32,
        mt: Migratetype,
        alloc_flags: AllocFlags,
        mode: &mut RmqueueMode,
    ) -> Option<Pfn> {
        let cma = alloc_flags.has(AllocFlags::CMA);
        if cma
            && self.zone.nr_free_cma() > self.zone.nr_free_pages() / 2
            && let Some(p) = self.rmqueue_smallest(order, Migratetype::Cma)
        {
            return Some(p);
        }
        if *mode == RmqueueMode::Normal
            && let Some(p) = self.rmqueue_smallest(order, mt)
        {
            return Some(p);
        }
        if cma
            && matches!(*mode, RmqueueMode::Normal | RmqueueMode::Cma)
            && let Some(p) = self.rmqueue_smallest(order, Migratetype::Cma)
        {
            *mode = RmqueueMode::Cma;
            return Some(p);
        }
        if matches!(*mode, RmqueueMode::Normal | RmqueueMode::Cma | RmqueueMode::Claim)
            && let Some(p) = self.rmqueue_claim(order, mt, alloc_flags)
        {
            *mode = RmqueueMode::Normal;
            return Some(p);
        }
        if !alloc_flags.has(AllocFlags::NOFRAGMENT)
            && let Some(p) = self.rmqueue_steal(order, mt)
        {
            *mode = RmqueueMode::Steal;
            return Some(p);
        }
        None
    }

    /// The locked part of `rmqueue_buddy()`: highatomic first for
    /// `ALLOC_HIGHATOMIC`, last for `ALLOC_OOM | ALLOC_NON_BLOCK`.
    pub fn rmqueue_buddy(&mut self, order: u32, mt: Migratetype, alloc_flags: AllocFlags) -> Option<Pfn> {
        if alloc_flags.has(AllocFlags::HIGHATOMIC)
            && let Some(p) = self.rmqueue_smallest(order, Migratetype::HighAtomic)
        {
            return Some(p);
        }
        let mut mode = RmqueueMode::Normal;
        if let Some(p) = self.rmqueue(order, mt, alloc_flags, &mut mode) {
            return Some(p);
        }
        if alloc_flags.0 & (AllocFlags::OOM.0 | AllocFlags::NON_BLOCK.0) != 0 {
            return self.rmqueue_smallest(order, Migratetype::HighAtomic);
        }
        None
    }

    /// `reserve_highatomic_pageblock()` (the part under the lock).
    pub fn reserve_highatomic_pageblock(&mut self, pfn: Pfn, order: u32) {
        let managed = self.zone.managed_pages();
        if managed / 100 < PAGEBLOCK_NR_PAGES {
            return;
        }
        let max_managed = (managed / 100).next_multiple_of(PAGEBLOCK_NR_PAGES);
        if self.inner.nr_reserved_highatomic >= max_managed {
            return;
        }
        let mt = self.zone.pageblock_migratetype(pfn);
        if !mt.is_mergeable() {
            return;
        }
        if order < PAGEBLOCK_ORDER {
            if self.move_freepages_block(pfn, mt, Migratetype::HighAtomic).is_none() {
                return;
            }
            self.inner.nr_reserved_highatomic += PAGEBLOCK_NR_PAGES;
        } else {
            self.change_pageblock_range(pfn, order, Migratetype::HighAtomic);
            self.inner.nr_reserved_highatomic += 1 << order;
        }
        self.cpu.count(VmEvent::HighatomicReserve, 1);
    }

    /// `unreserve_highatomic_pageblock()` for this zone: give one reserved
    /// pageblock back to `to`. True if one was released.
    pub fn unreserve_highatomic_pageblock(&mut self, to: Migratetype, force: bool) -> bool {
        if !force && self.inner.nr_reserved_highatomic <= PAGEBLOCK_NR_PAGES {
            return false;
        }
        for order in 0..=MAX_PAGE_ORDER {
            let Some(pfn) = self.first_free(order, Migratetype::HighAtomic) else {
                continue;
            };
            let mt = self.zone.pageblock_migratetype(pfn);
            if mt.is_highatomic() {
                let size = PAGEBLOCK_NR_PAGES.max(1 << order).min(self.inner.nr_reserved_highatomic);
                self.inner.nr_reserved_highatomic -= size;
            }
            if order < PAGEBLOCK_ORDER {
                if self.move_freepages_block(pfn, mt, to).is_some() {
                    return true;
                }
            } else {
                self.move_to_free_list(pfn, order, mt, to);
                self.change_pageblock_range(pfn, order, to);
                return true;
            }
        }
        false
    }
}
