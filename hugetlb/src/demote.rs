//! `demote`: split free huge pages of one size into pages of the next
//! smaller size (`/sys/kernel/mm/hugepages/hugepages-*kB/demote` and
//! `demote_size`).
//!
//! Each hstate demotes to the largest smaller size (`hugetlb_init_hstates`:
//! 1G → 32M, 32M → 2M, 2M → 64K; 64K has no `demote` file);
//! `demote_size_store` may pick another smaller size of at least 2M
//! (`HUGETLB_PAGE_ORDER`). A write of N to `demote` (`demote_store`) loops
//! while N pages are left to demote and free pages not reserved remain:
//!
//! - **6.11** ([`DemoteBatching::V6_11`], `demote_free_hugetlb_folio`): one
//!   folio per `demote_pool_huge_page`. Take it out of the pool; restore
//!   its vmemmap alone (`hugetlb_vmemmap_restore_folio`; on ENOMEM it goes
//!   back and the write fails); take the compound page apart
//!   (`destroy_compound_hugetlb_folio_for_demote`); then for each piece:
//!   make it a compound page, `prep_new_hugetlb_folio` (HVO of that one
//!   folio, `hugetlb_vmemmap_optimize_folio`, with its own grace period)
//!   and free it into the smaller pool. With HVO on: 1 + 512 grace periods
//!   per 1G → 2M.
//! - **6.12** ([`DemoteBatching::V6_12`], c0f398c3b2cf,
//!   `demote_free_hugetlb_folios`): up to N folios per call; restore them
//!   as one batch (`hugetlb_vmemmap_restore_folios`), split every folio
//!   that was restored into pieces, and add all pieces with
//!   `prep_and_add_allocated_folios` (one HVO batch): 2 grace periods.
//!   Folios that could not be restored go back to their pool; the others
//!   are still demoted (the changelog's "can make extra progress").
//!
//! `max_huge_pages` of both sizes follows the pages moved.
//!
//! Reserved pages are not safe in 6.12 (a kernel defect, modelled as it
//! is): `demote_store()` checks that some free page is not reserved
//! (`free - resv > 0`) but then asks `demote_pool_huge_page()` for all
//! `nr_demote` pages, which takes them off the free list whether reserved
//! or not. With one page available and two asked for, both go and
//! `resv_hugepages` exceeds `free_hugepages`: a fault that holds a
//! reservation then finds no page. 7.2's `mm/hugetlb_sysfs.c` still does
//! this. 6.11's loop took one page per check and never did. `mmlab fuzz`
//! found it with its hstate invariant and steers around it (see
//! `harness/src/fuzz/exec/hugetlb.rs`).
//!
//! Surplus pages are not adjusted either (a kernel defect in both releases,
//! modelled as it is): `demote_pool_huge_page()` takes folios off the free
//! list with `remove_hugetlb_folio(h, folio, false)`, which lowers
//! `nr_huge_pages` but never `surplus_huge_pages`. A free page can be
//! surplus: `bulk_vmemmap_restore_error()` puts a folio whose vmemmap
//! could not be restored during a shrink back as surplus. Demoting it
//! leaves `surplus_hugepages` above `nr_hugepages` (and
//! `persistent_huge_pages()` wraps). `mmlab fuzz` found it under
//! `--fail-page-alloc` with HVO on and steers around it too.

use crate::config::DemoteBatching;
use crate::error::HugetlbError;
use crate::hstate::{HUGETLB_PAGE_ORDER, HugePageSize};
use crate::hugetlb::Hugetlb;
use mmlab_engine::{Cpu, Pfn};
use mmlab_vmemmap::{Folio, HvoError};

