//! Measured host time explained with the model's events: why host time and
//! the deterministic model give a row different verdicts.
//!
//! Both metrics see the same counted events. The model prices them with the
//! kernel's costs on the profile's machine ([`super::model`], fitted on the
//! Apple M2 column); measured host time is what the *emulator* spends on
//! them on this host, whose balance is not the kernel's (a zone-lock hold
//! or a merge in Rust on x86_64 costs something else against a pcp list op
//! than the kernel does on arm64). To say which event a row's host time
//! weighs differently, per-event costs are fitted to the measured host ns
//! per call: non-negative least squares over both sides of every row of a
//! run, each equation divided by its own time so that the residuals are
//! relative. A row whose verdicts differ is then split: its change per call
//! in each metric as the sum over events of (count change x that metric's
//! cost), plus the profile-priced part (barriers, TLBIs, grace periods,
//! the same in both), plus for host time what the fit leaves unexplained
//! (noise, and work no event counts).

use super::model::{BLOCK_PATH, Event, EventCosts};
use serde::Serialize;

/// Number of events ([`Event::ALL`]).
const N: usize = Event::ALL.len();

/// One row of a run: per-call counts of every event ([`Event::ALL`] order)
/// on both sides, and the measured host ns per call (profile-priced time
/// not included).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostRow {
    pub test: &'static str,
    pub base: [f64; N],
    pub new: [f64; N],
    /// Measured host ns per call, base and new.
    pub host_ns: (f64, f64),
    /// Profile-priced ns per call (the same in both metrics), base and new.
    pub profile_ns: (f64, f64),
}

/// Per-event costs of the emulator on this host, fitted on a run's rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostFit {
    /// ns per event, [`Event::ALL`] order.
    pub costs: [f64; N],
    /// Root mean square of the relative residuals of the per-call times,
    /// percent.
    pub rms_pct: f64,
}

impl HostFit {
    /// ns per `event`.
    pub fn ns(&self, event: Event) -> f64 {
        Event::ALL.iter().position(|&e| e == event).map_or(0.0, |i| self.costs[i])
    }
}

/// Fits [`HostFit`] on `rows` (module docs).
pub fn fit(rows: &[HostRow]) -> HostFit {
    let mut a = Vec::new();
    let mut y = Vec::new();
    for r in rows {
        for (counts, ns) in [(&r.base, r.host_ns.0), (&r.new, r.host_ns.1)] {
            if ns.is_finite() && ns > 0.0 {
                a.push(counts.map(|x| x / ns));
                y.push(1.0);
            }
        }
    }
    let costs = nnls(&a, &y);
    let sq: f64 = a.iter().map(|row| (row.iter().zip(&costs).map(|(x, c)| x * c).sum::<f64>() - 1.0).powi(2)).sum();
    let rms_pct = 100.0 * (sq / a.len().max(1) as f64).sqrt();
    HostFit { costs, rms_pct }
}

/// Non-negative least squares for `N` unknowns by active sets: solve the
/// normal equations on the free set, pin the most negative to 0, repeat
/// (a small ridge keeps costs the rows do not identify at 0).
fn nnls<const N: usize>(a: &[[f64; N]], y: &[f64]) -> [f64; N] {
    let ridge = 1e-9;
    let mut free = [true; N];
    loop {
        let idx: Vec<usize> = (0..N).filter(|&j| free[j]).collect();
        let n = idx.len();
        let mut m = vec![vec![0.0; n + 1]; n];
        for (p, &j) in idx.iter().enumerate() {
            for (q, &k) in idx.iter().enumerate() {
                m[p][q] = a.iter().map(|r| r[j] * r[k]).sum::<f64>() + if p == q { ridge } else { 0.0 };
            }
            m[p][n] = a.iter().zip(y).map(|(r, yr)| r[j] * yr).sum::<f64>();
        }
        // Gaussian elimination with partial pivoting.
        for col in 0..n {
            let piv = (col..n).max_by(|&x, &z| m[x][col].abs().total_cmp(&m[z][col].abs())).unwrap_or(col);
            m.swap(col, piv);
            let d = m[col][col];
            if d.abs() < 1e-30 {
                continue;
            }
            let pivot = m[col].clone();
            for (r, row) in m.iter_mut().enumerate() {
                if r != col {
                    let f = row[col] / d;
                    for (v, pv) in row.iter_mut().zip(&pivot).skip(col) {
                        *v -= f * pv;
                    }
                }
            }
        }
        let mut c = [0.0; N];
        for (p, &j) in idx.iter().enumerate() {
            c[j] = if m[p][p].abs() < 1e-30 { 0.0 } else { m[p][n] / m[p][p] };
        }
        match (0..N).filter(|&j| free[j] && c[j] < 0.0).min_by(|&x, &z| c[x].total_cmp(&c[z])) {
            Some(j) => free[j] = false,
            None => return c,
        }
    }
}

