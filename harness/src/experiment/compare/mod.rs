//! `mmlab compare`: one workload under two or more configurations, as a
//! mailing-list A/B table with the cause beside the effect.
//!
//! # How a comparison runs
//!
//! Every configuration (a *variant*: `--set` settings on top of the common
//! ones) gets a machine of its own, booted once: machine, page allocator and
//! vmalloc, like one booted kernel per side. A *row* is one test_vmalloc
//! case with its parameters (`fix_size_alloc_test p:16 h:0`); each run of a
//! row loads the module once on one variant's machine (selecting only that
//! case, so the counters belong to it) and leaves the machine as it found
//! it. Runs are interleaved — repetition 1 of every row on A, then B, then
//! repetition 2, … — so that slow drift of the host (frequency, other load,
//! cache state) lands on both sides alike instead of on whichever ran last.
//! Repetition `r` uses seed `seed + r` on every variant, so both sides see
//! the same random sizes. The first `warmup` repetitions are run and thrown
//! away (the first run on a machine also allocates the vmalloc range's page
//! tables, which later runs find in place, as a running kernel does).
//!
//! # Independent seeds (`--seeds A..B`)
//!
//! [`run_seeds`] runs one independent block per seed instead: every variant
//! boots afresh, runs `warmup` warm-up runs and then one kept run of every
//! row (A B A B ...), all with that seed. It costs a boot per seed, and buys
//! samples that depend on nothing but the build, the settings, the row and
//! the seed, so that jobs over disjoint seed ranges, written as shards
//! ([`crate::shard`]) and merged, give exactly the run over the union.
//!
//!
//! The value of a run is nanoseconds per call (per loop iteration of the
//! case, or per object for pcpu_alloc_test), in one of three kinds, kept
//! apart as everywhere in mmlab:
//! - `measured`: host wall time of the emulation;
//! - `modelled`: what the cost profile charges for what the emulation
//!   cannot execute — barriers under the `model` backend, TLBIs and their
//!   completion waits, `synchronize_rcu()` waits;
//! - `total` (default): the sum, the emulation's estimate of the call's cost
//!   on the profile's machine.
//!
//! [`crate::stats`] turns each side's runs into a mean and 95 % interval and
//! marks `(I)`/`(R)` where the intervals do not overlap. The counter
//! columns ([`COUNTERS`]) are per call, averaged over the runs; they are
//! counted, not timed, and explain the change. [`render`] prints an
//! outcome as a table, Markdown, CSV or JSON, and [`plot`] draws it.

use crate::settings::Configs;
use crate::stack::Stack;
use crate::test_vmalloc::{self, TEST_CASES};
use mmlab_engine::Machine;
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::Vmalloc;

mod model;
mod render;

pub use model::{
    COUNTERS, CounterCol, Metric, Outcome, Row, RowResult, Sample, Spec, Variant, VariantInfo, counter, rows_from_args,
};
pub use render::{Format, aligned, fmt_num, fmt_pct, markdown, plot, render, seed_ranges, table};

/// The git revision the binary was built from.
pub const GIT_REV: &str = env!("MMLAB_GIT_REV");

/// Check a spec and settle every variant's configuration (nothing boots).
fn prepare(spec: &Spec, progress: &mut impl FnMut(&str)) -> Result<Vec<VariantInfo>, String> {
    if spec.variants.len() < 2 {
        return Err("compare needs a base and at least one other configuration".to_string());
    }
    if spec.rows.is_empty() {
        return Err("compare needs at least one test".to_string());
    }
    if let Some(r) = spec.rows.iter().find(|r| {
        let mask = r.params.run_test_mask as u32;
        !mask.is_power_of_two() || mask.trailing_zeros() as usize >= TEST_CASES.len()
    }) {
        return Err(format!("row {:?}: run_test_mask must select exactly one test case", r.label));
    }
    let threads = spec.rows.iter().map(|r| r.params.threads()).max().unwrap_or(1);
    if threads > spec.machine.nr_cpus {
        return Err(format!("nr_threads={threads} needs {threads} CPUs; --cpus is {}", spec.machine.nr_cpus));
    }
    let mut infos = Vec::new();
    for v in &spec.variants {
        let sets: Vec<String> = spec.common.iter().chain(&v.sets).cloned().collect();
        let configs = Configs::new(spec.machine.clone(), &sets).map_err(|e| format!("{}: {e}", v.label))?;
        for w in crate::settings::warnings(&configs) {
            progress(&format!("warning: {}: {w}", v.label));
        }
        infos.push(VariantInfo { label: v.label.clone(), sets: v.sets.clone(), configs, pcp_high: (0, 0) });
    }
    Ok(infos)
}

/// The booted side of one variant: machine, page allocator and vmalloc.
type Side<'a, 'm> = (&'m Machine, &'a PageAllocator<'m>, &'a Vmalloc<'a, 'm>);

