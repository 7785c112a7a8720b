//! pcp batch / high_min / high_max and the zone watermarks, recomputed here
//! from managed pages with the kernel's formulas (reference sections 2.3,
//! 2.4 and 4), for several machine sizes and CPU counts.
//!
//! Managed pages by hand (`Machine::boot`, memblock top-down): RAM of N
//! frames loses
//! - the memmap: N x 64 B = N / 64 frames, 2 MiB aligned at the top of RAM;
//! - the usemap: N / 512 pageblocks, one byte each, 64 B aligned, just below
//!   the memmap (or, on 64M, where the 1 MiB memmap leaves the top 1 MiB
//!   free, in the last frame of RAM): one frame, two on 16G (8,192 B from
//!   a 2 MiB boundary down);
//! - swapper_pg_dir: the page below the usemap's (lowest) frame (the rest of
//!   the usemap's frame is less than a page);
//! - the fixmap's five tables, the next pages down (`early_fixmap_init()`:
//!   bm_pud, bm_pmd and a bm_pte for each of the three PMDs 7.2's slots
//!   span; pages of the kernel image on a real boot, from memblock here,
//!   where bare RAM has no image);
//! - the linear map's tables, the next pages down (`map_mem()`, built by
//!   default: 7.2's rodata=on with no BBML2_NOABORT CPU forces page
//!   mappings, `force_pte_mapping()`): one pte table per 2 MiB of RAM, one
//!   pmd table per 1 GiB (RAM starts at PHYS_OFFSET, 1 GiB aligned) and one
//!   pud table (the linear map is one pgd entry): N / 512 + N / 262,144
//!   (rounded up) + 1;
//! - the vmemmap's tables, one page each, the next pages down: a pud and a
//!   pmd table (the memmap starts at VMEMMAP_START, 1 GiB aligned, and is at
//!   most 256 MiB here, so one pmd table of 512 x 2 MiB covers it; the
//!   vmemmap, the linear map and the fixmap are three different pgd
//!   entries, so none shares another's pud), plus a pte table if the last
//!   128 MiB section is partial.
//!   Only 64M (16,384 < 32,768 frames) has a partial section; 1G, 4G and 16G
//!   are 8, 32 and 128 full sections, each mapped with one 2 MiB PMD block.
//!
//! memmap - usemap - swapper_pg_dir - fixmap - linear map - vmemmap:
//! - 64M:  16,384 - 256 - 1 - 1 - 5 - (32 + 1 + 1) - 3 = 16,084
//! - 1G:   262,144 - 4,096 - 1 - 1 - 5 - (512 + 1 + 1) - 2 = 257,525
//! - 4G:   1,048,576 - 16,384 - 1 - 1 - 5 - (2,048 + 4 + 1) - 2 = 1,030,130
//! - 16G:  4,194,304 - 65,536 - 2 - 1 - 5 - (8,192 + 16 + 1) - 2 = 4,120,549
//!
//! (Before the linear map was built by default, the fixmap and linear-map
//! tables were not taken: 16,123, 258,044, 1,032,188 and 4,128,763.)

use mmlab_buddy::calculate_min_free_kbytes;
use mmlab_engine::mm::ZoneType;
use mmlab_engine::{Gfp, MachineConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator, SysctlError, zone_batchsize, zone_highsize};

fn int_sqrt(x: u64) -> u64 {
    // Plain bisection: independent of the allocator's int_sqrt.
    let (mut lo, mut hi) = (0u64, 1u64 << 32);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if mid * mid <= x { lo = mid } else { hi = mid }
    }
    lo
}

fn rounddown_pow2(x: u64) -> u64 {
    let mut p = 1;
    while p * 2 <= x {
        p *= 2;
    }
    p
}

