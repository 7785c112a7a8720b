//! The vmemmap's population at boot (mm/sparse-vmemmap.c, arch/arm64/mm/mmu.c
//! `vmemmap_populate`): the memmap mapped at `VMEMMAP_START` by the
//! kernel's own tables.
//!
//! Every present 128 MiB section (each piece of the memmap, see
//! [`crate::mm::memmap`]) gets its 2 MiB of struct pages mapped with
//! one PMD block (`vmemmap_populate_hugepages` → `vmemmap_set_pmd`), and a
//! partial section with 4 KiB pages (`vmemmap_populate_basepages`); the
//! tables come from memblock. Then the struct-page accessor
//! ([`crate::mm::page::Memmap`]) is pointed at what the tables map
//! ([`Machine::vmemmap_sync`](crate::Machine::vmemmap_sync)); from then on it follows them at run time
//! ([`crate::mm::vmemmap`]).

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::arch::arm64::memory::{VMEMMAP_END, VMEMMAP_START};
use crate::arch::arm64::pgtable::{MapFlags, MemblockTables, PgtableError, desc, map_range};
use crate::kernel::cpu::Cpu;
use crate::mm::page::STRUCT_PAGE_SIZE;

pub use crate::mm::memmap::PAGES_PER_SECTION;

/// `vmemmap_populate()` for every present section; called once at boot.
pub(crate) fn vmemmap_populate(cpu: &Cpu<'_>, memmap_pa: PhysAddr) -> Result<(), PgtableError> {
    let m = cpu.machine();
    let asp = m.kernel_as();
    let mem = m.memmap();
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
    }
    m.vmemmap_sync(VMEMMAP_START, VMEMMAP_END);
    Ok(())
}
