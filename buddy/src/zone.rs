//! `struct zone` and the primitive free-list operations under its lock.

use mmlab_engine::kernel::lockstat::{StatEvents, StatGuard, StatMutex};
use mmlab_engine::mm::list::{ListArray, ZONE_LIST_HEADS_STRIDE, zone_list_heads};
use mmlab_engine::mm::page::{PageExt, StructPage};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::mm::{MIGRATE_TYPES, Migratetype, NR_PAGE_ORDERS, PAGEBLOCK_ORDER, ZoneType};
use mmlab_engine::{Cpu, Machine, Pfn};
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering::Relaxed};

/// `ALLOC_*` flags (mm/internal.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AllocFlags(pub u32);

impl AllocFlags {
    /// `ALLOC_WMARK_MIN`: check against the min watermark.
    pub const WMARK_MIN: AllocFlags = AllocFlags(0);
    /// `ALLOC_WMARK_LOW`: check against the low watermark.
    pub const WMARK_LOW: AllocFlags = AllocFlags(1);
    /// `ALLOC_WMARK_HIGH`: check against the high watermark.
    pub const WMARK_HIGH: AllocFlags = AllocFlags(2);
    /// `ALLOC_NO_WATERMARKS`: do not check watermarks at all.
    pub const NO_WATERMARKS: AllocFlags = AllocFlags(0x04);
    /// `ALLOC_WMARK_MASK`: the bits that hold the watermark index.
    pub const WMARK_MASK: u32 = 0x03;
    /// `ALLOC_OOM`: the OOM victim may dip into reserves.
    pub const OOM: AllocFlags = AllocFlags(0x08);
    /// `ALLOC_NON_BLOCK`: the caller cannot block; may use some reserves.
    pub const NON_BLOCK: AllocFlags = AllocFlags(0x10);
    /// `ALLOC_MIN_RESERVE`: may go below the min watermark (`__GFP_HIGH`).
    pub const MIN_RESERVE: AllocFlags = AllocFlags(0x20);
    /// `ALLOC_CPUSET`: check the cpuset (no effect here: one node).
    pub const CPUSET: AllocFlags = AllocFlags(0x40);
    /// `ALLOC_CMA`: may allocate from CMA areas (movable allocations,
    /// `gfp_to_alloc_flags_cma`).
    pub const CMA: AllocFlags = AllocFlags(0x80);
    /// `ALLOC_NOFRAGMENT`: avoid mixing migratetypes in a pageblock.
    pub const NOFRAGMENT: AllocFlags = AllocFlags(0x100);
    /// `ALLOC_HIGHATOMIC`: may use the highatomic reserve.
    pub const HIGHATOMIC: AllocFlags = AllocFlags(0x200);
    /// `ALLOC_TRYLOCK`: only trylock the zone lock (`alloc_pages_nolock`).
    pub const TRYLOCK: AllocFlags = AllocFlags(0x400);
    /// `ALLOC_KSWAPD`: allowed to wake kswapd.
    pub const KSWAPD: AllocFlags = AllocFlags(0x800);
    /// `ALLOC_RESERVES`: the flags that may go below min (not `ALLOC_NO_WATERMARKS`).
    pub const RESERVES: AllocFlags = AllocFlags(0x08 | 0x10 | 0x20 | 0x200);

    /// Whether any bit of `f` is set.
    #[inline]
    pub const fn has(self, f: AllocFlags) -> bool {
        self.0 & f.0 != 0
    }
    /// The watermark index (`alloc_flags & ALLOC_WMARK_MASK`).
    #[inline]
    pub const fn wmark(self) -> usize {
        (self.0 & Self::WMARK_MASK) as usize
    }
}

impl std::ops::BitOr for AllocFlags {
    type Output = AllocFlags;
    fn bitor(self, o: AllocFlags) -> AllocFlags {
        AllocFlags(self.0 | o.0)
    }
}
impl std::ops::BitOrAssign for AllocFlags {
    fn bitor_assign(&mut self, o: AllocFlags) {
        self.0 |= o.0
    }
}

