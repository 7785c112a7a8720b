//! TLB maintenance: the TLBI instructions, a per-CPU TLB model with a
//! soft-MMU cache, and the kernel's flush functions (`asm/tlbflush.h`).
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
//! Here, [`tlbi`] executes one [`Tlbi`] on a [`Cpu`]: it counts the op by
//! [`TlbiKind`] on that CPU, adds its modelled cost from the machine's
//! [`CostProfile`](crate::cost::CostProfile), and invalidates the matching
//! entries in every CPU's [`CpuTlb`] (the broadcast). [`tlbi_sync_s1ish`] is
//! the `dsb ish` that follows; the first one after outstanding TLBIs adds the
//! modelled completion wait. The flush functions ([`flush_tlb_all`],
//! [`flush_tlb_kernel_range`], [`flush_tlb_range`], [`flush_tlb_mm`],
//! [`flush_tlb_page`], [`flush_tlb_kernel_pgtable`]) issue exactly the
//! barriers and TLBIs of the kernel's, with the barriers going through the
//! CPU's barrier backend. [`TlbFlush`] is a `#[must_use]` token that page-table
//! changes hand out so that the maintenance they owe cannot be forgotten.
//!
//! Each CPU's [`CpuTlb`] holds:
//!
//! - **a TLB model**: up to `tlb_entries` leaf entries, each mapping one
//!   naturally aligned VA range of 4 KiB, 64 KiB (contiguous PTEs), 2 MiB
//!   (PMD block), 32 MiB (contiguous PMDs) or 1 GiB (PUD block) to a PA, with
//!   permissions and either the global tag or an ASID. A hash index keyed by
//!   (size class, VA >> size shift, tag) makes a lookup a probe per size class
//!   that holds entries. Replacement is CLOCK (second chance): a hit sets the
//!   entry's referenced bit; when the TLB is full a hand sweeps the slots in
//!   order, clearing referenced bits, and evicts the first unreferenced entry.
//!   It is deterministic: the same fills and lookups evict the same entries.
//! - **a soft-MMU cache** in the manner of QEMU's softmmu TLB: 256 direct-mapped
//!   slots indexed by `(va >> 12) & 255`, each a 4 KiB translation (tag word
//!   and data word, two `AtomicU64`). [`fast_lookup`] is a load, two compares,
//!   a load and a mask, without a lock.
//! - the CPU's TLBI counters and modelled TLBI time.
//!
//! ## Concurrency
//!
//! The model sits behind a per-CPU mutex. Its owner is the only one that
//! fills it; a TLBI issued on any CPU takes every CPU's lock in turn to
//! invalidate, which is the broadcast. The soft-MMU slots are written only
//! under that same lock (fills by the owner, invalidations by anyone), and
//! read by the owner only ([`fast_lookup`] and [`fast_fill`] take the owner's
//! [`Cpu`] handle, which is unique and not `Sync`). A fill writes the tag
//! word invalid, then the data word, then the valid tag; a remote
//! invalidation only writes the tag word to invalid. Since the data word is
//! never written by another thread than the reader, the reader cannot see a
//! valid tag with foreign data, and plain relaxed loads suffice: a hit is two
//! loads, two compares and a mask (not yet benchmarked; an uncontended lock
//! round trip alone would use up most of a 5 ns budget, hence no lock). An invalidation that has happened before
//! the owner's lookup (in the Rust memory model sense, e.g. the issuer
//! released a lock the owner then took) is always seen.
//!
//! A translation found by a walk must not be cached after a TLBI that raced
//! with the walk. Every invalidation bumps the CPU's [`CpuTlb::generation`];
//! a filler reads it before walking and passes it to
//! [`CpuTlb::fill_checked`] / [`fast_fill`], which refuse under the lock if it
//! moved. This stands in for the architecture's guarantee that a walk started
//! before a TLBI completed cannot leave an entry behind.
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
//!   of different sizes may coexist; lookup returns the smallest.
//! - *Modelled*: every TLBI's cost and the completion wait of the `dsb ish`
//!   after it (userspace can neither execute nor time them); see
//!   [`crate::cost`].

use crate::barrier::{ish, ishst};
use crate::cpu::Cpu;
use crate::sync::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::{Add, AddAssign};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

const PAGE_SHIFT: u32 = crate::addr::PAGE_SHIFT;
const PAGE_SIZE: u64 = crate::addr::PAGE_SIZE;

/// `MAX_DVM_OPS` (= `PTRS_PER_PTE`): without range ops, ranges of this many
/// strides or more are flushed whole.
pub const MAX_DVM_OPS: u64 = 512;

/// `__TLBI_RANGE_PAGES(num, scale)`: pages one range op covers.
#[inline]
pub const fn tlbi_range_pages(num: u64, scale: u32) -> u64 {
    (num + 1) << (5 * scale + 1)
}

/// `MAX_TLBI_RANGE_PAGES` = `__TLBI_RANGE_PAGES(31, 3)` = 2^21 pages (8 GiB).
pub const MAX_TLBI_RANGE_PAGES: u64 = tlbi_range_pages(31, 3);

/// TTL value for "level unknown" (the kernel's `TLBI_TTL_UNKNOWN` encodes as 0).
pub const TLBI_TTL_UNKNOWN: u8 = 0;

/// TG field for the 4 KiB granule.
const TG_4K: u64 = 1;
const VPN44_MASK: u64 = (1 << 44) - 1;
const BADDR_MASK: u64 = (1 << 37) - 1;

/// Sign-extend `x` from bit `bit`.
#[inline]
const fn sign_extend(x: u64, bit: u32) -> u64 {
    let s = 63 - bit;
    (((x << s) as i64) >> s) as u64
}

// ---------------------------------------------------------------------------
// TLBI operations
// ---------------------------------------------------------------------------

/// A TLBI instruction with its operand, as the kernel issues them (all
/// EL1, inner shareable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tlbi {
    /// By VA and ASID, last level only (`tlbi vale1is`).
    Vale1is { va: u64, asid: u16 },
    /// By VA and ASID, all levels (`tlbi vae1is`).
    Vae1is { va: u64, asid: u16 },
    /// By VA, all ASIDs, last level only (`tlbi vaale1is`).
    Vaale1is { va: u64 },
    /// By VA, all ASIDs, all levels (`tlbi vaae1is`).
    Vaae1is { va: u64 },
    /// Everything at EL1&0 (`tlbi vmalle1is`).
    Vmalle1is,
    /// Every non-global entry of one ASID (`tlbi aside1is`).
    Aside1is { asid: u16 },
    /// Range, all ASIDs, last level (`tlbi rvaale1is`).
    Rvaale1is { base_va: u64, scale: u8, num: u8, ttl: u8 },
    /// Range, one ASID, last level (`tlbi rvale1is`).
    Rvale1is { base_va: u64, asid: u16, scale: u8, num: u8, ttl: u8 },
    /// Range, one ASID, all levels (`tlbi rvae1is`), issued by user
    /// `__flush_tlb_range()` when `last_level` is false.
    Rvae1is { base_va: u64, asid: u16, scale: u8, num: u8, ttl: u8 },
}

macro_rules! tlbi_kinds {
    ($($id:ident = $name:literal,)*) => {
        /// The kind of a [`Tlbi`], for counting.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(usize)]
        pub enum TlbiKind { $($id,)* }
        impl TlbiKind {
            /// Every kind, in report order.
            pub const ALL: [TlbiKind; NR_TLBI_KINDS] = [$(TlbiKind::$id,)*];
            /// The mnemonic ("vaale1is", ...).
            pub const fn name(self) -> &'static str {
                match self { $(TlbiKind::$id => $name,)* }
            }
        }
    };
}

/// Number of [`TlbiKind`]s.
pub const NR_TLBI_KINDS: usize = 9;

tlbi_kinds! {
    Vale1is = "vale1is",
    Vae1is = "vae1is",
    Vaale1is = "vaale1is",
    Vaae1is = "vaae1is",
    Vmalle1is = "vmalle1is",
    Aside1is = "aside1is",
    Rvale1is = "rvale1is",
    Rvae1is = "rvae1is",
    Rvaale1is = "rvaale1is",
}

impl fmt::Display for TlbiKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which entries an invalidation hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// Everything.
    All,
    /// Non-global entries of this ASID.
    Asid(u16),
    /// Entries overlapping `[start, last]`: of any ASID (`asid` None), or
    /// global and of this ASID.
    Range { start: u64, last: u64, asid: Option<u16> },
}

/// The non-range operand: `(VA >> 12)[43:0] | ASID << 48` (`__TLBI_VADDR`).
#[inline]
const fn vaddr_operand(va: u64, asid: u16) -> u64 {
    ((va >> PAGE_SHIFT) & VPN44_MASK) | (asid as u64) << 48
}

/// The range operand (`__TLBI_VADDR_RANGE`), 4 KiB granule, no LPA2.
#[inline]
const fn range_operand(base_va: u64, asid: u16, scale: u8, num: u8, ttl: u8) -> u64 {
    ((base_va >> PAGE_SHIFT) & BADDR_MASK)
        | ((ttl as u64 & 3) << 37)
        | ((num as u64 & 31) << 39)
        | ((scale as u64 & 3) << 44)
        | (TG_4K << 46)
        | (asid as u64) << 48
}

impl Tlbi {
    /// Its kind.
    pub const fn kind(&self) -> TlbiKind {
        match self {
            Tlbi::Vale1is { .. } => TlbiKind::Vale1is,
            Tlbi::Vae1is { .. } => TlbiKind::Vae1is,
            Tlbi::Vaale1is { .. } => TlbiKind::Vaale1is,
            Tlbi::Vaae1is { .. } => TlbiKind::Vaae1is,
            Tlbi::Vmalle1is => TlbiKind::Vmalle1is,
            Tlbi::Aside1is { .. } => TlbiKind::Aside1is,
            Tlbi::Rvale1is { .. } => TlbiKind::Rvale1is,
            Tlbi::Rvae1is { .. } => TlbiKind::Rvae1is,
            Tlbi::Rvaale1is { .. } => TlbiKind::Rvaale1is,
        }
    }

