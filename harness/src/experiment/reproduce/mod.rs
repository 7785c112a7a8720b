//! `mmlab reproduce`: the published kernel results of `seeds.md` §1–3,
//! each run on the emulated machine and printed beside the published
//! numbers, with one line that says whether they agree.
//!
//! | reproduction | published | what runs here |
//! |---|---|---|
//! | `barrier-batching` | test_vmalloc before/after the arm64 vmalloc series (v6.15-rc3), Apple M2 and Ampere Altra | every published row, base = no lazy-MMU barrier batching and no contpte vmalloc, new = both, under the `apple-m2` and `ampere-altra` cost profiles |
//! | `contpte` | 16x fewer TLB entries; h:1 regression on Altra from 64 KiB blocks bypassing the pcp | TLB entries and TLB-model misses for 64 KiB..8 MiB buffers mapped three ways; fix_size h:1 with contpte off/on and the zone-lock traffic per call, against contpte's own cost derived from the table ([`published::contpte_alone`]) |
//! | `pcp-drain` | long_busy_list +17 % (+31 % without patch 1) with huge vmalloc by default; sensitive to the pcp high; `msleep(1)` helps; fix_size p:512 improves | the same runs, the cause in counters, a pcp-high sweep, the sleep variant, fewer iterations, p:512 |
//! | `hvo` | `seeds.md` §4: -34.3 % vm-scalability with a grace period per surplus page, +13.7 % with the fix; 700 x 1G alloc/free before/after `__GFP_COMP`; demote 513 → 2 grace periods | [`hvo`]: surplus-page faults on 4 CPUs per grace-period policy, a few 1G pages per gigantic release, one 1G demote per batching |
//! | `linear-map` | `map_mem()` ms of v6.9-rc1 and the "faster linear map creation" patches, M2 16G to Altra 512G (§3) | `map_mem()` per variant with `rodata=full`, modelled under the `apple-m2` / `ampere-altra` profiles ([`linear_map`]) |
//!
//! A reproduction is data: the published table ([`published`]: rows with
//! the published numbers and their section of `seeds.md`), the rows mmlab
//! measures ([`run`]: one typed result per reproduction, [`BarrierBatching`],
//! [`Contpte`] and [`PcpDrain`], each row next to the published row it
//! answers), and the rule that says whether they agree ([`agreement`]).
//! The runner fills the result; [`render`] turns it into the report's text
//! and plots and nothing else, so that tests and scripts read the numbers
//! from typed fields rather than from the text; [`summary`] collects the
//! verdicts for `mmlab reproduce --json`.
//!
//! The verdicts are taken on a deterministic metric ([`model`]): the runs'
//! counted events (pages from the pcp and from the buddy, zone-lock
//! acquisitions, splits and merges, vmalloc calls, barriers and TLBIs by
//! kind, grace periods) priced by a per-event cost table of the machine
//! profile, fitted on the Apple M2 column of `seeds.md` §1 and predicting
//! the Altra column and §2 without refitting. Same seed, same numbers on
//! any host; measured host time is printed beside every verdict, apart.
//! Where the two give a row different verdicts, [`host_fit`] prices the
//! same events by measured host time and splits the row's change into
//! them, so the report says which event the host weighs differently.
//! `barrier-batching` also prints what the published Altra h:1 rows imply
//! for the cost of the 64 KiB block path ([`model::implied_block_scale`]),
//! which the model, scaling the M2 costs uniformly, does not take.
//!
//! `msleep(1)` in `pcp-drain`: test_vmalloc's `test_func` times the whole
//! test function with `ktime_get()`, so a sleep in the loop is inside the
//! reported time (at least 2 jiffies, 2-8 ms, against ~10 µs of work), and
//! that dilution is what shrinks the regression; the sleep does not remove
//! the pcp drains (decay_pcp_high runs once per second from vmstat_update;
//! the counters show the drains per iteration unchanged). The report prints
//! the change with the slept time counted ([`run::MSLEEP_1_NS`]), and the
//! verdict says the claim agrees by dilution ([`agreement::MsleepVerdict`]).
//! The posting's other remedy, fewer iterations, runs as its own rows
//! ([`run::FEWER_LOOPS`]).
//!
//! h:1 rows with 64 KiB blocks run 300,000 pages a side in quick mode: the
//! pcp fills before it drains, and the published 500,000-loop runs measured
//! the draining steady state ([`run::row_for`]).
//!
//! Quick mode (the default) uses fewer loops than the published 500 000 so
//! that `reproduce all` finishes in well under a minute; `--full` runs ten
//! times longer. The emulation's measured time is host time of Rust code,
//! not of the kernel's C, so only the direction and the rough size of a
//! change can be expected to agree; each agreement line says which do.

