//! The memmap: the struct pages of every frame of RAM, reached through the
//! vmemmap, and initialised lazily as the kernel's deferred struct page
//! init (`CONFIG_DEFERRED_STRUCT_PAGE_INIT`) does it in bulk.
//!
//! # Layout (sparse vmemmap)
//!
//! The vmemmap is one virtual array indexed by PFN; only the 128 MiB
//! sections that hold RAM have struct pages behind them (`present`
//! sections, `SPARSEMEM_VMEMMAP`). memblock holds those struct pages in one
//! buffer, the present sections' pieces one after the other (as
//! `sparse_buffer_init()` takes one buffer per node). A section that RAM
//! fills only partly still has all its struct pages; those of the hole are
//! reserved (`init_unavailable_range()`). A section with no RAM has none:
//! [`Memmap::pfn_valid`] is false there, and touching its struct page is the
//! kernel's "Unable to handle kernel paging request".
//!
//! # Deferred struct page init
//!
//! With `CONFIG_DEFERRED_STRUCT_PAGE_INIT`, `memmap_init()` initialises the
//! struct pages of the first section of the zone only (`defer_init()` stops
//! at the first section boundary after `PAGES_PER_SECTION` pages:
//! `pgdat->first_deferred_pfn`) and those of reserved memory
//! (`reserve_bootmem_region()` → `init_deferred_page()`);
//! `memblock_free_all()` frees only initialised pages. Later
//! `page_alloc_init_late()` → `deferred_init_memmap()` initialises the rest
//! (`__init_single_page()`: zone and node in `flags`, refcount 1, no type,
//! an empty `lru`) and frees it into the buddy allocator
//! (`__free_pages_core()`: refcount 0, then the buddy).
//!
//! mmlab does the same work in the same order for everything the buddy
//! allocator sees (the free calls, the heads they write), but writes a
//! deferred struct page only when something first touches it: each 4 KiB
//! vmemmap page (64 struct pages) starts *uninitialised* (its cached
//! translation is empty), and the first access to any of its struct pages
//! takes the translation miss ([`Memmap::page`] → `refill`), which
//! initialises all 64 as `deferred_init_memmap()` would have left them:
//! `__init_single_page()` with the refcount that `__free_pages_core()`
//! leaves (0 once `memblock_free_all()` has run, 1 before). So a 512 GiB
//! machine's 8 GiB memmap costs host memory only where it is used (the
//! arena is a `MAP_NORESERVE` mapping), and every struct page reads as the
//! kernel's would after `deferred_init_memmap()`.
//!
//! | piece | fidelity |
//! |---|---|
//! | `first_deferred_pfn` (`defer_init()`), what is initialised early (first section, reserved memory, holes of present sections) | faithful |
//! | contents of a deferred struct page once read | faithful (those `deferred_init_memmap()` leaves) |
//! | when it is written: at first touch, 64 at a time, rather than by the `pgdatinit` threads | simplified |
//! | [`DeferredInitCounts`]: vmemmap pages initialised early and at first touch | instrumented |
//!
//! # Access
//!
//! Struct pages are reached the way the kernel reaches them: at their
//! vmemmap virtual address, translated by the kernel's tables. The
//! translation of each 4 KiB vmemmap page is kept in a shadow array of host
//! addresses (a soft-MMU cache dedicated to the vmemmap), rebuilt from the
//! tables whenever a TLBI covers vmemmap addresses
//! ([`crate::mm::memmap::Memmap::vmemmap_sync`]). So after a remap and its TLB flush,
//! struct-page reads and writes go wherever the tables now say, exactly
//! like the kernel's; before the flush they still go to the old page, as a
//! stale TLB entry would send them.
//!
//! Until the first such change, on a memmap of one piece, the translation
//! is the identity on the buffer, and [`Memmap::page`] reads struct pages
//! in place without the shadow. An initialised struct page never has a
//! zero `lru.next` (it points at the page itself, a list or
//! `LIST_POISON1`) and an untouched one is still all zero, so that word,
//! on the cache line the caller reads anyway, tells whether the page still
//! needs its first-touch initialisation; a struct page named by a list
//! link needs no such check.

