//! RAM in banks with a hole between them (a device tree memory node with two
//! `reg` entries), deferred struct page init, and the checks on `--mem`.
//!
//! - Each bank is a memblock memory region; the linear map covers the banks
//!   and not the hole; the first and last page of each bank walk and
//!   translate to the right PA through the MMU.
//! - Sections with no RAM have no struct pages (`pfn_valid()` false); the
//!   page allocator gets every free page of both banks and none of the hole.
//! - Deferred struct page init: struct pages beyond the first section are
//!   written at first touch, and read exactly as those of a machine that
//!   initialised all of them at boot.

use mmlab_engine::arch::arm64::memory::VaLayout;
use mmlab_engine::arch::arm64::mmu::{LinearMapVariant, Rodata};
use mmlab_engine::arch::arm64::pgtable::{self, Level, mmu};
use mmlab_engine::machine::BootError;
use mmlab_engine::mm::ZoneType;
use mmlab_engine::mm::banks::{MemBank, MemError};
use mmlab_engine::mm::page::StructPage;
use mmlab_engine::{Gfp, Machine, MachineConfig, PAGE_SIZE, Pfn, PhysAddr};
use mmlab_harness::stack::StackError;
use mmlab_pcp::{AllocatorConfig, PageAllocator};

const TWO_BANKS: &str = "64M,32M@0x100000000";

fn boot(mem: &str, linear_map: bool, variant: LinearMapVariant) -> Machine {
    let cfg = MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        linear_map,
        linear_map_variant: variant,
        rodata: Rodata::On,
        ..MachineConfig::with(mem, 2).expect("syntax")
    };
    mmlab_tests::boot(cfg).expect("boots")
}

#[test]
fn two_banks_are_two_memblock_regions_and_the_linear_map_skips_the_hole() {
    for v in LinearMapVariant::ALL {
        let m = boot(TWO_BANKS, true, v);
        let banks = m.config().banks();
        assert_eq!(banks, [MemBank { base: 0x4000_0000, size: 64 << 20 }, MemBank { base: 1 << 32, size: 32 << 20 }]);
        let regions: Vec<(u64, u64)> = m.memblock().memory().iter().map(|r| (r.base.0, r.end())).collect();
        assert_eq!(regions, [(0x4000_0000, 0x4400_0000), (1 << 32, (1 << 32) + (32 << 20))]);
        let r = m.linear_map_report().unwrap();
        assert_eq!(r.regions, regions, "{}", v.name());
        // 48 PTE tables (32 + 16), one PMD table per bank (different GiB),
        // one PUD table (both below 512 GiB).
        assert_eq!((r.counts.pgtable_pte, r.counts.pgtable_pmd, r.counts.pgtable_pud), (48, 2, 1));
        assert_eq!(r.counts.pte_leaves, (96 << 20) / PAGE_SIZE);
        let cpu = m.cpu(0).unwrap();
        let k = m.kernel_as();
        for b in &banks {
            for pa in [b.base, b.end() - PAGE_SIZE] {
                let va = VaLayout::VA48.phys_to_virt(pa) + 0x28;
                let leaf = pgtable::walk(&m, &k, va).leaf.unwrap_or_else(|| panic!("{va:#x} unmapped"));
                assert_eq!((leaf.pa.0, leaf.level), (pa + 0x28, Level::Pte));
                mmu::write_u64(&cpu, &k, va, pa ^ 0x5a5a).unwrap();
                assert_eq!(m.arena().word(PhysAddr(pa + 0x28)).load(std::sync::atomic::Ordering::Relaxed), pa ^ 0x5a5a);
                assert_eq!(mmu::read_u64(&cpu, &k, va).unwrap(), pa ^ 0x5a5a);
            }
        }
        // The hole is not mapped: just past bank 0, just below bank 1.
        for pa in [0x4400_0000, (1u64 << 32) - PAGE_SIZE] {
            assert!(pgtable::walk(&m, &k, VaLayout::VA48.phys_to_virt(pa)).leaf.is_none(), "{pa:#x}");
            assert!(mmu::read_u64(&cpu, &k, VaLayout::VA48.phys_to_virt(pa)).is_err());
        }
    }
}

