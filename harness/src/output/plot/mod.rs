//! Small, dependency-free SVG pictures of mmlab's measurements:
//! [`figure`] (panels of lines, markers, bars, bands and event ticks
//! on linear, log or categorical axes, every series named at its mark), on
//! which the reproductions, `mmlab compare --plot` and `mmlab trace
//! --plot`'s pcp chart draw; [`figure`]'s module documentation says how it
//! reads in print and by program.
//!
//! Axes carry "nice" ticks (steps of 1, 2 or 5 times a power of ten, or
//! decades) with light gridlines, and tick labels are written compactly
//! (`250`, `1.5k`, `2M`). The output is a complete SVG document as a
//! `String`: no font files, nothing rasterised; every text is an SVG
//! `<text>` naming only a generic family, so whatever viewer opens the file
//! renders it with its own fonts. Text widths, which the layout needs for
//! margins and label placement, are estimated from the number of
//! characters. Nothing panics: non-finite values are left out, and a panel
//! with nothing to draw says "no data". Coordinates are written with at
//! most one decimal.
//!
//! # Why not plotters
//!
//! plotters 0.3.7's SVG backend was tried on the compare chart (three
//! tests, two configurations, modelled time in % of base; built with
//! `default-features = false, features = ["svg_backend", "all_series",
//! "all_elements"]`, so without its `ttf` font stack, which needs fontconfig
//! on the host). It renders, but for this chart ours is clearly better:
//! - Group labels: ours rotates test names (now by -55 degrees) so that long names
//!   like `long_busy_list_alloc_test p:1 h:0` fit under their bars; plotters'
//!   label transforms are multiples of 90 degrees, and without a font backend
//!   it does not measure text, so margins for long labels are guesswork.
//! - Grouped bars with a confidence whisker per bar and a legend are what
//!   every compare chart is; plotters has no grouped-bar series, so each
//!   chart would assemble them by hand on a segmented coordinate anyway.
//! - The file: ours was 4.8 KB with one element per mark grouped under
//!   semantic classes (now `panel`, `layer`, `point`, `bar`), easy to
//!   restyle, diff or parse; plotters wrote 10.5 KB for a simpler chart
//!   (fractional font sizes, one `<line>` per minor grid line, no
//!   grouping).
//! - Cost: ours has no dependency; plotters adds a crate tree for what is
//!   one page of layout code.

mod axis;
pub mod figure;

use axis::trim_zeros;

/// A coordinate with at most one decimal.
pub(crate) fn c(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    let r = (v * 10.0).round() / 10.0;
    let s = trim_zeros(format!("{r:.1}"));
    if s == "-0" { "0".to_string() } else { s }
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
