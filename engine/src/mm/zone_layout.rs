//! The zones' place in the node: arm64 `zone_sizes_init()`
//! (arch/arm64/mm/init.c) and the spans `free_area_init()` (mm/mm_init.c)
//! gives each zone. The machine computes them at boot; `__init_single_page()`
//! writes the zone number into each struct page's flags from them, and the
//! buddy allocator builds its zones from them.
//!
//! | piece | fidelity |
//! |---|---|
//! | `max_zone_pfns[]`, `arm64_dma_phys_limit` | faithful (no firmware DMA limit below 4 GiB: QEMU virt's device tree has none) |
//! | zone spans, present pages | faithful for one node; no ZONE_MOVABLE (no kernelcore=/movablecore=) |

use crate::PAGE_SHIFT;
use crate::mm::ZoneType;

/// `MAX_NR_ZONES` of the zone types mmlab has (DMA, DMA32, Normal, Movable).
pub const NR_ZONE_TYPES: usize = ZoneType::ALL.len();

/// `DMA_BIT_MASK(32)`, the 32-bit DMA limit.
pub const DMA_BIT_MASK_32: u64 = (1 << 32) - 1;

/// One zone's place in the node, as `free_area_init` sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ZoneSpan {
    /// The zone type (`zone_idx()` is its index).
    pub zone: ZoneType,
    /// `zone->zone_start_pfn`.
    pub zone_start_pfn: u64,
    /// `zone->spanned_pages`.
    pub spanned_pages: u64,
    /// `zone->present_pages`: memblock memory inside the span.
    pub present_pages: u64,
}

impl ZoneSpan {
    /// `zone_end_pfn()`.
    pub const fn zone_end_pfn(&self) -> u64 {
        self.zone_start_pfn + self.spanned_pages
    }
    /// `populated_zone()` as far as the layout tells (present pages).
    pub const fn is_populated(&self) -> bool {
        self.present_pages != 0
    }
}

/// `max_zone_phys()`: the end (exclusive) of a zone limited to `zone_limit`
/// (inclusive), never beyond the end of DRAM.
pub const fn max_zone_phys(zone_limit: u64, dram_end: u64) -> u64 {
    let last = dram_end - 1;
    (if zone_limit < last { zone_limit } else { last }) + 1
}

/// arm64 `zone_sizes_init()`: `max_zone_pfns[]` for DRAM `[dram_start,
/// dram_end)`, with the firmware's DMA limit `zone_dma_limit` (inclusive;
/// `u64::MAX` when neither the device tree nor IORT limits it, as on QEMU
/// virt). Returns the limits and `arm64_dma_phys_limit`.
pub fn arm64_zone_sizes_init(dram_start: u64, dram_end: u64, zone_dma_limit: u64) -> ([u64; NR_ZONE_TYPES], u64) {
    let mut dma_limit = zone_dma_limit;
    if dram_start < u32::MAX as u64 {
        dma_limit = dma_limit.min(u32::MAX as u64);
    }
    let arm64_dma_phys_limit = max_zone_phys(dma_limit, dram_end);
    let dma32_phys_limit = max_zone_phys(DMA_BIT_MASK_32, dram_end);
    let max_pfn = dram_end >> PAGE_SHIFT;
    // ZONE_MOVABLE takes nothing without movablecore/kernelcore.
    ([arm64_dma_phys_limit >> PAGE_SHIFT, dma32_phys_limit >> PAGE_SHIFT, max_pfn, 0], arm64_dma_phys_limit)
}

/// `free_area_init()` for one node whose memblock memory is `memory`
/// (`(base, size)` in bytes, sorted): each zone's start, span and present
/// pages (`arch_zone_lowest/highest_possible_pfn`,
/// `zone_spanned_pages_in_node`, `zone_absent_pages_in_node`).
pub fn free_area_init(max_zone_pfn: &[u64; NR_ZONE_TYPES], memory: &[(u64, u64)]) -> [ZoneSpan; NR_ZONE_TYPES] {
    let node_start = memory.first().map_or(0, |r| r.0 >> PAGE_SHIFT);
    let node_end = memory.last().map_or(0, |r| (r.0 + r.1) >> PAGE_SHIFT);
    let mut start_pfn = node_start;
    std::array::from_fn(|i| {
        let zone = ZoneType::ALL[i];
        // ZONE_MOVABLE is carved from the others only with kernelcore=.
        let (low, high) = if zone == ZoneType::Movable {
            (0, 0)
        } else {
            let end = max_zone_pfn[i].max(start_pfn);
            let r = (start_pfn, end);
            start_pfn = end;
            r
        };
        let zs = node_start.clamp(low, high);
        let ze = node_end.clamp(low, high);
        let (zs, ze) = if ze < node_start || zs > node_end { (zs, zs) } else { (zs, ze) };
        let present = memory
            .iter()
            .map(|&(b, s)| {
                let (a, e) = ((b >> PAGE_SHIFT).max(zs), ((b + s) >> PAGE_SHIFT).min(ze));
                e.saturating_sub(a)
            })
            .sum();
        ZoneSpan { zone, zone_start_pfn: zs, spanned_pages: ze - zs, present_pages: present }
    })
}

/// `page_zonenum()` as `free_area_init()` lays the zones out: the zone of a
/// frame from `max_zone_pfns[]` (DMA below its limit, then DMA32, then Normal).
pub const fn zone_of_pfn(max_zone_pfn: &[u64; NR_ZONE_TYPES], pfn: u64) -> ZoneType {
    if pfn < max_zone_pfn[ZoneType::Dma as usize] {
        ZoneType::Dma
    } else if pfn < max_zone_pfn[ZoneType::Dma32 as usize] {
        ZoneType::Dma32
    } else {
        ZoneType::Normal
    }
}
