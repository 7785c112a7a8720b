//! `free_pcppages_bulk()`, `drain_pages_zone()`, `decay_pcp_high()`,
//! `free_frozen_page_commit()` and `__rmqueue_pcplist()` on hand-stocked
//! pcp lists of CPU 1.

use super::{allocator, machine, set};
use crate::page_alloc::PageAllocator;
use crate::pageset::{PCPF_FREE_HIGH_BATCH, PCPF_PREV_FREE_HIGH_ORDER, order_to_pindex};
use crate::{AllocatorConfig, KernelRules};
use mmlab_buddy::{AllocFlags, ZoneFlag};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Cpu, Gfp, Machine, Migratetype, Pfn};

use Migratetype::{Movable, Unmovable};

/// Take `n` blocks of `order` from the buddy lists and put them on CPU
/// `cpu`'s pcp list for (`list_mt`, `order`), each at the head, as a free
/// to the pcp does. Returns them in the order added.
fn stock(pa: &PageAllocator<'_>, cpu: &Cpu<'_>, n: usize, order: u32, list_mt: Migratetype) -> Vec<u64> {
    let zi = pa.zonelist()[0] as usize;
    let z = pa.zone_at(zi);
    let mem = pa.m.memmap();
    let mut pcp = pa.pcp_of(zi, cpu.id()).lock();
    let mut v = Vec::new();
    for _ in 0..n {
        let pfn = z.lock(cpu).rmqueue_smallest(order, Movable).unwrap();
        let p = mem.page(pfn);
        p.set_ext(PageExt::Pcp(order as u8));
        pcp.lists.add_page(mem, order_to_pindex(list_mt, order), pfn, p);
        pcp.count += 1 << order;
        v.push(pfn.0);
    }
    v
}

/// The blocks on CPU `cpu`'s pcp list `pindex`, head first, and its count.
fn pcp_list(pa: &PageAllocator<'_>, cpu: usize, pindex: usize) -> (Vec<u64>, i32) {
    let zi = pa.zonelist()[0] as usize;
    let pcp = pa.pcp_of(zi, cpu).lock();
    let l = pcp.lists.walk(pa.m.memmap(), pindex).unwrap().into_iter().map(|p| p.0).collect();
    (l, pcp.count)
}

fn ev(m: &Machine, e: VmEvent) -> u64 {
    m.vm_events().get(e)
}

/// Drain CPU 1's lists so that they start empty.
fn fresh<'m>(m: &'m Machine, pa: &PageAllocator<'m>) -> Cpu<'m> {
    let cpu1 = m.cpu(1).unwrap();
    pa.drain_local_pages(&cpu1);
    assert_eq!(pa.pageset(1).unwrap().count, 0);
    cpu1
}

/// `free_pcppages_bulk()`: `count` pages (at most what the pcp holds),
/// round-robin over the lists from `pindex`, each list from its tail
/// (oldest first); a block of order 1 counts 2 pages and may overshoot.
#[test]
fn free_pcppages_bulk_round_robin_from_the_tail() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let zi = pa.zonelist()[0] as usize;
    let z = pa.zone_at(zi);
    let a = stock(&pa, &cpu1, 3, 0, Movable);
    let b = stock(&pa, &cpu1, 1, 1, Unmovable);
    let (drains, pages) = (ev(&m, VmEvent::PcpDrain), ev(&m, VmEvent::PcpDrainPages));
    {
        let mut pcp = pa.pcp_of(zi, 1).lock();
        pa.free_pcppages_bulk(&cpu1, z, &mut pcp, 0, 1);
        pa.free_pcppages_bulk(&cpu1, z, &mut pcp, 2, 1);
    }
    // Nothing for 0; then the two oldest of list 1 (Movable, order 0).
    assert_eq!(pcp_list(&pa, 1, 1), (vec![a[2]], 3));
    assert_eq!((ev(&m, VmEvent::PcpDrain), ev(&m, VmEvent::PcpDrainPages)), (drains + 1, pages + 2));
    {
        let mut pcp = pa.pcp_of(zi, 1).lock();
        // From list 3 (Unmovable, order 1): one block, 2 pages for 1 asked.
        pa.free_pcppages_bulk(&cpu1, z, &mut pcp, 1, 3);
    }
    assert_eq!(pcp_list(&pa, 1, 3), (vec![], 1));
    assert_eq!(pcp_list(&pa, 1, 1).0, vec![a[2]]);
    assert!(m.page(Pfn(b[0])).ext() != PageExt::Pcp(1));
    {
        let mut pcp = pa.pcp_of(zi, 1).lock();
        // From the last list the search wraps round to list 1; more than
        // the pcp holds is what it holds.
        pa.free_pcppages_bulk(&cpu1, z, &mut pcp, 10, 13);
    }
    assert_eq!(pcp_list(&pa, 1, 1), (vec![], 0));
    assert_eq!(ev(&m, VmEvent::PcpDrainPages), pages + 2 + 2 + 1);
    pa.check_invariants().unwrap();
}

