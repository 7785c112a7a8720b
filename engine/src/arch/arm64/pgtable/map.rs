//! Creating and removing mappings: whole ranges built level by level
//! (arch/arm64/mm/mmu.c `__create_pgd_mapping()`, mm/vmalloc.c
//! `vmap_range_noflush()` / `vunmap_range_noflush()`), and the per-level
//! helpers vmalloc uses (`pmd_alloc_track()`, `pte_alloc_kernel_track()`,
//! `vmap_try_huge_pmd()`).
//!
//! [`map_range`] walks down from the pgd for each piece of the range,
//! allocating missing tables from a [`PgtableAlloc`] and installing them
//! with their barriers, and at each level uses the largest leaf that VA, PA
//! and size allow under [`MapFlags`]: a PUD or PMD block, a contiguous run
//! of 16 PMDs or PTEs, or single pages. An empty table where a block goes is
//! taken out and freed. Every change is noted in a journal, so that a
//! failure part-way (an unsafe live change, no memory for a table) undoes
//! all of it; the kernel has no such path (see [`map_range`]).
//!
//! [`unmap_range`] first walks the range to check that no block or
//! contiguous run is cut, then walks it again clearing leaves (get and
//! clear, no barriers), one walk per table and the entries of a PTE table in
//! a row, as `vunmap_p*d_range()` do. Both hand back the TLB maintenance
//! owed as a [`TlbFlush`]. Within a PTE table only the entries of the runs
//! holding the range's first and last page are checked (no other run can
//! be cut), and a valid entry is cleared with one load and one store (see
//! `scan_pte_table` for why that clears what the kernel's exchange does).

use super::desc::{self, Desc, DescKind, Level};
use super::desc::{CONT_PMD_SIZE, CONT_PMDS, CONT_PTE_SIZE, CONT_PTES, PMD_SIZE, PTRS_PER_TABLE, PUD_SIZE, PgProt};
use super::entry::*;
use super::walk::walk_with;
use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::cpu::ArchCpu;
use crate::arch::arm64::tlb::TlbFlush;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
#[inline(always)]
fn table_below<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    slot: PhysAddr,
    level: Level,
) -> Result<PhysAddr, PgtableError> {
    table_below_tracked(cpu, asp, alloc, slot, level).map(|(t, _)| t)
}

/// [`table_below`], also telling whether this call installed the table.
/// The common case, a table already there, is inline; installing one is
/// [`install_table`].
#[inline(always)]
fn table_below_tracked<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    slot: PhysAddr,
    level: Level,
) -> Result<(PhysAddr, bool), PgtableError> {
    let d = cpu.ram().read_desc(slot);
    match d.kind(level) {
        DescKind::Table => Ok((PhysAddr(d.addr()), false)),
        DescKind::Invalid => install_table(cpu, asp, alloc, slot, level),
        _ => Err(PgtableError::BreakBeforeMake { entry: slot, old: d, new: Desc::table(0, asp.table_attrs()) }),
    }
}

