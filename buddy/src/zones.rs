//! The zones of the one node: where they lie, how much each keeps in
//! reserve, and which zone an allocation may use.
//!
//! # The algorithm
//!
//! *Zone boundaries* (arm64 `zone_sizes_init`, arch/arm64/mm/init.c): the DMA
//! zone ends at `arm64_dma_phys_limit`, the firmware's DMA limit clamped to
//! the 32-bit limit when RAM starts below 4 GiB, and never past the end of
//! DRAM (`max_zone_phys`). DMA32 ends at the same 32-bit limit, so on arm64
//! with RAM below 4 GiB it is present but empty; Normal ends at `max_pfn`.
//! `free_area_init` then lays the zones end to end: each zone starts where the
//! previous one ended and ends at its `max_zone_pfns` entry or its start,
//! whichever is higher, and each is clamped to the node's span
//! (`zone_spanned_pages_in_node`). Present pages are the memblock memory
//! inside the span (the span less `zone_absent_pages_in_node`).
//!
//! *Reserves* (`setup_per_zone_lowmem_reserve`): zone i keeps back, from an
//! allocation whose highest usable zone is j > i, the managed pages of the
//! zones i+1..=j divided by `sysctl_lowmem_reserve_ratio[i]` (256, 256, 32, 0
//! by default); a zone without managed pages or with ratio 0 keeps nothing.
//! `zone_watermark_ok` adds `lowmem_reserve[highest_zoneidx]` to the mark.
//!
//! *Watermarks* (`__setup_per_zone_wmarks`): `min_free_kbytes` in pages is
//! shared out over the lowmem zones (all but Movable) in proportion to their
//! managed pages; Movable gets managed/1024 clamped to [32, 128]. low and high
//! step up from min by max(tmp/4, managed × watermark_scale_factor / 10000).
//!
//! *min_free_kbytes* (`calculate_min_free_kbytes` from `nr_free_buffer_pages`,
//! then khugepaged's `set_recommended_min_free_kbytes` when THP is enabled):
//! per populated zone up to `gfp_zone(GFP_USER)`, 2 pageblocks plus
//! MIGRATE_PCPTYPES² pageblocks, at most 5 % of `nr_free_buffer_pages`,
//! replacing the square-root value when larger.
//!
//! *Zonelist* (`build_zonerefs_node`, ZONELIST_FALLBACK): the zones with
//! managed pages, highest first (Normal, DMA32, DMA); an allocation walks it
//! from the first zone not above `gfp_zone(gfp)`.
//!
//! | piece | fidelity |
//! |---|---|
//! | zone boundaries, spans, present pages | faithful (no firmware DMA limit below 4 GiB: QEMU virt has none) |
//! | lowmem_reserve, watermarks, min_free_kbytes with the THP raise | faithful |
//! | `gfp_zone` (GFP_ZONE_TABLE for DMA + DMA32, no HIGHMEM) | faithful |
//! | zonelist | faithful for one node |

use crate::watermark::{WATERMARK_SCALE_FACTOR, calculate_min_free_kbytes, mult_frac};
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::mm::{MIGRATE_PCPTYPES, PAGEBLOCK_NR_PAGES, ZoneType};
use mmlab_engine::{PAGE_SHIFT, PAGE_SIZE};

use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;

/// `sysctl_lowmem_reserve_ratio` defaults (mm/page_alloc.c): DMA 256,
/// DMA32 256, Normal 32, Movable 0.
pub const LOWMEM_RESERVE_RATIO: [u64; NR_ZONE_TYPES] = [256, 256, 32, 0];

/// `SWAP_CLUSTER_MAX`: the floor of a Movable zone's min watermark.
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// `setup_per_zone_lowmem_reserve()`: `lowmem_reserve[i][j]` of zone i
/// against an allocation whose highest zone is j (the zoneinfo
/// `protection:` row of zone i).
pub fn setup_per_zone_lowmem_reserve(
    managed: &[u64; NR_ZONE_TYPES],
    ratio: &[u64; NR_ZONE_TYPES],
) -> [[u64; NR_ZONE_TYPES]; NR_ZONE_TYPES] {
    let mut r = [[0; NR_ZONE_TYPES]; NR_ZONE_TYPES];
    for i in 0..NR_ZONE_TYPES - 1 {
        let clear = ratio[i] == 0 || managed[i] == 0;
        let mut upper = 0;
        for j in i + 1..NR_ZONE_TYPES {
            upper += managed[j];
            r[i][j] = if clear { 0 } else { upper / ratio[i] };
        }
    }
    r
}

