//! Per-cpu page lists and the page allocator's front door
//! (mm/page_alloc.c; Linux 7.2 by default, 6.12 selectable: see [`KernelRules`]).
//!
//! # The algorithm
//!
//! Every CPU keeps a small cache of free pages per zone (`struct
//! per_cpu_pages`): 14 lists, one per (order 0..=3, pcp migratetype) plus
//! two for THP-order blocks. Allocation of a cacheable order takes the head
//! of the right list under a per-CPU trylock, so the common case touches no
//! shared lock. An empty list is refilled from the buddy lists in one
//! zone-lock hold (`rmqueue_bulk`); the refill size (`nr_pcp_alloc`) starts at
//! `batch` and doubles with every consecutive order-0 refill (`alloc_factor`,
//! up to `batch << CONFIG_PCP_BATCH_SCALE_MAX`), and each refill may grow
//! `pcp->high` by the amount taken.
//!
//! Freeing puts the block at the head of its list. When the cache reaches
//! `high` (`nr_pcp_high`), a drain (`free_pcppages_bulk`) returns the oldest
//! pages, round-robin over the lists from their tails, to the buddy lists,
//! where they merge. How much is drained grows with the run of consecutive
//! frees (`free_count`, `nr_pcp_free`); a long run of high-order frees drains
//! aggressively (`free_high`). `high` floats between `high_min` (from the
//! low watermark split over the node's CPUs) and `high_max` (from
//! `managed / 8`), shrinks under memory pressure (`ZONE_BELOW_HIGH`) and
//! decays by an eighth per vmstat tick (`decay_pcp_high`).
//!
//! Orders the pcp does not cache (4..=8 and 10) always go to the buddy
//! allocator under the zone lock.
//!
//! The front door (`alloc_pages`, `free_pages`, `alloc_pages_bulk`) follows
//! `__alloc_pages` → `get_page_from_freelist` → `rmqueue`, with the
//! watermark checks, and a slow path that is simplified: no reclaim,
//! compaction or OOM killer exist, so it retries at the min watermark, then
//! (for callers that may block) releases highatomic reserves and drains all
//! pcp lists once, as the kernel does when direct reclaim makes no progress.
//!
//! The node's zones (DMA, DMA32, Normal, Movable; [`mmlab_buddy::NodeZones`])
//! each have their free lists, watermarks, `lowmem_reserve` and one pageset
//! per CPU. An allocation walks the ZONELIST_FALLBACK zonelist from the
//! first zone not above `gfp_zone(gfp)` (looked up once per value of the
//! gfp zone bits at boot), checking each zone's watermark plus its reserve
//! against that zone index; its first attempt carries ALLOC_NOFRAGMENT when
//! the preferred zone is Normal, and a second pass runs without it. A free
//! goes to the zone its struct page names (`page_zone`). Movable
//! allocations may take MIGRATE_CMA pageblocks (`ALLOC_CMA`), first when
//! they hold more than half of the zone's free pages.
//!
//! [`PageAllocator::boot`] brings the allocator up in the kernel's order
//! (its doc lists the steps); on a `boot.state=real` machine that includes
//! the CMA area, the boot's own allocations for the machine's size
//! ([`BootWork`], [`boot_work::rules`]) and the pages the end of boot gives
//! back; [`PageAllocator::cma_alloc`] hands out ranges of the CMA area as
//! mm/cma.c does.
//!
//! | piece | fidelity |
//! |---|---|
//! | pcp sizing, refill, drain, decay; zonelist walk, watermarks, lowmem reserve, NOFRAGMENT, CMA rules | faithful |
//! | slow path (no reclaim, compaction or OOM) | simplified |
//! | `drain_all_pages` run on the calling CPU | simplified |
//! | boot work (a recorded boot's requests with rules for the machine's size, mmlab's placement) | instrumented; the rules faithful or fitted ([`boot_work::rules`]) |
//! | `cma_alloc` (bitmap, alignment, the pageblock's excess freed, no pgalloc) | faithful; no migration |
//!
//! Contiguous ranges for gigantic pages (`alloc_contig_pages`, with or
//! without `__GFP_COMP`), `folio_put` of an allocation above
//! `MAX_PAGE_ORDER`, and the allocator's record of an allocation changing
//! shape (`join_allocation`, `split_allocation`; instrumented) are in the
//! `contig` module.
//!
//! # Example
//!
//! Boot a small machine and its page allocator, allocate an order-0 page
//! through CPU 0's pcp list and free it again:
//!
//! ```
//! use mmlab_engine::{Gfp, Machine, MachineConfig};
//! use mmlab_pcp::{AllocatorConfig, PageAllocator};
//!
//! let m = Machine::boot(MachineConfig::with("64M", 2)?)?;
//! let mut cfg = AllocatorConfig::default();
//! cfg.set("percpu_pagelist_high_fraction", "8")?; // as `--set` would
//! let pa = PageAllocator::boot(&m, cfg)?;
//! let cpu = m.cpu(0)?;
//! let free = |pa: &PageAllocator<'_>| pa.nr_free_pages() + pa.pcp_pages();
//! let before = free(&pa);
//!
//! // The first allocation refills CPU 0's pcp list from the buddy lists.
//! let pfn = pa.try_alloc_pages(&cpu, Gfp::GFP_KERNEL, 0)?;
//! assert_eq!(free(&pa), before - 1);
//! pa.free_pages(&cpu, pfn, 0)?;
//! assert_eq!(free(&pa), before);
//! pa.check_invariants()?;
//! assert!(mmlab_pcp::vmstat::zoneinfo(&pa).contains("\n  pagesets\n    cpu: 0\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod alloc;
pub mod boot_work;
mod check;
mod cma;
mod config;
mod contig;
mod error;
mod fault;
mod free_bulk;
mod gfp;
#[cfg(all(test, loom))]
mod loom_model;
mod page_alloc;
mod pageset;
mod pcplist;
mod rules;
mod sizing;
pub mod vmstat;

#[cfg(test)]
mod tests;

pub use boot_work::{BootRuleWork, BootWork};
pub use config::{AllocatorConfig, Thp};
pub use error::{AllocError, CmaError, FreeError, SysctlError};
pub use fault::{FaultAttr, FaultAttrError};
pub use page_alloc::PageAllocator;
pub use pageset::{
    NR_PCP_LISTS, PCPF_FREE_HIGH_BATCH, PCPF_PREV_FREE_HIGH_ORDER, PagesetInfo, PerCpuPages, order_to_pindex,
    pindex_to_order,
};
pub use rules::KernelRules;
pub use sizing::{
    MIN_FREE_KBYTES_MAX, MIN_PERCPU_PAGELIST_HIGH_FRACTION, PCP_BATCH_SCALE_MAX, zone_batchsize, zone_highsize,
};
