//! A busy area of the vmalloc range: the kernel's `struct vm_struct` with
//! its `struct vmap_area`, its `VM_*` flags and what kind of call made it.
//!
//! The kernel tells how an area may be freed from two places: a
//! `vm_struct`'s `flags` (`VM_ALLOC` for vmalloc, `VM_MAP` for vmap), and,
//! for `vm_map_ram` areas, which have no `vm_struct`, the `VMAP_RAM` bit in
//! `va->flags`. mmlab keeps the flags as the kernel has them ([`VmFlags`],
//! printed by /proc/vmallocinfo) and the second question as a typed
//! [`AreaKind`], so that no behaviour depends on the caller string, which
//! is only the `%pS` column of /proc/vmallocinfo.

use mmlab_engine::{PAGE_SIZE, Pfn};

bitflags::bitflags! {
    /// `vm_struct.flags`: the kernel's `VM_*` bits
    /// (include/linux/vmalloc.h) that mmlab uses, with the kernel's values.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct VmFlags: u32 {
        /// `VM_IOREMAP`: an ioremap area (`ioremap()` and friends).
        const VM_IOREMAP = 0x0000_0001;
        /// `VM_ALLOC`: a vmalloc area.
        const VM_ALLOC = 0x0000_0002;
        /// `VM_MAP`: a vmap area.
        const VM_MAP = 0x0000_0004;
        /// `VM_DMA_COHERENT`: a DMA remap (`dma_common_contiguous_remap`).
        const VM_DMA_COHERENT = 0x0000_0010;
        /// `VM_NO_GUARD`: no guard page after the area.
        const VM_NO_GUARD = 0x0000_0040;
        /// `VM_ALLOW_HUGE_VMAP`: huge mappings allowed (`vmalloc_huge`).
        const VM_ALLOW_HUGE_VMAP = 0x0000_0400;
    }
}

/// `VM_IOREMAP`: an ioremap area.
pub const VM_IOREMAP: VmFlags = VmFlags::VM_IOREMAP;
/// `VM_DMA_COHERENT`: a DMA remap.
pub const VM_DMA_COHERENT: VmFlags = VmFlags::VM_DMA_COHERENT;
/// `VM_ALLOC`: a vmalloc area.
pub const VM_ALLOC: VmFlags = VmFlags::VM_ALLOC;
/// `VM_MAP`: a vmap area.
pub const VM_MAP: VmFlags = VmFlags::VM_MAP;
/// `VM_NO_GUARD`: no guard page.
pub const VM_NO_GUARD: VmFlags = VmFlags::VM_NO_GUARD;
/// `VM_ALLOW_HUGE_VMAP`: huge mappings allowed (`vmalloc_huge`).
pub const VM_ALLOW_HUGE_VMAP: VmFlags = VmFlags::VM_ALLOW_HUGE_VMAP;

/// What made an area, which decides how it may be freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum AreaKind {
    /// vmalloc and its family (`VM_ALLOC`): `vfree` frees it and its pages.
    Vmalloc,
    /// `vmap` (`VM_MAP`): `vunmap` unmaps it; the pages stay the caller's.
    Vmap,
    /// A `vm_map_ram` mapping too large for a vmap block (`VMAP_RAM` in
    /// `va->flags`, no `vm_struct`): `vm_unmap_ram` with its page count.
    VmMapRam,
    /// `vm_area_add_early()`: a static `vm_struct` registered before
    /// vmalloc exists (the kernel image's segments, `VM_MAP`); never freed.
    Early,
    /// `ioremap()` (`VM_IOREMAP`, no pages): `iounmap` unmaps it.
    Ioremap,
    /// `dma_common_contiguous_remap()` (`VM_DMA_COHERENT`): the pages are
    /// the DMA allocation's and not recorded in the area.
    DmaCoherent,
    /// `pcpu_get_vm_areas()` (`VM_ALLOC`, no pages of its own): a percpu
    /// chunk's units, mapped page by page as the chunk is populated.
    Percpu,
}

/// `struct vm_struct` with its `vmap_area`.
#[derive(Clone, Debug)]
pub struct VmArea {
    /// Start address.
    pub addr: u64,
    /// Size including the guard page.
    pub size: u64,
    /// `VM_*` flags.
    pub flags: VmFlags,
    /// What made the area, and so how it may be freed.
    pub kind: AreaKind,
    /// The pages, each an order-0 page of its own (`vm->pages`).
    pub pages: Vec<Pfn>,
    /// `vm->requested_size`: the size the caller asked for (vmalloc and its
    /// family; `vrealloc` changes it), or the mapped size.
    pub requested_size: u64,
    /// `vm->phys_addr`: the physical address of an area mapped without
    /// pages (the kernel image's; ioremaps), printed as `phys=`.
    pub phys_addr: Option<u64>,
    /// `vm->page_order`: the order the pages were allocated at (0, 4 or 9).
    pub page_order: u32,
    /// Who asked (the `%pS` caller column of /proc/vmallocinfo); printed
    /// only, never compared.
    pub caller: &'static str,
    /// Leaf entries mapping the area (PTEs, PMD blocks), for the
    /// `pte_entries` counter.
    pub(crate) leaf_entries: u64,
    /// A nested vmalloc holding the page array (arrays over one page).
    pub(crate) array_area: Option<u64>,
    /// The vmap node the area was allocated for (the kernel encodes it in
    /// `va->flags`); its pool takes the range back after a purge.
    pub(crate) vn: usize,
}

impl VmArea {
    /// `get_vm_area_size()`: the size without the guard page.
    pub fn usable_size(&self) -> u64 {
        if self.flags.contains(VM_NO_GUARD) { self.size } else { self.size - PAGE_SIZE }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_values_and_flag_operations() {
        assert_eq!(VM_IOREMAP.bits(), 0x1);
        assert_eq!(VM_DMA_COHERENT.bits(), 0x10);
        assert_eq!(VM_ALLOC.bits(), 0x2);
        assert_eq!(VM_MAP.bits(), 0x4);
        assert_eq!(VM_NO_GUARD.bits(), 0x40);
        assert_eq!(VM_ALLOW_HUGE_VMAP.bits(), 0x400);
        let f = VM_ALLOC | VM_NO_GUARD;
        assert!(f.contains(VM_ALLOC));
        assert!(!f.contains(VM_MAP));
        assert_eq!(format!("{f:?}"), "VmFlags(VM_ALLOC | VM_NO_GUARD)");
    }
}
