//! `mmlab trace kernel FILE` on traces that are empty, cut, malformed or
//! inconsistent: each is refused (exit status 2, nothing on stdout) with a
//! message naming the file and the line, and the whole file is checked
//! before the machine boots (the boot prints the run's `# mmlab ...`
//! record on stderr: a refused trace has none). The traces are built in a
//! temporary directory, from the shipped ones (`tests/data/trace/`) or by
//! hand.

mod common;
use common::{mmlab_command, output};
use std::path::{Path, PathBuf};

fn shipped(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/trace").join(name);
    std::fs::read_to_string(p).unwrap()
}

/// A directory of its own for a test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("mmlab-cli-bad-files-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    /// Write `text` as `name`; its path.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `mmlab [pre] trace kernel FILE [post]`: (status, stdout, stderr).
fn trace_kernel(pre: &[&str], file: &Path, post: &[&str]) -> (Option<i32>, String, String) {
    output(mmlab_command().args(pre).args(["trace", "kernel"]).arg(file).args(post))
}

/// Refused before the boot: exit 2, nothing on stdout, no run record on
/// stderr, and stderr `mmlab: FILE: ` then `message` exactly.
#[track_caller]
fn refused(pre: &[&str], file: &Path, post: &[&str], message: &str) {
    let (code, stdout, stderr) = trace_kernel(pre, file, post);
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(!stderr.contains("# mmlab "), "the machine booted: {stderr}");
    assert_eq!(stderr.trim_end(), format!("mmlab: {}: {message}", file.display()));
}

const EVENT: &str = " t-1 [000] ..... 1.000001: mm_page_alloc: page=1 pfn=0x1000 order=0 migratetype=1 gfp_flags=X\n";

/// Before: "decisions equal: 0 of 0 (100.0 %)" with --cpus, exit 0.
#[test]
fn an_empty_trace_has_no_events() {
    let d = TempDir::new("empty");
    let f = d.file("empty.trace", "");
    refused(&[], &f, &[], "no events: the file is empty");
    refused(&["--cpus", "2"], &f, &[], "no events: the file is empty");
    let f = d.file("header.trace", "# mmlab: cpus=2\n# tracer: nop\n#\n");
    refused(&[], &f, &[], "no events in 3 lines (comments and the header only)");
    let f = d.file("garbage.trace", "# mmlab: cpus=1\n\u{1}garbage \u{fffd}\nmore garbage\n");
    refused(&[], &f, &[], "no events in 3 lines; line 2: malformed line: no [CPU] column");
    let drains = " t-1 [000] ..... 1.0: mm_page_pcpu_drain: page=1 pfn=0x10 order=0 migratetype=0\n";
    let f = d.file("drains.trace", &format!("# mmlab: cpus=1\n{drains}"));
    refused(&[], &f, &[], "line 2: none of the 1 events is an allocation that succeeded or a free: nothing to replay");
}

/// The shipped x86 trace's header (line 2: zone, managed, batch, high_min,
/// high_max) with one value made impossible. Before: managed=0 was refused
/// after the boot naming an event line, the others were replayed.
#[test]
fn impossible_header_values_name_the_header_line() {
    let d = TempDir::new("header");
    let anon = shipped("anon-touch-cpu1.trace");
    for (from, to, message) in [
        ("managed=5372960", "managed=0", "line 2: the trace's header: `managed=0`: out of range: at least 1"),
        ("batch=63", "batch=0", "line 2: the trace's header: `batch=0`: out of range: 1..=2147483647"),
        (
            "high_min=252",
            "high_min=300",
            "line 2: the trace's header: `high_min=300`: above high_max=252: the pcp high ranges from high_min to \
             high_max",
        ),
        (
            "high_min=252",
            "high_min=100",
            "line 2: the trace's header: `high_min=100`: below 4 x batch=63: zone_highsize() keeps high at least \
             batch << 2",
        ),
        ("cpus=2", "cpus=0", "line 1: the trace's header: `cpus=0`: out of range: 1..=256"),
        ("cpus=2", "cpus=two", "line 1: the trace's header: `cpus=two`: not a number (decimal, or hex with 0x)"),
        (
            "percpu_pagelist_high_fraction=100000",
            "percpu_pagelist_high_fraction=4",
            "line 2: the trace's header: `percpu_pagelist_high_fraction=4`: the sysctl takes 0 or 8..=2147483647 \
             (EINVAL)",
        ),
        (
            "pcp_count_cpu1=265",
            "pcp_count_cpu2=265",
            "line 3: the trace's header: `pcp_count_cpu2=265`: CPU 2 is not a CPU of cpus=2",
        ),
        ("cpus=2", "cpus=2 cpus=3", "line 1: `cpus` a second time (first on line 1)"),
        (
            "rounds=3",
            "rounds=3 nr_cpus=2",
            "line 1: unknown key `nr_cpus` (keys: kernel, machine, cpu, workload, mem, cpus, traced_cpu, pages, rounds, boot_trace, entries, written, events, zone, managed, batch, high_min, high_max, percpu_pagelist_high_fraction, max_pfn, pcp_count_cpuN)",
        ),
        ("rounds=3", "rounds=3 verbose", "line 1: `verbose` is not key=value"),
    ] {
        assert!(anon.contains(from), "{from}");
        let f = d.file("bad.trace", &anon.replacen(from, to, 1));
        refused(&[], &f, &[], message);
    }
}

