//! `Hugetlb`: the hugetlb subsystem of one machine, its hstates, counters
//! and the folios in use (mm/hugetlb.c).

use crate::config::HugetlbConfig;
use crate::error::HugetlbError;
use crate::hstate::Hstate;
use crate::hstate::HstateSysfs;
use crate::hstate::HugePageSize;
use mmlab_buddy::ContigScan;
use mmlab_engine::{Cpu, Pfn};
use mmlab_pcp::PageAllocator;
use mmlab_vmemmap::{Folio, Hvo};
use std::collections::BTreeMap;

mmlab_engine::counter_snapshot! {
    /// hugetlb's pool events (mmlab's own, instrumented).
    pub struct HugetlbCounts {
        /// Folios allocated from the page allocator for a pool
        /// (`alloc_pool_huge_folio` successes).
        pub pool_folios_allocated: u64,
        /// `alloc_pool_huge_folio` failures (each ends a grow).
        pub pool_alloc_failures: u64,
        /// Folios given back to the page allocator
        /// (`__update_and_free_hugetlb_folio`).
        pub pool_folios_freed: u64,
        /// `prep_and_add_allocated_folios` calls.
        pub prep_and_add_batches: u64,
        /// `update_and_free_pages_bulk` calls.
        pub free_bulk_batches: u64,
        /// `bulk_vmemmap_restore_error` calls.
        pub bulk_restore_errors: u64,
        /// Folios kept as surplus because their vmemmap could not be
        /// restored.
        pub restore_failed_to_surplus: u64,
        /// Gigantic folios allocated (`alloc_gigantic_folio` successes).
        pub gigantic_folios_allocated: u64,
        /// Gigantic folios freed.
        pub gigantic_folios_freed: u64,
        /// Tail struct pages pointed at their head (`set_compound_head` in
        /// `prep_compound_page` or `__prep_compound_gigantic_folio`).
        pub compound_tails_prepped: u64,
        /// Tail struct pages cleared when a compound page is taken apart
        /// (`free_tail_page_prepare`, `__destroy_compound_gigantic_folio`,
        /// demote).
        pub compound_tails_cleared: u64,
        /// Page references frozen one page at a time
        /// (`page_ref_freeze(p, 1)` in `__prep_compound_gigantic_folio`,
        /// up to 6.11).
        pub gigantic_refs_frozen: u64,
        /// Tail references given back one page at a time
        /// (`set_page_refcounted` in `__destroy_compound_gigantic_folio`,
        /// up to 6.11).
        pub gigantic_refs_unfrozen: u64,
        /// Order-0 frees of `free_contig_range` (up to 6.11).
        pub contig_order0_frees: u64,
        /// Whole-folio frees of a gigantic folio (`folio_put`, 6.12).
        pub gigantic_folio_puts: u64,
        /// `demote_pool_huge_page` calls.
        pub demote_calls: u64,
        /// Folios demoted.
        pub folios_demoted: u64,
        /// Smaller folios made by demote.
        pub demoted_folios_created: u64,
        /// Folios demote had to put back (vmemmap restore ENOMEM).
        pub demote_restore_failures: u64,
        /// Surplus folios allocated (`alloc_surplus_hugetlb_folio`).
        pub surplus_allocated: u64,
        /// Surplus allocations refused by `nr_overcommit_hugepages` (or a
        /// gigantic size).
        pub surplus_refused: u64,
        /// `gather_surplus_pages` calls that had to allocate.
        pub gather_surplus_calls: u64,
        /// `return_unused_surplus_pages` calls.
        pub return_unused_surplus_calls: u64,
        /// Folios handed out by `alloc_hugetlb_folio`.
        pub folios_handed_out: u64,
        /// `free_huge_folio` calls.
        pub free_huge_folio_calls: u64,
        /// Optimized folios whose free was deferred to `free_hpage_workfn`.
        pub free_deferred: u64,
        /// `free_hpage_workfn` runs that found work.
        pub free_hpage_work_runs: u64,
    }
}

/// A folio handed out by [`Hugetlb::alloc_hugetlb_folio`]
/// (`hugepage_activelist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InUse {
    pub(crate) size: HugePageSize,
}

/// The hugetlb subsystem of one machine: the four hstates over a page
/// allocator, with HVO.
#[derive(Debug)]
pub struct Hugetlb<'a, 'm> {
    pub(crate) pa: &'a PageAllocator<'m>,
    pub(crate) hvo: Hvo<'a, 'm>,
    pub(crate) cfg: HugetlbConfig,
    hstates: [Hstate; 4],
    pub(crate) counts: HugetlbCounts,
    pub(crate) contig: ContigScan,
    pub(crate) active: BTreeMap<Pfn, InUse>,
    /// `hpage_freelist`: optimized folios whose free waits for
    /// `free_hpage_workfn`.
    pub(crate) hpage_freelist: Vec<(HugePageSize, Folio)>,
}

impl<'a, 'm> Hugetlb<'a, 'm> {
    /// hugetlb over `pa` with the four hstates empty (`hugetlbpage_init`
    /// and `hugetlb_init` before any pages; see [`Hugetlb::hugetlb_init`]),
    /// each demoting to the next smaller size (`hugetlb_init_hstates`).
    pub fn new(pa: &'a PageAllocator<'m>, cfg: HugetlbConfig) -> Hugetlb<'a, 'm> {
        let mut hstates = HugePageSize::ALL.map(Hstate::new);
        for (h, smaller) in hstates.iter_mut().skip(1).zip(HugePageSize::ALL) {
            h.demote_size = Some(smaller);
        }
        Hugetlb {
            pa,
            hvo: Hvo::new(pa, cfg.hvo),
            cfg,
            hstates,
            counts: HugetlbCounts::default(),
            contig: ContigScan::default(),
            active: BTreeMap::new(),
            hpage_freelist: Vec::new(),
        }
    }

