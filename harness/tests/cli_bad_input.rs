//! The `mmlab` command refuses bad input up front, with an error that names
//! the option, before it boots or runs anything.
//!
//! These tests run the built binary (`CARGO_BIN_EXE_mmlab`, available to
//! this package's integration tests only, hence this file lives in
//! harness/tests/). Every refused command must exit with status 2 and must
//! not have started a run: `compare` prints a progress line per run on
//! stderr, so "no `run 1/` line" is checked where that applies.

mod common;
use common::mmlab_command;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn mmlab(args: &[&str]) -> Out {
    let o = mmlab_command().args(args).output().expect("run mmlab");
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Exit status 2, nothing on stdout, stderr containing every needle.
#[track_caller]
fn refused(args: &[&str], needles: &[&str]) -> Out {
    let o = mmlab(args);
    assert_eq!(o.code, Some(2), "{args:?}: status; stderr: {}", o.stderr);
    assert!(o.stdout.is_empty(), "{args:?}: stdout {}", o.stdout);
    for n in needles {
        assert!(o.stderr.contains(n), "{args:?}: {n:?} not in stderr: {}", o.stderr);
    }
    assert!(!o.stderr.contains("run 1/"), "{args:?}: started running: {}", o.stderr);
    o
}

/// A small, quick comparison (one loop per run) with `extra` arguments.
fn compare<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--mem", "64M", "compare", "run_test_mask=1", "test_loop_count=1", "--new", ""];
    v.extend_from_slice(extra);
    v
}

#[test]
fn compare_repeat_1_is_refused() {
    // One kept run has no interval: no ±, no (I)/(R).
    refused(&compare(&["--repeat", "1"]), &["--repeat", "at least 2 kept runs"]);
    refused(&compare(&["--repeat", "0"]), &["--repeat", "at least 2 kept runs"]);
}

#[test]
fn unwritable_plot_fails_before_the_run() {
    let dir = "/nonexistent-mmlab-dir/x.svg";
    refused(&compare(&["--plot", dir]), &["--plot", "nonexistent-mmlab-dir"]);
    refused(&compare(&["--plot", "/"]), &["--plot", "is a directory"]);
    refused(&["reproduce", "contpte", "--plot", dir], &["--plot", "nonexistent-mmlab-dir"]);
}

