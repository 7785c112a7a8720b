//! The vmemmap walk (mm/hugetlb_vmemmap.c, Linux 6.12): splitting PMD
//! blocks, remapping and restoring PTEs, and the entry writes with
//! arm64's break-before-make.
//!
//! # The algorithm
//!
//! `vmemmap_remap_range` walks the kernel's tables over a vmemmap range one
//! PMD at a time. A PMD that is a block (the boot memmap of a whole
//! section) is split first: a new PTE table mapping the same 2 MiB with 512
//! read-write entries is filled while not yet live, then installed under
//! `init_mm.page_table_lock` if the PMD is still a block, and the 2 MiB is
//! flushed unless `SPLIT_NO_TLB_FLUSH`. A split-only walk stops there. A
//! remap or restore walk then visits each PTE: the first one of the range
//! only records the page it maps as the "reuse page" unless one was given
//! (a fresh head), every other one is rewritten:
//!
//! - remap (`vmemmap_remap_pte`): the entry at the reuse address becomes a
//!   read-write mapping of the fresh head page (taken off the to-free list
//!   after a write barrier orders its copy before the entry), every other a
//!   read-only mapping of the reuse page; the page each entry mapped goes
//!   on the to-free list;
//! - restore (`vmemmap_restore_pte`): the entry must map the reuse page; a
//!   page from the list gets a copy of the reuse page with its first
//!   `NR_RESET_STRUCT_PAGE` struct pages overwritten by the next ones, then
//!   a read-write entry maps it.
//!
//! After the walk, a remap or restore flushes the range unless
//! `REMAP_NO_TLB_FLUSH`. The list is a stack, as the kernel's `list_add` /
//! `list_first_entry` make it: the last page added is the first taken.
//!
//! Entry writes go through [`Hvo::update_entry`], which applies the
//! [`Arm64Hvo`] mode (see the crate docs), and tell the engine that the
//! vmemmap changed so that the struct-page accessor follows the tables
//! after the next TLBI.

mod walk;

pub use walk::VmemmapFlags;
pub(crate) use walk::{FlushFor, PteOp, RemapWalk};

use crate::config::Arm64Hvo;
use crate::hvo::{BbmViolation, Hvo, HvoError, MAX_BBM_VIOLATIONS_KEPT};
use mmlab_engine::arch::arm64::barrier::ishst;
use mmlab_engine::arch::arm64::pgtable::desc::{KERNEL_TABLE, PAGE_KERNEL, PAGE_KERNEL_RO, PMD_SIZE, PTRS_PER_TABLE};
use mmlab_engine::arch::arm64::pgtable::{
    self, Desc, DescKind, Level, PgtableAlloc, PgtableError, TableMemory, entry_pa,
};
use mmlab_engine::mm::page::{STRUCT_PAGE_SIZE, pg};
use mmlab_engine::{Cpu, Gfp, PAGE_SIZE, Pfn, PhysAddr, arch::arm64::tlb};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// `copy_page()`: the 4 KiB at `src` into `dst`, word by word.
pub(crate) fn copy_page(m: &mmlab_engine::Machine, dst: Pfn, src: Pfn) {
    let a = m.arena();
    let words = (PAGE_SIZE / 8) as usize;
    let (s, d) = (a.slice::<AtomicU64>(src.phys(), words), a.slice::<AtomicU64>(dst.phys(), words));
    for (d, s) in d.iter().zip(s) {
        d.store(s.load(Relaxed), Relaxed);
    }
}

/// `reset_struct_pages()`: overwrite the first `NR_RESET_STRUCT_PAGE` struct
/// pages of the vmemmap page `page` with the ones after them.
fn reset_struct_pages(m: &mmlab_engine::Machine, page: Pfn) {
    let n = (crate::folio::NR_RESET_STRUCT_PAGE * STRUCT_PAGE_SIZE / 8) as usize;
    let w = m.arena().slice::<AtomicU64>(page.phys(), 2 * n);
    for i in 0..n {
        w[i].store(w[n + i].load(Relaxed), Relaxed);
    }
}

