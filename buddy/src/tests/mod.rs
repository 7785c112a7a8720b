//! Unit tests of the buddy algorithms on hand-built free lists, one rule of
//! mm/page_alloc.c (or mm/page_isolation.c) per test, so that a change to
//! any comparison or count of the algorithm fails one (`cargo mutants -p
//! mmlab-buddy`, docs/mutants.md).
//!
//! The machine is a bare 64 MiB one (RAM is PFN 0x40000..0x44000, memblock's
//! reservations sit above 0x43e00) whose zone starts empty: each test frees
//! the blocks it needs, so every list, counter and pageblock type is known.

mod check;
mod cma;
mod contig;
mod errors;
mod free;
mod isolation;
mod node;
mod rmqueue;
mod trace;
mod watermark;
mod zone;
mod zones;

use crate::zone::{Fpi, Zone, fl};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Machine, MachineConfig, Migratetype, Pfn};

/// First RAM frame of the machine; 0x40000 is aligned to every order.
pub(crate) const BASE: u64 = 0x40000;

/// The bare 64 MiB machine, memblock claimed so that nothing else frees
/// its memory.
pub(crate) fn machine() -> Machine {
    let cfg = MachineConfig { linear_map: false, ..MachineConfig::with("64M", 1).unwrap().bare() };
    let m = Machine::boot(cfg).unwrap();
    assert!(m.claim_memblock_free_all());
    m
}

/// An empty ZONE_NORMAL over `[start, end)` of the machine's RAM, every
/// frame present.
pub(crate) fn zone_over(m: &Machine, start: u64, end: u64) -> Zone<'_> {
    let span = mmlab_engine::mm::zone_layout::ZoneSpan {
        zone: mmlab_engine::mm::ZoneType::Normal,
        zone_start_pfn: start,
        spanned_pages: end - start,
        present_pages: end - start,
    };
    Zone::from_span(m, span)
}

/// `__free_one_page()` of a block with the type of its pageblock.
pub(crate) fn free(zone: &Zone<'_>, pfn: u64, order: u32, fpi: Fpi) {
    let cpu = zone.m.cpu(0).unwrap();
    let mt = zone.pageblock_migratetype(Pfn(pfn));
    zone.lock(&cpu).free_one_page_locked(Pfn(pfn), order, mt, fpi);
}

/// `set_pageblock_migratetype()` for the pageblock of `pfn`.
pub(crate) fn label(zone: &Zone<'_>, pfn: u64, mt: Migratetype) {
    zone.set_pageblock_migratetype(Pfn(pfn), mt);
}

/// The blocks on `free_area[order].free_list[mt]`, head first.
pub(crate) fn list(zone: &Zone<'_>, order: u32, mt: Migratetype) -> Vec<u64> {
    let z = zone.lock.lock_unaccounted();
    z.lists.walk(zone.m.memmap(), fl(order, mt)).unwrap().into_iter().map(|p| p.0).collect()
}

/// `PageBuddy(page) && buddy_order(page) == order`, and mmlab's state agrees.
pub(crate) fn is_free_block(m: &Machine, pfn: u64, order: u32) -> bool {
    let p = m.page(Pfn(pfn));
    p.is_buddy() && p.private() == order as u64 && p.ext() == PageExt::Buddy(order as u8)
}

/// A vm event's count on the machine.
pub(crate) fn event(m: &Machine, e: VmEvent) -> u64 {
    m.vm_events().get(e)
}

/// Mark `2^order` frames from `pfn` allocated as `prep_new_page()` leaves a
/// block (head `Alloc(order, mt)`, refcount 1).
pub(crate) fn allocated(m: &Machine, pfn: u64, order: u32, mt: Migratetype) {
    let p = m.page(Pfn(pfn));
    p.set_refcount(1);
    p.set_ext(PageExt::Alloc(order as u8, mt));
}
