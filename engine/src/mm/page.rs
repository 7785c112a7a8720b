//! `struct page`: the 64-byte record the kernel keeps for every page frame.
//!
//! The records form the memmap, an array in emulated RAM indexed by PFN, and
//! mmlab lays them out field for field as a 64-bit kernel does:
//!
//! | offset | kernel field                         | here                         |
//! |-------:|--------------------------------------|------------------------------|
//! |      0 | `flags` (PG_* bits, node, zone)      | [`StructPage::flags`]        |
//! |      8 | `lru.next` / `buddy_list` / `pcp_list` | list link (a kernel VA)    |
//! |     16 | `lru.prev`                           | list link (a kernel VA)      |
//! |     24 | `mapping`                            | unused so far                |
//! |     32 | `index`                              | unused so far                |
//! |     40 | `private` (buddy order)              | [`StructPage::private`]      |
//! |     48 | `_mapcount` / `page_type`            | [`StructPage::page_type`]    |
//! |     52 | `_refcount`                          | [`StructPage::refcount`]     |
//! |     56 | `memcg_data`                         | page_ext state (instrumented)|
//!
//! Every field is an atomic accessed with relaxed ordering: the kernel reads
//! and writes struct pages with plain accesses under the zone or pcp lock, and
//! the locks give the ordering. Relaxed atomics compile to the same loads and
//! stores while keeping shared access sound in Rust.
//!
//! **Instrumented:** the last word (where a kernel with memcg keeps
//! `memcg_data`; mmlab has no memcg) holds a [`PageExt`] state such as the
//! kernel's `page_owner` keeps in `page_ext`: which of the allocator's states
//! the frame is in and at which order. The allocator checks it to turn a
//! double free, a free of a tail page or a free with the wrong order into an
//! error, and the invariant checker cross-checks it against the kernel fields.
//!
//! The states of a frame, as the allocator moves it:
//!
//! | state       | set by                          | kernel fields                                  |
//! |-------------|---------------------------------|------------------------------------------------|
//! | `Reserved`  | memblock reservation at boot    | PG_reserved, refcount 1                        |
//! | `Buddy(o)`  | `__free_one_page`, `expand`     | page_type = PGTY_buddy, private = o, ref 0     |
//! | `Pcp(o)`    | free to / refill of a pcp list  | page_type none, ref 0, on a pcp list           |
//! | `Alloc(o,t)`| `prep_new_page`                 | ref 1                                          |
//! | `Tail`      | any page that is not a head     | whatever the head's block left                 |
//!
//! All access to struct pages goes through [`Memmap::page`]; a later layer
//! routes it through the vmemmap mapping without touching callers.

use crate::addr::Pfn;
use crate::mm::Migratetype;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Page flag bits (`enum pageflags`, include/linux/page-flags.h, Linux 6.12).
pub mod pg {
    /// `PG_locked`: the page is locked for I/O.
    pub const PG_LOCKED: u32 = 0;
    /// `PG_referenced`: recently accessed (LRU aging).
    pub const PG_REFERENCED: u32 = 2;
    /// `PG_uptodate`: the contents are valid.
    pub const PG_UPTODATE: u32 = 3;
    /// `PG_dirty`: must be written back.
    pub const PG_DIRTY: u32 = 4;
    /// `PG_lru`: on an LRU list.
    pub const PG_LRU: u32 = 5;
    /// `PG_head`: head page of a compound page.
    pub const PG_HEAD: u32 = 6;
    /// `PG_active`: on the active LRU list.
    pub const PG_ACTIVE: u32 = 8;
    /// `PG_reserved`: never handed to the page allocator (memblock reservations).
    pub const PG_RESERVED: u32 = 13;
    /// `PG_private`: `private` holds filesystem data.
    pub const PG_PRIVATE: u32 = 14;
}

/// `enum pagetype` values, kept in the top byte of `page_type`.
pub const PGTY_BUDDY: u32 = 0xf0;
/// `page_type` of a page without a type (reads as `_mapcount == -1`).
pub const PAGE_TYPE_NONE: u32 = u32::MAX;