impl Hvo<'_, '_> {
    /// `vmemmap_remap_range()`: walk `[start, end)` with `walk`, then flush
    /// it for a remap or restore unless `REMAP_NO_TLB_FLUSH`.
    pub(crate) fn vmemmap_remap_range(
        &self,
        cpu: &Cpu<'_>,
        start: u64,
        end: u64,
        walk: &mut RemapWalk,
    ) -> Result<(), HvoError> {
        let m = self.m;
        let asp = m.kernel_as();
        let mut addr = start;
        while addr < end {
            let next = ((addr | (PMD_SIZE - 1)) + 1).min(end);
            let w = pgtable::walk(m, &asp, addr);
            let pmd = *w.steps.iter().find(|s| s.level == Level::Pmd).ok_or(HvoError::NotMapped { va: addr })?;
            match pmd.desc.kind(Level::Pmd) {
                DescKind::Block => self.vmemmap_split_pmd(cpu, pmd.slot, addr & !(PMD_SIZE - 1), walk.flags)?,
                DescKind::Table => {}
                _ => return Err(HvoError::NotMapped { va: addr }),
            }
            if walk.op != PteOp::Split {
                let table = PhysAddr(m.read_desc(pmd.slot).addr());
                let mut a = addr;
                while a < next {
                    self.vmemmap_pte_entry(cpu, entry_pa(table, Level::Pte.index(a)), a, walk)?;
                    a += PAGE_SIZE;
                }
            }
            addr = next;
        }
        if walk.op != PteOp::Split && !walk.flags.contains(VmemmapFlags::REMAP_NO_TLB_FLUSH) {
            self.vmemmap_flush_tlb_range(cpu, start, end, FlushFor::Remap);
        }
        Ok(())
    }

    /// `vmemmap_pte_entry()`: the first PTE names the reuse page unless one
    /// was given; every other is remapped or restored.
    fn vmemmap_pte_entry(
        &self,
        cpu: &Cpu<'_>,
        slot: PhysAddr,
        addr: u64,
        walk: &mut RemapWalk,
    ) -> Result<(), HvoError> {
        let pte = self.m.read_desc(slot);
        if pte.kind(Level::Pte) != DescKind::Page {
            return Err(HvoError::NotMapped { va: addr });
        }
        match walk.reuse_page {
            None => walk.reuse_page = Some(Pfn(pte.pfn())),
            Some(reuse) => match walk.op {
                PteOp::Remap => self.vmemmap_remap_pte(cpu, slot, addr, pte, reuse, walk)?,
                PteOp::Restore => self.vmemmap_restore_pte(cpu, slot, addr, pte, reuse, walk)?,
                PteOp::Split => {}
            },
        }
        walk.nr_walked += 1;
        Ok(())
    }

    /// `vmemmap_remap_pte()`.
    fn vmemmap_remap_pte(
        &self,
        cpu: &Cpu<'_>,
        slot: PhysAddr,
        addr: u64,
        pte: Desc,
        reuse: Pfn,
        walk: &mut RemapWalk,
    ) -> Result<(), HvoError> {
        let mut prot = PAGE_KERNEL_RO;
        if addr == walk.reuse_addr {
            // The fresh head: mapped read-write, and no longer to be freed.
            prot = PAGE_KERNEL;
            // list_del(&reuse_page->lru): the fresh page was added last, just
            // before this first entry of the walk, and a batch's list holds
            // every folio's pages, so look from the end.
            if let Some(i) = walk.pages.iter().rposition(|&p| p == reuse) {
                walk.pages.remove(i);
            }
            cpu.dmb(ishst); // smp_wmb(): the copy before the entry
        }
        self.update_entry(cpu, addr, slot, Level::Pte, Desc::page(reuse.phys().0, prot))?;
        walk.pages.push(Pfn(pte.pfn()));
        Ok(())
    }