pub mod agreement;
mod data;
pub mod figures;
pub mod host_fit;
pub mod html;
pub mod hvo;
mod length;
pub mod linear_map;
pub mod model;
pub mod pcp_trace;
pub mod published;
pub mod render;
pub mod run;
pub mod summary;

pub use agreement::{Agreement, H1Verdict, MsleepVerdict, Tally};
pub use data::Data;
pub use length::Length;
pub use published::{BARRIER_BATCHING, Change, PCP_DRAIN, PublishedRegression, PublishedRow, Source, Table};
pub use run::{
    BarrierBatching, BarrierMeasured, BarrierRow, Contpte, Mapping, PcpDrain, PerCall, RegressionRow, SweepRow,
    TlbCount, TlbRow, row_for,
};

use std::str::FromStr;

/// The reproductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Which {
    /// Lazy-MMU barrier batching and contpte: the series' test_vmalloc table.
    BarrierBatching,
    /// contpte vmalloc: TLB entries and misses, and the h:1 cost.
    Contpte,
    /// The pcp-drain regression of huge vmalloc by default.
    PcpDrain,
    /// The hugetlb_vmemmap grace-period regression, gigantic folios, demote.
    Hvo,
    /// Faster linear map creation: map_mem() per variant and machine.
    LinearMap,
}

impl Which {
    /// Every reproduction, in the order `reproduce all` runs them.
    pub const ALL: [Which; 5] = [Which::BarrierBatching, Which::Contpte, Which::PcpDrain, Which::Hvo, Which::LinearMap];

    /// The name `mmlab reproduce` takes.
    pub fn name(self) -> &'static str {
        match self {
            Which::BarrierBatching => "barrier-batching",
            Which::Contpte => "contpte",
            Which::PcpDrain => "pcp-drain",
            Which::Hvo => "hvo",
            Which::LinearMap => "linear-map",
        }
    }
}

impl FromStr for Which {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Which::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| format!("no reproduction {s:?}; reproductions: {}", ALL.join(", ")))
    }
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a reproduction produced: its data and the report rendered from it.
#[derive(Clone, Debug)]
pub struct Reproduction {
    /// What was measured, with the published numbers beside it.
    pub data: Data,
    /// The printed report.
    pub text: String,
    /// `(suffix, svg)`: the plots it can draw.
    pub plots: Vec<(&'static str, String)>,
    /// Whether a test case failed.
    pub failed: bool,
}

impl Reproduction {
    /// Renders `data`.
    pub fn new(data: Data) -> Self {
        let (text, plots) = render::render(&data);
        let failed = data.failed();
        Reproduction { data, text, plots, failed }
    }

    /// The `barrier-batching` data, if this is that reproduction.
    pub fn barrier_batching(&self) -> Option<&BarrierBatching> {
        if let Data::BarrierBatching(b) = &self.data { Some(b) } else { None }
    }

    /// The `contpte` data, if this is that reproduction.
    pub fn contpte(&self) -> Option<&Contpte> {
        if let Data::Contpte(c) = &self.data { Some(c) } else { None }
    }

    /// The `linear-map` data, if this is that reproduction.
    pub fn linear_map(&self) -> Option<&linear_map::LinearMap> {
        if let Data::LinearMap(l) = &self.data { Some(l) } else { None }
    }

    /// The `pcp-drain` data, if this is that reproduction.
    pub fn pcp_drain(&self) -> Option<&PcpDrain> {
        if let Data::PcpDrain(p) = &self.data { Some(p) } else { None }
    }