/// `fpi_t` flags for freeing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Fpi(pub u32);
impl Fpi {
    /// `FPI_NONE`: no special handling.
    pub const NONE: Fpi = Fpi(0);
    /// `FPI_SKIP_REPORT_NOTIFY`: do not notify free page reporting.
    pub const SKIP_REPORT_NOTIFY: Fpi = Fpi(1 << 0);
    /// `FPI_TO_TAIL`: put the block at the tail of its free list.
    pub const TO_TAIL: Fpi = Fpi(1 << 1);
    /// `FPI_TRYLOCK`: only trylock the zone lock (`free_pages_nolock`).
    pub const TRYLOCK: Fpi = Fpi(1 << 2);
    /// Whether any bit of `f` is set.
    #[inline]
    pub const fn has(self, f: Fpi) -> bool {
        self.0 & f.0 != 0
    }
}

/// `zone->flags` bits (`enum zone_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ZoneFlag {
    /// `ZONE_BOOSTED_WATERMARK`: the watermark was boosted after a
    /// fragmenting fallback; kswapd should reclaim.
    BoostedWatermark = 0,
    /// `ZONE_RECLAIM_ACTIVE`: kswapd is reclaiming this zone.
    ReclaimActive = 1,
    /// `ZONE_BELOW_HIGH`: free pages fell below the high watermark; the
    /// pcp `high` shrinks.
    BelowHigh = 2,
}

/// State protected by `zone->lock`: the free areas.
#[derive(Debug)]
pub struct ZoneInner {
    /// `free_area[order].free_list[mt]` as list `order * MIGRATE_TYPES + mt`.
    pub(crate) lists: ListArray,
    /// `free_area[order].nr_free`: blocks of that order over all types.
    pub(crate) nr_free: [u64; NR_PAGE_ORDERS],
    /// `zone->nr_reserved_highatomic`.
    pub(crate) nr_reserved_highatomic: u64,
    /// `zone->nr_isolate_pageblock`: pageblocks isolated by
    /// `set_migratetype_isolate()` and not yet given back.
    pub(crate) nr_isolate_pageblock: u64,
}

/// The bits of a pageblock's flags that hold its migratetype
/// (`PAGEBLOCK_MIGRATETYPE_MASK`, include/linux/pageblock-flags.h).
pub(crate) const PAGEBLOCK_MIGRATETYPE_MASK: u8 = 0b111;
/// `BIT(PB_migrate_isolate)`: since Linux 6.16 isolation is a bit of its
/// own beside the migratetype, which it leaves as it was (bit 3 is
/// `PB_compact_skip`, not modelled).
pub(crate) const PB_MIGRATE_ISOLATE: u8 = 1 << 4;

/// The migratetype a pageblock's flags byte stands for, as
/// `get_pfnblock_migratetype()` reads it: ISOLATE when the isolate bit is
/// set, else the migratetype bits.
#[inline(always)]
pub(crate) const fn pfnblock_flags_migratetype(flags: u8) -> Migratetype {
    if flags & PB_MIGRATE_ISOLATE != 0 {
        Migratetype::Isolate
    } else {
        Migratetype::from_index((flags & PAGEBLOCK_MIGRATETYPE_MASK) as usize)
    }
}

const _: () = assert!(
    (NR_PAGE_ORDERS * MIGRATE_TYPES) as u64 * 16 <= ZONE_LIST_HEADS_STRIDE,
    "a zone's free-area heads fit in its part of the list-head window"
);

#[inline]
pub(crate) const fn fl(order: u32, mt: Migratetype) -> usize {
    order as usize * MIGRATE_TYPES + mt as usize
}