/// Width and position of the zone and node numbers in `flags`, as
/// `ZONES_PGSHIFT`/`NODES_PGSHIFT` place them at the top of the word.
pub const ZONES_WIDTH: u32 = 2;
/// `ZONES_PGSHIFT`: the zone number sits in the top `ZONES_WIDTH` bits.
pub const ZONES_PGSHIFT: u32 = 64 - ZONES_WIDTH;
/// `NODES_WIDTH`: bits of the node number.
pub const NODES_WIDTH: u32 = 6;
/// `NODES_PGSHIFT`: the node number sits just below the zone number.
pub const NODES_PGSHIFT: u32 = ZONES_PGSHIFT - NODES_WIDTH;

/// The allocator state of a frame (instrumented; see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageExt {
    /// A tail page of a buddy block, pcp block or allocation (state kept at the head).
    Tail,
    /// Reserved (`PG_reserved`): never in the allocator.
    Reserved,
    /// Head of a free buddy block of this order.
    Buddy(u8),
    /// Head of a block of this order on a pcp list.
    Pcp(u8),
    /// Allocated at this order, with the migratetype of its gfp (page_owner
    /// records the gfp; fallbacks use it as PageLRU/__PageMovable).
    Alloc(u8, Migratetype),
}

impl PageExt {
    #[inline(always)]
    const fn encode(self) -> u64 {
        match self {
            PageExt::Tail => 0,
            PageExt::Reserved => 1,
            PageExt::Buddy(o) => 2 | (o as u64) << 8,
            PageExt::Pcp(o) => 3 | (o as u64) << 8,
            PageExt::Alloc(o, mt) => 4 | (o as u64) << 8 | (mt as u64) << 16,
        }
    }
    #[inline(always)]
    const fn decode(v: u64) -> PageExt {
        let o = (v >> 8) as u8;
        match v & 0xff {
            1 => PageExt::Reserved,
            2 => PageExt::Buddy(o),
            3 => PageExt::Pcp(o),
            4 => PageExt::Alloc(o, Migratetype::from_index((v >> 16) as usize & 0xff)),
            _ => PageExt::Tail,
        }
    }
}

/// One `struct page`. See the module documentation for the layout.
#[repr(C)]
#[derive(Debug)]
pub struct StructPage {
    flags: AtomicU64,
    lru_next: AtomicU64,
    lru_prev: AtomicU64,
    mapping: AtomicU64,
    index: AtomicU64,
    private: AtomicU64,
    page_type: AtomicU32,
    refcount: AtomicI32,
    ext: AtomicU64,
}

const _: () = assert!(size_of::<StructPage>() == 64);
/// `sizeof(struct page)`.
pub const STRUCT_PAGE_SIZE: u64 = 64;
/// Offset of `lru` inside struct page: list links point here.
pub const LRU_OFFSET: u64 = 8;

// SAFETY: StructPage is repr(C), made only of atomics (valid for any bit
// pattern, sound to mutate through &), 64 bytes with alignment 8.
unsafe impl crate::arena::ArenaPod for StructPage {}

