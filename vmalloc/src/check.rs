//! The invariant check of the whole vmalloc range, split out of vmalloc.rs by
//! job: the free tree's own check, then busy areas, vmap blocks, lazy
//! areas, node pools, free areas and the reserved list-head window (on a
//! machine without the image) must tile `[VMALLOC_START, VMALLOC_END)`
//! with no overlap and no gap; `vmap_lazy_nr` must equal the
//! pages waiting; every vmap block must agree with its live allocations.

use crate::lazy::LazyArea;
use crate::vmalloc::Vmalloc;
use crate::vmap_block::VMAP_BLOCK_SIZE;
use mmlab_engine::PAGE_SIZE;
use mmlab_engine::arch::arm64::memory::VMALLOC_START;
impl Vmalloc<'_, '_> {
    /// Check the free tree and that busy, lazy and free ranges tile the
    /// vmalloc range with no overlap and no gap.
    ///
    /// # Errors
    /// The first inconsistency found, described (a bug in mmlab).
    pub fn check(&self) -> Result<(), String> {
        let free = self.free.lock();
        free.check()?;
        let mut ranges: Vec<(u64, u64, &str)> = free.iter().map(|a| (a.start, a.end, "free")).collect();
        self.for_each_area(|a| ranges.push((a.addr, a.addr + a.size, "busy")));
        ranges.extend(self.blocks.lock().values().map(|b| (b.va_start, b.va_start + VMAP_BLOCK_SIZE, "vmap block")));
        let lazy = self.lazy.snapshot();
        ranges.extend(lazy.iter().map(|a| (a.start, a.start + a.size, "lazy")));
        for node in self.pools.iter() {
            for (i, pool) in node.lock().iter().enumerate() {
                ranges.extend(pool.iter().map(|&a| (a, a + (i as u64 + 1) * PAGE_SIZE, "pool")));
            }
        }
        ranges.extend(self.reserved.map(|(s, e)| (s, e, "reserved")));
        ranges.sort();
        let mut cur = VMALLOC_START;
        for (s, e, what) in ranges {
            if s != cur {
                return Err(format!("{what} range {s:#x}-{e:#x}: expected to start at {cur:#x}"));
            }
            cur = e;
        }
        if cur != self.vmalloc_end() {
            return Err(format!("ranges end at {cur:#x}, not VMALLOC_END"));
        }
        let waiting: i64 = lazy.iter().map(LazyArea::pages).sum();
        if self.lazy.nr() != waiting {
            return Err(format!("vmap_lazy_nr is {} but {waiting} pages wait on the lazy lists", self.lazy.nr()));
        }
        drop(free);
        for b in self.blocks.lock().values() {
            self.check_vmap_block(b)?;
        }
        Ok(())
    }
}
