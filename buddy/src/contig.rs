//! Contiguous ranges of frames: `alloc_contig_range()` / `alloc_contig_pages()`
//! (mm/page_alloc.c), needed for gigantic hugetlb pages (32 MiB, 1 GiB).
//!
//! The kernel isolates the range's pageblocks, migrates pages in use out of
//! it, drains the pcp lists, then takes the free blocks that cover the range
//! and gives back the parts that stick out. mmlab cannot migrate, so a range
//! with a frame in use (or parked on a pcp list: the caller drains first) is
//! refused as busy, and nothing changes. Simplified: no MIGRATE_ISOLATE
//! pageblocks; the whole check-and-take runs under one zone-lock hold.

use crate::zone::{Fpi, LockedZone, Zone};
use mmlab_engine::memblock::free_pages_memory;
use mmlab_engine::mm::{MAX_PAGE_ORDER, Migratetype, PAGEBLOCK_NR_PAGES};
use mmlab_engine::page::PageExt;
use mmlab_engine::vmstat::VmEvent;
use mmlab_engine::{Cpu, Pfn};

/// Why a contiguous range could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContigError {
    /// The range is empty or leaves the zone.
    OutOfRange {
        /// The first frame asked for.
        start: Pfn,
        /// The frames asked for.
        nr_pages: u64,
    },
    /// A frame in the range is not free in the buddy allocator.
    Busy {
        /// The first busy frame found.
        pfn: Pfn,
    },
    /// No free range of that size was found (`alloc_contig_pages`).
    NoRange {
        /// The frames asked for.
        nr_pages: u64,
    },
    /// The CPU handle belongs to another machine.
    ForeignCpu {
        /// The handle's CPU id.
        cpu: usize,
    },
}

impl std::fmt::Display for ContigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContigError::OutOfRange { start, nr_pages } => {
                write!(f, "contig range {start}+{nr_pages} is empty or outside the zone")
            }
            ContigError::Busy { pfn } => write!(f, "pfn {pfn} in the range is in use"),
            ContigError::NoRange { nr_pages } => write!(f, "no free contiguous range of {nr_pages} pages"),
            ContigError::ForeignCpu { cpu } => write!(f, "cpu {cpu} is a handle of another machine"),
        }
    }
}
impl std::error::Error for ContigError {}

impl LockedZone<'_, '_> {
    /// The free block containing `pfn`, as (head, order).
    fn free_block_containing(&self, pfn: Pfn) -> Option<(Pfn, u32)> {
        (0..=MAX_PAGE_ORDER)
            .map(|o| (Pfn(pfn.0 & !((1u64 << o) - 1)), o))
            .find(|&(head, o)| self.is_free_block(head, o))
    }

    /// Take `[start, start + nr)` out of the free lists; every frame becomes
    /// an allocated order-0 page of type `mt` with refcount 1. On error
    /// nothing has changed.
    ///
    /// # Errors
    /// [`ContigError::OutOfRange`] for an empty range or one that leaves the zone;
    /// [`ContigError::Busy`] for a frame not in a free block.
    pub fn take_contig_range(&mut self, start: Pfn, nr: u64, mt: Migratetype) -> Result<(), ContigError> {
        let end = start.0.saturating_add(nr);
        if nr == 0 || !self.zone.spans(start) || !self.zone.spans(Pfn(end - 1)) {
            return Err(ContigError::OutOfRange { start, nr_pages: nr });
        }
        // Check first: every frame must sit in a free block.
        let mut blocks = Vec::new();
        let mut p = start.0;
        while p < end {
            // A frame of a hole (no struct page: !pfn_valid) is never free.
            if !self.zone.m.memmap().pfn_valid(Pfn(p)) {
                return Err(ContigError::Busy { pfn: Pfn(p) });
            }
            let (head, o) = self.free_block_containing(Pfn(p)).ok_or(ContigError::Busy { pfn: Pfn(p) })?;
            blocks.push((head, o));
            p = head.0 + (1 << o);
        }
        // Take the blocks, give back what sticks out.
        for (head, o) in blocks {
            let bmt = self.zone.pageblock_migratetype(head);
            self.del_page_from_free_list(head, o, bmt);
            let (bs, be) = (head.0, head.0 + (1 << o));
            let give_back = |s: u64, e: u64, z: &mut Self| {
                free_pages_memory(s, e, &mut |pfn, order| {
                    let t = z.zone.pageblock_migratetype(pfn);
                    z.free_one_page_locked(pfn, order, t, Fpi::NONE)
                });
            };
            if bs < start.0 {
                give_back(bs, start.0, self);
            }
            if be > end {
                give_back(end, be, self);
            }
        }
        for p in start.0..end {
            let page = self.zone.m.page(Pfn(p));
            page.set_refcount(1);
            page.set_ext(PageExt::Alloc(0, mt));
        }
        self.cpu.count(VmEvent::PgallocNormal, nr);
        Ok(())
    }
}

impl<'m> Zone<'m> {
    /// `alloc_contig_range()`: allocate exactly `[start, start + nr)`.
    /// The caller drains the pcp lists first.
    ///
    /// # Errors
    /// As [`crate::LockedZone::take_contig_range`]; nothing is changed.
    pub fn alloc_contig_range(&self, cpu: &Cpu<'m>, start: Pfn, nr: u64, mt: Migratetype) -> Result<(), ContigError> {
        self.lock(cpu).take_contig_range(start, nr, mt)
    }

    /// `alloc_contig_pages()`: the first naturally aligned free range of
    /// `nr` frames (pageblock-aligned if `nr` is not a power of two).
    ///
    /// # Errors
    /// [`ContigError::NoRange`] when no free range of `nr` frames exists (or `nr` is 0 or larger
    /// than the zone); nothing is changed.
    pub fn alloc_contig_pages(&self, cpu: &Cpu<'m>, nr: u64, mt: Migratetype) -> Result<Pfn, ContigError> {
        if nr == 0 || nr > self.spanned_pages {
            return Err(ContigError::NoRange { nr_pages: nr });
        }
        let align = if nr.is_power_of_two() { nr } else { PAGEBLOCK_NR_PAGES };
        let mut pfn = self.zone_start_pfn.next_multiple_of(align);
        while pfn + nr <= self.zone_end_pfn().0 {
            match self.alloc_contig_range(cpu, Pfn(pfn), nr, mt) {
                Ok(()) => return Ok(Pfn(pfn)),
                Err(ContigError::Busy { .. }) => pfn += align,
                Err(e) => return Err(e),
            }
        }
        Err(ContigError::NoRange { nr_pages: nr })
    }
}
