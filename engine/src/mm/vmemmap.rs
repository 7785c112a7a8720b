//! The vmemmap at run time: the struct-page accessor as a secondary TLB of
//! the kernel's vmemmap mapping.
//!
//! [`crate::mm::memmap::Memmap`] reaches each struct page through a cached host
//! address per vmemmap page, found by walking the kernel tables at boot
//! ([`Memmap::vmemmap_sync`]). When the vmemmap's tables change (a remap
//! such as the hugetlb vmemmap optimisation), the changer calls
//! [`Memmap::note_vmemmap_change`]; the next TLBI that covers the changed
//! addresses reaches the memmap as the
//! [`SecondaryTlb`] registered at boot,
//! which drops the cached translations in its range so that the next access
//! to each walks the tables, as a TLB miss would. Without a change noted,
//! the hook returns at once.

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::arch::arm64::cpu::SecondaryTlb;
use crate::arch::arm64::memory::VMEMMAP_END;
use crate::arch::arm64::pgtable::{AddressSpace, TableMemory, walk};
use crate::mm::memmap::{Memmap, PAGES_PER_VMEMMAP_PAGE};

impl Memmap {
    /// Note that the vmemmap's tables were changed (by a remap such as the
    /// hugetlb vmemmap optimisation): the next TLBI that covers the changed
    /// addresses makes struct-page accesses follow the new tables.
    pub fn note_vmemmap_change(&self) {
        self.vmemmap_dirty().store(true, std::sync::atomic::Ordering::Release);
    }

    /// A TLBI covered `[start, end)`: if the vmemmap tables changed since the
    /// last full synchronisation, drop the struct-page accessor's cached
    /// translations in that range, so the next access to each walks the
    /// tables, as a TLB miss would. Cheap when nothing changed.
    fn vmemmap_tlbi(&self, start: u64, end: u64) {
        if end <= self.vmemmap_start()
            || start >= VMEMMAP_END
            || !self.vmemmap_dirty().load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        // Drop the cached translations; the next access walks (a TLB miss).
        let mem = self;
        let first_va = mem.vmemmap_page_va(0);
        let lo = start.max(first_va);
        let hi = end.min(first_va + mem.vmemmap_pages() as u64 * PAGE_SIZE);
        if lo < hi {
            mem.invalidate(((lo - first_va) / PAGE_SIZE) as usize, ((hi - 1 - first_va) / PAGE_SIZE) as usize);
        }
        if start <= self.vmemmap_start() && end >= VMEMMAP_END {
            self.vmemmap_dirty().store(false, std::sync::atomic::Ordering::Release);
        }
    }

    /// Re-read the kernel tables for the vmemmap pages in `[start, end)` and
    /// point the struct-page accessor at what they map now.
    /// The tables are `asp`'s, in `ram`.
    pub fn vmemmap_sync(&self, ram: &(impl TableMemory + ?Sized), asp: &AddressSpace, start: u64, end: u64) {
        let mem = self;
        let first_va = mem.vmemmap_page_va(0);
        let n = mem.vmemmap_pages();
        let lo = start.max(first_va);
        let hi = end.min(first_va + n as u64 * PAGE_SIZE);
        if lo >= hi {
            return;
        }
        let mut i = ((lo - first_va) / PAGE_SIZE) as usize;
        let last = (hi - 1 - first_va) / PAGE_SIZE;
        while i as u64 <= last {
            if !mem.vmemmap_page_initialised(i) {
                // Its first touch initialises it where memblock put it.
                i += 1;
                continue;
            }
            let va = first_va + i as u64 * PAGE_SIZE;
            let host = match walk(ram, asp, va).leaf {
                Some(l) => ram.ram().host_addr(PhysAddr(l.pa.0 & !(PAGE_SIZE - 1)), PAGE_SIZE).unwrap_or(0),
                None => 0,
            };
            mem.set_backing(i, host);
            i += 1;
        }
    }

    /// The physical address a vmemmap VA translates to in the kernel tables.
    /// The tables are `asp`'s, in `ram`.
    pub(crate) fn vmemmap_pa(
        &self,
        ram: &(impl TableMemory + ?Sized),
        asp: &AddressSpace,
        pfn: Pfn,
    ) -> Option<PhysAddr> {
        walk(ram, asp, self.page_va(pfn)).leaf.map(|l| l.pa)
    }
}

/// The struct-page accessor is a secondary TLB of the vmemmap mapping:
/// every TLBI that covers addresses reaches it.
impl SecondaryTlb for Memmap {
    fn invalidate_range(&self, start: u64, end: u64) {
        self.vmemmap_tlbi(start, end);
    }
}

/// Struct pages per vmemmap page, re-exported for the HVO code.
pub const STRUCT_PAGES_PER_PAGE: u64 = PAGES_PER_VMEMMAP_PAGE;
