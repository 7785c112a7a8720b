//! The fixmap: a few kernel virtual pages at fixed addresses below
//! `FIXADDR_TOP`, each remapped at run time onto any physical page
//! (arch/arm64/include/asm/fixmap.h, arch/arm64/mm/fixmap.c), as Linux
//! v6.9-rc1 has it.
//!
//! # The algorithm
//!
//! `enum fixed_addresses` numbers the slots; slot `i` lives at
//! `FIXADDR_TOP - i * PAGE_SIZE` ([`fix_to_virt`]), so a larger index is a
//! lower address. The slots that page-table creation uses come last:
//! `FIX_PTE`, `FIX_PMD`, `FIX_PUD`, `FIX_P4D`, `FIX_PGD`, one per level, so
//! that a walker can hold a table of every level mapped at once while it
//! writes tables that are not (yet) reachable through the linear map.
//!
//! The slots' own translation tables are static in the kernel image
//! (`bm_pud`, `bm_pmd`, `bm_pte`); `early_fixmap_init()` hooks them into
//! `swapper_pg_dir` once, very early. From then on:
//!
//! - `__set_fixmap(idx, phys, FIXMAP_PAGE_NORMAL)` writes a valid kernel
//!   PTE into `bm_pte` with `__set_pte()`: the store, then `dsb ishst; isb`.
//!   No TLB maintenance: the slot was invalid, so no TLB can hold it.
//! - `clear_fixmap(idx)` clears the PTE and calls
//!   `flush_tlb_kernel_range()` for the one page: `dsb ishst; tlbi
//!   vaale1is; dsb ish; isb`. Every unmap is therefore a broadcast TLBI
//!   and a wait for its completion, which is what makes linear-map
//!   creation slow (seeds.md §3).
//! - `clear_fixmap_nosync(idx)` (added by the "lazy-unmap" patch of the
//!   2024 series, v1 3/3) clears the PTE only; the caller flushes a batch
//!   of slots later with one `flush_tlb_kernel_range()`.
//!
//! `flush_tlb_kernel_range()` is v6.9's: one `vaale1is` per page, no range
//! TLBIs (those came to kernel ranges later); over `MAX_DVM_OPS` pages
//! it flushes everything ([`flush_tlb_kernel_range_v6_9`]).
//!
//! # Fidelity
//!
//! - *Faithful*: slot indices of an arm64 defconfig (4 KiB pages, ACPI APEI
//!   GHES with SDEI, KPTI with a relocatable kernel, `MAX_FDT_SIZE` 2 MiB),
//!   the PTE written (`PAGE_KERNEL`), the barriers and TLBIs of set and
//!   clear, and the table descriptors `early_fixmap_init()` installs.
//! - *Simplified*: `bm_pud`, `bm_pmd` and the one `bm_pte` table that holds
//!   the page-table slots come from memblock (mmlab's RAM holds no kernel
//!   image to put them in); the other `bm_pte` table of the range (the
//!   2 MiB below `FIXADDR_TOP`: slots 1 to 512, most of the FDT window) is
//!   not emulated, so only slots 513 and up can be set. A write "through" a slot
//!   translates the slot's address once, at [`Fixmap::set_fixmap`], through
//!   the CPU's TLB model (so a stale translation would be used, as on
//!   hardware), and then stores at the physical address it found.
//! - *Instrumented*: the counts of sets and clears per slot kind
//!   ([`FixmapCounts`]).

