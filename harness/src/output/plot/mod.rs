//! Small, dependency-free SVG charts for mmlab's measurements.
//!
//! Two kinds of chart are drawn:
//!
//! - [`bar_chart`]: grouped vertical bars, one group per test row and one bar
//!   per configuration, each with a whisker for its confidence interval. Bars
//!   are coloured by series name (the same name always gets the same colour,
//!   in order of first appearance) and a legend on the right names the series.
//!   The y axis starts at 0, or lower if any value is negative, and reaches a
//!   little above the highest whisker.
//! - [`line_chart`]: one polyline per series over numeric x and y axes, with a
//!   legend.
//!
//! Both axes carry "nice" ticks (steps of 1, 2 or 5 times a power of ten) with
//! light gridlines, and tick labels are written compactly (`250`, `1.5k`,
//! `2M`).
//!
//! The output is a complete SVG document as a `String`. Generating it needs
//! no font files and nothing is rasterised: every piece of text is an SVG
//! `<text>` element naming only a generic family (`font-family="monospace"`
//! for tick and group labels, `sans-serif` for the rest), so whatever viewer
//! opens the file renders the text with its own fonts. Text widths, which
//! the layout needs for margins and label rotation, are estimated from the
//! number of characters.
//!
//! The functions never panic. Non-finite values (NaN, ±∞) are skipped, a
//! confidence interval given as `lo > hi` is swapped, and a chart left with
//! nothing to draw (no input, or only non-finite values) is still a valid
//! document with a "no data" note. The colours are the Okabe–Ito palette,
//! which stays distinguishable under the common forms of colour blindness;
//! after its eight colours are used, bars get a translucent fill with an
//! outline and lines are dashed. Coordinates are written with at most one
//! decimal.
//!
//! # Why not plotters
//!
//! plotters 0.3.7's SVG backend was tried on the same compare chart (three
//! tests, two configurations, modelled time in % of base; built with
//! `default-features = false, features = ["svg_backend", "all_series",
//! "all_elements"]`, so without its `ttf` font stack, which needs fontconfig
//! on the host). It renders, but for this chart ours is clearly better:
//! - Group labels: ours rotates test names by -35 degrees so that long names
//!   like `long_busy_list_alloc_test p:1 h:0` fit under their bars; plotters'
//!   label transforms are multiples of 90 degrees, and without a font backend
//!   it does not measure text, so margins for long labels are guesswork.
//! - Grouped bars with a confidence whisker per bar and a legend are what
//!   every compare chart is; plotters has no grouped-bar series, so each
//!   chart would assemble them by hand on a segmented coordinate anyway.
//! - The file: ours is 4.8 KB with one element per mark grouped under
//!   semantic classes (`y-grid`, `y-ticks`, `group-labels`), easy to restyle
//!   or diff; plotters wrote 10.5 KB for a simpler chart (fractional font
//!   sizes, one `<line>` per minor grid line, no grouping).
//! - Cost: ours has no dependency; plotters adds a crate tree for what is
//!   one page of layout code.

mod axis;
pub mod figure;

use axis::{Scale, Ticks, fmt_num, nice_ticks, trim_zeros};
use std::fmt::Write as _;

/// One bar: the mean of a configuration's measurements and its confidence
/// interval.
#[derive(Debug, Clone)]
pub struct Bar {
    /// The configuration; names the colour and the legend entry.
    pub series: String,
    /// Height of the bar.
    pub mean: f64,
    /// Lower end of the confidence interval (bottom of the whisker).
    pub lo: f64,
    /// Upper end of the confidence interval (top of the whisker).
    pub hi: f64,
}

/// A group of bars side by side, labelled under the x axis: one test row.
#[derive(Debug, Clone)]
pub struct BarGroup {
    /// Written under the group; rotated when too long for the group's width.
    pub label: String,
    /// One bar per configuration, drawn left to right.
    pub bars: Vec<Bar>,
}

/// One line of a [`line_chart`].
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry; series with the same label get the same colour.
    pub label: String,
    /// `(x, y)` points, joined in the order given.
    pub points: Vec<(f64, f64)>,
}

/// Okabe & Ito, "Color Universal Design" (2002), reordered so that the
/// lighter colours (sky blue, yellow) come late.
const PALETTE: [&str; 8] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

