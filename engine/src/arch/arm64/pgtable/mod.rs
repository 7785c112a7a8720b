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
//! `#[must_use]` [`crate::tlb::TlbFlush`] that every change to a live
//! mapping returns.

pub mod desc;
pub mod mmu;

pub use desc::{Desc, DescKind, Level};

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::barrier::ishst;
use crate::cpu::Cpu;
use crate::machine::Machine;
use crate::tlb::TlbFlush;
use desc::bits::PTE_CONT;
use desc::{CONT_PMD_SIZE, CONT_PMDS, CONT_PTE_SIZE, CONT_PTES, PMD_SIZE, PTRS_PER_TABLE, PUD_SIZE};
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
    BreakBeforeMake { entry: PhysAddr, old: Desc, new: Desc },
    /// A contiguous run whose VA or PA is not aligned to the run size, or
    /// which is not 16 entries inside one table.
    ContAlignment { va: u64, pa: u64, size: u64 },
    /// The range is empty, unaligned to pages, or wraps.
    BadRange { va: u64, size: u64 },
    /// No memory for a table page.
    NoMemory,
    /// Unmapping part of a block or contiguous run (it would need a split).
    PartialHugeUnmap { va: u64, level: Level },
    /// The range is not in this address space's half of the VA space: a
    /// user (TTBR0) address in the kernel's tables, or a kernel (TTBR1)
    /// address in a user space's. The table index bits alone would alias
    /// it to an address of the other half.
    OutsideAddressSpace { va: u64, size: u64, kernel: bool },
    /// A table descriptor whose next-level table is not a page of RAM:
    /// mmlab keeps every table in its arena and cannot walk one elsewhere.
    TableOutsideRam { entry: PhysAddr, table: PhysAddr },
    /// The descriptor address itself is not an aligned word of RAM.
    SlotOutsideRam { entry: PhysAddr },
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
/// lazy-MMU section.
#[inline]
pub fn queue_pte_barriers(cpu: &Cpu<'_>) {
    let lazy = &cpu.data().lazy_mmu;
    if lazy.pending.load(Relaxed) {
        return;
    }
    if lazy.active.load(Relaxed) {
        lazy.pending.store(true, Relaxed);
    } else {
        emit_pte_barriers(cpu);
    }
}

/// `arch_enter_lazy_mmu_mode()`. With `lazy_mmu_barrier_batching` off (the
/// kernel before 6.16) the section does not defer anything.
#[inline]
pub fn arch_enter_lazy_mmu_mode(cpu: &Cpu<'_>) {
    if cpu.machine().config().lazy_mmu_barrier_batching {
        cpu.data().lazy_mmu.active.store(true, Relaxed);
    }
}

/// `arch_flush_lazy_mmu_mode()`: issue the pending pair, if any.
#[inline]
pub fn arch_flush_lazy_mmu_mode(cpu: &Cpu<'_>) {
    let lazy = &cpu.data().lazy_mmu;
    if lazy.pending.load(Relaxed) {
        lazy.pending.store(false, Relaxed);
        emit_pte_barriers(cpu);
    }
}

/// `arch_leave_lazy_mmu_mode()`: flush, then end the section (for any
/// enclosing section too: the kernel does not count nesting).
#[inline]
pub fn arch_leave_lazy_mmu_mode(cpu: &Cpu<'_>) {
    arch_flush_lazy_mmu_mode(cpu);
    cpu.data().lazy_mmu.active.store(false, Relaxed);
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
#[inline]
pub fn set_pud(cpu: &Cpu<'_>, pudp: PhysAddr, pud: Desc) -> Result<(), PgtableError> {
    set_pmd(cpu, pudp, pud)
}

/// `set_pgd()` / `set_p4d()`: write; the barriers are queued unconditionally.
/// A table descriptor must point at a page of RAM, as for [`set_pmd`].
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

/// How [`map_range`] may map a range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapFlags {
    /// Use PMD and PUD blocks where VA, PA and size allow (clear:
    /// `NO_BLOCK_MAPPINGS`).
    pub block: bool,
    /// Use contiguous runs where VA, PA and size allow (clear: `NO_CONT_MAPPINGS`).
    pub cont: bool,
}

