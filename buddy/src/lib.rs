//! The buddy allocator: zones, free areas per order and migratetype,
//! pageblocks, watermarks (mm/page_alloc.c, Linux 7.2 unless noted).
//!
//! # The algorithm
//!
//! A zone's free memory is kept as naturally aligned blocks of 2^order frames,
//! order 0 to [`MAX_PAGE_ORDER`](mmlab_engine::mm::MAX_PAGE_ORDER). Each order has one doubly linked list per
//! migratetype, threaded through the head frame's struct page; the head is
//! marked `PageBuddy` and keeps its order in `page->private`.
//!
//! *Allocation* (`__rmqueue_smallest`) takes the first block on the list of
//! the wanted type at the lowest order that has one, and splits it (`expand`):
//! each split step puts the upper half back on the list one order lower, so a
//! request of order o served from order k leaves k − o free halves behind and
//! the caller keeps the lowest-addressed piece. When the wanted type has no
//! block at any order, `__rmqueue` falls back: first it tries to *claim* a
//! block of another type (largest first, relabelling the pageblock when it is
//! big enough or mostly free), then to *steal* the smallest suitable block
//! without relabelling. The fallback order per type is the kernel's table.
//!
//! *Freeing* (`__free_one_page`) looks at the buddy of the block (its frame
//! number with bit `order` flipped); while the buddy is a free block of the
//! same order, it is unlinked and the two merge one order up. Whole pageblocks
//! of different types merge only if both types are mergeable. The result is
//! put at the head of its list, or at the tail when a merge one order higher
//! looks likely (`buddy_merge_likely`), so that it is not handed out soon.
//!
//! Pageblocks (2^9 frames) carry a migratetype in the pageblock bitmap; free
//! blocks always sit on the list of their pageblock's type.
//!
//! All list and counter changes happen under the zone lock, taken through
//! [`Zone::lock`] on behalf of a CPU; the lock is instrumented (acquisitions,
//! contention, optional hold time).
//!
//! Fidelity: faithful for the free lists, split, merge, placement, fallbacks,
//! highatomic reserves, CMA pageblocks, pageblock isolation (one pageblock at
//! a time, [`isolation`]) and watermarks; simplified in having no compaction
//! capture, page reporting or shuffling; `alloc_contig_range` cannot
//! migrate, so it fails on a range with pages in use.
//!
//! # Example
//!
//! Boot a small machine, give its free memory to a zone as
//! `memblock_free_all` does, take an order-3 block and give it back:
//!
//! ```
//! use mmlab_buddy::{Fpi, Zone};
//! use mmlab_engine::{Machine, MachineConfig, Migratetype};
//!
//! let m = Machine::boot(MachineConfig::with("64M", 1)?)?;
//! assert!(m.claim_memblock_free_all());
//! let zone = Zone::new(&m);
//! let cpu = m.cpu(0)?;
//! m.memblock().for_each_free_block(|pfn, order| zone.free_pages_core(&cpu, pfn, order));
//! let free = zone.nr_free_pages();
//!
//! // __rmqueue_smallest: the lowest order with a Movable block, split down to 3.
//! let pfn = zone.lock(&cpu).rmqueue_smallest(3, Migratetype::Movable).expect("a free block");
//! assert_eq!(zone.nr_free_pages(), free - 8);
//!
//! // __free_one_page: it merges with its buddies again.
//! zone.free_one_page(&cpu, pfn, 3, Fpi::NONE);
//! assert_eq!(zone.nr_free_pages(), free);
//! zone.check_free_lists()?;
//! print!("{}", mmlab_buddy::procfs::buddyinfo(&zone));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod check;
mod contig;
pub mod counters;
mod free;
pub mod isolation;
pub mod node;
pub mod procfs;
mod rmqueue;
mod watermark;
mod zone;
pub mod zones;

#[cfg(test)]
mod tests;

pub use contig::{ContigError, ContigScan};
pub use isolation::{IsolateError, PbIsolateMode};
pub use node::NodeZones;
pub use rmqueue::{RmqueueMode, fallbacks, pcp_allowed_order};
pub use watermark::{WMARK_HIGH, WMARK_LOW, WMARK_MIN, WMARK_PROMO, calculate_min_free_kbytes};
pub use zone::{AllocFlags, Fpi, LockedZone, Zone, ZoneFlag, ZoneInner};