use crate::addr::{PAGE_SHIFT, PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::ishst;
use crate::arch::arm64::cpu::{ArchCpu, EarlyAlloc};
use crate::arch::arm64::memory::FIXADDR_TOP;
use crate::arch::arm64::pgtable::mmu::{self, Access};
use crate::arch::arm64::pgtable::{
    Desc, Level, PgtableError, TableMemory, desc, entry_pa, set_pgd, set_pmd, set_pte, set_pud,
};
use crate::arch::arm64::tlb::{Tlbi, flush_tlb_all, tlbi, tlbi_sync_s1ish};
use crate::mm::memblock::MemblockError;

/// `FIX_HOLE`: index 0 is never mapped.
pub const FIX_HOLE: usize = 0;
/// `FIX_FDT_END`.
pub const FIX_FDT_END: usize = 1;
/// `FIX_FDT`: `MAX_FDT_SIZE` (2 MiB = 512 pages) plus one page above `FIX_FDT_END`.
pub const FIX_FDT: usize = FIX_FDT_END + 512 + 1;
/// `FIX_EARLYCON_MEM_BASE`.
pub const FIX_EARLYCON_MEM_BASE: usize = FIX_FDT + 1;
/// `FIX_TEXT_POKE0`.
pub const FIX_TEXT_POKE0: usize = FIX_EARLYCON_MEM_BASE + 1;
/// `__end_of_permanent_fixed_addresses`: after the four GHES slots
/// (`CONFIG_ACPI_APEI_GHES` with `CONFIG_ARM_SDE_INTERFACE`) and the four
/// entry-trampoline slots (`CONFIG_UNMAP_KERNEL_AT_EL0` with
/// `CONFIG_RELOCATABLE`).
pub const END_OF_PERMANENT_FIXED_ADDRESSES: usize = FIX_TEXT_POKE0 + 4 + 4 + 1;
/// `NR_FIX_BTMAPS`: 256 KiB of early_ioremap per slot, plus a page.
pub const NR_FIX_BTMAPS: usize = (256 << 10) / PAGE_SIZE as usize + 1;
/// `FIX_BTMAPS_SLOTS`.
pub const FIX_BTMAPS_SLOTS: usize = 7;
/// `FIX_BTMAP_END`.
pub const FIX_BTMAP_END: usize = END_OF_PERMANENT_FIXED_ADDRESSES;
/// `FIX_BTMAP_BEGIN`.
pub const FIX_BTMAP_BEGIN: usize = FIX_BTMAP_END + NR_FIX_BTMAPS * FIX_BTMAPS_SLOTS - 1;
/// `NR_PTE_SLOTS` of the lazy-unmap patch (v1 3/3): PTE-table slots.
pub const NR_PTE_SLOTS_LAZY: usize = 16;

/// `__fix_to_virt(idx)`.
#[inline]
pub const fn fix_to_virt(idx: usize) -> u64 {
    FIXADDR_TOP - ((idx as u64) << PAGE_SHIFT)
}

/// The page-table slots of `enum fixed_addresses`, which depend on how many
/// PTE-table slots there are: one (`FIX_PTE`, v6.9-rc1) or
/// [`NR_PTE_SLOTS_LAZY`] (`FIX_PTE_END..=FIX_PTE_BEGIN`, the lazy-unmap
/// patch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixmapLayout {
    /// PTE-table slots.
    pub nr_pte_slots: usize,
}

impl FixmapLayout {
    /// `FIX_PTE_END` (= `FIX_PTE` with one slot).
    pub const fn fix_pte_end(&self) -> usize {
        FIX_BTMAP_BEGIN + 1
    }
    /// `FIX_PTE_BEGIN` (= `FIX_PTE` with one slot): the lowest address.
    pub const fn fix_pte_begin(&self) -> usize {
        self.fix_pte_end() + self.nr_pte_slots - 1
    }
    /// `FIX_PMD`.
    pub const fn fix_pmd(&self) -> usize {
        self.fix_pte_begin() + 1
    }
    /// `FIX_PUD`.
    pub const fn fix_pud(&self) -> usize {
        self.fix_pte_begin() + 2
    }
    /// `FIX_P4D` (five levels only; with four the p4d is folded).
    pub const fn fix_p4d(&self) -> usize {
        self.fix_pte_begin() + 3
    }
    /// `FIX_PGD`.
    pub const fn fix_pgd(&self) -> usize {
        self.fix_pte_begin() + 4
    }
    /// `__end_of_fixed_addresses`.
    pub const fn end_of_fixed_addresses(&self) -> usize {
        self.fix_pte_begin() + 5
    }
    /// The level of table a slot is meant for, if it is a page-table slot.
    pub const fn slot_level(&self, idx: usize) -> Option<Level> {
        if idx >= self.fix_pte_end() && idx <= self.fix_pte_begin() {
            Some(Level::Pte)
        } else if idx == self.fix_pmd() {
            Some(Level::Pmd)
        } else if idx == self.fix_pud() {
            Some(Level::Pud)
        } else if idx == self.fix_p4d() {
            Some(Level::P4d)
        } else if idx == self.fix_pgd() {
            Some(Level::Pgd)
        } else {
            None
        }
    }
}