/// Boot a machine, page allocator and vmalloc per variant and hand them to
/// `f`, with CPU 0's pageset bounds of each; everything is dropped after.
fn with_booted<R>(
    infos: &[VariantInfo],
    f: impl FnOnce(&[Side<'_, '_>], Vec<(i32, i32)>) -> Result<R, String>,
) -> Result<R, String> {
    let stacks = infos
        .iter()
        .map(|i| Stack::boot(&i.configs).map_err(|e| format!("{}: {e}", i.label)))
        .collect::<Result<Vec<_>, _>>()?;
    let allocators = stacks
        .iter()
        .zip(infos)
        .map(|(s, i)| s.allocator().map_err(|e| format!("{}: {e}", i.label)))
        .collect::<Result<Vec<_>, _>>()?;
    let pcp_high = allocators.iter().map(|pa| pa.pageset(0).map_or((0, 0), |p| (p.high_min, p.high_max))).collect();
    let vms: Vec<Vmalloc<'_, '_>> = allocators.iter().zip(&stacks).map(|(pa, s)| s.vmalloc(pa)).collect();
    let sides: Vec<Side<'_, '_>> =
        stacks.iter().zip(&allocators).zip(&vms).map(|((s, pa), vm)| (s.machine(), pa, vm)).collect();
    f(&sides, pcp_high)
}

/// One run of every row on every side (rows outer, sides inner: A B A B),
/// with `seed`; the samples are pushed when `keep`.
fn run_rows(sides: &[Side<'_, '_>], rows: &mut [RowResult], seed: u64, keep: bool) -> Result<(), String> {
    for rr in rows.iter_mut() {
        for (v, &(m, pa, vm)) in sides.iter().enumerate() {
            let rep = test_vmalloc::run(m, pa, vm, &rr.row.params, seed)?;
            if keep {
                rr.samples[v].push(sample_of(&rep, &rr.row, seed));
            }
        }
    }
    Ok(())
}

/// Run a comparison; `progress` gets a line per repetition.
pub fn run(spec: Spec, mut progress: impl FnMut(&str)) -> Result<Outcome, String> {
    if spec.repeats < 2 {
        return Err(format!(
            "--repeat {}: the 95 % interval and the (I)/(R) marks need at least 2 kept runs per side",
            spec.repeats
        ));
    }
    let mut infos = prepare(&spec, &mut progress)?;
    let t0 = std::time::Instant::now();
    let mut rows: Vec<RowResult> =
        spec.rows.iter().map(|r| RowResult { row: r.clone(), samples: vec![Vec::new(); infos.len()] }).collect();
    let pcp_high = with_booted(&infos, |sides, pcp_high| {
        for rep in 0..spec.warmup + spec.repeats {
            let keep = rep >= spec.warmup;
            let seed = spec.seed.wrapping_add((rep.saturating_sub(spec.warmup)) as u64);
            progress(&format!(
                "{} {}/{}",
                if keep { "run" } else { "warm-up" },
                if keep { rep - spec.warmup + 1 } else { rep + 1 },
                if keep { spec.repeats } else { spec.warmup }
            ));
            run_rows(sides, &mut rows, seed, keep)?;
        }
        Ok(pcp_high)
    })?;
    for (i, h) in infos.iter_mut().zip(pcp_high) {
        i.pcp_high = h;
    }
    let wall_ms = t0.elapsed().as_millis() as u64;
    Ok(Outcome {
        spec,
        variants: infos,
        rows,
        host_arch: std::env::consts::ARCH.to_string(),
        git_rev: GIT_REV.to_string(),
        wall_ms,
        seeds: None,
    })
}

/// Run a comparison as independent seeded blocks, one per seed in `seeds`
/// (the `--seeds` mode, module docs): for each seed, boot every variant
/// afresh, run `spec.warmup` warm-up runs and then one kept run of every row
/// on every side, all with that seed. A sample is thus a function of the
/// build, the settings, the row and its seed alone (its counted and
/// modelled parts exactly, for single-worker rows), which is what lets
/// shards over disjoint seed sets merge into the run over their union.
/// `spec.repeats` and `spec.seed` are ignored (the outcome's are the number
/// of seeds and the first seed). A single seed is allowed (a shard); a table
/// needs two.
pub fn run_seeds(mut spec: Spec, seeds: &[u64], mut progress: impl FnMut(&str)) -> Result<Outcome, String> {
    let mut seeds = seeds.to_vec();
    seeds.sort_unstable();
    seeds.dedup();
    let (Some(&first), n) = (seeds.first(), seeds.len()) else {
        return Err("--seeds: no seed".to_string());
    };
    if n > crate::cli::MAX_RUNS {
        return Err(format!("--seeds: {n} seeds; at most {}", crate::cli::MAX_RUNS));
    }
    spec.seed = first;
    spec.repeats = n;
    let mut infos = prepare(&spec, &mut progress)?;
    let t0 = std::time::Instant::now();
    let mut rows: Vec<RowResult> =
        spec.rows.iter().map(|r| RowResult { row: r.clone(), samples: vec![Vec::new(); infos.len()] }).collect();
    for (k, &seed) in seeds.iter().enumerate() {
        progress(&format!("seed {seed} ({}/{n})", k + 1));
        let pcp_high = with_booted(&infos, |sides, pcp_high| {
            for _ in 0..spec.warmup {
                run_rows(sides, &mut rows, seed, false)?;
            }
            run_rows(sides, &mut rows, seed, true)?;
            Ok(pcp_high)
        })?;
        for (i, h) in infos.iter_mut().zip(pcp_high) {
            i.pcp_high = h;
        }
    }
    let wall_ms = t0.elapsed().as_millis() as u64;
    Ok(Outcome {
        spec,
        variants: infos,
        rows,
        host_arch: std::env::consts::ARCH.to_string(),
        git_rev: GIT_REV.to_string(),
        wall_ms,
        seeds: Some(seeds),
    })
}

