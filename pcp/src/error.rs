//! Why an allocation, a free or a setting failed.

use crate::sizing::{MIN_FREE_KBYTES_MAX, MIN_PERCPU_PAGELIST_HIGH_FRACTION};
use mmlab_engine::mm::MAX_PAGE_ORDER;
use mmlab_engine::{Gfp, Pfn};

/// Why an allocation returned no page (the kernel returns NULL for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// `order > MAX_PAGE_ORDER`.
    OrderTooLarge {
        /// The order given.
        order: u32,
    },
    /// No zone passed its watermark or no block was found, after the slow path.
    NoMemory {
        /// The order asked for.
        order: u32,
        /// The GFP flags of the request.
        gfp: Gfp,
    },
    /// The CPU handle belongs to another machine.
    ForeignCpu {
        /// The handle's CPU id.
        cpu: usize,
    },
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocError::OrderTooLarge { order } => {
                write!(f, "order {order} is above MAX_PAGE_ORDER ({MAX_PAGE_ORDER})")
            }
            AllocError::NoMemory { order, gfp } => {
                write!(f, "page allocation failure: order:{order}, mode:{:#x}({gfp})", gfp.bits())
            }
            AllocError::ForeignCpu { cpu } => write!(f, "cpu {cpu} is a handle of another machine"),
        }
    }
}
impl std::error::Error for AllocError {}

/// Why a free was refused; nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeError {
    /// `order > MAX_PAGE_ORDER`.
    OrderTooLarge {
        /// The order given.
        order: u32,
    },
    /// The frame is not RAM of this machine.
    InvalidPfn {
        /// The frame.
        pfn: Pfn,
    },
    /// The frame heads a free block (in the buddy lists or on a pcp list):
    /// it was freed already.
    DoubleFree {
        /// The frame.
        pfn: Pfn,
    },
    /// The frame is not the first page of a live allocation: never handed
    /// out, a tail page of one, or freed already and since merged into a
    /// larger free block (then it no longer heads a block of its own).
    NotAllocated {
        /// The frame.
        pfn: Pfn,
    },
    /// Freed with another order than it was allocated with.
    WrongOrder {
        /// The frame.
        pfn: Pfn,
        /// The order it was allocated with.
        allocated: u32,
        /// The order given to the free.
        freed: u32,
    },
    /// The frame is reserved (memblock) and was never the allocator's.
    Reserved {
        /// The frame.
        pfn: Pfn,
    },
    /// The CPU handle belongs to another machine.
    ForeignCpu {
        /// The handle's CPU id.
        cpu: usize,
    },
}

impl std::fmt::Display for FreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FreeError::OrderTooLarge { order } => write!(f, "free at order {order} above MAX_PAGE_ORDER"),
            FreeError::InvalidPfn { pfn } => write!(f, "pfn {pfn} is not RAM"),
            FreeError::DoubleFree { pfn } => write!(f, "double free of pfn {pfn}"),
            FreeError::NotAllocated { pfn } => write!(f, "pfn {pfn} was not handed out by the allocator"),
            FreeError::WrongOrder { pfn, allocated, freed } => {
                write!(f, "pfn {pfn} allocated at order {allocated}, freed at order {freed}")
            }
            FreeError::Reserved { pfn } => write!(f, "pfn {pfn} is reserved"),
            FreeError::ForeignCpu { cpu } => write!(f, "cpu {cpu} is a handle of another machine"),
        }
    }
}
impl std::error::Error for FreeError {}

/// Errors changing a setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SysctlError {
    /// `percpu_pagelist_high_fraction` must be 0 or ≥ 8.
    HighFraction(u32),
    /// Bringing the allocator up runs on CPU 0, whose handle is taken.
    BootCpuBusy,
    /// `vm.min_free_kbytes` is an int sysctl with a floor of 0
    /// (`proc_dointvec_minmax`): above `INT_MAX` the write is refused.
    MinFreeKbytes(u64),
    /// A page allocator was already brought up on this machine: its
    /// memblock memory was handed out once (`memblock_free_all`), and a
    /// second allocator would free the same frames into a second zone.
    AlreadyBooted,
    /// The machine's CMA area could not be activated, or a range the end
    /// of boot gives back could not be freed (a bug in the boot state: its
    /// pages must be reserved RAM).
    BootState(FreeError),
}

impl std::fmt::Display for SysctlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SysctlError::HighFraction(v) => write!(
                f,
                "percpu_pagelist_high_fraction must be 0 or at least {MIN_PERCPU_PAGELIST_HIGH_FRACTION}, got {v}"
            ),
            SysctlError::MinFreeKbytes(v) => {
                write!(f, "min_free_kbytes must be in [0, {MIN_FREE_KBYTES_MAX}], got {v}")
            }
            SysctlError::BootCpuBusy => write!(f, "CPU 0 is held by another handle during allocator boot"),
            SysctlError::BootState(e) => write!(f, "the boot state's CMA area or freed ranges: {e}"),
            SysctlError::AlreadyBooted => {
                write!(f, "a page allocator was already booted on this machine (memblock_free_all runs once)")
            }
        }
    }
}
impl std::error::Error for SysctlError {}

/// Why `cma_alloc()` or `cma_release()` failed; nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmaError {
    /// The machine has no CMA area (a bare or small machine).
    NoArea,
    /// `count` 0 or larger than the area.
    BadCount {
        /// The pages asked for.
        count: u64,
    },
    /// No free aligned range of `count` pages (`cma_alloc_fail`).
    NoRange {
        /// The pages asked for.
        count: u64,
    },
    /// `cma_release()` of pages the area did not hand out.
    NotAllocated {
        /// The first frame given.
        pfn: Pfn,
        /// The pages given.
        count: u64,
    },
    /// The CPU handle belongs to another machine.
    ForeignCpu {
        /// The handle's CPU id.
        cpu: usize,
    },
}

impl std::fmt::Display for CmaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmaError::NoArea => write!(f, "cma: the machine has no CMA area"),
            CmaError::BadCount { count } => write!(f, "cma: bad page count {count}"),
            CmaError::NoRange { count } => write!(f, "cma: no free range of {count} pages"),
            CmaError::NotAllocated { pfn, count } => {
                write!(f, "cma: {count} pages at pfn {:#x} were not allocated from the area", pfn.0)
            }
            CmaError::ForeignCpu { cpu } => write!(f, "cpu {cpu} is a handle of another machine"),
        }
    }
}
impl std::error::Error for CmaError {}