    /// The 64-bit register operand the instruction takes (0 for
    /// `vmalle1is`, which takes none). Mirrors `__TLBI_VADDR()` and
    /// `__TLBI_VADDR_RANGE()` (4 KiB granule, no LPA2); out-of-range
    /// `scale`/`num`/`ttl` are masked to their field widths.
    pub const fn operand(&self) -> u64 {
        match *self {
            Tlbi::Vale1is { va, asid } | Tlbi::Vae1is { va, asid } => vaddr_operand(va, asid),
            Tlbi::Vaale1is { va } | Tlbi::Vaae1is { va } => vaddr_operand(va, 0),
            Tlbi::Vmalle1is => 0,
            Tlbi::Aside1is { asid } => vaddr_operand(0, asid),
            Tlbi::Rvaale1is { base_va, scale, num, ttl } => range_operand(base_va, 0, scale, num, ttl),
            Tlbi::Rvale1is { base_va, asid, scale, num, ttl } | Tlbi::Rvae1is { base_va, asid, scale, num, ttl } => {
                range_operand(base_va, asid, scale, num, ttl)
            }
        }
    }

    /// The op of `kind` whose operand is `operand`: the inverse of
    /// [`operand`](Self::operand) for canonical addresses. The VA is
    /// rebuilt from `VA[55:12]` (single ops) or `VA[48:12]` (range ops) by
    /// sign extension, as a 48-bit-VA CPU sees it.
    pub const fn from_operand(kind: TlbiKind, operand: u64) -> Tlbi {
        let va = sign_extend((operand & VPN44_MASK) << PAGE_SHIFT, 55);
        let asid = (operand >> 48) as u16;
        let base_va = sign_extend((operand & BADDR_MASK) << PAGE_SHIFT, 48);
        let ttl = ((operand >> 37) & 3) as u8;
        let num = ((operand >> 39) & 31) as u8;
        let scale = ((operand >> 44) & 3) as u8;
        match kind {
            TlbiKind::Vale1is => Tlbi::Vale1is { va, asid },
            TlbiKind::Vae1is => Tlbi::Vae1is { va, asid },
            TlbiKind::Vaale1is => Tlbi::Vaale1is { va },
            TlbiKind::Vaae1is => Tlbi::Vaae1is { va },
            TlbiKind::Vmalle1is => Tlbi::Vmalle1is,
            TlbiKind::Aside1is => Tlbi::Aside1is { asid },
            TlbiKind::Rvaale1is => Tlbi::Rvaale1is { base_va, scale, num, ttl },
            TlbiKind::Rvale1is => Tlbi::Rvale1is { base_va, asid, scale, num, ttl },
            TlbiKind::Rvae1is => Tlbi::Rvae1is { base_va, asid, scale, num, ttl },
        }
    }

    /// 4 KiB pages the op covers: `(num + 1) << (5 * scale + 1)` for range
    /// ops, 1 for single-VA ops, `None` for `vmalle1is` and `aside1is`
    /// (not address ranges).
    pub const fn pages_covered(&self) -> Option<u64> {
        match *self {
            Tlbi::Rvaale1is { scale, num, .. }
            | Tlbi::Rvale1is { scale, num, .. }
            | Tlbi::Rvae1is { scale, num, .. } => Some(tlbi_range_pages(num as u64 & 31, scale as u32 & 3)),
            Tlbi::Vale1is { .. } | Tlbi::Vae1is { .. } | Tlbi::Vaale1is { .. } | Tlbi::Vaae1is { .. } => Some(1),
            Tlbi::Vmalle1is | Tlbi::Aside1is { .. } => None,
        }
    }

    /// True for the forms that also invalidate walk caches (`vae`, `vaae`,
    /// `rvae`, and the ASID and all forms).
    pub const fn all_levels(&self) -> bool {
        !matches!(self, Tlbi::Vale1is { .. } | Tlbi::Vaale1is { .. } | Tlbi::Rvale1is { .. } | Tlbi::Rvaale1is { .. })
    }

    /// Which entries the op invalidates, from its encoded operand.
    fn scope(&self) -> Scope {
        let op = Tlbi::from_operand(self.kind(), self.operand());
        let pages = op.pages_covered().unwrap_or(0);
        let range = |va: u64, asid| {
            let start = va & !(PAGE_SIZE - 1);
            Scope::Range { start, last: start.saturating_add((pages << PAGE_SHIFT) - 1), asid }
        };
        match op {
            Tlbi::Vmalle1is => Scope::All,
            Tlbi::Aside1is { asid } => Scope::Asid(asid),
            Tlbi::Vale1is { va, asid } | Tlbi::Vae1is { va, asid } => range(va, Some(asid)),
            Tlbi::Vaale1is { va } | Tlbi::Vaae1is { va } => range(va, None),
            Tlbi::Rvaale1is { base_va, .. } => range(base_va, None),
            Tlbi::Rvale1is { base_va, asid, .. } | Tlbi::Rvae1is { base_va, asid, .. } => range(base_va, Some(asid)),
        }
    }
}

impl fmt::Display for Tlbi {
    /// `tlbi vaale1is, 0x...` as it would be disassembled.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tlbi::Vmalle1is => write!(f, "tlbi vmalle1is"),
            _ => write!(f, "tlbi {}, {:#x}", self.kind(), self.operand()),
        }
    }
}

// ---------------------------------------------------------------------------
// TLBI counters
// ---------------------------------------------------------------------------

/// TLBI counts by kind and modelled TLBI time of one CPU, counted on the
/// issuing CPU. Single writer (the CPU's thread, through its [`Cpu`]
/// handle), so each bump is a relaxed load and store, as in
/// [`crate::vmstat`].
#[derive(Debug, Default)]
pub struct TlbiStats {
    counts: [AtomicU64; NR_TLBI_KINDS],
    modelled_ns: AtomicU64,
    /// TLBIs issued since the last `dsb ish`.
    pending: AtomicU64,
}

#[inline(always)]
fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Relaxed).wrapping_add(by), Relaxed);
}

impl TlbiStats {
    /// A plain copy.
    pub fn snapshot(&self) -> TlbiCounts {
        TlbiCounts {
            counts: std::array::from_fn(|i| self.counts[i].load(Relaxed)),
            modelled_ns: self.modelled_ns.load(Relaxed),
        }
    }
}

/// A plain copy of [`TlbiStats`] (one CPU's or a sum).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbiCounts {
    /// Count per kind, indexed by `TlbiKind as usize`.
    pub counts: [u64; NR_TLBI_KINDS],
    /// Modelled TLBI time in ns: issue costs plus completion waits. Kept
    /// apart from the barrier backend's modelled time.
    pub modelled_ns: u64,
}

impl TlbiCounts {
    /// Count of one kind.
    pub fn get(&self, kind: TlbiKind) -> u64 {
        self.counts[kind as usize]
    }
    /// TLBIs of all kinds.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// `self - earlier`, for the counts of one operation.
    pub fn delta(&self, earlier: &TlbiCounts) -> TlbiCounts {
        TlbiCounts {
            counts: std::array::from_fn(|i| self.counts[i].wrapping_sub(earlier.counts[i])),
            modelled_ns: self.modelled_ns.wrapping_sub(earlier.modelled_ns),
        }
    }
    /// The non-zero counts as (kind, count), in [`TlbiKind::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (TlbiKind, u64)> + use<> {
        let c = *self;
        TlbiKind::ALL.into_iter().map(move |k| (k, c.get(k))).filter(|&(_, n)| n != 0)
    }
}

impl Add for TlbiCounts {
    type Output = TlbiCounts;
    fn add(mut self, rhs: TlbiCounts) -> TlbiCounts {
        self += rhs;
        self
    }
}

impl AddAssign for TlbiCounts {
    fn add_assign(&mut self, rhs: TlbiCounts) {
        for (a, b) in self.counts.iter_mut().zip(rhs.counts) {
            *a += b;
        }
        self.modelled_ns += rhs.modelled_ns;
    }
}

impl fmt::Display for TlbiCounts {
    /// `tlbi(vaale1is)  3` per non-zero kind, then `tlbi_modelled_ns  N`
    /// if any time was modelled.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, n) in self.iter() {
            writeln!(f, "{:<15}  {n}", format!("tlbi({k})"))?;
        }
        if self.modelled_ns != 0 {
            writeln!(f, "tlbi_modelled_ns  {}", self.modelled_ns)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// TLB entries
// ---------------------------------------------------------------------------

/// log2 of the entry sizes the model holds: 4 KiB page, 64 KiB contiguous
/// PTEs, 2 MiB block, 32 MiB contiguous PMDs, 1 GiB block.
pub const TLB_SIZE_SHIFTS: [u32; 5] = [12, 16, 21, 25, 30];
const NR_CLASSES: usize = TLB_SIZE_SHIFTS.len();

fn size_class(size: u64) -> Option<usize> {
    TLB_SIZE_SHIFTS.iter().position(|&s| 1u64 << s == size)
}

/// Permissions cached with a translation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TlbPerms {
    /// Writable (`AP[2]` clear).
    pub writable: bool,
    /// EL0 accessible (`AP[1]`).
    pub user: bool,
    /// Executable at the level it maps for.
    pub exec: bool,
}

/// Why a [`TlbEntry`] could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbEntryError {
    /// Not one of 4K, 64K, 2M, 32M, 1G.
    BadSize(u64),
    /// VA or PA not aligned to the size.
    Misaligned { va: u64, pa: u64, size: u64 },
}

impl fmt::Display for TlbEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlbEntryError::BadSize(s) => write!(f, "TLB entry size {s:#x} is not 4K, 64K, 2M, 32M or 1G"),
            TlbEntryError::Misaligned { va, pa, size } => {
                write!(f, "TLB entry va {va:#x} pa {pa:#x} not aligned to its size {size:#x}")
            }
        }
    }
}
impl std::error::Error for TlbEntryError {}

/// One cached translation: a naturally aligned VA range of one size to a PA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlbEntry {
    va: u64,
    pa: u64,
    class: u8,
    perms: TlbPerms,
    asid: Option<u16>,
}

/// Tag of global entries in the index (ASIDs are below it).
const GLOBAL_TAG: u32 = 1 << 16;