/// The kernel's mult_frac(x, n, d).
fn mult_frac(x: u64, n: u64, d: u64) -> u64 {
    (x / d) * n + (x % d) * n / d
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Expected {
    min_free_kbytes: u64,
    min: u64,
    low: u64,
    high: u64,
    batch: i32,
    high_min: i32,
    high_max: i32,
}

/// The zones DMA, DMA32, Normal, Movable.
const ZONES: [ZoneType; 4] = [ZoneType::Dma, ZoneType::Dma32, ZoneType::Normal, ZoneType::Movable];

/// Every populated zone's expected values from the managed pages of each
/// zone, with THP (khugepaged's raise) or without.
fn expected_zones(managed: [u64; 4], ncpus: u64, thp: bool) -> [Option<Expected>; 4] {
    // nr_free_buffer_pages() with the watermarks still 0: managed pages of
    // the zones up to Normal.
    let lowmem: u64 = managed[..3].iter().sum();
    // calculate_min_free_kbytes: clamp(int_sqrt(lowmem_kbytes * 16), 128, 262144)
    let base = int_sqrt(lowmem * 4 * 16).clamp(128, 262_144);
    // __setup_per_zone_wmarks: pages_min shared out by managed pages.
    let wmarks = |mfk: u64, i: usize| {
        let tmp = (mfk >> 2) * managed[i] / lowmem;
        let delta = (tmp >> 2).max(mult_frac(managed[i], 10, 10_000));
        (tmp, tmp + delta, tmp + 2 * delta)
    };
    let mfk = if thp {
        // set_recommended_min_free_kbytes: 512 × zones × (2 + 3 × 3) pages,
        // at most 5 % of nr_free_buffer_pages() above the high marks.
        let nfbp: u64 = (0..3).map(|i| managed[i].saturating_sub(wmarks(base, i).2)).sum();
        let nr_zones = managed[..3].iter().filter(|&&m| m > 0).count() as u64;
        base.max((512 * nr_zones * 11).min(nfbp / 20) * 4)
    } else {
        base
    };
    std::array::from_fn(|i| {
        if managed[i] == 0 || i == 3 {
            return None;
        }
        let (min, low, high) = wmarks(mfk, i);
        // zone_batchsize
        let b = (managed[i] >> 12).min(64);
        let batch = if b <= 1 { 1 } else { rounddown_pow2(b + b / 2) - 1 };
        // zone_highsize with fraction 0 (low) and 8 (managed / 8)
        let high_min = (low / ncpus).max(4 * batch);
        let high_max = (managed[i] / 8 / ncpus).max(4 * batch);
        Some(Expected {
            min_free_kbytes: mfk,
            min,
            low,
            high,
            batch: batch as i32,
            high_min: high_min as i32,
            high_max: high_max as i32,
        })
    })
}

/// One zone holding everything, without THP (the reference's examples).
fn expected(managed: u64, ncpus: u64) -> Expected {
    expected_zones([managed, 0, 0, 0], ncpus, false)[0].unwrap()
}

fn observed(pa: &PageAllocator<'_>, zt: ZoneType, ncpus: usize) -> Expected {
    let z = pa.zone_of(zt);
    let ps = pa.pageset_of(zt, 0).unwrap();
    // Every CPU gets the same values (pageset_update).
    for c in 1..ncpus {
        let o = pa.pageset_of(zt, c).unwrap();
        assert_eq!((o.batch, o.high_min, o.high_max), (ps.batch, ps.high_min, ps.high_max), "cpu {c}");
    }
    assert!(pa.pageset_of(zt, ncpus).is_none());
    Expected {
        min_free_kbytes: pa.min_free_kbytes(),
        min: z.min_wmark_pages(),
        low: z.low_wmark_pages(),
        high: z.high_wmark_pages(),
        batch: ps.batch,
        high_min: ps.high_min,
        high_max: ps.high_max,
    }
}

fn check(mem: &str, ncpus: usize, managed_by_hand: [u64; 4]) -> [Option<Expected>; 4] {
    let m = mmlab_tests::boot(MachineConfig::with(mem, ncpus).unwrap().bare()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let managed = pa.node().managed();
    assert_eq!(managed, managed_by_hand, "{mem}: managed pages per zone");
    let want = expected_zones(managed, ncpus as u64, true);
    for (i, zt) in ZONES.into_iter().enumerate() {
        let Some(w) = want[i] else { continue };
        let got = observed(&pa, zt, ncpus);
        assert_eq!(got, w, "{mem} with {ncpus} CPUs, zone {zt:?}");
        assert_eq!(zone_batchsize(managed[i]), w.batch);
        // pcp->high is 0 until the CPU first uses its pcp (lazy clamp).
        for c in 0..ncpus {
            let ps = pa.pageset_of(zt, c).unwrap();
            assert_eq!((ps.high, ps.count), (0, 0), "{mem}/{ncpus} cpu {c}: boot pageset");
        }
    }
    // The square-root value is the pure function's.
    assert_eq!(
        calculate_min_free_kbytes(managed[..3].iter().sum()),
        expected_zones(managed, ncpus as u64, false).iter().flatten().next().unwrap().min_free_kbytes
    );
    // percpu_pagelist_high_fraction = 8: tuning off, both bounds are
    // max(managed / 8 / ncpus, 4 * batch).
    pa.set_percpu_pagelist_high_fraction(8).unwrap();
    for (i, zt) in ZONES.into_iter().enumerate() {
        let Some(w) = want[i] else { continue };
        let f8 = observed(&pa, zt, ncpus);
        assert_eq!((f8.high_min, f8.high_max, f8.batch), (w.high_max, w.high_max, w.batch));
    }
    // Back to 0 restores the auto-tuned bounds.
    pa.set_percpu_pagelist_high_fraction(0).unwrap();
    for (i, zt) in ZONES.into_iter().enumerate() {
        if let Some(w) = want[i] {
            assert_eq!(observed(&pa, zt, ncpus), w);
        }
    }
    // transparent_hugepage=never: the square-root value alone.
    let m = mmlab_tests::boot(MachineConfig::with(mem, ncpus).unwrap().bare()).unwrap();
    let mut cfg = AllocatorConfig::default();
    cfg.set("transparent_hugepage", "never").unwrap();
    let pa = PageAllocator::boot(&m, cfg).unwrap();
    let never = expected_zones(managed, ncpus as u64, false);
    for (i, zt) in ZONES.into_iter().enumerate() {
        if let Some(w) = never[i] {
            assert_eq!(observed(&pa, zt, ncpus), w, "{mem}/{ncpus} THP never, zone {zt:?}");
        }
    }
    want
}

#[test]
fn sizing_64m() {
    for ncpus in [1, 2, 4] {
        let e = check("64M", ncpus, [16_084, 0, 0, 0])[0].unwrap();
        // b = 16,084 >> 12 = 3 -> rounddown_pow2(3 + 1) - 1 = 3; 4 * batch = 12.
        assert_eq!(e.batch, 3);
    }
}

#[test]
fn sizing_1g() {
    for ncpus in [1, 2, 4] {
        let e = check("1G", ncpus, [257_525, 0, 0, 0])[0].unwrap();
        // b = min(257,525 >> 12 = 62, 64) = 62 -> 93 -> 64 -> 63.
        assert_eq!(e.batch, 63);
        // One populated zone: 512 × 11 pages = 22,528 kB, as the real 1G kernel.
        assert_eq!(e.min_free_kbytes, 22_528);
    }
}

#[test]
fn sizing_4g() {
    // DMA is [1 GiB, 4 GiB), all free; the memmap and the early tables are
    // at the top of RAM, in Normal: 262,144 - 18,446 (16,384 memmap, 1
    // usemap, 1 swapper_pg_dir, 5 fixmap, 2,053 linear map, 2 vmemmap) =
    // 243,698.
    for ncpus in [1, 2, 4] {
        let e = check("4G", ncpus, [786_432, 0, 243_698, 0]);
        assert_eq!(e[0].unwrap().min_free_kbytes, 45_056);
    }
}

#[test]
fn sizing_16g() {
    for ncpus in [1, 4] {
        // Normal: 3,407,872 - 73,755 (65,536 memmap, 2 usemap, 1
        // swapper_pg_dir, 5 fixmap, 8,209 linear map, 2 vmemmap) = 3,334,117.
        check("16G", ncpus, [786_432, 0, 3_334_117, 0]);
    }
}

#[test]
fn sizing_4g_2cpus_literal() {
    let m = mmlab_tests::boot(MachineConfig::with("4G", 2).unwrap().bare()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let (dma, z) = (pa.zone_of(ZoneType::Dma), pa.zone());
    assert_eq!(z.zone_type(), ZoneType::Normal, "GFP_KERNEL prefers Normal");
    // DMA [1 GiB, 4 GiB): 786,432 pages, all free. Normal [4 GiB, 5 GiB):
    // 262,144 - 16,384 (memmap) - 1 (usemap) - 1 (swapper_pg_dir) - 5
    // (fixmap) - 2,053 (the linear map's 2,048 pte, 4 pmd and 1 pud tables)
    // - 2 (the vmemmap's pud and pmd) = 243,698. Together 1,030,130.
    assert_eq!((dma.managed_pages(), z.managed_pages()), (786_432, 243_698));
    // lowmem_kbytes = 4,120,520; x 16 = 65,928,320; int_sqrt = 8,119; then
    // khugepaged: two populated zones, 512 × 2 × 11 = 11,264 pages
    // (45,056 kB), below 5 % of nr_free_buffer_pages (1,026,044 / 20 =
    // 51,302).
    assert_eq!(pa.min_free_kbytes(), 45_056);
    // min: 11,264 pages shared by managed pages: DMA 11,264 × 786,432 /
    // 1,030,130 = 8,599; Normal 11,264 × 243,698 / 1,030,130 = 2,664.
    assert_eq!((dma.min_wmark_pages(), z.min_wmark_pages()), (8_599, 2_664));
    // delta: DMA max(8,599 >> 2 = 2,149, 786) = 2,149; Normal max(666,
    // mult_frac(243,698, 10, 10,000) = 243) = 666.
    assert_eq!((dma.low_wmark_pages(), dma.high_wmark_pages()), (10_748, 12_897));
    assert_eq!((z.low_wmark_pages(), z.high_wmark_pages()), (3_330, 3_996));
    // protection: DMA keeps Normal's 243,698 / 256 = 951 pages from
    // allocations that may use Normal (the real kernel: 944 of 241,854).
    assert_eq!(dma.lowmem_reserve(), [0, 0, 951, 951]);
    assert_eq!(z.lowmem_reserve(), [0; 4]);
    let ps = pa.pageset(0).unwrap();
    // batch: min(243,698 >> 12 = 59, 64) = 59 -> 88 -> 64 -> 63.
    assert_eq!(ps.batch, 63);
    // high_min = max(3,330 / 2 = 1,665, 252) = 1,665.
    assert_eq!(ps.high_min, 1_665);
    // high_max = max(243,698 / 8 = 30,462; / 2 = 15,231, 252) = 15,231.
    assert_eq!(ps.high_max, 15_231);
    assert_eq!(ps.high, 0);
    // DMA's pagesets: high_min 10,748 / 2 = 5,374; high_max 786,432 / 16 = 49,152.
    let d = pa.pageset_of(ZoneType::Dma, 1).unwrap();
    assert_eq!((d.batch, d.high_min, d.high_max), (63, 5_374, 49_152));

    // First use of the pcp: nr_pcp_alloc clamps high to high_min (1,665)
    // and raises it by the refill size batch << 0 = 63 -> 1,728.
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert_eq!(pa.page_zone(p).zone_type(), ZoneType::Normal);
    let ps = pa.pageset(0).unwrap();
    assert_eq!(ps.high, 1_728);
    assert_eq!(ps.count, 62);
    assert_eq!(pa.pageset(1).unwrap().high, 0, "the other CPU's pcp is untouched");
    assert_eq!(pa.pageset_of(ZoneType::Dma, 0).unwrap().high, 0, "DMA's pcp is untouched");
    pa.free_pages(&cpu, p, 0).unwrap();

    // Fraction 8: high_min = high_max = max(30,462 / 2, 252) = 15,231.
    pa.set_percpu_pagelist_high_fraction(8).unwrap();
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.high_min, ps.high_max, ps.batch), (15_231, 15_231, 63));
    // Fraction 16: 243,698 / 16 = 15,231; / 2 = 7,615.
    pa.set_percpu_pagelist_high_fraction(16).unwrap();
    let ps = pa.pageset(1).unwrap();
    assert_eq!((ps.high_min, ps.high_max), (7_615, 7_615));

    // 3 is below MIN_PERCPU_PAGELIST_HIGH_FRACTION (8): refused, unchanged.
    assert_eq!(pa.set_percpu_pagelist_high_fraction(3), Err(SysctlError::HighFraction(3)));
    assert_eq!(pa.percpu_pagelist_high_fraction(), 16);
    let ps = pa.pageset(1).unwrap();
    assert_eq!((ps.high_min, ps.high_max), (7_615, 7_615));
    assert_eq!(pa.set_percpu_pagelist_high_fraction(7), Err(SysctlError::HighFraction(7)));
    pa.set_percpu_pagelist_high_fraction(0).unwrap();
    let ps = pa.pageset(1).unwrap();
    assert_eq!((ps.high_min, ps.high_max), (1_665, 15_231));
}

#[test]
fn min_free_kbytes_above_int_max_is_refused() {
    let m = mmlab_tests::boot(MachineConfig::with("1G", 2).unwrap().bare()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let before: Vec<u64> = (0..4).map(|i| pa.zone().watermark_raw(i)).collect();
    let max = mmlab_pcp::MIN_FREE_KBYTES_MAX;
    for v in [max + 1, 1 << 40, u64::MAX] {
        assert_eq!(pa.set_min_free_kbytes(v), Err(SysctlError::MinFreeKbytes(v)));
        let now: Vec<u64> = (0..4).map(|i| pa.zone().watermark_raw(i)).collect();
        assert_eq!(now, before, "a refused write leaves the watermarks alone");
    }
    // INT_MAX itself is accepted: min above every managed page, no overflow.
    pa.set_min_free_kbytes(max).unwrap();
    assert_eq!(pa.zone().watermark_raw(0), max >> 2);
    pa.check_invariants().unwrap();
}

#[test]
fn fraction_at_boot() {
    let m = mmlab_tests::boot(MachineConfig::with("1G", 2).unwrap().bare()).unwrap();
    // Rejected at boot as well.
    let cfg = AllocatorConfig { percpu_pagelist_high_fraction: 3, ..Default::default() };
    assert_eq!(PageAllocator::boot(&m, cfg).unwrap_err(), SysctlError::HighFraction(3));
    let cfg = AllocatorConfig { min_free_kbytes: Some(u64::MAX), ..Default::default() };
    assert_eq!(PageAllocator::boot(&m, cfg).unwrap_err(), SysctlError::MinFreeKbytes(u64::MAX));
    // 1G, fraction 8, 2 CPUs: 257,525 / 8 = 32,190; / 2 = 16,095 (> 4 * 63).
    let cfg = AllocatorConfig { percpu_pagelist_high_fraction: 8, ..Default::default() };
    let pa = PageAllocator::boot(&m, cfg).unwrap();
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.batch, ps.high_min, ps.high_max), (63, 16_095, 16_095));
}