/// Get the next-level table under the entry at `slot`, allocating and
/// installing one if the entry is empty (`__pte_alloc_kernel`,
/// `pmd_populate_kernel`, `pud_populate`): the new table's descriptor is
/// written at once, with its barriers.
fn table_below<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<'m>,
    slot: PhysAddr,
    level: Level,
) -> Result<PhysAddr, PgtableError> {
    table_below_tracked(cpu, asp, alloc, slot, level).map(|(t, _)| t)
}

/// [`table_below`], also telling whether this call installed the table.
fn table_below_tracked<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<'m>,
    slot: PhysAddr,
    level: Level,
) -> Result<(PhysAddr, bool), PgtableError> {
    let m = cpu.machine();
    let d = m.read_desc(slot);
    match d.kind(level) {
        DescKind::Table => Ok((PhysAddr(d.addr()), false)),
        DescKind::Invalid => {
            // __pte_alloc_kernel(): allocate outside the lock, then install
            // only if the slot is still empty (the kernel re-checks under
            // init_mm.page_table_lock; a compare-and-exchange is that check
            // and the store in one). A CPU that loses the race frees its
            // table and uses the winner's.
            let t = alloc.alloc_table(cpu).ok_or(PgtableError::NoMemory)?;
            let new = Desc::table(t.0, asp.table_attrs());
            match m.desc_slot(slot).compare_exchange(0, new.0, Relaxed, Relaxed) {
                Ok(_) => {
                    // set_pgd queues its barriers unconditionally, set_pud/set_pmd
                    // for a valid entry: either way one queued pair.
                    queue_pte_barriers(cpu);
                    Ok((t, true))
                }
                Err(now) => {
                    alloc.free_table(cpu, t);
                    match Desc(now).kind(level) {
                        DescKind::Table => Ok((PhysAddr(Desc(now).addr()), false)),
                        _ => Err(PgtableError::BreakBeforeMake { entry: slot, old: Desc(now), new }),
                    }
                }
            }
        }
        _ => Err(PgtableError::BreakBeforeMake { entry: slot, old: d, new: Desc::table(0, asp.table_attrs()) }),
    }
}

/// Before a block goes into `slot`: if it holds a table whose entries are
/// all empty, take the table out and free it, as `pmd_free_pte_page()` /
/// `pud_free_pmd_page()` do (clear the entry, `__flush_tlb_kernel_pgtable`
/// so no walk cache keeps it, free the page). Returns false if the slot
/// holds a table that still maps something: the caller then maps at the
/// next level down instead, as `vmap_try_huge_pmd()` falls back.
///
/// With `defer`, the table page is not freed but recorded, so that
/// [`map_range`] can put it back if it fails later.
fn free_empty_table_for_block<'m>(
    cpu: &Cpu<'m>,
    alloc: &dyn PgtableAlloc<'m>,
    slot: PhysAddr,
    level: Level,
    va: u64,
    defer: Option<&mut MapUndo>,
) -> bool {
    let m = cpu.machine();
    let d = m.read_desc(slot);
    if d.kind(level) != DescKind::Table {
        return true;
    }
    let table = PhysAddr(d.addr());
    if m.table(table).iter().any(|e| e.load(Relaxed) & desc::bits::PTE_VALID != 0) {
        return false;
    }
    pte_clear(cpu, slot);
    TlbFlush::kernel_pgtable(va).flush(cpu);
    match defer {
        Some(undo) => undo.log.push(Undo::Detached { slot, old: d, table }),
        None => alloc.free_table(cpu, table),
    }
    true
}

