//! The hugetlb vmemmap optimisation (HVO, mm/hugetlb_vmemmap.c) on the
//! emulated arm64 kernel tables.
//!
//! # The algorithm
//!
//! Every frame has a 64-byte struct page in the memmap, which the kernel
//! maps at `VMEMMAP_START` with its own tables: at boot with one 2 MiB PMD
//! block per 128 MiB section, or with 4 KiB pages for a partial section
//! (engine `mm::sparse_vmemmap`). A hugetlb folio of 2 MiB has 512 struct
//! pages, 8 pages of memmap, but apart from the first few they all say the
//! same thing ("tail of that head"). HVO therefore keeps the first vmemmap
//! page of a folio and points every other vmemmap PTE of the folio at it,
//! read-only, then frees the pages that backed them: 7 of 8 for 2 MiB,
//! 4095 of 4096 for 1 GiB ([`folio`] has the arithmetic).
//!
//! Optimizing one folio (`__hugetlb_vmemmap_optimize_folio`, Linux 6.12):
//!
//! 1. check it is eligible (not yet optimized, the sysctl on, the size
//!    optimizable; on arm64 the [`Arm64Hvo`] switch must allow it);
//! 2. if the flags say so, wait for an RCU grace period (the race with
//!    speculative PFN walkers, below);
//! 3. flag the folio optimized *before* remapping, so the head's copy
//!    carries the flag;
//! 4. `vmemmap_remap_free`: try to allocate a fresh page and copy the
//!    head's vmemmap page into it (so the old, contiguous memmap can be
//!    freed whole); walk the folio's vmemmap range, splitting a PMD block
//!    into a PTE table first where needed (`vmemmap_split_pmd`); point the
//!    head PTE read-write at the fresh page (or keep the old head page if no
//!    fresh one was had) and every tail PTE read-only at the same page,
//!    collecting the old pages on a list;
//! 5. flush the TLB for the range (unless `VMEMMAP_REMAP_NO_TLB_FLUSH`:
//!    a batch flushes everything once), and only then free the list
//!    (`free_vmemmap_page_list`: boot memmap through `free_reserved_page`,
//!    the rest through `__free_page`).
//!
//! A failure part-way (no page for a PTE table) walks the done part back.
//! Restoring (`vmemmap_remap_alloc`) allocates the pages back, copies the
//! shared page into each (resetting its first struct pages so they read
//! as plain tails), remaps them read-write and flushes; if the pages cannot
//! be had it fails with ENOMEM and the folio stays optimized.
//!
//! Batches (`hugetlb_vmemmap_optimize_folios`, `_restore_folios`) defer the
//! flushes: split all folios' PMDs with `SPLIT_NO_TLB_FLUSH`, one
//! `flush_tlb_all`, remap all with `REMAP_NO_TLB_FLUSH`, one `flush_tlb_all`,
//! free. The grace period of `VMEMMAP_SYNCHRONIZE_RCU` is taken once per
//! batch; [`RcuPolicy`] selects it by kernel release.
//!
//! # Struct-page accesses see the remap
//!
//! The engine's struct-page accessor reaches each struct page through a
//! cached translation of its vmemmap page. Every entry this crate writes is
//! followed by `Machine::note_vmemmap_change`; the next TLBI that covers the
//! address drops the accessor's cached translation (the engine's secondary
//! TLB hook), so from the flush on struct-page reads and writes follow the
//! new tables, and before it they still reach the old page, as a stale TLB
//! entry would. Writes that must respect the read-only tails go through the
//! MMU ([`walker`]): a write to an optimized folio's tail struct page is a
//! permission fault. [`race`] runs speculative PFN walkers on other CPUs
//! against a batch optimization, to show the race the 6.11 grace period
//! closes (a walker's fault is an event there, not a crash).
//!
//! # arm64 and break-before-make
//!
//! Every entry change goes through the engine's break-before-make checker
//! (`pgtable::set_pte`/`set_pmd`). The generic code rewrites live entries
//! with another output address, which the checker refuses; in
//! [`Arm64Hvo::Unsafe`] each refusal is recorded as a [`BbmViolation`] and
//! the write is then done anyway, as the kernel would. [`Arm64Hvo::PauseCpus`]
//! does each change as the 2024 RFC did: other CPUs paused, clear the entry,
//! flush it, write the new one; the checker never fires.
//!
//! # Fidelity
//!
//! | piece | label |
//! |-------|-------|
//! | arithmetic, flags, walk, split, remap, restore, rollback, flush and grace-period placement | faithful (Linux 6.12 mainline) |
//! | eligibility | simplified: no `memmap_on_memory` self-hosted check, no static key effects |
//! | arm64 modes | faithful to the RFC's sequence; `Unsafe` is instrumented |
//! | remote-CPU pause | simplified: a lock that walkers hold around each access |
//! | counters | instrumented (mmlab's own, except where a field names the kernel's) |
//!
//! The Debian `linux-source-6.12` (6.12.117) tarball carries a later
//! restructuring of the remap (an always-fresh head with no fallback, no
//! `reset_struct_pages`); the flags, the flush placement and the grace
//! periods are the same there.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod config;
pub mod folio;
mod optimize;
pub mod race;
mod remap;
pub mod walker;

