//! Printing [`TraceEvent`]s as the kernel's `trace` file shows them, or as
//! JSON lines.
//!
//! This is the one printer of trace events: `mmlab trace pages` (the kmem
//! events alone, [`crate::output::trace`]) and the other `trace` commands
//! print through it. Each event's text follows its `TP_printk`:
//!
//! | event | text |
//! |---|---|
//! | `kmem:mm_page_alloc` | `page=%p pfn=0x%lx order=%d migratetype=%d gfp_flags=%s` (a NULL page and pfn 0 when the allocation failed) |
//! | `kmem:mm_page_free` | `page=%p pfn=0x%lx order=%d` |
//! | `kmem:mm_page_free_batched` | `page=%p pfn=0x%lx order=0` |
//! | `kmem:mm_page_alloc_zone_locked` | `page=%p pfn=0x%lx order=%u migratetype=%d percpu_refill=%d` |
//! | `kmem:mm_page_pcpu_drain` | `page=%p pfn=0x%lx order=%d migratetype=%d` |
//! | `kmem:mm_page_alloc_extfrag` | `page=%p pfn=0x%lx alloc_order=%d fallback_order=%d pageblock_order=%d alloc_migratetype=%d fallback_migratetype=%d fragmenting=%d change_ownership=%d` |
//! | `vmalloc:alloc_vmap_area` | `va_start: %lu size=%lu align=%lu vstart=0x%lx vend=0x%lx failed=%d` (the kernel prints `va_start` in decimal) |
//! | `vmalloc:purge_vmap_area_lazy` | `start=0x%lx end=0x%lx num_purged=%u` |
//! | `vmalloc:free_vmap_area_noflush` | `va_start=0x%lx nr_lazy=%lu nr_lazy_max=%lu` |
//! | `rcu:rcu_grace_period` | `%s %ld %s`: `rcu_preempt 5 start` |
//! | `mmlab_*` | `key=value`, addresses in hex |
//!
//! An ftrace line starts with the kernel's context columns
//! (`trace_print_context()` with the default options): task `mmlab-<cpu>`,
//! pid `1000 + cpu`, the CPU, the five irq/preempt flag columns (always
//! `.....`) and the timestamp in seconds (one trace-clock tick is one
//! microsecond). `%p` (`page`, the struct page's address in the emulated
//! vmemmap) is shown in full, as on a kernel booted with
//! `no_hash_pointers`.
//!
//! A JSON line has `ts`, `cpu`, `event` (`system:name`) and then exactly
//! the key/value pairs of the text, in the same order, under the kernel's
//! names: numbers as JSON numbers, `%p` as a 16-digit hex string, names
//! (`gfp_flags`) as strings. One serialiser ([`json()`]) writes every event.

use super::event::{FieldValue, TraceEvent};
use crate::output::json;
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::trace::{NO_PFN, PAGEBLOCK_ORDER};
use serde::ser::{SerializeMap, Serializer};
use std::fmt::Write as _;

/// One value of a printed event.
enum Val {
    /// `%p`: 16 hex digits (a JSON string).
    Ptr(u64),
    /// `0x%lx` (a JSON number).
    Hex(u64),
    /// `%d` / `%u`.
    Int(i64),
    /// `%lu` of a full 64-bit value.
    UInt(u64),
    /// `%s` (a JSON string).
    Str(String),
}

/// How a pair is laid out in the text.
#[derive(Clone, Copy)]
enum Sep {
    /// ` key=value`.
    Eq,
    /// ` key: value`.
    Colon,
    /// ` value` (the key is only in JSON).
    Bare,
}

