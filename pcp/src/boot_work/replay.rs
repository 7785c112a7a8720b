//! The replay of the boot's record through the allocator (module docs of
//! the parent).

use super::{BOOT_WORK_4G_2CPU, Block, BootWork};
use crate::page_alloc::PageAllocator;
use mmlab_engine::{Cpu, Gfp};

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
