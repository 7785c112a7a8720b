//! The published numbers each reproduction is held against, as data, with
//! where each comes from in `seeds.md`.
//!
//! A published table is a [`Source`] and its rows. The arm64 vmalloc
//! series (`seeds.md` §1) published a test_vmalloc table: one
//! [`PublishedRow`] per test, with the change in time per call on Apple M2
//! and on Ampere Altra and whether it was significant. The huge-vmalloc RFC
//! (`seeds.md` §2) published two long_busy_list regressions
//! ([`PublishedRegression`]). The other claims of those postings are single
//! numbers ([`CONTPTE_TLB_RATIO`], [`CONTPTE_H1_ALTRA_PCT`]) or statements
//! whose rule is written out in [`super::agreement`]; one is derived from
//! two rows of a table ([`contpte_alone`]).

use crate::stats::Mark;

/// Where a published table comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// The section of `seeds.md` that records it, e.g. `§1`.
    pub section: &'static str,
    /// The posting, as the report names it.
    pub posting: &'static str,
}

/// A change in time per call, as an A/B table prints it: percent (negative
/// is faster) and the (I)/(R) mark when the 95 % confidence intervals do
/// not overlap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// Relative change in percent.
    pub pct: f64,
    /// (I) or (R), or `None` when not significant.
    pub mark: Option<Mark>,
}

impl Change {
    /// A change of `pct` percent with `mark`.
    pub const fn new(pct: f64, mark: Option<Mark>) -> Self {
        Change { pct, mark }
    }

    /// No measurement (a failed or missing row).
    pub const NONE: Change = Change { pct: f64::NAN, mark: None };
}

/// A published table: its source and its rows.
#[derive(Clone, Copy, Debug)]
pub struct Table<R: 'static> {
    /// Where the numbers come from.
    pub source: Source,
    /// The rows, in the published order.
    pub rows: &'static [R],
}

/// One row of the published test_vmalloc table of the arm64 vmalloc
/// series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PublishedRow {
    /// The test as the table labels it: test_vmalloc case, `p:` pages and
    /// `h:` use_huge (`fix_size_alloc_test p:16 h:0`).
    pub test: &'static str,
    /// The change on Apple M2.
    pub apple_m2: Change,
    /// The change on Ampere Altra.
    pub ampere_altra: Change,
}

/// A published regression of long_busy_list_alloc_test under one
/// configuration of the huge-vmalloc RFC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PublishedRegression {
    /// The configuration, as the reproduction names its variant.
    pub configuration: &'static str,
    /// The regression (always significant in the posting).
    pub change: Change,
}

const I: Option<Mark> = Some(Mark::Improvement);
const R: Option<Mark> = Some(Mark::Regression);

const fn row(test: &'static str, m2: f64, m2_mark: Option<Mark>, altra: f64, altra_mark: Option<Mark>) -> PublishedRow {
    PublishedRow { test, apple_m2: Change::new(m2, m2_mark), ampere_altra: Change::new(altra, altra_mark) }
}

/// The arm64 vmalloc perf series v4 (April 2025, on v6.15-rc3).
pub const SERIES_V4: Source = Source { section: "§1", posting: "arm64 vmalloc perf series v4" };

/// The huge-vmalloc-by-default RFC (December 2025).
pub const HUGE_BY_DEFAULT_RFC: Source = Source { section: "§2", posting: "huge vmalloc by default" };