/// `drain_pages_zone()`: rounds of at most batch << CONFIG_PCP_BATCH_SCALE_MAX
/// pages until the lists are empty; with `drain_pages_zone_batch`, rounds
/// of batch.
#[test]
fn drain_pages_zone_rounds() {
    for (batched, rounds) in [(false, 3), (true, 67)] {
        let m = machine();
        let cfg = AllocatorConfig { drain_pages_zone_batch: batched, ..AllocatorConfig::default() };
        let pa = PageAllocator::boot(&m, cfg).unwrap();
        let cpu1 = fresh(&m, &pa);
        assert_eq!(pa.pageset(1).unwrap().batch, 3);
        stock(&pa, &cpu1, 200, 0, Movable);
        let drains = ev(&m, VmEvent::PcpDrain);
        pa.drain_local_pages(&cpu1);
        // 96 + 96 + 8, or 66 × 3 + 2.
        assert_eq!(ev(&m, VmEvent::PcpDrain), drains + rounds, "batched {batched}");
        assert_eq!(pa.pageset(1).unwrap().count, 0);
        // drain_all_pages() empties the other CPUs too.
        stock(&pa, &cpu1, 5, 0, Movable);
        let cpu0 = m.cpu(0).unwrap();
        let all = ev(&m, VmEvent::DrainAllPages);
        pa.drain_all_pages(&cpu0);
        assert_eq!(ev(&m, VmEvent::DrainAllPages), all + 1);
        assert_eq!((pa.pageset(0).unwrap().count, pa.pageset(1).unwrap().count), (0, 0));
        pa.check_invariants().unwrap();
    }
}

/// `decay_pcp_high()`: high = max(count − batch << 5, high − high / 8,
/// high_min), then what is above high drained in chunks of batch; more to
/// do while high is above high_min or something was drained.
#[test]
fn decay_pcp_high_lowers_high_by_an_eighth_and_drains_in_batches() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let zi = pa.zonelist()[0] as usize;
    stock(&pa, &cpu1, 900, 0, Movable);
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 2_000, 3, 900, 0, 0));
    let drains = ev(&m, VmEvent::PcpDrain);
    assert!(pa.decay_pcp_high(&cpu1));
    let p = pa.pageset(1).unwrap();
    // max(900 − 96, 1,000 − 125, 100) = 875: 25 pages in 9 chunks.
    assert_eq!((p.high, p.count), (875, 875));
    assert_eq!(ev(&m, VmEvent::PcpDrain), drains + 9);
    assert_eq!(ev(&m, VmEvent::PcpDecayDrain), 1);
    // count − batch << 5 decides when the list is long: 875 → 779.
    {
        let mut pcp = pa.pcp_of(zi, 1).lock();
        pcp.high = 5_000;
    }
    assert!(pa.decay_pcp_high(&cpu1));
    assert_eq!(pa.pageset(1).unwrap().high, 4_375);
    // At high_min with nothing above it: nothing to do.
    {
        let mut pcp = pa.pcp_of(zi, 1).lock();
        pcp.high = 100;
        pcp.high_min = 100;
    }
    pa.drain_local_pages(&cpu1);
    assert!(!pa.decay_pcp_high(&cpu1));
    assert_eq!(ev(&m, VmEvent::PcpDecayDrain), 1);
    // One above high_min: lowered to high_min (101 − 101 / 8 = 89 is
    // below it), and then nothing is left to do.
    {
        let mut pcp = pa.pcp_of(zi, 1).lock();
        pcp.high = 101;
    }
    assert!(!pa.decay_pcp_high(&cpu1));
    assert_eq!(pa.pageset(1).unwrap().high, 100);
    pa.check_invariants().unwrap();
}

