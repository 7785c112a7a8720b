//! Huge pages in a user address space on arm64 (arch/arm64/mm/hugetlbpage.c,
//! Linux 6.12), on the engine's tables.
//!
//! # The algorithm
//!
//! With a 4 KiB granule arm64 offers four hugetlb sizes, each mapped by one
//! entry or a contiguous run of 16 entries at one level:
//!
//! | size | entries | level | `num_contig_ptes()` |
//! |------|---------|-------|---------------------|
//! | 64 KiB | 16 x 4 KiB pages, `PTE_CONT` | PTE | 16, 4 KiB |
//! | 2 MiB | 1 block | PMD | 1, 2 MiB |
//! | 32 MiB | 16 x 2 MiB blocks, `PTE_CONT` | PMD | 16, 2 MiB |
//! | 1 GiB | 1 block | PUD | 1, 1 GiB |
//!
//! `huge_pte_alloc()` finds (allocating the tables on the way) the slot of
//! the first entry for an address and size; `huge_pte_offset()` finds it
//! without allocating. `set_huge_pte_at()` writes one entry for a block, and
//! for a contiguous run first *breaks* the run (clears all 16 entries and
//! flushes the TLB for the range: `clear_flush()`), then *makes* it (writes
//! 16 entries, the output address advancing by the entry size): changing a
//! live contiguous run in place is "misprogramming of the Contiguous bit"
//! (ARM ARM D4). `huge_ptep_get_and_clear()` clears every entry and returns
//! the first with the dirty and young bits of all; `huge_ptep_clear_flush()`
//! also flushes. A block is not broken by `set_huge_pte_at()`: the generic
//! code clears and flushes it before it remaps (`huge_ptep_clear_flush()`),
//! and a remap of a live block without that is what the engine's
//! break-before-make checker refuses ([`HugePteError::Pgtable`] with
//! `BreakBeforeMake`; the kernel's `__check_safe_pte_update()` warns).
//!
//! # TLB maintenance scope
//!
//! [`HugeTlbScope`] selects the release whose TLB maintenance the huge
//! PTE paths issue. Without FEAT_TLBIRANGE, for one huge page:
//!
//! | path | 6.12 | 6.16 to 7.2 |
//! |------|------|-------------|
//! | `flush_hugetlb_tlb_range()` (unmap, mprotect) | 2 MiB: 1 op at the PMD stride, hint 2; 1 GiB: 1 op at the PUD stride, hint 1; 64 KiB: 16 ops and 32 MiB: 8192 ops, so `flush_tlb_mm()`, both at 4 KiB with hint 0 | 64 KiB: 16 ops, hint 3; 2 MiB: 1; 32 MiB: 16 at the PMD stride, hint 2; 1 GiB: 1, hint 1 (`vae1is`: not last level) |
//! | the break of a contiguous run (`clear_flush()`) | `flush_tlb_range()`: 4 KiB stride, all levels (64 KiB: 16 ops; 32 MiB: `flush_tlb_mm()`), even over invalid entries | `__flush_hugetlb_tlb_range()` at the entry size, last level (16 `vale1is` for either), only over a valid run |
//! | `huge_ptep_clear_flush()` of a block | `ptep_clear_flush()`: one `flush_tlb_page()` if the entry was valid | `get_clear_contig_flush()` at the block size, last level, always: one `vale1is` (one `rvale1is` with range ops) |
//!
//! 6.12's `flush_hugetlb_tlb_range()` knew only the PMD and PUD sizes; the
//! contiguous sizes got their own stride and level in Ryan Roberts' fix
//! eed6bfa8b282 ("arm64: hugetlb: Fix flush_hugetlb_tlb_range()
//! invalidation level", v6.14, marked for stable), and 5b3f8917644e
//! ("arm64: hugetlb: Refine tlb maintenance scope", v6.16) moved that
//! switch into `__flush_hugetlb_tlb_range()` for the break to use at the
//! last level; the same series sized `huge_ptep_clear_flush()` from the
//! hstate (29cb80519689) and skipped the break over an invalid run. 7.2
//! passes `TLBF_NONE` / `TLBF_NOWALKCACHE` where 6.16 passed
//! `last_level`: the same TLBIs. Scope `V6_12` is v6.12 as released.
//!
//! # Fidelity
//!
//! | piece | label |
//! |-------|-------|
//! | sizes, contiguous counts, entry formats, break-before-make order, dirty/young gathering, flush placement and scope per release | faithful (6.12; 6.16 to 7.2) |
//! | the TTL hint of single (non-range) TLBIs | not encoded (the engine's single ops carry none); range ops carry it |
//! | `huge_pte_alloc` | simplified: no PMD sharing (`want_pmd_share`) |
//! | `ptep_clear_flush` of a block | faithful: `flush_tlb_page()` when the entry was valid |
//! | table freeing ([`free_pgtables`]) | simplified: all tables of an emptied address space at once |
//! | functions take the huge page size, not an hstate or a VMA | simplified |

