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
pub mod map;
pub mod mmu;
pub mod ptdump;
pub mod walk;

pub use desc::{Desc, DescKind, Level, PgProt};
pub use map::*;
pub use walk::*;

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::ishst;
use crate::arch::arm64::tlb::TlbFlush;
use crate::kernel::cpu::Cpu;
use crate::machine::Machine;
use crate::mm::vmstat::VmEvent;
use desc::PTRS_PER_TABLE;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Per-CPU lazy-MMU state: `TIF_LAZY_MMU` and `TIF_LAZY_MMU_PENDING`.
/// Only the owning CPU's thread touches it.
#[derive(Debug, Default)]
pub struct LazyMmu {
    pub(crate) active: AtomicBool,
    pub(crate) pending: AtomicBool,
}

/// Errors of table operations. Nothing is written when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgtableError {
    /// A live entry would change in a way that needs break-before-make.
    BreakBeforeMake {
        /// Address of the entry.
        entry: PhysAddr,
        /// The live descriptor.
        old: Desc,
        /// The refused descriptor.
        new: Desc,
    },
    /// A contiguous run whose VA or PA is not aligned to the run size, or
    /// which is not 16 entries inside one table.
    ContAlignment {
        /// First VA of the run.
        va: u64,
        /// First PA of the run.
        pa: u64,
        /// Bytes the run maps (64 KiB or 32 MiB).
        size: u64,
    },
    /// The range is empty, unaligned to pages, or wraps.
    BadRange {
        /// Start of the range.
        va: u64,
        /// Its length in bytes.
        size: u64,
    },
    /// No memory for a table page.
    NoMemory,
    /// Unmapping part of a block or contiguous run (it would need a split).
    PartialHugeUnmap {
        /// An address of the block or run that would be cut.
        va: u64,
        /// The level of its entries.
        level: Level,
    },
    /// The range is not in this address space's half of the VA space: a
    /// user (TTBR0) address in the kernel's tables, or a kernel (TTBR1)
    /// address in a user space's. The table index bits alone would alias
    /// it to an address of the other half.
    OutsideAddressSpace {
        /// Start of the range.
        va: u64,
        /// Its length in bytes.
        size: u64,
        /// The address space is the kernel's.
        kernel: bool,
    },
    /// A table descriptor whose next-level table is not a page of RAM:
    /// mmlab keeps every table in its arena and cannot walk one elsewhere.
    TableOutsideRam {
        /// Address of the table descriptor.
        entry: PhysAddr,
        /// The next-level table address it holds.
        table: PhysAddr,
    },
    /// The descriptor address itself is not an aligned word of RAM.
    SlotOutsideRam {
        /// The descriptor address asked for.
        entry: PhysAddr,
    },
}

impl std::fmt::Display for PgtableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgtableError::BreakBeforeMake { entry, old, new } => write!(
                f,
                "unsafe live change of the entry at {entry}: {:#018x} -> {:#018x} needs break-before-make",
                old.0, new.0
            ),
            PgtableError::ContAlignment { va, pa, size } => {
                write!(f, "contiguous run at va {va:#x} pa {pa:#x} is not aligned to {size:#x}")
            }
            PgtableError::BadRange { va, size } => write!(f, "bad range {va:#x}+{size:#x}"),
            PgtableError::NoMemory => write!(f, "out of memory for a page-table page"),
            PgtableError::PartialHugeUnmap { va, level } => {
                write!(f, "unmapping part of a {} block or contiguous run at {va:#x}", level.name())
            }
            PgtableError::OutsideAddressSpace { va, size, kernel } => {
                let (which, other) = if *kernel { ("kernel (TTBR1)", "user") } else { ("user (TTBR0)", "kernel") };
                write!(
                    f,
                    "range {va:#x}+{size:#x} is outside the {which} half of the address space (a {other} address?)"
                )
            }
            PgtableError::TableOutsideRam { entry, table } => {
                write!(f, "table descriptor at {entry} points at {table}, which is not a page of RAM")
            }
            PgtableError::SlotOutsideRam { entry } => {
                write!(f, "descriptor address {entry} is not an aligned word of RAM")
            }
        }
    }
}
impl std::error::Error for PgtableError {}

