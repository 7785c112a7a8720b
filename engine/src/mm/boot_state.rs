//! The state a real boot leaves: the early reservations that Debian's arm64
//! 7.2 kernel makes on QEMU's `virt` machine before the page allocator
//! exists, and the ones it gives back at the end of boot
//! (`boot.state=real`, the default; `boot.state=bare` boots the machine
//! with nothing but mmlab's own memmap, usemap and tables, as before).
//!
//! In the kernel's order:
//!
//! 1. `setup_machine_fdt()`: the device tree blob, where QEMU put it,
//!    `memblock_reserve(dt_phys, fdt_totalsize)`;
//! 2. `arm64_memblock_init()`: the kernel image `[_text, _end)` and the
//!    initrd, where QEMU loaded them;
//! 3. `bootmem_init()` → `dma_contiguous_reserve(arm64_dma_phys_limit)`:
//!    the 64 MiB CMA area (`CONFIG_CMA_SIZE_MBYTES=64` in Debian's config),
//!    placed by `cma_declare_contiguous_nid()`: bottom-up from 4 GiB when
//!    RAM reaches 4 GiB + 64 MiB, else (and always on the virt machine,
//!    whose DMA limit is 4 GiB) top-down below the DMA zone's limit,
//!    aligned to a pageblock. Its pages stay out of `memblock_free_all()`;
//!    the page allocator frees them as MIGRATE_CMA
//!    ([`crate::Machine::cma_area`], `cma_init_reserved_areas()`);
//! 4. then mmlab's memmap, usemap and tables, as [`crate::mm::mm_init`]
//!    places them;
//! 5. `mem_init()` → `swiotlb_init()`: the bounce buffer, 64 MiB when RAM
//!    reaches beyond the DMA limit, else 1 MiB per GiB of RAM
//!    (`CONFIG_DMA_BOUNCE_UNALIGNED_KMALLOC`), `memblock_alloc_low()`
//!    top-down below the DMA limit, and its slot array (`memblock_alloc()`);
//! 6. the end of boot: `free_initrd_mem()` and `free_initmem()` give the
//!    initrd and `[__init_begin, __init_end)` back
//!    ([`BootStateReport::given_back`]; the page allocator frees them with
//!    `free_reserved_area()` after its initcalls) and unmap the init
//!    segment at `KIMAGE_VADDR` (its vmalloc areas stay).
//!
//! | piece | fidelity |
//! |---|---|
//! | kernel image: Debian 7.2.13's segments at 0x40200000 ([`crate::arch::arm64::kimage`]) | faithful to that kernel |
//! | initrd at `RAM + min(RAM / 2, 128 MiB)` (QEMU `arm_setup_direct_kernel_boot()`), 1,004 KiB: the peer run's busybox initramfs ("Freeing initrd memory: 1004K") | faithful to that machine and initramfs |
//! | DTB after the initrd, 2 MiB-aligned (QEMU places it so for AArch64), 1 MiB | simplified: the size is QEMU's `FDT_MAX_SIZE` buffer, taken as the blob's `fdt_totalsize` (the peer captures do not show it: unchecked) |
//! | CMA: 64 MiB below `arm64_dma_phys_limit`, pageblock-aligned, after the linear map's tables, the device tree and `NODE_DATA` (as the kernel takes them) | faithful: 0x7bc00000 at 1 GiB, 0xfc000000 at 4 and 16 GiB, as the peer boots print |
//! | swiotlb buffer, slot array and areas array | faithful in size and rule |
//! | initrd and init freed at the end of boot | faithful: after the page allocator's initcalls (watermarks and pagesets sized without them), with `free_reserved_area()` page by page through the pcp, at the points of the page allocator's boot work where the kernel frees them (the initrd at the end of the initramfs unpack, the init sections before /init; on which CPU: simplified, pcp `boot_work::spread`); they stay in memblock's reserved list (arm64 keeps memblock) |
//! | the boot's other memblock allocations (device tree, sparse, the command line, the first percpu chunk, the dentry and inode hash tables): [`crate::mm::boot_allocs`] | faithful sizes and order |
//! | the page allocations and vmalloc areas of the rest of boot (slab, stacks, hash tables, ioremaps, the DMA pools from CMA) | the allocator crates' boot work (`pcp` and `vmalloc`), per machine size and CPU count |
//!
//! The real state needs the first bank at `PHYS_OFFSET` with at least
//! [`REAL_BOOT_MIN_BANK`] of RAM (the image alone takes 47 MiB, the CMA
//! area 64 MiB); smaller machines, kept for fast tests, boot bare and say
//! so ([`BootStateReport::reason`]).

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::kimage::{KernelImage, KernelVma};
use crate::mm::PAGEBLOCK_ORDER;
use crate::mm::memblock::{Memblock, MemblockError};

