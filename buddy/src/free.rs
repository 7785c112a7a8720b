//! Putting blocks back: `__free_one_page`, `buddy_merge_likely`,
//! `split_large_buddy`, and the boot-time `__free_pages_core`.

use crate::zone::{Fpi, LockedZone, Zone};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::{MAX_PAGE_ORDER, Migratetype, PAGEBLOCK_ORDER};
use mmlab_engine::{Cpu, Pfn};

impl LockedZone<'_, '_> {
    /// `buddy_merge_likely()`: is the block one order above `pfn`'s merged
    /// block free already, so that this block is likely to merge soon?
    #[inline]
    fn buddy_merge_likely(&self, pfn: Pfn, buddy_pfn: u64, order: u32) -> bool {
        if order >= MAX_PAGE_ORDER - 1 {
            return false;
        }
        let higher = buddy_pfn & pfn.0;
        let higher_buddy = higher ^ (1 << (order + 1));
        self.is_free_block(Pfn(higher_buddy), order + 1)
    }

    /// `__free_one_page()`: merge with free buddies as far as allowed, then
    /// insert at the head, or at the tail when `FPI_TO_TAIL` or
    /// `buddy_merge_likely()` says so.
    #[inline(always)]
    pub fn free_one_page_locked(&mut self, pfn: Pfn, mut order: u32, mt: Migratetype, fpi: Fpi) {
        debug_assert!(pfn.is_aligned_order(order), "unaligned free of {pfn} at order {order}");
        // Whatever the frame was (allocated, on a pcp list), it is now a
        // plain page inside a free block until it becomes a block's head.
        let page = self.zone.m.page(pfn);
        page.set_ext(PageExt::Tail);
        self.account_freepages(1 << order, mt);
        let mut pfn = pfn;
        let mut buddy_pfn = 0;
        let mut merges = 0;
        while order < MAX_PAGE_ORDER {
            buddy_pfn = pfn.0 ^ (1 << order);
            if !self.is_free_block(Pfn(buddy_pfn), order) {
                break;
            }
            let mut buddy_mt = mt;
            if order >= PAGEBLOCK_ORDER {
                buddy_mt = self.zone.pageblock_migratetype(Pfn(buddy_pfn));
                if mt != buddy_mt && (!mt.is_mergeable() || !buddy_mt.is_mergeable()) {
                    break;
                }
            }
            self.del_from_free_list_raw(Pfn(buddy_pfn), order, buddy_mt);
            if buddy_mt != mt {
                // The buddy's pageblocks take our type so that a later
                // expand() puts their halves on the right lists.
                self.change_pageblock_range(Pfn(buddy_pfn), order, mt);
                self.account_freepages(-(1 << order), buddy_mt);
                self.account_freepages(1 << order, mt);
            }
            pfn = Pfn(pfn.0 & buddy_pfn);
            order += 1;
            merges += 1;
        }
        if merges != 0 {
            self.cpu.count(VmEvent::BuddyMerge, merges);
        }
        let to_tail = fpi.has(Fpi::TO_TAIL) || self.buddy_merge_likely(pfn, buddy_pfn, order);
        if to_tail && !fpi.has(Fpi::TO_TAIL) {
            self.cpu.count(VmEvent::BuddyFreeTail, 1);
        }
        if merges == 0 {
            // Not merged: the block is still headed by `page`.
            self.add_to_free_list_page(pfn, page, order, mt, to_tail);
        } else {
            self.add_to_free_list(pfn, order, mt, to_tail);
        }
    }

    /// `split_large_buddy()`: free a block larger than a pageblock one
    /// pageblock at a time, each with its own type (they may merge again).
    #[inline(always)]
    pub fn split_large_buddy(&mut self, pfn: Pfn, order: u32, fpi: Fpi) {
        if order <= PAGEBLOCK_ORDER {
            let mt = self.zone.pageblock_migratetype(pfn);
            self.free_one_page_locked(pfn, order, mt, fpi);
            return;
        }
        let end = pfn.0 + (1 << order);
        let step = order.min(PAGEBLOCK_ORDER);
        let mut p = pfn.0;
        while p < end {
            let mt = self.zone.pageblock_migratetype(Pfn(p));
            self.free_one_page_locked(Pfn(p), step, mt, fpi);
            p += 1 << step;
        }
    }
}

impl<'m> Zone<'m> {
    /// `free_one_page()`: take the zone lock and free one block (orders the
    /// pcp does not cache, pcp trylock failures). Counts `PGFREE`.
    #[inline]
    pub fn free_one_page(&self, cpu: &Cpu<'m>, pfn: Pfn, order: u32, fpi: Fpi) {
        let mut z = self.lock(cpu);
        z.split_large_buddy(pfn, order, fpi);
        drop(z);
        cpu.count(VmEvent::Pgfree, 1 << order);
        cpu.count(VmEvent::FreeOnePagePages, 1 << order);
    }

    /// `__free_pages_core()` at boot (`memblock_free_all()`, and
    /// `deferred_init_memmap()` for the deferred struct pages): the block's
    /// pages drop their boot reference, become managed, and go to the tail
    /// of the free lists. A struct page not yet initialised (deferred, see
    /// [`mmlab_engine::mm::memmap`]) is skipped: its first touch gives it
    /// refcount 0, as this write would.
    pub fn free_pages_core(&self, cpu: &Cpu<'m>, pfn: Pfn, order: u32) {
        let mem = self.m.memmap();
        let end = pfn.add(1 << order);
        let mut p = pfn;
        while p < end {
            if mem.initialised(p) {
                self.m.page(p).set_refcount(0);
                p = p.add(1);
            } else {
                p = mem.vmemmap_page_end(p).min(end);
            }
        }
        self.managed_pages.fetch_add(1 << order, std::sync::atomic::Ordering::Relaxed);
        self.free_one_page(cpu, pfn, order, Fpi::TO_TAIL);
    }
}
