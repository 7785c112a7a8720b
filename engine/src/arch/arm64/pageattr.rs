//! Permission changes on the linear map: `set_memory_ro()` /
//! `set_memory_rw()` / `set_memory_nx()` / `set_memory_x()`
//! (arch/arm64/mm/pageattr.c `change_memory_common()` →
//! `__change_memory_common()`), with the block splitting mainline added in
//! 6.18 (`split_kernel_leaf_mapping()` in mm/mmu.c, Yang Shi and Ryan
//! Roberts, "support large block mapping when rodata=full").
//!
//! # The algorithm
//!
//! A permission change rewrites the leaves of `[addr, addr + numpages *
//! 4K)` with `(old & !clear) | set` and then flushes the range
//! (`flush_tlb_kernel_range()`). Changing permission bits of a live leaf is
//! allowed without break-before-make (`pgattr_change_is_safe()`), but only
//! for whole leaves: a block or contiguous run that the range covers in
//! part must first be *split* into smaller leaves, and replacing a live
//! block by a table (or dropping the contiguous bit of a live run) is a
//! change of block size, which the architecture allows only with
//! break-before-make unless the CPU has FEAT_BBM level 2 without aborts
//! (BBML2_NOABORT). Three ways to get there, one [`SplitMode`] each:
//!
//! | mode | kernel | what is done at a leaf boundary inside a block or run |
//! |---|---|---|
//! | [`SplitMode::None`] | 6.9 to 6.17; 6.18+ on CPUs without BBML2_NOABORT (Neoverse N1: Ampere Altra) | nothing: such a range is refused ([`PageattrError::NotPageGranular`]; the kernel's `apply_to_page_range()` WARNs and returns -EINVAL). That is why `can_set_direct_map()` (`rodata=full`) makes the whole linear map page-granular |
//! | [`SplitMode::Bbml2NoAbort`] | 6.18+ `split_kernel_leaf_mapping()` on BBML2_NOABORT CPUs | the block is replaced in place by a table of smaller leaves with the same output and attributes (contiguous where aligned, as `split_pud()`/`split_pmd()` with `to_cont`), and a run's entries lose the contiguous bit (`split_contpmd()`/`split_contpte()`), with no TLB maintenance before the permission change's own flush |
//! | [`SplitMode::BreakBeforeMake`] | none (mmlab's): the sequence the ARM ARM requires without BBML2 | the block or run is invalidated, its range flushed (`flush_tlb_kernel_range()`), then the table or the non-contiguous entries are written. The kernel cannot do this on the live linear map (another CPU, or this one's stack, may touch the gap), which is the reason for `rodata=full`; mmlab does it to count what it costs |
//!
//! # Fidelity
//!
//! - *Faithful*: the boundary walk of `split_kernel_leaf_mapping_locked()`
//!   (PUD, contiguous PMD, PMD, contiguous PTE, each skipped when the
//!   address is aligned to it), the leaves written by a split, the masks of
//!   `set_memory_ro/rw` (`PTE_RDONLY`/`PTE_WRITE`), the final
//!   `flush_tlb_kernel_range()`.
//! - *Simplified*: any linear-map range is accepted (the kernel's
//!   `change_memory_common()` takes vmalloc areas and updates their linear
//!   alias; `set_direct_map_*()` take linear-map pages); the range is
//!   checked before anything changes, so a refused call changes nothing.
//! - *Instrumented*: [`PageattrCounts`].

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::{BarrierCounts, ishst};
use crate::arch::arm64::cpu::ArchCpu;
use crate::arch::arm64::memory::PAGE_END;
use crate::arch::arm64::pgtable::desc::bits::{PTE_CONT, PTE_MAYBE_GP, PTE_PXN, PTE_RDONLY, PTE_WRITE};
use crate::arch::arm64::pgtable::desc::{CONT_PMD_SIZE, CONT_PTE_SIZE, PMD_SIZE, PUD_SIZE};
use crate::arch::arm64::pgtable::{
    Desc, Level, PgtableAlloc, PgtableError, TableMemory, entry_pa, for_each_leaf, set_pmd, set_pte, set_pud, walk,
};
use crate::arch::arm64::tlb::{TlbiCounts, flush_tlb_kernel_range};
use crate::counters::CounterSet;
use std::ops::ControlFlow;

