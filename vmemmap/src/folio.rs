//! Hugetlb folios as HVO sees them, and HVO's per-size arithmetic.
//!
//! A folio of order `o` has `2^o` struct pages, 64 bytes each, so its memmap
//! is `2^o * 64` bytes (`hugetlb_vmemmap_size()`). HVO keeps the first 4 KiB
//! vmemmap page (`HUGETLB_VMEMMAP_RESERVE_SIZE`: the head struct page and
//! the 63 after it, which hold every field a folio keeps outside its head)
//! and maps the rest onto it, so `hugetlb_vmemmap_size() - 4096` bytes of
//! memmap are freed (`hugetlb_vmemmap_optimizable_size()`; 0 when the memmap
//! is not larger than one page, or when `sizeof(struct page)` is not a power
//! of two). On arm64 with 4 KiB pages:
//!
//! | hstate | struct pages | memmap | vmemmap pages | freed |
//! |--------|-------------:|-------:|--------------:|------:|
//! | 64K (cont-PTE)  | 16     | 1 KiB  | 1/4  | 0 (not optimizable) |
//! | 2M (PMD)        | 512    | 32 KiB | 8    | 7    |
//! | 32M (cont-PMD)  | 8192   | 512 KiB| 128  | 127  |
//! | 1G (PUD)        | 262144 | 16 MiB | 4096 | 4095 |
//!
//! The "vmemmap optimized" state is hugetlb's `HPG_vmemmap_optimized` bit
//! of `folio->private` (the head struct page's `private` word), set before
//! the remap so that the head's copy carries it.
//!
//! Fidelity: faithful arithmetic and flag placement. Simplified: a folio is
//! a frame number and an order; [`prep_compound`] and [`destroy_compound`]
//! write only the fields HVO and `page_fixed_fake_head()` read (`PG_head`,
//! tails' `compound_head`).

use mmlab_engine::mm::page::{STRUCT_PAGE_SIZE, pg};
use mmlab_engine::{Machine, PAGE_SIZE, Pfn};

/// `HUGETLB_VMEMMAP_RESERVE_SIZE`: the vmemmap bytes of a folio kept mapped
/// to their own page (one page).
pub const HUGETLB_VMEMMAP_RESERVE_SIZE: u64 = PAGE_SIZE;
/// `HUGETLB_VMEMMAP_RESERVE_PAGES`: struct pages in the kept page (64).
pub const HUGETLB_VMEMMAP_RESERVE_PAGES: u64 = HUGETLB_VMEMMAP_RESERVE_SIZE / STRUCT_PAGE_SIZE;
/// `__NR_USED_SUBPAGE`: struct pages `struct folio` overlays (4).
pub const NR_USED_SUBPAGE: u64 = 4;
/// `NR_RESET_STRUCT_PAGE` (6.8+): struct pages at the start of each restored
/// vmemmap page overwritten with the ones after them, so that the copy of
/// the head page reads as plain tails.
pub const NR_RESET_STRUCT_PAGE: u64 = 4;
/// `HPG_vmemmap_optimized`: bit of `folio->private` (enum
/// hugetlb_page_flags, include/linux/hugetlb.h).
pub const HPG_VMEMMAP_OPTIMIZED: u32 = 4;

/// `hugetlb_vmemmap_size()`: bytes of memmap of a folio of `order`.
pub const fn hugetlb_vmemmap_size(order: u32) -> u64 {
    (1u64 << order) * STRUCT_PAGE_SIZE
}

/// `hugetlb_vmemmap_optimizable_size()`: bytes of a folio's memmap HVO frees.
pub const fn hugetlb_vmemmap_optimizable_size(order: u32) -> u64 {
    if !STRUCT_PAGE_SIZE.is_power_of_two() {
        return 0;
    }
    hugetlb_vmemmap_size(order).saturating_sub(HUGETLB_VMEMMAP_RESERVE_SIZE)
}

/// `hugetlb_vmemmap_optimizable()`.
pub const fn hugetlb_vmemmap_optimizable(order: u32) -> bool {
    hugetlb_vmemmap_optimizable_size(order) != 0
}

/// Vmemmap pages one folio of `order` gives back when optimized (net of the
/// fresh head page it takes).
pub const fn vmemmap_pages_saved(order: u32) -> u64 {
    hugetlb_vmemmap_optimizable_size(order) / PAGE_SIZE
}

/// A hugetlb folio: its head frame and its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Folio {
    /// The head frame.
    pub pfn: Pfn,
    /// `folio_order()`.
    pub order: u32,
}

/// A folio HVO cannot work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolioError {
    /// Part of the folio is not RAM, or the head is not aligned to its order.
    BadRange {
        /// The head frame given.
        pfn: Pfn,
        /// The order given.
        order: u32,
    },
    /// The folio is optimized: its tail struct pages are read-only.
    Optimized {
        /// The head frame.
        pfn: Pfn,
    },
}

