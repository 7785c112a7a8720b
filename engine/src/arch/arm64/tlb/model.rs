//! The TLB model: what each CPU has cached, and how TLBIs remove it.
//!
//! Each CPU's [`CpuTlb`] holds:
//!
//! - **a TLB model**: up to `tlb_entries` leaf entries, each mapping one
//!   naturally aligned VA range of 4 KiB, 64 KiB (contiguous PTEs), 2 MiB
//!   (PMD block), 32 MiB (contiguous PMDs) or 1 GiB (PUD block) to a PA, with
//!   permissions and either the global tag or an ASID. It is set associative,
//!   like the Neoverse N1's L2 TLB whose 1280 entries are 5-way: the entries
//!   are split into a power-of-two number of sets of about [`TLB_WAYS`] ways
//!   ([`TlbGeometry`]), and an entry of size `2^shift` at `va` can only live
//!   in set `(va >> shift) & (sets - 1)`. A lookup probes, for each size
//!   that has entries, the ways of the one set its VA indexes at that size.
//!   Replacement within a set is bit-PLRU: a hit or a fill marks its way
//!   used; when that marks every way of the set, the others are cleared; a
//!   fill into a full set replaces its first way not marked. It is
//!   deterministic: the same fills and lookups evict the same entries.
//! - **a soft-MMU cache** in the manner of QEMU's softmmu TLB: 256 direct-mapped
//!   slots indexed by `(va >> 12) & 255`, each a 4 KiB translation (tag word
//!   and data word, two `AtomicU64`). [`CpuTlb::fast_lookup`] is a load, two compares,
//!   a load and a mask, without a lock.
//! - the CPU's TLBI counters and modelled TLBI time ([`TlbiStats`]).
//!
//! An invalidation ([`super::flush::tlbi`] on any CPU) removes from every
//! CPU's model and soft-MMU cache what the op's scope hits: by probing, for
//! each size that has entries, the sets the range indexes, when that visits
//! fewer sets than the TLB has, otherwise by scanning every slot.
//!
//! # Concurrency
//!
//! The model sits behind a per-CPU spinlock. Its owner is the only one that
//! fills it; a TLBI issued on any CPU takes every CPU's lock in turn to
//! invalidate, which is the broadcast. The soft-MMU slots are written only
//! under that same lock (fills by the owner, invalidations by anyone), and
//! read by the owner only ([`CpuTlb::fast_lookup`] and [`CpuTlb::fast_fill`] take the owner's
//! [`ArchCpu`](crate::arch::arm64::cpu::ArchCpu) handle, which is unique and not `Sync`). A fill writes the tag
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
//! [`CpuTlb::fill_checked`] / [`CpuTlb::fast_fill`], which refuse under the lock if it
//! moved. This stands in for the architecture's guarantee that a walk started
//! before a TLBI completed cannot leave an entry behind.

use super::tlbi::{Scope, TlbiStats, VPN44_MASK, sign_extend};
use crate::addr::{PAGE_SHIFT, PAGE_SIZE};
use crate::sync::SpinLock;
use std::fmt;
use std::ops::{Add, Range};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

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
    Misaligned {
        /// First VA of the entry.
        va: u64,
        /// First PA of the entry.
        pa: u64,
        /// Its size.
        size: u64,
    },
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
    ///
    /// # Errors
    ///
    /// [`TlbEntryError::BadSize`] for a size other than 4K, 64K, 2M, 32M or 1G;
    /// [`TlbEntryError::Misaligned`] if `va` or `pa` is not aligned to it.
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
    fn key(&self) -> u64 {
        slot_key(self.va, usize::from(self.class), self.tag())
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

/// Ways per set the geometry aims for: the Neoverse N1's L2 TLB, whose 1280
/// entries (the default `tlb_entries`) are 5-way set associative (Arm
/// Cortex-A76 TRM, table A5-1 "TLBs and TLB caches in the MMU"; the N1 is
/// the A76's server derivative and keeps its MMU).
pub const TLB_WAYS: usize = 5;

/// How a TLB model of some capacity is organised. `sets` is a power of two;
/// an entry of size `2^shift` at `va` lives in set `(va >> shift) &
/// (sets - 1)`, as hardware indexes by the low bits of the page number at
/// each page size it holds. The first `extra` sets have `ways + 1` ways, the
/// others `ways`, so that every entry of the capacity is used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbGeometry {
    /// Number of sets (a power of two; 0 for a TLB that caches nothing).
    pub sets: usize,
    /// Ways of every set.
    pub ways: usize,
    /// Sets, from set 0, that have one way more.
    pub extra: usize,
}

