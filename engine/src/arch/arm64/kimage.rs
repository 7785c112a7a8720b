//! The kernel image in RAM: where arm64 boot puts it and which part of it
//! `map_mem()` leaves out of the linear map (arch/arm64/kernel/vmlinux.lds.S
//! symbols, `arm64_memblock_init()`, `map_mem()`).
//!
//! The image is laid out `_text` (the header) | `_stext` .. `_etext` (text)
//! | `__start_rodata` .. `__init_begin` (rodata) | `__init_begin` ..
//! `__init_end` (init text and data) | `_data` .. `_end` (data and bss),
//! each segment aligned to `SEGMENT_ALIGN` (64 KiB). `arm64_memblock_init()`
//! reserves `[_text, _end)` in memblock. `map_mem()` marks `[_stext,
//! __init_begin)` NOMAP while it maps the memory banks (so the text and
//! rodata get no writable alias), then maps that interval on its own with
//! `NO_CONT_MAPPINGS` only (blocks allowed: `mark_linear_text_alias_ro()`
//! later changes its permissions, legal on a block but not on a contiguous
//! run).
//!
//! | piece | fidelity |
//! |---|---|
//! | segment sizes: Debian's arm64 7.2.13 kernel ("19136K kernel code, 5282K rwdata, 18632K rodata, 3904K init, 884K bss"), 64 KiB header, rounded up to `SEGMENT_ALIGN` | faithful to that kernel |
//! | load address `PHYS_OFFSET + 2 MiB` (0x40200000, as QEMU's virt loads it; no KASLR) | faithful to that machine |
//! | the memblock reservation and `map_mem()`'s carve-out and alias | faithful |
//! | `map_kernel()` at `KIMAGE_VADDR`: the segments with their permissions, contiguous runs in text and data | simplified: the final permissions at once (rodata read-only, as `mark_rodata_ro()` leaves it; the init segment executable as one piece), tables from memblock rather than the image's `init_pg_dir`, written with the run-time barrier rules (the kernel's early C code uses plain stores and one `dsb ishst`) |
//! | `declare_kernel_vmas()` | simplified: vmalloc's free range starts after the image (the image's areas are not listed in /proc/vmallocinfo) |
//!
//! The image is opt-in (`arm64.kernel_image=1`): it takes 47 MiB of RAM,
//! which would change every small machine's page counts.

use crate::layout::{KIMAGE_VADDR, PHYS_OFFSET};

/// `SEGMENT_ALIGN`: 64 KiB.
pub const SEGMENT_ALIGN: u64 = 64 << 10;

/// A kernel image: its physical load address and segment sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KernelImage {
    /// Physical address of `_text`.
    pub phys: u64,
    /// `[_text, _stext)`: the image header.
    pub head: u64,
    /// `[_stext, _etext)`.
    pub text: u64,
    /// `[__start_rodata, __init_begin)`.
    pub rodata: u64,
    /// `[__init_begin, __init_end)`.
    pub init: u64,
    /// `[_data, _end)`: data and bss.
    pub data: u64,
}

const fn seg(kib: u64) -> u64 {
    (kib << 10).next_multiple_of(SEGMENT_ALIGN)
}

impl KernelImage {
    /// Debian's arm64 7.2.13 kernel on QEMU's virt machine (module docs).
    pub const DEBIAN_7_2: KernelImage = KernelImage {
        phys: PHYS_OFFSET + (2 << 20),
        head: SEGMENT_ALIGN,
        text: seg(19136),
        rodata: seg(18632),
        init: seg(3904),
        data: seg(5282 + 884),
    };

    /// `__pa_symbol(_stext)`.
    pub const fn stext(&self) -> u64 {
        self.phys + self.head
    }
    /// `__pa_symbol(__init_begin)`.
    pub const fn init_begin(&self) -> u64 {
        self.stext() + self.text + self.rodata
    }
    /// `__pa_symbol(_end)`.
    pub const fn end(&self) -> u64 {
        self.init_begin() + self.init + self.data
    }
    /// Bytes from `_text` to `_end`.
    pub const fn size(&self) -> u64 {
        self.end() - self.phys
    }
}

impl KernelImage {
    /// The image's virtual address of physical address `pa` (no KASLR:
    /// `_text` at `KIMAGE_VADDR`).
    pub const fn va(&self, pa: u64) -> u64 {
        KIMAGE_VADDR + (pa - self.phys)
    }
    /// One past the image's last virtual address.
    pub const fn va_end(&self) -> u64 {
        self.va(self.end())
    }
}

/// Mirrors arch/arm64/kernel/pi/map_kernel.c `map_kernel()` (6.9+), as it
/// leaves the image after boot (module docs): the header RW NX, text ROX
/// (contiguous runs allowed), rodata read-only, init ROX, data and bss RW
/// (contiguous runs allowed), at `KIMAGE_VADDR`.
///
/// # Errors
///
/// A table write or allocation the tables refuse.
pub fn map_kernel(cpu: &crate::cpu::Cpu<'_>, k: &KernelImage) -> Result<(), crate::pgtable::PgtableError> {
    use crate::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_RO, PAGE_KERNEL_ROX};
    use crate::pgtable::{MapFlags, MemblockTables, map_range};
    let asp = cpu.machine().kernel_as();
    let segments = [
        (k.phys, k.head, PAGE_KERNEL, false),
        (k.stext(), k.text, PAGE_KERNEL_ROX, true),
        (k.stext() + k.text, k.rodata, PAGE_KERNEL_RO, false),
        (k.init_begin(), k.init, PAGE_KERNEL_ROX, false),
        (k.init_begin() + k.init, k.data, PAGE_KERNEL, true),
    ];
    for (pa, size, prot, cont) in segments {
        // Mapping into empty entries needs no TLB maintenance.
        map_range(cpu, &asp, &MemblockTables, k.va(pa), pa, size, prot, MapFlags { block: true, cont })?.ignore();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_image_layout() {
        let k = KernelImage::DEBIAN_7_2;
        assert_eq!(k.phys, 0x4020_0000);
        assert_eq!(k.stext(), 0x4021_0000);
        // 64 + 19136 + 18688 + 3904 + 6208 KiB.
        assert_eq!(k.size(), 48000 << 10);
        assert_eq!(k.init_begin() - k.stext(), (19136 + 18688) << 10);
    }
}
