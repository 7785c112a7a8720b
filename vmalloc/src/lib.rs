//! vmalloc (mm/vmalloc.c, Linux 6.17/7.x): virtually contiguous kernel
//! memory in the vmalloc range, backed by pages from the page allocator and
//! mapped by the kernel's page tables.
//!
//! # The algorithm
//!
//! `__vmalloc_node_range()` does three things. First it takes virtual space:
//! the request (rounded up to the mapping granule, plus one guard page) is
//! cut out of the free-space tree by `alloc_vmap_area()`, lowest address
//! first ([`vmap_area`]). Then it takes physical pages
//! (`vm_area_alloc_pages()`): in 7.2 (`vmalloc.large_order_pages`), first
//! the largest blocks that fit, of order `ilog2(pages left)`, each split by
//! `split_page()` into independent order-0 pages; then, as in 6.x, order-0
//! pages from the bulk allocator in chunks of at most 100, or, for a huge
//! mapping, order-4 (64 KiB) or order-9 (2 MiB) blocks, split the same way.
//! Last it maps them (`vmap_pages_range()`): per PTE table inside one
//! lazy-MMU section, so the `dsb ishst; isb` of every PTE write is issued
//! once per table; a huge mapping maps each block separately, as a PMD block
//! or a 64 KiB contiguous PTE run.
//!
//! `vfree()` unmaps without any TLB maintenance, frees the pages (one by
//! one at order 0 in 6.x; in 7.2, `vmalloc.free_pages_bulk`, each
//! physically contiguous run as aligned blocks), and puts the virtual range
//! on a lazy list. Only when more
//! than `lazy_max_pages()` = fls(CPUs) × 8192 pages are waiting does a purge
//! (`__purge_vmap_area_lazy()`) flush the TLB once over the whole span of
//! the lazy areas and return them to the free tree. Until then the range is
//! not reused, so no stale translation can be hit.
//!
//! `vmalloc_init()` starts from the early areas (`vm_area_add_early()`):
//! with the kernel image in RAM (the real boot state), its five
//! `declare_kernel_vmas()` segments from `VMALLOC_START`, busy and never
//! freed ([`AreaKind::Early`]), so the first vmalloc lands after them as on
//! the real kernel; /proc/vmallocinfo prints node by node as
//! `vmalloc_info_show()` does (faithful). The list heads of the kernel's
//! statics live in the image's `[_data, _end)`; without the image that
//! window is kept out of the free space ([`reserved`]), so no area ever
//! covers a list head. On a real-boot machine
//! [`Vmalloc::boot`] also makes the areas a real boot leaves ([`boot`]:
//! IRQ and task stacks, ioremaps, the atomic DMA pools, a percpu chunk,
//! ...), through the same calls a user of the crate has: `ioremap`,
//! `dma_common_contiguous_remap` and `pcpu_get_vm_areas` besides the
//! vmalloc family.
//!
//! Fidelity: faithful in the order of steps, sizes, alignment, guard pages,
//! the huge-mapping decision and fallback, the page orders requested, the
//! barriers and the TLB flushes; simplified in that the purge runs
//! synchronously on the freeing CPU (the kernel queues it on a workqueue;
//! one purge covers every node instead of helper workers per node), busy
//! areas live in one ordered map per vmap node, the per-node size pools
//! (`node_alloc`, `node_pool_add_va`, quarter decay per purge) are kept,
//! and the page-pointer array is host memory (a nested vmalloc is still
//! made for arrays over a page, as the kernel does, so its cost is paid).
//!
//! # Example
//!
//! Boot a small machine, its page allocator and vmalloc; vmalloc five
//! pages, look at the area, and vfree it:
//!
//! ```
//! use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE};
//! use mmlab_pcp::{AllocatorConfig, PageAllocator};
//! use mmlab_vmalloc::{AreaKind, VM_ALLOC, Vmalloc, VmallocConfig};
//!
//! let m = Machine::boot(MachineConfig::with("64M", 1)?)?;
//! let pa = PageAllocator::boot(&m, AllocatorConfig::default())?;
//! let vm = Vmalloc::new(&pa, VmallocConfig::default());
//! let cpu = m.cpu(0)?;
//!
//! let addr = vm.vmalloc(&cpu, 5 * PAGE_SIZE)?;
//! let area = vm.areas().into_iter().find(|a| a.addr == addr).expect("a busy area");
//! assert_eq!((area.kind, area.pages.len(), area.size), (AreaKind::Vmalloc, 5, 6 * PAGE_SIZE));
//! assert!(area.flags.contains(VM_ALLOC));
//! assert!(vm.vmallocinfo().contains(" pages=5 vmalloc N0=5\n"));
//!
//! // vfree unmaps without a flush; the range waits on the lazy list.
//! vm.vfree(&cpu, addr)?;
//! assert_eq!((vm.counts().vmallocs, vm.counts().vfrees), (1, 1));
//! assert_eq!(vm.lazy_nr(), 6);
//! vm.check()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod area;
pub mod boot;
mod check;
mod config;
mod counts;
mod error;
mod ioremap;
mod kvfree;
mod lazy;
mod lockstat;
mod pages;
pub mod percpu;
mod percpu_vm;
mod procfs;
pub mod reserved;
mod vmalloc;
mod vmap;
pub mod vmap_area;
mod vmap_block;
mod vrealloc;

pub use area::{
    AreaKind, VM_ALLOC, VM_ALLOW_HUGE_VMAP, VM_DMA_COHERENT, VM_IOREMAP, VM_MAP, VM_NO_GUARD, VmArea, VmFlags,
};
pub use boot::{VmallocBootError, VmallocBootRule, VmallocBootWork};
pub use config::VmallocConfig;
pub use ioremap::IOREMAP_MAX_ORDER;

pub use counts::{VmallocCounts, VmallocMeminfo};
pub use error::VmallocError;
pub use lockstat::{LockClassStat, LockStatRow, VmallocLockStat, VmapLockClass};
pub use vmalloc::{MAX_VA_SIZE_PAGES, Vmalloc, VmallocState};
pub use vmap_block::{VMAP_BBMAP_BITS, VMAP_BLOCK_SIZE, VMAP_MAX_ALLOC};
