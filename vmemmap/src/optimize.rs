//! Optimizing and restoring folios, one at a time and in batches
//! (mm/hugetlb_vmemmap.c, Linux 6.12, with the grace-period placement of
//! each [`RcuPolicy`]).
//!
//! # The algorithm
//!
//! One folio: `hugetlb_vmemmap_optimize_folio` runs the helper with
//! `VMEMMAP_SYNCHRONIZE_RCU` and frees the collected pages at once (the
//! remap already flushed its range). `hugetlb_vmemmap_restore_folio` runs
//! the restore helper with the same flag.
//!
//! A batch (`hugetlb_vmemmap_optimize_folios`): first split the PMDs of every
//! eligible folio with `SPLIT_NO_TLB_FLUSH`, stopping at the first ENOMEM
//! (the remap can split later, with memory the dedup frees); one
//! `flush_tlb_all`; then optimize each folio with `REMAP_NO_TLB_FLUSH`, the
//! grace period only for the first; a folio that fails with ENOMEM while
//! pages wait to be freed gets them flushed and freed and is tried once
//! more; a final `flush_tlb_all` before the pages are freed.
//! `hugetlb_vmemmap_restore_folios` restores each optimized folio with
//! `REMAP_NO_TLB_FLUSH` (grace period only for the first optimized one),
//! moves every folio it is done with to the output list, stops at the first
//! failure, and flushes everything once if it restored any.
//!
//! The grace-period policies (see [`RcuPolicy`]) change only where
//! `synchronize_rcu()` is called and, for the 6.12 draft, which flags stay
//! set after the first folio of a batch.

use crate::config::{Arm64Hvo, RcuPolicy};
use crate::folio::{Folio, hugetlb_vmemmap_optimizable, hugetlb_vmemmap_size};
use crate::hvo::{Hvo, HvoError};
use crate::remap::VmemmapFlags;
use crate::remap::{PteOp, RemapWalk, copy_page};
use mmlab_engine::{Cpu, Gfp, PAGE_SIZE, Pfn, kernel::rcu};
use std::sync::atomic::Ordering::Relaxed;

impl Hvo<'_, '_> {
    /// `synchronize_rcu()`, counted.
    fn synchronize_rcu(&self, cpu: &Cpu<'_>) {
        rcu::synchronize_rcu(cpu);
        self.count(|c| c.synchronize_rcu += 1);
    }

    /// Whether `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` is built in. Mainline
    /// arm64 ([`Arm64Hvo::Off`]) does not select it, so every entry point
    /// is the header's empty stub there: no split, no flush, no grace period
    /// (not even 6.11's unconditional one), restore moves every folio to the
    /// non-HVO list.
    fn compiled_in(&self) -> bool {
        self.cfg.arm64 != Arm64Hvo::Off
    }

    /// The flag a single-folio call passes, and the 6.11 unconditional wait.
    fn single_folio_flags(&self, cpu: &Cpu<'_>) -> VmemmapFlags {
        match self.cfg.rcu {
            RcuPolicy::V6_11 => {
                self.synchronize_rcu(cpu);
                VmemmapFlags::empty()
            }
            RcuPolicy::V6_12 | RcuPolicy::V6_12Draft => VmemmapFlags::SYNCHRONIZE_RCU,
            RcuPolicy::V6_10 | RcuPolicy::NoFakeHeads => VmemmapFlags::empty(),
        }
    }

    /// The flags of a batch after one folio: clear the grace period (the
    /// 6.12 draft's typo keeps only it instead).
    fn after_first_of_batch(&self, flags: VmemmapFlags) -> VmemmapFlags {
        match self.cfg.rcu {
            RcuPolicy::V6_12Draft => flags & VmemmapFlags::SYNCHRONIZE_RCU,
            _ => flags - VmemmapFlags::SYNCHRONIZE_RCU,
        }
    }

    /// The flags a batch starts with.
    fn batch_flags(&self) -> VmemmapFlags {
        match self.cfg.rcu {
            RcuPolicy::V6_12 | RcuPolicy::V6_12Draft => {
                VmemmapFlags::REMAP_NO_TLB_FLUSH | VmemmapFlags::SYNCHRONIZE_RCU
            }
            _ => VmemmapFlags::REMAP_NO_TLB_FLUSH,
        }
    }

