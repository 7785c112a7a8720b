//! `--plot`: SVG pictures of a trace's gauges, for looking rather than
//! reading.
//!
//! - `<FILE>-buddyinfo.svg`: a heat map of the zone's free blocks per order
//!   (rows, order 0 at the bottom) over trace time (columns), from the
//!   `mmlab_state:buddyinfo` events; the colour is log-scaled from white
//!   (none) to dark blue (the most seen), so that order 10's handful and
//!   order 0's thousands both show. At most [`MAX_COLUMNS`] columns: each
//!   shows the last state of its time bucket.
//! - `<FILE>-pcp.svg`: pages on each CPU's pcp lists and its `high`, over
//!   trace time, from `mmlab_state:pcp_state` (a [`crate::plot::figure`] step line per value).
//!
//! Both are plain SVG documents (no fonts or rasterising needed); a trace
//! without those events gives a chart with a "no data" note.

use super::event::TraceEvent;
use crate::output::plot::figure::{Axis, Figure, Layer, Panel, Style};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Most columns of the heat map.
pub const MAX_COLUMNS: usize = 240;

/// Most points per line of the pcp chart.
pub const MAX_POINTS: usize = 1000;

/// At most about `max` points of `pts`: per bucket of consecutive points,
/// its lowest and highest (in order), so that spikes (a pcp filling to
/// high and draining) stay visible.
fn decimate(pts: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if pts.len() <= max {
        return pts.to_vec();
    }
    let per = pts.len().div_ceil(max / 2);
    let mut out = Vec::with_capacity(max + 2);
    for chunk in pts.chunks(per) {
        let lo = chunk.iter().enumerate().min_by(|a, b| a.1.1.total_cmp(&b.1.1)).map_or(0, |x| x.0);
        let hi = chunk.iter().enumerate().max_by(|a, b| a.1.1.total_cmp(&b.1.1)).map_or(0, |x| x.0);
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out
}

/// Orders in a buddyinfo event.
const ORDERS: usize = 11;

/// `FILE.svg` → `FILE-<suffix>.svg`.
fn derived(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}-{suffix}.svg"))
}

/// The plots of `events`, with the paths to write them to.
pub fn plots(events: &[TraceEvent], path: &Path) -> Vec<(PathBuf, String)> {
    vec![(derived(path, "buddyinfo"), buddyinfo_heatmap(events)), (derived(path, "pcp"), pcp_chart(events))]
}

/// Pages on each CPU's pcp lists and its high over trace time.
pub fn pcp_chart(events: &[TraceEvent]) -> String {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for e in events.iter().filter(|e| (e.system, e.name) == ("mmlab_state", "pcp_state")) {
        for (what, v) in [("count", e.i("count") as i32), ("high", e.i("high") as i32)] {
            let label = format!("cpu{} {what}", e.cpu);
            let i = match series.iter().position(|s| s.0 == label) {
                Some(i) => i,
                None => {
                    series.push((label, Vec::new()));
                    series.len() - 1
                }
            };
            series[i].1.push((e.ts as f64, f64::from(v)));
        }
    }
    series.sort_by(|a, b| a.0.cmp(&b.0));
    let layers = series
        .into_iter()
        .enumerate()
        .map(|(i, (name, points))| Layer::Line {
            name,
            style: Style::nth(i + 1),
            points: decimate(&points, MAX_POINTS),
            step: true,
            marks: false,
        })
        .collect();
    Figure {
        title: "pcp pages and high per CPU".to_string(),
        panels: vec![Panel {
            title: "the pcp_state events of the trace".to_string(),
            x: Axis::tight("trace time (ticks)"),
            y: Axis::from_zero("pages (4 KiB each)"),
            layers,
        }],
        caption: "Each CPU's pages on its pcp lists (count) and its pcp->high, as the mmlab_state:pcp_state events recorded them (decimated to the extremes of each stretch).".to_string(),
    }
    .to_svg()
}

