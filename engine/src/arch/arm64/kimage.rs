//! The kernel image in RAM: where arm64 boot puts it and which part of it
//! `map_mem()` leaves out of the linear map (arch/arm64/kernel/vmlinux.lds.S
//! symbols, `arm64_memblock_init()`, `map_mem()`).
//!
//! The image is laid out `_text` (the header) | `_stext` .. `_etext` (text)
//! | `__start_rodata` .. `__init_begin` (rodata) | `__init_begin` ..
//! `__init_end` (init text and data) | `_data` .. `_end` (data and bss),
//! each segment aligned to `SEGMENT_ALIGN` (64 KiB); the data segment ends
//! with `.pgtbl` (the fixmap's static tables) and `init_pg_dir` after
//! `__bss_stop`. `arm64_memblock_init()` reserves `[_text, _end)` in
//! memblock. 7.2's `map_mem()` maps the linear alias of `[_text,
//! __init_begin)` and `[__init_end, __bss_stop)` before the rest of memory,
//! and `mark_linear_text_alias_ro()` / `mark_rodata_ro()` make both
//! read-only later; before 7.2 it marked `[_stext, __init_begin)` NOMAP,
//! mapped the banks, then that interval alone with `NO_CONT_MAPPINGS`
//! ([`crate::arch::arm64::mmu`]).
//!
//! | piece | fidelity |
//! |---|---|
//! | segment boundaries: Debian's arm64 7.2.13 kernel as its /proc/vmallocinfo shows them (`declare_kernel_vmas()`'s areas on the peer run, `tests/data/arm64-peer/`): `[_text, _etext)` 19,200 KiB (64 KiB header + "19136K kernel code"), `[__start_rodata, __inittext_begin)` 18,752 KiB, init text 1,088 KiB, init data 2,816 KiB ("3904K init"), `[_data, _end)` 6,272 KiB | faithful to that kernel |
//! | load address `PHYS_OFFSET + 2 MiB` (0x40200000, as QEMU's virt loads it; no KASLR) | faithful to that machine |
//! | `__bss_stop`: `_data` + "5282K rwdata" + "884K bss", page-aligned | faithful to the boot's `Memory:` line (rounded to KiB there) |
//! | the memblock reservation and `map_mem()`'s alias | faithful |
//! | `map_kernel()` at `KIMAGE_VADDR`: 7.2's six segments with their permissions, contiguous runs in text and data, tables in the image's `init_pg_dir` | faithful in the result; simplified: one pass (a relocatable kernel maps text writable first, then unmaps and remaps it), written with the run-time barrier rules (the kernel's early C code uses plain stores and one `dsb ishst`) |
//! | `declare_kernel_vmas()`: the five `vm_area_add_early()` areas ([`KernelImage::kernel_vmas`]), which vmalloc lists first in /proc/vmallocinfo and allocates after | faithful |
//!
//! The image is in RAM with the real boot state (`boot.state=real`, the
//! default, on machines of at least 256 MiB: [`crate::mm::boot_state`]) or
//! when `arm64.kernel_image=1` asks for it; `arm64.kernel_image=0` leaves
//! it out.

use crate::arch::arm64::memory::{KIMAGE_VADDR, PHYS_OFFSET};

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
    /// `[__inittext_begin, __inittext_end)`: the first part of `init`
    /// (`__init_begin` is `__inittext_begin`); the rest is init data.
    pub inittext: u64,
    /// `[_data, _end)`: data and bss.
    pub data: u64,
    /// `[_data, __bss_stop)`: the data and bss proper, without the early
    /// page tables and boot stack that end the segment (`.pgtbl`,
    /// `init_pg_dir`): "rwdata" plus "bss" of the boot's `Memory:` line.
    pub data_bss: u64,
}

const fn seg(kib: u64) -> u64 {
    (kib << 10).next_multiple_of(SEGMENT_ALIGN)
}

/// One of `declare_kernel_vmas()`'s areas: a `vm_struct` that
/// `vm_area_add_early()` puts on `vmlist` before vmalloc exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KernelVma {
    /// The area's virtual address (`vm->addr`).
    pub addr: u64,
    /// `vm->size`: the segment, plus a guard page unless `no_guard`.
    pub size: u64,
    /// `vm->phys_addr`: the segment's physical address.
    pub phys_addr: u64,
    /// `VM_NO_GUARD`: every segment but the last.
    pub no_guard: bool,
    /// The segment (`_text`, `__start_rodata`, ...).
    pub segment: &'static str,
    /// The `%pS` caller /proc/vmallocinfo prints (the peer kernel's
    /// `paging_init+offset` for that area).
    pub caller: &'static str,
}