use mmlab_engine::arch::arm64::barrier::ishst;
use mmlab_engine::arch::arm64::pgtable::desc::bits::{PTE_AF, PTE_DIRTY, PTE_RDONLY, PTE_WRITE};
use mmlab_engine::arch::arm64::pgtable::desc::{
    CONT_PMD_SIZE, CONT_PMDS, CONT_PTE_SIZE, CONT_PTES, PMD_SIZE, PUD_SIZE, USER_TABLE,
};
use mmlab_engine::arch::arm64::pgtable::{
    self, AddressSpace, Desc, DescKind, Level, PgProt, PgtableAlloc, PgtableError, TableMemory, entry_pa,
};
use mmlab_engine::arch::arm64::tlb::{self, RangeOp, TLBI_TTL_UNKNOWN};
use mmlab_engine::{Cpu, Machine, PAGE_SIZE, PhysAddr};

/// Which kernel's TLB maintenance the huge PTE paths issue (see the
/// module's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum HugeTlbScope {
    /// Linux 6.12: `flush_hugetlb_tlb_range()` at the PMD or PUD stride for
    /// those sizes and 4 KiB for the contiguous ones; the break by
    /// `flush_tlb_range()` (4 KiB stride, all levels), even over invalid
    /// entries; a block cleared by `ptep_clear_flush()`.
    V6_12,
    /// Linux 6.16 to 7.2 (5b3f8917644e "arm64: hugetlb: Refine tlb
    /// maintenance scope" and its series): `__flush_hugetlb_tlb_range()`,
    /// the entry size as stride with a level hint, last level for the
    /// break and `huge_ptep_clear_flush()`; no break over invalid entries.
    V6_16,
}

/// Why a huge PTE operation failed. Nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePteError {
    /// A size arm64 does not offer with 4 KiB pages (`__hugetlb_valid_size`).
    InvalidSize {
        /// The size asked for.
        size: u64,
    },
    /// The address or the output address is not aligned to the size, or
    /// the address is not a user address.
    Unaligned {
        /// The address.
        addr: u64,
        /// The size.
        size: u64,
    },
    /// A leaf of another size is where a table is needed.
    LeafInTheWay {
        /// The address.
        addr: u64,
        /// The level of the leaf.
        level: Level,
    },
    /// No page for a table.
    NoMemory,
    /// A table write was refused (`BreakBeforeMake` for a live change).
    Pgtable(PgtableError),
}

impl std::fmt::Display for HugePteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HugePteError::InvalidSize { size } => write!(f, "huge page size {size:#x} is not supported"),
            HugePteError::Unaligned { addr, size } => write!(f, "{addr:#x} is not a {size:#x}-aligned user address"),
            HugePteError::LeafInTheWay { addr, level } => {
                write!(f, "a {} leaf maps {addr:#x} where a table is needed", level.name())
            }
            HugePteError::NoMemory => write!(f, "Cannot allocate memory (ENOMEM)"),
            HugePteError::Pgtable(e) => write!(f, "{e}"),
        }
    }
}
impl std::error::Error for HugePteError {}

impl From<PgtableError> for HugePteError {
    fn from(e: PgtableError) -> Self {
        match e {
            PgtableError::NoMemory => HugePteError::NoMemory,
            e => HugePteError::Pgtable(e),
        }
    }
}

/// `__hugetlb_valid_size()`: 64 KiB, 2 MiB, 32 MiB, 1 GiB (PUD sections are
/// supported with 4 KiB pages).
pub const fn hugetlb_valid_size(size: u64) -> bool {
    matches!(size, CONT_PTE_SIZE | PMD_SIZE | CONT_PMD_SIZE | PUD_SIZE)
}

