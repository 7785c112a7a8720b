//! The axes of mmlab's charts: a linear [`Scale`] from values to pixels,
//! "nice" [`Ticks`] (steps of 1, 2 or 5 times a power of ten, about five
//! or six of them, covering the data) and compact tick labels ([`fmt_num`]:
//! `250`, `1.5k`, `2M`, `0.125`, exponent notation outside 0.001 to 10^15).

/// Linear map from a value range onto a pixel range.
pub(super) struct Scale {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) px_lo: f64,
    pub(super) px_hi: f64,
}

impl Scale {
    pub(super) fn new(lo: f64, hi: f64, px_lo: f64, px_hi: f64) -> Self {
        Scale { lo, hi, px_lo, px_hi }
    }

    /// Halving first keeps `hi - lo` finite for ranges near `f64::MAX`.
    pub(super) fn map(&self, v: f64) -> f64 {
        let t = (v / 2.0 - self.lo / 2.0) / (self.hi / 2.0 - self.lo / 2.0);
        let t = if t.is_finite() { t } else { 0.0 };
        self.px_lo + t * (self.px_hi - self.px_lo)
    }
}

/// Axis ticks: `values` ascending, evenly `step` apart.
#[derive(Debug)]
pub(super) struct Ticks {
    pub(super) values: Vec<f64>,
    pub(super) step: f64,
}

impl Ticks {
    pub(super) fn first(&self) -> f64 {
        self.values.first().copied().unwrap_or(0.0)
    }

    pub(super) fn last(&self) -> f64 {
        self.values.last().copied().unwrap_or(1.0)
    }

    /// Tick labels: each with its own unit suffix (`500`, `1k`, `1.5k`) and
    /// just enough decimals to tell it from its neighbours.
    pub(super) fn labels(&self) -> Vec<String> {
        let max_abs = self.values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        if !(1e-3..1e15).contains(&max_abs) || !self.step.is_finite() || self.step <= 0.0 {
            return self.values.iter().map(|&v| if v == 0.0 { "0".to_string() } else { format!("{v:e}") }).collect();
        }
        self.values
            .iter()
            .map(|&v| {
                if v.abs() < self.step * 1e-6 {
                    return "0".to_string();
                }
                let (unit, suffix) = unit_for(v.abs());
                let decimals = (-((self.step / unit).log10() + 1e-9).floor()).clamp(0.0, 12.0) as usize;
                format!("{}{suffix}", trim_zeros(format!("{:.*}", decimals, v / unit)))
            })
            .collect()
    }
}

/// Ticks covering `[lo, hi]` (the first at or below `lo`, the last at or
/// above `hi`) with a step of 1, 2 or 5 times a power of ten, chosen so that
/// there are about five or six of them. An empty range is widened first.
pub(super) fn nice_ticks(lo: f64, hi: f64) -> Ticks {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() { (lo.min(hi), lo.max(hi)) } else { (0.0, 1.0) };
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        if lo == 0.0 {
            hi = pad;
        } else {
            lo -= pad;
            hi += pad;
        }
    }
    let fallback = Ticks { values: vec![lo, hi], step: hi / 2.0 - lo / 2.0 };
    let span = hi / 2.0 - lo / 2.0; // half the span, finite even near f64::MAX
    let raw = span / 2.5;
    if !(raw.is_finite() && raw > 0.0) {
        return fallback;
    }
    let exp = raw.log10().floor() as i32;
    let mut best: Option<(f64, i64, i64, i64, i32)> = None; // (cost, first, last, mantissa, exponent)
    for e in exp - 1..=exp + 1 {
        for m in [1, 2, 5] {
            let step = exact(m, e);
            if !(step.is_finite() && step > 0.0) {
                continue;
            }
            let tick = |i: i64| i.checked_mul(m).map_or(f64::NAN, |n| exact(n, e));
            let mut first = (lo / step).floor() as i64;
            let mut last = (hi / step).ceil() as i64;
            // The divisions round: settle on the innermost ticks that cover [lo, hi].
            for _ in 0..2 {
                if tick(first) > lo {
                    first = first.saturating_sub(1);
                } else if tick(first.saturating_add(1)) <= lo {
                    first = first.saturating_add(1);
                }
                if tick(last) < hi {
                    last = last.saturating_add(1);
                } else if tick(last.saturating_sub(1)) >= hi {
                    last = last.saturating_sub(1);
                }
            }
            let count = last.saturating_sub(first).saturating_add(1);
            if !(2..=100).contains(&count) {
                continue;
            }
            let cost = (count as f64 - 5.5).abs();
            if best.is_none_or(|b| cost < b.0) {
                best = Some((cost, first, last, m, e));
            }
        }
    }
    let Some((_, first, last, m, e)) = best else { return fallback };
    let values: Vec<f64> = (first..=last).map(|i| i.checked_mul(m).map_or(f64::NAN, |n| exact(n, e))).collect();
    let covers = values.first().is_some_and(|&v| v <= lo) && values.last().is_some_and(|&v| v >= hi);
    if !covers || values.iter().any(|v| !v.is_finite()) {
        return fallback;
    }
    Ticks { values, step: exact(m, e) }
}