pub use config::{Arm64Hvo, HvoConfig, RcuPolicy};
pub use folio::{Folio, FolioError};

use mmlab_engine::Machine;
use mmlab_engine::arch::arm64::pgtable::{Desc, Level, PgtableError};
use mmlab_engine::sync::Mutex;
use mmlab_engine::{Pfn, PhysAddr};
use mmlab_pcp::PageAllocator;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

bitflags::bitflags! {
    /// `vmemmap_remap_walk.flags`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct VmemmapFlags: u32 {
        /// `VMEMMAP_SPLIT_NO_TLB_FLUSH`: no flush after a PMD split.
        const SPLIT_NO_TLB_FLUSH = 1 << 0;
        /// `VMEMMAP_REMAP_NO_TLB_FLUSH`: no flush after remapping PTEs.
        const REMAP_NO_TLB_FLUSH = 1 << 1;
        /// `VMEMMAP_SYNCHRONIZE_RCU`: a grace period before remapping.
        const SYNCHRONIZE_RCU = 1 << 2;
    }
}

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
        /// ([`Arm64Hvo::PauseCpus`]).
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
        /// checker refused ([`Arm64Hvo::Unsafe`]).
        pub bbm_violations: u64,
        /// mmlab's own, instrumented: `pause_remote_cpus()` calls.
        pub remote_cpu_pauses: u64,
    }
}

/// A live vmemmap entry changed without break-before-make (recorded in
/// [`Arm64Hvo::Unsafe`]).
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
    pa: &'a PageAllocator<'m>,
    m: &'m Machine,
    cfg: HvoConfig,
    counts: Mutex<HvoCounts>,
    violations: Mutex<Vec<BbmViolation>>,
    /// `hugetlb_optimize_vmemmap_key`: folios optimized now.
    key: AtomicI64,
    /// `init_mm.page_table_lock`, taken around a PMD split.
    page_table_lock: Mutex<()>,
    /// The remote-CPU pause of [`Arm64Hvo::PauseCpus`]: an update holds it
    /// for writing; walkers on other CPUs hold it for reading around each
    /// struct-page access ([`Hvo::remote_cpu_section`]).
    pause: std::sync::RwLock<()>,
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
    /// [`Arm64Hvo::PauseCpus`] update waits until no such section runs, and
    /// none starts while it runs (`pause_remote_cpus()`'s effect).
    pub fn remote_cpu_section<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.pause.read().unwrap_or_else(|e| e.into_inner());
        f()
    }
    /// Add to the counters.
    fn count(&self, f: impl FnOnce(&mut HvoCounts)) {
        f(&mut self.counts.lock());
    }
}
