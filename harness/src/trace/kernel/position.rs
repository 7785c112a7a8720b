//! Exact-position agreement: does mmlab refill (drain) at the very
//! operation where the kernel did, and why not where it does not.
//!
//! The operations are the replay's, in trace order; a kernel refill or
//! drain is at operation i. mmlab agrees exactly when its operation i is
//! of the same class. Every other kernel decision is a miss, put in one
//! category by what mmlab did around it on that CPU:
//!
//! | category | meaning |
//! |---|---|
//! | `earlier` | mmlab made the decision at an earlier operation of the CPU (within [`LAG_WINDOW`]) and not again by i: its list ran out (reached high) sooner |
//! | `later` | mmlab makes it at a later operation of the CPU within the window: its list held more (less) than the kernel's |
//! | `absent` | none within the window either way: the lists' states parted further (or mmlab's pcp high differs in that phase) |
//!
//! A miss is also counted by the phase of its line when the capture is from
//! boot ([`super::phases`]).

use super::phases::BootPhases;
use super::replay::OpRecord;
use serde::Serialize;
use std::collections::BTreeMap;

/// The agreement for one class.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Positions {
    /// Kernel decisions of the class.
    pub kernel: u64,
    /// mmlab decisions of the class.
    pub mmlab: u64,
    /// At exactly the same operation.
    pub exact: u64,
    /// Of those, with the same size (blocks refilled, pages drained).
    pub exact_size: u64,
    /// Misses by category (module docs).
    pub misses: BTreeMap<&'static str, u64>,
    /// Misses by phase (from-boot captures).
    pub misses_by_phase: BTreeMap<&'static str, u64>,
    /// Kernel decisions and exact agreements by phase (from-boot captures).
    pub by_phase: BTreeMap<&'static str, (u64, u64)>,
    /// The trace lines of the first misses.
    pub first_misses: Vec<(usize, &'static str)>,
}

/// The window of the lag matching (`trace kernel`'s "matched within") and
/// of the miss categories, in operations of one CPU: two pcp batches.
pub const LAG_WINDOW: usize = 128;

/// How many missed lines are kept.
const FIRST_MISSES: usize = 8;

/// Exact-position agreement for `class` ("refill" or "drain").
pub fn positions(ops: &[OpRecord], class: &str, phases: Option<&BootPhases>) -> Positions {
    let mut p = Positions::default();
    let is_k = |o: &OpRecord| o.kernel.class(o.alloc) == class;
    let is_m = |o: &OpRecord| o.mmlab.class(o.alloc) == class;
    // Each CPU's operations, as indices into `ops`.
    let mut per_cpu: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, o) in ops.iter().enumerate() {
        per_cpu.entry(o.cpu).or_default().push(i);
    }
    p.mmlab = ops.iter().filter(|o| is_m(o)).count() as u64;
    for idx in per_cpu.values() {
        for (k, &i) in idx.iter().enumerate() {
            let o = &ops[i];
            if !is_k(o) {
                continue;
            }
            p.kernel += 1;
            let phase = phases.and_then(|b| b.phase_of(o.line));
            if let Some(ph) = phase {
                let e = p.by_phase.entry(ph.name()).or_default();
                e.0 += 1;
                e.1 += u64::from(is_m(o));
            }
            if is_m(o) {
                p.exact += 1;
                p.exact_size += u64::from(o.kernel == o.mmlab);
                continue;
            }
            // The previous kernel decision of the class on this CPU bounds `earlier`.
            let prev_k = idx[..k].iter().rposition(|&j| is_k(&ops[j]));
            let lo = prev_k.map_or(0, |j| j + 1).max(k.saturating_sub(LAG_WINDOW));
            let earlier = idx[lo..k].iter().any(|&j| is_m(&ops[j]));
            let hi = (k + LAG_WINDOW).min(idx.len() - 1);
            let later = idx[k + 1..=hi].iter().any(|&j| is_m(&ops[j]));
            let cat = if earlier {
                "earlier"
            } else if later {
                "later"
            } else {
                "absent"
            };
            *p.misses.entry(cat).or_default() += 1;
            if let Some(ph) = phase {
                *p.misses_by_phase.entry(ph.name()).or_default() += 1;
            }
            if p.first_misses.len() < FIRST_MISSES {
                p.first_misses.push((o.line, cat));
            }
        }
    }
    p.first_misses.sort_unstable();
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::kernel::replay::Decisions;

    fn op(line: usize, k: bool, m: bool) -> OpRecord {
        let d = |r: bool| Decisions { refill_blocks: u32::from(r), ..Default::default() };
        OpRecord { line, cpu: 0, alloc: true, order: 0, pfn: 0, kernel: d(k), mmlab: d(m) }
    }

    #[test]
    fn exact_earlier_later_absent() {
        let mut ops = vec![op(1, true, true), op(2, false, true), op(3, true, false), op(4, true, false)];
        ops.push(op(5, false, true));
        ops.extend((6..300).map(|l| op(l, false, false)));
        ops.push(op(300, true, false));
        let p = positions(&ops, "refill", None);
        assert_eq!((p.kernel, p.mmlab, p.exact), (4, 3, 1));
        // line 3: mmlab refilled at line 2; line 4: mmlab refills at line 5; line 300: none near.
        assert_eq!(p.misses["earlier"], 1);
        assert_eq!(p.misses["later"], 1);
        assert_eq!(p.misses["absent"], 1);
    }
}