/// `free_frozen_page_commit()`: each free halves alloc_factor, counts
/// PGFREE, adds 2^order to free_count while it is below batch << 5, and
/// remembers whether it was of order 1..=3 (`PCPF_PREV_FREE_HIGH_ORDER`).
#[test]
fn free_frozen_page_commit_bookkeeping() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let cpu0 = m.cpu(0).unwrap();
    let zi = pa.zonelist()[0] as usize;
    let two = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 1).unwrap();
    let one = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 0).unwrap();
    let big = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 2).unwrap();
    // A high that no free here reaches.
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 1_000, 1_000, 3, 0, 0, 4));
    let pgfree = ev(&m, VmEvent::Pgfree);
    pa.free_pages(&cpu1, two, 1).unwrap();
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.count, p.free_count, p.alloc_factor), (2, 2, 2));
    assert_eq!(ev(&m, VmEvent::Pgfree), pgfree + 2);
    assert_ne!(pa.pcp_of(zi, 1).lock().flags & PCPF_PREV_FREE_HIGH_ORDER, 0);
    pa.free_pages(&cpu1, one, 0).unwrap();
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.count, p.free_count, p.alloc_factor), (3, 3, 1));
    assert_eq!(pa.pcp_of(zi, 1).lock().flags & PCPF_PREV_FREE_HIGH_ORDER, 0);
    // free_count stops growing at batch << 5 = 96.
    pa.pcp_of(zi, 1).lock().free_count = 96;
    pa.free_pages(&cpu1, big, 2).unwrap();
    assert_eq!(pa.pageset(1).unwrap().free_count, 96);
    pa.pcp_of(zi, 1).lock().free_count = 95;
    let one = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 0).unwrap();
    pa.free_pages(&cpu1, one, 0).unwrap();
    assert_eq!(pa.pageset(1).unwrap().free_count, 96);
    pa.check_invariants().unwrap();
}

/// `free_frozen_page_commit()`'s free_high: an order 1..=3 free after
/// another one, with free_count at least the rule's threshold (7.2:
/// batch plus high_min / 2), and, with `PCPF_FREE_HIGH_BATCH`, at least a
/// batch on the lists, drains min(count, batch << 5) pages at once.
#[test]
fn free_high_drains_after_consecutive_high_order_frees() {
    let m = machine();
    let pa = allocator(&m);
    assert_eq!(pa.rules(), KernelRules::Linux7_2);
    let cpu1 = fresh(&m, &pa);
    let cpu0 = m.cpu(0).unwrap();
    let zi = pa.zonelist()[0] as usize;
    let blocks: Vec<Pfn> = (0..5).map(|_| pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 1).unwrap()).collect();
    // Threshold 3 + 100 / 2 = 53; free_count 53, high far away.
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 1_000, 3, 0, 53, 0));
    pa.pcp_of(zi, 1).lock().flags &= !PCPF_FREE_HIGH_BATCH;
    // The first order-1 free only sets PCPF_PREV_FREE_HIGH_ORDER.
    pa.free_pages(&cpu1, blocks[0], 1).unwrap();
    assert_eq!(ev(&m, VmEvent::PcpFreeHigh), 0);
    assert_eq!(pa.pageset(1).unwrap().count, 2);
    // The second: free_high; everything (4 pages ≤ 96) drained, high
    // lowered by batch << 5 down to high_min.
    pa.free_pages(&cpu1, blocks[1], 1).unwrap();
    assert_eq!(ev(&m, VmEvent::PcpFreeHigh), 1);
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.count, p.high), (0, 1_000 - 96));
    // Below the threshold: no free_high.
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 1_000, 3, 0, 52, 0));
    pa.free_pages(&cpu1, blocks[2], 1).unwrap();
    assert_eq!(ev(&m, VmEvent::PcpFreeHigh), 1);
    // With PCPF_FREE_HIGH_BATCH it also needs count ≥ batch: 2 + 2 = 4 ≥ 3.
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 1_000, 3, 2, 53, 0));
    pa.pcp_of(zi, 1).lock().flags |= PCPF_FREE_HIGH_BATCH;
    pa.free_pages(&cpu1, blocks[3], 1).unwrap();
    assert_eq!(ev(&m, VmEvent::PcpFreeHigh), 2);
    // ... and with 0 + 2 < 3 on the lists, none.
    pa.drain_local_pages(&cpu1);
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 1_000, 3, 0, 53, 0));
    pa.pcp_of(zi, 1).lock().flags |= PCPF_FREE_HIGH_BATCH | PCPF_PREV_FREE_HIGH_ORDER;
    pa.free_pages(&cpu1, blocks[4], 1).unwrap();
    assert_eq!(ev(&m, VmEvent::PcpFreeHigh), 2);
    assert_eq!(pa.pageset(1).unwrap().count, 2);
    pa.check_invariants().unwrap();
}

