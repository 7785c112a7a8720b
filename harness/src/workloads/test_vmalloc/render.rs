//! Rendering a test_vmalloc [`Report`]: the module's `pr_info` summary
//! lines with mmlab's `#` header and counters ([`render_text`]), or one
//! JSON object ([`render_json`]).

use super::cases::TEST_CASES;
use super::runner::{Counters, Report};
use crate::output::json;
use std::fmt::Write as _;

/// The module's pr_info lines, with a header saying what is measured and
/// what is counted, and the counters at the end (as `#` lines).
pub fn render_text(r: &Report, settings: &[String]) -> String {
    let mut s = String::new();
    let mi = &r.machine;
    let params: Vec<String> = r.params.effective().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(
        s,
        "# mmlab test-vmalloc: lib/test_vmalloc.c (Linux 6.17) on an emulated arm64 machine: {} CPUs, {} MiB, seed {}",
        mi.nr_cpus,
        mi.mem_bytes >> 20,
        r.seed
    );
    let _ = writeln!(s, "# parameters: {}", params.join(" "));
    let _ = writeln!(
        s,
        "# vmalloc: vmap_allow_huge={} contpte={} huge_by_default={} align_size_to_huge={}; barrier backend {}; cost profile {}; host {}{}",
        u8::from(mi.vmap_allow_huge),
        u8::from(mi.contpte),
        u8::from(mi.huge_by_default),
        u8::from(mi.align_size_to_huge),
        mi.barrier_backend,
        mi.cost_profile,
        mi.host_arch,
        if settings.is_empty() { String::new() } else { format!("; --set {}", settings.join(" --set ")) }
    );
    let _ = writeln!(
        s,
        "# avg usec and cycles are MEASURED host time of the emulation (wall clock; cycles = host counter ticks), not kernel time."
    );
    let _ = writeln!(
        s,
        "# Counters below are counted events of the emulation (barriers, TLBIs, pcp refills/drains, zone lock, merges, purges);"
    );
    let _ = writeln!(
        s,
        "# *_modelled_ns are MODELLED (cost profile / model backend); zone_lock_hold_ns is measured host time (lock_stat=1 only)."
    );
    for w in &r.workers {
        for c in &w.cases {
            let _ = writeln!(
                s,
                "Summary: {} passed: {} failed: {} xfailed: {} repeat: {} loops: {} avg: {} usec",
                c.name, c.passed, c.failed, c.xfailed, c.repeat, c.loops, c.avg_usec
            );
        }
        let _ = writeln!(s, "All test took worker{}={} cycles", w.worker, w.cycles);
    }
    for w in &r.workers {
        for c in &w.cases {
            if let Some(e) = &c.first_error {
                let kind = if TEST_CASES[c.index].xfail { "expected failure" } else { "failure" };
                let _ = writeln!(s, "# worker{} {}: {kind}: {e}", w.worker, c.name);
            }
        }
    }
    let c = &r.counters;
    let _ = writeln!(s, "# counters over the run (workers only; teardown excluded), {} usec wall:", r.wall_usec);
    let bars: Vec<String> = c.barriers.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(s, "#   barriers: {} (modelled {} ns)", or_none(&bars), c.barrier_modelled_ns);
    let tlbis: Vec<String> = c.tlbis.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(s, "#   tlbi: {} (modelled {} ns)", or_none(&tlbis), c.tlbi_modelled_ns);
    for (k, v) in counter_fields(c) {
        let _ = writeln!(s, "#   {k}: {v}");
    }
    s
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() { "none".to_string() } else { v.join(" ") }
}