use super::page::{LRU_OFFSET, STRUCT_PAGE_SIZE, StructPage, pg};
use crate::addr::Pfn;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::Release};

/// Struct pages per 4 KiB vmemmap page.
pub const PAGES_PER_VMEMMAP_PAGE: u64 = 4096 / STRUCT_PAGE_SIZE;

/// `PAGES_PER_SECTION` with `SECTION_SIZE_BITS` = 27 (128 MiB sections).
pub const PAGES_PER_SECTION: u64 = 1 << (27 - 12);

/// A run of PFNs whose struct pages lie one after the other in the memmap
/// buffer: the present sections between two holes of whole sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemmapPiece {
    /// First PFN.
    pub start_pfn: u64,
    /// One past the last PFN.
    pub end_pfn: u64,
    /// Byte offset of `start_pfn`'s struct page in the buffer.
    pub offset: u64,
}

impl MemmapPiece {
    /// The pieces of the memmap for RAM `banks` (PFN ranges, sorted): every
    /// section that holds RAM, whole, clipped to the first and last PFN of
    /// RAM; neighbouring sections join.
    pub fn for_banks(banks: &[(u64, u64)]) -> Vec<MemmapPiece> {
        let (Some(first), Some(last)) = (banks.first(), banks.last()) else {
            return Vec::new();
        };
        let (lo, hi) = (first.0, last.1);
        let mut out: Vec<MemmapPiece> = Vec::new();
        for &(s, e) in banks {
            let s = (s / PAGES_PER_SECTION * PAGES_PER_SECTION).max(lo);
            let e = e.next_multiple_of(PAGES_PER_SECTION).min(hi);
            match out.last_mut() {
                Some(p) if p.end_pfn >= s => p.end_pfn = p.end_pfn.max(e),
                _ => {
                    let offset = out.last().map_or(0, |p| p.offset + (p.end_pfn - p.start_pfn) * STRUCT_PAGE_SIZE);
                    out.push(MemmapPiece { start_pfn: s, end_pfn: e, offset });
                }
            }
        }
        out
    }
}

crate::counter_snapshot! {
    /// Deferred struct page init (instrumented): 4 KiB vmemmap pages (64
    /// struct pages each) initialised at boot by `memmap_init()` and later
    /// at first touch.
    pub struct DeferredInitCounts {
        /// Initialised by `memmap_init()` (below `first_deferred_pfn`).
        pub early: u64,
        /// Initialised at first touch (deferred, or reserved memory above it).
        pub deferred: u64,
        /// vmemmap pages with struct pages behind them.
        pub present: u64,
    }
}

