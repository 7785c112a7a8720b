//! `mmlab reproduce` records its run as every command does: the text starts
//! with the run header, `--json` carries the `run` object and one entry per
//! reproduction, and `--config` re-runs that JSON. `linear-map` is the
//! quick one (a few seconds in a debug build: it models map_mem() from
//! counts and runs no loops).

mod common;
use common::mmlab_command;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Run mmlab; (status, stdout, stderr).
fn mmlab(args: &[&str]) -> (Option<i32>, String, String) {
    common::output(mmlab_command().args(args))
}

struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp(name: &str, text: &str) -> TempFile {
    let p = std::env::temp_dir().join(format!("mmlab-reproduce-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    TempFile(p)
}

#[test]
fn reproduce_json_records_the_run_and_reruns_from_it() {
    let (code, out, err) = mmlab(&["reproduce", "linear-map", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).expect("one JSON object");
    assert!(out.starts_with("{\"run\":{"), "the run comes first: {out}");
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["host_seconds", "mode", "reproductions", "run"]);
    assert_eq!(v["run"]["seed"].as_u64(), Some(1));
    assert!(v["run"]["config"]["machine"].is_object() && v["run"]["config"]["vmalloc"].is_object());
    assert_eq!(v["mode"], "quick");
    let runs = v["reproductions"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let lm = &runs[0];
    assert_eq!((lm["name"].as_str(), lm["failed"].as_bool()), (Some("linear-map"), Some(false)));
    let tally = &lm["verdicts"]["tallies"][0];
    assert_eq!((tally["significant"].as_u64(), tally["direction"].as_u64()), (Some(16), Some(16)), "{tally}");
    let text = lm["text"].as_str().unwrap();
    assert!(text.starts_with("== linear-map: "), "{text}");

    // The record re-runs: the same report, under the run header.
    let file = temp("run.json", &out);
    let (code, again, err) = mmlab(&["--config", file.0.to_str().unwrap(), "reproduce", "linear-map"]);
    assert_eq!(code, Some(0), "{err}");
    let header = again.lines().next().unwrap();
    assert!(header.starts_with("# mmlab ") && header.contains(" mem=4G cpus=2 seed=1 quick;"), "{header}");
    assert!(again.contains(text), "the re-run prints another report:\n{again}");
    assert_eq!(again.matches("# mmlab ").count(), 1, "one header:\n{again}");
    assert!(again.trim_end().lines().last().unwrap().starts_with("# linear-map in "), "{again}");

    // A record with settings is not a reproduction's: refused, nothing run.
    let mut edited = v.clone();
    edited["run"]["sets"] = Value::from(vec!["vmalloc.contpte=off"]);
    edited["run"]["config"]["vmalloc"]["contpte"] = Value::Bool(false);
    let file = temp("edited.json", &edited.to_string());
    let (code, out, err) = mmlab(&["--config", file.0.to_str().unwrap(), "reproduce", "linear-map"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.is_empty() && err.contains("--config: the record has another machine or settings"), "{err}");
}

/// The header comes first and names the options given (`--seed`: the
/// reproductions boot their published machines, so `--set` is refused).
/// contpte takes a seed but runs for seconds: its header line is read and
/// the run stopped.
#[test]
fn reproduce_text_starts_with_the_run_header() {
    let mut child = mmlab_command()
        .args(["--seed", "7", "reproduce", "contpte"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run mmlab");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.starts_with("# mmlab ") && first.contains(" mem=4G cpus=2 seed=7 quick;"), "{first}");
    assert!(first.ends_with("machines: each reproduction's own, named in its report\n"), "{first}");

    let (code, out, err) = mmlab(&["--set", "vmalloc.contpte=off", "reproduce", "linear-map"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(err.contains("reproduce runs the published configurations; --set, --cpus and --mem do not apply"), "{err}");
}
