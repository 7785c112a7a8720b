//! Outcomes, violations and the state snapshot the oracle compares.
//!
//! # The oracle
//!
//! Before an op runs, the executor works out from its own model of the
//! handles which outcomes are acceptable ([`Outcome`] names, one typed
//! error or a small set of them for a wrong call; success, or `NoMemory`
//! and friends, for a right call). A wrong call must also change nothing:
//! a [`Snapshot`] of the page allocator (buddyinfo per order and per
//! migratetype, NR_FREE_PAGES, every CPU's pageset), the vm events, and
//! vmalloc (busy, lazy and free bytes, its counters, the kvfree_rcu queue,
//! the percpu counters) is taken before and compared after. An outcome
//! outside the set, or a changed snapshot, is a [`Violation`]; so are a
//! failed invariant check, a broken page-conservation sum, a handle whose
//! pages left the allocated state, a panic inside the library, and, at the
//! end, memory not coming back.

use mmlab_engine::mm::vmstat::VmCounts;
use mmlab_pcp::{AllocError, FreeError, PagesetInfo, SysctlError};
use mmlab_vmalloc::VmallocError;
use mmlab_vmalloc::percpu::{PercpuCounts, PercpuError};
use std::fmt;

/// What a call returned, by kind (the `expect=` names of replay files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Ok,
    /// Not run: a handle was unbound, or the call could touch memory the
    /// fuzzer does not own (a freed page since handed to someone else).
    Skipped,
    NoMemory,
    OrderTooLarge,
    InvalidPfn,
    DoubleFree,
    NotAllocated,
    WrongOrder,
    Reserved,
    ZeroSize,
    TooLarge,
    BadAlign,
    NoVmapSpace,
    NotVmalloc,
    InsideArea,
    WrongKind,
    Map,
    HighFraction,
    MinFreeKbytes,
    BadRequest,
    NotPercpu,
    BreakBeforeMake,
    ContAlignment,
    BadRange,
    PartialHugeUnmap,
    /// The library panicked.
    ForeignCpu,
    WrongCount,
    PageNotAllocated,
    OutsideAddressSpace,
    OutsideRam,
    /// hugetlb: a file the hstate's directory does not have (ENOENT).
    NoSuchFile,
    /// hugetlb: a read-only file written (EACCES).
    ReadOnly,
    /// hugetlb: a value the store cannot read (EINVAL).
    BadValue,
    /// hugetlb: a number above `u64::MAX` (ERANGE).
    ValueRange,
    /// hugetlb: `nr_overcommit_hugepages` of a gigantic size (EINVAL).
    GiganticOvercommit,
    /// hugetlb: a `demote_size` that is not a smaller size of at least 2M.
    BadDemoteSize,
    /// hugetlb: a size arm64 does not offer.
    UnsupportedSize,
    /// hugetlb: `free_huge_folio` of a folio not handed out.
    NotInUse,
    /// set_memory_*: a page of the range is not mapped.
    NotMapped,
    /// set_memory_*: the range covers part of a block or contiguous run
    /// and the CPU cannot split it (-EINVAL).
    NotPageGranular,
    /// HVO: restore of a folio whose vmemmap is not optimized.
    NotOptimized,
    /// HVO: optimize of a folio already optimized.
    AlreadyOptimized,
    /// HVO: optimize of a folio HVO cannot optimize (64K, or HVO off).
    NotOptimizable,
    /// HVO: a folio hugetlb no longer holds (freed to the page allocator).
    NotHugetlb,
    Panic,
}

