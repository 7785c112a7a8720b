//! Error paths under `fail_page_alloc`: every vmalloc-family call that fails
//! because a page or a page-table page could not be allocated must give
//! back everything it took (pages, virtual space, table pages it does not
//! keep), as the kernel's error paths do.
//!
//! The bookkeeping checked after **every** call, failed or not: free pages
//! (buddy + pcp lists) = free pages at the start − pages of live vmalloc
//! areas − pages the test holds for vmap/vm_map_ram − page-table pages
//! added to the kernel's tables since the start (vmalloc never frees its
//! tables, as the kernel's does not). At the end everything is freed,
//! the lazy areas purged and the pcp lists drained: then only the table
//! pages are missing, and `check_invariants` and `Vmalloc::check` are clean.
//!
//! fail_page_alloc is armed as `min-order=0`, `ignore-gfp-wait=N` (so
//! GFP_KERNEL allocations, which may reclaim, can fail too), with several
//! probabilities and intervals and a fixed seed, so a run is reproducible.

use mmlab_engine::arch::arm64::pgtable::{self, desc::PAGE_KERNEL};
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Cpu, Gfp, Machine, PAGE_SIZE, Pfn};
use mmlab_pcp::{AllocatorConfig, FaultAttr, PageAllocator};
use mmlab_vmalloc::percpu::{PercpuAllocator, PercpuError};
use mmlab_vmalloc::{VM_ALLOC, Vmalloc, VmallocConfig, VmallocError};

/// Table pages in the kernel's tables (every level).
fn table_pages(m: &Machine) -> i64 {
    pgtable::stats(m, &m.kernel_as()).tables.iter().sum::<u64>() as i64
}

/// Pages of live vmalloc areas (vmalloc'd page arrays and percpu chunks
/// included: they are vmalloc areas too).
fn vmalloc_pages(vm: &Vmalloc<'_, '_>) -> i64 {
    vm.areas().iter().filter(|a| a.flags.contains(VM_ALLOC)).map(|a| a.pages.len() as i64).sum()
}

/// Free pages, counting the pcp lists.
fn free_pages(pa: &PageAllocator<'_>) -> i64 {
    pa.nr_free_pages() + pa.pcp_pages()
}

/// What the test holds.
#[derive(Default)]
struct Live {
    vmalloc: Vec<u64>,
    vmap: Vec<(u64, Vec<Pfn>)>,
    map_ram: Vec<(u64, Vec<Pfn>)>,
    percpu: Vec<u64>,
}

impl Live {
    fn held_pages(&self) -> i64 {
        self.vmap.iter().chain(&self.map_ram).map(|(_, p)| p.len() as i64).sum()
    }
}

/// Counts of one run, for the assertions that the run exercised what it
/// claims to.
#[derive(Debug, Default)]
struct Outcome {
    ok: u64,
    failed: u64,
    injected: u64,
}

struct Run<'a, 'm> {
    m: &'m Machine,
    pa: &'a PageAllocator<'m>,
    vm: &'a Vmalloc<'a, 'm>,
    pcpu: PercpuAllocator,
    free0: i64,
    tables0: i64,
    live: Live,
    out: Outcome,
}

impl<'a, 'm> Run<'a, 'm> {
    fn new(m: &'m Machine, pa: &'a PageAllocator<'m>, vm: &'a Vmalloc<'a, 'm>) -> Self {
        Run {
            m,
            pa,
            vm,
            pcpu: PercpuAllocator::new(),
            free0: free_pages(pa),
            tables0: table_pages(m),
            live: Live::default(),
            out: Outcome::default(),
        }
    }

    /// The bookkeeping identity (module documentation).
    #[track_caller]
    fn check(&self, what: &str) {
        let tables = table_pages(self.m) - self.tables0;
        // Percpu chunks hold their units' pages outside any area's pages.
        let percpu = self.pcpu.nr_pages() as i64;
        let want = self.free0 - vmalloc_pages(self.vm) - percpu - self.live.held_pages() - tables;
        assert_eq!(
            free_pages(self.pa),
            want,
            "after {what}: pages lost (+) or found (-): {}",
            want - free_pages(self.pa)
        );
    }

    /// A failure must be for lack of memory, nothing else.
    #[track_caller]
    fn failed(&mut self, what: &str, e: VmallocError) {
        assert!(matches!(e, VmallocError::NoMemory { .. }), "{what}: {e}");
        self.out.failed += 1;
        self.check(what);
    }

