//! Why a hugetlb operation failed.

use crate::hstate::HugePageSize;
use mmlab_buddy::ContigError;
use mmlab_engine::Pfn;
use mmlab_pcp::FreeError;
use mmlab_vmemmap::{FolioError, HvoError};

/// Why a hugetlb operation failed. Running out of memory while growing a
/// pool is not one (the kernel stops where memory runs out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugetlbError {
    /// HVO reported a bug.
    Hvo(HvoError),
    /// A folio the pool holds is not a valid folio, or is still optimized
    /// when it is freed.
    Folio(FolioError),
    /// The page allocator refused to take a pool folio back (or to reshape
    /// its record of one).
    Free {
        /// The folio's head frame.
        pfn: Pfn,
        /// Why.
        err: FreeError,
    },
    /// A size arm64 does not offer (`size_to_hstate()` finds none: `-EINVAL`).
    UnsupportedSize {
        /// The size asked for, in bytes.
        bytes: u64,
    },
    /// `nr_overcommit_hugepages` of a gigantic size (`-EINVAL`).
    GiganticOvercommit {
        /// The size.
        size: HugePageSize,
    },
    /// `demote` of a size without a demote size, or a `demote_size` that
    /// is not a smaller size of at least 2M (`-EINVAL`).
    BadDemoteSize {
        /// The size demoted from.
        size: HugePageSize,
        /// The demote size asked for, in bytes (0: none set).
        demote_bytes: u64,
    },
    /// No huge page could be had (`-ENOMEM`): a fault with no free page and
    /// no surplus allowed, a reservation that cannot be backed, a demote
    /// whose vmemmap restore failed.
    NoMemory,
    /// A contiguous range refused for a reason only a bug causes here (a
    /// CPU of another machine, a size that is not a power of two).
    Contig(ContigError),
    /// `free_huge_folio` of a folio that was not handed out.
    NotInUse {
        /// The folio's head frame.
        pfn: Pfn,
    },
}

impl std::fmt::Display for HugetlbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HugetlbError::Hvo(e) => write!(f, "hugetlb vmemmap: {e}"),
            HugetlbError::Folio(e) => write!(f, "hugetlb folio: {e}"),
            HugetlbError::Free { pfn, err } => write!(f, "freeing hugetlb folio {pfn}: {err}"),
            HugetlbError::UnsupportedSize { bytes } => {
                write!(f, "huge page size {bytes} bytes is not offered by arm64 with 4K pages (64K, 2M, 32M, 1G)")
            }
            HugetlbError::GiganticOvercommit { size } => {
                write!(f, "nr_overcommit_hugepages of gigantic size {size} (EINVAL)")
            }
            HugetlbError::BadDemoteSize { size, demote_bytes } => {
                write!(f, "demote of {size} to {demote_bytes} bytes is not allowed (EINVAL)")
            }
            HugetlbError::NoMemory => write!(f, "Cannot allocate memory (ENOMEM)"),
            HugetlbError::Contig(e) => write!(f, "gigantic folio: {e}"),
            HugetlbError::NotInUse { pfn } => write!(f, "folio {pfn} is not a huge page in use"),
        }
    }
}
impl std::error::Error for HugetlbError {}

impl From<HvoError> for HugetlbError {
    fn from(e: HvoError) -> Self {
        HugetlbError::Hvo(e)
    }
}
impl From<FolioError> for HugetlbError {
    fn from(e: FolioError) -> Self {
        HugetlbError::Folio(e)
    }
}
