//! `vb_alloc`, `vb_free` and `vm_unmap_ram`: vm_map_ram's side of the vmap
//! blocks (the parent module's docs).

use crate::area::AreaKind;
use crate::counts::CallCount;
use crate::error::VmallocError;
use crate::vmalloc::Vmalloc;
use crate::vmalloc::mod_nodes;
use crate::vmap_block::VMAP_BBMAP_BITS;
use crate::vmap_block::VMAP_BLOCK_SIZE;
use crate::vmap_block::VMAP_MAX_ALLOC;
use crate::vmap_block::VbAlloc;
use crate::vmap_block::VmapBlock;
use bitvec::BitArr;
use mmlab_engine::Cpu;
use mmlab_engine::PAGE_SIZE;
use mmlab_engine::arch::arm64::memory::VMALLOC_START;
use mmlab_engine::arch::arm64::pgtable;
use std::collections::BTreeMap;
impl<'m> Vmalloc<'_, 'm> {
    /// `vb_alloc()`: 2^order pages bump-allocated from one of this CPU's
    /// blocks (a new block when none has room), marked in `used_map`.
    pub(crate) fn vb_alloc(&self, cpu: &Cpu<'m>, count: usize) -> Result<u64, VmallocError> {
        let n = (count as u64).next_power_of_two();
        let take = |b: &mut VmapBlock| {
            let off = b.handed_out();
            b.free -= n;
            b.used_map[off as usize..(off + n) as usize].fill(true);
            b.allocs.insert(off, VbAlloc { order: n.trailing_zeros(), count: count as u64 });
            b.va_start + off * PAGE_SIZE
        };
        if let Some(b) = self.blocks.lock().values_mut().find(|b| b.cpu == cpu.id() && b.free >= n) {
            return Ok(take(b));
        }
        // new_vmap_block(): a 4 MiB area aligned to 4 MiB, no guard.
        let va = self.alloc_vmap_area(cpu, VMAP_BLOCK_SIZE, VMAP_BLOCK_SIZE)?;
        let mut b = VmapBlock {
            va_start: va,
            free: VMAP_BBMAP_BITS,
            dirty: 0,
            cpu: cpu.id(),
            used_map: Default::default(),
            allocs: BTreeMap::new(),
        };
        let addr = take(&mut b);
        self.blocks.lock().insert(va, b);
        Ok(addr)
    }

    /// `vm_unmap_ram(addr, count)`: `count` must be the count the mapping
    /// was made with. A wrong address or count is refused with nothing
    /// changed (the kernel BUGs or corrupts the block).
    ///
    /// # Errors
    /// [`VmallocError::NotVmalloc`], [`VmallocError::DoubleFree`],
    /// [`VmallocError::WrongCount`], [`VmallocError::WrongKind`] for a
    /// vmalloc or vmap area, [`VmallocError::ZeroSize`],
    /// [`VmallocError::ForeignCpu`].
    pub fn vm_unmap_ram(&self, cpu: &Cpu<'m>, addr: u64, count: usize) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        self.vm_unmap_ram_inner(cpu, addr, count, true)
    }

    pub(crate) fn vm_unmap_ram_inner(
        &self,
        cpu: &Cpu<'m>,
        addr: u64,
        count: usize,
        unmap: bool,
    ) -> Result<(), VmallocError> {
        if count == 0 {
            return Err(VmallocError::ZeroSize);
        }
        if !addr.is_multiple_of(PAGE_SIZE) || !(VMALLOC_START..self.vmalloc_end()).contains(&addr) {
            return Err(VmallocError::NotVmalloc { addr });
        }
        if count <= VMAP_MAX_ALLOC {
            return self.vb_free(cpu, addr, count, unmap);
        }
        let block_start = addr & !(VMAP_BLOCK_SIZE - 1);
        if let Some(b) = self.blocks.lock().get(&block_start) {
            // A block mapping given a count above VMAP_MAX_ALLOC.
            let off = (addr - block_start) / PAGE_SIZE;
            return Err(match b.allocs.get(&off) {
                Some(a) => VmallocError::WrongCount { addr, mapped: a.count, given: count },
                None => VmallocError::NotVmalloc { addr },
            });
        }
        let area = self.find_unlink(cpu, addr)?;
        let reserved = area.size / PAGE_SIZE;
        let err = if area.kind != AreaKind::VmMapRam {
            Some(VmallocError::WrongKind { addr })
        } else if reserved != count as u64 {
            Some(VmallocError::WrongCount { addr, mapped: reserved, given: count })
        } else {
            None
        };
        if let Some(e) = err {
            self.busy[self.node_of(addr)].lock().insert(addr, area);
            return Err(e);
        }
        if unmap {
            pgtable::unmap_range(cpu, &self.asp, addr, area.size).expect("a vm_map_ram area is mapped whole").ignore();
            self.count_unmap_ram(cpu, area.size / PAGE_SIZE);
        }
        self.free_vmap_area_noflush(cpu, addr, area.size, area.vn);
        Ok(())
    }

    /// Count a `vm_unmap_ram` that cleared `entries` PTEs.
    fn count_unmap_ram(&self, cpu: &Cpu<'m>, entries: u64) {
        self.count_call(cpu, CallCount::PteEntries, entries);
        self.count_call(cpu, CallCount::VmUnmapRams, 1);
    }

    /// `vb_free()`: check the range against the block's live allocations,
    /// unmap it without a flush, clear its `used_map` bits and count its
    /// pages dirty; a block whose every page is dirty goes lazy as a whole.
    fn vb_free(&self, cpu: &Cpu<'m>, addr: u64, count: usize, unmap: bool) -> Result<(), VmallocError> {
        let start = addr & !(VMAP_BLOCK_SIZE - 1);
        let off = (addr - start) / PAGE_SIZE;
        let n = (count as u64).next_power_of_two();
        let mut blocks = self.blocks.lock();
        let Some(b) = blocks.get_mut(&start) else {
            drop(blocks);
            // A block that went lazy, or a mapping of its own given a count
            // small enough for a block.
            if self.lazy.contains(start) {
                return Err(VmallocError::DoubleFree { addr });
            }
            if let Some(a) = self.busy[self.node_of(addr)].lock().get(&addr)
                && a.kind == AreaKind::VmMapRam
            {
                return Err(VmallocError::WrongCount { addr, mapped: a.size / PAGE_SIZE, given: count });
            }
            return Err(VmallocError::NotVmalloc { addr });
        };
        match b.allocs.get(&off) {
            Some(a) if a.count == count as u64 => {}
            Some(a) => return Err(VmallocError::WrongCount { addr, mapped: a.count, given: count }),
            None if off < b.handed_out() && !b.used_map[off as usize] => {
                return Err(VmallocError::DoubleFree { addr });
            }
            None => return Err(VmallocError::NotVmalloc { addr }),
        }
        if unmap {
            pgtable::unmap_range(cpu, &self.asp, addr, count as u64 * PAGE_SIZE).map_err(VmallocError::Map)?.ignore();
            self.count_unmap_ram(cpu, count as u64);
        }
        b.allocs.remove(&off);
        b.used_map[off as usize..(off + n) as usize].fill(false);
        b.dirty += n;
        if b.dirty == VMAP_BBMAP_BITS {
            // The block's area goes lazy on the node of the CPU that
            // allocated it (`free_vmap_block()` → `free_vmap_area_noflush()`).
            let vn = mod_nodes(b.cpu as u64, self.busy.len());
            blocks.remove(&start);
            drop(blocks);
            self.free_vmap_area_noflush(cpu, start, VMAP_BLOCK_SIZE, vn);
        }
        Ok(())
    }

    /// One vmap block: its `used_map` is exactly the union of its live
    /// allocations, live plus dirty pages are the pages handed out, and
    /// nothing in the block is mapped outside a live allocation.
    pub(crate) fn check_vmap_block(&self, b: &VmapBlock) -> Result<(), String> {
        let what = format!("vmap block {:#x}", b.va_start);
        let mut want: BitArr!(for VMAP_BBMAP_BITS as usize, in u64) = Default::default();
        let mut live = 0;
        for (&off, &VbAlloc { order: o, .. }) in &b.allocs {
            let r = off as usize..(off + (1 << o)) as usize;
            if r.end as u64 > b.handed_out() || want[r.clone()].any() {
                return Err(format!("{what}: allocation at page {off} (order {o}) overlaps or lies beyond the bump"));
            }
            want[r].fill(true);
            live += 1u64 << o;
        }
        if want != b.used_map {
            return Err(format!("{what}: used_map disagrees with the live allocations"));
        }
        if live + b.dirty != b.handed_out() || b.dirty >= VMAP_BBMAP_BITS {
            return Err(format!("{what}: {live} live + {} dirty pages, but {} handed out", b.dirty, b.handed_out()));
        }
        for (va, span) in pgtable::leaves(self.m, &self.asp, b.va_start, b.va_start + VMAP_BLOCK_SIZE) {
            let first = (va.max(b.va_start) - b.va_start) / PAGE_SIZE;
            let last = ((va + span).min(b.va_start + VMAP_BLOCK_SIZE) - b.va_start) / PAGE_SIZE;
            if !b.used_map[first as usize..last as usize].all() {
                return Err(format!("{what}: {va:#x} is mapped but not part of a live vm_map_ram mapping"));
            }
        }
        Ok(())
    }
}