/// `struct zone`: one zone of node 0 (DMA, DMA32, Normal or Movable).
#[derive(Debug)]
pub struct Zone<'m> {
    pub(crate) m: &'m Machine,
    pub(crate) name: ZoneType,
    pub(crate) node: u32,
    pub(crate) zone_start_pfn: u64,
    pub(crate) spanned_pages: u64,
    pub(crate) present_pages: u64,
    pub(crate) managed_pages: AtomicU64,
    /// `_watermark[NR_WMARK]`.
    pub(crate) watermark: [AtomicU64; 4],
    pub(crate) watermark_boost: AtomicU64,
    pub(crate) flags: AtomicU64,
    /// `vm_stat[NR_FREE_PAGES]` (buddy pages only; pcp pages do not count).
    pub(crate) nr_free_pages: AtomicI64,
    /// `nr_free_highatomic`.
    pub(crate) nr_free_highatomic: AtomicI64,
    /// `NR_FREE_CMA_PAGES`: free pages in MIGRATE_CMA pageblocks.
    pub(crate) nr_free_cma: AtomicI64,
    /// `zone->cma_pages`: pages of CMA areas in this zone (zoneinfo `cma`).
    pub(crate) cma_pages: AtomicU64,
    /// `min_free_kbytes` the watermarks were computed from.
    pub(crate) min_free_kbytes: AtomicU64,
    pub(crate) lock: StatMutex<ZoneInner>,
    /// The pageblock bitmap (`zone->pageblock_flags` / the section usemap),
    /// the machine's, indexed from `pb_base_pfn`.
    pub(crate) pageblock_flags: &'m [AtomicU8],
    /// The frame the machine's pageblock bitmap starts at.
    pub(crate) pb_base_pfn: u64,
    /// `zone->lowmem_reserve[]`: pages this zone keeps back from an
    /// allocation whose highest zone is the index (the `protection:` row).
    pub(crate) lowmem_reserve: [AtomicU64; mmlab_engine::mm::zone_layout::NR_ZONE_TYPES],
}

