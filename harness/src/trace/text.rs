//! Printing [`TraceEvent`]s as the kernel's `trace` file shows them, or as
//! JSON lines.
//!
//! kmem events go through the same printer as `mmlab trace pages`
//! ([`crate::output::trace`]), so they are byte-identical there and here.
//! The other systems follow their `TP_printk`:
//!
//! | event | text |
//! |---|---|
//! | `vmalloc:alloc_vmap_area` | `va_start: %lu size=%lu align=%lu vstart=0x%lx vend=0x%lx failed=%d` (the kernel prints `va_start` in decimal) |
//! | `vmalloc:purge_vmap_area_lazy` | `start=0x%lx end=0x%lx num_purged=%u` |
//! | `vmalloc:free_vmap_area_noflush` | `va_start=0x%lx nr_lazy=%lu nr_lazy_max=%lu` |
//! | `rcu:rcu_grace_period` | `%s %ld %s`: `rcu_preempt 5 start` |
//! | `mmlab_*` | `key=value`, addresses in hex |
//!
//! A JSON line has `ts`, `cpu`, `event` (`system:name`) and then the
//! record's fields under the kernel's names (for kmem, exactly the pairs
//! `trace pages --format json` prints).

use super::event::TraceEvent;
use crate::output::json;
use crate::output::trace::{Kind, Record, Val, ftrace_line, json_line};
use serde::ser::{SerializeMap, Serializer};
use std::fmt::Write as _;

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

/// The printed pairs of a non-kmem event, in `TP_printk` order.
fn pairs(ev: &TraceEvent) -> Pairs {
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
                super::event::FieldValue::Str(s) => (*k, Val::Str(s.clone()), Sep::Eq),
                super::event::FieldValue::I64(v) => (*k, Val::Int(*v), Sep::Eq),
                super::event::FieldValue::U64(v) => (*k, Val::UInt(*v), Sep::Eq),
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

fn kmem_record(ev: &TraceEvent) -> Record {
    let mut r = Record::default();
    r.set("cpu", ev.cpu);
    r.set("ts", ev.ts);
    for (k, v) in &ev.fields {
        r.set(k, v.bits());
    }
    r
}

/// `ev` as one ftrace text line (with its newline).
pub fn ftrace(ev: &TraceEvent) -> String {
    if ev.system == "kmem"
        && let Some(kind) = Kind::from_name(ev.name)
    {
        let r = kmem_record(ev);
        return ftrace_line(ev.name, &r, &kind.pairs(&r));
    }
    let mut s = crate::output::trace::ftrace_context(ev.name, ev.cpu, ev.ts);
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

/// A non-kmem event as a JSON object, fields in order.
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
    if ev.system == "kmem"
        && let Some(kind) = Kind::from_name(ev.name)
    {
        let r = kmem_record(ev);
        return json_line(ev.name, &r, &kind.pairs(&r));
    }
    json::to_line(&JsonEvent { ev, pairs: pairs(ev) })
}
