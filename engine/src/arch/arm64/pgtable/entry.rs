//! Entries and address spaces: the descriptor writes with the kernel's
//! barrier rules and break-before-make checks (`set_pte()`, `set_pmd()`,
//! ...), lazy-MMU sections, where table pages come from
//! ([`PgtableAlloc`]) and how table code reaches their memory
//! ([`TableMemory`]), and [`AddressSpace`] (`mm_struct`'s tables and
//! ASID). Mirrors arch/arm64/include/asm/pgtable.h.

use super::desc::{self, Desc, DescKind, Level, PTRS_PER_TABLE};
use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::ishst;
use crate::arch::arm64::cpu::ArchCpu;
use crate::arch::arm64::memory::VaLayout;
use crate::arch::arm64::tlb::TlbFlush;
use crate::mm::vmstat::VmEvent;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

/// Where table pages come from: the page allocator after boot, memblock
/// during it. `C` is the CPU handle of the caller (an allocator that needs
/// the kernel's CPU, as the page allocator's per-cpu lists do, gets it);
/// the table code itself only uses the [`ArchCpu`] it dereferences to.
pub trait PgtableAlloc<C: ?Sized> {
    /// A zeroed page for a table, or None.
    fn alloc_table(&self, cpu: &C) -> Option<PhysAddr>;
    /// Give a table page back.
    fn free_table(&self, cpu: &C, pa: PhysAddr);
}

/// How table code reaches the memory its tables live in (as
/// google/aarch64-paging's `Translation` does): descriptors are words of
/// RAM. An [`ArchCpu`] reaches it, and so does whatever owns the RAM.
pub trait TableMemory {
    /// The RAM the tables live in.
    fn ram(&self) -> &crate::arena::Arena;
    /// The descriptor slot at physical address `pa` (8-byte aligned, in RAM).
    #[inline]
    fn desc_slot(&self, pa: PhysAddr) -> &AtomicU64 {
        self.ram().word(pa)
    }
    /// `READ_ONCE(*ptep)`.
    #[inline]
    fn read_desc(&self, pa: PhysAddr) -> Desc {
        Desc(self.desc_slot(pa).load(Relaxed))
    }
    /// The 512 slots of the table at `table`.
    #[inline]
    fn table(&self, table: PhysAddr) -> &[AtomicU64] {
        self.ram().slice::<AtomicU64>(table, PTRS_PER_TABLE)
    }
}

impl TableMemory for crate::arena::Arena {
    #[inline]
    fn ram(&self) -> &crate::arena::Arena {
        self
    }
}

impl TableMemory for ArchCpu<'_> {
    #[inline]
    fn ram(&self) -> &crate::arena::Arena {
        ArchCpu::ram(self)
    }
}

/// A translation regime: a root table, its VA size and, for user spaces,
/// an ASID. With 52-bit VA (FEAT_LPA2) the root is a level -1 table of
/// [`PTRS_PER_PGD_52`](desc::PTRS_PER_PGD_52) entries and walks have five
/// levels; with 48-bit VA the root is the level-0 table (the p4d folded into
/// the pgd) and walks have four. User and kernel spaces of one machine have
/// the same number of levels, as TCR.T0SZ and T1SZ agree in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressSpace {
    pub(super) pgd: PhysAddr,
    pub(super) asid: Option<u16>,
    pub(super) va: VaLayout,
}

