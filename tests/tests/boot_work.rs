//! The boot's own work for each machine size: the page allocator's
//! (pcp/src/boot_work.rs: a base record and the rules of
//! pcp/src/boot_work/rules.rs), vmalloc's areas (vmalloc/src/boot.rs) and
//! the CMA pages of the DMA pools, compared with real boots of Debian
//! 7.2.13 on QEMU virt (`tests/data/arm64-peer/boot-spread.tsv`: the three
//! committed captures and three more boots each of 1G/1, 4G/2 and 16G/4,
//! two each of 4G/1, 16G/1, 1G/4 and 4G/4).

use mmlab_engine::MachineConfig;
use mmlab_harness::stack::Stack;
use mmlab_pcp::boot_work::rules::{
    EARLY_SLAB_PAGES, MEMORY_BLOCK_SLAB_BYTES, PERCPU_SLAB_PAGES, RING_BUFFER_PAGES_PER_CPU, ftrace_groups,
    futex_table, get_order, hash_tables,
};
use std::collections::HashMap;

/// The rows of boot-spread.tsv for `mem`/`cpus`: column name -> values.
fn spread(mem: &str, cpus: usize) -> HashMap<String, Vec<u64>> {
    let text = include_str!("../data/arm64-peer/boot-spread.tsv");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for l in lines {
        let f: Vec<&str> = l.split('\t').collect();
        if f[0] != mem || f[1] != cpus.to_string() {
            continue;
        }
        for (h, v) in head.iter().zip(&f).skip(3) {
            out.entry(h.to_string()).or_default().push(v.parse().unwrap());
        }
    }
    assert!(!out.is_empty(), "no real boots of {mem}/{cpus}");
    out
}