impl TlbGeometry {
    /// The geometry of a `capacity`-entry TLB: the largest power-of-two set
    /// count that leaves at least [`TLB_WAYS`] ways per set (one set if the
    /// capacity is smaller), the capacity spread over them. 1280 entries
    /// give 256 sets of 5 ways; 48 give 8 sets of 6.
    pub fn for_capacity(capacity: usize) -> TlbGeometry {
        if capacity == 0 {
            return TlbGeometry::default();
        }
        let target = (capacity / TLB_WAYS).max(1);
        let sets = 1usize << (usize::BITS - 1 - target.leading_zeros());
        TlbGeometry { sets, ways: capacity / sets, extra: capacity % sets }
    }
    /// Entries it holds.
    pub fn capacity(&self) -> usize {
        self.sets * self.ways + self.extra
    }
    /// The slots of set `s`, set-major.
    #[inline]
    fn set_slots(&self, s: usize) -> Range<usize> {
        let start = s * self.ways + s.min(self.extra);
        start..start + self.ways + usize::from(s < self.extra)
    }
    /// The set that page number `vfn` (at some size) indexes.
    #[inline]
    fn set_of_vfn(&self, vfn: u64) -> usize {
        (vfn as usize) & (self.sets - 1)
    }
    /// The set of slot `i` and its way in that set (the inverse of
    /// [`set_slots`](Self::set_slots)).
    fn set_and_way(&self, i: usize) -> (usize, usize) {
        let wide = self.extra * (self.ways + 1);
        if i < wide {
            (i / (self.ways + 1), i % (self.ways + 1))
        } else {
            (self.extra + (i - wide) / self.ways, (i - wide) % self.ways)
        }
    }
}

/// A slot's key: `VA[55:12]` of the entry's first page in bits 63:20, its
/// size class plus one in bits 19:17, and the index tag (global bit 16 or
/// the ASID in 15:0) below; 0 for an empty slot. One compare per way.
#[inline(always)]
fn slot_key(first_va: u64, class: usize, tag: u32) -> u64 {
    ((first_va >> PAGE_SHIFT) & VPN44_MASK) << 20 | (class as u64 + 1) << 17 | u64::from(tag)
}

/// The locked part of a [`CpuTlb`].
#[derive(Debug, Default)]
struct Model {
    geo: TlbGeometry,
    /// `geo.capacity()` slots, set-major; allocated by the first fill.
    slots: Vec<Option<TlbEntry>>,
    /// Each slot's [`slot_key`], 0 if empty.
    keys: Vec<u64>,
    /// The bit-PLRU "used" bits of each set, bit `w` for way `w` (a set has
    /// at most 10 ways: [`TlbGeometry::for_capacity`]).
    used: Vec<u16>,
    per_class: [u32; NR_CLASSES],
    /// Bit `c` set while `per_class[c]` is not 0: the classes a lookup
    /// probes.
    classes: u8,
    live: u32,
    counts: TlbCounts,
    /// Valid soft-MMU slots, and those caching part of an entry > 4 KiB.
    fast_valid: u32,
    fast_large: u32,
}

impl Model {
    fn new(capacity: usize) -> Model {
        Model { geo: TlbGeometry::for_capacity(capacity), ..Model::default() }
    }

    /// Bit-PLRU: mark way `w` of set `set` used; when that makes every way
    /// of the set used, clear the others, so that a set always has a way
    /// not recently used to replace.
    #[inline]
    fn touch(&mut self, set: usize, ways: usize, w: usize) {
        let u = self.used[set] | 1 << w;
        self.used[set] = if u == (1 << ways) - 1 { 1 << w } else { u };
    }

    fn lookup(&mut self, va: u64, asid: u16) -> Option<TlbEntry> {
        let mut classes = self.classes;
        while classes != 0 {
            let class = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            let shift = TLB_SIZE_SHIFTS[class];
            let set = self.geo.set_of_vfn(va >> shift);
            let slots = self.geo.set_slots(set);
            let global = slot_key(va & !((1 << shift) - 1), class, GLOBAL_TAG);
            let own = global ^ u64::from(GLOBAL_TAG) | u64::from(asid);
            let (start, ways) = (slots.start, slots.len());
            if let Some(w) = self.keys[slots].iter().position(|&k| k == global || k == own) {
                self.touch(set, ways, w);
                self.counts.hits += 1;
                return self.slots[start + w];
            }
        }
        self.counts.misses += 1;
        None
    }

