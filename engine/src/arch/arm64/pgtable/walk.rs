//! Reading the tables without changing them, as the MMU's table walker
//! does (no TLB involved): one walk for a VA ([`walk()`], [`walk_with`]), the
//! leaves covering a range ([`leaves`], what the TLB needs to cache it), and
//! counts over every table of an address space ([`stats`], for
//! `mmlab stat pagetables`).
//!
//! [`for_each_leaf`] visits the leaves of a range reading each table once,
//! as the kernel's `walk_page_range()` family does: a check over a range
//! of page-granular memory costs one descriptor read per page, not one
//! walk.
//!
//! A walk starts at the pgd and at each level reads the entry that the VA's
//! index bits select (`READ_ONCE`): a table descriptor leads one level down,
//! a block or page descriptor ends it with a [`Leaf`] (the PA adds the VA's
//! offset within the leaf), an invalid or reserved one ends it without. The
//! steps taken are kept in a [`Walk`], so callers can see every descriptor
//! read and the size of a hole.

use super::desc::{Desc, DescKind, Level};
use super::entry::*;
use crate::addr::PhysAddr;
use std::sync::atomic::Ordering::Relaxed;

/// One level of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkStep {
    /// The level read.
    pub level: Level,
    /// Physical address of the descriptor.
    pub slot: PhysAddr,
    /// The descriptor read there.
    pub desc: Desc,
}

/// The leaf a walk ended at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The level of the leaf (pud, pmd or pte).
    pub level: Level,
    /// Physical address of the leaf descriptor.
    pub slot: PhysAddr,
    /// The leaf descriptor.
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

/// The descriptors a walk read, from the root down: at most five (LPA2's
/// levels), kept inline so that a walk does not allocate. Read it as a
/// slice of [`WalkStep`].
#[derive(Clone, Copy)]
pub struct WalkSteps {
    buf: [WalkStep; 5],
    len: u8,
}

impl WalkSteps {
    const EMPTY: WalkSteps =
        WalkSteps { buf: [WalkStep { level: Level::Pgd, slot: PhysAddr(0), desc: Desc(0) }; 5], len: 0 };

    fn push(&mut self, s: WalkStep) {
        // walk_with() reads one descriptor per level, five at most.
        self.buf[usize::from(self.len)] = s;
        self.len += 1;
    }
}

impl std::ops::Deref for WalkSteps {
    type Target = [WalkStep];
    fn deref(&self) -> &[WalkStep] {
        &self.buf[..usize::from(self.len)]
    }
}

