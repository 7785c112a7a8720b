//! Why a vmalloc-family call failed.

use mmlab_engine::Pfn;
use mmlab_engine::arch::arm64::pgtable::PgtableError;
use std::fmt;
/// Why a vmalloc-family call failed; nothing was changed, nothing is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmallocError {
    /// Size 0.
    ZeroSize,
    /// Larger than the vmalloc range or RAM.
    TooLarge {
        /// The size asked for, in bytes.
        size: u64,
    },
    /// Alignment not a power of two.
    BadAlign {
        /// The alignment asked for, in bytes.
        align: u64,
    },
    /// No free virtual range of that size and alignment, even after a purge.
    NoVmapSpace {
        /// The size asked for, in bytes.
        size: u64,
        /// The alignment asked for, in bytes.
        align: u64,
    },
    /// The page allocator (or a table allocation) ran out of memory.
    NoMemory {
        /// The size of the request, in bytes.
        size: u64,
    },
    /// The address was never returned by this allocator (or was freed).
    NotVmalloc {
        /// The address given.
        addr: u64,
    },
    /// The address lies inside an area but is not its start.
    InsideArea {
        /// The address given.
        addr: u64,
        /// The start of the area that holds the address.
        start: u64,
    },
    /// The area was freed already and waits on the lazy list.
    DoubleFree {
        /// The address given.
        addr: u64,
    },
    /// vfree of a vmap area or vunmap of a vmalloc area.
    WrongKind {
        /// The address given.
        addr: u64,
    },
    /// The page tables refused the mapping (other than for lack of memory).
    Map(PgtableError),
    /// The CPU handle belongs to another machine.
    ForeignCpu {
        /// The handle's CPU id.
        cpu: usize,
    },
    /// `vm_unmap_ram` with a page count other than the `mapped` pages the
    /// mapping at `addr` was made with.
    WrongCount {
        /// The mapping's address.
        addr: u64,
        /// The pages the mapping was made with.
        mapped: u64,
        /// The page count given to `vm_unmap_ram`.
        given: usize,
    },
    /// A PCI I/O window not page aligned or past `IO_SPACE_LIMIT`.
    IoSpace {
        /// The first port.
        port: u64,
        /// The window's size in bytes.
        size: u64,
    },
    /// A page given to vmap/vm_map_ram is not RAM (`!pfn_valid()`).
    InvalidPfn {
        /// The frame.
        pfn: Pfn,
    },
    /// A page given to vmap/vm_map_ram is not an allocated page (free,
    /// reserved by memblock, or never handed out).
    PageNotAllocated {
        /// The frame.
        pfn: Pfn,
    },
}

impl fmt::Display for VmallocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmallocError::ZeroSize => write!(f, "vmalloc of size 0"),
            VmallocError::TooLarge { size } => write!(f, "vmalloc size {size:#x} larger than the vmalloc range or RAM"),
            VmallocError::BadAlign { align } => write!(f, "alignment {align:#x} is not a power of two"),
            VmallocError::NoVmapSpace { size, align } => {
                write!(f, "vmalloc: allocation failure: {size} bytes, align {align:#x}: no vmap space")
            }
            VmallocError::NoMemory { size } => write!(f, "vmalloc error: size {size}, page allocation failure"),
            VmallocError::NotVmalloc { addr } => write!(f, "Trying to vfree() nonexistent vm area ({addr:#x})"),
            VmallocError::InsideArea { addr, start } => {
                write!(f, "Trying to vfree() {addr:#x} inside the area at {start:#x}")
            }
            VmallocError::DoubleFree { addr } => write!(f, "Trying to vfree() already freed area ({addr:#x})"),
            VmallocError::WrongKind { addr } => write!(f, "area at {addr:#x} is of another kind (vmalloc vs vmap)"),
            VmallocError::Map(e) => write!(f, "vmalloc: mapping failed: {e}"),
            VmallocError::ForeignCpu { cpu } => write!(f, "cpu {cpu} is a handle of another machine"),
            VmallocError::WrongCount { addr, mapped, given } => {
                write!(f, "vm_unmap_ram({addr:#x}, {given}): the mapping there has {mapped} pages")
            }
            VmallocError::IoSpace { port, size } => write!(
                f,
                "pci_remap_iospace: ports {port:#x}+{size:#x} not page aligned or past IO_SPACE_LIMIT {:#x}",
                mmlab_engine::arch::arm64::memory::IO_SPACE_LIMIT
            ),
            VmallocError::InvalidPfn { pfn } => write!(f, "vmap: pfn {pfn} is not RAM (pfn_valid fails)"),
            VmallocError::PageNotAllocated { pfn } => {
                write!(f, "vmap: pfn {pfn} is not an allocated page (free, reserved or never handed out)")
            }
        }
    }
}
impl std::error::Error for VmallocError {}
