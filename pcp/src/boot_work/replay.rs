//! The replay of the boot's program through the allocator (module docs of
//! the parent).

use super::program::{BootReplay, Op, build};
use super::rules::{BootMachine, MEMORY_BLOCK_SIZE};
use super::{BOOT_WORK_BASE, Block, BootRuleWork, BootWork};
use crate::error::FreeError;
use crate::page_alloc::PageAllocator;
use mmlab_engine::{Cpu, PAGE_SHIFT};

impl<'m> PageAllocator<'m> {
    /// The machine as the rules see it: its CPUs, `nr_kernel_pages` (the
    /// pages `memblock_free_all()` handed over, CMA left out, and the
    /// swiotlb buffer, which `mem_init()` carves out after
    /// `free_area_init()` counted; the kernel's count is a little higher
    /// still: the percpu first chunk and the VFS hash tables come after
    /// it too, and the tables round to powers of two) and its memory
    /// blocks.
    pub fn boot_machine(&self) -> BootMachine {
        let cma: u64 = self.node.zones().iter().map(|z| z.cma_pages()).sum();
        let swiotlb: u64 =
            self.m.boot_state().reservations.iter().filter(|r| r.name == "swiotlb").map(|r| r.size >> PAGE_SHIFT).sum();
        let present: u64 = self.node.zones().iter().map(|z| z.present_pages()).sum();
        BootMachine {
            cpus: self.nr_cpus as u64,
            nr_kernel_pages: self.managed_pages().saturating_sub(cma) + swiotlb,
            memory_blocks: (present << PAGE_SHIFT).div_ceil(MEMORY_BLOCK_SIZE),
        }
    }

    /// Build the machine's program (module docs), ready to replay.
    pub(crate) fn boot_work_program(&self) -> BootReplay {
        let program = build(BOOT_WORK_BASE, &self.boot_machine());
        BootReplay {
            ops: program.ops,
            next: 0,
            rules: program.rules,
            blocks: Vec::new(),
            work: BootWork::default(),
            given_back: Vec::new(),
        }
    }

    /// Replay `r` on `cpus` up to the place where the layers above do
    /// their boot work ([`Op::Above`]) or to its end. True when it stopped
    /// at that place (call again to go on).
    ///
    /// # Errors
    /// A page the end of boot gives back was not reserved.
    pub(crate) fn replay_boot_work(&self, r: &mut BootReplay, cpus: &[Cpu<'m>]) -> Result<bool, FreeError> {
        while let Some(&op) = r.ops.get(r.next) {
            r.next += 1;
            let w = &mut r.work;
            match op {
                Op::Above => return Ok(true),
                Op::GiveBack { initrd, cpu } => {
                    let initrd_base =
                        self.m.boot_state().reservations.iter().find(|x| x.name == "initrd").map(|x| x.base);
                    let range = self
                        .m
                        .boot_state()
                        .given_back
                        .iter()
                        .copied()
                        .find(|&(base, _)| (Some(base) == initrd_base) == initrd && !r.given_back.contains(&base));
                    if let Some((base, size)) = range {
                        self.free_reserved_area(&cpus[cpu % cpus.len()], base, size)?;
                        r.given_back.push(base);
                    }
                }
                Op::Alloc { cpu, order, gfp, rule } => {
                    let got = self.alloc_pages(&cpus[cpu % cpus.len()], gfp, order);
                    w.allocations += 1;
                    match got {
                        Some(_) => {
                            w.pages_allocated += 1 << order;
                            if let Some(rl) = rule.and_then(|i| r.rules.get_mut(i)) {
                                rl.allocations += 1;
                                rl.pages += 1 << order;
                            }
                        }
                        None => w.failed += 1,
                    }
                    r.blocks.push(got.map(|pfn| Block { pfn, order, split: false }));
                }
                Op::Split { k } => {
                    if let Some(Some(b)) = r.blocks.get_mut(k)
                        && !b.split
                        && self.split_page(b.pfn, b.order).is_ok()
                    {
                        b.split = true;
                    }
                }
                Op::Free { cpu, k, off, order } => {
                    let cpu = &cpus[cpu % cpus.len()];
                    let Some(Some(b)) = r.blocks.get(k).copied() else { continue };
                    let ok = if b.split {
                        (0..1u64 << order).all(|i| self.free_pages(cpu, b.pfn.add(off + i), 0).is_ok())
                    } else {
                        off == 0 && order == b.order && self.free_pages(cpu, b.pfn, order).is_ok()
                    };
                    if ok {
                        w.frees += 1;
                        w.pages_freed += 1 << order;
                    }
                }
            }
        }
        Ok(false)
    }

    /// What the boot-work replay did at boot (all 0 on a bare machine).
    pub fn boot_work(&self) -> BootWork {
        self.boot_work
    }

    /// What each rule added to the replay (empty on a bare machine).
    pub fn boot_rules(&self) -> &[BootRuleWork] {
        &self.boot_rules
    }
}