/// How a block or contiguous run that a range covers in part is split
/// (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitMode {
    /// No split: the range must already be page-granular.
    #[default]
    None,
    /// 6.18's `split_kernel_leaf_mapping()` on a BBML2_NOABORT CPU.
    Bbml2NoAbort,
    /// Break-before-make: invalidate, flush, write (mmlab's).
    BreakBeforeMake,
}

impl SplitMode {
    /// The values `arm64.split_mode` takes.
    pub const NAMES: [(SplitMode, &'static str); 3] = [
        (SplitMode::None, "none"),
        (SplitMode::Bbml2NoAbort, "bbml2-noabort"),
        (SplitMode::BreakBeforeMake, "break-before-make"),
    ];
    /// The `arm64.split_mode=` spelling.
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize].1
    }
}

impl std::str::FromStr for SplitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(m, _)| *m)
            .ok_or_else(|| format!("unknown split mode {s:?} (none|bbml2-noabort|break-before-make)"))
    }
}

crate::counter_snapshot! {
    /// What one permission change did (instrumented).
    pub struct PageattrCounts {
        /// PUD blocks split into PMD tables.
        pub split_pud: u64,
        /// PMD blocks split into PTE tables.
        pub split_pmd: u64,
        /// Contiguous PMD runs split.
        pub split_cont_pmd: u64,
        /// Contiguous PTE runs split.
        pub split_cont_pte: u64,
        /// Table pages allocated for splits.
        pub tables: u64,
        /// Blocks or runs invalidated and flushed first (break-before-make).
        pub breaks: u64,
        /// Leaves whose permissions changed.
        pub leaves_changed: u64,
    }
}

/// The record of one change.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PageattrReport {
    /// How blocks were split.
    pub mode: SplitMode,
    /// What was done.
    pub counts: PageattrCounts,
    /// TLBIs issued.
    pub tlbi: TlbiCounts,
    /// Barriers issued.
    pub barriers: BarrierCounts,
}

/// Why a permission change was refused; nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageattrError {
    /// The start is not page-aligned, or the range leaves the linear map.
    BadRange {
        /// Start of the range.
        addr: u64,
        /// Pages asked for.
        numpages: u64,
    },
    /// A page of the range is not mapped.
    NotMapped {
        /// Its address.
        addr: u64,
    },
    /// The range covers part of a block or contiguous run and the split
    /// mode is [`SplitMode::None`] (-EINVAL).
    NotPageGranular {
        /// The address inside the leaf.
        addr: u64,
        /// The leaf's level.
        level: Level,
    },
    /// No page for a split table (-ENOMEM).
    NoMemory,
    /// A table write was refused.
    Pgtable(PgtableError),
}

impl std::fmt::Display for PageattrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageattrError::BadRange { addr, numpages } => {
                write!(f, "set_memory: {numpages} pages at {addr:#x} are not a page-aligned linear-map range")
            }
            PageattrError::NotMapped { addr } => write!(f, "set_memory: {addr:#x} is not mapped"),
            PageattrError::NotPageGranular { addr, level } => write!(
                f,
                "set_memory: {addr:#x} lies inside a {} block or contiguous run that the range covers in part, \
                 and this CPU cannot split it (no BBML2_NOABORT): -EINVAL",
                level.name()
            ),
            PageattrError::NoMemory => write!(f, "set_memory: no page for a split table: -ENOMEM"),
            PageattrError::Pgtable(e) => write!(f, "set_memory: {e}"),
        }
    }
}
impl std::error::Error for PageattrError {}
impl From<PgtableError> for PageattrError {
    fn from(e: PgtableError) -> Self {
        PageattrError::Pgtable(e)
    }
}

/// The span a leaf's contiguous run covers (its own size if not contiguous).
fn run_span(level: Level, d: Desc) -> u64 {
    match (level, d.is_cont()) {
        (Level::Pte, true) => CONT_PTE_SIZE,
        (Level::Pmd, true) => CONT_PMD_SIZE,
        _ => level.entry_size(),
    }
}

/// `set_memory_ro()`: clear `PTE_WRITE`, set `PTE_RDONLY`.
///
/// # Errors
///
/// As [`change_memory_common`].
pub fn set_memory_ro<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    numpages: u64,
    mode: SplitMode,
) -> Result<PageattrReport, PageattrError> {
    change_memory_common(cpu, tables, addr, numpages, PTE_RDONLY, PTE_WRITE, mode)
}