/// `free_frozen_page_commit()`: a free that brings count to high drains
/// `nr_pcp_free()` pages in chunks of batch (7.2) or at once (6.12).
#[test]
fn a_free_at_high_drains_in_batches() {
    for (rules, chunks) in [(KernelRules::Linux7_2, 2), (KernelRules::Linux6_12, 1)] {
        let m = machine();
        let pa = PageAllocator::boot(&m, AllocatorConfig { rules, ..AllocatorConfig::default() }).unwrap();
        let cpu1 = fresh(&m, &pa);
        let cpu0 = m.cpu(0).unwrap();
        let zi = pa.zonelist()[0] as usize;
        stock(&pa, &cpu1, 9, 0, Movable);
        let one = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 0).unwrap();
        // high_min == high_max == 10, free_count 5: clamp(6, 3, 7) = 6.
        set(&mut pa.pcp_of(zi, 1).lock(), (10, 10, 10, 3, 9, 5, 0));
        let drains = ev(&m, VmEvent::PcpDrain);
        pa.free_pages(&cpu1, one, 0).unwrap();
        let p = pa.pageset(1).unwrap();
        assert_eq!(p.count, 10 - 6, "{rules}");
        assert_eq!(ev(&m, VmEvent::PcpDrain), drains + chunks, "{rules}");
        // One below high: no drain.
        let one = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 0).unwrap();
        set(&mut pa.pcp_of(zi, 1).lock(), (10, 10, 10, 3, 4, 5, 0));
        pa.free_pages(&cpu1, one, 0).unwrap();
        assert_eq!(pa.pageset(1).unwrap().count, 5);
        pa.check_invariants().unwrap();
    }
}

/// `__rmqueue_pcplist()` / `rmqueue_pcplist()`: an empty list is refilled
/// with `nr_pcp_alloc()` blocks at its tail (`rmqueue_bulk`), the head
/// is taken; each take halves free_count; `ALLOC_HIGHATOMIC` never refills.
#[test]
fn rmqueue_pcplist_refills_and_takes_the_head() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let zi = pa.zonelist()[0] as usize;
    set(&mut pa.pcp_of(zi, 1).lock(), (12, 12, 12, 3, 0, 8, 0));
    assert_eq!(pa.rmqueue_pcplist(&cpu1, zi, 0, Movable, AllocFlags::HIGHATOMIC), None);
    let (refills, refill_pages) = (ev(&m, VmEvent::PcpRefill), ev(&m, VmEvent::PcpRefillPages));
    let got = pa.rmqueue_pcplist(&cpu1, zi, 0, Movable, AllocFlags::default()).unwrap();
    // nr_pcp_alloc: 3 blocks, the first taken, 2 left.
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.count, p.free_count), (2, 2));
    assert_eq!(ev(&m, VmEvent::PcpRefill), refills + 1);
    assert_eq!(ev(&m, VmEvent::PcpRefillPages), refill_pages + 3);
    let (left, _) = pcp_list(&pa, 1, order_to_pindex(Movable, 0));
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&got.0));
    // The next take is the head, no refill.
    assert_eq!(pa.rmqueue_pcplist(&cpu1, zi, 0, Movable, AllocFlags::default()), Some(Pfn(left[0])));
    assert_eq!(ev(&m, VmEvent::PcpRefill), refills + 1);
    assert_eq!(pa.pageset(1).unwrap().count, 1);
    // Order 1 refill: max(3 >> 1, 2) = 2 blocks of 2 pages, one taken.
    let _ = pa.rmqueue_pcplist(&cpu1, zi, 1, Movable, AllocFlags::default()).unwrap();
    assert_eq!(pa.pageset(1).unwrap().count, 1 + 4 - 2);
    assert_eq!(ev(&m, VmEvent::PcpRefillPages), refill_pages + 3 + 4);
}