/// Estimated advance of one character of 11 px monospace text (0.6 em).
const MONO_CHAR_W: f64 = 6.6;
/// Estimated advance of one character of 12 px sans-serif text; generous,
/// so that estimates err towards too much room.
const SANS_CHAR_W: f64 = 7.2;
/// Estimated advance of one character of the 16 px bold title.
const TITLE_CHAR_W: f64 = 9.6;
/// Group and legend labels longer than this are cut, with an ellipsis.
const MAX_LABEL_CHARS: usize = 40;

/// Space above the plot area, for the title.
const TOP: f64 = 44.0;
/// Height of the plot area.
const PLOT_H: f64 = 320.0;
/// Space left of the plot area, for the y tick labels and the y axis label.
const LEFT: f64 = 72.0;
/// Height of one legend entry.
const LEGEND_ROW: f64 = 18.0;
/// Angle of rotated group labels, in degrees (counter-clockwise).
const LABEL_ANGLE: f64 = 35.0;

const GRID_COLOUR: &str = "#dddddd";
const AXIS_COLOUR: &str = "#333333";

/// Grouped vertical bars with confidence-interval whiskers; see the module
/// documentation. Bars whose mean is not finite are left out; a bar whose
/// `lo` or `hi` is not finite is drawn without a whisker.
pub fn bar_chart(title: &str, y_label: &str, groups: &[BarGroup]) -> String {
    struct Drawn<'a> {
        series: &'a str,
        mean: f64,
        ci: Option<(f64, f64)>,
    }
    let drawn: Vec<Vec<Drawn<'_>>> = groups
        .iter()
        .map(|g| {
            g.bars
                .iter()
                .filter(|b| b.mean.is_finite())
                .map(|b| Drawn {
                    series: &b.series,
                    mean: b.mean,
                    ci: (b.lo.is_finite() && b.hi.is_finite()).then(|| (b.lo.min(b.hi), b.lo.max(b.hi))),
                })
                .collect()
        })
        .collect();
    let colours = ColourMap::new(drawn.iter().flatten().map(|d| d.series));
    if colours.names.is_empty() {
        return empty_chart(title);
    }

    // Value range: always includes 0, with 10% headroom beyond the extremes.
    let (mut vmin, mut vmax) = (0.0_f64, 0.0_f64);
    for d in drawn.iter().flatten() {
        vmin = vmin.min(d.mean);
        vmax = vmax.max(d.mean);
        if let Some((lo, hi)) = d.ci {
            vmin = vmin.min(lo);
            vmax = vmax.max(hi);
        }
    }
    let headroom = |v: f64| if (v * 1.1).is_finite() { v * 1.1 } else { v };
    let ticks = nice_ticks(headroom(vmin), headroom(vmax));

    // Horizontal layout: one slot per group, bars centred in their slot.
    let max_bars = drawn.iter().map(Vec::len).max().unwrap_or(0).max(1) as f64;
    let n_groups = groups.len().max(1) as f64;
    let plot_w = (n_groups * (max_bars * 18.0 + 20.0)).max(360.0);
    let slot_w = plot_w / n_groups;
    let bar_w = ((slot_w - 20.0) / max_bars).min(40.0);

    let labels: Vec<String> = groups.iter().map(|g| truncate(&g.label, MAX_LABEL_CHARS)).collect();
    let label_px = |s: &str| s.chars().count() as f64 * MONO_CHAR_W;
    let widest_label = labels.iter().map(|l| label_px(l)).fold(0.0, f64::max);
    let rotate = widest_label > slot_w - 6.0;
    let (sin, cos) = LABEL_ANGLE.to_radians().sin_cos();
    let mut left = LEFT;
    let label_h = if rotate {
        // A rotated label ends at its slot's centre and reaches left and down.
        for (i, l) in labels.iter().enumerate() {
            left = left.max(label_px(l) * cos - slot_w * (i as f64 + 0.5) + 6.0);
        }
        widest_label * sin + 11.0 * cos + 16.0
    } else {
        24.0
    };

    let legend_x = left + plot_w + 20.0;
    let legend_w = colours.legend_width();
    let width = (legend_x + legend_w + 10.0).max(title_width(title));
    let height = (TOP + PLOT_H + label_h + 10.0).max(TOP + LEGEND_ROW * colours.names.len() as f64 + 20.0);

    let x_axis = Scale::new(0.0, 1.0, left, left + plot_w);
    let y_axis = Scale::new(ticks.first(), ticks.last(), TOP + PLOT_H, TOP);

    let mut out = String::new();
    open_document(&mut out, width, height, title);
    y_grid(&mut out, &ticks, &y_axis, &x_axis);
    y_axis_label(&mut out, y_label, &y_axis, &x_axis);
    let y0 = y_axis.map(0.0);

    // Group labels.
    out.push_str("<g class=\"group-labels\" font-family=\"monospace\" font-size=\"11\" fill=\"#000000\">\n");
    for (i, l) in labels.iter().enumerate() {
        let cx = c(left + slot_w * (i as f64 + 0.5));
        let bottom = TOP + PLOT_H;
        if rotate {
            let y = c(bottom + 14.0);
            let _ = writeln!(
                out,
                "<text x=\"{cx}\" y=\"{y}\" text-anchor=\"end\" transform=\"rotate(-{LABEL_ANGLE} {cx} {y})\">{}</text>",
                esc(l)
            );
        } else {
            let _ =
                writeln!(out, "<text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text>", c(bottom + 16.0), esc(l));
        }
    }
    out.push_str("</g>\n");

    // Bars and whiskers.
    out.push_str("<g class=\"bars\">\n");
    for (i, (group, bars)) in groups.iter().zip(&drawn).enumerate() {
        let x_start = left + slot_w * i as f64 + (slot_w - bars.len() as f64 * bar_w) / 2.0;
        for (j, d) in bars.iter().enumerate() {
            let x = x_start + j as f64 * bar_w;
            let ym = y_axis.map(d.mean);
            let idx = colours.index(d.series);
            let style = if idx < PALETTE.len() {
                String::new()
            } else {
                " fill-opacity=\"0.5\" stroke=\"#000000\" stroke-width=\"1\"".to_string()
            };
            let ci = match d.ci {
                Some((lo, hi)) => format!(", CI {} to {}", fmt_num(lo), fmt_num(hi)),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{style}><title>{}: {}: {}{ci}</title></rect>",
                c(x + 1.0),
                c(ym.min(y0)),
                c((bar_w - 2.0).max(1.0)),
                c((ym - y0).abs()),
                colours.colour(idx),
                esc(&group.label),
                esc(d.series),
                fmt_num(d.mean),
            );
            if let Some((lo, hi)) = d.ci {
                let cx = c(x + bar_w / 2.0);
                let (ylo, yhi) = (c(y_axis.map(lo)), c(y_axis.map(hi)));
                let (cap_l, cap_r) = (c(x + bar_w * 0.3), c(x + bar_w * 0.7));
                let _ = writeln!(
                    out,
                    "<line class=\"whisker\" x1=\"{cx}\" y1=\"{ylo}\" x2=\"{cx}\" y2=\"{yhi}\" stroke=\"#000000\" stroke-width=\"1.2\"/>"
                );
                for y in [ylo, yhi] {
                    let _ = writeln!(
                        out,
                        "<line class=\"whisker-cap\" x1=\"{cap_l}\" y1=\"{y}\" x2=\"{cap_r}\" y2=\"{y}\" stroke=\"#000000\" stroke-width=\"1.2\"/>"
                    );
                }
            }
        }
    }
    out.push_str("</g>\n");

    // Axes: the baseline at 0 and the y axis.
    let _ = writeln!(
        out,
        "<g class=\"axes\" stroke=\"{AXIS_COLOUR}\" stroke-width=\"1\">\n<line x1=\"{l}\" y1=\"{y}\" x2=\"{r}\" y2=\"{y}\"/>\n<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{b}\"/>\n</g>",
        l = c(left),
        r = c(left + plot_w),
        y = c(y0),
        t = c(TOP),
        b = c(TOP + PLOT_H),
    );

    colours.legend(&mut out, legend_x, LegendMark::Swatch);
    out.push_str("</svg>\n");
    out
}

