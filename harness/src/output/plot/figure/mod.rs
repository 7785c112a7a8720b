//! Figures: the reproductions' pictures. A [`Figure`] is one or more
//! [`Panel`]s side by side (two to a row), each with its own axes and a
//! stack of [`Layer`]s drawn in order: lines (optionally as steps, for a
//! count that holds between samples), markers with direct labels, grouped
//! or stacked bars with confidence whiskers on a categorical axis, the
//! `y = x` line with the band of a factor around it, and event
//! ticks along the bottom (a drain, with its size).
//!
//! # Reading it in print
//!
//! Every series gets a [`Style`]: a colour from a palette whose entries
//! differ in lightness as well as hue (black, Okabe–Ito blue, vermillion,
//! orange, sky blue, bluish green), a dash pattern and a marker shape, so
//! that two series stay apart on a greyscale printout and for readers who
//! confuse red and green. Lines are labelled at their right end and points
//! beside themselves ([`Point::label`], placed so that labels do not
//! overlap), so reading the picture needs no legend lookup; a legend row
//! under the panel title names the layers too, with their mark.
//!
//! # Reading it by program
//!
//! Each layer is a `<g class="layer" data-kind="…" data-name="…">`; points
//! carry `data-x`/`data-y` (the values, not pixels); axis labels are
//! `<text class="x-label">` and `<text class="y-label">`; a panel is a
//! `<g class="panel" data-title="…">`. The tests parse these.
//!
//! Non-finite values are left out; values at or below 0 are left out of a
//! log axis. A panel with nothing to draw says "no data".

mod draw;

/// Okabe–Ito colours, distinguishable with the common colour-vision
/// deficiencies. Their lightness (CIE L*) is black 0, blue 47, vermillion
/// 58, bluish green 57, orange 72, sky blue 70, yellow 89: series that must
/// stay apart in a greyscale print (stacked bars) take colours far apart
/// in that list (black, vermillion, yellow); lines also differ in dash and
/// marker shape.
pub const COLOURS: [&str; 7] = ["#000000", "#0072B2", "#D55E00", "#009E73", "#E69F00", "#56B4E9", "#F0E442"];
/// Dash patterns (`stroke-dasharray`), solid first.
const DASHES: [&str; 4] = ["", "6 3", "2 3", "8 3 2 3"];

/// A marker shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A circle.
    Circle,
    /// A square.
    Square,
    /// An upward triangle.
    Triangle,
    /// A diamond (published values).
    Diamond,
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    /// Index into [`COLOURS`] (wraps).
    pub colour: usize,
    /// Index into the dash patterns (wraps); 0 is solid.
    pub dash: usize,
    /// Marker shape.
    pub shape: Shape,
    /// Markers and bars drawn as outlines (hatched, for bars).
    pub hollow: bool,
}

impl Style {
    /// The `i`-th of a set of series: colour, dash and shape all differ.
    pub const fn nth(i: usize) -> Style {
        let shapes = [Shape::Circle, Shape::Square, Shape::Triangle, Shape::Diamond];
        Style { colour: i, dash: i, shape: shapes[i % 4], hollow: false }
    }
    /// Published values: black hollow diamonds, hatched bars.
    pub const PUBLISHED: Style = Style { colour: 0, dash: 0, shape: Shape::Diamond, hollow: true };
    /// A reference line (a threshold): dashed.
    pub const fn rule(i: usize) -> Style {
        Style { colour: i, dash: 1 + i % 3, shape: Shape::Circle, hollow: false }
    }
    fn colour(self) -> &'static str {
        COLOURS[self.colour % COLOURS.len()]
    }
    fn dash_attr(self) -> String {
        match DASHES[self.dash % DASHES.len()] {
            "" => String::new(),
            d => format!(" stroke-dasharray=\"{d}\""),
        }
    }
}

