//! [`Expect`]: what the oracle accepts from a call, and its constructors;
//! apart from the tables so that the executor's methods can name it.

use crate::fuzz::oracle::Outcome;

/// What the oracle accepts from a call.
pub(in crate::fuzz::exec) struct Expect {
    /// The outcomes the call may return.
    pub(in crate::fuzz::exec) allowed: Vec<Outcome>,
    /// Whether only errors are acceptable, so the call must change nothing
    /// (checked against a snapshot taken before it).
    pub(in crate::fuzz::exec) must_not_change: bool,
}

/// Exactly `o`; nothing may change if it is an error.
pub(in crate::fuzz::exec) fn only(o: Outcome) -> Expect {
    Expect { allowed: vec![o], must_not_change: o.is_error() }
}

/// One of the errors `v`; nothing may change.
pub(in crate::fuzz::exec) fn errors(v: &[Outcome]) -> Expect {
    Expect { allowed: v.to_vec(), must_not_change: true }
}

/// One of `v`, at least one a success.
pub(in crate::fuzz::exec) fn succeeds(v: &[Outcome]) -> Expect {
    Expect { allowed: v.to_vec(), must_not_change: false }
}

/// The call is not run.
pub(in crate::fuzz::exec) fn skipped() -> Expect {
    Expect { allowed: vec![Outcome::Skipped], must_not_change: false }
}
