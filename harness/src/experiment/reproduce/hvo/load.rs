//! The vm-scalability anon-cow-rand-hugetlb-like load: several emulated
//! CPUs taking copy-on-write faults on 2M hugetlb pages that are all
//! surplus pages (`nr_hugepages` 0, overcommit allowed), and freeing them.
//!
//! # The load
//!
//! Each CPU stands for one of the benchmark's processes. It holds a source
//! page (the parent's page the child's write faults copy) and, per fault,
//! does what `hugetlb_wp` does on a private hugetlb mapping: take a new
//! page (`alloc_hugetlb_folio`: no free page, so `alloc_surplus_hugetlb_folio`
//! with its `prep_new_hugetlb_folio` → `hugetlb_vmemmap_optimize_folio`,
//! whose grace period 6.11 waits for even with HVO off) and copy the 2 MiB
//! into it (`copy_user_large_folio`, a real copy in the arena). Every
//! [`PAGES_PER_PROCESS`] faults the process exits: its pages are freed
//! (`free_huge_folio`; surplus, so back to the page allocator; an optimized
//! one through `free_hpage_workfn`).
//!
//! # Time
//!
//! The CPUs are interleaved on one host thread, round robin, so a run is
//! deterministic in everything but host time. Each CPU has a time line:
//! per fault, the measured host time of its kernel work (allocation, copy,
//! frees), plus the modelled time charged to that CPU meanwhile (its
//! `synchronize_rcu()` waits at the cost profile's grace period, its TLBIs,
//! its modelled barriers), plus the benchmark's own work between faults
//! ([`super::published::bench_work_per_fault_ns`], modelled). The run's time
//! is the longest time line, and its throughput faults per second of it.
//! The same throughput without the measured part
//! ([`LoadRun::modelled_throughput`]) is the same on every host; tests
//! hold the directions to it.
//! Grace periods are charged per call: CPUs waiting at once do not share
//! one here (the kernel's waiters can; with one waiter per fault and
//! per CPU, little is shared).

use crate::hugetlb::Modelled;
use mmlab_engine::{Cpu, Machine, MachineConfig, PhysAddr, rcu};
use mmlab_hugetlb::{HugePageSize, Hugetlb, HugetlbConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::{Arm64Hvo, Folio, HvoConfig, RcuPolicy};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::hugetlb::OpCounters;

/// Emulated CPUs (the benchmark's processes).
pub const CPUS: usize = 4;
/// Faults a process takes before it exits and frees its pages.
pub const PAGES_PER_PROCESS: usize = 8;
/// The machine's RAM.
pub const MEM_BYTES: u64 = 256 << 20;

const M2: HugePageSize = HugePageSize::Pmd2M;

/// One configuration of the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadVariant {
    /// The row's label.
    pub label: &'static str,
    /// The grace-period policy.
    pub policy: RcuPolicy,
    /// HVO on (`vm.hugetlb_optimize_vmemmap`). HVO is built in, on arm64 as
    /// the 2024 RFC had it (other CPUs paused), as on LKP's x86_64 machine;
    /// mainline arm64 does not build it, and then no policy waits at all.
    pub hvo: bool,
}

impl LoadVariant {
    /// hugetlb's configuration for it.
    pub fn config(self) -> HugetlbConfig {
        HugetlbConfig::with_hvo(HvoConfig {
            hugetlb_optimize_vmemmap: self.hvo,
            rcu: self.policy,
            arm64: Arm64Hvo::PauseCpus,
        })
    }
}

/// The rows of the load: the three kernels LKP measured, HVO off as in its
/// runs, then two with HVO on for comparison (no published number).
pub const VARIANTS: [LoadVariant; 5] = [
    LoadVariant { label: "v6.10 (parent)", policy: RcuPolicy::V6_10, hvo: false },
    LoadVariant { label: "v6.11 (race fix)", policy: RcuPolicy::V6_11, hvo: false },
    LoadVariant { label: "v6.12 (the fix)", policy: RcuPolicy::V6_12, hvo: false },
    LoadVariant { label: "v6.12, HVO on", policy: RcuPolicy::V6_12, hvo: true },
    LoadVariant { label: "2026, HVO on", policy: RcuPolicy::NoFakeHeads, hvo: true },
];

/// What one run of the load measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadRun {
    /// Faults taken (all CPUs).
    pub faults: u64,
    /// Faults per second of the longest time line.
    pub throughput: f64,
    /// Faults per second of the longest time line without its measured
    /// part (modelled time and the benchmark's work only): the same on
    /// every host and run.
    pub modelled_throughput: f64,
    /// Measured host time of the kernel work, summed over CPUs, ns.
    pub measured_ns: u64,
    /// Modelled time charged to the CPUs, summed.
    pub modelled: Modelled,
    /// The benchmark's work charged, summed over CPUs, ns.
    pub bench_ns: u64,
    /// The counters of the whole run.
    pub counters: OpCounters,
}

/// The modelled time charged to CPU `id` so far.
fn cpu_modelled(m: &Machine, id: usize) -> Modelled {
    let d = m.cpu_data(id).expect("a CPU of the machine");
    Modelled::new(
        d.rcu.snapshot().modelled_ns,
        d.tlb.tlbi_stats().snapshot().modelled_ns,
        d.barriers.snapshot().modelled_ns,
    )
}

