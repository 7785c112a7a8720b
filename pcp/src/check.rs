//! `check_invariants()`: every frame in exactly one state, and every list and
//! counter agreeing with the frames.

use crate::page_alloc::PageAllocator;
use crate::pageset::{NR_PCP_LISTS, pindex_to_order};
use bitvec::prelude::*;
use mmlab_engine::Pfn;
use mmlab_engine::mm::page::PageExt;

impl PageAllocator<'_> {
    /// Check the whole allocator: the free lists (see
    /// `Zone::check_free_lists`), every pcp list (entries are pcp-state heads
    /// of their list's order, aligned, refcount 0, counts agree), and every
    /// frame of RAM: it is in exactly one free block or pcp block, or is the
    /// head or a tail of one allocation, or is reserved. Nothing is lost.
    /// O(frames): for tests and the debug switch.
    ///
    /// # Errors
    /// The first inconsistency found, described (a bug in mmlab).
    pub fn check_invariants(&self) -> Result<(), String> {
        let m = self.m;
        let mem = m.memmap();
        let start = mem.start_pfn().0;
        let n = mem.nr_pages() as usize;
        let mut seen = bitvec![0; n];
        let mark = |seen: &mut BitVec, pfn: Pfn, order: u32, what: &str| -> Result<(), String> {
            let i = (pfn.0 - start) as usize;
            let len = 1usize << order;
            if i + len > n {
                return Err(format!("{what} {pfn} order {order} runs past the end of RAM"));
            }
            // Order 0 is most blocks: one bit, no range walk.
            let overlaps = if len == 1 {
                seen.replace(i, true)
            } else {
                let any = seen[i..i + len].any();
                seen[i..i + len].fill(true);
                any
            };
            if overlaps {
                return Err(format!("{what} {pfn} order {order} overlaps another free or allocated block"));
            }
            Ok(())
        };
        for (zi, z) in self.node.zones().iter().enumerate() {
            for (pfn, order) in z.check_free_lists()? {
                mark(&mut seen, pfn, order, "free block")?;
                if self.page_zone_idx(pfn) != zi {
                    return Err(format!(
                        "free block {pfn} is on the lists of zone {zi} but its page says zone {}",
                        self.page_zone_idx(pfn)
                    ));
                }
            }
        }
        for (i, pcp) in self.pcp.iter().enumerate() {
            let (zi, cpu) = (i / self.nr_cpus, i % self.nr_cpus);
            let pcp = pcp.lock();
            let mut pages = 0i64;
            for pindex in 0..NR_PCP_LISTS {
                let order = pindex_to_order(pindex);
                for pfn in pcp.lists.walk(mem, pindex)? {
                    let p = mem.page(pfn);
                    if p.ext() != PageExt::Pcp(order as u8) || p.is_buddy() || p.refcount() != 0 {
                        return Err(format!(
                            "cpu {cpu} pcp list {pindex}: pfn {pfn} state {:?} buddy {} ref {}",
                            p.ext(),
                            p.is_buddy(),
                            p.refcount()
                        ));
                    }
                    if !pfn.is_aligned_order(order) {
                        return Err(format!("cpu {cpu} pcp list {pindex}: pfn {pfn} not aligned to order {order}"));
                    }
                    mark(&mut seen, pfn, order, "pcp block")?;
                    if self.page_zone_idx(pfn) != zi {
                        return Err(format!("cpu {cpu} pcp list {pindex} of zone {zi}: pfn {pfn} is in another zone"));
                    }
                    pages += 1 << order;
                }
            }
            if pages != pcp.count as i64 {
                return Err(format!("cpu {cpu}: pcp count {} but {pages} pages on its lists", pcp.count));
            }
        }
        // Every other frame: reserved, or covered by an allocation.
        let mut i = 0usize;
        while i < n {
            // Skip what the lists accounted for a word at a time.
            match seen[i..].first_zero() {
                Some(z) => i += z,
                None => break,
            }
            let pfn = Pfn(start + i as u64);
            if !mem.pfn_valid(pfn) {
                // A section with no RAM (a hole between banks): no struct pages.
                i += 1;
                continue;
            }
            let p = mem.page(pfn);
            match p.ext() {
                PageExt::Reserved => i += 1,
                PageExt::Alloc(o, _) => {
                    if p.refcount() < 1 {
                        return Err(format!("allocated pfn {pfn} has refcount {}", p.refcount()));
                    }
                    mark(&mut seen, pfn, o as u32, "allocated block")?;
                    for t in 1..1u64 << o {
                        let tp = mem.page(pfn.add(t));
                        // A fake head (the hugetlb vmemmap optimisation maps
                        // this tail's struct page onto a copy of the head's)
                        // belongs to the allocation all the same.
                        if tp.ext() != PageExt::Tail && mem.page_fixed_fake_head(pfn.add(t)) != pfn {
                            return Err(format!("tail {} of allocation {pfn} is {:?}", pfn.add(t), tp.ext()));
                        }
                    }
                    i += 1 << o;
                }
                s => {
                    return Err(format!(
                        "pfn {pfn} is lost: state {s:?}, not on any free list, pcp list or allocation"
                    ));
                }
            }
        }
        Ok(())
    }
}