impl KernelImage {
    /// Debian's arm64 7.2.13 kernel on QEMU's virt machine (module docs).
    pub const DEBIAN_7_2: KernelImage = KernelImage {
        phys: PHYS_OFFSET + (2 << 20),
        head: SEGMENT_ALIGN,
        text: seg(19136),
        rodata: 18752 << 10,
        init: 3904 << 10,
        inittext: 1088 << 10,
        data: 6272 << 10,
        data_bss: (5282 + 884) << 10,
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
    /// `__pa_symbol(__init_end)` (= `_data`).
    pub const fn init_end(&self) -> u64 {
        self.init_begin() + self.init
    }
    /// `__pa_symbol(__bss_stop)`: where 7.2's linear alias of the data ends.
    /// (`.pgtbl` follows it, page-aligned.)
    pub const fn bss_stop(&self) -> u64 {
        (self.init_end() + self.data_bss).next_multiple_of(crate::addr::PAGE_SIZE)
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

    /// Mirrors arch/arm64/mm/mmu.c `declare_kernel_vmas()` →
    /// `declare_vma()`: `[_text, _etext)`, `[__start_rodata,
    /// __inittext_begin)`, `[__inittext_begin, __inittext_end)`,
    /// `[__initdata_begin, __initdata_end)` with `VM_NO_GUARD`, and
    /// `[_data, _end)` with its guard page, each `VM_MAP`. The first free
    /// vmalloc address is one page after `_end`'s.
    pub fn kernel_vmas(&self) -> [KernelVma; 5] {
        let etext = self.stext() + self.text;
        let inittext_end = self.init_begin() + self.inittext;
        let segs = [
            (self.phys, etext, true, "_text", "paging_init+0x388/0x440"),
            (etext, self.init_begin(), true, "__start_rodata", "paging_init+0x3a4/0x440"),
            (self.init_begin(), inittext_end, true, "__inittext_begin", "paging_init+0x3bc/0x440"),
            (inittext_end, self.init_end(), true, "__initdata_begin", "paging_init+0x3d8/0x440"),
            (self.init_end(), self.end(), false, "_data", "paging_init+0x3f4/0x440"),
        ];
        segs.map(|(s, e, no_guard, segment, caller)| KernelVma {
            addr: self.va(s),
            size: e - s + if no_guard { 0 } else { crate::addr::PAGE_SIZE },
            phys_addr: s,
            no_guard,
            segment,
            caller,
        })
    }
}

/// Mirrors arch/arm64/kernel/pi/map_kernel.c `map_kernel()` (7.2) at
/// `KIMAGE_VADDR`, as `map_range()` places entries (PMD blocks where a
/// segment covers an aligned 2 MiB, never a PUD block; contiguous runs only
/// at the PTE level and only where the segment allows them): the header
/// `[_text, _stext)` RW NX, text ROX with contiguous runs (RWX without
/// `rodata_enabled`, i.e. `rodata=off`), rodata RW NX (`mark_rodata_ro()` later makes it and the
/// header read-only), init text ROX, init data RW NX, data and bss RW NX
/// with contiguous runs (`ro_now`: the header and rodata read-only at once,
/// for a machine without the linear map, where the later walk cannot run).
/// The first pass a relocatable kernel makes (text
/// writable, then unmapped and mapped again) leaves the same tables and is
/// not repeated.
///
/// # Errors
///
/// A table write or allocation the tables refuse.
pub fn map_kernel<'m, C: std::ops::Deref<Target = crate::arch::arm64::cpu::ArchCpu<'m>>>(
    cpu: &C,
    asp: &crate::arch::arm64::pgtable::AddressSpace,
    tables: &dyn crate::arch::arm64::pgtable::PgtableAlloc<C>,
    k: &KernelImage,
    rodata_enabled: bool,
    ro_now: bool,
) -> Result<(), crate::arch::arm64::pgtable::PgtableError> {
    use crate::arch::arm64::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_EXEC, PAGE_KERNEL_RO, PAGE_KERNEL_ROX};
    use crate::arch::arm64::pgtable::{MapFlags, map_range};
    let text_prot = if rodata_enabled { PAGE_KERNEL_ROX } else { PAGE_KERNEL_EXEC };
    // Without the linear map's fixmap walk mmlab cannot run
    // mark_rodata_ro() later: `ro_now` maps its result at once.
    let ro_prot = if ro_now && rodata_enabled { PAGE_KERNEL_RO } else { PAGE_KERNEL };
    let inittext_begin = k.init_begin();
    let initdata_begin = inittext_begin + k.inittext;
    let segments = [
        (k.phys, k.head, ro_prot, false),
        (k.stext(), k.text, text_prot, true),
        (k.stext() + k.text, k.rodata, ro_prot, false),
        (inittext_begin, k.inittext, text_prot, false),
        (initdata_begin, k.init - k.inittext, PAGE_KERNEL, false),
        (k.init_end(), k.data, PAGE_KERNEL, true),
    ];
    for (pa, size, prot, cont) in segments {
        // Mapping into empty entries needs no TLB maintenance.
        map_range(cpu, asp, tables, k.va(pa), pa, size, prot, MapFlags { block: true, cont })?.ignore();
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
        // 64 + 19136 + 18752 + 3904 + 6272 KiB: _end at 0x43100000.
        assert_eq!(k.size(), 48128 << 10);
        assert_eq!(k.init_begin(), 0x4271_0000);
        assert_eq!(k.end(), 0x4310_0000);
    }

    /// The areas as the peer kernel's /proc/vmallocinfo lists them
    /// (tests/data/arm64-peer/4G-2cpu/proc_vmallocinfo).
    #[test]
    fn kernel_vmas_are_the_peer_kernels() {
        let v = KernelImage::DEBIAN_7_2.kernel_vmas();
        let got: Vec<(u64, u64, u64)> = v.iter().map(|a| (a.addr, a.size, a.phys_addr)).collect();
        assert_eq!(
            got,
            [
                (0xffff_8000_8000_0000, 19_660_800, 0x4020_0000),
                (0xffff_8000_812c_0000, 19_202_048, 0x414c_0000),
                (0xffff_8000_8251_0000, 1_114_112, 0x4271_0000),
                (0xffff_8000_8262_0000, 2_883_584, 0x4282_0000),
                (0xffff_8000_828e_0000, 6_426_624, 0x42ae_0000),
            ]
        );
        assert_eq!(v[4].addr + v[4].size, 0xffff_8000_82f0_1000);
        assert!(v[..4].iter().all(|a| a.no_guard) && !v[4].no_guard);
    }
}