/// One polyline per series, joining its points in the order given; see the
/// module documentation. Points with a non-finite coordinate are left out; a
/// series left with a single point is drawn as a dot.
///
/// The x axis spans the data. The y axis also includes 0 when that at most
/// doubles its span, so that values far from 0 are not flattened.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let drawn: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| (s.label.as_str(), s.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect()))
        .collect();
    let drawn: Vec<_> = drawn.into_iter().filter(|(_, pts)| !pts.is_empty()).collect();
    if drawn.is_empty() {
        return empty_chart(title);
    }
    let colours = ColourMap::new(drawn.iter().map(|(label, _)| *label));

    let all = || drawn.iter().flat_map(|(_, pts)| pts.iter().copied());
    let fold = |f: fn(f64, f64) -> f64, init: f64, pick: fn((f64, f64)) -> f64| all().map(pick).fold(init, f);
    let (xmin, xmax) = (fold(f64::min, f64::INFINITY, |p| p.0), fold(f64::max, f64::NEG_INFINITY, |p| p.0));
    let (mut ymin, mut ymax) = (fold(f64::min, f64::INFINITY, |p| p.1), fold(f64::max, f64::NEG_INFINITY, |p| p.1));
    if ymin > 0.0 && ymin <= ymax / 2.0 {
        ymin = 0.0;
    } else if ymax < 0.0 && ymax >= ymin / 2.0 {
        ymax = 0.0;
    }
    let x_ticks = nice_ticks(xmin, xmax);
    let y_ticks = nice_ticks(ymin, ymax);

    let plot_w = 560.0;
    let legend_x = LEFT + plot_w + 20.0;
    let width = (legend_x + colours.legend_width() + 10.0).max(title_width(title));
    let height = (TOP + PLOT_H + 56.0).max(TOP + LEGEND_ROW * colours.names.len() as f64 + 20.0);
    let x_axis = Scale::new(x_ticks.first(), x_ticks.last(), LEFT, LEFT + plot_w);
    let y_axis = Scale::new(y_ticks.first(), y_ticks.last(), TOP + PLOT_H, TOP);

    let mut out = String::new();
    open_document(&mut out, width, height, title);
    y_grid(&mut out, &y_ticks, &y_axis, &x_axis);
    y_axis_label(&mut out, y_label, &y_axis, &x_axis);

    // Vertical gridlines and x tick labels.
    let bottom = TOP + PLOT_H;
    let _ = writeln!(out, "<g class=\"x-grid\" stroke=\"{GRID_COLOUR}\" stroke-width=\"1\">");
    for &t in &x_ticks.values {
        let x = c(x_axis.map(t));
        let _ = writeln!(out, "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>", c(TOP), c(bottom));
    }
    out.push_str("</g>\n");
    out.push_str(
        "<g class=\"x-ticks\" font-family=\"monospace\" font-size=\"11\" fill=\"#000000\" text-anchor=\"middle\">\n",
    );
    for (&t, label) in x_ticks.values.iter().zip(x_ticks.labels()) {
        let _ = writeln!(out, "<text x=\"{}\" y=\"{}\">{}</text>", c(x_axis.map(t)), c(bottom + 16.0), esc(&label));
    }
    out.push_str("</g>\n");
    let _ = writeln!(
        out,
        "<text class=\"x-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{}</text>",
        c(LEFT + plot_w / 2.0),
        c(bottom + 40.0),
        esc(x_label)
    );

    let _ = writeln!(
        out,
        "<g class=\"axes\" stroke=\"{AXIS_COLOUR}\" stroke-width=\"1\" fill=\"none\">\n<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n</g>",
        c(LEFT),
        c(TOP),
        c(plot_w),
        c(PLOT_H)
    );

    out.push_str("<g class=\"lines\" fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\">\n");
    for (label, pts) in &drawn {
        let idx = colours.index(label);
        let dash = if idx < PALETTE.len() { "" } else { " stroke-dasharray=\"6 3\"" };
        let coords: Vec<String> =
            pts.iter().map(|&(x, y)| format!("{},{}", c(x_axis.map(x)), c(y_axis.map(y)))).collect();
        let _ = writeln!(
            out,
            "<polyline class=\"series\" stroke=\"{}\"{dash} points=\"{}\"><title>{}</title></polyline>",
            colours.colour(idx),
            coords.join(" "),
            esc(label)
        );
        if let [(x, y)] = pts[..] {
            let _ = writeln!(
                out,
                "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\" stroke=\"none\"/>",
                c(x_axis.map(x)),
                c(y_axis.map(y)),
                colours.colour(idx)
            );
        }
    }
    out.push_str("</g>\n");

    colours.legend(&mut out, legend_x, LegendMark::Line);
    out.push_str("</svg>\n");
    out
}

