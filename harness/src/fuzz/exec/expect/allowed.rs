//! [`Expect`]: what the oracle accepts from a call, and its constructors;
//! apart from the tables so that the executor's methods can name it.

use crate::fuzz::oracle::Outcome;

/// The most outcomes one call may be allowed.
const MAX_ALLOWED: usize = 6;

/// The outcomes a call may return: a short list held inline (every op
/// builds one; a `Vec` cost an allocation per op).
#[derive(Clone, Copy, Debug)]
pub(in crate::fuzz::exec) struct Allowed {
    len: u8,
    list: [Outcome; MAX_ALLOWED],
}

impl Allowed {
    fn of(v: &[Outcome]) -> Allowed {
        assert!(!v.is_empty() && v.len() <= MAX_ALLOWED, "an oracle table allows 1 to {MAX_ALLOWED} outcomes: {v:?}");
        let mut list = [Outcome::Skipped; MAX_ALLOWED];
        list[..v.len()].copy_from_slice(v);
        Allowed { len: v.len() as u8, list }
    }
}

impl std::ops::Deref for Allowed {
    type Target = [Outcome];
    fn deref(&self) -> &[Outcome] {
        &self.list[..usize::from(self.len)]
    }
}

impl<const N: usize> PartialEq<[Outcome; N]> for Allowed {
    fn eq(&self, other: &[Outcome; N]) -> bool {
        **self == *other
    }
}

/// What the oracle accepts from a call.
pub(in crate::fuzz::exec) struct Expect {
    /// The outcomes the call may return.
    pub(in crate::fuzz::exec) allowed: Allowed,
    /// Whether only errors are acceptable, so the call must change nothing
    /// (checked against a snapshot taken before it).
    pub(in crate::fuzz::exec) must_not_change: bool,
}

/// Exactly `o`; nothing may change if it is an error.
pub(in crate::fuzz::exec) fn only(o: Outcome) -> Expect {
    Expect { allowed: Allowed::of(&[o]), must_not_change: o.is_error() }
}

/// One of the errors `v`; nothing may change.
pub(in crate::fuzz::exec) fn errors(v: &[Outcome]) -> Expect {
    Expect { allowed: Allowed::of(v), must_not_change: true }
}

/// One of `v`, at least one a success.
pub(in crate::fuzz::exec) fn succeeds(v: &[Outcome]) -> Expect {
    Expect { allowed: Allowed::of(v), must_not_change: false }
}

/// The call is not run.
pub(in crate::fuzz::exec) fn skipped() -> Expect {
    only(Outcome::Skipped)
}
