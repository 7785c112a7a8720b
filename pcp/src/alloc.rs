//! The front door: `__alloc_pages`, `get_page_from_freelist`, `rmqueue`,
//! the (simplified) slow path, `alloc_pages_bulk`, `__free_pages`,
//! `free_frozen_pages`, contiguous ranges and `split_page`.

use crate::error::{AllocError, FreeError};
use crate::gfp::{ZonePrep, gfp_mt, gfp_to_alloc_flags_cma};
use crate::page_alloc::PageAllocator;
use mmlab_buddy::{AllocFlags, ContigError, Fpi, ZoneFlag, pcp_allowed_order};
use mmlab_engine::mm::page::{PageExt, StructPage};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;
use mmlab_engine::mm::{MAX_PAGE_ORDER, MIGRATE_PCPTYPES, Migratetype, PAGE_ALLOC_COSTLY_ORDER};
use mmlab_engine::{Cpu, Gfp, PAGE_SHIFT, Pfn, trace};

impl<'m> PageAllocator<'m> {
    /// `alloc_pages(gfp, order)`: the first frame of 2^order, or None.
    #[inline]
    pub fn alloc_pages(&self, cpu: &Cpu<'m>, gfp: Gfp, order: u32) -> Option<Pfn> {
        self.try_alloc_pages(cpu, gfp, order).ok()
    }