/// `__setup_per_zone_wmarks()` for every zone: `_watermark[min, low, high,
/// promo]` from `min_free_kbytes` and the zones' managed pages.
pub fn setup_per_zone_wmarks(min_free_kbytes: u64, managed: &[u64; NR_ZONE_TYPES]) -> [[u64; 4]; NR_ZONE_TYPES] {
    let pages_min = min_free_kbytes >> (PAGE_SHIFT - 10);
    let lowmem: u64 = ZoneType::ALL.iter().filter(|&&z| z != ZoneType::Movable).map(|&z| managed[z as usize]).sum();
    std::array::from_fn(|i| {
        let m = managed[i];
        let tmp = pages_min.saturating_mul(m).checked_div(lowmem).unwrap_or(0);
        let min = if ZoneType::ALL[i] == ZoneType::Movable { (m / 1024).clamp(SWAP_CLUSTER_MAX, 128) } else { tmp };
        let delta = (tmp >> 2).max(mult_frac(m, WATERMARK_SCALE_FACTOR, 10_000));
        [min, min + delta, min + 2 * delta, min + 3 * delta]
    })
}

/// `nr_free_zone_pages(gfp_zone(GFP_USER))` = `nr_free_buffer_pages()`: the
/// managed pages above the high watermark of every zone up to Normal.
pub fn nr_free_buffer_pages(managed: &[u64; NR_ZONE_TYPES], high_wmark: &[u64; NR_ZONE_TYPES]) -> u64 {
    (0..=ZoneType::Normal as usize).map(|i| managed[i].saturating_sub(high_wmark[i])).sum()
}

/// khugepaged's `set_recommended_min_free_kbytes()`: the value it raises
/// `min_free_kbytes` to, from the number of populated zones up to
/// `gfp_zone(GFP_USER)` and `nr_free_buffer_pages()`.
pub fn recommended_min_free_kbytes(nr_zones: u64, nr_free_buffer_pages: u64) -> u64 {
    let pcp = MIGRATE_PCPTYPES as u64;
    let pages = PAGEBLOCK_NR_PAGES * nr_zones * 2 + PAGEBLOCK_NR_PAGES * nr_zones * pcp * pcp;
    pages.min(nr_free_buffer_pages / 20) * (PAGE_SIZE >> 10)
}

/// `min_free_kbytes` after boot (`init_per_zone_wmark_min`, then
/// `hugepage_init` → `start_stop_khugepaged` → `set_recommended_min_free_kbytes`
/// when THP is enabled): the square-root value from `nr_free_buffer_pages`
/// (watermarks still 0), raised to khugepaged's recommendation if that is
/// larger. `populated[i]` is `populated_zone()` of zone i.
pub fn boot_min_free_kbytes(managed: &[u64; NR_ZONE_TYPES], populated: &[bool; NR_ZONE_TYPES], thp: bool) -> u64 {
    let base = calculate_min_free_kbytes(nr_free_buffer_pages(managed, &[0; NR_ZONE_TYPES]));
    if !thp {
        return base;
    }
    let wm = setup_per_zone_wmarks(base, managed);
    let high = std::array::from_fn(|i| wm[i][crate::WMARK_HIGH]);
    let nr_zones = (0..=ZoneType::Normal as usize).filter(|&i| populated[i]).count() as u64;
    base.max(recommended_min_free_kbytes(nr_zones, nr_free_buffer_pages(managed, &high)))
}

/// A GFP mask whose zone modifiers the kernel rejects (`GFP_ZONE_BAD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BadGfpZone(pub u32);

impl std::fmt::Display for BadGfpZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gfp mask {:#x} combines zone modifiers no zone satisfies (GFP_ZONE_BAD)", self.0)
    }
}
impl std::error::Error for BadGfpZone {}