/// `decay_pcp_high()`: a long list sets the new high (count − batch << 5
/// above high − high / 8); at high == high_min high is not touched, even
/// with a long list, and all above it is drained; with count == high ==
/// high_min nothing is drained and nothing is left to do.
#[test]
fn decay_pcp_high_long_lists_and_high_at_high_min() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let zi = pa.zonelist()[0] as usize;
    stock(&pa, &cpu1, 2_000, 0, Movable);
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 5_000, 3, 2_000, 0, 0));
    let drains = ev(&m, VmEvent::PcpDrain);
    let decays = ev(&m, VmEvent::PcpDecayDrain);
    assert!(pa.decay_pcp_high(&cpu1));
    // max(2,000 − 96, 1,000 − 125, 100) = 1,904: 96 pages in 32 chunks.
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.high, p.count), (1_904, 1_904));
    assert_eq!(ev(&m, VmEvent::PcpDrain), drains + 32);
    // high == high_min: high stays 100, the 1,804 above it go (602 chunks).
    set(&mut pa.pcp_of(zi, 1).lock(), (100, 100, 5_000, 3, 1_904, 0, 0));
    assert!(pa.decay_pcp_high(&cpu1));
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.high, p.count), (100, 100));
    assert_eq!(ev(&m, VmEvent::PcpDrain), drains + 32 + 602);
    assert_eq!(ev(&m, VmEvent::PcpDecayDrain), decays + 2);
    // count == high == high_min: no drain, nothing to do.
    assert!(!pa.decay_pcp_high(&cpu1));
    assert_eq!(pa.pageset(1).unwrap().count, 100);
    assert_eq!(ev(&m, VmEvent::PcpDecayDrain), decays + 2);
    pa.check_invariants().unwrap();
}

/// `free_frozen_page_commit()`: without `PCPF_FREE_HIGH_BATCH` free_high
/// does not ask for a batch on the lists: an order-1 free after another
/// onto empty lists (count 2, batch 3) drains them.
#[test]
fn free_high_without_free_high_batch_needs_no_batch_on_the_lists() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let cpu0 = m.cpu(0).unwrap();
    let zi = pa.zonelist()[0] as usize;
    let block = pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 1).unwrap();
    set(&mut pa.pcp_of(zi, 1).lock(), (1_000, 100, 1_000, 3, 0, 53, 0));
    pa.pcp_of(zi, 1).lock().flags = PCPF_PREV_FREE_HIGH_ORDER;
    let free_high = ev(&m, VmEvent::PcpFreeHigh);
    pa.free_pages(&cpu1, block, 1).unwrap();
    assert_eq!(ev(&m, VmEvent::PcpFreeHigh), free_high + 1);
    let p = pa.pageset(1).unwrap();
    assert_eq!((p.count, p.high), (0, 1_000 - 96));
    pa.check_invariants().unwrap();
}

/// `free_frozen_page_commit()`: after a drain on free, `ZONE_BELOW_HIGH`
/// is cleared only if the zone is above its high watermark again
/// (`zone_watermark_ok()` at order 0 for ZONE_MOVABLE).
#[test]
fn a_drain_on_free_clears_below_high_only_above_the_high_watermark() {
    let m = machine();
    let pa = allocator(&m);
    let cpu1 = fresh(&m, &pa);
    let cpu0 = m.cpu(0).unwrap();
    let zi = pa.zonelist()[0] as usize;
    let z = pa.zone_at(zi);
    let min_free_kbytes = pa.min_free_kbytes();
    let ones: Vec<Pfn> = (0..2).map(|_| pa.alloc_pages(&cpu0, Gfp::GFP_KERNEL, 0).unwrap()).collect();
    stock(&pa, &cpu1, 9, 0, Movable);
    // 1 GiB of min_free_kbytes: the 64 MiB zone is far below its high mark.
    pa.set_min_free_kbytes(1 << 20).unwrap();
    assert!(z.nr_free_pages() < z.high_wmark_pages() as i64);
    set(&mut pa.pcp_of(zi, 1).lock(), (10, 10, 10, 3, 9, 5, 0));
    z.set_flag(ZoneFlag::BelowHigh);
    pa.free_pages(&cpu1, ones[0], 0).unwrap();
    assert_eq!(pa.pageset(1).unwrap().count, 4);
    assert!(z.test_flag(ZoneFlag::BelowHigh));
    // Back to the boot's watermarks: the next drain clears it.
    pa.set_min_free_kbytes(min_free_kbytes).unwrap();
    stock(&pa, &cpu1, 5, 0, Movable);
    set(&mut pa.pcp_of(zi, 1).lock(), (10, 10, 10, 3, 9, 5, 0));
    pa.free_pages(&cpu1, ones[1], 0).unwrap();
    assert_eq!(pa.pageset(1).unwrap().count, 4);
    assert!(!z.test_flag(ZoneFlag::BelowHigh));
    pa.check_invariants().unwrap();
}
