//! A timeline of a trace in the Chrome trace-event JSON format, which
//! ui.perfetto.dev (and chrome://tracing) opens.
//!
//! One process, "mmlab machine", with one thread track per emulated CPU
//! (`cpu N`, tid N + 1). On each CPU track:
//! - complete slices (`ph: "X"`) for the operations the engine brackets
//!   with `mmlab_func` events: `vmalloc` (and its variants), `vfree`,
//!   `__purge_vmap_area_lazy`, `free_pcppages_bulk` (a pcp drain),
//!   `rmqueue_bulk` (a pcp refill), `synchronize_rcu`,
//!   `hugetlb_vmemmap_optimize_folios`; nested as they ran;
//! - instant events (`ph: "i"`, thread scope) for every other selected
//!   event, with its fields as `args`.
//!
//! Counter tracks (`ph: "C"`): `pcp count cpuN` and `pcp high cpuN` (from
//! `mmlab_state:pcp_state`), `free blocks order N` (from
//! `mmlab_state:buddyinfo`), `vmap lazy pages` (from
//! `vmalloc:free_vmap_area_noflush`, back to 0 at each
//! `vmalloc:purge_vmap_area_lazy`), and `TLB entries cpuN` (from
//! `mmlab_tlb:tlbi`, the issuing CPU's live entries after the op).
//!
//! Timestamps are the trace clock's ticks, written as microseconds. The
//! file is built from the serialisable [`ChromeTrace`] and written by
//! serde_json.

use super::event::{FieldValue, TraceEvent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The pid of the machine's process.
pub const PID: u32 = 1;

/// A Chrome trace-event file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChromeTrace {
    /// The events, sorted by timestamp (metadata first).
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<ChromeEvent>,
    /// `"ms"` or `"ns"`: how the viewer shows times.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: String,
    /// Free-form: what produced the trace.
    #[serde(rename = "otherData", default)]
    pub other_data: BTreeMap<String, String>,
}

/// One trace event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChromeEvent {
    /// Slice, instant, counter or metadata name.
    pub name: String,
    /// Phase: `X` complete, `i` instant, `C` counter, `M` metadata.
    pub ph: String,
    /// Start, microseconds.
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    /// Duration of an `X` slice, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur: Option<u64>,
    /// Category (the ftrace system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cat: Option<String>,
    /// Scope of an instant: `t` (thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// Fields; a counter's series.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, FieldValue>,
}

fn tid(cpu: u64) -> u32 {
    cpu as u32 + 1
}

fn ev(name: String, ph: &str, ts: u64, tid: u32) -> ChromeEvent {
    ChromeEvent { name, ph: ph.to_owned(), ts, pid: PID, tid, dur: None, cat: None, s: None, args: BTreeMap::new() }
}

fn counter(name: String, ts: u64, value: i64) -> ChromeEvent {
    let mut e = ev(name, "C", ts, 0);
    e.args.insert("value".to_owned(), FieldValue::I64(value));
    e
}

