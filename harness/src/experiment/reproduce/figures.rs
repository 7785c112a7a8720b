//! The reproductions' pictures: the deterministic model beside the
//! published numbers, one [`Figure`] per question a reader asks.
//!
//! | reproduction | figure | what it shows |
//! |---|---|---|
//! | barrier-batching | `agreement` | per CPU column, published change (x) against ours (y), the `y = x` line and the within-2x band the verdict uses; the Apple M2 rows the costs were fitted on apart from the predicted ones |
//! | barrier-batching | `bars` | published and ours per test, per column |
//! | contpte | `tlb` | TLB entries and TLB-model misses per buffer size, 4K vs contpte vs PMD, log scales, with the published 16x |
//! | contpte | `h1` | the h:1 change per row, ours beside what the published table implies for contpte alone |
//! | pcp-drain | `trace` | the test CPU's pcp count after each of the first iterations, `pcp->high` and `high_min`, each drain marked with its size; mainline beside huge-by-default |
//! | pcp-drain | `drains` | pages drained per iteration per configuration, and the regression, ours beside the published |
//! | hvo | `throughput` | the throughput change per kernel, ours beside LKP's |
//! | hvo | `grace-periods` | `synchronize_rcu()` per fault and per demoted page, ours beside the published |
//! | linear-map | `map-mem` | modelled `map_mem()` time per variant on each machine, split into TLBI issue, completion waits and barriers, with the published time |
//!
//! Every number drawn is the model's or the published one: the same seed
//! draws the same picture on any host. Measured host time stays in the
//! reports' tables, beside the verdicts it never decides.

use super::hvo::Hvo;
use super::linear_map::LinearMap;
use super::run::{BarrierBatching, Contpte, Mapping, PcpDrain};
use crate::plot::figure::{Axis, BarSeries, Figure, Layer, Panel, Point, Style};

/// Ours (the model): filled blue.
const OURS: Style = Style { dash: 0, ..Style::nth(1) };

/// A test_vmalloc row's label, short: `fix_size p:16 h:0`.
fn short(test: &str) -> String {
    test.replace("_alloc_test", "").replace("_test", "")
}

fn bars(name: &str, style: Style, values: Vec<f64>) -> BarSeries {
    BarSeries { name: name.to_string(), style, values, ci: Vec::new() }
}

fn points(name: &str, style: Style, points: Vec<Point>) -> Layer {
    Layer::Points { name: name.to_string(), style, points }
}