    /// `vmemmap_restore_pte()`.
    fn vmemmap_restore_pte(
        &self,
        cpu: &Cpu<'_>,
        slot: PhysAddr,
        addr: u64,
        pte: Desc,
        reuse: Pfn,
        walk: &mut RemapWalk,
    ) -> Result<(), HvoError> {
        if pte.pfn() != reuse.0 {
            return Err(HvoError::Corrupt { va: addr });
        }
        let page = walk.pages.pop().ok_or(HvoError::Corrupt { va: addr })?;
        copy_page(self.m, page, reuse);
        reset_struct_pages(self.m, page);
        cpu.dmb(ishst); // smp_wmb(): the copy before the entry
        if let Err(e) = self.update_entry(cpu, addr, slot, Level::Pte, Desc::page(page.phys().0, PAGE_KERNEL)) {
            walk.pages.push(page);
            return Err(e);
        }
        Ok(())
    }

    /// `vmemmap_split_pmd()`: replace the PMD block at `pmd_slot` (mapping
    /// the vmemmap from `start`) by a PTE table mapping the same pages.
    pub(crate) fn vmemmap_split_pmd(
        &self,
        cpu: &Cpu<'_>,
        pmd_slot: PhysAddr,
        start: u64,
        flags: VmemmapFlags,
    ) -> Result<(), HvoError> {
        let m = self.m;
        // pte_alloc_one_kernel(): GFP_PGTABLE_KERNEL, zeroed.
        let table = PgtableAlloc::alloc_table(self.pa, cpu).ok_or(HvoError::NoMemory)?;
        let head = PhysAddr(m.read_desc(pmd_slot).addr());
        for i in 0..PTRS_PER_TABLE {
            // The table is not live yet: plain set_pte_at() of new entries.
            let pte = Desc::page(head.0 + i as u64 * PAGE_SIZE, PAGE_KERNEL);
            pgtable::set_pte(cpu, entry_pa(table, i), pte)?;
        }
        let _ptl = self.page_table_lock.lock();
        if m.read_desc(pmd_slot).kind(Level::Pmd) != DescKind::Block {
            // Someone else split it first.
            PgtableAlloc::free_table(self.pa, cpu, table);
            return Ok(());
        }
        // Blocks from the page allocator become order-0 pages, each freeable.
        if !m.page(head.pfn()).test_flag(pg::PG_RESERVED) {
            self.pa
                .split_page(head.pfn(), PMD_SIZE.trailing_zeros() - 12)
                .map_err(|_| HvoError::Free { pfn: head.pfn() })?;
        }
        cpu.dmb(ishst); // smp_wmb(): the PTEs before the PMD
        if let Err(e) = self.update_entry(cpu, start, pmd_slot, Level::Pmd, Desc::table(table.0, KERNEL_TABLE)) {
            PgtableAlloc::free_table(self.pa, cpu, table);
            return Err(e);
        }
        self.count(|c| c.vmemmap_pmd_splits += 1);
        if !flags.contains(VmemmapFlags::SPLIT_NO_TLB_FLUSH) {
            self.vmemmap_flush_tlb_range(cpu, start, start + PMD_SIZE, FlushFor::Split);
        }
        Ok(())
    }

    /// Write the live entry `slot` (mapping `va` at `level`) with `new`, in
    /// the [`Arm64Hvo`] mode: break-before-make with remote CPUs paused
    /// (the RFC's `vmemmap_update_pte`/`_pmd`), or the generic in-place
    /// write through the engine's checker, recording what it refuses.
    pub(crate) fn update_entry(
        &self,
        cpu: &Cpu<'_>,
        va: u64,
        slot: PhysAddr,
        level: Level,
        new: Desc,
    ) -> Result<(), HvoError> {
        let m = self.m;
        let write = |d: Desc| match level {
            Level::Pte => pgtable::set_pte(cpu, slot, d),
            _ => pgtable::set_pmd(cpu, slot, d),
        };
        match self.cfg.arm64 {
            Arm64Hvo::PauseCpus => {
                let _paused = self.pause.write().unwrap_or_else(|e| e.into_inner());
                self.count(|c| c.remote_cpu_pauses += 1);
                pgtable::pte_clear(cpu, slot);
                m.memmap().note_vmemmap_change();
                tlb::flush_tlb_kernel_range(cpu, va, va + level.entry_size());
                self.count(|c| c.flush_tlb_kernel_range_bbm += 1);
                write(new)?;
            }
            Arm64Hvo::Off | Arm64Hvo::Unsafe => match write(new) {
                Ok(()) => {}
                Err(PgtableError::BreakBeforeMake { entry, old, new }) => {
                    self.count(|c| c.bbm_violations += 1);
                    let mut v = self.violations.lock();
                    if v.len() < MAX_BBM_VIOLATIONS_KEPT {
                        v.push(BbmViolation { va, level, entry, old, new });
                    }
                    drop(v);
                    // What the generic code does: WRITE_ONCE over the live
                    // entry, then the barriers of set_pte_at()/set_pmd().
                    m.desc_slot(slot).store(new.0, Relaxed);
                    pgtable::queue_pte_barriers(cpu);
                }
                Err(e) => return Err(e.into()),
            },
        }
        m.memmap().note_vmemmap_change();
        Ok(())
    }