/// `set_memory_rw()`: set `PTE_WRITE`, clear `PTE_RDONLY`.
///
/// # Errors
///
/// As [`change_memory_common`].
pub fn set_memory_rw<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    numpages: u64,
    mode: SplitMode,
) -> Result<PageattrReport, PageattrError> {
    change_memory_common(cpu, tables, addr, numpages, PTE_WRITE, PTE_RDONLY, mode)
}

/// Mirrors arch/arm64/mm/pageattr.c `set_memory_nx()`: set `PTE_PXN`,
/// clear `PTE_MAYBE_GP` (0 here: the emulated kernel has no BTI).
///
/// # Errors
///
/// As [`change_memory_common`].
pub fn set_memory_nx<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    numpages: u64,
    mode: SplitMode,
) -> Result<PageattrReport, PageattrError> {
    change_memory_common(cpu, tables, addr, numpages, PTE_PXN, PTE_MAYBE_GP, mode)
}

/// Mirrors arch/arm64/mm/pageattr.c `set_memory_x()`: clear `PTE_PXN`, set
/// `PTE_MAYBE_GP` (0 here).
///
/// # Errors
///
/// As [`change_memory_common`].
pub fn set_memory_x<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    numpages: u64,
    mode: SplitMode,
) -> Result<PageattrReport, PageattrError> {
    change_memory_common(cpu, tables, addr, numpages, PTE_MAYBE_GP, PTE_PXN, mode)
}

/// Mirrors `change_memory_common()` for a linear-map range: split the
/// leaves at both ends as `mode` allows (`split_kernel_leaf_mapping()`),
/// rewrite every leaf of the range with `(old & !clear) | set`, then
/// `flush_tlb_kernel_range()`. `numpages == 0` does nothing.
///
/// # Errors
///
/// [`PageattrError::BadRange`], [`PageattrError::NotMapped`],
/// [`PageattrError::NotPageGranular`] (checked before anything changes);
/// [`PageattrError::NoMemory`] if a split table cannot be allocated (the
/// splits made so far stay: they map the same memory).
pub fn change_memory_common<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    numpages: u64,
    set: u64,
    clear: u64,
    mode: SplitMode,
) -> Result<PageattrReport, PageattrError> {
    let (t0, b0) = (cpu.system_tlbi_counts(), cpu.system_barrier_counts());
    let end = numpages.checked_mul(PAGE_SIZE).and_then(|b| addr.checked_add(b));
    let Some(end) =
        end.filter(|&e| addr.is_multiple_of(PAGE_SIZE) && addr >= cpu.arch().va.page_offset() && e <= PAGE_END)
    else {
        return Err(PageattrError::BadRange { addr, numpages });
    };
    let mut counts = PageattrCounts::default();
    if numpages == 0 {
        return Ok(PageattrReport { mode, counts, tlbi: TlbiCounts::default(), barriers: BarrierCounts::default() });
    }
    // Check: every page mapped; without a split mode, no leaf straddles an
    // end. One visit of the range's leaves; `next` is where the entry after
    // the last one seen must start.
    let asp = crate::arch::arm64::pgtable::init_mm(cpu);
    let mut next = addr;
    let mut refused = None;
    for_each_leaf(cpu.ram(), &asp, addr, end, |base, leaf| {
        if base > next {
            refused = Some(PageattrError::NotMapped { addr: next });
            return ControlFlow::Break(());
        }
        let span = run_span(leaf.level, leaf.desc);
        let run = base & !(span - 1);
        // Without BBML2 a contiguous run's permissions cannot change in
        // place either (pgattr_change_is_safe()).
        if mode == SplitMode::None && (run < addr || run + span > end || leaf.desc.is_cont()) {
            refused = Some(PageattrError::NotPageGranular { addr: next, level: leaf.level });
            return ControlFlow::Break(());
        }
        next = base + leaf.level.entry_size();
        ControlFlow::Continue(())
    });
    if let Some(e) = refused {
        return Err(e);
    }
    if next < end {
        return Err(PageattrError::NotMapped { addr: next });
    }
    if mode != SplitMode::None {
        split_kernel_leaf_mapping(cpu, tables, addr, mode, &mut counts)?;
        if end < PAGE_END {
            split_kernel_leaf_mapping(cpu, tables, end, mode, &mut counts)?;
        }
    }
    // __change_memory_common(): the leaves of the range, in place (the
    // splits made both ends leaf boundaries).
    let mut failed = None;
    for_each_leaf(cpu.ram(), &asp, addr, end, |base, mut leaf| {
        if mode == SplitMode::BreakBeforeMake && leaf.desc.is_cont() {
            // A run inside the range: break it too, then change its entries.
            split_cont(cpu, base, leaf.slot, leaf.level, mode, &mut counts);
            match leaf.level {
                Level::Pte => counts.split_cont_pte += 1,
                _ => counts.split_cont_pmd += 1,
            }
            leaf.desc = cpu.ram().read_desc(leaf.slot);
        }
        let new = Desc((leaf.desc.0 & !clear) | set);
        if let Err(e) = write_live(cpu, leaf.slot, leaf.level, new, mode) {
            failed = Some(e);
            return ControlFlow::Break(());
        }
        counts.leaves_changed += 1;
        ControlFlow::Continue(())
    });
    if let Some(e) = failed {
        return Err(e);
    }
    flush_tlb_kernel_range(cpu, addr, end);
    Ok(PageattrReport {
        mode,
        counts,
        tlbi: cpu.system_tlbi_counts().delta(&t0),
        barriers: cpu.system_barrier_counts().delta(&b0),
    })
}

