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

use crate::PageAllocator;
use mmlab_engine::{Cpu, Gfp, Pfn};

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

impl<'m> PageAllocator<'m> {
    /// Replay the boot's allocations and frees on `cpus` (module docs).
    pub(crate) fn replay_boot_work(&self, cpus: &[Cpu<'m>]) -> BootWork {
        let mut gfps: Vec<Gfp> = Vec::new();
        let mut blocks: Vec<Option<Block>> = Vec::new();
        let mut w = BootWork::default();
        let mut held = 0u64;
        let n = |s: Option<&str>| s.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        for line in BOOT_WORK_4G_2CPU.lines() {
            let mut f = line.split_whitespace();
            match f.next() {
                Some("g") => {
                    let _ = f.next();
                    gfps.push(f.next().and_then(|s| s.parse::<Gfp>().ok()).unwrap_or_default());
                }
                Some("a") => {
                    let cpu = &cpus[n(f.next()) as usize % cpus.len()];
                    let order = n(f.next()) as u32;
                    let mt = n(f.next());
                    let gfp = gfps.get(n(f.next()) as usize).copied().unwrap_or_default();
                    // The migratetype the trace printed decides the mobility
                    // bits (early boot masks some gfp bits out of the print).
                    let mut gfp = Gfp::from_bits_retain(
                        gfp.bits() & !(Gfp::__GFP_MOVABLE.bits() | Gfp::__GFP_RECLAIMABLE.bits()),
                    ) | Gfp::__GFP_NOWARN;
                    gfp |= match mt {
                        1 => Gfp::__GFP_MOVABLE,
                        2 => Gfp::__GFP_RECLAIMABLE,
                        _ => Gfp::empty(),
                    };
                    let got = self.alloc_pages(cpu, gfp, order);
                    w.allocations += 1;
                    match got {
                        Some(_) => held += 1 << order,
                        None => w.failed += 1,
                    }
                    blocks.push(got.map(|pfn| Block { pfn, order, split: false }));
                }
                Some("s") => {
                    if let Some(Some(b)) = blocks.get_mut(n(f.next()) as usize)
                        && self.split_page(b.pfn, b.order).is_ok()
                    {
                        b.split = true;
                    }
                }
                Some("f") => {
                    let cpu = &cpus[n(f.next()) as usize % cpus.len()];
                    let (k, off, order) = (n(f.next()) as usize, n(f.next()), n(f.next()) as u32);
                    let Some(Some(b)) = blocks.get(k).copied() else { continue };
                    let ok = if b.split {
                        (0..1u64 << order).all(|i| self.free_pages(cpu, b.pfn.add(off + i), 0).is_ok())
                    } else {
                        off == 0 && order == b.order && self.free_pages(cpu, b.pfn, order).is_ok()
                    };
                    if ok {
                        w.frees += 1;
                        held -= 1 << order;
                    }
                }
                _ => {}
            }
        }
        w.held_pages = held;
        w
    }

    /// What the boot-work replay did at boot (all 0 on a bare machine).
    pub fn boot_work(&self) -> BootWork {
        self.boot_work
    }
}