impl<'a> IntoIterator for &'a WalkSteps {
    type Item = &'a WalkStep;
    type IntoIter = std::slice::Iter<'a, WalkStep>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for WalkSteps {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}
impl Eq for WalkSteps {}

impl std::fmt::Debug for WalkSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A table walk of one VA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The VA walked.
    pub va: u64,
    /// Every descriptor read, from the pgd down.
    pub steps: WalkSteps,
    /// The leaf reached, `None` if the walk hit an invalid entry.
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
pub fn walk(m: &(impl TableMemory + ?Sized), asp: &AddressSpace, va: u64) -> Walk {
    let mut steps = WalkSteps::EMPTY;
    let leaf = walk_with(|pa| m.read_desc(pa).0, asp, va, |s| steps.push(s));
    Walk { va, steps, leaf }
}

/// The walk itself, over any way of reading a descriptor (the struct-page
/// accessor uses it to refill its vmemmap translations), from `asp`'s root
/// level down. `on_step` sees every descriptor read.
pub fn walk_with(
    read: impl Fn(PhysAddr) -> u64,
    asp: &AddressSpace,
    va: u64,
    mut on_step: impl FnMut(WalkStep),
) -> Option<Leaf> {
    let mut table = asp.pgd;
    let mut next = Some(asp.root_level());
    while let Some(level) = next {
        next = level.next();
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

/// Visit every leaf entry that maps some of `[start, end)`, in address
/// order, descending each table once (a range of page-granular memory
/// costs one read per page). `f` gets the VA the entry starts at (below
/// `start` for a block holding it) and the leaf, whose `pa` is the entry's
/// output address; each entry of a contiguous run is visited. Holes are
/// skipped: a caller that needs every page mapped compares each entry's
/// start with the end of the one before. `f` returns
/// [`ControlFlow::Break`](std::ops::ControlFlow::Break) to stop.
///
/// A descriptor `f` rewrites is not read again, and the entries after it
/// are read as they are when the visit reaches them.
pub fn for_each_leaf(
    m: &(impl TableMemory + ?Sized),
    asp: &AddressSpace,
    start: u64,
    end: u64,
    mut f: impl FnMut(u64, Leaf) -> std::ops::ControlFlow<()>,
) {
    /// The entries of one table from `va`'s index to the end of the table
    /// or of the range; false once the visit is over.
    fn visit<M: TableMemory + ?Sized>(
        m: &M,
        table: PhysAddr,
        level: Level,
        va: &mut u64,
        end: u64,
        f: &mut impl FnMut(u64, Leaf) -> std::ops::ControlFlow<()>,
    ) -> bool {
        let size = level.entry_size();
        // The table's slots once (one bounds check), then an entry a step;
        // each is read when the visit reaches it.
        let slots = m.table(table);
        let mut i = level.index(*va);
        loop {
            let slot = entry_pa(table, i);
            let d = Desc(slots[i].load(Relaxed));
            let base = *va & !(size - 1);
            let go_on = match (d.kind(level), level.next()) {
                (DescKind::Table, Some(next)) => visit(m, PhysAddr(d.addr()), next, va, end, f),
                (DescKind::Block | DescKind::Page, _) => {
                    f(base, Leaf { level, slot, desc: d, pa: PhysAddr(d.addr()) }).is_continue()
                }
                _ => true,
            };
            if !go_on {
                return false;
            }
            match base.checked_add(size) {
                Some(n) if n < end => *va = n,
                _ => return false,
            }
            i += 1;
            if level.index(*va) == 0 {
                return true;
            }
        }
    }
    if start < end {
        let mut va = start;
        visit(m, asp.pgd, asp.root_level(), &mut va, end, &mut f);
    }
}

/// The leaves covering `[start, end)`, each as (va of its span, span), a
/// contiguous run or block counted once: what the TLB needs to cover it.
pub fn leaves(m: &(impl TableMemory + ?Sized), asp: &AddressSpace, start: u64, end: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for_each_leaf(m, asp, start, end, |va, l| {
        let span = l.span();
        let base = va & !(span - 1);
        if out.last() != Some(&(base, span)) {
            out.push((base, span));
        }
        std::ops::ControlFlow::Continue(())
    });
    out
}

/// The kernel's names of the table levels, in the order of the per-level
/// arrays of [`PgtableStats`] and [`table_pages_in`]: the root always
/// counts as the pgd ([`AddressSpace::name_index`]), so a four-level space
/// has no p4d tables, as the kernel's own counts say.
pub const TABLE_NAMES: [&str; 5] = ["pgd", "p4d", "pud", "pmd", "pte"];

impl AddressSpace {
    /// The index of `level`'s tables in [`TABLE_NAMES`] for this space.
    pub const fn name_index(&self, level: Level) -> usize {
        if level as i8 == self.root_level() as i8 { 0 } else { (level as i8 + 1) as usize }
    }
}

/// Counts for `mmlab stat pagetables`, per level in [`TABLE_NAMES`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgtableStats {
    /// Table pages per level.
    pub tables: [u64; 5],
    /// Valid table descriptors per level.
    pub table_entries: [u64; 5],
    /// Block descriptors at pud and pmd (index 2 and 3).
    pub blocks: [u64; 5],
    /// Page descriptors (level 3).
    pub pages: u64,
    /// Contiguous runs (16 entries) at pmd (index 3) and pte (index 4).
    pub cont_runs: [u64; 5],
    /// Reserved encodings found.
    pub reserved: u64,
}

/// Walk every table of `asp` and count.
pub fn stats(m: &(impl TableMemory + ?Sized), asp: &AddressSpace) -> PgtableStats {
    fn visit<M: TableMemory + ?Sized>(m: &M, asp: &AddressSpace, table: PhysAddr, level: Level, st: &mut PgtableStats) {
        let n = asp.name_index(level);
        st.tables[n] += 1;
        for (i, slot) in m.table(table).iter().take(level.ptrs()).enumerate() {
            let d = Desc(slot.load(Relaxed));
            match d.kind(level) {
                DescKind::Invalid => {}
                DescKind::Reserved => st.reserved += 1,
                DescKind::Table => {
                    st.table_entries[n] += 1;
                    if let Some(next) = level.next() {
                        visit(m, asp, PhysAddr(d.addr()), next, st);
                    }
                }
                DescKind::Block | DescKind::Page => {
                    if level == Level::Pte {
                        st.pages += 1;
                    } else {
                        st.blocks[n] += 1;
                    }
                    if d.is_cont() && i % 16 == 0 {
                        st.cont_runs[n] += 1;
                    }
                }
            }
        }
    }
    let mut st = PgtableStats::default();
    visit(m, asp, asp.pgd, asp.root_level(), &mut st);
    st
}

/// Table pages per level ([`TABLE_NAMES`] order) below the root of `asp`
/// that map some of `[start, end)` (a table reached from several regions
/// counts in each; the root counts once): what a boot step built for its
/// region.
pub fn table_pages_in(m: &(impl TableMemory + ?Sized), asp: &AddressSpace, start: u64, end: u64) -> [u64; 5] {
    #[allow(clippy::too_many_arguments)]
    fn visit<M: TableMemory + ?Sized>(
        m: &M,
        asp: &AddressSpace,
        table: PhysAddr,
        level: Level,
        base: u64,
        start: u64,
        end: u64,
        out: &mut [u64; 5],
    ) {
        out[asp.name_index(level)] += 1;
        let size = level.entry_size();
        for (i, slot) in m.table(table).iter().take(level.ptrs()).enumerate() {
            let lo = base.wrapping_add(i as u64 * size);
            let hi = lo.wrapping_add(size - 1);
            if hi < start || lo >= end {
                continue;
            }
            let d = Desc(slot.load(Relaxed));
            if let (DescKind::Table, Some(next)) = (d.kind(level), level.next()) {
                visit(m, asp, PhysAddr(d.addr()), next, lo, start, end, out);
            }
        }
    }
    let mut out = [0; 5];
    // A kernel (TTBR1) address: the bits above vabits_actual set.
    let base = if start >> 63 == 1 { !((1u64 << asp.va_bits()) - 1) } else { 0 };
    visit(m, asp, asp.pgd, asp.root_level(), base, start, end, &mut out);
    out
}