/// `gfp_zone()`: the highest zone an allocation with these flags may use
/// (GFP_ZONE_TABLE with ZONE_DMA and ZONE_DMA32 built, no HIGHMEM, so
/// `__GFP_HIGHMEM` means Normal and `__GFP_HIGHMEM | __GFP_MOVABLE` means
/// Movable). Two of DMA, DMA32 and HIGHMEM together are `GFP_ZONE_BAD`,
/// where the kernel hits `VM_BUG_ON`.
#[inline]
pub fn gfp_zone(gfp: Gfp) -> Result<ZoneType, BadGfpZone> {
    match GFP_ZONE_TABLE[(gfp.bits() & Gfp::GFP_ZONEMASK.bits()) as usize & (GFP_ZONE_TABLE.len() - 1)] {
        Some(z) => Ok(z),
        None => Err(BadGfpZone(gfp.bits())),
    }
}

/// `GFP_ZONE_TABLE` / `GFP_ZONE_BAD` as one lookup: the zone of each
/// combination of the four zone modifier bits (`GFP_ZONEMASK`), `None` for
/// the bad ones. Built by [`gfp_zone_bits`], the rule in prose above.
const GFP_ZONE_TABLE: [Option<ZoneType>; 16] = {
    let mut t = [None; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = gfp_zone_bits(i as u32);
        i += 1;
    }
    t
};

/// The zone rule of [`gfp_zone`] for the zone modifier bits `bits`.
const fn gfp_zone_bits(bits: u32) -> Option<ZoneType> {
    let dma = bits & Gfp::__GFP_DMA.bits() != 0;
    let dma32 = bits & Gfp::__GFP_DMA32.bits() != 0;
    let high = bits & Gfp::__GFP_HIGHMEM.bits() != 0;
    let movable = bits & Gfp::__GFP_MOVABLE.bits() != 0;
    match (dma, dma32, high) {
        (false, false, false) => Some(ZoneType::Normal),
        (true, false, false) => Some(ZoneType::Dma),
        (false, true, false) => Some(ZoneType::Dma32),
        (false, false, true) if movable => Some(ZoneType::Movable),
        (false, false, true) => Some(ZoneType::Normal),
        _ => None,
    }
}

/// `build_zonerefs_node()` for ZONELIST_FALLBACK on one node: the zones with
/// managed pages, highest type first.
pub fn zonelist_fallback(managed: &[u64; NR_ZONE_TYPES]) -> Vec<ZoneType> {
    ZoneType::ALL.iter().rev().copied().filter(|&z| managed[z as usize] != 0).collect()
}

/// `first_zones_zonelist()`: the preferred zone of an allocation whose
/// highest zone is `highest`, or `None` when no zone at or below it manages
/// pages.
pub fn preferred_zone(zonelist: &[ZoneType], highest: ZoneType) -> Option<ZoneType> {
    zonelist.iter().copied().find(|&z| z as usize <= highest as usize)
}

