//! The arm64 kernel virtual-address layout for a 48-bit VA, 4 KiB granule
//! kernel, as arch/arm64/include/asm/memory.h and pgtable.h define it.
//!
//! Only the pieces the page allocator needs are here so far: the linear map
//! base and the vmemmap window, whose addresses appear in list links and in
//! `page=` fields of the kmem tracepoints.

/// `VA_BITS` (and `VA_BITS_MIN`): 48.
pub const VA_BITS: u32 = 48;
/// `PAGE_OFFSET`: start of the linear map, `-(1 << VA_BITS)`.
pub const PAGE_OFFSET: u64 = (1u64 << VA_BITS).wrapping_neg();
/// `PAGE_END`: end of the linear map, `-(1 << (VA_BITS - 1))`.
pub const PAGE_END: u64 = (1u64 << (VA_BITS - 1)).wrapping_neg();
/// `MODULES_VADDR`: `_PAGE_END(VA_BITS_MIN)`.
pub const MODULES_VADDR: u64 = PAGE_END;
/// `MODULES_VSIZE`: 2 GiB.
pub const MODULES_VSIZE: u64 = 2 << 30;
/// `MODULES_END`, which is also `KIMAGE_VADDR`.
pub const MODULES_END: u64 = MODULES_VADDR + MODULES_VSIZE;
/// `KIMAGE_VADDR`: the kernel image (inside the vmalloc range, which
/// reserves it at boot as the kernel does with `vm_area_add_early`).
pub const KIMAGE_VADDR: u64 = MODULES_END;
/// `VMALLOC_START` = `MODULES_END`.
pub const VMALLOC_START: u64 = MODULES_END;
/// `VMALLOC_END` = `VMEMMAP_START - SZ_8M` (VA_BITS == VA_BITS_MIN).
pub const VMALLOC_END: u64 = VMEMMAP_START - (8 << 20);
/// `PCI_IO_START` = `VMEMMAP_END + SZ_8M`.
pub const PCI_IO_START: u64 = VMEMMAP_END + (8 << 20);
/// `FIXADDR_TOP` = `-SZ_8M`.
pub const FIXADDR_TOP: u64 = (8u64 << 20).wrapping_neg();
/// `VMEMMAP_END`: `-SZ_1G`.
pub const VMEMMAP_END: u64 = (1u64 << 30).wrapping_neg();
/// `STRUCT_PAGE_MAX_SHIFT`: `order_base_2(sizeof(struct page))`, 6 on a
/// 64-bit kernel (`mm::page` checks its layout against it).
pub const STRUCT_PAGE_MAX_SHIFT: u32 = 6;
/// `VMEMMAP_SIZE`: one struct page per 4 KiB of the linear map.
pub const VMEMMAP_SIZE: u64 = ((PAGE_END - PAGE_OFFSET) >> crate::addr::PAGE_SHIFT) << STRUCT_PAGE_MAX_SHIFT;
/// `VMEMMAP_START`.
pub const VMEMMAP_START: u64 = VMEMMAP_END - VMEMMAP_SIZE;
/// `ARM64_MEMSTART_ALIGN` with 4 KiB pages: `PUD_SIZE` (1 GiB), which is
/// larger than a memory section (`SECTION_SIZE_BITS` = 27).
pub const ARM64_MEMSTART_ALIGN: u64 = 1 << 30;
/// Physical base of RAM on the emulated machine: 1 GiB, as on QEMU's `virt`
/// board, so that PFNs do not start at zero and PFN/index mix-ups show.
pub const PHYS_OFFSET: u64 = 0x4000_0000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_arm64_48bit_layout() {
        assert_eq!(PAGE_OFFSET, 0xffff_0000_0000_0000);
        assert_eq!(PAGE_END, 0xffff_8000_0000_0000);
        assert_eq!(VMEMMAP_START, 0xffff_fdff_c000_0000);
        assert_eq!(VMEMMAP_END, 0xffff_ffff_c000_0000);
        assert_eq!(VMALLOC_START, 0xffff_8000_8000_0000);
        assert_eq!(VMALLOC_END, 0xffff_fdff_bf80_0000);
        assert_eq!(FIXADDR_TOP, 0xffff_ffff_ff80_0000);
        assert_eq!(PCI_IO_START, 0xffff_ffff_c080_0000);
    }
}
