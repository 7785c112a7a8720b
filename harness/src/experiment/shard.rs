//! Shards of `mmlab compare`: the samples of a `--seeds` run as JSON lines,
//! and their merge into the comparison over the union of the seeds.
//!
//! # Why seeds shard exactly
//!
//! In `--seeds` mode ([`compare::run_seeds`](super::compare::run_seeds)) every seed is an independent
//! block: each variant boots afresh, runs its warm-up and one kept run of
//! every row, all with that seed. A sample therefore depends only on the
//! build, the settings, the row and the seed (plus, for measured host time,
//! the host). Shards over disjoint seed sets hold exactly the samples the
//! run over their union would hold, and [`merge`] puts them back in the
//! union run's order (ascending seed), so every statistic is computed from
//! the same numbers in the same order and prints byte for byte the same.
//! Counted and modelled quantities are identical for single-worker rows
//! (`nr_threads` ≤ 1, the emulation is deterministic there); measured host
//! time is whatever each host measured.
//!
//! # File format (`--format jsonl`, version [`FORMAT`])
//!
//! One JSON object per line, tagged by `"type"`:
//! 1. `header`: format version, git revision, host architecture, RNG name,
//!    workload, machine size, warm-up count, common settings, every
//!    variant's settings (the `--set` lists and the complete effective
//!    configuration), every row's label and test_vmalloc parameters.
//! 2. `sample`, one per (seed, row, variant): the seed, row and variant
//!    (index and label), measured and modelled ns of the run, calls, the
//!    failure if any, and every counter the run reports: the barrier and
//!    TLBI maps and the scalars of [`crate::test_vmalloc::counters::FIELDS`],
//!    written and read back through that table.
//! 3. `end`: the number of samples and the shard's measured wall time; a
//!    shard without it was cut short and is refused.
//!
//! [`merge`] refuses shards whose headers differ (naming the first field
//! that differs), a seed present in two shards, a seed missing a row or
//! variant, and a shard without its `end` line.

use crate::compare::{Metric, Outcome, Row, RowResult, Sample, Spec, Variant, VariantInfo};
use crate::settings::Configs;
use crate::test_vmalloc::{Counters, Params};
use mmlab_engine::MachineConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The format version in every header.
pub const FORMAT: &str = "mmlab-compare-samples/1";
/// The random number generator behind every seed (engine::rng).
pub const RNG: &str = "xoshiro256** (seed_from_u64: splitmix64)";
/// The workload.
pub const WORKLOAD: &str = "lib/test_vmalloc.c (Linux 7.2)";

/// What a shard ran with; shards merge only if these are equal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub git_rev: String,
    pub host_arch: String,
    pub rng: String,
    pub workload: String,
    pub mem_bytes: u64,
    pub cpus: usize,
    pub warmup: usize,
    pub common_set: Vec<String>,
    pub variants: Vec<VariantHeader>,
    pub rows: Vec<RowHeader>,
}

/// One variant in a header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VariantHeader {
    pub label: String,
    /// Its `--base`/`--new` settings (after the common ones).
    pub set: Vec<String>,
    pub cost_profile: String,
    pub barrier_backend: String,
    /// CPU 0's pageset `(high_min, high_max)` at boot.
    pub pcp_high: (i32, i32),
    /// The complete effective configuration (machine, allocator, vmalloc),
    /// in Rust's debug notation: any difference, even one no `--set` names,
    /// keeps shards apart.
    pub config: String,
}

/// One row in a header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowHeader {
    pub label: String,
    pub params: Params,
}

/// One run of one row on one variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleLine {
    pub seed: u64,
    pub row: usize,
    pub row_label: String,
    pub variant: usize,
    pub variant_label: String,
    pub measured_ns: f64,
    pub modelled_ns: f64,
    pub calls: u64,
    pub failure: Option<String>,
    pub counters: Counters,
}

/// The last line of a complete shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndLine {
    pub samples: usize,
    /// Measured host time of the shard's run, ms.
    pub wall_ms: u64,
}

/// A line of a shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    Header(Header),
    /// Boxed: a sample holds every counter family's snapshot.
    Sample(Box<SampleLine>),
    End(EndLine),
}

/// A shard read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Shard {
    pub header: Header,
    pub samples: Vec<SampleLine>,
    pub wall_ms: u64,
}

/// One line of a shard, parsed.
pub fn parse_line(l: &str) -> Result<Line, String> {
    serde_json::from_str(l).map_err(|e| format!("not a shard line: {e}"))
}

/// One line of a shard, as JSON (no newline).
pub fn line_json(l: &Line) -> Result<String, String> {
    serde_json::to_string(l).map_err(|e| format!("writing a shard: {e}"))
}

