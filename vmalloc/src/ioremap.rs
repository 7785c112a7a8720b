//! The vmalloc-range mappings that are not vmalloc: `ioremap_prot()` /
//! `iounmap()` (mm/ioremap.c, arch/arm64/mm/ioremap.c),
//! `dma_common_contiguous_remap()` (kernel/dma/remap.c). (A percpu chunk's
//! area is in [`crate::percpu_vm`].)
//!
//! An ioremap takes an area aligned to its size's power of two (up to
//! `IOREMAP_MAX_ORDER`, a PUD on arm64) plus a guard page and maps the
//! physical range with the device memory type (`pgprot_device`), in the
//! largest pieces the alignment allows (`vmap_range_noflush()` with
//! `ioremap_max_page_shift`): PMD blocks, contiguous PTE runs, PTEs. It
//! holds no pages (`phys=` in /proc/vmallocinfo). A DMA remap maps pages
//! the caller got from CMA, with `VM_DMA_COHERENT` and without recording
//! them in the area (`nr_pages` 0: /proc/vmallocinfo prints no `pages=`).
//!
//! Fidelity: faithful in sizes, alignment, flags, the mapping granules and
//! the /proc/vmallocinfo lines.

use crate::area::{AreaKind, VM_DMA_COHERENT, VM_IOREMAP, VmArea};
use crate::error::VmallocError;
use crate::vmalloc::{CONT_PTE_SHIFT, PMD_SHIFT, Vmalloc};
use mmlab_engine::arch::arm64::memory::{IO_SPACE_LIMIT, PCI_IO_START, VMALLOC_START};
use mmlab_engine::arch::arm64::pgtable::desc::{
    PAGE_KERNEL, PgProt, pgprot_device, pgprot_dmacoherent, pgprot_noncached,
};
use mmlab_engine::arch::arm64::pgtable::{self, PgtableError};
use mmlab_engine::arch::arm64::tlb::TlbFlush;
use mmlab_engine::{Cpu, PAGE_SHIFT, PAGE_SIZE, Pfn};

/// `IOREMAP_MAX_ORDER` on arm64 with 4K pages: `PUD_SHIFT`.
pub const IOREMAP_MAX_ORDER: u32 = 30;

