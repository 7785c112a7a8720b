//! The zone sizing of mm/page_alloc.c: `setup_per_zone_lowmem_reserve()`,
//! `__setup_per_zone_wmarks()` with a Movable zone, and `gfp_zone()`'s
//! table (`GFP_ZONE_TABLE`, `GFP_ZONE_BAD`).

use crate::zones::{BadGfpZone, LOWMEM_RESERVE_RATIO, gfp_zone, setup_per_zone_lowmem_reserve, setup_per_zone_wmarks};
use mmlab_engine::mm::ZoneType;
use mmlab_engine::mm::gfp::Gfp;

/// DMA, DMA32 (empty on arm64 with RAM below 4 GiB), Normal, and a Movable
/// zone of 256 MiB (`movablecore=256M`).
const MANAGED: [u64; 4] = [780_000, 0, 250_000, 65_536];

/// `__setup_per_zone_wmarks()` with ZONE_MOVABLE managed: pages_min is
/// shared over the lowmem zones only (DMA and Normal keep the shares they
/// have without Movable); Movable's min is managed / 1024 clamped to
/// [SWAP_CLUSTER_MAX, 128], while its low/high/promo steps still come from
/// the share it would have had as lowmem, `pages_min × managed / lowmem`
/// (11,264 × 65,536 / 1,030,000 = 716, delta 716 / 4 = 179 > 65).
#[test]
fn setup_per_zone_wmarks_sizes_zone_movable_apart() {
    let w = setup_per_zone_wmarks(45_056, &MANAGED);
    assert_eq!(w[0], [8_530, 10_662, 12_794, 14_926]);
    assert_eq!(w[1], [0; 4]);
    assert_eq!(w[2], [2_733, 3_416, 4_099, 4_782]);
    // 65,536 / 1,024 = 64, inside the clamp.
    assert_eq!(w[3], [64, 243, 422, 601]);
    // 20,000 / 1,024 = 19 is raised to 32; 200,000 / 1,024 = 195 is cut to
    // 128 (deltas 218 / 4 = 54 and 2,187 / 4 = 546).
    let w = setup_per_zone_wmarks(45_056, &[780_000, 0, 250_000, 20_000]);
    assert_eq!(w[3], [32, 86, 140, 194]);
    let w = setup_per_zone_wmarks(45_056, &[780_000, 0, 250_000, 200_000]);
    assert_eq!(w[3], [128, 674, 1_220, 1_766]);
}

/// `setup_per_zone_lowmem_reserve()`: zone i keeps back from an allocation
/// that may use zone j the managed pages of zones i+1..=j over its ratio:
/// DMA (256) 250,000 / 256 = 976 against Normal and 315,536 / 256 = 1,232
/// against Movable; Normal (32) 65,536 / 32 = 2,048 against Movable; DMA32
/// has no managed pages and keeps nothing; Movable, the last zone, has
/// nothing above it. A ratio of 0 (the sysctl written 0) keeps nothing.
#[test]
fn lowmem_reserve_sums_the_zones_above_over_the_ratio() {
    let r = setup_per_zone_lowmem_reserve(&MANAGED, &LOWMEM_RESERVE_RATIO);
    assert_eq!(r, [[0, 0, 976, 1_232], [0; 4], [0, 0, 0, 2_048], [0; 4]]);
    let r = setup_per_zone_lowmem_reserve(&MANAGED, &[256, 256, 0, 0]);
    assert_eq!(r, [[0, 0, 976, 1_232], [0; 4], [0; 4], [0; 4]]);
    // DMA32 managed and every ratio 1: each row the running sum above it.
    let r = setup_per_zone_lowmem_reserve(&[1, 2, 4, 8], &[1, 1, 1, 1]);
    assert_eq!(r, [[0, 2, 6, 14], [0, 0, 4, 12], [0, 0, 0, 8], [0; 4]]);
}

/// `gfp_zone()` for all 16 combinations of the zone modifiers, ZONE_DMA and
/// ZONE_DMA32 built, no ZONE_HIGHMEM: `__GFP_HIGHMEM` alone means Normal,
/// with `__GFP_MOVABLE` Movable; `__GFP_MOVABLE` alone or with DMA or DMA32
/// changes nothing; two of DMA, DMA32, HIGHMEM are `GFP_ZONE_BAD`. The other
/// gfp bits play no part.
#[test]
fn gfp_zone_table_for_every_zone_modifier_combination() {
    use ZoneType::{Dma, Dma32, Movable, Normal};
    for i in 0..16u32 {
        let (dma, high, dma32, movable) = (i & 1 != 0, i & 2 != 0, i & 4 != 0, i & 8 != 0);
        let mut gfp = Gfp::GFP_KERNEL;
        for (on, bit) in [(dma, Gfp::__GFP_DMA), (high, Gfp::__GFP_HIGHMEM), (dma32, Gfp::__GFP_DMA32)] {
            if on {
                gfp |= bit;
            }
        }
        if movable {
            gfp |= Gfp::__GFP_MOVABLE;
        }
        let want = match (dma, high, dma32, movable) {
            (false, false, false, _) => Ok(Normal),
            (true, false, false, _) => Ok(Dma),
            (false, false, true, _) => Ok(Dma32),
            (false, true, false, false) => Ok(Normal),
            (false, true, false, true) => Ok(Movable),
            _ => Err(BadGfpZone(gfp.bits())),
        };
        assert_eq!(gfp_zone(gfp), want, "dma {dma} highmem {high} dma32 {dma32} movable {movable}");
    }
}

/// Where the kernel stops on `VM_BUG_ON()` for a `GFP_ZONE_BAD` mask, the
/// refusal says which mask, in hex, and why.
#[test]
fn bad_gfp_zone_names_the_mask() {
    let gfp = Gfp::__GFP_DMA32 | Gfp::__GFP_HIGHMEM | Gfp::__GFP_MOVABLE;
    let e = gfp_zone(gfp).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("gfp mask {:#x} combines zone modifiers no zone satisfies (GFP_ZONE_BAD)", gfp.bits())
    );
}