impl std::fmt::Display for FolioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FolioError::BadRange { pfn, order } => {
                write!(f, "pfn {pfn} order {order} is not an aligned range of RAM")
            }
            FolioError::Optimized { pfn } => write!(f, "folio {pfn} is vmemmap-optimized: its tails are read-only"),
        }
    }
}
impl std::error::Error for FolioError {}

impl Folio {
    /// The folio of `2^order` frames at `pfn`.
    ///
    /// # Errors
    /// [`FolioError::BadRange`] unless `pfn` is aligned to `order` and every
    /// frame is RAM.
    pub fn new(m: &Machine, pfn: Pfn, order: u32) -> Result<Folio, FolioError> {
        let mem = m.memmap();
        let ok = order < 40
            && pfn.0.is_multiple_of(1 << order)
            && mem.pfn_valid(pfn)
            && mem.pfn_valid(Pfn(pfn.0 + (1 << order) - 1));
        if ok { Ok(Folio { pfn, order }) } else { Err(FolioError::BadRange { pfn, order }) }
    }
    /// `folio_nr_pages()`.
    pub const fn nr_pages(&self) -> u64 {
        1 << self.order
    }
    /// The vmemmap VA of the head struct page (`&folio->page`).
    pub fn vmemmap_start(&self, m: &Machine) -> u64 {
        m.memmap().page_va(self.pfn)
    }
    /// `folio_test_hugetlb_vmemmap_optimized()`.
    pub fn test_vmemmap_optimized(&self, m: &Machine) -> bool {
        m.page(self.pfn).private() & (1 << HPG_VMEMMAP_OPTIMIZED) != 0
    }
    /// `folio_set_hugetlb_vmemmap_optimized()`.
    pub(crate) fn set_vmemmap_optimized(&self, m: &Machine) {
        let p = m.page(self.pfn);
        p.set_private(p.private() | 1 << HPG_VMEMMAP_OPTIMIZED);
    }
    /// `folio_clear_hugetlb_vmemmap_optimized()`.
    pub(crate) fn clear_vmemmap_optimized(&self, m: &Machine) {
        let p = m.page(self.pfn);
        p.set_private(p.private() & !(1 << HPG_VMEMMAP_OPTIMIZED));
    }
}

/// Make `folio`'s struct pages a compound page, as `prep_compound_page()`
/// (mm/page_alloc.c) does for a `__GFP_COMP` allocation: `PG_head` on the
/// head, and each tail's `compound_head` (the `lru.next` word) the head's
/// vmemmap address with bit 0 set.
///
/// # Errors
/// [`FolioError::Optimized`]: an optimized folio's tails are read-only.
pub fn prep_compound(m: &Machine, folio: Folio) -> Result<(), FolioError> {
    if folio.test_vmemmap_optimized(m) {
        return Err(FolioError::Optimized { pfn: folio.pfn });
    }
    let head_va = folio.vmemmap_start(m);
    m.page(folio.pfn).set_flag(pg::PG_HEAD);
    for i in 1..folio.nr_pages() {
        m.page(Pfn(folio.pfn.0 + i)).set_lru_next(head_va | 1);
    }
    Ok(())
}

/// Undo [`prep_compound`] before the frames go back to the page allocator
/// (the tail clearing of `free_tail_page_prepare()`): `PG_head` and the
/// hugetlb flags off the head, each tail's `lru` pointing at itself again.
///
/// # Errors
/// [`FolioError::Optimized`]: restore the vmemmap first.
pub fn destroy_compound(m: &Machine, folio: Folio) -> Result<(), FolioError> {
    if folio.test_vmemmap_optimized(m) {
        return Err(FolioError::Optimized { pfn: folio.pfn });
    }
    let mem = m.memmap();
    let head = m.page(folio.pfn);
    head.clear_flag(pg::PG_HEAD);
    head.set_private(0);
    for i in 1..folio.nr_pages() {
        let pfn = Pfn(folio.pfn.0 + i);
        m.page(pfn).set_lru_next(mem.page_va(pfn) + mmlab_engine::mm::page::LRU_OFFSET);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in the module docs, from the kernel's formula.
    #[test]
    fn per_size_arithmetic() {
        // (order, vmemmap bytes, pages freed)
        for (order, bytes, freed) in [(4, 1 << 10, 0), (9, 32 << 10, 7), (13, 512 << 10, 127), (18, 16 << 20, 4095)] {
            assert_eq!(hugetlb_vmemmap_size(order), bytes, "order {order}");
            assert_eq!(vmemmap_pages_saved(order), freed, "order {order}");
            assert_eq!(hugetlb_vmemmap_optimizable(order), freed > 0);
        }
        // report_hugepages(): "%lu KiB vmemmap can be freed" = optimizable size / 1024.
        assert_eq!(hugetlb_vmemmap_optimizable_size(9) / 1024, 28);
        assert_eq!(hugetlb_vmemmap_optimizable_size(18) / 1024, 16380);
        const { assert!(NR_USED_SUBPAGE <= HUGETLB_VMEMMAP_RESERVE_PAGES) };
    }
}