/// The free-blocks-per-order heat map (see the module docs).
pub fn buddyinfo_heatmap(events: &[TraceEvent]) -> String {
    let states: Vec<(u64, [u64; ORDERS])> = events
        .iter()
        .filter(|e| (e.system, e.name) == ("mmlab_state", "buddyinfo"))
        .map(|e| (e.ts, std::array::from_fn(|o| e.u(&format!("free{o}")))))
        .collect();
    let (w, h, left, top, bottom, right) = (900.0, 360.0, 70.0, 40.0, 50.0, 110.0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{x}\" y=\"22\" font-family=\"sans-serif\" font-size=\"15\" text-anchor=\"middle\">\
         free blocks per order over time (buddyinfo)</text>\n",
        x = w / 2.0
    );
    let (Some(first), Some(last)) = (states.first(), states.last()) else {
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"13\" text-anchor=\"middle\">no data \
             (trace mmlab_state:buddyinfo)</text>\n</svg>\n",
            w / 2.0,
            h / 2.0
        );
        return s;
    };
    let (t0, t1) = (first.0, last.0.max(first.0 + 1));
    let cols = states.len().min(MAX_COLUMNS);
    let mut grid = vec![[0u64; ORDERS]; cols];
    let mut filled = vec![false; cols];
    for (ts, st) in &states {
        let c = (((ts - t0) as f64 / (t1 - t0) as f64) * (cols - 1) as f64).round() as usize;
        grid[c.min(cols - 1)] = *st;
        filled[c.min(cols - 1)] = true;
    }
    // Columns no event fell in keep the previous state.
    for c in 1..cols {
        if !filled[c] {
            grid[c] = grid[c - 1];
        }
    }
    let max = grid.iter().flat_map(|r| r.iter()).copied().max().unwrap_or(0).max(1);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let (cw, rh) = (pw / cols as f64, ph / ORDERS as f64);
    let colour = |v: u64| {
        // log scale: 0 white, max dark blue (#08306b).
        let t = if v == 0 { 0.0 } else { ((v as f64).ln_1p() / (max as f64).ln_1p()).clamp(0.05, 1.0) };
        let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
        format!("#{:02x}{:02x}{:02x}", mix(255.0, 8.0), mix(255.0, 48.0), mix(255.0, 107.0))
    };
    s.push_str("<g class=\"cells\" shape-rendering=\"crispEdges\">\n");
    for (c, row) in grid.iter().enumerate() {
        for (o, &v) in row.iter().enumerate() {
            if v == 0 {
                continue;
            }
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                left + c as f64 * cw,
                top + (ORDERS - 1 - o) as f64 * rh,
                cw + 0.05,
                rh,
                colour(v)
            );
        }
    }
    s.push_str("</g>\n<g class=\"labels\" font-family=\"monospace\" font-size=\"11\">\n");
    for o in 0..ORDERS {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">order {o}</text>",
            left - 6.0,
            top + (ORDERS - 1 - o) as f64 * rh + rh / 2.0 + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{left}\" y=\"{:.1}\">{t0}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{t1}</text>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-family=\"sans-serif\">trace time (ticks)</text>",
        top + ph + 16.0,
        left + pw,
        top + ph + 16.0,
        left + pw / 2.0,
        top + ph + 36.0
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\">0</text><rect x=\"{:.1}\" y=\"{:.1}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#999\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\">{max}</text><rect x=\"{:.1}\" y=\"{:.1}\" width=\"14\" height=\"14\" fill=\"{}\"/>\n</g>\n</svg>",
        left + pw + 34.0,
        top + 12.0,
        left + pw + 14.0,
        top,
        colour(0),
        left + pw + 34.0,
        top + 32.0,
        left + pw + 14.0,
        top + 20.0,
        colour(max)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::FieldValue;

    fn buddy(ts: u64, free0: u64) -> TraceEvent {
        let mut fields: Vec<(&'static str, FieldValue)> = Vec::new();
        const NAMES: [&str; ORDERS] =
            ["free0", "free1", "free2", "free3", "free4", "free5", "free6", "free7", "free8", "free9", "free10"];
        for (o, n) in NAMES.iter().enumerate() {
            fields.push((n, FieldValue::U64(if o == 0 { free0 } else { 1 })));
        }
        TraceEvent { ts, cpu: 0, system: "mmlab_state", name: "buddyinfo", fields }
    }

    #[test]
    fn heatmap_and_chart() {
        assert!(buddyinfo_heatmap(&[]).contains("no data"));
        let evs: Vec<TraceEvent> = (0..1000).map(|i| buddy(i, i % 50)).collect();
        let svg = buddyinfo_heatmap(&evs);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let cells = svg.matches("<rect x=").count();
        assert!(cells > MAX_COLUMNS * 10 && cells <= MAX_COLUMNS * ORDERS + 2, "{cells}");
        let paths = plots(&evs, Path::new("/tmp/x.svg"));
        assert_eq!(paths[0].0, Path::new("/tmp/x-buddyinfo.svg"));
        assert_eq!(paths[1].0, Path::new("/tmp/x-pcp.svg"));
    }

    #[test]
    fn pcp_chart_draws_a_step_line_per_cpu_and_value() {
        assert!(pcp_chart(&[]).contains("no data"));
        let pcp = |ts, cpu, count: u64| TraceEvent {
            ts,
            cpu,
            system: "mmlab_state",
            name: "pcp_state",
            fields: vec![("count", FieldValue::U64(count)), ("high", FieldValue::U64(100))],
        };
        let svg = pcp_chart(&[pcp(0, 0, 5), pcp(1, 1, 7), pcp(2, 0, 9)]);
        for name in ["cpu0 count", "cpu0 high", "cpu1 count", "cpu1 high"] {
            assert!(svg.contains(&format!("data-name=\"{name}\"")), "{name}: {svg}");
        }
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert!(svg.contains("trace time (ticks)") && svg.contains("pages (4 KiB each)"));
    }

    #[test]
    fn decimation_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, if i == 5_000 { 999.0 } else { 1.0 })).collect();
        let d = decimate(&pts, 100);
        assert!(d.len() <= 102, "{}", d.len());
        assert!(d.contains(&(5000.0, 999.0)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
