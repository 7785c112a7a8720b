//! `pcp.drain_pages_zone_batch`: Joshua Hahn's "mm/page_alloc: Perform
//! appropriate batching in drain_pages_zone" (v2 2/4 of "Batch callers of
//! free_pcppages_bulk", linux-mm, 24 Sep 2025), ported as a switch.
//!
//! 7.2's `drain_pages_zone()` empties a pcp in rounds of
//! `batch << CONFIG_PCP_BATCH_SCALE_MAX` pages (63 << 5 = 2,016 here), each
//! round one `free_pcppages_bulk()` under one zone-lock hold. The patch makes
//! a round `batch` pages (63). Same pages drained, same buddy lists after;
//! 32 times the rounds and the zone-lock acquisitions, each 1/32 as long.
//!
//! Machine and stream as pcp_refill_drain.rs's
//! `drain_all_pages_rounds_of_batch_shift_s`: 4 GiB, 2 CPUs, Normal zone
//! batch 63; 8,002 order-0 allocations then their frees on CPU 0 leave
//! 2,015 + 8,002 = 10,017 pages on its pcp (high has grown past them).

use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, Machine};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

/// Drain CPU 0's 10,017 cached pages with `drain_all_pages()` under
/// `settings`; returns (free_pcppages_bulk calls, pages drained, zone-lock
/// acquisitions, free pages per order of the Normal zone after).
fn drain_all(settings: &[&str]) -> (u64, u64, u64, [u64; 11]) {
    let m: Machine = mmlab_tests::bare_machine("4G", 2);
    let mut cfg = AllocatorConfig::default();
    for kv in settings {
        AllocatorConfig::KNOBS.apply(&mut cfg, kv).unwrap();
    }
    let pa = PageAllocator::boot(&m, cfg).unwrap();
    let cpu = m.cpu(0).unwrap();
    let pages: Vec<_> = (0..8_002).map(|_| pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap()).collect();
    for p in pages {
        pa.free_pages(&cpu, p, 0).unwrap();
    }
    assert_eq!(pa.pageset(0).unwrap().count, 10_017);
    let ev = |e| m.cpu_vm_events(0).unwrap().get(e);
    let (d0, p0, l0) = (ev(VmEvent::PcpDrain), ev(VmEvent::PcpDrainPages), ev(VmEvent::ZoneLockAcquire));
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.pageset(0).unwrap().count, 0);
    assert_eq!(pa.nr_free_pages() as u64, pa.managed_pages());
    pa.check_invariants().unwrap();
    let normal = pa.zone().nr_free_per_order();
    (ev(VmEvent::PcpDrain) - d0, ev(VmEvent::PcpDrainPages) - p0, ev(VmEvent::ZoneLockAcquire) - l0, normal)
}

#[test]
fn drain_pages_zone_rounds_of_batch() {
    let (calls, pages, locks, buddy) = drain_all(&[]);
    // 7.2: ceil(10,017 / 2,016) = 5 rounds (4 x 2,016 + 1,953).
    assert_eq!((calls, pages, locks), (5, 10_017, 5));
    let (calls_p, pages_p, locks_p, buddy_p) = drain_all(&["pcp.drain_pages_zone_batch=on"]);
    // Patched: 10,017 / 63 = 159 rounds of exactly 63.
    assert_eq!((calls_p, pages_p, locks_p), (159, 10_017, 159));
    // Only the lock granularity changed: the pages leave in the same order
    // (oldest first) and merge into the same buddy lists.
    assert_eq!(buddy_p, buddy);
}
