//! The boot's own page allocations: what the kernel allocated and freed
//! between `memblock_free_all()` and the login prompt (slab, kernel stacks,
//! page tables, vmalloc, the initramfs page cache, init's pages), replayed
//! through the allocator so that a `boot.state=real` machine starts with the
//! Unmovable and Reclaimable pageblocks, the fragmented low orders and the
//! filled pagesets a real boot leaves.
//!
//! # The algorithm
//!
//! The record is a real boot's kmem trace (Debian's arm64 7.2.13 on QEMU
//! virt, 4 GiB, 2 CPUs, `trace_event=kmem:...` from the command line;
//! `scripts/arm64-peer/boot.sh` with `PEER_BOOT_TRACE=1`), compacted by
//! `scripts/arm64-peer/boot-kmem-compact.py` into `pcp/data/`: each
//! allocation with its CPU, order, migratetype and gfp flags; each free as
//! (allocation number, page offset, order); each `split_page()` the frees
//! imply. The replay runs them in order on the same CPUs (CPU n on
//! n mod the machine's CPUs), with mmlab choosing the frames: only the
//! requests are the kernel's, the placement is mmlab's allocator at work.
//! An allocation the machine cannot satisfy (a small machine) is skipped
//! with the frees that belong to it. What stays allocated is the boot's
//! kernel memory: held for good, counted in [`BootWork::held_pages`].
//!
//! | piece | fidelity |
//! |---|---|
//! | the requests (order, gfp, migratetype, CPU) and their order | faithful to that boot (instrumented: a recording) |
//! | where they land | mmlab's allocator |
//! | when | simplified: all at once after `init_per_zone_wmark_min()`, before the initrd and init sections are freed; the kernel spreads them over the initcalls and init |
//! | the trace's own ring buffer, frees of memory allocated before the trace (deferred struct pages, CMA, initrd) | dropped by the compactor; mmlab frees CMA and the initrd itself |

mod replay;

use mmlab_engine::Pfn;

/// The compacted record of the 4 GiB / 2 CPU boot (see the module docs).
const BOOT_WORK_4G_2CPU: &str = include_str!("../data/boot-work-7.2-virt-4G-2cpu.txt");

/// What the boot-work replay did (`mmlab stat boot-state`, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BootWork {
    /// Allocations replayed.
    pub allocations: u64,
    /// Allocations the machine could not satisfy (skipped, with their frees).
    pub failed: u64,
    /// Frees replayed.
    pub frees: u64,
    /// Pages still allocated when the replay ends: the boot's kernel memory.
    pub held_pages: u64,
}

/// One allocation of the record: where mmlab put it, its order, and
/// whether it has been split into order-0 pages.
#[derive(Clone, Copy)]
struct Block {
    pfn: Pfn,
    order: u32,
    split: bool,
}
