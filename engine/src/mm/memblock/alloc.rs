//! memblock's allocation side: the walk over free memory
//! (`__next_mem_range()` and `__next_mem_range_rev()`), the search for a
//! place in both directions, the allocation functions, and the walk that
//! `memblock_free_all()` makes.

use super::{
    MEMBLOCK_ALLOC_ACCESSIBLE, MEMBLOCK_ALLOC_NOLEAKTRACE, MEMBLOCK_LOW_LIMIT, Memblock, MemblockError, MemblockFlags,
    NUMA_NO_NODE, PHYS_ADDR_MAX, Region, SMP_CACHE_BYTES, free_pages_memory, numa_valid_node,
};
use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};

/// Mirrors mm/memblock.c `should_skip_region()` for the memory array: skip
/// memory of another node when `nid` is a node (not [`NUMA_NO_NODE`]),
/// `NOMAP` and `DRIVER_MANAGED` memory unless `flags` asks for it, and
/// non-mirrored (non-scratch) memory when `flags` asks for mirrored
/// (scratch) memory. Hotplug memory is never skipped: `movable_node` is not
/// modelled.
fn should_skip_region(m: &Region, nid: i32, flags: MemblockFlags) -> bool {
    (numa_valid_node(nid) && nid != m.nid)
        || (flags.contains(MemblockFlags::MIRROR) && !m.flags.contains(MemblockFlags::MIRROR))
        || (!flags.contains(MemblockFlags::NOMAP) && m.flags.contains(MemblockFlags::NOMAP))
        || (!flags.contains(MemblockFlags::DRIVER_MANAGED) && m.flags.contains(MemblockFlags::DRIVER_MANAGED))
        || (flags.contains(MemblockFlags::KHO_SCRATCH) && !m.flags.contains(MemblockFlags::KHO_SCRATCH))
}

/// The free ranges (memory less reserved) on node `nid` ([`NUMA_NO_NODE`]:
/// on any node), one per piece of each memory region between
/// reservations, as `for_each_free_mem_range` (forward:
/// `__next_mem_range()`) and `for_each_free_mem_range_reverse` (backward:
/// `__next_mem_range_rev()`) yield them. `idx_b` counts the gaps between
/// reservations: gap `i` lies between `reserved[i - 1]` and `reserved[i]`,
/// gap 0 starting at 0 and the last ending at [`PHYS_ADDR_MAX`]. A gap
/// between two reservations that touch is empty and yields an empty range,
/// as in the kernel.
struct FreeRanges<'a> {
    memory: &'a [Region],
    reserved: &'a [Region],
    nid: i32,
    flags: MemblockFlags,
    idx_a: isize,
    idx_b: isize,
    reverse: bool,
}

impl<'a> FreeRanges<'a> {
    fn new(mb: &'a Memblock, nid: i32, flags: MemblockFlags, reverse: bool) -> Self {
        let (memory, reserved) = (&mb.memory.regions[..], &mb.reserved.regions[..]);
        let (idx_a, idx_b) = if reverse { (memory.len() as isize - 1, reserved.len() as isize) } else { (0, 0) };
        FreeRanges { memory, reserved, nid, flags, idx_a, idx_b, reverse }
    }

    /// Gap `i` between reservations.
    fn gap(&self, i: isize) -> (u64, u64) {
        let i = i as usize;
        let start = if i > 0 { self.reserved[i - 1].end() } else { 0 };
        let end = if i < self.reserved.len() { self.reserved[i].base.0 } else { PHYS_ADDR_MAX };
        (start, end)
    }

    /// Mirrors `__next_mem_range()` with both arrays.
    fn next_forward(&mut self) -> Option<(u64, u64)> {
        while (self.idx_a as usize) < self.memory.len() {
            let m = &self.memory[self.idx_a as usize];
            let (m_start, m_end) = (m.base.0, m.end());
            if should_skip_region(m, self.nid, self.flags) {
                self.idx_a += 1;
                continue;
            }
            while (self.idx_b as usize) < self.reserved.len() + 1 {
                let (r_start, r_end) = self.gap(self.idx_b);
                if r_start >= m_end {
                    break;
                }
                if m_start < r_end {
                    // The one that ends first moves on.
                    if m_end <= r_end {
                        self.idx_a += 1;
                    } else {
                        self.idx_b += 1;
                    }
                    return Some((m_start.max(r_start), m_end.min(r_end)));
                }
                self.idx_b += 1;
            }
            self.idx_a += 1;
        }
        None
    }

    /// Mirrors `__next_mem_range_rev()` with both arrays.
    fn next_reverse(&mut self) -> Option<(u64, u64)> {
        while self.idx_a >= 0 {
            let m = &self.memory[self.idx_a as usize];
            let (m_start, m_end) = (m.base.0, m.end());
            if should_skip_region(m, self.nid, self.flags) {
                self.idx_a -= 1;
                continue;
            }
            while self.idx_b >= 0 {
                let (r_start, r_end) = self.gap(self.idx_b);
                if r_end <= m_start {
                    break;
                }
                if m_end > r_start {
                    // The one that starts last moves on.
                    if m_start >= r_start {
                        self.idx_a -= 1;
                    } else {
                        self.idx_b -= 1;
                    }
                    return Some((m_start.max(r_start), m_end.min(r_end)));
                }
                self.idx_b -= 1;
            }
            self.idx_a -= 1;
        }
        None
    }
}

