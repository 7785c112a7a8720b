//! `mmlab compare --seeds` shards and `--merge`: shards over disjoint seed
//! ranges, merged, are the run over the union of the seeds.
//!
//! What is compared exactly: every sample's seed, counters, calls and
//! modelled time (single-worker rows are deterministic), and every rendered
//! format of the modelled metric. Measured host time differs from run to run
//! by nature, so the statistics over it are checked on injected samples: the
//! union run's own samples, split into two shards and merged, must print
//! exactly what the union run prints, in every format.

use mmlab_engine::MachineConfig;
use mmlab_harness::compare::{self, Format, Metric, Outcome, Spec, Variant};
use mmlab_harness::shard;
use mmlab_harness::test_vmalloc::Counters;
use mmlab_tests::scale;

fn spec(new: &str) -> Spec {
    let loops = format!("test_loop_count={}", scale(100));
    let args: Vec<String> = ["run_test_mask=0x9", "nr_pages=1,16", &loops].iter().map(|s| s.to_string()).collect();
    Spec {
        machine: MachineConfig { mem_bytes: 256 << 20, nr_cpus: 2, ..Default::default() },
        common: vec!["cost_profile=apple-m2".to_string()],
        variants: vec![Variant::parse("base", "arm64.lazy_mmu_barrier_batching=0"), Variant::parse("new", new)],
        rows: compare::rows_from_args(&args).unwrap(),
        repeats: 0,
        warmup: 1,
        seed: 0,
        metric: Metric::Modelled,
    }
}

fn run(seeds: std::ops::Range<u64>) -> Outcome {
    compare::run_seeds(spec(""), &seeds.collect::<Vec<_>>(), |_| {}).unwrap()
}

/// Write and read back, as the command does between jobs.
fn shard_of(name: &str, o: &Outcome) -> (String, shard::Shard) {
    let text = shard::to_jsonl(o).unwrap();
    (name.to_string(), shard::read(name, &text).unwrap())
}

const FORMATS: [Format; 4] = [Format::Table, Format::Markdown, Format::Csv, Format::Json];

#[test]
fn two_shards_merge_into_the_union_run() {
    let union = run(1..6);
    let (a, b) = (run(1..3), run(3..6));
    // Listed out of order: the merge sorts by seed.
    let merged = shard::merge(&[shard_of("b.jsonl", &b), shard_of("a.jsonl", &a)], Metric::Modelled).unwrap();
    assert_eq!(merged.seeds, Some(vec![1, 2, 3, 4, 5]));
    assert_eq!(merged.rows.len(), 4);
    for (m, u) in merged.rows.iter().zip(&union.rows) {
        assert_eq!(m.row, u.row);
        for v in 0..2 {
            assert_eq!(m.samples[v].len(), 5);
            for (x, y) in m.samples[v].iter().zip(&u.samples[v]) {
                let what = format!("{} v{v} seed {}", u.row.label, y.seed);
                assert_eq!(x.seed, y.seed, "{what}");
                // What a shard records of the counters: every reported one.
                let recorded = |c: &Counters| (c.fields(), c.barriers_by_kind(), c.tlbis_by_kind());
                assert_eq!(recorded(&x.counters), recorded(&y.counters), "{what}");
                assert_eq!(x.calls, y.calls, "{what}");
                assert_eq!(x.modelled_ns.to_bits(), y.modelled_ns.to_bits(), "{what}");
                assert_eq!(x.failure, y.failure, "{what}");
            }
        }
    }
    // The counted and modelled table is the same, byte for byte.
    let pairs = [compare::counter("barrier_pairs").unwrap(), compare::counter("pcp_refill_pages").unwrap()];
    for f in [Format::Table, Format::Markdown, Format::Csv] {
        assert_eq!(compare::render(&merged, f, &pairs), compare::render(&union, f, &pairs), "{f:?}");
    }
    // Not trivially: the comparison found the batching win on 16 pages.
    let p16 = union.rows.iter().find(|r| r.row.label == "fix_size_alloc_test p:16 h:0").unwrap();
    let c = p16.comparison(1, Metric::Modelled).unwrap();
    assert!(c.change_pct < -50.0, "{}", c.change_pct);
}

