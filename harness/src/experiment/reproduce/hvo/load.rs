//! The vm-scalability anon-cow-rand-hugetlb-like load: several emulated
//! CPUs taking copy-on-write faults on 2M hugetlb pages that are all
//! surplus pages (`nr_hugepages` 0, overcommit allowed), and freeing them.
//!
//! # The load
//!
//! Each CPU stands for one of the benchmark's processes. It holds a source
//! page (the parent's page the child's write faults copy). A child is forked
//! with its own user address space whose region maps the source page
//! read-only in each of its [`PAGES_PER_PROCESS`] slots (arm64 PMD blocks, as
//! `copy_hugetlb_page_range()` leaves a private mapping). Per fault it does
//! what `hugetlb_wp` does: take a new page (`alloc_hugetlb_folio`: no free
//! page, so `alloc_surplus_hugetlb_folio` with its `prep_new_hugetlb_folio` →
//! `hugetlb_vmemmap_optimize_folio`, whose grace period 6.11 waits for even
//! with HVO off), copy the 2 MiB into it (`copy_user_large_folio`, a real
//! copy in the arena), and replace the read-only entry with a writable one
//! (`huge_ptep_clear_flush`: one TLBI; `set_huge_pte_at`). After
//! [`PAGES_PER_PROCESS`] faults the child exits: its entries are cleared, its
//! tables freed and its ASID flushed once, and its pages freed
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
use mmlab_engine::arch::arm64::pgtable::AddressSpace;
use mmlab_engine::arch::arm64::pgtable::desc::{PAGE_READONLY, PAGE_SHARED};
use mmlab_engine::arch::arm64::tlb::flush_tlb_mm;
use mmlab_engine::{Cpu, Machine, MachineConfig, PhysAddr, kernel::rcu};
use mmlab_hugetlb::hugetlbpage::{
    HugeTlbScope, arch_make_huge_pte, free_pgtables, huge_pte_alloc, huge_pte_offset, huge_ptep_clear_flush,
    huge_ptep_get_and_clear, set_huge_pte_at,
};
use mmlab_hugetlb::{HugePageSize, Hugetlb, HugetlbConfig};
use mmlab_pcp::PageAllocator;
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
    let a = m.arch_cpu_data(id).expect("a CPU of the machine");
    Modelled::new(
        m.rcu().cpu(id).snapshot().modelled_ns,
        a.tlb.tlbi_stats().snapshot().modelled_ns,
        a.barriers.snapshot().modelled_ns,
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

/// The user address of the hugetlb region every process maps.
const REGION: u64 = 1 << 32;

/// One of the benchmark's child processes: its address space, where its
/// region starts to be write-faulted, and the pages it got.
struct Process {
    asp: AddressSpace,
    /// Pages faulted in so far (the next fault is at slot `held.len()`).
    held: Vec<Folio>,
}

/// The tables' slot and address of the region's huge page `slot`.
fn slot_of<'m>(
    pa: &PageAllocator<'m>,
    cpu: &Cpu<'m>,
    asp: &AddressSpace,
    slot: usize,
) -> Result<(u64, PhysAddr), String> {
    let addr = REGION + slot as u64 * M2.bytes();
    let ptep = huge_pte_alloc(cpu, asp, pa, addr, M2.bytes()).map_err(|e| format!("huge_pte_alloc: {e}"))?;
    Ok((addr, ptep))
}

/// `fork()` of a child: a new address space whose region maps the parent's
/// page read-only in every slot (`copy_hugetlb_page_range()` write-protects
/// a private mapping's entries in parent and child).
fn fork<'m>(pa: &PageAllocator<'m>, cpu: &Cpu<'m>, asid: u16, src: Folio) -> Result<Process, String> {
    let asp = AddressSpace::alloc_user(cpu, pa, asid).map_err(|e| format!("pgd_alloc: {e}"))?;
    let pte = arch_make_huge_pte(src.pfn.phys().0, PAGE_READONLY, M2.bytes()).map_err(|e| e.to_string())?;
    for slot in 0..PAGES_PER_PROCESS {
        let (addr, ptep) = slot_of(pa, cpu, &asp, slot)?;
        set_huge_pte_at(cpu, &asp, addr, ptep, pte, M2.bytes(), HugeTlbScope::V6_12).map_err(|e| e.to_string())?;
    }
    Ok(Process { asp, held: Vec::with_capacity(PAGES_PER_PROCESS) })
}

/// A write fault on the next slot of `p` on `cpu`: `hugetlb_wp()` takes a
/// surplus page, copies the parent's page into it, then replaces the
/// read-only entry: `huge_ptep_clear_flush()` (one `flush_tlb_page()`),
/// `set_huge_pte_at()` with the new page writable.
fn fault<'m>(
    m: &Machine,
    pa: &PageAllocator<'m>,
    ht: &mut Hugetlb<'_, 'm>,
    cpu: &Cpu<'m>,
    p: &mut Process,
    src: Folio,
) -> Result<(), String> {
    let f = ht.alloc_hugetlb_folio(cpu, M2, false).map_err(|e| format!("alloc_hugetlb_folio: {e}"))?;
    copy_user_large_folio(m, f, src);
    let (addr, ptep) = slot_of(pa, cpu, &p.asp, p.held.len())?;
    huge_ptep_clear_flush(cpu, &p.asp, addr, ptep, M2.bytes(), HugeTlbScope::V6_12).map_err(|e| e.to_string())?;
    let pte = arch_make_huge_pte(f.pfn.phys().0, PAGE_SHARED, M2.bytes()).map_err(|e| e.to_string())?;
    set_huge_pte_at(cpu, &p.asp, addr, ptep, pte, M2.bytes(), HugeTlbScope::V6_12).map_err(|e| e.to_string())?;
    p.held.push(f);
    Ok(())
}