impl Iterator for FreeRanges<'_> {
    type Item = (u64, u64);
    fn next(&mut self) -> Option<(u64, u64)> {
        if self.reverse { self.next_reverse() } else { self.next_forward() }
    }
}

impl Memblock {
    /// Mirrors mm/memblock.c `memblock_find_in_range_node()` (with
    /// `__memblock_find_range_top_down()` and
    /// `__memblock_find_range_bottom_up()`): the first place for `size`
    /// bytes aligned to `align` (a power of two) inside `[start, end)` on
    /// node `nid` ([`NUMA_NO_NODE`]: any), in memblock's direction. `end`
    /// [`MEMBLOCK_ALLOC_ACCESSIBLE`] means `current_limit`; the first page
    /// is never handed out.
    fn find_in_range_node(
        &self,
        size: u64,
        align: u64,
        start: u64,
        end: u64,
        nid: i32,
        flags: MemblockFlags,
    ) -> Option<u64> {
        let end = if end == MEMBLOCK_ALLOC_ACCESSIBLE || end == MEMBLOCK_ALLOC_NOLEAKTRACE {
            self.current_limit
        } else {
            end
        };
        let start = start.max(PAGE_SIZE);
        let end = end.max(start);
        let clamp = |x: u64| x.max(start).min(end);
        if self.bottom_up {
            FreeRanges::new(self, nid, flags, false).find_map(|(s, e)| {
                let (this_start, this_end) = (clamp(s), clamp(e));
                let cand = this_start.checked_next_multiple_of(align)?;
                (cand < this_end && this_end - cand >= size).then_some(cand)
            })
        } else {
            FreeRanges::new(self, nid, flags, true).find_map(|(s, e)| {
                let (this_start, this_end) = (clamp(s), clamp(e));
                if this_end < size {
                    return None;
                }
                let cand = (this_end - size) & !(align - 1);
                (cand >= this_start).then_some(cand)
            })
        }
    }

    /// Mirrors mm/memblock.c `memblock_alloc_range_nid()`: find a place in
    /// `[start, end)` on node `nid` in memblock's direction and reserve it
    /// for `name` with `MEMBLOCK_RSRV_KERN` and that node id. When the node
    /// has no such place and `exact_nid` is false, any node will do, and
    /// the reservation is then made as `memblock_reserve_kern()` makes it
    /// (no node). [`NUMA_NO_NODE`] asks for any node from the start.
    /// Alignment 0 means [`SMP_CACHE_BYTES`] (the kernel warns with a stack
    /// dump). As in the kernel, size 0 finds a place and reserves nothing.
    ///
    /// # Errors
    ///
    /// [`MemblockError::BadAlign`] if `align` is not a power of two;
    /// [`MemblockError::BadNode`] if `nid` is neither a node id nor
    /// [`NUMA_NO_NODE`] (the kernel takes it for any node);
    /// [`MemblockError::NoSpace`] if no free range in `[start, end)` fits.
    #[allow(clippy::too_many_arguments)]
    pub fn alloc_range_nid(
        &mut self,
        size: u64,
        align: u64,
        start: u64,
        end: u64,
        nid: i32,
        exact_nid: bool,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        let align = if align == 0 { SMP_CACHE_BYTES } else { align };
        if !align.is_power_of_two() {
            return Err(MemblockError::BadAlign { align, name });
        }
        if nid != NUMA_NO_NODE && !numa_valid_node(nid) {
            return Err(MemblockError::BadNode { nid, name });
        }
        // choose_memblock_flags(): no mirrored memory, no kexec handover.
        let flags = MemblockFlags::empty();
        if let Some(base) = self.find_in_range_node(size, align, start, end, nid, flags) {
            self.reserve_nid(PhysAddr(base), size, nid, MemblockFlags::RSRV_KERN, name);
            return Ok(PhysAddr(base));
        }
        if numa_valid_node(nid)
            && !exact_nid
            && let Some(base) = self.find_in_range_node(size, align, start, end, NUMA_NO_NODE, flags)
        {
            self.reserve_kern(PhysAddr(base), size, name);
            return Ok(PhysAddr(base));
        }
        Err(MemblockError::NoSpace { size, align, name })
    }

