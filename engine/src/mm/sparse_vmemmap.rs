//! The vmemmap: the memmap mapped at `VMEMMAP_START` by the kernel's own
//! tables (mm/sparse-vmemmap.c, arch/arm64/mm/mmu.c `vmemmap_populate`).
//!
//! At boot every present 128 MiB section gets its 2 MiB of struct pages
//! mapped with one PMD block (`vmemmap_populate_hugepages` →
//! `vmemmap_set_pmd`), and a partial section with 4 KiB pages
//! (`vmemmap_populate_basepages`); the tables come from memblock. From then
//! on the struct-page accessor ([`crate::page::Memmap`]) goes through this
//! mapping: [`Machine::vmemmap_sync`] re-reads the tables for a range of
//! vmemmap addresses (the TLB code calls it for every TLBI that covers
//! vmemmap addresses), so a remapped vmemmap page is seen by every later
//! struct-page access.

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::cpu::Cpu;
use crate::layout::{VMEMMAP_END, VMEMMAP_START};
use crate::machine::Machine;
use crate::page::{PAGES_PER_VMEMMAP_PAGE, STRUCT_PAGE_SIZE};
use crate::pgtable::{AddressSpace, MapFlags, MemblockTables, PgtableError, desc, map_range, walk};

/// `PAGES_PER_SECTION` with `SECTION_SIZE_BITS` = 27 (128 MiB sections).
pub const PAGES_PER_SECTION: u64 = 1 << (27 - 12);

/// `vmemmap_populate()` for every present section; called once at boot.
pub(crate) fn vmemmap_populate(cpu: &Cpu<'_>, memmap_pa: PhysAddr) -> Result<(), PgtableError> {
    let m = cpu.machine();
    let asp = m.kernel_as();
    let mem = m.memmap();
    let (start, end) = (mem.start_pfn().0, mem.end_pfn().0);
    let mut s = start;
    while s < end {
        let section_end = ((s / PAGES_PER_SECTION) + 1) * PAGES_PER_SECTION;
        let n = section_end.min(end) - s;
        let va = mem.page_va(Pfn(s));
        let pa = memmap_pa.0 + (s - start) * STRUCT_PAGE_SIZE;
        let bytes = (n * STRUCT_PAGE_SIZE).next_multiple_of(PAGE_SIZE);
        let whole = n == PAGES_PER_SECTION;
        // Creating mappings in empty tables needs no TLB maintenance.
        map_range(
            cpu,
            &asp,
            &MemblockTables,
            va,
            pa,
            bytes,
            desc::PAGE_KERNEL,
            MapFlags { block: whole, cont: false },
        )?
        .ignore();
        s += n;
    }
    m.vmemmap_sync(VMEMMAP_START, VMEMMAP_END);
    Ok(())
}

impl Machine {
    /// Note that the vmemmap's tables were changed (by a remap such as the
    /// hugetlb vmemmap optimisation): the next TLBI that covers the changed
    /// addresses makes struct-page accesses follow the new tables.
    pub fn note_vmemmap_change(&self) {
        self.vmemmap_dirty.store(true, std::sync::atomic::Ordering::Release);
    }

    /// A TLBI covered `[start, end)`: if the vmemmap tables changed since the
    /// last full synchronisation, drop the struct-page accessor's cached
    /// translations in that range, so the next access to each walks the
    /// tables, as a TLB miss would. Cheap when nothing changed.
    pub(crate) fn vmemmap_tlbi(&self, start: u64, end: u64) {
        if end <= VMEMMAP_START
            || start >= VMEMMAP_END
            || !self.vmemmap_dirty.load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        // Drop the cached translations; the next access walks (a TLB miss).
        let mem = self.memmap();
        let first_va = mem.vmemmap_page_va(0);
        let lo = start.max(first_va);
        let hi = end.min(first_va + mem.vmemmap_pages() as u64 * PAGE_SIZE);
        if lo < hi {
            mem.invalidate(((lo - first_va) / PAGE_SIZE) as usize, ((hi - 1 - first_va) / PAGE_SIZE) as usize);
        }
        if start <= VMEMMAP_START && end >= VMEMMAP_END {
            self.vmemmap_dirty.store(false, std::sync::atomic::Ordering::Release);
        }
    }

    /// Re-read the kernel tables for the vmemmap pages in `[start, end)` and
    /// point the struct-page accessor at what they map now.
    pub fn vmemmap_sync(&self, start: u64, end: u64) {
        let mem = self.memmap();
        let first_va = mem.vmemmap_page_va(0);
        let n = mem.vmemmap_pages();
        let lo = start.max(first_va);
        let hi = end.min(first_va + n as u64 * PAGE_SIZE);
        if lo >= hi {
            return;
        }
        let asp = self.kernel_as();
        let mut i = ((lo - first_va) / PAGE_SIZE) as usize;
        let last = (hi - 1 - first_va) / PAGE_SIZE;
        while i as u64 <= last {
            let va = first_va + i as u64 * PAGE_SIZE;
            let host = match walk(self, &asp, va).leaf {
                Some(l) => self.arena().host_addr(PhysAddr(l.pa.0 & !(PAGE_SIZE - 1)), PAGE_SIZE).unwrap_or(0),
                None => 0,
            };
            mem.set_backing(i, host);
            i += 1;
        }
    }

    /// The physical address a vmemmap VA translates to in the kernel tables.
    pub fn vmemmap_pa(&self, pfn: Pfn) -> Option<PhysAddr> {
        let asp: AddressSpace = self.kernel_as();
        walk(self, &asp, self.memmap().page_va(pfn)).leaf.map(|l| l.pa)
    }
}

/// Struct pages per vmemmap page, re-exported for the HVO code.
pub const STRUCT_PAGES_PER_PAGE: u64 = PAGES_PER_VMEMMAP_PAGE;
