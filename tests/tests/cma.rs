//! The CMA area of the emulated boot (`boot.state=real`): 64 MiB that
//! memblock reserved below the DMA limit, freed at `cma_init_reserved_areas()`
//! as MIGRATE_CMA pageblocks; only movable allocations (`ALLOC_CMA`) may
//! take them, and they take them first once CMA holds more than half of the
//! zone's free pages (`__rmqueue`).

use mmlab_engine::mm::{Migratetype, ZoneType};
use mmlab_engine::{Gfp, Machine};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

fn in_cma(m: &Machine, pfn: mmlab_engine::Pfn) -> bool {
    let (start, nr) = m.cma_area().unwrap();
    pfn.0 >= start.0 && pfn.0 < start.0 + nr
}

#[test]
fn the_area_is_cma_pageblocks_counted_as_the_kernel_counts_them() {
    let m = mmlab_tests::machine("4G", 2);
    let (start, nr) = m.cma_area().expect("the real boot state declares a CMA area");
    // "cma: Reserved 64 MiB at 0x00000000fc000000" at 4 GiB.
    assert_eq!((start.phys().0, nr), (0xfc00_0000, 16_384));
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let dma = pa.zone_of(ZoneType::Dma);
    assert_eq!(dma.cma_pages(), 16_384);
    assert_eq!(pa.zone_of(ZoneType::Normal).cma_pages(), 0);
    assert_eq!(dma.pageblock_counts()[Migratetype::Cma as usize], 32);
    // The blocks went through CPU 0's pcp (init_cma_reserved_pageblock
    // frees with __free_pages): free CMA pages count only what reached the
    // buddy lists; all of it after a drain.
    let cpu = m.cpu(0).unwrap();
    pa.drain_all_pages(&cpu);
    assert_eq!(dma.nr_free_cma(), 16_384);
    let zi = mmlab_pcp::vmstat::zoneinfo_with(&pa, &[], &|z| vec![("nr_free_cma", z.nr_free_cma() as u64)]);
    assert!(zi.contains("        cma      16384\n"), "{zi}");
    assert!(zi.contains("      nr_free_cma  16384\n"), "{zi}");
    pa.check_invariants().unwrap();
}

#[test]
fn only_movable_allocations_use_cma_and_first_when_it_is_over_half_of_free() {
    let m = mmlab_tests::machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    pa.drain_all_pages(&cpu);
    let z = pa.zone();
    let cma = z.nr_free_cma();
    assert_eq!(cma, 16_384);
    // Unmovable order-3 blocks until the zone fails: none comes from CMA,
    // and what is left free at the end is (nearly) all CMA.
    let mut unmovable = Vec::new();
    while let Some(p) = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 3) {
        assert!(!in_cma(&m, p), "an unmovable allocation took CMA pfn {p}");
        unmovable.push(p);
    }
    assert_eq!(z.nr_free_cma(), cma, "CMA untouched by unmovable allocations");
    assert!(z.nr_free_cma() > z.nr_free_pages() / 2);
    // Now a movable allocation goes to CMA first (over half of free).
    let p = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert!(in_cma(&m, p));
    pa.free_pages(&cpu, p, 0).unwrap();
    for p in unmovable {
        pa.free_pages(&cpu, p, 3).unwrap();
    }
    pa.drain_all_pages(&cpu);
    assert_eq!(z.nr_free_cma(), cma);
    // With CMA a small part of free memory, movable pages come from the
    // movable lists.
    let p = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert!(!in_cma(&m, p));
    pa.free_pages(&cpu, p, 0).unwrap();
    pa.check_invariants().unwrap();
}

