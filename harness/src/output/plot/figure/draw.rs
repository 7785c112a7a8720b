//! The renderer of [`Figure`]s: layout (panels two to a row, margins for
//! rotated category labels, the caption wrapped under them), value-to-pixel
//! maps of linear, log and categorical axes, and the SVG of each layer,
//! labels placed so that they do not overlap.

use super::{Axis, BarSeries, Figure, Layer, Panel, Shape, Style};
use crate::output::plot::axis::{Scale, Ticks, fmt_num, nice_ticks};
use crate::output::plot::{c, esc};
use std::fmt::Write as _;

/// A panel's plot area, pixels.
const PANEL_W: f64 = 470.0;
const PANEL_H: f64 = 270.0;
/// Left of the plot area: y tick labels and the y label.
const M_LEFT: f64 = 70.0;
/// Right of it: the names written at the ends of lines and rules.
const M_RIGHT: f64 = 110.0;
/// Above it: the panel title and up to two legend rows.
const M_TOP: f64 = 72.0;
/// Below it on a numeric x axis: tick labels and the x label (a
/// categorical axis with long names takes more, [`bottom_margin`]).
const M_BOTTOM_NUM: f64 = 52.0;
/// Estimated advance of one character of 11-12 px text.
const CHAR_W: f64 = 6.6;
const GRID: &str = "#e0e0e0";

impl Figure {
    /// The figure as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let bottoms: Vec<f64> = self.panels.iter().map(bottom_margin).collect();
        let cell_w = M_LEFT + PANEL_W + M_RIGHT;
        let cols = self.panels.len().clamp(1, 2);
        let rows = self.panels.len().div_ceil(2).max(1);
        let row_h: Vec<f64> = (0..rows)
            .map(|r| M_TOP + PANEL_H + bottoms.iter().skip(r * 2).take(2).fold(M_BOTTOM_NUM, |a, &b| a.max(b)))
            .collect();
        let caption = wrap(&self.caption, ((cell_w * cols as f64 - 20.0) / CHAR_W) as usize);
        let width = (cell_w * cols as f64).max(self.title.chars().count() as f64 * 9.6 + 40.0);
        let height = 40.0 + row_h.iter().sum::<f64>() + 16.0 * caption.len() as f64 + 10.0;
        // Ids unique to the figure, so that figures inlined into one page
        // do not take each other's clip paths and patterns.
        let pre: String = self.title.chars().filter(char::is_ascii_alphanumeric).take(48).collect();
        let mut out = String::new();
        let (w, h) = (c(width.ceil()), c(height.ceil()));
        let _ = writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\" class=\"figure\">"
        );
        let _ = writeln!(out, "<title>{}</title>", esc(&self.title));
        out.push_str("<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#000000\" stroke-width=\"1.5\"/></pattern></defs>\n");
        let _ =
            writeln!(out, "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>");
        let _ = writeln!(
            out,
            "<text class=\"title\" x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>",
            c(width / 2.0),
            esc(&self.title)
        );
        let mut y0 = 40.0;
        for (r, &rh) in row_h.iter().enumerate() {
            for (k, (i, p)) in self.panels.iter().enumerate().skip(r * 2).take(2).enumerate() {
                draw_panel(&mut out, p, &format!("{pre}clip{i}"), cell_w * k as f64 + M_LEFT, y0 + M_TOP);
            }
            y0 += rh;
        }
        out.push_str("<g class=\"caption\" font-size=\"12\" fill=\"#222222\">\n");
        for (i, line) in caption.iter().enumerate() {
            let _ = writeln!(out, "<text x=\"10\" y=\"{}\">{}</text>", c(y0 + 14.0 + 16.0 * i as f64), esc(line));
        }
        out.push_str("</g>\n</svg>\n");
        // Only the pattern's own id and fills: text is escaped, so no label
        // holds a raw `id="` or `fill="`.
        out.replace("id=\"hatch\"", &format!("id=\"{pre}hatch\""))
            .replace("fill=\"url(#hatch)\"", &format!("fill=\"url(#{pre}hatch)\""))
    }
}