impl<'m> Zone<'m> {
    /// An empty zone spanning all of the machine's RAM (`zone_init_free_lists`).
    pub fn new(m: &'m Machine) -> Zone<'m> {
        let mem = m.memmap();
        let inner = ZoneInner {
            lists: ListArray::new(mem, zone_list_heads(ZoneType::Normal), NR_PAGE_ORDERS * MIGRATE_TYPES),
            nr_free: [0; NR_PAGE_ORDERS],
            nr_reserved_highatomic: 0,
            nr_isolate_pageblock: 0,
        };
        let span = mmlab_engine::mm::zone_layout::ZoneSpan {
            zone: ZoneType::Normal,
            zone_start_pfn: mem.start_pfn().0,
            spanned_pages: mem.nr_pages(),
            present_pages: m.memblock().memory().iter().map(|r| r.size >> mmlab_engine::PAGE_SHIFT).sum(),
        };
        Zone::with_lists(m, span, inner)
    }

    /// The zone `span` describes, empty (`init_currently_empty_zone` +
    /// `zone_init_free_lists`), as `free_area_init_core` sets up each zone
    /// of the node. Its free-list heads get their own kernel addresses in
    /// the list-head window (`node_zones[]` is an array:
    /// [`zone_list_heads`]); Normal's are those of [`Zone::new`].
    pub fn from_span(m: &'m Machine, span: mmlab_engine::mm::zone_layout::ZoneSpan) -> Zone<'m> {
        let inner = ZoneInner {
            lists: ListArray::new(m.memmap(), zone_list_heads(span.zone), NR_PAGE_ORDERS * MIGRATE_TYPES),
            nr_free: [0; NR_PAGE_ORDERS],
            nr_reserved_highatomic: 0,
            nr_isolate_pageblock: 0,
        };
        Zone::with_lists(m, span, inner)
    }

    fn with_lists(m: &'m Machine, span: mmlab_engine::mm::zone_layout::ZoneSpan, inner: ZoneInner) -> Zone<'m> {
        Zone {
            m,
            name: span.zone,
            node: 0,
            zone_start_pfn: span.zone_start_pfn,
            spanned_pages: span.spanned_pages,
            present_pages: span.present_pages,
            managed_pages: AtomicU64::new(0),
            watermark: Default::default(),
            watermark_boost: AtomicU64::new(0),
            flags: AtomicU64::new(0),
            nr_free_pages: AtomicI64::new(0),
            nr_free_highatomic: AtomicI64::new(0),
            nr_free_cma: AtomicI64::new(0),
            cma_pages: AtomicU64::new(0),
            min_free_kbytes: AtomicU64::new(0),
            lock: StatMutex::new(
                inner,
                StatEvents {
                    acquire: VmEvent::ZoneLockAcquire,
                    contended: VmEvent::ZoneLockContended,
                    hold_ns: VmEvent::ZoneLockHoldNs,
                    acq_bounce: VmEvent::ZoneLockAcqBounce,
                    con_bounce: VmEvent::ZoneLockConBounce,
                },
            ),
            pageblock_flags: m.pageblock_flags(),
            pb_base_pfn: m.memmap().start_pfn().0,
            lowmem_reserve: Default::default(),
        }
    }

    /// The machine.
    #[inline]
    pub fn machine(&self) -> &'m Machine {
        self.m
    }
    /// Zone type (its name in /proc files).
    #[inline]
    pub fn zone_type(&self) -> ZoneType {
        self.name
    }
    /// Node id.
    pub fn node(&self) -> u32 {
        self.node
    }
    /// `zone->zone_start_pfn`.
    pub fn zone_start_pfn(&self) -> Pfn {
        Pfn(self.zone_start_pfn)
    }
    /// `zone_end_pfn()`.
    pub fn zone_end_pfn(&self) -> Pfn {
        Pfn(self.zone_start_pfn + self.spanned_pages)
    }
    /// `zone->spanned_pages`.
    pub fn spanned_pages(&self) -> u64 {
        self.spanned_pages
    }
    /// `zone->present_pages`.
    pub fn present_pages(&self) -> u64 {
        self.present_pages
    }
    /// `zone_managed_pages()`.
    #[inline]
    pub fn managed_pages(&self) -> u64 {
        self.managed_pages.load(Relaxed)
    }
    /// `adjust_managed_page_count()` (mm/page_alloc.c): `count` pages join
    /// (positive) or leave (negative) the pages this zone manages, as when a
    /// memblock reservation is handed to the allocator after boot
    /// (`free_reserved_page()`).
    pub fn adjust_managed_page_count(&self, count: i64) {
        self.managed_pages.fetch_add(count as u64, Relaxed);
    }
    /// `populated_zone()`: the zone has present pages.
    pub fn is_populated(&self) -> bool {
        self.present_pages != 0
    }
    /// `managed_zone()`: the zone has pages in the buddy allocator.
    pub fn is_managed(&self) -> bool {
        self.managed_pages() != 0
    }
    /// `zone->lowmem_reserve[]` (the /proc/zoneinfo `protection:` row).
    pub fn lowmem_reserve(&self) -> [u64; mmlab_engine::mm::zone_layout::NR_ZONE_TYPES] {
        std::array::from_fn(|i| self.lowmem_reserve[i].load(Relaxed))
    }
    /// Set `zone->lowmem_reserve[]` (`setup_per_zone_lowmem_reserve`).
    pub fn set_lowmem_reserve(&self, r: [u64; mmlab_engine::mm::zone_layout::NR_ZONE_TYPES]) {
        for (a, v) in self.lowmem_reserve.iter().zip(r) {
            a.store(v, Relaxed);
        }
    }
    /// `zone_page_state(zone, NR_FREE_PAGES)`.
    #[inline]
    pub fn nr_free_pages(&self) -> i64 {
        self.nr_free_pages.load(Relaxed)
    }
    /// Free pages in HIGHATOMIC pageblocks.
    #[inline]
    pub fn nr_free_highatomic(&self) -> i64 {
        self.nr_free_highatomic.load(Relaxed)
    }
    /// `zone_page_state(zone, NR_FREE_CMA_PAGES)`.
    #[inline]
    pub fn nr_free_cma(&self) -> i64 {
        self.nr_free_cma.load(Relaxed)
    }
    /// `zone->cma_pages`.
    pub fn cma_pages(&self) -> u64 {
        self.cma_pages.load(Relaxed)
    }
    /// `zone->cma_pages += nr` (`init_cma_reserved_pageblock`).
    pub fn add_cma_pages(&self, nr: u64) {
        self.cma_pages.fetch_add(nr, Relaxed);
    }
    /// `zone_spans_pfn()`.
    #[inline]
    pub fn spans(&self, pfn: Pfn) -> bool {
        pfn.0.wrapping_sub(self.zone_start_pfn) < self.spanned_pages
    }
    /// `test_bit(flag, &zone->flags)`.
    #[inline]
    pub fn test_flag(&self, f: ZoneFlag) -> bool {
        self.flags.load(Relaxed) & (1 << f as u32) != 0
    }
    /// `set_bit()`.
    #[inline]
    pub fn set_flag(&self, f: ZoneFlag) {
        self.flags.fetch_or(1 << f as u32, Relaxed);
    }
    /// `clear_bit()`.
    #[inline]
    pub fn clear_flag(&self, f: ZoneFlag) {
        self.flags.fetch_and(!(1 << f as u32), Relaxed);
    }

    /// The flags byte of `pfn`'s pageblock.
    #[inline(always)]
    fn pfnblock_flags(&self, pfn: Pfn) -> &AtomicU8 {
        &self.pageblock_flags[((pfn.0 - self.pb_base_pfn) >> PAGEBLOCK_ORDER) as usize]
    }
    /// `get_pfnblock_migratetype()`: MIGRATE_ISOLATE while the pageblock is
    /// isolated, else its migratetype.
    #[inline(always)]
    pub fn pageblock_migratetype(&self, pfn: Pfn) -> Migratetype {
        pfnblock_flags_migratetype(self.pfnblock_flags(pfn).load(Relaxed))
    }
    /// `__get_pfnblock_flags_mask(page, pfn, PAGEBLOCK_MIGRATETYPE_MASK)`:
    /// the pageblock's migratetype whether or not it is isolated (the type
    /// it returns to when isolation ends).
    #[inline]
    pub fn pageblock_migratetype_unisolated(&self, pfn: Pfn) -> Migratetype {
        Migratetype::from_index((self.pfnblock_flags(pfn).load(Relaxed) & PAGEBLOCK_MIGRATETYPE_MASK) as usize)
    }
    /// `get_pageblock_isolate()`: the pageblock's isolate bit.
    #[inline]
    pub fn get_pageblock_isolate(&self, pfn: Pfn) -> bool {
        self.pfnblock_flags(pfn).load(Relaxed) & PB_MIGRATE_ISOLATE != 0
    }
    /// `toggle_pageblock_isolate()` (mm/page_alloc.c): set
    /// (`set_pageblock_isolate()`) or clear (`clear_pageblock_isolate()`)
    /// the isolate bit alone; the migratetype bits stay. Under the zone lock.
    #[inline]
    pub(crate) fn toggle_pageblock_isolate(&self, pfn: Pfn, isolate: bool) {
        let f = self.pfnblock_flags(pfn);
        if isolate {
            f.fetch_or(PB_MIGRATE_ISOLATE, Relaxed);
        } else {
            f.fetch_and(!PB_MIGRATE_ISOLATE, Relaxed);
        }
    }
    /// `set_pageblock_migratetype()` (under the zone lock): the migratetype
    /// bits, clearing the isolate bit as the kernel's mask does. ISOLATE is
    /// not a type to set this way (the kernel warns and changes nothing):
    /// isolation goes through [`Zone::toggle_pageblock_isolate`].
    #[inline]
    pub(crate) fn set_pageblock_migratetype(&self, pfn: Pfn, mt: Migratetype) {
        if mt.is_isolate() {
            debug_assert!(false, "set_pageblock_migratetype(MIGRATE_ISOLATE): use toggle_pageblock_isolate");
            return;
        }
        self.pfnblock_flags(pfn).store(mt as u8, Relaxed);
    }
    /// The pageblock of `pfn` becomes MIGRATE_CMA, under the zone lock
    /// (`init_cma_reserved_pageblock`'s `set_pageblock_migratetype`). Its
    /// pages must not be on any free list.
    pub fn set_pageblock_cma(&self, cpu: &Cpu<'m>, pfn: Pfn) {
        let _z = self.lock(cpu);
        self.set_pageblock_migratetype(pfn, Migratetype::Cma);
    }
    /// Number of pageblocks of each type (the pagetypeinfo block counts).
    ///
    /// As `pagetypeinfo_showblockcount_print()`: a pageblock whose first
    /// frame has no struct page (a hole between RAM banks) is not counted.
    pub fn pageblock_counts(&self) -> [u64; MIGRATE_TYPES] {
        let mut c = [0; MIGRATE_TYPES];
        let first = ((self.zone_start_pfn - self.pb_base_pfn) >> PAGEBLOCK_ORDER) as usize;
        let last = (self.zone_end_pfn().0 - self.pb_base_pfn).div_ceil(1 << PAGEBLOCK_ORDER) as usize;
        let mem = self.m.memmap();
        for (i, b) in self.pageblock_flags[first..last.max(first)].iter().enumerate() {
            let pfn = Pfn(self.pb_base_pfn + (((first + i) as u64) << PAGEBLOCK_ORDER));
            if mem.pfn_valid(pfn.max(Pfn(self.zone_start_pfn))) {
                c[pfnblock_flags_migratetype(b.load(Relaxed)) as usize] += 1;
            }
        }
        c
    }

    /// `spin_lock_irqsave(&zone->lock)` on behalf of `cpu`.
    #[inline]
    pub fn lock<'a>(&'a self, cpu: &'a Cpu<'m>) -> LockedZone<'a, 'm> {
        LockedZone { zone: self, inner: self.lock.lock(cpu), cpu }
    }

    /// Free-area counts per order, taken under the lock (/proc/buddyinfo).
    pub fn nr_free_per_order(&self) -> [u64; NR_PAGE_ORDERS] {
        self.lock.lock_unaccounted().nr_free
    }
    /// Blocks on each (order, type) list (/proc/pagetypeinfo).
    pub fn nr_free_per_type(&self) -> [[u64; NR_PAGE_ORDERS]; MIGRATE_TYPES] {
        let z = self.lock.lock_unaccounted();
        std::array::from_fn(|mt| {
            std::array::from_fn(|o| z.lists.count(fl(o as u32, Migratetype::from_index(mt))) as u64)
        })
    }
    /// `zone->nr_reserved_highatomic`.
    pub fn nr_reserved_highatomic(&self) -> u64 {
        self.lock.lock_unaccounted().nr_reserved_highatomic
    }
    /// `zone->nr_isolate_pageblock`.
    pub fn nr_isolate_pageblock(&self) -> u64 {
        self.lock.lock_unaccounted().nr_isolate_pageblock
    }
    /// `zone_page_state(zone, NR_FREE_PAGES_BLOCKS)` (Linux 6.15): free
    /// pages in blocks of at least `pageblock_order`, those of isolated
    /// pageblocks left out as `__add_to_free_list()`,
    /// `__del_page_from_free_list()` and `move_to_free_list()` leave them
    /// out. Read from the lists under the lock, which gives the counter's
    /// value.
    pub fn nr_free_pages_blocks(&self) -> u64 {
        let z = self.lock.lock_unaccounted();
        (PAGEBLOCK_ORDER..=mmlab_engine::mm::MAX_PAGE_ORDER)
            .flat_map(|o| Migratetype::ALL.iter().filter(|mt| !mt.is_isolate()).map(move |&mt| (o, mt)))
            .map(|(o, mt)| (z.lists.count(fl(o, mt)) as u64) << o)
            .sum()
    }
}

/// The zone with its lock held by `cpu`; the buddy operations are methods.
#[derive(Debug)]
pub struct LockedZone<'a, 'm> {
    pub(crate) zone: &'a Zone<'m>,
    pub(crate) inner: StatGuard<'a, ZoneInner>,
    pub(crate) cpu: &'a Cpu<'m>,
}

impl Drop for LockedZone<'_, '_> {
    /// `spin_unlock_irqrestore(&zone->lock)`: the free counts per order as
    /// the lock is released, for timelines (mmlab's own gauge event).
    #[inline]
    fn drop(&mut self) {
        mmlab_engine::trace::mmlab::buddyinfo(self.cpu.id(), self.zone.m.trace_clock(), &self.inner.nr_free);
    }
}

impl<'a, 'm> LockedZone<'a, 'm> {
    /// The zone.
    #[inline]
    pub fn zone(&self) -> &'a Zone<'m> {
        self.zone
    }
    /// The CPU holding the lock.
    #[inline]
    pub fn cpu(&self) -> &'a Cpu<'m> {
        self.cpu
    }

