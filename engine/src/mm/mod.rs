//! Architecture-independent memory management, as the kernel's `mm/` (and
//! the `include/linux/` headers that belong to it) holds it.
//!
//! - [`mmzone`]: orders, migratetypes, zones and nodes
//!   (`include/linux/mmzone.h`); re-exported here, so `mm::MAX_PAGE_ORDER`
//!   names it as the kernel's headers do.
//! - [`memblock`]: the boot allocator (`mm/memblock.c`).
//! - [`page`]: `struct page` and the memmap (`include/linux/mm_types.h`,
//!   `page-flags.h`).
//! - [`memmap`]: the memmap behind the vmemmap, present sections and
//!   deferred struct page init (`mm/mm_init.c`, `mm/sparse.c`).
//! - [`banks`]: RAM as banks, as a device tree's memory node gives it.
//! - [`boot_state`]: the early reservations a real boot makes (kernel
//!   image, initrd, DTB, CMA, swiotlb), on by default (`boot.state`).
//! - [`list`]: `struct list_head` through struct pages.
//! - [`gfp`]: GFP flags (`include/linux/gfp_types.h`).
//! - [`vmstat`]: event counters (`mm/vmstat.c`).
//! - [`mm_init`]: boot: `Machine::boot`, memmap initialisation
//!   (`mm/mm_init.c`), apart from the run-time code as in the kernel.
//! - [`sparse_vmemmap`]: the vmemmap's population at boot
//!   (`mm/sparse-vmemmap.c`).
//! - [`vmemmap`]: the struct-page accessor's view of the vmemmap at run
//!   time, kept coherent by the TLBI hook registered at boot.

pub mod banks;
pub mod boot_allocs;
pub mod boot_state;
pub mod gfp;
pub mod list;
pub mod memblock;
pub mod memmap;
pub mod mm_init;
pub mod mmzone;
pub mod page;
pub mod sparse_vmemmap;
pub mod vmemmap;
pub mod vmstat;
pub mod zone_layout;

pub use mmzone::*;
