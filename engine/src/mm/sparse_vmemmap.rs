//! The vmemmap's population at boot (mm/sparse-vmemmap.c, arch/arm64/mm/mmu.c
//! `vmemmap_populate`): the memmap mapped at the vmemmap by the
//! kernel's own tables.
//!
//! Every present 128 MiB section (each piece of the memmap, see
//! [`crate::mm::memmap`]) gets its 2 MiB of struct pages mapped with
//! one PMD block (`vmemmap_populate_hugepages` → `vmemmap_set_pmd`), and a
//! partial section with 4 KiB pages (`vmemmap_populate_basepages`); the
//! tables come from memblock. Then the struct-page accessor
//! ([`crate::mm::memmap::Memmap`]) is pointed at what the tables map
//! ([`Memmap::vmemmap_sync`](crate::mm::memmap::Memmap::vmemmap_sync)); from then on it follows them at run time
//! ([`crate::mm::vmemmap`]).

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::arch::arm64::memory::VMEMMAP_END;
use crate::arch::arm64::pgtable::{AddressSpace, MapFlags, PgtableAlloc, PgtableError, desc, map_range};
use crate::kernel::cpu::Cpu;
use crate::mm::memmap::Memmap;
use crate::mm::page::STRUCT_PAGE_SIZE;

pub use crate::mm::memmap::PAGES_PER_SECTION;

/// `vmemmap_populate()` for every present section; called once at boot.
/// Table pages come from `tables` (memblock at boot); the memmap's
/// struct-page accessor is pointed at the new mapping.
pub(crate) fn vmemmap_populate<'m>(
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    tables: &dyn PgtableAlloc<Cpu<'m>>,
    mem: &Memmap,
    memmap_pa: PhysAddr,
) -> Result<(), PgtableError> {
    for piece in mem.pieces() {
        let (start, end) = (piece.start_pfn, piece.end_pfn);
        let mut s = start;
        while s < end {
            let section_end = ((s / PAGES_PER_SECTION) + 1) * PAGES_PER_SECTION;
            let n = section_end.min(end) - s;
            let va = mem.page_va(Pfn(s));
            let pa = memmap_pa.0 + piece.offset + (s - start) * STRUCT_PAGE_SIZE;
            let bytes = (n * STRUCT_PAGE_SIZE).next_multiple_of(PAGE_SIZE);
            let whole = n == PAGES_PER_SECTION;
            // Creating mappings in empty tables needs no TLB maintenance.
            map_range(cpu, asp, tables, va, pa, bytes, desc::PAGE_KERNEL, MapFlags { block: whole, cont: false })?
                .ignore();
            s += n;
        }
    }
    mem.vmemmap_sync(cpu.ram(), asp, mem.vmemmap_start(), VMEMMAP_END);
    Ok(())
}
