//! Why a contiguous range could not be allocated: the error the zone's
//! `alloc_contig_range()` and `alloc_contig_pages()` return.

use mmlab_engine::Pfn;

/// Why a contiguous range could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContigError {
    /// The range is empty or leaves the zone.
    OutOfRange {
        /// The first frame asked for.
        start: Pfn,
        /// The frames asked for.
        nr_pages: u64,
    },
    /// A frame in the range is not free in the buddy allocator.
    Busy {
        /// The first busy frame found.
        pfn: Pfn,
    },
    /// No free range of that size was found (`alloc_contig_pages`).
    NoRange {
        /// The frames asked for.
        nr_pages: u64,
    },
    /// `__GFP_COMP` asked for a range that is not one naturally aligned
    /// power-of-two block (`alloc_contig_range` returns `-EINVAL`).
    NotCompound {
        /// The first frame asked for.
        start: Pfn,
        /// The frames asked for.
        nr_pages: u64,
    },
    /// The CPU handle belongs to another machine.
    ForeignCpu {
        /// The handle's CPU id.
        cpu: usize,
    },
}

impl std::fmt::Display for ContigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContigError::OutOfRange { start, nr_pages } => {
                write!(f, "contig range {start}+{nr_pages} is empty or outside the zone")
            }
            ContigError::Busy { pfn } => write!(f, "pfn {pfn} in the range is in use"),
            ContigError::NoRange { nr_pages } => write!(f, "no free contiguous range of {nr_pages} pages"),
            ContigError::NotCompound { start, nr_pages } => {
                write!(f, "contig range {start}+{nr_pages} is not an aligned power of two (__GFP_COMP)")
            }
            ContigError::ForeignCpu { cpu } => write!(f, "cpu {cpu} is a handle of another machine"),
        }
    }
}
impl std::error::Error for ContigError {}
