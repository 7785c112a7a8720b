//! kmem traces: the same seed gives byte-identical ftrace text and JSON
//! lines, a different seed a different stream, and every line has the
//! kernel's shape (context columns, then `TP_printk`'s key=value pairs in
//! order).
//!
//! The machine and allocator boot outside [`trace::capture`], so the boot
//! frees (memblock_free_all) are not traced and the trace clock starts at 0
//! with the first workload event.

use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{MachineConfig, Pfn};
use mmlab_harness::output::trace::{self, TraceFormat};
use mmlab_harness::workload::{RandomWorkload, WorkloadStats};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

/// `MMLAB_TEST_SCALE` (default 1) divides the length of long workloads.
use mmlab_tests::scale;

struct Run {
    text: String,
    stats: WorkloadStats,
    drain_pages: u64,
    /// (pfn, struct page VA) of a few frames, to check `page=`.
    page_va: Vec<(u64, u64)>,
}

/// Boot a fresh 64 MiB machine, then trace a seeded workload on `ncpus` CPUs
/// (driven from this thread), freeing everything and draining at the end.
fn traced(format: TraceFormat, seed: u64, ncpus: usize) -> Run {
    // One traced run at a time in this binary, boot included: a callsite
    // first hit by another test's untraced boot while this capture starts
    // could otherwise keep a stale interest (see `trace::capture`).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = mmlab_tests::boot(MachineConfig::with("64M", 2).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpus = m.all_cpus().unwrap();
    let cpus = &cpus[..ncpus];
    assert_eq!(m.trace_clock().now(), 0, "boot is not traced");
    let drain0 = m.vm_events().get(VmEvent::PcpDrainPages);
    let mut wl = RandomWorkload::new(scale(4_000).max(500), seed, 2_048);
    wl.free_at_end = true;
    let (stats, text) = trace::capture(format, || {
        let (st, live) = wl.run(&pa, cpus, |_| {});
        assert!(live.is_empty());
        pa.drain_all_pages(&cpus[0]);
        st
    });
    let drain_pages = m.vm_events().get(VmEvent::PcpDrainPages) - drain0;
    pa.check_invariants().unwrap();
    let page_va = (0..16).map(|i| 0x40000 + i * 977).map(|p| (p, m.memmap().page_va(Pfn(p)))).collect();
    Run { text, stats, drain_pages, page_va }
}

const KEYS: [(&str, &[&str]); 5] = [
    ("mm_page_alloc", &["page", "pfn", "order", "migratetype", "gfp_flags"]),
    ("mm_page_free", &["page", "pfn", "order"]),
    ("mm_page_alloc_zone_locked", &["page", "pfn", "order", "migratetype", "percpu_refill"]),
    ("mm_page_pcpu_drain", &["page", "pfn", "order", "migratetype"]),
    (
        "mm_page_alloc_extfrag",
        &[
            "page",
            "pfn",
            "alloc_order",
            "fallback_order",
            "pageblock_order",
            "alloc_migratetype",
            "fallback_migratetype",
            "fragmenting",
            "change_ownership",
        ],
    ),
];

/// One parsed ftrace line.
#[derive(Debug)]
struct Line {
    cpu: u64,
    ts_us: u64,
    event: String,
    kv: Vec<(String, String)>,
}

impl Line {
    fn get(&self, k: &str) -> &str {
        &self.kv.iter().find(|(key, _)| key == k).unwrap_or_else(|| panic!("{k} missing in {self:?}")).1
    }
    fn int(&self, k: &str) -> i64 {
        self.get(k).parse().unwrap_or_else(|_| panic!("{k} not an integer in {self:?}"))
    }
    fn pfn(&self) -> u64 {
        let v = self.get("pfn");
        u64::from_str_radix(v.strip_prefix("0x").expect("pfn=0x..."), 16).unwrap()
    }
}

/// Split an ftrace line into its fields and check each one's shape:
/// `<comm>-<pid> [ccc] ..... sssss.uuuuuu: <event>: k=v k=v ...`.
fn parse_ftrace(line: &str) -> Line {
    // The comm column is right-aligned in 16 characters.
    let dash = line.find('-').expect("comm-pid");
    assert!(dash <= 16, "comm is padded to 16 columns: {line:?}");
    let f: Vec<&str> = line.split_whitespace().collect();
    assert!(f.len() >= 5, "{line:?}");
    let (comm, pid) = f[0].rsplit_once('-').unwrap();
    let cpu: u64 = comm.strip_prefix("mmlab-").expect("task mmlab-<cpu>").parse().unwrap();
    assert_eq!(pid.parse::<u64>().unwrap(), 1000 + cpu, "pid = 1000 + cpu");
    let c = f[1].strip_prefix('[').and_then(|s| s.strip_suffix(']')).expect("[cpu]");
    assert_eq!(c.len(), 3, "cpu is %03d");
    assert_eq!(c.parse::<u64>().unwrap(), cpu);
    assert_eq!(f[2], ".....", "irq/preempt flag columns");
    let ts = f[3].strip_suffix(':').expect("timestamp ends with ':'");
    let (sec, usec) = ts.split_once('.').expect("secs.usecs");
    assert_eq!(usec.len(), 6, "microseconds are 6 digits");
    let ts_us = sec.parse::<u64>().unwrap() * 1_000_000 + usec.parse::<u64>().unwrap();
    let event = f[4].strip_suffix(':').expect("event name ends with ':'").to_string();
    let kv: Vec<(String, String)> = f[5..]
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or_else(|| panic!("not key=value: {p:?} in {line:?}"));
            (k.to_string(), v.to_string())
        })
        .collect();
    let keys = KEYS.iter().find(|(n, _)| *n == event).unwrap_or_else(|| panic!("unknown event {event}")).1;
    let got: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(got, keys, "{event}: keys in TP_printk order");
    let l = Line { cpu, ts_us, event, kv };
    let page = l.get("page");
    assert!(page.len() == 16 && page.chars().all(|c| c.is_ascii_hexdigit()), "page is %p: {page}");
    l
}