    /// `flush_tlb_kernel_range()` as HVO calls it (`vmemmap_flush_tlb_range`
    /// in the RFC, a no-op when every entry was already flushed by its
    /// break-before-make).
    pub(crate) fn vmemmap_flush_tlb_range(&self, cpu: &Cpu<'_>, start: u64, end: u64, why: FlushFor) {
        if self.cfg.arm64 == Arm64Hvo::PauseCpus {
            return;
        }
        tlb::flush_tlb_kernel_range(cpu, start, end);
        self.count(|c| match why {
            FlushFor::Split => c.flush_tlb_kernel_range_split += 1,
            FlushFor::Remap => c.flush_tlb_kernel_range_remap += 1,
        });
    }

    /// `flush_tlb_all()` of a batch (`vmemmap_flush_tlb_all` in the RFC).
    pub(crate) fn vmemmap_flush_tlb_all(&self, cpu: &Cpu<'_>) {
        if self.cfg.arm64 == Arm64Hvo::PauseCpus {
            return;
        }
        tlb::flush_tlb_all(cpu);
        self.count(|c| c.flush_tlb_all += 1);
    }

    /// `alloc_vmemmap_page_list()`: `nr` order-0 pages
    /// (`GFP_KERNEL | __GFP_RETRY_MAYFAIL`), all or none.
    pub(crate) fn alloc_vmemmap_page_list(&self, cpu: &Cpu<'_>, nr: u64) -> Result<Vec<Pfn>, HvoError> {
        let mut list = Vec::with_capacity(nr as usize);
        for _ in 0..nr {
            match self.pa.alloc_pages(cpu, Gfp::GFP_KERNEL | Gfp::__GFP_RETRY_MAYFAIL, 0) {
                Some(p) => list.push(p),
                None => {
                    for p in list.into_iter().rev() {
                        self.pa.free_pages(cpu, p, 0).map_err(|_| HvoError::Free { pfn: p })?;
                    }
                    return Err(HvoError::NoMemory);
                }
            }
        }
        self.count(|c| c.vmemmap_pages_allocated += nr);
        Ok(list)
    }

    /// `free_vmemmap_page_list()`: boot memmap (`PG_reserved`) through
    /// `free_reserved_page()`, the rest through `__free_page()`, in list
    /// order. Every page is tried; the first failure is returned.
    pub(crate) fn free_vmemmap_page_list(&self, cpu: &Cpu<'_>, pages: Vec<Pfn>) -> Result<(), HvoError> {
        let mut first_err = None;
        for pfn in pages.into_iter().rev() {
            let boot = self.m.page(pfn).test_flag(pg::PG_RESERVED);
            let r = if boot { self.pa.free_reserved_page(cpu, pfn) } else { self.pa.free_pages(cpu, pfn, 0) };
            match r {
                Ok(()) => self.count(|c| {
                    c.vmemmap_pages_freed += 1;
                    c.vmemmap_boot_pages_freed += u64::from(boot);
                }),
                Err(_) => {
                    first_err.get_or_insert(HvoError::Free { pfn });
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