/// What mmlab's machine of `mem`/`cpus` shows after boot, in the table's
/// terms (the default machine: linear map on, as the real kernel).
fn ours(mem: &str, cpus: usize) -> HashMap<String, u64> {
    let stack = Stack::boot_machine(MachineConfig::with(mem, cpus).unwrap()).unwrap();
    let m = stack.machine();
    let pa = stack.allocator().unwrap();
    let vm = stack.vmalloc(&pa);
    pa.check_invariants().unwrap();
    vm.check().unwrap();
    let ev = m.vm_events();
    let managed = pa.managed_pages();
    let pgfree_rt = ev.pgfree - managed;
    let mut o: HashMap<String, u64> = [
        ("pgalloc", ev.pgalloc()),
        ("pgfree", ev.pgfree),
        ("pgfree_rt", pgfree_rt),
        ("held", ev.pgalloc() - pgfree_rt),
        ("nr_vmalloc", vm.meminfo_counts().nr_vmalloc),
        ("vmalloc_used_kb", vm.meminfo_counts().vmalloc_used_kb),
        ("nr_free_cma", pa.populated_zones().map(|z| z.nr_free_cma().max(0) as u64).sum()),
        ("cma_alloc_success", ev.cma_alloc_success),
        ("free_and_pcp_less_managed", managed - pa.nr_free_pages() as u64 - pa.pcp_pages() as u64),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (caller, n, _) in mmlab_harness::output::boot_state::areas_by_caller(&vm) {
        o.insert(if caller == "unpurged vm_area" { "unpurged".into() } else { caller }, n);
    }
    o
}

/// `v` within the real boots' range of `col`, widened by `slack`.
fn within(real: &HashMap<String, Vec<u64>>, col: &str, v: u64, slack: u64, what: &str) {
    let r = &real[col];
    let (lo, hi) = (r.iter().min().unwrap(), r.iter().max().unwrap());
    assert!(v + slack >= *lo && v <= hi + slack, "{what}: {col} {v} outside the real {lo}..={hi} (slack {slack})");
}

/// pgalloc, pgfree, the boot's frees (pgfree less the pages the allocator
/// was handed) and the pages it holds are inside the real boots' spread at
/// the three sizes the peers were captured at, give or take 2 pages; so
/// are nr_vmalloc (VmallocUsed), the CMA pages in use and
/// cma_alloc_success, and the /proc/vmallocinfo lines by caller. The
/// exceptions, with their slack, are the thread stacks, whose number
/// depends on which CPU each of the boot's ~50 short-lived tasks exits on:
/// the 4-CPU record folded onto one CPU keeps 52 where one real CPU kept
/// 54-55 and vfrees 2 more (3 stacks, 12 pages of nr_vmalloc), on 4 CPUs
/// it keeps 74 where the real ones kept 76-79 and leaves 24 unpurged
/// (26-35).
#[test]
fn the_three_peer_sizes_are_inside_the_real_spread() {
    for (mem, cpus) in [("1G", 1), ("4G", 2), ("16G", 4)] {
        let real = spread(mem, cpus);
        let o = ours(mem, cpus);
        let what = format!("{mem}/{cpus}");
        within(&real, "pgalloc", o["pgalloc"], 2, &what);
        within(&real, "pgfree", o["pgfree"], 2, &what);
        within(&real, "pgfree_rt", o["pgfree_rt"], 2, &what);
        // held = pgalloc - pgfree_rt: both inside the real range at 1G/1,
        // their difference 3 above it (the real boots that allocate more
        // also free more).
        within(&real, "held", o["held"], if cpus == 1 { 3 } else { 2 }, &what);
        let stacks_slack = if cpus == 1 { 3 } else { 0 };
        within(&real, "nr_vmalloc", o["nr_vmalloc"], 4 * stacks_slack, &what);
        within(&real, "vmalloc_used_kb", o["vmalloc_used_kb"], 16 * stacks_slack, &what);
        within(&real, "nr_free_cma", o["nr_free_cma"], 0, &what);
        within(&real, "cma_alloc_success", o["cma_alloc_success"], 0, &what);
        for caller in [
            "paging_init",
            "__ioremap_prot",
            "start_kernel",
            "bpf_prog_alloc_no_stats",
            "bpf_jit_alloc_exec",
            "dma_common_contiguous_remap",
            "gen_pool_add_owner",
            "pcpu_mem_zalloc",
            "pcpu_get_vm_areas",
            "lz4_alloc_ctx",
            "n_tty_open",
        ] {
            within(&real, caller, o.get(caller).copied().unwrap_or(0), 0, &format!("{what} {caller}"));
        }
        within(&real, "unpurged", o["unpurged"], if cpus == 2 { 0 } else { 2 }, &what);
        within(&real, "fork_idle", o.get("fork_idle").copied().unwrap_or(0), 0, &what);
        within(&real, "kernel_clone", o["kernel_clone"], stacks_slack.max(if cpus == 4 { 2 } else { 0 }), &what);
    }
}

/// The machines the rules were fitted on besides the peers' (4G/1, 16G/1,
/// 1G/4, 4G/4: two real boots each): pgalloc and the held pages within
/// 1 % of theirs, the frees within 2 %, nr_vmalloc within 3 %.
#[test]
fn the_other_fitted_sizes_are_close() {
    for (mem, cpus) in [("4G", 1), ("16G", 1), ("1G", 4), ("4G", 4)] {
        let real = spread(mem, cpus);
        let o = ours(mem, cpus);
        let mean = |c: &str| real[c].iter().sum::<u64>() as f64 / real[c].len() as f64;
        for (col, tol) in [("pgalloc", 0.01), ("pgfree_rt", 0.02), ("held", 0.01), ("nr_vmalloc", 0.03)] {
            let d = (o[col] as f64 - mean(col)).abs() / mean(col);
            assert!(d <= tol, "{mem}/{cpus} {col}: {} against a mean of {:.0}", o[col], mean(col));
        }
        within(&real, "nr_free_cma", o["nr_free_cma"], 0, &format!("{mem}/{cpus}"));
    }
}

/// Every rule's pages follow its formula on the 4G/2 machine: the hash
/// tables from `nr_kernel_pages`, the futex table from the CPUs, the early
/// and per-CPU work, the memory blocks.
#[test]
fn each_rule_allocates_what_its_formula_says() {
    let stack = Stack::boot_machine(MachineConfig::with("4G", 2).unwrap()).unwrap();
    let pa = stack.allocator().unwrap();
    let m = pa.boot_machine();
    assert_eq!((m.cpus, m.memory_blocks), (2, 32));
    let pages = |rule: &str| pa.boot_rules().iter().find(|r| r.rule == rule).map(|r| r.pages);
    for (t, _, bytes) in hash_tables(&m) {
        assert_eq!(pages(&format!("hash {}", t.name)), Some(1 << get_order(bytes)), "{}", t.name);
    }
    assert_eq!(pages("futex"), Some(1 << get_order(futex_table(&m).1)));
    let ftrace: u64 = ftrace_groups().iter().map(|o| 1u64 << o).sum();
    assert_eq!(pages("early"), Some(ftrace + RING_BUFFER_PAGES_PER_CPU + EARLY_SLAB_PAGES));
    assert_eq!(pages("percpu"), Some(RING_BUFFER_PAGES_PER_CPU + PERCPU_SLAB_PAGES));
    assert_eq!(pages("memory_blocks"), Some((32 * MEMORY_BLOCK_SLAB_BYTES).div_ceil(4096)));
    // The vmalloc side: one IRQ stack per CPU, the atomic pools' CMA pages,
    // 3 populated pages per percpu unit.
    let vm = stack.vmalloc(&pa);
    let r = |rule: &str| vm.boot_rules().into_iter().find(|r| r.rule == rule).map(|r| (r.areas, r.pages));
    assert_eq!(r("irq_stacks"), Some((2, 8)));
    assert_eq!(r("idle_threads"), Some((1, 4)));
    assert_eq!(r("percpu_kthreads"), Some((5, 20)));
    // Two pools (Normal and DMA) of order 7 from CMA, each remapped and
    // with its gen_pool chunk.
    assert_eq!(r("dma_pools"), Some((4, 2 * 128 + 2)));
    assert_eq!(pa.cma_allocated_pages(), 256);
    assert_eq!(r("pcpu_chunk"), Some((4, 2 + 2 + 72 + 2 * 3)));
    assert_eq!(vm.boot_work().pages_outside_areas(), 256 + 6);
}

/// The same machine twice leaves the same vmallocinfo, vmstat and free
/// lists; `boot.state=bare` leaves none of the boot's work.
#[test]
fn deterministic_and_off_with_bare() {
    let run = |mc: MachineConfig| {
        let stack = Stack::boot_machine(mc).unwrap();
        let pa = stack.allocator().unwrap();
        let vm = stack.vmalloc(&pa);
        (vm.vmallocinfo(), stack.machine().vm_events(), pa.zone().nr_free_per_order(), pa.boot_work(), vm.boot_work())
    };
    let a = run(MachineConfig::with("4G", 2).unwrap());
    assert_eq!(a, run(MachineConfig::with("4G", 2).unwrap()));
    let (info, ev, _, pw, vw) = run(MachineConfig::with("4G", 2).unwrap().bare());
    assert_eq!((info.as_str(), ev.pgalloc(), ev.cma_alloc_success), ("", 0, 0));
    assert_eq!((pw, vw), Default::default());
}