/// One change [`map_range`] made, in the order made.
#[derive(Debug)]
enum Undo {
    /// `n` entries from `slot` written; their values before (None: all 0).
    Written { slot: PhysAddr, n: usize, old: Option<Vec<u64>> },
    /// A table allocated and installed in the empty entry at `slot`, for
    /// addresses from `va`.
    NewTable { slot: PhysAddr, table: PhysAddr, va: u64 },
    /// An empty table taken out of `slot` (which held `old`) for a block;
    /// its page is freed only when the whole call succeeds.
    Detached { slot: PhysAddr, old: Desc, table: PhysAddr },
}

/// The journal of one [`map_range`] call.
#[derive(Debug, Default)]
struct MapUndo {
    log: Vec<Undo>,
    /// A live (valid) entry was changed.
    live_changed: bool,
}

impl MapUndo {
    /// Note the `n` entries from `slot` before they are written.
    fn snapshot(&mut self, m: &Machine, slot: PhysAddr, n: usize) -> Undo {
        // The common case, empty entries, is noted without allocating.
        if (0..n).all(|i| m.read_desc(entry_pa(slot, i)).0 == 0) {
            return Undo::Written { slot, n, old: None };
        }
        let olds: Vec<u64> = (0..n).map(|i| m.read_desc(entry_pa(slot, i)).0).collect();
        self.live_changed |= olds.iter().any(|&d| Desc(d).is_valid());
        Undo::Written { slot, n, old: Some(olds) }
    }

    /// Success: free the table pages that blocks replaced.
    fn commit<'m>(self, cpu: &Cpu<'m>, alloc: &dyn PgtableAlloc<'m>) {
        for u in self.log {
            if let Undo::Detached { table, .. } = u {
                alloc.free_table(cpu, table);
            }
        }
    }

    /// Failure: undo every change, last first, so that the tables are as
    /// they were before the call. A table this call allocated is taken out
    /// and freed only if it is empty again (another CPU may have started
    /// using it meanwhile, as `table_below` lets it).
    fn rollback<'m>(self, cpu: &Cpu<'m>, asp: &AddressSpace, alloc: &dyn PgtableAlloc<'m>, va: u64, size: u64) {
        let m = cpu.machine();
        let mut restored_valid = false;
        let wrote = self.log.iter().any(|u| matches!(u, Undo::Written { .. }));
        for u in self.log.into_iter().rev() {
            match u {
                Undo::Written { slot, n, old } => {
                    for i in 0..n {
                        let v = old.as_ref().map_or(0, |o| o[i]);
                        restored_valid |= Desc(v).is_valid();
                        m.desc_slot(entry_pa(slot, i)).store(v, Relaxed);
                    }
                }
                Undo::NewTable { slot, table, va } => {
                    if m.table(table).iter().any(|e| e.load(Relaxed) != 0) {
                        continue;
                    }
                    let d = Desc::table(table.0, asp.table_attrs());
                    if m.desc_slot(slot).compare_exchange(d.0, 0, Relaxed, Relaxed).is_ok() {
                        // No walk cache may keep the table (as
                        // pmd_free_pte_page() flushes before freeing).
                        match asp.asid {
                            None => TlbFlush::kernel_pgtable(va).flush(cpu),
                            Some(asid) => TlbFlush::user_range(asid, va, va + PAGE_SIZE, PAGE_SIZE, false).flush(cpu),
                        }
                        alloc.free_table(cpu, table);
                    }
                }
                Undo::Detached { slot, old, .. } => {
                    m.desc_slot(slot).store(old.0, Relaxed);
                    restored_valid = true;
                }
            }
        }
        if restored_valid {
            queue_pte_barriers(cpu);
        }
        if wrote {
            // Any CPU may have cached (even speculatively) a translation
            // this call made and has now taken away.
            asp.flush_for(va, va + size).flush(cpu);
        }
    }
}

