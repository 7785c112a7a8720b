//! `struct per_cpu_pages` and the pcp algorithms: refill (`nr_pcp_alloc`,
//! `rmqueue_bulk`), free (`free_frozen_page_commit`, `nr_pcp_high`,
//! `nr_pcp_free`), drain (`free_pcppages_bulk`, `drain_pages_zone`) and
//! `decay_pcp_high`.

use crate::page_alloc::PageAllocator;
use crate::pageset::{
    NR_PCP_LISTS, PCPF_FREE_HIGH_BATCH, PCPF_PREV_FREE_HIGH_ORDER, PerCpuPages, kclamp, order_to_pindex,
    pindex_to_order,
};
use crate::sizing::PCP_BATCH_SCALE_MAX as S;
use mmlab_buddy::{AllocFlags, RmqueueMode, Zone, ZoneFlag};
use mmlab_engine::mm::page::{PageExt, StructPage};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;
use mmlab_engine::mm::{Migratetype, PAGE_ALLOC_COSTLY_ORDER, ZoneType};
use mmlab_engine::sync::SpinGuard;
use mmlab_engine::{Cpu, Pfn, trace};

impl<'m> PageAllocator<'m> {
    /// `nr_pcp_alloc()`: how many blocks of `order` one refill takes.
    pub(crate) fn nr_pcp_alloc(&self, z: &Zone<'m>, pcp: &mut PerCpuPages, order: u32) -> i32 {
        let base_batch = pcp.batch;
        let mut high = pcp.clamp_high();
        if high < base_batch {
            return 1;
        }
        let mut batch = if order != 0 { base_batch } else { base_batch << pcp.alloc_factor };
        if pcp.high_min != pcp.high_max && !z.test_flag(ZoneFlag::BelowHigh) {
            high = (high + batch).min(pcp.high_max);
            pcp.high = high;
        }
        if order == 0 {
            let max_nr_alloc = (high - pcp.count - base_batch).max(base_batch);
            if batch <= max_nr_alloc && (pcp.alloc_factor as u32) < S {
                pcp.alloc_factor += 1;
            }
            batch = batch.min(max_nr_alloc);
        }
        if batch > 1 {
            batch = (batch >> order).max(2);
        }
        batch
    }

    /// The refill step of `__rmqueue_pcplist()`, out of line.
    #[cold]
    #[inline(never)]
    fn refill(
        &self,
        cpu: &Cpu<'m>,
        z: &Zone<'m>,
        pcp: &mut PerCpuPages,
        order: u32,
        mt: Migratetype,
        alloc_flags: AllocFlags,
    ) {
        let n = self.nr_pcp_alloc(z, pcp, order);
        let got = self.rmqueue_bulk(cpu, z, pcp, order, n, mt, alloc_flags);
        pcp.count += got << order;
    }

