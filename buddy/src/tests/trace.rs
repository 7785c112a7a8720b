//! The kmem tracepoints the buddy allocator emits, field by field:
//! `mm_page_alloc_zone_locked` (`__rmqueue_smallest`) and
//! `mm_page_alloc_extfrag` (`__rmqueue_claim`, `__rmqueue_steal`).

use super::{BASE, free, label, machine};
use crate::RmqueueMode;
use crate::zone::{AllocFlags, Fpi, Zone};
use mmlab_engine::{Migratetype, Pfn};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One event: its name and its fields as text.
type Event = (String, BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);
impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
}

struct Record(Arc<Mutex<Vec<Event>>>);
impl<S: tracing::Subscriber> Layer<S> for Record {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push((event.metadata().name().to_string(), fields));
    }
}

/// The events `f` emits on this thread, of the given name.
pub(super) fn events(name: &str, f: impl FnOnce()) -> Vec<BTreeMap<String, String>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Record(seen.clone()));
    tracing::subscriber::with_default(subscriber, f);
    let seen = seen.lock().unwrap();
    seen.iter().filter(|(n, _)| n == name).map(|(_, f)| f.clone()).collect()
}

fn field<'a>(e: &'a BTreeMap<String, String>, k: &str) -> &'a str {
    e.get(k).map(String::as_str).unwrap_or("")
}

/// `mm_page_alloc_zone_locked`: the page's struct page address and pfn,
/// the order and type, and `percpu_refill` = `pcp_allowed_order(order)`
/// and a pcp type.
#[test]
fn mm_page_alloc_zone_locked_fields() {
    let m = machine();
    let zone = Zone::new(&m);
    free(&zone, BASE + 0x400, 10, Fpi::NONE);
    let h = BASE + 0x1000;
    label(&zone, h, Migratetype::HighAtomic);
    free(&zone, h, 0, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    let take = |order: u32, mt: Migratetype| {
        let e = events("mm_page_alloc_zone_locked", || {
            zone.lock(&cpu).rmqueue_smallest(order, mt).unwrap();
        });
        assert_eq!(e.len(), 1);
        e[0].clone()
    };
    let e = take(3, Migratetype::Movable);
    assert_eq!(field(&e, "pfn"), (BASE + 0x400).to_string());
    assert_eq!(field(&e, "page"), m.memmap().page_va(Pfn(BASE + 0x400)).to_string());
    assert_eq!((field(&e, "order"), field(&e, "migratetype"), field(&e, "percpu_refill")), ("3", "1", "1"));
    let e = take(4, Migratetype::Movable);
    assert_eq!(field(&e, "percpu_refill"), "0");
    let e = take(9, Migratetype::Movable);
    assert_eq!(field(&e, "percpu_refill"), "1");
    let e = take(0, Migratetype::HighAtomic);
    assert_eq!((field(&e, "migratetype"), field(&e, "percpu_refill")), ("3", "0"));
}

/// `mm_page_alloc_extfrag`: alloc and fallback orders and types, and
/// `change_ownership` = the pageblock now has the request's type (true
/// after a claim, false after a steal).
#[test]
fn mm_page_alloc_extfrag_fields() {
    let m = machine();
    let zone = Zone::new(&m);
    let q = BASE + 0x1000;
    label(&zone, q, Migratetype::Movable);
    free(&zone, q, 7, Fpi::NONE);
    let cpu = m.cpu(0).unwrap();
    let rmqueue = |mt: Migratetype| {
        let e = events("mm_page_alloc_extfrag", || {
            let mut mode = RmqueueMode::Normal;
            zone.lock(&cpu).rmqueue(0, mt, AllocFlags::default(), &mut mode).unwrap();
        });
        assert_eq!(e.len(), 1);
        e[0].clone()
    };
    // UNMOVABLE claims the MOVABLE pageblock at q (128 free + 384 alike).
    let e = rmqueue(Migratetype::Unmovable);
    assert_eq!(field(&e, "pfn"), q.to_string());
    assert_eq!(field(&e, "page"), m.memmap().page_va(Pfn(q)).to_string());
    let kv = ["alloc_order", "fallback_order", "alloc_migratetype", "fallback_migratetype", "change_ownership"];
    assert_eq!(kv.map(|k| field(&e, k).to_string()), ["0", "7", "0", "1", "1"].map(String::from));
    // MOVABLE has no block left; it steals the smallest UNMOVABLE one,
    // q + 1 of order 0 (order < 4: no claim), and q stays UNMOVABLE.
    let e = rmqueue(Migratetype::Movable);
    assert_eq!(field(&e, "pfn"), (q + 1).to_string());
    assert_eq!(kv.map(|k| field(&e, k).to_string()), ["0", "0", "1", "0", "0"].map(String::from));
}