/// Space under a panel for its x tick labels and axis label.
fn bottom_margin(p: &Panel) -> f64 {
    if p.x.categories.is_empty() {
        return M_BOTTOM_NUM;
    }
    let widest = p.x.categories.iter().map(|s| s.chars().count()).max().unwrap_or(0) as f64 * CHAR_W;
    if widest > PANEL_W / p.x.categories.len().max(1) as f64 - 4.0 { widest * 0.85 + 40.0 } else { M_BOTTOM_NUM }
}

/// Greedy word wrap at `width` characters.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in s.split('\n') {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width.max(20) {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
    }
    lines
}

/// One axis's value-to-pixel map and ticks.
struct Mapped {
    scale: Scale,
    log: bool,
    ticks: Vec<(f64, String)>,
}

impl Mapped {
    fn new(axis: &Axis, values: &[f64], px_lo: f64, px_hi: f64) -> Mapped {
        if !axis.categories.is_empty() {
            let n = axis.categories.len() as f64;
            return Mapped {
                scale: Scale::new(-0.5, n - 0.5, px_lo, px_hi),
                log: false,
                ticks: axis.categories.iter().enumerate().map(|(i, s)| (i as f64, s.clone())).collect(),
            };
        }
        let finite = values.iter().copied().filter(|v| v.is_finite() && (!axis.log || *v > 0.0));
        let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        if axis.log {
            let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (1.0, 10.0) };
            let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
            let b = if b == a { a + 1 } else { b };
            let ticks = (a..=b).map(|e| (10f64.powi(e), fmt_num(10f64.powi(e)))).collect();
            return Mapped { scale: Scale::new(f64::from(a), f64::from(b), px_lo, px_hi), log: true, ticks };
        }
        let (mut lo, mut hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        if axis.zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        let pad = if axis.pad { (hi - lo) * 0.05 } else { 0.0 };
        let t: Ticks = nice_ticks(if axis.zero && lo == 0.0 { lo } else { lo - pad }, hi + pad);
        let labels = t.labels();
        Mapped {
            scale: Scale::new(t.first(), t.last(), px_lo, px_hi),
            log: false,
            ticks: t.values.iter().copied().zip(labels).collect(),
        }
    }
    fn map(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.log && v <= 0.0) {
            return None;
        }
        Some(self.scale.map(if self.log { v.log10() } else { v }))
    }
    /// `map`, clamped to the axis's range (for rules and bands).
    fn map_clamped(&self, v: f64) -> Option<f64> {
        let (a, b) = (self.scale.px_lo.min(self.scale.px_hi), self.scale.px_lo.max(self.scale.px_hi));
        self.map(v).map(|p| p.clamp(a, b))
    }
    fn lo(&self) -> f64 {
        if self.log { 10f64.powf(self.scale.lo) } else { self.scale.lo }
    }
    fn hi(&self) -> f64 {
        if self.log { 10f64.powf(self.scale.hi) } else { self.scale.hi }
    }
}

/// The values a layer puts on each axis (for the ranges).
fn extent(l: &Layer, xs: &mut Vec<f64>, ys: &mut Vec<f64>) {
    match l {
        Layer::Line { points, .. } => {
            for &(x, y) in points {
                xs.push(x);
                ys.push(y);
            }
        }
        Layer::Points { points, .. } => {
            for p in points {
                xs.push(p.x);
                ys.push(p.y);
            }
        }
        Layer::Bars { stacked, series } => {
            let n = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
            for i in 0..n {
                let vals = series.iter().filter_map(|s| s.values.get(i).copied().filter(|v| v.is_finite()));
                if *stacked {
                    ys.push(vals.sum());
                } else {
                    ys.extend(vals);
                    let ends = series.iter().filter_map(|s| s.ci.get(i)).flat_map(|&(a, b)| [a, b]);
                    ys.extend(ends.filter(|v| v.is_finite()));
                }
            }
            ys.push(0.0);
        }
        Layer::Identity { .. } => {}
        Layer::Events { events, .. } => xs.extend(events.iter().map(|e| e.0)),
    }
}