fn minus(a: Modelled, b: Modelled) -> Modelled {
    Modelled::new(a.grace_period_ns - b.grace_period_ns, a.tlbi_ns - b.tlbi_ns, a.barrier_ns - b.barrier_ns)
}

fn plus(a: Modelled, b: Modelled) -> Modelled {
    Modelled::new(a.grace_period_ns + b.grace_period_ns, a.tlbi_ns + b.tlbi_ns, a.barrier_ns + b.barrier_ns)
}

/// `copy_user_large_folio()`: copy `src`'s 2 MiB into `dst`, a word at a
/// time through the arena.
fn copy_user_large_folio(m: &Machine, dst: Folio, src: Folio) {
    let n = (M2.bytes() / 8) as usize;
    let s: &[AtomicU64] = m.arena().slice(PhysAddr(src.pfn.phys().0), n);
    let d: &[AtomicU64] = m.arena().slice(PhysAddr(dst.pfn.phys().0), n);
    for (d, s) in d.iter().zip(s) {
        d.store(s.load(Relaxed), Relaxed);
    }
}

/// A fault on `cpu`: a surplus page, filled from the source page.
fn fault<'m>(m: &Machine, ht: &mut Hugetlb<'_, 'm>, cpu: &Cpu<'m>, src: Folio) -> Result<Folio, String> {
    let f = ht.alloc_hugetlb_folio(cpu, M2, false).map_err(|e| format!("alloc_hugetlb_folio: {e}"))?;
    copy_user_large_folio(m, f, src);
    Ok(f)
}

/// The process on `cpu` exits: its pages are freed, and the deferred frees
/// of optimized pages run (`free_hpage_workfn`, here on the same CPU).
fn exit<'m>(ht: &mut Hugetlb<'_, 'm>, cpu: &Cpu<'m>, held: &mut Vec<Folio>) -> Result<(), String> {
    for f in held.drain(..) {
        ht.free_huge_folio(cpu, f).map_err(|e| format!("free_huge_folio: {e}"))?;
    }
    ht.flush_free_hpage_work(cpu).map_err(|e| format!("free_hpage_workfn: {e}"))
}

/// Run `v` with `faults_per_cpu` faults on each CPU, charging `bench_ns`
/// of benchmark work per fault.
///
/// # Errors
/// A machine that does not boot, or a hugetlb error (a bug: the load stays
/// far below the machine's memory).
pub fn run(v: LoadVariant, faults_per_cpu: u64, bench_ns: u64) -> Result<LoadRun, String> {
    let mc = MachineConfig { mem_bytes: MEM_BYTES, nr_cpus: CPUS, ..Default::default() };
    let m = Machine::boot(mc).map_err(|e| format!("boot failed: {e}"))?;
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).map_err(|e| e.to_string())?;
    let cpus = m.all_cpus().map_err(|e| e.to_string())?;
    let mut ht = Hugetlb::new(&pa, v.config());
    // vm.nr_overcommit_hugepages: as many as memory holds; nr_hugepages 0.
    ht.set_nr_overcommit_hugepages(M2, MEM_BYTES / M2.bytes()).map_err(|e| e.to_string())?;
    // The parents' pages, which the children's write faults copy.
    let mut src = Vec::with_capacity(CPUS);
    for cpu in &cpus {
        src.push(ht.alloc_hugetlb_folio(cpu, M2, false).map_err(|e| format!("alloc_hugetlb_folio: {e}"))?);
    }
    let before = OpCounters::take(&m, &ht);
    let mut timeline = [0u64; CPUS];
    let mut modelled_timeline = [0u64; CPUS];
    let mut held: Vec<Vec<Folio>> = vec![Vec::new(); CPUS];
    let mut run = LoadRun::default();
    for i in 0..faults_per_cpu {
        for (c, cpu) in cpus.iter().enumerate() {
            let m0 = cpu_modelled(&m, c);
            let t0 = Instant::now();
            held[c].push(fault(&m, &mut ht, cpu, src[c])?);
            if held[c].len() == PAGES_PER_PROCESS || i + 1 == faults_per_cpu {
                exit(&mut ht, cpu, &mut held[c])?;
            }
            let measured = t0.elapsed().as_nanos() as u64;
            let modelled = minus(cpu_modelled(&m, c), m0);
            timeline[c] += measured + modelled.total_ns + bench_ns;
            modelled_timeline[c] += modelled.total_ns + bench_ns;
            run.measured_ns += measured;
            run.modelled = plus(run.modelled, modelled);
            run.bench_ns += bench_ns;
            run.faults += 1;
            // Between two faults the process runs in user space: a
            // quiescent state for RCU.
            rcu::rcu_quiescent_state(cpu);
        }
    }
    run.counters = OpCounters::take(&m, &ht).delta(&before);
    let per_s = |t: &[u64; CPUS]| match t.iter().copied().max() {
        Some(longest) if longest > 0 => run.faults as f64 * 1e9 / longest as f64,
        _ => 0.0,
    };
    run.throughput = per_s(&timeline);
    run.modelled_throughput = per_s(&modelled_timeline);
    for (cpu, f) in cpus.iter().zip(src) {
        exit(&mut ht, cpu, &mut vec![f])?;
    }
    Ok(run)
}
