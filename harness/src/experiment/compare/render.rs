//! Rendering a comparison's [`Outcome`]: the mailing-list table (aligned
//! for a terminal, or Markdown) under a preamble that says what ran and
//! what the columns mean, CSV with one line per row and variant, one JSON
//! object that records every setting of every variant, and the bars of
//! `--plot`.
//!
//! The JSON is a tree of `#[derive(Serialize)]` structs written by
//! [`crate::output::json`]. The CSV is a minimal RFC 4180 writer: a field
//! is quoted only when it holds a comma, a quote or a newline.

use super::model::{CounterCol, Metric, Outcome, RowResult, VariantInfo};
use crate::output::json;
use crate::stats::{Mark, Summary};
use std::fmt::Write as _;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    Markdown,
    Csv,
    Json,
}

impl Format {
    /// The name `compare --format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
            Format::Json => "json",
        }
    }
}

/// Mean ± half-width, compactly.
fn fmt_mean(s: &Summary) -> String {
    format!("{} ±{}", fmt_num(s.mean), fmt_num(s.ci_half))
}

/// A number with about four significant digits.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".to_string();
    }
    let a = x.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// `-12.34%`.
pub fn fmt_pct(x: f64) -> String {
    if x.is_finite() { format!("{x:+.2}%") } else { "n/a".to_string() }
}

/// The cells of the table: header, then a line per row.
fn cells(o: &Outcome, counters: &[CounterCol]) -> (Vec<String>, Vec<Vec<String>>) {
    let metric = o.spec.metric;
    let mut head = vec!["test".to_string(), format!("{} ns/call", o.variants[0].label)];
    for v in &o.variants[1..] {
        head.push(format!("{} ns/call", v.label));
        head.push("change".to_string());
        head.push("95% CI".to_string());
        head.push(String::new());
    }
    for c in counters {
        head.push(c.name.to_string());
    }
    let mut lines = Vec::new();
    for r in &o.rows {
        let mut l = vec![r.row.label.clone()];
        if let Some((v, f)) = r.failure() {
            l.push(format!("FAILED on {}: {f}", o.variants[v].label));
            lines.push(l);
            continue;
        }
        l.push(r.summary(0, metric).map_or("n/a".into(), |s| fmt_mean(&s)));
        for v in 1..o.variants.len() {
            l.push(r.summary(v, metric).map_or("n/a".into(), |s| fmt_mean(&s)));
            match r.comparison(v, metric) {
                Some(c) => {
                    l.push(fmt_pct(c.change_pct));
                    l.push(format!("[{}, {}]", fmt_pct(c.change_ci_pct.0), fmt_pct(c.change_ci_pct.1)));
                    l.push(c.mark.map_or(String::new(), |m| m.tag().to_string()));
                }
                None => l.extend(["n/a".to_string(), String::new(), String::new()]),
            }
        }
        for c in counters {
            let vals: Vec<String> = (0..o.variants.len()).map(|v| fmt_num(r.counter_per_call(v, c))).collect();
            l.push(vals.join(" → "));
        }
        lines.push(l);
    }
    (head, lines)
}

/// The header lines every text format starts with.
fn preamble(o: &Outcome, counters: &[CounterCol], comment: &str) -> String {
    let mut s = String::new();
    let sp = &o.spec;
    let runs = match &o.seeds {
        None => format!("seed {}; {} runs per side after {} warm-up, interleaved", sp.seed, sp.repeats, sp.warmup),
        Some(seeds) => format!(
            "seeds {} ({} in all); per seed a fresh boot, {} warm-up and 1 kept run per side, interleaved",
            seed_ranges(seeds),
            seeds.len(),
            sp.warmup
        ),
    };
    let _ = writeln!(
        s,
        "{comment}mmlab compare: lib/test_vmalloc.c (Linux 7.2) on an emulated arm64 machine, {} CPUs, {} MiB; {runs}",
        sp.machine.nr_cpus,
        sp.machine.mem_bytes >> 20,
    );
    for v in &o.variants {
        let c = &v.configs.machine;
        let _ = writeln!(
            s,
            "{comment}  {}: {} (cost profile {}, barrier backend {})",
            v.label,
            if v.sets.is_empty() { "defaults".to_string() } else { v.sets.join(" ") },
            c.cost_profile.name,
            c.barrier_backend.name()
        );
    }
    if !sp.common.is_empty() {
        let _ = writeln!(s, "{comment}  common settings: {}", sp.common.join(" "));
    }
    let kind = match sp.metric {
        Metric::Total => "measured host time of the emulation + modelled cost (barriers, TLBIs, RCU waits)",
        Metric::Measured => "measured host time of the emulation only",
        Metric::Modelled => "modelled cost only (barriers, TLBIs, RCU waits)",
    };
    let _ = writeln!(s, "{comment}  ns/call: mean ± 95% CI half-width; time = {kind}");
    let _ = writeln!(
        s,
        "{comment}  change: (new - base) / base with Welch's 95% CI; (I)/(R): the two sides' 95% CIs do not overlap"
    );
    if !counters.is_empty() {
        let _ = writeln!(s, "{comment}  counters per call, base → new (counted, not timed):");
        for c in counters {
            let _ = writeln!(s, "{comment}    {}: {}", c.name, c.what);
        }
    }
    s
}