/// Where table pages come from.
pub trait PgtableAlloc<'m> {
    /// A zeroed page for a table, or None.
    fn alloc_table(&self, cpu: &Cpu<'m>) -> Option<PhysAddr>;
    /// Give a table page back.
    fn free_table(&self, cpu: &Cpu<'m>, pa: PhysAddr);
}

/// `early_pgtable_alloc()`: table pages from memblock, during boot.
#[derive(Debug, Clone, Copy)]
pub struct MemblockTables;

impl<'m> PgtableAlloc<'m> for MemblockTables {
    fn alloc_table(&self, cpu: &Cpu<'m>) -> Option<PhysAddr> {
        cpu.machine().early_table_page().ok()
    }
    fn free_table(&self, _cpu: &Cpu<'m>, _pa: PhysAddr) {
        // memblock_free of a boot table: the page stays reserved (simplified).
    }
}

/// A translation granule. Only [`Granule4K`] is implemented; the granule is
/// a type parameter of [`AddressSpace`] so that 16K and 64K can be added
/// without changing callers' types.
pub trait Granule: Copy + std::fmt::Debug + PartialEq + Eq + 'static {
    /// log2 of the granule.
    const SHIFT: u32;
    /// Entries per table (granule / 8 bytes).
    const PTRS_PER_TABLE: usize = 1 << (Self::SHIFT - 3);
}

/// The 4 KiB granule (`CONFIG_ARM64_4K_PAGES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Granule4K;

impl Granule for Granule4K {
    const SHIFT: u32 = 12;
}

/// A translation regime: a root table and, for user spaces, an ASID.
/// The granule and the VA size are in the type (`AddressSpace<Granule4K,
/// 48>` is the default and the only one implemented: 4 levels, p4d folded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressSpace<G: Granule = Granule4K, const VA_BITS: u32 = 48> {
    pgd: PhysAddr,
    asid: Option<u16>,
    _granule: std::marker::PhantomData<G>,
}

impl AddressSpace {
    /// The kernel's address space (`init_mm`, `swapper_pg_dir`).
    pub const fn kernel(pgd: PhysAddr) -> AddressSpace {
        AddressSpace { pgd, asid: None, _granule: std::marker::PhantomData }
    }
    /// A user address space with its ASID.
    pub const fn user(pgd: PhysAddr, asid: u16) -> AddressSpace {
        AddressSpace { pgd, asid: Some(asid), _granule: std::marker::PhantomData }
    }
    /// `mm_alloc()` + `pgd_alloc()`: a new user address space with an empty
    /// root table from `alloc`.
    ///
    /// # Errors
    ///
    /// [`PgtableError::NoMemory`] if `alloc` has no page for the root table.
    pub fn alloc_user<'m>(
        cpu: &Cpu<'m>,
        alloc: &dyn PgtableAlloc<'m>,
        asid: u16,
    ) -> Result<AddressSpace, PgtableError> {
        let pgd = alloc.alloc_table(cpu).ok_or(PgtableError::NoMemory)?;
        Ok(AddressSpace::user(pgd, asid))
    }
    /// `VA_BITS` of this regime.
    pub const fn va_bits(&self) -> u32 {
        48
    }
    /// The root table.
    pub const fn pgd(&self) -> PhysAddr {
        self.pgd
    }
    /// The ASID (None: the kernel's, global entries).
    pub const fn asid(&self) -> Option<u16> {
        self.asid
    }
    /// Whether `[va, last]` (`va <= last`) lies in this space's half of the
    /// VA space: `[-2^VA_BITS, 2^64)` for the kernel's (TTBR1), `[0,
    /// 2^VA_BITS)` for a user space (TTBR0). Addresses between the halves
    /// would fault on hardware (translation fault at level 0, as for
    /// TCR.TxSZ); the table index bits alone would alias them.
    pub const fn covers(&self, va: u64, last: u64) -> bool {
        let span = 1u64 << self.va_bits();
        match self.asid {
            None => va >= span.wrapping_neg() && last >= va,
            Some(_) => last < span && last >= va,
        }
    }
    /// [`AddressSpace::covers`] as a typed error for `[va, va + size)`
    /// (`size` > 0, not wrapping: checked before).
    fn check_covers(&self, va: u64, size: u64) -> Result<(), PgtableError> {
        if self.covers(va, va + (size - 1)) {
            Ok(())
        } else {
            Err(PgtableError::OutsideAddressSpace { va, size, kernel: self.asid.is_none() })
        }
    }
    /// Attributes of table descriptors in this space.
    const fn table_attrs(&self) -> u64 {
        match self.asid {
            None => desc::KERNEL_TABLE,
            Some(_) => desc::USER_TABLE,
        }
    }
    /// The TLB maintenance a change of `[start, end)` in this space needs.
    fn flush_for(&self, start: u64, end: u64) -> TlbFlush {
        match self.asid {
            None => TlbFlush::kernel_range(start, end),
            Some(asid) => TlbFlush::user_range(asid, start, end, PAGE_SIZE, true),
        }
    }
}