/// A chart with nothing to draw: the title and a "no data" note.
fn empty_chart(title: &str) -> String {
    let width = 480.0_f64.max(title_width(title));
    let height = 200.0;
    let mut out = String::new();
    open_document(&mut out, width, height, title);
    let _ = writeln!(
        out,
        "<text class=\"no-data\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"14\" fill=\"#666666\">no data</text>",
        c(width / 2.0),
        c(height / 2.0 + 10.0)
    );
    out.push_str("</svg>\n");
    out
}

/// Writes the XML declaration, the opening `<svg>` tag, the white background
/// and the title.
fn open_document(out: &mut String, width: f64, height: f64, title: &str) {
    let (w, h) = (c(width.ceil()), c(height.ceil()));
    let _ = writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(out, "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>");
    let _ = writeln!(
        out,
        "<text class=\"title\" x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>",
        c(width / 2.0),
        esc(title)
    );
}

/// Width the whole chart needs for its title.
fn title_width(title: &str) -> f64 {
    title.chars().count() as f64 * TITLE_CHAR_W + 40.0
}

/// Horizontal gridlines and y tick labels.
fn y_grid(out: &mut String, ticks: &Ticks, y_axis: &Scale, x_axis: &Scale) {
    let _ = writeln!(out, "<g class=\"y-grid\" stroke=\"{GRID_COLOUR}\" stroke-width=\"1\">");
    for &t in &ticks.values {
        let y = c(y_axis.map(t));
        let _ = writeln!(out, "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>", c(x_axis.px_lo), c(x_axis.px_hi));
    }
    out.push_str("</g>\n");
    out.push_str(
        "<g class=\"y-ticks\" font-family=\"monospace\" font-size=\"11\" fill=\"#000000\" text-anchor=\"end\">\n",
    );
    for (&t, label) in ticks.values.iter().zip(ticks.labels()) {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            c(x_axis.px_lo - 6.0),
            c(y_axis.map(t) + 4.0),
            esc(&label)
        );
    }
    out.push_str("</g>\n");
}

