//! The boot's vmalloc areas: what /proc/vmallocinfo lists after a real boot
//! besides the kernel image (the IRQ and task stacks, the ioremaps of the
//! virt machine's devices, the bpf JIT pack, the atomic DMA pools, the
//! second percpu chunk, the compression contexts, the tty's buffer, and the
//! stacks of exited tasks waiting unpurged), made through vmalloc's own
//! calls on a `boot.state=real` machine by [`Vmalloc::boot`].
//!
//! # The algorithm
//!
//! A base record (a real boot's vmalloc and task events, 16 GiB / 4 CPUs,
//! compacted by `scripts/arm64-peer/boot-kmem-compact.py vmalloc` into
//! `vmalloc/data/`) lists, in the boot's order, every task created and
//! exited (`copy_process()` takes a stack; `release_task_stack()` gives it
//! back), every ioremap and iounmap, and the plain vmallocs; what depends
//! on the machine is a rule marker ([`rules`]) expanded for it. Stacks go
//! through the per-CPU stack cache of kernel/fork.c
//! (`NR_CACHED_STACKS` = 2): a new task takes a cached stack of its CPU if
//! there is one, else vmallocs `THREAD_SIZE` (16 KiB) aligned to
//! `THREAD_ALIGN` (32 KiB); an exiting task's stack goes back to the cache
//! of the CPU it exits on if a slot is free, else it is vfree'd, which
//! leaves its range on the lazy list ("unpurged vm_area" in
//! /proc/vmallocinfo: the boot never reaches `lazy_max_pages()`). Record
//! CPU n runs on n mod CPUs. Every page comes from the page allocator
//! through vmalloc itself (so `pgalloc`, `nr_vmalloc` and VmallocUsed count
//! it once: the page allocator's boot work leaves these pages out), the DMA
//! pools' from CMA (`cma_alloc`).
//!
//! | piece | fidelity |
//! |---|---|
//! | areas: sizes, alignment, flags, callers as /proc/vmallocinfo prints them | faithful |
//! | per-CPU areas: IRQ stacks, idle and per-CPU kthread stacks, DMA pool sizes, percpu chunk sizes | faithful to the kernel's rules ([`rules`]) |
//! | the order of the areas and which CPU runs what | that boot's, folded onto the machine's CPUs |
//! | which exits hit a full stack cache (the unpurged areas' number) | emergent: the record's task events through the cache |
//! | when | simplified: after the page allocator's boot work, not interleaved with it |

pub(crate) mod report;
pub mod rules;

pub use report::{VmallocBootError, VmallocBootRule, VmallocBootWork};

use crate::vmalloc::Vmalloc;
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::{Cpu, PAGE_SIZE};
use mmlab_pcp::PageAllocator;
use std::collections::HashMap;

/// The base record (see the module docs).
const BOOT_VMALLOC_BASE: &str = include_str!("../data/boot-vmalloc-7.2-virt.txt");

/// `THREAD_SIZE` on arm64 without KASAN: 16 KiB.
pub const THREAD_SIZE: u64 = 16 << 10;
/// `THREAD_ALIGN` with `CONFIG_VMAP_STACK`: twice `THREAD_SIZE`.
pub const THREAD_ALIGN: u64 = 2 * THREAD_SIZE;
/// `NR_CACHED_STACKS` (kernel/fork.c).
pub const NR_CACHED_STACKS: usize = 2;
/// The caller /proc/vmallocinfo prints for a task stack
/// (`alloc_thread_stack_node()` inlined into `kernel_clone()`).
pub const KERNEL_CLONE: &str = "kernel_clone+0xb0/0x558";

/// The replay's running state.
pub(crate) struct Replay<'r, 'a, 'm> {
    pub(crate) vm: &'r Vmalloc<'a, 'm>,
    pub(crate) cpus: &'r [Cpu<'m>],
    /// Per CPU, `cached_stacks[]`.
    cache: Vec<Vec<u64>>,
    /// Task (record number or rule key) -> its stack.
    stacks: HashMap<(u8, usize), u64>,
    ioremaps: Vec<Option<u64>>,
    pub(crate) work: VmallocBootWork,
    /// The rule being expanded, whose line counts what follows.
    pub(crate) rule: Option<usize>,
    pub(crate) rules: Vec<VmallocBootRule>,
}

