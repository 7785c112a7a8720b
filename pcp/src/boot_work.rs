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
//! (`cma_alloc`). The program runs in order, with mmlab choosing the
//! frames: only the requests are the kernel's. An allocation the machine
//! cannot satisfy is skipped with the frees that belong to it. What stays
//! allocated is the boot's kernel memory: held for good, counted in
//! [`BootWork::held_pages`].
//!
//! # On which CPU, and when
//!
//! The base record ran on one CPU. On the machine's CPUs the program runs
//! as the kernel spreads the boot (derived in [`spread`] from the traced
//! 2 GiB / 3 CPU boot and the captures): before `smp_init()` (the `percpu`
//! marker) on CPU 0 only; the initcalls mostly on CPU 0 (`kernel_init()`)
//! with the rest on the other CPUs; /init's processes (after the
//! `ftrace_free` marker) evenly on all. Each CPU's pageset is used, and its
//! `pcp->high` set from `high_min` and then grown, only when a step lands
//! on it, as in the kernel (a pageset no step touches keeps `high` 0).
//! Three more steps stand where the kernel takes them:
//!
//! - the layers above (`Vmalloc::boot`: vmalloc's areas, the DMA pools'
//!   `cma_alloc()` with its `drain_all_pages()`) right after the `futex`
//!   marker (`futex_init()`, core_initcall; `dma_atomic_pool_init()` is
//!   postcore_initcall), so that drain empties the pagesets of the boot's
//!   first steps, not of all of them;
//! - `free_initrd_mem()` at the `initrd_free` marker (the end of the
//!   initramfs unpack), on CPU 0 ([`spread::end_of_boot_cpu`]);
//! - `free_initmem()` after `ftrace_free_init_mem()` (the `ftrace_free`
//!   marker), on the last CPU.
//!
//! | piece | fidelity |
//! |---|---|
//! | the base record's requests (order, gfp, migratetype) and their order | faithful to that boot (instrumented: a recording) |
//! | hash tables, futex queues, posix timers ([`rules::HASH_TABLES`]) | faithful: `alloc_large_system_hash()`'s sizing from `nr_kernel_pages` and the callers' parameters, checked against the peers' dmesg |
//! | per-CPU work, early allocations, memory-block devices | fitted: page counts from seven traced boots (1-16 GiB, 1-4 CPUs), shapes from the traces' slab orders ([`rules`]) |
//! | where they land | mmlab's allocator |
//! | on which CPU | faithful before `smp_init()` (CPU 0); fitted after it (shares and run length from the 2G/3 trace, [`spread`]); simplified for the initrd and init sections (one CPU each, the commonest in the captures) |
//! | when | simplified: one sequence after `init_per_zone_wmark_min()`, the CPUs taking turns rather than running at once; the layers above's boot work at one point (postcore, where its CMA drain belongs; the kernel spreads its task stacks over the whole boot); the initrd's and init sections' give-back at their markers (the `initrd_free` marker placed by hand in the record); no `vmstat_update()` tick (`decay_pcp_high()`, once a second of boot: the real boots took 1.3 to 32 s), so `high` stays where the refills raised it |
//! | the trace's own ring buffers, frees of memblock memory (deferred struct pages, CMA, initrd) | dropped by the compactor; mmlab frees CMA and the initrd itself |

mod program;
mod replay;
pub mod rules;
pub mod spread;

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