/// Fixmap failures (the kernel `BUG()`s on each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FixmapError {
    /// `idx <= FIX_HOLE || idx >= __end_of_fixed_addresses`, or a slot
    /// whose `bm_pte` table mmlab does not emulate (see the module docs).
    BadIndex {
        /// The index asked for.
        idx: usize,
    },
    /// memblock had no page for a fixmap table.
    Memblock(MemblockError),
    /// Writing the slot's PTE or a table descriptor failed (e.g. setting a
    /// slot that is still mapped elsewhere: break-before-make).
    Pgtable(PgtableError),
    /// The slot's address did not translate after it was set.
    Fault(mmu::Fault),
}

impl std::fmt::Display for FixmapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FixmapError::BadIndex { idx } => write!(f, "fixmap: no emulated slot {idx}"),
            FixmapError::Memblock(e) => write!(f, "fixmap: {e}"),
            FixmapError::Pgtable(e) => write!(f, "fixmap: {e}"),
            FixmapError::Fault(e) => write!(f, "fixmap: {e}"),
        }
    }
}
impl std::error::Error for FixmapError {}
impl From<PgtableError> for FixmapError {
    fn from(e: PgtableError) -> Self {
        FixmapError::Pgtable(e)
    }
}

crate::counter_snapshot! {
    /// Fixmap slot operations (mmlab's own, instrumented).
    pub struct FixmapCounts {
        /// `set_fixmap` of a PTE-table slot (`pte_set_fixmap*`).
        pub map_pte: u64,
        /// `set_fixmap` of `FIX_PMD`.
        pub map_pmd: u64,
        /// `set_fixmap` of `FIX_PUD`.
        pub map_pud: u64,
        /// `set_fixmap` of `FIX_P4D` (five levels).
        pub map_p4d: u64,
        /// `set_fixmap` of `FIX_PGD`.
        pub map_pgd: u64,
        /// `clear_fixmap` (or `clear_fixmap_nosync`) of a PTE-table slot.
        pub unmap_pte: u64,
        /// `clear_fixmap` of `FIX_PMD`.
        pub unmap_pmd: u64,
        /// `clear_fixmap` of `FIX_PUD`.
        pub unmap_pud: u64,
        /// `clear_fixmap` of `FIX_P4D`.
        pub unmap_p4d: u64,
        /// `clear_fixmap` of `FIX_PGD`.
        pub unmap_pgd: u64,
        /// Of the unmaps, those done by `clear_fixmap_nosync` (no TLBI of their own).
        pub unmap_nosync: u64,
    }
}

impl FixmapCounts {
    /// All `set_fixmap` calls.
    pub fn maps(&self) -> u64 {
        self.map_pte + self.map_pmd + self.map_pud + self.map_p4d + self.map_pgd
    }
    /// All clears.
    pub fn unmaps(&self) -> u64 {
        self.unmap_pte + self.unmap_pmd + self.unmap_pud + self.unmap_p4d + self.unmap_pgd
    }
}

/// A physical page mapped in a fixmap slot: its slot, the slot's address,
/// and the physical address a translation of that address found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixmapPage {
    /// The slot.
    pub idx: usize,
    /// `__fix_to_virt(idx)`.
    pub va: u64,
    /// Where writes through the slot land.
    pub pa: PhysAddr,
}

impl FixmapPage {
    /// The address of 8-byte entry `i` of the mapped page, as a write
    /// through `va + 8 * i` reaches it.
    #[inline]
    pub const fn entry(&self, i: usize) -> PhysAddr {
        entry_pa(self.pa, i)
    }
}

/// The fixmap of one machine: where its tables are and what was done with
/// it. Callers serialise on it as the kernel does on `fixmap_lock`.
#[derive(Debug)]
pub struct Fixmap {
    layout: FixmapLayout,
    bm_pud: PhysAddr,
    bm_pmd: PhysAddr,
    bm_pte: PhysAddr,
    /// Address of the first entry of `bm_pte` (PMD aligned).
    bm_pte_va: u64,
    counts: FixmapCounts,
}