    /// `__alloc_pages()` with the reason for a NULL.
    ///
    /// # Errors
    /// [`AllocError::ForeignCpu`], [`AllocError::OrderTooLarge`], or [`AllocError::NoMemory`] when
    /// no block passed its watermark after the slow path (or `fail_page_alloc` failed the request).
    pub fn try_alloc_pages(&self, cpu: &Cpu<'m>, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        if self.foreign(cpu) {
            return Err(AllocError::ForeignCpu { cpu: cpu.id() });
        }
        if order > MAX_PAGE_ORDER {
            if !gfp.contains(Gfp::__GFP_NOWARN) {
                tracing::warn!(target: "mmlab::page_alloc", order, "WARNING: order above MAX_PAGE_ORDER");
            }
            return Err(AllocError::OrderTooLarge { order });
        }
        // prepare_alloc_pages(): fail_page_alloc fails the request before
        // any list is looked at.
        if self.fail_page_alloc.should_fail_alloc_page(gfp, order) {
            return Err(AllocError::NoMemory { order, gfp });
        }
        // The same code twice: order 0, the common case, with the order a
        // constant the compiler folds, and every other order.
        if order == 0 { self.alloc_pages_prepared(cpu, gfp, 0) } else { self.alloc_pages_prepared(cpu, gfp, order) }
    }

    /// The rest of `__alloc_pages()` once the request passed its checks:
    /// the fast path, the slow path, the tracepoint.
    #[inline(always)]
    fn alloc_pages_prepared(&self, cpu: &Cpu<'m>, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        let mt = gfp_mt(gfp);
        // prepare_alloc_pages + alloc_flags_nofragment: low watermark, and
        // ALLOC_KSWAPD mirrors __GFP_KSWAPD_RECLAIM.
        let mut alloc_flags = AllocFlags::WMARK_LOW;
        if gfp.contains(Gfp::__GFP_KSWAPD_RECLAIM) {
            alloc_flags |= AllocFlags::KSWAPD;
        }
        alloc_flags |= self.alloc_flags_nofragment(gfp);
        alloc_flags = gfp_to_alloc_flags_cma(gfp, alloc_flags);
        let page = match self.get_page_from_freelist_retry(cpu, gfp, order, alloc_flags, mt) {
            Some(p) => Some(p),
            None => self.alloc_pages_slowpath(cpu, gfp, order, mt),
        };
        let m = self.m;
        trace::mm_page_alloc(
            cpu.id(),
            m.trace_clock(),
            page.map_or(0, |p| m.memmap().page_va(p)),
            page.map(|p| p.0),
            order,
            gfp,
            mt as i32,
        );
        self.after_op();
        page.ok_or(AllocError::NoMemory { order, gfp })
    }

    /// `alloc_flags_nofragment()` (CONFIG_ZONE_DMA32, one node): the first
    /// attempt avoids mixing migratetypes in a pageblock when its preferred
    /// zone, the first of the machine's ZONELIST_FALLBACK zonelist not above
    /// `gfp_zone(gfp)`, is Normal (a machine with RAM above 4 GiB); on a
    /// machine whose RAM is all DMA it is not set.
    #[inline(always)]
    fn alloc_flags_nofragment(&self, gfp: Gfp) -> AllocFlags {
        self.zone_prep(gfp).nofragment
    }

    /// The [`ZonePrep`] of `gfp`'s zone modifier bits.
    #[inline(always)]
    pub(crate) fn zone_prep(&self, gfp: Gfp) -> ZonePrep {
        self.zone_prep[(gfp.bits() & Gfp::GFP_ZONEMASK.bits()) as usize % 16]
    }

    /// `get_page_from_freelist()`'s `retry`: when the attempt with
    /// ALLOC_NOFRAGMENT found nothing, the zonelist is walked again without
    /// it (fragmenting fallbacks allowed).
    #[inline(always)]
    fn get_page_from_freelist_retry(
        &self,
        cpu: &Cpu<'m>,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        mt: Migratetype,
    ) -> Option<Pfn> {
        let page = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, mt);
        if page.is_none() && alloc_flags.has(AllocFlags::NOFRAGMENT) {
            return self.get_page_from_freelist_fragmenting(cpu, gfp, order, alloc_flags, mt);
        }
        page
    }

    /// The second pass of `get_page_from_freelist()`, without
    /// ALLOC_NOFRAGMENT: out of line, it runs only when the first failed.
    #[cold]
    #[inline(never)]
    fn get_page_from_freelist_fragmenting(
        &self,
        cpu: &Cpu<'m>,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        mt: Migratetype,
    ) -> Option<Pfn> {
        self.get_page_from_freelist(cpu, gfp, order, AllocFlags(alloc_flags.0 & !AllocFlags::NOFRAGMENT.0), mt)
    }

    /// One pass of `get_page_from_freelist()`: the zonelist from the first
    /// zone not above `gfp_zone(gfp)` (`for_next_zone_zonelist_nodemask`),
    /// each zone's watermark checked with its `lowmem_reserve` against that
    /// zone index, the first zone that passes and has a block wins. One node,
    /// so ALLOC_NOFRAGMENT never moves to a remote node.
    #[inline(always)]
    fn get_page_from_freelist(
        &self,
        cpu: &Cpu<'m>,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        mt: Migratetype,
    ) -> Option<Pfn> {
        let prep = self.zone_prep(gfp);
        let highest_zoneidx = prep.highest_zoneidx as usize;
        for &zt in self.zonelist.get(prep.first as usize..).unwrap_or_default() {
            let zi = zt as usize;
            let z = self.zone_at(zi);
            let mut ok = false;
            if !z.test_flag(ZoneFlag::BelowHigh) {
                if z.zone_watermark_fast(order, z.high_wmark_pages(), highest_zoneidx, alloc_flags) {
                    ok = true;
                } else {
                    z.set_flag(ZoneFlag::BelowHigh);
                }
            }
            if !ok
                && !alloc_flags.has(AllocFlags::NO_WATERMARKS)
                && !z.zone_watermark_fast(order, z.wmark_pages(alloc_flags.wmark()), highest_zoneidx, alloc_flags)
            {
                continue;
            }
            let Some(pfn) = self.rmqueue(cpu, zi, order, alloc_flags, mt) else { continue };
            self.prep_new_page(cpu, pfn, order, gfp, mt);
            if alloc_flags.has(AllocFlags::HIGHATOMIC) && order > 0 {
                Self::reserve_highatomic_pageblock(cpu, z, pfn, order);
            }
            return Some(pfn);
        }
        None
    }

    /// `reserve_highatomic_pageblock()` under the zone lock, out of line
    /// (only the slow path of a high-order atomic allocation gets here).
    #[cold]
    #[inline(never)]
    fn reserve_highatomic_pageblock(cpu: &Cpu<'m>, z: &mmlab_buddy::Zone<'m>, pfn: Pfn, order: u32) {
        z.lock(cpu).reserve_highatomic_pageblock(pfn, order);
    }

    /// `rmqueue()`'s buddy half: one zone-lock hold for `rmqueue_buddy()`,
    /// out of line (orders the pcp does not cache, or an empty pcp that
    /// could not be refilled).
    #[inline(never)]
    fn rmqueue_buddy(
        cpu: &Cpu<'m>,
        z: &mmlab_buddy::Zone<'m>,
        order: u32,
        alloc_flags: AllocFlags,
        mt: Migratetype,
    ) -> Option<Pfn> {
        let mut lz = z.lock(cpu);
        let page = lz.rmqueue_buddy(order, mt, alloc_flags);
        drop(lz);
        if page.is_some() {
            cpu.count(VmEvent::pgalloc(z.zone_type()), 1 << order);
            cpu.count(VmEvent::RmqueueBuddyPages, 1 << order);
        }
        page
    }

    /// `rmqueue()`: the pcp of zone `zi` for cacheable orders, else (or on
    /// failure) the zone's buddy lists.
    #[inline(always)]
    fn rmqueue(&self, cpu: &Cpu<'m>, zi: usize, order: u32, alloc_flags: AllocFlags, mt: Migratetype) -> Option<Pfn> {
        let z = self.zone_at(zi);
        let mut page = None;
        if pcp_allowed_order(order) {
            page = self.rmqueue_pcplist(cpu, zi, order, mt, alloc_flags);
        }
        if page.is_none() {
            page = Self::rmqueue_buddy(cpu, z, order, alloc_flags, mt);
        }
        if alloc_flags.has(AllocFlags::KSWAPD) && z.test_flag(ZoneFlag::BoostedWatermark) {
            z.clear_flag(ZoneFlag::BoostedWatermark);
            z.wakeup_kswapd();
        }
        page
    }

    /// `unreserve_highatomic_pageblock()`: give back a highatomic reserve
    /// in the first zone of the zonelist (from `gfp_zone(gfp)`) that has one.
    fn unreserve_highatomic_pageblock(&self, cpu: &Cpu<'m>, gfp: Gfp, mt: Migratetype, force: bool) {
        let first = self.zone_prep(gfp).first as usize;
        for &zt in &self.zonelist[first..] {
            if self.zone_at(zt as usize).lock(cpu).unreserve_highatomic_pageblock(mt, force) {
                return;
            }
        }
    }

    /// `alloc_contig_pages()`'s zone walk: `f` on each zone of the zonelist
    /// from `gfp_zone(gfp)` down, the first success wins; else the last
    /// zone's error.
    pub(crate) fn alloc_contig_pages_zones(
        &self,
        gfp: Gfp,
        mut f: impl FnMut(&mmlab_buddy::Zone<'m>) -> Result<Pfn, ContigError>,
    ) -> Result<Pfn, ContigError> {
        let first = self.zone_prep(gfp).first as usize;
        let mut err = ContigError::NoRange { nr_pages: 0 };
        for &zt in &self.zonelist[first..] {
            match f(self.zone_at(zt as usize)) {
                Ok(p) => return Ok(p),
                Err(e @ (ContigError::NoRange { .. } | ContigError::Busy { .. })) => err = e,
                Err(e) => return Err(e),
            }
        }
        Err(err)
    }

    /// `prep_new_page()`: refcount 1, the allocation recorded, zeroed for
    /// `__GFP_ZERO`.
    #[inline(always)]
    fn prep_new_page(&self, cpu: &Cpu<'m>, pfn: Pfn, order: u32, gfp: Gfp, mt: Migratetype) {
        let p = self.m.page(pfn);
        p.set_refcount(1);
        p.set_ext(PageExt::Alloc(order as u8, mt));
        if gfp.contains(Gfp::__GFP_ZERO) {
            self.m.arena().zero(pfn.phys(), 1 << (order + PAGE_SHIFT));
            cpu.count(VmEvent::PgZero, 1 << order);
        }
    }

    /// `__alloc_pages_slowpath()`, simplified (see the crate documentation).
    #[cold]
    #[inline(never)]
    fn alloc_pages_slowpath(&self, cpu: &Cpu<'m>, gfp: Gfp, order: u32, mt: Migratetype) -> Option<Pfn> {
        cpu.count(VmEvent::AllocSlowpath, 1);
        // gfp_to_alloc_flags()
        let mut flags = AllocFlags::WMARK_MIN | AllocFlags::CPUSET;
        if gfp.contains(Gfp::__GFP_HIGH) {
            flags |= AllocFlags::MIN_RESERVE;
        }
        if gfp.contains(Gfp::__GFP_KSWAPD_RECLAIM) {
            flags |= AllocFlags::KSWAPD;
        }
        flags = gfp_to_alloc_flags_cma(gfp, flags);
        let can_direct_reclaim = gfp.contains(Gfp::__GFP_DIRECT_RECLAIM);
        if !can_direct_reclaim && !gfp.contains(Gfp::__GFP_NOMEMALLOC) {
            flags |= AllocFlags::NON_BLOCK;
            if order > 0 {
                flags |= AllocFlags::HIGHATOMIC;
            }
        }
        if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, flags, mt) {
            return Some(p);
        }
        let costly = order > PAGE_ALLOC_COSTLY_ORDER;
        if can_direct_reclaim && !(costly && gfp.contains(Gfp::__GFP_NORETRY)) {
            // __alloc_pages_direct_reclaim() with nothing to reclaim: give up
            // a highatomic reserve, drain every pcp, retry once.
            self.unreserve_highatomic_pageblock(cpu, gfp, mt, false);
            self.drain_all_pages(cpu);
            if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, flags, mt) {
                return Some(p);
            }
        }
        if gfp.contains(Gfp::__GFP_NOFAIL) {
            // The kernel would loop (and OOM-kill); mmlab tries the reserves
            // once and reports failure rather than hang.
            let f = flags | AllocFlags::MIN_RESERVE | AllocFlags::NON_BLOCK;
            self.unreserve_highatomic_pageblock(cpu, gfp, mt, true);
            if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, f, mt) {
                return Some(p);
            }
        }
        cpu.count(VmEvent::PgallocFail, 1);
        if !gfp.contains(Gfp::__GFP_NOWARN) {
            tracing::warn!(target: "mmlab::page_alloc", "page allocation failure: order:{order}, mode:{:#x}({gfp})", gfp.bits());
        }
        None
    }

    /// `alloc_pages_bulk()`: fill the `None` slots of `array` with order-0
    /// pages; returns the number of populated slots (pre-filled included).
    pub fn alloc_pages_bulk(&self, cpu: &Cpu<'m>, gfp: Gfp, array: &mut [Option<Pfn>]) -> usize {
        if self.foreign(cpu) {
            return 0;
        }
        let nr = array.len();
        let mut nr_populated = 0;
        while nr_populated < nr && array[nr_populated].is_some() {
            nr_populated += 1;
        }
        if nr_populated == nr {
            return nr_populated;
        }
        // One page left: the single page allocator, before the bulk path's
        // own prepare_alloc_pages() (and its fail_page_alloc check).
        if nr - nr_populated == 1 {
            return self.alloc_pages_bulk_failed(cpu, gfp, array, nr_populated);
        }
        // prepare_alloc_pages() of the bulk path.
        if self.fail_page_alloc.should_fail_alloc_page(gfp, 0) {
            return nr_populated;
        }
        let mt = gfp_mt(gfp);
        let mut alloc_flags = AllocFlags::WMARK_LOW;
        if gfp.contains(Gfp::__GFP_KSWAPD_RECLAIM) {
            alloc_flags |= AllocFlags::KSWAPD;
        }
        alloc_flags = gfp_to_alloc_flags_cma(gfp, alloc_flags);
        // The first zone of the zonelist with room for the whole batch
        // above its mark (`for_each_zone_zonelist_nodemask` of the bulk path).
        let prep = self.zone_prep(gfp);
        let (highest_zoneidx, first) = (prep.highest_zoneidx as usize, prep.first as usize);
        let missing = (nr - nr_populated) as u64;
        let zone = self.zonelist[first..].iter().map(|&zt| zt as usize).find(|&zi| {
            let z = self.zone_at(zi);
            z.zone_watermark_fast(0, z.wmark_pages(alloc_flags.wmark()) + missing, highest_zoneidx, alloc_flags)
        });
        if let Some(zi) = zone {
            if let Some(mut pcp) = self.pcp_of(zi, cpu.id()).try_lock() {
                let mut nr_account = 0u64;
                while nr_populated < nr {
                    if array[nr_populated].is_some() {
                        nr_populated += 1;
                        continue;
                    }
                    let Some(pfn) = self.rmqueue_pcplist_locked(cpu, zi, &mut pcp, 0, mt, alloc_flags) else {
                        break;
                    };
                    nr_account += 1;
                    self.prep_new_page(cpu, pfn, 0, gfp, mt);
                    array[nr_populated] = Some(pfn);
                    nr_populated += 1;
                }
                drop(pcp);
                if nr_account > 0 {
                    cpu.count(VmEvent::pgalloc(self.zone_at(zi).zone_type()), nr_account);
                    self.after_op();
                    return nr_populated;
                }
            } else {
                cpu.count(VmEvent::PcpTrylockFail, 1);
            }
        }
        self.alloc_pages_bulk_failed(cpu, gfp, array, nr_populated)
    }

    /// `alloc_pages_bulk()`'s `failed` label: one page the normal way into
    /// the first empty slot.
    fn alloc_pages_bulk_failed(
        &self,
        cpu: &Cpu<'m>,
        gfp: Gfp,
        array: &mut [Option<Pfn>],
        nr_populated: usize,
    ) -> usize {
        match self.alloc_pages(cpu, gfp, 0) {
            Some(pfn) => {
                array[nr_populated] = Some(pfn);
                nr_populated + 1
            }
            None => nr_populated,
        }
    }

    /// `__free_pages(page, order)`: drop the reference; on the last one,
    /// free the block. A bad free is refused with nothing changed.
    ///
    /// # Errors
    /// A [`FreeError`] for a CPU of another machine, an order above `MAX_PAGE_ORDER`, a frame that
    /// is not RAM, reserved, not the head of a live allocation, freed already, or freed with
    /// another order; nothing is changed.
    pub fn free_pages(&self, cpu: &Cpu<'m>, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        // The same code twice: order 0 with the order a constant the
        // compiler folds, and every other order.
        if order == 0 { self.free_pages_order(cpu, pfn, 0) } else { self.free_pages_order(cpu, pfn, order) }
    }

    /// [`free_pages`](Self::free_pages) for one order.
    #[inline(always)]
    fn free_pages_order(&self, cpu: &Cpu<'m>, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        if self.foreign(cpu) {
            return Err(FreeError::ForeignCpu { cpu: cpu.id() });
        }
        if order > MAX_PAGE_ORDER {
            return Err(FreeError::OrderTooLarge { order });
        }
        if !self.m.memmap().pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        let p = self.m.page(pfn);
        let mt = match p.ext() {
            PageExt::Alloc(o, mt) if o as u32 == order => mt,
            PageExt::Alloc(o, _) => {
                return Err(FreeError::WrongOrder { pfn, allocated: o as u32, freed: order });
            }
            PageExt::Buddy(_) | PageExt::Pcp(_) => return Err(FreeError::DoubleFree { pfn }),
            PageExt::Reserved => return Err(FreeError::Reserved { pfn }),
            PageExt::Tail => return Err(FreeError::NotAllocated { pfn }),
        };
        // The state check above and this decrement race with a concurrent
        // free of the same page; the decrement is the arbiter: it refuses to
        // drop a reference that is not there, so exactly one free wins.
        let Some(last) = p.put_testzero() else {
            return Err(FreeError::DoubleFree { pfn });
        };
        if !last {
            self.free_pages_still_referenced(cpu, pfn, p, order, mt);
            return Ok(());
        }
        self.free_frozen_pages(cpu, pfn, p, order);
        self.after_op();
        Ok(())
    }

    /// `__free_pages()` when the block is still referenced: like the kernel
    /// for a non-compound block, free the upper halves and leave the first
    /// page to its holder. Out of line: it is rare.
    #[cold]
    #[inline(never)]
    fn free_pages_still_referenced(&self, cpu: &Cpu<'m>, pfn: Pfn, p: &StructPage, order: u32, mt: Migratetype) {
        // The first page is an order-0 page of its holder's from now on:
        // say so before the halves go, so that a holder dropping the last
        // reference meanwhile frees that page alone.
        p.set_ext(PageExt::Alloc(0, mt));
        let mut o = order;
        while o > 0 {
            o -= 1;
            let half = pfn.add(1 << o);
            self.m.page(half).set_refcount(0);
            self.free_frozen_pages(cpu, half, self.m.page(half), o);
        }
        self.after_op();
    }

    /// Whether `pfn` is a page the allocator handed out and that is still
    /// live: the head of an allocation, or a page inside one (a tail of a
    /// higher-order block; the kernel's vmap() takes such pages too).
    /// Nothing is changed.
    ///
    /// # Errors
    /// [`FreeError::InvalidPfn`] for a frame that is not RAM
    /// (`!pfn_valid()`), [`FreeError::Reserved`] for a memblock
    /// reservation, [`FreeError::NotAllocated`] for a free frame.
    pub fn check_allocated(&self, pfn: Pfn) -> Result<(), FreeError> {
        let mm = self.m.memmap();
        if !mm.pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        match self.m.page(pfn).ext() {
            PageExt::Alloc(..) => Ok(()),
            PageExt::Reserved => Err(FreeError::Reserved { pfn }),
            PageExt::Buddy(_) | PageExt::Pcp(_) => Err(FreeError::NotAllocated { pfn }),
            PageExt::Tail => {
                // Find the block's head: the nearest aligned frame below
                // that is not a tail page.
                for order in 1..=MAX_PAGE_ORDER {
                    let head = Pfn(pfn.0 & !((1u64 << order) - 1));
                    if !mm.pfn_valid(head) {
                        break;
                    }
                    match self.m.page(head).ext() {
                        PageExt::Tail => continue,
                        PageExt::Alloc(o, _) if pfn.0 - head.0 < 1u64 << o => return Ok(()),
                        _ => break,
                    }
                }
                Err(FreeError::NotAllocated { pfn })
            }
        }
    }

    /// `get_page()`: take another reference on an allocated page.
    ///
    /// # Errors
    /// [`FreeError::InvalidPfn`] for a frame that is not RAM, [`FreeError::NotAllocated`] for one
    /// that is not an allocated page.
    pub fn get_page(&self, pfn: Pfn) -> Result<i32, FreeError> {
        if !self.m.memmap().pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        match self.m.page(pfn).ext() {
            PageExt::Alloc(..) => Ok(self.m.page(pfn).ref_inc()),
            _ => Err(FreeError::NotAllocated { pfn }),
        }
    }

    /// `free_frozen_pages()` (6.12: `free_unref_page()`): to the pcp for
    /// cacheable orders, else to the buddy under the zone lock.
    #[inline(always)]
    pub(crate) fn free_frozen_pages(&self, cpu: &Cpu<'m>, pfn: Pfn, page: &StructPage, order: u32) {
        let m = self.m;
        // free_pages_prepare()
        trace::mm_page_free(cpu.id(), m.trace_clock(), m.memmap().page_va(pfn), pfn.0, order);
        // page_zone(): `page` is `pfn`'s struct page, already looked up.
        let zi = page.zonenum() as usize % NR_ZONE_TYPES;
        let z = self.zone_at(zi);
        if !pcp_allowed_order(order) {
            z.free_one_page(cpu, pfn, order, Fpi::NONE);
            return;
        }
        let mut mt = z.pageblock_migratetype(pfn);
        if mt as usize >= MIGRATE_PCPTYPES {
            // An isolated pageblock's pages go straight to the buddy; CMA
            // and highatomic ones ride on the movable list.
            if mt.is_isolate() {
                z.free_one_page(cpu, pfn, order, Fpi::NONE);
                return;
            }
            mt = Migratetype::Movable;
        }
        match self.pcp_of(zi, cpu.id()).try_lock() {
            Some(pcp) => self.free_frozen_page_commit(cpu, zi, pcp, pfn, page, mt, order),
            None => {
                cpu.count(VmEvent::PcpTrylockFail, 1);
                z.free_one_page(cpu, pfn, order, Fpi::NONE);
            }
        }
    }

    /// `split_page()`: turn an allocated order-n block into 2^n order-0
    /// pages, each with its own reference, to be freed one by one.
    ///
    /// # Errors
    /// [`FreeError::InvalidPfn`], [`FreeError::WrongOrder`] when the block was allocated at another
    /// order, [`FreeError::NotAllocated`]; nothing is changed.
    pub fn split_page(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        if !self.m.memmap().pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        let mt = match self.m.page(pfn).ext() {
            PageExt::Alloc(o, mt) if o as u32 == order => mt,
            PageExt::Alloc(o, _) => return Err(FreeError::WrongOrder { pfn, allocated: o as u32, freed: order }),
            _ => return Err(FreeError::NotAllocated { pfn }),
        };
        for p in self.m.memmap().page_slices(pfn, 1 << order).flatten() {
            p.set_refcount(1);
            p.set_ext(PageExt::Alloc(0, mt));
        }
        Ok(())
    }

    /// `alloc_contig_pages()`: drain the pcps, then find and take `nr` free
    /// contiguous frames; each becomes an allocated order-0 page.
    ///
    /// # Errors
    /// [`ContigError::ForeignCpu`], or [`ContigError::NoRange`] when no free range of `nr` frames
    /// exists.
    pub fn alloc_contig_pages(&self, cpu: &Cpu<'m>, nr: u64, gfp: Gfp) -> Result<Pfn, ContigError> {
        if self.foreign(cpu) {
            return Err(ContigError::ForeignCpu { cpu: cpu.id() });
        }
        self.drain_all_pages(cpu);
        let r = self.alloc_contig_pages_zones(gfp, |z| z.alloc_contig_pages(cpu, nr, gfp_mt(gfp)));
        self.after_op();
        r
    }

    /// `alloc_contig_range()`: exactly `[start, start + nr)`.
    ///
    /// # Errors
    /// [`ContigError::ForeignCpu`], [`ContigError::OutOfRange`], or [`ContigError::Busy`] for a
    /// frame in use.
    pub fn alloc_contig_range(&self, cpu: &Cpu<'m>, start: Pfn, nr: u64, gfp: Gfp) -> Result<(), ContigError> {
        if self.foreign(cpu) {
            return Err(ContigError::ForeignCpu { cpu: cpu.id() });
        }
        self.drain_all_pages(cpu);
        // The range must lie in one zone (`alloc_contig_range` works on
        // `page_zone(pfn_to_page(start))`).
        let r = if !self.m.memmap().pfn_valid(start) {
            Err(ContigError::OutOfRange { start, nr_pages: nr })
        } else {
            self.page_zone(start).alloc_contig_range(cpu, start, nr, gfp_mt(gfp))
        };
        self.after_op();
        r
    }

    /// Whether `pfn` is RAM holding a live order-0 allocation, or the error
    /// an order-0 free of it gets. Nothing is changed.
    pub(crate) fn check_order0_allocated(&self, pfn: Pfn) -> Result<(), FreeError> {
        if !self.m.memmap().pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        Self::check_order0_page(pfn, self.m.page(pfn))
    }

    /// [`check_order0_allocated`](Self::check_order0_allocated) of every
    /// page of `pages`, in order, each run of consecutive frames as one
    /// ([`check_order0_run`](Self::check_order0_run)).
    pub(crate) fn check_order0_allocated_all(&self, pages: &[Pfn]) -> Result<(), FreeError> {
        let mut i = 0;
        while i < pages.len() {
            let start = pages[i];
            let mut n = 1;
            while i + n < pages.len() && pages[i + n].0 == start.0 + n as u64 {
                n += 1;
            }
            self.check_order0_run(start, n as u64)?;
            i += n;
        }
        Ok(())
    }

    /// [`check_order0_allocated`](Self::check_order0_allocated) of the `nr`
    /// frames from `start`, in order: the valid prefix's struct pages read
    /// as one run ([`mmlab_engine::mm::memmap::Memmap::page_slices`]), then the
    /// first invalid frame, if any.
    pub(crate) fn check_order0_run(&self, start: Pfn, nr: u64) -> Result<(), FreeError> {
        let mm = self.m.memmap();
        let valid = (0..nr).find(|&k| !mm.pfn_valid(start.add(k))).unwrap_or(nr);
        // A run whose first frame is not RAM has no struct pages to read.
        if valid > 0 {
            for (k, page) in mm.page_slices(start, valid).flatten().enumerate() {
                Self::check_order0_page(start.add(k as u64), page)?;
            }
        }
        if valid < nr {
            return Err(FreeError::InvalidPfn { pfn: start.add(valid) });
        }
        Ok(())
    }

    /// The state check of one page for an order-0 free.
    #[inline]
    fn check_order0_page(pfn: Pfn, page: &StructPage) -> Result<(), FreeError> {
        match page.ext() {
            PageExt::Alloc(0, _) => Ok(()),
            PageExt::Alloc(o, _) => Err(FreeError::WrongOrder { pfn, allocated: o as u32, freed: 0 }),
            PageExt::Buddy(_) | PageExt::Pcp(_) => Err(FreeError::DoubleFree { pfn }),
            PageExt::Reserved => Err(FreeError::Reserved { pfn }),
            PageExt::Tail => Err(FreeError::NotAllocated { pfn }),
        }
    }

    /// `free_contig_range()`: free `nr` order-0 pages from `start`. Checks
    /// every page first, so a bad range changes nothing.
    ///
    /// # Errors
    /// A [`FreeError`] for the first page that is not a live order-0 page with one reference (or a
    /// CPU of another machine); nothing is changed.
    pub fn free_contig_range(&self, cpu: &Cpu<'m>, start: Pfn, nr: u64) -> Result<(), FreeError> {
        if self.foreign(cpu) {
            return Err(FreeError::ForeignCpu { cpu: cpu.id() });
        }
        for i in 0..nr {
            let pfn = start.add(i);
            self.check_order0_allocated(pfn)?;
            if self.m.page(pfn).refcount() != 1 {
                return Err(FreeError::WrongOrder { pfn, allocated: 0, freed: 0 });
            }
        }
        for i in 0..nr {
            self.free_pages(cpu, start.add(i), 0)?;
        }
        Ok(())
    }

    /// `cma_activate_area()` → `init_cma_reserved_pageblock()` for each
    /// pageblock of `[start, start + nr_pages)`, a CMA area that memblock
    /// reserved at boot: its pages stop being reserved, the pageblock
    /// becomes MIGRATE_CMA, the zone counts it as managed and as `cma`, and
    /// the block is freed whole (`__free_pages(page, pageblock_order)`).
    ///
    /// # Errors
    /// [`FreeError::ForeignCpu`]; [`FreeError::InvalidPfn`] for a range not
    /// pageblock-aligned or not RAM; [`FreeError::NotAllocated`] for a page
    /// in it that is not reserved. The range is checked before anything
    /// changes.
    pub fn cma_activate_area(&self, cpu: &Cpu<'m>, start: Pfn, nr_pages: u64) -> Result<(), FreeError> {
        use mmlab_engine::mm::{PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER};
        if self.foreign(cpu) {
            return Err(FreeError::ForeignCpu { cpu: cpu.id() });
        }
        if !start.is_aligned_order(PAGEBLOCK_ORDER) || !nr_pages.is_multiple_of(PAGEBLOCK_NR_PAGES) {
            return Err(FreeError::InvalidPfn { pfn: start });
        }
        for i in 0..nr_pages {
            let pfn = start.add(i);
            if !self.m.memmap().pfn_valid(pfn) {
                return Err(FreeError::InvalidPfn { pfn });
            }
            if self.m.page(pfn).ext() != PageExt::Reserved {
                return Err(FreeError::NotAllocated { pfn });
            }
        }
        for block in (0..nr_pages).step_by(PAGEBLOCK_NR_PAGES as usize) {
            let head = start.add(block);
            for i in 0..PAGEBLOCK_NR_PAGES {
                let p = self.m.page(head.add(i));
                p.clear_flag(mmlab_engine::mm::page::pg::PG_RESERVED);
                p.set_refcount(0);
                p.set_ext(PageExt::Tail);
            }
            let z = self.page_zone(head);
            z.set_pageblock_cma(cpu, head);
            let p = self.m.page(head);
            p.set_refcount(1);
            p.set_ext(PageExt::Alloc(PAGEBLOCK_ORDER as u8, Migratetype::Movable));
            z.adjust_managed_page_count(PAGEBLOCK_NR_PAGES as i64);
            z.add_cma_pages(PAGEBLOCK_NR_PAGES);
            self.free_pages(cpu, head, PAGEBLOCK_ORDER)?;
        }
        Ok(())
    }

    /// `free_reserved_page()` (include/linux/mm.h): hand a page that memblock
    /// reserved at boot to the allocator after boot, as the hugetlb vmemmap
    /// optimisation does with the boot memmap it frees
    /// (`free_bootmem_page()` on arm64): clear `PG_reserved`, give it one
    /// reference, free it with `__free_page()`, and count it as managed
    /// (`adjust_managed_page_count(page, 1)`).
    ///
    /// # Errors
    /// [`FreeError::InvalidPfn`] for a frame that is not RAM,
    /// [`FreeError::NotAllocated`] for a frame that is not reserved, a
    /// [`FreeError::ForeignCpu`]; nothing is changed.
    pub fn free_reserved_page(&self, cpu: &Cpu<'m>, pfn: Pfn) -> Result<(), FreeError> {
        if self.foreign(cpu) {
            return Err(FreeError::ForeignCpu { cpu: cpu.id() });
        }
        if !self.m.memmap().pfn_valid(pfn) {
            return Err(FreeError::InvalidPfn { pfn });
        }
        let p = self.m.page(pfn);
        if p.ext() != PageExt::Reserved {
            return Err(FreeError::NotAllocated { pfn });
        }
        p.clear_flag(mmlab_engine::mm::page::pg::PG_RESERVED);
        p.set_refcount(1);
        p.set_ext(PageExt::Alloc(0, Migratetype::Unmovable));
        self.page_zone(pfn).adjust_managed_page_count(1);
        self.free_pages(cpu, pfn, 0)
    }

    /// `free_reserved_area()` of `size` bytes at `base`, on `cpu`: out of
    /// memblock.reserved (arm64 keeps memblock), then each page through
    /// `free_reserved_page()`.
    pub(crate) fn free_reserved_area(&self, cpu: &Cpu<'m>, base: u64, size: u64) -> Result<(), FreeError> {
        self.m.memblock().free(mmlab_engine::PhysAddr(base), size);
        for pfn in base >> PAGE_SHIFT..(base + size).div_ceil(1 << PAGE_SHIFT) {
            self.free_reserved_page(cpu, mmlab_engine::Pfn(pfn))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{AllocatorConfig, PageAllocator};
    use mmlab_buddy::AllocFlags;
    use mmlab_engine::mm::ZoneType;
    use mmlab_engine::{Gfp, Machine, MachineConfig};

    #[test]
    fn nofragment_only_when_the_preferred_zone_is_normal() {
        // 4 GiB at 1 GiB: Normal holds [4 GiB, 5 GiB), so GFP_KERNEL prefers
        // Normal and its first attempt carries ALLOC_NOFRAGMENT; GFP_DMA
        // prefers DMA and does not.
        let m = Machine::boot(MachineConfig::with("4G", 1).unwrap()).unwrap();
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        assert_eq!(pa.zonelist, vec![ZoneType::Normal, ZoneType::Dma]);
        assert_eq!(pa.alloc_flags_nofragment(Gfp::GFP_KERNEL), AllocFlags::NOFRAGMENT);
        assert_eq!(pa.alloc_flags_nofragment(Gfp::GFP_KERNEL | Gfp::__GFP_DMA), AllocFlags::default());
        assert_zone_prep_matches_the_zonelist(&pa);
        let cpu = m.cpu(0).unwrap();
        let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
        pa.free_pages(&cpu, p, 0).unwrap();
        // 64 MiB: all RAM is DMA, so no allocation prefers Normal.
        let m = Machine::boot(MachineConfig::with("64M", 1).unwrap()).unwrap();
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        assert_eq!(pa.zonelist, vec![ZoneType::Dma]);
        assert_eq!(pa.alloc_flags_nofragment(Gfp::GFP_KERNEL), AllocFlags::default());
        assert_zone_prep_matches_the_zonelist(&pa);
    }

    /// The table built at boot gives, for every value of the zone modifier
    /// bits, what `gfp_zone` and a walk of the zonelist give.
    fn assert_zone_prep_matches_the_zonelist(pa: &PageAllocator<'_>) {
        for bits in 0..16u32 {
            let gfp = Gfp::GFP_KERNEL | Gfp::from_bits_retain(bits);
            let highest = mmlab_buddy::zones::gfp_zone(gfp).unwrap_or(ZoneType::Normal);
            let first = pa.zonelist.iter().position(|&z| z as usize <= highest as usize).unwrap_or(pa.zonelist.len());
            let prep = pa.zone_prep(gfp);
            assert_eq!((prep.highest_zoneidx as usize, prep.first as usize), (highest as usize, first), "{gfp}");
            let nofragment = pa.zonelist.get(first) == Some(&ZoneType::Normal);
            assert_eq!(prep.nofragment.has(AllocFlags::NOFRAGMENT), nofragment, "{gfp}");
        }
    }
}