/// The y axis label, rotated, centred on the axis, left of the tick labels.
fn y_axis_label(out: &mut String, label: &str, y_axis: &Scale, x_axis: &Scale) {
    let (x, y) = (c((x_axis.px_lo - 54.0).max(16.0)), c((y_axis.px_lo + y_axis.px_hi) / 2.0));
    let _ = writeln!(
        out,
        "<text class=\"y-label\" x=\"{x}\" y=\"{y}\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 {x} {y})\">{}</text>",
        esc(label)
    );
}

/// Colours by series name, in order of first appearance.
struct ColourMap<'a> {
    names: Vec<&'a str>,
}

enum LegendMark {
    Swatch,
    Line,
}

impl<'a> ColourMap<'a> {
    fn new(names: impl Iterator<Item = &'a str>) -> Self {
        let mut map = ColourMap { names: Vec::new() };
        for n in names {
            if !map.names.contains(&n) {
                map.names.push(n);
            }
        }
        map
    }

    fn index(&self, name: &str) -> usize {
        self.names.iter().position(|n| *n == name).unwrap_or(0)
    }

    fn colour(&self, index: usize) -> &'static str {
        PALETTE[index % PALETTE.len()]
    }

    fn legend_width(&self) -> f64 {
        let chars = self.names.iter().map(|n| n.chars().count().min(MAX_LABEL_CHARS + 1)).max().unwrap_or(0);
        30.0 + chars as f64 * SANS_CHAR_W
    }

    fn legend(&self, out: &mut String, x: f64, mark: LegendMark) {
        out.push_str("<g class=\"legend\" font-size=\"12\" fill=\"#000000\">\n");
        for (i, name) in self.names.iter().enumerate() {
            let y = TOP + 4.0 + LEGEND_ROW * i as f64;
            let colour = self.colour(i);
            let second_cycle = i >= PALETTE.len();
            match mark {
                LegendMark::Swatch => {
                    let style =
                        if second_cycle { " fill-opacity=\"0.5\" stroke=\"#000000\" stroke-width=\"1\"" } else { "" };
                    let _ = writeln!(
                        out,
                        "<rect class=\"swatch\" x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{colour}\"{style}/>",
                        c(x),
                        c(y)
                    );
                }
                LegendMark::Line => {
                    let dash = if second_cycle { " stroke-dasharray=\"6 3\"" } else { "" };
                    let _ = writeln!(
                        out,
                        "<line class=\"swatch\" x1=\"{}\" y1=\"{ym}\" x2=\"{}\" y2=\"{ym}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>",
                        c(x),
                        c(x + 16.0),
                        ym = c(y + 6.0)
                    );
                }
            }
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                c(x + 20.0),
                c(y + 10.0),
                esc(&truncate(name, MAX_LABEL_CHARS))
            );
        }
        out.push_str("</g>\n");
    }
}