/// A `# mmlab:` line after the first event was ignored before.
#[test]
fn header_lines_come_first() {
    let d = TempDir::new("late");
    let f = d.file("late.trace", &format!("# mmlab: cpus=1\n{EVENT}# mmlab: managed=10\n"));
    refused(&[], &f, &[], "line 3: a `# mmlab:` line after the first event (line 2): the header comes first");
}

/// An event on CPU 2 of a 2-CPU trace: refused before the boot (before: after it).
#[test]
fn an_event_on_a_cpu_the_header_has_not() {
    let d = TempDir::new("cpu");
    let anon = shipped("anon-touch-cpu1.trace");
    let n = anon.lines().position(|l| l.contains("[001]")).unwrap();
    let mut lines: Vec<String> = anon.lines().map(str::to_string).collect();
    lines[n] = lines[n].replacen("[001]", "[002]", 1);
    let f = d.file("cpu2.trace", &(lines.join("\n") + "\n"));
    let message = format!(
        "mmlab: {}: line {}: event on a CPU outside the traced machine: CPU 2 on a machine of 2 CPUs (the trace's \
         `# mmlab: cpus=` or --cpus is wrong)",
        f.display(),
        n + 1
    );
    for on_error in ["skip", "stop"] {
        let (code, stdout, stderr) = trace_kernel(&[], &f, &["--on-error", on_error]);
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{stderr}");
        assert_eq!(stderr.trim_end(), message);
    }
    // Without a header, --cpus is the machine.
    let f = d.file("nohdr.trace", &EVENT.replace("[000]", "[003]"));
    let (code, _, stderr) = trace_kernel(&["--cpus", "2"], &f, &[]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("line 1: event on a CPU outside the traced machine: CPU 3 on a machine of 2 CPUs"),
        "{stderr}"
    );
    assert!(!stderr.contains("# mmlab "), "{stderr}");
}

/// Two lines swapped: before, replayed in the swapped order.
#[test]
fn timestamps_out_of_order() {
    let d = TempDir::new("order");
    let anon = shipped("anon-touch-cpu1.trace");
    let mut lines: Vec<&str> = anon.lines().collect();
    let n = lines.iter().position(|l| l.contains(": mm_page_")).unwrap() + 10;
    let ts = |l: &str| {
        l.split_whitespace().find(|w| w.ends_with(':') && w.contains('.')).unwrap().trim_end_matches(':').to_string()
    };
    // Two lines of different times.
    let m = (n + 1..lines.len()).find(|&m| ts(lines[m]) != ts(lines[n])).unwrap();
    lines.swap(n, m);
    let f = d.file("swapped.trace", &(lines.join("\n") + "\n"));
    let (code, stdout, stderr) = trace_kernel(&[], &f, &[]);
    assert_eq!((code, stdout.as_str()), (Some(2), ""), "{stderr}");
    let first_bad = (n + 1..=m).find(|&i| ts(lines[i]) < ts(lines[i - 1])).unwrap();
    let want = format!(
        "mmlab: {}: line {}: timestamp {} is before line {}'s {}: ftrace prints the events in time order",
        f.display(),
        first_bad + 1,
        ts(lines[first_bad]),
        first_bad,
        ts(lines[first_bad - 1])
    );
    assert!(stderr.starts_with(&want), "{want}\n{stderr}");
}