/// barrier-batching's figures.
pub fn barrier_batching(b: &BarrierBatching) -> Vec<(&'static str, Figure)> {
    let fitted: Vec<&str> = b.fit_rows.iter().map(|f| f.test).collect();
    let columns = [("Apple M2", true), ("Ampere Altra", false)];
    let mut agreement = Vec::new();
    let mut grouped = Vec::new();
    for (column, m2) in columns {
        let (mut fit, mut pred) = (Vec::new(), Vec::new());
        let (mut published, mut ours, mut cats) = (Vec::new(), Vec::new(), Vec::new());
        for r in &b.rows {
            let p = if m2 { r.published.apple_m2 } else { r.published.ampere_altra };
            cats.push(short(r.published.test));
            published.push(p.pct);
            let Ok(m) = &r.measured else {
                ours.push(f64::NAN);
                continue;
            };
            let o = if m2 { m.apple_m2 } else { m.ampere_altra };
            let pt = Point::labelled(p.pct, o.pct, &cats.len().to_string());
            if m2 && fitted.contains(&r.published.test) {
                fit.push(pt)
            } else {
                pred.push(pt)
            }
            ours.push(o.pct);
        }
        let mut layers = vec![Layer::Identity { name: "y = x; shaded: within 2x (agrees)".into(), factor: 2.0 }];
        if !fit.is_empty() {
            layers.push(points("ours (model), fitted", OURS, fit));
        }
        if !pred.is_empty() {
            layers.push(points("ours (model), predicted", Style::nth(2), pred));
        }
        agreement.push(Panel {
            title: format!("{column}{}", if m2 { " (costs fitted here)" } else { " (predicted, not refitted)" }),
            x: Axis::linear("published change (%)"),
            y: Axis::linear("our change (%)"),
            layers,
        });
        grouped.push(Panel {
            title: column.to_string(),
            x: Axis::categories("test_vmalloc row", cats),
            y: Axis::from_zero("change after the series (%)"),
            layers: vec![Layer::Bars {
                stacked: false,
                series: vec![bars("published", Style::PUBLISHED, published), bars("ours (model)", OURS, ours)],
            }],
        });
    }
    vec![
        (
            "agreement",
            Figure {
                title: "barrier-batching: our change against the published, per test_vmalloc row".into(),
                panels: agreement,
                caption: format!(
                    "Each point is one row of the series' table, numbered as below: x the published change after the series, y ours from the deterministic model (counted events priced by the profile). Points in the shaded wedge are within 2x of the published change, the verdict's rule. The Apple M2 costs were fitted on {} of its rows; the Ampere Altra column is predicted from them without refitting. The posting gives no intervals. Measured host time is in the report's tables, not drawn. Verdicts: Apple M2 {} of {} within 2x, Ampere Altra {} of {}.\nRows: {}.",
                    fitted.len(),
                    b.apple_m2.size,
                    b.apple_m2.significant,
                    b.ampere_altra.size,
                    b.ampere_altra.significant,
                    b.rows
                        .iter()
                        .enumerate()
                        .map(|(i, r)| format!("{} {}", i + 1, short(r.published.test)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        ),
        (
            "bars",
            Figure {
                title: "barrier-batching: published and ours per row".into(),
                panels: grouped,
                caption: "Hatched: the published change; solid: ours (model).".into(),
            },
        ),
    ]
}

/// contpte's figures.
pub fn contpte(c: &Contpte) -> Vec<(&'static str, Figure)> {
    let kib = |r: &super::run::TlbRow| r.size as f64 / 1024.0;
    let line = |name: &str, style: Style, f: &dyn Fn(&super::run::TlbRow) -> f64| Layer::Line {
        name: name.to_string(),
        style,
        points: c.tlb.iter().map(|r| (kib(r), f(r))).collect(),
        step: false,
        marks: true,
    };
    let panel = |title: &str, y: &str, f: &dyn Fn(&super::run::TlbRow, Mapping) -> f64, published: Option<Layer>| {
        let mut layers: Vec<Layer> =
            Mapping::ALL.iter().enumerate().map(|(i, &m)| line(m.column(), Style::nth(i + 1), &|r| f(r, m))).collect();
        layers.extend(published);
        Panel { title: title.into(), x: Axis::log("buffer size (KiB)"), y: Axis::log(y), layers }
    };
    let published = points(
        "published: 16x fewer than 4K",
        Style::PUBLISHED,
        c.tlb.iter().map(|r| Point::at(kib(r), r.get(Mapping::Pte).entries as f64 / 16.0)).collect(),
    );
    let tlb = Figure {
        title: "contpte: TLB entries and TLB-model misses per buffer size".into(),
        panels: vec![
            panel(
                "TLB entries to cover the buffer",
                "TLB entries (count)",
                &|r, m| r.get(m).entries as f64,
                Some(published),
            ),
            panel(
                &format!("TLB-model misses, two passes ({}-entry TLB)", c.tlb_entries),
                "TLB misses (count)",
                &|r, m| r.get(m).misses() as f64,
                None,
            ),
        ],
        caption: format!(
            "The same buffer mapped with 4 KiB PTEs, with contiguous PTEs (16 PTEs per entry), and as the kernel chooses (PMD blocks where they fit). Diamonds: the published claim, 16 times fewer entries than 4 KiB PTEs; {}. Misses: every 4 KiB page touched once after a flush, then again.",
            if c.tlb_agrees { "ours meets it at every size" } else { "ours misses it at some size" }
        ),
    };
    let rows: Vec<String> = c.h1.rows.iter().map(|r| short(&r.row.label)).collect();
    let published: Vec<f64> = c.h1_published.iter().map(|(p, _)| p.map_or(f64::NAN, |p| p.pct)).collect();
    let ours: Vec<f64> = c.h1_model.iter().map(|m| m.pct).collect();
    let h1 = Figure {
        title: "contpte: fix_size h:1, contpte on against off".into(),
        panels: vec![Panel {
            title: "change per call".into(),
            x: Axis::categories("test_vmalloc row", rows),
            y: Axis::from_zero("change with contpte (%)"),
            layers: vec![Layer::Bars {
                stacked: false,
                series: vec![
                    bars("published (contpte alone, derived)", Style::PUBLISHED, published),
                    bars("ours (model)", OURS, ours),
                ],
            }],
        }],
        caption: format!(
            "Hatched: what the published Ampere Altra table implies for contpte alone ((1 + h:1's published change) / (1 + h:0's) - 1: h:0 is batching alone, h:1 batching and contpte; missing where h:1 maps a PMD block). Solid: ours. Verdict: {}.",
            c.h1_verdict.as_str()
        ),
    };
    vec![("tlb", tlb), ("h1", h1)]
}

/// pcp-drain's figures.
pub fn pcp_drain(p: &PcpDrain) -> Vec<(&'static str, Figure)> {
    let mut trace_panels: Vec<Panel> = p.traces.iter().map(|t| trace_panel(&t.variant, &t.samples, 8)).collect();
    // The steady state of huge-by-default up close: a few iterations after
    // the count first reached high, every drain labelled.
    if let Some(t) = p.traces.get(1)
        && let Some(first) = t.samples.iter().position(|s| s.drains > 0)
    {
        let window = &t.samples[(first + 10).min(t.samples.len())..(first + 30).min(t.samples.len())];
        if !window.is_empty() {
            let mut zoom = trace_panel(&format!("{}, up close", t.variant), window, usize::MAX);
            zoom.y = Axis::linear("pages (4 KiB each)");
            // high_min is far below: leave it out of the close-up.
            zoom.layers.retain(|l| !matches!(l, Layer::Line { name, .. } if name == "high_min"));
            trace_panels.push(zoom);
        }
    }
    let trace = Figure {
        title: "pcp-drain: the test CPU's pcp during long_busy_list".into(),
        panels: trace_panels,
        caption: "pcp->count of the CPU running the test in its preferred zone after each iteration, with pcp->high and high_min of that pageset (7.2's adaptive high moves between them). Each tick on the bottom edge is an iteration with free_pcppages_bulk() drains, labelled with the pages drained. With huge vmalloc by default the 100-page area comes from order-4 blocks taken from the buddy lists while vfree returns its pages one by one to the pcp, so the count climbs past high and drains; mainline takes and returns the same pcp pages.".into(),
    };
    let variants = ["mainline", "huge-by-default", "huge, msleep(1)", "huge, 7.2 vmalloc"].map(String::from).to_vec();
    let drained = vec![p.drain_pages.base, p.drain_pages.new, p.slept_drain_pages, p.bulk_drain_pages.new];
    let regs = &p.regressions;
    let drains = Figure {
        title: "pcp-drain: drained pages per iteration and the regression".into(),
        panels: vec![
            Panel {
                title: "pcp pages drained per iteration".into(),
                x: Axis::categories("configuration", variants),
                y: Axis::from_zero("drained per iteration (pages)"),
                layers: vec![Layer::Bars { stacked: false, series: vec![bars("ours (model run)", OURS, drained)] }],
            },
            Panel {
                title: "long_busy_list against mainline".into(),
                x: Axis::categories("configuration", regs.iter().map(|r| r.published.configuration.to_string()).collect()),
                y: Axis::from_zero("time per iteration, change (%)"),
                layers: vec![
                    Layer::Bars {
                        stacked: false,
                        series: vec![
                            bars("published", Style::PUBLISHED, regs.iter().map(|r| r.published.change.pct).collect()),
                            bars("ours (model)", OURS, regs.iter().map(|r| r.ours.pct).collect()),
                        ],
                    },
                ],
            },
        ],
        caption: "Left: free_pcppages_bulk() pages per iteration counted in the runs (vmstat pcp_drain_pages), the cause the posting names; msleep(1) leaves them, 7.2's vmalloc (large orders first, blocks freed whole) removes them. Right: the regression, hatched as published, solid ours from the model.".into(),
    };
    vec![("trace", trace), ("drains", drains)]
}

/// A panel of pcp samples: count, high and high_min as steps, drains as
/// ticks, about `labels` of them labelled with the pages drained.
fn trace_panel(name: &str, samples: &[crate::test_vmalloc::PcpSample], labels: usize) -> Panel {
    let at = |f: &dyn Fn(&crate::test_vmalloc::PcpSample) -> f64| -> Vec<(f64, f64)> {
        samples.iter().map(|s| (s.iteration as f64, f(s))).collect()
    };
    let drains: Vec<&crate::test_vmalloc::PcpSample> = samples.iter().filter(|s| s.drains > 0).collect();
    let every = drains.len().div_ceil(labels.max(1)).max(1);
    let events = drains
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let label = if k % every == 0 { format!("-{}", s.drained_pages) } else { String::new() };
            (s.iteration as f64, label)
        })
        .collect();
    Panel {
        title: format!("{name} ({} drains in {} iterations)", drains.len(), samples.len()),
        x: Axis::tight("long_busy_list iteration (number)"),
        y: Axis::from_zero("pages (4 KiB each)"),
        layers: vec![
            Layer::Line {
                name: "pcp->high".into(),
                style: Style::rule(2),
                points: at(&|s| f64::from(s.high)),
                step: true,
                marks: false,
            },
            Layer::Line {
                name: "high_min".into(),
                style: Style::rule(3),
                points: at(&|s| f64::from(s.high_min)),
                step: true,
                marks: false,
            },
            Layer::Line {
                name: "pcp->count".into(),
                style: OURS,
                points: at(&|s| f64::from(s.count)),
                step: true,
                marks: false,
            },
            Layer::Events { name: "drain (pages)".into(), style: Style::nth(0), events },
        ],
    }
}

/// hvo's figures.
pub fn hvo(h: &Hvo) -> Vec<(&'static str, Figure)> {
    let rows = &h.anon_cow.rows;
    let is_base = |r: &super::hvo::LoadRow| r.variant.policy == mmlab_vmemmap::RcuPolicy::V6_10 && !r.variant.hvo;
    let base_tp = rows.iter().find(|r| is_base(r)).map_or(f64::NAN, |b| b.modelled_throughput);
    let judged: Vec<_> = rows.iter().filter(|r| !is_base(r)).collect();
    let cats: Vec<String> = judged.iter().map(|r| r.variant.label.to_string()).collect();
    let throughput = Figure {
        title: "hvo: vm-scalability anon-cow throughput per kernel".into(),
        panels: vec![Panel {
            title: format!("change against the v6.10 parent ({} CPUs)", h.anon_cow.cpus),
            x: Axis::categories("kernel (grace-period policy, HVO)", cats),
            y: Axis::from_zero("throughput change (%)"),
            layers: vec![Layer::Bars {
                stacked: false,
                series: vec![
                    bars(
                        "published (LKP)",
                        Style::PUBLISHED,
                        judged.iter().map(|r| r.published.map_or(f64::NAN, |p| p.change.pct)).collect(),
                    ),
                    bars(
                        "ours (model)",
                        OURS,
                        judged.iter().map(|r| 100.0 * (r.modelled_throughput / base_tp - 1.0)).collect(),
                    ),
                ],
            }],
        }],
        caption: format!(
            "Ours: faults per second without the measured host time (modelled grace periods of {} µs, TLBIs and barriers, and the benchmark's work), against the v6.10 parent. Hatched: LKP's published change where it ran that kernel. The measured throughput and its interval are in the report's table.",
            h.grace_period_ns / 1000
        ),
    };
    let d = &h.demote;
    let grace = Figure {
        title: "hvo: grace periods per fault and per demoted page".into(),
        panels: vec![
            Panel {
                title: "synchronize_rcu() per fault".into(),
                x: Axis::categories("kernel", rows.iter().map(|r| r.variant.label.to_string()).collect()),
                y: Axis::from_zero("grace periods per fault (synchronize_rcu() calls)"),
                layers: vec![Layer::Bars {
                    stacked: false,
                    series: vec![bars("ours", OURS, rows.iter().map(|r| r.synchronize_rcu_per_fault).collect())],
                }],
            },
            Panel {
                title: format!("1G → 2M demote, {} page(s)", d.pages),
                x: Axis::categories("demote", vec!["unbatched (6.11)".into(), "batched (6.12)".into()]),
                y: Axis::log("grace periods per page (synchronize_rcu() calls)"),
                layers: vec![Layer::Bars {
                    stacked: false,
                    series: vec![
                        bars(
                            "published",
                            Style::PUBLISHED,
                            vec![d.published.syncs_per_page.0 as f64, d.published.syncs_per_page.1 as f64],
                        ),
                        bars("ours", OURS, d.rows.iter().map(|r| r.syncs_per_page as f64).collect()),
                    ],
                }],
            },
        ],
        caption: "Left: synchronize_rcu() calls per surplus-page fault in our runs, per kernel (each a grace period the faulting task sleeps through). Right: per demoted 1G page, unbatched against batched (log scale); hatched as published in c0f398c3b2cf.".into(),
    };
    vec![("throughput", throughput), ("grace-periods", grace)]
}

/// linear-map's figure.
pub fn linear_map(l: &LinearMap) -> Vec<(&'static str, Figure)> {
    let panels = l
        .rows
        .iter()
        .map(|row| {
            let m = row.machine;
            let cats: Vec<String> = row.cells.iter().map(|c| c.variant.name().to_string()).collect();
            let col = |f: &dyn Fn(&super::linear_map::Cell) -> f64| row.cells.iter().map(f).collect::<Vec<f64>>();
            Panel {
                title: format!("{} {}G ({} profile)", m.name, m.gib, m.profile),
                x: Axis::categories("variant", cats),
                y: Axis::from_zero("map_mem() time (ms)"),
                layers: vec![
                    Layer::Bars {
                        stacked: true,
                        series: vec![
                            // Black, vermillion, yellow: apart in greyscale too.
                            bars("TLBI issue", Style::nth(0), col(&|c| c.split.tlbi_ms)),
                            bars("completion waits", Style::nth(2), col(&|c| c.split.wait_ms)),
                            bars("barriers", Style { colour: 6, ..Style::nth(4) }, col(&|c| c.split.barrier_ms)),
                        ],
                    },
                    points(
                        "published",
                        Style::PUBLISHED,
                        row.cells.iter().enumerate().map(|(i, c)| Point::at(i as f64, c.published_ms)).collect(),
                    ),
                ],
            }
        })
        .collect();
    vec![(
        "map-mem",
        Figure {
            title: "linear-map: map_mem() with rodata=full, ours (modelled) and published".into(),
            panels,
            caption: format!(
                "Stacked: our modelled map_mem() time split into issuing TLBIs, waiting for them to complete (dsb ish after broadcast TLBIs) and the other barriers, priced by the machine's cost profile. Diamonds: the published time (v1 on v6.9-rc1; v6.10 against v3 as merged). The change against each machine's base agrees in direction on {} of {} cells, within 2x on {}.",
                l.tally.direction, l.tally.significant, l.tally.size
            ),
        },
    )]
}