/// `__pte_alloc_kernel()` and its siblings for an empty entry: allocate
/// outside the lock, then install only if the slot is still empty (the
/// kernel re-checks under `init_mm.page_table_lock`; a compare-and-exchange
/// is that check and the store in one). A CPU that loses the race frees its
/// table and uses the winner's.
#[inline(never)]
fn install_table<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    slot: PhysAddr,
    level: Level,
) -> Result<(PhysAddr, bool), PgtableError> {
    let t = alloc.alloc_table(cpu).ok_or(PgtableError::NoMemory)?;
    let new = Desc::table(t.0, asp.table_attrs());
    match cpu.ram().desc_slot(slot).compare_exchange(0, new.0, Relaxed, Relaxed) {
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

/// Before a block goes into `slot`: if it holds a table whose entries are
/// all empty, take the table out and free it, as `pmd_free_pte_page()` /
/// `pud_free_pmd_page()` do (clear the entry, `__flush_tlb_kernel_pgtable`
/// so no walk cache keeps it, free the page). Returns false if the slot
/// holds a table that still maps something: the caller then maps at the
/// next level down instead, as `vmap_try_huge_pmd()` falls back.
///
/// With `defer`, the table page is not freed but recorded, so that
/// [`map_range`] can put it back if it fails later.
fn free_empty_table_for_block<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    alloc: &dyn PgtableAlloc<C>,
    slot: PhysAddr,
    level: Level,
    va: u64,
    defer: Option<&mut MapUndo>,
) -> bool {
    let m = cpu.ram();
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
    fn snapshot(&mut self, m: &crate::arena::Arena, slot: PhysAddr, n: usize) -> Undo {
        // The common case, empty entries, is noted without allocating.
        if (0..n).all(|i| m.read_desc(entry_pa(slot, i)).0 == 0) {
            return Undo::Written { slot, n, old: None };
        }
        let olds: Vec<u64> = (0..n).map(|i| m.read_desc(entry_pa(slot, i)).0).collect();
        self.live_changed |= olds.iter().any(|&d| Desc(d).is_valid());
        Undo::Written { slot, n, old: Some(olds) }
    }

    /// Success: free the table pages that blocks replaced.
    fn commit<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(self, cpu: &C, alloc: &dyn PgtableAlloc<C>) {
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
    fn rollback<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
        self,
        cpu: &C,
        asp: &AddressSpace,
        alloc: &dyn PgtableAlloc<C>,
        va: u64,
        size: u64,
    ) {
        let m = cpu.ram();
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
pub fn map_range<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    va: u64,
    pa: u64,
    size: u64,
    prot: PgProt,
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
fn map_range_journaled<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    va: u64,
    pa: u64,
    size: u64,
    prot: PgProt,
    flags: MapFlags,
    undo: &mut MapUndo,
) -> Result<(), PgtableError> {
    let m = cpu.ram();
    let prot = prot.mknoncont();
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
        let p4d_slot = asp.p4d_offset(va_cur, |pgd_slot| below(undo, pgd_slot, Level::Pgd, va_cur))?;
        let pud_t = below(undo, p4d_slot, Level::P4d, va_cur)?;
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
                    set_ptes(cpu, pmd_slot, Desc::block(pa_cur, prot.mkcont()), CONT_PMDS, PMD_SIZE)
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
                        set_ptes(cpu, pte_slot, Desc::page(pa_cur, prot.mkcont()), CONT_PTES, PAGE_SIZE)
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
/// p4d (five levels) and pud tables allocated if missing (its descriptor written with barriers, as
/// `pud_populate` does, outside any lazy-MMU section).
///
/// # Errors
///
/// [`PgtableError::NoMemory`] if a table page cannot be allocated;
/// [`PgtableError::BreakBeforeMake`] if an entry on the way holds a leaf rather than a table.
#[inline(always)]
pub fn pmd_alloc<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    va: u64,
) -> Result<PhysAddr, PgtableError> {
    let p4d_slot = asp.p4d_offset(va, |pgd_slot| table_below(cpu, asp, alloc, pgd_slot, Level::Pgd))?;
    let pud_t = table_below(cpu, asp, alloc, p4d_slot, Level::P4d)?;
    let pud_slot = entry_pa(pud_t, Level::Pud.index(va));
    let pmd_t = table_below(cpu, asp, alloc, pud_slot, Level::Pud)?;
    Ok(entry_pa(pmd_t, Level::Pmd.index(va)))
}

/// `pte_alloc_kernel_track()`: the PTE table under the pmd slot for `va`,
/// allocated and installed (`pmd_populate_kernel`) if missing.
///
/// # Errors
///
/// As [`pmd_alloc`], one level further down.
#[inline(always)]
pub fn pte_alloc_kernel<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    asp: &AddressSpace,
    alloc: &dyn PgtableAlloc<C>,
    va: u64,
) -> Result<PteTable<'m>, PgtableError> {
    let pmd_slot = pmd_alloc(cpu, asp, alloc, va)?;
    let t = table_below(cpu, asp, alloc, pmd_slot, Level::Pmd)?;
    Ok(PteTable::new(cpu.ram(), t))
}

