//! The Perfetto / Chrome trace-event timeline of `mmlab trace --format
//! perfetto`: written, parsed back, and checked against the format (every
//! event has ph, ts, pid, tid and name; X slices a dur; C counters args;
//! timestamps ordered on each track), with the slices and counter tracks
//! the timeline promises present.

use mmlab_engine::{MachineConfig, PAGE_SIZE};
use mmlab_harness::trace::perfetto::{self, ChromeTrace};
use mmlab_harness::trace::{EventFilter, capture};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};

fn timeline() -> (ChromeTrace, usize) {
    let m = mmlab_tests::boot(MachineConfig::with("64M", 2).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    // 6.x's vfree, one page at a time onto the pcp, so that the 256-page
    // areas overflow it and drain (7.2's returns them to the buddy whole).
    let vm = Vmalloc::new(&pa, VmallocConfig { free_pages_bulk: false, ..VmallocConfig::default() });
    let cpus = m.all_cpus().unwrap();
    let filter = EventFilter::parse(&["!kmem:mm_page_alloc"]).unwrap().with_system("mmlab_state");
    let ((), events) = capture(&filter, || {
        for round in 0..3 {
            let cpu = &cpus[round % 2];
            let areas: Vec<u64> = (0..4).map(|_| vm.vmalloc(cpu, 256 * PAGE_SIZE).unwrap()).collect();
            for a in areas {
                vm.vfree(cpu, a).unwrap();
            }
        }
        vm.purge_vmap_area_lazy(&cpus[0]).unwrap();
        mmlab_engine::kernel::rcu::synchronize_rcu(&cpus[1]);
    });
    let n = events.len();
    let json = perfetto::to_json(&perfetto::build(&events, "test"));
    // Parse the text back: what a viewer reads.
    (serde_json::from_str::<ChromeTrace>(&json).expect("valid trace-event JSON"), n)
}

#[test]
fn timeline_has_the_required_fields_and_ordered_tracks() {
    let (t, n) = timeline();
    assert!(n > 1000, "{n} events");
    perfetto::validate(&t).expect("format");
    // And independently of `validate`, from the raw JSON values.
    let raw: serde_json::Value = serde_json::from_str(&perfetto::to_json(&t)).unwrap();
    let evs = raw["traceEvents"].as_array().unwrap();
    let mut last = std::collections::BTreeMap::new();
    for e in evs {
        for k in ["ph", "ts", "pid", "tid", "name"] {
            assert!(e.get(k).is_some(), "{k} missing in {e}");
        }
        match e["ph"].as_str().unwrap() {
            "X" => assert!(e["dur"].is_u64(), "{e}"),
            "C" => assert!(e["args"].as_object().is_some_and(|a| !a.is_empty() && a.values().all(|v| v.is_number()))),
            _ => {}
        }
        let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let ts = e["ts"].as_u64().unwrap();
        let prev = last.insert(track, ts).unwrap_or(0);
        assert!(ts >= prev, "{e} goes back on its track");
    }
}

#[test]
fn timeline_shows_operations_and_counters() {
    let (t, _) = timeline();
    let has = |ph: &str, name: &str| t.trace_events.iter().any(|e| e.ph == ph && e.name == name);
    for slice in ["vmalloc", "vfree", "__purge_vmap_area_lazy", "rmqueue_bulk", "free_pcppages_bulk", "synchronize_rcu"]
    {
        assert!(has("X", slice), "no {slice} slice");
    }
    for counter in [
        "pcp count cpu0",
        "pcp high cpu1",
        "free blocks order  0",
        "free blocks order 10",
        "vmap lazy pages",
        "TLB entries cpu0",
    ] {
        assert!(has("C", counter), "no {counter} counter");
    }
    // One track per CPU, named.
    let names: Vec<_> =
        t.trace_events.iter().filter(|e| e.ph == "M" && e.name == "thread_name").map(|e| e.tid).collect();
    assert_eq!(names, vec![1, 2]);
    // Slices nest: a drain inside a vfree on the same CPU lies within it.
    let vfrees: Vec<_> = t.trace_events.iter().filter(|e| e.ph == "X" && e.name == "vfree").collect();
    let drains: Vec<_> = t.trace_events.iter().filter(|e| e.ph == "X" && e.name == "free_pcppages_bulk").collect();
    assert!(drains.iter().all(|d| {
        vfrees.iter().any(|v| v.tid == d.tid && v.ts <= d.ts && d.ts + d.dur.unwrap() <= v.ts + v.dur.unwrap())
    }));
}

#[test]
fn validate_rejects_broken_files() {
    let (mut t, _) = timeline();
    let i = t.trace_events.iter().position(|e| e.ph == "X").unwrap();
    t.trace_events[i].dur = None;
    assert!(perfetto::validate(&t).unwrap_err().contains("X without dur"));
    let (mut t, _) = timeline();
    let last = t.trace_events.iter().rposition(|e| e.tid == 1).unwrap();
    t.trace_events[last].ts = 0;
    assert!(perfetto::validate(&t).unwrap_err().contains("before"));
}