#[test]
fn the_hole_has_no_struct_pages_and_no_page_is_lost() {
    let m = boot(TWO_BANKS, false, LinearMapVariant::Base);
    let mem = m.memmap();
    // Bank 0 fills half of its section: the other half has struct pages,
    // reserved (init_unavailable_range); the sections after it have none.
    assert!(mem.pfn_valid(Pfn(0x43fff)));
    assert!(mem.pfn_valid(Pfn(0x44000)));
    assert!(m.page(Pfn(0x44000)).test_flag(mmlab_engine::mm::page::pg::PG_RESERVED));
    assert!(!mem.pfn_valid(Pfn(0x48000)));
    assert!(!mem.pfn_valid(Pfn(0xfffff)));
    assert!(mem.pfn_valid(Pfn(0x100000)));
    assert!(mem.pfn_valid(Pfn(0x101fff)));
    assert!(!mem.pfn_valid(Pfn(0x102000)));
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    // Bank 0 is DMA, spanning [1 GiB, 4 GiB) around the hole; bank 1 is
    // Normal, [4 GiB, 4 GiB + 32 MiB).
    let (dma, normal) = (pa.zone_of(ZoneType::Dma), pa.zone_of(ZoneType::Normal));
    assert_eq!(dma.present_pages(), (64 << 20) / PAGE_SIZE);
    assert_eq!(normal.present_pages(), (32 << 20) / PAGE_SIZE);
    assert_eq!(dma.spanned_pages(), ((1u64 << 32) - 0x4000_0000) / PAGE_SIZE);
    assert_eq!(normal.spanned_pages(), (32 << 20) / PAGE_SIZE);
    assert_eq!(pa.zonelist(), [ZoneType::Normal, ZoneType::Dma]);
    // pagetypeinfo counts the pageblocks that have struct pages: bank 0's
    // section (64 pageblocks, half of them reserved) and bank 1's 16, not
    // the hole.
    let blocks = |z: &mmlab_buddy::Zone<'_>| z.pageblock_counts().iter().sum::<u64>();
    assert_eq!((blocks(dma), blocks(normal)), (64, 16));
    let reserved = m.memblock().reserved_pages();
    assert_eq!(pa.managed_pages() + reserved, (96 << 20) / PAGE_SIZE);
    // Every page the allocator hands out lies in a bank; freeing them all
    // gives every page back.
    let cpu = m.cpu(0).unwrap();
    let mut got = Vec::new();
    while let Some(p) = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 3) {
        let (s, e) = (p.phys().0, p.add(8).phys().0);
        assert!(m.config().banks().iter().any(|b| s >= b.base && e <= b.end()), "{p} in the hole");
        got.push(p);
    }
    assert!(got.iter().any(|p| p.0 >= 0x100000) && got.iter().any(|p| p.0 < 0x44000));
    for p in got {
        pa.free_pages(&cpu, p, 3).unwrap();
    }
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.nr_free_pages() as u64, pa.managed_pages());
    pa.check_invariants().unwrap();
}

#[test]
fn deferred_struct_pages_read_as_if_initialised_at_boot() {
    let with = |deferred: bool| {
        let cfg = MachineConfig { deferred_struct_page_init: deferred, ..MachineConfig::with("512M", 2).unwrap() };
        mmlab_tests::boot(cfg).unwrap()
    };
    let (lazy, eager) = (with(true), with(false));
    let mem = lazy.memmap();
    // defer_init(): one section (128 MiB) from the start of the zone.
    assert_eq!(mem.first_deferred_pfn(), Pfn(0x48000));
    assert_eq!(eager.memmap().first_deferred_pfn(), Pfn(u64::MAX));
    let c = mem.deferred_init_counts();
    assert_eq!(c.early, 0x8000 / 64);
    assert_eq!(c.present, 0x20000 / 64);
    // Only the reserved memory's vmemmap pages were touched above it:
    // memmap_init() marks every memblock-reserved frame PG_reserved
    // (reserve_bootmem_region()), and a vmemmap page (4 KiB / 64 B = 64
    // struct pages) is initialised whole at its first touch. Above 0x48000
    // the real boot's reservations are the initrd 0x48000..0x480fc (252
    // pages: 4 vmemmap pages), the DTB 0x48200..0x48300 (4), the swiotlb
    // buffer 0x5b540..0x5b5c0 (512 MiB / 1,024 = 512 KiB: 2), the inode
    // hash 0x5b5c0..0x5b600 (1), the memmap 0x5b600..0x5be00 (8 MiB: 32),
    // CMA 0x5be00..0x5fe00 (64 MiB: 256) and the boot's other allocations
    // packed below the linear map's 258 tables (256 PTE + 1 PMD + 1 PUD for
    // 512 MiB of pages) at the top, 0x5fe01..0x60000 (8): 307.
    let touched: std::collections::BTreeSet<u64> = lazy
        .memblock()
        .reserved()
        .iter()
        .flat_map(|r| (r.base.0 / PAGE_SIZE)..r.end().div_ceil(PAGE_SIZE))
        .filter(|&pfn| pfn >= 0x48000)
        .map(|pfn| pfn / (PAGE_SIZE / 64))
        .collect();
    assert_eq!(c.deferred, touched.len() as u64, "{c:?}");
    assert_eq!(c.deferred, 307, "{c:?}");
    let (pl, pe) = (
        PageAllocator::boot(&lazy, AllocatorConfig::default()).unwrap(),
        PageAllocator::boot(&eager, AllocatorConfig::default()).unwrap(),
    );
    // Freeing into the buddy writes the block heads only.
    let after_free = mem.deferred_init_counts().deferred;
    assert!(after_free < c.present / 4, "{after_free}");
    let untouched = (0x48000..0x60000).map(Pfn).find(|&p| !mem.initialised(p)).expect("an untouched page");
    // Every struct page reads the same, bit for bit (the first read
    // initialises the lazy one's).
    for pfn in (0x40000..0x60000).map(Pfn) {
        assert_eq!(lazy.page(pfn).raw(), eager.page(pfn).raw(), "{pfn}");
    }
    assert!(mem.initialised(untouched));
    assert_eq!(lazy.page(untouched).refcount(), 0);
    assert_eq!(pl.managed_pages(), pe.managed_pages());
    pl.check_invariants().unwrap();
}

