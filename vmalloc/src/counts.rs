//! vmalloc's own counters ([`VmallocCounts`]): the rare ones (purges,
//! fallbacks) under a lock, the per-call ones (vmallocs, vfrees,
//! vm_map_rams, vm_unmap_rams, PTE entries) per CPU, each CPU's in a cache
//! line of its own and written only by its CPU's thread.

mmlab_engine::counter_snapshot! {
    /// Counters of vmalloc's own events (the page, TLB and barrier events
    /// of the same calls are the engine's).
    pub struct VmallocCounts {
        /// mmlab's own, instrumented: successful vmalloc-family allocations
        /// (`__vmalloc_node_range_noprof` returning an address), nested page
        /// arrays included. The kernel has no counter or tracepoint for it.
        pub vmallocs: u64,
        /// mmlab's own, instrumented: `vfree` calls that freed an area.
        pub vfrees: u64,
        /// `__purge_vmap_area_lazy` runs that flushed: one
        /// `vmalloc:purge_vmap_area_lazy` tracepoint each.
        pub purges: u64,
        /// mmlab's own, instrumented: pages of VA space (guards included)
        /// returned by purges. The `vmalloc:purge_vmap_area_lazy` tracepoint
        /// reports areas (`npurged`), not pages.
        pub purged_pages: u64,
        /// mmlab's own, instrumented: huge attempts that fell back to small
        /// pages (the silent `goto again` of `__vmalloc_node_range_noprof`).
        pub huge_fallbacks: u64,
        /// mmlab's own, instrumented: leaf entries of vmalloc'd and
        /// vm_map_ram'd areas written (`vmap_pages_range`) and cleared
        /// (`vunmap_range_noflush` at vfree and vm_unmap_ram, a vrealloc
        /// shrink): one per PTE, contiguous runs included, one per PMD
        /// block. vmap is not counted.
        pub pte_entries: u64,
        /// mmlab's own, instrumented: successful `vm_map_ram` calls.
        pub vm_map_rams: u64,
        /// mmlab's own, instrumented: `vm_unmap_ram` calls that unmapped.
        pub vm_unmap_rams: u64,
    }
}

/// The per-CPU call counters of [`VmallocCounts`], by slot.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CallCount {
    Vmallocs,
    Vfrees,
    PteEntries,
    VmMapRams,
    VmUnmapRams,
}

/// Number of [`CallCount`] slots.
pub(crate) const NR_CALL_COUNTS: usize = CallCount::VmUnmapRams as usize + 1;

/// The vmalloc values of /proc/meminfo and /proc/vmstat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VmallocMeminfo {
    /// `VmallocTotal`: `VMALLOC_END - VMALLOC_START` in kB.
    pub vmalloc_total_kb: u64,
    /// `VmallocUsed`: `vmalloc_nr_pages()` in kB.
    pub vmalloc_used_kb: u64,
    /// `VmallocChunk`: always 0 since Linux 4.4.
    pub vmalloc_chunk_kb: u64,
    /// `nr_vmalloc` (NR_VMALLOC, pages).
    pub nr_vmalloc: u64,
}