/// `num_contig_ptes()`: how many entries of which size map a huge page of
/// `size`.
///
/// # Errors
/// [`HugePteError::InvalidSize`] (the kernel WARNs and uses one entry).
pub const fn num_contig_ptes(size: u64) -> Result<(usize, u64), HugePteError> {
    match size {
        CONT_PMD_SIZE => Ok((CONT_PMDS, PMD_SIZE)),
        CONT_PTE_SIZE => Ok((CONT_PTES, PAGE_SIZE)),
        PMD_SIZE | PUD_SIZE => Ok((1, size)),
        _ => Err(HugePteError::InvalidSize { size }),
    }
}

/// The level of the entries mapping a huge page of `size` (valid sizes).
const fn huge_level(size: u64) -> Level {
    match size {
        PUD_SIZE => Level::Pud,
        PMD_SIZE | CONT_PMD_SIZE => Level::Pmd,
        _ => Level::Pte,
    }
}

/// `hugetlb_mask_last_page()`: the bits to skip to the last huge page
/// sharing a table with `addr`'s, when a walk finds no table.
pub const fn hugetlb_mask_last_page(size: u64) -> u64 {
    match size {
        PUD_SIZE => Level::P4d.entry_size() - PUD_SIZE,
        CONT_PMD_SIZE => PUD_SIZE - CONT_PMD_SIZE,
        PMD_SIZE => PUD_SIZE - PMD_SIZE,
        CONT_PTE_SIZE => PMD_SIZE - CONT_PTE_SIZE,
        _ => 0,
    }
}

/// `arch_make_huge_pte(mk_pte(page, prot), shift)`: the first entry of a
/// huge page of `size` at physical address `pa`: a block for 2 MiB and
/// 1 GiB (`pte_mkhuge`), a contiguous block for 32 MiB (`pmd_mkcont`), a
/// contiguous page for 64 KiB (`pte_mkcont` sets the page type back).
///
/// # Errors
/// [`HugePteError::InvalidSize`], or [`HugePteError::Unaligned`] when `pa`
/// is not aligned to `size`.
pub fn arch_make_huge_pte(pa: u64, prot: PgProt, size: u64) -> Result<Desc, HugePteError> {
    if !hugetlb_valid_size(size) {
        return Err(HugePteError::InvalidSize { size });
    }
    if !pa.is_multiple_of(size) {
        return Err(HugePteError::Unaligned { addr: pa, size });
    }
    Ok(match size {
        CONT_PTE_SIZE => Desc::page(pa, prot.mkcont()),
        CONT_PMD_SIZE => Desc::block(pa, prot.mkcont()),
        _ => Desc::block(pa, prot.mknoncont()),
    })
}

/// The table below the entry at `slot` (a `level` entry), allocated and
/// installed if the entry is empty (`p4d_alloc`/`pud_alloc`/`pmd_alloc`/
/// `pte_alloc`: a zeroed table, then `*_populate()`).
fn table_below<'m>(
    cpu: &Cpu<'m>,
    alloc: &dyn PgtableAlloc<Cpu<'m>>,
    slot: PhysAddr,
    level: Level,
    addr: u64,
) -> Result<PhysAddr, HugePteError> {
    let d = cpu.ram().read_desc(slot);
    match d.kind(level) {
        DescKind::Table => Ok(PhysAddr(d.addr())),
        DescKind::Invalid => {
            let t = alloc.alloc_table(cpu).ok_or(HugePteError::NoMemory)?;
            let desc = Desc::table(t.0, USER_TABLE);
            let r =
                if level <= Level::P4d { pgtable::set_pgd(cpu, slot, desc) } else { pgtable::set_pmd(cpu, slot, desc) };
            if let Err(e) = r {
                alloc.free_table(cpu, t);
                return Err(e.into());
            }
            Ok(t)
        }
        _ => Err(HugePteError::LeafInTheWay { addr, level }),
    }
}

/// Check that `[addr, addr + size)` is an aligned range of `asp`.
fn check_user_range(asp: &AddressSpace, addr: u64, size: u64) -> Result<(), HugePteError> {
    if !hugetlb_valid_size(size) {
        return Err(HugePteError::InvalidSize { size });
    }
    if !addr.is_multiple_of(size) || addr.checked_add(size - 1).is_none_or(|last| !asp.covers(addr, last)) {
        return Err(HugePteError::Unaligned { addr, size });
    }
    Ok(())
}