/// The union run's samples, split by seed into two shard texts whose wall
/// times add up to the union's.
fn split(o: &Outcome, at: u64) -> [(String, String); 2] {
    let text = shard::to_jsonl(o).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (header, samples) = (lines[0], &lines[1..lines.len() - 1]);
    let mut parts = [(header.to_string(), 0usize), (header.to_string(), 0usize)];
    for l in samples {
        let seed = match shard::parse_line(l).unwrap() {
            shard::Line::Sample(s) => s.seed,
            other => panic!("not a sample: {other:?}"),
        };
        let p = &mut parts[usize::from(seed >= at)];
        p.0.push('\n');
        p.0.push_str(l);
        p.1 += 1;
    }
    let end =
        |n: usize, wall_ms: u64| shard::line_json(&shard::Line::End(shard::EndLine { samples: n, wall_ms })).unwrap();
    let [(t0, n0), (t1, n1)] = parts;
    [
        ("x.jsonl".to_string(), format!("{t0}\n{}\n", end(n0, o.wall_ms))),
        ("y.jsonl".to_string(), format!("{t1}\n{}\n", end(n1, 0))),
    ]
}

#[test]
fn identical_samples_give_identical_statistics() {
    let mut union = run(10..14);
    union.spec.metric = Metric::Total;
    let shards: Vec<(String, shard::Shard)> =
        split(&union, 12).into_iter().map(|(n, t)| (n.clone(), shard::read(&n, &t).unwrap())).collect();
    let merged = shard::merge(&shards, Metric::Total).unwrap();
    // Measured time included: the samples are the same numbers, so every
    // format (JSON with its per-sample values and wall time too) is the same.
    for f in FORMATS {
        assert_eq!(compare::render(&merged, f, &compare::COUNTERS), compare::render(&union, f, &compare::COUNTERS));
    }
    assert_eq!(compare::plot(&merged, "t"), compare::plot(&union, "t"));
    // And a merged shard written again is the union's shard.
    assert_eq!(shard::to_jsonl(&merged).unwrap(), shard::to_jsonl(&union).unwrap());
}

#[test]
fn merge_refuses_what_does_not_belong_together() {
    let a = run(1..3);
    let (name, sa) = shard_of("a.jsonl", &a);
    let err = |shards: &[(String, shard::Shard)]| shard::merge(shards, Metric::Modelled).unwrap_err();
    // The same seeds twice.
    let e = err(&[(name.clone(), sa.clone()), ("again.jsonl".to_string(), sa.clone())]);
    assert!(e.contains("seed 1 is in both a.jsonl and again.jsonl"), "{e}");
    // Another revision.
    let mut other = sa.clone();
    other.header.git_rev = "0123456789ab".to_string();
    other.samples.iter_mut().for_each(|s| s.seed += 10);
    let e = err(&[(name.clone(), sa.clone()), ("rev.jsonl".to_string(), other)]);
    assert!(e.contains("differ in git_rev"), "{e}");
    // Other settings on one side: named down to the field.
    let c = compare::run_seeds(spec("vmalloc.contpte=off"), &[7], |_| {}).unwrap();
    let e = err(&[(name.clone(), sa.clone()), shard_of("c.jsonl", &c)]);
    assert!(e.contains("differ in variants[1].set"), "{e}");
    // Other parameters.
    let mut p = sa.clone();
    p.header.rows[0].params.test_loop_count += 1;
    p.samples.iter_mut().for_each(|s| s.seed += 20);
    let e = err(&[(name.clone(), sa.clone()), ("p.jsonl".to_string(), p)]);
    assert!(e.contains("differ in rows[0].params.test_loop_count"), "{e}");
    // A seed without all its samples.
    let mut cut = sa.clone();
    cut.samples.pop();
    assert!(err(&[(name.clone(), cut)]).contains("seed 2 lacks"));
    // A shard cut short, or not a shard.
    let text = shard::to_jsonl(&a).unwrap();
    let short: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    assert!(shard::read("s.jsonl", &short).unwrap_err().contains("no end line"));
    let e = shard::read("t.jsonl", "{\"tool\":\"mmlab compare\"}\n").unwrap_err();
    assert!(e.contains("t.jsonl:1: not a shard line"), "{e}");
    let tail = text.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert!(shard::read("u.jsonl", &tail).unwrap_err().contains("before the header"));
    // --repeat outcomes are not shards.
    let mut s = spec("");
    s.repeats = 2;
    s.seed = 1;
    let r = compare::run(s, |_| {}).unwrap();
    assert!(shard::to_jsonl(&r).unwrap_err().contains("--seeds"));
}