impl StructPage {
    /// `page->flags`.
    #[inline]
    pub fn flags(&self) -> u64 {
        self.flags.load(Relaxed)
    }
    /// Set `page->flags` (one store).
    #[inline]
    pub fn set_flags(&self, v: u64) {
        self.flags.store(v, Relaxed)
    }
    /// `test_bit(PG_x, &page->flags)`.
    #[inline]
    pub fn test_flag(&self, bit: u32) -> bool {
        self.flags() & (1 << bit) != 0
    }
    /// `__SetPageX`: non-atomic set (the page is owned by the caller).
    #[inline]
    pub fn set_flag(&self, bit: u32) {
        self.set_flags(self.flags() | 1 << bit)
    }
    /// `__ClearPageX`.
    #[inline]
    pub fn clear_flag(&self, bit: u32) {
        self.set_flags(self.flags() & !(1 << bit))
    }
    /// `page_zonenum()`.
    #[inline]
    pub fn zonenum(&self) -> u32 {
        (self.flags() >> ZONES_PGSHIFT) as u32
    }
    /// `page_to_nid()`.
    #[inline]
    pub fn nid(&self) -> u32 {
        ((self.flags() >> NODES_PGSHIFT) & ((1 << NODES_WIDTH) - 1)) as u32
    }
    /// `page->lru.next` (a vmemmap VA of a `list_head`).
    #[inline]
    pub fn lru_next(&self) -> u64 {
        self.lru_next.load(Relaxed)
    }
    /// `page->lru.prev`.
    #[inline]
    pub fn lru_prev(&self) -> u64 {
        self.lru_prev.load(Relaxed)
    }
    /// Set `page->lru.next`.
    #[inline]
    pub fn set_lru_next(&self, v: u64) {
        self.lru_next.store(v, Relaxed)
    }
    /// Set `page->lru.prev`.
    #[inline]
    pub fn set_lru_prev(&self, v: u64) {
        self.lru_prev.store(v, Relaxed)
    }
    /// `page->mapping`.
    #[inline]
    pub fn mapping(&self) -> u64 {
        self.mapping.load(Relaxed)
    }
    /// Set `page->mapping`.
    #[inline]
    pub fn set_mapping(&self, v: u64) {
        self.mapping.store(v, Relaxed)
    }
    /// `page->index`.
    #[inline]
    pub fn index(&self) -> u64 {
        self.index.load(Relaxed)
    }
    /// Set `page->index`.
    #[inline]
    pub fn set_index(&self, v: u64) {
        self.index.store(v, Relaxed)
    }
    /// `page_private()`; the buddy order of a free block's head.
    #[inline]
    pub fn private(&self) -> u64 {
        self.private.load(Relaxed)
    }
    /// `set_page_private()`.
    #[inline]
    pub fn set_private(&self, v: u64) {
        self.private.store(v, Relaxed)
    }
    /// `page->page_type` (the type in its top byte, see [`PGTY_BUDDY`]).
    #[inline]
    pub fn page_type(&self) -> u32 {
        self.page_type.load(Relaxed)
    }
    /// Set `page->page_type`.
    #[inline]
    pub fn set_page_type(&self, v: u32) {
        self.page_type.store(v, Relaxed)
    }
    /// `PageBuddy()`.
    #[inline]
    pub fn is_buddy(&self) -> bool {
        self.page_type() >> 24 == PGTY_BUDDY
    }
    /// `__SetPageBuddy()`.
    #[inline]
    pub fn set_buddy(&self) {
        self.set_page_type(PGTY_BUDDY << 24)
    }
    /// `__ClearPageBuddy()`.
    #[inline]
    pub fn clear_buddy(&self) {
        self.set_page_type(PAGE_TYPE_NONE)
    }
    /// `page_count()`.
    #[inline]
    pub fn refcount(&self) -> i32 {
        self.refcount.load(Relaxed)
    }
    /// `set_page_count()`.
    #[inline]
    pub fn set_refcount(&self, v: i32) {
        self.refcount.store(v, Relaxed)
    }
    /// `page_ref_inc()`.
    #[inline]
    pub fn ref_inc(&self) -> i32 {
        self.refcount.fetch_add(1, Relaxed) + 1
    }
    /// `put_page_testzero()`: drop a reference, true if it was the last.
    ///
    /// The kernel's version is a plain `atomic_dec_and_test` behind a
    /// `VM_BUG_ON_PAGE(page_ref_count(page) == 0)`; here the check and the
    /// decrement are one compare-and-swap, so of two CPUs that race to free
    /// a page holding its last reference exactly one wins, and the other
    /// gets `None` with the count left at 0 (never -1).
    #[inline]
    pub fn put_testzero(&self) -> Option<bool> {
        self.refcount.fetch_update(Relaxed, Relaxed, |r| (r > 0).then(|| r - 1)).ok().map(|old| old == 1)
    }
    /// The instrumented allocator state.
    #[inline]
    pub fn ext(&self) -> PageExt {
        PageExt::decode(self.ext.load(Relaxed))
    }
    /// Set the instrumented allocator state.
    #[inline]
    pub fn set_ext(&self, s: PageExt) {
        self.ext.store(s.encode(), Relaxed)
    }
    /// The raw 64 bytes, as a memory dump shows them.
    pub fn raw(&self) -> [u64; 8] {
        [
            self.flags(),
            self.lru_next(),
            self.lru_prev(),
            self.mapping(),
            self.index(),
            self.private(),
            (self.refcount() as u32 as u64) << 32 | self.page_type() as u64,
            self.ext.load(Relaxed),
        ]
    }
}

