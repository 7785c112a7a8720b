//! The arm64 kernel virtual-address layout for a 4 KiB granule kernel, as
//! arch/arm64/include/asm/memory.h and pgtable.h define it.
//!
//! The peer kernel (Debian's arm64 7.2) is built with `VA_BITS` = 52 and
//! `VA_BITS_MIN` = 48, and picks `vabits_actual` at boot: 52 on a CPU with
//! FEAT_LPA2 (five levels of tables), 48 otherwise (four, the p4d folded).
//! What does not depend on that choice is a constant here; what does (the
//! linear map's base, the vmemmap's, `VMALLOC_END`, the number of levels) is
//! a method of [`VaLayout`], which each machine holds.

/// `VA_BITS` (`CONFIG_ARM64_VA_BITS`) of the peer kernel: 52.
pub const CONFIG_VA_BITS: u32 = 52;
/// `VA_BITS_MIN`: 48 with 4 KiB pages and 52-bit VA.
pub const VA_BITS_MIN: u32 = 48;
/// `_PAGE_OFFSET(va)`: `-(1 << va)`.
const fn page_offset_of(va_bits: u32) -> u64 {
    (1u64 << va_bits).wrapping_neg()
}

/// The VA layout a machine's kernel runs with: `vabits_actual`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct VaLayout {
    vabits_actual: u32,
}

impl VaLayout {
    /// 48-bit VA, four levels: a CPU without FEAT_LPA2 (Neoverse N1).
    pub const VA48: VaLayout = VaLayout { vabits_actual: 48 };
    /// 52-bit VA, five levels: a CPU with FEAT_LPA2 (qemu's `-cpu max`).
    pub const VA52: VaLayout = VaLayout { vabits_actual: 52 };

    /// The layout the kernel picks: 52 bits when the CPU has FEAT_LPA2.
    pub const fn new(lpa2: bool) -> VaLayout {
        if lpa2 { Self::VA52 } else { Self::VA48 }
    }
    /// `vabits_actual`.
    pub const fn va_bits(self) -> u32 {
        self.vabits_actual
    }
    /// `lpa2_is_enabled()`: 52-bit output addresses in the descriptors and
    /// the shareability in TCR (descriptors carry no SH bits).
    pub const fn lpa2(self) -> bool {
        self.vabits_actual == 52
    }
    /// `PHYS_MASK_SHIFT`, which is also `MAX_PHYSMEM_BITS`: 52 with LPA2
    /// (`CONFIG_ARM64_PA_BITS`), 48 otherwise.
    pub const fn phys_mask_shift(self) -> u32 {
        if self.lpa2() { 52 } else { 48 }
    }
    /// Levels of translation: 5 with 52-bit VA (`pgtable_l5_enabled()`), 4 otherwise.
    pub const fn pgtable_levels(self) -> u32 {
        if self.lpa2() { 5 } else { 4 }
    }
    /// Start of the linear map, `_PAGE_OFFSET(vabits_actual)`: where
    /// `PHYS_OFFSET` is mapped (`arm64_memblock_init()` moves `memstart_addr`
    /// down by the difference to the 52-bit `PAGE_OFFSET` on 48-bit CPUs).
    pub const fn page_offset(self) -> u64 {
        page_offset_of(self.vabits_actual)
    }
    /// Bytes of the linear map, `PAGE_END - _PAGE_OFFSET(vabits_actual)`:
    /// `arm64_memblock_init()`'s `linear_region_size`.
    pub const fn linear_map_size(self) -> u64 {
        PAGE_END - self.page_offset()
    }
    /// `virt_to_page(_PAGE_OFFSET(vabits_actual))`: the struct page of
    /// `PHYS_OFFSET`, the vmemmap's first used address. `VMEMMAP_START`
    /// plus the struct pages of the part of the 52-bit linear map a 48-bit
    /// CPU cannot use (`VMEMMAP_UNUSED_NPAGES`).
    pub const fn vmemmap_start(self) -> u64 {
        let unused_npages = (self.page_offset() - page_offset_of(CONFIG_VA_BITS)) >> crate::addr::PAGE_SHIFT;
        VMEMMAP_START_52 + (unused_npages << STRUCT_PAGE_MAX_SHIFT)
    }
    /// `__phys_to_virt()`: the linear-map address of `pa`.
    pub const fn phys_to_virt(self, pa: u64) -> u64 {
        (pa - PHYS_OFFSET) | self.page_offset()
    }
    /// `VMALLOC_END`: 8 MiB below the used vmemmap.
    pub const fn vmalloc_end(self) -> u64 {
        self.vmemmap_start() - (8 << 20)
    }
}

