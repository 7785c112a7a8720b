//! `__create_pgd_mapping()` and the walk below it (arch/arm64/mm/mmu.c),
//! in each variant of [`super::LinearMapVariant`]: see the parent module's
//! table for where they differ.

use super::options::{LinearMapVariant, NO_BLOCK_MAPPINGS, NO_CONT_MAPPINGS, NO_EXEC_MAPPINGS};
use super::report::{LinearMapCounts, LinearMapError};
use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::ishst;
use crate::arch::arm64::cpu::{ArchCpu, EarlyAlloc};
use crate::arch::arm64::fixmap::{Fixmap, FixmapLayout, FixmapPage, fix_to_virt};
use crate::arch::arm64::pgtable::desc::bits::{PMD_TYPE_TABLE, TABLE_AF, TABLE_PXN, TABLE_UXN};
use crate::arch::arm64::pgtable::desc::{CONT_PMD_SIZE, CONT_PTE_SIZE, DescKind, PMD_SIZE, PUD_SIZE, PgProt};
use crate::arch::arm64::pgtable::{
    Desc, Level, TableMemory, entry_pa, set_pgd, set_pmd, set_pte, set_pte_nosync, set_pud,
};

/// `CONT_PTES` / `CONT_PMDS`: entries in a contiguous run (4 KiB granule).
const CONT_ENTRIES: u64 = 16;
/// One `__create_pgd_mapping()` with the state the variants keep: the
/// lazy-unmap patch's next free PTE slot (`pte_slot_next`).
pub(super) struct Walker<'a, 'm> {
    cpu: &'a ArchCpu<'m>,
    early: Option<&'a dyn EarlyAlloc>,
    fixmap: &'a mut Fixmap,
    variant: LinearMapVariant,
    layout: FixmapLayout,
    pte_slot_next: usize,
    pub(super) counts: LinearMapCounts,
}

impl<'a, 'm> Walker<'a, 'm> {
    /// A walk that allocates tables from `early` (`early_pgtable_alloc`),
    /// or none (`update_mapping_prot()` passes no allocator: every table
    /// must already exist).
    pub(super) fn new(
        cpu: &'a ArchCpu<'m>,
        early: Option<&'a dyn EarlyAlloc>,
        fixmap: &'a mut Fixmap,
        variant: LinearMapVariant,
    ) -> Self {
        let layout = fixmap.layout();
        Walker {
            cpu,
            early,
            fixmap,
            variant,
            layout,
            pte_slot_next: layout.fix_pte_begin(),
            counts: Default::default(),
        }
    }

    /// `clear_pte_fixmap_slots()` (lazy-unmap): clear every PTE slot used
    /// since the last batch without a TLBI each, then flush them with one
    /// `flush_tlb_kernel_range()`; start again at `FIX_PTE_BEGIN`.
    fn clear_pte_fixmap_slots(&mut self) -> Result<(), LinearMapError> {
        let begin = self.layout.fix_pte_begin();
        let (start, end) = (fix_to_virt(begin), fix_to_virt(self.pte_slot_next));
        for idx in (self.pte_slot_next + 1..=begin).rev() {
            self.fixmap.clear_fixmap_nosync(self.cpu, idx)?;
        }
        crate::arch::arm64::fixmap::flush_tlb_kernel_range_v6_9(self.cpu, start, end);
        self.pte_slot_next = begin;
        Ok(())
    }

    /// `pte_fixmap_slot()` (lazy-unmap): the next PTE slot, flushing the
    /// batch first when all 16 are in use.
    fn pte_fixmap_slot(&mut self) -> Result<usize, LinearMapError> {
        if self.pte_slot_next < self.layout.fix_pte_end() {
            self.clear_pte_fixmap_slots()?;
        }
        let slot = self.pte_slot_next;
        self.pte_slot_next -= 1;
        Ok(slot)
    }

    /// The slot a table of `level` is mapped in.
    fn slot(&mut self, level: Level) -> Result<usize, LinearMapError> {
        Ok(match level {
            Level::Pte if self.variant == LinearMapVariant::LazyUnmap => self.pte_fixmap_slot()?,
            Level::Pte => self.layout.fix_pte_begin(),
            Level::Pmd => self.layout.fix_pmd(),
            Level::Pud => self.layout.fix_pud(),
            Level::P4d => self.layout.fix_p4d(),
            Level::Pgd => self.layout.fix_pgd(),
        })
    }

