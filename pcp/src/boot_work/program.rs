//! The boot's work for one machine: the base record with every rule marker
//! expanded (module docs of the parent), as a list of steps the replay runs.

use super::BootRuleWork;
use super::rules::{BootMachine, RuleOp, expand};
use mmlab_engine::Gfp;

/// One step of the program. Allocations are numbered in program order;
/// frees and splits name them by that number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// An allocation; `rule` indexes the rule that made it (None: the base
    /// record's).
    Alloc { cpu: usize, order: u32, gfp: Gfp, rule: Option<usize> },
    /// `split_page()` of allocation `k`.
    Split { k: usize },
    /// Free of `2^order` pages at offset `off` of allocation `k`.
    Free { cpu: usize, k: usize, off: u64, order: u32 },
}

/// The program and the rules that went into it.
pub(crate) struct Program {
    pub(crate) ops: Vec<Op>,
    pub(crate) rules: Vec<BootRuleWork>,
}

/// The gfp the replay asks with for a recorded allocation: the trace's
/// flags with the mobility of the migratetype it printed (early boot masks
/// some gfp bits out of the print), and `__GFP_NOWARN`.
fn recorded_gfp(gfp: Gfp, mt: u64) -> Gfp {
    let base = Gfp::from_bits_retain(gfp.bits() & !(Gfp::__GFP_MOVABLE.bits() | Gfp::__GFP_RECLAIMABLE.bits()))
        | Gfp::__GFP_NOWARN;
    base | match mt {
        1 => Gfp::__GFP_MOVABLE,
        2 => Gfp::__GFP_RECLAIMABLE,
        _ => Gfp::empty(),
    }
}

/// Build the program of `m` from `record` (the compact format of
/// `scripts/arm64-peer/boot-kmem-compact.py pages`). Lines it cannot read
/// are skipped; a rule it does not know is skipped with its marker.
pub(crate) fn build(record: &str, m: &BootMachine) -> Program {
    let mut gfps: Vec<Gfp> = Vec::new();
    let mut ops = Vec::new();
    let mut rules = Vec::new();
    // Base allocation number -> program allocation number.
    let mut base_k: Vec<usize> = Vec::new();
    let mut n_alloc = 0usize;
    let mut ftrace_last: Option<usize> = None;
    let n = |s: Option<&str>| s.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    for line in record.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("g") => {
                let _ = f.next();
                gfps.push(f.next().and_then(|s| s.parse::<Gfp>().ok()).unwrap_or_default());
            }
            Some("a") => {
                let cpu = n(f.next()) as usize;
                let order = n(f.next()) as u32;
                let mt = n(f.next());
                let gfp = gfps.get(n(f.next()) as usize).copied().unwrap_or_default();
                ops.push(Op::Alloc { cpu, order, gfp: recorded_gfp(gfp, mt), rule: None });
                base_k.push(n_alloc);
                n_alloc += 1;
            }
            Some("s") => {
                if let Some(&k) = base_k.get(n(f.next()) as usize) {
                    ops.push(Op::Split { k });
                }
            }
            Some("f") => {
                let cpu = n(f.next()) as usize;
                let (b, off, order) = (n(f.next()) as usize, n(f.next()), n(f.next()) as u32);
                if let Some(&k) = base_k.get(b) {
                    ops.push(Op::Free { cpu, k, off, order });
                }
            }
            Some("r") => {
                let Some(name) = f.next() else { continue };
                let Some((steps, report)) = expand(name, f.next(), m) else { continue };
                let rule = rules.len();
                rules.push(report);
                let mut last = None;
                for s in steps {
                    match s {
                        RuleOp::Alloc { cpu, order, gfp } => {
                            ops.push(Op::Alloc { cpu, order, gfp: gfp | Gfp::__GFP_NOWARN, rule: Some(rule) });
                            last = Some((n_alloc, order));
                            if name == "early" && gfp.contains(Gfp::__GFP_ZERO) && order > 0 {
                                ftrace_last = Some(n_alloc);
                            }
                            n_alloc += 1;
                        }
                        RuleOp::TrimTo { keep } => {
                            if let Some((k, order)) = last {
                                ops.push(Op::Split { k });
                                for off in keep..1 << order {
                                    ops.push(Op::Free { cpu: 0, k, off, order: 0 });
                                }
                            }
                        }
                        RuleOp::FreeFtraceGroup => {
                            if let Some(k) = ftrace_last {
                                let order = super::rules::ftrace_groups().last().copied().unwrap_or(0);
                                ops.push(Op::Free { cpu: 0, k, off: 0, order });
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Program { ops, rules }
}