/// The memmap: the struct pages of every frame of RAM, and the one accessor
/// through which all of mmlab reaches them.
///
/// Struct pages are reached the way the kernel reaches them: at their
/// vmemmap virtual address, translated by the kernel's tables. The
/// translation of each 4 KiB vmemmap page is kept in a shadow array of host
/// addresses (a soft-MMU cache dedicated to the vmemmap), rebuilt from the
/// tables whenever a TLBI covers vmemmap addresses
/// ([`crate::Machine::vmemmap_sync`]). So after a remap and its TLB flush,
/// struct-page reads and writes go wherever the tables now say, exactly
/// like the kernel's; before the flush they still go to the old page, as a
/// stale TLB entry would send them.
#[derive(Debug)]
pub struct Memmap {
    start_pfn: u64,
    nr_pages: u64,
    vmemmap_pfn0: u64,
    /// Host address backing each 4 KiB vmemmap page (64 struct pages), or 0
    /// if no translation is cached (then the next access walks the tables).
    shadow: Box<[AtomicUsize]>,
    /// RAM, for refills: host address, physical base and length.
    arena_host: usize,
    arena_pa: u64,
    arena_len: u64,
    /// `swapper_pg_dir`, once the vmemmap is mapped (0 before).
    pgd: AtomicU64,
    /// Host address of the memmap as memblock laid it out.
    linear: usize,
    /// True while every cached vmemmap translation is the boot one (the
    /// memmap read in place): no vmemmap TLBI has dropped anything since
    /// boot. Then an access needs no shadow lookup; the first TLBI of a
    /// changed vmemmap clears it for good.
    boot_layout: std::sync::atomic::AtomicBool,
}

/// Struct pages per 4 KiB vmemmap page.
pub const PAGES_PER_VMEMMAP_PAGE: u64 = 4096 / STRUCT_PAGE_SIZE;

// SAFETY: Memmap is a view of `[StructPage]` in the arena, which the owning
// Machine keeps mapped for Memmap's whole life; StructPage is Sync (atomics),
// so the view may be shared and sent between threads like `&[StructPage]`.
unsafe impl Send for Memmap {}
// SAFETY: see Send.
unsafe impl Sync for Memmap {}

impl Memmap {
    /// Build the accessor over `pages`, which describe frames from `start_pfn`.
    ///
    /// # Safety
    ///
    /// `pages` must lie in `arena`, and the arena must stay mapped (not
    /// moved) for the whole life of the returned Memmap. The Machine
    /// guarantees this by owning both and dropping the Memmap first.
    pub unsafe fn new(pages: &[StructPage], start_pfn: Pfn, arena: &crate::arena::Arena) -> Memmap {
        let base: NonNull<StructPage> = NonNull::from(pages).cast();
        let shadow = (0..(pages.len() as u64).div_ceil(PAGES_PER_VMEMMAP_PAGE))
            .map(|i| AtomicUsize::new(base.as_ptr() as usize + (i * 4096) as usize))
            .collect();
        let arena_host = arena.host_addr(arena.base(), arena.size()).expect("the arena covers itself");
        Memmap {
            shadow,
            linear: base.as_ptr() as usize,
            boot_layout: std::sync::atomic::AtomicBool::new(true),
            arena_host,
            arena_pa: arena.base().0,
            arena_len: arena.size(),
            pgd: AtomicU64::new(0),
            start_pfn: start_pfn.0,
            nr_pages: pages.len() as u64,
            vmemmap_pfn0: ((start_pfn.0 << crate::addr::PAGE_SHIFT) & !(crate::layout::ARM64_MEMSTART_ALIGN - 1))
                >> crate::addr::PAGE_SHIFT,
        }
    }

    /// The frame that `vmemmap[0]` describes: `memstart_addr >> PAGE_SHIFT`.
    #[inline]
    pub fn vmemmap_pfn0(&self) -> u64 {
        self.vmemmap_pfn0
    }

    /// Virtual address of `pfn`'s struct page in the vmemmap window
    /// (`pfn_to_page()` as a kernel pointer; what `page=%p` prints).
    #[inline]
    pub fn page_va(&self, pfn: Pfn) -> u64 {
        crate::layout::VMEMMAP_START + (pfn.0 - self.vmemmap_pfn0) * STRUCT_PAGE_SIZE
    }

    /// `pfn_to_page()`: the struct page of `pfn`.
    ///
    /// Panics on a PFN outside RAM: every caller validates user-supplied
    /// frame numbers with [`Memmap::pfn_valid`] first.
    #[inline(always)]
    pub fn page(&self, pfn: Pfn) -> &StructPage {
        let idx = pfn.0.wrapping_sub(self.start_pfn);
        assert!(idx < self.nr_pages, "pfn {pfn} outside the memmap");
        self.page_at(idx)
    }