/// Which boot state the machine starts from (`boot.state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BootState {
    /// The early reservations of a real boot (module docs).
    #[default]
    Real,
    /// None: RAM less mmlab's own memmap, usemap and tables.
    Bare,
}

impl BootState {
    /// The `--set` spelling.
    pub const fn name(self) -> &'static str {
        match self {
            BootState::Real => "real",
            BootState::Bare => "bare",
        }
    }
}

impl std::str::FromStr for BootState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "real" => Ok(BootState::Real),
            "bare" => Ok(BootState::Bare),
            _ => Err("expected real or bare".to_string()),
        }
    }
}

/// The smallest first bank the real boot state is emulated on.
pub const REAL_BOOT_MIN_BANK: u64 = 256 << 20;
/// The peer run's initramfs (busybox, /init and the capture modules):
/// between 1,020 and 1,024 KiB (the boot frees "1020K", the whole pages
/// inside it; the reservation is page-rounded out, so its last page stays
/// reserved).
pub const INITRD_SIZE: u64 = (1020 << 10) + 2048;
/// The peer run's kernel command line (`setup_command_line()` keeps two
/// copies).
pub const PEER_CMDLINE: &str = "nokaslr no_hash_pointers console=ttyAMA0 rdinit=/init";
/// The device tree blob QEMU's virt machine hands over.
pub const DTB_SIZE: u64 = 1 << 20;
/// `CONFIG_CMA_SIZE_MBYTES=64`.
pub const CMA_SIZE: u64 = 64 << 20;
/// `IO_TLB_DEFAULT_SIZE`: 64 MiB.
pub const IO_TLB_DEFAULT_SIZE: u64 = 64 << 20;
/// `IO_TLB_SHIFT`: 2 KiB slabs.
const IO_TLB_SHIFT: u32 = 11;
/// `IO_TLB_SEGSIZE`: slabs per segment.
const IO_TLB_SEGSIZE: u64 = 128;
/// `sizeof(struct io_tlb_slot)` on arm64.
const IO_TLB_SLOT_SIZE: u64 = 24;

/// One early reservation, as `stat boot` lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BootReservation {
    /// memblock's owner name.
    pub name: &'static str,
    /// First byte.
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// The kernel step that makes it.
    pub kernel: &'static str,
    /// faithful / simplified, as the module's table says.
    pub fidelity: &'static str,
    /// Given back at the end of boot (initrd, init sections): the bytes.
    pub freed_at_end_of_boot: u64,
}

/// What boot state a machine was built with, and what it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BootStateReport {
    /// `boot.state` as configured.
    pub requested: BootState,
    /// The state in force.
    pub in_force: BootState,
    /// Why the real state is not in force when it was asked for.
    pub reason: Option<String>,
    /// The kernel image, when it is in RAM.
    pub kernel_image: Option<KernelImage>,
    /// The early reservations made, in the kernel's order.
    pub reservations: Vec<BootReservation>,
    /// The CMA area: first PFN and pages.
    pub cma: Option<(u64, u64)>,
    /// The kernel image's vmalloc areas (`declare_kernel_vmas()`).
    pub kernel_vmas: Vec<KernelVma>,
    /// What the end of boot gives back (the initrd, `[__init_begin,
    /// __init_end)`): (base, bytes), still reserved in memblock and
    /// PG_reserved until the page allocator frees them with
    /// `free_reserved_area()`.
    pub given_back: Vec<(u64, u64)>,
}

/// Whether the real boot state can be emulated on RAM starting with a bank
/// at `first_base` of `first_size` bytes; `Err` says why not.
pub fn real_boot_fits(first_base: u64, first_size: u64) -> Result<(), String> {
    if first_base != crate::arch::arm64::memory::PHYS_OFFSET || first_size < REAL_BOOT_MIN_BANK {
        return Err(format!(
            "the real boot state needs a first bank of at least {} MiB at {:#x} (the kernel image and the CMA area); \
             this machine boots bare",
            REAL_BOOT_MIN_BANK >> 20,
            crate::arch::arm64::memory::PHYS_OFFSET
        ));
    }
    Ok(())
}

/// QEMU's `arm_setup_direct_kernel_boot()`: the initrd at `min(RAM / 2,
/// 128 MiB)` into RAM, past the loaded image, page-aligned; the DTB after
/// it at the next 2 MiB boundary. Returns (initrd, dtb) start addresses.
pub const fn qemu_virt_initrd_dtb(ram_base: u64, ram_size: u64, image_end: u64) -> (u64, u64) {
    let half = ram_size / 2;
    let mut initrd = ram_base + if half < (128 << 20) { half } else { 128 << 20 };
    if image_end > initrd {
        initrd = image_end;
    }
    let initrd = initrd.next_multiple_of(PAGE_SIZE);
    (initrd, (initrd + INITRD_SIZE).next_multiple_of(2 << 20))
}

