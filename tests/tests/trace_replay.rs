//! `mmlab trace kernel`: replaying a real kernel's kmem trace.
//!
//! tests/data/trace/anon-touch-cpu1.trace was captured on a Linux 6.18
//! x86_64 host (2 CPUs, zone Normal of 5,372,960 managed pages) with
//! scripts/capture-kernel-trace.sh: scripts/kernel-trace/anon-touch (256
//! anonymous pages touched and unmapped, 3 rounds) pinned to CPU 1, every
//! kmem page event on CPU 1 recorded, vm.percpu_pagelist_high_fraction =
//! 100000 (pcp high 252 = 4 x batch on the host, and on mmlab's 2G
//! machine). The pcp refill, drain and zone-lock decisions are
//! architecture-neutral; the replay compares them operation by operation.

use mmlab_harness::cli::GlobalOpts;
use mmlab_harness::trace::kernel::replay::{MidRun, OnError, warn};
use mmlab_harness::trace::kernel::{KernelArgs, analyse, render};

const TRACE: &str = include_str!("../data/trace/anon-touch-cpu1.trace");

fn globals() -> GlobalOpts {
    GlobalOpts::default()
}

fn args(on_error: OnError, mid_run: MidRun) -> KernelArgs {
    KernelArgs { file: "test.trace".into(), on_error, mid_run, cold_start: false, show: 5, context: 2, json: false }
}

#[test]
fn shipped_trace_replays_with_the_kernels_decisions() {
    let r = analyse(&globals(), &args(OnError::Skip, MidRun::Adopt), TRACE).expect("replay");
    // The machine mmlab booted to match.
    assert_eq!(r.traced.0["kernel"], "6.18.44-fc-v657");
    assert_eq!((r.booted.cpus, r.booted.batch, r.booted.high_min, r.booted.high_max), (2, 63, 252, 252));
    assert_eq!(r.traced.0["batch"], "63");
    assert_eq!(r.traced.0["high_min"], r.booted.high_min.to_string());
    assert!(r.booted.sets.contains(&"percpu_pagelist_high_fraction=100000".to_string()));
    assert_eq!(r.booted.pcp_rules, "7.2");
    // Every allocation and free of the trace was replayed.
    let o = &r.outcome;
    assert_eq!(o.ops.len(), 1790);
    assert!(o.warnings.counts.is_empty(), "{:?}", o.warnings);
    assert!(o.adopted_pages > 0 && o.warm_start_pages > 0);
    // The kernel refilled and drained; mmlab did as often, give or take.
    let c = |k: &str| r.classes.get(k).copied().unwrap_or_default();
    assert_eq!((c("alloc refill").kernel, c("free drain").kernel), (13, 12));
    assert!(c("alloc refill").mmlab.abs_diff(13) <= 3, "{:?}", r.classes);
    assert!(c("free drain").mmlab.abs_diff(12) <= 3, "{:?}", r.classes);
    // Decisions equal op by op, and the refills and drains within a window.
    assert!(r.equal_percent() >= 95.0, "{}", r.equal_percent());
    for class in ["refill", "drain"] {
        let m = r.lag_matches[class];
        assert!(m.matched * 10 >= m.kernel * 7, "{class}: {m:?}");
    }
    // Refill and drain sizes agree: a refill takes batch (63) blocks and a
    // drain frees about a batch on both.
    for op in o.ops.iter().filter(|op| op.kernel.refill_blocks > 0) {
        assert_eq!(op.kernel.refill_blocks, 63, "line {}", op.line);
    }
    assert!(o.ops.iter().filter(|op| op.mmlab.refill_blocks > 0).all(|op| op.mmlab.refill_blocks == 63));
    let text = render(&r, TRACE, &args(OnError::Skip, MidRun::Adopt));
    assert!(text.contains("mmlab booted:   mem=2G cpus=2 pcp.rules=7.2"), "{text}");
    assert!(text.contains("first divergence: line"), "{text}");
    assert!(text.contains("decisions equal: "), "{text}");
}

#[test]
fn cold_start_and_6_12_rules_still_replay() {
    let mut a = args(OnError::Skip, MidRun::Adopt);
    a.cold_start = true;
    let mut g = globals();
    g.set = vec!["pcp.rules=6.12".into()];
    let r = analyse(&g, &a, TRACE).expect("replay");
    assert_eq!(r.booted.pcp_rules, "6.12");
    assert_eq!(r.outcome.warm_start_pages, 0);
    assert_eq!(r.outcome.ops.len(), 1790);
    assert!(r.equal_percent() > 90.0);
}