    /// `account_freepages()`: free pages of an isolated pageblock count in
    /// no counter (the kernel returns before `NR_FREE_PAGES`), so that the
    /// watermarks never see pages nobody may allocate.
    #[inline(always)]
    pub(crate) fn account_freepages(&self, nr: i64, mt: Migratetype) {
        if mt.is_isolate() {
            return;
        }
        let z = self.zone;
        z.nr_free_pages.store(z.nr_free_pages.load(Relaxed) + nr, Relaxed);
        if mt.is_highatomic() {
            z.nr_free_highatomic.store(z.nr_free_highatomic.load(Relaxed) + nr, Relaxed);
        } else if mt.is_cma() {
            z.nr_free_cma.store(z.nr_free_cma.load(Relaxed) + nr, Relaxed);
        }
    }

    /// `__add_to_free_list()` + `set_buddy_order()`.
    #[inline(always)]
    pub(crate) fn add_to_free_list(&mut self, pfn: Pfn, order: u32, mt: Migratetype, tail: bool) {
        let p = self.zone.m.memmap().page(pfn);
        self.add_to_free_list_page(pfn, p, order, mt, tail);
    }

    /// [`add_to_free_list`](Self::add_to_free_list) with `pfn`'s struct
    /// page `p` looked up already.
    #[inline(always)]
    pub(crate) fn add_to_free_list_page(&mut self, pfn: Pfn, p: &StructPage, order: u32, mt: Migratetype, tail: bool) {
        let mem = self.zone.m.memmap();
        p.set_private(order as u64);
        p.set_buddy();
        p.set_ext(PageExt::Buddy(order as u8));
        let i = fl(order, mt);
        if tail {
            self.inner.lists.add_tail_page(mem, i, pfn, p);
        } else {
            self.inner.lists.add_page(mem, i, pfn, p);
        }
        self.inner.nr_free[order as usize] += 1;
    }