    /// `vmemmap_should_optimize_folio()`: not yet optimized, the sysctl on,
    /// the size optimizable, and (arm64) HVO allowed.
    pub fn vmemmap_should_optimize_folio(&self, folio: Folio) -> bool {
        !folio.test_vmemmap_optimized(self.m)
            && self.cfg.hugetlb_optimize_vmemmap
            && self.cfg.arm64 != Arm64Hvo::Off
            && hugetlb_vmemmap_optimizable(folio.order)
    }

    /// `vmemmap_remap_free()`: remap `[reuse, end)` onto one page, pages to
    /// free onto `pages`; undo the walked part on failure.
    fn vmemmap_remap_free(
        &self,
        cpu: &Cpu<'_>,
        reuse: u64,
        end: u64,
        folio: Folio,
        pages: &mut Vec<Pfn>,
        flags: VmemmapFlags,
    ) -> Result<(), HvoError> {
        let m = self.m;
        let mut walk = RemapWalk::new(PteOp::Remap, reuse, std::mem::take(pages), flags);
        // A fresh head lets the old, contiguous memmap be freed whole.
        let gfp = Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY | Gfp::__GFP_NOWARN;
        match (self.pa.alloc_pages(cpu, gfp, 0), m.vmemmap_pa(folio.pfn)) {
            (Some(fresh), Some(head_pa)) => {
                copy_page(m, fresh, head_pa.pfn());
                walk.pages.push(fresh);
                walk.reuse_page = Some(fresh);
                self.count(|c| c.vmemmap_pages_allocated += 1);
            }
            (Some(fresh), None) => {
                walk.pages.push(fresh);
                *pages = walk.pages;
                return Err(HvoError::NotMapped { va: reuse });
            }
            (None, _) => self.count(|c| c.vmemmap_head_fallbacks += 1),
        }
        let r = self.vmemmap_remap_range(cpu, reuse, end, &mut walk);
        if r.is_err() && walk.nr_walked > 0 {
            let done = reuse + walk.nr_walked * PAGE_SIZE;
            let mut back =
                RemapWalk::new(PteOp::Restore, reuse, std::mem::take(&mut walk.pages), VmemmapFlags::empty());
            let _ = self.vmemmap_remap_range(cpu, reuse, done, &mut back);
            walk.pages = back.pages;
        }
        *pages = walk.pages;
        r
    }

    /// `__hugetlb_vmemmap_optimize_folio()`.
    fn optimize_folio_inner(
        &self,
        cpu: &Cpu<'_>,
        folio: Folio,
        pages: &mut Vec<Pfn>,
        flags: VmemmapFlags,
    ) -> Result<(), HvoError> {
        if !self.vmemmap_should_optimize_folio(folio) {
            return Ok(());
        }
        self.key.fetch_add(1, Relaxed);
        if flags.contains(VmemmapFlags::SYNCHRONIZE_RCU) {
            self.synchronize_rcu(cpu);
        }
        // Flag first: with a deferred flush, CPUs may still write the old
        // struct pages, and the copy must carry the flag too.
        folio.set_vmemmap_optimized(self.m);
        let reuse = folio.vmemmap_start(self.m);
        let end = reuse + hugetlb_vmemmap_size(folio.order);
        let r = self.vmemmap_remap_free(cpu, reuse, end, folio, pages, flags);
        match r {
            Ok(()) => {
                self.count(|c| c.folios_optimized += 1);
                mmlab_engine::trace::mmlab::vmemmap_optimize_folio(
                    cpu.id(),
                    self.m.trace_clock(),
                    folio.pfn.0,
                    folio.order,
                );
            }
            Err(e) => {
                self.key.fetch_sub(1, Relaxed);
                folio.clear_vmemmap_optimized(self.m);
                if e == HvoError::NoMemory {
                    self.count(|c| c.optimize_enomem += 1);
                }
            }
        }
        r
    }

