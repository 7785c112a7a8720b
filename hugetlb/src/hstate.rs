//! The huge page sizes arm64 offers with 4 KiB pages, and one hstate per
//! size (`struct hstate`, one node).
//!
//! | size | order | mapped by | gigantic (> `MAX_PAGE_ORDER`) |
//! |------|------:|-----------|:---:|
//! | 64K  | 4  | 16 contiguous PTEs (`CONT_PTE_SIZE`) | no |
//! | 2M   | 9  | a PMD block (`PMD_SIZE`, the default `HPAGE_SIZE`) | no |
//! | 32M  | 13 | 16 contiguous PMDs (`CONT_PMD_SIZE`) | yes |
//! | 1G   | 18 | a PUD block (`PUD_SIZE`) | yes |
//!
//! `arch_hugetlb_valid_size()` (arch/arm64/mm/hugetlbpage.c) accepts exactly
//! these four; [`HugePageSize::from_bytes`] is it.

use mmlab_engine::{MAX_PAGE_ORDER, PAGE_SIZE};
use mmlab_vmemmap::Folio;

/// `HUGETLB_PAGE_ORDER` on arm64 with 4 KiB pages: a PMD, 2 MiB.
pub const HUGETLB_PAGE_ORDER: u32 = 9;

/// A huge page size arm64 offers with 4 KiB pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum HugePageSize {
    /// 64 KiB, `CONT_PTE_SIZE` (order 4).
    #[serde(rename = "64K")]
    Cont64K,
    /// 2 MiB, `PMD_SIZE` (order 9), the default size (`HPAGE_SIZE`).
    #[serde(rename = "2M")]
    Pmd2M,
    /// 32 MiB, `CONT_PMD_SIZE` (order 13).
    #[serde(rename = "32M")]
    ContPmd32M,
    /// 1 GiB, `PUD_SIZE` (order 18).
    #[serde(rename = "1G")]
    Pud1G,
}

impl HugePageSize {
    /// Every size, smallest first (the index order of per-size arrays).
    pub const ALL: [HugePageSize; 4] =
        [HugePageSize::Cont64K, HugePageSize::Pmd2M, HugePageSize::ContPmd32M, HugePageSize::Pud1G];

    /// `huge_page_order()`.
    pub const fn order(self) -> u32 {
        match self {
            HugePageSize::Cont64K => 4,
            HugePageSize::Pmd2M => 9,
            HugePageSize::ContPmd32M => 13,
            HugePageSize::Pud1G => 18,
        }
    }
    /// `huge_page_size()` in bytes.
    pub const fn bytes(self) -> u64 {
        PAGE_SIZE << self.order()
    }
    /// The index in [`HugePageSize::ALL`] and per-size arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
    /// `hstate_is_gigantic()`: above `MAX_PAGE_ORDER`, so allocated as a
    /// contiguous range rather than from the buddy free lists.
    pub const fn is_gigantic(self) -> bool {
        self.order() > MAX_PAGE_ORDER
    }
    /// `arch_hugetlb_valid_size()`: the size of `bytes`, if arm64 offers it.
    pub fn from_bytes(bytes: u64) -> Option<HugePageSize> {
        Self::ALL.into_iter().find(|s| s.bytes() == bytes)
    }
    /// The size of `order`, if arm64 offers it.
    pub fn from_order(order: u32) -> Option<HugePageSize> {
        Self::ALL.into_iter().find(|s| s.order() == order)
    }
    /// The short name ("64K", "2M", "32M", "1G").
    pub const fn label(self) -> &'static str {
        match self {
            HugePageSize::Cont64K => "64K",
            HugePageSize::Pmd2M => "2M",
            HugePageSize::ContPmd32M => "32M",
            HugePageSize::Pud1G => "1G",
        }
    }
    /// The sysfs directory name (`hugepages-2048kB`), as
    /// `hugetlb_add_hstate` names it.
    pub fn sysfs_name(self) -> String {
        format!("hugepages-{}kB", self.bytes() / 1024)
    }
}

