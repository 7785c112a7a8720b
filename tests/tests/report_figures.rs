//! The reproductions' figures and the HTML report, read as a program reads
//! them: parsed as XML, each panel's axes labelled with a unit, each
//! figure's series present by name with the numbers of the data it draws
//! (the published markers with the published values), the same picture for
//! the same seed, and ids unique across the page that inlines them all.

use mmlab_harness::reproduce::{self, Length, Reproduction};
use roxmltree::{Document, Node};
use std::collections::{BTreeMap, HashSet};

/// A fiftieth of quick mode's loops, two runs a side.
const SHORTER: Length = Length { loops_pct: 2, repeats: 2 };

fn under_emulation() -> bool {
    std::env::var("MMLAB_TEST_SCALE").is_ok_and(|v| v != "1")
}

fn class(n: &Node<'_, '_>, c: &str) -> bool {
    n.attribute("class").is_some_and(|v| v.split_whitespace().any(|x| x == c))
}

/// One panel as parsed: its axis labels, and per layer name its kind and
/// the `(data-x, data-y)` of its points or bars.
#[derive(Debug, Default)]
struct Panel {
    title: String,
    x_label: String,
    x_categorical: bool,
    y_label: String,
    layers: BTreeMap<String, (String, Vec<(f64, f64)>)>,
}

fn parse(svg: &str) -> Vec<Panel> {
    let doc = Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert!(root.descendants().any(|n| class(&n, "title") && n.text().is_some_and(|t| !t.is_empty())));
    root.descendants().filter(|n| class(n, "panel")).map(panel).collect()
}

fn panel(p: Node<'_, '_>) -> Panel {
    let text = |c: &str| p.descendants().find(|n| class(n, c)).and_then(|n| n.text()).unwrap_or_default().to_string();
    let mut out = Panel {
        title: p.attribute("data-title").unwrap_or_default().to_string(),
        x_label: text("x-label"),
        y_label: text("y-label"),
        x_categorical: p.descendants().any(|n| class(&n, "x-label") && class(&n, "categorical")),
        ..Panel::default()
    };
    for l in p.children().filter(|n| class(n, "layer")) {
        let values = l
            .descendants()
            .filter(|n| class(n, "point") || class(n, "bar"))
            .map(|n| {
                let v = |a| n.attribute(a).and_then(|s: &str| s.parse::<f64>().ok()).unwrap_or(f64::NAN);
                (v("data-x"), v("data-y"))
            })
            .collect();
        let name = l.attribute("data-name").unwrap_or_default().to_string();
        out.layers.insert(name, (l.attribute("data-kind").unwrap_or_default().to_string(), values));
    }
    out
}

/// Every panel of every plot of `r`, with the checks every figure passes:
/// axis labels carrying a unit, at least one layer with data.
fn panels(r: &Reproduction) -> BTreeMap<&'static str, Vec<Panel>> {
    let mut all = BTreeMap::new();
    for (name, svg) in &r.plots {
        let ps = parse(svg);
        assert!(!ps.is_empty(), "{name}: no panel");
        for p in &ps {
            // A numeric axis names its unit: "time (ms)", "pages (4 KiB each)".
            let numeric = [(&p.y_label, true), (&p.x_label, !p.x_categorical)];
            for (label, _) in numeric.iter().filter(|(_, n)| *n) {
                assert!(label.contains(" (") && label.ends_with(')'), "{name} / {}: no unit in {label:?}", p.title);
            }
            assert!(!p.x_label.is_empty(), "{name} / {}: no x label", p.title);
            assert!(
                p.layers.values().any(|(_, v)| !v.is_empty()) || p.layers.values().any(|(k, _)| k == "line"),
                "{name} / {}: nothing drawn",
                p.title
            );
        }
        all.insert(*name, ps);
    }
    all
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

