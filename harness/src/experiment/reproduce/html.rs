//! `mmlab reproduce ... --html FILE`: one self-contained page with the
//! agreement summary first, the run's provenance, and per reproduction its
//! figures (inline SVG) and its report text.
//!
//! Self-contained: no script, no stylesheet, font or image is fetched; the
//! page opens from disk in any browser, offline, and prints. It is written
//! as well-formed XML (every element closed, only XML's own entities), so
//! that a test can parse it whole and find every figure's series and axes
//! in it; browsers read it as HTML.

use super::Reproduction;
use super::summary::Verdicts;
use crate::plot::esc;
use crate::provenance::RunRecord;
use std::fmt::Write as _;

/// The page's stylesheet: black on white, readable in print.
const STYLE: &str = "body{font-family:sans-serif;max-width:1320px;margin:1em auto;padding:0 1em;color:#111}\
h1{font-size:1.6em}h2{border-bottom:1px solid #999;margin-top:2em}\
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #bbb;padding:2px 8px;text-align:left;vertical-align:top}\
th{background:#eee}td.num{text-align:right}.bad{font-weight:bold}\
pre{font-size:11px;background:#f6f6f6;padding:0.5em;overflow-x:auto;white-space:pre}\
figure{margin:1em 0}svg{max-width:100%;height:auto}";

/// The whole page. `run` is the command's run record, `mode` quick or
/// full, `host_seconds` the measured time of all reproductions.
pub fn report(run: &RunRecord, mode: &str, host_seconds: f64, done: &[(&'static str, Reproduction)]) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    let _ = writeln!(s, "<title>mmlab reproduce: {}</title>", esc(&names(done)));
    let _ = writeln!(s, "<style>{STYLE}</style>\n</head>\n<body>");
    let _ = writeln!(s, "<h1>mmlab reproduce: published kernel results, ours beside them</h1>");
    let _ = writeln!(
        s,
        "<p>Every plot is drawn from the deterministic model (counted events priced by a machine's cost profile) beside the published numbers: the same command draws the same picture on any host. Measured host time is in each report's tables, never the basis of a verdict.</p>"
    );
    summary(&mut s, done);
    provenance(&mut s, run, mode, host_seconds);
    s.push_str("<p>Contents: ");
    for (i, (name, _)) in done.iter().enumerate() {
        let _ = write!(s, "{}<a href=\"#{name}\">{name}</a>", if i > 0 { " · " } else { "" });
    }
    s.push_str("</p>\n");
    for (name, r) in done {
        let _ = writeln!(s, "<section id=\"{name}\">\n<h2>{name}</h2>");
        for (suffix, svg) in &r.plots {
            let body = svg.split_once("?>\n").map_or(svg.as_str(), |(_, b)| b);
            let _ = writeln!(s, "<figure id=\"{name}-{suffix}\">\n{body}</figure>");
        }
        let _ = writeln!(
            s,
            "<details open=\"open\"><summary>the report as <code>mmlab reproduce {name}</code> prints it</summary>\n<pre>{}</pre>\n</details>\n</section>",
            esc(&r.text)
        );
    }
    s.push_str("</body>\n</html>\n");
    s
}

fn names(done: &[(&'static str, Reproduction)]) -> String {
    done.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The agreement summary: every reproduction's tallies and claims.
fn summary(s: &mut String, done: &[(&'static str, Reproduction)]) {
    s.push_str("<h2 id=\"summary\">Agreement</h2>\n<table class=\"summary\">\n<tr><th>reproduction</th><th>what is judged</th><th>verdict</th></tr>\n");
    for (name, r) in done {
        let v = Verdicts::of(&r.data);
        let mut rows: Vec<(String, String, bool)> = v
            .tallies
            .iter()
            .map(|t| {
                let k = &t.tally;
                (
                    t.of.to_string(),
                    format!(
                        "direction {} of {}, within 2x {}; flat {} of {}",
                        k.direction, k.significant, k.size, k.flat_agree, k.flat
                    ),
                    k.direction < k.significant,
                )
            })
            .collect();
        rows.extend(v.claims.iter().map(|c| (c.claim.clone(), c.verdict.to_string(), c.verdict == "DISAGREES")));
        if r.failed {
            rows.push(("a test case".into(), "FAILED".into(), true));
        }
        for (i, (what, verdict, bad)) in rows.iter().enumerate() {
            let first = if i == 0 {
                format!("<td rowspan=\"{}\"><a href=\"#{name}\">{name}</a></td>", rows.len())
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "<tr>{first}<td>{}</td><td{}>{}</td></tr>",
                esc(what),
                if *bad { " class=\"bad\"" } else { "" },
                esc(verdict)
            );
        }
    }
    s.push_str("</table>\n");
}

/// How the page was made: enough to run it again exactly.
fn provenance(s: &mut String, run: &RunRecord, mode: &str, host_seconds: f64) {
    s.push_str("<h2 id=\"provenance\">How this page was made</h2>\n<table class=\"provenance\">\n");
    let command = run.command_line.join(" ");
    let rows = [
        ("command", command),
        ("revision", run.revision.clone()),
        ("seed", run.seed.to_string()),
        ("mode", mode.to_string()),
        ("global machine", format!("mem={} cpus={}", run.mem, run.cpus)),
        ("settings", if run.sets.is_empty() { "(defaults)".to_string() } else { run.sets.join(" ") }),
        ("host", format!("{} ({host_seconds:.1} s measured host time)", run.host_arch)),
        ("machines", "each reproduction boots the published configurations its report names".to_string()),
    ];
    for (k, v) in rows {
        let _ = writeln!(s, "<tr><th>{k}</th><td><code>{}</code></td></tr>", esc(&v));
    }
    s.push_str("</table>\n");
    let _ = writeln!(
        s,
        "<details><summary>every knob of the global machine (the run record)</summary>\n<pre>{}</pre>\n</details>",
        esc(&run.to_json())
    );
}