/// The scalar counters by name, in report order.
fn counter_fields(c: &Counters) -> [(&'static str, u64); 24] {
    [
        ("pcp_refill", c.pcp_refill),
        ("pcp_refill_pages", c.pcp_refill_pages),
        ("pcp_drain", c.pcp_drain),
        ("pcp_drain_pages", c.pcp_drain_pages),
        ("pcp_free_pages", c.pcp_free_pages),
        ("rmqueue_buddy_pages", c.rmqueue_buddy_pages),
        ("pcp_decay_drain", c.pcp_decay_drain),
        ("zone_lock_acquire", c.zone_lock_acquire),
        ("zone_lock_contended", c.zone_lock_contended),
        ("zone_lock_hold_ns", c.zone_lock_hold_ns),
        ("buddy_merge", c.buddy_merge),
        ("pgalloc_normal", c.pgalloc_normal),
        ("pgfree", c.pgfree),
        ("pgalloc_fail", c.pgalloc_fail),
        ("vmallocs", c.vmallocs),
        ("vfrees", c.vfrees),
        ("vmalloc_purges", c.vmalloc_purges),
        ("purged_pages", c.purged_pages),
        ("huge_fallbacks", c.huge_fallbacks),
        ("grace_periods", c.grace_periods),
        ("synchronize_rcu", c.synchronize_rcu),
        ("rcu_modelled_ns", c.rcu_modelled_ns),
        ("barrier_modelled_ns", c.barrier_modelled_ns),
        ("tlbi_modelled_ns", c.tlbi_modelled_ns),
    ]
}

/// The JSON object of [`render_json`], field by field in output order.
#[derive(serde::Serialize)]
struct JsonReport<'a> {
    tool: &'static str,
    module: &'static str,
    /// The parameters after the module's normalisation.
    #[serde(serialize_with = "json::pairs_as_map")]
    params: Vec<(&'static str, i64)>,
    seed: u64,
    machine: JsonMachine<'a>,
    time: JsonTime,
    workers: Vec<JsonWorker<'a>>,
    counters: JsonCounters<'a>,
    failed: bool,
}

#[derive(serde::Serialize)]
struct JsonMachine<'a> {
    cpus: usize,
    mem_bytes: u64,
    host_arch: &'a str,
    barrier_backend: &'a str,
    cost_profile: &'a str,
    vmalloc: JsonVmalloc,
    /// The `--set` settings as given.
    set: &'a [String],
}

#[derive(serde::Serialize)]
struct JsonVmalloc {
    vmap_allow_huge: bool,
    contpte: bool,
    huge_by_default: bool,
    align_size_to_huge: bool,
}

#[derive(serde::Serialize)]
struct JsonTime {
    kind: &'static str,
    wall_usec: u64,
}

#[derive(serde::Serialize)]
struct JsonWorker<'a> {
    worker: usize,
    cycles: u64,
    run_order: &'a [&'static str],
    tests: Vec<JsonCase<'a>>,
}

#[derive(serde::Serialize)]
struct JsonCase<'a> {
    name: &'a str,
    passed: u64,
    failed: u64,
    xfailed: u64,
    repeat: u64,
    loops: u64,
    avg_usec: u64,
    error: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct JsonCounters<'a> {
    scope: &'static str,
    /// Barriers by kind, non-zero only.
    #[serde(serialize_with = "json::pairs_as_map")]
    barriers: &'a [(&'static str, u64)],
    /// TLBIs by kind, non-zero only.
    #[serde(serialize_with = "json::pairs_as_map")]
    tlbi: &'a [(&'static str, u64)],
    /// The scalar counters ([`counter_fields`]), as members of this object.
    #[serde(flatten)]
    fields: Named,
}

/// `(name, value)` pairs serialised as an object's members.
struct Named([(&'static str, u64); 24]);

impl serde::Serialize for Named {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        json::pairs_as_map(&self.0, s)
    }
}

/// The report as one JSON object (one line).
pub fn render_json(r: &Report, settings: &[String]) -> String {
    let mi = &r.machine;
    let c = &r.counters;
    json::to_line(&JsonReport {
        tool: "mmlab test-vmalloc",
        module: "lib/test_vmalloc.c (Linux 6.17)",
        params: r.params.effective(),
        seed: r.seed,
        machine: JsonMachine {
            cpus: mi.nr_cpus,
            mem_bytes: mi.mem_bytes,
            host_arch: mi.host_arch,
            barrier_backend: mi.barrier_backend,
            cost_profile: mi.cost_profile,
            vmalloc: JsonVmalloc {
                vmap_allow_huge: mi.vmap_allow_huge,
                contpte: mi.contpte,
                huge_by_default: mi.huge_by_default,
                align_size_to_huge: mi.align_size_to_huge,
            },
            set: settings,
        },
        time: JsonTime { kind: "measured host wall time of the emulation", wall_usec: r.wall_usec },
        workers: r
            .workers
            .iter()
            .map(|w| JsonWorker {
                worker: w.worker,
                cycles: w.cycles,
                run_order: &w.run_order,
                tests: w
                    .cases
                    .iter()
                    .map(|c| JsonCase {
                        name: c.name,
                        passed: c.passed,
                        failed: c.failed,
                        xfailed: c.xfailed,
                        repeat: c.repeat,
                        loops: c.loops,
                        avg_usec: c.avg_usec,
                        error: c.first_error.as_deref(),
                    })
                    .collect(),
            })
            .collect(),
        counters: JsonCounters {
            scope: "workers only, teardown excluded",
            barriers: &c.barriers,
            tlbi: &c.tlbis,
            fields: Named(counter_fields(c)),
        },
        failed: r.any_failed(),
    })
}