/// `n` × 10^`e`, correctly rounded (3 × 10^-1 is 0.3, not
/// 0.30000000000000004); ±∞ when out of range.
pub(super) fn exact(n: i64, e: i32) -> f64 {
    format!("{n}e{e}").parse().unwrap_or(f64::NAN)
}

/// Divisor and suffix for numbers of this magnitude.
pub(super) fn unit_for(abs: f64) -> (f64, &'static str) {
    if abs >= 1e12 {
        (1e12, "T")
    } else if abs >= 1e9 {
        (1e9, "G")
    } else if abs >= 1e6 {
        (1e6, "M")
    } else if abs >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    }
}

/// `v` with up to three significant digits and a unit suffix: `0`, `250`,
/// `1.5k`, `2M`, `0.125`; outside 0.001 to 10^15 in exponent notation.
pub(super) fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let a = v.abs();
    // Round to three significant digits, scaling by exact powers of ten.
    let shift = 2 - a.log10().floor() as i32;
    let r = if shift >= 0 {
        let scale = 10f64.powi(shift);
        if (a * scale).is_finite() { (a * scale).round() / scale } else { a }
    } else {
        let scale = 10f64.powi(-shift);
        if scale.is_finite() { (a / scale).round() * scale } else { a }
    };
    if !(1e-3..1e15).contains(&r) {
        let s = format!("{r:.2e}");
        return match s.split_once('e') {
            Some((mantissa, exponent)) => format!("{sign}{}e{exponent}", trim_zeros(mantissa.to_string())),
            None => format!("{sign}{s}"),
        };
    }
    let (unit, suffix) = unit_for(r);
    let s = r / unit;
    let decimals = (2.0 - s.log10().floor()).clamp(0.0, 5.0) as usize;
    format!("{sign}{}{suffix}", trim_zeros(format!("{:.*}", decimals, s)))
}

/// `"1.50"` → `"1.5"`, `"2.00"` → `"2"`; leaves integers alone.
pub(super) fn trim_zeros(s: String) -> String {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_use_1_2_5_steps_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 7.3).values, [0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(nice_ticks(0.0, 1.0).values, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(nice_ticks(0.0, 0.0).values.first(), Some(&0.0));
        let cases = [(0.0, 7.3), (0.0, 1.0), (0.0, 0.0), (-3.0, 17.0), (1000.0, 1010.0), (0.001, 0.0013), (-5e9, -1e9)];
        let more = [(0.0, 123_456.0), (42.0, 42.0), (-1.0, 1.0), (3.0, -3.0), (0.0, 1e-300), (-f64::MAX, f64::MAX)];
        for (lo, hi) in cases.into_iter().chain(more) {
            let t = nice_ticks(lo, hi);
            let v = &t.values;
            assert!(v.len() >= 2 && v.len() <= 8, "{lo}..{hi}: {v:?}");
            assert!(v[0] <= lo.min(hi) && *v.last().unwrap() >= lo.max(hi), "{lo}..{hi}: {v:?}");
            if lo == -f64::MAX {
                continue;
            }
            let mantissa = t.step / 10f64.powf(t.step.log10().floor());
            assert!([1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9), "{lo}..{hi}: step {}", t.step);
            for w in v.windows(2) {
                assert!(((w[1] - w[0]) / t.step - 1.0).abs() < 1e-6, "{lo}..{hi}: {v:?}");
            }
        }
    }

    #[test]
    fn tick_labels_and_numbers_are_compact() {
        assert_eq!(nice_ticks(0.0, 7.3).labels(), ["0", "2", "4", "6", "8"]);
        assert_eq!(nice_ticks(0.0, 2400.0).labels(), ["0", "500", "1k", "1.5k", "2k", "2.5k"]);
        assert_eq!(nice_ticks(0.0, 1.9e6).labels(), ["0", "500k", "1M", "1.5M", "2M"]);
        assert_eq!(nice_ticks(1000.0, 1008.0).labels(), ["1k", "1.002k", "1.004k", "1.006k", "1.008k"]);
        assert_eq!(nice_ticks(0.0, 0.3).labels(), ["0", "0.05", "0.1", "0.15", "0.2", "0.25", "0.3"]);
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(250.0), "250");
        assert_eq!(fmt_num(1500.0), "1.5k");
        assert_eq!(fmt_num(2e6), "2M");
        assert_eq!(fmt_num(999_999.0), "1M");
        assert_eq!(fmt_num(-0.125), "-0.125");
        assert_eq!(fmt_num(1.234_56e-7), "1.23e-7");
    }
}