impl TlbEntry {
    /// An entry mapping `[va, va + size)` to `[pa, pa + size)`; `asid` None
    /// for a global (nG clear) mapping.
    pub fn new(va: u64, pa: u64, size: u64, perms: TlbPerms, asid: Option<u16>) -> Result<TlbEntry, TlbEntryError> {
        let class = size_class(size).ok_or(TlbEntryError::BadSize(size))?;
        if (va | pa) & (size - 1) != 0 {
            return Err(TlbEntryError::Misaligned { va, pa, size });
        }
        Ok(TlbEntry { va, pa, class: class as u8, perms, asid })
    }
    /// First VA mapped.
    pub fn va(&self) -> u64 {
        self.va
    }
    /// First PA mapped.
    pub fn pa(&self) -> u64 {
        self.pa
    }
    /// log2 of the size.
    pub fn shift(&self) -> u32 {
        TLB_SIZE_SHIFTS[self.class as usize]
    }
    /// Bytes mapped.
    pub fn size(&self) -> u64 {
        1 << self.shift()
    }
    /// Permissions.
    pub fn perms(&self) -> TlbPerms {
        self.perms
    }
    /// The ASID, `None` if global.
    pub fn asid(&self) -> Option<u16> {
        self.asid
    }
    /// True for a global entry.
    pub fn is_global(&self) -> bool {
        self.asid.is_none()
    }
    /// Last VA mapped.
    fn last(&self) -> u64 {
        self.va + (self.size() - 1)
    }
    /// Whether `va` falls in the entry.
    pub fn covers(&self, va: u64) -> bool {
        va >> self.shift() == self.va >> self.shift()
    }
    /// The PA of `va`, if the entry covers it.
    pub fn translate(&self, va: u64) -> Option<u64> {
        self.covers(va).then(|| self.pa | (va & (self.size() - 1)))
    }
    fn tag(&self) -> u32 {
        self.asid.map_or(GLOBAL_TAG, u32::from)
    }
    fn key(&self) -> Key {
        Key { class: self.class, vfn: self.va >> self.shift(), tag: self.tag() }
    }
    /// Whether an invalidation of `scope` hits this entry.
    fn hit_by(&self, scope: Scope) -> bool {
        match scope {
            Scope::All => true,
            Scope::Asid(a) => self.asid == Some(a),
            Scope::Range { start, last, asid } => {
                self.va <= last && start <= self.last() && asid.is_none_or(|a| self.asid.is_none_or(|e| e == a))
            }
        }
    }
}

/// Model counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbCounts {
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups that found none.
    pub misses: u64,
    /// Entries filled.
    pub fills: u64,
    /// Entries evicted for capacity.
    pub evictions: u64,
    /// Entries dropped by TLBIs.
    pub invalidated: u64,
    /// Entries held now.
    pub entries: u64,
}

impl Add for TlbCounts {
    type Output = TlbCounts;
    fn add(self, o: TlbCounts) -> TlbCounts {
        TlbCounts {
            hits: self.hits + o.hits,
            misses: self.misses + o.misses,
            fills: self.fills + o.fills,
            evictions: self.evictions + o.evictions,
            invalidated: self.invalidated + o.invalidated,
            entries: self.entries + o.entries,
        }
    }
}

impl fmt::Display for TlbCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tlb_hits {}", self.hits)?;
        writeln!(f, "tlb_misses {}", self.misses)?;
        writeln!(f, "tlb_fills {}", self.fills)?;
        writeln!(f, "tlb_evictions {}", self.evictions)?;
        writeln!(f, "tlb_invalidated {}", self.invalidated)?;
        writeln!(f, "tlb_entries {}", self.entries)
    }
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    class: u8,
    vfn: u64,
    tag: u32,
}

/// A small multiplicative hasher: the keys are a few integers, and the
/// result must not depend on a random seed (determinism).
#[derive(Debug, Default)]
struct KeyHasher(u64);