#[test]
fn plot_check_leaves_no_file_behind() {
    // The check creates the file and removes it again; the run then writes it.
    let dir = std::env::temp_dir().join(format!("mmlab-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("t.svg");
    let svg_s = svg.to_str().unwrap();
    let o = mmlab(&compare(&["--repeat", "2", "--warmup", "0", "--plot", svg_s, "--base", "bogus=1"]));
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(!svg.exists(), "a refused run left {svg_s} behind");
    let o = mmlab(&compare(&["--repeat", "2", "--warmup", "0", "--metric", "modelled", "--plot", svg_s]));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn counts_that_drive_a_loop_are_bounded() {
    refused(&["stat", "buddyinfo", "--after-ops", "18446744073709551615"], &["--after-ops", "at most 1000000000"]);
    refused(&["stat", "vmallocinfo", "--after-ops", "1000000001"], &["--after-ops", "at most 1000000000"]);
    refused(&["trace", "pages", "--ops", "18446744073709551615"], &["--ops", "at most 1000000000"]);
    refused(&compare(&["--warmup", "1000000000000"]), &["--warmup", "at most 10000"]);
    refused(&compare(&["--repeat", "10001"]), &["--repeat", "at most 10000"]);
    let big = ["test_loop_count=2147483647", "test_repeat_count=2"];
    refused(
        &["test-vmalloc", "run_test_mask=1", big[0], big[1]],
        &["test_loop_count=2147483647 x test_repeat_count=2", "at most 2147483647"],
    );
    refused(&["--mem", "64M", "compare", "run_test_mask=1", big[0], big[1], "--new", ""], &["at most 2147483647"]);
    refused(
        &["test-vmalloc", "run_test_mask=4", "msleep_before_free=2147483647", "test_loop_count=1000000"],
        &["msleep_before_free=2147483647", "vmstat_update runs", "at most 2147483647"],
    );
}

#[test]
fn sysctls_refuse_what_the_kernel_refuses() {
    for v in ["2147483648", "4294967296", "-1"] {
        let kv = format!("percpu_pagelist_high_fraction={v}");
        refused(&["--set", &kv, "stat", "zoneinfo"], &["percpu_pagelist_high_fraction", "EINVAL"]);
    }
    refused(&["--set", "min_free_kbytes=2147483648", "stat", "zoneinfo"], &["min_free_kbytes", "EINVAL"]);
}

#[test]
fn min_free_kbytes_above_ram_is_taken_with_a_warning() {
    // The kernel takes it (the sysctl has only a lower bound) and every
    // allocation then fails its watermark: mmlab does the same, and says so.
    let o = mmlab(&["--mem", "64M", "--set", "min_free_kbytes=65536", "stat", "zoneinfo"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stderr.contains("warning: min_free_kbytes=65536"), "{}", o.stderr);
    assert!(o.stderr.contains("every allocation"), "{}", o.stderr);
    // min = 65536 KiB / 4 KiB = 16384 pages, above the 16123 managed pages.
    assert!(o.stdout.contains("min      16384"), "{}", o.stdout);
    // Below RAM: no warning.
    let o = mmlab(&["--mem", "64M", "--set", "min_free_kbytes=1024", "stat", "zoneinfo"]);
    assert_eq!(o.code, Some(0));
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
    // compare warns too, naming the side.
    let o = mmlab(&compare(&["--repeat", "2", "--warmup", "0", "--base", "min_free_kbytes=65536"]));
    assert!(o.stderr.contains("warning: base: min_free_kbytes=65536"), "{}", o.stderr);
}

#[test]
fn a_mask_that_selects_nothing_is_an_error_everywhere() {
    for mask in ["0", "16384", "0x2000"] {
        let kv = format!("run_test_mask={mask}");
        refused(&["test-vmalloc", &kv], &[&kv]);
        refused(&["--mem", "64M", "compare", &kv, "--new", ""], &[&kv]);
    }
    // Bits above the 13 cases are refused even beside valid ones.
    refused(&["test-vmalloc", "run_test_mask=0x4001"], &["bits 0x4000 above the 13 test cases"]);
}

#[test]
fn loop_count_0_is_taken_as_1_and_said() {
    // lib/test_vmalloc.c's init_test_configuration(): test_loop_count <= 0 → 1.
    let o = mmlab(&["--mem", "64M", "test-vmalloc", "run_test_mask=1", "test_loop_count=0"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stderr.contains("note: test_loop_count=0 is taken as 1"), "{}", o.stderr);
    assert!(o.stdout.contains("test_loop_count=1 "), "{}", o.stdout);
    assert!(o.stdout.contains("loops: 1 "), "{}", o.stdout);
}

#[test]
fn negative_numbers_name_the_option() {
    let cases: [(&[&str], &str); 7] = [
        (&["--cpus", "-1", "stat", "buddyinfo"], "'--cpus <N>'"),
        (&["--seed", "-1", "stat", "buddyinfo"], "'--seed <S>'"),
        (&["stat", "buddyinfo", "--after-ops", "-1"], "'--after-ops <N>'"),
        (&["trace", "pages", "--ops", "-5"], "'--ops <N>'"),
        (&["--mem", "64M", "compare", "--new", "", "--repeat", "-2"], "'--repeat <N>'"),
        (&["--mem", "64M", "compare", "--new", "", "--warmup", "-1"], "'--warmup <N>'"),
        (&["stat", "buddyinfo", "--cpus", "-1"], "'--cpus <N>'"),
    ];
    for (args, option) in cases {
        let o = refused(args, &[option, "is not a count"]);
        assert!(!o.stderr.contains("unexpected argument"), "{args:?}: {}", o.stderr);
    }
    // walk takes its numbers as text and names them in its own error.
    let walks: [(&[&str], &str); 2] =
        [(&["walk", "-1"], "bad virtual address \"-1\""), (&["walk", "--struct-page", "-1"], "bad pfn \"-1\"")];
    for (args, what) in walks {
        refused(args, &[what]);
    }
}

#[test]
fn options_a_command_cannot_use_are_refused() {
    // The machine boots only the kernel's address space: no --asid.
    refused(&["walk", "0xffff000000000000", "--asid", "1"], &["unexpected argument '--asid'"]);
    // An explicit seed where nothing is random, or where the seed comes from elsewhere.
    refused(&["--seed", "3", "boot"], &["--seed: boot draws no random numbers"]);
    refused(&["--seed", "3", "walk", "0xffff800080000000"], &["--seed: walk"]);
    refused(&["--seed", "3", "hugetlb", "2M/nr_hugepages=1"], &["--seed: hugetlb"]);
    refused(&["--seed", "3", "stat", "buddyinfo"], &["--seed: stat without --after-ops"]);
    refused(&["--seed", "3", "reproduce", "linear-map"], &["--seed: reproduce linear-map"]);
    refused(&["reproduce", "linear-map", "--full"], &["--full: linear-map runs no loops"]);
    refused(&["stat", "boot-state", "--after-ops", "10"], &["--after-ops does not apply to `stat boot-state`"]);
    refused(&["--seed", "3", "replay", "x.replay"], &["--seed do not apply"]);
    refused(&["--seed", "3", "trace", "replay", "x.replay"], &["--seed do not apply"]);
    refused(&["--seed", "3", "compare", "--merge", "x.jsonl"], &["--seed do not apply"]);
    refused(&["--seed", "3", "compare", "run_test_mask=1", "--new", "", "--seeds", "0..2"], &["--seed: --seeds"]);
}

#[test]
fn a_walk_that_faults_exits_1() {
    // Past the end of the linear map of 64 MiB of RAM.
    let o = mmlab(&["--mem", "64M", "walk", "0xffff000004000000"]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stdout.contains("=> translation fault at level 2"), "{}", o.stdout);
    assert!(o.stderr.contains("mmlab: walk: translation fault"), "{}", o.stderr);
    let o = mmlab(&["--mem", "64M", "walk", "--struct-page", "0x40001"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
}

#[test]
fn more_bad_values_name_the_option() {
    refused(&["--cpus", "0", "stat", "buddyinfo"], &["'--cpus <N>'", "1 to 256"]);
    refused(&["--cpus", "1000", "stat", "buddyinfo"], &["'--cpus <N>'", "1 to 256"]);
    refused(&["--cpus", "", "stat", "buddyinfo"], &["'--cpus <N>'", "empty"]);
    refused(&["--seed", "18446744073709551616", "stat", "buddyinfo"], &["'--seed <S>'", "above"]);
    for mem in ["0", "1K", "100T", "3M", "abc", ""] {
        refused(&["--mem", mem, "stat", "buddyinfo"], &["--mem"]);
        refused(&["--mem", mem, "compare", "run_test_mask=1", "--new", ""], &["--mem"]);
    }
    refused(&["--set", "nope=1", "stat", "buddyinfo"], &["unknown setting \"nope\""]);
    refused(&["--set", "min_free_kbytes=", "stat", "buddyinfo"], &["min_free_kbytes"]);
    refused(&["--set", "", "stat", "buddyinfo"], &["key=value"]);
    refused(&["test-vmalloc", "nr_pages="], &["nr_pages"]);
    refused(&["--mem", "64M", "compare", "run_test_mask=1", "--new", "bogus=1"], &["new: unknown setting"]);
    refused(&["--mem", "64M", "compare", "run_test_mask=1", "--new", "", "--counters", "nope"], &["unknown counter"]);
}

#[test]
fn every_reproduction_draws_what_plot_asks_for() {
    // linear-map draws map_mem() per variant beside the published (the
    // others are too slow for a debug test; tests/tests/report_figures.rs
    // parses every figure), and --html writes the page.
    let dir = std::env::temp_dir().join(format!("mmlab-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("r.html");
    let o = mmlab(&[
        "reproduce",
        "linear-map",
        "--plot",
        dir.join("r.svg").to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let svg = std::fs::read_to_string(dir.join("r-linear-map-map-mem.svg")).expect("the chart was written");
    assert!(svg.contains("<svg") && svg.contains("512G") && svg.contains("lazy-unmap"), "{svg}");
    assert!(svg.contains("data-name=\"published\""), "{svg}");
    let page = std::fs::read_to_string(&html).expect("the page was written");
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains(&svg[svg.find("<svg").unwrap()..]), "{page}");
    std::fs::remove_dir_all(&dir).unwrap();
    // An --html that cannot be written is refused before anything runs.
    let o = mmlab(&["reproduce", "linear-map", "--html", "/nonexistent/r.html"]);
    assert_eq!(o.code, Some(2), "{}", o.stdout);
    assert!(o.stderr.contains("--html: cannot write /nonexistent/r.html") && o.stdout.is_empty(), "{}", o.stderr);
}

/// `refused`, and `mmlab fuzz` did not start: no progress or summary line.
#[track_caller]
fn fuzz_refused(args: &[&str], needles: &[&str]) -> Out {
    let mut v = vec!["fuzz"];
    v.extend_from_slice(args);
    let o = refused(&v, needles);
    assert!(!o.stderr.contains("mmlab fuzz:"), "{args:?}: started running: {}", o.stderr);
    o
}

/// A directory of its own for one test.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mmlab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn fuzz_durations_ops_and_seeds_are_bounded() {
    // Each used to panic (Duration from a float, Instant overflow) or run
    // for hours.
    fuzz_refused(&["--time", "1e20"], &["'--time <DURATION>'", "`1e20` is not a duration"]);
    for t in ["1000000000000000d", "10000000000000000000", "7.5d", "604801"] {
        fuzz_refused(&["--time", t], &["'--time <DURATION>'", "longer than 7 days (604800 s)"]);
    }
    fuzz_refused(&["--time", "-1"], &["'--time <DURATION>'", "not a duration"]);
    for n in ["1000000001", "18446744073709551615"] {
        fuzz_refused(&["--ops", n], &["'--ops <N>'", "at most 1000000000"]);
    }
    fuzz_refused(
        &["--seeds", "0..18446744073709551615"],
        &["mmlab: --seeds: 18446744073709551615 seeds", "x --ops 100000", "at most 1000000000 (10^9)"],
    );
    // The product is bounded, not only each factor.
    fuzz_refused(&["--ops", "10000000", "--seeds", "0..101"], &["--seeds: 101 seeds", "= 1010000000 operations"]);
    fuzz_refused(&["--ops", "1000000", "--threads", "4", "--seeds", "0..300"], &["x --threads 4 = 1200000000"]);
    fuzz_refused(&["--shrink-time", "604801"], &["'--shrink-time <SECS>'", "at most 604800 s"]);
    fuzz_refused(&["--seeds", "5..5"], &["'--seeds <A..B>'", "the range is empty"]);
    fuzz_refused(&["--seeds", "0..18446744073709551616"], &["'--seeds <A..B>'", "end:"]);
    fuzz_refused(&["--threads", "0"], &["'--threads <N>'", "0 threads"]);
    fuzz_refused(&["--wrong", "65"], &["'--wrong <N>'", "at most 64"]);
    fuzz_refused(&["--check-every", "-1"], &["'--check-every <K>'", "is not a count"]);
}

#[test]
fn fuzz_runs_that_do_nothing_are_refused() {
    fuzz_refused(&["--ops", "0"], &["'--ops <N>'", "at least 1"]);
    fuzz_refused(&["--time", "0"], &["'--time <DURATION>'", "no time"]);
    fuzz_refused(&["--time", "0.0s"], &["'--time <DURATION>'", "no time"]);
    fuzz_refused(&["--fail-page-alloc", ""], &["'--fail-page-alloc <ATTRS>'", "empty"]);
    fuzz_refused(&["--fail-page-alloc", "interval=1"], &["'--fail-page-alloc <ATTRS>'", "probability=0"]);
    fuzz_refused(&["--fail-page-alloc", "probability=5,times=0"], &["'--fail-page-alloc <ATTRS>'", "times=0"]);
    fuzz_refused(&["--exclude", ""], &["'--exclude <LIST>'", "empty"]);
    // A --time shorter than one step still runs the first seed, so no run
    // is empty.
    let o = mmlab(&["fuzz", "--time", "0.001", "--ops", "50"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.starts_with("mmlab fuzz: 1 seed(s) from 1, 50 ops in "), "{}", o.stdout);
}

#[test]
fn fuzz_out_dir_is_checked_before_the_run() {
    let dir = scratch("fuzz-out-dir");
    let jsonl = dir.join("shard.jsonl");
    let j = jsonl.to_str().unwrap();
    fuzz_refused(
        &["--out-dir", "/nonexistent-mmlab-dir", "--jsonl", j],
        &["mmlab: --out-dir: /nonexistent-mmlab-dir:", "the directory must exist"],
    );
    assert!(!jsonl.exists(), "a refused run created {j}");
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    fuzz_refused(&["--out-dir", file.to_str().unwrap()], &["--out-dir:", "a-file is not a directory"]);
    fuzz_refused(&["--jsonl", "/nonexistent-mmlab-dir/s.jsonl"], &["--jsonl: opening /nonexistent-mmlab-dir/s.jsonl"]);
    // The check leaves nothing behind in a directory it accepts.
    let o = mmlab(&["fuzz", "--ops", "20", "--out-dir", dir.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("a-file")]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fuzz_options_that_do_nothing_are_refused() {
    fuzz_refused(&["--seed", "3", "--seeds", "0..2"], &["mmlab: --seed: --seeds A..B gives every run its own seed"]);
    fuzz_refused(&["--no-shrink", "--shrink-time", "5"], &["mmlab: --shrink-time: --no-shrink"]);
    fuzz_refused(&["--wrong", "0", "--exclude", "double_free"], &["mmlab: --exclude: --wrong 0"]);
    // Given explicitly, a default value is still an option given: `.` is
    // --out-dir's default, 60 --shrink-time's.
    fuzz_refused(&["--threads", "2", "--out-dir", "."], &["mmlab: --out-dir: --threads 2 runs are not replayable"]);
    fuzz_refused(&["--threads", "2", "--shrink-time", "60"], &["mmlab: --shrink-time: --threads 2"]);
    fuzz_refused(&["--threads", "2", "--no-shrink"], &["mmlab: --no-shrink: --threads 2"]);
    fuzz_refused(&["--threads", "8"], &["mmlab: --threads: 8 threads need as many CPUs (--cpus 4)"]);
}

/// Write `text` as `name` in `dir`; its path as a string.
fn write_replay(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn replay_files_are_checked_whole_before_anything_runs() {
    let dir = scratch("replay-check");
    let ok = "format 1\nmachine mem=64M cpus=4\ncpu0 drain_all_pages\n";
    // (name, file text, the error after `FILE: `)
    let cpu99 = format!("{ok}cpu99 drain_local_pages\n");
    let bogus = format!("{ok}cpu0 vmalloc size=4096 -> v1\ncpu0 vfree v1 expect=Bogus\n");
    let panic = format!("{ok}cpu0 drain_local_pages expect=Panic\n");
    let twice = format!("{ok}cpu0 drain_local_pages expect=Ok expect=Ok\n");
    let cases: [(&str, &str, &str); 9] = [
        ("cpu99", &cpu99, "line 4: cpu99: the machine of line 2 has 4 CPUs, cpu0 to cpu3"),
        ("cpu2", "format 1\ncpu0 drain_all_pages\ncpu2 drain_local_pages\n", "line 3: cpu2: the machine (no"),
        ("bogus", &bogus, "line 5: expect=Bogus: no such outcome"),
        ("panic", &panic, "line 4: expect=Panic: a panic is always a violation"),
        ("expect2", &twice, "line 4: `expect=` given twice"),
        ("cpus", "format 1\nmachine mem=64M cpus=1000\ncpu0 drain_all_pages\n", "line 2: machine cpus=1000: 1000 CPUs"),
        ("mem", "format 1\nmachine mem=3M\ncpu0 drain_all_pages\n", "line 2: machine mem=3M: "),
        (
            "set",
            "format 1\nset percpu_pagelist_high_fraction=8\nset nope=1\ncpu0 drain_all_pages\n",
            "line 3: set nope=1: unknown setting",
        ),
        ("seed", "format 1\nseed 1\nseed 2\ncpu0 drain_all_pages\n", "line 3: `seed` given twice (first on line 2)"),
    ];
    for (name, text, want) in cases {
        let f = write_replay(&dir, &format!("{name}.replay"), text);
        // Nothing ran: `replay` prints each op's result on stdout as it runs.
        refused(&["replay", &f], &[&format!("mmlab: {f}: {want}")]);
        refused(&["replay", "--trace", &f], &[&format!("mmlab: {f}: {want}")]);
        // trace replay refuses it before it opens its output.
        let out = dir.join(format!("{name}.trace"));
        refused(&["trace", "replay", &f, "--output", out.to_str().unwrap()], &[&format!("{f}: {want}")]);
        assert!(!out.exists(), "{name}: a refused trace replay created its output");
    }
    let f = write_replay(&dir, "empty.replay", "format 1\nmachine mem=64M\n");
    refused(&["replay", &f], &[&format!("mmlab: {f}: no operations")]);
    // The same file without its bad line runs.
    let f = write_replay(&dir, "ok.replay", ok);
    let o = mmlab(&["replay", &f]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("1 ops, no violation"), "{}", o.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// hugetlb's settings where they would be shown and ignored, and HVO's
/// sysctl where the kernel has none, are refused by name; a `hugepages=`
/// pool that falls short boots with the kernel's warning.
#[test]
fn hugetlb_settings_are_refused_where_they_do_nothing() {
    for cmd in [&["test-vmalloc", "run_test_mask=1"][..], &["boot"], &["walk", "0xffff000000000000"]] {
        let mut args = vec!["--set", "hugepages=4"];
        args.extend_from_slice(cmd);
        refused(&args, &["--set hugepages=4: ", cmd[0], "brings up no hugetlb"]);
    }
    // fuzz brings hugetlb up (its pools are fuzzed), but not with threads,
    // which run executors of their own without it.
    refused(
        &["--set", "hugepages=4", "fuzz", "--ops", "10", "--threads", "2"],
        &["--set hugepages=4: ", "fuzz --threads brings up no hugetlb"],
    );
    let fuzz = mmlab(&["--set", "hugepages=4", "fuzz", "--ops", "200"]);
    assert_eq!(fuzz.code, Some(0), "{}", fuzz.stderr);
    assert!(fuzz.stdout.contains("0 violation(s)"), "{}", fuzz.stdout);
    refused(&["--set", "hugetlb_optimize_vmemmap=on", "stat", "meminfo"], &["arm64 does not build HVO"]);
    let ok =
        mmlab(&["--set", "hugetlb_vmemmap.arm64=pause", "--set", "hugetlb_optimize_vmemmap=on", "stat", "meminfo"]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    let short = mmlab(&["--mem", "4G", "--set", "hugepagesz=1G", "--set", "hugepages=2", "stat", "meminfo"]);
    assert_eq!(short.code, Some(0), "{}", short.stderr);
    assert!(
        short.stderr.contains("HugeTLB: allocating 2 of page size 1.00 GiB failed.  Only allocated 1 hugepages."),
        "{}",
        short.stderr
    );
    assert!(short.stdout.contains("Hugetlb:         1048576 kB"), "{}", short.stdout);
}