    /// The struct page at memmap index `idx` (< nr_pages), through the
    /// vmemmap translation.
    #[inline(always)]
    fn page_at(&self, idx: u64) -> &StructPage {
        debug_assert!(idx < self.nr_pages);
        if self.boot_layout.load(Relaxed) {
            // SAFETY: with the boot layout every vmemmap page maps the memmap
            // in place, so struct page idx (< nr_pages) is at linear + idx *
            // 64, inside the slice given to `new` (valid for self's life).
            return unsafe { &*((self.linear + (idx * STRUCT_PAGE_SIZE) as usize) as *const StructPage) };
        }
        // SAFETY: callers pass idx < nr_pages, and the shadow has
        // ceil(nr_pages / 64) entries, so idx / 64 is in bounds.
        let mut host = unsafe { self.shadow.get_unchecked((idx / PAGES_PER_VMEMMAP_PAGE) as usize) }.load(Relaxed);
        if host == 0 {
            host = self.refill(idx);
        }
        // SAFETY: a non-zero shadow entry is the host address of a 4 KiB,
        // page-aligned piece of the arena (set by `new` from the memmap slice,
        // by `refill` or `set_backing` from a validated arena range); the arena lives
        // as long as self (constructor contract), and the offset of this
        // struct page inside the piece is below 4096 - 64. StructPage is
        // made of atomics, so aliasing (two vmemmap pages backed by one
        // physical page) is sound.
        unsafe { &*((host + ((idx % PAGES_PER_VMEMMAP_PAGE) * STRUCT_PAGE_SIZE) as usize) as *const StructPage) }
    }

    /// A vmemmap translation miss: walk the kernel tables for the vmemmap
    /// page holding struct page `idx` and cache the result. An unmapped
    /// vmemmap address is the kernel's "unable to handle kernel paging
    /// request": a bug in whoever unmapped it, so it panics.
    #[cold]
    #[inline(never)]
    fn refill(&self, idx: u64) -> usize {
        let va = crate::layout::VMEMMAP_START + (idx + self.start_pfn - self.vmemmap_pfn0) * STRUCT_PAGE_SIZE;
        let va = va & !(4096 - 1);
        let pgd = self.pgd.load(Relaxed);
        assert!(pgd != 0, "struct page access through the vmemmap before it is mapped");
        let leaf = crate::pgtable::walk_with(|pa| self.read_phys_u64(pa.0), crate::addr::PhysAddr(pgd), va, |_| {});
        let host = leaf
            .and_then(|l| l.pa.0.checked_sub(self.arena_pa).filter(|off| off + 4096 <= self.arena_len))
            .map(|off| self.arena_host + off as usize);
        let Some(host) = host else {
            panic!("Unable to handle kernel paging request at virtual address {va:#018x} (struct page {idx})");
        };
        self.shadow[(idx / PAGES_PER_VMEMMAP_PAGE) as usize].store(host, Relaxed);
        host
    }

    /// Read a u64 of RAM (a descriptor) for a refill walk; 0 (invalid)
    /// outside RAM.
    fn read_phys_u64(&self, pa: u64) -> u64 {
        match pa.checked_sub(self.arena_pa) {
            Some(off) if off % 8 == 0 && off + 8 <= self.arena_len => {
                // SAFETY: [off, off + 8) is inside the arena (checked), which
                // stays mapped for the life of self (constructor contract);
                // the address is 8-byte aligned; arena words are only ever
                // accessed as atomics.
                unsafe { &*((self.arena_host + off as usize) as *const AtomicU64) }.load(Relaxed)
            }
            _ => 0,
        }
    }

    /// Start translating through the tables rooted at `pgd`.
    pub(crate) fn set_pgd(&self, pgd: crate::addr::PhysAddr) {
        self.pgd.store(pgd.0, Relaxed);
    }

    /// Drop the cached translations of vmemmap pages `[first, last]`.
    pub(crate) fn invalidate(&self, first: usize, last: usize) {
        self.boot_layout.store(false, Relaxed);
        for s in &self.shadow[first.min(self.shadow.len())..(last + 1).min(self.shadow.len())] {
            s.store(0, Relaxed);
        }
    }

    /// Number of 4 KiB vmemmap pages the memmap spans.
    pub fn vmemmap_pages(&self) -> usize {
        self.shadow.len()
    }

    /// Virtual address of vmemmap page `i` of this memmap.
    pub fn vmemmap_page_va(&self, i: usize) -> u64 {
        self.page_va(Pfn(self.start_pfn + i as u64 * PAGES_PER_VMEMMAP_PAGE))
    }

