//! `mmlab test-vmalloc` (lib/test_vmalloc.c): each case alone, on one and on
//! two workers, classifies as the 7.2 module does and leaves the machine as
//! it found it, apart from the page-table pages the vmalloc range gained.

use mmlab_engine::Machine;
use mmlab_engine::arch::arm64::pgtable::{self};
use mmlab_harness::test_vmalloc::{self, NR_TEST_CASES, Params, TEST_CASES};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_tests::{machine, scale};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};

/// Free pages: the buddy lists plus every pcp list.
fn free_pages(pa: &PageAllocator<'_>) -> u64 {
    let buddy: u64 = pa.zone().nr_free_per_order().iter().enumerate().map(|(o, &n)| n << o).sum();
    buddy + pa.pcp_pages() as u64
}

/// Table pages of the kernel's address space, all levels.
fn table_pages(m: &Machine) -> u64 {
    pgtable::stats(m, &m.kernel_as()).tables.iter().sum()
}

/// Run `params` on a fresh machine and check the teardown; returns the report.
fn run_and_check(mem: &str, cpus: usize, params: &Params) -> test_vmalloc::Report {
    let m = machine(mem, cpus);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let (free0, tables0) = (free_pages(&pa), table_pages(&m));
    let r = test_vmalloc::run(&m, &pa, &vm, params, 7).unwrap();
    let added = table_pages(&m) - tables0;
    assert_eq!(pa.pcp_pages(), 0, "teardown drains every pcp list");
    assert_eq!(
        free_pages(&pa),
        free0 - added,
        "mask {:#x} on {cpus} CPUs: every page back except {added} page-table pages",
        params.run_test_mask
    );
    assert_eq!(vm.lazy_nr(), 0, "teardown purges the lazy areas");
    vm.check().unwrap();
    pa.check_invariants().unwrap();
    assert_eq!(r.workers.len(), cpus);
    r
}

/// The xfail cases that do fail: align_shift_alloc_test asks for alignments
/// beyond the vmalloc range. no_block_alloc_test is xfail too, but passes
/// on an unpressured machine, as on the real 7.2 kernel (the peer capture
/// says `passed: 1`), and 7.2 counts a passing xfail case as passed.
fn fails_by_design(name: &str) -> bool {
    let tc = TEST_CASES.iter().find(|t| t.name == name).expect("a test case");
    tc.xfail && name == "align_shift_alloc_test"
}

#[test]
fn each_case_alone_passes_or_xfails_and_tears_down() {
    for cpus in [1, 2] {
        for (i, tc) in TEST_CASES.iter().enumerate() {
            let params = Params {
                run_test_mask: 1 << i,
                nr_threads: cpus as i32,
                test_loop_count: scale(64) as i32,
                nr_pcpu_objects: scale(1000) as i32,
                ..Params::default()
            };
            let r = run_and_check("512M", cpus, &params);
            for w in &r.workers {
                assert_eq!(w.cases.len(), 1);
                let c = &w.cases[0];
                assert_eq!(c.name, tc.name);
                let want = if fails_by_design(tc.name) { (0, 0, 1) } else { (1, 0, 0) };
                assert_eq!(
                    (c.passed, c.failed, c.xfailed),
                    want,
                    "{} on worker {} of {cpus}: {:?}",
                    c.name,
                    w.worker,
                    c.first_error
                );
                assert_eq!((c.repeat, c.loops), (1, params.test_loop_count as u64));
            }
            assert!(!r.any_failed());
        }
    }
}

#[test]
fn all_cases_repeated_in_sequence_on_two_workers() {
    let params = Params {
        run_test_mask: 0x1fff,
        nr_threads: 2,
        test_loop_count: scale(16) as i32,
        test_repeat_count: 2,
        sequential_test_order: true,
        nr_pcpu_objects: scale(500) as i32,
        ..Params::default()
    };
    let r = run_and_check("512M", 2, &params);
    for w in &r.workers {
        let names: Vec<&str> = TEST_CASES.iter().map(|t| t.name).collect();
        assert_eq!(w.run_order, names, "sequential_test_order keeps the array's order");
        assert_eq!(w.cases.len(), NR_TEST_CASES);
        for c in &w.cases {
            let want = if fails_by_design(c.name) { (0, 0, 2) } else { (2, 0, 0) };
            assert_eq!((c.passed, c.failed, c.xfailed), want, "{}: {:?}", c.name, c.first_error);
        }
    }
    let text = test_vmalloc::render_text(&r, &[]);
    assert_eq!(text.lines().filter(|l| l.starts_with("Summary: ")).count(), 2 * NR_TEST_CASES);
    assert!(text.contains("Summary: align_shift_alloc_test passed: 0 failed: 0 xfailed: 2 repeat: 2 loops: "));
    assert!(text.contains("All test took worker1="));
    let json = test_vmalloc::render_json(&r, &["vmalloc.contpte=on".to_string()]);
    assert!(json.contains("\"set\":[\"vmalloc.contpte=on\"]"), "{json}");
    // The kvfree_rcu tests waited for grace periods of the engine's RCU.
    assert!(r.counters.rcu.grace_periods > 0, "{json}");
    assert!(!json.contains("\"grace_periods\":0"), "{json}");
}

#[test]
fn a_failing_allocation_is_a_failure_not_a_panic() {
    // long_busy_list keeps 15000 one-page areas busy (58 MiB) before its
    // loop asks for 100 pages more: a 32 MiB machine runs out.
    let params = Params { run_test_mask: 1 << 2, nr_threads: 1, test_loop_count: 4, ..Params::default() };
    let r = run_and_check("32M", 1, &params);
    let c = &r.workers[0].cases[0];
    assert_eq!((c.passed, c.failed, c.xfailed), (0, 1, 0));
    assert!(c.first_error.is_some());
    assert!(r.any_failed());
}