    /// `p?d_set_fixmap()` / `early_pgtable_map()`: map the table at `pa`.
    fn map(&mut self, level: Level, pa: PhysAddr) -> Result<FixmapPage, LinearMapError> {
        let slot = self.slot(level)?;
        Ok(self.fixmap.set_fixmap(self.cpu, slot, pa)?)
    }

    /// `p?d_clear_fixmap()` / `early_pgtable_unmap()`; a no-op for PTE
    /// tables with lazy-unmap (their slots are cleared in batches).
    fn unmap(&mut self, level: Level, page: FixmapPage) -> Result<(), LinearMapError> {
        if level == Level::Pte && self.variant == LinearMapVariant::LazyUnmap {
            return Ok(());
        }
        Ok(self.fixmap.clear_fixmap(self.cpu, page.idx)?)
    }

    /// `early_pgtable_alloc()`: a page from memblock for a table of `level`
    /// (`memblock_phys_alloc_range(PAGE_SIZE, PAGE_SIZE, 0,
    /// MEMBLOCK_ALLOC_NOLEAKTRACE)`), zeroed. Up to no-cont-remap it is
    /// zeroed through `FIX_PTE` and unmapped again (None); from
    /// no-alloc-remap on it is zeroed in its own level's slot, published
    /// with `dsb ishst` and handed back still mapped.
    fn pgtable_alloc(&mut self, level: Level) -> Result<(PhysAddr, Option<FixmapPage>), LinearMapError> {
        let m = self.cpu.ram();
        let early = self.early.ok_or(LinearMapError::NoTableAllocator { level })?;
        let pa = early.alloc_page("pgtable").map_err(LinearMapError::Memblock)?;
        match level {
            Level::Pgd | Level::P4d => self.counts.pgtable_p4d += 1,
            Level::Pud => self.counts.pgtable_pud += 1,
            Level::Pmd => self.counts.pgtable_pmd += 1,
            Level::Pte => self.counts.pgtable_pte += 1,
        }
        if self.variant.zeroes_through_fix_pte() {
            let fix_pte = self.layout.fix_pte_begin();
            let page = self.fixmap.set_fixmap(self.cpu, fix_pte, pa)?;
            m.zero(page.pa, PAGE_SIZE);
            // The clear's barriers also publish the zeroes to the walker.
            self.fixmap.clear_fixmap(self.cpu, fix_pte)?;
            Ok((pa, None))
        } else {
            let page = self.map(level, pa)?;
            m.zero(page.pa, PAGE_SIZE);
            self.cpu.dsb(ishst);
            Ok((pa, Some(page)))
        }
    }

    /// The table below `entry` (a `level` entry): the existing one, or a
    /// new one allocated and installed with `set_p?d` (`__p?d_populate`).
    fn table_below(
        &mut self,
        entry: PhysAddr,
        level: Level,
        flags: u32,
    ) -> Result<(PhysAddr, Option<FixmapPage>), LinearMapError> {
        let d = self.cpu.ram().read_desc(entry);
        match d.kind(level) {
            DescKind::Table => Ok((PhysAddr(d.addr()), None)),
            DescKind::Invalid => {
                let next = level.next().unwrap_or(Level::Pte);
                let (pa, mapped) = self.pgtable_alloc(next)?;
                let pxn = if flags & NO_EXEC_MAPPINGS != 0 { TABLE_PXN } else { 0 };
                let af = if self.variant.sets_table_af() { TABLE_AF } else { 0 };
                let t = Desc::table(pa.0, PMD_TYPE_TABLE | TABLE_UXN | af | pxn);
                match level {
                    Level::Pgd | Level::P4d => set_pgd(self.cpu, entry, t)?,
                    Level::Pud => set_pud(self.cpu, entry, t)?,
                    Level::Pmd | Level::Pte => set_pmd(self.cpu, entry, t)?,
                }
                Ok((pa, mapped))
            }
            _ => Err(LinearMapError::NotATable { entry, desc: d }),
        }
    }

    /// 7.2's `init_pmd()` / `alloc_init_pud()` put a block down only where
    /// no table is (`!pmd_table(old_pmd)`): a range mapped at page
    /// granularity before (the KFENCE pool, the kernel's alias) keeps its
    /// table when a later, coarser call covers it again.
    fn keeps_table(&self, entry: PhysAddr, level: Level) -> bool {
        self.variant.keeps_existing_leaves() && self.cpu.ram().read_desc(entry).kind(level) == DescKind::Table
    }

