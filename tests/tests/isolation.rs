//! Pageblock isolation and the free-page counters (mm/page_isolation.c,
//! mm/page_alloc.c `account_freepages()`, Linux 7.2): the free pages of an
//! isolated pageblock are in no counter. Isolating a block takes its free
//! pages out of `NR_FREE_PAGES` (and `NR_FREE_CMA_PAGES`,
//! `NR_FREE_PAGES_BLOCKS`), a page freed into it is not added, and
//! unisolating adds them all back (merging a whole free pageblock with its
//! free buddy). Every number below follows from those rules on a bare
//! machine whose blocks are free but for what the test allocates.

use mmlab_buddy::{IsolateError, PbIsolateMode, Zone};
use mmlab_engine::mm::{Migratetype, PAGEBLOCK_NR_PAGES};
use mmlab_engine::{Gfp, Pfn};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

const PB: u64 = PAGEBLOCK_NR_PAGES;

/// The free pages inside `[block, block + PB)` (free blocks the range
/// holds whole), from the checked free lists.
fn free_in(z: &Zone<'_>, block: Pfn) -> u64 {
    z.check_free_lists()
        .unwrap()
        .iter()
        .filter(|(p, _)| p.0 >= block.0 && p.0 < block.0 + PB)
        .map(|(_, o)| 1u64 << o)
        .sum()
}

/// The free block with head `pfn`, as its order, if there is one.
fn free_order_at(z: &Zone<'_>, pfn: Pfn) -> Option<u32> {
    z.check_free_lists().unwrap().iter().find(|(p, _)| *p == pfn).map(|&(_, o)| o)
}

/// A movable order-0 page taken out of a free order-10 block (the lower
/// pageblock's sixth frame), the pcp lists drained: its pageblock holds
/// 511 free pages and the upper one is one free order-9 block.
fn movable_page_in_a_free_order_10_block<'a, 'm>(
    pa: &'a PageAllocator<'m>,
    cpu: &mmlab_engine::Cpu<'m>,
) -> (&'a Zone<'m>, Pfn) {
    pa.drain_all_pages(cpu);
    let z = pa.zone();
    let (head, _) = z.check_free_lists().unwrap().into_iter().find(|&(_, o)| o == 10).expect("a free order-10 block");
    let p = head.add(5);
    z.alloc_contig_range(cpu, p, 1, Migratetype::Movable).unwrap();
    (z, p)
}

fn isolate(z: &Zone<'_>, cpu: &mmlab_engine::Cpu<'_>, block: Pfn, mode: PbIsolateMode) -> Result<(), IsolateError> {
    z.set_migratetype_isolate(cpu, block, mode, block, block.add(PB))
}

