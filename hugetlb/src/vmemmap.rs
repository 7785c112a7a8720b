//! HVO of folios hugetlb holds, called by name: the entry the fuzzer (and
//! a test) uses to run `hugetlb_vmemmap_optimize_folio(s)` and
//! `hugetlb_vmemmap_restore_folio(s)` (mm/hugetlb_vmemmap.c) on a folio in
//! use or on a free list.
//!
//! # Where the kernel runs them
//!
//! A folio is optimized when it enters a pool (`prep_new_hugetlb_folio`,
//! `prep_and_add_allocated_folios`, `alloc_surplus_hugetlb_folio`) and
//! restored when it leaves for the page allocator
//! (`update_and_free_pages_bulk`, `__update_and_free_hugetlb_folio`,
//! demote, `dissolve_free_hugetlb_folio`); a folio handed out keeps the
//! state it had in the pool. Both states are reachable for a folio in use
//! or free: an optimization that ran out of memory leaves the folio
//! unoptimized, a restore that ran out of memory (`bulk_vmemmap_restore_error`)
//! leaves it optimized in the pool as surplus. So this entry applies the
//! kernel's own functions only where they move a folio between those two
//! states, and refuses what no kernel caller asks, with a typed error and
//! nothing done:
//!
//! - a folio hugetlb does not hold (freed to the page allocator):
//!   [`HvoError::NotHugetlb`];
//! - optimizing a folio HVO cannot optimize (64K, or HVO off):
//!   [`HvoError::NotOptimizable`]; one already optimized:
//!   [`HvoError::AlreadyOptimized`] (the kernel's functions return
//!   silently there, their callers never ask);
//! - restoring a folio that is not optimized: [`HvoError::NotOptimized`]
//!   (the kernel's callers test `folio_test_hugetlb_vmemmap_optimized`
//!   first).
//!
//! Every folio of a batch is checked before anything runs; a folio named
//! twice counts once (a kernel list holds a folio once).
//!
//! Fidelity: the HVO calls are the crate's faithful ones; the checks are
//! mmlab's own (instrumented), standing for the callers' guarantees.

use crate::error::HugetlbError;
use crate::hstate::HugePageSize;
use crate::hugetlb::Hugetlb;
use mmlab_engine::Cpu;
use mmlab_vmemmap::folio::hugetlb_vmemmap_optimizable;
use mmlab_vmemmap::{Arm64Hvo, Folio, HvoError};

impl<'m> Hugetlb<'_, 'm> {
    /// The hstate of `folio` if hugetlb holds it: handed out by
    /// [`Hugetlb::alloc_hugetlb_folio`], on a free list, or waiting for
    /// `free_hpage_workfn`.
    pub fn hugetlb_folio_size(&self, folio: Folio) -> Option<HugePageSize> {
        let size = HugePageSize::from_order(folio.order)?;
        let held = self.active.get(&folio.pfn).is_some_and(|u| u.size == size)
            || self.hstate_of(size).free_folios().any(|f| f == folio)
            || self.hpage_freelist.iter().any(|(_, f)| *f == folio);
        held.then_some(size)
    }

    /// Folios waiting for `free_hpage_workfn` (optimized folios freed in
    /// atomic context), with their sizes.
    pub fn pending_folios(&self) -> impl Iterator<Item = (HugePageSize, Folio)> + '_ {
        self.hpage_freelist.iter().copied()
    }

    /// The folios of `folios`, each once, if each may be optimized
    /// (`optimize`) or restored; else the first one's error.
    fn vmemmap_checked(&self, folios: &[Folio], optimize: bool) -> Result<Vec<Folio>, HvoError> {
        let m = self.pa.machine();
        let cfg = self.hvo.config();
        let hvo_on = cfg.hugetlb_optimize_vmemmap && cfg.arm64 != Arm64Hvo::Off;
        let mut out: Vec<Folio> = Vec::with_capacity(folios.len());
        for &f in folios {
            if out.contains(&f) {
                continue;
            }
            if self.hugetlb_folio_size(f).is_none() {
                return Err(HvoError::NotHugetlb { pfn: f.pfn });
            }
            let optimized = f.test_vmemmap_optimized(m);
            if optimize && (!hvo_on || !hugetlb_vmemmap_optimizable(f.order)) {
                return Err(HvoError::NotOptimizable { pfn: f.pfn, order: f.order });
            }
            if optimize && optimized {
                return Err(HvoError::AlreadyOptimized { pfn: f.pfn });
            }
            if !optimize && !optimized {
                return Err(HvoError::NotOptimized { pfn: f.pfn });
            }
            out.push(f);
        }
        Ok(out)
    }

    /// Optimize the vmemmap of folios hugetlb holds: each with
    /// `hugetlb_vmemmap_optimize_folio()` (its own grace period), or, if
    /// `batched`, all as one batch with `hugetlb_vmemmap_optimize_folios()`
    /// (one flush, one grace period). Returns how many were optimized.
    ///
    /// # Errors
    /// The typed refusals of the module documentation (nothing done);
    /// [`HugetlbError::NoMemory`] when a folio stayed unoptimized for lack
    /// of memory (the kernel leaves it so silently; the others are done);
    /// a bug reported by HVO.
    pub fn vmemmap_optimize(&mut self, cpu: &Cpu<'m>, folios: &[Folio], batched: bool) -> Result<usize, HugetlbError> {
        let list = self.vmemmap_checked(folios, true).map_err(HugetlbError::Hvo)?;
        if !batched {
            for &f in &list {
                self.hvo.hugetlb_vmemmap_optimize_folio(cpu, f)?;
            }
        } else {
            self.hvo.hugetlb_vmemmap_optimize_folios(cpu, &list)?;
        }
        let m = self.pa.machine();
        let done = list.iter().filter(|f| f.test_vmemmap_optimized(m)).count();
        if done < list.len() { Err(HugetlbError::NoMemory) } else { Ok(done) }
    }

    /// Restore the vmemmap of optimized folios hugetlb holds, without
    /// freeing them: each with `hugetlb_vmemmap_restore_folio()`, or, if
    /// `batched`, with `hugetlb_vmemmap_restore_folios()` (one flush for
    /// those it did); both stop at the first folio that cannot be
    /// restored. Returns how many were restored.
    ///
    /// # Errors
    /// The typed refusals of the module documentation (nothing done);
    /// [`HugetlbError::NoMemory`] when the pages could not be had: that
    /// folio (and in a batch the rest) stays optimized, where it was; a bug
    /// reported by HVO.
    pub fn vmemmap_restore(&mut self, cpu: &Cpu<'m>, folios: &[Folio], batched: bool) -> Result<usize, HugetlbError> {
        let mut list = self.vmemmap_checked(folios, false).map_err(HugetlbError::Hvo)?;
        if !batched {
            for &f in &list {
                self.hvo.hugetlb_vmemmap_restore_folio(cpu, f).map_err(enomem)?;
            }
            return Ok(list.len());
        }
        let mut done = Vec::with_capacity(list.len());
        self.hvo.hugetlb_vmemmap_restore_folios(cpu, &mut list, &mut done).map_err(enomem)
    }
}

/// HVO's `-ENOMEM` as hugetlb's; any other error is a bug HVO reports.
fn enomem(e: HvoError) -> HugetlbError {
    match e {
        HvoError::NoMemory => HugetlbError::NoMemory,
        e => HugetlbError::Hvo(e),
    }
}
