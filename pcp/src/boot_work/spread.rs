//! Which CPU runs each step of the boot's work (module docs of the parent,
//! "On which CPU, and when").
//!
//! The base record comes from a 1-CPU boot: every step in it ran on CPU 0.
//! On a machine with more CPUs the kernel runs the same work elsewhere once
//! `smp_init()` has brought the other CPUs up, so the program gives each of
//! the record's steps a CPU by the phase of boot it belongs to, told by the
//! rule markers around it:
//!
//! | phase | record lines | where the kernel runs it | mmlab |
//! |---|---|---|---|
//! | before `smp_init()` | up to `r percpu` | the boot CPU only (`start_kernel()`, `kernel_init()` up to `do_pre_smp_initcalls()`) | CPU 0 (faithful) |
//! | the initcalls | after `r percpu` up to `r ftrace_free` | `kernel_init()`'s `do_initcalls()` mostly on CPU 0; kthreads, async work (the initramfs unpack) and workers on the others | runs of [`RUN_STEPS`] steps, [`INITCALL_BOOT_CPU_PERCENT`] % of them on CPU 0 and the rest evenly on the others (fitted) |
//! | `/init` | after `r ftrace_free` | each process where fork balancing put it: all CPUs | runs of [`RUN_STEPS`] steps, evenly over all CPUs (fitted) |
//!
//! The rules' own steps keep the CPUs their rule gives them (the `percpu`
//! rule: each CPU's slabs on that CPU, its ring buffers on CPU 0, which
//! runs the CPU-up prepare callbacks; the hash tables on CPU 0, in
//! `kernel_init()`).
//!
//! The runs go to CPUs by smooth weighted round robin (each run to the CPU
//! whose credit, grown by its weight each run, is largest), so the program
//! is the same every time for a given machine. A free runs where its run
//! runs, wherever the pages were allocated, as a task freeing another's
//! memory does.
//!
//! The numbers come from the traced 2 GiB / 3 CPU boot
//! (`tests/data/trace/arm64-7.2.13-2G-3cpu-boot.trace`, tracing's own ring
//! buffers and deferred struct-page init left out): in the initcalls CPU 0
//! allocated 69 % of the pages (4,830 of 6,970), CPUs 1 and 2 16 % and 15 %;
//! under /init 29 %, 46 % and 25 % (704, 1,114, 621 pages). Consecutive
//! events on one CPU came in runs of median 4 (initcalls) and 15 (/init),
//! mean 18 and 38; [`RUN_STEPS`] is a run of the record's steps, which
//! are fewer than the trace's events (no refill or drain events).

/// Fitted: steps of the record one CPU runs before the next run is placed.
pub const RUN_STEPS: u64 = 16;
/// Fitted: the share of the initcalls' runs on the boot CPU (kernel_init).
pub const INITCALL_BOOT_CPU_PERCENT: u64 = 69;

/// The CPU that gives the initrd (`initrd`) or the init sections back at
/// the end of boot, of `cpus`. `free_initrd_mem()` runs at the end of the
/// initramfs unpack, which `populate_rootfs()` hands to an async worker;
/// `free_initmem()` runs in `kernel_init()`, which the scheduler has moved
/// by then. Simplified: the initrd on CPU 0 and the init sections on the
/// last CPU, the commonest places in the real boots (the CPU whose DMA
/// pageset holds the initrd's 255 pages and the init sections' 976 after
/// boot: initrd on CPU 0 in two of the three 4G/2 captures, init on the last
/// CPU in two of three at 4G/2 and two of three at 16G/4; the 2G/3 trace
/// freed them on CPUs 2 and 1).
pub fn end_of_boot_cpu(initrd: bool, cpus: usize) -> usize {
    if initrd { 0 } else { cpus.max(1) - 1 }
}

/// The phase of boot a step of the record belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Before `smp_init()`: the boot CPU only.
    BootCpu,
    /// `do_initcalls()` and the kthreads around it.
    Initcalls,
    /// The init process and its children.
    Init,
}

/// Places the record's steps on CPUs (module docs).
pub(crate) struct Spread {
    cpus: usize,
    phase: Phase,
    /// Steps placed in this phase.
    steps: u64,
    /// Each CPU's credit (smooth weighted round robin).
    credit: Vec<i64>,
    /// The CPU of the current run.
    cpu: usize,
}

impl Spread {
    pub(crate) fn new(cpus: usize) -> Spread {
        let cpus = cpus.max(1);
        Spread { cpus, phase: Phase::BootCpu, steps: 0, credit: vec![0; cpus], cpu: 0 }
    }

    /// The phase the next steps are in.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// Enter `phase` (at its rule marker): the runs start afresh.
    pub(crate) fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.steps = 0;
        self.credit.iter_mut().for_each(|c| *c = 0);
        self.cpu = 0;
    }

    /// Each CPU's weight in the current phase.
    fn weight(&self, cpu: usize) -> i64 {
        let n = self.cpus as i64;
        match self.phase {
            Phase::BootCpu => i64::from(cpu == 0),
            Phase::Initcalls if n == 1 => 1,
            // CPU 0's share p and the others' (100 - p) / (n - 1), times n - 1.
            Phase::Initcalls if cpu == 0 => INITCALL_BOOT_CPU_PERCENT as i64 * (n - 1),
            Phase::Initcalls => 100 - INITCALL_BOOT_CPU_PERCENT as i64,
            Phase::Init => 1,
        }
    }

    /// The CPU of the next step of the record (recorded on `recorded`: a
    /// step the record put on another CPU than 0 keeps it).
    pub(crate) fn next(&mut self, recorded: usize) -> usize {
        if recorded != 0 {
            return recorded % self.cpus;
        }
        if self.phase == Phase::BootCpu || self.cpus == 1 {
            return 0;
        }
        if self.steps.is_multiple_of(RUN_STEPS) {
            let total: i64 = (0..self.cpus).map(|c| self.weight(c)).sum();
            for c in 0..self.cpus {
                self.credit[c] += self.weight(c);
            }
            let best = (0..self.cpus).max_by_key(|&c| (self.credit[c], std::cmp::Reverse(c))).unwrap_or(0);
            self.credit[best] -= total;
            self.cpu = best;
        }
        self.steps += 1;
        self.cpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(cpus: usize, phase: Phase, n: u64) -> Vec<usize> {
        let mut s = Spread::new(cpus);
        s.enter(phase);
        let mut per = vec![0; cpus];
        for _ in 0..n * RUN_STEPS {
            per[s.next(0)] += 1;
        }
        per.iter().map(|&k| k / RUN_STEPS as usize).collect()
    }

    #[test]
    fn the_boot_cpu_runs_everything_before_smp_init() {
        assert_eq!(runs(4, Phase::BootCpu, 10), [10, 0, 0, 0]);
        assert_eq!(runs(1, Phase::Init, 10), [10]);
    }

    /// The initcalls on 3 CPUs weigh CPU 0 69 × 2 = 138 against 31 for
    /// each other CPU (200 in all): 200 runs go 138, 31, 31; on 2 CPUs 69
    /// against 31. Under /init each CPU weighs 1: 100 runs on 4 CPUs go 25
    /// each.
    #[test]
    fn runs_follow_the_fitted_shares() {
        assert_eq!(runs(3, Phase::Initcalls, 200), [138, 31, 31]);
        assert_eq!(runs(2, Phase::Initcalls, 100), [69, 31]);
        assert_eq!(runs(4, Phase::Init, 100), [25, 25, 25, 25]);
    }
}