    /// Mirrors `pte_range_has_valid_noncont()` / `pmd_range_has_valid_noncont()`
    /// (7.2): a valid entry without the contiguous bit among the run's 16
    /// entries of the table at `table` that cover `addr`, which then stays
    /// without it (setting the bit on part of a live run is not allowed).
    fn range_has_valid_noncont(&self, table: PhysAddr, level: Level, addr: u64) -> bool {
        let m = self.cpu.ram();
        let first = level.index(addr) as u64 & !(CONT_ENTRIES - 1);
        (first..first + CONT_ENTRIES).any(|i| {
            let d = m.read_desc(entry_pa(table, i as usize));
            d.is_valid() && !d.is_cont()
        })
    }

    /// Mirrors `init_pte()`: one `__set_pte()` per page, with its barriers.
    fn init_pte(
        &mut self,
        t: &FixmapPage,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
    ) -> Result<(), LinearMapError> {
        let nosync = self.variant.batches_pte_barriers();
        loop {
            let (entry, pte) = (t.entry(Level::Pte.index(addr)), Desc::page(phys, prot));
            if nosync {
                set_pte_nosync(self.cpu, entry, pte)?
            } else {
                set_pte(self.cpu, entry, pte)?
            }
            self.counts.pte_leaves += 1;
            self.counts.cont_leaves += u64::from(prot.is_cont());
            phys += PAGE_SIZE;
            addr += PAGE_SIZE;
            if addr == end {
                return Ok(());
            }
        }
    }