/// The memmap: the struct pages of every frame of RAM, and the one accessor
/// through which all of mmlab reaches them (module docs).
#[derive(Debug)]
pub struct Memmap {
    start_pfn: u64,
    nr_pages: u64,
    vmemmap_pfn0: u64,
    /// The vmemmap address of `vmemmap_pfn0`'s struct page
    /// ([`VaLayout::vmemmap_start`](crate::arch::arm64::memory::VaLayout::vmemmap_start)).
    vmemmap_base: u64,
    /// The kernel's VA layout (the walk of the vmemmap starts at its root level).
    va: crate::arch::arm64::memory::VaLayout,
    /// Host address backing each 4 KiB vmemmap page (64 struct pages), or 0
    /// if no translation is cached (then the next access walks the tables,
    /// or initialises the page first if it is still uninitialised).
    shadow: Box<[AtomicUsize]>,
    /// One bit per vmemmap page: its struct pages have been initialised.
    initialised: Box<[AtomicU64]>,
    /// Serialises first-touch initialisation (a cold path).
    init_lock: std::sync::Mutex<()>,
    /// The refcount a struct page initialised now gets: 1
    /// (`__init_single_page()`), 0 once `memblock_free_all()` has run.
    deferred_refcount: AtomicI32,
    /// `flags` of a fresh struct page without its zone: the node.
    init_flags: u64,
    /// `max_zone_pfns[]`: the zone number each fresh struct page gets.
    max_zone_pfn: [u64; crate::mm::zone_layout::NR_ZONE_TYPES],
    /// The memmap buffer's pieces (sorted by PFN).
    pieces: Box<[MemmapPiece]>,
    /// One bit per section from `start_pfn`'s: it has struct pages. Empty
    /// when one piece covers all of RAM (no hole of whole sections).
    present: Box<[u64]>,
    first_deferred_pfn: u64,
    early_chunks: AtomicU64,
    deferred_chunks: AtomicU64,
    /// RAM, for refills: host address, physical base and length.
    arena_host: usize,
    arena_pa: u64,
    arena_len: u64,
    /// `swapper_pg_dir`, once the vmemmap is mapped (0 before).
    pgd: AtomicU64,
    /// Host address of the memmap buffer as memblock laid it out.
    linear: usize,
    /// True while the memmap is one piece (no hole) and every vmemmap
    /// page's translation is the boot one (the memmap read in place): then
    /// an access to an initialised struct page needs no shadow lookup; the
    /// first TLBI of a changed vmemmap clears it for good.
    boot_layout: AtomicBool,
    /// The vmemmap tables changed since the accessor last synced
    /// ([`Memmap::note_vmemmap_change`]).
    vmemmap_dirty: AtomicBool,
}

// SAFETY: Memmap is a view of struct pages in the arena, which the owning
// Machine keeps mapped for Memmap's whole life; StructPage is Sync (atomics),
// so the view may be shared and sent between threads like `&[StructPage]`.
unsafe impl Send for Memmap {}
// SAFETY: see Send.
unsafe impl Sync for Memmap {}