/// `emit_pte_barriers()`: `dsb ishst; isb`.
#[inline]
pub fn emit_pte_barriers(cpu: &Cpu<'_>) {
    cpu.dsb(ishst);
    cpu.isb();
}

/// `queue_pte_barriers()`: emit now, or mark the pair pending inside a
/// lazy-MMU section (`set_thread_flag(TIF_LAZY_MMU_PENDING)`, an atomic the
/// kernel skips when the flag is already set).
#[inline]
pub fn queue_pte_barriers(cpu: &Cpu<'_>) {
    let lazy = &cpu.data().lazy_mmu;
    if lazy.pending.load(Relaxed) {
        return;
    }
    if lazy.active.load(Relaxed) {
        lazy.pending.store(true, Relaxed);
        cpu.count(VmEvent::LazyMmuFlagOps, 1);
    } else {
        emit_pte_barriers(cpu);
    }
}

/// `arch_enter_lazy_mmu_mode()`: `set_thread_flag(TIF_LAZY_MMU)`. With
/// `lazy_mmu_barrier_batching` off (the kernel before 6.16, where arm64 had
/// no lazy-MMU hooks) the section does nothing.
#[inline]
pub fn arch_enter_lazy_mmu_mode(cpu: &Cpu<'_>) {
    if cpu.machine().config().lazy_mmu_barrier_batching {
        cpu.data().lazy_mmu.active.store(true, Relaxed);
        cpu.count(VmEvent::LazyMmuFlagOps, 1);
    }
}

/// `arch_flush_lazy_mmu_mode()`: issue the pending pair, if any
/// (`test_and_clear_thread_flag(TIF_LAZY_MMU_PENDING)`: a plain read when
/// the flag is clear, an atomic when it is set).
#[inline]
pub fn arch_flush_lazy_mmu_mode(cpu: &Cpu<'_>) {
    let lazy = &cpu.data().lazy_mmu;
    if lazy.pending.load(Relaxed) {
        lazy.pending.store(false, Relaxed);
        cpu.count(VmEvent::LazyMmuFlagOps, 1);
        emit_pte_barriers(cpu);
    }
}

/// `arch_leave_lazy_mmu_mode()`: flush, then end the section (for any
/// enclosing section too: the kernel does not count nesting) with
/// `clear_thread_flag(TIF_LAZY_MMU)`.
#[inline]
pub fn arch_leave_lazy_mmu_mode(cpu: &Cpu<'_>) {
    arch_flush_lazy_mmu_mode(cpu);
    if cpu.machine().config().lazy_mmu_barrier_batching {
        cpu.data().lazy_mmu.active.store(false, Relaxed);
        cpu.count(VmEvent::LazyMmuFlagOps, 1);
    }
}

impl Machine {
    /// The descriptor slot at physical address `pa` (8-byte aligned, in RAM).
    #[inline]
    pub fn desc_slot(&self, pa: PhysAddr) -> &AtomicU64 {
        self.arena().word(pa)
    }
    /// `READ_ONCE(*ptep)`.
    #[inline]
    pub fn read_desc(&self, pa: PhysAddr) -> Desc {
        Desc(self.desc_slot(pa).load(Relaxed))
    }
    /// The 512 slots of the table at `table`.
    #[inline]
    pub fn table(&self, table: PhysAddr) -> &[AtomicU64] {
        self.arena().slice::<AtomicU64>(table, PTRS_PER_TABLE)
    }
}

/// Address of entry `index` of the table at `table`.
#[inline]
pub const fn entry_pa(table: PhysAddr, index: usize) -> PhysAddr {
    PhysAddr(table.0 + index as u64 * 8)
}

