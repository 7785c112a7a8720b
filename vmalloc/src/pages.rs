//! An area's pages: `vm_area_alloc_pages()` and `vm_area_free_pages()`
//! (mm/vmalloc.c, Linux 7.2, with the 6.x paths behind their switches).
//!
//! Allocation, in the kernel's order: with `vmalloc.large_order_pages`
//! (7.2), the largest blocks that fit, of order `ilog2(pages left)`,
//! without direct reclaim, one order lower after each failure; then, for a
//! huge mapping, blocks of the mapping's order; then order-0 pages from the
//! bulk allocator in chunks of at most 100, dropping to single pages when a
//! chunk comes back short. Every block is split (`split_page()`) into
//! independent order-0 pages, which is what the area's page array holds.
//!
//! Freeing: with `vmalloc.free_pages_bulk` (7.2), `free_pages_bulk()`
//! returns each physically contiguous run as aligned blocks; off, one
//! `__free_page()` per page, as 6.x.
//!
//! Fidelity: faithful for the orders tried, their gfp and the fallbacks;
//! the `NR_VMALLOC` accounting is not kept.

use crate::vmalloc::BULK_CHUNK;
use crate::vmalloc::Vmalloc;
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::{Cpu, MAX_PAGE_ORDER, PAGE_SHIFT, Pfn};

impl<'m> Vmalloc<'_, 'm> {
    /// `vm_area_alloc_pages()`: `nr` order-0 pages: in 7.2 first as the
    /// largest blocks that fit ([`Self::alloc_large_orders`]), then as
    /// blocks of `1 << (shift - PAGE_SHIFT)` split into order-0 pages for a
    /// huge mapping, then order-0 pages in bulk. On failure returns what it
    /// got (for the caller to free).
    pub(crate) fn alloc_pages(&self, cpu: &Cpu<'m>, nr: usize, shift: u32, gfp: Gfp) -> Result<Vec<Pfn>, Vec<Pfn>> {
        let mut out = Vec::with_capacity(nr);
        let order = shift - PAGE_SHIFT;
        if self.cfg.large_order_pages {
            self.alloc_large_orders(cpu, nr, order, gfp, &mut out);
        }
        if order > 0 {
            let hgfp = (gfp | Gfp::__GFP_NOWARN) - Gfp::__GFP_NOFAIL;
            while nr - out.len() >= 1 << order {
                let Some(p) = self.pa.alloc_pages(cpu, hgfp, order) else {
                    return Err(out);
                };
                self.pa.split_page(p, order).expect("a block just allocated splits");
                out.extend((0..1u64 << order).map(|i| p.add(i)));
            }
            if out.len() < nr && self.cfg.align_size_to_huge {
                return Err(out);
            }
        }
        // Order 0 (also the RFC's tail): bulk in chunks of 100, each in
        // one buffer, on the stack for a small area (no heap allocation for
        // the common one-page vmalloc, and no 100-entry buffer to clear).
        let mut small = [None; 16];
        let mut large = Vec::new();
        let buf: &mut [Option<Pfn>] = if nr - out.len() <= small.len() {
            &mut small
        } else {
            large.resize(BULK_CHUNK, None);
            &mut large
        };
        while out.len() < nr {
            let want = (nr - out.len()).min(BULK_CHUNK);
            let chunk = &mut buf[..want];
            chunk.fill(None);
            let got = self.pa.alloc_pages_bulk(cpu, gfp, chunk);
            out.extend(chunk.iter().flatten());
            if got < want {
                // A short chunk drops to single pages.
                while out.len() < nr {
                    match self.pa.alloc_pages(cpu, gfp | Gfp::__GFP_NOWARN, 0) {
                        Some(p) => out.push(p),
                        None => return Err(out),
                    }
                }
            }
        }
        Ok(out)
    }

    /// 7.2 `vm_area_alloc_pages()`'s first loop: while at least two
    /// mapping-order chunks are missing, take a block of order
    /// `ilog2(pages left)` (at most `MAX_PAGE_ORDER`, and below every order
    /// that failed) from the page allocator without direct reclaim, and
    /// split it into order-0 pages. A failure only lowers the order; what
    /// is left goes to the loops after it.
    fn alloc_large_orders(&self, cpu: &Cpu<'m>, nr: usize, order: u32, gfp: Gfp, out: &mut Vec<Pfn>) {
        let lgfp = (gfp | Gfp::__GFP_NOWARN) - Gfp::__GFP_NOFAIL - Gfp::__GFP_DIRECT_RECLAIM;
        let mut max_attempt = MAX_PAGE_ORDER;
        while out.len() < nr {
            let large = (nr - out.len()).ilog2().min(max_attempt);
            if large <= order {
                break;
            }
            match self.pa.alloc_pages(cpu, lgfp, large) {
                Some(p) => {
                    self.pa.split_page(p, large).expect("a block just allocated splits");
                    out.extend((0..1u64 << large).map(|i| p.add(i)));
                }
                None => max_attempt = large - 1,
            }
        }
    }

    /// `vm_area_free_pages()`: 7.2's `free_pages_bulk` (contiguous runs as
    /// aligned blocks) or, with `vmalloc.free_pages_bulk=off`, one
    /// `__free_page` per page.
    pub(crate) fn free_area_pages(&self, cpu: &Cpu<'m>, pages: &[Pfn]) {
        // One page is one order-0 free either way (`__free_contig_range` of
        // one frame is `__free_page`); the common one-page area skips the
        // bulk path's run detection.
        if self.cfg.free_pages_bulk && pages.len() > 1 {
            self.pa.free_pages_bulk(cpu, pages).expect("vmalloc pages are order-0 pages of their own");
        } else {
            for &p in pages {
                self.pa.free_pages(cpu, p, 0).expect("vmalloc pages are order-0 pages of their own");
            }
        }
    }
}