impl std::fmt::Display for HugePageSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// `memparse()` (lib/cmdline.c): a number (decimal, or hex with `0x`)
/// with an optional K/M/G/T/P/E suffix, in bytes. `None` for anything
/// else (the kernel would read a prefix; mmlab refuses the rest).
pub fn memparse(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let n = u64::from_str_radix(&digits[..end], radix).ok()?;
    let shift = match &digits[end..] {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        "e" | "E" => 60,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// One huge page size and its pool (`struct hstate`, one node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hstate {
    size: HugePageSize,
    /// `max_huge_pages`: the persistent pool the last write reached.
    pub max_huge_pages: u64,
    /// `nr_huge_pages`: pages in the pool, surplus included.
    pub nr_huge_pages: u64,
    /// `free_huge_pages`: pages on the free list.
    pub free_huge_pages: u64,
    /// `resv_huge_pages`: pages reserved for mappings, not yet faulted.
    pub resv_huge_pages: u64,
    /// `surplus_huge_pages`: pages beyond the persistent pool.
    pub surplus_huge_pages: u64,
    /// `nr_overcommit_huge_pages`: the most surplus pages allowed.
    pub nr_overcommit_huge_pages: u64,
    /// `demote_order` as a size: what `demote` splits a page into (`None`:
    /// no `demote` file).
    pub demote_size: Option<HugePageSize>,
    /// `hugepage_freelists[0]`; the last element is the list head.
    pub(crate) hugepage_freelist: Vec<Folio>,
}

impl Hstate {
    /// An empty hstate of `size` (`hugetlb_add_hstate`).
    pub fn new(size: HugePageSize) -> Hstate {
        Hstate {
            size,
            max_huge_pages: 0,
            nr_huge_pages: 0,
            free_huge_pages: 0,
            resv_huge_pages: 0,
            surplus_huge_pages: 0,
            nr_overcommit_huge_pages: 0,
            demote_size: None,
            hugepage_freelist: Vec::new(),
        }
    }
    /// The size.
    pub fn size(&self) -> HugePageSize {
        self.size
    }
    /// `huge_page_order()`.
    pub fn huge_page_order(&self) -> u32 {
        self.size.order()
    }
    /// `pages_per_huge_page()`.
    pub fn pages_per_huge_page(&self) -> u64 {
        1 << self.size.order()
    }
    /// The sysfs directory name (`hugepages-2048kB`).
    pub fn name(&self) -> String {
        self.size.sysfs_name()
    }
    /// `persistent_huge_pages()`.
    pub fn persistent_huge_pages(&self) -> u64 {
        self.nr_huge_pages - self.surplus_huge_pages
    }
    /// `available_huge_pages()`: free pages not promised to a reservation.
    pub fn available_huge_pages(&self) -> u64 {
        self.free_huge_pages.saturating_sub(self.resv_huge_pages)
    }
    /// The free list, head first.
    pub fn free_folios(&self) -> impl Iterator<Item = Folio> + '_ {
        self.hugepage_freelist.iter().rev().copied()
    }
    /// `enqueue_hugetlb_folio()`: to the head of the free list.
    pub(crate) fn enqueue_hugetlb_folio(&mut self, folio: Folio) {
        self.hugepage_freelist.push(folio);
        self.free_huge_pages += 1;
    }
    /// `dequeue_hugetlb_folio_node_exact()`: the head of the free list,
    /// handed out (`free_huge_pages--`).
    pub(crate) fn dequeue_hugetlb_folio(&mut self) -> Option<Folio> {
        let folio = self.hugepage_freelist.pop()?;
        self.free_huge_pages -= 1;
        Some(folio)
    }
    /// `remove_pool_hugetlb_folio()` (with `remove_hugetlb_folio()`): take
    /// the head of the free list out of the pool, as surplus if
    /// `acct_surplus` (only while there are surplus pages).
    pub(crate) fn remove_pool_hugetlb_folio(&mut self, acct_surplus: bool) -> Option<Folio> {
        if acct_surplus && self.surplus_huge_pages == 0 {
            return None;
        }
        let folio = self.hugepage_freelist.pop()?;
        self.free_huge_pages -= 1;
        self.nr_huge_pages -= 1;
        if acct_surplus {
            self.surplus_huge_pages -= 1;
        }
        Some(folio)
    }
    /// `add_hugetlb_folio()`: a folio back into the pool (and onto the free
    /// list), as surplus if `adjust_surplus`.
    pub(crate) fn add_hugetlb_folio(&mut self, folio: Folio, adjust_surplus: bool) {
        self.nr_huge_pages += 1;
        if adjust_surplus {
            self.surplus_huge_pages += 1;
        }
        self.enqueue_hugetlb_folio(folio);
    }
    /// `adjust_pool_surplus()` on one node: `delta` -1 makes a surplus page
    /// persistent, +1 a persistent page surplus. Returns whether it could.
    pub(crate) fn adjust_pool_surplus(&mut self, delta: i32) -> bool {
        if delta < 0 {
            if self.surplus_huge_pages == 0 {
                return false;
            }
            self.surplus_huge_pages -= 1;
        } else {
            if self.surplus_huge_pages >= self.nr_huge_pages {
                return false;
            }
            self.surplus_huge_pages += 1;
        }
        true
    }
}

