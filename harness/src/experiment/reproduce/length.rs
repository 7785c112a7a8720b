//! How long a reproduction runs: [`Length`].

/// Run length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Length {
    /// Loops in percent of quick mode's: 100 quick, 1000 full.
    pub loops_pct: u32,
    /// Kept runs per side.
    pub repeats: usize,
}

impl Length {
    /// The default: quick mode's loops, ten runs a side.
    pub const QUICK: Length = Length { loops_pct: 100, repeats: 10 };
    /// `--full`: ten times quick mode's loops.
    pub const FULL: Length = Length { loops_pct: 1000, repeats: 10 };

    /// Quick mode's `n` scaled, at least 1.
    pub(super) fn scaled(self, n: i32) -> i32 {
        ((i64::from(n) * i64::from(self.loops_pct) / 100).max(1)).min(i64::from(i32::MAX)) as i32
    }
}
