//! The checks of `mmlab fuzz`'s input that run before anything boots: the
//! value parsers of its options (clap names the option in their errors)
//! and the limits and refusals the options together are checked
//! against (by `fuzz::cli::check`, which names the option and the limit).
//!
//! # Limits
//!
//! A run either ends by itself or is bounded by `--time`; none is meant
//! to be stopped with Ctrl-C (whose default action ends the process,
//! without the summary; the JSON lines of finished seeds are written).
//! The bounds are mmlab's, far above what a campaign shard needs (the
//! README's run 1,000 seeds of 100,000 operations, 10^8):
//!
//! | input | bound |
//! |---|---|
//! | `--ops` | 1..=[`MAX_WORKLOAD_OPS`](crate::cli::MAX_WORKLOAD_OPS) (10^9) per seed |
//! | the run without `--time`: `--ops` × seeds × `--threads` | at most [`MAX_WORKLOAD_OPS`](crate::cli::MAX_WORKLOAD_OPS) (the summary's op count) |
//! | `--time` | more than 0, at most [`MAX_TIME`] (7 days) |
//! | `--shrink-time` | 0..=[`MAX_TIME`] in seconds |
//! | `--threads` | 1..=`--cpus` |
//! | `--wrong` | 0..=64 |
//!
//! A run that would do nothing is refused: `--ops 0`, `--time 0`, an
//! empty `--fail-page-alloc` or one that cannot fail (`probability=0`,
//! `times=0`), an empty `--exclude`. An option given where it does
//! nothing is refused, as `--seed` is by the commands that draw no random
//! numbers: `--seed` with `--seeds`, `--exclude` with `--wrong 0`,
//! `--shrink-time` with `--no-shrink`, and `--out-dir`, `--no-shrink`
//! and `--shrink-time` with `--threads` above 1 (no replay is written).
//! `--out-dir` must be an existing directory mmlab can create files in,
//! checked before the first seed.

use super::generate::WRONG_KINDS;
use super::replay::parse_fault_attr;
use crate::cli::{parse_ops, parse_seed};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The longest `--time` and `--shrink-time`: 7 days.
pub const MAX_TIME: Duration = Duration::from_secs(7 * 86_400);

/// Most wrong calls per 64 operations (`--wrong`): all of them.
pub const MAX_WRONG_PER_64: u64 = 64;

/// An option refused for what it asks together with the others: the
/// option and why (shown as `OPTION: WHY`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The option, as typed (`--out-dir`).
    pub option: &'static str,
    pub message: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.option, self.message)
    }
}
impl std::error::Error for OptionError {}

impl From<OptionError> for String {
    fn from(e: OptionError) -> String {
        e.to_string()
    }
}

pub(super) fn refuse<T>(option: &'static str, message: String) -> Result<T, OptionError> {
    Err(OptionError { option, message })
}

/// `--seeds`: seeds `first..=last`, never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    pub first: u64,
    pub last: u64,
}

impl SeedRange {
    /// How many seeds (2^64 for the whole range).
    pub fn count(&self) -> u128 {
        u128::from(self.last - self.first) + 1
    }
}

impl fmt::Display for SeedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.first, self.last)
    }
}

/// `--seeds`: `A..B` (B excluded) or `A..=B`, not empty.
pub fn parse_seeds(s: &str) -> Result<SeedRange, String> {
    let (a, b, inclusive) = if let Some((a, b)) = s.split_once("..=") {
        (a, b, true)
    } else if let Some((a, b)) = s.split_once("..") {
        (a, b, false)
    } else {
        return Err("expected A..B (B excluded) or A..=B".to_string());
    };
    let first = parse_seed(a).map_err(|e| format!("start: {e}"))?;
    let b = parse_seed(b).map_err(|e| format!("end: {e}"))?;
    let last = if inclusive { Some(b) } else { b.checked_sub(1) };
    match last.filter(|&l| l >= first) {
        Some(last) => Ok(SeedRange { first, last }),
        None => Err("the range is empty".to_string()),
    }
}

/// `--time`: `NUMBER[s|m|h|d]` (seconds without a unit; NUMBER is
/// decimal, `1.5h`), more than 0 and at most [`MAX_TIME`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1u32),
        Some((i, 'm')) => (&t[..i], 60),
        Some((i, 'h')) => (&t[..i], 3600),
        Some((i, 'd')) => (&t[..i], 86_400),
        _ => (t, 1),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return Err(format!("`{s}` is not a duration: NUMBER[s|m|h|d], e.g. 90s, 10m, 1.5h, 2d"));
    }
    let max = MAX_TIME.as_secs();
    let over = || format!("{s} is longer than {} days ({max} s), the longest run mmlab takes", max / 86_400);
    // Whole seconds first, exactly: a long string of digits must not
    // reach the float conversion.
    let whole: u64 = int.parse::<u64>().ok().and_then(|n| n.checked_mul(u64::from(mult))).ok_or_else(over)?;
    if whole > max {
        return Err(over());
    }
    let secs = format!("{int}.{frac}").parse::<f64>().map_err(|_| over())? * f64::from(mult);
    if secs > max as f64 {
        return Err(over());
    }
    let d = Duration::from_secs_f64(secs);
    if d.is_zero() {
        return Err(format!("{s}: a run of no time does nothing"));
    }
    Ok(d)
}

/// `--ops`: 1..=[`MAX_WORKLOAD_OPS`](crate::cli::MAX_WORKLOAD_OPS) per seed.
pub fn parse_fuzz_ops(s: &str) -> Result<u64, String> {
    match parse_ops(s)? {
        0 => Err("0 operations: a seed runs at least 1".to_string()),
        n => Ok(n),
    }
}