#[test]
fn a_page_freed_into_an_isolated_pageblock_is_in_no_free_count() {
    let m = mmlab_tests::bare_machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let (z, p) = movable_page_in_a_free_order_10_block(&pa, &cpu);
    let block = Pfn(p.0 & !(PB - 1));
    let (free, blocks) = (z.nr_free_pages(), z.nr_free_pages_blocks());
    // The rest of the block is free (the pcp refill came back on the drain).
    assert_eq!(free_in(z, block), PB - 1);

    // set_migratetype_isolate(): the block's 511 free pages move to the
    // ISOLATE lists and leave NR_FREE_PAGES (before the fix it stayed put:
    // move_to_free_list took them from Movable and added them to Isolate).
    isolate(z, &cpu, block, PbIsolateMode::Other).unwrap();
    assert_eq!(z.nr_isolate_pageblock(), 1);
    assert_eq!(z.pageblock_migratetype(block), Migratetype::Isolate);
    assert_eq!(z.pageblock_migratetype_unisolated(block), Migratetype::Movable);
    assert_eq!(z.nr_free_pages(), free - (PB as i64 - 1));
    assert_eq!(z.pageblock_counts()[Migratetype::Isolate as usize], 1);
    pa.check_invariants().unwrap();

    // __free_frozen_pages(): an isolated block's page bypasses the pcp and
    // merges on the ISOLATE lists into the whole pageblock, uncounted
    // (before the fix: one more free page).
    pa.free_pages(&cpu, p, 0).unwrap();
    assert_eq!(pa.nr_free_pages(), free - (PB as i64 - 1));
    assert_eq!(free_order_at(z, block), Some(9));
    assert_eq!(z.nr_free_pages_blocks(), blocks, "an isolated order-9 block is not in NR_FREE_PAGES_BLOCKS");
    assert_eq!(z.nr_free_per_type()[Migratetype::Isolate as usize][9], 1);
    pa.check_invariants().unwrap();

    // unset_migratetype_isolate(): the block is one free pageblock whose
    // buddy is free and not isolated, so it is taken off and freed again:
    // it merges to order 10 and all 512 pages count.
    let buddy = Pfn(block.0 ^ PB);
    assert_eq!(z.pageblock_migratetype(buddy), Migratetype::Movable);
    z.unset_migratetype_isolate(&cpu, block);
    assert_eq!(z.nr_isolate_pageblock(), 0);
    assert_eq!(z.pageblock_migratetype(block), Migratetype::Movable);
    assert_eq!(z.nr_free_pages(), free + 1);
    assert_eq!(free_order_at(z, Pfn(block.0 & !(2 * PB - 1))), Some(10));
    assert_eq!(z.nr_free_pages_blocks(), blocks + PB);
    pa.check_invariants().unwrap();
}

#[test]
fn a_page_on_a_pcp_list_drains_into_the_isolated_block_uncounted() {
    let m = mmlab_tests::bare_machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let (z, p) = movable_page_in_a_free_order_10_block(&pa, &cpu);
    let block = Pfn(p.0 & !(PB - 1));
    let free = z.nr_free_pages();
    // Freed while the block is Movable: it waits on the pcp list.
    pa.free_pages(&cpu, p, 0).unwrap();
    assert_eq!(z.nr_free_pages(), free);
    isolate(z, &cpu, block, PbIsolateMode::Other).unwrap();
    assert_eq!(z.nr_free_pages(), free - (PB as i64 - 1));
    // free_pcppages_bulk() reads the block's type as it frees: ISOLATE.
    pa.drain_all_pages(&cpu);
    assert_eq!(z.nr_free_pages(), free - (PB as i64 - 1));
    assert_eq!(free_order_at(z, block), Some(9));
    pa.check_invariants().unwrap();
    z.unset_migratetype_isolate(&cpu, block);
    assert_eq!(z.nr_free_pages(), free + 1);
    pa.check_invariants().unwrap();
}