/// Map `[va, va + size)` to `[pa, pa + size)` with `prot` (a page prot such
/// as [`desc::PAGE_KERNEL`]), allocating tables as needed, in the manner of
/// `__create_pgd_mapping()`: PUD blocks, then contiguous PMD runs, PMD
/// blocks, contiguous PTE runs and pages, each where alignment and `flags`
/// allow. Creating mappings over empty entries needs no TLB maintenance;
/// if a live entry changed (a permission change), the returned token asks
/// for a flush of the range.
///
/// # Errors
///
/// The range must lie in `asp`'s half of the VA space
/// ([`PgtableError::OutsideAddressSpace`]). An unsafe change of a live
/// entry ([`PgtableError::BreakBeforeMake`]) or a table page that cannot be
/// allocated ([`PgtableError::NoMemory`]) part-way stops the call, and
/// **everything it changed is undone**: entries it wrote get their old
/// values back, tables it allocated are freed if empty again, tables it
/// took out for blocks are put back (their pages are freed only on
/// success), and the range is flushed from the TLBs if any entry had been
/// written (its translation may have been cached meanwhile). This is
/// mmlab's extension: the kernel's
/// `__create_pgd_mapping()` treats a conflict as a bug (`BUG_ON` in
/// `alloc_init_pte()` and friends) and has no error path to undo, and its
/// table allocators panic rather than return NULL at boot. Undo was
/// chosen over a checking pass first because running out of memory for a
/// table cannot be known in advance, and a second walk would double the
/// cost of the linear-map experiment; the journal costs one entry per run
/// written.
#[allow(clippy::too_many_arguments)]
pub fn map_range<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<'m>,
    va: u64,
    pa: u64,
    size: u64,
    prot: u64,
    flags: MapFlags,
) -> Result<TlbFlush, PgtableError> {
    if size == 0 || !(va | pa | size).is_multiple_of(PAGE_SIZE) || va.checked_add(size - 1).is_none() {
        return Err(PgtableError::BadRange { va, size });
    }
    asp.check_covers(va, size)?;
    let mut undo = MapUndo::default();
    match map_range_journaled(cpu, asp, alloc, va, pa, size, prot, flags, &mut undo) {
        Ok(()) => {
            let live_changed = undo.live_changed;
            undo.commit(cpu, alloc);
            Ok(if live_changed { asp.flush_for(va, va + size) } else { TlbFlush::none() })
        }
        Err(e) => {
            undo.rollback(cpu, asp, alloc, va, size);
            Err(e)
        }
    }
}