impl<'r, 'm> Replay<'r, '_, 'm> {
    /// The machine's CPU for record CPU `c`.
    pub(crate) fn cpu(&self, c: usize) -> &'r Cpu<'m> {
        &self.cpus[c % self.cpus.len()]
    }

    fn count(&mut self, areas: u64, pages: u64) {
        if let Some(r) = self.rule.and_then(|r| self.rules.get_mut(r)) {
            r.areas += areas;
            r.pages += pages;
        }
    }

    /// `__vmalloc_node_range(size, align, gfp, ..., caller)` counted.
    pub(crate) fn vmalloc(&mut self, c: usize, size: u64, align: u64, gfp: Gfp, caller: &'static str) -> Option<u64> {
        let cpu = &self.cpus[c % self.cpus.len()];
        match self.vm.vmalloc_node_range(
            cpu,
            size,
            align,
            gfp,
            mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL,
            crate::area::VmFlags::empty(),
            caller,
        ) {
            Ok(a) => {
                let pages = size.div_ceil(PAGE_SIZE);
                self.work.areas += 1;
                self.work.vmalloc_pages += pages;
                self.count(1, pages);
                Some(a)
            }
            Err(_) => {
                self.work.failed += 1;
                None
            }
        }
    }

    /// `copy_process()` → `alloc_thread_stack_node()` on CPU `c` for task
    /// `key`: a cached stack of the CPU, else a fresh one.
    pub(crate) fn fork(&mut self, c: usize, key: (u8, usize), caller: &'static str) {
        let c = c % self.cpus.len();
        if let Some(s) = self.cache[c].pop() {
            self.work.stacks_reused += 1;
            self.stacks.insert(key, s);
            return;
        }
        if let Some(s) = self.vmalloc(c, THREAD_SIZE, THREAD_ALIGN, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO, caller) {
            self.work.stacks += 1;
            self.stacks.insert(key, s);
        }
    }

    /// The task's exit on CPU `c`: `thread_stack_free_rcu()` keeps the
    /// stack in the CPU's cache if a slot is free, else vfrees it.
    fn exit(&mut self, c: usize, key: (u8, usize)) {
        let c = c % self.cpus.len();
        let Some(s) = self.stacks.remove(&key) else { return };
        if self.cache[c].len() < NR_CACHED_STACKS {
            self.cache[c].push(s);
        } else if self.vm.vfree(&self.cpus[c], s).is_ok() {
            self.work.stacks_freed += 1;
        }
    }

    fn ioremap(&mut self, c: usize, phys: u64, size: u64, caller: &'static str) {
        // pci_host_common_probe() -> pci_ecam_create() -> pci_remap_cfgspace():
        // the virt machine's PCIe configuration space (QEMU's
        // VIRT_HIGH_PCIE_ECAM, 256 MiB at 0x4010000000) is non-posted.
        let r = if (phys, size) == (VIRT_HIGH_PCIE_ECAM, 256 << 20) {
            self.vm.ioremap_np(self.cpu(c), phys, size, caller).ok()
        } else {
            self.vm.ioremap(self.cpu(c), phys, size, caller).ok()
        };
        match r {
            Some(_) => {
                self.work.areas += 1;
                self.work.ioremaps += 1;
                self.count(1, 0);
            }
            None => self.work.failed += 1,
        }
        self.ioremaps.push(r);
    }

    fn iounmap(&mut self, c: usize, n: usize) {
        if let Some(Some(a)) = self.ioremaps.get(n).copied()
            && self.vm.iounmap(self.cpu(c), a).is_ok()
        {
            self.work.iounmaps += 1;
        }
    }
}

/// The callers of the base record's plain vmallocs, as /proc/vmallocinfo
/// prints them (the record names them so; an unknown one is skipped).
/// QEMU virt's `VIRT_HIGH_PCIE_ECAM` base.
const VIRT_HIGH_PCIE_ECAM: u64 = 0x40_1000_0000;

const CALLERS: [&str; 4] = [
    "bpf_prog_alloc_no_stats+0x4c/0x258",
    "bpf_jit_alloc_exec+0x20/0x38",
    "n_tty_open+0x24/0xc0",
    "__ioremap_prot+0x6c/0xe0",
];