    /// `n` order-0 pages for vmap (None if the allocator, faults armed,
    /// runs out first: what was taken is given back).
    fn pages(&self, cpu: &Cpu<'m>, n: usize) -> Option<Vec<Pfn>> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            match self.pa.alloc_pages(cpu, Gfp::GFP_KERNEL, 0) {
                Some(p) => v.push(p),
                None => {
                    for p in v {
                        self.pa.free_pages(cpu, p, 0).unwrap();
                    }
                    return None;
                }
            }
        }
        Some(v)
    }

    fn step(&mut self, cpu: &Cpu<'m>, rng: &mut Xoshiro256StarStar) {
        let vm = self.vm;
        // Sizes: mostly small, some past 512 pages (a vmalloc'd page array),
        // some of several MiB (PMD blocks when huge).
        let pages = match rng.below(10) {
            0..=5 => 1 + rng.below(40),
            6 | 7 => 1 + rng.below(300),
            8 => 513 + rng.below(300),
            _ => 512 * (1 + rng.below(3)) + rng.below(2) * 16,
        };
        let size = pages * PAGE_SIZE - rng.below(PAGE_SIZE);
        let op = rng.below(8);
        let (what, r): (&str, Result<(), VmallocError>) = match op {
            0 => ("vmalloc", vm.vmalloc(cpu, size).map(|a| self.live.vmalloc.push(a))),
            1 => ("vzalloc", vm.vzalloc(cpu, size).map(|a| self.live.vmalloc.push(a))),
            2 | 3 => ("vmalloc_huge", vm.vmalloc_huge(cpu, size, Gfp::GFP_KERNEL).map(|a| self.live.vmalloc.push(a))),
            4 => {
                let Some(p) = self.pages(cpu, 1 + rng.below(100) as usize) else { return };
                match vm.vmap(cpu, &p, PAGE_KERNEL) {
                    Ok(a) => {
                        self.live.vmap.push((a, p));
                        ("vmap", Ok(()))
                    }
                    Err(e) => {
                        // The pages stay the caller's.
                        for q in p {
                            self.pa.free_pages(cpu, q, 0).unwrap();
                        }
                        ("vmap", Err(e))
                    }
                }
            }
            5 => {
                // Up to 64 pages come from vmap blocks, more get an area.
                let n = if rng.chance(1, 3) { 65 + rng.below(40) } else { 1 + rng.below(64) };
                let Some(p) = self.pages(cpu, n as usize) else { return };
                match vm.vm_map_ram(cpu, &p) {
                    Ok(a) => {
                        self.live.map_ram.push((a, p));
                        ("vm_map_ram", Ok(()))
                    }
                    Err(e) => {
                        for q in p {
                            self.pa.free_pages(cpu, q, 0).unwrap();
                        }
                        ("vm_map_ram", Err(e))
                    }
                }
            }
            6 => {
                let sz = 4 << rng.below(12);
                match self.pcpu.alloc_percpu(vm, cpu, sz, 8) {
                    Ok(p) => {
                        self.live.percpu.push(p);
                        ("alloc_percpu", Ok(()))
                    }
                    Err(PercpuError::NoMemory(e)) => ("alloc_percpu", Err(e)),
                    Err(e) => panic!("alloc_percpu: {e}"),
                }
            }
            _ => {
                self.free_one(cpu, rng);
                return;
            }
        };
        match r {
            Ok(()) => {
                self.out.ok += 1;
                self.check(what);
            }
            Err(e) => self.failed(what, e),
        }
    }

    /// Free one live object (frees are never failed by fault injection).
    fn free_one(&mut self, cpu: &Cpu<'m>, rng: &mut Xoshiro256StarStar) {
        let vm = self.vm;
        match rng.below(4) {
            0 if !self.live.vmalloc.is_empty() => {
                let a = self.live.vmalloc.swap_remove(rng.below(self.live.vmalloc.len() as u64) as usize);
                vm.vfree(cpu, a).unwrap();
            }
            1 if !self.live.vmap.is_empty() => {
                let (a, p) = self.live.vmap.swap_remove(rng.below(self.live.vmap.len() as u64) as usize);
                vm.vunmap(cpu, a).unwrap();
                for q in p {
                    self.pa.free_pages(cpu, q, 0).unwrap();
                }
            }
            2 if !self.live.map_ram.is_empty() => {
                let (a, p) = self.live.map_ram.swap_remove(rng.below(self.live.map_ram.len() as u64) as usize);
                vm.vm_unmap_ram(cpu, a, p.len()).unwrap();
                for q in p {
                    self.pa.free_pages(cpu, q, 0).unwrap();
                }
            }
            3 if !self.live.percpu.is_empty() => {
                let p = self.live.percpu.swap_remove(rng.below(self.live.percpu.len() as u64) as usize);
                self.pcpu.free_percpu(vm, cpu, p).unwrap();
            }
            _ => return,
        }
        self.check("a free");
    }

    /// Disarm, free everything, purge, drain; only table pages may be missing.
    fn finish(mut self, cpu: &Cpu<'m>) -> Outcome {
        let vm = self.vm;
        self.out.injected = self.pa.fail_page_alloc_injected();
        self.pa.set_fail_page_alloc(None).unwrap();
        for a in std::mem::take(&mut self.live.vmalloc) {
            vm.vfree(cpu, a).unwrap();
        }
        for (a, p) in std::mem::take(&mut self.live.vmap) {
            vm.vunmap(cpu, a).unwrap();
            for q in p {
                self.pa.free_pages(cpu, q, 0).unwrap();
            }
        }
        for (a, p) in std::mem::take(&mut self.live.map_ram) {
            vm.vm_unmap_ram(cpu, a, p.len()).unwrap();
            for q in p {
                self.pa.free_pages(cpu, q, 0).unwrap();
            }
        }
        for p in std::mem::take(&mut self.live.percpu) {
            self.pcpu.free_percpu(vm, cpu, p).unwrap();
        }
        self.pcpu.shrink(vm, cpu).unwrap();
        // Only the kernel image's early areas stay (vm_area_add_early()).
        assert!(
            vm.areas().iter().all(|a| a.kind == mmlab_vmalloc::AreaKind::Early),
            "areas left: {}",
            vm.vmallocinfo()
        );
        vm.purge_vmap_area_lazy(cpu).unwrap();
        self.pa.drain_all_pages(cpu);
        let tables = table_pages(self.m) - self.tables0;
        assert!(tables >= 0);
        assert_eq!(self.pa.pcp_pages(), 0);
        assert_eq!(self.pa.nr_free_pages(), self.free0 - tables, "{tables} table pages stayed");
        self.pa.check_invariants().unwrap();
        vm.check().unwrap();
        self.out
    }
}