/// A row's change per call split into events, in both metrics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Split {
    pub test: &'static str,
    /// (event, host-priced ns, model-priced ns) per call, largest host
    /// contribution first; events that do not change are left out, and the
    /// four events of the 64 KiB block path ([`BLOCK_PATH`]) are one entry,
    /// `block_path`: they change together on every row, so neither fit can
    /// tell them apart.
    pub events: Vec<(&'static str, f64, f64)>,
    /// The profile-priced change, ns per call, in both metrics.
    pub profile_ns: f64,
    /// Measured host change minus its fitted events, ns per call.
    pub unexplained_ns: f64,
    /// Measured host change (with the profile part), ns per call.
    pub host_ns: f64,
    /// Modelled change, ns per call.
    pub model_ns: f64,
}

/// Splits `row`'s change with the host costs `host` and the model's `model`.
pub fn split(row: &HostRow, host: &HostFit, model: &EventCosts) -> Split {
    let mut events: Vec<(&'static str, f64, f64)> = Vec::new();
    for (i, &e) in Event::ALL.iter().enumerate() {
        let d = row.new[i] - row.base[i];
        let name = if BLOCK_PATH.contains(&e) { "block_path" } else { e.name() };
        match events.iter_mut().find(|(n, _, _)| *n == name) {
            Some(slot) => {
                slot.1 += d * host.costs[i];
                slot.2 += d * model.ns(e);
            }
            None => events.push((name, d * host.costs[i], d * model.ns(e))),
        }
    }
    events.retain(|(_, h, m)| h.abs() >= 0.5 || m.abs() >= 0.5);
    events.sort_by(|x, y| y.1.abs().total_cmp(&x.1.abs()));
    let profile_ns = row.profile_ns.1 - row.profile_ns.0;
    let measured = row.host_ns.1 - row.host_ns.0;
    let fitted: f64 = events.iter().map(|(_, h, _)| h).sum();
    Split {
        test: row.test,
        profile_ns,
        unexplained_ns: measured - fitted,
        host_ns: measured + profile_ns,
        model_ns: events.iter().map(|(_, _, m)| m).sum::<f64>() + profile_ns,
        events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_host_costs_and_split_adds_up() {
        let truth = [50.0, 20.0, 2.0, 9.0, 30.0, 40.0, 5.0, 300.0, 3.0];
        let row = |test, base: [f64; N], new: [f64; N]| {
            let t = |n: &[f64; N]| n.iter().zip(&truth).map(|(x, c)| x * c).sum::<f64>();
            HostRow { test, base, new, host_ns: (t(&base), t(&new)), profile_ns: (100.0, 10.0) }
        };
        let rows = vec![
            row("a", [2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0]),
            row(
                "b",
                [2.0, 32.0, 32.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                [2.0, 32.0, 32.0, 15.0, 16.0, 1.2, 15.0, 0.0, 6.0],
            ),
            row("c", [2.0, 10.0, 10.0, 1.0, 0.0, 0.1, 0.5, 5.0, 6.0], [2.0, 10.0, 10.0, 1.0, 0.0, 0.1, 0.5, 5.0, 6.0]),
            row(
                "d",
                [2.0, 128.0, 128.0, 1.0, 0.0, 0.1, 0.3, 0.0, 0.0],
                [2.0, 128.0, 8.0, 61.0, 64.0, 5.0, 61.0, 0.0, 6.0],
            ),
            row(
                "e",
                [5.0, 200.0, 200.0, 1.0, 0.0, 0.0, 1.0, 0.0, 6.0],
                [5.0, 200.0, 200.0, 96.0, 96.0, 8.0, 90.0, 0.0, 6.0],
            ),
            row("f", [0.0, 1.0, 1.0, 1.0, 0.0, 0.8, 0.8, 0.0, 6.0], [0.0, 1.0, 1.0, 0.0, 0.0, 0.8, 0.8, 0.0, 6.0]),
            row(
                "g",
                [2.0, 512.0, 2.0, 949.0, 0.0, 8.0, 437.0, 0.0, 6.0],
                [2.0, 512.0, 2.0, 949.0, 0.0, 8.0, 437.0, 0.0, 6.0],
            ),
            row("h", [2.0, 10.0, 10.0, 0.0, 20.0, 2.0, 0.0, 0.0, 0.0], [2.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0]),
        ];
        let f = fit(&rows);
        assert!(f.rms_pct < 1.0, "the rows are explained: {}", f.rms_pct);
        assert!(f.costs.iter().all(|&c| c >= 0.0));
        let model = EventCosts::for_profile("apple-m2");
        let s = split(&rows[1], &f, &model);
        let events: f64 = s.events.iter().map(|(_, h, _)| h).sum();
        assert!((events + s.unexplained_ns + s.profile_ns - s.host_ns).abs() < 1e-6);
        assert!(s.unexplained_ns.abs() < 0.05 * s.host_ns.abs().max(1.0), "{s:?}");
        assert_eq!(s.profile_ns, -90.0);
        assert!(s.events.iter().all(|(e, _, _)| *e != "vmap_call"), "unchanged events are left out");
        assert_eq!(s.events.iter().filter(|(e, _, _)| *e == "block_path").count(), 1);
        assert!(s.events.iter().all(|(e, _, _)| *e != "pcp_page"), "the block path is one entry");
    }
}