/// `alloc_flags_nofragment()` with CONFIG_ZONE_DMA32 on one node: whether the
/// first attempt carries ALLOC_NOFRAGMENT (only when the preferred zone is
/// Normal; with one node DMA32 is assumed populated).
pub fn alloc_nofragment(preferred: Option<ZoneType>) -> bool {
    preferred == Some(ZoneType::Normal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::mm::zone_layout::{ZoneSpan, arm64_zone_sizes_init, free_area_init};

    const GIB: u64 = 1 << 30;

    fn layout(base: u64, size: u64) -> [ZoneSpan; NR_ZONE_TYPES] {
        let (max, _) = arm64_zone_sizes_init(base, base + size, u64::MAX);
        free_area_init(&max, &[(base, size)])
    }

    #[test]
    fn virt_zones_at_1g_4g_16g_as_the_real_kernel_reports_them() {
        // 4 GiB at 1 GiB: DMA [0x40000000, 0xffffffff], DMA32 empty, Normal
        // [0x100000000, 0x13fffffff].
        let z = layout(GIB, 4 * GIB);
        assert_eq!((z[0].zone_start_pfn, z[0].zone_end_pfn()), (0x40000, 0x100000));
        assert_eq!((z[1].spanned_pages, z[1].present_pages), (0, 0));
        assert_eq!((z[2].zone_start_pfn, z[2].zone_end_pfn()), (0x100000, 0x140000));
        assert_eq!(z[0].present_pages + z[2].present_pages, 1 << 20);
        assert!(!z[3].is_populated());
        // 1 GiB: only DMA.
        let z = layout(GIB, GIB);
        assert_eq!(z[0].present_pages, 1 << 18);
        assert!(!z[1].is_populated() && !z[2].is_populated());
        // 16 GiB: DMA [1 GiB, 4 GiB), Normal above.
        let z = layout(GIB, 16 * GIB);
        assert_eq!(z[0].present_pages, 3 << 18);
        assert_eq!(z[2].present_pages, 13 << 18);
        // A hole between two banks is spanned but not present.
        let (max, _) = arm64_zone_sizes_init(GIB, 6 * GIB, u64::MAX);
        let z = free_area_init(&max, &[(GIB, GIB), (5 * GIB, GIB)]);
        assert_eq!((z[0].spanned_pages, z[0].present_pages), (3 << 18, 1 << 18));
        assert_eq!((z[2].spanned_pages, z[2].present_pages), (2 << 18, 1 << 18));
    }

    #[test]
    fn min_free_kbytes_with_and_without_thp() {
        // Reference: 45,056 kB at 4 GiB and 16 GiB (two populated zones:
        // 512 × 2 × (2 + 9) = 11,264 pages), 22,528 kB at 1 GiB (one zone).
        let m4 = [780_000, 0, 250_000, 0];
        assert_eq!(boot_min_free_kbytes(&m4, &[true, false, true, false], true), 45_056);
        let m1 = [245_000, 0, 0, 0];
        assert_eq!(boot_min_free_kbytes(&m1, &[true, false, false, false], true), 22_528);
        // transparent_hugepage=never: int_sqrt(1,030,000 × 4 × 16) = 8,119.
        assert_eq!(boot_min_free_kbytes(&m4, &[true, false, true, false], false), 8_119);
        // 5 % cap on a tiny machine: 64 MiB ~ 16,000 pages / 20 = 800 pages.
        assert_eq!(recommended_min_free_kbytes(1, 16_000), 3_200);
    }

    #[test]
    fn lowmem_reserve_and_wmarks_spread_by_managed_pages() {
        let m = [780_000, 0, 250_000, 0];
        let r = setup_per_zone_lowmem_reserve(&m, &LOWMEM_RESERVE_RATIO);
        // DMA: 250,000 / 256 = 976 against Normal and Movable; DMA32 has no
        // managed pages so keeps nothing; Normal: Movable's 0 / 32.
        assert_eq!(r[0], [0, 0, 976, 976]);
        assert_eq!(r[1], [0; 4]);
        assert_eq!(r[2], [0; 4]);
        let w = setup_per_zone_wmarks(45_056, &m);
        // 11,264 pages × 780,000 / 1,030,000 = 8,530; delta = 8,530 / 4 = 2,132.
        assert_eq!(w[0], [8_530, 10_662, 12_794, 14_926]);
        // 11,264 × 250,000 / 1,030,000 = 2,733; delta = max(683, 250) = 683.
        assert_eq!(w[2], [2_733, 3_416, 4_099, 4_782]);
        assert_eq!(w[1], [0; 4]);
        // An empty Movable zone still gets SWAP_CLUSTER_MAX as min.
        assert_eq!(w[3][0], 32);
    }

    #[test]
    fn gfp_zone_and_the_fallback_zonelist() {
        assert_eq!(gfp_zone(Gfp::GFP_KERNEL), Ok(ZoneType::Normal));
        assert_eq!(gfp_zone(Gfp::GFP_KERNEL | Gfp::__GFP_DMA), Ok(ZoneType::Dma));
        assert_eq!(gfp_zone(Gfp::GFP_KERNEL | Gfp::__GFP_DMA32), Ok(ZoneType::Dma32));
        assert_eq!(gfp_zone(Gfp::GFP_HIGHUSER_MOVABLE), Ok(ZoneType::Movable));
        assert!(gfp_zone(Gfp::__GFP_DMA | Gfp::__GFP_DMA32).is_err());
        let zl = zonelist_fallback(&[780_000, 0, 250_000, 0]);
        assert_eq!(zl, vec![ZoneType::Normal, ZoneType::Dma]);
        assert_eq!(preferred_zone(&zl, ZoneType::Dma32), Some(ZoneType::Dma));
        assert!(alloc_nofragment(preferred_zone(&zl, ZoneType::Movable)));
        assert!(!alloc_nofragment(preferred_zone(&zonelist_fallback(&[245_000, 0, 0, 0]), ZoneType::Normal)));
    }
}
