//! test_vmalloc's `KEY=VALUE` parameters of `compare` (where a value may be
//! a comma list) and `test-vmalloc` (one value each, as modprobe takes
//! them): a malformed list, a key given twice, a value out of the module's
//! range, two rows that run the same, are each refused (exit status 2,
//! nothing on stdout, no run started) naming the parameter.

mod common;
use common::{mmlab_command, output};

/// Exit 2, nothing on stdout, no run started, and stderr exactly
/// `mmlab: ` then `message`.
#[track_caller]
fn refused(args: &[&str], message: &str) {
    let (code, stdout, stderr) = output(mmlab_command().args(args));
    assert_eq!(code, Some(2), "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
    assert!(!stderr.contains("run 1/") && !stderr.contains("warm-up"), "{args:?} started: {stderr}");
    assert_eq!(stderr.trim_end(), format!("mmlab: {message}"), "{args:?}");
}

/// `compare` with the workload parameters `params`.
fn compare<'a>(params: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--mem", "64M", "compare", "run_test_mask=1", "test_loop_count=1"];
    v.extend_from_slice(params);
    v.extend_from_slice(&["--new", "", "--repeat", "2", "--warmup", "0"]);
    v
}

/// Before: the empty elements were dropped, and the rest compared.
#[test]
fn empty_list_elements() {
    refused(&compare(&["nr_pages=1,,2"]), "nr_pages=1,,2: value 2 of nr_pages's list is empty");
    refused(&compare(&["nr_pages=,1"]), "nr_pages=,1: value 1 of nr_pages's list is empty");
    refused(&compare(&["nr_pages=1,"]), "nr_pages=1,: value 2 of nr_pages's list is empty");
    refused(&compare(&["nr_pages=,"]), "no value for nr_pages");
}

/// Before: a value listed twice gave the row twice; a key given twice
/// kept its last list; `nr_pages=0,1` (the module takes 0 as 1) gave two
/// rows of the same run.
#[test]
fn repeats_are_refused() {
    refused(&compare(&["nr_pages=1,4,1"]), "nr_pages=1,4,1: 1 is listed twice in nr_pages's list (values 1 and 3)");
    refused(
        &compare(&["nr_pages=1", "nr_pages=2"]),
        "nr_pages given twice; give its values as one comma list (nr_pages=A,B,...)",
    );
    refused(
        &compare(&["nr_pages=0,1"]),
        "`run_test_mask=1 test_loop_count=1 nr_pages=0` and `run_test_mask=1 test_loop_count=1 nr_pages=1` run the \
         same fix_size_alloc_test (test_vmalloc.c takes them alike): one row twice",
    );
    refused(
        &compare(&["nr_pages=16,0x10"]),
        "`run_test_mask=1 test_loop_count=1 nr_pages=16` and `run_test_mask=1 test_loop_count=1 nr_pages=0x10` run \
         the same fix_size_alloc_test (test_vmalloc.c takes them alike): one row twice",
    );
}

#[test]
fn unknown_keys_and_values_out_of_range_name_the_parameter() {
    refused(
        &compare(&["nr_page=1,2"]),
        "unknown test_vmalloc parameter \"nr_page\"; parameters: nr_threads, sequential_test_order, \
         test_repeat_count, test_loop_count, nr_pages, use_huge, run_test_mask, nr_pcpu_objects, msleep_before_free, \
         pcp_sample_interval",
    );
    refused(&compare(&["use_huge=0,2"]), "bad value \"2\" for use_huge (1|0|y|n|yes|no|true|false|on|off)");
    refused(&compare(&["nr_pages=1,2147483648"]), "bad value \"2147483648\" for nr_pages: out of range for an int");
    refused(&compare(&["nr_pcpu_objects=0"]), "bad value \"0\" for nr_pcpu_objects: expected a positive number");
    // Before: "base: boot failed: bad machine configuration: cpus must be between 1 and 256, got 300".
    refused(
        &compare(&["nr_threads=1,300"]),
        "nr_threads=300: each worker runs on an emulated CPU of its own, and a machine has at most 256 CPUs",
    );
}

/// test-vmalloc takes one value per parameter, once.
#[test]
fn test_vmalloc_takes_one_value_each() {
    let tv = |p: &'static str| ["--mem", "64M", "test-vmalloc", "run_test_mask=1", "test_loop_count=1", p];
    // Before: `bad value "1,,2" for nr_pages: invalid digit found in string`.
    refused(
        &tv("nr_pages=1,,2"),
        "nr_pages=1,,2: test_vmalloc takes one value per parameter (comma lists are for compare)",
    );
    refused(&tv("test_loop_count=2"), "test_loop_count given twice (modprobe would take the last; give it once)");
    // Before: the clamped value was named, not the one given.
    refused(
        &tv("nr_threads=100000"),
        "nr_threads=100000 (65535 after the module's clamp to USHRT_MAX): each worker runs on an emulated CPU of its \
         own, and a machine has at most 256 CPUs",
    );
    let t = ["--mem", "64M", "trace", "test-vmalloc", "run_test_mask=1", "run_test_mask=2"];
    refused(&t, "run_test_mask given twice (modprobe would take the last; give it once)");
}