/// The `/sys/kernel/mm/hugepages/hugepages-*kB/` files of one hstate, as
/// their `show` functions print them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HstateSysfs {
    /// The size.
    pub size: HugePageSize,
    /// `nr_hugepages`.
    pub nr_hugepages: u64,
    /// `free_hugepages`.
    pub free_hugepages: u64,
    /// `resv_hugepages`.
    pub resv_hugepages: u64,
    /// `surplus_hugepages`.
    pub surplus_hugepages: u64,
    /// `nr_overcommit_hugepages`.
    pub nr_overcommit_hugepages: u64,
    /// `demote_size` in kB (`None`: no such file).
    pub demote_size_kb: Option<u64>,
}

impl Hstate {
    /// The sysfs view.
    pub fn sysfs(&self) -> HstateSysfs {
        HstateSysfs {
            size: self.size,
            nr_hugepages: self.nr_huge_pages,
            free_hugepages: self.free_huge_pages,
            resv_hugepages: self.resv_huge_pages,
            surplus_hugepages: self.surplus_huge_pages,
            nr_overcommit_hugepages: self.nr_overcommit_huge_pages,
            demote_size_kb: self.demote_size.map(|s| s.bytes() / 1024),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_memparse() {
        for (s, bytes, gigantic, name) in [
            (HugePageSize::Cont64K, 64 << 10, false, "hugepages-64kB"),
            (HugePageSize::Pmd2M, 2 << 20, false, "hugepages-2048kB"),
            (HugePageSize::ContPmd32M, 32 << 20, true, "hugepages-32768kB"),
            (HugePageSize::Pud1G, 1 << 30, true, "hugepages-1048576kB"),
        ] {
            assert_eq!((s.bytes(), s.is_gigantic(), s.sysfs_name()), (bytes, gigantic, name.to_string()));
            assert_eq!(HugePageSize::from_bytes(bytes), Some(s));
            assert_eq!(HugePageSize::ALL[s.index()], s);
        }
        assert_eq!(memparse("2M"), Some(2 << 20));
        assert_eq!(memparse("2048k"), Some(2 << 20));
        assert_eq!(memparse("0x40000000"), Some(1 << 30));
        assert_eq!(memparse("1G"), Some(1 << 30));
        assert_eq!(memparse("1Q"), None);
        assert_eq!(memparse(""), None);
        assert_eq!(memparse("99999999999E"), None);
        for bad in [4 << 10, 1 << 20, 4 << 20, 512 << 20, 16 << 30] {
            assert_eq!(HugePageSize::from_bytes(bad), None, "{bad}");
        }
    }
}