/// An axis: its label (with the unit), and whether it is logarithmic,
/// includes 0, or names categories.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Axis {
    /// The label, unit included: "pages on the pcp".
    pub label: String,
    /// Logarithmic (decades).
    pub log: bool,
    /// Extend a linear range to include 0.
    pub zero: bool,
    /// Categorical: category `i` is at x = `i`. Empty for a numeric axis.
    pub categories: Vec<String>,
    /// Leave 5 % of the range free beyond the data (markers at the edge
    /// stay whole); off for a count over iterations.
    pub pad: bool,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: &str) -> Axis {
        Axis { label: label.to_string(), pad: true, ..Axis::default() }
    }
    /// A linear axis spanning exactly the data (rounded to its ticks).
    pub fn tight(label: &str) -> Axis {
        Axis { pad: false, ..Axis::linear(label) }
    }
    /// A linear axis that includes 0.
    pub fn from_zero(label: &str) -> Axis {
        Axis { zero: true, ..Axis::linear(label) }
    }
    /// A logarithmic axis.
    pub fn log(label: &str) -> Axis {
        Axis { log: true, ..Axis::linear(label) }
    }
    /// A categorical axis.
    pub fn categories(label: &str, categories: Vec<String>) -> Axis {
        Axis { categories, ..Axis::linear(label) }
    }
}

/// One marker.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Position.
    pub x: f64,
    /// Position.
    pub y: f64,
    /// Written beside the marker.
    pub label: Option<String>,
}

impl Point {
    /// A point without a label.
    pub fn at(x: f64, y: f64) -> Point {
        Point { x, y, label: None }
    }
    /// A labelled point.
    pub fn labelled(x: f64, y: f64, label: &str) -> Point {
        Point { label: Some(label.to_string()), ..Point::at(x, y) }
    }
}

/// One series of a bar layer: a value per category.
#[derive(Clone, Debug, PartialEq)]
pub struct BarSeries {
    /// Its name.
    pub name: String,
    /// Its style (colour; hollow = hatched).
    pub style: Style,
    /// One value per category (NaN: no bar).
    pub values: Vec<f64>,
    /// A confidence interval per category, drawn as a whisker (empty: none;
    /// a non-finite end: none for that bar). Not drawn on stacked bars.
    pub ci: Vec<(f64, f64)>,
}

/// What a panel draws, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Layer {
    /// A polyline through `points` in order; `step` holds each value
    /// until the next x (a count sampled after each iteration). The name
    /// is written at its right end.
    Line {
        /// Name.
        name: String,
        /// Style.
        style: Style,
        /// Points.
        points: Vec<(f64, f64)>,
        /// Staircase.
        step: bool,
        /// A marker at each point.
        marks: bool,
    },
    /// Markers.
    Points {
        /// Name.
        name: String,
        /// Style.
        style: Style,
        /// Points.
        points: Vec<Point>,
    },
    /// Bars on a categorical x axis, side by side or stacked.
    Bars {
        /// Stacked (one bar per category) or grouped.
        stacked: bool,
        /// Series.
        series: Vec<BarSeries>,
    },
    /// The line `y = x` and the band between `x / factor` and
    /// `x * factor` (both signs) around it.
    Identity {
        /// Name of the band ("within 2x").
        name: String,
        /// The band's factor (> 1); 1 draws no band.
        factor: f64,
    },
    /// Ticks at the bottom of the panel at each x, with a label above.
    Events {
        /// Name.
        name: String,
        /// Style.
        style: Style,
        /// `(x, label)`.
        events: Vec<(f64, String)>,
    },
}

impl Layer {
    fn kind(&self) -> &'static str {
        match self {
            Layer::Line { .. } => "line",
            Layer::Points { .. } => "points",
            Layer::Bars { .. } => "bars",
            Layer::Identity { .. } => "identity",
            Layer::Events { .. } => "events",
        }
    }
    /// `(name, style)` of each legend entry.
    fn legend(&self) -> Vec<(&str, Style)> {
        match self {
            Layer::Line { name, style, .. } | Layer::Points { name, style, .. } | Layer::Events { name, style, .. } => {
                vec![(name, *style)]
            }
            Layer::Bars { series, .. } => series.iter().map(|s| (s.name.as_str(), s.style)).collect(),
            Layer::Identity { name, .. } => vec![(name, Style { colour: 0, dash: 2, ..Style::nth(0) })],
        }
    }
    fn name(&self) -> String {
        self.legend().iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}

/// One chart of a figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Its title.
    pub title: String,
    /// x axis.
    pub x: Axis,
    /// y axis.
    pub y: Axis,
    /// Drawn in order.
    pub layers: Vec<Layer>,
}

/// A titled row (or rows) of panels with a caption under them.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Its title.
    pub title: String,
    /// The panels, two to a row.
    pub panels: Vec<Panel>,
    /// What the picture shows and where its numbers come from.
    pub caption: String,
}
