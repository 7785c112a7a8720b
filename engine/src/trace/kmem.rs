//! kmem tracepoints: the page allocator's events, named and printed as Linux
//! prints them (`include/trace/events/kmem.h`).
//!
//! The allocator crates call these functions — [`mm_page_alloc`],
//! [`mm_page_free`], [`mm_page_free_batched`], [`mm_page_alloc_zone_locked`],
//! [`mm_page_pcpu_drain`] and [`mm_page_alloc_extfrag`] — at the points
//! where the kernel fires the tracepoints of the same names. Each emits one
//! `tracing` event with target `kmem`; see the parent module for the
//! conventions shared by every system.

use super::clock::TraceClock;
use crate::mm::gfp::Gfp;

/// The `tracing` target every kmem event uses.
pub const TARGET: &str = "kmem";

/// `pageblock_order` of the emulated machine: arm64 with 4 KiB pages, where
/// it is min(PMD order 9, MAX_PAGE_ORDER 10). Printed by
/// `mm_page_alloc_extfrag`.
pub const PAGEBLOCK_ORDER: u32 = 9;

/// The pfn the kernel records for a failed allocation (`-1UL`); the
/// `mm_page_alloc` event carries it in `pfn` when the allocation failed.
pub const NO_PFN: u64 = u64::MAX;

// ===== tracepoints =====

/// A page allocation finished, successfully (`pfn` is `Some`) or not.
///
/// Mirrors the `kmem:mm_page_alloc` tracepoint fired at the end of
/// mm/page_alloc.c `__alloc_pages_noprof()`. For a failed allocation the
/// kernel records pfn `-1UL` and prints `page=0000000000000000 pfn=0x0`; so
/// does this event (`page` is then ignored).
#[inline]
pub fn mm_page_alloc(
    cpu: usize,
    clock: &TraceClock,
    page: u64,
    pfn: Option<u64>,
    order: u32,
    gfp: Gfp,
    migratetype: i32,
) {
    tracing::event!(
        name: "mm_page_alloc",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = if pfn.is_some() { page } else { 0 },
        pfn = pfn.unwrap_or(NO_PFN),
        order = order,
        gfp_flags = u64::from(gfp.bits()),
        migratetype = migratetype,
    );
}

/// A page block of `order` is being freed.
///
/// Mirrors the `kmem:mm_page_free` tracepoint fired in mm/page_alloc.c
/// `free_pages_prepare()` for every free.
#[inline]
pub fn mm_page_free(cpu: usize, clock: &TraceClock, page: u64, pfn: u64, order: u32) {
    tracing::event!(
        name: "mm_page_free",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        order = order,
    );
}

/// A folio freed through the batched path; printed with a literal `order=0`
/// whatever its order, as the kernel does.
///
/// Mirrors the `kmem:mm_page_free_batched` tracepoint fired in mm/page_alloc.c
/// `free_unref_folios()`.
#[inline]
pub fn mm_page_free_batched(cpu: usize, clock: &TraceClock, page: u64, pfn: u64) {
    tracing::event!(
        name: "mm_page_free_batched",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
    );
}

/// A block was taken off a buddy free list with the zone lock held;
/// `percpu_refill` says whether it goes to a pcp list.
///
/// Mirrors the `kmem:mm_page_alloc_zone_locked` tracepoint fired in
/// mm/page_alloc.c `__rmqueue_smallest()`.
#[inline]
pub fn mm_page_alloc_zone_locked(
    cpu: usize,
    clock: &TraceClock,
    page: u64,
    pfn: u64,
    order: u32,
    migratetype: i32,
    percpu_refill: bool,
) {
    tracing::event!(
        name: "mm_page_alloc_zone_locked",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        order = order,
        migratetype = migratetype,
        percpu_refill = i32::from(percpu_refill),
    );
}

/// A page is moved from a pcp list back to the buddy lists.
///
/// Mirrors the `kmem:mm_page_pcpu_drain` tracepoint fired per page in
/// mm/page_alloc.c `free_pcppages_bulk()`; `pfn` is the page's own pfn, before
/// any merging with its buddy.
#[inline]
pub fn mm_page_pcpu_drain(cpu: usize, clock: &TraceClock, page: u64, pfn: u64, order: u32, migratetype: i32) {
    tracing::event!(
        name: "mm_page_pcpu_drain",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        order = order,
        migratetype = migratetype,
    );
}

/// An allocation fell back to another migratetype's free list.
/// `change_ownership` is whether the pageblock now has the allocation's type;
/// the printed `fragmenting` is `fallback_order < pageblock_order`.
///
/// Mirrors the `kmem:mm_page_alloc_extfrag` tracepoint fired in
/// mm/page_alloc.c `__rmqueue_fallback()` (and the steal/claim helpers of
/// later kernels).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn mm_page_alloc_extfrag(
    cpu: usize,
    clock: &TraceClock,
    page: u64,
    pfn: u64,
    alloc_order: i32,
    fallback_order: i32,
    alloc_migratetype: i32,
    fallback_migratetype: i32,
    change_ownership: bool,
) {
    tracing::event!(
        name: "mm_page_alloc_extfrag",
        target: "kmem",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        page = page,
        pfn = pfn,
        alloc_order = alloc_order,
        fallback_order = fallback_order,
        alloc_migratetype = alloc_migratetype,
        fallback_migratetype = fallback_migratetype,
        change_ownership = i32::from(change_ownership),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 0xffff_fdff_c100_0000;
    const PFN: u64 = 0x40000;

    #[test]
    fn disabled_events_do_not_advance_the_clock() {
        let clock = TraceClock::new();
        // A scoped subscriber that wants nothing: as good as none, and
        // unaffected by other tests' subscribers on other threads.
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            mm_page_alloc(0, &clock, PAGE, Some(PFN), 0, Gfp::GFP_KERNEL, 0);
            mm_page_free(0, &clock, PAGE, PFN, 0);
            mm_page_free_batched(0, &clock, PAGE, PFN);
            mm_page_alloc_zone_locked(0, &clock, PAGE, PFN, 0, 0, false);
            mm_page_pcpu_drain(0, &clock, PAGE, PFN, 0, 0);
            mm_page_alloc_extfrag(0, &clock, PAGE, PFN, 0, 0, 0, 0, false);
        });
        assert_eq!(clock.now(), 0);
    }
}