#[test]
fn every_reproduction_draws_its_figures_with_the_published_beside_ours() {
    if under_emulation() {
        eprintln!("skipped under MMLAB_TEST_SCALE: too slow for qemu; the x86_64 leg runs it");
        return;
    }
    let mut done = Vec::new();
    for name in reproduce::ALL {
        let r = reproduce::by_name(name, SHORTER, 1).unwrap();
        let names: Vec<&str> = r.plots.iter().map(|(n, _)| *n).collect();
        let want: &[&str] = match name {
            "barrier-batching" => &["agreement", "bars"],
            "contpte" => &["tlb", "h1"],
            "pcp-drain" => &["trace", "drains"],
            "hvo" => &["throughput", "grace-periods"],
            _ => &["map-mem"],
        };
        assert_eq!(names, want, "{name}");
        let figs = panels(&r);
        match name {
            "barrier-batching" => {
                let b = r.barrier_batching().unwrap();
                let agreement = &figs["agreement"];
                assert_eq!(agreement.len(), 2);
                for (p, m2) in agreement.iter().zip([true, false]) {
                    assert_eq!(p.layers["y = x; shaded: within 2x (agrees)"].0, "identity", "{}", p.title);
                    // One point per row, at (published, ours).
                    let pts: Vec<(f64, f64)> = p
                        .layers
                        .iter()
                        .filter(|(n, _)| n.starts_with("ours (model)"))
                        .flat_map(|(_, (_, v))| v.clone())
                        .collect();
                    assert_eq!(pts.len(), b.rows.len(), "{}", p.title);
                    for r in &b.rows {
                        let m = r.measured.as_ref().unwrap();
                        let (x, y) = if m2 {
                            (r.published.apple_m2.pct, m.apple_m2.pct)
                        } else {
                            (r.published.ampere_altra.pct, m.ampere_altra.pct)
                        };
                        assert!(
                            pts.iter().any(|&(a, c)| close(a, x) && close(c, y)),
                            "{}: {}",
                            p.title,
                            r.published.test
                        );
                    }
                }
                assert!(agreement[0].layers.contains_key("ours (model), fitted"), "the M2 column is fitted");
                assert!(!agreement[1].layers.contains_key("ours (model), fitted"), "the Altra column is predicted");
                for p in &figs["bars"] {
                    let published = &p.layers["published, ours (model)"].1;
                    assert_eq!(published.len(), 2 * b.rows.len(), "{}", p.title);
                }
            }
            "contpte" => {
                let c = r.contpte().unwrap();
                let tlb = &figs["tlb"];
                let published = &tlb[0].layers["published: 16x fewer than 4K"].1;
                assert_eq!(published.len(), c.tlb.len());
                for (row, &(x, y)) in c.tlb.iter().zip(published) {
                    assert!(
                        close(x, row.size as f64 / 1024.0)
                            && close(y, row.get(reproduce::Mapping::Pte).entries as f64 / 16.0)
                    );
                }
                for p in tlb {
                    assert!(p.x_label.contains("KiB") && p.layers.len() >= 3, "{p:?}");
                }
            }
            "pcp-drain" => {
                let d = r.pcp_drain().unwrap();
                let trace = &figs["trace"];
                assert_eq!(trace.len(), 3, "mainline, huge-by-default, and the close-up");
                for (p, t) in trace.iter().zip(&d.traces) {
                    assert!(p.title.starts_with(&t.variant));
                    for line in ["pcp->count", "pcp->high", "high_min"] {
                        assert_eq!(p.layers[line].0, "line", "{}: {line}", p.title);
                    }
                }
                let drains = d.traces[1].samples.iter().filter(|s| s.drains > 0).count();
                assert!(drains > 0, "huge-by-default drains");
                assert!(trace[1].title.contains(&format!("({drains} drains")), "{}", trace[1].title);
                let regs = &figs["drains"][1].layers["published, ours (model)"].1;
                for (i, r) in d.regressions.iter().enumerate() {
                    assert!(regs.iter().any(|&(x, y)| x == i as f64 && close(y, r.published.change.pct)), "{regs:?}");
                }
            }
            "hvo" => {
                let h = r.hvo().unwrap();
                let demote = &figs["grace-periods"][1].layers["published, ours"].1;
                let want = [h.demote.published.syncs_per_page.0 as f64, h.demote.published.syncs_per_page.1 as f64];
                for (i, w) in want.into_iter().enumerate() {
                    assert!(demote.iter().any(|&(x, y)| x == i as f64 && close(y, w)), "{demote:?}");
                }
            }
            _ => {
                let l = r.linear_map().unwrap();
                let panels = &figs["map-mem"];
                assert_eq!(panels.len(), l.rows.len());
                for (p, row) in panels.iter().zip(&l.rows) {
                    let published = &p.layers["published"].1;
                    assert_eq!(published.len(), row.cells.len());
                    for (c, &(_, y)) in row.cells.iter().zip(published) {
                        assert!(close(y, c.published_ms), "{}: {y} vs {}", p.title, c.published_ms);
                    }
                    // The stack adds up to our modelled time.
                    let stack = &p.layers["TLBI issue, completion waits, barriers"].1;
                    for (i, c) in row.cells.iter().enumerate() {
                        let sum: f64 = stack.iter().filter(|(x, _)| *x == i as f64).map(|(_, y)| y).sum();
                        assert!(
                            (sum - c.ours_ms).abs() < 1e-6 * c.ours_ms.max(1.0),
                            "{}: {sum} vs {}",
                            p.title,
                            c.ours_ms
                        );
                    }
                }
            }
        }
        done.push((name, r));
    }

    // The page that inlines them all: well-formed, every figure present,
    // no id twice (a repeated clip-path id would clip one figure by
    // another's panel), the summary and the provenance first.
    let c = mmlab_harness::settings::Configs::new(mmlab_engine::MachineConfig::default(), &[]).unwrap();
    let run = mmlab_harness::provenance::RunRecord::new(&c, &[], 1);
    let html = reproduce::html::report(&run, "quick", 1.0, &done);
    let doc = Document::parse_with_options(&html, roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() })
        .unwrap_or_else(|e| panic!("the page is not well-formed: {e}"));
    let svgs = doc.descendants().filter(|n| n.tag_name().name() == "svg").count();
    assert_eq!(svgs, done.iter().map(|(_, r)| r.plots.len()).sum::<usize>());
    let mut ids = HashSet::new();
    for id in doc.descendants().filter_map(|n| n.attribute("id")) {
        assert!(ids.insert(id), "id {id:?} twice");
    }
    let summary = doc.descendants().find(|n| class(n, "summary")).expect("the agreement table");
    let provenance = doc.descendants().find(|n| class(n, "provenance")).expect("the provenance table");
    assert!(summary.range().start < provenance.range().start);
    assert!(html.contains(&run.revision) && html.contains("<th>seed</th><td><code>1</code>"));
    assert!(
        !html.contains("http://") || html.matches("http://").count() == html.matches("xmlns=\"http://").count(),
        "nothing fetched"
    );

    // And in a real browser: it renders, with no console message.
    if let Some(r) = in_browser("report", &html, (1400, 12000)) {
        eprintln!("the report in Chromium: {r:?} ({} bytes of HTML)", html.len());
        assert!(r.console.is_empty(), "console: {:?}", r.console);
        assert!(r.network.is_empty(), "not self-contained: {:?}", r.network);
        assert_eq!(r.size, (1400, 12000));
        assert!(r.png_bytes > 200_000, "{r:?}");
        assert!(r.distinct_colours > 50, "{r:?}");
        assert!((0.02..0.6).contains(&r.non_white_fraction), "{r:?}");
    }
}

