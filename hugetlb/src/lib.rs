//! hugetlb pools (mm/hugetlb.c) on the emulated machine: one hstate per
//! huge page size arm64 offers (64K, 2M, 32M, 1G), their counters and free
//! lists, `set_max_huge_pages` growing and shrinking a pool as a write to
//! `nr_hugepages` does, gigantic folios from contiguous ranges, `demote`,
//! surplus pages and overcommit, reservations, and the allocator the fault
//! path uses (`alloc_hugetlb_folio` / `free_huge_folio`).
//!
//! # The algorithm
//!
//! An hstate ([`Hstate`]) describes one huge page size. It counts the pages
//! of its pool (`nr_huge_pages`), those on its free list
//! (`free_huge_pages`), those promised to mappings but not yet faulted in
//! (`resv_huge_pages`) and those allocated beyond the persistent pool
//! (`surplus_huge_pages`, at most `nr_overcommit_huge_pages`); the
//! persistent pool is `nr_huge_pages - surplus_huge_pages`. The sizes and
//! the boot parameters that set their pools are in [`hstate`] and
//! [`config`].
//!
//! Writing a count to `nr_hugepages` (`set_max_huge_pages`, Linux 6.12):
//!
//! 1. **Grow.** Surplus pages are first made persistent, one by one
//!    (`adjust_pool_surplus(-1)`). The rest is allocated fresh, one folio at
//!    a time (`alloc_pool_huge_folio` → `alloc_buddy_hugetlb_folio` for 64K
//!    and 2M: a compound folio from the page allocator;
//!    `alloc_gigantic_folio` for 32M and 1G: a contiguous range, see
//!    [`gigantic`]), and collected on one list. The whole list is then
//!    handed to `prep_and_add_allocated_folios`: HVO optimizes it as one
//!    batch (`hugetlb_vmemmap_optimize_folios`: one flush, one grace
//!    period), then each folio is accounted (`nr_huge_pages++`) and
//!    enqueued on the free list (`free_huge_pages++`). When an allocation
//!    fails the loop stops, what was allocated still joins the pool, and
//!    the write succeeds: the pool is as large as memory allowed and
//!    `nr_hugepages` reads that back.
//! 2. **Shrink.** The pool may not drop below what is in use or reserved
//!    (`min_count = resv + nr - free`, at least `count`). Free folios are
//!    taken off the free list down to that (`remove_pool_hugetlb_folio`)
//!    onto one list, which `update_and_free_pages_bulk` frees as a batch:
//!    HVO restores every optimized folio's vmemmap
//!    (`hugetlb_vmemmap_restore_folios`, one flush), then each folio goes
//!    back to the page allocator. If the restore runs out of memory
//!    (`bulk_vmemmap_restore_error`), the folios already restored are freed
//!    first, to make room, and the batch is retried; if none were, folios
//!    are restored one at a time, and one that still cannot be is put back
//!    in the pool as a surplus page. Pages in use beyond `count` become
//!    surplus (`adjust_pool_surplus(+1)`), to be freed when they are
//!    released.
//! 3. `max_huge_pages` is set to the persistent pool reached.
//!
//! The kernel's free list is LIFO: `enqueue_hugetlb_folio` adds at the
//! head, `remove_pool_hugetlb_folio` takes the head. Demote, surplus pages,
//! reservations and the fault path's allocator are in [`demote`] and
//! [`surplus`]; the sysfs files and /proc/meminfo lines in [`sysfs`].
//!
//! # Fidelity
//!
//! | piece | label |
//! |-------|-------|
//! | counters, grow/shrink order, one HVO batch per write, stop at ENOMEM and read back, restore-error path | faithful (Linux 6.12) |
//! | sizes, `arch_hugetlb_valid_size`, boot parameter parsing, demote orders | faithful (arm64, 4 KiB pages, no hugetlb CMA) |
//! | gigantic allocation and free, both releases ([`GiganticAlloc`]) | faithful in order and per-page work; the allocator's per-frame record is mmlab's (see `mmlab_pcp` contig) |
//! | demote, both releases ([`DemoteBatching`]) | faithful; the source folio's tails are all cleared before the pieces are prepared (6.12 clears only each piece's head) |
//! | surplus, overcommit, reservations (`hugetlb_acct_memory`, `gather_surplus_pages`, `return_unused_surplus_pages`), `alloc_hugetlb_folio`/`free_huge_folio` | simplified: a reservation is a count the caller holds (no resv_map, subpool or cgroup); `free_hpage_workfn` runs when [`Hugetlb::flush_free_hpage_work`] is called (and at each `nr_hugepages` write, as the kernel flushes it there) |
//! | boot-time pools | simplified: allocated after boot by `set_max_huge_pages` per size, gigantic sizes first (the kernel takes those from memblock) |
//! | nodes | simplified: one node, so `__GFP_THISNODE` and the per-node counters and `node_alloc_noretry` bitmap change nothing |
//! | hugetlb folio state | simplified: `PG_head`/compound tails via `mmlab_vmemmap::folio::prep_compound`; no page type, no frozen refcount (pool folios keep one reference) |
//! | locking | simplified: `&mut self` stands for `resize_lock` and `hugetlb_lock` |
//! | counters in [`HugetlbCounts`] | instrumented (mmlab's own) |

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod demote;
pub mod gigantic;
pub mod hstate;
pub mod hugetlbpage;
mod pool;
pub mod surplus;
pub mod sysfs;