    /// `__del_page_from_free_list()`: unlink, clear PageBuddy and the order.
    #[inline(always)]
    pub(crate) fn del_from_free_list_raw(&mut self, pfn: Pfn, order: u32, mt: Migratetype) {
        let mem = self.zone.m.memmap();
        self.inner.lists.del(mem, fl(order, mt), pfn);
        let p = mem.page(pfn);
        p.clear_buddy();
        p.set_private(0);
        p.set_ext(PageExt::Tail);
        self.inner.nr_free[order as usize] -= 1;
    }

    /// `del_page_from_free_list()`.
    #[inline]
    pub(crate) fn del_page_from_free_list(&mut self, pfn: Pfn, order: u32, mt: Migratetype) {
        self.del_from_free_list_raw(pfn, order, mt);
        self.account_freepages(-(1 << order), mt);
    }

    /// `move_to_free_list()`: to the tail of another type's list.
    pub(crate) fn move_to_free_list(&mut self, pfn: Pfn, order: u32, old: Migratetype, new: Migratetype) {
        let mem = self.zone.m.memmap();
        self.inner.lists.move_tail(mem, fl(order, old), fl(order, new), pfn);
        self.account_freepages(-(1 << order), old);
        self.account_freepages(1 << order, new);
    }

    /// `get_page_from_free_area()`: the head entry of a list.
    #[inline(always)]
    pub(crate) fn first_free(&self, order: u32, mt: Migratetype) -> Option<Pfn> {
        self.inner.lists.first(fl(order, mt))
    }

    /// `free_area_empty()`.
    #[inline(always)]
    pub(crate) fn free_area_empty(&self, order: u32, mt: Migratetype) -> bool {
        self.inner.lists.list_is_empty(fl(order, mt))
    }

    /// `PageBuddy(page) && buddy_order(page) == order` for a frame in the zone.
    #[inline(always)]
    pub(crate) fn is_free_block(&self, pfn: Pfn, order: u32) -> bool {
        if !self.zone.spans(pfn) {
            return false;
        }
        let p = self.zone.m.page(pfn);
        p.is_buddy() && p.private() == order as u64
    }

    /// `zone->nr_reserved_highatomic`.
    pub fn nr_reserved_highatomic(&self) -> u64 {
        self.inner.nr_reserved_highatomic
    }
}