impl KeyHasher {
    #[inline]
    fn mix(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.mix(u64::from(b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
}

type FixedState = BuildHasherDefault<KeyHasher>;

/// The locked part of a [`CpuTlb`].
#[derive(Debug, Default)]
struct Model {
    slots: Vec<Option<TlbEntry>>,
    referenced: Vec<bool>,
    free: Vec<u32>,
    hand: usize,
    index: HashMap<Key, u32, FixedState>,
    /// Live entries per tag, so "all ASIDs" probes know which tags exist.
    per_tag: HashMap<u32, u32, FixedState>,
    per_class: [u32; NR_CLASSES],
    live: u32,
    counts: TlbCounts,
    /// Valid soft-MMU slots, and those caching part of an entry > 4 KiB.
    fast_valid: u32,
    fast_large: u32,
}

impl Model {
    fn lookup(&mut self, va: u64, asid: u16) -> Option<TlbEntry> {
        for (class, &shift) in TLB_SIZE_SHIFTS.iter().enumerate() {
            if self.per_class[class] == 0 {
                continue;
            }
            let vfn = va >> shift;
            for tag in [GLOBAL_TAG, u32::from(asid)] {
                if let Some(&i) = self.index.get(&Key { class: class as u8, vfn, tag }) {
                    self.referenced[i as usize] = true;
                    self.counts.hits += 1;
                    return self.slots[i as usize];
                }
            }
        }
        self.counts.misses += 1;
        None
    }

    fn fill(&mut self, capacity: usize, e: TlbEntry) {
        if capacity == 0 {
            return;
        }
        self.counts.fills += 1;
        let key = e.key();
        if let Some(&i) = self.index.get(&key) {
            self.slots[i as usize] = Some(e);
            self.referenced[i as usize] = true;
            return;
        }
        let i = if let Some(i) = self.free.pop() {
            i as usize
        } else if self.slots.len() < capacity {
            self.slots.push(None);
            self.referenced.push(false);
            self.slots.len() - 1
        } else {
            self.clock_victim()
        };
        self.slots[i] = Some(e);
        self.referenced[i] = false;
        self.index.insert(key, i as u32);
        *self.per_tag.entry(e.tag()).or_insert(0) += 1;
        self.per_class[e.class as usize] += 1;
        self.live += 1;
    }

    /// CLOCK: sweep from the hand, giving referenced entries a second
    /// chance, and evict the first unreferenced one. Only called when every
    /// slot is occupied, so it ends within two sweeps.
    fn clock_victim(&mut self) -> usize {
        let n = self.slots.len();
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % n;
            if self.referenced[i] {
                self.referenced[i] = false;
            } else if self.slots[i].is_some() {
                self.remove(i);
                self.counts.evictions += 1;
                // `remove` freed it; take it back.
                self.free.pop();
                return i;
            }
        }
    }

    fn remove(&mut self, i: usize) {
        let Some(e) = self.slots[i].take() else { return };
        self.index.remove(&e.key());
        if let Some(n) = self.per_tag.get_mut(&e.tag()) {
            *n -= 1;
            if *n == 0 {
                self.per_tag.remove(&e.tag());
            }
        }
        self.per_class[e.class as usize] -= 1;
        self.live -= 1;
        self.referenced[i] = false;
        self.free.push(i as u32);
    }

    fn invalidate(&mut self, scope: Scope) {
        match scope {
            Scope::All => {
                self.counts.invalidated += u64::from(self.live);
                self.slots.clear();
                self.referenced.clear();
                self.free.clear();
                self.index.clear();
                self.per_tag.clear();
                self.per_class = [0; NR_CLASSES];
                self.live = 0;
                self.hand = 0;
            }
            Scope::Asid(_) => self.invalidate_by_scan(scope),
            Scope::Range { start, last, asid } => {
                if self.live == 0 {
                    return;
                }
                // Probe the index when that takes fewer probes than there
                // are entries; otherwise scan the slots.
                let mut tags: Vec<u32> = match asid {
                    Some(a) => vec![GLOBAL_TAG, u32::from(a)],
                    None => self.per_tag.keys().copied().collect(),
                };
                tags.sort_unstable();
                let budget = u64::from(self.live);
                let mut probes = 0u64;
                for (class, &shift) in TLB_SIZE_SHIFTS.iter().enumerate() {
                    if self.per_class[class] != 0 {
                        let blocks = (last >> shift) - (start >> shift) + 1;
                        probes = probes.saturating_add(blocks.saturating_mul(tags.len() as u64));
                    }
                }
                if probes > budget {
                    return self.invalidate_by_scan(scope);
                }
                for (class, &shift) in TLB_SIZE_SHIFTS.iter().enumerate() {
                    if self.per_class[class] == 0 {
                        continue;
                    }
                    for vfn in start >> shift..=last >> shift {
                        for &tag in &tags {
                            if let Some(&i) = self.index.get(&Key { class: class as u8, vfn, tag }) {
                                self.remove(i as usize);
                                self.counts.invalidated += 1;
                            }
                        }
                    }
                }
            }
        }
    }

    fn invalidate_by_scan(&mut self, scope: Scope) {
        for i in 0..self.slots.len() {
            if self.slots[i].is_some_and(|e| e.hit_by(scope)) {
                self.remove(i);
                self.counts.invalidated += 1;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The soft-MMU cache
// ---------------------------------------------------------------------------

/// Slots in the soft-MMU cache.
pub const FAST_SLOTS: usize = 256;
const FAST_VALID: u64 = 1 << 63;
const FAST_GLOBAL: u64 = 1 << 16;
const FAST_TAG_MASK: u64 = (1 << 17) - 1;
const FAST_WRITABLE: u64 = 1;
const FAST_SHIFT_POS: u32 = 1;

/// One direct-mapped soft-MMU slot. Tag word: valid bit 63, `VA[55:12]` in
/// bits 60:17, global bit 16, ASID in 15:0; 0 = invalid. Data word: the PA
/// of the 4 KiB page, the size shift of the entry it came from in bits
/// 6:1, writable in bit 0.
#[derive(Debug, Default)]
struct FastSlot {
    tag: AtomicU64,
    data: AtomicU64,
}

#[inline(always)]
const fn fast_tag(vpn44: u64, tag: u32) -> u64 {
    FAST_VALID | vpn44 << 17 | tag as u64
}

/// Whether a valid slot (tag `t`, data `d`) is hit by `scope`.
fn fast_hit_by(t: u64, d: u64, scope: Scope) -> bool {
    let tagbits = t & FAST_TAG_MASK;
    let global = tagbits & FAST_GLOBAL != 0;
    let asid = (tagbits & 0xffff) as u16;
    match scope {
        Scope::All => true,
        Scope::Asid(a) => !global && asid == a,
        Scope::Range { start, last, asid: want } => {
            let shift = ((d >> FAST_SHIFT_POS) & 63) as u32;
            let va = sign_extend(((t >> 17) & VPN44_MASK) << PAGE_SHIFT, 55);
            let base = va & !((1u64 << shift) - 1);
            let end = base + ((1u64 << shift) - 1);
            base <= last && start <= end && want.is_none_or(|a| global || asid == a)
        }
    }
}

// ---------------------------------------------------------------------------
// CpuTlb
// ---------------------------------------------------------------------------

/// One CPU's TLB model, soft-MMU cache and TLBI counters; see the module
/// documentation.
pub struct CpuTlb {
    capacity: usize,
    model: Mutex<Model>,
    fast: [FastSlot; FAST_SLOTS],
    generation: AtomicU64,
    /// TLBIs issued by this CPU.
    tlbi: TlbiStats,
}

impl fmt::Debug for CpuTlb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuTlb")
            .field("capacity", &self.capacity)
            .field("counts", &self.counts())
            .field("tlbi", &self.tlbi.snapshot())
            .finish_non_exhaustive()
    }
}

impl Default for CpuTlb {
    fn default() -> Self {
        CpuTlb::new(0)
    }
}

impl CpuTlb {
    /// A TLB of `capacity` entries (0: caches nothing).
    pub fn new(capacity: usize) -> CpuTlb {
        CpuTlb {
            capacity,
            model: Mutex::new(Model::default()),
            fast: std::array::from_fn(|_| FastSlot::default()),
            generation: AtomicU64::new(0),
            tlbi: TlbiStats::default(),
        }
    }
    /// Entries it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Look `va` up for `asid` (global entries match any ASID), counting a
    /// hit or a miss; a hit marks the entry referenced. Mirrors what the
    /// hardware does on every access; of 5 size classes only those holding
    /// entries are probed, smallest first.
    pub fn lookup(&self, va: u64, asid: u16) -> Option<TlbEntry> {
        self.model.lock().lookup(va, asid)
    }

    /// Cache `e`, evicting by CLOCK if full. Only the owning CPU fills.
    pub fn fill(&self, e: TlbEntry) {
        self.model.lock().fill(self.capacity, e)
    }

    /// Cache `e` unless an invalidation reached this CPU since
    /// [`generation`](Self::generation) returned `gen` (the walk that found
    /// `e` may have raced with a TLBI). Returns whether it was cached.
    pub fn fill_checked(&self, e: TlbEntry, generation: u64) -> bool {
        let mut m = self.model.lock();
        if self.generation.load(Relaxed) != generation {
            return false;
        }
        m.fill(self.capacity, e);
        true
    }

    /// Invalidation epoch: bumped by every TLBI that reaches this CPU. Read
    /// it before a walk whose result will be filled.
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// The cached entries, in slot order.
    pub fn entries(&self) -> Vec<TlbEntry> {
        self.model.lock().slots.iter().flatten().copied().collect()
    }

    /// Model counters.
    pub fn counts(&self) -> TlbCounts {
        let m = self.model.lock();
        TlbCounts { entries: u64::from(m.live), ..m.counts }
    }

    /// TLBI counters of this CPU (as issuer).
    pub fn tlbi_stats(&self) -> &TlbiStats {
        &self.tlbi
    }

    /// Valid soft-MMU slots.
    pub fn fast_valid(&self) -> usize {
        self.fast.iter().filter(|s| s.tag.load(Relaxed) != 0).count()
    }

    /// Soft-MMU lookup: the PA of `va` if slot `(va >> 12) & 255` holds its
    /// page for `asid` (or globally), and, for a write, the page is
    /// writable. No lock, no counting. Owner only (see [`fast_lookup`]).
    #[inline(always)]
    fn fast_lookup(&self, va: u64, asid: u16, write: bool) -> Option<u64> {
        let vpn = (va >> PAGE_SHIFT) & VPN44_MASK;
        let slot = &self.fast[(vpn as usize) & (FAST_SLOTS - 1)];
        let t = slot.tag.load(Relaxed);
        if t != fast_tag(vpn, GLOBAL_TAG) && t != fast_tag(vpn, u32::from(asid)) {
            return None;
        }
        let d = slot.data.load(Relaxed);
        if write && d & FAST_WRITABLE == 0 {
            return None;
        }
        Some((d & !(PAGE_SIZE - 1)) | (va & (PAGE_SIZE - 1)))
    }

    /// Soft-MMU fill from `e` for the page of `va`; owner only.
    fn fast_fill(&self, va: u64, e: &TlbEntry, generation: u64) -> bool {
        let Some(pa) = e.translate(va) else { return false };
        let mut m = self.model.lock();
        if self.generation.load(Relaxed) != generation {
            return false;
        }
        let vpn = (va >> PAGE_SHIFT) & VPN44_MASK;
        let slot = &self.fast[(vpn as usize) & (FAST_SLOTS - 1)];
        let old = slot.tag.load(Relaxed);
        if old != 0 {
            m.fast_valid -= 1;
            if (slot.data.load(Relaxed) >> FAST_SHIFT_POS) & 63 != u64::from(PAGE_SHIFT) {
                m.fast_large -= 1;
            }
        }
        let data = (pa & !(PAGE_SIZE - 1))
            | u64::from(e.shift()) << FAST_SHIFT_POS
            | if e.perms.writable { FAST_WRITABLE } else { 0 };
        slot.tag.store(0, Relaxed);
        slot.data.store(data, Relaxed);
        slot.tag.store(fast_tag(vpn, e.tag()), Release);
        m.fast_valid += 1;
        if e.shift() != PAGE_SHIFT {
            m.fast_large += 1;
        }
        true
    }

    /// Drop everything `scope` hits, in the model and the soft-MMU cache.
    fn invalidate(&self, scope: Scope) {
        let mut m = self.model.lock();
        self.generation.store(self.generation.load(Relaxed).wrapping_add(1), Release);
        m.invalidate(scope);
        if m.fast_valid == 0 {
            return;
        }
        let drop_slot = |m: &mut Model, slot: &FastSlot| {
            let t = slot.tag.load(Relaxed);
            if t == 0 {
                return;
            }
            let d = slot.data.load(Relaxed);
            if fast_hit_by(t, d, scope) {
                slot.tag.store(0, Release);
                m.fast_valid -= 1;
                if (d >> FAST_SHIFT_POS) & 63 != u64::from(PAGE_SHIFT) {
                    m.fast_large -= 1;
                }
            }
        };
        match scope {
            Scope::Range { start, last, .. }
                if m.fast_large == 0 && (last >> PAGE_SHIFT) - (start >> PAGE_SHIFT) < 256 =>
            {
                // Only 4 KiB pages cached: just the slots of the range's pages.
                for vpn in start >> PAGE_SHIFT..=last >> PAGE_SHIFT {
                    drop_slot(&mut m, &self.fast[(vpn as usize) & (FAST_SLOTS - 1)]);
                }
            }
            _ => {
                for slot in &self.fast {
                    drop_slot(&mut m, slot);
                }
            }
        }
    }
}

/// Soft-MMU lookup on `cpu`'s own cache (like QEMU's `tlb_hit` fast path):
/// the PA of `va`, or `None` on a miss or a write to a read-only page.
/// A few instructions, no lock, no counting.
#[inline(always)]
pub fn fast_lookup(cpu: &Cpu<'_>, va: u64, asid: u16, write: bool) -> Option<u64> {
    cpu.data().tlb.fast_lookup(va, asid, write)
}

/// Cache the page of `va` from `e` in `cpu`'s soft-MMU slot, unless an
/// invalidation reached the CPU since `generation` (from
/// [`CpuTlb::generation`] before the walk) or `e` does not cover `va`.
/// Returns whether it was cached.
pub fn fast_fill(cpu: &Cpu<'_>, va: u64, e: &TlbEntry, generation: u64) -> bool {
    cpu.data().tlb.fast_fill(va, e, generation)
}

// ---------------------------------------------------------------------------
// Executing TLBIs and the flush functions
// ---------------------------------------------------------------------------

/// Execute one TLBI on `cpu`: count it, model its issue cost, and
/// invalidate the matching entries of every CPU's TLB model and soft-MMU
/// cache. Mirrors `__tlbi(op, arg)`.
pub fn tlbi(cpu: &Cpu<'_>, op: Tlbi) {
    let m = cpu.machine();
    let stats = &cpu.data().tlb.tlbi;
    let kind = op.kind();
    bump(&stats.counts[kind as usize], 1);
    bump(&stats.modelled_ns, m.config().cost_profile.tlbi_cost_ns(kind));
    bump(&stats.pending, 1);
    let scope = op.scope();
    for d in m.all_cpu_data() {
        d.tlb.invalidate(scope);
    }
    // The struct-page accessor caches vmemmap translations too.
    match scope {
        Scope::All => m.vmemmap_tlbi(crate::layout::VMEMMAP_START, crate::layout::VMEMMAP_END),
        Scope::Range { start, last, .. } => m.vmemmap_tlbi(start, last.saturating_add(1)),
        Scope::Asid(_) => {}
    }
}

/// `dsb ish` completing this CPU's broadcast TLB maintenance: the barrier
/// through the backend, plus the modelled completion wait if TLBIs are
/// outstanding. Mirrors `__tlbi_sync_s1ish()`.
pub fn tlbi_sync_s1ish(cpu: &Cpu<'_>) {
    cpu.dsb(ish);
    let stats = &cpu.data().tlb.tlbi;
    if stats.pending.load(Relaxed) != 0 {
        stats.pending.store(0, Relaxed);
        bump(&stats.modelled_ns, u64::from(cpu.machine().config().cost_profile.dsb_ish_after_tlbi_ns));
    }
}

/// Invalidate everything on every CPU. Mirrors `flush_tlb_all()`:
/// `dsb ishst; tlbi vmalle1is; dsb ish; isb`.
pub fn flush_tlb_all(cpu: &Cpu<'_>) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Vmalle1is);
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

/// Invalidate a user address space. Mirrors `flush_tlb_mm()`:
/// `dsb ishst; tlbi aside1is; dsb ish` (no isb: user mappings).
pub fn flush_tlb_mm(cpu: &Cpu<'_>, asid: u16) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Aside1is { asid });
    tlbi_sync_s1ish(cpu);
}

/// Invalidate one user page, last level. Mirrors `flush_tlb_page()`:
/// `dsb ishst; tlbi vale1is; dsb ish`.
pub fn flush_tlb_page(cpu: &Cpu<'_>, asid: u16, va: u64) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Vale1is { va, asid });
    tlbi_sync_s1ish(cpu);
}

/// Invalidate a kernel VA at all levels, walk caches included, after an
/// intermediate table was removed. Mirrors `__flush_tlb_kernel_pgtable()`:
/// `dsb ishst; tlbi vaae1is; dsb ish; isb`.
pub fn flush_tlb_kernel_pgtable(cpu: &Cpu<'_>, va: u64) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Vaae1is { va });
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

/// The by-VA operation a range flush is made of, and its range form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeOp {
    /// `vale1is` / `rvale1is`: one ASID, last level.
    Vale1is,
    /// `vae1is` / `rvae1is`: one ASID, all levels.
    Vae1is,
    /// `vaale1is` / `rvaale1is`: all ASIDs, last level (kernel ranges).
    Vaale1is,
}

impl RangeOp {
    fn single(self, va: u64, asid: u16) -> Tlbi {
        match self {
            RangeOp::Vale1is => Tlbi::Vale1is { va, asid },
            RangeOp::Vae1is => Tlbi::Vae1is { va, asid },
            RangeOp::Vaale1is => Tlbi::Vaale1is { va },
        }
    }
    fn range(self, base_va: u64, asid: u16, scale: u8, num: u8, ttl: u8) -> Tlbi {
        match self {
            RangeOp::Vale1is => Tlbi::Rvale1is { base_va, asid, scale, num, ttl },
            RangeOp::Vae1is => Tlbi::Rvae1is { base_va, asid, scale, num, ttl },
            RangeOp::Vaale1is => Tlbi::Rvaale1is { base_va, scale, num, ttl },
        }
    }
}

/// `__TLBI_RANGE_NUM(pages, scale)`: the `num` field of the largest range
/// op at `scale` that fits in `pages`, or -1 if none does.
#[inline]
pub fn tlbi_range_num(pages: u64, scale: u32) -> i64 {
    (pages.min(tlbi_range_pages(31, scale)) >> (5 * scale + 1)) as i64 - 1
}

/// The TLBIs `__flush_tlb_range_op()` issues for `pages` pages from
/// `start`, in order (no LPA2, no KPTI user op): without range support,
/// or for a last single page, one single op per `stride`; otherwise range
/// ops from scale 3 down, each as large as fits. The caller has applied the
/// limit (at most `MAX_TLBI_RANGE_PAGES`).
#[derive(Clone, Debug)]
pub struct RangeOps {
    op: RangeOp,
    addr: u64,
    pages: u64,
    stride_pages: u64,
    scale: i32,
    asid: u16,
    ttl: u8,
    use_range: bool,
}

impl RangeOps {
    /// The ops for `[start, start + pages * 4K)`; `use_range` is
    /// FEAT_TLBIRANGE. A `stride` below 4 KiB is taken as 4 KiB.
    pub fn new(op: RangeOp, use_range: bool, start: u64, pages: u64, stride: u64, asid: u16, ttl: u8) -> RangeOps {
        let stride_pages = (stride >> PAGE_SHIFT).max(1);
        RangeOps { op, addr: start, pages, stride_pages, scale: 3, asid, ttl, use_range }
    }
}

impl Iterator for RangeOps {
    type Item = Tlbi;

    fn next(&mut self) -> Option<Tlbi> {
        while self.pages > 0 {
            // `scale < 0` cannot happen for pages <= MAX_TLBI_RANGE_PAGES
            // (each scale leaves fewer pages than the next one's maximum);
            // it guards against a loop without progress.
            if !self.use_range || self.pages == 1 || self.scale < 0 {
                let t = self.op.single(self.addr, self.asid);
                self.addr = self.addr.wrapping_add(self.stride_pages << PAGE_SHIFT);
                self.pages = self.pages.saturating_sub(self.stride_pages);
                return Some(t);
            }
            let scale = self.scale as u32;
            self.scale -= 1;
            let num = tlbi_range_num(self.pages, scale);
            if num >= 0 {
                let t = self.op.range(self.addr, self.asid, scale as u8, num as u8, self.ttl);
                let n = tlbi_range_pages(num as u64, scale);
                self.addr = self.addr.wrapping_add(n << PAGE_SHIFT);
                self.pages -= n;
                return Some(t);
            }
        }
        None
    }
}

/// Issue the TLBIs for `pages` pages from `start` on `cpu`. Mirrors
/// `__flush_tlb_range_op()`; the ops are those of [`RangeOps`], with range
/// support as the machine's `arm64.tlbi_range` says.
pub fn flush_tlb_range_op(cpu: &Cpu<'_>, op: RangeOp, start: u64, pages: u64, stride: u64, asid: u16, ttl: u8) {
    let use_range = cpu.machine().config().tlbi_range;
    for t in RangeOps::new(op, use_range, start, pages, stride, asid, ttl) {
        tlbi(cpu, t);
    }
}

/// Whether a range is too large for per-page maintenance. Mirrors
/// `__flush_tlb_range_limit_excess()`: without range ops, `MAX_DVM_OPS`
/// strides or more; with them, more than `MAX_TLBI_RANGE_PAGES` pages.
pub fn flush_tlb_range_limit_excess(tlbi_range: bool, start: u64, end: u64, pages: u64, stride: u64) -> bool {
    (!tlbi_range && end.wrapping_sub(start) >= MAX_DVM_OPS.saturating_mul(stride)) || pages > MAX_TLBI_RANGE_PAGES
}

/// `stride` made a usable power of two of at least a page.
fn sane_stride(stride: u64) -> u64 {
    if stride.is_power_of_two() { stride.max(PAGE_SIZE) } else { PAGE_SIZE }
}

/// Invalidate kernel mappings of `[start, end)` on every CPU. Mirrors
/// `flush_tlb_kernel_range()` (Linux 6.17): round to pages; over the limit
/// `flush_tlb_all()`; else `dsb ishst`, `vaale1is`/`rvaale1is` ops,
/// `dsb ish`, `isb`. Like the kernel, `end < start` counts as a huge range.
pub fn flush_tlb_kernel_range(cpu: &Cpu<'_>, start: u64, end: u64) {
    let start = start & !(PAGE_SIZE - 1);
    let end = end.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
    let pages = end.wrapping_sub(start) >> PAGE_SHIFT;
    if flush_tlb_range_limit_excess(cpu.machine().config().tlbi_range, start, end, pages, PAGE_SIZE) {
        return flush_tlb_all(cpu);
    }
    cpu.dsb(ishst);
    flush_tlb_range_op(cpu, RangeOp::Vaale1is, start, pages, PAGE_SIZE, 0, TLBI_TTL_UNKNOWN);
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

/// Invalidate `[start, end)` of the user address space `asid`. Mirrors
/// `__flush_tlb_range()` (= `__flush_tlb_range_nosync()` + `dsb ish`):
/// round to `stride`; over the limit `flush_tlb_mm()`; else `dsb ishst`,
/// `vale1is` (`last_level`) or `vae1is` ops, `dsb ish`; no isb. A `stride`
/// that is not a power of two of at least 4 KiB is taken as 4 KiB.
pub fn flush_tlb_range(cpu: &Cpu<'_>, asid: u16, start: u64, end: u64, stride: u64, last_level: bool) {
    let stride = sane_stride(stride);
    let start = start & !(stride - 1);
    let end = end.wrapping_add(stride - 1) & !(stride - 1);
    let pages = end.wrapping_sub(start) >> PAGE_SHIFT;
    if flush_tlb_range_limit_excess(cpu.machine().config().tlbi_range, start, end, pages, stride) {
        return flush_tlb_mm(cpu, asid);
    }
    cpu.dsb(ishst);
    let op = if last_level { RangeOp::Vale1is } else { RangeOp::Vae1is };
    flush_tlb_range_op(cpu, op, start, pages, stride, asid, TLBI_TTL_UNKNOWN);
    tlbi_sync_s1ish(cpu);
}

// ---------------------------------------------------------------------------
// The flush token
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlushKind {
    /// No live translation changed: nothing is owed.
    Nothing,
    All,
    KernelRange {
        start: u64,
        end: u64,
    },
    KernelPgtable {
        va: u64,
    },
    UserPage {
        asid: u16,
        va: u64,
    },
    UserRange {
        asid: u16,
        start: u64,
        end: u64,
        stride: u64,
        last_level: bool,
    },
}

/// TLB maintenance owed by a page-table change (after rust-osdev/x86_64's
/// `MapperFlush`). Dropping it unused is a warning: call
/// [`flush`](Self::flush), or [`ignore`](Self::ignore) to take the
/// responsibility elsewhere (e.g. batching many into one range flush, as
/// vmalloc's lazy purge does).
#[must_use = "the TLB still holds the old translation: flush() it or ignore() it deliberately"]
#[derive(Debug, PartialEq, Eq)]
pub struct TlbFlush(FlushKind);

impl TlbFlush {
    /// Nothing owed (only empty entries were written).
    pub fn none() -> TlbFlush {
        TlbFlush(FlushKind::Nothing)
    }
    /// True if the token owes no maintenance.
    pub fn is_none(&self) -> bool {
        self.0 == FlushKind::Nothing
    }
    /// Everything (`flush_tlb_all`).
    pub fn all() -> TlbFlush {
        TlbFlush(FlushKind::All)
    }
    /// Kernel mappings of `[start, end)` (`flush_tlb_kernel_range`).
    pub fn kernel_range(start: u64, end: u64) -> TlbFlush {
        TlbFlush(FlushKind::KernelRange { start, end })
    }
    /// One kernel page (`flush_tlb_kernel_range(va, va + PAGE_SIZE)`).
    pub fn kernel_page(va: u64) -> TlbFlush {
        let start = va & !(PAGE_SIZE - 1);
        TlbFlush::kernel_range(start, start.wrapping_add(PAGE_SIZE))
    }
    /// A kernel VA whose intermediate table was freed
    /// (`__flush_tlb_kernel_pgtable`).
    pub fn kernel_pgtable(va: u64) -> TlbFlush {
        TlbFlush(FlushKind::KernelPgtable { va })
    }
    /// One user page of `asid` (`flush_tlb_page`).
    pub fn page(va: u64, asid: u16) -> TlbFlush {
        TlbFlush(FlushKind::UserPage { asid, va })
    }
    /// A user range of `asid` (`__flush_tlb_range`).
    pub fn user_range(asid: u16, start: u64, end: u64, stride: u64, last_level: bool) -> TlbFlush {
        TlbFlush(FlushKind::UserRange { asid, start, end, stride, last_level })
    }

    /// The kernel range `[start, end)` this token flushes, if it is one.
    pub fn as_kernel_range(&self) -> Option<(u64, u64)> {
        match self.0 {
            FlushKind::KernelRange { start, end } => Some((start, end)),
            _ => None,
        }
    }

    /// Issue the maintenance on `cpu`.
    pub fn flush(self, cpu: &Cpu<'_>) {
        match self.0 {
            FlushKind::Nothing => {}
            FlushKind::All => flush_tlb_all(cpu),
            FlushKind::KernelRange { start, end } => flush_tlb_kernel_range(cpu, start, end),
            FlushKind::KernelPgtable { va } => flush_tlb_kernel_pgtable(cpu, va),
            FlushKind::UserPage { asid, va } => flush_tlb_page(cpu, asid, va),
            FlushKind::UserRange { asid, start, end, stride, last_level } => {
                flush_tlb_range(cpu, asid, start, end, stride, last_level)
            }
        }
    }

    /// Drop the token without flushing: the caller takes responsibility
    /// for an equivalent or larger flush later.
    pub fn ignore(self) {}

    /// One token covering both: two kernel ranges become the smallest range
    /// covering both (possibly with addresses of neither in between, which
    /// costs over-invalidation, never staleness); [`TlbFlush::all`] absorbs
    /// anything; two user ranges of one ASID and stride merge likewise
    /// (last-level only if both are). Anything else cannot merge and is
    /// handed back unchanged as `Err((self, other))`.
    pub fn merge(self, other: TlbFlush) -> Result<TlbFlush, (TlbFlush, TlbFlush)> {
        let hull = |s1: u64, e1: u64, s2: u64, e2: u64| {
            if s1 >= e1 {
                (s2, e2)
            } else if s2 >= e2 {
                (s1, e1)
            } else {
                (s1.min(s2), e1.max(e2))
            }
        };
        match (self.0, other.0) {
            (FlushKind::Nothing, _) => Ok(other),
            (_, FlushKind::Nothing) => Ok(self),
            (FlushKind::All, _) | (_, FlushKind::All) => Ok(TlbFlush::all()),
            (FlushKind::KernelRange { start: s1, end: e1 }, FlushKind::KernelRange { start: s2, end: e2 }) => {
                let (start, end) = hull(s1, e1, s2, e2);
                Ok(TlbFlush::kernel_range(start, end))
            }
            (
                FlushKind::UserRange { asid: a1, start: s1, end: e1, stride: t1, last_level: l1 },
                FlushKind::UserRange { asid: a2, start: s2, end: e2, stride: t2, last_level: l2 },
            ) if a1 == a2 && t1 == t2 => {
                let (start, end) = hull(s1, e1, s2, e2);
                Ok(TlbFlush::user_range(a1, start, end, t1, l1 && l2))
            }
            _ => Err((self, other)),
        }
    }
}

// ---------------------------------------------------------------------------
// TLB entries needed for a mapping
// ---------------------------------------------------------------------------

/// How many TLB entries it takes to cache every translation of a mapping,
/// given its leaves as (va, size) from the page-table walker (a contiguous
/// run reported as one leaf of 64 KiB or 32 MiB). A leaf of a TLB entry
/// size needs one entry; any other non-zero size (not a leaf shape) is
/// counted as its 4 KiB pages; size 0 needs none.
pub fn tlb_entries_needed<I: IntoIterator<Item = (u64, u64)>>(leaves: I) -> u64 {
    leaves
        .into_iter()
        .map(|(_, size)| match size_class(size) {
            Some(_) => 1,
            None => size.div_ceil(PAGE_SIZE),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::barrier::{BarrierBackend, BarrierCounts, BarrierKind, ModelCosts};
    use crate::cost::CostProfile;
    use crate::machine::{Machine, MachineConfig};

    const K: u64 = 0xffff_8000_1000_0000; // a kernel VA, 1 GiB aligned
    const RW: TlbPerms = TlbPerms { writable: true, user: false, exec: false };
    const RO: TlbPerms = TlbPerms { writable: false, user: false, exec: false };

    fn machine(tlbi_range: bool) -> Machine {
        let cfg = MachineConfig {
            barrier_backend: BarrierBackend::Count,
            tlbi_range,
            ..MachineConfig::with("16M", 2).unwrap()
        };
        Machine::boot(cfg).unwrap()
    }

    fn page(va: u64, asid: Option<u16>) -> TlbEntry {
        TlbEntry::new(va, 0x4000_0000 + (va & 0xfff_f000), 4096, RW, asid).unwrap()
    }

    /// TLBI and barrier counts that `f` adds on the machine.
    fn delta(m: &Machine, f: impl FnOnce()) -> (TlbiCounts, BarrierCounts) {
        let (t0, b0) = (m.tlbi_counts(), m.barrier_counts());
        f();
        let (t1, b1) = (m.tlbi_counts(), m.barrier_counts());
        let mut b = b1;
        for (x, y) in b.dsb.iter_mut().zip(b0.dsb) {
            *x -= y;
        }
        for (x, y) in b.dmb.iter_mut().zip(b0.dmb) {
            *x -= y;
        }
        b.isb -= b0.isb;
        (t1.delta(&t0), b)
    }

    fn barriers(b: &BarrierCounts) -> (u64, u64, u64) {
        let get = |k, o| b.get(k, o).unwrap();
        (get(BarrierKind::Dsb, "ishst"), get(BarrierKind::Dsb, "ish"), b.isb)
    }

    #[test]
    fn kernel_range_tlbi_counts() {
        // (pages, without range ops: vaale1is, vmalle1is,
        //         with range ops: vaale1is, rvaale1is, vmalle1is)
        // Without FEAT_TLBIRANGE: one vaale1is per page below MAX_DVM_OPS;
        // 512 pages or more -> flush_tlb_all (one vmalle1is).
        // With it (range pages at scale s: (num+1) << (5s+1)):
        //   1    -> the single-page special case: 1 vaale1is.
        //   2    -> scales 3..1 give num -1; scale 0: 2>>1 - 1 = 0 -> 1 op of 2 pages.
        //   3    -> scale 0: 3>>1 - 1 = 0 -> 2 pages; 1 page left -> 1 vaale1is.
        //   64   -> scale 1: 64>>6 - 1 = 0 -> 1 op of 64.
        //   101  -> scale 1: 101>>6 - 1 = 0 -> 64; 37 left, scale 0: 37>>1 - 1 = 17 -> 36; 1 left -> vaale1is.
        //   511  -> scale 1: 511>>6 - 1 = 6 -> 448; 63 left, scale 0: num 30 -> 62; 1 left -> vaale1is.
        //   512  -> scale 1: 512>>6 - 1 = 7 -> 1 op of 512.
        //   8192 -> scale 2: 8192>>11 - 1 = 3 -> 1 op of 8192.
        //   2^21 -> scale 3: num 31 -> 1 op of MAX_TLBI_RANGE_PAGES.
        //   2^21 + 1 -> over the limit: flush_tlb_all.
        type Row = (u64, (u64, u64), (u64, u64, u64));
        let table: [Row; 10] = [
            (1, (1, 0), (1, 0, 0)),
            (2, (2, 0), (0, 1, 0)),
            (3, (3, 0), (1, 1, 0)),
            (64, (64, 0), (0, 1, 0)),
            (101, (101, 0), (1, 2, 0)),
            (511, (511, 0), (1, 2, 0)),
            (512, (0, 1), (0, 1, 0)),
            (8192, (0, 1), (0, 1, 0)),
            (1 << 21, (0, 1), (0, 1, 0)),
            ((1 << 21) + 1, (0, 1), (0, 0, 1)),
        ];
        for tlbi_range in [false, true] {
            let m = machine(tlbi_range);
            let cpu = m.cpu(0).unwrap();
            for &(pages, without, with) in &table {
                let (t, b) = delta(&m, || flush_tlb_kernel_range(&cpu, K, K + pages * PAGE_SIZE));
                let got = (t.get(TlbiKind::Vaale1is), t.get(TlbiKind::Rvaale1is), t.get(TlbiKind::Vmalle1is));
                let want = if tlbi_range { with } else { (without.0, 0, without.1) };
                assert_eq!(got, want, "pages {pages} range {tlbi_range}");
                assert_eq!(t.total(), got.0 + got.1 + got.2);
                // Every kernel flush: dsb ishst, dsb ish, isb, once each.
                assert_eq!(barriers(&b), (1, 1, 1), "pages {pages} range {tlbi_range}");
            }
        }
    }

    #[test]
    fn range_ops_sequence_and_coverage() {
        let ops: Vec<Tlbi> = RangeOps::new(RangeOp::Vaale1is, true, K, 101, PAGE_SIZE, 0, 0).collect();
        assert_eq!(
            ops,
            [
                Tlbi::Rvaale1is { base_va: K, scale: 1, num: 0, ttl: 0 },
                Tlbi::Rvaale1is { base_va: K + 64 * PAGE_SIZE, scale: 0, num: 17, ttl: 0 },
                Tlbi::Vaale1is { va: K + 100 * PAGE_SIZE },
            ]
        );
        // The ops tile the range exactly, for every size up to a few
        // thousand pages and a few large ones.
        for pages in (1..3000).chain([65535, 65536, 65537, (1 << 21) - 1, 1 << 21]) {
            let mut next = K;
            for t in RangeOps::new(RangeOp::Vaale1is, true, K, pages, PAGE_SIZE, 0, 0) {
                let (base, n) = match t {
                    Tlbi::Rvaale1is { base_va, .. } => (base_va, t.pages_covered().unwrap()),
                    Tlbi::Vaale1is { va } => (va, 1),
                    other => panic!("unexpected {other:?}"),
                };
                assert_eq!(base, next, "pages {pages}");
                next = base + n * PAGE_SIZE;
            }
            assert_eq!(next, K + pages * PAGE_SIZE, "pages {pages}");
        }
        // Without range ops, a 2 MiB stride issues one op per stride.
        let ops: Vec<Tlbi> = RangeOps::new(RangeOp::Vale1is, false, 0x40_0000, 1024, 2 << 20, 7, 0).collect();
        assert_eq!(ops, [Tlbi::Vale1is { va: 0x40_0000, asid: 7 }, Tlbi::Vale1is { va: 0x60_0000, asid: 7 }]);
    }

    #[test]
    fn flush_barrier_sequences() {
        let m = machine(true);
        let cpu = m.cpu(0).unwrap();
        let (t, b) = delta(&m, || flush_tlb_all(&cpu));
        assert_eq!((t.get(TlbiKind::Vmalle1is), t.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 1));
        let (t, b) = delta(&m, || flush_tlb_kernel_pgtable(&cpu, K));
        assert_eq!((t.get(TlbiKind::Vaae1is), t.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 1));
        // User flushes end without isb.
        let (t, b) = delta(&m, || flush_tlb_mm(&cpu, 3));
        assert_eq!((t.get(TlbiKind::Aside1is), t.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 0));
        let (t, b) = delta(&m, || flush_tlb_page(&cpu, 3, 0x1000));
        assert_eq!((t.get(TlbiKind::Vale1is), t.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 0));
        // 4 MiB at a 2 MiB stride = 1024 pages: scale 1, num 15, one rvale1is.
        let (t, b) = delta(&m, || flush_tlb_range(&cpu, 3, 0x40_0000, 0x80_0000, 2 << 20, true));
        assert_eq!((t.get(TlbiKind::Rvale1is), t.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 0));
        let (t, _) = delta(&m, || flush_tlb_range(&cpu, 3, 0x1000, 0x4000, PAGE_SIZE, false));
        assert_eq!((t.get(TlbiKind::Rvae1is), t.get(TlbiKind::Vae1is)), (1, 1));
        // No range ops: 512 strides or more -> flush_tlb_mm.
        let m = machine(false);
        let cpu = m.cpu(0).unwrap();
        let (t, b) = delta(&m, || flush_tlb_range(&cpu, 3, 0, 512 * PAGE_SIZE, PAGE_SIZE, true));
        assert_eq!((t.get(TlbiKind::Aside1is), t.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 0));
        let (t, _) = delta(&m, || flush_tlb_range(&cpu, 3, 0, 511 * PAGE_SIZE, PAGE_SIZE, true));
        assert_eq!((t.get(TlbiKind::Vale1is), t.total()), (511, 511));
        // end < start is a huge range, as in the kernel: a full flush.
        let (t, _) = delta(&m, || flush_tlb_kernel_range(&cpu, K + PAGE_SIZE, K));
        assert_eq!(t.get(TlbiKind::Vmalle1is), 1);
    }

    #[test]
    fn operand_encodings() {
        // (VA >> 12)[43:0]: VA[55:12] of 0xffff_8000_1234_5000.
        assert_eq!(Tlbi::Vaale1is { va: 0xffff_8000_1234_5000 }.operand(), 0x0000_0ff8_0001_2345);
        assert_eq!(Tlbi::Vaae1is { va: 0xffff_8000_1234_5000 }.operand(), 0x0000_0ff8_0001_2345);
        // ASID in [63:48].
        assert_eq!(Tlbi::Vale1is { va: 0x7fff_dead_b000, asid: 0x2a }.operand(), 0x002a_0007_fffd_eadb);
        assert_eq!(Tlbi::Aside1is { asid: 0xbeef }.operand(), 0xbeef_0000_0000_0000);
        assert_eq!(Tlbi::Vmalle1is.operand(), 0);
        // BADDR 0x1_8000_0400, NUM 7 << 39, SCALE 1 << 44, TG 1 << 46.
        let r = Tlbi::Rvaale1is { base_va: 0xffff_8000_0040_0000, scale: 1, num: 7, ttl: 0 };
        assert_eq!(r.operand(), 0x0000_5398_0000_0400);
        assert_eq!(r.pages_covered(), Some(8 << 6));
        // ASID 0x1234, TG 1, SCALE 3, NUM 31, TTL 2, BADDR 0x40_0020_0.
        let r = Tlbi::Rvale1is { base_va: 0x40_0020_0000, asid: 0x1234, scale: 3, num: 31, ttl: 2 };
        assert_eq!(r.operand(), 0x1234_7fc0_0400_0200);
        assert_eq!(r.pages_covered(), Some(MAX_TLBI_RANGE_PAGES));
        assert_eq!(Tlbi::Rvae1is { base_va: 0, asid: 0, scale: 0, num: 0, ttl: 0 }.pages_covered(), Some(2));
        assert_eq!(Tlbi::Vmalle1is.pages_covered(), None);
        assert_eq!(r.to_string(), "tlbi rvale1is, 0x12347fc004000200");
        // Decoding gives the op back for canonical addresses.
        let ops = [
            Tlbi::Vale1is { va: 0x7fff_dead_b000, asid: 0x2a },
            Tlbi::Vae1is { va: 0xffff_ffff_ffff_f000, asid: 1 },
            Tlbi::Vaale1is { va: 0xffff_8000_1234_5000 },
            Tlbi::Vaae1is { va: 0 },
            Tlbi::Vmalle1is,
            Tlbi::Aside1is { asid: 9 },
            Tlbi::Rvaale1is { base_va: 0xffff_8000_0040_0000, scale: 1, num: 7, ttl: 0 },
            Tlbi::Rvale1is { base_va: 0x40_0020_0000, asid: 0x1234, scale: 3, num: 31, ttl: 2 },
            Tlbi::Rvae1is { base_va: 0xffff_ffff_ffe0_0000, asid: 3, scale: 2, num: 5, ttl: 3 },
        ];
        for op in ops {
            assert_eq!(Tlbi::from_operand(op.kind(), op.operand()), op);
        }
        assert!(Tlbi::Vaae1is { va: 0 }.all_levels() && !Tlbi::Vaale1is { va: 0 }.all_levels());
    }

    #[test]
    fn model_fill_hit_miss_and_clock_eviction() {
        let t = CpuTlb::new(4);
        let e: Vec<TlbEntry> = (0..6).map(|i| page(K + i * PAGE_SIZE, None)).collect();
        for x in &e[..4] {
            t.fill(*x);
        }
        assert_eq!(t.lookup(K + 0x123, 9).and_then(|x| x.translate(K + 0x123)), Some(0x4000_0123));
        assert_eq!(t.lookup(K + 10 * PAGE_SIZE, 9), None);
        // Full: the hand passes referenced e0 (second chance) and evicts e1.
        t.fill(e[4]);
        assert_eq!(t.entries(), [e[0], e[4], e[2], e[3]]);
        // Next: the hand is at e2, unreferenced: evicted.
        t.fill(e[5]);
        assert_eq!(t.entries(), [e[0], e[4], e[5], e[3]]);
        let c = t.counts();
        assert_eq!((c.hits, c.misses, c.fills, c.evictions, c.entries), (1, 1, 6, 2, 4));
        // A 2 MiB block serves every page in it; ASID entries only their ASID.
        let t = CpuTlb::new(8);
        let block = TlbEntry::new(K + (2 << 20), 0x8020_0000, 2 << 20, RO, None).unwrap();
        t.fill(block);
        t.fill(page(0x1000, Some(5)));
        assert_eq!(t.lookup(K + (3 << 20) + 8, 1).unwrap(), block);
        assert_eq!(block.translate(K + (3 << 20) + 8), Some(0x8030_0008));
        assert!(t.lookup(0x1000, 5).is_some());
        assert!(t.lookup(0x1000, 6).is_none());
        // Bad entries are errors; a zero-capacity TLB caches nothing.
        assert_eq!(TlbEntry::new(0, 0, 8192, RW, None), Err(TlbEntryError::BadSize(8192)));
        assert!(matches!(TlbEntry::new(0x1000, 0, 1 << 16, RW, None), Err(TlbEntryError::Misaligned { .. })));
        let z = CpuTlb::new(0);
        z.fill(page(0x1000, None));
        assert!(z.lookup(0x1000, 0).is_none() && z.entries().is_empty());
    }

    #[test]
    fn tlbi_on_one_cpu_invalidates_every_cpu() {
        let m = machine(true);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        let t1 = &c1.data().tlb;
        let (a, b) = (page(K, None), page(K + PAGE_SIZE, None));
        let g = t1.generation();
        for e in [a, b] {
            assert!(t1.fill_checked(e, g));
            assert!(fast_fill(&c1, e.va() + 8, &e, g));
        }
        assert_eq!(fast_lookup(&c1, K + 0x10, 0, true), Some(0x4000_0010));
        flush_tlb_kernel_range(&c0, K, K + PAGE_SIZE);
        assert_eq!(t1.lookup(K, 0), None);
        assert_eq!(t1.lookup(K + PAGE_SIZE, 0), Some(b));
        assert_eq!(fast_lookup(&c1, K + 0x10, 0, false), None);
        assert_eq!(fast_lookup(&c1, K + PAGE_SIZE + 4, 0, false), Some(0x4000_1004));
        assert_eq!(t1.counts().invalidated, 1);
        // Counted on the issuer only.
        assert_eq!(c0.data().tlb.tlbi_stats().snapshot().get(TlbiKind::Vaale1is), 1);
        assert_eq!(t1.tlbi_stats().snapshot().total(), 0);
        // A fill from a walk that raced with the TLBI is refused.
        assert!(!t1.fill_checked(a, g));
        assert!(!fast_fill(&c1, K, &a, g));
        assert_eq!(fast_lookup(&c1, K, 0, false), None);
        // A fast slot caching one page of a 2 MiB block goes with a TLBI at
        // another address in the block (another slot index).
        let blk = TlbEntry::new(K + (2 << 20), 0x8020_0000, 2 << 20, RW, None).unwrap();
        let g = t1.generation();
        assert!(fast_fill(&c1, K + (2 << 20) + 0x3000, &blk, g));
        assert_eq!(fast_lookup(&c1, K + (2 << 20) + 0x3004, 0, true), Some(0x8020_3004));
        tlbi(&c0, Tlbi::Vaale1is { va: K + (2 << 20) + 0x10_0000 });
        assert_eq!(fast_lookup(&c1, K + (2 << 20) + 0x3004, 0, true), None);
        assert_eq!(t1.fast_valid(), 1);
        // A fast write to a read-only page misses.
        let ro = TlbEntry::new(0x5000, 0x9000, PAGE_SIZE, RO, Some(4)).unwrap();
        assert!(fast_fill(&c1, 0x5000, &ro, t1.generation()));
        assert_eq!(fast_lookup(&c1, 0x5008, 4, false), Some(0x9008));
        assert_eq!(fast_lookup(&c1, 0x5008, 4, true), None);
        assert_eq!(fast_lookup(&c1, 0x5008, 3, false), None);
        flush_tlb_all(&c0);
        assert_eq!(t1.fast_valid(), 0);
    }

    #[test]
    fn range_tlbi_hits_exactly_the_overlapping_entries() {
        let m = machine(true);
        let cpu = m.cpu(0).unwrap();
        let t = &cpu.data().tlb;
        let fill_set = || {
            let v = vec![
                page(K - PAGE_SIZE, None),                                               // just below
                page(K, None),                                                           // first page
                page(K + 3 * PAGE_SIZE, Some(7)),                                        // last page, ASID 7
                page(K + 4 * PAGE_SIZE, None),                                           // just above
                TlbEntry::new(K - (64 << 10), 0x9000_0000, 64 << 10, RW, None).unwrap(), // ends below
                TlbEntry::new(K + (64 << 10), 0x9001_0000, 64 << 10, RW, None).unwrap(), // above
                TlbEntry::new(K, 0xa000_0000, 2 << 20, RW, None).unwrap(),               // block over it
            ];
            for e in &v {
                t.fill(*e);
            }
            v
        };
        // 4 pages from K: the first, the ASID-7 last one and the block.
        let v = fill_set();
        tlbi(&cpu, Tlbi::Rvaale1is { base_va: K, scale: 0, num: 1, ttl: 0 });
        assert_eq!(t.entries(), [v[0], v[3], v[4], v[5]]);
        // The same by scan (range far larger than the entry count).
        flush_tlb_all(&cpu);
        let v = fill_set();
        let r = Tlbi::Rvale1is { base_va: K - (1 << 30), asid: 9, scale: 3, num: 7, ttl: 0 };
        assert!(r.pages_covered().unwrap() > 1 << 18);
        tlbi(&cpu, r);
        // By VA with ASID 9: globals go, the ASID-7 entry stays.
        assert_eq!(t.entries(), [v[2]]);
    }

    #[test]
    fn asid_invalidation_leaves_globals() {
        let m = machine(true);
        let cpu = m.cpu(0).unwrap();
        let t = &cpu.data().tlb;
        let (g, a5, a6) = (page(0x1000, None), page(0x1000, Some(5)), page(0x1000, Some(6)));
        for e in [g, a5, a6] {
            t.fill(e);
        }
        for e in [g, a5] {
            assert!(fast_fill(&cpu, 0x2000 - 1, &e, t.generation()));
        }
        assert_eq!(t.entries().len(), 3);
        flush_tlb_mm(&cpu, 5);
        assert_eq!(t.entries(), [g, a6]);
        // Slot held the ASID-5 copy last: gone, the global one not cached.
        assert_eq!(fast_lookup(&cpu, 0x1000, 5, false), None);
        assert!(fast_fill(&cpu, 0x1000, &g, t.generation()));
        flush_tlb_mm(&cpu, 6);
        assert_eq!(t.entries(), [g]);
        assert!(fast_lookup(&cpu, 0x1000, 6, false).is_some());
        // By VA with an ASID also removes the global entry.
        flush_tlb_page(&cpu, 6, 0x1000);
        assert!(t.entries().is_empty());
        assert_eq!(fast_lookup(&cpu, 0x1000, 6, false), None);
    }

    #[test]
    fn flush_token() {
        let m = machine(true);
        let cpu = m.cpu(0).unwrap();
        let t = &cpu.data().tlb;
        for i in 0..8 {
            t.fill(page(K + i * PAGE_SIZE, None));
        }
        let (c, b) = delta(&m, || TlbFlush::kernel_range(K + PAGE_SIZE, K + 3 * PAGE_SIZE).flush(&cpu));
        assert_eq!((c.get(TlbiKind::Rvaale1is), c.total()), (1, 1));
        assert_eq!(barriers(&b), (1, 1, 1));
        let left: Vec<u64> = t.entries().iter().map(|e| (e.va() - K) >> PAGE_SHIFT).collect();
        assert_eq!(left, [0, 3, 4, 5, 6, 7]);
        // Merge: the hull of two kernel ranges, one flush.
        let f = TlbFlush::kernel_page(K + 4 * PAGE_SIZE).merge(TlbFlush::kernel_page(K + 6 * PAGE_SIZE)).unwrap();
        assert_eq!(f.as_kernel_range(), Some((K + 4 * PAGE_SIZE, K + 7 * PAGE_SIZE)));
        let (c, _) = delta(&m, || f.flush(&cpu));
        // 3 pages: one range op of 2 and one single op.
        assert_eq!((c.get(TlbiKind::Rvaale1is), c.get(TlbiKind::Vaale1is)), (1, 1));
        let left: Vec<u64> = t.entries().iter().map(|e| (e.va() - K) >> PAGE_SHIFT).collect();
        assert_eq!(left, [0, 3, 7]);
        // Ignoring issues nothing.
        let (c, b) = delta(&m, || TlbFlush::kernel_page(K).ignore());
        assert_eq!((c.total(), b.total()), (0, 0));
        assert_eq!(t.entries().len(), 3);
        // Kernel and user ranges do not merge; `all` absorbs anything.
        let (a, u) = (TlbFlush::kernel_page(K), TlbFlush::page(0x1000, 1));
        let (a, u) = a.merge(u).unwrap_err();
        assert_eq!(a.as_kernel_range(), Some((K, K + PAGE_SIZE)));
        assert_eq!(u.merge(TlbFlush::all()), Ok(TlbFlush::all()));
        assert_eq!(TlbFlush::kernel_range(5, 5).merge(a), Ok(TlbFlush::kernel_range(K, K + PAGE_SIZE)));
        let ur = TlbFlush::user_range(1, 0, 0x2000, PAGE_SIZE, true)
            .merge(TlbFlush::user_range(1, 0x8000, 0x9000, PAGE_SIZE, false))
            .unwrap();
        assert_eq!(ur, TlbFlush::user_range(1, 0, 0x9000, PAGE_SIZE, false));
        ur.ignore();
        let (c, _) = delta(&m, || TlbFlush::kernel_pgtable(K).flush(&cpu));
        assert_eq!(c.get(TlbiKind::Vaae1is), 1);
        let left: Vec<u64> = t.entries().iter().map(|e| (e.va() - K) >> PAGE_SHIFT).collect();
        assert_eq!(left, [3, 7]);
    }

    #[test]
    fn modelled_cost_follows_the_profile() {
        let p = CostProfile {
            tlbi_ns: std::array::from_fn(|i| 100 * (i as u32 + 1)),
            dsb_ish_after_tlbi_ns: 5000,
            ..CostProfile::default()
        };
        let cfg = MachineConfig {
            barrier_backend: BarrierBackend::Model(ModelCosts::default()),
            cost_profile: p,
            ..MachineConfig::with("16M", 2).unwrap()
        };
        let m = Machine::boot(cfg).unwrap();
        let cpu = m.cpu(1).unwrap();
        let ns = |k: TlbiKind| u64::from(p.tlbi_ns[k as usize]);
        // 3 pages: rvaale1is + vaale1is, then one completion wait.
        let boot_barrier_ns = m.barrier_counts().modelled_ns;
        let (c, b) = delta(&m, || flush_tlb_kernel_range(&cpu, K, K + 3 * PAGE_SIZE));
        assert_eq!(c.modelled_ns, ns(TlbiKind::Rvaale1is) + ns(TlbiKind::Vaale1is) + 5000);
        // Barrier time stays with the barrier backend, TLBI time apart.
        let d = ModelCosts::default();
        let pair = u64::from(d.dsb[crate::barrier::IshSt::INDEX] + d.dsb[crate::barrier::Ish::INDEX] + d.isb);
        assert_eq!(m.barrier_counts().modelled_ns - boot_barrier_ns, pair);
        assert_eq!(b.total(), 3);
        let (c, _) = delta(&m, || flush_tlb_all(&cpu));
        assert_eq!(c.modelled_ns, ns(TlbiKind::Vmalle1is) + 5000);
        // A dsb ish with nothing outstanding waits for nothing.
        let (c, _) = delta(&m, || tlbi_sync_s1ish(&cpu));
        assert_eq!(c.modelled_ns, 0);
        // Issued without a sync: issue cost only, the wait comes at the sync.
        let (c, _) = delta(&m, || {
            tlbi(&cpu, Tlbi::Vale1is { va: 0, asid: 1 });
            tlbi(&cpu, Tlbi::Vale1is { va: 0x1000, asid: 1 });
        });
        assert_eq!(c.modelled_ns, 2 * ns(TlbiKind::Vale1is));
        let (c, _) = delta(&m, || tlbi_sync_s1ish(&cpu));
        assert_eq!(c.modelled_ns, 5000);
        assert_eq!(cpu.data().tlb.tlbi_stats().snapshot(), m.tlbi_counts());
        use crate::barrier::BarrierOption;
    }

    #[test]
    fn counts_sum_and_print() {
        let m = machine(false);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        flush_tlb_kernel_range(&c0, K, K + 2 * PAGE_SIZE);
        flush_tlb_all(&c1);
        let all = m.tlbi_counts();
        assert_eq!((all.get(TlbiKind::Vaale1is), all.get(TlbiKind::Vmalle1is)), (2, 1));
        let (s0, s1) = (c0.data().tlb.tlbi_stats().snapshot(), c1.data().tlb.tlbi_stats().snapshot());
        assert_eq!(s0 + s1, all);
        let p = CostProfile::default();
        assert_eq!(
            all.modelled_ns,
            2 * p.tlbi_cost_ns(TlbiKind::Vaale1is)
                + p.tlbi_cost_ns(TlbiKind::Vmalle1is)
                + 2 * u64::from(p.dsb_ish_after_tlbi_ns)
        );
        let text = all.to_string();
        assert!(text.starts_with("tlbi(vaale1is)   2\ntlbi(vmalle1is)  1\ntlbi_modelled_ns  "), "{text}");
        assert_eq!(TlbiCounts::default().to_string(), "");
        assert_eq!(m.cpu_data(1).map(|d| d.tlb.capacity()), Some(1280));
        assert!(m.cpu_data(2).is_none());
    }

    #[test]
    fn entries_needed() {
        // 128 KiB mapped as two contiguous runs, then a 2 MiB block and 3 pages.
        let leaves = [(0, 64 << 10), (64 << 10, 64 << 10), (2 << 20, 2 << 20), (4 << 20, 4096), (0x40_1000, 4096)];
        assert_eq!(tlb_entries_needed(leaves.iter().copied().chain([(0x40_2000, 4096)])), 6);
        // The same 128 KiB as pages needs 16x more.
        assert_eq!(tlb_entries_needed((0..32).map(|i| (i * 4096, 4096))), 32);
        assert_eq!(tlb_entries_needed([(0, 32 << 20), (1 << 30, 1 << 30)]), 2);
        // Not a leaf shape: counted as pages; empty leaves need nothing.
        assert_eq!(tlb_entries_needed([(0, 3 * 4096), (0, 0)]), 3);
    }

    #[test]
    fn owner_and_remote_threads() {
        // CPU 1's thread fills and looks up; CPU 0's thread invalidates.
        // After both join, nothing stale is left, whatever the interleaving.
        let m = machine(true);
        let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..2000u64 {
                    let va = K + (i % 64) * PAGE_SIZE;
                    let e = page(va, None);
                    let g = c1.data().tlb.generation();
                    c1.data().tlb.fill_checked(e, g);
                    fast_fill(&c1, va, &e, g);
                    if let Some(pa) = fast_lookup(&c1, va, 0, false) {
                        assert_eq!(pa, e.pa());
                    }
                }
            });
            s.spawn(move || {
                for _ in 0..200 {
                    flush_tlb_kernel_range(&c0, K, K + 64 * PAGE_SIZE);
                }
            });
        });
        let c0 = m.cpu(0).unwrap();
        flush_tlb_kernel_range(&c0, K, K + 64 * PAGE_SIZE);
        let t1 = &m.cpu_data(1).unwrap().tlb;
        assert!(t1.entries().is_empty());
        assert_eq!(t1.fast_valid(), 0);
        assert_eq!(m.tlbi_counts().get(TlbiKind::Rvaale1is), 201);
    }
}
