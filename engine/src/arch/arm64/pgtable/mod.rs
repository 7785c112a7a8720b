//! arm64 translation tables in emulated RAM, written with the kernel's
//! barrier rules (arch/arm64/include/asm/pgtable.h, arch/arm64/mm/mmu.c).
//!
//! # Layout
//!
//! 4 KiB granule, 48-bit VA, four levels (pgd, pud, pmd, pte; p4d folded).
//! Every table is one page of RAM holding 512 eight-byte descriptors
//! ([`desc`]); table pages come from a [`PgtableAlloc`]: memblock during boot
//! (`early_pgtable_alloc`), the page allocator afterwards. Descriptors are
//! read and written with single 64-bit atomic accesses, like `READ_ONCE` /
//! `WRITE_ONCE`. An [`AddressSpace`] is a pgd and an ASID: the kernel's
//! (`swapper_pg_dir`, global entries) or a user one.
//!
//! # Barriers
//!
//! A table walker may read a descriptor as soon as it is written, but a
//! store is only guaranteed visible to the walker after `dsb ishst`, and
//! this CPU may already hold a stale "invalid" translation that only `isb`
//! discards. So writing a *valid kernel* entry is followed by `dsb ishst;
//! isb` ([`set_pte`], [`set_pmd`], [`set_pud`], [`set_pgd`]); clearing an
//! entry issues none (the TLB flush that must follow does the work); a run
//! written by [`set_ptes`] issues one pair after the last entry. Since Linux
//! 6.16, inside a lazy-MMU section ([`arch_enter_lazy_mmu_mode`] ..
//! [`arch_leave_lazy_mmu_mode`]) the pair is only marked pending and issued
//! once when the section ends; the switch `lazy_mmu_barrier_batching` in the
//! machine configuration turns that off (the behaviour before 6.16). As in
//! the kernel, sections nest without counting: the first leave flushes and
//! ends batching for the rest of the outer section.
//!
//! # Break-before-make
//!
//! Every write checks `pgattr_change_is_safe()` against the live entry; an
//! unsafe live change (another output address, touching a contiguous entry,
//! nG to global, a memory-type change) is returned as
//! [`PgtableError::BreakBeforeMake`] and never written. Contiguous runs must
//! have their VA and PA aligned to the run (64 KiB for PTEs, 32 MiB for
//! PMDs).
//!
//! Fidelity: faithful for formats, write order and barrier counts;
//! simplified in that TLB maintenance is the caller's, through the
//! `#[must_use]` [`crate::arch::arm64::tlb::TlbFlush`] that every change to a live
//! mapping returns.
//!
//! # Files
//!
//! This file holds the types (address spaces, errors, the table allocator
//! interface), the single-entry writes with their barrier and lazy-MMU
//! rules, and the break-before-make checks; [`desc`] the descriptor format;
//! [`map`] whole-range mapping and unmapping; [`walk`](mod@walk) read-only walks and
//! table statistics; [`mmu`] memory access through the TLB model.

pub mod desc;
pub mod entry;
pub mod map;
pub mod mmu;
pub mod ptdump;
pub mod walk;

pub use desc::{Desc, DescKind, Level, PgProt};
pub use entry::*;
pub use map::*;
pub use walk::*;