/// The header of an outcome.
pub fn header(o: &Outcome) -> Header {
    Header {
        format: FORMAT.to_string(),
        git_rev: o.git_rev.clone(),
        host_arch: o.host_arch.clone(),
        rng: RNG.to_string(),
        workload: WORKLOAD.to_string(),
        mem_bytes: o.spec.machine.mem_bytes,
        cpus: o.spec.machine.nr_cpus,
        warmup: o.spec.warmup,
        common_set: o.spec.common.clone(),
        variants: o
            .variants
            .iter()
            .map(|v| VariantHeader {
                label: v.label.clone(),
                set: v.sets.clone(),
                cost_profile: v.configs.machine.cost_profile.name.to_string(),
                barrier_backend: v.configs.machine.barrier_backend.name().to_string(),
                pcp_high: v.pcp_high,
                config: format!("{:?}", v.configs),
            })
            .collect(),
        rows: o.rows.iter().map(|r| RowHeader { label: r.row.label.clone(), params: r.row.params.clone() }).collect(),
    }
}

/// An outcome of `--seeds` mode as a shard: header, samples by seed, row
/// and variant, end.
pub fn to_jsonl(o: &Outcome) -> Result<String, String> {
    if o.seeds.is_none() {
        return Err("--format jsonl writes the samples of a --seeds run (give --seeds A..B)".to_string());
    }
    let mut samples: Vec<SampleLine> = Vec::new();
    for (r, rr) in o.rows.iter().enumerate() {
        for (v, side) in rr.samples.iter().enumerate() {
            for s in side {
                samples.push(SampleLine {
                    seed: s.seed,
                    row: r,
                    row_label: rr.row.label.clone(),
                    variant: v,
                    variant_label: o.variants[v].label.clone(),
                    measured_ns: s.measured_ns,
                    modelled_ns: s.modelled_ns,
                    calls: s.calls,
                    failure: s.failure.clone(),
                    counters: s.counters,
                });
            }
        }
    }
    samples.sort_by_key(|s| (s.seed, s.row, s.variant));
    let n = samples.len();
    let lines = std::iter::once(Line::Header(header(o)))
        .chain(samples.into_iter().map(|s| Line::Sample(Box::new(s))))
        .chain(std::iter::once(Line::End(EndLine { samples: n, wall_ms: o.wall_ms })));
    let mut out = String::new();
    for l in lines {
        out.push_str(&line_json(&l)?);
        out.push('\n');
    }
    Ok(out)
}

/// Read a shard; `name` (its file name) is for the errors.
pub fn read(name: &str, text: &str) -> Result<Shard, String> {
    let mut header = None;
    let mut samples = Vec::new();
    let mut end = None;
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let at = format!("{name}:{}", i + 1);
        if end.is_some() {
            return Err(format!("{at}: a line after the end line"));
        }
        match parse_line(l).map_err(|e| format!("{at}: {e}"))? {
            Line::Header(h) if header.is_none() && samples.is_empty() => {
                if h.format != FORMAT {
                    return Err(format!("{at}: format {:?}; this mmlab reads {FORMAT:?}", h.format));
                }
                header = Some(h);
            }
            Line::Header(_) => return Err(format!("{at}: a second header")),
            Line::Sample(_) if header.is_none() => return Err(format!("{at}: a sample before the header")),
            Line::Sample(s) => samples.push(*s),
            Line::End(e) => end = Some(e),
        }
    }
    let header = header.ok_or_else(|| format!("{name}: no header line (is it a `compare --format jsonl` shard?)"))?;
    let end = end.ok_or_else(|| format!("{name}: no end line: the shard was cut short"))?;
    if end.samples != samples.len() {
        return Err(format!("{name}: the end line counts {} samples, the shard holds {}", end.samples, samples.len()));
    }
    Ok(Shard { header, samples, wall_ms: end.wall_ms })
}

/// The first field (as a path like `variants[1].set`) where `a` and `b`
/// differ, with both values.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<(String, String, String)> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                match y.get(k) {
                    Some(vb) => {
                        if let Some(d) = first_difference(va, vb, &p) {
                            return Some(d);
                        }
                    }
                    None => return Some((p, va.to_string(), "nothing".to_string())),
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| (format!("{path}.{k}"), "nothing".to_string(), y[k].to_string()))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (va, vb))| first_difference(va, vb, &format!("{path}[{i}]")))
        }
        _ if a != b => Some((path.to_string(), a.to_string(), b.to_string())),
        _ => None,
    }
}