/// A zeroed, reserved page from memblock for a fixmap table (`bm_*`, which
/// the kernel has in its image's bss).
fn bm_table(cpu: &ArchCpu<'_>, early: &dyn EarlyAlloc) -> Result<PhysAddr, FixmapError> {
    let pa = early.alloc_page("fixmap").map_err(FixmapError::Memblock)?;
    cpu.ram().zero(pa, PAGE_SIZE);
    Ok(pa)
}

impl Fixmap {
    /// Mirrors arch/arm64/mm/fixmap.c `early_fixmap_init()`: hook `bm_pud`,
    /// `bm_pmd` and `bm_pte` into `swapper_pg_dir` for the slots' range, each
    /// level only if its entry is still empty, with bare table descriptors
    /// (`*_TYPE_TABLE`), written with `set_pgd`/`set_pud`/`set_pmd` and their
    /// barriers.
    ///
    /// # Errors
    ///
    /// [`FixmapError::Memblock`] without a page for a table;
    /// [`FixmapError::Pgtable`] if an entry on the way holds a block.
    pub fn early_fixmap_init(
        cpu: &ArchCpu<'_>,
        early: &dyn EarlyAlloc,
        layout: FixmapLayout,
    ) -> Result<Fixmap, FixmapError> {
        let m = cpu;
        let va = fix_to_virt(layout.end_of_fixed_addresses() - 1);
        let below = |slot: PhysAddr, level: Level| -> Result<PhysAddr, FixmapError> {
            let d = m.read_desc(slot);
            match d.kind(level) {
                desc::DescKind::Table => Ok(PhysAddr(d.addr())),
                desc::DescKind::Invalid => {
                    let t = bm_table(cpu, early)?;
                    let new = Desc::table(t.0, desc::bits::PMD_TYPE_TABLE);
                    match level {
                        Level::Pgd | Level::P4d => set_pgd(cpu, slot, new)?,
                        Level::Pud => set_pud(cpu, slot, new)?,
                        Level::Pmd | Level::Pte => set_pmd(cpu, slot, new)?,
                    }
                    Ok(t)
                }
                _ => Err(FixmapError::Pgtable(PgtableError::BreakBeforeMake {
                    entry: slot,
                    old: d,
                    new: Desc::table(0, desc::bits::PMD_TYPE_TABLE),
                })),
            }
        };
        // p4d_offset_kimg(): with five levels the p4d under the fixmap's pgd
        // entry is map_kernel()'s (the image and the fixmap share it).
        let p4d = crate::arch::arm64::pgtable::init_mm(cpu).p4d_offset(va, |pgd| below(pgd, Level::Pgd))?;
        let bm_pud = below(p4d, Level::P4d)?;
        let bm_pmd = below(entry_pa(bm_pud, Level::Pud.index(va)), Level::Pud)?;
        let bm_pte = below(entry_pa(bm_pmd, Level::Pmd.index(va)), Level::Pmd)?;
        let bm_pte_va = va & !(Level::Pmd.entry_size() - 1);
        Ok(Fixmap { layout, bm_pud, bm_pmd, bm_pte, bm_pte_va, counts: FixmapCounts::default() })
    }

    /// The slot layout.
    pub fn layout(&self) -> FixmapLayout {
        self.layout
    }
    /// The counts so far.
    pub fn counts(&self) -> FixmapCounts {
        self.counts
    }
    /// `bm_pud`, `bm_pmd` and `bm_pte`.
    pub fn tables(&self) -> [PhysAddr; 3] {
        [self.bm_pud, self.bm_pmd, self.bm_pte]
    }

    /// `fixmap_pte(addr)`: the PTE of slot `idx` in `bm_pte`.
    fn fixmap_pte(&self, idx: usize) -> Result<PhysAddr, FixmapError> {
        let va = fix_to_virt(idx);
        if idx == FIX_HOLE
            || idx >= self.layout.end_of_fixed_addresses()
            || va < self.bm_pte_va
            || va - self.bm_pte_va >= Level::Pmd.entry_size()
        {
            return Err(FixmapError::BadIndex { idx });
        }
        Ok(entry_pa(self.bm_pte, Level::Pte.index(va)))
    }