/// Ascending seeds as half-open ranges: `1..5, 9..10`.
pub fn seed_ranges(seeds: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seeds.len() {
        let mut j = i;
        while j + 1 < seeds.len() && seeds[j + 1] == seeds[j].wrapping_add(1) && seeds[j] != u64::MAX {
            j += 1;
        }
        out.push(if seeds[j] == u64::MAX {
            format!("{}..={}", seeds[i], seeds[j])
        } else {
            format!("{}..{}", seeds[i], seeds[j] + 1)
        });
        i = j + 1;
    }
    out.join(", ")
}

/// Columns padded to their widths, two spaces apart.
pub fn aligned(head: &[String], lines: &[Vec<String>]) -> String {
    let n = head.len();
    let mut w = vec![0; n];
    for l in std::iter::once(head).chain(lines.iter().map(|l| l.as_slice())) {
        for (i, c) in l.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut s = String::new();
    for l in std::iter::once(head).chain(lines.iter().map(|l| l.as_slice())) {
        let mut line = String::new();
        for (i, c) in l.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w.get(i).copied().unwrap_or(0).saturating_sub(c.chars().count());
            if i == 0 || i >= n {
                line.push_str(c);
                line.extend(std::iter::repeat_n(' ', pad));
            } else {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(c);
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// A Markdown table.
pub fn markdown(head: &[String], lines: &[Vec<String>]) -> String {
    let row =
        |l: &[String]| format!("| {} |\n", l.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
    let mut s = row(head);
    s.push_str(&format!("|{}\n", "---|".repeat(head.len())));
    for l in lines {
        let mut l = l.clone();
        l.resize(head.len(), String::new());
        s.push_str(&row(&l));
    }
    s
}

/// Just the table of an outcome, aligned for a terminal (no preamble).
pub fn table(o: &Outcome, counters: &[CounterCol]) -> String {
    let (h, l) = cells(o, counters);
    aligned(&h, &l)
}

/// Render an outcome.
pub fn render(o: &Outcome, format: Format, counters: &[CounterCol]) -> String {
    match format {
        Format::Table => {
            let (h, l) = cells(o, counters);
            format!("{}\n{}", preamble(o, counters, ""), aligned(&h, &l))
        }
        Format::Markdown => {
            let (h, l) = cells(o, counters);
            format!("{}\n{}", preamble(o, counters, ""), markdown(&h, &l))
        }
        Format::Csv => render_csv(o, counters),
        Format::Json => render_json(o, counters),
    }
}

/// CSV through the `csv` crate: one record per (test, variant), fields
/// quoted only where RFC 4180 needs it (a comma, a quote or a line break).
fn render_csv(o: &Outcome, counters: &[CounterCol]) -> String {
    let metric = o.spec.metric;
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    let mut head: Vec<&str> = vec![
        "test",
        "variant",
        "runs",
        "mean_ns_per_call",
        "ci_half_ns",
        "change_pct",
        "change_ci_lo_pct",
        "change_ci_hi_pct",
        "mark",
    ];
    head.extend(counters.iter().map(|c| c.name));
    // Writing into a Vec<u8> cannot fail.
    let _ = w.write_record(&head);
    for r in &o.rows {
        for (v, vi) in o.variants.iter().enumerate() {
            let sm = r.summary(v, metric);
            let cmp = if v == 0 { None } else { r.comparison(v, metric) };
            let mut f = vec![
                r.row.label.clone(),
                vi.label.clone(),
                r.samples[v].len().to_string(),
                sm.map_or(String::new(), |s| format!("{:.3}", s.mean)),
                sm.map_or(String::new(), |s| format!("{:.3}", s.ci_half)),
                cmp.map_or(String::new(), |c| format!("{:.3}", c.change_pct)),
                cmp.map_or(String::new(), |c| format!("{:.3}", c.change_ci_pct.0)),
                cmp.map_or(String::new(), |c| format!("{:.3}", c.change_ci_pct.1)),
                cmp.and_then(|c| c.mark).map_or(String::new(), |m| m.tag().to_string()),
            ];
            f.extend(counters.iter().map(|c| format!("{:.4}", r.counter_per_call(v, c))));
            let _ = w.write_record(&f);
        }
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// The JSON object of a compare run ([`render`] with [`Format::Json`]).
#[derive(serde::Serialize)]
struct JsonOutcome<'a> {
    tool: &'static str,
    workload: &'static str,
    git_rev: &'a str,
    host_arch: &'a str,
    seed: u64,
    seeds: Option<&'a [u64]>,
    repeats: usize,
    warmup: usize,
    metric: &'static str,
    time: &'static str,
    common_set: &'a [String],
    variants: Vec<JsonVariant<'a>>,
    rows: Vec<JsonRow<'a>>,
    wall_ms: u64,
}

/// Every setting a variant's machine ran with.
#[derive(serde::Serialize)]
struct JsonVariant<'a> {
    label: &'a str,
    set: &'a [String],
    cost_profile: &'a str,
    barrier_backend: &'a str,
    machine: JsonMachine,
    pcp: JsonPcp,
    vmalloc: JsonVmalloc,
}

#[derive(serde::Serialize)]
struct JsonMachine {
    mem_bytes: u64,
    cpus: usize,
    lazy_mmu_barrier_batching: bool,
    tlbi_range: bool,
    tlb_entries: usize,
    lock_stat: bool,
}

#[derive(serde::Serialize)]
struct JsonPcp {
    rules: String,
    percpu_pagelist_high_fraction: u32,
    high_override: Option<i32>,
    min_free_kbytes: Option<u64>,
    high_min: i32,
    high_max: i32,
}

#[derive(serde::Serialize)]
struct JsonVmalloc {
    vmap_allow_huge: bool,
    contpte: bool,
    pmd: bool,
    huge_by_default: bool,
    align_size_to_huge: bool,
}

#[derive(serde::Serialize)]
struct JsonRow<'a> {
    test: &'a str,
    #[serde(serialize_with = "json::pairs_as_map")]
    params: Vec<(&'static str, i64)>,
    failure: Option<&'a str>,
    results: Vec<JsonSide<'a>>,
}

/// One variant's results on one row.
#[derive(serde::Serialize)]
struct JsonSide<'a> {
    variant: &'a str,
    runs: usize,
    mean_ns_per_call: Option<f64>,
    sd: Option<f64>,
    ci_half: Option<f64>,
    change_pct: Option<f64>,
    change_ci_pct: Option<(f64, f64)>,
    mark: Option<&'static str>,
    #[serde(serialize_with = "json::pairs_as_map")]
    counters_per_call: Vec<(&'static str, f64)>,
    samples: Vec<JsonSample>,
}

#[derive(serde::Serialize)]
struct JsonSample {
    measured_ns: f64,
    modelled_ns: f64,
    calls: u64,
}

impl<'a> JsonVariant<'a> {
    fn of(v: &'a VariantInfo) -> JsonVariant<'a> {
        let (m, a, vc) = (&v.configs.machine, &v.configs.allocator, &v.configs.vmalloc);
        JsonVariant {
            label: &v.label,
            set: &v.sets,
            cost_profile: m.cost_profile.name,
            barrier_backend: m.barrier_backend.name(),
            machine: JsonMachine {
                mem_bytes: m.mem_bytes,
                cpus: m.nr_cpus,
                lazy_mmu_barrier_batching: m.lazy_mmu_barrier_batching,
                tlbi_range: m.tlbi_range(),
                tlb_entries: m.tlb_entries,
                lock_stat: m.lock_stat,
            },
            pcp: JsonPcp {
                rules: a.rules.to_string(),
                percpu_pagelist_high_fraction: a.percpu_pagelist_high_fraction,
                high_override: a.pcp_high_override,
                min_free_kbytes: a.min_free_kbytes,
                high_min: v.pcp_high.0,
                high_max: v.pcp_high.1,
            },
            vmalloc: JsonVmalloc {
                vmap_allow_huge: vc.vmap_allow_huge,
                contpte: vc.contpte,
                pmd: vc.pmd,
                huge_by_default: vc.huge_by_default,
                align_size_to_huge: vc.align_size_to_huge,
            },
        }
    }
}

fn render_json(o: &Outcome, counters: &[CounterCol]) -> String {
    let metric = o.spec.metric;
    let side = |r: &'_ RowResult, v: usize| {
        let sm = r.summary(v, metric);
        let cmp = if v == 0 { None } else { r.comparison(v, metric) };
        JsonSide {
            variant: &o.variants[v].label,
            runs: r.samples[v].len(),
            mean_ns_per_call: sm.map(|s| s.mean),
            sd: sm.map(|s| s.sd),
            ci_half: sm.map(|s| s.ci_half),
            change_pct: cmp.map(|c| c.change_pct),
            change_ci_pct: cmp.map(|c| c.change_ci_pct),
            mark: cmp.and_then(|c| c.mark).map(Mark::tag),
            counters_per_call: counters.iter().map(|c| (c.name, r.counter_per_call(v, c))).collect(),
            samples: r.samples[v]
                .iter()
                .map(|x| JsonSample { measured_ns: x.measured_ns, modelled_ns: x.modelled_ns, calls: x.calls })
                .collect(),
        }
    };
    json::to_line(&JsonOutcome {
        tool: "mmlab compare",
        workload: "lib/test_vmalloc.c (Linux 7.2)",
        git_rev: &o.git_rev,
        host_arch: &o.host_arch,
        seed: o.spec.seed,
        seeds: o.seeds.as_deref(),
        repeats: o.spec.repeats,
        warmup: o.spec.warmup,
        metric: metric.name(),
        time: "ns per call; measured = host wall time of the emulation, modelled = cost profile",
        common_set: &o.spec.common,
        variants: o.variants.iter().map(JsonVariant::of).collect(),
        rows: o
            .rows
            .iter()
            .map(|r| JsonRow {
                test: &r.row.label,
                params: r.row.params.effective(),
                failure: r.failure().map(|(_, f)| f),
                results: (0..o.variants.len()).map(|v| side(r, v)).collect(),
            })
            .collect(),
        wall_ms: o.wall_ms,
    })
}

/// Bars relative to the base mean (base = 100 %) with 95 % whiskers, one
/// group per row, one bar per variant (a row whose base mean is not
/// positive is left out).
pub fn plot(o: &Outcome, title: &str) -> String {
    use crate::plot::figure::{Axis, BarSeries, Figure, Layer, Panel, Style};
    let metric = o.spec.metric;
    let rows: Vec<_> = o.rows.iter().filter(|r| r.summary(0, metric).is_some_and(|s| s.mean > 0.0)).collect();
    let series = o
        .variants
        .iter()
        .enumerate()
        .map(|(v, info)| {
            let (mut values, mut ci) = (Vec::new(), Vec::new());
            for r in &rows {
                let k = 100.0 / r.summary(0, metric).map_or(f64::NAN, |s| s.mean);
                let s = r.summary(v, metric);
                values.push(s.map_or(f64::NAN, |s| s.mean * k));
                ci.push(s.map_or((f64::NAN, f64::NAN), |s| (s.lo() * k, s.hi() * k)));
            }
            BarSeries { name: info.label.clone(), style: Style::nth(v + 1), values, ci }
        })
        .collect();
    Figure {
        title: title.to_string(),
        panels: vec![Panel {
            title: format!("{} time per call against {}", metric.name(), o.variants[0].label),
            x: Axis::categories("test_vmalloc row", rows.iter().map(|r| r.row.label.clone()).collect()),
            y: Axis::from_zero(&format!("time per call (% of {})", o.variants[0].label)),
            layers: vec![Layer::Bars { stacked: false, series }],
        }],
        caption: format!(
            "Each bar: the mean {} time per call over the kept runs, in percent of the base variant's mean; whiskers: its 95 % interval.",
            metric.name()
        ),
    }
    .to_svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_escape() {
        let head = vec!["test".to_string(), "n".to_string()];
        let lines = vec![vec!["a|b".to_string(), "1".to_string()], vec!["long name".to_string(), "123".to_string()]];
        assert_eq!(aligned(&head, &lines), "test         n\na|b          1\nlong name  123\n");
        assert_eq!(markdown(&head, &lines), "| test | n |\n|---|---|\n| a\\|b | 1 |\n| long name | 123 |\n");
        // The CSV quoting the reports rely on: only where needed, quotes doubled.
        let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
        w.write_record(["a,\"b\"", "plain", ""]).unwrap();
        assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), "\"a,\"\"b\"\"\",plain,\n");
        assert_eq!(
            (fmt_num(1234.56), fmt_num(12.345), fmt_pct(-2.71528)),
            ("1235".into(), "12.35".into(), "-2.72%".into())
        );
    }
}
