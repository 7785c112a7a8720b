//! The statistics of `mmlab compare`: the mailing-list A/B rule.
//!
//! Performance results on linux-mm are usually posted as a table of tests
//! with, per test, the change of the mean between a baseline kernel and a
//! patched one, marked `(I)` (improvement) or `(R)` (regression) when the
//! difference is statistically significant. The rule used by the published
//! vmalloc and hugetlb results (`seeds.md` §1) is: compute each side's 95 %
//! confidence interval of the mean from its repeated runs; the change is
//! significant when the two intervals do not overlap. That is the rule here.
//!
//! For one side with samples `x_1..x_n` (n ≥ 2): mean `m`, sample standard
//! deviation `s` (divisor `n - 1`), and interval `m ± t(0.975, n - 1) · s/√n`
//! with Student's t quantile. With one sample the interval is the point
//! itself (nothing is known about the spread; the report says so through
//! `n`). A quantity without noise (a counter, a modelled time) has `s = 0`
//! and a point interval, so any difference of two such quantities is
//! significant, as it should be.
//!
//! The relative change is `(m_new - m_base) / m_base`. Its interval is
//! Welch's interval of the difference `m_new - m_base` (standard error
//! `√(s_b²/n_b + s_n²/n_n)`, Welch–Satterthwaite degrees of freedom, rounded
//! down so the quantile errs wide) divided by `m_base`; this treats the
//! baseline mean in the denominator as exact, which is the usual
//! approximation when the intervals are a few percent wide.
//!
//! For times, lower is better: a new interval wholly below the base
//! interval is `(I)`, wholly above is `(R)`. [`Better::Higher`] flips that
//! for throughputs.

/// Student's t quantile for a two-sided 95 % interval with `df` degrees of
/// freedom: t such that P(|T| ≤ t) = 0.95, i.e. the 0.975 quantile, from
/// statrs' Student's t distribution (exact to double precision, where the
/// usual printed tables give four decimals). Infinite for 0 degrees of
/// freedom (no spread can be estimated).
pub fn t975(df: u64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if df == 0 {
        return f64::INFINITY;
    }
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) => t.inverse_cdf(0.975),
        // df > 0 is always a valid parameter.
        Err(_) => f64::INFINITY,
    }
}

/// Mean, spread and 95 % interval of one side's samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (0 for n < 2).
    pub sd: f64,
    /// Half-width of the 95 % interval of the mean (0 for n < 2).
    pub ci_half: f64,
}

impl Summary {
    /// Summary of `xs`; `None` when `xs` is empty or holds a non-finite value.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Some(Summary { n, mean, sd: 0.0, ci_half: 0.0 });
        }
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        Some(Summary { n, mean, sd, ci_half: t975(n as u64 - 1) * sd / (n as f64).sqrt() })
    }

    /// Lower end of the 95 % interval.
    pub fn lo(&self) -> f64 {
        self.mean - self.ci_half
    }

    /// Upper end of the 95 % interval.
    pub fn hi(&self) -> f64 {
        self.mean + self.ci_half
    }

    /// Squared standard error of the mean.
    fn se2(&self) -> f64 {
        if self.n < 2 { 0.0 } else { self.sd * self.sd / self.n as f64 }
    }
}

/// Which direction of a metric is an improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Times, costs, counts of work.
    Lower,
    /// Throughputs.
    Higher,
}

/// A significant difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// `(I)`: improvement.
    Improvement,
    /// `(R)`: regression.
    Regression,
}

impl Mark {
    /// `(I)` or `(R)`.
    pub fn tag(self) -> &'static str {
        match self {
            Mark::Improvement => "(I)",
            Mark::Regression => "(R)",
        }
    }
}

/// Base against new for one metric of one test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    pub base: Summary,
    pub new: Summary,
    /// `(new - base) / base` in percent (NaN if the base mean is 0 and the
    /// new one is not; 0 if both are 0).
    pub change_pct: f64,
    /// Welch 95 % interval of the change, in percent of the base mean.
    pub change_ci_pct: (f64, f64),
    /// `(I)`/`(R)` when the two sides' intervals do not overlap.
    pub mark: Option<Mark>,
}

impl Comparison {
    /// Compare two sides' summaries.
    pub fn of(base: Summary, new: Summary, better: Better) -> Comparison {
        let diff = new.mean - base.mean;
        let se2 = base.se2() + new.se2();
        let half = if se2 > 0.0 { t975(welch_df(&base, &new)) * se2.sqrt() } else { 0.0 };
        let pct = |d: f64| {
            if base.mean != 0.0 {
                100.0 * d / base.mean
            } else if d == 0.0 {
                0.0
            } else {
                f64::NAN
            }
        };
        let mark = if new.hi() < base.lo() {
            Some(if better == Better::Lower { Mark::Improvement } else { Mark::Regression })
        } else if new.lo() > base.hi() {
            Some(if better == Better::Lower { Mark::Regression } else { Mark::Improvement })
        } else {
            None
        };
        let (a, b) = (pct(diff - half), pct(diff + half));
        Comparison { base, new, change_pct: pct(diff), change_ci_pct: (a.min(b), a.max(b)), mark }
    }
}