    fn count(&mut self, idx: usize, map: bool) {
        let c = &mut self.counts;
        let n = match (self.layout.slot_level(idx), map) {
            (Some(Level::Pte), true) => &mut c.map_pte,
            (Some(Level::Pmd), true) => &mut c.map_pmd,
            (Some(Level::Pud), true) => &mut c.map_pud,
            (Some(Level::P4d), true) => &mut c.map_p4d,
            (Some(Level::Pgd), true) => &mut c.map_pgd,
            (Some(Level::Pte), false) => &mut c.unmap_pte,
            (Some(Level::Pmd), false) => &mut c.unmap_pmd,
            (Some(Level::Pud), false) => &mut c.unmap_pud,
            (Some(Level::P4d), false) => &mut c.unmap_p4d,
            (Some(Level::Pgd), false) => &mut c.unmap_pgd,
            (None, _) => return,
        };
        *n += 1;
    }

    /// `set_fixmap_offset(idx, phys)` → `__set_fixmap(idx, phys,
    /// FIXMAP_PAGE_NORMAL)`: map the page of `phys` at slot `idx` with
    /// `__set_pte()` (`dsb ishst; isb`), then translate the slot's address
    /// as the first access through it would.
    ///
    /// # Errors
    ///
    /// [`FixmapError::BadIndex`]; [`FixmapError::Pgtable`] if the slot maps
    /// another page (the caller did not clear it); [`FixmapError::Fault`]
    /// if the address does not translate.
    pub fn set_fixmap(&mut self, cpu: &ArchCpu<'_>, idx: usize, phys: PhysAddr) -> Result<FixmapPage, FixmapError> {
        let ptep = self.fixmap_pte(idx)?;
        let base = PhysAddr(phys.0 & !(PAGE_SIZE - 1));
        set_pte(cpu, ptep, Desc::page(base.0, desc::PAGE_KERNEL))?;
        self.count(idx, true);
        let va = fix_to_virt(idx);
        let pa = mmu::translate(cpu, &crate::arch::arm64::pgtable::init_mm(cpu), va, Access::WRITE)
            .map_err(FixmapError::Fault)?;
        Ok(FixmapPage { idx, va, pa })
    }

    /// `clear_fixmap(idx)` → `__set_fixmap(idx, 0, FIXMAP_PAGE_CLEAR)`:
    /// `__pte_clear()`, then `flush_tlb_kernel_range()` of the slot's page.
    ///
    /// # Errors
    ///
    /// [`FixmapError::BadIndex`].
    pub fn clear_fixmap(&mut self, cpu: &ArchCpu<'_>, idx: usize) -> Result<(), FixmapError> {
        let ptep = self.fixmap_pte(idx)?;
        crate::arch::arm64::pgtable::pte_clear(cpu, ptep);
        self.count(idx, false);
        let va = fix_to_virt(idx);
        flush_tlb_kernel_range_v6_9(cpu, va, va + PAGE_SIZE);
        Ok(())
    }

    /// `clear_fixmap_nosync(idx)` (lazy-unmap patch, v1 3/3): `pte_clear()`
    /// only; the caller owes a `flush_tlb_kernel_range()` covering the slot
    /// before the slot is set again.
    ///
    /// # Errors
    ///
    /// [`FixmapError::BadIndex`].
    pub fn clear_fixmap_nosync(&mut self, cpu: &ArchCpu<'_>, idx: usize) -> Result<(), FixmapError> {
        let ptep = self.fixmap_pte(idx)?;
        crate::arch::arm64::pgtable::pte_clear(cpu, ptep);
        self.count(idx, false);
        self.counts.unmap_nosync += 1;
        Ok(())
    }
}

