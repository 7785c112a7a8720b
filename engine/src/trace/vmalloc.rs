//! vmalloc tracepoints (`include/trace/events/vmalloc.h`): the virtual-area
//! allocator's events, fired where the kernel fires them.

use super::clock::TraceClock;

/// A range was cut out of the vmalloc space, or could not be
/// (`failed` = 1, `addr` = `vend` as the kernel's error value).
///
/// Mirrors `vmalloc:alloc_vmap_area`, fired at the end of mm/vmalloc.c
/// `alloc_vmap_area()`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn alloc_vmap_area(
    cpu: usize,
    clock: &TraceClock,
    addr: u64,
    size: u64,
    align: u64,
    vstart: u64,
    vend: u64,
    failed: bool,
) {
    tracing::event!(
        name: "alloc_vmap_area",
        target: "vmalloc",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        addr = addr,
        size = size,
        align = align,
        vstart = vstart,
        vend = vend,
        failed = i32::from(failed),
    );
}

/// A lazy purge freed `npurged` areas spanning `[start, end)` after one
/// TLB flush.
///
/// Mirrors `vmalloc:purge_vmap_area_lazy`, fired at the end of mm/vmalloc.c
/// `__purge_vmap_area_lazy()`.
#[inline]
pub fn purge_vmap_area_lazy(cpu: usize, clock: &TraceClock, start: u64, end: u64, npurged: u32) {
    tracing::event!(
        name: "purge_vmap_area_lazy",
        target: "vmalloc",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        start = start,
        end = end,
        npurged = npurged,
    );
}

/// An area went on the lazy list; `nr_lazy` pages are lazy now, a purge
/// runs past `nr_lazy_max`.
///
/// Mirrors `vmalloc:free_vmap_area_noflush`, fired in mm/vmalloc.c
/// `free_vmap_area_noflush()`.
#[inline]
pub fn free_vmap_area_noflush(cpu: usize, clock: &TraceClock, va_start: u64, nr_lazy: u64, nr_lazy_max: u64) {
    tracing::event!(
        name: "free_vmap_area_noflush",
        target: "vmalloc",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        va_start = va_start,
        nr_lazy = nr_lazy,
        nr_lazy_max = nr_lazy_max,
    );
}