/// Rewrite a live leaf whose output stays: with the BBM check
/// (`pgattr_change_is_safe()`), except for contiguous entries under
/// BBML2_NOABORT, which may change as the kernel's `__set_pte()` does.
fn write_live(cpu: &ArchCpu<'_>, slot: PhysAddr, level: Level, d: Desc, mode: SplitMode) -> Result<(), PageattrError> {
    if mode == SplitMode::Bbml2NoAbort && d.is_cont() {
        cpu.ram().desc_slot(slot).store(d.0, std::sync::atomic::Ordering::Relaxed);
        crate::arch::arm64::pgtable::emit_pte_barriers(cpu);
        return Ok(());
    }
    match level {
        Level::Pte => set_pte(cpu, slot, d)?,
        Level::Pmd => set_pmd(cpu, slot, d)?,
        _ => set_pud(cpu, slot, d)?,
    }
    Ok(())
}

/// Mirrors mm/mmu.c `split_kernel_leaf_mapping_locked()` (6.18): make
/// `addr` a leaf boundary, from the PUD level down. At each level, an
/// address aligned to it is a boundary already; else a block (or
/// contiguous run) containing it is split.
fn split_kernel_leaf_mapping<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    mode: SplitMode,
    counts: &mut PageattrCounts,
) -> Result<(), PageattrError> {
    let asp = crate::arch::arm64::pgtable::init_mm(cpu);
    for align in [PUD_SIZE, CONT_PMD_SIZE, PMD_SIZE, CONT_PTE_SIZE] {
        if addr.is_multiple_of(align) {
            return Ok(());
        }
        let Some(leaf) = walk(cpu.ram(), &asp, addr).leaf else { return Ok(()) };
        match (leaf.level, align) {
            (Level::Pud, PUD_SIZE) => split_block(cpu, tables, addr, leaf.slot, leaf.desc, Level::Pud, mode, counts)?,
            (Level::Pmd, CONT_PMD_SIZE) if leaf.desc.is_cont() => {
                split_cont(cpu, addr, leaf.slot, Level::Pmd, mode, counts);
                counts.split_cont_pmd += 1;
            }
            (Level::Pmd, PMD_SIZE) => split_block(cpu, tables, addr, leaf.slot, leaf.desc, Level::Pmd, mode, counts)?,
            (Level::Pte, CONT_PTE_SIZE) if leaf.desc.is_cont() => {
                split_cont(cpu, addr, leaf.slot, Level::Pte, mode, counts);
                counts.split_cont_pte += 1;
            }
            _ => {}
        }
    }
    Ok(())
}

