//! What pageblock isolation is asked for and why it refuses: its mode and
//! its typed `-EBUSY` (the zone's isolation methods name them, so they
//! live below both).

use mmlab_engine::Pfn;
use std::fmt;

/// `enum pb_isolate_mode` (include/linux/page-isolation.h): why a range is
/// isolated, which decides what counts as unmovable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PbIsolateMode {
    /// `PB_ISOLATE_MODE_MEM_OFFLINE`: to offline the memory.
    MemOffline,
    /// `PB_ISOLATE_MODE_CMA_ALLOC`: for a CMA allocation; CMA pageblocks
    /// may be isolated.
    CmaAlloc,
    /// `PB_ISOLATE_MODE_OTHER`: anything else (`alloc_contig_range` for a
    /// gigantic page).
    Other,
}

/// Why `set_migratetype_isolate()` refused (the kernel's `-EBUSY` in every
/// case). Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsolateError {
    /// The frame is not in this zone (the kernel's `page_zone()` would be
    /// another zone).
    OutOfZone {
        /// The frame asked for.
        pfn: Pfn,
    },
    /// The pageblock is isolated already (someone raced us).
    AlreadyIsolated {
        /// The pageblock's first frame.
        pfn: Pfn,
    },
    /// `has_unmovable_pages()` found this page.
    Unmovable {
        /// The unmovable page.
        pfn: Pfn,
    },
    /// The pageblock straddles the zone's end (`prep_move_freepages_block()`
    /// refuses).
    StraddlesZone {
        /// The pageblock's first frame.
        pfn: Pfn,
    },
}

impl fmt::Display for IsolateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IsolateError::OutOfZone { pfn } => write!(f, "pfn {pfn} is not in this zone (EBUSY)"),
            IsolateError::AlreadyIsolated { pfn } => write!(f, "pageblock at {pfn} is isolated already (EBUSY)"),
            IsolateError::Unmovable { pfn } => write!(f, "unmovable page {pfn} in the pageblock (EBUSY)"),
            IsolateError::StraddlesZone { pfn } => write!(f, "pageblock at {pfn} straddles the zone (EBUSY)"),
        }
    }
}

impl std::error::Error for IsolateError {}