fn sample_of(rep: &test_vmalloc::Report, row: &Row, seed: u64) -> Sample {
    let cases: Vec<&test_vmalloc::CaseResult> = rep.workers.iter().flat_map(|w| &w.cases).collect();
    let measured = cases.iter().map(|c| c.elapsed_ns as f64).sum::<f64>() / cases.len().max(1) as f64;
    let failure = cases
        .iter()
        .find_map(|c| (c.failed > 0).then(|| c.first_error.clone().unwrap_or_else(|| "failed".to_string())));
    // Modelled time is charged per CPU; with several workers, the mean.
    let modelled = rep.counters.modelled_ns() as f64 / rep.workers.len().max(1) as f64;
    Sample {
        seed,
        measured_ns: measured,
        modelled_ns: modelled,
        counters: rep.counters,
        calls: row.calls() / rep.workers.len().max(1) as u64,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vmalloc::Params;

    #[test]
    fn rows_expand_lists_and_masks() {
        let args: Vec<String> =
            ["run_test_mask=1", "nr_pages=1,4", "use_huge=0,1"].iter().map(|s| s.to_string()).collect();
        let rows = rows_from_args(&args).unwrap();
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "fix_size_alloc_test p:1 h:0",
                "fix_size_alloc_test p:1 h:1",
                "fix_size_alloc_test p:4 h:0",
                "fix_size_alloc_test p:4 h:1"
            ]
        );
        let rows = rows_from_args(&["run_test_mask=0x5".to_string()]).unwrap();
        assert_eq!(rows.iter().map(Row::index).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(rows[1].params.run_test_mask, 4);
        assert!(rows_from_args(&["run_test_mask=0".to_string()]).is_err());
        assert!(rows_from_args(&["nr_pages=".to_string()]).is_err());
        assert!(rows_from_args(&["bogus=1".to_string()]).is_err());
    }

    #[test]
    fn malformed_lists_name_the_parameter() {
        let e = |args: &[&str]| rows_from_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err();
        assert_eq!(e(&["nr_pages=1,,2"]), "nr_pages=1,,2: value 2 of nr_pages's list is empty");
        assert_eq!(e(&["nr_pages=,1"]), "nr_pages=,1: value 1 of nr_pages's list is empty");
        assert_eq!(e(&["nr_pages=1,"]), "nr_pages=1,: value 2 of nr_pages's list is empty");
        assert_eq!(e(&["nr_pages=,"]), "no value for nr_pages");
        assert_eq!(e(&["nr_pages=1,4,1"]), "nr_pages=1,4,1: 1 is listed twice in nr_pages's list (values 1 and 3)");
        assert_eq!(
            e(&["nr_pages=1", "nr_pages=2"]),
            "nr_pages given twice; give its values as one comma list (nr_pages=A,B,...)"
        );
        assert!(e(&["nr_pages=1,x"]).starts_with("bad value \"x\" for nr_pages"));
        assert!(e(&["use_huge=0,2"]).starts_with("bad value \"2\" for use_huge"));
        assert!(e(&["bogus=1,2"]).starts_with("unknown test_vmalloc parameter \"bogus\""));
        assert!(e(&["nr_pages=1,2147483648"]).contains("out of range for an int"));
        assert!(e(&["run_test_mask=1,0x4000"]).contains("bits 0x4000 above the 13 test cases"));
        assert_eq!(
            e(&["run_test_mask=1", "nr_pages=0,1"]),
            "`run_test_mask=1 nr_pages=0` and `run_test_mask=1 nr_pages=1` run the same fix_size_alloc_test \
             (test_vmalloc.c takes them alike): one row twice"
        );
        assert!(e(&["run_test_mask=1,3"]).starts_with("`run_test_mask=1` and `run_test_mask=3` run the same"));
        assert!(e(&["run_test_mask=1", "nr_threads=0,1"]).contains("one row twice"));
        assert!(e(&["nr_threads=1,300"]).starts_with("nr_threads=300: each worker runs on an emulated CPU"));
        // Hex and decimal of the same value are the same row too.
        assert!(e(&["run_test_mask=1", "nr_pages=16,0x10"]).contains("one row twice"));
    }

    #[test]
    fn calls_per_run() {
        let mut p = Params { test_loop_count: 100, test_repeat_count: 3, nr_pcpu_objects: 7, ..Params::default() };
        assert_eq!(Row::case(0, &p).calls(), 300);
        assert_eq!(Row::case(7, &p).calls(), 21);
        p.nr_threads = 2;
        assert_eq!(Row::case(0, &p).calls(), 600);
    }
}