    /// Point vmemmap page `i` at `host` (0: unmapped).
    pub(crate) fn set_backing(&self, i: usize, host: usize) {
        if host != self.linear + i * 4096 {
            self.boot_layout.store(false, Relaxed);
        }
        self.shadow[i].store(host, Relaxed);
    }

    /// The struct page whose `lru` field lives at kernel address `va`, or
    /// None if `va` is not inside the vmemmap (a list head). One range check
    /// and one bounds check: the list code's hot path.
    #[inline(always)]
    pub fn page_by_lru_va(&self, va: u64) -> Option<&StructPage> {
        let off = va.wrapping_sub(crate::layout::VMEMMAP_START + LRU_OFFSET);
        if off >= crate::layout::VMEMMAP_SIZE {
            return None;
        }
        let idx = (off / STRUCT_PAGE_SIZE).wrapping_add(self.vmemmap_pfn0).wrapping_sub(self.start_pfn);
        assert!(idx < self.nr_pages, "list link {va:#x} outside the memmap");
        Some(self.page_at(idx))
    }

    /// `page_fixed_fake_head()` (include/linux/page-flags.h): the frame
    /// whose struct page `pfn`'s really is. After the hugetlb vmemmap
    /// optimisation remaps a folio's tail vmemmap pages onto its head page,
    /// the first struct page of each such vmemmap page reads as a copy of
    /// the head (`PG_head` set): a "fake head". It is told apart from a real
    /// head by the struct page after it, which then reads as a tail whose
    /// `compound_head` (the `lru.next` word, bit 0 set) names the real head.
    /// Any other page is returned unchanged.
    pub fn page_fixed_fake_head(&self, pfn: Pfn) -> Pfn {
        let next = Pfn(pfn.0 + 1);
        if !self.page_va(pfn).is_multiple_of(4096) || !self.pfn_valid(next) || !self.page(pfn).test_flag(pg::PG_HEAD) {
            return pfn;
        }
        let head = self.page(next).lru_next();
        if head & 1 == 0 {
            return pfn;
        }
        let va = head - 1;
        match va.checked_sub(crate::layout::VMEMMAP_START) {
            Some(off) if off.is_multiple_of(STRUCT_PAGE_SIZE) => Pfn(off / STRUCT_PAGE_SIZE + self.vmemmap_pfn0),
            _ => pfn,
        }
    }

    /// `pfn_valid()`.
    #[inline]
    pub fn pfn_valid(&self, pfn: Pfn) -> bool {
        pfn.0.wrapping_sub(self.start_pfn) < self.nr_pages
    }
    /// First frame of RAM.
    pub fn start_pfn(&self) -> Pfn {
        Pfn(self.start_pfn)
    }
    /// One past the last frame of RAM.
    pub fn end_pfn(&self) -> Pfn {
        Pfn(self.start_pfn + self.nr_pages)
    }
    /// Number of frames.
    pub fn nr_pages(&self) -> u64 {
        self.nr_pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_round_trip() {
        for s in [
            PageExt::Tail,
            PageExt::Reserved,
            PageExt::Buddy(10),
            PageExt::Pcp(3),
            PageExt::Alloc(9, Migratetype::Reclaimable),
        ] {
            assert_eq!(PageExt::decode(s.encode()), s);
        }
    }

    #[test]
    fn field_offsets_match_the_kernel() {
        let p: StructPage = StructPage {
            flags: AtomicU64::new(0),
            lru_next: AtomicU64::new(0),
            lru_prev: AtomicU64::new(0),
            mapping: AtomicU64::new(0),
            index: AtomicU64::new(0),
            private: AtomicU64::new(0),
            page_type: AtomicU32::new(0),
            refcount: AtomicI32::new(0),
            ext: AtomicU64::new(0),
        };
        let base = &p as *const _ as usize;
        assert_eq!(&p.lru_next as *const _ as usize - base, LRU_OFFSET as usize);
        assert_eq!(&p.private as *const _ as usize - base, 40);
        assert_eq!(&p.page_type as *const _ as usize - base, 48);
        assert_eq!(&p.refcount as *const _ as usize - base, 52);
        p.set_buddy();
        assert!(p.is_buddy());
        p.clear_buddy();
        assert!(!p.is_buddy());
        assert_eq!(p.page_type() as i32, -1, "no type reads as _mapcount -1");
    }
}