/// `huge_pte_alloc()`: the slot of the first entry mapping a huge page of
/// `size` at `addr`, with the tables above it allocated: the PUD slot for
/// 1 GiB, the PMD slot for 2 MiB and 32 MiB, the first of 16 PTE slots for
/// 64 KiB.
///
/// # Errors
/// [`HugePteError::InvalidSize`], [`HugePteError::Unaligned`] (the kernel
/// WARNs), [`HugePteError::NoMemory`], [`HugePteError::LeafInTheWay`].
pub fn huge_pte_alloc<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<Cpu<'m>>,
    addr: u64,
    size: u64,
) -> Result<PhysAddr, HugePteError> {
    check_user_range(asp, addr, size)?;
    let p4dp = asp.p4d_offset(addr, |pgdp| table_below(cpu, alloc, pgdp, Level::Pgd, addr))?;
    let pud_t = table_below(cpu, alloc, p4dp, Level::P4d, addr)?;
    let pudp = entry_pa(pud_t, Level::Pud.index(addr));
    if size == PUD_SIZE {
        return Ok(pudp);
    }
    let pmd_t = table_below(cpu, alloc, pudp, Level::Pud, addr)?;
    let pmdp = entry_pa(pmd_t, Level::Pmd.index(addr));
    if size != CONT_PTE_SIZE {
        return Ok(pmdp);
    }
    let pte_t = table_below(cpu, alloc, pmdp, Level::Pmd, addr)?;
    Ok(entry_pa(pte_t, Level::Pte.index(addr)))
}

/// `huge_pte_offset()`: the slot of the first entry of a huge page of
/// `size` at `addr` (rounded down to the size), without allocating: the
/// PUD or PMD slot if it holds a leaf or nothing and the size lives there,
/// the first PTE slot of the run for 64 KiB; `None` when a table on the way
/// is missing.
pub fn huge_pte_offset(m: &(impl TableMemory + ?Sized), asp: &AddressSpace, addr: u64, size: u64) -> Option<PhysAddr> {
    let table = |slot: PhysAddr, level: Level| {
        let d = m.read_desc(slot);
        (d.kind(level) == DescKind::Table).then_some(PhysAddr(d.addr())).ok_or(())
    };
    let p4dp = asp.p4d_offset(addr, |pgdp| table(pgdp, Level::Pgd)).ok()?;
    let pudp = entry_pa(table(p4dp, Level::P4d).ok()?, Level::Pud.index(addr));
    let pud = m.read_desc(pudp);
    match pud.kind(Level::Pud) {
        DescKind::Invalid if size != PUD_SIZE && pud.0 == 0 => return None,
        DescKind::Table => {}
        _ => return Some(pudp),
    }
    let addr = if size == CONT_PMD_SIZE { addr & !(CONT_PMD_SIZE - 1) } else { addr };
    let pmdp = entry_pa(PhysAddr(pud.addr()), Level::Pmd.index(addr));
    let pmd = m.read_desc(pmdp);
    match pmd.kind(Level::Pmd) {
        DescKind::Invalid if !(size == PMD_SIZE || size == CONT_PMD_SIZE) && pmd.0 == 0 => return None,
        DescKind::Table => {}
        _ => return Some(pmdp),
    }
    if size == CONT_PTE_SIZE {
        let a = addr & !(CONT_PTE_SIZE - 1);
        return Some(entry_pa(PhysAddr(pmd.addr()), Level::Pte.index(a)));
    }
    None
}

/// `find_num_contig()`: from a slot alone, the entries of a contiguous run
/// starting there: 16 PMDs if `ptep` is the PMD slot of `addr`, else 16
/// PTEs.
pub fn find_num_contig(m: &(impl TableMemory + ?Sized), asp: &AddressSpace, addr: u64, ptep: PhysAddr) -> (usize, u64) {
    let w = pgtable::walk(m, asp, addr);
    if w.steps.iter().any(|s| s.level == Level::Pmd && s.slot == ptep) {
        (CONT_PMDS, PMD_SIZE)
    } else {
        (CONT_PTES, PAGE_SIZE)
    }
}

/// The `i`-th slot of a run starting at `ptep` (runs never cross a table).
const fn slot(ptep: PhysAddr, i: usize) -> PhysAddr {
    PhysAddr(ptep.0 + 8 * i as u64)
}