/// Build the timeline of `events` (as collected, in emission order).
/// `title` goes in `otherData`.
pub fn build(events: &[TraceEvent], title: &str) -> ChromeTrace {
    let mut out: Vec<ChromeEvent> = Vec::new();
    let mut cpus: Vec<u64> = events.iter().map(|e| e.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let mut meta = vec![{
        let mut m = ev("process_name".to_owned(), "M", 0, 0);
        m.args.insert("name".to_owned(), FieldValue::Str("mmlab machine".to_owned()));
        m
    }];
    for &c in &cpus {
        let mut m = ev("thread_name".to_owned(), "M", 0, tid(c));
        m.args.insert("name".to_owned(), FieldValue::Str(format!("cpu {c}")));
        meta.push(m);
    }
    // Open slices per CPU: (name, start).
    let mut open: BTreeMap<u64, Vec<(String, u64)>> = BTreeMap::new();
    let last_ts = events.iter().map(|e| e.ts).max().unwrap_or(0);
    let mut lazy = 0i64;
    for e in events {
        match (e.system, e.name) {
            ("mmlab_func", "func_entry") => open.entry(e.cpu).or_default().push((e.s("func").to_owned(), e.ts)),
            ("mmlab_func", "func_exit") => {
                let stack = open.entry(e.cpu).or_default();
                // Close the innermost slice of that name (an exit without
                // an entry, as in a trace started mid-operation, is dropped).
                if let Some(i) = stack.iter().rposition(|(n, _)| n == e.s("func")) {
                    let (name, start) = stack.remove(i);
                    let mut x = ev(name, "X", start, tid(e.cpu));
                    x.dur = Some(e.ts - start);
                    x.cat = Some("mmlab_func".to_owned());
                    out.push(x);
                }
            }
            ("mmlab_state", "pcp_state") => {
                out.push(counter(format!("pcp count cpu{}", e.cpu), e.ts, e.i("count") as i32 as i64));
                out.push(counter(format!("pcp high cpu{}", e.cpu), e.ts, e.i("high") as i32 as i64));
            }
            ("mmlab_state", "buddyinfo") => {
                for (k, v) in &e.fields {
                    if let Some(o) = k.strip_prefix("free") {
                        out.push(counter(format!("free blocks order {o:>2}"), e.ts, v.bits() as i64));
                    }
                }
            }
            _ => {
                if (e.system, e.name) == ("vmalloc", "free_vmap_area_noflush") {
                    lazy = e.i("nr_lazy");
                    out.push(counter("vmap lazy pages".to_owned(), e.ts, lazy));
                } else if (e.system, e.name) == ("vmalloc", "purge_vmap_area_lazy") && lazy != 0 {
                    lazy = 0;
                    out.push(counter("vmap lazy pages".to_owned(), e.ts, 0));
                } else if (e.system, e.name) == ("mmlab_tlb", "tlbi") {
                    out.push(counter(format!("TLB entries cpu{}", e.cpu), e.ts, e.i("entries")));
                }
                let mut i = ev(e.name.to_owned(), "i", e.ts, tid(e.cpu));
                i.cat = Some(e.system.to_owned());
                i.s = Some("t".to_owned());
                i.args = e.fields.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
                out.push(i);
            }
        }
    }
    // Slices still open at the end close at the last event.
    for (cpu, stack) in open {
        for (name, start) in stack.into_iter().rev() {
            let mut x = ev(name, "X", start, tid(cpu));
            x.dur = Some(last_ts - start);
            x.cat = Some("mmlab_func".to_owned());
            out.push(x);
        }
    }
    // Stable: at equal ts, an outer slice (pushed at its later exit) must
    // still come before the inner ones that start at the same tick.
    out.sort_by(|a, b| a.ts.cmp(&b.ts).then(b.dur.unwrap_or(0).cmp(&a.dur.unwrap_or(0))));
    meta.extend(out);
    let mut other = BTreeMap::new();
    other.insert("producer".to_owned(), format!("mmlab {}", env!("CARGO_PKG_VERSION")));
    other.insert("title".to_owned(), title.to_owned());
    other.insert("clock".to_owned(), "logical: one tick per emitted event, shown as 1 us".to_owned());
    ChromeTrace { trace_events: meta, display_time_unit: "ms".to_owned(), other_data: other }
}

/// The timeline as JSON text.
pub fn to_json(t: &ChromeTrace) -> String {
    let mut s = serde_json::to_string(t).unwrap_or_default();
    s.push('\n');
    s
}

/// What is wrong with a parsed trace-event file, if anything: a missing
/// required field for its phase, or timestamps going back on a track.
pub fn validate(t: &ChromeTrace) -> Result<(), String> {
    let mut last: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for (i, e) in t.trace_events.iter().enumerate() {
        if e.name.is_empty() || e.ph.is_empty() {
            return Err(format!("event {i}: empty name or ph"));
        }
        match e.ph.as_str() {
            "X" if e.dur.is_none() => return Err(format!("event {i} ({}): X without dur", e.name)),
            "C" if e.args.is_empty() => return Err(format!("event {i} ({}): C without args", e.name)),
            "C" if e.args.values().any(|v| matches!(v, FieldValue::Str(_))) => {
                return Err(format!("event {i} ({}): a counter value is not a number", e.name));
            }
            "X" | "C" | "i" | "M" => {}
            other => return Err(format!("event {i}: unknown phase {other}")),
        }
        let l = last.entry((e.pid, e.tid)).or_insert(0);
        if e.ts < *l {
            return Err(format!("event {i} ({}): ts {} before {} on track {}/{}", e.name, e.ts, l, e.pid, e.tid));
        }
        *l = e.ts;
    }
    Ok(())
}
