//! The rules that say whether a number mmlab measures agrees with the
//! published one.
//!
//! The emulation's measured time is host time of Rust code, not of the
//! kernel's C, so only the direction of a change and its rough size can be
//! expected to agree. For a row of a published A/B table the rule is
//! [`Agreement::judge`]: where the posting found a significant change, ours
//! agrees when it has the same sign, is significant too and is within 2x
//! of it, and falls short by degrees ([`Agreement::Direction`],
//! [`Agreement::Weak`]); where the posting found none, ours agrees when it
//! is under 5 % or not significant either. [`Tally`] sums the verdicts of a
//! table into the line the report closes it with. The other claims have a
//! verdict type each ([`H1Verdict`]) or a plain `bool`.

use super::published::Change;

/// How one measured change compares with a published one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// Same sign, both significant, size within 2x.
    Agrees,
    /// Same sign, both significant, size off by more than 2x.
    Direction,
    /// Same sign, ours not significant.
    Weak,
    /// Published significant, ours of the other sign.
    Disagrees,
    /// Published not significant; ours under 5 % or not significant.
    Flat,
    /// Published not significant; ours significant and 5 % or more.
    Differs,
}

impl Agreement {
    /// Judges `ours` against `published` (module docs).
    pub fn judge(ours: Change, published: Change) -> Agreement {
        match published.mark {
            Some(_) if ours.mark.is_some() && ours.pct.signum() == published.pct.signum() => {
                let ratio = ours.pct / published.pct;
                if (0.5..=2.0).contains(&ratio) { Agreement::Agrees } else { Agreement::Direction }
            }
            Some(_) if ours.pct.signum() == published.pct.signum() => Agreement::Weak,
            Some(_) => Agreement::Disagrees,
            None if ours.mark.is_none() || ours.pct.abs() < 5.0 => Agreement::Flat,
            None => Agreement::Differs,
        }
    }

    /// The word the report prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Agreement::Agrees => "agrees",
            Agreement::Direction => "direction",
            Agreement::Weak => "weak",
            Agreement::Disagrees => "DISAGREES",
            Agreement::Flat => "agrees (~0)",
            Agreement::Differs => "differs",
        }
    }
}

impl std::fmt::Display for Agreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdicts of a published table's rows, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Rows the posting found significant.
    pub significant: usize,
    /// Of those, rows whose direction agrees.
    pub direction: usize,
    /// Of those, rows whose size agrees within 2x too.
    pub size: usize,
    /// Rows the posting found not significant.
    pub flat: usize,
    /// Of those, rows flat here too.
    pub flat_agree: usize,
    /// The rows that disagree, by their published label.
    pub against: Vec<&'static str>,
}

impl Tally {
    /// Counts the verdict `a` of the row `test`.
    pub fn add(&mut self, test: &'static str, a: Agreement) {
        match a {
            Agreement::Agrees => {
                self.significant += 1;
                self.direction += 1;
                self.size += 1;
            }
            Agreement::Direction | Agreement::Weak => {
                self.significant += 1;
                self.direction += 1;
            }
            Agreement::Disagrees => {
                self.significant += 1;
                self.against.push(test);
            }
            Agreement::Flat => {
                self.flat += 1;
                self.flat_agree += 1;
            }
            Agreement::Differs => {
                self.flat += 1;
                self.against.push(test);
            }
        }
    }
}

/// How the contpte h:1 runs compare with what contpte alone cost in the
/// published table ([`super::published::contpte_alone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H1Verdict {
    /// Every row [`Agreement::Agrees`], with more zone-lock acquisitions
    /// per call.
    Agrees,
    /// Every row slower, more zone-lock acquisitions, but a size off by
    /// more than 2x somewhere.
    DirectionAndCause,
    /// More zone-lock acquisitions, the time does not follow.
    CauseOnly,
    /// Not even the zone-lock traffic goes up.
    Disagrees,
}

impl H1Verdict {
    /// Judges the rows' verdicts `rows` and whether zone-lock acquisitions
    /// went up in every row.
    pub fn judge(rows: &[Agreement], zone_lock_up: bool) -> H1Verdict {
        let all = |ok: &dyn Fn(Agreement) -> bool| !rows.is_empty() && rows.iter().all(|&a| ok(a));
        if zone_lock_up && all(&|a| a == Agreement::Agrees) {
            H1Verdict::Agrees
        } else if zone_lock_up && all(&|a| matches!(a, Agreement::Agrees | Agreement::Direction)) {
            H1Verdict::DirectionAndCause
        } else if zone_lock_up {
            H1Verdict::CauseOnly
        } else {
            H1Verdict::Disagrees
        }
    }

    /// What the report prints.
    pub fn as_str(self) -> &'static str {
        match self {
            H1Verdict::Agrees => "agrees",
            H1Verdict::DirectionAndCause => "direction and cause agree; the size is off by more than 2x",
            H1Verdict::CauseOnly => "the cause agrees; the time does not",
            H1Verdict::Disagrees => "DISAGREES",
        }
    }
}

/// How the msleep(1) claim (the sleep reduces or removes the regression)
/// is reproduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsleepVerdict {
    /// The sleep takes away the cause: the pages drained per iteration fall
    /// under 80 % of the run without it, and the modelled regression by
    /// more than 5 points with the slept time left out.
    Cause,
    /// The regression falls by more than 5 points once the slept time is
    /// counted, as test_vmalloc's clock counts it, while the drains per
    /// iteration do not fall: the sleep dilutes the regression.
    Dilution,
    /// Neither.
    NotReproduced,
}

impl MsleepVerdict {
    /// Judges the run with the sleep (`slept`: slept time left out;
    /// `slept_timed`: counted) against the run without (`without`, percent),
    /// with the drains per iteration of both.
    pub fn judge(
        slept: Change,
        slept_timed: Change,
        drained_slept: f64,
        without: f64,
        drained_without: f64,
    ) -> MsleepVerdict {
        if drained_slept < 0.8 * drained_without && slept.pct + 5.0 < without {
            MsleepVerdict::Cause
        } else if slept_timed.pct + 5.0 < without {
            MsleepVerdict::Dilution
        } else {
            MsleepVerdict::NotReproduced
        }
    }

    /// What the report prints.
    pub fn as_str(self) -> &'static str {
        match self {
            MsleepVerdict::Cause => "agrees: the sleep takes away the drains",
            MsleepVerdict::Dilution => {
                "agrees, by dilution: the regression falls once the slept time is counted, as the test's clock counts it; the drains per iteration do not"
            }
            MsleepVerdict::NotReproduced => "DISAGREES",
        }
    }
}

/// How the fewer-iterations claim is judged: the regression at the fewest
/// iterations is more than 5 points below the one of the full run.
pub fn fewer_agrees(fewest: Change, full: f64) -> bool {
    fewest.pct + 5.0 < full
}

/// `true` (the report's "agrees") or `false` ("DISAGREES").
pub fn agrees_word(ok: bool) -> &'static str {
    if ok { "agrees" } else { "DISAGREES" }
}
