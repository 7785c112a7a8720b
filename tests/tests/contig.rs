//! Contiguous ranges (`alloc_contig_pages`, `alloc_contig_range`,
//! `free_contig_range`) on a 256 MiB machine.
//!
//! The machine boots bare RAM (`boot.state=bare`) with the linear map off:
//! the subject is the buddy allocator's contiguous ranges on bare RAM, and
//! the free-block layout below is derived from memblock's top-down
//! placement of mmlab's own memmap, usemap and tables alone; the linear
//! map's 133 tables (1 PUD + 1 PMD + 128 PTE for 256 MiB of 4 KiB pages, and
//! the fixmap's 3) would come from memblock below swapper_pg_dir, end the
//! free range at 0x4fb77 instead of 0x4fbfc and change the small blocks at
//! its top (and every count below).
//!
//! 256 MiB = 65,536 frames, PFN 0x40000..0x50000. memblock allocates
//! top-down: the memmap (65,536 x 64 B = 4 MiB, 2 MiB aligned) takes
//! 0x4fc00..0x50000; the usemap (128 pageblocks -> 128 B) the last 128 bytes
//! below it, 0x4fbf_ff80, in frame 0x4fbff; swapper_pg_dir the page below
//! that, 0x4fbfe ((0x4fbf_ff80 - 4 KiB) rounded down to 4 KiB). 256 MiB is
//! two full 128 MiB sections, so vmemmap_populate maps each with one 2 MiB
//! PMD block and needs only a pud table (0x4fbfd) and a pmd table (0x4fbfc),
//! no pte table. Reserved: 1,024 + 1 + 3 = 1,028, so managed = 65,536 -
//! 1,028 = 64,508 = 62 x 1,024 + 1,020: the free range [0x40000, 0x4fbfc)
//! gives 62 order-10 blocks from 0x40000 and one block of each order 9..2
//! above them (0x4f800 o9, ..., 0x4fbf8 o2); none at orders 1 and 0.

use mmlab_buddy::ContigError;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Gfp, Machine, MachineConfig, Migratetype, Pfn};
use mmlab_pcp::{AllocatorConfig, FreeError, PageAllocator};

const BOOT_BUDDYINFO: [u64; 11] = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 62];

/// The module comment's machine: bare RAM, no linear map.
fn boot() -> Machine {
    let cfg = MachineConfig { linear_map: false, ..MachineConfig::with("256M", 2).expect("256M").bare() };
    mmlab_tests::boot(cfg).expect("the 256M machine boots")
}

#[test]
fn boot_state() {
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    assert_eq!(pa.managed_pages(), 64_508);
    assert_eq!(pa.zone().nr_free_per_order(), BOOT_BUDDYINFO);
}

#[test]
fn alloc_and_free_32m() {
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let alloc0 = m.vm_events().pgalloc();
    // 8,192 pages = 32 MiB, a power of two: naturally aligned, the first
    // free candidate is the zone start 0x40000 (0x40000 % 0x2000 == 0).
    let start = pa.alloc_contig_pages(&cpu, 8_192, Gfp::GFP_HIGHUSER_MOVABLE).unwrap();
    assert_eq!(start, Pfn(0x40000));
    assert_eq!(start.0 % 8_192, 0);
    for i in 0..8_192 {
        let p = m.page(start.add(i));
        assert_eq!(p.refcount(), 1, "pfn {}", start.add(i));
        assert_eq!(p.ext(), PageExt::Alloc(0, Migratetype::Movable));
        assert!(!p.is_buddy());
    }
    // Exactly 8 order-10 blocks left the free lists.
    let mut want = BOOT_BUDDYINFO;
    want[10] -= 8;
    assert_eq!(pa.zone().nr_free_per_order(), want);
    assert_eq!(pa.nr_free_pages(), 64_508 - 8_192);
    assert_eq!(m.vm_events().pgalloc() - alloc0, 8_192);
    pa.check_invariants().unwrap();

    // A second one comes right after it.
    let second = pa.alloc_contig_pages(&cpu, 8_192, Gfp::GFP_HIGHUSER_MOVABLE).unwrap();
    assert_eq!(second, Pfn(0x42000));

    // A bad range is refused before anything is freed: 0x44000 (one past the
    // second range) is the head of a free order-10 block.
    assert_eq!(pa.free_contig_range(&cpu, second, 8_193), Err(FreeError::DoubleFree { pfn: Pfn(0x44000) }));
    assert_eq!(m.page(second).refcount(), 1);
    assert_eq!(pa.nr_free_pages(), 64_508 - 16_384);

    pa.free_contig_range(&cpu, second, 8_192).unwrap();
    pa.free_contig_range(&cpu, start, 8_192).unwrap();
    // Order-0 frees go through the pcp; after a drain all of it merges back.
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.zone().nr_free_per_order(), BOOT_BUDDYINFO);
    assert_eq!(pa.nr_free_pages(), 64_508);
    pa.check_invariants().unwrap();
}

