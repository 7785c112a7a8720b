//! Intrusive doubly linked lists through struct page, as `struct list_head`.
//!
//! The kernel threads free pages onto lists through the `lru` field of their
//! struct page: the links are pointers to other pages' `lru` fields or to a
//! list head inside `struct zone` or `struct per_cpu_pages`. mmlab keeps that
//! shape. The links are stored in the struct pages in emulated RAM and hold
//! kernel virtual addresses: `vmemmap + pfn * 64 + 8` for a page, and for a
//! head an address in the kernel-data window ([`KERNEL_DATA_LISTS`]). The
//! heads themselves live in the host structure that owns them ([`ListArray`],
//! one per zone free-area set or pcp), each with its own base address, so a
//! link is decoded by range: inside the vmemmap window it names a page,
//! otherwise a head of the array being edited.
//!
//! # The list-head window
//!
//! The kernel's list heads are statics: `struct zone` sits in the node's
//! `pglist_data` (`contig_page_data`, a static without NUMA), inside the
//! image's `[_data, _end)` segment (`.data` and `.bss`), which lies at
//! `KIMAGE_VADDR` plus the image layout. mmlab's window for them,
//! [`KERNEL_DATA_LISTS`] to `KERNEL_DATA_LISTS + KERNEL_DATA_LISTS_SIZE`,
//! is the start of that segment of [`KernelImage::DEBIAN_7_2`], the image
//! mmlab boots: its first [`KERNEL_DATA_LISTS_SIZE`] bytes from `_data`,
//! in `.data` (5 MiB of the segment's 6 MiB). Where exactly the kernel's
//! own objects lie is its link map's business, and its pagesets are
//! percpu memory; mmlab keeps all the heads together. Inside the window,
//! each zone's free-area heads take [`ZONE_LIST_HEADS_STRIDE`] bytes (in
//! zone order, as `node_zones[]`), then each (zone, CPU) pageset's heads
//! [`PCP_LIST_HEADS_STRIDE`].
//!
//! A head's address is thereby one no vmalloc can ever hand out: with the
//! image in RAM the segment is one of `declare_kernel_vmas()`'s busy
//! areas; without it (`boot.state=bare`, `arm64.kernel_image=0`) vmalloc
//! keeps the window out of its free space (`mmlab_vmalloc::reserved`).
//!
//! Deleting an entry writes the kernel's poison values (`LIST_POISON1/2` with
//! the 64-bit `POISON_POINTER_DELTA`) into its links, so a stale use shows up
//! as an obviously bad address in a dump.
//!
//! Faithful in shape (same insertions, same order, same memory touched per
//! operation); simplified in that heads live in host memory.

use crate::addr::{PAGE_SIZE, Pfn};
use crate::arch::arm64::kimage::KernelImage;
use crate::arch::arm64::memory::VMEMMAP_END;
use crate::mm::memmap::Memmap;
use crate::mm::mmzone::ZoneType;
use crate::mm::page::{LRU_OFFSET, STRUCT_PAGE_SIZE, StructPage};
use crate::mm::zone_layout::NR_ZONE_TYPES;

/// Bytes of the window one zone's free-area heads may take (`free_area[]`:
/// `NR_PAGE_ORDERS` × `MIGRATE_TYPES` heads of 16 bytes = 1056).
pub const ZONE_LIST_HEADS_STRIDE: u64 = 2 << 10;
/// Bytes of the window one pageset's heads may take (`per_cpu_pages`
/// `lists[NR_PCP_LISTS]`, 16 heads at most).
pub const PCP_LIST_HEADS_STRIDE: u64 = 256;
/// CPUs the window has pageset heads for (the machine's `NR_CPUS` may not
/// exceed it).
pub const LIST_WINDOW_CPUS: usize = 256;
/// Size of the list-head window, page aligned.
pub const KERNEL_DATA_LISTS_SIZE: u64 = (NR_ZONE_TYPES as u64 * ZONE_LIST_HEADS_STRIDE
    + (NR_ZONE_TYPES * LIST_WINDOW_CPUS) as u64 * PCP_LIST_HEADS_STRIDE)
    .next_multiple_of(PAGE_SIZE);