/// `vmap_try_huge_pmd()` + `pmd_set_huge()`: map one 2 MiB block at the pmd
/// slot if VA and PA are aligned and the slot is empty or holds an empty
/// table (freed first). Returns false when a block cannot be used here.
///
/// # Errors
///
/// What [`set_pmd`] refuses (an unsafe change of a live entry, [`PgtableError::BreakBeforeMake`]).
/// A block that cannot be used is `Ok(false)`, not an error.
pub fn try_huge_pmd<'m, C: std::ops::Deref<Target = ArchCpu<'m>>>(
    cpu: &C,
    alloc: &dyn PgtableAlloc<C>,
    pmd_slot: PhysAddr,
    va: u64,
    pa: u64,
    prot: PgProt,
) -> Result<bool, PgtableError> {
    if !(va | pa).is_multiple_of(PMD_SIZE) || !free_empty_table_for_block(cpu, alloc, pmd_slot, Level::Pmd, va, None) {
        return Ok(false);
    }
    set_pmd(cpu, pmd_slot, Desc::block(pa, prot.mknoncont()))?;
    Ok(true)
}

/// Write one contiguous run of 16 PTEs mapping `va` → `pa` (`set_huge_pte_at`
/// for a 64 KiB contpte mapping into empty slots). Both addresses must be
/// 64 KiB aligned.
///
/// # Errors
///
/// [`PgtableError::ContAlignment`] if `va` or `pa` is not 64 KiB aligned or `ptep` is not the slot
/// of `va`; what [`set_ptes`] refuses.
pub fn set_cont_ptes(cpu: &ArchCpu<'_>, ptep: PhysAddr, va: u64, pa: u64, prot: PgProt) -> Result<(), PgtableError> {
    if !(va | pa).is_multiple_of(CONT_PTE_SIZE) || Level::Pte.index(va) != ((ptep.0 % PAGE_SIZE) / 8) as usize {
        return Err(PgtableError::ContAlignment { va, pa, size: CONT_PTE_SIZE });
    }
    set_ptes(cpu, ptep, Desc::page(pa, prot.mkcont()), CONT_PTES, PAGE_SIZE)
}