/// The memmap's in-place fast path takes a zero `lru.next` for a struct
/// page not yet initialised; one that reads 0 after its initialisation
/// goes the checked way and is neither moved nor initialised again.
#[test]
fn a_zero_lru_next_does_not_reinitialise_its_vmemmap_page() {
    let m = mmlab_tests::boot(MachineConfig::with("512M", 2).unwrap()).unwrap();
    let mem = m.memmap();
    let pfn = (0x48000..0x60000).map(Pfn).find(|&p| !mem.initialised(p)).expect("an untouched page");
    let before = mem.deferred_init_counts().deferred;
    let p = m.page(pfn) as *const _;
    assert!(mem.initialised(pfn));
    assert_eq!(mem.deferred_init_counts().deferred, before + 1);
    let neighbour = m.page(pfn.add(1));
    neighbour.set_private(7);
    m.page(pfn).set_lru_next(0);
    assert_eq!(m.page(pfn) as *const _, p);
    assert_eq!(m.page(pfn).lru_next(), 0);
    assert_eq!(neighbour.private(), 7, "its vmemmap page was initialised again");
    assert_eq!(mem.deferred_init_counts().deferred, before + 1);
}

/// `page_slices` walks a run of frames one vmemmap page at a time: the
/// same struct pages as `page` one by one, cut at vmemmap-page boundaries,
/// with untouched vmemmap pages initialised on the way.
#[test]
fn page_slices_are_the_struct_pages_of_a_run() {
    let m = mmlab_tests::boot(MachineConfig::with("512M", 2).unwrap()).unwrap();
    let _pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let mem = m.memmap();
    // A run in the deferred range, starting 10 struct pages before a
    // vmemmap-page boundary and covering two more vmemmap pages.
    let start = (0x48000..0x60000)
        .map(Pfn)
        .find(|&p| p.0 % 64 == 54 && [0, 10, 74].iter().all(|&k| !mem.initialised(p.add(k))))
        .unwrap();
    let slices: Vec<&[StructPage]> = mem.page_slices(start, 10 + 64 + 6).collect();
    assert_eq!(slices.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![10, 64, 6]);
    for (i, p) in slices.iter().flat_map(|s| s.iter()).enumerate() {
        let one = m.page(start.add(i as u64));
        assert!(std::ptr::eq(p, one), "struct page {i}");
        assert_eq!(p.raw(), one.raw());
        assert_eq!(p.refcount(), 0, "initialised as a free page, as __free_pages_core() leaves it");
    }
    assert!(mem.initialised(start) && mem.initialised(start.add(79)));
    assert_eq!(mem.page_slices(start, 0).count(), 0);
}

#[test]
fn bad_memory_is_a_typed_error_at_boot() {
    let boot = |banks: Vec<MemBank>| {
        let mem_bytes = banks.iter().map(|b| b.size).sum();
        mmlab_tests::boot(MachineConfig { mem_bytes, mem_banks: banks, ..Default::default() })
    };
    let b = |base: u64, size: u64| MemBank { base, size };
    let err = |r: Result<Machine, StackError>| match r {
        Err(StackError::Boot(BootError::Mem(e))) => e,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("booted"),
    };
    assert_eq!(
        err(boot(vec![b(0x4000_0000, 64 << 20), b(1 << 32, (1 << 20) + 1)])),
        MemError::NotPageAligned { base: 1 << 32, size: (1 << 20) + 1 }
    );
    assert!(matches!(err(boot(vec![b(0x4000_0000, 64 << 20), b(0x4100_0000, 1 << 20)])), MemError::Overlap { .. }));
    assert!(matches!(
        err(boot(vec![b(0x4000_0000, 64 << 20), b(0x8000_4000_0000, 1 << 20)])),
        MemError::BeyondLinearMap { .. }
    ));
    assert!(matches!(err(boot(vec![b(0x4000_0000, 1 << 20)])), MemError::Total(_)));
    // mem_bytes must agree with the banks.
    let cfg = MachineConfig { mem_bytes: 1 << 30, mem_banks: vec![b(0x4000_0000, 64 << 20)], ..Default::default() };
    assert!(matches!(mmlab_tests::boot(cfg), Err(StackError::Boot(BootError::Config(_)))));
    // A page multiple that is not a pageblock multiple boots.
    let m = boot(vec![b(0x4000_0000, (64 << 20) + PAGE_SIZE)]).unwrap();
    assert!(m.memmap().pfn_valid(Pfn(0x44000)));
    assert!(!m.memmap().pfn_valid(Pfn(0x44001)));
}
