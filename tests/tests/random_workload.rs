//! Invariants under seeded random workloads (orders 0..=3, three gfp types,
//! two CPUs driven from one thread), and no page lost at the end.

use mmlab_engine::MachineConfig;
use mmlab_harness::workload::RandomWorkload;
use mmlab_pcp::{AllocatorConfig, PageAllocator};

/// `MMLAB_TEST_SCALE` (default 1) divides the length of long workloads.
use mmlab_tests::scale;

/// Operations of the debug_checks runs: every operation is followed by an
/// O(frames) check (about 2 ms per check on 32 MiB in a debug build), so a
/// debug build runs 4,000 of the 20,000.
fn checked_ops() -> u64 {
    if cfg!(debug_assertions) { 4_000 } else { 20_000 }
}

const BUG: &str = "bug: free_pcppages_bulk leaves PageExt::Pcp on a drained block that merges as an upper half";

fn run(mem: &str, ops: u64, seed: u64, max_live: u64, check_every: u64, debug_checks: bool) {
    run_orders(mem, ops, seed, max_live, check_every, debug_checks, 3)
}

fn run_orders(mem: &str, ops: u64, seed: u64, max_live: u64, check_every: u64, debug_checks: bool, max_order: u32) {
    let m = mmlab_tests::boot(MachineConfig::with(mem, 2).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig { debug_checks, ..Default::default() }).unwrap();
    // What the boot's own allocations keep (boot.state=real) is the
    // kernel's, never free again: the workload has the rest.
    let held = pa.boot_work().held_pages;
    let managed = pa.managed_pages() - held;
    // The CMA area's blocks and the boot's frees went through the pcp
    // lists, where they stay until drained.
    assert_eq!(pa.nr_free_pages() as u64 + pa.pcp_pages() as u64, managed);
    let cpus = m.all_cpus().unwrap();
    pa.drain_all_pages(&cpus[0]);
    let boot_buddyinfo = pa.zone().nr_free_per_order();
    let mut wl = RandomWorkload::new(ops, seed, max_live);
    wl.max_order = max_order;
    let mut checks = 0;
    let (st, live) = wl.run(&pa, &cpus, |i| {
        if (i + 1) % check_every == 0 {
            if let Err(e) = pa.check_invariants() {
                panic!("after op {}: {e}", i + 1);
            }
            checks += 1;
        }
    });
    pa.check_invariants().unwrap();
    assert_eq!(checks, ops / check_every);
    assert_eq!(st.allocs + st.alloc_failures + st.frees, ops);
    // max_live_pages is far below the low watermark's reach: nothing fails.
    assert_eq!(st.alloc_failures, 0);
    let live_pages: u64 = live.iter().map(|&(_, o)| 1u64 << o).sum();
    assert_eq!(live_pages, st.live_pages);
    // Conservation while pages are live: buddy + pcp + live = managed.
    assert_eq!(pa.nr_free_pages() as u64 + pa.pcp_pages() as u64 + live_pages, managed);

    for (i, &(p, o)) in live.iter().enumerate() {
        pa.free_pages(&cpus[i % 2], p, o).unwrap();
    }
    assert_eq!(pa.nr_free_pages() as u64 + pa.pcp_pages() as u64, managed);
    pa.drain_all_pages(&cpus[0]);
    assert_eq!(pa.pcp_pages(), 0);
    pa.check_invariants().unwrap();
    // Everything merged back: the free area is the boot one again.
    assert_eq!(pa.zone().nr_free_per_order(), boot_buddyinfo);
    assert_eq!(pa.nr_free_pages() as u64, managed);
    let ev = m.vm_events();
    use mmlab_engine::mm::vmstat::VmEvent;
    // PGALLOC and PGFREE balance (pages, not calls).
    assert_eq!(ev.pgalloc(), ev.get(VmEvent::Pgfree) - boot_pgfree(managed + held) + held);
}

/// PGFREE counted by the boot frees (`free_one_page` counts PGFREE for the
/// memblock_free_all blocks): every managed page once.
fn boot_pgfree(managed: u64) -> u64 {
    managed
}

#[test]

fn one_million_ops_256m() {
    let _ = BUG;
    // 1,000,000 operations (divided by MMLAB_TEST_SCALE), invariants
    // checked every 100,000 and at the end. 256 MiB = 64,511 managed pages; at most
    // 16,384 pages live (a quarter), so the workload never nears the
    // watermarks but the pcp lists overflow and drain constantly.
    let ops = scale(1_000_000);
    run("256M", ops, 0x5eed_0001, 16_384, (ops / 10).max(1), false);
}

#[test]

fn debug_checks_every_op_32m() {
    // 20,000 operations (4,000 in debug builds) with the invariant check after every operation
    // (AllocatorConfig::debug_checks), plus the explicit ones every 1,000.
    // 32 MiB = 8,191 - 128 = 8,063 managed pages; at most 2,048 live.
    let ops = scale(checked_ops());
    run("32M", ops, 42, 2_048, scale(1_000), true);
}

#[test]

fn several_seeds_small() {
    for seed in 1..=4 {
        run("64M", scale(50_000), seed, 4_096, scale(10_000), false);
    }
}

/// Order 0 only: allocations have no tail pages, so the stale pcp state the
/// bug above leaves on merged-away pages is never inspected. Keeps the
/// long-run conservation checks running until the bug is fixed.
#[test]
fn order0_only_256m() {
    let ops = scale(1_000_000);
    run_orders("256M", ops, 0x5eed_0002, 16_384, (ops / 10).max(1), false, 0);
}

#[test]
fn order0_only_debug_checks_32m() {
    run_orders("32M", scale(checked_ops()), 43, 2_048, scale(1_000), true, 0);
}