/// The work of [`map_range`], every change noted in `undo`.
#[allow(clippy::too_many_arguments)]
fn map_range_journaled<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<'m>,
    va: u64,
    pa: u64,
    size: u64,
    prot: u64,
    flags: MapFlags,
    undo: &mut MapUndo,
) -> Result<(), PgtableError> {
    let m = cpu.machine();
    let prot = prot & !PTE_CONT;
    let end = va + (size - 1);
    let (mut va_cur, mut pa_cur) = (va, pa);
    // table_below, noting a table it installs.
    let below = |undo: &mut MapUndo, slot: PhysAddr, level: Level, va: u64| -> Result<PhysAddr, PgtableError> {
        let (t, new) = table_below_tracked(cpu, asp, alloc, slot, level)?;
        if new {
            undo.log.push(Undo::NewTable { slot, table: t, va });
        }
        Ok(t)
    };
    // A write of `n` entries from `slot`, noted once it succeeded (a
    // refused write changed nothing).
    let write = |undo: &mut MapUndo, slot: PhysAddr, n: usize, w: &dyn Fn() -> Result<(), PgtableError>| {
        let live = undo.live_changed;
        let u = undo.snapshot(m, slot, n);
        match w() {
            Ok(()) => {
                undo.log.push(u);
                Ok(())
            }
            Err(e) => {
                undo.live_changed = live;
                Err(e)
            }
        }
    };
    loop {
        let left = end - va_cur + 1;
        let pgd_slot = entry_pa(asp.pgd, Level::Pgd.index(va_cur));
        let pud_t = below(undo, pgd_slot, Level::Pgd, va_cur)?;
        let pud_slot = entry_pa(pud_t, Level::Pud.index(va_cur));
        let step;
        if flags.block
            && (va_cur | pa_cur).is_multiple_of(PUD_SIZE)
            && left >= PUD_SIZE
            && free_empty_table_for_block(cpu, alloc, pud_slot, Level::Pud, va_cur, Some(undo))
        {
            write(undo, pud_slot, 1, &|| set_pud(cpu, pud_slot, Desc::block(pa_cur, prot)))?;
            step = PUD_SIZE;
        } else {
            let pmd_t = below(undo, pud_slot, Level::Pud, va_cur)?;
            let pmd_slot = entry_pa(pmd_t, Level::Pmd.index(va_cur));
            let cont_pmd = flags.block
                && flags.cont
                && (va_cur | pa_cur).is_multiple_of(CONT_PMD_SIZE)
                && left >= CONT_PMD_SIZE
                && (0..CONT_PMDS).all(|i| {
                    free_empty_table_for_block(
                        cpu,
                        alloc,
                        entry_pa(pmd_slot, i),
                        Level::Pmd,
                        va_cur + i as u64 * PMD_SIZE,
                        Some(&mut *undo),
                    )
                });
            if cont_pmd {
                write(undo, pmd_slot, CONT_PMDS, &|| {
                    set_ptes(cpu, pmd_slot, Desc::block(pa_cur, prot | PTE_CONT), CONT_PMDS, PMD_SIZE)
                })?;
                step = CONT_PMD_SIZE;
            } else if flags.block
                && (va_cur | pa_cur).is_multiple_of(PMD_SIZE)
                && left >= PMD_SIZE
                && free_empty_table_for_block(cpu, alloc, pmd_slot, Level::Pmd, va_cur, Some(undo))
            {
                write(undo, pmd_slot, 1, &|| set_pmd(cpu, pmd_slot, Desc::block(pa_cur, prot)))?;
                step = PMD_SIZE;
            } else {
                let pte_t = below(undo, pmd_slot, Level::Pmd, va_cur)?;
                let idx = Level::Pte.index(va_cur);
                let pte_slot = entry_pa(pte_t, idx);
                if flags.cont && (va_cur | pa_cur) % CONT_PTE_SIZE == 0 && left >= CONT_PTE_SIZE {
                    write(undo, pte_slot, CONT_PTES, &|| {
                        set_ptes(cpu, pte_slot, Desc::page(pa_cur, prot | PTE_CONT), CONT_PTES, PAGE_SIZE)
                    })?;
                    step = CONT_PTE_SIZE;
                } else {
                    // Pages up to the end of this table, the range, or the
                    // next place a contiguous run could start.
                    let mut n = (PTRS_PER_TABLE - idx).min((left / PAGE_SIZE) as usize);
                    if flags.cont {
                        let to_cont = ((CONT_PTE_SIZE - va_cur % CONT_PTE_SIZE) / PAGE_SIZE) as usize;
                        n = n.min(to_cont.max(1));
                    }
                    write(undo, pte_slot, n, &|| set_ptes(cpu, pte_slot, Desc::page(pa_cur, prot), n, PAGE_SIZE))?;
                    step = n as u64 * PAGE_SIZE;
                }
            }
        }
        if step > end - va_cur {
            break;
        }
        va_cur += step;
        pa_cur += step;
    }
    Ok(())
}

/// `pmd_alloc_track()` down from the pgd: the pmd slot for `va`, with the
/// pud table allocated if missing (its descriptor written with barriers, as
/// `pud_populate` does, outside any lazy-MMU section).
pub fn pmd_alloc<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<'m>,
    va: u64,
) -> Result<PhysAddr, PgtableError> {
    let pgd_slot = entry_pa(asp.pgd, Level::Pgd.index(va));
    let pud_t = table_below(cpu, asp, alloc, pgd_slot, Level::Pgd)?;
    let pud_slot = entry_pa(pud_t, Level::Pud.index(va));
    let pmd_t = table_below(cpu, asp, alloc, pud_slot, Level::Pud)?;
    Ok(entry_pa(pmd_t, Level::Pmd.index(va)))
}

