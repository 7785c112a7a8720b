//! The race of "mm/hugetlb_vmemmap: fix race with speculative PFN walkers"
//! (bd225530a4c7, Linux 6.11) on emulated CPUs (`mmlab_vmemmap::race`).
//!
//! CPU 0 fills memory with pages in use, frees them, allocates hugetlb
//! folios from that memory and optimizes them as one batch; walker threads
//! on the other CPUs try `get_page_unless_zero()` on random frames (seeded)
//! and write the refcount through their MMU.
//!
//! What is forced, and what is not: in the forced schedule each walker
//! stays between its check and its add for as long as the updater lets it
//! (until the batch is optimized, or until the updater waits for it in a
//! grace period), which makes the outcome deterministic. Checked: without
//! the grace period (6.10) exactly the walkers whose page became a
//! read-only tail fault, with a permission fault on a vmemmap PTE, and two
//! runs give the same report; with it (6.11, 6.12, the 6.12 draft) none
//! faults over many iterations although the same pages were exposed; the
//! arm64 RFC's remote-CPU pause does not close this race; free-running
//! walkers (real host interleavings, a modelled spin pause) never fault with
//! the grace period. Every run ends with the walkers' references dropped,
//! the allocator's invariants intact and every page back (checked by
//! `race::run` itself, and again here).

use mmlab_engine::MachineConfig;
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::race::{self, RaceConfig, RaceError, RaceReport, RaceWindow};
use mmlab_vmemmap::{Arm64Hvo, HvoConfig, RcuPolicy};

fn config(rcu: RcuPolicy, arm64: Arm64Hvo, walkers: usize, iterations: u32, window: RaceWindow) -> RaceConfig {
    RaceConfig {
        hvo: HvoConfig { hugetlb_optimize_vmemmap: true, rcu, arm64 },
        walkers,
        iterations,
        seed: 1,
        window,
        max_folios: u32::MAX,
    }
}

/// Boot a 64 MiB machine with a CPU per walker plus the updater, run, and
/// check the machine afterwards.
fn run(cfg: &RaceConfig) -> RaceReport {
    let m = mmlab_tests::boot(MachineConfig::with("64M", cfg.walkers + 1).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let r = race::run(&pa, &cpu, cfg).unwrap();
    pa.check_invariants().unwrap();
    assert_eq!(r.walkers.refs_taken, r.walkers.refs_dropped);
    // Every walker CPU is free again: the threads stopped.
    for id in 1..=cfg.walkers {
        assert!(m.cpu(id).is_ok(), "cpu {id} still held");
    }
    assert!(r.folios > 0 && r.hvo.folios_optimized == r.folios && r.hvo.folios_restored == r.folios, "{r:?}");
    r
}

/// 6.10: no grace period. The walkers whose checked page became a
/// read-only tail fault; the others do not; the run is deterministic.
#[test]
fn without_grace_period_walkers_fault() {
    let cfg = config(RcuPolicy::V6_10, Arm64Hvo::Unsafe, 3, 4, RaceWindow::Forced);
    let r = run(&cfg);
    assert_eq!(r.hvo.synchronize_rcu, 0);
    assert_eq!(r.walkers.armed, 3 * 4, "one window per walker per iteration: {r:?}");
    assert!(r.walkers.faults >= 1, "{r:?}");
    assert_eq!(r.walkers.faults, r.exposed, "exactly the exposed walkers fault: {r:?}");
    assert_eq!(r.walkers.faults as usize, r.fault_events.len());
    for f in &r.fault_events {
        assert_eq!((f.kind, f.level), ("Permission", "pte"), "{f:?}");
        assert!((1..=3).contains(&f.cpu));
        // A tail beyond the kept vmemmap page: 64 struct pages per page.
        assert!(f.pfn % 512 >= 64, "{f:?}");
        // The write was to `_refcount` (offset 52 of the 64-byte struct page).
        assert_eq!(f.va % 64, 52, "{f:?}");
    }
    // The same seeds, the same schedule: the same report.
    assert_eq!(run(&cfg), r);
}

/// With the grace period (each release that has one), no walker faults,
/// although the same pages were exposed.
#[test]
fn with_grace_period_no_walker_faults() {
    for rcu in [RcuPolicy::V6_11, RcuPolicy::V6_12, RcuPolicy::V6_12Draft] {
        let r = run(&config(rcu, Arm64Hvo::Unsafe, 3, 12, RaceWindow::Forced));
        assert_eq!(r.walkers.faults, 0, "{rcu:?}: {r:?}");
        assert!(r.exposed >= 3, "{rcu:?}: the race was set up: {r:?}");
        assert!(r.hvo.synchronize_rcu >= 12, "{rcu:?}: {r:?}");
        // Released by the grace period, each walker found the count at 0.
        assert_eq!(r.walkers.not_added, r.walkers.armed, "{rcu:?}: {r:?}");
    }
}

/// arm64 with remote CPUs paused around each entry change (the 2024 RFC):
/// the pause does not cover a walker's check-to-add window, so the race is
/// the same; the grace period closes it.
#[test]
fn arm64_pause_does_not_close_the_race() {
    let r = run(&config(RcuPolicy::V6_10, Arm64Hvo::PauseCpus, 2, 3, RaceWindow::Forced));
    assert!(r.walkers.faults >= 1 && r.walkers.faults == r.exposed, "{r:?}");
    assert!(r.hvo.remote_cpu_pauses > 0);
    let r = run(&config(RcuPolicy::V6_12, Arm64Hvo::PauseCpus, 2, 3, RaceWindow::Forced));
    assert_eq!(r.walkers.faults, 0, "{r:?}");
}

/// Free-running walkers (the host scheduler interleaves; a modelled pause
/// between check and add) never fault with the grace period in place.
#[test]
fn free_running_walkers_with_grace_period_never_fault() {
    let r = run(&config(RcuPolicy::V6_12, Arm64Hvo::Unsafe, 3, 8, RaceWindow::Spin(2000)));
    assert_eq!(r.walkers.faults, 0, "{r:?}");
    assert!(r.walkers.picks > 0 && r.walkers.armed > 0, "{r:?}");
}

/// Bad configurations are errors; nothing runs.
#[test]
fn bad_configurations() {
    let m = mmlab_tests::boot(MachineConfig::with("64M", 2).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let cfg = config(RcuPolicy::V6_12, Arm64Hvo::Unsafe, 2, 1, RaceWindow::Forced);
    assert_eq!(race::run(&pa, &cpu, &cfg), Err(RaceError::Cpus { walkers: 2, nr_cpus: 2 }));
    let cfg = config(RcuPolicy::V6_12, Arm64Hvo::Unsafe, 0, 1, RaceWindow::Forced);
    assert!(matches!(race::run(&pa, &cpu, &cfg), Err(RaceError::Cpus { .. })));
    let held = m.cpu(1).unwrap();
    let cfg = config(RcuPolicy::V6_12, Arm64Hvo::Unsafe, 1, 1, RaceWindow::Forced);
    assert_eq!(race::run(&pa, &cpu, &cfg), Err(RaceError::CpuBusy(1)));
    drop(held);
    pa.check_invariants().unwrap();
}