    /// Mirrors `memblock_phys_alloc()`: `size` bytes aligned to `align`
    /// below `current_limit`, in memblock's direction (top-down unless
    /// [`Memblock::set_bottom_up`]), reserved for `name`.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc(&mut self, size: u64, align: u64, name: &'static str) -> Result<PhysAddr, MemblockError> {
        self.alloc_range(size, align, 0, MEMBLOCK_ALLOC_ACCESSIBLE, name)
    }

    /// Mirrors `memblock_phys_alloc_range()`: `size` bytes aligned to
    /// `align` inside `[start, end)` on any node, in memblock's direction
    /// (top-down: the highest place that fits), reserved for `name`.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc_range(
        &mut self,
        size: u64,
        align: u64,
        start: u64,
        end: u64,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        self.alloc_range_nid(size, align, start, end, NUMA_NO_NODE, false, name)
    }

    /// [`Memblock::alloc_range`] bottom-up whatever the direction: the
    /// lowest place in `[start, end)` that fits, as mm/cma.c
    /// `cma_alloc_mem()` asks with `memblock_set_bottom_up(true)` around the
    /// call. The direction is restored afterwards.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc_range_bottom_up(
        &mut self,
        size: u64,
        align: u64,
        start: u64,
        end: u64,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        let was = self.bottom_up;
        self.bottom_up = true;
        let r = self.alloc_range(size, align, start, end, name);
        self.bottom_up = was;
        r
    }

    /// Mirrors mm/memblock.c `memblock_alloc_internal()`: `max_addr` capped
    /// at `current_limit`, [`Memblock::alloc_range_nid`], and when nothing
    /// fits above `min_addr`, a second try without the lower limit (on the
    /// same node terms: `nid`, then any node unless `exact_nid`).
    #[allow(clippy::too_many_arguments)]
    fn alloc_internal(
        &mut self,
        size: u64,
        align: u64,
        min_addr: u64,
        max_addr: u64,
        nid: i32,
        exact_nid: bool,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        let max_addr = max_addr.min(self.current_limit);
        match self.alloc_range_nid(size, align, min_addr, max_addr, nid, exact_nid, name) {
            Err(MemblockError::NoSpace { .. }) if min_addr != 0 => {
                self.alloc_range_nid(size, align, 0, max_addr, nid, exact_nid, name)
            }
            r => r,
        }
    }

    /// Mirrors `memblock_alloc_try_nid()` and `memblock_alloc_try_nid_raw()`
    /// (one call: the memory is not zeroed, module docs): `size` bytes in
    /// `[min_addr, max_addr)`, tried in this order: on node `nid` above
    /// `min_addr`, on any node above it, on node `nid` below it, on any
    /// node below it (`memblock_alloc_internal()` around
    /// `memblock_alloc_range_nid()`). [`NUMA_NO_NODE`] asks for any node.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc_try_nid(
        &mut self,
        size: u64,
        align: u64,
        min_addr: u64,
        max_addr: u64,
        nid: i32,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        self.alloc_internal(size, align, min_addr, max_addr, nid, false, name)
    }

    /// Mirrors `memblock_alloc_exact_nid_raw()`: as
    /// [`Memblock::alloc_try_nid`] but on node `nid` only (above `min_addr`,
    /// then below it); never on another node.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc_exact_nid_raw(
        &mut self,
        size: u64,
        align: u64,
        min_addr: u64,
        max_addr: u64,
        nid: i32,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        self.alloc_internal(size, align, min_addr, max_addr, nid, true, name)
    }

    /// Mirrors include/linux/memblock.h `memblock_alloc_node()`: anywhere
    /// below `current_limit`, on node `nid` if it can.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc_node(
        &mut self,
        size: u64,
        align: u64,
        nid: i32,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        self.alloc_try_nid(size, align, MEMBLOCK_LOW_LIMIT, MEMBLOCK_ALLOC_ACCESSIBLE, nid, name)
    }

    /// Mirrors include/linux/memblock.h `memblock_alloc_from()`: above
    /// `min_addr` if it can, below `current_limit`, on any node.
    ///
    /// # Errors
    ///
    /// As [`Memblock::alloc_range_nid`].
    pub fn alloc_from(
        &mut self,
        size: u64,
        align: u64,
        min_addr: u64,
        name: &'static str,
    ) -> Result<PhysAddr, MemblockError> {
        self.alloc_try_nid(size, align, min_addr, MEMBLOCK_ALLOC_ACCESSIBLE, NUMA_NO_NODE, name)
    }

    /// Free (unreserved) ranges of RAM, in address order, as
    /// `for_each_free_mem_range(i, NUMA_NO_NODE, MEMBLOCK_NONE, ...)` yields
    /// them (`NOMAP` memory left out), empty ones dropped.
    pub fn free_ranges(&self) -> Vec<(u64, u64)> {
        FreeRanges::new(self, NUMA_NO_NODE, MemblockFlags::empty(), false).filter(|(s, e)| s < e).collect()
    }

    /// `memblock_free_all()` walk (`free_low_memory_core_early()` →
    /// `__free_memory_core()`): call `f(pfn, order)` for every free range
    /// split into the largest naturally aligned blocks of at most
    /// `MAX_PAGE_ORDER`, as `__free_pages_memory()` does. Partial pages at
    /// the edges of a range are not freed.
    pub fn for_each_free_block(&self, mut f: impl FnMut(Pfn, u32)) {
        for (s, e) in self.free_ranges() {
            free_pages_memory(s.div_ceil(PAGE_SIZE), e / PAGE_SIZE, &mut f);
        }
    }
}