/// `pte_alloc_kernel_track()`: the PTE table under the pmd slot for `va`,
/// allocated and installed (`pmd_populate_kernel`) if missing.
pub fn pte_alloc_kernel<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<'m>,
    va: u64,
) -> Result<PteTable<'m>, PgtableError> {
    let pmd_slot = pmd_alloc(cpu, asp, alloc, va)?;
    let t = table_below(cpu, asp, alloc, pmd_slot, Level::Pmd)?;
    Ok(PteTable::new(cpu.machine(), t))
}

/// `vmap_try_huge_pmd()` + `pmd_set_huge()`: map one 2 MiB block at the pmd
/// slot if VA and PA are aligned and the slot is empty or holds an empty
/// table (freed first). Returns false when a block cannot be used here.
pub fn try_huge_pmd<'m>(
    cpu: &Cpu<'m>,
    alloc: &dyn PgtableAlloc<'m>,
    pmd_slot: PhysAddr,
    va: u64,
    pa: u64,
    prot: u64,
) -> Result<bool, PgtableError> {
    if !(va | pa).is_multiple_of(PMD_SIZE) || !free_empty_table_for_block(cpu, alloc, pmd_slot, Level::Pmd, va, None) {
        return Ok(false);
    }
    set_pmd(cpu, pmd_slot, Desc::block(pa, prot & !PTE_CONT))?;
    Ok(true)
}

/// Write one contiguous run of 16 PTEs mapping `va` → `pa` (`set_huge_pte_at`
/// for a 64 KiB contpte mapping into empty slots). Both addresses must be
/// 64 KiB aligned.
pub fn set_cont_ptes(cpu: &Cpu<'_>, ptep: PhysAddr, va: u64, pa: u64, prot: u64) -> Result<(), PgtableError> {
    if !(va | pa).is_multiple_of(CONT_PTE_SIZE) || Level::Pte.index(va) != ((ptep.0 % PAGE_SIZE) / 8) as usize {
        return Err(PgtableError::ContAlignment { va, pa, size: CONT_PTE_SIZE });
    }
    set_ptes(cpu, ptep, Desc::page(pa, prot | PTE_CONT), CONT_PTES, PAGE_SIZE)
}

/// Clear the leaves of `[va, va + size)` (`vunmap_range_noflush`: get and
/// clear, no barriers) and return the flush the caller owes. Blocks and
/// contiguous runs must be covered whole; this is checked for the whole
/// range before anything is cleared.
pub fn unmap_range(cpu: &Cpu<'_>, asp: &AddressSpace, va: u64, size: u64) -> Result<TlbFlush, PgtableError> {
    if size == 0 || !(va | size).is_multiple_of(PAGE_SIZE) || va.checked_add(size - 1).is_none() {
        return Err(PgtableError::BadRange { va, size });
    }
    asp.check_covers(va, size)?;
    visit_leaves(cpu, asp, va, va + (size - 1), false)?;
    visit_leaves(cpu, asp, va, va + (size - 1), true)?;
    Ok(asp.flush_for(va, va + size))
}

/// `vunmap_range_noflush()` for a range the caller mapped whole (no block or
/// contiguous run is cut): clear in one pass, without [`unmap_range`]'s
/// checking pass. The flush is the caller's. Both refuse a range outside
/// `asp`'s half ([`PgtableError::OutsideAddressSpace`]).
pub fn vunmap_range_noflush(cpu: &Cpu<'_>, asp: &AddressSpace, va: u64, size: u64) -> Result<(), PgtableError> {
    if size == 0 || !(va | size).is_multiple_of(PAGE_SIZE) || va.checked_add(size - 1).is_none() {
        return Err(PgtableError::BadRange { va, size });
    }
    asp.check_covers(va, size)?;
    visit_leaves(cpu, asp, va, va + (size - 1), true)
}