impl Memmap {
    /// Build the accessor over the memmap buffer `buffer` (host address of
    /// its first byte, inside `arena`), which holds the struct pages of
    /// `pieces` one after the other, for the frames `[start_pfn, end_pfn)`.
    /// Struct pages from `first_deferred_pfn` on are initialised at first
    /// touch; `init_early()` (called by boot) initialises the rest.
    ///
    /// # Safety
    ///
    /// The buffer must lie in `arena`, be at least as long as the pieces'
    /// struct pages rounded up to 4 KiB, be 4 KiB-aligned, and the arena
    /// must stay mapped (not moved) for the whole life of the returned
    /// Memmap. The Machine guarantees this by owning both and dropping the
    /// Memmap first.
    pub unsafe fn new(
        buffer: crate::addr::PhysAddr,
        pieces: &[MemmapPiece],
        first_deferred_pfn: u64,
        init_flags: u64,
        max_zone_pfn: [u64; crate::mm::zone_layout::NR_ZONE_TYPES],
        arena: &crate::arena::Arena,
        va: crate::arch::arm64::memory::VaLayout,
    ) -> Memmap {
        let start_pfn = pieces.first().map_or(0, |p| p.start_pfn);
        let end_pfn = pieces.last().map_or(0, |p| p.end_pfn);
        let nr_pages = end_pfn - start_pfn;
        let chunks = nr_pages.div_ceil(PAGES_PER_VMEMMAP_PAGE) as usize;
        let bytes = pieces.last().map_or(0, |p| p.offset + (p.end_pfn - p.start_pfn) * STRUCT_PAGE_SIZE);
        let linear = arena.host_addr(buffer, bytes.next_multiple_of(4096)).expect("the memmap lies in RAM");
        let arena_host = arena.host_addr(arena.base(), arena.size()).expect("the arena covers itself");
        let present = if pieces.len() <= 1 {
            Box::default()
        } else {
            let first = start_pfn / PAGES_PER_SECTION;
            let n = (end_pfn.div_ceil(PAGES_PER_SECTION) - first) as usize;
            let mut bits = vec![0u64; n.div_ceil(64)];
            for p in pieces {
                for s in p.start_pfn / PAGES_PER_SECTION..p.end_pfn.div_ceil(PAGES_PER_SECTION) {
                    let i = (s - first) as usize;
                    bits[i / 64] |= 1 << (i % 64);
                }
            }
            bits.into_boxed_slice()
        };
        Memmap {
            shadow: (0..chunks).map(|_| AtomicUsize::new(0)).collect(),
            initialised: (0..chunks.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            init_lock: std::sync::Mutex::new(()),
            deferred_refcount: AtomicI32::new(1),
            init_flags,
            max_zone_pfn,
            pieces: pieces.into(),
            present,
            first_deferred_pfn,
            early_chunks: AtomicU64::new(0),
            deferred_chunks: AtomicU64::new(0),
            linear,
            boot_layout: AtomicBool::new(false),
            vmemmap_dirty: AtomicBool::new(false),
            arena_host,
            arena_pa: arena.base().0,
            arena_len: arena.size(),
            pgd: AtomicU64::new(0),
            start_pfn,
            nr_pages,
            vmemmap_pfn0: ((start_pfn << crate::addr::PAGE_SHIFT)
                & !(crate::arch::arm64::memory::ARM64_MEMSTART_ALIGN - 1))
                >> crate::addr::PAGE_SHIFT,
            vmemmap_base: va.vmemmap_start(),
            va,
        }
    }

    /// `virt_to_page(PAGE_OFFSET)`: the vmemmap address of the struct page
    /// of `memstart_addr`'s frame (ptdump's "vmemmap start").
    pub fn vmemmap_start(&self) -> u64 {
        self.vmemmap_base
    }

    /// The flag [`Memmap::note_vmemmap_change`] sets.
    #[inline]
    pub(crate) fn vmemmap_dirty(&self) -> &AtomicBool {
        &self.vmemmap_dirty
    }

    /// The early part of `memmap_init()`: initialise the struct pages of
    /// every present vmemmap page below `first_deferred_pfn`. Then, if the
    /// memmap is one piece (no hole), struct pages are read in place (the
    /// fast path of [`Memmap::page`]).
    pub(crate) fn init_early(&self) {
        for p in self.pieces.iter() {
            let end = p.end_pfn.min(self.first_deferred_pfn);
            if end > p.start_pfn {
                for c in self.chunk_of(p.start_pfn)..=self.chunk_of(end - 1) {
                    self.init_chunk(c, true);
                }
            }
        }
        if self.pieces.len() == 1 {
            self.boot_layout.store(true, Relaxed);
        }
    }

    #[inline]
    fn chunk_of(&self, pfn: u64) -> usize {
        ((pfn - self.start_pfn) / PAGES_PER_VMEMMAP_PAGE) as usize
    }

    /// Whether the struct pages of vmemmap page `chunk` are initialised.
    #[inline]
    fn chunk_initialised(&self, chunk: usize) -> bool {
        self.initialised[chunk / 64].load(std::sync::atomic::Ordering::Acquire) & (1 << (chunk % 64)) != 0
    }

    /// Whether `pfn`'s struct page has been initialised (early, or at first
    /// touch). `__free_pages_core()` skips the refcount write of those that
    /// are not: they get 0 when first touched.
    #[inline]
    pub fn initialised(&self, pfn: Pfn) -> bool {
        let idx = pfn.0.wrapping_sub(self.start_pfn);
        idx < self.nr_pages && self.chunk_initialised((idx / PAGES_PER_VMEMMAP_PAGE) as usize)
    }

    /// The PFN after the run of frames whose struct pages share `pfn`'s
    /// vmemmap page.
    #[inline]
    pub fn vmemmap_page_end(&self, pfn: Pfn) -> Pfn {
        Pfn((pfn.0 - self.start_pfn) / PAGES_PER_VMEMMAP_PAGE * PAGES_PER_VMEMMAP_PAGE
            + PAGES_PER_VMEMMAP_PAGE
            + self.start_pfn)
    }

    /// `memblock_free_all()` has started: struct pages initialised from now
    /// on are free pages (refcount 0), as `__free_pages_core()` leaves them.
    pub(crate) fn set_deferred_freed(&self) {
        self.deferred_refcount.store(0, Relaxed);
    }

    /// `pgdat->first_deferred_pfn` (`u64::MAX` if nothing was deferred).
    pub fn first_deferred_pfn(&self) -> Pfn {
        Pfn(self.first_deferred_pfn)
    }

    /// How many vmemmap pages were initialised early and at first touch.
    pub fn deferred_init_counts(&self) -> DeferredInitCounts {
        let present = self.pieces.iter().map(|p| (p.end_pfn - p.start_pfn).div_ceil(PAGES_PER_VMEMMAP_PAGE)).sum();
        DeferredInitCounts {
            early: self.early_chunks.load(Relaxed),
            deferred: self.deferred_chunks.load(Relaxed),
            present,
        }
    }

    /// Host address of vmemmap page `chunk` as memblock laid the memmap
    /// out, or None in a hole of whole sections.
    fn boot_host(&self, chunk: usize) -> Option<usize> {
        let pfn = self.start_pfn + chunk as u64 * PAGES_PER_VMEMMAP_PAGE;
        let i = self.pieces.partition_point(|p| p.end_pfn <= pfn);
        let p = self.pieces.get(i).filter(|p| p.start_pfn <= pfn)?;
        Some(self.linear + (p.offset + (pfn - p.start_pfn) * STRUCT_PAGE_SIZE) as usize)
    }

    /// Mirrors `__init_single_page()` for the struct pages of vmemmap page
    /// `chunk` (with `__free_pages_core()`'s refcount once memblock's memory
    /// was freed), at its boot placement; caches the translation. Returns
    /// its host address, or None if another CPU initialised it first. A
    /// vmemmap page of a hole has no struct pages: the kernel's paging
    /// request fault, a bug in the caller.
    #[cold]
    #[inline(never)]
    fn init_chunk(&self, chunk: usize, early: bool) -> Option<usize> {
        let Some(host) = self.boot_host(chunk) else {
            let va = self.vmemmap_page_va(chunk);
            panic!("Unable to handle kernel paging request at virtual address {va:#018x} (no memmap: a hole)");
        };
        let _guard = self.init_lock.lock().unwrap_or_else(|e| e.into_inner());
        if !self.chunk_initialised(chunk) {
            let first = self.start_pfn + chunk as u64 * PAGES_PER_VMEMMAP_PAGE;
            let n = (self.start_pfn + self.nr_pages - first).min(PAGES_PER_VMEMMAP_PAGE);
            let refcount = self.deferred_refcount.load(Relaxed);
            for i in 0..n {
                // SAFETY: host is the 4 KiB vmemmap page of this chunk in the
                // memmap buffer (boot_host), inside the arena, which outlives
                // self; i < 64, so the struct page lies inside that page.
                let p = unsafe { &*((host + (i * STRUCT_PAGE_SIZE) as usize) as *const StructPage) };
                let lru = self.page_va(Pfn(first + i)) + LRU_OFFSET;
                let zone = crate::mm::zone_layout::zone_of_pfn(&self.max_zone_pfn, first + i);
                p.init_single(self.init_flags | (zone as u64) << crate::mm::page::ZONES_PGSHIFT, refcount, lru);
            }
            self.initialised[chunk / 64].fetch_or(1 << (chunk % 64), Release);
            if early { &self.early_chunks } else { &self.deferred_chunks }.fetch_add(1, Relaxed);
            self.shadow[chunk].store(host, Release);
            return Some(host);
        }
        None
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
        self.vmemmap_base + (pfn.0 - self.vmemmap_pfn0) * STRUCT_PAGE_SIZE
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

    /// The struct pages of the `n` frames from `pfn`, in order, as slices
    /// of at most 64 (one per 4 KiB vmemmap page): `pfn_to_page(pfn) + i`
    /// for `i` in `0..n`, as the kernel walks a physically contiguous run
    /// (with `SPARSEMEM_VMEMMAP` its struct pages are virtually contiguous).
    /// One vmemmap translation per vmemmap page instead of one per struct
    /// page.
    ///
    /// Panics as [`Memmap::page`] if the run leaves the memmap; callers
    /// validate user-supplied frames with [`Memmap::pfn_valid`] first.
    #[inline]
    pub fn page_slices(&self, pfn: Pfn, n: u64) -> PageSlices<'_> {
        let idx = pfn.0.wrapping_sub(self.start_pfn);
        assert!(idx <= self.nr_pages && n <= self.nr_pages - idx, "pfns {pfn} + {n} outside the memmap");
        PageSlices { mm: self, idx, end: idx + n }
    }

    /// The struct page at memmap index `idx` (< nr_pages), through the
    /// vmemmap translation.
    #[inline(always)]
    fn page_at(&self, idx: u64) -> &StructPage {
        debug_assert!(idx < self.nr_pages);
        if self.boot_layout.load(Relaxed) {
            // SAFETY: with the boot layout every vmemmap page maps the
            // memmap in place with no hole, so struct page idx (< nr_pages)
            // is at linear + idx * 64, inside the buffer given to `new`
            // (valid for self's life).
            let p = unsafe { &*((self.linear + (idx * STRUCT_PAGE_SIZE) as usize) as *const StructPage) };
            // A struct page not yet initialised is still zero (the buffer
            // is fresh arena memory, and nothing but `init_chunk` writes
            // it before its first touch): its first touch takes the
            // checked path below, which initialises its vmemmap page.
            if p.initialised_hint() {
                return p;
            }
        }
        // SAFETY: callers pass idx < nr_pages, and the shadow has
        // ceil(nr_pages / 64) entries, so idx / 64 is in bounds.
        let mut host = unsafe { self.shadow.get_unchecked((idx / PAGES_PER_VMEMMAP_PAGE) as usize) }.load(Relaxed);
        if host == 0 {
            host = self.refill(idx);
        }
        // SAFETY: a non-zero shadow entry is the host address of a 4 KiB,
        // page-aligned piece of the arena (set by `init_chunk` from the
        // memmap buffer, by `refill` or `set_backing` from a validated arena
        // range); the arena lives as long as self (constructor contract),
        // and the offset of this struct page inside the piece is below
        // 4096 - 64. StructPage is made of atomics, so aliasing (two vmemmap
        // pages backed by one physical page) is sound.
        unsafe { &*((host + ((idx % PAGES_PER_VMEMMAP_PAGE) * STRUCT_PAGE_SIZE) as usize) as *const StructPage) }
    }

    /// A vmemmap translation miss: a vmemmap page not yet initialised is
    /// initialised now (first touch); otherwise walk the kernel tables for
    /// the vmemmap page holding struct page `idx` and cache the result. An
    /// unmapped vmemmap address is the kernel's "unable to handle kernel
    /// paging request": a bug in whoever unmapped it, so it panics.
    #[cold]
    #[inline(never)]
    fn refill(&self, idx: u64) -> usize {
        let chunk = (idx / PAGES_PER_VMEMMAP_PAGE) as usize;
        if !self.chunk_initialised(chunk)
            && let Some(host) = self.init_chunk(chunk, false)
        {
            return host;
        }
        let va = self.vmemmap_base + (idx + self.start_pfn - self.vmemmap_pfn0) * STRUCT_PAGE_SIZE;
        let va = va & !(4096 - 1);
        let pgd = self.pgd.load(Relaxed);
        if pgd == 0 {
            // Before the vmemmap is mapped the struct pages are where
            // memblock put them (memmap_init() writes them so).
            let host = self.boot_host(chunk).expect("an initialised vmemmap page has a memmap");
            self.shadow[chunk].store(host, Relaxed);
            return host;
        }
        let leaf = crate::arch::arm64::pgtable::walk_with(
            |pa| self.read_phys_u64(pa.0),
            &crate::arch::arm64::pgtable::AddressSpace::kernel(crate::addr::PhysAddr(pgd), self.va),
            va,
            |_| {},
        );
        let host = leaf
            .and_then(|l| l.pa.0.checked_sub(self.arena_pa).filter(|off| off + 4096 <= self.arena_len))
            .map(|off| self.arena_host + off as usize);
        let Some(host) = host else {
            panic!("Unable to handle kernel paging request at virtual address {va:#018x} (struct page {idx})");
        };
        self.shadow[chunk].store(host, Relaxed);
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

    /// Number of 4 KiB vmemmap pages the memmap spans (holes included).
    pub fn vmemmap_pages(&self) -> usize {
        self.shadow.len()
    }

    /// Virtual address of vmemmap page `i` of this memmap.
    pub fn vmemmap_page_va(&self, i: usize) -> u64 {
        self.page_va(Pfn(self.start_pfn + i as u64 * PAGES_PER_VMEMMAP_PAGE))
    }

    /// Whether vmemmap page `i` is initialised (an uninitialised one keeps
    /// no cached translation: its first touch initialises it).
    pub(crate) fn vmemmap_page_initialised(&self, i: usize) -> bool {
        self.chunk_initialised(i)
    }

    /// Point vmemmap page `i` at `host` (0: unmapped). An uninitialised
    /// page keeps no translation, so that its first touch initialises it.
    pub(crate) fn set_backing(&self, i: usize, host: usize) {
        if !self.chunk_initialised(i) {
            return;
        }
        if self.pieces.len() != 1 || host != self.linear + i * 4096 {
            self.boot_layout.store(false, Relaxed);
        }
        self.shadow[i].store(host, Relaxed);
    }

    /// The struct page whose `lru` field lives at kernel address `va`, or
    /// None if `va` is not inside the vmemmap (a list head). One range check
    /// and one bounds check: the list code's hot path.
    #[inline(always)]
    pub fn page_by_lru_va(&self, va: u64) -> Option<&StructPage> {
        let off = va.wrapping_sub(self.vmemmap_base + LRU_OFFSET);
        if off >= crate::arch::arm64::memory::VMEMMAP_END - self.vmemmap_base {
            return None;
        }
        let idx = (off / STRUCT_PAGE_SIZE).wrapping_add(self.vmemmap_pfn0).wrapping_sub(self.start_pfn);
        assert!(idx < self.nr_pages, "list link {va:#x} outside the memmap");
        if self.boot_layout.load(Relaxed) {
            // SAFETY: as in `page_at` (idx < nr_pages, checked above). No
            // hint is needed: a list link names a struct page that was
            // written (its `lru` was linked), so it is initialised.
            return Some(unsafe { &*((self.linear + (idx * STRUCT_PAGE_SIZE) as usize) as *const StructPage) });
        }
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
        match va.checked_sub(self.vmemmap_base) {
            Some(off) if off.is_multiple_of(STRUCT_PAGE_SIZE) => Pfn(off / STRUCT_PAGE_SIZE + self.vmemmap_pfn0),
            _ => pfn,
        }
    }

    /// `pfn_valid()`: the frame lies in a section that has struct pages.
    #[inline]
    pub fn pfn_valid(&self, pfn: Pfn) -> bool {
        let idx = pfn.0.wrapping_sub(self.start_pfn);
        idx < self.nr_pages && (self.present.is_empty() || self.section_present(pfn.0))
    }

    #[inline]
    fn section_present(&self, pfn: u64) -> bool {
        let i = (pfn / PAGES_PER_SECTION - self.start_pfn / PAGES_PER_SECTION) as usize;
        self.present[i / 64] & (1 << (i % 64)) != 0
    }

    /// The pieces of the memmap buffer (present sections, sorted).
    pub fn pieces(&self) -> &[MemmapPiece] {
        &self.pieces
    }
    /// First frame of RAM.
    pub fn start_pfn(&self) -> Pfn {
        Pfn(self.start_pfn)
    }
    /// One past the last frame of RAM.
    pub fn end_pfn(&self) -> Pfn {
        Pfn(self.start_pfn + self.nr_pages)
    }
    /// Number of frames from the first of RAM to the last (holes included:
    /// the span; [`Memmap::pfn_valid`] tells which have struct pages).
    pub fn nr_pages(&self) -> u64 {
        self.nr_pages
    }
}

/// Iterator of [`Memmap::page_slices`]: a run's struct pages, one slice
/// per vmemmap page, each translated once.
pub struct PageSlices<'a> {
    mm: &'a Memmap,
    /// Memmap index of the next struct page, and one past the last.
    idx: u64,
    end: u64,
}

impl<'a> Iterator for PageSlices<'a> {
    type Item = &'a [StructPage];