    /// The `hvo` data, if this is that reproduction.
    pub fn hvo(&self) -> Option<&hvo::Hvo> {
        if let Data::Hvo(h) = &self.data { Some(h) } else { None }
    }
}

/// Runs `which` and renders it.
///
/// # Errors
///
/// A configuration that does not boot or a comparison that cannot run.
pub fn reproduce(which: Which, len: Length, seed: u64) -> Result<Reproduction, String> {
    let data = match which {
        Which::BarrierBatching => Data::BarrierBatching(Box::new(run::barrier_batching(len, seed)?)),
        Which::Contpte => Data::Contpte(Box::new(run::contpte(len, seed)?)),
        Which::PcpDrain => Data::PcpDrain(Box::new(run::pcp_drain(len, seed)?)),
        Which::Hvo => Data::Hvo(Box::new(hvo::hvo(len, seed)?)),
        Which::LinearMap => Data::LinearMap(linear_map::linear_map()?),
    };
    Ok(Reproduction::new(data))
}

/// Every reproduction's name, in order.
pub const ALL: [&str; 5] = ["barrier-batching", "contpte", "pcp-drain", "hvo", "linear-map"];

/// Runs the reproduction called `name`.
///
/// # Errors
///
/// An unknown name, or what [`reproduce`] returns.
pub fn by_name(name: &str, len: Length, seed: u64) -> Result<Reproduction, String> {
    reproduce(name.parse()?, len, seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Mark;

    #[test]
    fn published_rows_parse() {
        for p in BARRIER_BATCHING.rows {
            let r = row_for(p.test, Length::QUICK).unwrap();
            assert_eq!(r.label, p.test, "the row label round-trips");
        }
        assert!(row_for("no_such_test p:1", Length::QUICK).is_err());
        assert!(row_for("fix_size_alloc_test q:1", Length::QUICK).is_err());
    }

    #[test]
    fn names() {
        assert_eq!(Which::ALL.map(Which::name), ALL);
        assert_eq!("contpte".parse(), Ok(Which::Contpte));
        assert_eq!(
            "nope".parse::<Which>().unwrap_err(),
            "no reproduction \"nope\"; reproductions: barrier-batching, contpte, pcp-drain, hvo, linear-map"
        );
    }

    #[test]
    fn agreement_rule() {
        let (i, r) = (Some(Mark::Improvement), Some(Mark::Regression));
        let j = |ours: f64, om, published: f64, pm| Agreement::judge(Change::new(ours, om), Change::new(published, pm));
        assert_eq!(j(-20.0, i, -25.0, i), Agreement::Agrees);
        assert_eq!(j(-5.0, i, -25.0, i), Agreement::Direction);
        assert_eq!(j(-5.0, None, -25.0, i), Agreement::Weak);
        assert_eq!(j(5.0, r, -25.0, i), Agreement::Disagrees);
        assert_eq!(j(1.0, r, 2.0, None), Agreement::Flat);
        assert_eq!(j(9.0, r, 2.0, None), Agreement::Differs);
        assert_eq!(Agreement::Flat.to_string(), "agrees (~0)");
        assert_eq!(Agreement::Disagrees.to_string(), "DISAGREES");
    }

    #[test]
    fn msleep_and_fewer_rules() {
        let c = |pct| Change::new(pct, Some(Mark::Regression));
        // Drains fall and the regression with them: the cause.
        assert_eq!(MsleepVerdict::judge(c(5.0), c(0.1), 10.0, 19.5, 96.0), MsleepVerdict::Cause);
        // Drains stay; only the slept time brings the change down.
        assert_eq!(MsleepVerdict::judge(c(19.6), c(0.1), 96.7, 19.5, 96.0), MsleepVerdict::Dilution);
        assert_eq!(MsleepVerdict::judge(c(19.6), c(18.0), 96.7, 19.5, 96.0), MsleepVerdict::NotReproduced);
        assert!(agreement::fewer_agrees(c(0.5), 19.5));
        assert!(!agreement::fewer_agrees(c(16.0), 19.5));
    }

    #[test]
    fn h1_rule() {
        use Agreement::{Agrees, Direction, Disagrees};
        assert_eq!(H1Verdict::judge(&[Agrees, Agrees, Agrees], true), H1Verdict::Agrees);
        assert_eq!(H1Verdict::judge(&[Agrees, Direction, Agrees], true), H1Verdict::DirectionAndCause);
        assert_eq!(H1Verdict::judge(&[Agrees, Disagrees, Agrees], true), H1Verdict::CauseOnly);
        assert_eq!(H1Verdict::judge(&[Agrees, Agrees, Agrees], false), H1Verdict::Disagrees);
        assert_eq!(H1Verdict::judge(&[], true), H1Verdict::CauseOnly, "no rows, no agreement");
        // contpte alone, derived from the published table: p:16 on Altra
        // is (1 + 7.93 %) / (1 - 14.24 %) - 1.
        let c = published::contpte_alone(16, true).unwrap();
        assert!((c.pct - 25.85).abs() < 0.01, "{}", c.pct);
        assert_eq!(c.mark, Some(Mark::Regression));
        assert_eq!(published::contpte_alone(512, true), None, "h:1 maps a PMD block there");
        assert_eq!(published::contpte_alone(3, true), None);
    }
}
