//! TLB maintenance (arch/arm64/include/asm/tlbflush.h): the TLBI
//! instructions, a per-CPU TLB model with a soft-MMU cache, and the kernel's
//! flush functions.
//!
//! # The algorithm
//!
//! arm64 keeps TLBs coherent by software: after changing a translation, the
//! kernel issues `dsb ishst` (so the table walkers see the new descriptor),
//! one or more broadcast TLBI instructions (each invalidates the matching
//! entries in every CPU's TLB of the inner shareable domain), `dsb ish` (wait
//! until every CPU has done so) and, for kernel mappings, `isb`. Which TLBIs
//! it issues is decided in `__flush_tlb_range_op()`: without FEAT_TLBIRANGE
//! one single-page op per page; with it, range ops that each cover
//! `(num + 1) << (5 * scale + 1)` pages, from scale 3 down to 0, and a single
//! op for a last odd page. Ranges of `MAX_DVM_OPS` (512) pages or more
//! without range ops, or more than `MAX_TLBI_RANGE_PAGES` (2^21) with them,
//! flush everything instead (`flush_tlb_all()` for the kernel,
//! `flush_tlb_mm()` for a user address space).
//!
//! The module has three parts, one job each:
//!
//! - [`tlbi`](mod@tlbi): the instructions as data: [`Tlbi`] with its operand
//!   encoding (bit for bit), [`TlbiKind`], and the per-CPU TLBI counters.
//!   It depends on nothing else in the crate.
//! - [`model`]: what a CPU caches: [`CpuTlb`], a set-associative TLB model
//!   of leaf entries ([`TlbEntry`]) and a lock-free soft-MMU cache.
//! - [`flush`]: executing TLBIs on a [`ArchCpu`](crate::kernel::cpu::Cpu) ([`tlbi()`],
//!   the broadcast to every CPU's model and to the secondary TLBs registered
//!   at boot) and the kernel's flush functions ([`flush_tlb_kernel_range`],
//!   [`flush_tlb_range`], ...), with the `#[must_use]` [`TlbFlush`] token.
//!
//! Every public item of the three is re-exported here, so `tlb::X` names it
//! whichever part it lives in.
//!
//! # Faithful, simplified, modelled
//!
//! - *Faithful*: the TLBI kinds, their operand encodings (bit for bit), the
//!   flush functions' barrier sequences, `__flush_tlb_range_op()`'s loop, the
//!   limits `MAX_DVM_OPS` and `MAX_TLBI_RANGE_PAGES` as in Linux 6.17
//!   (`__flush_tlb_range_limit_excess()`), invalidation semantics (by VA with
//!   an ASID also hits global entries; by ASID only non-global ones; the `aa`
//!   forms hit every ASID; range ops hit every entry overlapping the range).
//!   The model invalidates what the encoded operand says, so a VA outside the
//!   encodable bits is truncated as the hardware would.
//! - *Simplified*: there are no walk caches, so `vae`/`vaae` (all levels)
//!   behave as `vale`/`vaale` (last level); all model entries are leaves. No
//!   VMIDs, no EL2. The TTL hint is encoded but not used to narrow matching.
//!   No KPTI (no second `__tlbi_user` op), no LPA2 (its 64 KiB alignment
//!   step is skipped), no `ARM64_WORKAROUND_REPEAT_TLBI`. Overlapping entries
//!   of different sizes may coexist; lookup returns the smallest. One TLB
//!   level: the unified L2 TLB's geometry (sets and ways), without the 48-entry
//!   L1 TLBs in front of it; its replacement is bit-PLRU, since Arm does not
//!   document the N1's.
//! - *Modelled*: every TLBI's cost and the completion wait of the `dsb ish`
//!   after it (userspace can neither execute nor time them); see
//!   [`crate::arch::arm64::cost`].

pub mod flush;
pub mod model;
pub mod tlbi;

pub use flush::*;
pub use model::*;
pub use tlbi::*;

#[cfg(test)]
mod tests;