fn reserve(mb: &mut Memblock, out: &mut Vec<BootReservation>, r: BootReservation) -> Result<(), MemblockError> {
    mb.reserve(PhysAddr(r.base), r.size, r.name);
    out.push(r);
    Ok(())
}

/// `setup_machine_fdt()` and `arm64_memblock_init()`: the DTB, the kernel
/// image (when `image` is given) and the initrd, reserved where QEMU put
/// them (`real`: all three; else only the image).
///
/// # Errors
///
/// None today: [`Memblock::reserve`] takes any range, as `memblock_reserve()`
/// does (overlaps merge).
pub fn arm64_memblock_init(
    mb: &mut Memblock,
    image: Option<&KernelImage>,
    real: bool,
    ram: (u64, u64),
    out: &mut Vec<BootReservation>,
) -> Result<(), MemblockError> {
    let image_end = image.map_or(ram.0 + (2 << 20), |k| k.end());
    let (initrd, dtb) = qemu_virt_initrd_dtb(ram.0, ram.1, image_end);
    if real {
        let fidelity = "simplified (size: QEMU's FDT_MAX_SIZE)";
        reserve(
            mb,
            out,
            BootReservation {
                name: "dtb",
                base: dtb,
                size: DTB_SIZE,
                kernel: "setup_machine_fdt()",
                fidelity,
                freed_at_end_of_boot: 0,
            },
        )?;
    }
    if let Some(k) = image {
        reserve(
            mb,
            out,
            BootReservation {
                name: "kernel",
                base: k.phys,
                size: k.size(),
                kernel: "arm64_memblock_init(): memblock_reserve(_text, _end - _text)",
                fidelity: "faithful (Debian 7.2.13's segments)",
                freed_at_end_of_boot: if real { k.init } else { 0 },
            },
        )?;
    }
    if real {
        reserve(
            mb,
            out,
            BootReservation {
                name: "initrd",
                base: initrd,
                size: INITRD_SIZE.next_multiple_of(PAGE_SIZE),
                kernel: "arm64_memblock_init(): the initrd",
                fidelity: "faithful (the peer run's initramfs)",
                // free_initrd_mem() frees the whole pages inside it.
                freed_at_end_of_boot: INITRD_SIZE & !(PAGE_SIZE - 1),
            },
        )?;
    }
    Ok(())
}

/// Mirrors kernel/dma/contiguous.c `dma_contiguous_reserve()` →
/// mm/cma.c `cma_declare_contiguous_nid()` for a 64 MiB area below
/// `limit` (`arm64_dma_phys_limit`): pageblock alignment, the limit
/// clamped to the end of RAM, a bottom-up try from 4 GiB when RAM reaches
/// 4 GiB + the size, then top-down. `None` when nothing fits (the kernel
/// prints an error and boots without the area).
pub fn dma_contiguous_reserve(mb: &mut Memblock, limit: u64, out: &mut Vec<BootReservation>) -> Option<(u64, u64)> {
    let align = PAGE_SIZE << PAGEBLOCK_ORDER;
    let memblock_end = mb.memory().last().map_or(0, |r| r.end());
    let mut limit = limit & !(align - 1);
    if limit == 0 || limit > memblock_end {
        limit = memblock_end;
    }
    let size = CMA_SIZE;
    let mut addr = None;
    if memblock_end >= (4 << 30) + size {
        addr = mb.alloc_range_bottom_up(size, align, 4 << 30, limit, "cma").ok();
    }
    let addr = match addr {
        Some(a) => a,
        None => mb.alloc_range(size, align, 0, limit, "cma").ok()?,
    };
    out.push(BootReservation {
        name: "cma",
        base: addr.0,
        size,
        kernel: "dma_contiguous_reserve() -> cma_declare_contiguous_nid()",
        fidelity: "faithful",
        freed_at_end_of_boot: 0,
    });
    Some((addr.pfn().0, size / PAGE_SIZE))
}

