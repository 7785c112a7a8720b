//! `Hvo`: HugeTLB Vmemmap Optimization on one machine, its switches,
//! counters and errors (mm/hugetlb_vmemmap.c; the algorithm is in the
//! crate docs).

use crate::config::HvoConfig;
use crate::folio::FolioError;
use mmlab_engine::Machine;
use mmlab_engine::arch::arm64::pgtable::{Desc, Level, PgtableError};
use mmlab_engine::sync::Mutex;
use mmlab_engine::{Pfn, PhysAddr};
use mmlab_pcp::PageAllocator;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

mmlab_engine::counter_snapshot! {
    /// HVO's events. The kernel keeps gauges (`nr_memmap_pages`,
    /// `nr_memmap_boot_pages` in /proc/vmstat, moved by
    /// `memmap_pages_add`/`memmap_boot_pages_add`); these count the moves.
    pub struct HvoCounts {
        /// mmlab's own, instrumented: vmemmap pages given back to the page
        /// allocator (each a `memmap_pages_add(-1)` or
        /// `memmap_boot_pages_add(-1)`).
        pub vmemmap_pages_freed: u64,
        /// mmlab's own, instrumented: of those, boot (memblock) memmap pages
        /// (`free_bootmem_page`, `nr_memmap_boot_pages` going down).
        pub vmemmap_boot_pages_freed: u64,
        /// mmlab's own, instrumented: vmemmap pages allocated (fresh heads
        /// and restores; `memmap_pages_add(+n)`).
        pub vmemmap_pages_allocated: u64,
        /// mmlab's own, instrumented: fresh head allocations that failed, so
        /// the old head page was kept.
        pub vmemmap_head_fallbacks: u64,
        /// mmlab's own, instrumented: PMD blocks split into PTE tables
        /// (`vmemmap_split_pmd`).
        pub vmemmap_pmd_splits: u64,
        /// mmlab's own, instrumented: `flush_tlb_kernel_range` after a split.
        pub flush_tlb_kernel_range_split: u64,
        /// mmlab's own, instrumented: `flush_tlb_kernel_range` after a remap.
        pub flush_tlb_kernel_range_remap: u64,
        /// mmlab's own, instrumented: `flush_tlb_all` of a batch.
        pub flush_tlb_all: u64,
        /// mmlab's own, instrumented: per-entry flushes of break-before-make
        /// ([`Arm64Hvo::PauseCpus`](crate::Arm64Hvo::PauseCpus)).
        pub flush_tlb_kernel_range_bbm: u64,
        /// mmlab's own, instrumented: `synchronize_rcu()` calls HVO made
        /// (the engine's `RcuCounts` holds their modelled time).
        pub synchronize_rcu: u64,
        /// mmlab's own, instrumented: folios optimized.
        pub folios_optimized: u64,
        /// mmlab's own, instrumented: folios restored.
        pub folios_restored: u64,
        /// mmlab's own, instrumented: optimizations that failed (ENOMEM).
        pub optimize_enomem: u64,
        /// mmlab's own, instrumented: restores that failed (ENOMEM).
        pub restore_enomem: u64,
        /// mmlab's own, instrumented: live entry changes the break-before-make
        /// checker refused ([`Arm64Hvo::Unsafe`](crate::Arm64Hvo::Unsafe)).
        pub bbm_violations: u64,
        /// mmlab's own, instrumented: `pause_remote_cpus()` calls.
        pub remote_cpu_pauses: u64,
    }
}

/// A live vmemmap entry changed without break-before-make (recorded in
/// [`Arm64Hvo::Unsafe`](crate::Arm64Hvo::Unsafe)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BbmViolation {
    /// The vmemmap address the entry maps.
    pub va: u64,
    /// The entry's level.
    pub level: Level,
    /// Where the entry is.
    pub entry: PhysAddr,
    /// The live descriptor.
    pub old: Desc,
    /// The one written over it.
    pub new: Desc,
}

/// The most violations kept for a report (the counter counts all).
pub const MAX_BBM_VIOLATIONS_KEPT: usize = 64;

/// Why an HVO operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HvoError {
    /// `-ENOMEM`: no page for a PTE table or for the restored memmap.
    NoMemory,
    /// A folio that is not an aligned range of RAM.
    Folio(FolioError),
    /// The vmemmap of `va` is not mapped (no PMD or PTE there).
    NotMapped {
        /// The vmemmap address.
        va: u64,
    },
    /// A vmemmap PTE did not point where the walk expected (the kernel's
    /// `BUG_ON` in `vmemmap_restore_pte`): a bug, reported instead of a crash.
    Corrupt {
        /// The vmemmap address.
        va: u64,
    },
    /// A table write failed for another reason than break-before-make.
    Pgtable(PgtableError),
    /// Giving a vmemmap page back to the allocator failed (a bug).
    Free {
        /// The page.
        pfn: Pfn,
    },
    /// A restore asked of a folio whose vmemmap is not optimized. The
    /// kernel's `hugetlb_vmemmap_restore_folio()` returns 0 for it; its
    /// callers (`__update_and_free_hugetlb_folio`, demote, dissolve) test
    /// the flag first. mmlab's own, for a caller that names the folio
    /// (hugetlb's checked entry, `Hugetlb::vmemmap_restore_folios`).
    NotOptimized {
        /// The head frame.
        pfn: Pfn,
    },
    /// An optimization asked of a folio already optimized
    /// (`vmemmap_should_optimize_folio()` says no; the kernel returns
    /// silently). mmlab's own, as [`HvoError::NotOptimized`].
    AlreadyOptimized {
        /// The head frame.
        pfn: Pfn,
    },
    /// A folio HVO cannot optimize: a size whose memmap fits in one page
    /// (`hugetlb_vmemmap_optimizable()` false: 64K), or HVO off
    /// (`vm.hugetlb_optimize_vmemmap=0`, or arm64 without it). The kernel
    /// returns silently. mmlab's own, as [`HvoError::NotOptimized`].
    NotOptimizable {
        /// The head frame.
        pfn: Pfn,
        /// The folio's order.
        order: u32,
    },
    /// A folio hugetlb does not hold (freed back to the page allocator, or
    /// never a huge page): no kernel path runs HVO on it. mmlab's own.
    NotHugetlb {
        /// The head frame.
        pfn: Pfn,
    },
}