#[test]
fn reference_worked_example() {
    // 6,000,000 managed pages, 2 CPUs (reference section 2.4).
    // batch: min(6,000,000 >> 12 = 1,464, 64) = 64 -> 96 -> 64 -> 63.
    assert_eq!(zone_batchsize(6_000_000), 63);
    // min_free_kbytes = int_sqrt(24,000,000 x 16 = 384,000,000) = 19,595.
    assert_eq!(calculate_min_free_kbytes(6_000_000), 19_595);
    // min 4,898; delta max(1,224, 6,000) = 6,000; low 10,898.
    let e = expected(6_000_000, 2);
    assert_eq!((e.min, e.low, e.high), (4_898, 10_898, 16_898));
    // high_min = max(10,898 / 2, 252) = 5,449; high_max = max(750,000 / 2, 252) = 375,000.
    assert_eq!(zone_highsize(6_000_000, 10_898, 63, 2, 0, 2, 0), 5_449);
    assert_eq!(zone_highsize(6_000_000, 10_898, 63, 2, 0, 2, 8), 375_000);
    assert_eq!((e.high_min, e.high_max), (5_449, 375_000));
    // The 4 * batch floor (64M's zone without THP: managed 16,084, low
    // 253 + 63 = 316, batch 3; 316 / 64 CPUs = 4 < 12).
    assert_eq!(zone_highsize(16_084, 316, 3, 64, 0, 64, 0), 12);
    // Tiny zones: batch 1.
    assert_eq!(zone_batchsize(8_191), 1); // b = 1
    assert_eq!(zone_batchsize(8_192), 1); // b = 2 -> 3 -> 2 -> 1
    assert_eq!(zone_batchsize(12_288), 3); // b = 3 -> 4 -> 4 -> 3
    // The clamp of min_free_kbytes.
    assert_eq!(calculate_min_free_kbytes(1), 128);
    assert_eq!(calculate_min_free_kbytes(1 << 32), 262_144);
}