/// Mirrors arch/arm64/mm/init.c `mem_init()` → kernel/dma/swiotlb.c
/// `swiotlb_init_remap()`: the bounce buffer (64 MiB when `max_pfn` lies
/// beyond the DMA limit, else 1 MiB per GiB of RAM, rounded to a segment)
/// below the DMA limit, top-down, then its slot array anywhere.
///
/// # Errors
///
/// [`MemblockError::NoSpace`] if either does not fit (the kernel panics).
pub fn swiotlb_init(
    mb: &mut Memblock,
    dma_limit: u64,
    nr_cpus: u64,
    out: &mut Vec<BootReservation>,
) -> Result<(), MemblockError> {
    let ram: u64 = mb.memory().iter().map(|r| r.size).sum();
    let max_phys = mb.memory().last().map_or(0, |r| r.end());
    let size = if max_phys > dma_limit {
        IO_TLB_DEFAULT_SIZE
    } else {
        // swiotlb_adjust_size(): whole segments of slabs.
        let seg = IO_TLB_SEGSIZE << IO_TLB_SHIFT;
        ram.div_ceil(1024).min(IO_TLB_DEFAULT_SIZE).next_multiple_of(seg)
    };
    let size = size.next_multiple_of(PAGE_SIZE);
    let buf = mb.alloc_range(size, PAGE_SIZE, 0, dma_limit, "swiotlb")?;
    out.push(BootReservation {
        name: "swiotlb",
        base: buf.0,
        size,
        kernel: "mem_init() -> swiotlb_init(): memblock_alloc_low()",
        fidelity: "faithful",
        freed_at_end_of_boot: 0,
    });
    let nslabs = size >> IO_TLB_SHIFT;
    let slots = (nslabs * IO_TLB_SLOT_SIZE).next_multiple_of(PAGE_SIZE);
    let s = mb.alloc(slots, PAGE_SIZE, "swiotlb")?;
    out.push(BootReservation {
        name: "swiotlb",
        base: s.0,
        size: slots,
        kernel: "swiotlb_init_remap(): mem->slots",
        fidelity: "faithful",
        freed_at_end_of_boot: 0,
    });
    // mem->areas: one 16-byte struct io_tlb_area per area, as many areas
    // as possible CPUs rounded up to a power of two.
    let areas = 16 * nr_cpus.max(1).next_power_of_two();
    let a = mb.alloc(areas, 64, "swiotlb")?;
    out.push(BootReservation {
        name: "swiotlb",
        base: a.0,
        size: areas,
        kernel: "swiotlb_init_remap(): mem->areas",
        fidelity: "faithful",
        freed_at_end_of_boot: 0,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_places_initrd_and_dtb() {
        let k = KernelImage::DEBIAN_7_2;
        assert_eq!(qemu_virt_initrd_dtb(0x4000_0000, 4 << 30, k.end()), (0x4800_0000, 0x4820_0000));
        // Below 256 MiB: half of RAM, but never inside the image.
        assert_eq!(qemu_virt_initrd_dtb(0x4000_0000, 64 << 20, k.end()), (k.end(), 0x4320_0000));
    }

    fn mb(gib: u64) -> Memblock {
        let mut m = Memblock::default();
        m.add(PhysAddr(0x4000_0000), gib << 30);
        m
    }

    /// "cma: Reserved 64 MiB at 0x00000000fc000000" at 4 and 16 GiB (DMA
    /// limit 4 GiB); at 1 GiB the top of RAM.
    #[test]
    fn cma_below_the_dma_limit() {
        let mut out = vec![];
        assert_eq!(dma_contiguous_reserve(&mut mb(4), 1 << 32, &mut out), Some((0xfc000, 16384)));
        assert_eq!(dma_contiguous_reserve(&mut mb(16), 1 << 32, &mut out), Some((0xfc000, 16384)));
        assert_eq!(dma_contiguous_reserve(&mut mb(1), 1 << 32, &mut out), Some((0x7c000, 16384)));
        // A limit above 4 GiB + 64 MiB: bottom-up from 4 GiB.
        assert_eq!(dma_contiguous_reserve(&mut mb(16), 1 << 40, &mut out), Some((0x100000, 16384)));
        let mut small = Memblock::default();
        small.add(PhysAddr(0x4000_0000), 32 << 20);
        assert_eq!(dma_contiguous_reserve(&mut small, 1 << 32, &mut out), None);
    }

    /// "software IO TLB: mapped [mem 0xf8000000-0xfc000000] (64MB)" at 4
    /// GiB with the CMA area above; "adjusted to 1MB" at 1 GiB.
    #[test]
    fn swiotlb_sizes_and_place() {
        let mut out = vec![];
        let mut m = mb(4);
        dma_contiguous_reserve(&mut m, 1 << 32, &mut out);
        swiotlb_init(&mut m, 1 << 32, 2, &mut out).unwrap();
        assert_eq!((out[1].base, out[1].size), (0xf800_0000, 64 << 20));
        // 32768 slots of 24 bytes; a 16-byte area per CPU (2).
        assert_eq!(out[2].size, 768 << 10);
        assert_eq!(out[3].size, 32);
        let mut out = vec![];
        let mut m = mb(1);
        // 3 CPUs: 4 areas.
        swiotlb_init(&mut m, 1 << 32, 3, &mut out).unwrap();
        assert_eq!((out[0].size, out[2].size), (1 << 20, 64));
    }
}