/// Where mmlab places the heads of the lists the kernel keeps in static
/// data: `_data`, the start of the image's data segment (module docs).
pub const KERNEL_DATA_LISTS: u64 = KernelImage::DEBIAN_7_2.va(KernelImage::DEBIAN_7_2.init_end());
const _: () = assert!(
    KERNEL_DATA_LISTS.is_multiple_of(PAGE_SIZE)
        && KERNEL_DATA_LISTS + KERNEL_DATA_LISTS_SIZE <= KernelImage::DEBIAN_7_2.va_end(),
    "the list-head window must fit in the image's [_data, _end)"
);

/// The address of zone `zone`'s free-area heads in the window.
pub const fn zone_list_heads(zone: ZoneType) -> u64 {
    KERNEL_DATA_LISTS + zone as u64 * ZONE_LIST_HEADS_STRIDE
}

/// The address of the heads of `cpu`'s pageset of zone `zone` in the
/// window, `None` for a CPU beyond [`LIST_WINDOW_CPUS`] or a zone index
/// beyond the zones.
pub const fn pcp_list_heads(zone: usize, cpu: usize) -> Option<u64> {
    if zone >= NR_ZONE_TYPES || cpu >= LIST_WINDOW_CPUS {
        return None;
    }
    let i = (zone * LIST_WINDOW_CPUS + cpu) as u64;
    Some(KERNEL_DATA_LISTS + NR_ZONE_TYPES as u64 * ZONE_LIST_HEADS_STRIDE + i * PCP_LIST_HEADS_STRIDE)
}

/// `LIST_POISON1` (0x100 + `POISON_POINTER_DELTA`).
pub const LIST_POISON1: u64 = 0xdead_0000_0000_0100;
/// `LIST_POISON2` (0x122 + `POISON_POINTER_DELTA`).
pub const LIST_POISON2: u64 = 0xdead_0000_0000_0122;

/// Size of a `struct list_head`.
const HEAD_SIZE: u64 = 16;

/// A `struct list_head` held outside emulated RAM, with the number of
/// entries beside it (instrumented: the kernel keeps no count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    next: u64,
    prev: u64,
    len: u32,
}

/// What a link points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Page(Pfn),
    Head(usize),
}

/// A fixed array of list heads whose entries are struct pages.
#[derive(Debug, Clone)]
pub struct ListArray {
    base_va: u64,
    vmemmap_pfn0: u64,
    /// The struct page of `vmemmap_pfn0` ([`Memmap::vmemmap_start`]).
    vmemmap_base: u64,
    heads: Box<[Head]>,
}

impl ListArray {
    /// `n` empty lists whose heads sit at `base_va`, `base_va + 16`, ...
    /// (`INIT_LIST_HEAD` on each). `mem` fixes how page links are encoded.
    pub fn new(mem: &Memmap, base_va: u64, n: usize) -> ListArray {
        let vmemmap_base = mem.vmemmap_start();
        assert!(!(vmemmap_base..VMEMMAP_END).contains(&base_va));
        let heads = (0..n)
            .map(|i| {
                let va = base_va + i as u64 * HEAD_SIZE;
                Head { next: va, prev: va, len: 0 }
            })
            .collect();
        ListArray { base_va, vmemmap_pfn0: mem.vmemmap_pfn0(), vmemmap_base, heads }
    }