    #[inline]
    fn next(&mut self) -> Option<&'a [StructPage]> {
        if self.idx == self.end {
            return None;
        }
        // This vmemmap page's part of the run: translate its last struct
        // page. That initialises the vmemmap page if it was untouched; and
        // since initialisation writes the 64 struct pages in order, each
        // `lru.next` last with a release, a last page read as initialised
        // means the ones before it are too.
        let seg_end = self.end.min((self.idx / PAGES_PER_VMEMMAP_PAGE + 1) * PAGES_PER_VMEMMAP_PAGE);
        let len = (seg_end - self.idx) as usize;
        let last: *const StructPage = self.mm.page_at(seg_end - 1);
        self.idx = seg_end;
        // SAFETY: the `len` struct pages up to `last` share one 4 KiB
        // vmemmap page, whose 64 struct pages lie in order in the one host
        // page it translates to (boot layout, shadow entry or refill
        // alike), so they start len - 1 (< 64) struct pages before `last`,
        // inside that page, which lives as long as the memmap ('a).
        // StructPage is made of atomics: shared references to it may alias.
        Some(unsafe { std::slice::from_raw_parts(last.sub(len - 1), len) })
    }
}

impl std::fmt::Debug for PageSlices<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageSlices").field("idx", &self.idx).field("end", &self.end).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_present_sections() {
        let s = PAGES_PER_SECTION;
        // One bank: one piece, as long as the bank.
        assert_eq!(
            MemmapPiece::for_banks(&[(0x40000, 0x44000)]),
            [MemmapPiece { start_pfn: 0x40000, end_pfn: 0x44000, offset: 0 }]
        );
        // 2G + 64M at 1G, then 2G at 4G: the partial section is whole.
        let p = MemmapPiece::for_banks(&[(0x40000, 0xc4000), (0x100000, 0x180000)]);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].start_pfn, p[0].end_pfn), (0x40000, 0xc4000_u64.next_multiple_of(s)));
        assert_eq!(p[1].offset, (p[0].end_pfn - p[0].start_pfn) * 64);
        // Banks in neighbouring sections join.
        let p = MemmapPiece::for_banks(&[(0x40000, 0x41000), (0x42000, 0x43000)]);
        assert_eq!(p, [MemmapPiece { start_pfn: 0x40000, end_pfn: 0x43000, offset: 0 }]);
    }
}