/// The arm64 workload trace cut at a line boundary: its header's `events=`
/// says so. Before: replayed as if whole.
#[test]
fn a_cut_trace_is_refused() {
    let d = TempDir::new("cut");
    let w = shipped("arm64-7.2.13-2G-3cpu-workload.trace");
    let cut: String = w.lines().take(5000).map(|l| format!("{l}\n")).collect();
    let events = cut.lines().filter(|l| !l.starts_with('#')).count();
    let f = d.file("cut.trace", &cut);
    refused(
        &[],
        &f,
        &[],
        &format!("line 2: the trace's header: `events=7386`: the file has {events} event lines (cut, or lines added?)"),
    );
    // A from-boot capture that lost events does not start at the boot.
    let b = shipped("arm64-7.2.13-2G-3cpu-boot.trace").replacen("written=24235", "written=30000", 1);
    let f = d.file("lost.trace", &b);
    refused(
        &[],
        &f,
        &[],
        "line 2: the trace's header: `written=30000`: 5765 events lost (entries=24235): a from-boot capture must \
         start at the boot",
    );
}

/// Lines out of the kernel's ranges are malformed: with --on-error stop
/// they are refused before the boot.
#[test]
fn malformed_lines_stop_before_the_boot() {
    let d = TempDir::new("malformed");
    for (from, to, message) in [
        ("order=0", "order=11", "order=11 out of range (0..=10, MAX_PAGE_ORDER)"),
        ("migratetype=1", "migratetype=7", "migratetype=7 out of range (0..6, MIGRATE_TYPES)"),
        ("1.000001:", "99999999999999999.000001:", "timestamp 99999999999999999.000001 out of range"),
        ("pfn=0x1000", "pfn=0xzz", "pfn=0xzz is not a number"),
        (" t-1 [000]", " t-1", "no [CPU] column"),
    ] {
        let f = d.file("m.trace", &format!("# mmlab: cpus=1\n{EVENT}{}", EVENT.replacen(from, to, 1)));
        refused(&[], &f, &["--on-error", "stop"], &format!("line 3: malformed line: {message}"));
    }
    let f = d.file("u.trace", &format!("# mmlab: cpus=1\n{EVENT} t-1 [000] ..... 1.5: sched_switch: prev_comm=t\n"));
    refused(
        &[],
        &f,
        &["--on-error", "stop"],
        "line 3: unknown event `sched_switch` (the replay takes kmem:mm_page_alloc, mm_page_free, \
         mm_page_free_batched, mm_page_alloc_zone_locked, mm_page_pcpu_drain)",
    );
}

/// Every operation skipped: an error after the replay, not "100.0 %".
#[test]
fn nothing_replayed_is_an_error() {
    let d = TempDir::new("nothing");
    let f = d.file("outside.trace", &format!("# mmlab: cpus=1 max_pfn=0x100\n{EVENT}"));
    let (code, stdout, stderr) = trace_kernel(&["--mem", "64M"], &f, &[]);
    assert_eq!((code, stdout.as_str()), (Some(2), ""), "{stderr}");
    assert!(
        stderr.ends_with(&format!(
            "mmlab: {}: nothing replayed: every allocation and free of the 1 events was skipped (1 x pfn outside the \
             traced machine); --on-error stop names the first\n",
            f.display()
        )),
        "{stderr}"
    );
}

/// More pages held at once than `managed=`: the file is named now.
#[test]
fn managed_below_the_live_pages_names_the_file() {
    let d = TempDir::new("managed");
    let two = EVENT.replace("order=0", "order=3");
    let f = d.file("m.trace", &format!("# mmlab: cpus=1 managed=6\n{two}"));
    refused(&[], &f, &[], "line 2: 8 pages allocated and not freed, more than the header's managed=6");
}