impl std::fmt::Display for HvoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HvoError::NoMemory => write!(f, "Cannot allocate memory (ENOMEM)"),
            HvoError::Folio(e) => write!(f, "{e}"),
            HvoError::NotMapped { va } => write!(f, "vmemmap address {va:#x} is not mapped"),
            HvoError::Corrupt { va } => write!(f, "vmemmap PTE for {va:#x} does not map the reuse page"),
            HvoError::Pgtable(e) => write!(f, "{e}"),
            HvoError::Free { pfn } => write!(f, "vmemmap page {pfn} could not be freed"),
            HvoError::NotOptimized { pfn } => write!(f, "folio {pfn}'s vmemmap is not optimized"),
            HvoError::AlreadyOptimized { pfn } => write!(f, "folio {pfn}'s vmemmap is already optimized"),
            HvoError::NotOptimizable { pfn, order } => {
                write!(f, "folio {pfn} of order {order} cannot be vmemmap-optimized (size, or HVO off)")
            }
            HvoError::NotHugetlb { pfn } => write!(f, "folio {pfn} is not a hugetlb folio (freed?)"),
        }
    }
}
impl std::error::Error for HvoError {}

impl From<PgtableError> for HvoError {
    fn from(e: PgtableError) -> Self {
        match e {
            PgtableError::NoMemory => HvoError::NoMemory,
            e => HvoError::Pgtable(e),
        }
    }
}

impl From<FolioError> for HvoError {
    fn from(e: FolioError) -> Self {
        HvoError::Folio(e)
    }
}

/// HVO on one machine: its switches, its counters, and the state the
/// kernel keeps in globals (`hugetlb_optimize_vmemmap_key`,
/// `init_mm.page_table_lock`).
pub struct Hvo<'a, 'm> {
    pub(crate) pa: &'a PageAllocator<'m>,
    pub(crate) m: &'m Machine,
    pub(crate) cfg: HvoConfig,
    counts: Mutex<HvoCounts>,
    pub(crate) violations: Mutex<Vec<BbmViolation>>,
    /// `hugetlb_optimize_vmemmap_key`: folios optimized now.
    pub(crate) key: AtomicI64,
    /// `init_mm.page_table_lock`, taken around a PMD split.
    pub(crate) page_table_lock: Mutex<()>,
    /// The remote-CPU pause of [`Arm64Hvo::PauseCpus`](crate::Arm64Hvo::PauseCpus): an update holds it
    /// for writing; walkers on other CPUs hold it for reading around each
    /// struct-page access ([`Hvo::remote_cpu_section`]).
    pub(crate) pause: std::sync::RwLock<()>,
}

impl std::fmt::Debug for Hvo<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hvo").field("cfg", &self.cfg).field("optimized", &self.nr_optimized()).finish()
    }
}

impl<'a, 'm> Hvo<'a, 'm> {
    /// HVO over `pa`'s machine with the switches `cfg`.
    pub fn new(pa: &'a PageAllocator<'m>, cfg: HvoConfig) -> Hvo<'a, 'm> {
        Hvo {
            pa,
            m: pa.machine(),
            cfg,
            counts: Mutex::new(HvoCounts::default()),
            violations: Mutex::new(Vec::new()),
            key: AtomicI64::new(0),
            page_table_lock: Mutex::new(()),
            pause: std::sync::RwLock::new(()),
        }
    }
    /// The switches.
    pub fn config(&self) -> HvoConfig {
        self.cfg
    }
    /// The machine.
    pub fn machine(&self) -> &'m Machine {
        self.m
    }
    /// The page allocator.
    pub fn page_allocator(&self) -> &'a PageAllocator<'m> {
        self.pa
    }
    /// The counters so far.
    pub fn counts(&self) -> HvoCounts {
        *self.counts.lock()
    }
    /// The first [`MAX_BBM_VIOLATIONS_KEPT`] break-before-make violations.
    pub fn bbm_violations(&self) -> Vec<BbmViolation> {
        self.violations.lock().clone()
    }
    /// Folios optimized now (`hugetlb_optimize_vmemmap_key`'s count).
    pub fn nr_optimized(&self) -> i64 {
        self.key.load(Relaxed)
    }
    /// Run `f` as a remote CPU's struct-page access: an
    /// [`Arm64Hvo::PauseCpus`](crate::Arm64Hvo::PauseCpus) update waits until no such section runs, and
    /// none starts while it runs (`pause_remote_cpus()`'s effect).
    pub fn remote_cpu_section<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.pause.read().unwrap_or_else(|e| e.into_inner());
        f()
    }
    /// Add to the counters.
    pub(crate) fn count(&self, f: impl FnOnce(&mut HvoCounts)) {
        f(&mut self.counts.lock());
    }
}
