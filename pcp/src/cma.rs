//! `cma_alloc()` and `cma_release()` (mm/cma.c, Linux 7.2) on the machine's
//! one CMA area, the 64 MiB that `dma_contiguous_reserve()` set aside and
//! `cma_init_reserved_areas()` freed as MIGRATE_CMA pageblocks.
//!
//! # The algorithm
//!
//! The area keeps a bitmap of the pages handed out (`cma->bitmap`, one bit
//! per page: `order_per_bit` 0). `__cma_alloc()` looks for the lowest clear
//! run of `count` bits whose first page is aligned to `2^align`
//! (`bitmap_find_next_zero_area_off`), and asks the page allocator for
//! exactly that range (`alloc_contig_frozen_range()`): the range's
//! pageblocks are isolated, the pcp lists drained, the free blocks that
//! cover the range taken whole, and what they hold outside the range freed
//! again (`free_contig_range()`: counted as `pgfree`). A range with a page
//! in use is skipped for the next aligned one. No `pgalloc` is counted: the
//! kernel counts `cma_alloc_success` or `cma_alloc_fail` per call instead.
//! So a first allocation of 32 pages at the start of an empty area frees
//! the other 480 pages of its pageblock again: `pgfree` grows by 480 while
//! `pgalloc` does not move, as on the real kernel (1 GiB peer: the atomic
//! DMA pool's 128 KiB).
//!
//! | piece | fidelity |
//! |---|---|
//! | bitmap search, alignment, the range taken and the head and tail freed | faithful |
//! | vmstat: no pgalloc, pgfree for the freed excess, cma_alloc_success/fail | faithful |
//! | migration of pages in use | absent: a busy range is skipped (mmlab cannot migrate) |
//! | the isolation | simplified: one zone-lock hold, no MIGRATE_ISOLATE state |

use crate::error::CmaError;
use crate::page_alloc::PageAllocator;
use mmlab_buddy::ContigError;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Cpu, Pfn};

impl<'m> PageAllocator<'m> {
    /// `cma_alloc(cma, count, align, no_warn)`: `count` contiguous pages of
    /// the CMA area, the first aligned to `2^align` pages (module docs).
    /// Returns the first frame; every page is an allocated order-0 page.
    ///
    /// # Errors
    /// [`CmaError::NoArea`], [`CmaError::BadCount`], [`CmaError::ForeignCpu`], or
    /// [`CmaError::NoRange`] (counted as `cma_alloc_fail`) when no aligned range is free.
    pub fn cma_alloc(&self, cpu: &Cpu<'m>, count: u64, align: u32) -> Result<Pfn, CmaError> {
        if self.foreign(cpu) {
            return Err(CmaError::ForeignCpu { cpu: cpu.id() });
        }
        let (base, nr) = self.m.cma_area().ok_or(CmaError::NoArea)?;
        if count == 0 || count > nr {
            return Err(CmaError::BadCount { count });
        }
        let mask = (1u64 << align.min(63)) - 1;
        let mut bitmap = self.cma.lock();
        if bitmap.len() as u64 != nr {
            *bitmap = vec![false; nr as usize];
        }
        // bitmap_find_next_zero_area_off(): the first bit whose frame is
        // aligned, then every next aligned one after a failure.
        let mut off = (base.0.next_multiple_of(mask + 1)) - base.0;
        while off + count <= nr {
            if let Some(busy) = (off..off + count).rev().find(|&i| bitmap[i as usize]) {
                off = (base.0 + busy + 1).next_multiple_of(mask + 1) - base.0;
                continue;
            }
            let start = base.add(off);
            match self.alloc_contig_frozen_range(cpu, start, count) {
                Ok(()) => {
                    for i in off..off + count {
                        bitmap[i as usize] = true;
                    }
                    cpu.count(VmEvent::CmaAllocSuccess, 1);
                    return Ok(start);
                }
                Err(_) => off = (base.0 + off + 1).next_multiple_of(mask + 1) - base.0,
            }
        }
        cpu.count(VmEvent::CmaAllocFail, 1);
        Err(CmaError::NoRange { count })
    }

    /// `alloc_contig_frozen_range()` for CMA: drain the pcp lists, take the
    /// range through its isolated pageblocks, free what the blocks held
    /// outside it (`free_contig_range()`, counted as `pgfree`).
    fn alloc_contig_frozen_range(&self, cpu: &Cpu<'m>, start: Pfn, count: u64) -> Result<(), ContigError> {
        self.drain_all_pages(cpu);
        let zone = self.page_zone(start);
        let (outer_start, outer_end) = zone.lock(cpu).isolate_freepages_range(start, count)?;
        // free_contig_range() of the head and the tail: their pageblocks
        // are isolated, so the pages go straight to the buddy lists
        // (free_frozen_pages() bypasses the pcp for MIGRATE_ISOLATE), each
        // counted as pgfree.
        let end = start.add(count);
        for pfn in (outer_start.0..start.0).chain(end.0..outer_end.0) {
            let page = self.m.page(Pfn(pfn));
            let _ = page.put_testzero();
            mmlab_engine::trace::mm_page_free(
                cpu.id(),
                self.m.trace_clock(),
                self.m.memmap().page_va(Pfn(pfn)),
                pfn,
                0,
            );
            zone.free_one_page(cpu, Pfn(pfn), 0, mmlab_buddy::Fpi::NONE);
        }
        self.after_op();
        Ok(())
    }

    /// `cma_release(cma, pages, count)`: give `count` pages from `pfn` back
    /// (`free_contig_range()`) and clear their bits.
    ///
    /// # Errors
    /// [`CmaError::NoArea`], [`CmaError::ForeignCpu`], or [`CmaError::NotAllocated`] for a range
    /// outside the area or not handed out by it; nothing changes.
    pub fn cma_release(&self, cpu: &Cpu<'m>, pfn: Pfn, count: u64) -> Result<(), CmaError> {
        if self.foreign(cpu) {
            return Err(CmaError::ForeignCpu { cpu: cpu.id() });
        }
        let (base, nr) = self.m.cma_area().ok_or(CmaError::NoArea)?;
        let mut bitmap = self.cma.lock();
        let bad = CmaError::NotAllocated { pfn, count };
        if pfn.0 < base.0 || pfn.0 + count > base.0 + nr || count == 0 {
            return Err(bad);
        }
        let off = (pfn.0 - base.0) as usize;
        if bitmap.len() as u64 != nr || !bitmap[off..off + count as usize].iter().all(|&b| b) {
            return Err(bad);
        }
        self.free_contig_range(cpu, pfn, count).map_err(|_| bad)?;
        bitmap[off..off + count as usize].iter_mut().for_each(|b| *b = false);
        Ok(())
    }

    /// Pages of the CMA area handed out by [`PageAllocator::cma_alloc`].
    pub fn cma_allocated_pages(&self) -> u64 {
        self.cma.lock().iter().filter(|&&b| b).count() as u64
    }
}