#[test]
fn transparent_hugepage_always_raises_min_free_kbytes_as_khugepaged() {
    let boot = |mem: &str| {
        let m = mmlab_tests::boot(MachineConfig::with(mem, 2).unwrap().bare()).unwrap();
        let mut cfg = AllocatorConfig::default();
        cfg.set("transparent_hugepage", "always").unwrap();
        let pa = PageAllocator::boot(&m, cfg).unwrap();
        (pa.min_free_kbytes(), pa.zone().min_wmark_pages(), pa.managed_pages())
    };
    // 4 GiB at 1 GiB: DMA and Normal are populated, so khugepaged asks for
    // 512 × 2 × (2 + 3 × 3) = 11,264 pages = 45,056 kB, what the real arm64
    // 7.2 kernel reports for this machine (far below 5 % of the lowmem).
    // Normal's share of the min is 11,264 × 243,698 / 1,030,130 = 2,664.
    let (k, min, _) = boot("4G");
    assert_eq!((k, min), (45_056, 2_664));
    // 64 MiB is one DMA zone of 16,084 pages: 512 × 11 = 5,632 pages is
    // capped at 5 % of nr_free_buffer_pages(): int_sqrt(16,084 × 64) = 1,014
    // kB gives high = 253 + 2 × 63 = 379, (16,084 − 379) / 20 = 785 pages.
    let (k, min, managed) = boot("64M");
    assert_eq!(managed, 16_084);
    assert_eq!((k, min), (785 * 4, 785));
}
