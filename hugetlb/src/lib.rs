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
mod error;
pub mod gigantic;
pub mod hstate;
mod hugetlb;
pub mod hugetlbpage;
mod pool;
pub mod surplus;
pub mod sysfs;
mod vmemmap;

pub use config::{BootParamError, DemoteBatching, GiganticAlloc, HugetlbConfig};
pub use error::HugetlbError;
pub use hstate::{HUGETLB_PAGE_ORDER, Hstate, HstateSysfs, HugePageSize};
pub use hugetlb::{Hugetlb, HugetlbCounts};
pub use sysfs::{HstateAttr, HugetlbMeminfo, Store, StoreOutcome, SysfsError};