/// fail_page_alloc for these tests: every order, GFP_KERNEL too, no limit.
fn attr(probability: u32, interval: u64, seed: u64) -> FaultAttr {
    FaultAttr {
        probability,
        interval,
        times: -1,
        space: 0,
        min_order: 0,
        ignore_gfp_reclaim: false,
        ignore_gfp_highmem: false,
        seed,
    }
}

fn scenario(cfg: VmallocConfig, fault: FaultAttr, steps: u64, seed: u64) -> Outcome {
    let m = mmlab_tests::machine("256M", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, cfg);
    let cpu = m.cpu(0).unwrap();
    let mut run = Run::new(&m, &pa, &vm);
    pa.set_fail_page_alloc(Some(fault)).unwrap();
    let mut rng = Xoshiro256StarStar::seed_from_u64(seed);
    for _ in 0..steps {
        run.step(&cpu, &mut rng);
    }
    run.finish(&cpu)
}

fn configs() -> [(&'static str, VmallocConfig); 3] {
    [
        ("mainline", VmallocConfig::default()),
        ("huge_by_default+contpte", VmallocConfig { huge_by_default: true, contpte: true, ..VmallocConfig::default() }),
        (
            "huge_by_default, contpte only, RFC tail",
            VmallocConfig {
                huge_by_default: true,
                contpte: true,
                pmd: false,
                align_size_to_huge: false,
                ..Default::default()
            },
        ),
    ]
}

#[test]
fn failed_calls_release_everything_at_several_probabilities() {
    // At least 100 steps under emulation too: with fewer, the runs at high
    // probabilities can see every failed request fall back.
    let steps = mmlab_tests::scale(300).max(100);
    for (name, cfg) in configs() {
        let mut high = Vec::new();
        for (p, interval) in [(1u32, 1u64), (5, 1), (30, 1), (100, 7), (50, 3)] {
            let o = scenario(cfg, attr(p, interval, 0x5eed + u64::from(p)), steps, 17 + u64::from(p));
            assert!(o.injected > 0, "{name} p={p} i={interval}: nothing injected: {o:?}");
            if p <= 5 {
                assert!(o.ok > o.failed, "{name} p={p}: mostly successes expected: {o:?}");
            }
            if p >= 30 {
                high.push(o);
            }
        }
        // Failed requests mostly fall back (7.2's large orders to smaller
        // ones and the bulk path, huge attempts to small pages), so one
        // short run at a high probability may see no call fail; the three
        // together must.
        assert!(high.iter().any(|o| o.failed > 0), "{name}: no call failed at p >= 30: {high:?}");
    }
}

/// The n-th allocation request of one call fails (`times=1`,
/// `interval=n`), for every n. On a fresh machine the call needs new
/// tables under the vmalloc range (T of them, measured by an unfaulted
/// run); vmap and vm_map_ram get their pages from the caller, so their
/// requests 1..=T are table pages; vmalloc's first two requests are its
/// pages (7.2: an order-1 block, then the last page from the single page
/// allocator; a failure of either falls back to smaller requests and
/// succeeds), then T tables. A failed table page is PgtableError::NoMemory
/// inside the map path: the call must fail and release everything. A
/// huge vmalloc whose block or table allocation fails falls back to small
/// pages and succeeds, having released the huge attempt.
#[test]
fn each_allocation_of_one_call_failing_in_turn() {
    type Call = for<'a, 'm> fn(&Run<'a, 'm>, &Cpu<'m>) -> Result<(), VmallocError>;
    let calls: [(&str, Call, u64); 4] = [
        ("vmalloc 3 pages", |r, cpu| r.vm.vmalloc(cpu, 3 * PAGE_SIZE).map(|a| r.vm.vfree(cpu, a).unwrap()), 2),
        (
            "vmalloc_huge 4 MiB",
            |r, cpu| r.vm.vmalloc_huge(cpu, 4 << 20, Gfp::GFP_KERNEL).map(|a| r.vm.vfree(cpu, a).unwrap()),
            0, // not used: checked differently below
        ),
        (
            "vmap 3 pages",
            |r, cpu| {
                let p: Vec<Pfn> = r.live.vmap[0].1.clone();
                r.vm.vmap(cpu, &p, PAGE_KERNEL).map(|a| r.vm.vunmap(cpu, a).unwrap())
            },
            0,
        ),
        (
            "vm_map_ram 3 pages",
            |r, cpu| {
                let p: Vec<Pfn> = r.live.vmap[0].1.clone();
                r.vm.vm_map_ram(cpu, &p).map(|a| r.vm.vm_unmap_ram(cpu, a, p.len()).unwrap())
            },
            0,
        ),
    ];
    for (name, call, page_requests) in calls {
        let mut new_tables = None;
        let mut table_failures = 0;
        let mut fallbacks = 0;
        for n in 0..=12u64 {
            let m = mmlab_tests::machine("64M", 2);
            let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
            let vm = Vmalloc::new(&pa, VmallocConfig::default());
            let cpu = m.cpu(0).unwrap();
            let mut run = Run::new(&m, &pa, &vm);
            // The caller's pages, allocated before the fault is armed.
            let p = run.pages(&cpu, 3).unwrap();
            run.live.vmap.push((0, p));
            let tables = table_pages(&m);
            if n > 0 {
                pa.set_fail_page_alloc(Some(FaultAttr { times: 1, ..attr(100, n, 0) })).unwrap();
            }
            let r = call(&run, &cpu);
            let injected = pa.fail_page_alloc_injected();
            pa.set_fail_page_alloc(None).unwrap();
            let t = *new_tables.get_or_insert(table_pages(&m) - tables) as u64;
            assert!(t >= 1, "{name}: the call needs tables");
            let table_request = n > page_requests && n <= page_requests + t;
            if name.starts_with("vmalloc_huge") {
                // Its first requests are for the vmalloc'd page array (1024
                // pointers); a failure in the huge attempt (a 2 MiB block or
                // a table) ends in the fallback to small pages, which then
                // succeeds (times = 1 is spent).
                assert!(r.is_ok(), "{name} n={n}: {r:?}");
                fallbacks += vm.counts().huge_fallbacks;
                run.check(name);
                let (_, p) = run.live.vmap.pop().unwrap();
                for q in p {
                    pa.free_pages(&cpu, q, 0).unwrap();
                }
                run.finish(&cpu);
                continue;
            } else if table_request {
                assert_eq!(r, Err(VmallocError::NoMemory { size: 3 * PAGE_SIZE }), "{name} n={n}");
                table_failures += 1;
            } else {
                assert!(r.is_ok(), "{name} n={n}: {r:?}");
            }
            assert_eq!(injected, u64::from(n >= 1 && n <= page_requests + t), "{name} n={n}");
            match r {
                Ok(()) => run.check(name),
                Err(e) => run.failed(name, e),
            }
            let (_, p) = run.live.vmap.pop().unwrap();
            for q in p {
                pa.free_pages(&cpu, q, 0).unwrap();
            }
            run.finish(&cpu);
        }
        if name.starts_with("vmalloc_huge") {
            assert!(fallbacks >= 2, "{name}: {fallbacks} huge attempts failed and fell back");
        } else {
            assert!(table_failures >= 3, "{name}: {table_failures} table-page failures");
        }
    }
}