/// Loads `html` in headless Chromium, or says why not: without a browser
/// the check is skipped, unless `MMLAB_REQUIRE_BROWSER` is set (CI sets
/// it, and installs Chromium); under emulation (the aarch64 leg) too.
fn in_browser(name: &str, html: &str, window: (u32, u32)) -> Option<mmlab_tests::browser::BrowserReport> {
    if under_emulation() {
        eprintln!("browser check skipped under MMLAB_TEST_SCALE: the x86_64 leg runs it");
        return None;
    }
    if let Err(e) = mmlab_tests::browser::chromium() {
        assert!(std::env::var_os("MMLAB_REQUIRE_BROWSER").is_none(), "MMLAB_REQUIRE_BROWSER is set: {e}");
        eprintln!("browser check skipped: {e}");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("mmlab-browser-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (file, png) = (dir.join(format!("{name}.html")), dir.join(format!("{name}.png")));
    std::fs::write(&file, html).unwrap();
    let r = mmlab_tests::browser::load_in_chromium(&file, &png, window);
    let _ = std::fs::remove_dir_all(&dir);
    Some(r.unwrap_or_else(|e| panic!("{e}")))
}

/// The browser check can fail: a page that logs, or throws, is caught, a
/// page that loads from the network is caught, and a blank page measures
/// as blank.
#[test]
fn the_browser_check_sees_console_messages_network_loads_and_blank_pages() {
    let page = "<!DOCTYPE html><html><body><p>x</p><script>console.error(\"boom\"); throw new Error(\"thrown\");</script></body></html>";
    if let Some(r) = in_browser("noisy", page, (400, 300)) {
        assert_eq!(r.console.len(), 2, "{:?}", r.console);
        assert!(r.console[0].contains("boom") && r.console[1].contains("Uncaught Error: thrown"), "{:?}", r.console);
    }
    let page = concat!(
        "<!DOCTYPE html><html><head><link rel=\"stylesheet\" href=\"https://cdn.example.com/x.css\"></head>",
        "<body><img src=\"http://example.com/a.png\"><script src=\"https://example.com/s.js\"></script></body></html>"
    );
    if let Some(r) = in_browser("fetching", page, (400, 300)) {
        let want = ["http://example.com/a.png", "https://cdn.example.com/x.css", "https://example.com/s.js"];
        assert_eq!(r.network, want, "{r:?}");
        // A failed load logs nothing: only the NetLog shows it.
        assert!(r.console.is_empty(), "{:?}", r.console);
    }
    if let Some(r) = in_browser("blank", "<!DOCTYPE html><html><body></body></html>", (400, 300)) {
        assert!(r.console.is_empty() && r.network.is_empty(), "{r:?}");
        assert_eq!((r.size, r.distinct_colours, r.non_white_fraction), ((400, 300), 1, 0.0), "{r:?}");
    }
}

/// The same seed draws the same picture.
#[test]
fn figures_are_deterministic() {
    if under_emulation() {
        eprintln!("skipped under MMLAB_TEST_SCALE: too slow for qemu; the x86_64 leg runs it");
        return;
    }
    for name in ["linear-map", "contpte"] {
        let a = reproduce::by_name(name, SHORTER, 3).unwrap();
        let b = reproduce::by_name(name, SHORTER, 3).unwrap();
        assert_eq!(a.plots, b.plots, "{name}");
    }
}