    /// Number of lists.
    pub fn len(&self) -> usize {
        self.heads.len()
    }
    /// True if there are no lists at all.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    #[inline(always)]
    fn head_va(&self, i: usize) -> u64 {
        self.base_va + i as u64 * HEAD_SIZE
    }
    #[inline(always)]
    fn page_link(&self, pfn: Pfn) -> u64 {
        self.vmemmap_base + (pfn.0 - self.vmemmap_pfn0) * STRUCT_PAGE_SIZE + LRU_OFFSET
    }
    /// The head a non-page link names (panics, bounds-checked, on a corrupt link).
    #[inline(always)]
    fn head_mut(&mut self, va: u64) -> &mut Head {
        let off = va.wrapping_sub(self.base_va);
        debug_assert!(off.is_multiple_of(HEAD_SIZE), "corrupt list link {va:#x}");
        &mut self.heads[(off / HEAD_SIZE) as usize]
    }
    #[inline(always)]
    fn decode(&self, va: u64) -> Link {
        if va.wrapping_sub(self.vmemmap_base) < VMEMMAP_END - self.vmemmap_base {
            Link::Page(Pfn((va - self.vmemmap_base - LRU_OFFSET) / STRUCT_PAGE_SIZE + self.vmemmap_pfn0))
        } else {
            Link::Head((va.wrapping_sub(self.base_va) / HEAD_SIZE) as usize)
        }
    }
    /// `next->prev = v` for the entry at link `next`.
    #[inline(always)]
    fn set_prev_of(&mut self, mem: &Memmap, next: u64, v: u64) {
        match mem.page_by_lru_va(next) {
            Some(p) => p.set_lru_prev(v),
            None => self.head_mut(next).prev = v,
        }
    }
    /// `prev->next = v` for the entry at link `prev`.
    #[inline(always)]
    fn set_next_of(&mut self, mem: &Memmap, prev: u64, v: u64) {
        match mem.page_by_lru_va(prev) {
            Some(p) => p.set_lru_next(v),
            None => self.head_mut(prev).next = v,
        }
    }

    /// `list_add(&page->lru, &heads[i])`: insert at the head.
    #[inline(always)]
    pub fn add(&mut self, mem: &Memmap, i: usize, pfn: Pfn) {
        self.add_page(mem, i, pfn, mem.page(pfn))
    }

    /// [`ListArray::add`] for a caller that already holds `pfn`'s struct page.
    #[inline(always)]
    pub fn add_page(&mut self, mem: &Memmap, i: usize, pfn: Pfn, p: &StructPage) {
        let new = self.page_link(pfn);
        let head = self.head_va(i);
        let next = self.heads[i].next;
        self.set_prev_of(mem, next, new);
        p.set_lru_next(next);
        p.set_lru_prev(head);
        let h = &mut self.heads[i];
        h.next = new;
        h.len += 1;
    }

    /// `list_add_tail(&page->lru, &heads[i])`: insert at the tail.
    #[inline(always)]
    pub fn add_tail(&mut self, mem: &Memmap, i: usize, pfn: Pfn) {
        self.add_tail_page(mem, i, pfn, mem.page(pfn))
    }

    /// [`ListArray::add_tail`] for a caller that already holds the struct page.
    #[inline(always)]
    pub fn add_tail_page(&mut self, mem: &Memmap, i: usize, pfn: Pfn, p: &StructPage) {
        let new = self.page_link(pfn);
        let head = self.head_va(i);
        let prev = self.heads[i].prev;
        self.set_next_of(mem, prev, new);
        p.set_lru_next(head);
        p.set_lru_prev(prev);
        let h = &mut self.heads[i];
        h.prev = new;
        h.len += 1;
    }

    /// `list_del(&page->lru)` for a page on list `i`.
    #[inline(always)]
    pub fn del(&mut self, mem: &Memmap, i: usize, pfn: Pfn) {
        let p = mem.page(pfn);
        let (next, prev) = (p.lru_next(), p.lru_prev());
        p.set_lru_next(LIST_POISON1);
        p.set_lru_prev(LIST_POISON2);
        self.set_prev_of(mem, next, prev);
        self.set_next_of(mem, prev, next);
        self.heads[i].len -= 1;
    }

    /// Take the first entry off list `i` (`list_first_entry_or_null()` +
    /// `list_del()` in one step, reading the head once).
    #[inline(always)]
    pub fn pop_first(&mut self, mem: &Memmap, i: usize) -> Option<Pfn> {
        let first = self.heads[i].next;
        let p = mem.page_by_lru_va(first)?;
        let next = p.lru_next();
        p.set_lru_next(LIST_POISON1);
        p.set_lru_prev(LIST_POISON2);
        self.set_prev_of(mem, next, self.head_va(i));
        let h = &mut self.heads[i];
        h.next = next;
        h.len -= 1;
        Some(Pfn((first - self.vmemmap_base - LRU_OFFSET) / STRUCT_PAGE_SIZE + self.vmemmap_pfn0))
    }

    /// `list_move_tail()` from list `from` to list `to`.
    #[inline]
    pub fn move_tail(&mut self, mem: &Memmap, from: usize, to: usize, pfn: Pfn) {
        self.del(mem, from, pfn);
        self.add_tail(mem, to, pfn);
    }