impl<'m> Vmalloc<'_, 'm> {
    /// The largest mapping granule, up to `2^max_shift`, that a physically
    /// contiguous range of `size` bytes from `base` at `addr` allows
    /// (`vmap_try_huge_pmd()`, `arch_vmap_pte_range_map_size()`).
    fn map_shift(&self, addr: u64, base: u64, size: u64, max_shift: u32) -> u32 {
        let aligned = |shift: u32| size >= 1 << shift && (addr | base).is_multiple_of(1 << shift);
        if max_shift >= PMD_SHIFT && aligned(PMD_SHIFT) {
            PMD_SHIFT
        } else if max_shift >= CONT_PTE_SHIFT && self.cfg.contpte && aligned(CONT_PTE_SHIFT) {
            CONT_PTE_SHIFT
        } else {
            PAGE_SHIFT
        }
    }

    /// Map `pfns` (frames in order, any memory) at a fresh area of
    /// `va_size` bytes aligned to `align`, in pieces of up to `2^max_shift`;
    /// the area is recorded with `flags`, `kind`, `caller` and `phys`.
    #[allow(clippy::too_many_arguments)]
    fn map_area(
        &self,
        cpu: &Cpu<'m>,
        pfns: &[Pfn],
        va_size: u64,
        align: u64,
        prot: PgProt,
        max_shift: u32,
        flags: crate::area::VmFlags,
        kind: AreaKind,
        caller: &'static str,
        phys: Option<u64>,
    ) -> Result<u64, VmallocError> {
        let size = pfns.len() as u64 * PAGE_SIZE;
        let addr = self.alloc_vmap_area(cpu, va_size, align.max(PAGE_SIZE))?;
        let base = pfns.first().map_or(0, |p| p.phys().0);
        let contiguous = pfns.iter().enumerate().all(|(i, p)| p.phys().0 == base + i as u64 * PAGE_SIZE);
        let shift = if contiguous { self.map_shift(addr, base, size, max_shift) } else { PAGE_SHIFT };
        let entries = match self.vmap_pages_range(cpu, addr, pfns, prot, shift) {
            Ok(n) => n,
            Err(e) => {
                let _ = pgtable::unmap_range(cpu, &self.asp, addr, size).map(TlbFlush::ignore);
                self.free_vmap_area_noflush(cpu, addr, va_size, self.cpu_node(cpu));
                return Err(match e {
                    PgtableError::NoMemory => VmallocError::NoMemory { size },
                    other => VmallocError::Map(other),
                });
            }
        };
        let area = VmArea {
            addr,
            size: va_size,
            flags,
            kind,
            pages: Vec::new(),
            requested_size: size,
            leaf_entries: entries,
            page_order: 0,
            caller,
            array_area: None,
            vn: self.cpu_node(cpu),
            phys_addr: phys,
        };
        self.busy_lock(cpu, addr).insert(addr, Box::new(area));
        Ok(addr)
    }

    /// `ioremap_prot(phys, size, pgprot_device(PAGE_KERNEL))` as
    /// `__ioremap_prot()` → `generic_ioremap_prot()` does it: the page
    /// offset of `phys` kept, the size page-rounded, an area aligned to
    /// `1 << clamp(get_count_order(size), PAGE_SHIFT, IOREMAP_MAX_ORDER)`
    /// with a guard page, mapped with device memory. Returns the address
    /// of `phys`.
    ///
    /// # Errors
    /// [`VmallocError::ZeroSize`], [`VmallocError::NoVmapSpace`], [`VmallocError::NoMemory`] for a
    /// page table, [`VmallocError::ForeignCpu`]. Nothing is taken on error.
    pub fn ioremap(&self, cpu: &Cpu<'m>, phys: u64, size: u64, caller: &'static str) -> Result<u64, VmallocError> {
        self.ioremap_prot(cpu, phys, size, pgprot_device(PAGE_KERNEL), caller)
    }

    /// `ioremap_np()`: as [`Vmalloc::ioremap`] with non-posted device
    /// memory (`MT_DEVICE_nGnRnE`), which `pci_remap_cfgspace()` uses for
    /// PCI configuration space.
    ///
    /// # Errors
    /// As [`Vmalloc::ioremap`].
    pub fn ioremap_np(&self, cpu: &Cpu<'m>, phys: u64, size: u64, caller: &'static str) -> Result<u64, VmallocError> {
        self.ioremap_prot(cpu, phys, size, pgprot_noncached(PAGE_KERNEL), caller)
    }

    /// `__ioremap_prot()` with the memory type `prot`.
    fn ioremap_prot(
        &self,
        cpu: &Cpu<'m>,
        phys: u64,
        size: u64,
        prot: PgProt,
        caller: &'static str,
    ) -> Result<u64, VmallocError> {
        self.this_machine(cpu)?;
        if size == 0 {
            return Err(VmallocError::ZeroSize);
        }
        let offset = phys % PAGE_SIZE;
        let start = phys - offset;
        let size = (size + offset).checked_next_multiple_of(PAGE_SIZE).ok_or(VmallocError::TooLarge { size })?;
        if size > self.vmalloc_end() - VMALLOC_START {
            return Err(VmallocError::TooLarge { size });
        }
        let order = size.next_power_of_two().trailing_zeros().clamp(PAGE_SHIFT, IOREMAP_MAX_ORDER);
        let pfns: Vec<Pfn> = (0..size / PAGE_SIZE).map(|i| Pfn((start >> PAGE_SHIFT) + i)).collect();
        let addr = self.map_area(
            cpu,
            &pfns,
            size + PAGE_SIZE,
            1 << order,
            prot,
            IOREMAP_MAX_ORDER,
            VM_IOREMAP,
            AreaKind::Ioremap,
            caller,
            Some(start),
        )?;
        Ok(addr + offset)
    }

    /// `pci_remap_iospace()` (drivers/pci/pci.c): map a host bridge's I/O
    /// port window, `size` bytes of device memory at `phys`, at
    /// `PCI_IO_START + port` through `vmap_page_range()` (no vmap area, so
    /// /proc/vmallocinfo does not list it; the kernel ptdump shows it
    /// between "PCI I/O start" and "PCI I/O end"), in the largest granules
    /// `ioremap_max_page_shift` and the alignment allow.
    ///
    /// # Errors
    /// [`VmallocError::ZeroSize`]; [`VmallocError::IoSpace`] for a window
    /// that is not page aligned or ends past `IO_SPACE_LIMIT` (the
    /// kernel's -EINVAL); [`VmallocError::Map`] (a break-before-make
    /// refusal) for a window any page of which is mapped already, with
    /// nothing changed; [`VmallocError::NoMemory`] for its tables, with
    /// what was mapped of it unmapped again; [`VmallocError::ForeignCpu`].
    pub fn pci_remap_iospace(&self, cpu: &Cpu<'m>, port: u64, size: u64, phys: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        if size == 0 {
            return Err(VmallocError::ZeroSize);
        }
        let last = port.checked_add(size - 1);
        if !(port | size | phys).is_multiple_of(PAGE_SIZE) || last.is_none_or(|l| l > IO_SPACE_LIMIT) {
            return Err(VmallocError::IoSpace { port, size });
        }
        let addr = PCI_IO_START + port;
        // A window mapped already is refused before anything is written
        // (the kernel's vmap_pte_range() BUGs on a live entry): the error
        // path below unmaps the whole window, which would take the live
        // mapping with it.
        let mut va = addr;
        while va < addr + size {
            let w = pgtable::walk(self.m, &self.asp, va);
            if let Some(leaf) = w.leaf {
                let new = pgtable::Desc::page(phys + (va - addr), pgprot_device(PAGE_KERNEL));
                return Err(VmallocError::Map(PgtableError::BreakBeforeMake { entry: leaf.slot, old: leaf.desc, new }));
            }
            va += PAGE_SIZE;
        }
        let pfns: Vec<Pfn> = (0..size / PAGE_SIZE).map(|i| Pfn((phys >> PAGE_SHIFT) + i)).collect();
        let shift = self.map_shift(addr, phys, size, IOREMAP_MAX_ORDER);
        self.vmap_pages_range(cpu, addr, &pfns, pgprot_device(PAGE_KERNEL), shift).map_err(|e| {
            let _ = pgtable::unmap_range(cpu, &self.asp, addr, size).map(TlbFlush::ignore);
            match e {
                PgtableError::NoMemory => VmallocError::NoMemory { size },
                other => VmallocError::Map(other),
            }
        })?;
        Ok(())
    }

    /// `iounmap(addr)`: unmap an ioremap area; the range goes lazy.
    ///
    /// # Errors
    /// As [`Vmalloc::vunmap`], [`VmallocError::WrongKind`] for an area
    /// that ioremap did not make. Nothing is changed.
    pub fn iounmap(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        let start = addr - addr % PAGE_SIZE;
        // The error names the address given, not its page.
        let area = self.find_unlink_kind(cpu, start, AreaKind::Ioremap).map_err(|e| match e {
            VmallocError::WrongKind { .. } => VmallocError::WrongKind { addr },
            e => e,
        })?;
        self.remove_vm_area(cpu, &area);
        Ok(())
    }

    /// `dma_common_contiguous_remap(page, size, prot, caller)`: map the
    /// `count` pages from `first` (CMA pages of a DMA pool) with
    /// `VM_DMA_COHERENT` through `vmap()` (no execute permission, a guard
    /// page), the pages not recorded in the area.
    ///
    /// # Errors
    /// [`VmallocError::ZeroSize`], [`VmallocError::PageNotAllocated`] for a page that is not
    /// allocated, [`VmallocError::NoVmapSpace`], [`VmallocError::NoMemory`],
    /// [`VmallocError::ForeignCpu`]. Nothing is taken on error.
    pub fn dma_common_contiguous_remap(
        &self,
        cpu: &Cpu<'m>,
        first: Pfn,
        count: u64,
        caller: &'static str,
    ) -> Result<u64, VmallocError> {
        self.this_machine(cpu)?;
        if count == 0 {
            return Err(VmallocError::ZeroSize);
        }
        let pfns: Vec<Pfn> = (0..count).map(|i| first.add(i)).collect();
        for &p in &pfns {
            self.pa.check_allocated(p).map_err(|_| VmallocError::PageNotAllocated { pfn: p })?;
        }
        // pgprot_dmacoherent(PAGE_KERNEL): Normal non-cacheable.
        let prot = pgprot_dmacoherent(PAGE_KERNEL);
        self.map_area(
            cpu,
            &pfns,
            (count + 1) * PAGE_SIZE,
            PAGE_SIZE,
            prot,
            PAGE_SHIFT,
            VM_DMA_COHERENT,
            AreaKind::DmaCoherent,
            caller,
            None,
        )
    }
}