#[test]
fn busy_range_is_refused_and_unchanged() {
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    // Order 10 is not pcp-cacheable: the buddy's order-10 list head, 0x40000.
    let q = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
    assert_eq!(q, Pfn(0x40000));
    // Keep only page 700 (0x402bc) of it.
    pa.split_page(q, 10).unwrap();
    let busy = q.add(700);
    for i in (0..1024).filter(|&i| i != 700) {
        pa.free_pages(&cpu, q.add(i), 0).unwrap();
    }
    pa.drain_all_pages(&cpu);
    // 1,023 free pages around 0x402bc: 0x40000 o9, 0x40200 o7, 0x40280 o5,
    // 0x402a0 o4, 0x402b0 o3, 0x402b8 o2, 0x402bd o0, 0x402be o1,
    // 0x402c0 o6, 0x40300 o8 -> one more block at each order 0..9.
    let mut want = BOOT_BUDDYINFO;
    for w in want.iter_mut().take(10) {
        *w += 1;
    }
    want[10] -= 1;
    assert_eq!(pa.zone().nr_free_per_order(), want);
    pa.check_invariants().unwrap();

    let before = (pa.zone().nr_free_per_order(), pa.nr_free_pages(), pa.pcp_pages());
    for (start, nr) in [(q, 1024), (q, 8192), (Pfn(0x402b8), 8), (busy, 1)] {
        assert_eq!(
            pa.alloc_contig_range(&cpu, start, nr, Gfp::GFP_HIGHUSER_MOVABLE),
            Err(ContigError::Busy { pfn: busy }),
            "range {start}+{nr}"
        );
        assert_eq!((pa.zone().nr_free_per_order(), pa.nr_free_pages(), pa.pcp_pages()), before);
        assert_eq!(m.page(busy).ext(), PageExt::Alloc(0, Migratetype::Movable));
        assert_eq!(m.page(busy).refcount(), 1);
        pa.check_invariants().unwrap();
    }
    // Out of the zone / empty.
    let end = Pfn(0x50000);
    assert_eq!(
        pa.alloc_contig_range(&cpu, Pfn(0x4ffff), 2, Gfp::GFP_HIGHUSER_MOVABLE),
        Err(ContigError::OutOfRange { start: Pfn(0x4ffff), nr_pages: 2 })
    );
    assert_eq!(
        pa.alloc_contig_range(&cpu, end, 1, Gfp::GFP_HIGHUSER_MOVABLE),
        Err(ContigError::OutOfRange { start: end, nr_pages: 1 })
    );
    assert_eq!(
        pa.alloc_contig_range(&cpu, q, 0, Gfp::GFP_HIGHUSER_MOVABLE),
        Err(ContigError::OutOfRange { start: q, nr_pages: 0 })
    );
    // Reserved frames (the memmap, the vmemmap's tables) are never free:
    // [0x4fbf8, 0x4fc00) starts with the free order-2 block 0x4fbf8 and
    // runs into the pmd table page 0x4fbfc.
    assert_eq!(
        pa.alloc_contig_range(&cpu, Pfn(0x4fc00), 4, Gfp::GFP_HIGHUSER_MOVABLE),
        Err(ContigError::Busy { pfn: Pfn(0x4fc00) })
    );
    assert_eq!(
        pa.alloc_contig_range(&cpu, Pfn(0x4fbf8), 8, Gfp::GFP_HIGHUSER_MOVABLE),
        Err(ContigError::Busy { pfn: Pfn(0x4fbfc) })
    );
    assert_eq!(
        pa.alloc_contig_pages(&cpu, 1 << 20, Gfp::GFP_HIGHUSER_MOVABLE),
        Err(ContigError::NoRange { nr_pages: 1 << 20 })
    );
    assert_eq!((pa.zone().nr_free_per_order(), pa.nr_free_pages()), (before.0, before.1));

    // alloc_contig_pages skips the busy 32 MiB window: next aligned is 0x42000.
    let r = pa.alloc_contig_pages(&cpu, 8_192, Gfp::GFP_HIGHUSER_MOVABLE).unwrap();
    assert_eq!(r, Pfn(0x42000));
    pa.free_contig_range(&cpu, r, 8_192).unwrap();

    // The free part right after the busy page: [0x402bd, 0x40400) is exactly
    // the blocks 0x402bd o0, 0x402be o1, 0x402c0 o6, 0x40300 o8 (323 pages):
    // nothing to give back.
    let after = Pfn(0x402bd);
    pa.alloc_contig_range(&cpu, after, 323, Gfp::GFP_HIGHUSER_MOVABLE).unwrap();
    let mut w = want;
    for o in [0, 1, 6, 8] {
        w[o] -= 1;
    }
    assert_eq!(pa.zone().nr_free_per_order(), w);
    // An unaligned range inside a block: [0x40010, 0x40020) from the o9 block
    // at 0x40000 gives back 0x40000 o4 and 0x40020 o5, o6, o7, o8.
    pa.alloc_contig_range(&cpu, Pfn(0x40010), 16, Gfp::GFP_HIGHUSER_MOVABLE).unwrap();
    let mut w2 = w;
    w2[9] -= 1;
    for o in [4, 5, 6, 7, 8] {
        w2[o] += 1;
    }
    assert_eq!(pa.zone().nr_free_per_order(), w2);
    pa.check_invariants().unwrap();
    pa.free_contig_range(&cpu, Pfn(0x40010), 16).unwrap();
    pa.free_contig_range(&cpu, after, 323).unwrap();
    pa.free_pages(&cpu, busy, 0).unwrap();
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.zone().nr_free_per_order(), BOOT_BUDDYINFO);
    pa.check_invariants().unwrap();
}
