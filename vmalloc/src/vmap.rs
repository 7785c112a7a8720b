//! `vmap()`, `vunmap()` and `vm_map_ram()` (mm/vmalloc.c): mapping pages
//! the caller owns, through a vmap area of its own or, for small
//! `vm_map_ram()` requests, a slice of a per-CPU vmap block.

use crate::area::AreaKind;
use crate::area::VM_MAP;
use crate::area::VM_NO_GUARD;
use crate::area::VmArea;
use crate::counts::CallCount;
use crate::error::VmallocError;
use crate::vmalloc::Vmalloc;
use crate::vmap_block::VMAP_MAX_ALLOC;
use mmlab_engine::Cpu;
use mmlab_engine::PAGE_SHIFT;
use mmlab_engine::PAGE_SIZE;
use mmlab_engine::Pfn;
use mmlab_engine::arch::arm64::pgtable;
use mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL;
use mmlab_engine::arch::arm64::pgtable::desc::PgProt;
use mmlab_engine::arch::arm64::pgtable::desc::pgprot_nx;
use mmlab_engine::arch::arm64::tlb::TlbFlush;
impl<'a, 'm> Vmalloc<'a, 'm> {
    /// The checks of [`Vmalloc::vmap`] and [`Vmalloc::vm_map_ram`] before
    /// anything is taken: at least one page, each RAM and allocated.
    fn check_map_pages(&self, pages: &[Pfn]) -> Result<(), VmallocError> {
        if pages.is_empty() {
            return Err(VmallocError::ZeroSize);
        }
        for &pfn in pages {
            self.pa.check_allocated(pfn).map_err(|e| match e {
                mmlab_pcp::FreeError::InvalidPfn { pfn } => VmallocError::InvalidPfn { pfn },
                _ => VmallocError::PageNotAllocated { pfn },
            })?;
        }
        Ok(())
    }

    /// `vmap(pages, count, flags, prot)`: map caller-owned pages.
    ///
    /// Every page must be RAM and allocated, checked first, before any
    /// virtual space is taken ([`VmallocError::InvalidPfn`],
    /// [`VmallocError::PageNotAllocated`]). The kernel's
    /// `vmap_pages_pte_range()` checks `pfn_valid()` page by page while
    /// mapping (WARN, -EINVAL; `vmap()` then unmaps and frees the area);
    /// checking up front gives the same result without the partial
    /// mapping. The allocated-page check is mmlab's own: the kernel cannot
    /// tell, and may vmap reserved (memblock) pages, which mmlab refuses.
    ///
    /// # Errors
    /// [`VmallocError::ZeroSize`] for no pages, [`VmallocError::InvalidPfn`],
    /// [`VmallocError::PageNotAllocated`], [`VmallocError::NoVmapSpace`],
    /// [`VmallocError::NoMemory`] for a page table allocation, [`VmallocError::ForeignCpu`].
    /// Nothing is taken on error.
    pub fn vmap(&self, cpu: &Cpu<'m>, pages: &[Pfn], prot: PgProt) -> Result<u64, VmallocError> {
        self.this_machine(cpu)?;
        self.check_map_pages(pages)?;
        let size = pages.len() as u64 * PAGE_SIZE;
        let va_size = size + PAGE_SIZE;
        let addr = self.alloc_vmap_area(cpu, va_size, PAGE_SIZE)?;
        // vmap() maps without execute permission.
        let prot = pgprot_nx(prot);
        if self.vmap_pages_range(cpu, addr, pages, prot, PAGE_SHIFT).is_err() {
            let _ = pgtable::unmap_range(cpu, &self.asp, addr, size).map(TlbFlush::ignore);
            self.free_vmap_area_noflush(cpu, addr, va_size, self.cpu_node(cpu));
            return Err(VmallocError::NoMemory { size });
        }
        let area = VmArea {
            addr,
            size: va_size,
            flags: VM_MAP,
            kind: AreaKind::Vmap,
            pages: pages.to_vec(),
            requested_size: size,
            leaf_entries: 0,
            page_order: 0,
            caller: "vmap",
            array_area: None,
            vn: self.cpu_node(cpu),
            phys_addr: None,
        };
        self.busy_lock(cpu, addr).insert(addr, Box::new(area));
        Ok(addr)
    }

    /// `vunmap(addr)`: unmap a vmap area; the pages stay the caller's.
    ///
    /// # Errors
    /// [`VmallocError::NotVmalloc`], [`VmallocError::InsideArea`], [`VmallocError::DoubleFree`],
    /// [`VmallocError::WrongKind`] for an area that vmap did not make,
    /// [`VmallocError::ForeignCpu`]. Nothing is changed.
    pub fn vunmap(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        let area = self.find_unlink_kind(cpu, addr, AreaKind::Vmap)?;
        self.remove_vm_area(cpu, &area);
        Ok(())
    }

    /// `vm_map_ram(pages, count, node)`: map `pages` at a fresh address. Up
    /// to [`VMAP_MAX_ALLOC`] pages come from this CPU's vmap blocks
    /// (`vb_alloc`: 2^get_order pages bump-allocated from a 4 MiB block);
    /// more get an area of their own without a guard page. The pages are
    /// checked as [`Vmalloc::vmap`] checks them, before anything is taken.
    ///
    /// # Errors
    /// As [`Vmalloc::vmap`].
    pub fn vm_map_ram(&self, cpu: &Cpu<'m>, pages: &[Pfn]) -> Result<u64, VmallocError> {
        self.this_machine(cpu)?;
        self.check_map_pages(pages)?;
        let count = pages.len();
        let addr = if count <= VMAP_MAX_ALLOC {
            self.vb_alloc(cpu, count)?
        } else {
            let size = count as u64 * PAGE_SIZE;
            let a = self.alloc_vmap_area(cpu, size, PAGE_SIZE)?;
            let area = VmArea {
                addr: a,
                size,
                flags: VM_NO_GUARD,
                kind: AreaKind::VmMapRam,
                pages: pages.to_vec(),
                requested_size: size,
                leaf_entries: 0,
                page_order: 0,
                caller: "vm_map_ram",
                array_area: None,
                vn: self.cpu_node(cpu),
                phys_addr: None,
            };
            self.busy_lock(cpu, a).insert(a, Box::new(area));
            a
        };
        let Ok(entries) = self.vmap_pages_range(cpu, addr, pages, PAGE_KERNEL, PAGE_SHIFT) else {
            let _ = pgtable::unmap_range(cpu, &self.asp, addr, count as u64 * PAGE_SIZE).map(TlbFlush::ignore);
            let _ = self.vm_unmap_ram_inner(cpu, addr, count, false);
            return Err(VmallocError::NoMemory { size: count as u64 * PAGE_SIZE });
        };
        self.count_call(cpu, CallCount::PteEntries, entries);
        self.count_call(cpu, CallCount::VmMapRams, 1);
        Ok(addr)
    }
}