#[test]
fn same_seed_same_ftrace_and_json() {
    let a = traced(TraceFormat::Ftrace, 11, 1);
    let b = traced(TraceFormat::Ftrace, 11, 1);
    assert!(!a.text.is_empty());
    assert_eq!(a.text, b.text);
    let ja = traced(TraceFormat::Json, 11, 1);
    let jb = traced(TraceFormat::Json, 11, 1);
    assert_eq!(ja.text, jb.text);
    // Two CPUs driven from one thread: still one deterministic stream.
    let c = traced(TraceFormat::Ftrace, 11, 2);
    let d = traced(TraceFormat::Ftrace, 11, 2);
    assert_eq!(c.text, d.text);
    assert_ne!(a.text, c.text);
    assert!(c.text.lines().any(|l| l.contains("[001]")));

    // JSON and ftrace describe the same events, line for line.
    let fl: Vec<Line> = a.text.lines().map(parse_ftrace).collect();
    let jl: Vec<&str> = ja.text.lines().collect();
    assert_eq!(fl.len(), jl.len());
    for (f, j) in fl.iter().zip(&jl) {
        let prefix = format!("{{\"ts\":{},\"cpu\":{},\"event\":\"kmem:{}\"", f.ts_us, f.cpu, f.event);
        assert!(j.starts_with(&prefix), "{j} vs {f:?}");
        assert!(j.ends_with('}'));
        // JSON pfn is a decimal number, ftrace's the same value in hex.
        assert!(j.contains(&format!(",\"pfn\":{},", f.pfn())), "{j}");
        assert!(j.contains(&format!("\"page\":\"{}\"", f.get("page"))), "{j}");
    }
}

#[test]
fn different_seed_different_stream() {
    let a = traced(TraceFormat::Ftrace, 1, 1);
    let b = traced(TraceFormat::Ftrace, 2, 1);
    assert_ne!(a.text, b.text);
    let ja = traced(TraceFormat::Json, 1, 1);
    let jb = traced(TraceFormat::Json, 2, 1);
    assert_ne!(ja.text, jb.text);
}

#[test]
fn stream_contents_match_the_workload() {
    let r = traced(TraceFormat::Ftrace, 5, 1);
    let lines: Vec<Line> = r.text.lines().map(parse_ftrace).collect();
    // The logical clock: one tick per event, from 1 us.
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l.ts_us, i as u64 + 1);
        assert_eq!(l.cpu, 0);
    }
    let count = |e: &str| lines.iter().filter(|l| l.event == e).count() as u64;
    // One mm_page_alloc per allocation attempt, one mm_page_free per free.
    assert_eq!(count("mm_page_alloc"), r.stats.allocs + r.stats.alloc_failures);
    assert_eq!(count("mm_page_free"), r.stats.frees);
    assert_eq!(r.stats.allocs, r.stats.frees);
    // Refills: every order 0..3 request of a pcp type sets percpu_refill=1.
    let refills: Vec<&Line> = lines.iter().filter(|l| l.event == "mm_page_alloc_zone_locked").collect();
    assert!(!refills.is_empty());
    for l in &refills {
        assert!(l.int("order") <= 3);
        assert!(l.int("migratetype") < 3);
        assert_eq!(l.int("percpu_refill"), 1, "{l:?}");
    }
    // Drains: one line per drained block; the orders add up to the pages
    // PcpDrainPages counted.
    let drained: u64 = lines.iter().filter(|l| l.event == "mm_page_pcpu_drain").map(|l| 1u64 << l.int("order")).sum();
    assert!(count("mm_page_pcpu_drain") > 0);
    assert_eq!(drained, r.drain_pages);
    // Allocation lines: orders 0..3, a gfp name, migratetype from the gfp.
    for l in lines.iter().filter(|l| l.event == "mm_page_alloc") {
        assert!((0..=3).contains(&l.int("order")));
        let gfp = l.get("gfp_flags");
        let mt = l.int("migratetype");
        assert!(gfp.contains("__GFP_NOWARN"), "{gfp}");
        if gfp.starts_with("GFP_HIGHUSER_MOVABLE") {
            assert_eq!(mt, 1);
        } else if gfp.contains("__GFP_RECLAIMABLE") {
            assert_eq!(mt, 2);
        } else {
            assert!(gfp.starts_with("GFP_KERNEL"), "{gfp}");
            assert_eq!(mt, 0);
        }
        // Aligned to its order.
        assert_eq!(l.pfn() % (1 << l.int("order")), 0);
    }
    // page= is the struct page's vmemmap address of pfn=.
    for l in &lines {
        if let Some(&(_, va)) = r.page_va.iter().find(|(p, _)| *p == l.pfn()) {
            assert_eq!(l.get("page"), format!("{va:016x}"));
        }
    }
    let mut by_pfn = lines.iter().map(|l| (l.pfn(), l.get("page").to_string())).collect::<Vec<_>>();
    by_pfn.sort();
    by_pfn.dedup();
    // The same pfn always prints the same page, 64 bytes per frame apart.
    for w in by_pfn.windows(2) {
        let (p0, v0) = (&w[0].0, u64::from_str_radix(&w[0].1, 16).unwrap());
        let (p1, v1) = (&w[1].0, u64::from_str_radix(&w[1].1, 16).unwrap());
        assert_ne!(p0, p1, "one page per pfn");
        assert_eq!(v1 - v0, (p1 - p0) * 64);
    }
}