fn draw_panel(out: &mut String, p: &Panel, clip: &str, left: f64, top: f64) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for l in &p.layers {
        extent(l, &mut xs, &mut ys);
    }
    if p.layers.iter().any(|l| matches!(l, Layer::Identity { .. })) {
        // y = x: both axes span both sets.
        let all: Vec<f64> = xs.iter().chain(&ys).copied().collect();
        xs.clone_from(&all);
        ys = all;
    }
    let (bottom, right) = (top + PANEL_H, left + PANEL_W);
    let x = Mapped::new(&p.x, &xs, left, right);
    let y = Mapped::new(&p.y, &ys, bottom, top);
    let _ = writeln!(out, "<g class=\"panel\" data-title=\"{}\">", esc(&p.title));
    let _ = writeln!(
        out,
        "<clipPath id=\"{clip}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>",
        c(left),
        c(top),
        c(PANEL_W),
        c(PANEL_H)
    );
    let _ = writeln!(
        out,
        "<text class=\"panel-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">{}</text>",
        c(left + PANEL_W / 2.0),
        c(top - 54.0),
        esc(&p.title)
    );
    legend(out, p, left, top - 36.0);
    axes(out, p, &x, &y, left, top);
    let empty = xs.iter().chain(&ys).all(|v| !v.is_finite()) && p.x.categories.is_empty();
    if empty {
        let _ = writeln!(
            out,
            "<text class=\"no-data\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666666\">no data</text>",
            c(left + PANEL_W / 2.0),
            c(top + PANEL_H / 2.0)
        );
    }
    let mut placed: Vec<Rect> = Vec::new();
    let mut labels = String::new();
    for l in &p.layers {
        let _ = writeln!(
            out,
            "<g class=\"layer\" data-kind=\"{}\" data-name=\"{}\" clip-path=\"url(#{clip})\">",
            l.kind(),
            esc(&l.name())
        );
        draw_layer(out, &mut labels, l, &x, &y, &mut placed);
        out.push_str("</g>\n");
    }
    // Labels are not clipped: a line's name stands right of the panel.
    let _ = write!(out, "<g class=\"labels\">\n{labels}</g>\n</g>\n");
}

/// The legend row under a panel's title: each layer's mark and name.
fn legend(out: &mut String, p: &Panel, left: f64, mut y: f64) {
    out.push_str("<g class=\"legend\" font-size=\"11\">\n");
    let mut x = left;
    for l in &p.layers {
        for (name, s) in l.legend() {
            let w = 26.0 + name.chars().count() as f64 * 6.0 + 12.0;
            if x + w > left + PANEL_W + M_RIGHT - 10.0 && x > left {
                // The next row.
                x = left;
                y += 15.0;
            }
            match l {
                Layer::Bars { .. } => swatch(out, s, x, y - 9.0, 18.0, 10.0),
                Layer::Points { .. } => marker(out, s, x + 10.0, y - 4.0, name),
                _ => {
                    let _ = writeln!(
                        out,
                        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
                        c(x),
                        c(y - 4.0),
                        c(x + 20.0),
                        c(y - 4.0),
                        s.colour(),
                        s.dash_attr()
                    );
                    if matches!(l, Layer::Line { marks: true, .. }) {
                        marker(out, s, x + 10.0, y - 4.0, "");
                    }
                }
            }
            let _ = writeln!(out, "<text x=\"{}\" y=\"{}\">{}</text>", c(x + 24.0), c(y), esc(name));
            x += w;
        }
    }
    out.push_str("</g>\n");
}

fn swatch(out: &mut String, s: Style, x: f64, y: f64, w: f64, h: f64) {
    let fill = if s.hollow { "url(#hatch)".to_string() } else { s.colour().to_string() };
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"#333333\" stroke-width=\"0.8\"/>",
        c(x),
        c(y),
        c(w.max(0.5)),
        c(h.max(0.0)),
    );
}