/// The walk of [`unmap_range`], as `vunmap_p*d_range` do it: one walk per
/// table, then the entries of a PTE table in a row. Without `clear` it only
/// checks that no block or contiguous run is cut.
fn visit_leaves(cpu: &Cpu<'_>, asp: &AddressSpace, va: u64, end: u64, clear: bool) -> Result<(), PgtableError> {
    let m = cpu.machine();
    let mut cur = va;
    loop {
        let mut last = None;
        let leaf = walk_with(|pa| m.read_desc(pa).0, asp.pgd, cur, |s| last = Some(s));
        let step = match (leaf, last) {
            (None, Some(s)) if s.level == Level::Pte => {
                // An empty PTE slot: scan the rest of this PTE table.
                let table = PhysAddr(s.slot.0 & !(PAGE_SIZE - 1));
                scan_pte_table(cpu, table, cur, end, va, clear)?
            }
            (Some(l), _) if l.level == Level::Pte => {
                scan_pte_table(cpu, PhysAddr(l.slot.0 & !(PAGE_SIZE - 1)), cur, end, va, clear)?
            }
            (Some(l), _) => {
                let span = l.span();
                let start = cur & !(span - 1);
                if start < va || start + (span - 1) > end {
                    return Err(PgtableError::PartialHugeUnmap { va: cur, level: l.level });
                }
                if clear {
                    let n = if l.desc.is_cont() { CONT_PMDS } else { 1 };
                    let first = PhysAddr(l.slot.0 - 8 * ((l.slot.0 % PAGE_SIZE / 8) % n as u64));
                    for i in 0..n {
                        ptep_get_and_clear(cpu, entry_pa(first, i));
                    }
                }
                span - (cur - start)
            }
            (None, s) => {
                let sz = s.map_or(Level::Pgd, |s| s.level).entry_size();
                sz - (cur & (sz - 1))
            }
        };
        if step > end - cur {
            return Ok(());
        }
        cur += step;
    }
}

/// Visit the PTEs of `table` from `cur`'s index to the end of the table or
/// of the range; returns the bytes covered.
fn scan_pte_table(
    cpu: &Cpu<'_>,
    table: PhysAddr,
    cur: u64,
    end: u64,
    va: u64,
    clear: bool,
) -> Result<u64, PgtableError> {
    let slots = cpu.machine().table(table);
    let first = Level::Pte.index(cur);
    let n = (PTRS_PER_TABLE - first).min(((end - cur) / PAGE_SIZE + 1) as usize);
    for (i, slot) in slots.iter().enumerate().skip(first).take(n) {
        let d = Desc(slot.load(Relaxed));
        if d.is_cont() {
            let run_va = (cur & !(PMD_SIZE - 1)) + ((i & !(CONT_PTES - 1)) as u64) * PAGE_SIZE;
            if run_va < va || run_va + (CONT_PTE_SIZE - 1) > end {
                return Err(PgtableError::PartialHugeUnmap { va: run_va, level: Level::Pte });
            }
        }
        if clear && d.is_valid() {
            // __ptep_get_and_clear: an exchange with 0, no barriers.
            slot.swap(0, Relaxed);
        }
    }
    Ok(n as u64 * PAGE_SIZE)
}

/// One level of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkStep {
    pub level: Level,
    /// Physical address of the descriptor.
    pub slot: PhysAddr,
    pub desc: Desc,
}

/// The leaf a walk ended at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub level: Level,
    pub slot: PhysAddr,
    pub desc: Desc,
    /// The translated physical address of the walked VA.
    pub pa: PhysAddr,
}

impl Leaf {
    /// Bytes one TLB entry for this leaf covers: the entry size, times 16 for
    /// a contiguous run.
    pub const fn span(&self) -> u64 {
        let s = self.level.entry_size();
        if self.desc.is_cont() { s * 16 } else { s }
    }
}

/// A table walk of one VA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    pub va: u64,
    pub steps: Vec<WalkStep>,
    pub leaf: Option<Leaf>,
}