    fn fill(&mut self, e: TlbEntry) {
        if self.geo.sets == 0 {
            return;
        }
        if self.slots.is_empty() {
            self.slots = vec![None; self.geo.capacity()];
            self.keys = vec![0; self.geo.capacity()];
            self.used = vec![0; self.geo.sets];
        }
        self.counts.fills += 1;
        let set = self.geo.set_of_vfn(e.va >> e.shift());
        let slots = self.geo.set_slots(set);
        let (start, ways) = (slots.start, slots.len());
        let key = e.key();
        let keys = &self.keys[slots];
        if let Some(w) = keys.iter().position(|&k| k == key) {
            self.slots[start + w] = Some(e);
            self.touch(set, ways, w);
            return;
        }
        // An empty way, else the first way not recently used (`touch`
        // keeps one; a one-way set replaces its only way).
        let w = match keys.iter().position(|&k| k == 0) {
            Some(w) => w,
            None => {
                let free = !self.used[set] & ((1 << ways) - 1);
                let w = if free == 0 { 0 } else { free.trailing_zeros() as usize };
                self.drop_slot(start + w, set, w);
                self.counts.evictions += 1;
                w
            }
        };
        self.slots[start + w] = Some(e);
        self.keys[start + w] = key;
        let class = usize::from(e.class);
        self.per_class[class] += 1;
        self.classes |= 1 << class;
        self.live += 1;
        self.touch(set, ways, w);
    }

    /// Empty slot `i`, way `w` of set `set`, if it holds an entry.
    #[inline]
    fn drop_slot(&mut self, i: usize, set: usize, w: usize) {
        let key = self.keys[i];
        if key == 0 {
            return;
        }
        self.slots[i] = None;
        self.keys[i] = 0;
        let class = ((key >> 17) & 7) as usize - 1;
        self.per_class[class] -= 1;
        if self.per_class[class] == 0 {
            self.classes &= !(1 << class);
        }
        self.live -= 1;
        self.used[set] &= !(1 << w);
    }

    fn remove(&mut self, i: usize) {
        let (set, w) = self.geo.set_and_way(i);
        self.drop_slot(i, set, w);
    }