fn axes(out: &mut String, p: &Panel, x: &Mapped, y: &Mapped, left: f64, top: f64) {
    let (bottom, right) = (top + PANEL_H, left + PANEL_W);
    let _ = writeln!(out, "<g class=\"grid\" stroke=\"{GRID}\" stroke-width=\"1\">");
    for (v, _) in &y.ticks {
        if let Some(py) = y.map(*v) {
            let _ = writeln!(out, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", c(left), c(py), c(right), c(py));
        }
    }
    if p.x.categories.is_empty() {
        for (v, _) in &x.ticks {
            if let Some(px) = x.map(*v) {
                let _ =
                    writeln!(out, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", c(px), c(top), c(px), c(bottom));
            }
        }
    }
    out.push_str("</g>\n");
    let _ = writeln!(
        out,
        "<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333333\"/>",
        c(left),
        c(top),
        c(PANEL_W),
        c(PANEL_H)
    );
    out.push_str("<g class=\"y-ticks\" font-family=\"monospace\" font-size=\"11\" text-anchor=\"end\">\n");
    for (v, label) in &y.ticks {
        if let Some(py) = y.map(*v) {
            let _ = writeln!(out, "<text x=\"{}\" y=\"{}\">{}</text>", c(left - 6.0), c(py + 4.0), esc(label));
        }
    }
    out.push_str("</g>\n");
    let rotate = bottom_margin(p) > M_BOTTOM_NUM;
    out.push_str("<g class=\"x-ticks\" font-family=\"monospace\" font-size=\"11\">\n");
    for (v, label) in &x.ticks {
        let Some(px) = x.map(*v) else { continue };
        if rotate {
            let ty = bottom + 14.0;
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" transform=\"rotate(-55 {} {})\">{}</text>",
                c(px),
                c(ty),
                c(px),
                c(ty),
                esc(label)
            );
        } else {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                c(px),
                c(bottom + 16.0),
                esc(label)
            );
        }
    }
    out.push_str("</g>\n");
    let _ = writeln!(
        out,
        "<text class=\"x-label{}\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        if p.x.categories.is_empty() { "" } else { " categorical" },
        c(left + PANEL_W / 2.0),
        c(bottom + bottom_margin(p) - 12.0),
        esc(&p.x.label)
    );
    let (lx, ly) = (left - 54.0, top + PANEL_H / 2.0);
    let _ = writeln!(
        out,
        "<text class=\"y-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 {} {})\">{}</text>",
        c(lx),
        c(ly),
        c(lx),
        c(ly),
        esc(&p.y.label)
    );
}

