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
mod hvo;
mod optimize;
pub mod race;
mod remap;
pub mod walker;

pub use config::{Arm64Hvo, HvoConfig, RcuPolicy};
pub use folio::{Folio, FolioError};
pub use hvo::{BbmViolation, Hvo, HvoCounts, HvoError, MAX_BBM_VIOLATIONS_KEPT};
pub use remap::VmemmapFlags;