/// Every outcome, for parsing.
pub const OUTCOMES: [Outcome; 45] = [
    Outcome::Ok,
    Outcome::Skipped,
    Outcome::NoMemory,
    Outcome::OrderTooLarge,
    Outcome::InvalidPfn,
    Outcome::DoubleFree,
    Outcome::NotAllocated,
    Outcome::WrongOrder,
    Outcome::Reserved,
    Outcome::ZeroSize,
    Outcome::TooLarge,
    Outcome::BadAlign,
    Outcome::NoVmapSpace,
    Outcome::NotVmalloc,
    Outcome::InsideArea,
    Outcome::WrongKind,
    Outcome::Map,
    Outcome::HighFraction,
    Outcome::MinFreeKbytes,
    Outcome::BadRequest,
    Outcome::NotPercpu,
    Outcome::BreakBeforeMake,
    Outcome::ContAlignment,
    Outcome::BadRange,
    Outcome::PartialHugeUnmap,
    Outcome::ForeignCpu,
    Outcome::WrongCount,
    Outcome::PageNotAllocated,
    Outcome::OutsideAddressSpace,
    Outcome::OutsideRam,
    Outcome::NoSuchFile,
    Outcome::ReadOnly,
    Outcome::BadValue,
    Outcome::ValueRange,
    Outcome::GiganticOvercommit,
    Outcome::BadDemoteSize,
    Outcome::UnsupportedSize,
    Outcome::NotInUse,
    Outcome::NotMapped,
    Outcome::NotPageGranular,
    Outcome::NotOptimized,
    Outcome::AlreadyOptimized,
    Outcome::NotOptimizable,
    Outcome::NotHugetlb,
    Outcome::Panic,
];

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "Ok",
            Outcome::Skipped => "Skipped",
            Outcome::NoMemory => "NoMemory",
            Outcome::OrderTooLarge => "OrderTooLarge",
            Outcome::InvalidPfn => "InvalidPfn",
            Outcome::DoubleFree => "DoubleFree",
            Outcome::NotAllocated => "NotAllocated",
            Outcome::WrongOrder => "WrongOrder",
            Outcome::Reserved => "Reserved",
            Outcome::ZeroSize => "ZeroSize",
            Outcome::TooLarge => "TooLarge",
            Outcome::BadAlign => "BadAlign",
            Outcome::NoVmapSpace => "NoVmapSpace",
            Outcome::NotVmalloc => "NotVmalloc",
            Outcome::InsideArea => "InsideArea",
            Outcome::WrongKind => "WrongKind",
            Outcome::Map => "Map",
            Outcome::HighFraction => "HighFraction",
            Outcome::MinFreeKbytes => "MinFreeKbytes",
            Outcome::BadRequest => "BadRequest",
            Outcome::NotPercpu => "NotPercpu",
            Outcome::BreakBeforeMake => "BreakBeforeMake",
            Outcome::ContAlignment => "ContAlignment",
            Outcome::BadRange => "BadRange",
            Outcome::PartialHugeUnmap => "PartialHugeUnmap",
            Outcome::ForeignCpu => "ForeignCpu",
            Outcome::WrongCount => "WrongCount",
            Outcome::PageNotAllocated => "PageNotAllocated",
            Outcome::OutsideAddressSpace => "OutsideAddressSpace",
            Outcome::OutsideRam => "OutsideRam",
            Outcome::NoSuchFile => "NoSuchFile",
            Outcome::ReadOnly => "ReadOnly",
            Outcome::BadValue => "BadValue",
            Outcome::ValueRange => "ValueRange",
            Outcome::GiganticOvercommit => "GiganticOvercommit",
            Outcome::BadDemoteSize => "BadDemoteSize",
            Outcome::UnsupportedSize => "UnsupportedSize",
            Outcome::NotInUse => "NotInUse",
            Outcome::NotMapped => "NotMapped",
            Outcome::NotPageGranular => "NotPageGranular",
            Outcome::NotOptimized => "NotOptimized",
            Outcome::AlreadyOptimized => "AlreadyOptimized",
            Outcome::NotOptimizable => "NotOptimizable",
            Outcome::NotHugetlb => "NotHugetlb",
            Outcome::Panic => "Panic",
        }
    }
    pub fn parse(s: &str) -> Option<Outcome> {
        OUTCOMES.iter().copied().find(|o| o.name() == s)
    }
    pub fn is_error(self) -> bool {
        !matches!(self, Outcome::Ok | Outcome::Skipped)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<FreeError> for Outcome {
    fn from(e: FreeError) -> Outcome {
        match e {
            FreeError::OrderTooLarge { .. } => Outcome::OrderTooLarge,
            FreeError::InvalidPfn { .. } => Outcome::InvalidPfn,
            FreeError::DoubleFree { .. } => Outcome::DoubleFree,
            FreeError::NotAllocated { .. } => Outcome::NotAllocated,
            FreeError::WrongOrder { .. } => Outcome::WrongOrder,
            FreeError::Reserved { .. } => Outcome::Reserved,
            FreeError::ForeignCpu { .. } => Outcome::ForeignCpu,
        }
    }
}
impl From<AllocError> for Outcome {
    fn from(e: AllocError) -> Outcome {
        match e {
            AllocError::OrderTooLarge { .. } => Outcome::OrderTooLarge,
            AllocError::NoMemory { .. } => Outcome::NoMemory,
            AllocError::ForeignCpu { .. } => Outcome::ForeignCpu,
        }
    }
}
impl From<VmallocError> for Outcome {
    fn from(e: VmallocError) -> Outcome {
        match e {
            VmallocError::ZeroSize => Outcome::ZeroSize,
            VmallocError::TooLarge { .. } => Outcome::TooLarge,
            VmallocError::BadAlign { .. } => Outcome::BadAlign,
            VmallocError::NoVmapSpace { .. } => Outcome::NoVmapSpace,
            VmallocError::NoMemory { .. } => Outcome::NoMemory,
            VmallocError::NotVmalloc { .. } => Outcome::NotVmalloc,
            VmallocError::InsideArea { .. } => Outcome::InsideArea,
            VmallocError::DoubleFree { .. } => Outcome::DoubleFree,
            VmallocError::WrongKind { .. } => Outcome::WrongKind,
            VmallocError::Map(_) => Outcome::Map,
            VmallocError::ForeignCpu { .. } => Outcome::ForeignCpu,
            VmallocError::WrongCount { .. } => Outcome::WrongCount,
            VmallocError::InvalidPfn { .. } => Outcome::InvalidPfn,
            VmallocError::PageNotAllocated { .. } => Outcome::PageNotAllocated,
            VmallocError::IoSpace { .. } => Outcome::BadRequest,
        }
    }
}
impl From<PercpuError> for Outcome {
    fn from(e: PercpuError) -> Outcome {
        match e {
            PercpuError::BadRequest { .. } => Outcome::BadRequest,
            PercpuError::NoMemory(v) => match Outcome::from(v) {
                Outcome::NoVmapSpace => Outcome::NoVmapSpace,
                _ => Outcome::NoMemory,
            },
            PercpuError::NotPercpu { .. } => Outcome::NotPercpu,
        }
    }
}
impl From<mmlab_engine::arch::arm64::pgtable::PgtableError> for Outcome {
    fn from(e: mmlab_engine::arch::arm64::pgtable::PgtableError) -> Outcome {
        use mmlab_engine::arch::arm64::pgtable::PgtableError as P;
        match e {
            P::BreakBeforeMake { .. } => Outcome::BreakBeforeMake,
            P::ContAlignment { .. } => Outcome::ContAlignment,
            P::BadRange { .. } => Outcome::BadRange,
            P::NoMemory => Outcome::NoMemory,
            P::PartialHugeUnmap { .. } => Outcome::PartialHugeUnmap,
            P::OutsideAddressSpace { .. } => Outcome::OutsideAddressSpace,
            P::TableOutsideRam { .. } | P::SlotOutsideRam { .. } => Outcome::OutsideRam,
        }
    }
}
impl From<mmlab_engine::arch::arm64::pageattr::PageattrError> for Outcome {
    fn from(e: mmlab_engine::arch::arm64::pageattr::PageattrError) -> Outcome {
        use mmlab_engine::arch::arm64::pageattr::PageattrError as P;
        match e {
            P::BadRange { .. } => Outcome::BadRange,
            P::NotMapped { .. } => Outcome::NotMapped,
            P::NotPageGranular { .. } => Outcome::NotPageGranular,
            P::NoMemory => Outcome::NoMemory,
            P::Pgtable(p) => Outcome::from(p),
        }
    }
}
impl From<SysctlError> for Outcome {
    fn from(e: SysctlError) -> Outcome {
        match e {
            SysctlError::HighFraction(_) => Outcome::HighFraction,
            SysctlError::MinFreeKbytes(_) => Outcome::MinFreeKbytes,
            SysctlError::BootCpuBusy | SysctlError::AlreadyBooted | SysctlError::BootState(_) => Outcome::Panic,
        }
    }
}

impl From<mmlab_hugetlb::HugetlbError> for Outcome {
    fn from(e: mmlab_hugetlb::HugetlbError) -> Outcome {
        use mmlab_hugetlb::HugetlbError as H;
        match e {
            H::UnsupportedSize { .. } => Outcome::UnsupportedSize,
            H::GiganticOvercommit { .. } => Outcome::GiganticOvercommit,
            H::BadDemoteSize { .. } => Outcome::BadDemoteSize,
            H::NoMemory => Outcome::NoMemory,
            H::NotInUse { .. } => Outcome::NotInUse,
            H::Hvo(mmlab_vmemmap::HvoError::NotOptimized { .. }) => Outcome::NotOptimized,
            H::Hvo(mmlab_vmemmap::HvoError::AlreadyOptimized { .. }) => Outcome::AlreadyOptimized,
            H::Hvo(mmlab_vmemmap::HvoError::NotOptimizable { .. }) => Outcome::NotOptimizable,
            H::Hvo(mmlab_vmemmap::HvoError::NotHugetlb { .. }) => Outcome::NotHugetlb,
            // A bug below hugetlb: always a violation.
            H::Hvo(_) | H::Folio(_) | H::Free { .. } | H::Contig(_) => Outcome::Panic,
        }
    }
}
impl From<&mmlab_hugetlb::SysfsError> for Outcome {
    fn from(e: &mmlab_hugetlb::SysfsError) -> Outcome {
        use mmlab_hugetlb::SysfsError as S;
        use mmlab_hugetlb::sysfs::ValueError as V;
        match e {
            S::NoSuchFile { .. } => Outcome::NoSuchFile,
            S::ReadOnly { .. } => Outcome::ReadOnly,
            S::Value { why: V::Range, .. } => Outcome::ValueRange,
            S::Value { .. } => Outcome::BadValue,
            S::Hugetlb(h) => Outcome::from(*h),
        }
    }
}

/// Kinds of violation (the shrinker keeps the kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationKind {
    /// An outcome outside the oracle's set.
    UnexpectedOutcome,
    /// An outcome other than the op's `expect=`.
    ExpectMismatch,
    /// A refused call changed state.
    StateChanged,
    /// An order-0 allocation failed with a quarter of memory and twice the
    /// high watermark free, and no fault injection.
    SpuriousNoMemory,
    /// `PageAllocator::check_invariants` failed.
    Invariant,
    /// `Vmalloc::check` failed.
    VmallocCheck,
    /// A held page is not in the allocated state it was handed out in.
    HandleState,
    /// free + pcp + allocated != managed, or allocated != held + vmalloc +
    /// page tables.
    Conservation,
    /// After freeing everything, memory did not all come back.
    FinalState,
    /// The library panicked.
    Panic,
    /// A map_range/unmap_range left a translation other than expected.
    PageTable,
    /// A check installed by a test.
    Hook,
    /// hugetlb's counters disagree with its folios, or a write left the
    /// pool other than the kernel's `set_max_huge_pages` would.
    Hugetlb,
    /// A RAM page is not mapped once in the linear map at its
    /// `page_address()`, or not with the permissions set_memory_*() gave it.
    LinearMap,
}