/// `split_pud()` / `split_pmd()` with `to_cont`: a table of the next level
/// holding the block's memory with the block's attributes, contiguous
/// runs where the block was not itself part of a smaller split; then the
/// table replaces the block (directly under BBML2_NOABORT; after an
/// invalidation and flush of the block for break-before-make).
#[allow(clippy::too_many_arguments)]
fn split_block<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    tables: &dyn PgtableAlloc<C>,
    addr: u64,
    slot: PhysAddr,
    block: Desc,
    level: Level,
    mode: SplitMode,
    counts: &mut PageattrCounts,
) -> Result<(), PageattrError> {
    let table = tables.alloc_table(cpu).ok_or(PageattrError::NoMemory)?;
    counts.tables += 1;
    let below = level.next().unwrap_or(Level::Pte);
    let step = below.entry_size();
    let base_pa = block.addr();
    // The block's attributes (without the contiguous bit) on the new leaves,
    // with PTE_CONT on all of them: 512 entries are 32 whole runs.
    let attrs = block.attrs() & !PTE_CONT & !crate::arch::arm64::pgtable::desc::bits::PTE_TYPE_MASK;
    for i in 0..crate::arch::arm64::pgtable::desc::PTRS_PER_TABLE {
        let pa = base_pa + i as u64 * step;
        let leaf = match below {
            Level::Pte => Desc(pa | attrs | crate::arch::arm64::pgtable::desc::bits::PTE_TYPE_PAGE | PTE_CONT),
            _ => Desc(pa | attrs | crate::arch::arm64::pgtable::desc::bits::PMD_TYPE_SECT | PTE_CONT),
        };
        cpu.ram().desc_slot(entry_pa(table, i)).store(leaf.0, std::sync::atomic::Ordering::Relaxed);
    }
    // Ensure the entries are visible before the table is.
    cpu.dsb(ishst);
    let table_desc = Desc::table(
        table.0,
        crate::arch::arm64::pgtable::desc::bits::PMD_TYPE_TABLE
            | crate::arch::arm64::pgtable::desc::bits::TABLE_UXN
            | crate::arch::arm64::pgtable::desc::bits::TABLE_PXN,
    );
    let block_va = addr & !(level.entry_size() - 1);
    match mode {
        SplitMode::BreakBeforeMake => {
            cpu.ram().desc_slot(slot).store(0, std::sync::atomic::Ordering::Relaxed);
            counts.breaks += 1;
            flush_tlb_kernel_range(cpu, block_va, block_va + level.entry_size());
            match level {
                Level::Pud => set_pud(cpu, slot, table_desc)?,
                _ => set_pmd(cpu, slot, table_desc)?,
            }
        }
        _ => {
            // BBML2_NOABORT: a live block may become a table of the same
            // output and attributes without break-before-make.
            cpu.ram().desc_slot(slot).store(table_desc.0, std::sync::atomic::Ordering::Relaxed);
            crate::arch::arm64::pgtable::emit_pte_barriers(cpu);
        }
    }
    match level {
        Level::Pud => counts.split_pud += 1,
        _ => counts.split_pmd += 1,
    }
    Ok(())
}

/// `split_contpmd()` / `split_contpte()`: the run's entries without the
/// contiguous bit (for break-before-make: all invalidated and the run
/// flushed first).
fn split_cont(
    cpu: &ArchCpu<'_>,
    addr: u64,
    slot: PhysAddr,
    level: Level,
    mode: SplitMode,
    counts: &mut PageattrCounts,
) {
    let n = 16u64;
    let span = level.entry_size() * n;
    let first_slot = PhysAddr(slot.0 & !(n * 8 - 1));
    let run_va = addr & !(span - 1);
    let old: [Desc; 16] = std::array::from_fn(|i| cpu.ram().read_desc(PhysAddr(first_slot.0 + i as u64 * 8)));
    if mode == SplitMode::BreakBeforeMake {
        for i in 0..n {
            cpu.ram().desc_slot(PhysAddr(first_slot.0 + i * 8)).store(0, std::sync::atomic::Ordering::Relaxed);
        }
        counts.breaks += 1;
        flush_tlb_kernel_range(cpu, run_va, run_va + span);
    }
    for (i, d) in old.iter().enumerate() {
        let s = PhysAddr(first_slot.0 + i as u64 * 8);
        cpu.ram().desc_slot(s).store(d.0 & !PTE_CONT, std::sync::atomic::Ordering::Relaxed);
    }
    crate::arch::arm64::pgtable::emit_pte_barriers(cpu);
}