/// Welch–Satterthwaite degrees of freedom, rounded down, at least 1.
fn welch_df(a: &Summary, b: &Summary) -> u64 {
    let (va, vb) = (a.se2(), b.se2());
    let num = (va + vb) * (va + vb);
    let mut den = 0.0;
    if a.n >= 2 {
        den += va * va / (a.n - 1) as f64;
    }
    if b.n >= 2 {
        den += vb * vb / (b.n - 1) as f64;
    }
    if den <= 0.0 {
        return 1;
    }
    ((num / den).floor() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    #[test]
    fn t_quantiles() {
        // The printed tables' values, to their four decimals.
        let table = [
            (1, 12.7062),
            (2, 4.3027),
            (3, 3.1824),
            (4, 2.7764),
            (9, 2.2622),
            (10, 2.2281),
            (20, 2.0860),
            (30, 2.0423),
            (40, 2.0211),
            (60, 2.0003),
            (120, 1.9799),
        ];
        for (df, t) in table {
            assert!(close(t975(df), t, 5e-5), "df {df}: {} against {t}", t975(df));
        }
        // Large df, toward the normal quantile 1.959964.
        for (df, t) in [(200, 1.971_896), (1000, 1.962_339), (10_000, 1.960_201)] {
            assert!(close(t975(df), t, 1e-5), "df {df}: {} against {t}", t975(df));
        }
        assert!(t975(0).is_infinite());
    }

    /// By hand: [10, 12, 14]: mean 12, s = 2, se = 2/√3 = 1.154 70,
    /// half = 4.3027 · 1.154 70 = 4.968 3.
    #[test]
    fn summary_by_hand() {
        let s = Summary::of(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!((s.n, s.mean, s.sd), (3, 12.0, 2.0));
        assert!(close(s.ci_half, 4.9683, 1e-4), "{}", s.ci_half);
        let one = Summary::of(&[5.0]).unwrap();
        assert_eq!((one.lo(), one.hi()), (5.0, 5.0));
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    /// By hand, ten samples a side:
    /// base 100..=109 (mean 104.5, s = 3.027 65, half = 2.2622 · 0.957 43 = 2.165 9 → [102.33, 106.67]);
    /// new = base - 10 (same spread, [92.33, 96.67]): disjoint and lower → (I);
    /// change -10/104.5 = -9.569 %; Welch df = 18 (equal variances, n = 10),
    /// half = 2.1009 · √(2 · 0.916 67) = 2.844 7 → [-12.291, -6.847] %.
    #[test]
    fn disjoint_intervals_are_marked() {
        let base: Vec<f64> = (100..110).map(f64::from).collect();
        let new: Vec<f64> = base.iter().map(|x| x - 10.0).collect();
        let (b, n) = (Summary::of(&base).unwrap(), Summary::of(&new).unwrap());
        assert!(close(b.ci_half, 2.1659, 1e-4), "{}", b.ci_half);
        assert_eq!(welch_df(&b, &n), 18);
        let c = Comparison::of(b, n, Better::Lower);
        assert_eq!(c.mark, Some(Mark::Improvement));
        assert!(close(c.change_pct, -9.5694, 1e-4), "{}", c.change_pct);
        assert!(close(c.change_ci_pct.0, -12.2916, 1e-3), "{:?}", c.change_ci_pct);
        assert!(close(c.change_ci_pct.1, -6.8472, 1e-3), "{:?}", c.change_ci_pct);
        // The same numbers the other way round are a regression; as a
        // throughput, an improvement.
        assert_eq!(Comparison::of(n, b, Better::Lower).mark, Some(Mark::Regression));
        assert_eq!(Comparison::of(n, b, Better::Higher).mark, Some(Mark::Improvement));
    }

    /// Overlapping intervals: base [102.33, 106.67], new shifted by 4
    /// ([98.33, 102.67]) overlap → no mark, even though the means differ.
    #[test]
    fn overlapping_intervals_are_not_marked() {
        let base: Vec<f64> = (100..110).map(f64::from).collect();
        let new: Vec<f64> = base.iter().map(|x| x - 4.0).collect();
        let c = Comparison::of(Summary::of(&base).unwrap(), Summary::of(&new).unwrap(), Better::Lower);
        assert_eq!(c.mark, None);
        assert!(c.change_ci_pct.0 < 0.0 && c.change_ci_pct.1 > -4.0 / 104.5 * 100.0);
    }

    #[test]
    fn noiseless_quantities() {
        let same = Summary::of(&[7.0; 5]).unwrap();
        let c = Comparison::of(same, same, Better::Lower);
        assert_eq!((c.mark, c.change_pct, c.change_ci_pct), (None, 0.0, (0.0, 0.0)));
        let fewer = Summary::of(&[1.0; 5]).unwrap();
        let c = Comparison::of(same, fewer, Better::Lower);
        assert_eq!(c.mark, Some(Mark::Improvement));
        assert!(close(c.change_pct, -85.714, 1e-3));
        let zero = Summary::of(&[0.0; 3]).unwrap();
        assert_eq!(Comparison::of(zero, zero, Better::Lower).change_pct, 0.0);
        assert!(Comparison::of(zero, same, Better::Lower).change_pct.is_nan());
    }
}