/// `huge_ptep_get()`: the first entry, with dirty and young gathered from
/// every entry of a contiguous run (hardware sets them per entry).
pub fn huge_ptep_get(m: &Machine, ptep: PhysAddr, size: u64) -> Desc {
    let first = m.read_desc(ptep);
    if !first.is_valid() || !first.is_cont() {
        return first;
    }
    let Ok((ncontig, _)) = num_contig_ptes(size) else { return first };
    (1..ncontig).fold(first, |acc, i| gather_dirty_young(acc, m.read_desc(slot(ptep, i))))
}

/// `pte_mkdirty`/`pte_mkyoung` of `acc` if `other` is dirty/young.
fn gather_dirty_young(acc: Desc, other: Desc) -> Desc {
    let mut v = acc.0;
    // pte_dirty(): the software bit, or hardware-dirty (DBM and writable).
    if other.has(PTE_DIRTY) || (other.has(PTE_WRITE) && !other.has(PTE_RDONLY)) {
        v |= PTE_DIRTY;
    }
    if other.has(PTE_AF) {
        v |= PTE_AF;
    }
    Desc(v)
}

/// `get_clear_contig()`: clear `ncontig` entries from `ptep` (each an
/// exchange with 0, `__ptep_get_and_clear`) and return the first, with the
/// dirty and young bits of the others if it was valid. No flush.
fn get_clear_contig(cpu: &Cpu<'_>, ptep: PhysAddr, ncontig: usize) -> Desc {
    let first = pgtable::ptep_get_and_clear(cpu, ptep);
    let present = first.is_valid();
    (1..ncontig).fold(first, |acc, i| {
        let d = pgtable::ptep_get_and_clear(cpu, slot(ptep, i));
        if present { gather_dirty_young(acc, d) } else { acc }
    })
}

/// `__flush_tlb_range()` with a level hint: round to `stride`; past the
/// limit `flush_tlb_mm()`; else `dsb ishst`, one op per stride (or range
/// ops), `dsb ish`.
fn flush_tlb_range_level(cpu: &Cpu<'_>, asid: u16, start: u64, end: u64, stride: u64, last_level: bool, ttl: u8) {
    let start = start & !(stride - 1);
    let end = (end + stride - 1) & !(stride - 1);
    let pages = (end - start) / PAGE_SIZE;
    if tlb::flush_tlb_range_limit_excess(cpu.arch().tlbi_range, start, end, pages, stride) {
        return tlb::flush_tlb_mm(cpu, asid);
    }
    cpu.dsb(ishst);
    let op = if last_level { RangeOp::Vale1is } else { RangeOp::Vae1is };
    tlb::flush_tlb_range_op(cpu, op, start, pages, stride, asid, ttl);
    tlb::tlbi_sync_s1ish(cpu);
}

/// `__flush_hugetlb_tlb_range()` (6.16): the stride and level hint from
/// the entry size: 1 GiB at level 1, 2 MiB (also for 32 MiB) at level 2,
/// 4 KiB at level 3 for 64 KiB, else 4 KiB with no hint.
fn flush_hugetlb_tlb_range_stride(cpu: &Cpu<'_>, asid: u16, start: u64, end: u64, stride: u64, last_level: bool) {
    let (stride, ttl) = match stride {
        PUD_SIZE => (PUD_SIZE, 1),
        PMD_SIZE | CONT_PMD_SIZE => (PMD_SIZE, 2),
        CONT_PTE_SIZE => (PAGE_SIZE, 3),
        _ => (PAGE_SIZE, TLBI_TTL_UNKNOWN),
    };
    flush_tlb_range_level(cpu, asid, start, end, stride, last_level, ttl);
}

/// `flush_hugetlb_tlb_range()` of Linux 6.12 (arch/arm64/include/asm/hugetlb.h
/// before eed6bfa8b282): the PMD and PUD sizes at their own stride with
/// the level as hint, every other size (64 KiB, 32 MiB) at 4 KiB with hint
/// 0, which the range ops encode as no hint (the engine's
/// [`TLBI_TTL_UNKNOWN`]). Not last level.
fn flush_hugetlb_tlb_range_v6_12(cpu: &Cpu<'_>, asid: u16, start: u64, end: u64, size: u64) {
    let (stride, ttl) = match size {
        PMD_SIZE => (PMD_SIZE, 2),
        PUD_SIZE => (PUD_SIZE, 1),
        _ => (PAGE_SIZE, TLBI_TTL_UNKNOWN),
    };
    flush_tlb_range_level(cpu, asid, start, end, stride, false, ttl);
}