impl Walk {
    /// For a walk that found no leaf: bytes from `va` to the end of the
    /// region the missing entry would have mapped.
    pub fn hole_size(&self) -> u64 {
        let level = self.steps.last().map_or(Level::Pgd, |s| s.level);
        let sz = level.entry_size();
        sz - (self.va & (sz - 1))
    }
}

/// Walk `asp`'s tables for `va`, as the MMU does (no TLB involved).
pub fn walk(m: &Machine, asp: &AddressSpace, va: u64) -> Walk {
    let mut steps = Vec::with_capacity(4);
    let leaf = walk_with(|pa| m.read_desc(pa).0, asp.pgd, va, |s| steps.push(s));
    Walk { va, steps, leaf }
}

/// The walk itself, over any way of reading a descriptor (the struct-page
/// accessor uses it to refill its vmemmap translations). `on_step` sees
/// every descriptor read.
pub fn walk_with(
    read: impl Fn(PhysAddr) -> u64,
    pgd: PhysAddr,
    va: u64,
    mut on_step: impl FnMut(WalkStep),
) -> Option<Leaf> {
    let mut table = pgd;
    for level in Level::ALL {
        let slot = entry_pa(table, level.index(va));
        let d = Desc(read(slot));
        on_step(WalkStep { level, slot, desc: d });
        match d.kind(level) {
            DescKind::Table => table = PhysAddr(d.addr()),
            DescKind::Block | DescKind::Page => {
                let off = va & (level.entry_size() - 1);
                return Some(Leaf { level, slot, desc: d, pa: PhysAddr(d.addr() + off) });
            }
            DescKind::Invalid | DescKind::Reserved => break,
        }
    }
    None
}

/// The leaves covering `[start, end)`, each as (va of its span, span), a
/// contiguous run or block counted once: what the TLB needs to cover it.
pub fn leaves(m: &Machine, asp: &AddressSpace, start: u64, end: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut cur = start;
    while cur < end {
        let w = walk(m, asp, cur);
        let step = match w.leaf {
            Some(l) => {
                let span = l.span();
                let base = cur & !(span - 1);
                if out.last() != Some(&(base, span)) {
                    out.push((base, span));
                }
                span - (cur - base)
            }
            None => w.hole_size(),
        };
        match cur.checked_add(step) {
            Some(n) => cur = n,
            None => break,
        }
    }
    out
}

/// Counts for `mmlab stat pagetables`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgtableStats {
    /// Table pages per level (pgd, pud, pmd, pte).
    pub tables: [u64; 4],
    /// Valid table descriptors per level.
    pub table_entries: [u64; 4],
    /// Block descriptors at pud and pmd (index 1 and 2).
    pub blocks: [u64; 4],
    /// Page descriptors (level 3).
    pub pages: u64,
    /// Contiguous runs (16 entries) at pmd (index 2) and pte (index 3).
    pub cont_runs: [u64; 4],
    /// Reserved encodings found.
    pub reserved: u64,
}

/// Walk every table of `asp` and count.
pub fn stats(m: &Machine, asp: &AddressSpace) -> PgtableStats {
    fn visit(m: &Machine, table: PhysAddr, level: Level, st: &mut PgtableStats) {
        st.tables[level as usize] += 1;
        for (i, slot) in m.table(table).iter().enumerate() {
            let d = Desc(slot.load(Relaxed));
            match d.kind(level) {
                DescKind::Invalid => {}
                DescKind::Reserved => st.reserved += 1,
                DescKind::Table => {
                    st.table_entries[level as usize] += 1;
                    if let Some(next) = level.next() {
                        visit(m, PhysAddr(d.addr()), next, st);
                    }
                }
                DescKind::Block | DescKind::Page => {
                    if level == Level::Pte {
                        st.pages += 1;
                    } else {
                        st.blocks[level as usize] += 1;
                    }
                    if d.is_cont() && i % 16 == 0 {
                        st.cont_runs[level as usize] += 1;
                    }
                }
            }
        }
    }
    let mut st = PgtableStats::default();
    visit(m, asp.pgd, Level::Pgd, &mut st);
    st
}