/// A coordinate with at most one decimal.
pub(crate) fn c(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    let r = (v * 10.0).round() / 10.0;
    let s = trim_zeros(format!("{r:.1}"));
    if s == "-0" { "0".to_string() } else { s }
}

/// `s` cut to `max` characters, the last replaced by an ellipsis when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Text escaped for XML content and attribute values. Control characters,
/// which XML 1.0 does not allow, are dropped.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            _ if ch.is_control() => {}
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(series: &str, mean: f64, lo: f64, hi: f64) -> Bar {
        Bar { series: series.to_string(), mean, lo, hi }
    }

    fn group(label: &str, bars: Vec<Bar>) -> BarGroup {
        BarGroup { label: label.to_string(), bars }
    }

    /// Checks the document's shape: declaration, one `<svg>` root, and every
    /// tag closed in order. Panics with a description otherwise.
    fn assert_well_formed(svg: &str) {
        assert!(
            svg.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" ")
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count(), "unbalanced <g>");
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = svg;
        let mut roots = 0;
        while let Some(start) = rest.find('<') {
            let end = rest[start..].find('>').expect("unterminated tag") + start;
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            if tag.starts_with('?') {
                continue;
            }
            assert!(!tag.contains('<'), "'<' inside tag {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
            } else {
                let name = tag.split_whitespace().next().unwrap_or("").trim_end_matches('/');
                assert!(!name.is_empty(), "empty tag");
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
        assert_eq!(roots, 1, "one root element");
        // Text between tags contains no bare '&' that is not an entity.
        for (i, _) in svg.match_indices('&') {
            let rest = &svg[i..];
            assert!(["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| rest.starts_with(e)), "bare & at {i}");
        }
    }

    /// Values of `attr="..."` in the given elements (`<rect class="bar"`).
    fn attr_values(svg: &str, element: &str, attr: &str) -> Vec<f64> {
        svg.split(element)
            .skip(1)
            .map(|s| {
                let tag = &s[..s.find('>').unwrap()];
                let pat = format!(" {attr}=\"");
                let v = &tag[tag.find(&pat).unwrap() + pat.len()..];
                v[..v.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    /// Every number in an attribute value has at most one decimal.
    fn assert_one_decimal(svg: &str) {
        for value in svg.split('"').skip(1).step_by(2) {
            for word in value.split([' ', ',', '(', ')']) {
                if word.parse::<f64>().is_ok()
                    && let Some((_, decimals)) = word.split_once('.')
                {
                    assert!(decimals.len() <= 1, "{word} in {value}");
                }
            }
        }
    }

    fn sample_groups() -> Vec<BarGroup> {
        vec![
            group("alloc order 0", vec![bar("base", 10.0, 9.0, 11.0), bar("pcp", 30.0, 28.0, 33.0)]),
            group("free", vec![bar("base", 5.0, 4.0, 6.0), bar("pcp", 2.5, 2.0, 3.0)]),
            group("mixed", vec![bar("pcp", 7.0, 6.0, 8.0)]),
        ]
    }

    #[test]
    fn bar_chart_has_one_rect_and_one_whisker_per_bar() {
        let svg = bar_chart("Latency", "ns", &sample_groups());
        assert_well_formed(&svg);
        assert_one_decimal(&svg);
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 5);
        assert_eq!(svg.matches("<line class=\"whisker\"").count(), 5);
        // One legend entry per series name, coloured consistently.
        assert_eq!(svg.matches("<rect class=\"swatch\"").count(), 2);
        let fills: Vec<&str> = svg
            .split("<rect class=\"bar\"")
            .skip(1)
            .map(|s| {
                let f = &s[s.find("fill=\"").unwrap() + 6..];
                &f[..7]
            })
            .collect();
        assert_eq!(fills, [PALETTE[0], PALETTE[1], PALETTE[0], PALETTE[1], PALETTE[1]]);
    }

    #[test]
    fn bar_with_larger_mean_is_taller() {
        let svg = bar_chart("t", "y", &[group("g", vec![bar("a", 3.0, 2.0, 4.0), bar("b", 12.0, 11.0, 13.0)])]);
        let heights = attr_values(&svg, "<rect class=\"bar\"", "height");
        assert_eq!(heights.len(), 2);
        assert!(heights[1] > heights[0] * 3.5, "{heights:?}");
        // Both stand on the same baseline.
        let ys = attr_values(&svg, "<rect class=\"bar\"", "y");
        assert!((ys[0] + heights[0] - (ys[1] + heights[1])).abs() < 0.21);
    }

    #[test]
    fn negative_bar_hangs_below_the_baseline() {
        let svg = bar_chart("t", "y", &[group("g", vec![bar("a", -4.0, -5.0, -3.0), bar("b", 4.0, 3.0, 5.0)])]);
        assert_well_formed(&svg);
        let ys = attr_values(&svg, "<rect class=\"bar\"", "y");
        let heights = attr_values(&svg, "<rect class=\"bar\"", "height");
        assert!((heights[0] - heights[1]).abs() < 0.21);
        assert!((ys[0] - (ys[1] + heights[1])).abs() < 0.21, "negative bar starts at the positive bar's base");
    }

    #[test]
    fn text_is_escaped() {
        let groups = [group("x&y", vec![bar("\"s\"", 1.0, 0.5, 1.5)])];
        let svg = bar_chart("a<b", "c>d", &groups);
        assert_well_formed(&svg);
        assert!(svg.contains("a&lt;b"));
        assert!(!svg.contains("a<b"));
        assert!(svg.contains("c&gt;d"));
        assert!(svg.contains("x&amp;y"));
        assert!(svg.contains("&quot;s&quot;"));
        let svg = line_chart("a<b", "\u{1}x&", "y\"", &[Series { label: "<l>".into(), points: vec![(0.0, 1.0)] }]);
        assert_well_formed(&svg);
        assert!(
            svg.contains("a&lt;b") && svg.contains(">x&amp;<") && svg.contains("y&quot;") && svg.contains("&lt;l&gt;")
        );
    }

    #[test]
    fn non_finite_inputs_are_skipped() {
        let groups = [
            group("g1", vec![bar("a", f64::NAN, 1.0, 2.0), bar("b", 2.0, f64::NAN, 3.0), bar("c", 1.0, 0.5, 1.5)]),
            group("g2", vec![bar("a", f64::INFINITY, 0.0, 1.0), bar("b", 2.0, 1.0, f64::NEG_INFINITY)]),
        ];
        let svg = bar_chart("t", "y", &groups);
        assert_well_formed(&svg);
        assert_one_decimal(&svg);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 3);
        assert_eq!(svg.matches("<line class=\"whisker\"").count(), 1);
        // Series "a" has no drawable bar, so it is not in the legend.
        assert_eq!(svg.matches("<rect class=\"swatch\"").count(), 2);

        let svg = bar_chart("t", "y", &[group("g", vec![bar("a", f64::NAN, f64::NAN, f64::NAN)])]);
        assert_well_formed(&svg);
        assert!(svg.contains("no data"));

        let series = [
            Series { label: "s".into(), points: vec![(0.0, 1.0), (f64::NAN, 2.0), (2.0, f64::INFINITY), (3.0, 4.0)] },
            Series { label: "empty".into(), points: vec![(f64::NAN, f64::NAN)] },
        ];
        let svg = line_chart("t", "x", "y", &series);
        assert_well_formed(&svg);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn degenerate_inputs_give_valid_documents() {
        for svg in [
            bar_chart("", "", &[]),
            bar_chart("t", "y", &[group("g", vec![])]),
            line_chart("t", "x", "y", &[]),
            line_chart("t", "x", "y", &[Series { label: "s".into(), points: vec![] }]),
        ] {
            assert_well_formed(&svg);
            assert!(svg.contains("<text class=\"no-data\""), "{svg}");
        }
        // All zero: bars of height 0, an axis that still has a range.
        let svg = bar_chart("t", "y", &[group("g", vec![bar("a", 0.0, 0.0, 0.0), bar("b", 0.0, 0.0, 0.0)])]);
        assert_well_formed(&svg);
        assert_eq!(attr_values(&svg, "<rect class=\"bar\"", "height"), [0.0, 0.0]);
        assert!(!svg.contains("no-data"));
        // lo > hi is swapped: the whisker still spans the interval.
        let svg = bar_chart("t", "y", &[group("g", vec![bar("a", 5.0, 6.0, 4.0)])]);
        assert_well_formed(&svg);
        let y1 = attr_values(&svg, "<line class=\"whisker\"", "y1")[0];
        let y2 = attr_values(&svg, "<line class=\"whisker\"", "y2")[0];
        assert!(y1 > y2, "lo is drawn below hi");
        // One point; one x value; extreme values.
        for points in
            [vec![(1.0, 1.0)], vec![(2.0, 1.0), (2.0, 3.0)], vec![(-f64::MAX, f64::MAX), (f64::MAX, -f64::MAX)]]
        {
            let svg = line_chart("t", "x", "y", &[Series { label: "s".into(), points }]);
            assert_well_formed(&svg);
            assert_one_decimal(&svg);
            assert!(!svg.contains("NaN"));
        }
        let svg = bar_chart(
            "t",
            "y",
            &[group("g", vec![bar("a", f64::MAX, f64::MAX, f64::MAX), bar("b", -f64::MAX, 0.0, 1.0)])],
        );
        assert_well_formed(&svg);
        assert_one_decimal(&svg);
    }

    #[test]
    fn long_labels_are_rotated_and_many_series_cycle_colours() {
        let bars: Vec<Bar> =
            (0..10).map(|i| bar(&format!("config {i}"), i as f64 + 1.0, i as f64, i as f64 + 2.0)).collect();
        let groups = [group("a rather long label for one test row", bars.clone()), group("short", bars)];
        let svg = bar_chart("t", "y", &groups);
        assert_well_formed(&svg);
        assert_one_decimal(&svg);
        assert_eq!(svg.matches("transform=\"rotate(-35 ").count(), 2);
        assert_eq!(svg.matches("<rect class=\"swatch\"").count(), 10);
        assert_eq!(svg.matches("fill-opacity=\"0.5\"").count(), 2 * 2 + 2, "bars and swatches past the palette");
        let svg = bar_chart("t", "y", &[group("ab", vec![bar("a", 1.0, 0.0, 2.0)])]);
        assert!(!svg.contains("rotate(-35"));
    }

    #[test]
    fn coordinates_have_one_decimal() {
        assert_eq!(c(-0.04), "0");
        assert_eq!(c(12.345), "12.3");
        assert_eq!(c(7.0), "7");
    }

    #[test]
    fn polyline_has_one_point_per_finite_input_point() {
        let series = [
            Series { label: "a".into(), points: vec![(0.0, 1.0), (1.0, 4.0), (2.0, f64::NAN), (3.0, 9.0)] },
            Series { label: "b".into(), points: (0..20).map(|i| (i as f64 * 0.5, (i as f64).sqrt())).collect() },
            Series { label: "c".into(), points: vec![(5.0, 2.0)] },
        ];
        let svg = line_chart("t", "x", "y", &series);
        assert_well_formed(&svg);
        assert_one_decimal(&svg);
        let counts: Vec<usize> = svg
            .split("points=\"")
            .skip(1)
            .map(|s| s[..s.find('"').unwrap()].split(' ').filter(|p| p.contains(',')).count())
            .collect();
        assert_eq!(counts, [3, 20, 1]);
        assert_eq!(svg.matches("<circle class=\"point\"").count(), 1, "the single point is drawn as a dot");
        assert_eq!(svg.matches("<line class=\"swatch\"").count(), 3);
    }
}