/// A small trace by hand: the decisions are known.
const SMALL: &str = "\
# mmlab: kernel=test cpus=2 max_pfn=0x100000
# tracer: nop
 t-1 [000] ..... 1.000001: mm_page_alloc_zone_locked: page=1 pfn=0x2000 order=0 migratetype=1 percpu_refill=1
 t-1 [000] ..... 1.000002: mm_page_alloc: page=1 pfn=0x1000 order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE
 t-1 [000] ..... 1.000003: mm_page_free: page=1 pfn=0x1000 order=0
";

#[test]
fn hand_made_trace() {
    let r = analyse(&globals(), &args(OnError::Stop, MidRun::Adopt), SMALL).expect("replay");
    assert_eq!(r.outcome.ops.len(), 2);
    // mmlab's empty pcp list refills on the first allocation, as the kernel's did.
    assert_eq!(r.outcome.ops[0].kernel.refill_blocks, 1);
    assert!(r.outcome.ops[0].mmlab.refill_blocks > 0);
    assert!(r.outcome.ops[0].equal());
    assert_eq!((r.outcome.ops[1].alloc, r.outcome.ops[1].line), (false, 5));
}

fn with_line(line: &str) -> String {
    format!(
        "{SMALL}{line}\n t-1 [000] ..... 1.000009: mm_page_alloc: page=1 pfn=0x1001 order=0 migratetype=0 gfp_flags=GFP_KERNEL\n"
    )
}

#[test]
fn bad_input_is_skipped_with_a_count_or_stops_at_its_line() {
    let cases: [(&str, &str); 4] = [
        ("this is not a trace line", warn::MALFORMED),
        (" t-1 [000] ..... 1.000004: sched_switch: prev_comm=t prev_pid=1", warn::UNKNOWN_EVENT),
        (" t-1 [000] ..... 1.000004: mm_page_free: page=1 pfn=0x200000 order=0", warn::PFN_OUTSIDE),
        (" t-1 [000] ..... 1.000004: mm_page_free: page=1 pfn=0x4000 order=0", warn::FREE_UNKNOWN),
    ];
    for (line, kind) in cases {
        let text = with_line(line);
        // skip: counted, the rest replayed.
        let r = analyse(&globals(), &args(OnError::Skip, MidRun::Skip), &text).expect("skip never stops");
        assert_eq!(r.outcome.warnings.counts.get(kind), Some(&1), "{line}: {:?}", r.outcome.warnings);
        assert_eq!(r.outcome.warnings.first[0].0, 6, "{line}");
        assert_eq!(r.outcome.ops.len(), 3, "{line}");
        // stop: the line number.
        let e = analyse(&globals(), &args(OnError::Stop, MidRun::Skip), &text).unwrap_err().to_string();
        assert!(e.contains("line 6:") && e.contains(kind), "{line}: {e}");
    }
    // A free of a page allocated before the trace is replayed when adopted.
    let text = with_line(" t-1 [000] ..... 1.000004: mm_page_free: page=1 pfn=0x4000 order=2");
    let r = analyse(&globals(), &args(OnError::Stop, MidRun::Adopt), &text).expect("adopted");
    assert_eq!(r.outcome.adopted_pages, 4);
    assert_eq!(r.outcome.ops.len(), 4);
}

#[test]
fn garbage_never_panics() {
    let mut rng = mmlab_engine::rng::Xoshiro256StarStar::seed_from_u64(14);
    let pieces = [
        "[000]",
        "[001]",
        " ..... ",
        "1.5:",
        "mm_page_alloc:",
        "mm_page_free:",
        "mm_page_pcpu_drain:",
        "mm_page_alloc_zone_locked:",
        "mm_page_free_batched:",
        "pfn=0x10",
        "pfn=",
        "order=99999999999",
        "order=3",
        "migratetype=-1",
        "percpu_refill=1",
        "gfp_flags=",
        "page=0",
        "#",
        "\u{fffd}",
        "=",
        ":",
    ];
    let mut text = String::from(SMALL);
    for _ in 0..400 {
        let n = 1 + rng.below(8);
        for _ in 0..n {
            text.push_str(pieces[rng.below(pieces.len() as u64) as usize]);
            text.push(' ');
        }
        text.push('\n');
    }
    let r = analyse(&globals(), &args(OnError::Skip, MidRun::Adopt), &text).expect("skip never stops");
    assert!(r.outcome.warnings.counts.values().sum::<u64>() > 0);
    assert!(r.outcome.ops.len() >= 2);
}