/// `gfp_zone()` and the zonelist: on 4 GiB, GFP_KERNEL is served from
/// Normal while it passes its watermark, GFP_DMA and GFP_DMA32 only from
/// DMA; when Normal is exhausted GFP_KERNEL falls back to DMA, which keeps
/// its lowmem reserve (944 pages) from it.
#[test]
fn each_gfp_zone_is_served_from_its_zones() {
    let m = mmlab_tests::machine("4G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let zone_of = |p| pa.page_zone(p).zone_type();
    let k = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(zone_of(k), ZoneType::Normal);
    let d = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_DMA, 0).unwrap();
    assert_eq!(zone_of(d), ZoneType::Dma);
    let d32 = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_DMA32, 0).unwrap();
    assert_eq!(zone_of(d32), ZoneType::Dma, "DMA32 is empty: its zonelist starts at DMA");
    let ev = m.vm_events();
    assert_eq!((ev.pgalloc_normal > 0, ev.pgalloc_dma > 0), (true, true));
    // Exhaust Normal with order-9 blocks: the next GFP_KERNEL blocks come
    // from DMA.
    let mut normal = Vec::new();
    let mut fell_back = None;
    while let Some(p) = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL | Gfp::__GFP_NOWARN, 9) {
        if zone_of(p) == ZoneType::Dma {
            fell_back = Some(p);
            break;
        }
        normal.push(p);
    }
    let p = fell_back.expect("GFP_KERNEL falls back to DMA");
    let n = pa.zone_of(ZoneType::Normal);
    assert!(n.nr_free_pages() < (n.low_wmark_pages() + 512) as i64, "Normal was below its mark");
    // setup_per_zone_lowmem_reserve(): DMA keeps Normal's managed pages /
    // sysctl_lowmem_reserve_ratio[ZONE_DMA] (256) from it. Normal is [4 GiB,
    // 5 GiB), 262,144 pages, less what memblock placed top-down in it: the
    // linear map's 2,053 tables (2,048 PTE + 4 PMD + 1 PUD for 4 GiB of 4 KiB
    // pages), the memmap's 16,384 pages (1,048,576 struct pages x 64 B), the
    // dentry and inode hash tables (4 and 2 MiB: 1,024 + 512), swiotlb's slot
    // array (64 MiB / 2 KiB = 32,768 slots x 24 B: 192) and 88 pages of
    // smaller ones packed together (one CPU: the first percpu chunk's 36
    // pages and its arrays, 37; the vmemmap's PUD and PMD tables, 2; the
    // mem_section roots' 128 KiB and one root page, the usemap, NODE_DATA's
    // 14 KiB, the unflattened device tree's 44,492 bytes and the command
    // line, 49): 262,144 - 20,253 = 241,891 managed, and 241,891 / 256 = 944.
    assert_eq!(n.managed_pages(), 241_891);
    assert_eq!(pa.zone_of(ZoneType::Dma).lowmem_reserve()[ZoneType::Normal as usize], 241_891 / 256);
    pa.free_pages(&cpu, p, 9).unwrap();
    for p in normal {
        pa.free_pages(&cpu, p, 9).unwrap();
    }
    for p in [k, d, d32] {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    pa.check_invariants().unwrap();
}

/// `cma_alloc()`: the lowest free aligned range of the area, taken without
/// `pgalloc`; the rest of its pageblock freed again (`pgfree`), straight to
/// the buddy lists (the pageblock was isolated); `cma_alloc_success` counted;
/// `cma_release()` gives it back. On the 1 GiB machine, the atomic DMA pool's
/// 32 pages leave 480 pages of `pgfree` and 16,352 free CMA pages, as the
/// real boot's vmstat shows.
#[test]
fn cma_alloc_takes_the_first_aligned_range_without_pgalloc() {
    use mmlab_pcp::CmaError;
    let m = mmlab_tests::machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    pa.drain_all_pages(&cpu);
    let (base, nr) = m.cma_area().unwrap();
    let dma = pa.zone_of(ZoneType::Dma);
    let before = m.vm_events();
    let first = pa.cma_alloc(&cpu, 32, 5).unwrap();
    assert_eq!(first, base);
    let after = m.vm_events();
    assert_eq!(after.pgalloc(), before.pgalloc());
    assert_eq!(after.pgfree - before.pgfree, 512 - 32);
    assert_eq!(after.cma_alloc_success - before.cma_alloc_success, 1);
    assert_eq!(dma.nr_free_cma() as u64, nr - 32);
    assert_eq!(pa.cma_allocated_pages(), 32);
    // The next one: aligned to 2^7 pages, after the first.
    let second = pa.cma_alloc(&cpu, 128, 7).unwrap();
    assert_eq!(second, base.add(128));
    for p in [first, second.add(127)] {
        assert!(in_cma(&m, p));
        pa.check_allocated(p).unwrap();
    }
    assert_eq!(pa.cma_release(&cpu, second, 128), Ok(()));
    assert_eq!(pa.cma_release(&cpu, second, 128), Err(CmaError::NotAllocated { pfn: second, count: 128 }));
    assert_eq!(pa.cma_alloc(&cpu, 0, 0), Err(CmaError::BadCount { count: 0 }));
    assert_eq!(pa.cma_alloc(&cpu, nr, 0), Err(CmaError::NoRange { count: nr }));
    assert_eq!(m.vm_events().cma_alloc_fail, 1);
    pa.check_invariants().unwrap();
    let bare = mmlab_tests::bare_machine("1G", 1);
    let pb = PageAllocator::boot(&bare, AllocatorConfig::default()).unwrap();
    assert_eq!(pb.cma_alloc(&bare.cpu(0).unwrap(), 1, 0), Err(CmaError::NoArea));
}
