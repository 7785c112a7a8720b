//! [`ContigScan`]: the work counters of the contiguous-range calls, apart
//! from the code so that the zone's methods can name them.

mmlab_engine::counter_snapshot! {
    /// The work of `alloc_contig_pages` / `alloc_contig_range` calls
    /// (mmlab's own, instrumented), accumulated by the caller.
    pub struct ContigScan {
        /// Candidate ranges `pfn_range_valid_contig` examined.
        pub ranges_scanned: u64,
        /// Frames it looked at (one struct page read each).
        pub pages_scanned: u64,
        /// `alloc_contig_range` attempts.
        pub ranges_tried: u64,
        /// Attempts refused because a frame was in use.
        pub ranges_busy: u64,
        /// Free buddy blocks taken off the free lists.
        pub blocks_taken: u64,
        /// Frames of those blocks outside the range, given back.
        pub pages_given_back: u64,
        /// Struct pages prepared as allocated pages: every frame without
        /// `__GFP_COMP` (`split_free_pages`), the head only with it
        /// (`prep_new_page`).
        pub pages_prepped: u64,
        /// Ranges handed out.
        pub ranges_allocated: u64,
    }
}