/// `--shrink-time`: seconds, 0..=[`MAX_TIME`].
pub fn parse_shrink_time(s: &str) -> Result<u64, String> {
    let n = parse_ops(s).map_err(|_| format!("{s}: expected whole seconds, 0 to {}", MAX_TIME.as_secs()))?;
    if n > MAX_TIME.as_secs() {
        return Err(format!("{n} s: at most {} s (7 days)", MAX_TIME.as_secs()));
    }
    Ok(n)
}

/// `--threads`: 1..=NR_CPUS (and at most `--cpus`, checked by `fuzz::cli::check`).
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let n = crate::cli::parse_cpus(s).map_err(|e| e.replace("CPUs: a machine has", "threads: a run has"))?;
    Ok(n)
}

/// `--wrong`: 0..=[`MAX_WRONG_PER_64`].
pub fn parse_wrong(s: &str) -> Result<u64, String> {
    let n = parse_ops(s).map_err(|_| format!("{s}: expected 0 to {MAX_WRONG_PER_64}"))?;
    if n > MAX_WRONG_PER_64 {
        return Err(format!("{n} wrong calls per 64 operations: at most {MAX_WRONG_PER_64}"));
    }
    Ok(n)
}

/// `--fail-page-alloc`: attributes that parse and can fail an allocation.
pub fn parse_fail_page_alloc(s: &str) -> Result<String, String> {
    if s.split(',').all(|p| p.trim().is_empty()) {
        return Err("empty: give the attributes to arm fail_page_alloc with, e.g. probability=10,times=-1".to_string());
    }
    let a = parse_fault_attr(s, 0)?;
    if a.probability == 0 {
        return Err("probability=0 (the kernel's default) fails no allocation: give probability=1..100".to_string());
    }
    if a.times == 0 {
        return Err("times=0 fails no allocation: give times=-1 (no limit) or a count".to_string());
    }
    Ok(s.trim().to_string())
}

/// `--exclude`: a comma list of [`WRONG_KINDS`], not empty.
pub fn parse_exclude(s: &str) -> Result<String, String> {
    let kinds: Vec<&str> = s.split(',').map(str::trim).filter(|k| !k.is_empty()).collect();
    if kinds.is_empty() {
        return Err("empty: name the wrong-call kinds to leave out".to_string());
    }
    if let Some(k) = kinds.iter().find(|k| !WRONG_KINDS.contains(k)) {
        return Err(format!("unknown wrong-call kind `{k}` ({})", WRONG_KINDS.join(", ")));
    }
    Ok(s.trim().to_string())
}

/// What `fuzz::cli::check` resolved: the seeds to run and where replays go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The seeds, `first..=last` (up to `u64::MAX` with `--time` alone).
    pub seeds: SeedRange,
    /// Where replays of violations are written (`None` with `--threads`
    /// above 1: threaded runs are not replayable).
    pub out_dir: Option<PathBuf>,
    /// The shrinking budget (`None`: `--no-shrink`).
    pub shrink: Option<Duration>,
}

/// The default of `--shrink-time`, in seconds.
pub const DEFAULT_SHRINK_SECS: u64 = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(MAX_TIME));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        for bad in ["1e20", "inf", "NaN", "-1", "", "s", "1.", ".5", "1..2", "+3"] {
            assert!(parse_duration(bad).unwrap_err().contains("not a duration"), "{bad}");
        }
        for long in ["7.01d", "1000000000000000d", "10000000000000000000", "99999999999999999999999", "604801"] {
            assert!(parse_duration(long).unwrap_err().contains("longer than 7 days"), "{long}");
        }
        for zero in ["0", "0s", "0.0m", "0.0000000001"] {
            assert!(parse_duration(zero).unwrap_err().contains("no time"), "{zero}");
        }
    }

    #[test]
    fn seed_ranges() {
        assert_eq!(parse_seeds("3..5"), Ok(SeedRange { first: 3, last: 4 }));
        assert_eq!(parse_seeds("3..=5").map(|r| r.count()), Ok(3));
        let all = parse_seeds("0..=18446744073709551615").unwrap();
        assert_eq!(all.count(), 1 << 64);
        for bad in ["5..5", "6..3", "0..0", "3", "a..b", "-1..3", "..4", "1..18446744073709551616"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts() {
        assert!(parse_fuzz_ops("0").unwrap_err().contains("at least 1"));
        assert!(parse_fuzz_ops("1000000001").unwrap_err().contains("at most 1000000000"));
        assert_eq!(parse_fuzz_ops("1000000000"), Ok(crate::cli::MAX_WORKLOAD_OPS));
        assert!(parse_threads("0").unwrap_err().contains("threads: a run has 1 to"));
        assert!(parse_wrong("65").unwrap_err().contains("at most 64"));
        assert_eq!(parse_shrink_time("604800"), Ok(604_800));
        assert!(parse_shrink_time("604801").unwrap_err().contains("at most 604800"));
        assert!(parse_fail_page_alloc("").unwrap_err().contains("empty"));
        assert!(parse_fail_page_alloc(" , ").unwrap_err().contains("empty"));
        assert!(parse_fail_page_alloc("interval=1").unwrap_err().contains("probability=0"));
        assert!(parse_fail_page_alloc("probability=5,times=0").unwrap_err().contains("times=0"));
        assert!(parse_fail_page_alloc("probability=500").unwrap_err().contains("percentage"));
        assert!(parse_exclude(",").unwrap_err().contains("empty"));
        assert!(parse_exclude("double_free,nope").unwrap_err().contains("`nope`"));
    }
}
