//! The fixmap: a few kernel virtual pages at fixed addresses below
//! `FIXADDR_TOP`, each remapped at run time onto any physical page
//! (arch/arm64/include/asm/fixmap.h, arch/arm64/mm/fixmap.c), as Linux
//! v6.9-rc1 has it and, with KVM's `FIX_VNCR` slots (6.16), as 7.2 has it
//! ([`FixmapLayout`]).
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
//! (`bm_pud`, `bm_pmd`, and `bm_pte`: one PTE table per 2 MiB the slots
//! span, `NR_BM_PTE_TABLES`); `early_fixmap_init()` hooks them all into
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
//! - *Simplified*: on a machine without the kernel image the static tables
//!   come from memblock (the image's `.pgtbl` pages otherwise); the FDT is
//!   mapped read-only in one step ([`Fixmap::remap_fdt`]: the kernel maps
//!   it writable first, then remaps it). A write "through" a slot
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
/// `FIX_VNCR_END` (`CONFIG_KVM`, 6.16 on): the first of KVM's per-CPU
/// slots for a nested guest's VNCR page.
pub const FIX_VNCR_END: usize = FIX_TEXT_POKE0 + 1;
/// `CONFIG_NR_CPUS` of Debian's arm64 kernel (its boot prints
/// "NR_CPUS=512"): one `FIX_VNCR` slot each.
pub const CONFIG_NR_CPUS: usize = 512;
/// The slots after `FIX_TEXT_POKE0` up to `__end_of_permanent_fixed_addresses`
/// besides KVM's: the four GHES slots (`CONFIG_ACPI_APEI_GHES` with
/// `CONFIG_ARM_SDE_INTERFACE`) and the four entry-trampoline slots
/// (`CONFIG_UNMAP_KERNEL_AT_EL0` with `CONFIG_RELOCATABLE`).
const GHES_AND_TRAMP_SLOTS: usize = 4 + 4;
/// `NR_FIX_BTMAPS`: 256 KiB of early_ioremap per slot, plus a page.
pub const NR_FIX_BTMAPS: usize = (256 << 10) / PAGE_SIZE as usize + 1;
/// `FIX_BTMAPS_SLOTS`.
pub const FIX_BTMAPS_SLOTS: usize = 7;
/// `MAX_FDT_SIZE`: 2 MiB.
pub const MAX_FDT_SIZE: u64 = 2 << 20;
/// `NR_PTE_SLOTS` of the lazy-unmap patch (v1 3/3): PTE-table slots.
pub const NR_PTE_SLOTS_LAZY: usize = 16;

/// `__fix_to_virt(idx)`.
#[inline]
pub const fn fix_to_virt(idx: usize) -> u64 {
    FIXADDR_TOP - ((idx as u64) << PAGE_SHIFT)
}

/// The slots of `enum fixed_addresses` that move with the code version:
/// KVM's `FIX_VNCR` slots (6.16 on: 7.2 has them, v6.9-rc1 and 6.10 not)
/// and how many PTE-table slots there are: one (`FIX_PTE`) or
/// [`NR_PTE_SLOTS_LAZY`] (`FIX_PTE_END..=FIX_PTE_BEGIN`, the lazy-unmap
/// patch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixmapLayout {
    /// PTE-table slots.
    pub nr_pte_slots: usize,
    /// `FIX_VNCR_END..=FIX_VNCR` exist (`CONFIG_KVM`, 6.16 on).
    pub vncr: bool,
}

