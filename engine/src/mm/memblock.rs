//! memblock: the boot-time allocator that hands out memory before the buddy
//! allocator exists (mm/memblock.c).
//!
//! It keeps two sorted region lists, `memory` (RAM) and `reserved` (taken at
//! boot: the memmap, the pageblock bitmap, early page tables). Allocations
//! search top-down from the end of RAM, as memblock does by default. When the
//! page allocator comes up, [`Memblock::for_each_free_block`] walks what is
//! not reserved in the largest naturally aligned blocks, which
//! `memblock_free_all()` / `__free_pages_memory()` hand to `__free_pages_core()`.

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::mm::MAX_PAGE_ORDER;

/// A physical range with the name of its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub base: PhysAddr,
    /// Length in bytes.
    pub size: u64,
    /// The owner ("memmap", "pgtable", ...), as memblock debug output names it.
    pub name: &'static str,
}

impl Region {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.base.0 + self.size
    }
}

/// memblock failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemblockError {
    /// No free range of `size` bytes aligned to `align`.
    NoSpace {
        /// Bytes asked for.
        size: u64,
        /// Alignment asked for.
        align: u64,
        /// The would-be owner.
        name: &'static str,
    },
    /// A reservation outside RAM or overlapping an existing one.
    BadReserve {
        /// First byte of the reservation.
        base: PhysAddr,
        /// Its length.
        size: u64,
    },
}

impl std::fmt::Display for MemblockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemblockError::NoSpace { size, align, name } => {
                write!(f, "memblock: cannot allocate {size:#x} bytes aligned to {align:#x} for {name}")
            }
            MemblockError::BadReserve { base, size } => {
                write!(f, "memblock: bad reservation {base}+{size:#x}")
            }
        }
    }
}
impl std::error::Error for MemblockError {}

/// The boot allocator's state.
#[derive(Clone, Debug, Default)]
pub struct Memblock {
    memory: Vec<Region>,
    reserved: Vec<Region>,
}

impl Memblock {
    /// `memblock_add()`: register RAM.
    pub fn add(&mut self, base: PhysAddr, size: u64) {
        self.memory.push(Region { base, size, name: "System RAM" });
        self.memory.sort_by_key(|r| r.base);
    }

    /// RAM regions.
    pub fn memory(&self) -> &[Region] {
        &self.memory
    }
    /// Reserved regions, sorted by address.
    pub fn reserved(&self) -> &[Region] {
        &self.reserved
    }

    fn in_memory(&self, base: u64, end: u64) -> bool {
        self.memory.iter().any(|r| base >= r.base.0 && end <= r.end())
    }

    /// `memblock_reserve()`, with `memblock_merge_regions()`: a
    /// reservation that touches a neighbour of the same owner becomes part
    /// of it (the kernel merges neighbours of the same node and flags), so
    /// the thousands of page-table pages that `map_mem()` takes one by one,
    /// top-down, stay one region. O(log n) to find the place.
    ///
    /// # Errors
    ///
    /// [`MemblockError::BadReserve`] for an empty range, one outside RAM, or one overlapping an
    /// existing reservation.
    pub fn reserve(&mut self, base: PhysAddr, size: u64, name: &'static str) -> Result<(), MemblockError> {
        let bad = MemblockError::BadReserve { base, size };
        let end = base.0.checked_add(size).ok_or(bad.clone())?;
        if size == 0 || !self.in_memory(base.0, end) {
            return Err(bad);
        }
        let idx = self.reserved.partition_point(|r| r.base.0 < base.0);
        let prev_touches = idx > 0 && {
            let p = &self.reserved[idx - 1];
            if p.end() > base.0 {
                return Err(bad);
            }
            p.end() == base.0 && p.name == name
        };
        let next_touches = idx < self.reserved.len() && {
            let n = &self.reserved[idx];
            if n.base.0 < end {
                return Err(bad);
            }
            n.base.0 == end && n.name == name
        };
        match (prev_touches, next_touches) {
            (true, true) => {
                let next = self.reserved.remove(idx);
                self.reserved[idx - 1].size += size + next.size;
            }
            (true, false) => self.reserved[idx - 1].size += size,
            (false, true) => {
                let n = &mut self.reserved[idx];
                n.base = base;
                n.size += size;
            }
            (false, false) => self.reserved.insert(idx, Region { base, size, name }),
        }
        Ok(())
    }

