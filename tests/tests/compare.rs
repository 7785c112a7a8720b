//! `mmlab compare` and `mmlab reproduce`: the A/B machinery on real runs,
//! and the direction of every reproduction's counters.

use mmlab_engine::MachineConfig;
use mmlab_harness::compare::{self, Metric, Spec, Variant};
use mmlab_harness::reproduce::{self, Length, Mapping};
use mmlab_harness::test_vmalloc::Params;
use mmlab_tests::scale;

fn rows(args: &[&str]) -> Vec<compare::Row> {
    compare::rows_from_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

fn spec(base: &str, new: &str, rows: Vec<compare::Row>, metric: Metric) -> Spec {
    Spec {
        machine: MachineConfig { mem_bytes: 1 << 30, nr_cpus: 2, ..Default::default() },
        common: vec!["cost_profile=apple-m2".to_string()],
        variants: vec![Variant::parse("base", base), Variant::parse("new", new)],
        rows,
        repeats: 3,
        warmup: 1,
        seed: 7,
        metric,
    }
}

/// A configuration against itself, seeded: every run does the same work on
/// both sides, so the counted and modelled quantities are equal and no row
/// may be marked (I) or (R).
#[test]
fn self_compare_marks_nothing() {
    let loops = format!("test_loop_count={}", scale(200));
    let r = rows(&["run_test_mask=0x209", "nr_pages=1,16", &loops]);
    assert_eq!(r.len(), 6);
    let o = compare::run(spec("", "", r, Metric::Modelled), |_| {}).unwrap();
    assert!(!o.any_failed());
    for row in &o.rows {
        let c = row.comparison(1, Metric::Modelled).unwrap();
        assert_eq!(c.mark, None, "{}", row.row.label);
        assert_eq!(c.change_pct, 0.0, "{}", row.row.label);
        for col in compare::COUNTERS.iter().filter(|c| c.name != "zone_lock_hold_ns") {
            assert_eq!(row.counter_per_call(0, col), row.counter_per_call(1, col), "{} {}", row.row.label, col.name);
        }
    }
    // The modelled time is not trivially zero: the comparison had something to compare.
    assert!(o.rows[1].summary(0, Metric::Modelled).unwrap().mean > 0.0);
}

/// Batching on against off: fewer modelled barrier ns per 16-page vmalloc,
/// marked (I), and the JSON names what it ran with.
#[test]
fn batching_is_an_improvement_in_modelled_time() {
    let loops = format!("test_loop_count={}", scale(200));
    let r = rows(&["run_test_mask=1", "nr_pages=16", &loops]);
    let o = compare::run(
        spec("arm64.lazy_mmu_barrier_batching=0", "arm64.lazy_mmu_barrier_batching=1", r, Metric::Modelled),
        |_| {},
    )
    .unwrap();
    let c = o.rows[0].comparison(1, Metric::Modelled).unwrap();
    assert_eq!(c.mark, Some(mmlab_harness::stats::Mark::Improvement));
    assert!(c.change_pct < -50.0, "{}", c.change_pct);
    let pairs = compare::counter("barrier_pairs").unwrap();
    assert_eq!(o.rows[0].counter_per_call(0, &pairs), 16.0);
    assert!(o.rows[0].counter_per_call(1, &pairs) < 1.5);
    let json = compare::render(&o, compare::Format::Json, &[pairs]);
    for needle in [
        "\"seed\":7",
        "\"git_rev\":",
        "\"host_arch\":",
        "\"barrier_backend\":\"model\"",
        "\"cost_profile\":\"apple-m2\"",
        "\"lazy_mmu_barrier_batching\":false",
        "\"mark\":\"(I)\"",
        "\"nr_pages\":16",
    ] {
        assert!(json.contains(needle), "{needle} in {json}");
    }
    let table = compare::render(&o, compare::Format::Table, &[pairs]);
    assert!(table.contains("(I)") && table.contains("16.00 → "), "{table}");
    let csv = compare::render(&o, compare::Format::Csv, &[pairs]);
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let md = compare::render(&o, compare::Format::Markdown, &[pairs]);
    assert!(md.contains("| fix_size_alloc_test p:16 h:0 |"), "{md}");
    let svg = compare::plot(&o, "t");
    assert_eq!(svg.matches("class=\"bar\"").count(), 2);
}

#[test]
fn bad_compare_input_is_an_error() {
    let r = rows(&["run_test_mask=1", "test_loop_count=1"]);
    let mut s = spec("", "bogus=1", r.clone(), Metric::Total);
    assert!(compare::run(s.clone(), |_| {}).unwrap_err().contains("unknown setting"));
    s.variants.truncate(1);
    assert!(compare::run(s, |_| {}).is_err());
    let mut s = spec("", "", r, Metric::Total);
    // No interval from fewer than two kept runs.
    for n in [0, 1] {
        s.repeats = n;
        assert!(compare::run(s.clone(), |_| {}).unwrap_err().contains("at least 2 kept runs"), "{n}");
    }
    s.repeats = 2;
    s.rows[0].params = Params { nr_threads: 3, run_test_mask: 1, ..Params::default() };
    assert!(compare::run(s.clone(), |_| {}).unwrap_err().contains("CPUs"));
    for mask in [0, 3, 1 << 13] {
        s.rows[0].params = Params { run_test_mask: mask, ..Params::default() };
        assert!(compare::run(s.clone(), |_| {}).unwrap_err().contains("exactly one"), "{mask}");
    }
}

/// A short run: a tenth of quick mode's loops (less under qemu), two runs a side.
fn short() -> Length {
    Length { loops_pct: if under_emulation() { 1 } else { 10 }, repeats: 2 }
}

fn under_emulation() -> bool {
    scale(16) < 16
}

#[test]
fn reproduce_contpte_directions() {
    let r = reproduce::by_name("contpte", short(), 1).unwrap();
    assert!(!r.failed);
    let c = r.contpte().unwrap();
    // 16x fewer TLB entries at every size; a 2 MiB block for 2 MiB and up.
    for kib in [64u64, 1024, 8192] {
        let row = c.tlb_row(kib << 10).unwrap();
        let (pte, cont, pmd) = (row.get(Mapping::Pte), row.get(Mapping::Contpte), row.get(Mapping::Pmd));
        assert_eq!(pte.entries, 16 * cont.entries, "{kib} KiB");
        assert!(pmd.entries <= cont.entries);
    }
    let mib8 = c.tlb_row(8 << 20).unwrap();
    assert_eq!(mib8.get(Mapping::Pmd).entries, 4);
    // 8 MiB of 4 KiB pages thrashes a 1280-entry TLB; contpte does not.
    assert!(mib8.get(Mapping::Pte).misses() > mib8.get(Mapping::Contpte).misses() * 16);
    // Order-4 blocks bypass the pcp: more zone-lock acquisitions per call.
    assert_eq!(c.h1_zone_lock.len(), 3);
    for z in &c.h1_zone_lock {
        assert!(z.new > z.base);
    }
    assert!(r.text.contains("agreement (TLB)") && r.text.contains("agreement (h:1, model)"));
}

#[test]
fn reproduce_barrier_batching_directions() {
    if under_emulation() {
        eprintln!("skipped under MMLAB_TEST_SCALE: too slow for qemu; the x86_64 leg runs it");
        return;
    }
    let r = reproduce::by_name("barrier-batching", short(), 1).unwrap();
    assert!(!r.failed);
    let b = r.barrier_batching().unwrap();
    let pairs = |test: &str| b.row(test).unwrap_or_else(|| panic!("row {test}")).barrier_pairs;
    // Batched: one pair per vmalloc of 512 pages instead of 512.
    assert_eq!(pairs("fix_size_alloc_test p:512 h:0").base, 512.0);
    assert!(pairs("fix_size_alloc_test p:512 h:0").new < 4.0);
    assert!(pairs("fix_size_alloc_test p:16 h:0").new < pairs("fix_size_alloc_test p:16 h:0").base);
    // One page: nothing to batch.
    let p1 = pairs("fix_size_alloc_test p:1 h:0");
    assert_eq!(p1.base, p1.new);
    assert!(
        r.text.contains("M2 published")
            && r.text.matches("agreement (model, ").count() == 2
            && r.text.matches("agreement (host time): ").count() == 2,
        "{}",
        r.text
    );
}

#[test]
fn reproduce_pcp_drain_directions() {
    if under_emulation() {
        eprintln!("skipped under MMLAB_TEST_SCALE: too slow for qemu; the x86_64 leg runs it");
        return;
    }
    let r = reproduce::by_name("pcp-drain", short(), 1).unwrap();
    assert!(!r.failed);
    let p = r.pcp_drain().unwrap();
    // Huge by default takes its pages from the buddy lists and drains the
    // pcp lists it fills with order-0 frees; mainline does neither.
    assert!(p.drain_pages.new > p.drain_pages.base + 50.0);
    assert!(p.buddy_pages.new >= 96.0);
    assert_eq!(p.buddy_pages.base, 0.0);
    // The trace of the pcp (a polyline per pageset value) comes first.
    assert_eq!(r.plots.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["trace", "drains"]);
    assert!(r.plots[0].1.contains("<polyline"));
    assert!(reproduce::by_name("nope", short(), 1).is_err());
}