/// A label's box, to keep labels apart.
#[derive(Clone, Copy)]
struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect {
    fn overlaps(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// Writes `text` near `(px, py)` where it overlaps no label or marker
/// placed yet: right, left, above, below, then the diagonals, in rings
/// further out, with a thin leader line back to the point once it is
/// away from it. Records its box.
fn place_label(out: &mut String, placed: &mut Vec<Rect>, px: f64, py: f64, text: &str, class: &str) {
    let w = text.chars().count() as f64 * 6.0;
    let h = 11.0;
    let mut tries = Vec::new();
    for d in [1.0, 2.0, 3.5, 5.0, 7.0] {
        let (dx, dy) = (6.0 * d, 7.0 * d);
        tries.extend([
            (px + dx, py + 4.0),
            (px - dx - w, py + 4.0),
            (px - w / 2.0, py - dy),
            (px - w / 2.0, py + dy + h),
            (px + dx, py - dy),
            (px - dx - w, py - dy),
            (px + dx, py + dy + h),
            (px - dx - w, py + dy + h),
        ]);
    }
    let r = |(x, y): (f64, f64)| Rect { x0: x, y0: y - h, x1: x + w, y1: y };
    let free = tries.iter().position(|&t| placed.iter().all(|p| !r(t).overlaps(p))).unwrap_or(0);
    let pick = tries[free];
    placed.push(r(pick));
    if free >= 8 {
        let (lx, ly) = ((pick.0 + w / 2.0).clamp(pick.0, pick.0 + w), pick.1 - h / 2.0);
        let _ = writeln!(
            out,
            "<line class=\"leader\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999999\" stroke-width=\"0.6\"/>",
            c(px),
            c(py),
            c(lx),
            c(ly)
        );
    }
    let _ = writeln!(
        out,
        "<text class=\"{class}\" x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#222222\">{}</text>",
        c(pick.0),
        c(pick.1),
        esc(text)
    );
}

/// A marker at `(px, py)` with a tooltip.
fn marker(out: &mut String, s: Style, px: f64, py: f64, tip: &str) {
    let (fill, stroke) = if s.hollow { ("#ffffff", s.colour()) } else { (s.colour(), s.colour()) };
    let attrs = format!("fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"");
    let shape = match s.shape {
        Shape::Circle => format!("<circle cx=\"{}\" cy=\"{}\" r=\"4\" {attrs}>", c(px), c(py)),
        Shape::Square => format!("<rect x=\"{}\" y=\"{}\" width=\"7\" height=\"7\" {attrs}>", c(px - 3.5), c(py - 3.5)),
        Shape::Triangle => format!(
            "<polygon points=\"{},{} {},{} {},{}\" {attrs}>",
            c(px),
            c(py - 5.0),
            c(px - 4.5),
            c(py + 3.5),
            c(px + 4.5),
            c(py + 3.5)
        ),
        Shape::Diamond => format!(
            "<polygon points=\"{},{} {},{} {},{} {},{}\" {attrs}>",
            c(px),
            c(py - 5.0),
            c(px + 5.0),
            c(py),
            c(px),
            c(py + 5.0),
            c(px - 5.0),
            c(py)
        ),
    };
    let close = match s.shape {
        Shape::Circle => "</circle>",
        Shape::Square => "</rect>",
        _ => "</polygon>",
    };
    let _ = writeln!(out, "{shape}<title>{}</title>{close}", esc(tip));
}

fn draw_layer(out: &mut String, labels: &mut String, l: &Layer, x: &Mapped, y: &Mapped, placed: &mut Vec<Rect>) {
    match l {
        Layer::Line { name, style, points, step, marks } => {
            let mut coords = Vec::new();
            let mut last: Option<(f64, f64)> = None;
            for &(vx, vy) in points {
                let (Some(px), Some(py)) = (x.map(vx), y.map(vy)) else { continue };
                if let (true, Some((_, ly))) = (*step, last) {
                    coords.push(format!("{},{}", c(px), c(ly)));
                }
                coords.push(format!("{},{}", c(px), c(py)));
                last = Some((px, py));
            }
            let _ = writeln!(
                out,
                "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{} points=\"{}\"><title>{}</title></polyline>",
                style.colour(),
                style.dash_attr(),
                coords.join(" "),
                esc(name)
            );
            if *marks {
                for &(vx, vy) in points {
                    if let (Some(px), Some(py)) = (x.map(vx), y.map(vy)) {
                        let _ = write!(out, "<g class=\"point\" data-x=\"{vx}\" data-y=\"{vy}\">");
                        marker(out, *style, px, py, &format!("{name}: {}, {}", fmt_num(vx), fmt_num(vy)));
                        out.push_str("</g>\n");
                    }
                }
            }
            if let Some((px, py)) = last {
                place_label(labels, placed, px, py, name, "line-label");
            }
        }
        Layer::Points { name, style, points } => {
            for p in points {
                let (Some(px), Some(py)) = (x.map(p.x), y.map(p.y)) else { continue };
                let tip = format!("{}: {}, {}", p.label.as_deref().unwrap_or(name), fmt_num(p.x), fmt_num(p.y));
                let _ = write!(out, "<g class=\"point\" data-x=\"{}\" data-y=\"{}\">", p.x, p.y);
                marker(out, *style, px, py, &tip);
                out.push_str("</g>\n");
                placed.push(Rect { x0: px - 5.0, y0: py - 5.0, x1: px + 5.0, y1: py + 5.0 });
            }
            for p in points {
                let (Some(px), Some(py), Some(label)) = (x.map(p.x), y.map(p.y), &p.label) else { continue };
                place_label(labels, placed, px, py, label, "point-label");
            }
        }
        Layer::Bars { stacked, series } => draw_bars(out, *stacked, series, x, y),
        Layer::Identity { name, factor } => {
            let (lo, hi) = (x.lo(), x.hi());
            let pt = |vx: f64, vy: f64| format!("{},{}", c(x.scale.map(vx)), c(y.scale.map(vy)));
            if *factor > 1.0 {
                let f = *factor;
                // Two wedges through the origin: x > 0 and x < 0.
                for end in [hi, lo] {
                    if end == 0.0 {
                        continue;
                    }
                    let _ = writeln!(
                        out,
                        "<polygon class=\"band\" points=\"{} {} {}\" fill=\"#000000\" fill-opacity=\"0.08\" stroke=\"none\"/>",
                        pt(0.0, 0.0),
                        pt(end, end / f),
                        pt(end, end * f)
                    );
                }
            }
            let _ = writeln!(
                out,
                "<line class=\"identity\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#000000\" stroke-width=\"1\" stroke-dasharray=\"2 3\"/>",
                c(x.scale.map(lo)),
                c(y.scale.map(lo)),
                c(x.scale.map(hi)),
                c(y.scale.map(hi))
            );
            let _ = writeln!(
                out,
                "<line class=\"axis-zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888888\" stroke-width=\"0.8\"/>",
                c(x.scale.px_lo),
                c(y.scale.map(0.0)),
                c(x.scale.px_hi),
                c(y.scale.map(0.0))
            );
            let _ = writeln!(
                out,
                "<line class=\"axis-zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888888\" stroke-width=\"0.8\"/>",
                c(x.scale.map(0.0)),
                c(y.scale.px_lo),
                c(x.scale.map(0.0)),
                c(y.scale.px_hi)
            );
            // Named on the line itself, inside the panel.
            let at = lo + (hi - lo) * 0.85;
            if let (Some(px), Some(py)) = (x.map_clamped(at), y.map_clamped(at)) {
                place_label(labels, placed, px, py, name, "band-label");
            }
        }
        Layer::Events { name, style, events } => {
            let bottom = y.scale.px_lo;
            for (vx, label) in events {
                let Some(px) = x.map(*vx) else { continue };
                let _ = writeln!(
                    out,
                    "<line class=\"event\" data-x=\"{vx}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}: {}</title></line>",
                    c(px),
                    c(bottom),
                    c(px),
                    c(bottom - 10.0),
                    style.colour(),
                    esc(name),
                    esc(label)
                );
                if !label.is_empty() {
                    place_label(labels, placed, px, bottom - 12.0, label, "event-label");
                }
            }
        }
    }
}

fn draw_bars(out: &mut String, stacked: bool, series: &[BarSeries], x: &Mapped, y: &Mapped) {
    let slot = (x.scale.px_hi - x.scale.px_lo) / (x.scale.hi - x.scale.lo).max(1.0);
    let group = slot * 0.7;
    let n = series.len().max(1) as f64;
    let cats = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    for i in 0..cats {
        let Some(cx) = x.map(i as f64) else { continue };
        let mut base = 0.0;
        for (k, s) in series.iter().enumerate() {
            let Some(&v) = s.values.get(i).filter(|v| v.is_finite()) else { continue };
            // On a log axis a bar stands on the axis's floor.
            let floor = if y.log { y.lo() } else { 0.0 };
            let (from, to) = if stacked { (if base == 0.0 { floor } else { base }, base + v) } else { (floor, v) };
            base = to;
            let (Some(p0), Some(p1)) = (y.map_clamped(from), y.map_clamped(to)) else { continue };
            let (bx, bw) =
                if stacked { (cx - group / 2.0, group) } else { (cx - group / 2.0 + group / n * k as f64, group / n) };
            let _ = write!(out, "<g class=\"bar\" data-series=\"{}\" data-x=\"{i}\" data-y=\"{v}\">", esc(&s.name));
            swatch(out, s.style, bx + 1.0, p0.min(p1), bw - 2.0, (p1 - p0).abs());
            let ci = s.ci.get(i).copied().filter(|(a, b)| !stacked && a.is_finite() && b.is_finite());
            let tip = ci.map_or(String::new(), |(a, b)| format!(", CI {} to {}", fmt_num(a.min(b)), fmt_num(a.max(b))));
            let _ = writeln!(out, "<title>{}: {}{tip}</title></g>", esc(&s.name), fmt_num(v));
            if let Some((a, b)) = ci
                && let (Some(pa), Some(pb)) = (y.map_clamped(a), y.map_clamped(b))
            {
                let (mx, cap) = (bx + bw / 2.0, (bw * 0.2).min(6.0));
                let _ = writeln!(
                    out,
                    "<path class=\"whisker\" d=\"M{},{}V{}M{},{}H{}M{},{}H{}\" stroke=\"#000000\" stroke-width=\"1.2\" fill=\"none\"/>",
                    c(mx),
                    c(pa),
                    c(pb),
                    c(mx - cap),
                    c(pa),
                    c(mx + cap),
                    c(mx - cap),
                    c(pb),
                    c(mx + cap)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::figure::Point;

    fn panel(layers: Vec<Layer>) -> Panel {
        Panel { title: "p".into(), x: Axis::linear("x (pages)"), y: Axis::log("y (ns)"), layers }
    }

    #[test]
    fn log_axes_leave_out_what_they_cannot_draw() {
        let f = Figure {
            title: "t".into(),
            panels: vec![panel(vec![Layer::Points {
                name: "s".into(),
                style: Style::nth(0),
                points: vec![Point::at(1.0, 10.0), Point::at(2.0, 0.0), Point::at(3.0, f64::NAN), Point::at(4.0, 1e4)],
            }])],
            caption: "c".into(),
        };
        let svg = f.to_svg();
        assert_eq!(svg.matches("class=\"point\"").count(), 2, "{svg}");
        for decade in ["10", "100", "1k", "10k"] {
            assert!(svg.contains(&format!(">{decade}</text>")), "decade {decade} ticked");
        }
    }

    #[test]
    fn labels_do_not_overlap() {
        let mut out = String::new();
        let mut placed = Vec::new();
        for _ in 0..6 {
            place_label(&mut out, &mut placed, 100.0, 100.0, "label", "l");
        }
        for (i, a) in placed.iter().enumerate() {
            for b in &placed[i + 1..] {
                assert!(!a.overlaps(b));
            }
        }
    }

    /// Parses `svg`: well-formed XML with one `<svg>` root.
    fn parse(svg: &str) -> roxmltree::Document<'_> {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}:\n{svg}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        doc
    }

    fn figure(panels: Vec<Panel>) -> Figure {
        Figure { title: "t".into(), panels, caption: "c".into() }
    }

    fn bar_panel(series: Vec<BarSeries>) -> Panel {
        Panel {
            title: "b".into(),
            x: Axis::categories("row", vec!["a".into(), "b".into()]),
            y: Axis::from_zero("v (%)"),
            layers: vec![Layer::Bars { stacked: false, series }],
        }
    }

    #[test]
    fn names_are_escaped() {
        let name = "a<b & \"c\" 'd'>\u{1}";
        let f = Figure {
            title: name.into(),
            panels: vec![Panel {
                title: name.into(),
                x: Axis::categories(name, vec![name.into()]),
                y: Axis::linear(name),
                layers: vec![Layer::Points {
                    name: name.into(),
                    style: Style::nth(0),
                    points: vec![Point::labelled(0.0, 1.0, name)],
                }],
            }],
            caption: name.into(),
        };
        let svg = f.to_svg();
        let doc = parse(&svg);
        let clean = "a<b & \"c\" 'd'>";
        assert!(doc.descendants().any(|n| n.attribute("data-name") == Some(clean)));
        assert!(doc.descendants().filter(|n| n.text() == Some(clean)).count() >= 4, "{svg}");
    }

    #[test]
    fn ids_are_the_figure_s_own_and_names_are_left_as_they_are() {
        let series = vec![BarSeries { name: "hatch".into(), style: Style::PUBLISHED, values: vec![1.0], ci: vec![] }];
        let svg = Figure { title: "Fig 1".into(), ..figure(vec![bar_panel(series)]) }.to_svg();
        parse(&svg);
        assert!(svg.contains("id=\"Fig1hatch\"") && svg.contains("fill=\"url(#Fig1hatch)\""), "{svg}");
        assert!(svg.contains("data-series=\"hatch\"") && svg.contains("id=\"Fig1clip0\""), "{svg}");
    }

    #[test]
    fn degenerate_figures_are_valid_documents() {
        let nan = f64::NAN;
        let line = |points: Vec<(f64, f64)>| Layer::Line {
            name: "l".into(),
            style: Style::nth(1),
            points,
            step: true,
            marks: true,
        };
        let cases = vec![
            figure(vec![]),
            figure(vec![panel(vec![])]),
            figure(vec![panel(vec![line(vec![(nan, nan), (f64::INFINITY, 1.0)])])]),
            figure(vec![panel(vec![line(vec![(1.0, 1e300), (2.0, -1e300)])])]),
            figure(vec![panel(vec![line(vec![(3.0, 3.0)])])]),
            figure(vec![bar_panel(vec![])]),
            figure(vec![bar_panel(vec![BarSeries {
                name: "s".into(),
                style: Style::nth(1),
                values: vec![nan],
                ci: vec![(nan, 1.0)],
            }])]),
            figure(vec![Panel { x: Axis::categories("none", vec![]), ..bar_panel(vec![]) }]),
        ];
        for f in cases {
            let svg = f.to_svg();
            parse(&svg);
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        }
        let svg = figure(vec![panel(vec![])]).to_svg();
        assert!(svg.contains("no data"), "{svg}");
    }

    #[test]
    fn bars_stand_on_zero_with_one_whisker_each() {
        let series = vec![BarSeries {
            name: "s".into(),
            style: Style::nth(1),
            values: vec![10.0, -20.0],
            ci: vec![(8.0, 12.0), (nan_pair().0, 1.0)],
        }];
        let svg = figure(vec![bar_panel(series)]).to_svg();
        let doc = parse(&svg);
        let bars: Vec<_> = doc.descendants().filter(|n| n.attribute("class") == Some("bar")).collect();
        assert_eq!(bars.len(), 2);
        let rect = |b: &roxmltree::Node<'_, '_>| {
            let r = b.children().find(|n| n.tag_name().name() == "rect").unwrap();
            let f = |a| r.attribute(a).unwrap().parse::<f64>().unwrap();
            (f("y"), f("height"))
        };
        let ((y0, h0), (y1, h1)) = (rect(&bars[0]), rect(&bars[1]));
        assert!(h1 > h0 * 1.9 && h1 < h0 * 2.1, "{h0} {h1}");
        assert!((y0 + h0 - y1).abs() < 0.2, "the positive bar ends where the negative one starts: at 0");
        assert_eq!(svg.matches("class=\"whisker\"").count(), 1, "only the bar with a finite interval");
    }

    fn nan_pair() -> (f64, f64) {
        (f64::NAN, f64::NAN)
    }

    #[test]
    fn wrap_keeps_words_whole() {
        let w = wrap("aaa bbb ccc ddd eee fff ggg hhh iii jjj kkk", 20);
        assert!(w.len() >= 2 && w.iter().all(|l| l.chars().count() <= 20), "{w:?}");
        assert_eq!(w.join(" "), "aaa bbb ccc ddd eee fff ggg hhh iii jjj kkk");
    }
}