    fn invalidate(&mut self, scope: Scope) {
        if self.live == 0 {
            return;
        }
        match scope {
            Scope::All => {
                self.counts.invalidated += u64::from(self.live);
                self.slots.fill(None);
                self.keys.fill(0);
                self.used.fill(0);
                self.per_class = [0; NR_CLASSES];
                self.classes = 0;
                self.live = 0;
            }
            Scope::Asid(_) => self.invalidate_by_scan(scope),
            Scope::Range { start, last, .. } => {
                // An entry the range hits lives in a set the range indexes
                // at the entry's size: probe those sets, size by size, when
                // that visits fewer sets than the TLB has; else scan.
                let present = self.per_class.map(|n| n != 0);
                let shifts = || TLB_SIZE_SHIFTS.iter().zip(present).filter_map(|(&s, p)| p.then_some(s));
                let blocks = |shift: u32| ((last >> shift).saturating_sub(start >> shift)).saturating_add(1);
                if shifts().fold(0u64, |n, shift| n.saturating_add(blocks(shift))) >= self.geo.sets as u64 {
                    return self.invalidate_by_scan(scope);
                }
                for shift in shifts() {
                    for vfn in start >> shift..=last >> shift {
                        let set = self.geo.set_of_vfn(vfn);
                        for (w, i) in self.geo.set_slots(set).enumerate() {
                            if self.slots[i].is_some_and(|e| e.hit_by(scope)) {
                                self.drop_slot(i, set, w);
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
    model: SpinLock<Model>,
    fast: [FastSlot; FAST_SLOTS],
    generation: AtomicU64,
    /// TLBIs issued by this CPU.
    pub(super) tlbi: TlbiStats,
}

impl fmt::Debug for CpuTlb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuTlb")
            .field("geometry", &self.geometry())
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
            model: SpinLock::new(Model::new(capacity)),
            fast: std::array::from_fn(|_| FastSlot::default()),
            generation: AtomicU64::new(0),
            tlbi: TlbiStats::default(),
        }
    }
    /// Entries it can hold (its geometry's; the capacity it was made with).
    pub fn capacity(&self) -> usize {
        self.geometry().capacity()
    }

    /// Look `va` up for `asid` (global entries match any ASID), counting a
    /// hit or a miss; a hit marks the entry referenced. Mirrors what the
    /// hardware does on every access; of 5 size classes only those holding
    /// entries are probed, smallest first.
    pub fn lookup(&self, va: u64, asid: u16) -> Option<TlbEntry> {
        self.model.lock().lookup(va, asid)
    }

    /// Cache `e`, replacing by bit-PLRU if its set is full. Only the owning
    /// CPU fills.
    pub fn fill(&self, e: TlbEntry) {
        self.model.lock().fill(e)
    }

    /// Cache `e` unless an invalidation reached this CPU since
    /// [`generation`](Self::generation) returned `gen` (the walk that found
    /// `e` may have raced with a TLBI). Returns whether it was cached.
    pub fn fill_checked(&self, e: TlbEntry, generation: u64) -> bool {
        let mut m = self.model.lock();
        if self.generation.load(Relaxed) != generation {
            return false;
        }
        m.fill(e);
        true
    }

    /// Invalidation epoch: bumped by every TLBI that reaches this CPU. Read
    /// it before a walk whose result will be filled.
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// How its entries are organised.
    pub fn geometry(&self) -> TlbGeometry {
        self.model.lock().geo
    }

    /// The cached entries, by VA, then size, then ASID (global first).
    pub fn entries(&self) -> Vec<TlbEntry> {
        let mut v: Vec<TlbEntry> = self.model.lock().slots.iter().flatten().copied().collect();
        v.sort_unstable_by_key(|e| (e.va, e.class, e.asid));
        v
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
    /// writable. No lock, no counting. Owner only (see [`CpuTlb::fast_lookup`]).
    #[inline(always)]
    pub fn fast_lookup(&self, va: u64, asid: u16, write: bool) -> Option<u64> {
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

    /// [`fill_checked`](Self::fill_checked), then, if `fast_va` is given
    /// and `e` was cached, the soft-MMU fill of [`CpuTlb::fast_fill`] for the page
    /// of `fast_va`, under one hold of the model's lock (a TLB miss of a
    /// kernel access takes it once here, not twice). Returns whether `e` was
    /// cached. Owner only.
    pub fn fill_checked_fast(&self, e: TlbEntry, generation: u64, fast_va: Option<u64>) -> bool {
        let mut m = self.model.lock();
        if self.generation.load(Relaxed) != generation {
            return false;
        }
        m.fill(e);
        if let Some(va) = fast_va
            && let Some(pa) = e.translate(va)
        {
            self.fast_fill_locked(&mut m, va, pa, &e);
        }
        true
    }

    /// Soft-MMU fill from `e` for the page of `va`; owner only.
    pub fn fast_fill(&self, va: u64, e: &TlbEntry, generation: u64) -> bool {
        let Some(pa) = e.translate(va) else { return false };
        let mut m = self.model.lock();
        if self.generation.load(Relaxed) != generation {
            return false;
        }
        self.fast_fill_locked(&mut m, va, pa, e);
        true
    }

    /// The soft-MMU slot of `va` set to `pa` (its translation by `e`),
    /// under the model's lock.
    fn fast_fill_locked(&self, m: &mut Model, va: u64, pa: u64, e: &TlbEntry) {
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
    }

    /// Drop everything `scope` hits, in the model and the soft-MMU cache.
    pub(super) fn invalidate(&self, scope: Scope) {
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
mod geometry_tests {
    use super::TlbGeometry;

    #[test]
    fn set_and_way_inverts_set_slots_and_sets_fit_the_plru_bits() {
        for capacity in (1..3000).chain([1 << 16, 1_000_003, 1 << 20]) {
            let g = TlbGeometry::for_capacity(capacity);
            let mut next = 0;
            for s in 0..g.sets {
                let slots = g.set_slots(s);
                assert!(slots.len() <= 10, "capacity {capacity}: {} ways in set {s}", slots.len());
                assert_eq!(slots.start, next, "capacity {capacity}: sets tile the slots");
                for (w, i) in slots.clone().enumerate() {
                    assert_eq!(g.set_and_way(i), (s, w), "capacity {capacity}, slot {i}");
                }
                next = slots.end;
            }
            assert_eq!(next, capacity);
        }
    }
}
