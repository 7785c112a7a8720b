//! `mmlab compare --seeds ... --format jsonl` and `--merge` through the
//! command line: two shard jobs merged print what one job over the union
//! prints (modelled metric and counters: deterministic, so byte for byte).

mod common;
use common::mmlab_command;
use std::path::PathBuf;

fn mmlab(args: &[&str]) -> (Option<i32>, String, String) {
    common::output(mmlab_command().args(args))
}

const JOB: [&str; 16] = [
    "--mem",
    "128M",
    "--set",
    "cost_profile=apple-m2",
    "compare",
    "run_test_mask=1",
    "nr_pages=16",
    "test_loop_count=20",
    "--base",
    "arm64.lazy_mmu_barrier_batching=0",
    "--new",
    "",
    "--metric",
    "modelled",
    "--counters",
    "barrier_pairs,tlbi",
];

fn job(extra: &[&str]) -> (Option<i32>, String, String) {
    let mut v = JOB.to_vec();
    v.extend_from_slice(extra);
    mmlab(&v)
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn shards_merged_print_the_union_run() {
    let dir = TempDir(std::env::temp_dir().join(format!("mmlab-shards-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut files = Vec::new();
    for (name, range) in [("a.jsonl", "0..2"), ("b.jsonl", "2..=3")] {
        let (code, out, err) = job(&["--seeds", range, "--format", "jsonl"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.starts_with("{\"type\":\"header\""), "{out}");
        let path = dir.0.join(name);
        std::fs::write(&path, out).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    for format in ["table", "csv", "markdown"] {
        let (code, union, err) = job(&["--seeds", "0..4", "--format", format]);
        assert_eq!(code, Some(0), "{err}");
        assert!(union.contains("seeds 0..4") || format == "csv", "{union}");
        let (code, merged, err) = mmlab(&[
            "compare",
            "--merge",
            &files[1],
            &files[0],
            "--metric",
            "modelled",
            "--counters",
            "barrier_pairs,tlbi",
            "--format",
            format,
        ]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(merged, union, "{format}");
    }
    // The same shard twice is refused, and so are settings on the merge.
    let (code, _, err) = mmlab(&["compare", "--merge", &files[0], &files[0]]);
    assert_eq!(code, Some(2));
    assert!(err.contains("seed 0 is in both"), "{err}");
    let (code, _, err) = mmlab(&["--set", "lock_stat=1", "compare", "--merge", &files[0]]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--merge takes the settings and seeds from the shards"), "{err}");
    // One shard of two seeds prints a table of its own.
    let (code, out, _) = mmlab(&["compare", "--merge", &files[0], "--metric", "modelled"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("seeds 0..2 (2 in all)"), "{out}");
}

#[test]
fn shard_options_are_checked() {
    // A table from one seed would have no interval.
    let (code, _, err) = job(&["--seeds", "5..6"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("1 sample per side"), "{err}");
    // jsonl is for --seeds runs; --seeds and --repeat are two modes.
    let (code, _, err) = job(&["--format", "jsonl"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("give --seeds"), "{err}");
    let (code, _, err) = job(&["--seeds", "1..3", "--repeat", "4"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--repeat"), "{err}");
    let (code, _, err) = job(&["--seeds", "1..3", "--format", "jsonl", "--plot", "/tmp/x.svg"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--plot draws the table"), "{err}");
    for bad in ["3..3", "4..2", "x..2", "1..20000"] {
        let (code, _, err) = job(&["--seeds", bad]);
        assert_eq!(code, Some(2), "{bad}");
        assert!(err.contains("--seeds"), "{bad}: {err}");
    }
    let (code, _, err) = mmlab(&["compare", "--merge", "/nonexistent-mmlab.jsonl"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent-mmlab.jsonl"), "{err}");
}

/// A shard written by main's `mmlab` before test_vmalloc's counters became
/// a view over the crates' snapshots (tests/data; made with `--mem 128M --set
/// cost_profile=apple-m2 --set barrier=model --set lock_stat=1 compare --seeds
/// 1..3 --format jsonl --new vmalloc.contpte=off run_test_mask=0x145
/// nr_pages=16 use_huge=0,1 test_loop_count=10`) still merges, and prints
/// byte for byte what the harness before that change printed merging it
/// (`--counters all`, JSON and CSV; the `.merged.*` files were written by
/// the parent commit's `mmlab`, since main's binary predates the statrs t
/// quantiles and prints other interval widths).
#[test]
fn a_shard_from_before_the_counters_view_merges_as_it_did() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let shard = data.join("shard-before-counters-view.jsonl");
    for format in ["json", "csv"] {
        let (code, out, err) =
            mmlab(&["compare", "--merge", shard.to_str().unwrap(), "--counters", "all", "--format", format]);
        assert_eq!(code, Some(0), "{err}");
        let want = std::fs::read_to_string(data.join(format!("shard-before-counters-view.merged.{format}"))).unwrap();
        assert_eq!(out, want, "{format}");
    }
}
