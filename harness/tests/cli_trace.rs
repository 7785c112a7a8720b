//! `mmlab trace`: workloads, event selection, formats and bad input, run
//! through the built binary.

mod common;
use common::mmlab_command;

fn mmlab(args: &[&str]) -> (Option<i32>, String, String) {
    common::output(mmlab_command().current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).args(args))
}

#[test]
fn event_selection_as_set_event() {
    let (code, out, err) = mmlab(&["--mem", "64M", "trace", "random", "--ops", "200", "-e", "kmem:mm_page_alloc"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.lines().count() > 50);
    assert!(out.lines().all(|l| l.contains(": mm_page_alloc: page=")), "{out}");
    // Removal only: the default selection without mm_page_free.
    let (code, out, _) = mmlab(&["--mem", "64M", "trace", "random", "--ops", "200", "-e", "!kmem:mm_page_free"]);
    assert_eq!(code, Some(0));
    assert!(!out.contains(": mm_page_free:"));
    assert!(out.contains(": mm_page_alloc:") && out.contains(": func_entry: func=rmqueue_bulk"));
    assert!(!out.contains(": dsb:"), "barriers are not in the default selection");
}

#[test]
fn test_vmalloc_as_json_lines() {
    let (code, out, err) = mmlab(&[
        "--mem",
        "64M",
        "trace",
        "test-vmalloc",
        "run_test_mask=1",
        "test_loop_count=5",
        "-e",
        "vmalloc:*",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let mut n = 0;
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
        assert!(v["event"].as_str().unwrap().starts_with("vmalloc:"), "{l}");
        assert!(v["ts"].is_u64() && v["cpu"].is_u64());
        n += 1;
    }
    assert!(n >= 10, "{n} lines");
    assert!(out.contains("\"event\":\"vmalloc:alloc_vmap_area\""));
}

#[test]
fn bad_input_is_refused() {
    let (code, out, err) = mmlab(&["trace", "random", "--ops", "10", "-e", "kmem:mm_page_mystery"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty() && err.contains("matches no event"), "{err}");
    let dir = std::env::temp_dir().join(format!("mmlab-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.trace");
    let free = " t-1 [000] ..... 1.0: mm_page_free: page=1 pfn=zz order=0\n";
    let alloc = " t-1 [000] ..... 1.1: mm_page_alloc: page=1 pfn=0x1000 order=0 migratetype=1 gfp_flags=GFP_KERNEL\n";
    std::fs::write(&bad, format!("# mmlab: cpus=1\n# tracer: nop\n{free}{alloc}")).unwrap();
    let (code, _, err) = mmlab(&["trace", "kernel", bad.to_str().unwrap(), "--on-error", "stop"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("line 3: malformed line: pfn=zz is not a number"), "{err}");
    let (code, out, err) = mmlab(&["trace", "kernel", bad.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("warning:        1 x malformed line"), "{out}");
    assert!(out.contains("  line 3: malformed line: pfn=zz is not a number"), "{out}");
    // With no event left, even skip has nothing to replay.
    std::fs::write(&bad, format!("# mmlab: cpus=1\n# tracer: nop\n{free}")).unwrap();
    let (code, out, err) = mmlab(&["trace", "kernel", bad.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert!(err.ends_with("no events in 3 lines; line 3: malformed line: pfn=zz is not a number\n"), "{err}");
    let (code, _, err) = mmlab(&["trace", "kernel", dir.join("missing").to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("reading"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shipped_kernel_trace_report() {
    let (code, out, err) = mmlab(&["trace", "kernel", "tests/data/trace/anon-touch-cpu1.trace", "--show", "3"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("traced machine: Linux 6.18.44-fc-v657, 2 CPUs, zone Normal"), "{out}");
    assert!(out.contains("mmlab booted:   mem=2G cpus=2 pcp.rules=7.2 percpu_pagelist_high_fraction=100000"), "{out}");
    assert!(out.contains("decisions equal: "), "{out}");
}

/// hugetlb pool writes: one alloc event per folio grown (pfn in hex, as
/// kmem prints pfns), one free event per folio shrunk, bracketed by the
/// write's slice; a size arm64 does not offer is refused before boot.
#[test]
fn hugetlb_writes() {
    let (code, out, err) = mmlab(&[
        "--mem",
        "256M",
        "trace",
        "hugetlb",
        "2M/nr_hugepages=3",
        "2M/nr_hugepages=1",
        "-e",
        "mmlab_hugetlb:*,mmlab_func:*",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let count = |pat: &str| out.lines().filter(|l| l.contains(pat)).count();
    assert_eq!(count(": hugetlb_alloc_folio: pfn=0x"), 3, "{out}");
    assert_eq!(count(": hugetlb_free_folio: pfn=0x"), 2, "{out}");
    assert!(out.lines().all(|l| !l.contains("hugetlb_alloc_folio") || l.ends_with("order=9 surplus=0")), "{out}");
    assert_eq!(count("func_entry: func=set_max_huge_pages"), 2);
    assert_eq!(count("func_exit: func=set_max_huge_pages"), 2);
    let (code, out, err) = mmlab(&["trace", "hugetlb", "5M/nr_hugepages=1"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty() && err.contains("ENOENT"), "{err}");
}