    /// Mirrors `alloc_init_cont_pte()`: the PTE table under the PMD entry
    /// `pmd`, then per 64 KiB chunk the contiguous bit if allowed and
    /// `init_pte()`.
    fn alloc_init_cont_pte(
        &mut self,
        pmd: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(pmd, Level::Pmd, flags)?;
        let per_chunk = self.variant == LinearMapVariant::Base;
        let mut table = match (per_chunk, mapped) {
            (false, Some(t)) => Some(t),
            (false, None) => Some(self.map(Level::Pte, pa)?),
            (true, _) => None,
        };
        loop {
            let next = addr_end(addr, end, CONT_PTE_SIZE);
            let mut cont = (addr | next | phys) & (CONT_PTE_SIZE - 1) == 0 && flags & NO_CONT_MAPPINGS == 0;
            if cont && self.variant.keeps_existing_leaves() {
                cont = !self.range_has_valid_noncont(pa, Level::Pte, addr);
            }
            let p = if cont { prot.mkcont() } else { prot };
            if per_chunk {
                let t = self.map(Level::Pte, pa)?;
                self.init_pte(&t, addr, next, phys, p)?;
                self.unmap(Level::Pte, t)?;
            } else if let Some(t) = table.as_ref() {
                let t = *t;
                self.init_pte(&t, addr, next, phys, p)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        if let Some(t) = table.take() {
            self.unmap(Level::Pte, t)?;
        }
        Ok(())
    }

    /// Mirrors `init_pmd()`: per 2 MiB a block (`pmd_set_huge`) if aligned
    /// and allowed, else `alloc_init_cont_pte()`.
    fn init_pmd(
        &mut self,
        t: &FixmapPage,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        loop {
            let next = addr_end(addr, end, PMD_SIZE);
            let entry = t.entry(Level::Pmd.index(addr));
            if (addr | next | phys) & (PMD_SIZE - 1) == 0
                && flags & NO_BLOCK_MAPPINGS == 0
                && !self.keeps_table(entry, Level::Pmd)
            {
                set_pmd(self.cpu, entry, Desc::block(phys, prot))?;
                self.counts.pmd_blocks += 1;
                self.counts.cont_leaves += u64::from(prot.is_cont());
            } else {
                self.alloc_init_cont_pte(entry, addr, next, phys, prot, flags)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                return Ok(());
            }
        }
    }

    /// Mirrors `alloc_init_cont_pmd()`: the PMD table under the PUD entry
    /// `pud`, then per 32 MiB chunk the contiguous bit if allowed and
    /// `init_pmd()`; the base kernel maps `FIX_PMD` per chunk.
    fn alloc_init_cont_pmd(
        &mut self,
        pud: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(pud, Level::Pud, flags)?;
        let per_chunk = self.variant == LinearMapVariant::Base;
        let table = match (per_chunk, mapped) {
            (false, Some(t)) => Some(t),
            (false, None) => Some(self.map(Level::Pmd, pa)?),
            (true, _) => None,
        };
        loop {
            let next = addr_end(addr, end, CONT_PMD_SIZE);
            let mut cont = (addr | next | phys) & (CONT_PMD_SIZE - 1) == 0 && flags & NO_CONT_MAPPINGS == 0;
            if cont && self.variant.keeps_existing_leaves() {
                cont = !self.range_has_valid_noncont(pa, Level::Pmd, addr);
            }
            let p = if cont { prot.mkcont() } else { prot };
            match table {
                Some(t) => self.init_pmd(&t, addr, next, phys, p, flags)?,
                None => {
                    let t = self.map(Level::Pmd, pa)?;
                    self.init_pmd(&t, addr, next, phys, p, flags)?;
                    self.unmap(Level::Pmd, t)?;
                }
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        if let Some(t) = table {
            self.unmap(Level::Pmd, t)?;
        }
        Ok(())
    }

    /// Mirrors `alloc_init_pud()`: the PUD table under the P4D entry `p4d`
    /// (a PGD entry when the p4d is folded), mapped in `FIX_PUD` once, then
    /// per 1 GiB a block (`pud_set_huge`) if aligned and allowed, else
    /// `alloc_init_cont_pmd()`.
    fn alloc_init_pud(
        &mut self,
        p4d: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(p4d, Level::P4d, flags)?;
        let t = match mapped {
            Some(t) => t,
            None => self.map(Level::Pud, pa)?,
        };
        loop {
            let next = addr_end(addr, end, PUD_SIZE);
            let entry = t.entry(Level::Pud.index(addr));
            if (addr | next | phys) & (PUD_SIZE - 1) == 0
                && flags & NO_BLOCK_MAPPINGS == 0
                && !self.keeps_table(entry, Level::Pud)
            {
                set_pud(self.cpu, entry, Desc::block(phys, prot))?;
                self.counts.pud_blocks += 1;
            } else {
                self.alloc_init_cont_pmd(entry, addr, next, phys, prot, flags)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        self.unmap(Level::Pud, t)
    }

    /// Mirrors `alloc_init_p4d()` with five levels: the P4D table under the
    /// PGD entry `pgd` (allocated if none), mapped in `FIX_P4D`, then
    /// `alloc_init_pud()` per 512 GiB entry.
    fn alloc_init_p4d(
        &mut self,
        pgd: PhysAddr,
        mut addr: u64,
        end: u64,
        mut phys: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let (pa, mapped) = self.table_below(pgd, Level::Pgd, flags)?;
        let t = match mapped {
            Some(t) => t,
            None => self.map(Level::P4d, pa)?,
        };
        loop {
            let next = addr_end(addr, end, Level::P4d.entry_size());
            self.alloc_init_pud(t.entry(Level::P4d.index(addr)), addr, next, phys, prot, flags)?;
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        self.unmap(Level::P4d, t)
    }

    /// Mirrors `__create_pgd_mapping_locked()`: per PGD entry
    /// `alloc_init_p4d()` (with four levels the p4d is folded: straight to
    /// `alloc_init_pud()`); with lazy-unmap, the `cleanup` op
    /// (`clear_pte_fixmap_slots()`) at the end.
    pub(super) fn create_pgd_mapping(
        &mut self,
        phys: u64,
        virt: u64,
        size: u64,
        prot: PgProt,
        flags: u32,
    ) -> Result<(), LinearMapError> {
        let k = crate::arch::arm64::pgtable::init_mm(self.cpu);
        let (pgdir, root) = (k.pgd(), k.root_level());
        let (mut addr, end, mut phys) = (virt, virt + size, phys);
        loop {
            let next = addr_end(addr, end, root.entry_size());
            let entry = entry_pa(pgdir, root.index(addr));
            if root == Level::Pgd {
                self.alloc_init_p4d(entry, addr, next, phys, prot, flags)?;
            } else {
                self.alloc_init_pud(entry, addr, next, phys, prot, flags)?;
            }
            phys += next - addr;
            addr = next;
            if addr == end {
                break;
            }
        }
        if self.variant == LinearMapVariant::LazyUnmap {
            self.clear_pte_fixmap_slots()?;
        }
        Ok(())
    }
}

/// `p?d_addr_end()`: the next `size` boundary after `addr`, or `end`.
#[inline]
const fn addr_end(addr: u64, end: u64, size: u64) -> u64 {
    let boundary = (addr.wrapping_add(size)) & !(size - 1);
    if boundary.wrapping_sub(1) < end.wrapping_sub(1) { boundary } else { end }
}
