//! `free_pages_bulk()` (Linux 7.2, mm/page_alloc.c): free an array of
//! order-0 pages, each physically contiguous run of it as the largest
//! naturally aligned blocks.
//!
//! 7.2's `vfree()` hands the area's page array here (`vm_area_free_pages`).
//! Before it (6.x, and the kernels of the published vmalloc experiments)
//! every page went back on its own, `__free_page()` at order 0, which for a
//! huge mapping means 16 or 512 order-0 frees into the pcp lists.
//!
//! # The algorithm
//!
//! 1. The array is cut into runs of ascending consecutive frames
//!    (`num_pages_contiguous`); the kernel expects it sorted, and an
//!    unsorted array only makes the runs short.
//! 2. Each run (`__free_contig_range`) drops every page's reference
//!    (`put_page_testzero`) and prepares it at order 0
//!    (`free_pages_prepare`). A page that is still referenced stays with its
//!    holder and ends the stretch before it.
//! 3. Each prepared stretch (`free_prepared_contig_range`) is freed in
//!    blocks: from its first frame, the order is the smallest of the frame's
//!    alignment (`__ffs(pfn)`), `ilog2` of the pages left and
//!    `MAX_PAGE_ORDER`, and the block goes back whole
//!    (`__free_frozen_pages(page, order, FPI_PREPARED)`): through the pcp
//!    for the orders the pcp keeps (0 to 3 and the pageblock order), straight
//!    to the buddy lists under the zone lock for the others.
//!
//! So a 2 MiB PMD-mapped area, one order-9 block split into 512 pages,
//! returns as one order-9 free onto the pcp; a 64 KiB contpte block as one
//! order-4 free to the buddy; 100 order-0 pages that happen to be
//! consecutive as a handful of blocks.
//!
//! Fidelity: faithful for the runs, the block orders and the route each
//! block takes. Instrumented: `mm_page_free` is traced per block (the
//! kernel traces each page in `free_pages_prepare`). The section check of
//! `__free_contig_range_common` never splits a block here: blocks are at
//! most 4 MiB and aligned, sections 128 MiB.

use crate::error::FreeError;
use crate::page_alloc::PageAllocator;
use mmlab_engine::mm::MAX_PAGE_ORDER;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Cpu, Pfn};

impl<'m> PageAllocator<'m> {
    /// `free_pages_bulk(pages, nr)`: free the order-0 pages of `pages`,
    /// each contiguous run as aligned blocks (module docs).
    ///
    /// # Errors
    /// [`FreeError::ForeignCpu`]; for a page that is not RAM, not a live
    /// order-0 page, reserved or free, the matching [`FreeError`], with
    /// nothing changed (every page is checked first); [`FreeError::DoubleFree`]
    /// for a page listed twice, found when its second reference drop fails:
    /// the pages before it are freed then, consistently.
    pub fn free_pages_bulk(&self, cpu: &Cpu<'m>, pages: &[Pfn]) -> Result<(), FreeError> {
        if self.foreign(cpu) {
            return Err(FreeError::ForeignCpu { cpu: cpu.id() });
        }
        self.check_order0_allocated_all(pages)?;
        let mut i = 0;
        let mut r = Ok(());
        while i < pages.len() && r.is_ok() {
            let start = pages[i];
            let mut n = 1;
            while i + n < pages.len() && pages[i + n].0 == start.0 + n as u64 {
                n += 1;
            }
            r = self.free_contig_range_prepared(cpu, start, n as u64);
            i += n;
        }
        self.after_op();
        r
    }

    /// `__free_contig_range()` of one run: drop each reference, then free
    /// each stretch of pages that reached zero in blocks.
    fn free_contig_range_prepared(&self, cpu: &Cpu<'m>, start: Pfn, nr: u64) -> Result<(), FreeError> {
        let mut stretch: Option<(Pfn, u64)> = None;
        for (k, page) in self.m.memmap().page_slices(start, nr).flatten().enumerate() {
            let pfn = start.add(k as u64);
            match page.put_testzero() {
                Some(true) => stretch = Some(stretch.map_or((pfn, 1), |(s, n)| (s, n + 1))),
                Some(false) => {
                    // Still referenced: its holder keeps it.
                    if let Some((s, n)) = stretch.take() {
                        self.free_prepared_contig_range(cpu, s, n);
                    }
                }
                None => {
                    if let Some((s, n)) = stretch.take() {
                        self.free_prepared_contig_range(cpu, s, n);
                    }
                    return Err(FreeError::DoubleFree { pfn });
                }
            }
        }
        if let Some((s, n)) = stretch {
            self.free_prepared_contig_range(cpu, s, n);
        }
        Ok(())
    }

    /// `free_prepared_contig_range()`: `nr` pages from `pfn`, all with no
    /// reference left, freed as the largest aligned blocks.
    fn free_prepared_contig_range(&self, cpu: &Cpu<'m>, mut pfn: Pfn, mut nr: u64) {
        while nr > 0 {
            let align = if pfn.0 == 0 { MAX_PAGE_ORDER } else { pfn.0.trailing_zeros() };
            let order = align.min(nr.ilog2()).min(MAX_PAGE_ORDER);
            for tail in self.m.memmap().page_slices(pfn.add(1), (1 << order) - 1).flatten() {
                tail.set_ext(PageExt::Tail);
            }
            self.free_frozen_pages(cpu, pfn, self.m.page(pfn), order);
            pfn = pfn.add(1 << order);
            nr -= 1 << order;
        }
    }
}