impl<'a, 'm> Vmalloc<'a, 'm> {
    /// `vmalloc_init()` and the boot's vmalloc work (module docs) on a
    /// `boot.state=real` machine, once per page allocator
    /// ([`PageAllocator::claim_boot_vmalloc`]); on any other machine, or a
    /// second time, only `vmalloc_init()`.
    ///
    /// # Errors
    /// [`VmallocBootError::CpuBusy`] when a CPU's handle is held elsewhere
    /// (the work runs on every CPU); nothing was made.
    pub fn boot(pa: &'a PageAllocator<'m>, cfg: crate::VmallocConfig) -> Result<Vmalloc<'a, 'm>, VmallocBootError> {
        // The first vmalloc over `pa` picks up what was made before the end
        // of boot, if anything was (`Vmalloc::new`).
        let vm = Vmalloc::new(pa, cfg);
        let m = pa.machine();
        if m.boot_state().in_force != mmlab_engine::mm::boot_state::BootState::Real || pa.boot_vmalloc_claimed() {
            return Ok(vm);
        }
        let cpus = m.all_cpus().map_err(|_| VmallocBootError::CpuBusy)?;
        if pa.claim_boot_vmalloc() {
            vm.boot_work_replay(&cpus);
        }
        Ok(vm)
    }

    /// [`Vmalloc::boot`] as the step `PageAllocator::boot_with` runs before
    /// the end of boot, keeping what it made in the allocator
    /// (`keep_boot_state`) for the first `Vmalloc::new` over it.
    ///
    /// # Errors
    /// As [`Vmalloc::boot`]; nothing was made.
    pub fn boot_before_end_of_boot(
        pa: &'a PageAllocator<'m>,
        cfg: crate::VmallocConfig,
    ) -> Result<(), VmallocBootError> {
        let vm = Vmalloc::boot(pa, cfg)?;
        pa.keep_boot_state(Box::new(vm.into_state()));
        Ok(())
    }

    /// Replay the base record with the rules of this machine.
    fn boot_work_replay(&self, cpus: &[Cpu<'m>]) {
        let mut r = Replay {
            vm: self,
            cpus,
            cache: vec![Vec::new(); cpus.len()],
            stacks: HashMap::new(),
            ioremaps: Vec::new(),
            work: VmallocBootWork::default(),
            rule: None,
            rules: Vec::new(),
        };
        let n = |s: Option<&str>| s.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let hex = |s: Option<&str>| s.and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
        let mut tasks = 0usize;
        for line in BOOT_VMALLOC_BASE.lines() {
            let mut f = line.split_whitespace();
            match f.next() {
                Some("t") => {
                    let c = n(f.next()) as usize;
                    r.fork(c, (0, tasks), KERNEL_CLONE);
                    tasks += 1;
                }
                Some("x") => {
                    let c = n(f.next()) as usize;
                    let k = n(f.next()) as usize;
                    r.exit(c, (0, k));
                }
                Some("i") => {
                    let c = n(f.next()) as usize;
                    let (Some(phys), size) = (hex(f.next()), n(f.next())) else { continue };
                    r.ioremap(c, phys, size, CALLERS[3]);
                }
                Some("u") => {
                    let c = n(f.next()) as usize;
                    r.iounmap(c, n(f.next()) as usize);
                }
                Some("v") => {
                    let c = n(f.next()) as usize;
                    let (size, zero) = (n(f.next()), n(f.next()) == 1);
                    let Some(caller) = f.next().and_then(|name| CALLERS.iter().find(|&&k| k == name)) else { continue };
                    let gfp = if zero { Gfp::GFP_KERNEL | Gfp::__GFP_ZERO } else { Gfp::GFP_KERNEL };
                    r.vmalloc(c, size, 1, gfp, caller);
                }
                Some("r") => {
                    if let Some(name) = f.next() {
                        rules::expand(&mut r, name);
                    }
                }
                _ => {}
            }
        }
        r.work.stacks_cached = r.cache.iter().map(|c| c.len() as u64).sum();
        let mut b = self.boot.lock();
        b.work = r.work;
        b.rules = r.rules;
    }

    /// What the boot's vmalloc work did (all 0 without it).
    pub fn boot_work(&self) -> VmallocBootWork {
        self.boot.lock().work
    }

    /// What each of its rules added.
    pub fn boot_rules(&self) -> Vec<VmallocBootRule> {
        self.boot.lock().rules.clone()
    }
}

/// The pages a rule allocated outside vmalloc areas, for [`rules`].
pub(crate) fn note_outside(r: &mut Replay<'_, '_, '_>, dma: u64, percpu: u64) {
    r.work.dma_pool_pages += dma;
    r.work.percpu_pages += percpu;
    if let Some(rule) = r.rule.and_then(|i| r.rules.get_mut(i)) {
        rule.pages += dma + percpu;
    }
}
