//! mmlab's own events, for what the kernel does not trace: TLB maintenance
//! and barriers (arm64 has no tracepoint for either), HVO, hugetlb pools, operation
//! brackets for timelines, and gauges for counter tracks. Every system is
//! named `mmlab_*` so that nobody takes them for kernel events.

use super::clock::TraceClock;
use crate::mm::mmzone::NR_PAGE_ORDERS;

/// mmlab's own: a TLBI was issued on `cpu` (`op` is the instruction's
/// name, `operand` its register value); it covers `[start, end)` (0, 0 for
/// an ASID-only op; 0, u64::MAX for everything). `entries` is the number of
/// live entries left in the issuing CPU's TLB model afterwards.
///
/// Fired by `tlbi()` (arch/arm64 `__tlbi()`).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn tlbi(
    cpu: usize,
    clock: &TraceClock,
    op: &'static str,
    operand: u64,
    start: u64,
    end: u64,
    entries: impl FnOnce() -> u64,
) {
    tracing::event!(
        name: "tlbi",
        target: "mmlab_tlb",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        op = op,
        operand = operand,
        start = start,
        end = end,
        entries = entries(),
    );
}

/// mmlab's own: a `dmb <option>` on `cpu`.
#[inline]
pub fn dmb(cpu: usize, clock: &TraceClock, option: &'static str) {
    tracing::event!(name: "dmb", target: "mmlab_barrier", tracing::Level::TRACE, cpu = cpu as u64, ts = clock.tick(), option = option);
}

/// mmlab's own: a `dsb <option>` on `cpu`.
#[inline]
pub fn dsb(cpu: usize, clock: &TraceClock, option: &'static str) {
    tracing::event!(name: "dsb", target: "mmlab_barrier", tracing::Level::TRACE, cpu = cpu as u64, ts = clock.tick(), option = option);
}

/// mmlab's own: an `isb` on `cpu`.
#[inline]
pub fn isb(cpu: usize, clock: &TraceClock) {
    tracing::event!(name: "isb", target: "mmlab_barrier", tracing::Level::TRACE, cpu = cpu as u64, ts = clock.tick());
}

/// mmlab's own: the hugetlb folio at `pfn` of `order` had its tail vmemmap
/// pages remapped to the head's and freed (HVO), in
/// `hugetlb_vmemmap_optimize_folio()`'s inner step.
#[inline]
pub fn vmemmap_optimize_folio(cpu: usize, clock: &TraceClock, pfn: u64, order: u32) {
    tracing::event!(
        name: "vmemmap_optimize_folio",
        target: "mmlab_hvo",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        pfn = pfn,
        order = order,
    );
}

/// mmlab's own: the optimized folio at `pfn` got its own vmemmap pages
/// back, in `hugetlb_vmemmap_restore_folio()`'s inner step.
#[inline]
pub fn vmemmap_restore_folio(cpu: usize, clock: &TraceClock, pfn: u64, order: u32) {
    tracing::event!(
        name: "vmemmap_restore_folio",
        target: "mmlab_hvo",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        pfn = pfn,
        order = order,
    );
}

/// mmlab's own: a fresh folio of `order` at `pfn` joined a hugetlb pool
/// (`alloc_pool_huge_folio()` or `alloc_surplus_hugetlb_folio()`
/// succeeded); `surplus` for a surplus page.
#[inline]
pub fn hugetlb_alloc_folio(cpu: usize, clock: &TraceClock, pfn: u64, order: u32, surplus: bool) {
    tracing::event!(
        name: "hugetlb_alloc_folio",
        target: "mmlab_hugetlb",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        pfn = pfn,
        order = order,
        surplus = surplus,
    );
}

/// mmlab's own: the hugetlb folio of `order` at `pfn` went back to the page
/// allocator (`__update_and_free_hugetlb_folio()` → `hugetlb_free_folio()`).
#[inline]
pub fn hugetlb_free_folio(cpu: usize, clock: &TraceClock, pfn: u64, order: u32) {
    tracing::event!(
        name: "hugetlb_free_folio",
        target: "mmlab_hugetlb",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        pfn = pfn,
        order = order,
    );
}

/// mmlab's own: `func` (a kernel function's name) starts on `cpu`.
#[inline]
pub fn func_entry(cpu: usize, clock: &TraceClock, func: &'static str) {
    tracing::event!(name: "func_entry", target: "mmlab_func", tracing::Level::TRACE, cpu = cpu as u64, ts = clock.tick(), func = func);
}

/// mmlab's own: `func` returns on `cpu`.
#[inline]
pub fn func_exit(cpu: usize, clock: &TraceClock, func: &'static str) {
    tracing::event!(name: "func_exit", target: "mmlab_func", tracing::Level::TRACE, cpu = cpu as u64, ts = clock.tick(), func = func);
}

/// Brackets an operation: [`func_entry`] now, [`func_exit`] when dropped
/// (so every return path closes the slice).
#[derive(Debug)]
#[must_use = "the exit event fires when the guard is dropped"]
pub struct FuncGuard<'a> {
    cpu: usize,
    clock: &'a TraceClock,
    func: &'static str,
}

/// Start a bracketed operation; see [`FuncGuard`].
#[inline]
pub fn func<'a>(cpu: usize, clock: &'a TraceClock, func: &'static str) -> FuncGuard<'a> {
    func_entry(cpu, clock, func);
    FuncGuard { cpu, clock, func }
}

impl Drop for FuncGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        func_exit(self.cpu, self.clock, self.func);
    }
}

/// mmlab's own gauge: CPU `cpu`'s pageset now holds `count` pages, with
/// `high` and `batch` (zoneinfo's `count:`, `high:`, `batch:`). Fired after
/// every change of a pcp list's count, on behalf of the CPU whose lists
/// they are.
#[inline]
pub fn pcp_state(cpu: usize, clock: &TraceClock, count: i32, high: i32, batch: i32) {
    tracing::event!(
        name: "pcp_state",
        target: "mmlab_state",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        count = count,
        high = high,
        batch = batch,
    );
}

/// mmlab's own gauge: the zone's free blocks per order (a /proc/buddyinfo
/// line), fired when `cpu` releases the zone lock.
#[inline]
pub fn buddyinfo(cpu: usize, clock: &TraceClock, nr_free: &[u64; NR_PAGE_ORDERS]) {
    tracing::event!(
        name: "buddyinfo",
        target: "mmlab_state",
        tracing::Level::TRACE,
        cpu = cpu as u64,
        ts = clock.tick(),
        free0 = nr_free[0],
        free1 = nr_free[1],
        free2 = nr_free[2],
        free3 = nr_free[3],
        free4 = nr_free[4],
        free5 = nr_free[5],
        free6 = nr_free[6],
        free7 = nr_free[7],
        free8 = nr_free[8],
        free9 = nr_free[9],
        free10 = nr_free[10],
    );
}
