//! The TLBI instructions as data (arch/arm64/include/asm/tlbflush.h):
//! which ops exist, how each encodes its register operand, which entries
//! each invalidates, and the per-CPU counters of the ops issued.
//!
//! A [`Tlbi`] is one instruction with its operand fields. [`Tlbi::operand`]
//! builds the 64-bit register value as `__TLBI_VADDR()` (single ops:
//! `VA[55:12] | ASID << 48`) and `__TLBI_VADDR_RANGE()` (range ops: base
//! `VA[48:12]`, TTL, NUM, SCALE, the 4 KiB TG and the ASID) do, and
//! [`Tlbi::from_operand`] inverts it. The set of entries an op hits is
//! computed from the *encoded* operand (decode, then take the covered pages),
//! so whatever the encoding truncates is truncated for the model too, as on
//! hardware. A range op covers `(num + 1) << (5 * scale + 1)` pages
//! ([`tlbi_range_pages`]).
//!
//! [`TlbiStats`] counts the ops by [`TlbiKind`] on the issuing CPU, with
//! the modelled TLBI time; [`TlbiCounts`] is a plain copy of them, summed
//! over CPUs for reports. The cost numbers themselves are the cost
//! profile's (`crate::arch::arm64::cost`), which depends on this module and not the
//! other way round.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::addr::{PAGE_SHIFT, PAGE_SIZE};
use crate::counters::{CounterSet, PerCpuStat};

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
pub(super) const VPN44_MASK: u64 = (1 << 44) - 1;
const BADDR_MASK: u64 = (1 << 37) - 1;

/// Sign-extend `x` from bit `bit`.
#[inline]
pub(super) const fn sign_extend(x: u64, bit: u32) -> u64 {
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
    Vale1is {
        /// The virtual address (bits 55:12 are encoded).
        va: u64,
        /// The address space identifier.
        asid: u16,
    },
    /// By VA and ASID, all levels (`tlbi vae1is`).
    Vae1is {
        /// The virtual address (bits 55:12 are encoded).
        va: u64,
        /// The address space identifier.
        asid: u16,
    },
    /// By VA, all ASIDs, last level only (`tlbi vaale1is`).
    Vaale1is {
        /// The virtual address (bits 55:12 are encoded).
        va: u64,
    },
    /// By VA, all ASIDs, all levels (`tlbi vaae1is`).
    Vaae1is {
        /// The virtual address (bits 55:12 are encoded).
        va: u64,
    },
    /// Everything at EL1&0 (`tlbi vmalle1is`).
    Vmalle1is,
    /// Every non-global entry of one ASID (`tlbi aside1is`).
    Aside1is {
        /// The address space identifier.
        asid: u16,
    },
    /// Range, all ASIDs, last level (`tlbi rvaale1is`).
    Rvaale1is {
        /// First VA of the range (bits 48:12 are encoded).
        base_va: u64,
        /// `SCALE`: the range is `(num + 1) << (5 * scale + 1)` pages.
        scale: u8,
        /// `NUM` (0..=31).
        num: u8,
        /// `TTL`: level hint of the leaves, 0 for unknown.
        ttl: u8,
    },
    /// Range, one ASID, last level (`tlbi rvale1is`).
    Rvale1is {
        /// First VA of the range (bits 48:12 are encoded).
        base_va: u64,
        /// The address space identifier.
        asid: u16,
        /// `SCALE`: the range is `(num + 1) << (5 * scale + 1)` pages.
        scale: u8,
        /// `NUM` (0..=31).
        num: u8,
        /// `TTL`: level hint of the leaves, 0 for unknown.
        ttl: u8,
    },
    /// Range, one ASID, all levels (`tlbi rvae1is`), issued by user
    /// `__flush_tlb_range()` when `last_level` is false.
    Rvae1is {
        /// First VA of the range (bits 48:12 are encoded).
        base_va: u64,
        /// The address space identifier.
        asid: u16,
        /// `SCALE`: the range is `(num + 1) << (5 * scale + 1)` pages.
        scale: u8,
        /// `NUM` (0..=31).
        num: u8,
        /// `TTL`: level hint of the leaves, 0 for unknown.
        ttl: u8,
    },
}