    /// The boot-time pools (`hugetlb_hstate_alloc_pages` for each size):
    /// grow each hstate to its `hugepages=` count, gigantic sizes first.
    /// Returns the pages reached per size ([`HugePageSize::ALL`] order).
    ///
    /// # Errors
    /// As [`Hugetlb::set_max_huge_pages_of`].
    pub fn hugetlb_init(&mut self, cpu: &Cpu<'m>) -> Result<[u64; 4], HugetlbError> {
        let want = self.cfg.resolved_hugepages();
        let mut got = [0; 4];
        for size in HugePageSize::ALL.into_iter().rev() {
            if want[size.index()] > 0 {
                got[size.index()] = self.set_max_huge_pages_of(cpu, size, want[size.index()])?;
            }
        }
        Ok(got)
    }

    /// The warnings `hugetlb_hstate_alloc_pages_errcheck()` prints after
    /// [`Hugetlb::hugetlb_init`] got `got` pages: one line per size whose
    /// pool fell short of its `hugepages=`, worded as the kernel's
    /// (`string_get_size()` units).
    pub fn init_warnings(&self, got: [u64; 4]) -> Vec<String> {
        let want = self.cfg.resolved_hugepages();
        HugePageSize::ALL
            .into_iter()
            .filter(|s| got[s.index()] < want[s.index()])
            .map(|s| {
                format!(
                    "HugeTLB: allocating {} of page size {} failed.  Only allocated {} hugepages.",
                    want[s.index()],
                    string_get_size(s.bytes()),
                    got[s.index()]
                )
            })
            .collect()
    }

    /// The configuration.
    pub fn config(&self) -> HugetlbConfig {
        self.cfg
    }
    /// The default size (`default_hstate`).
    pub fn default_size(&self) -> HugePageSize {
        self.cfg.default_hugepagesz
    }
    /// The default hstate.
    pub fn hstate(&self) -> &Hstate {
        self.hstate_of(self.cfg.default_hugepagesz)
    }
    /// The hstate of `size`.
    pub fn hstate_of(&self, size: HugePageSize) -> &Hstate {
        &self.hstates[size.index()]
    }
    pub(crate) fn h(&mut self, size: HugePageSize) -> &mut Hstate {
        &mut self.hstates[size.index()]
    }
    /// Every hstate, smallest first.
    pub fn hstates(&self) -> impl Iterator<Item = &Hstate> {
        self.hstates.iter()
    }
    /// `size_to_hstate()`: the size of `bytes`.
    ///
    /// # Errors
    /// [`HugetlbError::UnsupportedSize`] for a size arm64 does not offer.
    pub fn size_to_hstate(bytes: u64) -> Result<HugePageSize, HugetlbError> {
        HugePageSize::from_bytes(bytes).ok_or(HugetlbError::UnsupportedSize { bytes })
    }
    /// The sysfs files of every hstate, smallest first.
    pub fn sysfs(&self) -> Vec<HstateSysfs> {
        self.hstates.iter().map(Hstate::sysfs).collect()
    }
    /// HVO, with its counters.
    pub fn hvo(&self) -> &Hvo<'a, 'm> {
        &self.hvo
    }
    /// The page allocator.
    pub fn page_allocator(&self) -> &'a PageAllocator<'m> {
        self.pa
    }
    /// The pool's counters.
    pub fn counts(&self) -> HugetlbCounts {
        self.counts
    }
    /// The work of every contiguous-range allocation so far (gigantic
    /// folios).
    pub fn contig_scan(&self) -> ContigScan {
        self.contig
    }
    /// Folios handed out by [`Hugetlb::alloc_hugetlb_folio`] and not freed.
    pub fn folios_in_use(&self) -> usize {
        self.active.len()
    }
    /// Folios waiting for `free_hpage_workfn`.
    pub fn pending_frees(&self) -> usize {
        self.hpage_freelist.len()
    }
    /// Pages of the folios waiting for `free_hpage_workfn` (out of the
    /// pools' counts, still allocated).
    pub fn pending_free_pages(&self) -> u64 {
        self.hpage_freelist.iter().map(|(_, f)| f.nr_pages()).sum()
    }

    /// `set_max_huge_pages()` of the default size (a write to
    /// `/proc/sys/vm/nr_hugepages`). See [`Hugetlb::set_max_huge_pages_of`].
    ///
    /// # Errors
    /// As [`Hugetlb::set_max_huge_pages_of`].
    pub fn set_max_huge_pages(&mut self, cpu: &Cpu<'m>, count: u64) -> Result<u64, HugetlbError> {
        self.set_max_huge_pages_of(cpu, self.cfg.default_hugepagesz, count)
    }
}

/// `string_get_size(size, 1, STRING_UNITS_2, ..)` of a power-of-two size:
/// three significant digits and a binary unit ("64.0 KiB", "2.00 MiB").
fn string_get_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut i = 0;
    let mut v = bytes as f64;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    if i == 0 { format!("{bytes} B") } else { format!("{v:.digits$} {}", units[i]) }
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn string_get_size_as_the_kernel_prints_it() {
        let s: Vec<String> = crate::HugePageSize::ALL.into_iter().map(|h| super::string_get_size(h.bytes())).collect();
        assert_eq!(s, ["64.0 KiB", "2.00 MiB", "32.0 MiB", "1.00 GiB"]);
    }
}