/// The published test_vmalloc table of the arm64 vmalloc series (v4),
/// before → after the series.
#[allow(clippy::approx_constant)] // -3.14 % is a published figure
pub const BARRIER_BATCHING: Table<PublishedRow> = Table {
    source: SERIES_V4,
    rows: &[
        row("fix_align_alloc_test p:1 h:0", -11.53, I, -2.57, None),
        row("fix_size_alloc_test p:1 h:0", 2.14, None, 1.79, None),
        row("fix_size_alloc_test p:4 h:0", -9.93, I, -4.80, I),
        row("fix_size_alloc_test p:16 h:0", -25.07, I, -14.24, I),
        row("fix_size_alloc_test p:16 h:1", -14.07, I, 7.93, R),
        row("fix_size_alloc_test p:64 h:0", -29.43, I, -19.30, I),
        row("fix_size_alloc_test p:64 h:1", -16.39, I, 6.71, R),
        row("fix_size_alloc_test p:256 h:0", -31.46, I, -20.60, I),
        row("fix_size_alloc_test p:256 h:1", -16.58, I, 6.70, R),
        row("fix_size_alloc_test p:512 h:0", -31.96, I, -20.04, I),
        row("fix_size_alloc_test p:512 h:1", 2.30, None, 0.71, None),
        row("full_fit_alloc_test p:1 h:0", -2.94, None, 1.77, None),
        row("kvfree_rcu_1_arg_vmalloc_test p:1 h:0", -7.75, None, 1.71, None),
        row("kvfree_rcu_2_arg_vmalloc_test p:1 h:0", -9.07, None, 2.34, R),
        row("long_busy_list_alloc_test p:1 h:0", -29.18, I, -17.91, I),
        row("pcpu_alloc_test p:1 h:0", -14.71, None, -3.14, None),
        row("random_size_align_alloc_test p:1 h:0", -11.08, I, -4.62, I),
        row("random_size_alloc_test p:1 h:0", -30.25, I, -17.95, I),
        row("vm_map_ram_test p:1 h:0", 5.06, None, 6.63, R),
    ],
};

/// The series' claim for contpte vmalloc: a mapping needs this many times
/// fewer TLB entries (16 PTEs share one entry).
pub const CONTPTE_TLB_RATIO: f64 = 16.0;

/// The h:1 regression the series measured on Ampere Altra with contpte
/// after the barrier batching, low and high end, in percent (significant;
/// no regression on Apple M2).
pub const CONTPTE_H1_ALTRA_PCT: (f64, f64) = (6.7, 7.9);

/// What contpte alone costs (batching on both sides) in the series' table,
/// for `fix_size_alloc_test p:<pages>` on one machine's column: derived, as
/// the posting gives only changes against a base with neither change.
///
/// Below 512 pages the h:0 and h:1 rows share that base: without contpte,
/// `vmalloc_huge()` of less than a PMD maps order-0 pages with PTEs, the
/// same work as `vmalloc()`. So h:0's "after" is batching alone and h:1's
/// is batching and contpte, and contpte's own change is
/// `(1 + h1) / (1 + h0) - 1`. Significant when both rows are.
pub fn contpte_alone(pages: u32, altra: bool) -> Option<Change> {
    if pages >= 512 {
        return None;
    }
    let col = |h: u32| {
        let label = format!("fix_size_alloc_test p:{pages} h:{h}");
        let r = BARRIER_BATCHING.rows.iter().find(|r| r.test == label)?;
        Some(if altra { r.ampere_altra } else { r.apple_m2 })
    };
    let (h0, h1) = (col(0)?, col(1)?);
    let pct = 100.0 * ((1.0 + h1.pct / 100.0) / (1.0 + h0.pct / 100.0) - 1.0);
    let mark = match (h0.mark, h1.mark) {
        (Some(_), Some(_)) if pct > 0.0 => Some(Mark::Regression),
        (Some(_), Some(_)) => Some(Mark::Improvement),
        _ => None,
    };
    Some(Change::new(pct, mark))
}

/// The long_busy_list_alloc_test regressions of the huge-vmalloc RFC: +17 %
/// with both patches, +31 % with patch 2 alone (the size rounded up to the
/// huge size).
pub const PCP_DRAIN: Table<PublishedRegression> = Table {
    source: HUGE_BY_DEFAULT_RFC,
    rows: &[
        PublishedRegression { configuration: "huge-by-default", change: Change::new(17.0, R) },
        PublishedRegression { configuration: "huge-no-patch1", change: Change::new(31.0, R) },
    ],
};