/// The process `p` on `cpu` exits: `unmap_hugepage_range()` clears every
/// entry of the region (`huge_ptep_get_and_clear()`), `free_pgtables()`
/// frees the tables, and the full-mm gather ends with one
/// `flush_tlb_mm()` (arm64's `tlb_flush()` with tables freed); then its
/// pages are freed and the deferred frees of optimized pages run
/// (`free_hpage_workfn`, here on the same CPU).
fn exit<'m>(pa: &PageAllocator<'m>, ht: &mut Hugetlb<'_, 'm>, cpu: &Cpu<'m>, p: Process) -> Result<(), String> {
    for slot in 0..PAGES_PER_PROCESS {
        let addr = REGION + slot as u64 * M2.bytes();
        if let Some(ptep) = huge_pte_offset(cpu.ram(), &p.asp, addr, M2.bytes()) {
            huge_ptep_get_and_clear(cpu, ptep, M2.bytes()).map_err(|e| e.to_string())?;
        }
    }
    free_pgtables(cpu, &p.asp, pa);
    if let Some(asid) = p.asp.asid() {
        flush_tlb_mm(cpu, asid);
    }
    for f in p.held {
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
    // Bare RAM, as the other HVO reproductions (hvo::boot).
    let mc = MachineConfig { mem_bytes: MEM_BYTES, nr_cpus: CPUS, ..Default::default() }.bare();
    let stack = crate::stack::Stack::boot_machine(mc)?;
    let m = stack.machine();
    let pa = stack.allocator()?;
    let cpus = m.all_cpus().map_err(|e| e.to_string())?;
    let free_at_start = pa.nr_free_pages() + pa.pcp_pages();
    let mut ht = Hugetlb::new(&pa, v.config());
    // vm.nr_overcommit_hugepages: as many as memory holds; nr_hugepages 0.
    ht.set_nr_overcommit_hugepages(M2, MEM_BYTES / M2.bytes()).map_err(|e| e.to_string())?;
    // The parents' pages, which the children's write faults copy.
    let mut src = Vec::with_capacity(CPUS);
    for cpu in &cpus {
        src.push(ht.alloc_hugetlb_folio(cpu, M2, false).map_err(|e| format!("alloc_hugetlb_folio: {e}"))?);
    }
    let before = OpCounters::take(m, &ht);
    let mut timeline = [0u64; CPUS];
    let mut modelled_timeline = [0u64; CPUS];
    let mut procs: Vec<Option<Process>> = (0..CPUS).map(|_| None).collect();
    let mut run = LoadRun::default();
    for i in 0..faults_per_cpu {
        for (c, cpu) in cpus.iter().enumerate() {
            let m0 = cpu_modelled(m, c);
            let t0 = Instant::now();
            let mut p = match procs[c].take() {
                Some(p) => p,
                None => fork(&pa, cpu, c as u16 + 1, src[c])?,
            };
            fault(m, &pa, &mut ht, cpu, &mut p, src[c])?;
            if p.held.len() == PAGES_PER_PROCESS || i + 1 == faults_per_cpu {
                exit(&pa, &mut ht, cpu, p)?;
            } else {
                procs[c] = Some(p);
            }
            let measured = t0.elapsed().as_nanos() as u64;
            let modelled = minus(cpu_modelled(m, c), m0);
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
    run.counters = OpCounters::take(m, &ht).delta(&before);
    let per_s = |t: &[u64; CPUS]| match t.iter().copied().max() {
        Some(longest) if longest > 0 => run.faults as f64 * 1e9 / longest as f64,
        _ => 0.0,
    };
    run.throughput = per_s(&timeline);
    run.modelled_throughput = per_s(&modelled_timeline);
    for (cpu, f) in cpus.iter().zip(src) {
        ht.free_huge_folio(cpu, f).map_err(|e| format!("free_huge_folio: {e}"))?;
        ht.flush_free_hpage_work(cpu).map_err(|e| format!("free_hpage_workfn: {e}"))?;
    }
    // Every page and table is back (the vmemmap PTE tables of PMD splits
    // stay, as in the kernel): a bug otherwise.
    pa.check_invariants().map_err(|e| format!("after the load: {e}"))?;
    let free = pa.nr_free_pages() + pa.pcp_pages() + ht.hvo().counts().vmemmap_pmd_splits as i64;
    if free != free_at_start {
        return Err(format!("after the load: {free} free pages, {free_at_start} before it"));
    }
    Ok(run)
}
