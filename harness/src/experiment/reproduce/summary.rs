//! `mmlab reproduce --json`: per reproduction, its name, whether a run
//! failed, its verdicts and the rendered report ([`Entry`]), under one
//! object with the run's mode ([`Report`]; the command puts the `run`
//! record first).
//!
//! The verdicts are the ones the report prints on its `agreement` lines,
//! taken from the typed data rather than the text: the tallies of the
//! published A/B tables ([`Tally`]) and one [`Verdict`] per other claim,
//! with the word the report prints for it.

use super::agreement::{Tally, agrees_word};
use super::data::Data;
use super::hvo::render::fix_words;
use serde::Serialize;

/// The JSON of a `reproduce` run, without its `run` record.
#[derive(Clone, Debug, Serialize)]
pub struct Report<'a> {
    /// `quick` or `full`.
    pub mode: &'static str,
    /// Measured host time of the whole command, seconds.
    pub host_seconds: f64,
    /// One entry per reproduction, in the order they ran.
    pub reproductions: Vec<Entry<'a>>,
}

/// One reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Entry<'a> {
    /// Its name as `mmlab reproduce` takes it.
    pub name: &'static str,
    /// Whether a test case failed.
    pub failed: bool,
    /// Its verdicts.
    pub verdicts: Verdicts,
    /// The report, as the text output prints it.
    pub text: &'a str,
}

/// The verdicts of one reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Verdicts {
    /// The published A/B tables' rows, judged and summed, by table.
    pub tallies: Vec<NamedTally>,
    /// The other claims, one each.
    pub claims: Vec<Verdict>,
}

/// A [`Tally`] and what it sums.
#[derive(Clone, Debug, Serialize)]
pub struct NamedTally {
    /// The table (and metric) it sums.
    pub of: &'static str,
    /// The sum.
    #[serde(flatten)]
    pub tally: Tally,
}

/// One claim and its verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// What is judged, as the report's `agreement (...)` line or row names it.
    pub claim: String,
    /// The verdict, in the report's words (`agrees`, `DISAGREES`, ...).
    pub verdict: &'static str,
}

impl<'a> Entry<'a> {
    /// The entry of the reproduction `name` that measured `data`, rendered
    /// as `text`.
    pub fn new(name: &'static str, data: &Data, failed: bool, text: &'a str) -> Entry<'a> {
        Entry { name, failed, verdicts: Verdicts::of(data), text }
    }
}

impl Verdicts {
    /// The verdicts `data` holds.
    pub fn of(data: &Data) -> Verdicts {
        let (mut tallies, mut claims) = (Vec::new(), Vec::new());
        let mut claim = |claim: &str, verdict: &'static str| claims.push(Verdict { claim: claim.to_string(), verdict });
        match data {
            Data::BarrierBatching(b) => {
                tallies = vec![
                    NamedTally { of: "model, Apple M2 (fitted)", tally: b.apple_m2.clone() },
                    NamedTally { of: "model, Ampere Altra (predicted)", tally: b.ampere_altra.clone() },
                    NamedTally { of: "host time, Apple M2", tally: b.apple_m2_host.clone() },
                    NamedTally { of: "host time, Ampere Altra", tally: b.ampere_altra_host.clone() },
                ];
            }
            Data::Contpte(c) => {
                claim("TLB", agrees_word(c.tlb_agrees));
                claim("h:1, model", c.h1_verdict.as_str());
            }
            Data::PcpDrain(p) => {
                for r in &p.regressions {
                    claim(&format!("regression, {}", r.published.configuration), r.agreement.as_str());
                }
                claim("cause", agrees_word(p.cause_agrees));
                claim("msleep", p.msleep.as_str());
                claim("fewer iterations", agrees_word(p.fewer_agrees));
                claim("p:512", agrees_word(p.p512_agrees));
            }
            Data::Hvo(h) => {
                claim("(a) regression", h.anon_cow.regression.as_str());
                claim("(a) cause", agrees_word(h.anon_cow.cause_agrees));
                claim("(a) fix", fix_words(h.anon_cow.fix));
                for r in &h.gigantic.rows {
                    claim(&format!("(b) {}", r.op), r.agreement.as_str());
                }
                claim("(b) cause", agrees_word(h.gigantic.cause_agrees));
                claim("(c) grace periods", agrees_word(h.demote.counts_agree));
                claim("(c) time", h.demote.agreement.as_str());
            }
            Data::LinearMap(l) => {
                tallies = vec![NamedTally { of: "map_mem() change against base", tally: l.tally.clone() }];
            }
        }
        Verdicts { tallies, claims }
    }
}