/// The descriptor word at `slot`, or [`PgtableError::SlotOutsideRam`] for
/// an address the caller made up.
#[inline(always)]
fn slot_word(m: &Machine, slot: PhysAddr) -> Result<&AtomicU64, PgtableError> {
    m.arena().try_word(slot).ok_or(PgtableError::SlotOutsideRam { entry: slot })
}

/// Check a write against the live entry (`__check_safe_pte_update`).
#[inline]
fn check_bbm(m: &Machine, slot: PhysAddr, new: Desc) -> Result<(), PgtableError> {
    check_word(slot_word(m, slot)?, slot, new)
}

/// A table descriptor written at `level` must point at a page of RAM: the
/// next walk reads its entries from the arena. (A leaf may point anywhere:
/// device memory and other non-RAM output addresses are legitimate, as
/// with `ioremap`; an access through such a leaf is a
/// [`mmu::FaultKind::ExternalAbort`].)
#[inline(always)]
fn check_table_in_ram(m: &Machine, slot: PhysAddr, d: Desc, level: Level) -> Result<(), PgtableError> {
    if d.kind(level) == DescKind::Table && !m.arena().contains(PhysAddr(d.addr()), PAGE_SIZE) {
        return Err(PgtableError::TableOutsideRam { entry: slot, table: PhysAddr(d.addr()) });
    }
    Ok(())
}

/// [`check_bbm`] on a slot already looked up.
#[inline(always)]
fn check_word(word: &AtomicU64, slot: PhysAddr, new: Desc) -> Result<(), PgtableError> {
    let old = Desc(word.load(Relaxed));
    if desc::pgattr_change_is_safe(old.0, new.0) {
        Ok(())
    } else {
        Err(PgtableError::BreakBeforeMake { entry: slot, old, new })
    }
}

/// `__set_pte()`: write one PTE; a valid kernel PTE is followed by the
/// barrier pair (or marks it pending in a lazy-MMU section).
///
/// The output address may lie outside RAM (device memory); `ptep` itself
/// must be a descriptor word in RAM, else [`PgtableError::SlotOutsideRam`].
///
/// # Errors
///
/// [`PgtableError::SlotOutsideRam`] if `ptep` is not a word of RAM;
/// [`PgtableError::BreakBeforeMake`] for an unsafe change of a live entry. Nothing is written then.
#[inline]
pub fn set_pte(cpu: &Cpu<'_>, ptep: PhysAddr, pte: Desc) -> Result<(), PgtableError> {
    let word = slot_word(cpu.machine(), ptep)?;
    check_word(word, ptep, pte)?;
    word.store(pte.0, Relaxed);
    if pte.valid_not_user() {
        queue_pte_barriers(cpu);
    }
    Ok(())
}

/// `__set_pte_nosync()`: write one PTE with no barriers; the caller
/// publishes a batch of them with its own (Linux 6.10's `init_pte()`,
/// "Batch dsb and isb when populating pgtables").
///
/// # Errors
///
/// As [`set_pte`]; nothing is written then.
#[inline]
pub fn set_pte_nosync(cpu: &Cpu<'_>, ptep: PhysAddr, pte: Desc) -> Result<(), PgtableError> {
    let word = slot_word(cpu.machine(), ptep)?;
    check_word(word, ptep, pte)?;
    word.store(pte.0, Relaxed);
    Ok(())
}

/// A PTE table looked up once (`pte_offset_kernel()`), so that a loop over
/// its entries, as `vmap_pte_range()` runs one, pays no per-entry lookup.
#[derive(Clone, Copy, Debug)]
pub struct PteTable<'m> {
    pa: PhysAddr,
    slots: &'m [AtomicU64],
}

