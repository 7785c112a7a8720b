//! Invariants of the free lists (the buddy half of `check_invariants`).

use crate::zone::{Zone, fl};
use mmlab_engine::Pfn;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::{
    MAX_PAGE_ORDER, MIGRATE_TYPES, Migratetype, NR_PAGE_ORDERS, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER,
};

impl Zone<'_> {
    /// Walk every free list and check, for each block: it is PageBuddy with
    /// `private` = its order and ext state `Buddy(order)`, aligned to its
    /// order, inside the zone, on the list of its pageblock's type; its
    /// buddy is not a free block it should have merged with (two isolated
    /// pageblocks' blocks may stay apart: isolating moves, it does not
    /// merge). Also check `nr_free` per order against the lists, and the
    /// kernel's counters as `account_freepages()` keeps them:
    /// `NR_FREE_PAGES` is the pages on every list but the ISOLATE ones,
    /// `NR_FREE_CMA_PAGES` those on the CMA lists, `nr_free_highatomic`
    /// those on the HIGHATOMIC lists; and `nr_isolate_pageblock` is the
    /// zone's pageblocks with the isolate bit set.
    /// Returns every free block as (pfn, order).
    ///
    /// # Errors
    /// The first inconsistency found, described (a bug in mmlab).
    pub fn check_free_lists(&self) -> Result<Vec<(Pfn, u32)>, String> {
        let z = self.lock.lock_unaccounted();
        let mem = self.m.memmap();
        let mut blocks = Vec::new();
        let mut pages: i64 = 0;
        let mut highatomic: i64 = 0;
        let mut cma: i64 = 0;
        for order in 0..=MAX_PAGE_ORDER {
            let mut n = 0;
            for mt in Migratetype::ALL {
                let list = z.lists.walk(mem, fl(order, mt))?;
                for &pfn in &list {
                    let p = mem.page(pfn);
                    // Formatted only for a message: this loop visits every free block.
                    let what = || format!("free block {pfn} order {order} on {mt} list");
                    if !self.spans(pfn) || !self.spans(pfn.add((1 << order) - 1)) {
                        return Err(format!("{}: outside the zone", what()));
                    }
                    if !pfn.is_aligned_order(order) {
                        return Err(format!("{}: not aligned to its order", what()));
                    }
                    if !p.is_buddy() || p.private() != order as u64 {
                        return Err(format!("{}: PageBuddy={} private={}", what(), p.is_buddy(), p.private()));
                    }
                    if p.ext() != PageExt::Buddy(order as u8) {
                        return Err(format!("{}: state {:?}", what(), p.ext()));
                    }
                    let span = 1u64 << order.saturating_sub(PAGEBLOCK_ORDER);
                    for i in 0..span {
                        let bmt = self.pageblock_migratetype(pfn.add(i << PAGEBLOCK_ORDER));
                        if bmt != mt {
                            return Err(format!("{}: pageblock type is {bmt}", what()));
                        }
                    }
                    if order < MAX_PAGE_ORDER {
                        let b = Pfn(pfn.0 ^ (1 << order));
                        if self.spans(b) {
                            let bp = mem.page(b);
                            let bmt = self.pageblock_migratetype(b);
                            let both_isolated = order >= PAGEBLOCK_ORDER && mt.is_isolate() && bmt.is_isolate();
                            let mergeable = !both_isolated
                                && (order < PAGEBLOCK_ORDER || bmt == mt || (bmt.is_mergeable() && mt.is_mergeable()));
                            if bp.is_buddy() && bp.private() == order as u64 && mergeable {
                                return Err(format!("{}: buddy {b} is free at the same order but not merged", what()));
                            }
                        }
                    }
                    blocks.push((pfn, order));
                    if mt.is_isolate() {
                        continue;
                    }
                    pages += 1 << order;
                    if mt.is_highatomic() {
                        highatomic += 1 << order;
                    } else if mt.is_cma() {
                        cma += 1 << order;
                    }
                }
                n += list.len() as u64;
            }
            if n != z.nr_free[order as usize] {
                return Err(format!(
                    "order {order}: nr_free {} but {n} blocks on the lists",
                    z.nr_free[order as usize]
                ));
            }
        }
        if pages != self.nr_free_pages() {
            return Err(format!(
                "NR_FREE_PAGES {} but {pages} pages on the lists of pageblocks not isolated",
                self.nr_free_pages()
            ));
        }
        if cma != self.nr_free_cma() {
            return Err(format!("NR_FREE_CMA_PAGES {} but {cma} pages on the CMA lists", self.nr_free_cma()));
        }
        let first = self.zone_start_pfn & !(PAGEBLOCK_NR_PAGES - 1);
        let isolated = (first..self.zone_end_pfn().0)
            .step_by(PAGEBLOCK_NR_PAGES as usize)
            .map(|p| Pfn(p.max(self.zone_start_pfn)))
            .filter(|&p| mem.pfn_valid(p) && self.get_pageblock_isolate(p))
            .count() as u64;
        if isolated != z.nr_isolate_pageblock {
            return Err(format!(
                "nr_isolate_pageblock {} but {isolated} pageblocks have the isolate bit",
                z.nr_isolate_pageblock
            ));
        }
        if highatomic != self.nr_free_highatomic() {
            return Err(format!("nr_free_highatomic {} but {highatomic} on the lists", self.nr_free_highatomic()));
        }
        let _ = (NR_PAGE_ORDERS, MIGRATE_TYPES);
        Ok(blocks)
    }
}