    /// `hugetlb_vmemmap_optimize_folio()`: optimize one folio if it is
    /// eligible. Like the kernel, running out of memory is not an error:
    /// the folio just stays as it was. Returns whether it is optimized.
    ///
    /// # Errors
    /// [`HvoError::Folio`] for a bad folio; [`HvoError::Corrupt`],
    /// [`HvoError::NotMapped`], [`HvoError::Pgtable`] or [`HvoError::Free`]
    /// report a bug (the kernel would crash).
    pub fn hugetlb_vmemmap_optimize_folio(&self, cpu: &Cpu<'_>, folio: Folio) -> Result<bool, HvoError> {
        let folio = Folio::new(self.m, folio.pfn, folio.order)?;
        if !self.compiled_in() {
            return Ok(false);
        }
        let flags = self.single_folio_flags(cpu);
        let mut pages = Vec::new();
        let r = self.optimize_folio_inner(cpu, folio, &mut pages, flags);
        self.free_vmemmap_page_list(cpu, pages)?;
        match r {
            Ok(()) | Err(HvoError::NoMemory) => Ok(folio.test_vmemmap_optimized(self.m)),
            Err(e) => Err(e),
        }
    }

    /// `hugetlb_vmemmap_split_folio()` → `vmemmap_remap_split()`: split the
    /// PMDs of an eligible folio's vmemmap, without a flush.
    fn hugetlb_vmemmap_split_folio(&self, cpu: &Cpu<'_>, folio: Folio) -> Result<(), HvoError> {
        if !self.vmemmap_should_optimize_folio(folio) {
            return Ok(());
        }
        let start = folio.vmemmap_start(self.m);
        let end = start + hugetlb_vmemmap_size(folio.order);
        let mut walk = RemapWalk::new(PteOp::Split, start, Vec::new(), VmemmapFlags::SPLIT_NO_TLB_FLUSH);
        self.vmemmap_remap_range(cpu, start, end, &mut walk)
    }

    /// `hugetlb_vmemmap_optimize_folios()`: optimize a batch, flushing and
    /// waiting for a grace period once per batch. Folios that cannot be
    /// optimized for lack of memory stay as they were.
    ///
    /// # Errors
    /// As [`Hvo::hugetlb_vmemmap_optimize_folio`]: a bad folio (nothing is
    /// done), or a bug.
    pub fn hugetlb_vmemmap_optimize_folios(&self, cpu: &Cpu<'_>, folios: &[Folio]) -> Result<(), HvoError> {
        let _slice =
            mmlab_engine::trace::mmlab::func(cpu.id(), self.m.trace_clock(), "hugetlb_vmemmap_optimize_folios");
        for f in folios {
            Folio::new(self.m, f.pfn, f.order)?;
        }
        if !self.compiled_in() {
            return Ok(());
        }
        for &f in folios {
            match self.hugetlb_vmemmap_split_folio(cpu, f) {
                Ok(()) => {}
                // The remap can split later, with memory the dedup frees.
                Err(HvoError::NoMemory) => break,
                Err(e) => return Err(e),
            }
        }
        self.vmemmap_flush_tlb_all(cpu);
        if self.cfg.rcu == RcuPolicy::V6_11 {
            self.synchronize_rcu(cpu);
        }
        let mut flags = self.batch_flags();
        let mut pages = Vec::new();
        let mut bug = None;
        for &f in folios {
            let mut r = self.optimize_folio_inner(cpu, f, &mut pages, flags);
            flags = self.after_first_of_batch(flags);
            if r == Err(HvoError::NoMemory) && !pages.is_empty() {
                self.vmemmap_flush_tlb_all(cpu);
                self.free_vmemmap_page_list(cpu, std::mem::take(&mut pages))?;
                r = self.optimize_folio_inner(cpu, f, &mut pages, flags);
            }
            if let Err(e) = r
                && e != HvoError::NoMemory
            {
                bug = Some(e);
                break;
            }
        }
        self.vmemmap_flush_tlb_all(cpu);
        self.free_vmemmap_page_list(cpu, pages)?;
        bug.map_or(Ok(()), Err)
    }