type Pairs = Vec<(&'static str, Val, Sep)>;

/// The printed pairs of a kmem event, in `TP_printk` order, with its
/// conversions (`%d` of a 32-bit field reinterprets its low 32 bits as
/// signed); `None` for a name kmem does not have.
fn kmem_pairs(ev: &TraceEvent) -> Option<Pairs> {
    let d = |k: &'static str| (k, Val::Int(i64::from(ev.u(k) as u32 as i32)), Sep::Eq);
    let u = |k: &'static str| (k, Val::Int(i64::from(ev.u(k) as u32)), Sep::Eq);
    let page = |p: u64| ("page", Val::Ptr(p), Sep::Eq);
    let pfn = |p: u64| ("pfn", Val::Hex(p), Sep::Eq);
    let int = |k: &'static str, v: i64| (k, Val::Int(v), Sep::Eq);
    // A NULL page and pfn 0 when the kernel recorded -1UL.
    let (p, f) = if ev.u("pfn") == NO_PFN { (0, 0) } else { (ev.u("page"), ev.u("pfn")) };
    let (rp, rf) = (ev.u("page"), ev.u("pfn"));
    Some(match ev.name {
        "mm_page_alloc" => {
            let gfp = Gfp::from_bits_retain(ev.u("gfp_flags") as u32).to_string();
            vec![page(p), pfn(f), d("order"), d("migratetype"), ("gfp_flags", Val::Str(gfp), Sep::Eq)]
        }
        "mm_page_free" => vec![page(rp), pfn(rf), d("order")],
        "mm_page_free_batched" => vec![page(rp), pfn(rf), int("order", 0)],
        "mm_page_alloc_zone_locked" => vec![page(p), pfn(f), u("order"), d("migratetype"), d("percpu_refill")],
        "mm_page_pcpu_drain" => vec![page(rp), pfn(rf), d("order"), d("migratetype")],
        "mm_page_alloc_extfrag" => {
            let fallback_order = i64::from(ev.u("fallback_order") as u32 as i32);
            let pageblock_order = i64::from(PAGEBLOCK_ORDER);
            vec![
                page(rp),
                pfn(rf),
                d("alloc_order"),
                d("fallback_order"),
                int("pageblock_order", pageblock_order),
                d("alloc_migratetype"),
                d("fallback_migratetype"),
                int("fragmenting", i64::from(fallback_order < pageblock_order)),
                d("change_ownership"),
            ]
        }
        _ => return None,
    })
}

/// The printed pairs of an event, in `TP_printk` order.
fn pairs(ev: &TraceEvent) -> Pairs {
    if ev.system == "kmem" {
        return kmem_pairs(ev).unwrap_or_default();
    }
    let hex = |k: &'static str| (k, Val::Hex(ev.u(k)), Sep::Eq);
    let dec = |k: &'static str| (k, Val::UInt(ev.u(k)), Sep::Eq);
    let st = |k: &'static str| (k, Val::Str(ev.s(k).to_owned()), Sep::Eq);
    match (ev.system, ev.name) {
        ("vmalloc", "alloc_vmap_area") => vec![
            ("addr", Val::UInt(ev.u("addr")), Sep::Colon),
            dec("size"),
            dec("align"),
            hex("vstart"),
            hex("vend"),
            ("failed", Val::Int(i64::from(ev.u("failed") as u32 as i32)), Sep::Eq),
        ],
        ("vmalloc", "purge_vmap_area_lazy") => {
            vec![hex("start"), hex("end"), ("npurged", Val::Int(i64::from(ev.u("npurged") as u32)), Sep::Eq)]
        }
        ("vmalloc", "free_vmap_area_noflush") => vec![hex("va_start"), dec("nr_lazy"), dec("nr_lazy_max")],
        ("rcu", "rcu_grace_period") => vec![
            ("rcuname", Val::Str(ev.s("rcuname").to_owned()), Sep::Bare),
            ("gp_seq", Val::Int(ev.i("gp_seq")), Sep::Bare),
            ("gpevent", Val::Str(ev.s("gpevent").to_owned()), Sep::Bare),
        ],
        ("mmlab_tlb", "tlbi") => vec![st("op"), hex("operand"), hex("start"), hex("end"), dec("entries")],
        ("mmlab_hvo", _) | ("mmlab_hugetlb", "hugetlb_free_folio") => vec![hex("pfn"), dec("order")],
        ("mmlab_hugetlb", "hugetlb_alloc_folio") => vec![hex("pfn"), dec("order"), dec("surplus")],
        ("mmlab_func", _) | ("mmlab_barrier", _) | ("mmlab_rcu", _) | ("mmlab_state", _) => ev
            .fields
            .iter()
            .map(|(k, v)| match v {
                FieldValue::Str(s) => (*k, Val::Str(s.clone()), Sep::Eq),
                FieldValue::I64(v) => (*k, Val::Int(*v), Sep::Eq),
                FieldValue::U64(v) => (*k, Val::UInt(*v), Sep::Eq),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The printed key of a pair in text (`num_purged` for `npurged`, `va_start` for `addr`).
fn text_key(ev: &TraceEvent, key: &'static str) -> &'static str {
    match (ev.name, key) {
        ("alloc_vmap_area", "addr") => "va_start",
        ("purge_vmap_area_lazy", "npurged") => "num_purged",
        _ => key,
    }
}

/// `<comm>-<pid> [cpu] flags secs.usecs: name:`, the start of a line as the
/// kernel's `trace_print_context()` lays it out with the default options
/// (mmlab's CPU `cpu` runs as task `mmlab-<cpu>`, pid 1000 + cpu).
pub(crate) fn ftrace_context(name: &str, cpu: u64, ts: u64) -> String {
    let mut s = String::with_capacity(160);
    let comm = format!("mmlab-{cpu}");
    let _ = write!(
        s,
        "{comm:>16}-{pid:<7} [{cpu:03}] ..... {sec:5}.{usec:06}: {name}:",
        pid = 1000 + cpu,
        sec = ts / 1_000_000,
        usec = ts % 1_000_000,
    );
    s
}

/// `ev` as one ftrace text line (with its newline).
pub fn ftrace(ev: &TraceEvent) -> String {
    let mut s = ftrace_context(ev.name, ev.cpu, ev.ts);
    for (key, val, sep) in pairs(ev) {
        let key = text_key(ev, key);
        let v = match val {
            Val::Ptr(p) => format!("{p:016x}"),
            Val::Hex(v) => format!("{v:#x}"),
            Val::Int(v) => v.to_string(),
            Val::UInt(v) => v.to_string(),
            Val::Str(v) => v,
        };
        let _ = match sep {
            Sep::Eq => write!(s, " {key}={v}"),
            Sep::Colon => write!(s, " {key}: {v}"),
            Sep::Bare => write!(s, " {v}"),
        };
    }
    s.push('\n');
    s
}

/// An event as a JSON object: `ts`, `cpu`, `event`, then the printed pairs
/// in their order (serialised as a map so that the order is kept).
struct JsonEvent<'a> {
    ev: &'a TraceEvent,
    pairs: Pairs,
}

impl serde::Serialize for JsonEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3 + self.pairs.len()))?;
        map.serialize_entry("ts", &self.ev.ts)?;
        map.serialize_entry("cpu", &self.ev.cpu)?;
        map.serialize_entry("event", &self.ev.full_name())?;
        for (key, val, _) in &self.pairs {
            match val {
                Val::Ptr(p) => map.serialize_entry(key, &format!("{p:016x}"))?,
                Val::Hex(v) => map.serialize_entry(key, v)?,
                Val::Int(v) => map.serialize_entry(key, v)?,
                Val::UInt(v) => map.serialize_entry(key, v)?,
                Val::Str(v) => map.serialize_entry(key, v)?,
            }
        }
        map.end()
    }
}

/// `ev` as one JSON line (with its newline).
pub fn json(ev: &TraceEvent) -> String {
    json::to_line(&JsonEvent { ev, pairs: pairs(ev) })
}
