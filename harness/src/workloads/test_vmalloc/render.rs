//! Rendering a test_vmalloc [`Report`]: the module's `pr_info` summary
//! lines with mmlab's `#` header and counters ([`render_text`]), or one
//! JSON object ([`render_json`]).

use super::cases::TEST_CASES;
use super::counters::Pairs;
use super::runner::Report;
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
        "# mmlab test-vmalloc: lib/test_vmalloc.c (Linux 7.2) on an emulated arm64 machine: {} CPUs, {} MiB, seed {}",
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
    let bars: Vec<String> = c.barriers_by_kind().iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(s, "#   barriers: {} (modelled {} ns)", or_none(&bars), c.barriers.modelled_ns);
    let tlbis: Vec<String> = c.tlbis_by_kind().iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(s, "#   tlbi: {} (modelled {} ns)", or_none(&tlbis), c.tlbi.modelled_ns);
    for (k, v) in c.fields() {
        let _ = writeln!(s, "#   {k}: {v}");
    }
    if let Some(ls) = &r.lock_stat {
        let _ = writeln!(
            s,
            "# lock_stat (lock_stat=1), vmalloc's shared lock classes and the zone lock; a bounce: taken on another CPU than the last, so its cache line moved:"
        );
        let _ = writeln!(
            s,
            "#   {:<28} {:>12} {:>12} {:>12} {:>12}",
            "class name", "con-bounces", "contentions", "acq-bounces", "acquisitions"
        );
        for &mmlab_vmalloc::LockStatRow { class: name, counts: l } in ls {
            let _ = writeln!(
                s,
                "#   {name:<28} {:>12} {:>12} {:>12} {:>12}",
                l.con_bounces, l.contentions, l.acq_bounces, l.acquisitions
            );
        }
    }
    s
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() { "none".to_string() } else { v.join(" ") }
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
    counters: JsonCounters,
    /// lock_stat's rows of vmalloc's lock classes (with `lock_stat=1` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_stat: Option<&'a [mmlab_vmalloc::LockStatRow]>,
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
struct JsonCounters {
    scope: &'static str,
    /// Barriers by kind, non-zero only.
    barriers: Pairs,
    /// TLBIs by kind, non-zero only.
    tlbi: Pairs,
    /// The scalar counters ([`super::counters::FIELDS`]), as members of
    /// this object.
    #[serde(flatten)]
    fields: Pairs,
}

/// The report as one JSON object (one line).
pub fn render_json(r: &Report, settings: &[String]) -> String {
    let mi = &r.machine;
    let c = &r.counters;
    json::to_line(&JsonReport {
        tool: "mmlab test-vmalloc",
        module: "lib/test_vmalloc.c (Linux 7.2)",
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
            barriers: Pairs(c.barriers_by_kind()),
            tlbi: Pairs(c.tlbis_by_kind()),
            fields: Pairs(c.fields()),
        },
        lock_stat: r.lock_stat.as_deref(),
        failed: r.any_failed(),
    })
}