#[test]
fn isolating_half_of_an_order_10_block_splits_it_and_unisolating_merges_it() {
    let m = mmlab_tests::bare_machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    pa.drain_all_pages(&cpu);
    let z = pa.zone();
    let (head, _) = z.check_free_lists().unwrap().into_iter().find(|&(_, o)| o == 10).expect("a free order-10 block");
    let upper = head.add(PB);
    let (free, blocks) = (z.nr_free_pages(), z.nr_free_pages_blocks());

    // The upper pageblock: the order-10 block is split (split_large_buddy),
    // the lower half back on Movable (counted), the upper on ISOLATE.
    isolate(z, &cpu, upper, PbIsolateMode::Other).unwrap();
    assert_eq!(z.nr_free_pages(), free - PB as i64);
    assert_eq!(z.nr_free_pages_blocks(), blocks - PB);
    assert_eq!((free_order_at(z, head), free_order_at(z, upper)), (Some(9), Some(9)));
    assert_eq!(z.pageblock_migratetype(head), Migratetype::Movable);
    pa.check_invariants().unwrap();

    // Isolating it again is refused and changes nothing.
    assert_eq!(isolate(z, &cpu, upper, PbIsolateMode::Other), Err(IsolateError::AlreadyIsolated { pfn: upper }));
    assert_eq!(z.nr_isolate_pageblock(), 1);

    // The lower one too: a plain move; the two isolated halves stay apart.
    isolate(z, &cpu, head, PbIsolateMode::Other).unwrap();
    assert_eq!(z.nr_free_pages(), free - 2 * PB as i64);
    assert_eq!(z.nr_isolate_pageblock(), 2);
    assert_eq!(z.nr_free_per_type()[Migratetype::Isolate as usize][9], 2);
    pa.check_invariants().unwrap();

    // Unisolate the lower: its buddy is isolated, so it is moved back and
    // counted, not merged.
    z.unset_migratetype_isolate(&cpu, head);
    assert_eq!(z.nr_free_pages(), free - PB as i64);
    assert_eq!(free_order_at(z, head), Some(9));
    pa.check_invariants().unwrap();

    // Unisolate the upper: its buddy is free and Movable, so it is freed
    // again and merges back into the order-10 block.
    z.unset_migratetype_isolate(&cpu, upper);
    assert_eq!(z.nr_free_pages(), free);
    assert_eq!(z.nr_free_pages_blocks(), blocks);
    assert_eq!(free_order_at(z, head), Some(10));
    assert_eq!(z.nr_isolate_pageblock(), 0);
    // Not isolated any more: unisolating again does nothing.
    z.unset_migratetype_isolate(&cpu, upper);
    assert_eq!(z.nr_free_pages(), free);
    pa.check_invariants().unwrap();
}

#[test]
fn an_unmovable_page_refuses_isolation_and_nothing_changes() {
    let m = mmlab_tests::bare_machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    pa.drain_all_pages(&cpu);
    let z = pa.page_zone(p);
    let block = Pfn(p.0 & !(PB - 1));
    let free = z.nr_free_pages();
    assert_eq!(isolate(z, &cpu, block, PbIsolateMode::Other), Err(IsolateError::Unmovable { pfn: p }));
    assert_eq!(z.nr_free_pages(), free);
    assert_eq!(z.nr_isolate_pageblock(), 0);
    assert_ne!(z.pageblock_migratetype(block), Migratetype::Isolate);
    // A frame of another zone, or none at all, is a typed error too.
    let beyond = z.zone_end_pfn().add(PB);
    assert_eq!(isolate(z, &cpu, beyond, PbIsolateMode::Other), Err(IsolateError::OutOfZone { pfn: beyond }));
    pa.free_pages(&cpu, p, 0).unwrap();
    pa.check_invariants().unwrap();
}

#[test]
fn an_isolated_cma_pageblock_leaves_nr_free_cma_pages_too() {
    // The real boot state's 64 MiB CMA area (see tests/cma.rs).
    let m = mmlab_tests::machine("1G", 1);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    pa.drain_all_pages(&cpu);
    let (start, _) = m.cma_area().unwrap();
    let z = pa.page_zone(start);
    let (free, cma) = (z.nr_free_pages(), z.nr_free_cma());
    assert_eq!(cma, 16_384);
    // has_unmovable_pages(): a CMA pageblock is isolated only for a CMA
    // allocation.
    assert_eq!(isolate(z, &cpu, start, PbIsolateMode::Other), Err(IsolateError::Unmovable { pfn: start }));
    isolate(z, &cpu, start, PbIsolateMode::CmaAlloc).unwrap();
    assert_eq!(z.nr_free_cma(), cma - PB as i64);
    assert_eq!(z.nr_free_pages(), free - PB as i64);
    assert_eq!(z.pageblock_migratetype_unisolated(start), Migratetype::Cma);
    pa.check_invariants().unwrap();
    // Back to MIGRATE_CMA, counted in both again.
    z.unset_migratetype_isolate(&cpu, start);
    assert_eq!(z.pageblock_migratetype(start), Migratetype::Cma);
    assert_eq!((z.nr_free_pages(), z.nr_free_cma()), (free, cma));
    pa.check_invariants().unwrap();
}
