//! The boot's work for one machine: the base record with every rule marker
//! expanded (module docs of the parent), as a list of steps the replay runs.

use super::rules::{BootMachine, RuleOp, expand};
use super::spread::{Phase, Spread, end_of_boot_cpu};
use super::{Block, BootRuleWork, BootWork};
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
    /// Where the layers above do their boot work (`Vmalloc::boot`): right
    /// after `futex_init()` (core_initcall), so that the DMA pools'
    /// `cma_alloc()` and its `drain_all_pages()` come where
    /// `dma_atomic_pool_init()` (postcore_initcall) makes them.
    Above,
    /// `free_reserved_area()` of what the end of boot gives back: the
    /// initrd (`free_initrd_mem()`, at the end of the initramfs unpack) or
    /// the init sections (`free_initmem()`, after
    /// `ftrace_free_init_mem()`), on `cpu`.
    GiveBack { initrd: bool, cpu: usize },
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
    let mut spread = Spread::new(m.cpus as usize);
    let n = |s: Option<&str>| s.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    for line in record.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("g") => {
                let _ = f.next();
                gfps.push(f.next().and_then(|s| s.parse::<Gfp>().ok()).unwrap_or_default());
            }
            Some("a") => {
                let cpu = spread.next(n(f.next()) as usize);
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
                let cpu = spread.next(n(f.next()) as usize);
                let (b, off, order) = (n(f.next()) as usize, n(f.next()), n(f.next()) as u32);
                if let Some(&k) = base_k.get(b) {
                    ops.push(Op::Free { cpu, k, off, order });
                }
            }
            Some("r") => {
                let Some(name) = f.next() else { continue };
                if name == "initrd_free" {
                    ops.push(Op::GiveBack { initrd: true, cpu: end_of_boot_cpu(true, m.cpus as usize) });
                    continue;
                }
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
                // smp_init() is where the percpu rule stands, free_initmem()
                // follows ftrace_free_init_mem(): the phases change there.
                match name {
                    "futex" => ops.push(Op::Above),
                    "ftrace_free" => {
                        ops.push(Op::GiveBack { initrd: false, cpu: end_of_boot_cpu(false, m.cpus as usize) })
                    }
                    _ => {}
                }
                match name {
                    "percpu" if spread.phase() == Phase::BootCpu => spread.enter(Phase::Initcalls),
                    "ftrace_free" => spread.enter(Phase::Init),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Program { ops, rules }
}

/// A replay under way: the program, how far it has run, and what it did.
pub(crate) struct BootReplay {
    pub(super) ops: Vec<Op>,
    pub(super) next: usize,
    pub(super) rules: Vec<BootRuleWork>,
    pub(super) blocks: Vec<Option<Block>>,
    pub(super) work: BootWork,
    /// The bases of the end-of-boot ranges given back so far.
    pub(super) given_back: Vec<u64>,
}

impl BootReplay {
    /// The bases of the ranges of [`BootStateReport::given_back`] the replay
    /// freed (the rest is the caller's to free).
    ///
    /// [`BootStateReport::given_back`]: mmlab_engine::mm::boot_state::BootStateReport::given_back
    pub(crate) fn given_back(&self) -> &[u64] {
        &self.given_back
    }

    /// What the replay did, and each rule's part, once it has run to the end.
    pub(crate) fn finish(mut self) -> (BootWork, Vec<BootRuleWork>) {
        self.work.held_pages = self.work.pages_allocated - self.work.pages_freed;
        (self.work, self.rules)
    }
}