/// `PAGE_END`: end of the linear map, `_PAGE_END(VA_BITS_MIN)` =
/// `-(1 << (VA_BITS_MIN - 1))`.
pub const PAGE_END: u64 = (1u64 << (VA_BITS_MIN - 1)).wrapping_neg();
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
/// `PCI_IO_START` = `VMEMMAP_END + SZ_8M`.
pub const PCI_IO_START: u64 = VMEMMAP_END + (8 << 20);
/// `PCI_IO_SIZE`: 16 MiB.
pub const PCI_IO_SIZE: u64 = 16 << 20;
/// `PCI_IO_END`.
pub const PCI_IO_END: u64 = PCI_IO_START + PCI_IO_SIZE;
/// `IO_SPACE_LIMIT`: the last port of the PCI I/O space, `PCI_IO_SIZE - 1`.
pub const IO_SPACE_LIMIT: u64 = PCI_IO_SIZE - 1;
/// `FIXADDR_TOP` = `-SZ_8M`.
pub const FIXADDR_TOP: u64 = (8u64 << 20).wrapping_neg();
/// `VMEMMAP_END`: `-SZ_1G`.
pub const VMEMMAP_END: u64 = (1u64 << 30).wrapping_neg();
/// `STRUCT_PAGE_MAX_SHIFT`: `order_base_2(sizeof(struct page))`, 6 on a
/// 64-bit kernel (`mm::page` checks its layout against it).
pub const STRUCT_PAGE_MAX_SHIFT: u32 = 6;
/// `VMEMMAP_SIZE`: one struct page per 4 KiB of the 52-bit linear map
/// (`VMEMMAP_RANGE` = `_PAGE_END(VA_BITS_MIN) - PAGE_OFFSET`).
const VMEMMAP_SIZE_52: u64 =
    ((PAGE_END - page_offset_of(CONFIG_VA_BITS)) >> crate::addr::PAGE_SHIFT) << STRUCT_PAGE_MAX_SHIFT;
/// `VMEMMAP_START` of the 52-bit kernel.
const VMEMMAP_START_52: u64 = VMEMMAP_END - VMEMMAP_SIZE_52;
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
        let l = VaLayout::VA48;
        assert_eq!(l.page_offset(), 0xffff_0000_0000_0000);
        assert_eq!(PAGE_END, 0xffff_8000_0000_0000);
        assert_eq!(l.vmemmap_start(), 0xffff_fdff_c000_0000);
        assert_eq!(VMEMMAP_END, 0xffff_ffff_c000_0000);
        assert_eq!(VMALLOC_START, 0xffff_8000_8000_0000);
        assert_eq!(l.vmalloc_end(), 0xffff_fdff_bf80_0000);
        assert_eq!(FIXADDR_TOP, 0xffff_ffff_ff80_0000);
        assert_eq!(PCI_IO_START, 0xffff_ffff_c080_0000);
        assert_eq!(l.pgtable_levels(), 4);
        // VmallocTotal of the real neoverse-n1 boot (tests/data/arm64-peer).
        assert_eq!((l.vmalloc_end() - VMALLOC_START) >> 10, 135_288_315_904);
    }

    #[test]
    fn matches_the_arm64_lpa2_layout() {
        // The real -cpu max boot's kernel_page_tables and meminfo.
        let l = VaLayout::VA52;
        assert_eq!(l.page_offset(), 0xfff0_0000_0000_0000);
        assert_eq!(l.vmemmap_start(), 0xffff_c1ff_c000_0000);
        assert_eq!(l.vmalloc_end(), 0xffff_c1ff_bf80_0000);
        assert_eq!((l.vmalloc_end() - VMALLOC_START) >> 10, 70_863_806_464);
        assert_eq!(l.pgtable_levels(), 5);
    }
}