impl<'m> Hugetlb<'_, 'm> {
    /// `demote_size_store()`: demote `size` into pages of `demote_bytes`.
    ///
    /// # Errors
    /// [`HugetlbError::UnsupportedSize`] for a size arm64 does not offer,
    /// [`HugetlbError::BadDemoteSize`] for one not smaller than `size` or
    /// smaller than 2M. Nothing is changed.
    pub fn set_demote_size(&mut self, size: HugePageSize, demote_bytes: u64) -> Result<(), HugetlbError> {
        let dst = Self::size_to_hstate(demote_bytes)?;
        if dst.order() < HUGETLB_PAGE_ORDER || dst.order() >= size.order() {
            return Err(HugetlbError::BadDemoteSize { size, demote_bytes });
        }
        self.h(size).demote_size = Some(dst);
        Ok(())
    }

    /// `demote_store()`: a write of `nr` to `size`'s `demote`. Returns the
    /// pages demoted (fewer than `nr` when free, unreserved pages ran out).
    ///
    /// # Errors
    /// [`HugetlbError::BadDemoteSize`] when `size` has no demote size (no
    /// such file); [`HugetlbError::NoMemory`] when a vmemmap restore failed
    /// (6.11 stops there; pages demoted before it stay demoted); a bug
    /// reported by HVO or the page allocator.
    pub fn demote(&mut self, cpu: &Cpu<'m>, size: HugePageSize, nr: u64) -> Result<u64, HugetlbError> {
        let m = self.pa.machine();
        let _slice = mmlab_engine::trace::mmlab::func(cpu.id(), m.trace_clock(), "demote_store");
        let Some(dst) = self.hstate_of(size).demote_size else {
            return Err(HugetlbError::BadDemoteSize { size, demote_bytes: 0 });
        };
        self.flush_free_hpage_work(cpu)?;
        let mut left = nr;
        let mut done = 0;
        while left > 0 {
            if self.hstate_of(size).available_huge_pages() == 0 {
                break;
            }
            let (n, failed) = self.demote_pool_huge_page(cpu, size, dst, left)?;
            if failed {
                return Err(HugetlbError::NoMemory);
            }
            left -= n;
            done += n;
        }
        Ok(done)
    }

    /// `demote_pool_huge_page()`: demote up to `nr` free folios of `src`
    /// (one in 6.11). Returns how many were demoted and whether a vmemmap
    /// restore failed (the kernel's `-ENOMEM`).
    fn demote_pool_huge_page(
        &mut self,
        cpu: &Cpu<'m>,
        src: HugePageSize,
        dst: HugePageSize,
        nr: u64,
    ) -> Result<(u64, bool), HugetlbError> {
        self.counts.demote_calls += 1;
        // 6.12 asks for every page still to demote, reserved or not
        // (module docs).
        let take = match self.cfg.demote {
            DemoteBatching::V6_11 => 1,
            DemoteBatching::V6_12 => nr,
        };
        let mut list = Vec::new();
        while (list.len() as u64) < take {
            let Some(folio) = self.h(src).remove_pool_hugetlb_folio(false) else { break };
            list.push(folio);
        }
        let (demoted, failed) = match self.cfg.demote {
            DemoteBatching::V6_11 => self.demote_free_hugetlb_folio(cpu, src, dst, list)?,
            DemoteBatching::V6_12 => self.demote_free_hugetlb_folios(cpu, src, dst, list)?,
        };
        let shift = src.order() - dst.order();
        let h = self.h(src);
        h.max_huge_pages = h.max_huge_pages.saturating_sub(demoted);
        self.h(dst).max_huge_pages += demoted << shift;
        self.counts.folios_demoted += demoted;
        if failed {
            self.counts.demote_restore_failures += 1;
        }
        Ok((demoted, failed))
    }

    /// Take a restored `folio` of `src` apart into compound folios of `dst`
    /// (`split_page_owner` and, per piece, `prep_compound_page` and
    /// `init_new_hugetlb_folio`).
    fn split_for_demote(&mut self, folio: Folio, dst: HugePageSize) -> Result<Vec<Folio>, HugetlbError> {
        self.destroy_compound(folio)?;
        self.pa
            .split_allocation(folio.pfn, folio.order, dst.order())
            .map_err(|err| HugetlbError::Free { pfn: folio.pfn, err })?;
        let step = 1u64 << dst.order();
        let mut pieces = Vec::with_capacity((folio.nr_pages() / step) as usize);
        let mut i = 0;
        while i < folio.nr_pages() {
            let piece = Folio::new(self.pa.machine(), Pfn(folio.pfn.0 + i), dst.order())?;
            self.prep_compound(piece)?;
            pieces.push(piece);
            i += step;
        }
        self.counts.demoted_folios_created += pieces.len() as u64;
        Ok(pieces)
    }

    /// `demote_free_hugetlb_folio()` (6.11): one folio, everything single.
    fn demote_free_hugetlb_folio(
        &mut self,
        cpu: &Cpu<'m>,
        src: HugePageSize,
        dst: HugePageSize,
        list: Vec<Folio>,
    ) -> Result<(u64, bool), HugetlbError> {
        let mut demoted = 0;
        for folio in list {
            if folio.test_vmemmap_optimized(self.pa.machine()) {
                match self.hvo.hugetlb_vmemmap_restore_folio(cpu, folio) {
                    Ok(()) => {}
                    Err(e) => {
                        self.h(src).add_hugetlb_folio(folio, false);
                        if e == HvoError::NoMemory {
                            return Ok((demoted, true));
                        }
                        return Err(e.into());
                    }
                }
            }
            for piece in self.split_for_demote(folio, dst)? {
                // prep_new_hugetlb_folio(), then free_huge_folio() into the
                // smaller pool.
                let r = self.hvo.hugetlb_vmemmap_optimize_folio(cpu, piece);
                let h = self.h(dst);
                h.nr_huge_pages += 1;
                h.enqueue_hugetlb_folio(piece);
                r?;
            }
            demoted += 1;
        }
        Ok((demoted, false))
    }

    /// `demote_free_hugetlb_folios()` (6.12): one restore batch, one
    /// optimize batch.
    fn demote_free_hugetlb_folios(
        &mut self,
        cpu: &Cpu<'m>,
        src: HugePageSize,
        dst: HugePageSize,
        mut list: Vec<Folio>,
    ) -> Result<(u64, bool), HugetlbError> {
        let mut done = Vec::new();
        let rc = self.hvo.hugetlb_vmemmap_restore_folios(cpu, &mut list, &mut done);
        done.append(&mut list);
        let mut pieces = Vec::new();
        let mut back = Vec::new();
        for folio in done {
            if folio.test_vmemmap_optimized(self.pa.machine()) {
                back.push(folio);
                continue;
            }
            pieces.extend(self.split_for_demote(folio, dst)?);
        }
        let demoted = pieces.len() as u64 >> (src.order() - dst.order());
        let r = self.prep_and_add_allocated_folios(cpu, dst, pieces);
        let h = self.h(src);
        for folio in back {
            h.add_hugetlb_folio(folio, false);
        }
        r?;
        match rc {
            Ok(_) => Ok((demoted, false)),
            Err(HvoError::NoMemory) => Ok((demoted, true)),
            Err(e) => Err(e.into()),
        }
    }
}