/// `flush_hugetlb_tlb_range()`: the flush after unmapping or changing huge
/// pages of `size` in `[start, end)`, as `mmu_gather` and
/// `hugetlb_change_protection()` call it (`size` is the hstate's,
/// `huge_page_size(hstate_vma(vma))`). 6.12: PMD or PUD stride for those
/// sizes, 4 KiB otherwise; 6.16 to 7.2: `__flush_hugetlb_tlb_range(size,
/// false)` (`TLBF_NONE` in 7.2). Neither is last level.
pub fn flush_hugetlb_tlb_range(cpu: &Cpu<'_>, asid: u16, start: u64, end: u64, size: u64, scope: HugeTlbScope) {
    match scope {
        HugeTlbScope::V6_12 => flush_hugetlb_tlb_range_v6_12(cpu, asid, start, end, size),
        HugeTlbScope::V6_16 => flush_hugetlb_tlb_range_stride(cpu, asid, start, end, size, false),
    }
}

/// The flush of a break: 6.12 `flush_tlb_range(vma, start, end)`, 6.16
/// `__flush_hugetlb_tlb_range(vma, start, end, pgsize, true)`.
fn break_flush(cpu: &Cpu<'_>, asid: u16, start: u64, end: u64, pgsize: u64, scope: HugeTlbScope) {
    match scope {
        HugeTlbScope::V6_12 => tlb::flush_tlb_range(cpu, asid, start, end, PAGE_SIZE, false),
        HugeTlbScope::V6_16 => flush_hugetlb_tlb_range_stride(cpu, asid, start, end, pgsize, true),
    }
}

/// The ASID of a user address space (0 for the kernel's, which hugetlb
/// never maps into).
fn asid(asp: &AddressSpace) -> u16 {
    asp.asid().unwrap_or(0)
}

/// `get_clear_contig_flush()`: the break with its flush.
fn get_clear_contig_flush(
    cpu: &Cpu<'_>,
    asp: &AddressSpace,
    addr: u64,
    ptep: PhysAddr,
    pgsize: u64,
    ncontig: usize,
    scope: HugeTlbScope,
) -> Desc {
    let orig = get_clear_contig(cpu, ptep, ncontig);
    break_flush(cpu, asid(asp), addr, addr + pgsize * ncontig as u64, pgsize, scope);
    orig
}

/// `set_huge_pte_at()`: map the huge page of `size` at `addr` with `pte`
/// (from [`arch_make_huge_pte`]) at `ptep` (from [`huge_pte_alloc`]). A
/// non-present value is copied to every entry; a block is written as one
/// entry (a live block must have been cleared first, else the
/// break-before-make checker refuses the write); a contiguous run is broken
/// first (cleared and flushed; in 6.16 only if its first entry is valid),
/// then written entry by entry.
///
/// # Errors
/// [`HugePteError::InvalidSize`], [`HugePteError::Unaligned`],
/// [`HugePteError::Pgtable`] (`BreakBeforeMake`: a live block remapped
/// without being cleared). Nothing is written then.
pub fn set_huge_pte_at(
    cpu: &Cpu<'_>,
    asp: &AddressSpace,
    addr: u64,
    ptep: PhysAddr,
    pte: Desc,
    size: u64,
    scope: HugeTlbScope,
) -> Result<(), HugePteError> {
    check_user_range(asp, addr, size)?;
    let (ncontig, pgsize) = num_contig_ptes(size)?;
    let level = huge_level(size);
    let m = cpu.ram();
    if !pte.is_valid() {
        for i in 0..ncontig {
            pgtable::set_pte(cpu, slot(ptep, i), pte)?;
        }
        return Ok(());
    }
    if !pte.is_cont() {
        if pte.kind(level) != DescKind::Block && pte.kind(level) != DescKind::Page {
            return Err(HugePteError::InvalidSize { size });
        }
        pgtable::set_pte(cpu, ptep, pte)?;
        return Ok(());
    }
    if !pte.addr().is_multiple_of(size) {
        return Err(HugePteError::Unaligned { addr: pte.addr(), size });
    }
    if scope == HugeTlbScope::V6_12 || m.read_desc(ptep).is_valid() {
        // The break: clear the whole run, then flush it.
        for i in 0..ncontig {
            pgtable::ptep_get_and_clear(cpu, slot(ptep, i));
        }
        break_flush(cpu, asid(asp), addr, addr + pgsize * ncontig as u64, pgsize, scope);
    }
    // The make: __set_ptes() for each entry, the output address stepping by
    // pgsize.
    pgtable::set_ptes(cpu, ptep, pte, ncontig, pgsize)?;
    Ok(())
}