/// Merge shards (`(file name, shard)`) into the comparison over the union
/// of their seeds, shown with `metric` (module docs for what is refused).
pub fn merge(shards: &[(String, Shard)], metric: Metric) -> Result<Outcome, String> {
    let Some((name0, first)) = shards.first() else {
        return Err("--merge: no shard".to_string());
    };
    let h = &first.header;
    // Compare without the long effective configurations first, so that the
    // error names the setting that differs rather than the whole config.
    let values = |h: &Header| -> Result<[serde_json::Value; 2], String> {
        let full = serde_json::to_value(h).map_err(|e| e.to_string())?;
        let mut brief = full.clone();
        if let Some(vs) = brief.get_mut("variants").and_then(|v| v.as_array_mut()) {
            vs.iter_mut().filter_map(|v| v.as_object_mut()).for_each(|v| drop(v.remove("config")));
        }
        Ok([brief, full])
    };
    let h0 = values(h)?;
    for (name, s) in &shards[1..] {
        let hv = values(&s.header)?;
        let diff = first_difference(&h0[0], &hv[0], "").or_else(|| first_difference(&h0[1], &hv[1], ""));
        if let Some((field, a, b)) = diff {
            return Err(format!("cannot merge {name0} and {name}: they differ in {field}: {a} vs {b}"));
        }
    }
    let (nr, nv) = (h.rows.len(), h.variants.len());
    // (seed) -> shard it came from; (seed, row, variant) -> sample.
    let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
    let mut by_key: BTreeMap<(u64, usize, usize), &SampleLine> = BTreeMap::new();
    for (i, (name, s)) in shards.iter().enumerate() {
        for x in &s.samples {
            if x.row >= nr || x.variant >= nv {
                return Err(format!(
                    "{name}: seed {}: row {} / variant {} not in the header",
                    x.seed, x.row, x.variant
                ));
            }
            if x.row_label != h.rows[x.row].label || x.variant_label != h.variants[x.variant].label {
                return Err(format!(
                    "{name}: seed {}: labels {:?} / {:?} do not match the header's",
                    x.seed, x.row_label, x.variant_label
                ));
            }
            match owner.get(&x.seed) {
                Some(&o) if o != i => {
                    return Err(format!(
                        "seed {} is in both {} and {name}: shards must cover disjoint seeds",
                        x.seed, shards[o].0
                    ));
                }
                _ => {
                    owner.insert(x.seed, i);
                }
            }
            if by_key.insert((x.seed, x.row, x.variant), x).is_some() {
                return Err(format!(
                    "{name}: seed {} has two samples of {:?} on {:?}",
                    x.seed, x.row_label, x.variant_label
                ));
            }
        }
    }
    let seeds: Vec<u64> = owner.keys().copied().collect();
    for &seed in &seeds {
        for r in 0..nr {
            for v in 0..nv {
                if !by_key.contains_key(&(seed, r, v)) {
                    return Err(format!(
                        "{}: seed {seed} lacks {:?} on {:?}",
                        shards[owner[&seed]].0, h.rows[r].label, h.variants[v].label
                    ));
                }
            }
        }
    }
    let machine = MachineConfig { mem_bytes: h.mem_bytes, nr_cpus: h.cpus, ..Default::default() };
    let variants: Vec<Variant> =
        h.variants.iter().map(|v| Variant { label: v.label.clone(), sets: v.set.clone() }).collect();
    let rows: Vec<Row> = h.rows.iter().map(|r| Row { label: r.label.clone(), params: r.params.clone() }).collect();
    let mut infos = Vec::new();
    for v in &h.variants {
        let sets: Vec<String> = h.common_set.iter().chain(&v.set).cloned().collect();
        let configs = Configs::new(machine.clone(), &sets).map_err(|e| format!("{name0}: {}: {e}", v.label))?;
        infos.push(VariantInfo { label: v.label.clone(), sets: v.set.clone(), configs, pcp_high: v.pcp_high });
    }
    let results: Vec<RowResult> = rows
        .iter()
        .enumerate()
        .map(|(r, row)| RowResult {
            row: row.clone(),
            samples: (0..nv)
                .map(|v| {
                    seeds
                        .iter()
                        .map(|&seed| {
                            let x = by_key[&(seed, r, v)];
                            Sample {
                                seed,
                                measured_ns: x.measured_ns,
                                modelled_ns: x.modelled_ns,
                                counters: x.counters,
                                calls: x.calls,
                                failure: x.failure.clone(),
                            }
                        })
                        .collect()
                })
                .collect(),
        })
        .collect();
    let spec = Spec {
        machine,
        common: h.common_set.clone(),
        variants,
        rows,
        repeats: seeds.len(),
        warmup: h.warmup,
        seed: seeds.first().copied().unwrap_or(0),
        metric,
    };
    Ok(Outcome {
        spec,
        variants: infos,
        rows: results,
        host_arch: h.host_arch.clone(),
        git_rev: h.git_rev.clone(),
        wall_ms: shards.iter().map(|(_, s)| s.wall_ms).sum(),
        seeds: Some(seeds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_compress() {
        assert_eq!(crate::compare::seed_ranges(&[1, 2, 3, 7, 9, 10]), "1..4, 7..8, 9..11");
        assert_eq!(crate::compare::seed_ranges(&[u64::MAX - 1, u64::MAX]), format!("{}..={}", u64::MAX - 1, u64::MAX));
    }

    #[test]
    fn differences_are_named() {
        let a = serde_json::json!({"git_rev": "x", "variants": [{"set": ["a=1"]}, {"set": []}]});
        let b = serde_json::json!({"git_rev": "x", "variants": [{"set": ["a=1"]}, {"set": ["b=2"]}]});
        assert_eq!(first_difference(&a, &b, "").unwrap().0, "variants[1].set");
        assert!(first_difference(&a, &a, "").is_none());
    }
}