impl AddressSpace {
    /// The kernel's address space (`init_mm`, `swapper_pg_dir`) with layout `va`.
    pub const fn kernel(pgd: PhysAddr, va: VaLayout) -> AddressSpace {
        AddressSpace { pgd, asid: None, va }
    }
    /// A user address space with its ASID.
    pub const fn user(pgd: PhysAddr, asid: u16, va: VaLayout) -> AddressSpace {
        AddressSpace { pgd, asid: Some(asid), va }
    }
    /// `mm_alloc()` + `pgd_alloc()`: a new user address space with an empty
    /// root table from `alloc`, with the layout of `cpu`'s machine. A
    /// five-level root is a 128-byte `pgd_cache` object in the kernel
    /// (`pgdir_is_page_size()` is false); here it is a whole page
    /// (simplified: one page of RAM more per address space).
    ///
    /// # Errors
    ///
    /// [`PgtableError::NoMemory`] if `alloc` has no page for the root table.
    pub fn alloc_user<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
        cpu: &C,
        alloc: &dyn PgtableAlloc<C>,
        asid: u16,
    ) -> Result<AddressSpace, PgtableError> {
        let pgd = alloc.alloc_table(cpu).ok_or(PgtableError::NoMemory)?;
        Ok(AddressSpace::user(pgd, asid, cpu.arch().va))
    }
    /// `vabits_actual` of this regime.
    pub const fn va_bits(&self) -> u32 {
        self.va.va_bits()
    }
    /// The VA layout.
    pub const fn layout(&self) -> VaLayout {
        self.va
    }
    /// The level of the root table: -1 ([`Level::Pgd`]) with five levels, 0
    /// ([`Level::P4d`], the folded p4d) with four.
    pub const fn root_level(&self) -> Level {
        if self.va.pgtable_levels() == 5 { Level::Pgd } else { Level::P4d }
    }
    /// The kernel's name of the table at `level` in this space: the root is
    /// the `pgd` whatever its level (a folded p4d is the pgd).
    pub fn level_name(&self, level: Level) -> &'static str {
        if level == self.root_level() { "pgd" } else { level.name() }
    }
    /// `p4d_offset(pgd_offset(mm, va), va)`: the level-0 entry for `va`.
    /// With five levels, `descend` is given the pgd entry and returns the
    /// p4d table below it (reading it, or allocating it); with four the pgd
    /// is the p4d (`pgd_to_folded_p4d()`) and `descend` is not called.
    ///
    /// # Errors
    ///
    /// What `descend` returns.
    pub fn p4d_offset<E>(&self, va: u64, descend: impl FnOnce(PhysAddr) -> Result<PhysAddr, E>) -> Result<PhysAddr, E> {
        let p4d_table = match self.root_level() {
            Level::Pgd => descend(entry_pa(self.pgd, Level::Pgd.index(va)))?,
            _ => self.pgd,
        };
        Ok(entry_pa(p4d_table, Level::P4d.index(va)))
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
    pub(super) fn check_covers(&self, va: u64, size: u64) -> Result<(), PgtableError> {
        if self.covers(va, va + (size - 1)) {
            Ok(())
        } else {
            Err(PgtableError::OutsideAddressSpace { va, size, kernel: self.asid.is_none() })
        }
    }
    /// Attributes of table descriptors in this space.
    pub(super) const fn table_attrs(&self) -> u64 {
        match self.asid {
            None => desc::KERNEL_TABLE,
            Some(_) => desc::USER_TABLE,
        }
    }
    /// The TLB maintenance a change of `[start, end)` in this space needs.
    pub(super) fn flush_for(&self, start: u64, end: u64) -> TlbFlush {
        match self.asid {
            None => TlbFlush::kernel_range(start, end),
            Some(asid) => TlbFlush::user_range(asid, start, end, PAGE_SIZE, true),
        }
    }
}

/// `emit_pte_barriers()`: `dsb ishst; isb`.
#[inline]
pub fn emit_pte_barriers(cpu: &ArchCpu<'_>) {
    cpu.dsb(ishst);
    cpu.isb();
}