    /// `list_first_entry_or_null()`.
    #[inline(always)]
    pub fn first(&self, i: usize) -> Option<Pfn> {
        match self.decode(self.heads[i].next) {
            Link::Page(p) => Some(p),
            Link::Head(_) => None,
        }
    }

    /// `list_last_entry()` or None if empty.
    #[inline]
    pub fn last(&self, i: usize) -> Option<Pfn> {
        match self.decode(self.heads[i].prev) {
            Link::Page(p) => Some(p),
            Link::Head(_) => None,
        }
    }

    /// `list_empty()`.
    #[inline]
    pub fn list_is_empty(&self, i: usize) -> bool {
        self.heads[i].next == self.head_va(i)
    }

    /// Entries on list `i` (kept as a count beside the list: instrumented).
    #[inline]
    pub fn count(&self, i: usize) -> u32 {
        self.heads[i].len
    }

    /// Walk list `i` from head to tail, checking every back link; returns the
    /// entries or a description of the first broken link.
    ///
    /// # Errors
    ///
    /// A description of the first inconsistency: a broken back link, a link to an invalid PFN or
    /// another head, or a length that disagrees with the count.
    pub fn walk(&self, mem: &Memmap, i: usize) -> Result<Vec<Pfn>, String> {
        let mut out = Vec::new();
        let mut prev = self.head_va(i);
        let mut cur = self.heads[i].next;
        loop {
            match self.decode(cur) {
                Link::Head(h) if h == i => {
                    if self.heads[i].prev != prev {
                        return Err(format!("list {i}: head.prev {:#x} != last {prev:#x}", self.heads[i].prev));
                    }
                    break;
                }
                Link::Head(h) => return Err(format!("list {i}: reaches head {h}")),
                Link::Page(p) => {
                    if !mem.pfn_valid(p) {
                        return Err(format!("list {i}: link to invalid pfn {p}"));
                    }
                    let pg = mem.page(p);
                    if pg.lru_prev() != prev {
                        return Err(format!("list {i}: pfn {p} prev {:#x} != {prev:#x}", pg.lru_prev()));
                    }
                    out.push(p);
                    if out.len() > self.heads[i].len as usize {
                        return Err(format!("list {i}: longer than its count {}", self.heads[i].len));
                    }
                    prev = cur;
                    cur = pg.lru_next();
                }
            }
        }
        if out.len() != self.heads[i].len as usize {
            return Err(format!("list {i}: {} entries, count says {}", out.len(), self.heads[i].len));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window is the start of the image's data segment (Debian's 7.2.13
    /// image: `_data` at 0xffff8000828e0000, `_end` at 0xffff800082f00000),
    /// and every zone's and pageset's heads are in it.
    #[test]
    fn the_window_is_the_start_of_the_images_data_and_holds_every_head() {
        let k = KernelImage::DEBIAN_7_2;
        assert_eq!((k.va(k.init_end()), k.va_end()), (0xffff_8000_828e_0000, 0xffff_8000_82f0_0000));
        assert_eq!(KERNEL_DATA_LISTS_SIZE, 0x42000);
        assert_eq!(KERNEL_DATA_LISTS, 0xffff_8000_828e_0000);
        let end = KERNEL_DATA_LISTS + KERNEL_DATA_LISTS_SIZE;
        assert!(end <= k.va_end());
        for z in ZoneType::ALL {
            let h = zone_list_heads(z);
            assert!(h >= KERNEL_DATA_LISTS && h + ZONE_LIST_HEADS_STRIDE <= end);
        }
        let last = pcp_list_heads(NR_ZONE_TYPES - 1, LIST_WINDOW_CPUS - 1).unwrap();
        assert_eq!(last + PCP_LIST_HEADS_STRIDE, end, "the pagesets fill the window");
        assert!(pcp_list_heads(0, 0).unwrap() >= zone_list_heads(ZoneType::Movable) + ZONE_LIST_HEADS_STRIDE);
        assert_eq!(pcp_list_heads(0, LIST_WINDOW_CPUS), None);
        assert_eq!(pcp_list_heads(NR_ZONE_TYPES, 0), None);
    }
}
