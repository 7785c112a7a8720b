//! `vrealloc()` (Linux 7.2's `vrealloc_node_align_noprof()`), for
//! vmalloc'd areas of order-0 pages.
//!
//! The kernel keeps two sizes per area: `vm->nr_pages` pages are allocated
//! and mapped, `vm->requested_size` bytes were asked for. A call resizes in
//! place whenever the pages allow it:
//!
//! | new size | what happens |
//! |---|---|
//! | 0 | `vfree()`, returns NULL |
//! | `p` is NULL | `__vmalloc_node()` |
//! | ≤ requested size, fewer pages | the tail pages are unmapped (`vunmap_range()`, with its TLB flush) and freed (`vm_area_free_pages()`); `nr_pages` shrinks. Only for areas of order-0 pages and a gfp that allows IO and FS, as the kernel's |
//! | ≤ requested size, same pages | the requested size is lowered |
//! | ≤ `nr_pages` pages | the requested size is raised, in place |
//! | larger | a new area (`__vmalloc_node()`), the old contents copied, the old area freed |
//!
//! The kernel zeroes the bytes beyond a shrunk size under `init_on_free` or
//! `init_on_alloc`; Debian's arm64 config has neither on by default, and
//! mmlab does not. The copy of a grow goes through the emulated MMU, so the
//! contents survive as they do on the kernel.
//!
//! Fidelity: faithful to 7.2 for the paths above; the area is looked up in
//! the busy tree (`find_vm_area()`), and an address that is not a vmalloc
//! area's start is a typed error where the kernel WARNs and returns NULL.
//! An area queued by `kvfree_rcu()` and not yet freed is still in the busy
//! tree, but the queue owns it: resizing it is a use after free (the
//! kernel would resize memory that a grace period later frees), refused
//! as [`VmallocError::DoubleFree`], as `vfree` refuses it.

use crate::area::AreaKind;
use crate::counts::CallCount;
use crate::error::VmallocError;
use crate::vmalloc::Vmalloc;
use mmlab_engine::arch::arm64::pgtable::{self, mmu};
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::{Cpu, PAGE_SIZE};
use std::sync::atomic::Ordering::Acquire;

impl<'m> Vmalloc<'_, 'm> {
    /// `vrealloc(p, size, gfp)`: resize the vmalloc area at `p` (or allocate
    /// one when `p` is `None`); returns the area's address, which is `p`
    /// when it was resized in place, and `None` for a size of 0 (`p` freed).
    ///
    /// # Errors
    /// As [`Vmalloc::vmalloc`] and [`Vmalloc::vfree`]; [`VmallocError::WrongKind`] for a vmap or
    /// vm_map_ram area, [`VmallocError::DoubleFree`] for one queued by `kvfree_rcu`. On an error
    /// `p` is unchanged.
    pub fn vrealloc(&self, cpu: &Cpu<'m>, p: Option<u64>, size: u64, gfp: Gfp) -> Result<Option<u64>, VmallocError> {
        self.this_machine(cpu)?;
        if size == 0 {
            if let Some(p) = p {
                self.vfree(cpu, p)?;
            }
            return Ok(None);
        }
        let Some(p) = p else {
            return self.vmalloc_node(cpu, size, 1, gfp, super::VmFlags::empty(), "vrealloc").map(Some);
        };
        if self.kvfree_nr.load(Acquire) != 0 {
            self.kvfree_drain_ready(cpu);
            // Queued by kvfree_rcu: the queue owns it (found by `mmlab fuzz`:
            // a resize went ahead, and a grow's vfree of the old area then
            // failed with the new area lost).
            if self.kvfree_queued(p) {
                return Err(VmallocError::DoubleFree { addr: p });
            }
        }
        let old_size = {
            let mut busy = self.busy_lock(cpu, p);
            let Some(area) = busy.get_mut(&p) else {
                drop(busy);
                return Err(self.no_area_at(p));
            };
            if area.kind != AreaKind::Vmalloc {
                return Err(VmallocError::WrongKind { addr: p });
            }
            let old_size = area.requested_size;
            let nr_pages = area.pages.len() as u64;
            if size <= old_size {
                let new_nr_pages = size.div_ceil(PAGE_SIZE);
                let may_free =
                    new_nr_pages < nr_pages && area.page_order == 0 && gfp.contains(Gfp::__GFP_IO | Gfp::__GFP_FS);
                let tail = if may_free { area.pages.split_off(new_nr_pages as usize) } else { Vec::new() };
                area.requested_size = size;
                area.leaf_entries -= tail.len() as u64;
                drop(busy);
                if !tail.is_empty() {
                    let start = p + new_nr_pages * PAGE_SIZE;
                    let flush = pgtable::unmap_range(cpu, &self.asp, start, tail.len() as u64 * PAGE_SIZE)
                        .expect("the tail of a vmalloc area of order-0 pages is mapped page by page");
                    flush.flush(cpu);
                    self.count_call(cpu, CallCount::PteEntries, tail.len() as u64);
                    self.free_area_pages(cpu, &tail);
                }
                return Ok(Some(p));
            }
            if size <= nr_pages * PAGE_SIZE {
                area.requested_size = size;
                return Ok(Some(p));
            }
            old_size
        };
        let n = self.vmalloc_node(cpu, size, 1, gfp, super::VmFlags::empty(), "vrealloc")?;
        let mut buf = vec![0u8; old_size.min(size) as usize];
        mmu::read_bytes(cpu, &self.asp, p, &mut buf)
            .and_then(|()| mmu::write_bytes(cpu, &self.asp, n, &buf))
            .expect("both areas are mapped over their requested sizes");
        self.vfree(cpu, p)?;
        Ok(Some(n))
    }
}