impl FixmapLayout {
    /// Linux 7.2's (Debian's config): `FIX_VNCR`, one `FIX_PTE`.
    pub const V7_2: FixmapLayout = FixmapLayout { nr_pte_slots: 1, vncr: true };
    /// `FIX_VNCR` (= `FIX_VNCR_END + NR_CPUS`), if the layout has it.
    pub const fn fix_vncr(&self) -> Option<usize> {
        if self.vncr { Some(FIX_VNCR_END + CONFIG_NR_CPUS) } else { None }
    }
    /// `__end_of_permanent_fixed_addresses`.
    pub const fn end_of_permanent_fixed_addresses(&self) -> usize {
        let last = match self.fix_vncr() {
            Some(v) => v,
            None => FIX_TEXT_POKE0,
        };
        last + GHES_AND_TRAMP_SLOTS + 1
    }
    /// `FIX_BTMAP_END`.
    pub const fn fix_btmap_end(&self) -> usize {
        self.end_of_permanent_fixed_addresses()
    }
    /// `FIX_BTMAP_BEGIN`.
    pub const fn fix_btmap_begin(&self) -> usize {
        self.fix_btmap_end() + NR_FIX_BTMAPS * FIX_BTMAPS_SLOTS - 1
    }
    /// `FIX_PTE_END` (= `FIX_PTE` with one slot).
    pub const fn fix_pte_end(&self) -> usize {
        self.fix_btmap_begin() + 1
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
    /// `FIXADDR_TOT_START`: the lowest slot's address.
    pub const fn fixaddr_tot_start(&self) -> u64 {
        FIXADDR_TOP - ((self.end_of_fixed_addresses() as u64) << PAGE_SHIFT)
    }
    /// `NR_BM_PTE_TABLES`: the 2 MiB spans `[FIXADDR_TOT_START,
    /// FIXADDR_TOP)` touches, one `bm_pte` table each.
    pub const fn nr_bm_pte_tables(&self) -> usize {
        let pmd = Level::Pmd.entry_size();
        ((FIXADDR_TOP - 1) / pmd - self.fixaddr_tot_start() / pmd + 1) as usize
    }
    /// The static tables `early_fixmap_init()` hooks in: `bm_pud`,
    /// `bm_pmd` and the `bm_pte` tables.
    pub const fn nr_static_tables(&self) -> usize {
        2 + self.nr_bm_pte_tables()
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
    /// `idx <= FIX_HOLE || idx >= __end_of_fixed_addresses`.
    BadIndex {
        /// The index asked for.
        idx: usize,
    },
    /// memblock had no page for a fixmap table.
    Memblock(MemblockError),
    /// `fixmap_remap_fdt()` of a blob it refuses.
    BadFdt {
        /// Where the blob is.
        dt_phys: PhysAddr,
        /// Its size in bytes.
        size: u64,
    },
    /// Writing the slot's PTE or a table descriptor failed (e.g. setting a
    /// slot that is still mapped elsewhere: break-before-make).
    Pgtable(PgtableError),
    /// The slot's address did not translate after it was set.
    Fault(mmu::Fault),
}

impl std::fmt::Display for FixmapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FixmapError::BadIndex { idx } => write!(f, "fixmap: no slot {idx}"),
            FixmapError::Memblock(e) => write!(f, "fixmap: {e}"),
            FixmapError::BadFdt { dt_phys, size } => {
                write!(f, "fixmap: no FDT mapping for {size} bytes at {dt_phys} (8-byte aligned, 1..=2 MiB)")
            }
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
    /// `bm_pte[]`, lowest address first.
    bm_pte: Vec<PhysAddr>,
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
    /// `bm_pmd` and every `bm_pte` table into `swapper_pg_dir` for
    /// `[FIXADDR_TOT_START, FIXADDR_TOP)`, each level only if its entry is
    /// still empty, with bare table descriptors (`*_TYPE_TABLE`), written
    /// with `set_pgd`/`set_pud`/`set_pmd` and their barriers.
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
        // The slots never cross a PUD boundary: one bm_pmd holds them all.
        let first = va & !(Level::Pmd.entry_size() - 1);
        let bm_pte = (0..layout.nr_bm_pte_tables() as u64)
            .map(|i| below(entry_pa(bm_pmd, Level::Pmd.index(first + i * Level::Pmd.entry_size())), Level::Pmd))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fixmap { layout, bm_pud, bm_pmd, bm_pte, counts: FixmapCounts::default() })
    }

    /// The slot layout.
    pub fn layout(&self) -> FixmapLayout {
        self.layout
    }
    /// The counts so far.
    pub fn counts(&self) -> FixmapCounts {
        self.counts
    }
    /// `bm_pud`, `bm_pmd` and the `bm_pte` tables, lowest address first.
    pub fn tables(&self) -> Vec<PhysAddr> {
        [self.bm_pud, self.bm_pmd].into_iter().chain(self.bm_pte.iter().copied()).collect()
    }

    /// `fixmap_pte(addr)`: the PTE of slot `idx` in its `bm_pte` table.
    fn fixmap_pte(&self, idx: usize) -> Result<PhysAddr, FixmapError> {
        if idx == FIX_HOLE || idx >= self.layout.end_of_fixed_addresses() {
            return Err(FixmapError::BadIndex { idx });
        }
        let va = fix_to_virt(idx);
        let pmd = Level::Pmd.entry_size();
        let table = (va / pmd - self.layout.fixaddr_tot_start() / pmd) as usize;
        Ok(entry_pa(self.bm_pte[table], Level::Pte.index(va)))
    }

    /// `fixmap_remap_fdt(dt_phys, &size, PAGE_KERNEL_RO)` as
    /// `setup_machine_fdt()` leaves it: the `size` bytes of the device tree
    /// at `dt_phys` mapped read-only from `FIX_FDT` up, page by page
    /// (`create_mapping_noalloc()` with `NO_CONT_MAPPINGS`), and kept for
    /// the kernel's life. Simplified: mapped read-only at once, the PTEs
    /// written into `bm_pte` with `__set_pte()`'s barriers.
    ///
    /// # Errors
    ///
    /// [`FixmapError::BadFdt`] for a blob not 8-byte aligned, of size 0 or
    /// over `MAX_FDT_SIZE` (the kernel refuses it and panics on no DT);
    /// [`FixmapError::Pgtable`] if the window is mapped already.
    pub fn remap_fdt(&mut self, cpu: &ArchCpu<'_>, dt_phys: PhysAddr, size: u64) -> Result<u64, FixmapError> {
        if dt_phys.0 == 0 || !dt_phys.0.is_multiple_of(8) || size == 0 || size > MAX_FDT_SIZE {
            return Err(FixmapError::BadFdt { dt_phys, size });
        }
        let offset = dt_phys.0 % PAGE_SIZE;
        let base = dt_phys.0 - offset;
        let pages = (offset + size).div_ceil(PAGE_SIZE) as usize;
        for i in 0..pages {
            let ptep = self.fixmap_pte(FIX_FDT - i)?;
            set_pte(cpu, ptep, Desc::page(base + i as u64 * PAGE_SIZE, desc::PAGE_KERNEL_RO))?;
        }
        Ok(fix_to_virt(FIX_FDT) + offset)
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
        let base = FixmapLayout { nr_pte_slots: 1, vncr: false };
        assert_eq!((FIX_FDT, base.end_of_permanent_fixed_addresses(), base.fix_btmap_begin()), (514, 525, 979));
        assert_eq!((base.fix_pte_begin(), base.fix_pmd(), base.fix_pud(), base.fix_pgd()), (980, 981, 982, 984));
        let lazy = FixmapLayout { nr_pte_slots: NR_PTE_SLOTS_LAZY, vncr: false };
        assert_eq!((lazy.fix_pte_end(), lazy.fix_pte_begin(), lazy.fix_pmd()), (980, 995, 996));
        assert_eq!(fix_to_virt(980), 0xffff_ffff_ff42_c000);
        // Every page-table slot lies in one PMD: one bm_pte table holds them.
        assert_eq!(fix_to_virt(lazy.fix_pgd()) >> 21, fix_to_virt(base.fix_pte_end()) >> 21);
        // v6.9-rc1's slots span two PMDs, so two bm_pte tables.
        assert_eq!((base.fixaddr_tot_start(), base.nr_bm_pte_tables()), (0xffff_ffff_ff42_7000, 2));
        // 7.2 with KVM: FIX_VNCR_END..=FIX_VNCR (NR_CPUS=512) after
        // FIX_TEXT_POKE0 moves everything after them 513 slots down.
        let v72 = FixmapLayout::V7_2;
        assert_eq!((v72.fix_vncr(), v72.end_of_permanent_fixed_addresses()), (Some(1029), 1038));
        assert_eq!((v72.fix_pte_begin(), v72.fix_pgd(), v72.end_of_fixed_addresses()), (1493, 1497, 1498));
        // Debian's 7.2 on the peer: ---[ Fixmap start ]--- at
        // 0xffffffffff226000, three bm_pte tables (tests/data/arm64-peer).
        assert_eq!(
            (v72.fixaddr_tot_start(), v72.nr_bm_pte_tables(), v72.nr_static_tables()),
            (0xffff_ffff_ff22_6000, 3, 5)
        );
        assert_eq!(fix_to_virt(v72.fix_pgd()) >> 21, fix_to_virt(v72.fix_pte_end()) >> 21);
    }

    #[test]
    fn every_slot_is_settable_and_the_fdt_stays_mapped_read_only() {
        let m = Machine::boot(MachineConfig::with("16M", 1).unwrap()).unwrap();
        let cpu = m.cpu(0).unwrap();
        let mut fx = Fixmap::early_fixmap_init(&cpu, &m, FixmapLayout::V7_2).unwrap();
        assert_eq!(fx.tables().len(), 5);
        let page = m.memblock().alloc(PAGE_SIZE, PAGE_SIZE, "test").unwrap();
        // Slots in each of the three bm_pte tables.
        for idx in [FIX_FDT_END, FIX_VNCR_END + 7, FixmapLayout::V7_2.fix_pgd()] {
            let p = fx.set_fixmap(&cpu, idx, page).unwrap();
            assert_eq!(p.pa, page, "slot {idx}");
            fx.clear_fixmap(&cpu, idx).unwrap();
        }
        assert_eq!(fx.set_fixmap(&cpu, 1498, page), Err(FixmapError::BadIndex { idx: 1498 }));
        // A 1 MiB blob 8 bytes into a page: 257 pages from FIX_FDT up, ro.
        let dt = PhysAddr(page.0 + 8);
        assert_eq!(fx.remap_fdt(&cpu, dt, 1 << 20), Ok(fix_to_virt(FIX_FDT) + 8));
        let k = m.kernel_as();
        assert_eq!(mmu::translate(&cpu, &k, fix_to_virt(FIX_FDT) + 8, Access::READ), Ok(dt));
        assert!(mmu::translate(&cpu, &k, fix_to_virt(FIX_FDT - 256), Access::READ).is_ok());
        assert!(mmu::translate(&cpu, &k, fix_to_virt(FIX_FDT - 257), Access::READ).is_err());
        assert!(mmu::translate(&cpu, &k, fix_to_virt(FIX_FDT), Access::WRITE).is_err(), "read-only");
        for (dt, size) in [(PhysAddr(page.0 + 4), 4096), (page, 0), (page, MAX_FDT_SIZE + 1)] {
            assert_eq!(fx.remap_fdt(&cpu, dt, size), Err(FixmapError::BadFdt { dt_phys: dt, size }));
        }
    }

    #[test]
    fn set_writes_through_the_slot_and_clear_flushes_one_page() {
        let cfg = MachineConfig { barrier_backend: BarrierBackend::Count, ..MachineConfig::with("16M", 1).unwrap() };
        let m = Machine::boot(cfg).unwrap();
        let cpu = m.cpu(0).unwrap();
        let layout = FixmapLayout { nr_pte_slots: 1, vncr: false };
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
    }
}