impl ViolationKind {
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::UnexpectedOutcome => "unexpected-outcome",
            ViolationKind::ExpectMismatch => "expect-mismatch",
            ViolationKind::StateChanged => "state-changed",
            ViolationKind::SpuriousNoMemory => "spurious-nomemory",
            ViolationKind::Invariant => "invariant",
            ViolationKind::VmallocCheck => "vmalloc-check",
            ViolationKind::HandleState => "handle-state",
            ViolationKind::Conservation => "conservation",
            ViolationKind::FinalState => "final-state",
            ViolationKind::Panic => "panic",
            ViolationKind::PageTable => "page-table",
            ViolationKind::Hook => "hook",
            ViolationKind::Hugetlb => "hugetlb",
            ViolationKind::LinearMap => "linear-map",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A violation: what, at which op (index into the sequence; None for the
/// end-of-run checks), and the details.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    pub op_index: Option<usize>,
    /// The call name of the op, if any (part of the shrinker's "same kind").
    pub op_name: Option<&'static str>,
    pub message: String,
}

impl Violation {
    /// The key that a shrunk sequence must reproduce.
    pub fn signature(&self) -> (ViolationKind, Option<&'static str>) {
        let name = match self.kind {
            ViolationKind::UnexpectedOutcome
            | ViolationKind::ExpectMismatch
            | ViolationKind::StateChanged
            | ViolationKind::Panic
            | ViolationKind::PageTable
            | ViolationKind::SpuriousNoMemory => self.op_name,
            _ => None,
        };
        (self.kind, name)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.op_index {
            Some(i) => write!(f, "{} at op {}", self.kind, i + 1)?,
            None => write!(f, "{} at the end of the run", self.kind)?,
        }
        if let Some(n) = self.op_name {
            write!(f, " ({n})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Everything a refused call must leave alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub buddyinfo: [u64; 11],
    pub per_type: [[u64; mmlab_engine::mm::NR_PAGE_ORDERS]; mmlab_engine::mm::MIGRATE_TYPES],
    pub nr_free: i64,
    pub pcp: Vec<PagesetInfo>,
    pub events: VmCounts,
    pub vmalloc_busy_bytes: u64,
    pub vmalloc_lazy_pages: i64,
    pub vmalloc_free_bytes: u64,
    pub vmalloc_counts: mmlab_vmalloc::VmallocCounts,
    pub kvfree_pending: usize,
    pub percpu: PercpuCounts,
}

impl Snapshot {
    /// The fields that differ, for the report.
    pub fn diff(&self, after: &Snapshot) -> String {
        let mut d = Vec::new();
        macro_rules! cmp {
            ($($f:ident),*) => {$(
                if self.$f != after.$f {
                    d.push(format!("{}: {:?} -> {:?}", stringify!($f), self.$f, after.$f));
                }
            )*};
        }
        cmp!(buddyinfo, per_type, nr_free, pcp, vmalloc_busy_bytes, vmalloc_lazy_pages, vmalloc_free_bytes);
        cmp!(vmalloc_counts, kvfree_pending, percpu);
        if self.events != after.events {
            let delta: Vec<String> = after
                .events
                .delta(&self.events)
                .iter()
                .filter(|(_, v)| *v != 0)
                .map(|(k, v)| format!("{k}+{v}"))
                .collect();
            d.push(format!("vm events: {}", delta.join(" ")));
        }
        d.join("; ")
    }
}
