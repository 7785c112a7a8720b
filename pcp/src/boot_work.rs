//! The boot's own page allocations: what the kernel allocated and freed
//! between `memblock_free_all()` and the moment the real boot's capture read
//! /proc/vmstat (slab, page tables, hash tables, the initramfs page cache,
//! init's pages), generated for the machine at hand and replayed through the
//! allocator, so that a `boot.state=real` machine starts with the
//! Unmovable and Reclaimable pageblocks, the fragmented low orders, the
//! filled pagesets and the `pgalloc`/`pgfree` counts a real boot of its size
//! leaves.
//!
//! # The algorithm
//!
//! A *base record* holds the page allocations and frees of one real boot
//! (Debian's arm64 7.2.13 on QEMU virt, 4 GiB, 1 CPU, kmem events with kernel
//! stacks from the command line), compacted by
//! `scripts/arm64-peer/boot-kmem-compact.py pages` into `pcp/data/`: each
//! allocation with its CPU, order, migratetype and gfp flags; each free as
//! (allocation number, page offset, order); each `split_page()` the frees
//! imply. What depends on the machine's size was cut out of it and left as
//! a *rule marker*; [`rules`] expands each marker for the machine (its CPUs,
//! its memory, `nr_kernel_pages`): the hash tables sized from memory after
//! `mem_init()`, the per-CPU work of every CPU brought up, the memory-block
//! devices, the early allocations before the trace could start. What the
//! crates above emulate through their own calls is left out altogether:
//! vmalloc areas, percpu chunks, the kernel page tables of the vmalloc range
//! (`Vmalloc::boot` makes them) and the CMA pages of the DMA pools
//! (`cma_alloc`). The program runs in order on the machine's CPUs (record
//! CPU n on n mod CPUs), with mmlab choosing the frames: only the requests
//! are the kernel's. An allocation the machine cannot satisfy is skipped
//! with the frees that belong to it. What stays allocated is the boot's
//! kernel memory: held for good, counted in [`BootWork::held_pages`].
//!
//! | piece | fidelity |
//! |---|---|
//! | the base record's requests (order, gfp, migratetype) and their order | faithful to that boot (instrumented: a recording) |
//! | hash tables, futex queues, posix timers ([`rules::HASH_TABLES`]) | faithful: `alloc_large_system_hash()`'s sizing from `nr_kernel_pages` and the callers' parameters, checked against the peers' dmesg |
//! | per-CPU work, early allocations, memory-block devices | fitted: page counts from seven traced boots (1-16 GiB, 1-4 CPUs), shapes from the traces' slab orders ([`rules`]) |
//! | where they land | mmlab's allocator |
//! | when | simplified: all at once after `init_per_zone_wmark_min()`, before the initrd and init sections are freed; the kernel spreads them over the initcalls and init |
//! | the trace's own ring buffers, frees of memblock memory (deferred struct pages, CMA, initrd) | dropped by the compactor; mmlab frees CMA and the initrd itself |

mod program;
mod replay;
pub mod rules;

use mmlab_engine::Pfn;

/// The base record: the 4 GiB / 1 CPU boot (see the module docs).
const BOOT_WORK_BASE: &str = include_str!("../data/boot-work-7.2-virt.txt");

/// What the boot-work replay did (`mmlab stat boot-state`, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BootWork {
    /// Allocations replayed.
    pub allocations: u64,
    /// Allocations the machine could not satisfy (skipped, with their frees).
    pub failed: u64,
    /// Frees replayed.
    pub frees: u64,
    /// Pages allocated (`pgalloc` of the replay).
    pub pages_allocated: u64,
    /// Pages freed (`pgfree` of the replay).
    pub pages_freed: u64,
    /// Pages still allocated when the replay ends: the boot's kernel memory.
    pub held_pages: u64,
}

/// What one rule added to the replay (`mmlab stat boot-state`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BootRuleWork {
    /// The rule's name (as its marker in the base record).
    pub rule: String,
    /// The kernel function whose allocations the rule stands for.
    pub kernel: &'static str,
    /// How the pages follow from the machine.
    pub formula: String,
    /// faithful / fitted, as the module's table says.
    pub fidelity: &'static str,
    /// Allocations made.
    pub allocations: u64,
    /// Pages allocated.
    pub pages: u64,
}

/// One allocation of the program: where mmlab put it, its order, and
/// whether it has been split into order-0 pages.
#[derive(Clone, Copy)]
struct Block {
    pfn: Pfn,
    order: u32,
    split: bool,
}