    /// `rmqueue_bulk()`: `count` blocks from the buddy lists to the tail of
    /// the pcp list for (`mt`, `order`), under one zone-lock hold. Returns
    /// blocks taken.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rmqueue_bulk(
        &self,
        cpu: &Cpu<'m>,
        z: &Zone<'m>,
        pcp: &mut PerCpuPages,
        order: u32,
        count: i32,
        mt: Migratetype,
        alloc_flags: AllocFlags,
    ) -> i32 {
        let mem = self.m.memmap();
        let pindex = order_to_pindex(mt, order);
        let _slice = trace::mmlab::func(cpu.id(), self.m.trace_clock(), "rmqueue_bulk");
        let mut lz = z.lock(cpu);
        let mut mode = RmqueueMode::Normal;
        let mut i = 0;
        while i < count {
            let Some(pfn) = lz.rmqueue(order, mt, alloc_flags, &mut mode) else { break };
            let p = mem.page(pfn);
            p.set_ext(PageExt::Pcp(order as u8));
            pcp.lists.add_tail_page(mem, pindex, pfn, p);
            i += 1;
        }
        drop(lz);
        cpu.count(VmEvent::PcpRefill, 1);
        cpu.count(VmEvent::PcpRefillPages, (i as u64) << order);
        i
    }

    /// `__rmqueue_pcplist()`: the head of the list, refilling it first if empty.
    #[inline(always)]
    pub(crate) fn rmqueue_pcplist_locked(
        &self,
        cpu: &Cpu<'m>,
        zi: usize,
        pcp: &mut PerCpuPages,
        order: u32,
        mt: Migratetype,
        alloc_flags: AllocFlags,
    ) -> Option<Pfn> {
        let pindex = order_to_pindex(mt, order);
        if pcp.lists.list_is_empty(pindex) {
            if alloc_flags.has(AllocFlags::HIGHATOMIC) {
                return None;
            }
            self.refill(cpu, self.zone_at(zi), pcp, order, mt, alloc_flags);
        }
        let pfn = pcp.lists.pop_first(self.m.memmap(), pindex)?;
        pcp.count -= 1 << order;
        Some(pfn)
    }

    /// `rmqueue_pcplist()`: trylock this CPU's pcp and take a block.
    #[inline(always)]
    pub(crate) fn rmqueue_pcplist(
        &self,
        cpu: &Cpu<'m>,
        zi: usize,
        order: u32,
        mt: Migratetype,
        alloc_flags: AllocFlags,
    ) -> Option<Pfn> {
        let Some(mut pcp) = self.pcp_of(zi, cpu.id()).try_lock() else {
            cpu.count(VmEvent::PcpTrylockFail, 1);
            return None;
        };
        pcp.free_count >>= 1;
        let page = self.rmqueue_pcplist_locked(cpu, zi, &mut pcp, order, mt, alloc_flags);
        trace::mmlab::pcp_state(cpu.id(), self.m.trace_clock(), pcp.count, pcp.high, pcp.batch);
        drop(pcp);
        if page.is_some() {
            cpu.count(VmEvent::pgalloc(self.zone_at(zi).zone_type()), 1 << order);
        }
        page
    }

    /// `nr_pcp_high()`: the count at which this free drains, adjusting
    /// `pcp->high` on the way.
    #[inline(always)]
    pub(crate) fn nr_pcp_high(z: &Zone<'m>, pcp: &mut PerCpuPages, batch: i32, free_high: bool) -> i32 {
        let (high_min, high_max) = (pcp.high_min, pcp.high_max);
        let mut high = pcp.clamp_high();
        if high == 0 {
            return 0;
        }
        if free_high {
            pcp.high = (high - (batch << S)).max(high_min);
            return 0;
        }
        if z.test_flag(ZoneFlag::ReclaimActive) {
            let fc = pcp.free_count.max(batch);
            pcp.high = (high - fc).max(high_min);
            return (batch << 2).min(pcp.high);
        }
        if high_min == high_max {
            return high;
        }
        if z.test_flag(ZoneFlag::BelowHigh) {
            let fc = pcp.free_count.max(batch);
            pcp.high = (high - fc).max(high_min);
            high = pcp.count.max(high_min);
        } else if pcp.count >= high {
            let need_high = pcp.free_count + batch;
            if pcp.high < need_high {
                pcp.high = kclamp(need_high, high_min, high_max);
            }
        }
        high
    }

    /// `nr_pcp_free()`: how many pages a drain on free releases.
    pub(crate) fn nr_pcp_free(pcp: &PerCpuPages, batch: i32, high: i32, free_high: bool) -> i32 {
        if free_high {
            return pcp.count.min(batch << S);
        }
        if high < batch {
            return 1;
        }
        kclamp(pcp.free_count, batch, high - batch)
    }

    /// `free_frozen_page_commit()` (6.12: `free_unref_page_commit()`): put a
    /// block on this CPU's list and drain if the list is over high.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn free_frozen_page_commit<'a>(
        &'a self,
        cpu: &Cpu<'m>,
        zi: usize,
        mut pcp: SpinGuard<'a, PerCpuPages>,
        pfn: Pfn,
        page: &StructPage,
        mt: Migratetype,
        order: u32,
    ) {
        let mem = self.m.memmap();
        pcp.alloc_factor >>= 1;
        cpu.count(VmEvent::Pgfree, 1 << order);
        let pindex = order_to_pindex(mt, order);
        page.set_ext(PageExt::Pcp(order as u8));
        pcp.lists.add_page(mem, pindex, pfn, page);
        pcp.count += 1 << order;
        let batch = pcp.batch;
        let mut free_high = false;
        if order != 0 && order <= PAGE_ALLOC_COSTLY_ORDER {
            free_high = pcp.free_count >= self.rules.free_high_threshold(batch, pcp.high_min)
                && pcp.flags & PCPF_PREV_FREE_HIGH_ORDER != 0
                && (pcp.flags & PCPF_FREE_HIGH_BATCH == 0 || pcp.count >= batch);
            pcp.flags |= PCPF_PREV_FREE_HIGH_ORDER;
        } else if pcp.flags & PCPF_PREV_FREE_HIGH_ORDER != 0 {
            pcp.flags &= !PCPF_PREV_FREE_HIGH_ORDER;
        }
        if pcp.free_count < batch << S {
            pcp.free_count += 1 << order;
        }
        let high = Self::nr_pcp_high(self.zone_at(zi), &mut pcp, batch, free_high);
        if pcp.count < high {
            trace::mmlab::pcp_state(cpu.id(), self.m.trace_clock(), pcp.count, pcp.high, pcp.batch);
            return;
        }
        self.drain_on_free(cpu, zi, pcp, pindex, batch, high, free_high);
    }

    /// The drain half of `free_frozen_page_commit()`, out of line: it runs
    /// once per thousands of frees.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn drain_on_free<'a>(
        &'a self,
        cpu: &Cpu<'m>,
        zi: usize,
        mut pcp: SpinGuard<'a, PerCpuPages>,
        pindex: usize,
        batch: i32,
        high: i32,
        free_high: bool,
    ) {
        if free_high {
            cpu.count(VmEvent::PcpFreeHigh, 1);
        }
        let z = self.zone_at(zi);
        let mut to_free = Self::nr_pcp_free(&pcp, batch, high, free_high);
        match self.rules.free_drain_chunk(batch) {
            None => self.free_pcppages_bulk(cpu, z, &mut pcp, to_free, pindex),
            Some(chunk) => loop {
                let n = to_free.min(chunk);
                self.free_pcppages_bulk(cpu, z, &mut pcp, n, pindex);
                to_free -= n;
                if to_free <= 0 || pcp.count == 0 {
                    break;
                }
                // Drop and re-take the pcp lock between chunks; stop if
                // someone else (a remote drain) holds it now.
                drop(pcp);
                match self.pcp_of(zi, cpu.id()).try_lock() {
                    Some(g) => pcp = g,
                    None => {
                        cpu.count(VmEvent::PcpTrylockFail, 1);
                        return;
                    }
                }
            },
        }
        trace::mmlab::pcp_state(cpu.id(), self.m.trace_clock(), pcp.count, pcp.high, pcp.batch);
        drop(pcp);
        if z.test_flag(ZoneFlag::BelowHigh)
            && z.zone_watermark_ok(0, z.high_wmark_pages(), ZoneType::Movable as usize, AllocFlags::default())
        {
            z.clear_flag(ZoneFlag::BelowHigh);
        }
    }

    /// `free_pcppages_bulk()`: give `count` pages back to the buddy lists,
    /// round-robin over the lists from `pindex`, oldest (tail) first, under
    /// one zone-lock hold.
    pub(crate) fn free_pcppages_bulk(
        &self,
        cpu: &Cpu<'m>,
        zone: &Zone<'m>,
        pcp: &mut PerCpuPages,
        count: i32,
        pindex: usize,
    ) {
        let mut count = count.min(pcp.count);
        if count <= 0 {
            return;
        }
        let m = self.m;
        let mem = m.memmap();
        let _slice = trace::mmlab::func(cpu.id(), m.trace_clock(), "free_pcppages_bulk");
        let mut z = zone.lock(cpu);
        let mut pindex = pindex.wrapping_add(NR_PCP_LISTS - 1) % NR_PCP_LISTS;
        let mut drained = 0u64;
        while count > 0 {
            loop {
                pindex = (pindex + 1) % NR_PCP_LISTS;
                if !pcp.lists.list_is_empty(pindex) {
                    break;
                }
            }
            let order = pindex_to_order(pindex);
            let nr = 1i32 << order;
            while let Some(pfn) = pcp.lists.last(pindex) {
                let mt = zone.pageblock_migratetype(pfn);
                pcp.lists.del(mem, pindex, pfn);
                count -= nr;
                pcp.count -= nr;
                drained += nr as u64;
                z.free_one_page_locked(pfn, order, mt, mmlab_buddy::Fpi::NONE);
                trace::mm_page_pcpu_drain(cpu.id(), m.trace_clock(), mem.page_va(pfn), pfn.0, order, mt as i32);
                if count <= 0 {
                    break;
                }
            }
        }
        drop(z);
        cpu.count(VmEvent::PcpDrain, 1);
        cpu.count(VmEvent::PcpDrainPages, drained);
    }

    /// `drain_pages_zone()`: empty CPU `target`'s pcp lists of zone `zi`,
    /// in rounds of at most `batch << CONFIG_PCP_BATCH_SCALE_MAX` pages, on
    /// behalf of `cpu`; each round takes the pcp lock and the zone lock once.
    /// With `pcp.drain_pages_zone_batch` a round is `batch` pages (Joshua
    /// Hahn's 2025 patch): 32 times the rounds, each holding the locks for
    /// 1/32 of the pages.
    pub(crate) fn drain_pages_zone(&self, cpu: &Cpu<'m>, zi: usize, target: usize) {
        let z = self.zone_at(zi);
        loop {
            let mut pcp = self.pcp_of(zi, target).lock();
            let count = pcp.count;
            if count > 0 {
                let round = if self.drain_pages_zone_batch { pcp.batch } else { pcp.batch << S };
                let to_drain = count.min(round);
                self.free_pcppages_bulk(cpu, z, &mut pcp, to_drain, 0);
                trace::mmlab::pcp_state(target, self.m.trace_clock(), pcp.count, pcp.high, pcp.batch);
            }
            let left = pcp.count;
            drop(pcp);
            if count == 0 || left == 0 {
                break;
            }
        }
    }

    /// `drain_local_pages()` → `drain_pages()`: empty this CPU's pcp lists
    /// of every populated zone.
    pub fn drain_local_pages(&self, cpu: &Cpu<'m>) {
        if self.foreign(cpu) {
            return;
        }
        for zi in self.populated_zone_idx() {
            self.drain_pages_zone(cpu, zi, cpu.id());
        }
        self.after_op();
    }

    /// `drain_all_pages()`: empty every CPU's pcp lists of every populated
    /// zone. The kernel queues the work on each CPU; mmlab runs it on the
    /// calling CPU, taking each pcp's lock (simplified).
    pub fn drain_all_pages(&self, cpu: &Cpu<'m>) {
        if self.foreign(cpu) {
            return;
        }
        cpu.count(VmEvent::DrainAllPages, 1);
        for target in 0..self.nr_cpus {
            for zi in self.populated_zone_idx() {
                if self.pcp_of(zi, target).lock().count > 0 {
                    self.drain_pages_zone(cpu, zi, target);
                }
            }
        }
        self.after_op();
    }

    /// The indices of the populated zones, lowest first.
    pub(crate) fn populated_zone_idx(&self) -> impl Iterator<Item = usize> + '_ {
        (0..NR_ZONE_TYPES).filter(|&zi| self.zone_at(zi).is_populated())
    }

    /// `decay_pcp_high()` for each populated zone, run from the vmstat tick
    /// (`refresh_cpu_vm_stats`, once a second per CPU): lower `high` by an
    /// eighth (never below `high_min`) and drain what is above it, in chunks
    /// of `batch`. Returns true if there is more to do on the next tick.
    pub fn decay_pcp_high(&self, cpu: &Cpu<'m>) -> bool {
        if self.foreign(cpu) {
            return false;
        }
        let mut todo = false;
        for zi in self.populated_zone_idx() {
            todo |= self.decay_pcp_high_zone(cpu, zi);
        }
        self.after_op();
        todo
    }

    fn decay_pcp_high_zone(&self, cpu: &Cpu<'m>, zi: usize) -> bool {
        let mut todo = false;
        let mut pcp = self.pcp_of(zi, cpu.id()).lock();
        let (high_min, batch) = (pcp.high_min, pcp.batch);
        if pcp.high > high_min {
            pcp.high = (pcp.count - (batch << S)).max(pcp.high - (pcp.high >> 3)).max(high_min);
            todo |= pcp.high > high_min;
        }
        let mut to_drain = pcp.count - pcp.high;
        if to_drain > 0 {
            cpu.count(VmEvent::PcpDecayDrain, 1);
            todo = true;
        }
        while to_drain > 0 {
            let n = to_drain.min(batch.max(1));
            self.free_pcppages_bulk(cpu, self.zone_at(zi), &mut pcp, n, 0);
            to_drain -= n;
        }
        todo
    }
}