#[test]
fn lock_stat_counts_vmallocs_shared_locks_and_one_cpu_never_bounces() {
    use mmlab_engine::MachineConfig;
    use mmlab_vmalloc::VmapLockClass;
    let loops = scale(200) as u64;
    let params = Params { run_test_mask: 1, nr_threads: 1, test_loop_count: loops as i32, ..Params::default() };
    // Off by default: nothing counted, nothing printed.
    let r = run_and_check("256M", 1, &params);
    assert!(r.lock_stat.is_none());
    assert!(!test_vmalloc::render_text(&r, &[]).contains("# lock_stat ("));
    assert!(!test_vmalloc::render_json(&r, &[]).contains("\"lock_stat\""));

    let cfg = MachineConfig { lock_stat: true, ..MachineConfig::with("256M", 2).expect("size") };
    let m = mmlab_tests::boot(cfg).expect("boots");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let r = test_vmalloc::run(&m, &pa, &vm, &params, 7).unwrap();
    let row = |c: VmapLockClass| r.lock_stat_row(c.name()).expect("lock_stat=1 reports every class");
    // fix_size_alloc_test: one vmalloc and one vfree per loop. Each takes
    // its area's busy-tree lock once; each vfree adds to vmap_lazy_nr and
    // takes its node's lazy lock once.
    let pairs = r.counters.vmalloc.vmallocs;
    assert_eq!(pairs, loops);
    assert_eq!(row(VmapLockClass::VnBusy).acquisitions, 2 * pairs);
    assert_eq!(row(VmapLockClass::VnLazy).acquisitions, pairs);
    assert_eq!(row(VmapLockClass::VmapLazyNr).acquisitions, pairs);
    // The zone lock's row is the page allocator's counters.
    let zone = r.lock_stat_row("&zone->lock").expect("the zone lock's row");
    assert_eq!(zone.acquisitions, r.counters.vm.zone_lock_acquire);
    // One CPU: no lock is ever taken elsewhere, so nothing bounces.
    let rows = r.lock_stat.as_deref().expect("lock_stat=1");
    assert_eq!(rows.len(), VmapLockClass::ALL.len() + 1);
    for l in rows {
        assert_eq!((l.counts.acq_bounces, l.counts.con_bounces, l.counts.contentions), (0, 0, 0), "{}", l.class);
    }
    let text = test_vmalloc::render_text(&r, &[]);
    assert!(text.contains("#   class name"), "{text}");
    let row = format!("#   {:<28} {:>12} {:>12} {:>12} {:>12}", "vmap_lazy_nr (atomic add)", 0, 0, 0, pairs);
    assert!(text.lines().any(|l| l == row), "{text}");
    let json = test_vmalloc::render_json(&r, &[]);
    assert!(json.contains(&format!("{{\"class\":\"&vn->busy.lock\",\"con_bounces\":0,\"contentions\":0,\"acq_bounces\":0,\"acquisitions\":{}}}", 2 * pairs)), "{json}");
}

#[test]
fn lock_stat_counts_a_bounce_when_the_other_cpu_took_it_last() {
    use mmlab_engine::{MachineConfig, PAGE_SIZE};
    use mmlab_vmalloc::VmapLockClass;
    let cfg = MachineConfig { lock_stat: true, ..MachineConfig::with("128M", 2).expect("size") };
    let m = mmlab_tests::boot(cfg).expect("boots");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
    let before = vm.lock_stat();
    // Allocated on CPU 0, freed on CPU 1: the busy lock moves to CPU 1;
    // the first add to vmap_lazy_nr has no previous CPU.
    let a = vm.vmalloc(&c0, PAGE_SIZE).unwrap();
    vm.vfree(&c1, a).unwrap();
    // Then both on CPU 0: vmap_lazy_nr comes back from CPU 1.
    let b = vm.vmalloc(&c0, PAGE_SIZE).unwrap();
    vm.vfree(&c0, b).unwrap();
    let d = vm.lock_stat().delta(&before);
    let lazy_nr = d.get(VmapLockClass::VmapLazyNr);
    assert_eq!((lazy_nr.acquisitions, lazy_nr.acq_bounces), (2, 1));
    let busy = d.get(VmapLockClass::VnBusy);
    assert_eq!(busy.acquisitions, 4);
    assert!(busy.acq_bounces >= 1, "{busy:?}");
    assert_eq!(busy.contentions, 0, "one thread never waits");
    // The zone lock: an order-4 block comes from and goes back to the
    // buddy lists under it (the pcp lists do not cache order 4). Taken on
    // CPU 0, then twice on CPU 1: one bounce.
    let p = pa.alloc_pages(&c0, mmlab_engine::Gfp::GFP_KERNEL, 4).expect("an order-4 block");
    let e0 = m.vm_events();
    let q = pa.alloc_pages(&c1, mmlab_engine::Gfp::GFP_KERNEL, 4).expect("an order-4 block");
    pa.free_pages(&c1, q, 4).unwrap();
    let e1 = m.vm_events();
    assert_eq!(e1.zone_lock_acquire - e0.zone_lock_acquire, 2);
    assert_eq!(e1.zone_lock_acq_bounce - e0.zone_lock_acq_bounce, 1);
    assert_eq!(e1.zone_lock_con_bounce - e0.zone_lock_con_bounce, 0);
    pa.free_pages(&c0, p, 4).unwrap();
}
