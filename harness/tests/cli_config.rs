//! `mmlab --config RUN.json` re-runs a recorded run: the round trip gives
//! the same counters, and a record that was edited is refused with an
//! error naming the field (provenance module docs).

mod common;
use common::mmlab_command;
use serde_json::Value;

/// Run mmlab; (status, stdout, stderr).
fn mmlab(args: &[&str]) -> (Option<i32>, String, String) {
    common::output(mmlab_command().args(args))
}

const WORKLOAD: &[&str] = &["test-vmalloc", "run_test_mask=1", "test_loop_count=50", "nr_pages=16", "--json"];

/// A test-vmalloc run's JSON.
fn run(globals: &[&str]) -> Value {
    let mut args = globals.to_vec();
    args.extend_from_slice(WORKLOAD);
    let (code, out, err) = mmlab(&args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    serde_json::from_str(&out).expect("one JSON object")
}

/// The counters of a run, host time left out.
fn counters(v: &Value) -> Value {
    let mut c = v["counters"].clone();
    c.as_object_mut().unwrap().remove("zone_lock_hold_ns");
    c
}

struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp(name: &str, text: &str) -> TempFile {
    let p = std::env::temp_dir().join(format!("mmlab-config-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    TempFile(p)
}

#[test]
fn a_recorded_run_reruns_with_the_same_counters() {
    let first = run(&[
        "--mem",
        "128M",
        "--seed",
        "5",
        "--set",
        "barrier=count",
        "--set",
        "arm64.lazy_mmu_barrier_batching=0",
        "--set",
        "vmalloc.contpte=off",
        "--set",
        "vmalloc.free_pages_bulk=off",
    ]);
    let rec = &first["run"];
    assert_eq!((rec["mem"].as_str(), rec["cpus"].as_u64(), rec["seed"].as_u64()), (Some("128M"), Some(2), Some(5)));
    assert_eq!(rec["config"]["vmalloc"]["contpte"], Value::Bool(false));
    assert_eq!(rec["config"]["machine"]["lazy_mmu_barrier_batching"], Value::Bool(false));
    assert!(rec["revision"].as_str().is_some_and(|r| !r.is_empty()));
    let file = temp("run.json", &first.to_string());
    let again = run(&["--config", file.0.to_str().unwrap()]);
    assert_eq!(counters(&again), counters(&first));
    assert_eq!(again["run"]["config"], rec["config"]);
    assert_eq!(again["run"]["sets"], rec["sets"]);
    // The knobs took effect: the defaults give other counters.
    let plain = run(&["--mem", "128M", "--seed", "5", "--set", "barrier=count"]);
    assert_ne!(counters(&plain)["barriers"], counters(&first)["barriers"]);
    assert_ne!(counters(&plain)["zone_lock_acquire"], counters(&first)["zone_lock_acquire"]);
    // A bare record reads as well.
    let bare = temp("bare.json", &rec.to_string());
    assert_eq!(counters(&run(&["--config", bare.0.to_str().unwrap()])), counters(&first));
}

#[test]
fn an_edited_record_is_an_error_naming_the_field() {
    let first = run(&["--mem", "128M", "--set", "vmalloc.contpte=off"]);
    let refused = |edit: &dyn Fn(&mut Value), needle: &str| {
        let mut v = first.clone();
        edit(&mut v);
        let file = temp("edited.json", &v.to_string());
        let mut args = vec!["--config", file.0.to_str().unwrap()];
        args.extend_from_slice(WORKLOAD);
        let (code, out, err) = mmlab(&args);
        assert_eq!(code, Some(2), "{needle}: {out}");
        assert!(out.is_empty() && err.contains(needle), "{needle} not in: {err}");
    };
    refused(
        &|v| {
            v["run"]["config"]["vmalloc"].as_object_mut().unwrap().remove("contpte");
        },
        "run record: config.vmalloc.contpte is missing",
    );
    refused(
        &|v| v["run"]["config"]["vmalloc"]["contpte"] = Value::Bool(true),
        "run record: config.vmalloc.contpte is true in the record, but its settings give false",
    );
    refused(&|v| v["run"]["config"]["machine"]["tlb_entries"] = Value::from(64), "config.machine.tlb_entries is 64");
    refused(&|v| v["run"].as_object_mut().unwrap().remove("seed").map(drop).unwrap(), "\"seed\" is missing");
    refused(&|v| v["run"]["sets"] = Value::from(vec!["vmalloc.contpte=maybe"]), "vmalloc.contpte");
    // Options given alongside the record are refused: the record is the run.
    let file = temp("given.json", &first.to_string());
    let (code, _, err) = mmlab(&["--config", file.0.to_str().unwrap(), "--mem", "1G", "boot"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--config takes --mem, --cpus, --seed and --set from the record"), "{err}");
}

/// Every JSON output carries the run; text outputs start with its header
/// line, and the /proc files keep the kernel's format with the header on
/// stderr.
#[test]
fn every_output_records_its_run() {
    let set = ["--mem", "128M", "--set", "vmalloc.contpte=off"];
    let with = |args: &[&str]| {
        let mut v = set.to_vec();
        v.extend_from_slice(args);
        let (code, out, err) = mmlab(&v);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        (out, err)
    };
    for args in [
        &["boot", "--json"][..],
        &["hugetlb", "2M/nr_hugepages=1", "--json"],
        &["compare", "--base", "", "--new", "vmalloc.contpte=on", "--repeat", "2", "--warmup", "0", "--format", "json"],
    ] {
        let mut args = args.to_vec();
        if args[0] == "compare" {
            args.extend_from_slice(&["run_test_mask=1", "test_loop_count=5"]);
        }
        let (out, _) = with(&args);
        let v: Value = serde_json::from_str(&out).expect("one JSON object");
        assert_eq!(v["run"]["sets"], Value::from(vec!["vmalloc.contpte=off"]), "{args:?}");
        assert_eq!(v["run"]["config"]["machine"]["mem_bytes"], Value::from(128u64 << 20), "{args:?}");
    }
    let header = "mem=128M cpus=2 seed=1 vmalloc.contpte=off\n";
    let (out, _) = with(&["boot"]);
    assert!(out.starts_with("# mmlab ") && out.lines().next().unwrap().ends_with(header.trim_end()), "{out}");
    let (out, err) = with(&["stat", "buddyinfo"]);
    assert!(out.starts_with("Node 0, zone"), "{out}");
    assert!(err.starts_with("# mmlab ") && err.contains(header), "{err}");
}