pub use config::{BootParamError, DemoteBatching, GiganticAlloc, HugetlbConfig};
pub use hstate::{Hstate, HstateSysfs, HugePageSize};
pub use sysfs::{HstateAttr, HugetlbMeminfo, Store, StoreOutcome, SysfsError};

use mmlab_buddy::{ContigError, ContigScan};
use mmlab_engine::{Cpu, Pfn};
use mmlab_pcp::{FreeError, PageAllocator};
use mmlab_vmemmap::{Folio, FolioError, Hvo, HvoError};
use std::collections::BTreeMap;

/// `HUGETLB_PAGE_ORDER` on arm64 with 4 KiB pages: a PMD, 2 MiB.
pub const HUGETLB_PAGE_ORDER: u32 = 9;

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

/// Why a hugetlb operation failed. Running out of memory while growing a
/// pool is not one (the kernel stops where memory runs out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugetlbError {
    /// HVO reported a bug.
    Hvo(HvoError),
    /// A folio the pool holds is not a valid folio, or is still optimized
    /// when it is freed.
    Folio(FolioError),
    /// The page allocator refused to take a pool folio back (or to reshape
    /// its record of one).
    Free {
        /// The folio's head frame.
        pfn: Pfn,
        /// Why.
        err: FreeError,
    },
    /// A size arm64 does not offer (`size_to_hstate()` finds none: `-EINVAL`).
    UnsupportedSize {
        /// The size asked for, in bytes.
        bytes: u64,
    },
    /// `nr_overcommit_hugepages` of a gigantic size (`-EINVAL`).
    GiganticOvercommit {
        /// The size.
        size: HugePageSize,
    },
    /// `demote` of a size without a demote size, or a `demote_size` that
    /// is not a smaller size of at least 2M (`-EINVAL`).
    BadDemoteSize {
        /// The size demoted from.
        size: HugePageSize,
        /// The demote size asked for, in bytes (0: none set).
        demote_bytes: u64,
    },
    /// No huge page could be had (`-ENOMEM`): a fault with no free page and
    /// no surplus allowed, a reservation that cannot be backed, a demote
    /// whose vmemmap restore failed.
    NoMemory,
    /// A contiguous range refused for a reason only a bug causes here (a
    /// CPU of another machine, a size that is not a power of two).
    Contig(ContigError),
    /// `free_huge_folio` of a folio that was not handed out.
    NotInUse {
        /// The folio's head frame.
        pfn: Pfn,
    },
}

impl std::fmt::Display for HugetlbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HugetlbError::Hvo(e) => write!(f, "hugetlb vmemmap: {e}"),
            HugetlbError::Folio(e) => write!(f, "hugetlb folio: {e}"),
            HugetlbError::Free { pfn, err } => write!(f, "freeing hugetlb folio {pfn}: {err}"),
            HugetlbError::UnsupportedSize { bytes } => {
                write!(f, "huge page size {bytes} bytes is not offered by arm64 with 4K pages (64K, 2M, 32M, 1G)")
            }
            HugetlbError::GiganticOvercommit { size } => {
                write!(f, "nr_overcommit_hugepages of gigantic size {size} (EINVAL)")
            }
            HugetlbError::BadDemoteSize { size, demote_bytes } => {
                write!(f, "demote of {size} to {demote_bytes} bytes is not allowed (EINVAL)")
            }
            HugetlbError::NoMemory => write!(f, "Cannot allocate memory (ENOMEM)"),
            HugetlbError::Contig(e) => write!(f, "gigantic folio: {e}"),
            HugetlbError::NotInUse { pfn } => write!(f, "folio {pfn} is not a huge page in use"),
        }
    }
}
impl std::error::Error for HugetlbError {}

impl From<HvoError> for HugetlbError {
    fn from(e: HvoError) -> Self {
        HugetlbError::Hvo(e)
    }
}
impl From<FolioError> for HugetlbError {
    fn from(e: FolioError) -> Self {
        HugetlbError::Folio(e)
    }
}

/// A folio handed out by [`Hugetlb::alloc_hugetlb_folio`]
/// (`hugepage_activelist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InUse {
    size: HugePageSize,
}

/// The hugetlb subsystem of one machine: the four hstates over a page
/// allocator, with HVO.
#[derive(Debug)]
pub struct Hugetlb<'a, 'm> {
    pa: &'a PageAllocator<'m>,
    hvo: Hvo<'a, 'm>,
    cfg: HugetlbConfig,
    hstates: [Hstate; 4],
    counts: HugetlbCounts,
    contig: ContigScan,
    active: BTreeMap<Pfn, InUse>,
    /// `hpage_freelist`: optimized folios whose free waits for
    /// `free_hpage_workfn`.
    hpage_freelist: Vec<(HugePageSize, Folio)>,
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

    /// `set_max_huge_pages()` of the default size (a write to
    /// `/proc/sys/vm/nr_hugepages`). See [`Hugetlb::set_max_huge_pages_of`].
    ///
    /// # Errors
    /// As [`Hugetlb::set_max_huge_pages_of`].
    pub fn set_max_huge_pages(&mut self, cpu: &Cpu<'m>, count: u64) -> Result<u64, HugetlbError> {
        self.set_max_huge_pages_of(cpu, self.cfg.default_hugepagesz, count)
    }
}