/// Clear the leaves of `[va, va + size)` (`vunmap_range_noflush`: get and
/// clear, no barriers) and return the flush the caller owes. Blocks and
/// contiguous runs must be covered whole; this is checked for the whole
/// range before anything is cleared.
///
/// # Errors
///
/// [`PgtableError::BadRange`] for an empty, unaligned or wrapping range;
/// [`PgtableError::OutsideAddressSpace`]; [`PgtableError::PartialHugeUnmap`] if a block or
/// contiguous run would be cut. Nothing is cleared when an error is returned.
pub fn unmap_range(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, size: u64) -> Result<TlbFlush, PgtableError> {
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
///
/// # Errors
///
/// [`PgtableError::BadRange`] and [`PgtableError::OutsideAddressSpace`] as [`unmap_range`];
/// [`PgtableError::PartialHugeUnmap`] when the clearing walk meets a block or run it would cut
/// (entries before it are already cleared: the caller promised a range it mapped whole).
pub fn vunmap_range_noflush(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, size: u64) -> Result<(), PgtableError> {
    if size == 0 || !(va | size).is_multiple_of(PAGE_SIZE) || va.checked_add(size - 1).is_none() {
        return Err(PgtableError::BadRange { va, size });
    }
    asp.check_covers(va, size)?;
    visit_leaves(cpu, asp, va, va + (size - 1), true)
}

/// The walk of [`unmap_range`], as `vunmap_p*d_range` do it: one walk per
/// table, then the entries of a PTE table in a row. Without `clear` it only
/// checks that no block or contiguous run is cut.
fn visit_leaves(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, end: u64, clear: bool) -> Result<(), PgtableError> {
    let m = cpu.ram();
    // vunmap_pte_range(): one PTE table's entries, cleared inside a
    // lazy-MMU section as the kernel does since 6.16 (clears queue no
    // barriers, so the section costs only its thread-flag operations).
    let pte_range = |table: PhysAddr, cur: u64| {
        if !clear {
            return scan_pte_table(cpu, table, cur, end, va, false);
        }
        arch_enter_lazy_mmu_mode(cpu);
        let r = scan_pte_table(cpu, table, cur, end, va, true);
        arch_leave_lazy_mmu_mode(cpu);
        r
    };
    let mut cur = va;
    loop {
        let mut last = None;
        let leaf = walk_with(|pa| m.read_desc(pa).0, asp, cur, |s| last = Some(s));
        let step = match (leaf, last) {
            (None, Some(s)) if s.level == Level::Pte => {
                // An empty PTE slot: scan the rest of this PTE table.
                pte_range(PhysAddr(s.slot.0 & !(PAGE_SIZE - 1)), cur)?
            }
            (Some(l), _) if l.level == Level::Pte => pte_range(PhysAddr(l.slot.0 & !(PAGE_SIZE - 1)), cur)?,
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
                let sz = s.map_or(Level::P4d, |s| s.level).entry_size();
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
/// of the range `[va, end]`; returns the bytes covered.
///
/// A contiguous run is 64 KiB aligned, so only a run holding `va` or `end`
/// can be cut: the entries below `va` rounded up to 64 KiB and those from
/// `end + 1` rounded down to 64 KiB. Only those are checked for
/// `PTE_CONT`, in address order, so the first run cut is the one reported,
/// as if every entry had been checked; the entries between are only
/// cleared (or, without `clear`, not read at all).
///
/// Clearing reads each entry once and stores 0 over a valid one. The
/// kernel's `__ptep_get_and_clear()` is an exchange because the hardware may
/// set the access and dirty flags of a live entry meanwhile; mmlab's MMU
/// never writes descriptors (a clear access flag faults), and no other
/// writer may touch an entry of a range its owner is unmapping, so the load
/// and the store clear the same value the exchange would, without a locked
/// read-modify-write per entry on the host.
fn scan_pte_table(
    cpu: &ArchCpu<'_>,
    table: PhysAddr,
    cur: u64,
    end: u64,
    va: u64,
    clear: bool,
) -> Result<u64, PgtableError> {
    let slots = cpu.ram().table(table);
    let first = Level::Pte.index(cur);
    let n = (PTRS_PER_TABLE - first).min(((end - cur) / PAGE_SIZE + 1) as usize);
    let last = first + n;
    let base = cur & !(PMD_SIZE - 1);
    let checked = |i: usize, slot: &AtomicU64| -> Result<(), PgtableError> {
        let d = Desc(slot.load(Relaxed));
        if d.is_cont() {
            let run_va = base + ((i & !(CONT_PTES - 1)) as u64) * PAGE_SIZE;
            if run_va < va || run_va + (CONT_PTE_SIZE - 1) > end {
                return Err(PgtableError::PartialHugeUnmap { va: run_va, level: Level::Pte });
            }
        }
        if clear && d.is_valid() {
            slot.store(0, Relaxed);
        }
        Ok(())
    };
    if n <= CONT_PTES {
        // A few entries (a small vunmap): checking each costs less than
        // working out which need it.
        for (i, slot) in (first..last).zip(&slots[first..last]) {
            checked(i, slot)?;
        }
        return Ok(n as u64 * PAGE_SIZE);
    }
    // Indices of this table whose run may stick out of the range: before
    // `head` (runs holding `va`) and from `tail` (runs holding `end`).
    let idx = |a: u64| (a.saturating_sub(base) / PAGE_SIZE).min(last as u64) as usize;
    let head = idx(va.checked_next_multiple_of(CONT_PTE_SIZE).unwrap_or(u64::MAX)).max(first);
    let tail = match end.checked_add(1) {
        Some(e) if !e.is_multiple_of(CONT_PTE_SIZE) => idx(e & !(CONT_PTE_SIZE - 1)).max(head),
        _ => last,
    };
    for (i, slot) in (first..head).zip(&slots[first..head]) {
        checked(i, slot)?;
    }
    if clear {
        for slot in &slots[head..tail] {
            if slot.load(Relaxed) & desc::bits::PTE_VALID != 0 {
                slot.store(0, Relaxed);
            }
        }
    }
    for (i, slot) in (tail..last).zip(&slots[tail..last]) {
        checked(i, slot)?;
    }
    Ok(n as u64 * PAGE_SIZE)
}
