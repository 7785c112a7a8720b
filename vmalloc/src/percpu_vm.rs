//! The vmalloc side of a percpu chunk (mm/percpu-vm.c with
//! `pcpu_get_vm_areas()` and `pcpu_free_vm_areas()` of mm/vmalloc.c).
//!
//! A chunk's area is found top down, from the end of the vmalloc range,
//! without a guard page, and recorded as `VM_ALLOC` with `nr_pages` 0: its
//! pages belong to the chunk, which allocates them itself and maps them
//! unit by unit (`pcpu_populate_chunk()` → `pcpu_alloc_pages()`,
//! `pcpu_map_pages()`), and unmaps them with one TLB flush over the chunk
//! before freeing them (`pcpu_depopulate_chunk()`). The area is
//! [`AreaKind::Percpu`]: `vfree()` of it is refused with
//! [`VmallocError::WrongKind`] (the kernel would unmap a live chunk and
//! hand its range to the next vmalloc; found by probing `mmlab fuzz`'s
//! calls), and only [`Vmalloc::pcpu_free_vm_areas`] gives it back.
//!
//! Fidelity: faithful in placement, flags, the per-unit mapping and its
//! flushes; simplified in that `pcpu_get_vm_areas()` takes one group (the
//! kernel's can place several).

use crate::area::{AreaKind, VM_ALLOC, VM_NO_GUARD, VmArea};
use crate::error::VmallocError;
use crate::vmalloc::Vmalloc;
use mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL;
use mmlab_engine::arch::arm64::pgtable::{self, PgtableError};
use mmlab_engine::arch::arm64::tlb::TlbFlush;
use mmlab_engine::{Cpu, PAGE_SHIFT, PAGE_SIZE, Pfn};

impl<'m> Vmalloc<'_, 'm> {
    /// `pcpu_get_vm_areas()` for one group of `size` bytes aligned to
    /// `align`: the highest free range of the vmalloc space that fits
    /// (`pvm_find_va_enclose_addr(vmalloc_end)` and down), no guard page,
    /// recorded as a `VM_ALLOC` area of kind [`AreaKind::Percpu`] without
    /// pages, caller `pcpu_get_vm_areas+0x0/0x10c8`.
    ///
    /// # Errors
    /// [`VmallocError::ZeroSize`], [`VmallocError::BadAlign`], [`VmallocError::NoVmapSpace`],
    /// [`VmallocError::ForeignCpu`]. Nothing is taken on error.
    pub fn pcpu_get_vm_areas(&self, cpu: &Cpu<'m>, size: u64, align: u64) -> Result<u64, VmallocError> {
        self.this_machine(cpu)?;
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(VmallocError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(VmallocError::BadAlign { align });
        }
        let align = align.max(PAGE_SIZE);
        let addr = {
            let mut free = self.free.lock();
            let base = free
                .iter()
                .filter_map(|a| {
                    let base = a.end.checked_sub(size)? & !(align - 1);
                    (base >= a.start).then_some(base)
                })
                .last()
                .ok_or(VmallocError::NoVmapSpace { size, align })?;
            free.alloc(size, align, base, base + size).map_err(|_| VmallocError::NoVmapSpace { size, align })?
        };
        let area = VmArea {
            addr,
            size,
            flags: VM_ALLOC | VM_NO_GUARD,
            kind: AreaKind::Percpu,
            pages: Vec::new(),
            requested_size: size,
            leaf_entries: 0,
            page_order: 0,
            caller: "pcpu_get_vm_areas+0x0/0x10c8",
            array_area: None,
            vn: self.cpu_node(cpu),
            phys_addr: None,
        };
        self.busy_lock(cpu, addr).insert(addr, Box::new(area));
        Ok(addr)
    }

    /// `pcpu_map_pages()` → `__pcpu_map_pages()`: map `pages` (the chunk's,
    /// allocated by the caller) at `addr` inside a percpu area
    /// (`vmap_pages_range_noflush`, then one flush).
    ///
    /// # Errors
    /// [`VmallocError::NotVmalloc`] for an address outside a percpu area,
    /// [`VmallocError::NoMemory`] for a page table, [`VmallocError::ForeignCpu`].
    pub fn pcpu_map_pages(&self, cpu: &Cpu<'m>, addr: u64, pages: &[Pfn]) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        self.percpu_area_covers(addr, pages.len() as u64)?;
        self.vmap_pages_range(cpu, addr, pages, PAGE_KERNEL, PAGE_SHIFT).map(|_| ()).map_err(|e| match e {
            PgtableError::NoMemory => VmallocError::NoMemory { size: pages.len() as u64 * PAGE_SIZE },
            other => VmallocError::Map(other),
        })
    }

    /// `pcpu_free_vm_areas()` → `free_vm_area()`: give back the area
    /// [`Vmalloc::pcpu_get_vm_areas`] returned at `addr` (whatever is still
    /// mapped in it is unmapped; the range goes lazy). Its pages are the
    /// chunk's: unmap and free them first ([`Vmalloc::pcpu_unmap_pages`]).
    ///
    /// # Errors
    /// As [`Vmalloc::vfree`]'s lookup; [`VmallocError::WrongKind`] for an area
    /// that is not a percpu chunk's. Nothing is changed.
    pub fn pcpu_free_vm_areas(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        let area = self.find_unlink_kind(cpu, addr, AreaKind::Percpu)?;
        self.remove_vm_area(cpu, &area);
        Ok(())
    }

    /// `pcpu_unmap_pages()` → `__pcpu_unmap_pages()`: clear `nr` pages at
    /// `addr` inside a percpu area (`vunmap_range_noflush`); the flush is
    /// the caller's ([`Vmalloc::pcpu_post_unmap_tlb_flush`]).
    ///
    /// # Errors
    /// [`VmallocError::NotVmalloc`] for a range outside a percpu area,
    /// [`VmallocError::Map`] for a range not mapped page by page,
    /// [`VmallocError::ForeignCpu`].
    pub fn pcpu_unmap_pages(&self, cpu: &Cpu<'m>, addr: u64, nr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        self.percpu_area_covers(addr, nr)?;
        pgtable::vunmap_range_noflush(cpu, &self.asp, addr, nr * PAGE_SIZE).map_err(VmallocError::Map)
    }

    /// `pcpu_post_unmap_tlb_flush()`: one `flush_tlb_kernel_range()` over
    /// the chunk's unmapped span.
    pub fn pcpu_post_unmap_tlb_flush(&self, cpu: &Cpu<'m>, start: u64, end: u64) {
        TlbFlush::kernel_range(start, end).flush(cpu);
    }

    /// The size of the percpu chunk area that starts at `addr`, if there is
    /// one (for the percpu allocator's check).
    pub(crate) fn percpu_area_size(&self, addr: u64) -> Option<u64> {
        let node = self.busy[self.node_of(addr)].lock();
        node.get(&addr).filter(|a| a.kind == AreaKind::Percpu).map(|a| a.size)
    }

    /// Is `[addr, addr + nr pages)` inside one percpu chunk's area?
    fn percpu_area_covers(&self, addr: u64, nr: u64) -> Result<(), VmallocError> {
        let end = addr.checked_add(nr * PAGE_SIZE).ok_or(VmallocError::NotVmalloc { addr })?;
        let inside = self.busy.iter().any(|node| {
            node.lock()
                .range(..=addr)
                .next_back()
                .is_some_and(|(_, a)| a.kind == AreaKind::Percpu && end <= a.addr + a.size)
        });
        if nr == 0 || !inside {
            return Err(VmallocError::NotVmalloc { addr });
        }
        Ok(())
    }
}