/// `queue_pte_barriers()`: emit now, or mark the pair pending inside a
/// lazy-MMU section (`set_thread_flag(TIF_LAZY_MMU_PENDING)`, an atomic the
/// kernel skips when the flag is already set).
#[inline]
pub fn queue_pte_barriers(cpu: &ArchCpu<'_>) {
    let lazy = &cpu.arch_data().lazy_mmu;
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
pub fn arch_enter_lazy_mmu_mode(cpu: &ArchCpu<'_>) {
    if cpu.arch().lazy_mmu_barrier_batching {
        cpu.arch_data().lazy_mmu.active.store(true, Relaxed);
        cpu.count(VmEvent::LazyMmuFlagOps, 1);
    }
}

/// `arch_flush_lazy_mmu_mode()`: issue the pending pair, if any
/// (`test_and_clear_thread_flag(TIF_LAZY_MMU_PENDING)`: a plain read when
/// the flag is clear, an atomic when it is set).
#[inline]
pub fn arch_flush_lazy_mmu_mode(cpu: &ArchCpu<'_>) {
    let lazy = &cpu.arch_data().lazy_mmu;
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
pub fn arch_leave_lazy_mmu_mode(cpu: &ArchCpu<'_>) {
    arch_flush_lazy_mmu_mode(cpu);
    if cpu.arch().lazy_mmu_barrier_batching {
        cpu.arch_data().lazy_mmu.active.store(false, Relaxed);
        cpu.count(VmEvent::LazyMmuFlagOps, 1);
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
fn slot_word(m: &crate::arena::Arena, slot: PhysAddr) -> Result<&AtomicU64, PgtableError> {
    m.try_word(slot).ok_or(PgtableError::SlotOutsideRam { entry: slot })
}

/// Check a write against the live entry (`__check_safe_pte_update`).
#[inline]
fn check_bbm(m: &crate::arena::Arena, slot: PhysAddr, new: Desc) -> Result<(), PgtableError> {
    check_word(slot_word(m, slot)?, slot, new)
}

/// A table descriptor written at `level` must point at a page of RAM: the
/// next walk reads its entries from the arena. (A leaf may point anywhere:
/// device memory and other non-RAM output addresses are legitimate, as
/// with `ioremap`; an access through such a leaf is a
/// [`mmu::FaultKind::ExternalAbort`].)
#[inline(always)]
fn check_table_in_ram(m: &crate::arena::Arena, slot: PhysAddr, d: Desc, level: Level) -> Result<(), PgtableError> {
    if d.kind(level) == DescKind::Table && !m.contains(PhysAddr(d.addr()), PAGE_SIZE) {
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

/// `PTE_MAYBE_SHARED` / `PMD_MAYBE_SHARED` resolved for `cpu`'s machine.
/// With LPA2 the kernel's protections carry no SH bits (bits \[9:8\] of a
/// leaf hold output-address bits \[51:50\]; the shareability is TCR's), so
/// a valid leaf is written without them. mmlab's protections are constants
/// with `PTE_SHARED`; they are resolved here, at the write (simplified: the
/// kernel builds them without the bits; the descriptor written is the same).
#[inline(always)]
fn maybe_shared(cpu: &ArchCpu<'_>, d: Desc) -> Desc {
    if cpu.arch().va.lpa2() && d.is_valid() { Desc(d.0 & !desc::bits::PTE_SHARED) } else { d }
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
pub fn set_pte(cpu: &ArchCpu<'_>, ptep: PhysAddr, pte: Desc) -> Result<(), PgtableError> {
    let pte = maybe_shared(cpu, pte);
    let word = slot_word(cpu.ram(), ptep)?;
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
pub fn set_pte_nosync(cpu: &ArchCpu<'_>, ptep: PhysAddr, pte: Desc) -> Result<(), PgtableError> {
    let pte = maybe_shared(cpu, pte);
    let word = slot_word(cpu.ram(), ptep)?;
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
    pub fn new(m: &'m crate::arena::Arena, pa: PhysAddr) -> PteTable<'m> {
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
    pub fn set_pte(&self, cpu: &ArchCpu<'_>, i: usize, pte: Desc) -> Result<(), PgtableError> {
        let pte = maybe_shared(cpu, pte);
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
pub fn set_ptes(cpu: &ArchCpu<'_>, ptep: PhysAddr, pte: Desc, nr: usize, pgsize: u64) -> Result<(), PgtableError> {
    let m = cpu.ram();
    if nr == 0 {
        return Ok(());
    }
    let pte = maybe_shared(cpu, pte);
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
pub fn set_pmd(cpu: &ArchCpu<'_>, pmdp: PhysAddr, pmd: Desc) -> Result<(), PgtableError> {
    let pmd = maybe_shared(cpu, pmd);
    let m = cpu.ram();
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
pub fn set_pud(cpu: &ArchCpu<'_>, pudp: PhysAddr, pud: Desc) -> Result<(), PgtableError> {
    set_pmd(cpu, pudp, pud)
}

/// `set_pgd()` / `set_p4d()`: write; the barriers are queued unconditionally.
/// A table descriptor must point at a page of RAM, as for [`set_pmd`].
///
/// # Errors
///
/// As [`set_pmd`].
#[inline]
pub fn set_pgd(cpu: &ArchCpu<'_>, pgdp: PhysAddr, pgd: Desc) -> Result<(), PgtableError> {
    let m = cpu.ram();
    check_table_in_ram(m, pgdp, pgd, Level::P4d)?;
    check_bbm(m, pgdp, pgd)?;
    m.desc_slot(pgdp).store(pgd.0, Relaxed);
    queue_pte_barriers(cpu);
    Ok(())
}

/// `__ptep_get_and_clear()`: an exchange with 0, no barriers.
#[inline]
pub fn ptep_get_and_clear(cpu: &ArchCpu<'_>, ptep: PhysAddr) -> Desc {
    Desc(cpu.desc_slot(ptep).swap(0, Relaxed))
}

/// `pte_clear()` / `pmd_clear()`: write 0, no barriers.
#[inline]
pub fn pte_clear(cpu: &ArchCpu<'_>, ptep: PhysAddr) {
    cpu.desc_slot(ptep).store(0, Relaxed);
}

/// `&init_mm`: the kernel's address space (`swapper_pg_dir`, no ASID) of
/// the system `cpu` belongs to.
#[inline]
pub fn init_mm(cpu: &ArchCpu<'_>) -> AddressSpace {
    AddressSpace::kernel(cpu.arch().swapper_pg_dir, cpu.arch().va)
}