impl<'m> PteTable<'m> {
    /// The table at `pa` (a page of RAM).
    pub fn new(m: &'m Machine, pa: PhysAddr) -> PteTable<'m> {
        PteTable { pa, slots: m.table(pa) }
    }
    /// The table's physical address.
    pub fn pa(&self) -> PhysAddr {
        self.pa
    }
    /// Entry `i`, read once.
    #[inline]
    pub fn get(&self, i: usize) -> Desc {
        Desc(self.slots[i].load(Relaxed))
    }
    /// [`set_pte`] on entry `i`.
    ///
    /// # Errors
    ///
    /// [`PgtableError::BreakBeforeMake`] for an unsafe change of a live entry.
    #[inline]
    pub fn set_pte(&self, cpu: &Cpu<'_>, i: usize, pte: Desc) -> Result<(), PgtableError> {
        let word = &self.slots[i];
        check_word(word, entry_pa(self.pa, i), pte)?;
        word.store(pte.0, Relaxed);
        if pte.valid_not_user() {
            queue_pte_barriers(cpu);
        }
        Ok(())
    }
    /// [`ptep_get_and_clear`] on entry `i`.
    #[inline]
    pub fn get_and_clear(&self, i: usize) -> Desc {
        Desc(self.slots[i].swap(0, Relaxed))
    }
}

/// `__set_ptes_anysz()`: write `nr` entries from `ptep`, the output address
/// advancing by `pgsize` per entry, then one barrier pair for the last.
/// All entries are checked before any is written (the slots must be words
/// of RAM; the output addresses may lie anywhere, see [`set_pte`]).
///
/// # Errors
///
/// As [`set_pte`], for any of the `nr` entries; nothing is written then.
pub fn set_ptes(cpu: &Cpu<'_>, ptep: PhysAddr, pte: Desc, nr: usize, pgsize: u64) -> Result<(), PgtableError> {
    let m = cpu.machine();
    if nr == 0 {
        return Ok(());
    }
    for i in 0..nr {
        check_bbm(m, PhysAddr(ptep.0 + 8 * i as u64), Desc(pte.0 + i as u64 * pgsize))?;
    }
    for i in 0..nr {
        m.desc_slot(PhysAddr(ptep.0 + 8 * i as u64)).store(pte.0 + i as u64 * pgsize, Relaxed);
    }
    if Desc(pte.0 + (nr as u64 - 1) * pgsize).valid_not_user() {
        queue_pte_barriers(cpu);
    }
    Ok(())
}

/// `set_pmd()`: write; a valid entry (table or block) queues the barriers.
/// A table descriptor must point at a page of RAM
/// ([`PgtableError::TableOutsideRam`]); a block may map anything.
///
/// # Errors
///
/// [`PgtableError::TableOutsideRam`] for a table descriptor whose table is not a page of RAM;
/// [`PgtableError::SlotOutsideRam`] and [`PgtableError::BreakBeforeMake`] as [`set_pte`].
#[inline]
pub fn set_pmd(cpu: &Cpu<'_>, pmdp: PhysAddr, pmd: Desc) -> Result<(), PgtableError> {
    let m = cpu.machine();
    check_table_in_ram(m, pmdp, pmd, Level::Pmd)?;
    check_bbm(m, pmdp, pmd)?;
    m.desc_slot(pmdp).store(pmd.0, Relaxed);
    if pmd.is_valid() {
        queue_pte_barriers(cpu);
    }
    Ok(())
}

/// `set_pud()`: as [`set_pmd`].
///
/// # Errors
///
/// As [`set_pmd`].
#[inline]
pub fn set_pud(cpu: &Cpu<'_>, pudp: PhysAddr, pud: Desc) -> Result<(), PgtableError> {
    set_pmd(cpu, pudp, pud)
}

/// `set_pgd()` / `set_p4d()`: write; the barriers are queued unconditionally.
/// A table descriptor must point at a page of RAM, as for [`set_pmd`].
///
/// # Errors
///
/// As [`set_pmd`].
#[inline]
pub fn set_pgd(cpu: &Cpu<'_>, pgdp: PhysAddr, pgd: Desc) -> Result<(), PgtableError> {
    let m = cpu.machine();
    check_table_in_ram(m, pgdp, pgd, Level::Pgd)?;
    check_bbm(m, pgdp, pgd)?;
    m.desc_slot(pgdp).store(pgd.0, Relaxed);
    queue_pte_barriers(cpu);
    Ok(())
}

/// `__ptep_get_and_clear()`: an exchange with 0, no barriers.
#[inline]
pub fn ptep_get_and_clear(cpu: &Cpu<'_>, ptep: PhysAddr) -> Desc {
    Desc(cpu.machine().desc_slot(ptep).swap(0, Relaxed))
}

/// `pte_clear()` / `pmd_clear()`: write 0, no barriers.
#[inline]
pub fn pte_clear(cpu: &Cpu<'_>, ptep: PhysAddr) {
    cpu.machine().desc_slot(ptep).store(0, Relaxed);
}