    /// `__hugetlb_vmemmap_restore_folio()`.
    fn restore_folio_inner(&self, cpu: &Cpu<'_>, folio: Folio, flags: VmemmapFlags) -> Result<(), HvoError> {
        if !folio.test_vmemmap_optimized(self.m) {
            return Ok(());
        }
        if flags.contains(VmemmapFlags::SYNCHRONIZE_RCU) {
            self.synchronize_rcu(cpu);
        }
        let reuse = folio.vmemmap_start(self.m);
        let end = reuse + hugetlb_vmemmap_size(folio.order);
        let start = reuse + crate::folio::HUGETLB_VMEMMAP_RESERVE_SIZE;
        // vmemmap_remap_alloc()
        let pages = match self.alloc_vmemmap_page_list(cpu, (end - start) / PAGE_SIZE) {
            Ok(p) => p,
            Err(e) => {
                if e == HvoError::NoMemory {
                    self.count(|c| c.restore_enomem += 1);
                }
                return Err(e);
            }
        };
        let mut walk = RemapWalk::new(PteOp::Restore, reuse, pages, flags);
        let r = self.vmemmap_remap_range(cpu, reuse, end, &mut walk);
        // Pages the walk did not use (only after a bug) go back.
        self.free_vmemmap_page_list(cpu, std::mem::take(&mut walk.pages))?;
        r?;
        folio.clear_vmemmap_optimized(self.m);
        self.key.fetch_sub(1, Relaxed);
        self.count(|c| c.folios_restored += 1);
        mmlab_engine::trace::mmlab::vmemmap_restore_folio(cpu.id(), self.m.trace_clock(), folio.pfn.0, folio.order);
        Ok(())
    }

    /// `hugetlb_vmemmap_restore_folio()`: give an optimized folio its own
    /// vmemmap pages back (nothing to do for one that is not optimized).
    ///
    /// # Errors
    /// [`HvoError::NoMemory`] when the pages cannot be allocated: the folio
    /// stays optimized and nothing else changes. [`HvoError::Folio`] for a
    /// bad folio; the others report a bug.
    pub fn hugetlb_vmemmap_restore_folio(&self, cpu: &Cpu<'_>, folio: Folio) -> Result<(), HvoError> {
        let folio = Folio::new(self.m, folio.pfn, folio.order)?;
        if !self.compiled_in() {
            return Ok(());
        }
        let flags = self.single_folio_flags(cpu);
        self.restore_folio_inner(cpu, folio, flags)
    }

    /// `hugetlb_vmemmap_restore_folios()`: restore each optimized folio of
    /// `folios` with one flush at the end. Every folio done with (restored,
    /// or not optimized) moves to `non_hvo` in order; at the first failure
    /// the failing folio and the rest stay in `folios`. Returns the number
    /// restored.
    ///
    /// # Errors
    /// The first failure ([`HvoError::NoMemory`] as the kernel's -ENOMEM);
    /// the flush for the folios restored before it is still done.
    pub fn hugetlb_vmemmap_restore_folios(
        &self,
        cpu: &Cpu<'_>,
        folios: &mut Vec<Folio>,
        non_hvo: &mut Vec<Folio>,
    ) -> Result<usize, HvoError> {
        for f in folios.iter() {
            Folio::new(self.m, f.pfn, f.order)?;
        }
        if !self.compiled_in() {
            non_hvo.append(folios);
            return Ok(0);
        }
        if self.cfg.rcu == RcuPolicy::V6_11 {
            self.synchronize_rcu(cpu);
        }
        let mut flags = self.batch_flags();
        let mut restored = 0;
        let mut err = None;
        let mut done = 0;
        for &f in folios.iter() {
            if f.test_vmemmap_optimized(self.m) {
                let r = self.restore_folio_inner(cpu, f, flags);
                flags = self.after_first_of_batch(flags);
                if let Err(e) = r {
                    err = Some(e);
                    break;
                }
                restored += 1;
            }
            done += 1;
        }
        non_hvo.extend(folios.drain(..done));
        if restored > 0 {
            self.vmemmap_flush_tlb_all(cpu);
        }
        err.map_or(Ok(restored), Err)
    }
}