macro_rules! tlbi_kinds {
    ($($id:ident = $name:literal,)*) => {
        /// The kind of a [`Tlbi`], for counting.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(usize)]
        pub enum TlbiKind { $(#[doc = concat!("`tlbi ", $name, "`.")] $id,)* }
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
pub(super) enum Scope {
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
    pub(super) fn scope(&self) -> Scope {
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
/// issuing CPU. Single writer (the CPU's thread, through its [`ArchCpu`](crate::kernel::cpu::Cpu)
/// handle), so each bump is a relaxed load and store
/// ([`this_cpu_add`](crate::counters::this_cpu_add)), as in [`crate::mm::vmstat`].
#[derive(Debug, Default)]
pub struct TlbiStats {
    pub(super) counts: [AtomicU64; NR_TLBI_KINDS],
    pub(super) modelled_ns: AtomicU64,
    /// TLBIs issued since the last `dsb ish`.
    pub(super) pending: AtomicU64,
}

impl TlbiStats {
    /// A plain copy.
    pub fn snapshot(&self) -> TlbiCounts {
        PerCpuStat::snapshot(self)
    }
}

impl PerCpuStat for TlbiStats {
    type Counts = TlbiCounts;
    fn snapshot(&self) -> TlbiCounts {
        TlbiCounts {
            counts: std::array::from_fn(|i| self.counts[i].load(Relaxed)),
            modelled_ns: self.modelled_ns.load(Relaxed),
        }
    }
}

/// A plain copy of [`TlbiStats`] (one CPU's or a sum); serialised as a map
/// of every counter's name (`"vaale1is"`, ..., `"modelled_ns"`) to its value.
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
    /// The non-zero counts as (kind, count), in [`TlbiKind::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (TlbiKind, u64)> + use<> {
        let c = *self;
        TlbiKind::ALL.into_iter().map(move |k| (k, c.get(k))).filter(|&(_, n)| n != 0)
    }
}

impl serde::Serialize for TlbiCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::counters::serialize_counters(self, s)
    }
}

impl CounterSet for TlbiCounts {
    fn add(&mut self, rhs: &TlbiCounts) {
        for (a, b) in self.counts.iter_mut().zip(rhs.counts) {
            *a += b;
        }
        self.modelled_ns += rhs.modelled_ns;
    }

    /// `self - earlier`, for the counts of one operation.
    fn delta(&self, earlier: &TlbiCounts) -> TlbiCounts {
        TlbiCounts {
            counts: std::array::from_fn(|i| self.counts[i].wrapping_sub(earlier.counts[i])),
            modelled_ns: self.modelled_ns.wrapping_sub(earlier.modelled_ns),
        }
    }

    /// Every kind's count, zero or not, in [`TlbiKind::ALL`] order, then
    /// `modelled_ns`.
    fn for_each_counter(&self, f: &mut dyn FnMut(&'static str, u64)) {
        let mut c = *self;
        c.slots().for_each(|(name, n)| f(name, *n));
    }

    fn set_counter(&mut self, name: &str, value: u64) -> bool {
        self.slots().find(|&(n, _)| n == name).map(|(_, slot)| *slot = value).is_some()
    }
}

impl TlbiCounts {
    /// Every counter by name, in [`CounterSet::for_each_counter`] order:
    /// the one list of the names, for reading and for writing back.
    fn slots(&mut self) -> impl Iterator<Item = (&'static str, &mut u64)> {
        let kinds = TlbiKind::ALL.into_iter().map(TlbiKind::name).zip(&mut self.counts);
        kinds.chain([("modelled_ns", &mut self.modelled_ns)])
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
