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
//! All access to struct pages goes through [`Memmap::page`](crate::mm::memmap::Memmap::page); a later layer
//! routes it through the vmemmap mapping without touching callers.

use crate::mm::Migratetype;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

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
// arm64 sizes the vmemmap by `STRUCT_PAGE_MAX_SHIFT`.
const _: () = assert!(STRUCT_PAGE_SIZE == 1 << crate::arch::arm64::memory::STRUCT_PAGE_MAX_SHIFT);
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
        crate::sync::sched_point();
        #[cfg(shuttle)]
        if crate::sync::sched::reverted(crate::sync::sched::Revert::PutTestzeroDecrement) {
            return Some(self.refcount.fetch_sub(1, Relaxed) == 1);
        }
        self.refcount.fetch_update(Relaxed, Relaxed, |r| (r > 0).then(|| r - 1)).ok().map(|old| old == 1)
    }
    /// The instrumented allocator state.
    #[inline]
    pub fn ext(&self) -> PageExt {
        crate::sync::sched_point();
        PageExt::decode(self.ext.load(Relaxed))
    }
    /// Set the instrumented allocator state.
    #[inline]
    pub fn set_ext(&self, s: PageExt) {
        crate::sync::sched_point();
        self.ext.store(s.encode(), Relaxed)
    }
    /// Mirrors mm/mm_init.c `__init_single_page()`: `flags` (zone and node),
    /// the refcount, no mapcount or type, an empty `lru` (its own kernel
    /// address `lru`), everything else zero.
    pub fn init_single(&self, flags: u64, refcount: i32, lru: u64) {
        self.flags.store(flags, Relaxed);
        self.lru_prev.store(lru, Relaxed);
        self.mapping.store(0, Relaxed);
        self.index.store(0, Relaxed);
        self.private.store(0, Relaxed);
        self.page_type.store(PAGE_TYPE_NONE, Relaxed);
        self.refcount.store(refcount, Relaxed);
        self.ext.store(0, Relaxed);
        // Last, and a release: a reader that sees it non-zero through
        // `initialised_hint` sees the fields above.
        self.lru_next.store(lru, Release);
    }
    /// Whether this struct page has been written since its memory was
    /// zero: `lru.next` is never 0 once `init_single` ran (it points at
    /// the page itself, at a list or at `LIST_POISON1`). A hint for the
    /// memmap's in-place fast path, which falls back to the checked path
    /// when it is 0.
    #[inline(always)]
    pub(crate) fn initialised_hint(&self) -> bool {
        self.lru_next.load(Acquire) != 0
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