    /// Free (unreserved) ranges of RAM, in address order.
    pub fn free_ranges(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for m in &self.memory {
            let mut cur = m.base.0;
            for r in &self.reserved {
                if r.end() <= cur || r.base.0 >= m.end() {
                    continue;
                }
                if r.base.0 > cur {
                    out.push((cur, r.base.0));
                }
                cur = cur.max(r.end());
            }
            if cur < m.end() {
                out.push((cur, m.end()));
            }
        }
        out
    }

    /// `memblock_phys_alloc()`: `size` bytes aligned to `align`, searched
    /// top-down, and reserved under `name`.
    ///
    /// # Errors
    ///
    /// [`MemblockError::NoSpace`] if `size` is 0, `align` is not a power of two, or no free range
    /// fits.
    pub fn alloc(&mut self, size: u64, align: u64, name: &'static str) -> Result<PhysAddr, MemblockError> {
        self.alloc_range(size, align, 0, u64::MAX, name)
    }

    /// `memblock_phys_alloc_range()` / `memblock_alloc_range_nid()` top-down:
    /// `size` bytes aligned to `align` inside `[start, end)`, the highest
    /// place that fits, reserved under `name`.
    ///
    /// # Errors
    ///
    /// [`MemblockError::NoSpace`] if `size` is 0, `align` is not a power of two, or no free range
    /// inside `[start, end)` fits.
    pub fn alloc_range(
        &mut self,
        size: u64,
        align: u64,
        start: u64,
        end: u64,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        let err = MemblockError::NoSpace { size, align, name };
        if size == 0 || !align.is_power_of_two() {
            return Err(err);
        }
        // Top-down over the free gaps of each RAM region, highest first,
        // stopping at the first that fits (`__memblock_find_range_top_down`).
        let mut found = None;
        'banks: for m in self.memory.iter().rev() {
            let lo = self.reserved.partition_point(|r| r.end() <= m.base.0);
            let hi = self.reserved.partition_point(|r| r.base.0 < m.end());
            // Gap i lies between reserved[i - 1] and reserved[i] (the bank's
            // edges standing in at either end), clamped to [start, end).
            for i in (lo..=hi).rev() {
                let bottom = if i > lo { self.reserved[i - 1].end().max(m.base.0) } else { m.base.0 }.max(start);
                let top = if i < hi { self.reserved[i].base.0.min(m.end()) } else { m.end() }.min(end);
                if top > bottom && top - bottom >= size {
                    let base = (top - size) & !(align - 1);
                    if base >= bottom {
                        found = Some(base);
                        break 'banks;
                    }
                }
            }
        }
        if let Some(base) = found {
            self.reserve(PhysAddr(base), size, name)?;
            return Ok(PhysAddr(base));
        }
        Err(err)
    }

    /// `memblock_alloc_range_nid()` with `memblock_set_bottom_up(true)`:
    /// the lowest place in `[start, end)` that fits (`__memblock_find_range_bottom_up`).
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range`].
    pub fn alloc_range_bottom_up(
        &mut self,
        size: u64,
        align: u64,
        start: u64,
        end: u64,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        let err = MemblockError::NoSpace { size, align, name };
        if size == 0 || !align.is_power_of_two() {
            return Err(err);
        }
        let found = self.free_ranges().into_iter().find_map(|(s, e)| {
            let base = s.max(start).checked_next_multiple_of(align)?;
            (base.checked_add(size)? <= e.min(end)).then_some(base)
        });
        let base = found.ok_or(err)?;
        self.reserve(PhysAddr(base), size, name)?;
        Ok(PhysAddr(base))
    }

    /// `memblock_phys_free()` / `memblock_free()`: take `[base, base + size)`
    /// out of the reserved regions (splitting a region it falls inside).
    /// Returns the bytes that were reserved.
    pub fn free(&mut self, base: PhysAddr, size: u64) -> u64 {
        let (s, e) = (base.0, base.0.saturating_add(size));
        let mut freed = 0;
        let mut out = Vec::with_capacity(self.reserved.len() + 1);
        for r in self.reserved.drain(..) {
            if r.end() <= s || r.base.0 >= e {
                out.push(r);
                continue;
            }
            freed += r.end().min(e) - r.base.0.max(s);
            if r.base.0 < s {
                out.push(Region { size: s - r.base.0, ..r });
            }
            if r.end() > e {
                out.push(Region { base: PhysAddr(e), size: r.end() - e, name: r.name });
            }
        }
        self.reserved = out;
        freed
    }

    /// Pages covered by reservations (each page counted once).
    pub fn reserved_pages(&self) -> u64 {
        let mut pages = 0;
        let mut last_end = 0;
        for r in &self.reserved {
            let s = (r.base.0 / PAGE_SIZE).max(last_end);
            let e = r.end().div_ceil(PAGE_SIZE);
            if e > s {
                pages += e - s;
                last_end = e;
            }
        }
        pages
    }

    /// `memblock_free_all()` walk: call `f(pfn, order)` for every free range
    /// split into the largest naturally aligned blocks of at most
    /// `MAX_PAGE_ORDER`, as `__free_pages_memory()` does. Partial pages at
    /// the edges of a range are not freed.
    pub fn for_each_free_block(&self, mut f: impl FnMut(Pfn, u32)) {
        for (s, e) in self.free_ranges() {
            free_pages_memory(s.div_ceil(PAGE_SIZE), e / PAGE_SIZE, &mut f);
        }
    }
}

/// Mirrors mm/memblock.c `__free_pages_memory()`: cover `[start, end)` (PFNs)
/// with the largest aligned power-of-two blocks.
pub fn free_pages_memory(mut start: u64, end: u64, f: &mut impl FnMut(Pfn, u32)) {
    while start < end {
        let mut order = if start == 0 { MAX_PAGE_ORDER } else { start.trailing_zeros().min(MAX_PAGE_ORDER) };
        while start + (1 << order) > end {
            order -= 1;
        }
        f(Pfn(start), order);
        start += 1 << order;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_top_down_and_aligned() {
        let mut m = Memblock::default();
        m.add(PhysAddr(0x4000_0000), 64 << 20);
        let a = m.alloc(0x1800, 0x1000, "a").unwrap();
        assert_eq!(a, PhysAddr(0x4000_0000 + (64 << 20) - 0x2000));
        let b = m.alloc(2 << 20, 2 << 20, "b").unwrap();
        assert_eq!(b, PhysAddr(0x4000_0000 + (60 << 20)));
        assert_eq!(m.reserved_pages(), 2 + 512);
        assert_eq!(
            m.free_ranges(),
            vec![
                (0x4000_0000, 0x4000_0000 + (60 << 20)),
                (0x4000_0000 + (62 << 20), 0x4000_0000 + (64 << 20) - 0x2000),
                // the tail of the page that `a` only partly uses
                (0x4000_0000 + (64 << 20) - 0x800, 0x4000_0000 + (64 << 20)),
            ]
        );
        assert!(m.alloc(1 << 30, 4096, "huge").is_err());
        assert!(m.reserve(PhysAddr(0x4000_0000 + (60 << 20)), 4096, "overlap").is_err());
    }

    #[test]
    fn neighbours_of_one_owner_merge() {
        let mut m = Memblock::default();
        m.add(PhysAddr(0x4000_0000), 64 << 20);
        m.add(PhysAddr(0x1_0000_0000), 16 << 20);
        // Page after page, top-down: one region.
        for _ in 0..1000 {
            m.alloc(PAGE_SIZE, PAGE_SIZE, "pgtable").unwrap();
        }
        assert_eq!(m.reserved().len(), 1);
        assert_eq!(m.reserved()[0].base.0, 0x1_0000_0000 + (16 << 20) - 1000 * PAGE_SIZE);
        // Another owner in between does not merge; filling the gap joins the three.
        let top = 0x1_0000_0000 + (16 << 20);
        m.reserve(PhysAddr(top - 1002 * PAGE_SIZE), PAGE_SIZE, "pgtable").unwrap();
        assert_eq!(m.reserved().len(), 2);
        m.reserve(PhysAddr(top - 1001 * PAGE_SIZE), PAGE_SIZE, "pgtable").unwrap();
        assert_eq!(m.reserved().len(), 1);
        m.reserve(PhysAddr(top - 1003 * PAGE_SIZE), PAGE_SIZE, "memmap").unwrap();
        assert_eq!(m.reserved().len(), 2);
        // Overlaps and ranges in the hole are refused.
        assert!(m.reserve(PhysAddr(top - PAGE_SIZE), 1, "x").is_err());
        assert!(m.reserve(PhysAddr(0x8000_0000), PAGE_SIZE, "x").is_err());
        // When the upper bank is full, allocation falls to the lower one.
        let low = m.alloc(15 << 20, PAGE_SIZE, "low").unwrap();
        assert_eq!(low.0, 0x4000_0000 + (64 << 20) - (15 << 20));
        assert!(matches!(m.alloc(60 << 20, PAGE_SIZE, "big"), Err(MemblockError::NoSpace { .. })));
    }

    #[test]
    fn range_limits_bottom_up_and_free() {
        let mut m = Memblock::default();
        m.add(PhysAddr(0x4000_0000), 1 << 30);
        // Top-down below a limit, aligned: the CMA placement.
        let cma = m.alloc_range(64 << 20, 2 << 20, 0, 0x7000_0000, "cma").unwrap();
        assert_eq!(cma.0, 0x7000_0000 - (64 << 20));
        // Bottom-up from a floor.
        let b = m.alloc_range_bottom_up(4096, 4096, 0x4000_1800, u64::MAX, "b").unwrap();
        assert_eq!(b.0, 0x4000_2000);
        assert!(m.alloc_range_bottom_up(4096, 4096, 0x8000_0000, u64::MAX, "c").is_err());
        assert!(m.alloc_range(4096, 4096, 0x7000_0000, 0x7000_0000, "d").is_err());
        // Freeing the middle of a region splits it; freeing again frees nothing.
        m.reserve(PhysAddr(0x5000_0000), 5 * PAGE_SIZE, "kernel").unwrap();
        assert_eq!(m.free(PhysAddr(0x5000_1000), 2 * PAGE_SIZE), 2 * PAGE_SIZE);
        assert_eq!(m.free(PhysAddr(0x5000_1000), 2 * PAGE_SIZE), 0);
        let k: Vec<(u64, u64)> =
            m.reserved().iter().filter(|r| r.name == "kernel").map(|r| (r.base.0, r.size)).collect();
        assert_eq!(k, [(0x5000_0000, PAGE_SIZE), (0x5000_3000, 2 * PAGE_SIZE)]);
        assert_eq!(m.reserved_pages(), 16384 + 1 + 3);
    }

    #[test]
    fn free_blocks_are_largest_aligned() {
        let mut got = vec![];
        free_pages_memory(0x40003, 0x40c05, &mut |p, o| got.push((p.0, o)));
        assert_eq!(
            got,
            vec![
                (0x40003, 0),
                (0x40004, 2),
                (0x40008, 3),
                (0x40010, 4),
                (0x40020, 5),
                (0x40040, 6),
                (0x40080, 7),
                (0x40100, 8),
                (0x40200, 9),
                (0x40400, 10),
                (0x40800, 10),
                (0x40c00, 2),
                (0x40c04, 0),
            ]
        );
        let total: u64 = got.iter().map(|(_, o)| 1u64 << o).sum();
        assert_eq!(total, 0x40c05 - 0x40003);
    }
}