/// `flush_tlb_kernel_range()` as Linux v6.9 has it: over `MAX_DVM_OPS`
/// pages `flush_tlb_all()`; else `dsb ishst`, one `tlbi vaale1is` per page
/// (no range operations), `dsb ish`, `isb`. An empty range still issues the
/// three barriers, as the kernel's loop does.
pub fn flush_tlb_kernel_range_v6_9(cpu: &ArchCpu<'_>, start: u64, end: u64) {
    if end.wrapping_sub(start) > crate::arch::arm64::tlb::MAX_DVM_OPS * PAGE_SIZE {
        return flush_tlb_all(cpu);
    }
    cpu.dsb(ishst);
    let mut va = start & !(PAGE_SIZE - 1);
    while va < end {
        tlbi(cpu, Tlbi::Vaale1is { va });
        va += PAGE_SIZE;
    }
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::arm64::barrier::{BarrierBackend, BarrierKind};
    use crate::counters::CounterSet;
    use crate::{Machine, MachineConfig};

    #[test]
    fn slot_indices_and_addresses() {
        let base = FixmapLayout { nr_pte_slots: 1 };
        assert_eq!((FIX_FDT, END_OF_PERMANENT_FIXED_ADDRESSES, FIX_BTMAP_BEGIN), (514, 525, 979));
        assert_eq!((base.fix_pte_begin(), base.fix_pmd(), base.fix_pud(), base.fix_pgd()), (980, 981, 982, 984));
        let lazy = FixmapLayout { nr_pte_slots: NR_PTE_SLOTS_LAZY };
        assert_eq!((lazy.fix_pte_end(), lazy.fix_pte_begin(), lazy.fix_pmd()), (980, 995, 996));
        assert_eq!(fix_to_virt(980), 0xffff_ffff_ff42_c000);
        // Every page-table slot lies in one PMD: one bm_pte table holds them.
        assert_eq!(fix_to_virt(lazy.fix_pgd()) >> 21, fix_to_virt(base.fix_pte_end()) >> 21);
    }

    #[test]
    fn set_writes_through_the_slot_and_clear_flushes_one_page() {
        let cfg = MachineConfig { barrier_backend: BarrierBackend::Count, ..MachineConfig::with("16M", 1).unwrap() };
        let m = Machine::boot(cfg).unwrap();
        let cpu = m.cpu(0).unwrap();
        let layout = FixmapLayout { nr_pte_slots: 1 };
        let mut fx = Fixmap::early_fixmap_init(&cpu, &m, layout).unwrap();
        let page = m.memblock().alloc(PAGE_SIZE, PAGE_SIZE, "test").unwrap();
        let (b0, t0) = (m.barrier_counts(), m.tlbi_counts());
        let mapped = fx.set_fixmap(&cpu, layout.fix_pte_begin(), page).unwrap();
        assert_eq!(mapped.pa, page);
        // A second set of a live slot onto another page is refused.
        assert!(fx.set_fixmap(&cpu, layout.fix_pte_begin(), PhysAddr(page.0 - PAGE_SIZE)).is_err());
        mmu::write_u64(&cpu, &m.kernel_as(), mapped.va + 8, 0x1234).unwrap();
        assert_eq!(m.read_desc(mapped.entry(1)).0, 0x1234);
        fx.clear_fixmap(&cpu, layout.fix_pte_begin()).unwrap();
        assert!(mmu::read_u64(&cpu, &m.kernel_as(), mapped.va).is_err(), "the TLBI removed the translation");
        let (b, t) = (m.barrier_counts().delta(&b0), m.tlbi_counts().delta(&t0));
        assert_eq!(t.total(), 1);
        assert_eq!(b.get(BarrierKind::Dsb, "ishst"), Some(2));
        assert_eq!(b.get(BarrierKind::Dsb, "ish"), Some(1));
        assert_eq!(b.get(BarrierKind::Isb, ""), Some(2));
        assert_eq!(fx.counts(), FixmapCounts { map_pte: 1, unmap_pte: 1, ..Default::default() });
        assert_eq!(fx.set_fixmap(&cpu, FIX_HOLE, page), Err(FixmapError::BadIndex { idx: 0 }));
        // FIX_FDT_END lies in the other bm_pte table, which is not emulated.
        assert_eq!(fx.clear_fixmap(&cpu, FIX_FDT_END), Err(FixmapError::BadIndex { idx: FIX_FDT_END }));
    }
}