/// `huge_pte_clear()`: clear every entry, no flush.
///
/// # Errors
/// [`HugePteError::InvalidSize`].
pub fn huge_pte_clear(cpu: &Cpu<'_>, ptep: PhysAddr, size: u64) -> Result<(), HugePteError> {
    let (ncontig, _) = num_contig_ptes(size)?;
    for i in 0..ncontig {
        pgtable::pte_clear(cpu, slot(ptep, i));
    }
    Ok(())
}

/// `huge_ptep_get_and_clear()`: clear every entry of the huge page of
/// `size` at `ptep` and return the first with the dirty and young bits of
/// all. No flush: the caller gathers it (`tlb_remove_huge_tlb_entry`, then
/// [`flush_hugetlb_tlb_range`]).
///
/// # Errors
/// [`HugePteError::InvalidSize`].
pub fn huge_ptep_get_and_clear(cpu: &Cpu<'_>, ptep: PhysAddr, size: u64) -> Result<Desc, HugePteError> {
    let (ncontig, _) = num_contig_ptes(size)?;
    Ok(get_clear_contig(cpu, ptep, ncontig))
}

/// `huge_ptep_clear_flush()`: clear and flush the huge page of `size` at
/// `ptep` (mapping `addr`); returns the old first entry (dirty and young
/// gathered). 6.12: a block is `ptep_clear_flush()`, one
/// `flush_tlb_page()` if it was valid; a contiguous run (sized by
/// [`find_num_contig`]) is the break with its flush. 6.16 to 7.2:
/// `get_clear_contig_flush()` for every size, its entries from
/// `num_contig_ptes(size)`, always flushed at the entry size, last level.
///
/// # Errors
/// [`HugePteError::InvalidSize`] for a size arm64 does not offer; nothing
/// is cleared.
pub fn huge_ptep_clear_flush(
    cpu: &Cpu<'_>,
    asp: &AddressSpace,
    addr: u64,
    ptep: PhysAddr,
    size: u64,
    scope: HugeTlbScope,
) -> Result<Desc, HugePteError> {
    let (ncontig, pgsize) = num_contig_ptes(size)?;
    let m = cpu.ram();
    if scope == HugeTlbScope::V6_16 {
        let start = addr & !(size - 1);
        return Ok(get_clear_contig_flush(cpu, asp, start, ptep, pgsize, ncontig, scope));
    }
    if !m.read_desc(ptep).is_cont() {
        let old = pgtable::ptep_get_and_clear(cpu, ptep);
        if old.is_valid() {
            tlb::flush_tlb_page(cpu, asid(asp), addr);
        }
        return Ok(old);
    }
    let (ncontig, pgsize) = find_num_contig(m, asp, addr, ptep);
    let start = addr & !(pgsize * ncontig as u64 - 1);
    Ok(get_clear_contig_flush(cpu, asp, start, ptep, pgsize, ncontig, scope))
}

/// `free_pgtables()` + `pgd_free()` for an address space whose huge pages
/// are all unmapped: give every table (P4D, PUD, PMD, PTE and the pgd) back to
/// `alloc`. Leaves still present are not touched (their memory is the
/// huge pages', not the tables'). Returns the tables freed.
pub fn free_pgtables<'m>(cpu: &Cpu<'m>, asp: &AddressSpace, alloc: &dyn PgtableAlloc<Cpu<'m>>) -> u64 {
    fn free_below<'m>(cpu: &Cpu<'m>, alloc: &dyn PgtableAlloc<Cpu<'m>>, table: PhysAddr, level: Level) -> u64 {
        let m = cpu.ram();
        let mut n = 0;
        if let Some(next) = level.next() {
            for i in 0..level.ptrs() {
                let e = entry_pa(table, i);
                let d = m.read_desc(e);
                if d.kind(level) == DescKind::Table {
                    n += free_below(cpu, alloc, PhysAddr(d.addr()), next);
                    pgtable::pte_clear(cpu, e);
                }
            }
        }
        alloc.free_table(cpu, table);
        n + 1
    }
    free_below(cpu, alloc, asp.pgd(), asp.root_level())
}
