//! `struct PageAllocator`: the node's zones and every (zone, CPU) pageset,
//! brought up in the kernel's order (mm/page_alloc.c, mm/mm_init.c).

use crate::boot_work::spread::end_of_boot_cpu;
use crate::boot_work::{BootRuleWork, BootWork};
use crate::config::AllocatorConfig;
use crate::error::SysctlError;
use crate::fault::{self, FaultAttr, FaultAttrError};
use crate::gfp::{ZonePrep, zone_prep_table};
use crate::pageset::{PCPF_FREE_HIGH_BATCH, PagesetInfo, PerCpuPages};
use crate::rules::KernelRules;
use crate::sizing::{MIN_FREE_KBYTES_MAX, MIN_PERCPU_PAGELIST_HIGH_FRACTION, zone_batchsize, zone_highsize};
use crossbeam::utils::CachePadded;
use mmlab_buddy::{NodeZones, Zone};
use mmlab_engine::mm::ZoneType;
use mmlab_engine::mm::list::{LIST_WINDOW_CPUS, PCP_LIST_HEADS_STRIDE, pcp_list_heads};
use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;
use mmlab_engine::sync::SpinLock;
use mmlab_engine::{Cpu, Machine, PAGE_SHIFT};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// The page allocator of one machine: the zones of its node and every
/// (zone, CPU) pageset.
#[derive(Debug)]
pub struct PageAllocator<'m> {
    pub(crate) m: &'m Machine,
    /// `NODE_DATA(0)->node_zones[]`.
    pub(crate) node: NodeZones<'m>,
    /// `zone->per_cpu_pageset` of every zone: `pcp[zone_idx * nr_cpus + cpu]`
    /// (unpopulated zones keep the boot pageset, never used).
    pub(crate) pcp: Box<[CachePadded<SpinLock<PerCpuPages>>]>,
    pub(crate) nr_cpus: usize,
    pub(crate) rules: KernelRules,
    high_fraction: AtomicU32,
    llc_bytes_per_cpu: u64,
    pcp_high_override: Option<i32>,
    pub(crate) drain_pages_zone_batch: bool,
    debug_checks: AtomicBool,
    /// `fail_page_alloc`.
    pub(crate) fail_page_alloc: fault::FailPageAlloc,
    /// The node's ZONELIST_FALLBACK zonelist: zones with managed pages,
    /// highest first (`build_zonerefs_node`).
    pub(crate) zonelist: Vec<ZoneType>,
    /// The allocation set-up per value of a gfp mask's zone modifier bits.
    pub(crate) zone_prep: [ZonePrep; 16],
    /// The `min_free_kbytes` in force.
    min_free_kbytes: std::sync::atomic::AtomicU64,
    /// What the boot's own allocations left (`boot.state=real`).
    pub(crate) boot_work: BootWork,
    /// What each rule of the boot's work added.
    pub(crate) boot_rules: Vec<BootRuleWork>,
    /// The CMA area's bitmap (`struct cma`'s `bitmap`, one entry per page:
    /// `cma_alloc`).
    pub(crate) cma: SpinLock<Vec<bool>>,
    /// The boot state of a layer above, kept for its first user
    /// ([`PageAllocator::keep_boot_state`]).
    above: SpinLock<KeptState>,
    /// Whether vmalloc has made the boot's vmalloc areas on this allocator
    /// ([`PageAllocator::claim_boot_vmalloc`]).
    boot_vmalloc: AtomicBool,
}

const _: () = assert!(
    mmlab_engine::machine::NR_CPUS <= LIST_WINDOW_CPUS,
    "every CPU's pagesets have heads in the list-head window"
);
const _: () = assert!(
    crate::pageset::NR_PCP_LISTS as u64 * 16 <= PCP_LIST_HEADS_STRIDE,
    "a pageset's heads fit in its part of the list-head window"
);

impl<'m> PageAllocator<'m> {
    /// Bring the page allocator up on a booted machine, in the kernel's
    /// order: free memblock's unreserved memory into the buddy lists of
    /// each frame's zone (`memblock_free_all`); size every zone's pagesets
    /// while the watermarks are still 0 (`setup_per_cpu_pageset`); free the
    /// machine's CMA area as MIGRATE_CMA pageblocks
    /// (`cma_init_reserved_areas`); compute `min_free_kbytes`, the
    /// watermarks and the lowmem reserves (`init_per_zone_wmark_min`, with
    /// khugepaged's raise when THP is enabled) and the pagesets again; on a
    /// `boot.state=real` machine replay the boot's own work on the CPUs the
    /// kernel runs it on (`crate::boot_work`); and free what the end of
    /// boot gives back (the initrd and the init sections,
    /// `free_reserved_area`) through the pcp of the CPU that frees each
    /// ([`crate::boot_work::spread::end_of_boot_cpu`]), where the boot's
    /// work reaches their places.
    ///
    /// # Errors
    /// A bad `percpu_pagelist_high_fraction` or `min_free_kbytes`; CPU 0's handle held
    /// elsewhere; or [`SysctlError::AlreadyBooted`] for a second allocator
    /// on one machine. Nothing is changed in any of these cases.
    pub fn boot(m: &'m Machine, cfg: AllocatorConfig) -> Result<PageAllocator<'m>, SysctlError> {
        Self::boot_with(m, cfg, |_| {})
    }

    /// [`PageAllocator::boot`], with `before_end_of_boot` run on the
    /// allocator where the layers above make their boot work (vmalloc's
    /// areas and the DMA pools, `Vmalloc::boot`): on a `boot.state=real`
    /// machine in the middle of the allocator's own boot work, right after
    /// `futex_init()`'s step (core_initcall), so that the DMA pools'
    /// `cma_alloc()` drains the pagesets where `dma_atomic_pool_init()`
    /// (postcore_initcall) does; before the initrd and the init sections
    /// are freed in any case.
    ///
    /// # Errors
    /// As [`PageAllocator::boot`].
    pub fn boot_with(
        m: &'m Machine,
        cfg: AllocatorConfig,
        before_end_of_boot: impl FnOnce(&PageAllocator<'m>),
    ) -> Result<PageAllocator<'m>, SysctlError> {
        if cfg.percpu_pagelist_high_fraction != 0
            && cfg.percpu_pagelist_high_fraction < MIN_PERCPU_PAGELIST_HIGH_FRACTION
        {
            return Err(SysctlError::HighFraction(cfg.percpu_pagelist_high_fraction));
        }
        if let Some(k) = cfg.min_free_kbytes.filter(|&k| k > MIN_FREE_KBYTES_MAX) {
            return Err(SysctlError::MinFreeKbytes(k));
        }
        // Boot work runs on the boot CPU; take it before anything is
        // claimed, so that a busy CPU 0 leaves the machine bootable.
        let cpu0 = m.cpu(0).map_err(|_| SysctlError::BootCpuBusy)?;
        // Before the zones and the pagesets are set up: they write list
        // heads at fixed kernel addresses that a live allocator uses.
        if !m.claim_memblock_free_all() {
            return Err(SysctlError::AlreadyBooted);
        }
        let node = NodeZones::new(m);
        let nr_cpus = m.nr_cpus();
        let pcp = (0..NR_ZONE_TYPES * nr_cpus)
            .map(|i| {
                // Each (zone, CPU) pageset gets its own list heads (percpu
                // data), in the list-head window.
                let base = pcp_list_heads(i / nr_cpus, i % nr_cpus).expect("NR_CPUS <= LIST_WINDOW_CPUS");
                CachePadded::new(SpinLock::new(PerCpuPages::new(m.memmap(), base)))
            })
            .collect();
        node.memblock_free_all(&cpu0);
        drop(cpu0);
        let zonelist = node.zonelist();
        let first_zone =
            std::array::from_fn(|h| zonelist.iter().position(|&z| z as usize <= h).unwrap_or(zonelist.len()) as u8);
        let zone_prep = zone_prep_table(&zonelist, &first_zone);
        let mut pa = PageAllocator {
            m,
            node,
            pcp,
            nr_cpus,
            rules: cfg.rules,
            high_fraction: AtomicU32::new(cfg.percpu_pagelist_high_fraction),
            llc_bytes_per_cpu: cfg.llc_bytes_per_cpu,
            pcp_high_override: cfg.pcp_high_override,
            drain_pages_zone_batch: cfg.drain_pages_zone_batch,
            debug_checks: AtomicBool::new(false),
            fail_page_alloc: fault::FailPageAlloc::default(),
            zonelist,
            zone_prep,
            min_free_kbytes: Default::default(),
            boot_work: BootWork::default(),
            boot_rules: Vec::new(),
            cma: SpinLock::new(Vec::new()),
            above: SpinLock::new(KeptState(None)),
            boot_vmalloc: AtomicBool::new(false),
        };
        // setup_per_cpu_pageset() (start_kernel): the pagesets are sized
        // while every watermark is still 0, so high_min is 4 × batch.
        pa.zone_pcp_update(0);
        // cma_init_reserved_areas() (core_initcall): the area memblock
        // reserved becomes MIGRATE_CMA pageblocks, freed through CPU 0's
        // pcp, which drains at that small high.
        if let Some((start, nr)) = m.cma_area() {
            let cpu0 = m.cpu(0).map_err(|_| SysctlError::BootCpuBusy)?;
            pa.cma_activate_area(&cpu0, start, nr).map_err(SysctlError::BootState)?;
        }
        // init_per_zone_wmark_min() (postcore_initcall), then khugepaged's
        // raise (hugepage_init, subsys_initcall): watermarks, lowmem
        // reserves and the pagesets again, on managed pages that include CMA.
        let thp = cfg.transparent_hugepage.hugepage_pmd_enabled();
        let min_free = pa.node.init_per_zone_wmark_min(cfg.min_free_kbytes, thp);
        pa.min_free_kbytes.store(min_free, Relaxed);
        pa.zone_pcp_update(0);
        // The boot's own allocations and frees (slab, hash tables, page
        // tables, the initramfs): a real boot's record with the rules of
        // this machine's size.
        // The layers above make theirs (vmalloc's areas and the DMA pools'
        // cma_alloc()) where the program stops for them, after
        // futex_init() (core_initcall): their drain_all_pages() comes
        // before the rest of the boot's work, as dma_atomic_pool_init()'s
        // does (postcore_initcall). The program gives the initrd and the
        // init sections back where the kernel does (free_initrd_mem() at
        // the end of the initramfs unpack, free_initmem() before /init).
        let mut given: Vec<u64> = Vec::new();
        if m.boot_state().in_force == mmlab_engine::mm::boot_state::BootState::Real {
            let mut replay = pa.boot_work_program();
            let cpus = m.all_cpus().map_err(|_| SysctlError::BootCpuBusy)?;
            let stopped = pa.replay_boot_work(&mut replay, &cpus).map_err(SysctlError::BootState)?;
            drop(cpus);
            before_end_of_boot(&pa);
            if stopped {
                let cpus = m.all_cpus().map_err(|_| SysctlError::BootCpuBusy)?;
                while pa.replay_boot_work(&mut replay, &cpus).map_err(SysctlError::BootState)? {}
            }
            given = replay.given_back().to_vec();
            (pa.boot_work, pa.boot_rules) = replay.finish();
        } else {
            before_end_of_boot(&pa);
        }
        // What the program did not give back (no marker for it), at the
        // end: free_initrd_mem() and free_initmem() on their CPUs.
        let cpus = m.all_cpus().map_err(|_| SysctlError::BootCpuBusy)?;
        let initrd = m.boot_state().reservations.iter().find(|r| r.name == "initrd").map(|r| r.base);
        for &(base, size) in m.boot_state().given_back.iter().filter(|(base, _)| !given.contains(base)) {
            let cpu = &cpus[end_of_boot_cpu(Some(base) == initrd, cpus.len())];
            pa.free_reserved_area(cpu, base, size).map_err(SysctlError::BootState)?;
        }
        drop(cpus);
        pa.debug_checks.store(cfg.debug_checks, Relaxed);
        Ok(pa)
    }

    /// Claim the boot's vmalloc work (`Vmalloc::boot`): true the first
    /// time on a `boot.state=real` machine, so that a second vmalloc over
    /// the same allocator does not allocate the boot's areas again.
    pub fn claim_boot_vmalloc(&self) -> bool {
        self.m.boot_state().in_force == mmlab_engine::mm::boot_state::BootState::Real
            && !self.boot_vmalloc.swap(true, Relaxed)
    }

    /// Whether [`PageAllocator::claim_boot_vmalloc`] has been answered true.
    pub fn boot_vmalloc_claimed(&self) -> bool {
        self.boot_vmalloc.load(Relaxed)
    }

    /// Keep `state`, the boot work of a layer above that ran before the end
    /// of boot ([`PageAllocator::boot_with`]), for that layer's first user
    /// over this allocator ([`PageAllocator::take_boot_state`]). The
    /// layers borrow the allocator, so what vmalloc made while it booted
    /// waits here (the kernel has one vmalloc per machine, made once).
    pub fn keep_boot_state(&self, state: Box<dyn std::any::Any + Send>) {
        self.above.lock().0 = Some(state);
    }

    /// Take what [`PageAllocator::keep_boot_state`] kept, once.
    pub fn take_boot_state(&self) -> Option<Box<dyn std::any::Any + Send>> {
        self.above.lock().0.take()
    }

    /// The machine.
    #[inline]
    pub fn machine(&self) -> &'m Machine {
        self.m
    }
    /// The preferred zone of a `GFP_KERNEL` allocation: the first zone of
    /// the zonelist (Normal on a machine with RAM above 4 GiB, else DMA).
    /// On a machine with one populated zone, the only zone.
    #[inline]
    pub fn zone(&self) -> &Zone<'m> {
        self.zone_at(self.zonelist[0] as usize)
    }
    /// `&pgdat->node_zones[zt]`.
    #[inline]
    pub fn zone_of(&self, zt: ZoneType) -> &Zone<'m> {
        self.zone_at(zt as usize)
    }
    /// The zones of the node.
    pub fn node(&self) -> &NodeZones<'m> {
        &self.node
    }
    /// The populated zones, lowest first (`for_each_populated_zone`).
    pub fn populated_zones(&self) -> impl Iterator<Item = &Zone<'m>> + '_ {
        self.node.zones().iter().filter(|z| z.is_populated())
    }
    /// The node's ZONELIST_FALLBACK zonelist (managed zones, highest first).
    pub fn zonelist(&self) -> &[ZoneType] {
        &self.zonelist
    }
    /// `page_zone()`: the zone whose number the frame's struct page carries.
    #[inline]
    pub fn page_zone(&self, pfn: mmlab_engine::Pfn) -> &Zone<'m> {
        self.zone_at(self.page_zone_idx(pfn))
    }
    /// `global_zone_page_state(NR_FREE_PAGES)`: free pages of every zone
    /// (pcp lists not included).
    pub fn nr_free_pages(&self) -> i64 {
        self.node.zones().iter().map(|z| z.nr_free_pages()).sum()
    }
    /// `totalram_pages()`: managed pages of every zone.
    pub fn managed_pages(&self) -> u64 {
        self.node.managed().iter().sum()
    }
    /// The `min_free_kbytes` in force (`vm.min_free_kbytes`).
    pub fn min_free_kbytes(&self) -> u64 {
        self.min_free_kbytes.load(Relaxed)
    }
    #[inline(always)]
    pub(crate) fn zone_at(&self, zi: usize) -> &Zone<'m> {
        &self.node.zones()[zi % NR_ZONE_TYPES]
    }
    #[inline(always)]
    pub(crate) fn page_zone_idx(&self, pfn: mmlab_engine::Pfn) -> usize {
        self.m.page(pfn).zonenum() as usize % NR_ZONE_TYPES
    }
    /// The pageset of zone `zi` on CPU `cpu`.
    #[inline(always)]
    pub(crate) fn pcp_of(&self, zi: usize, cpu: usize) -> &SpinLock<PerCpuPages> {
        &self.pcp[zi * self.nr_cpus + cpu]
    }
    /// The rules in force.
    pub fn rules(&self) -> KernelRules {
        self.rules
    }

    /// `zone_set_pageset_high_and_batch()` + `pageset_update()` +
    /// `zone_pcp_update_cacheinfo()` for every populated zone: recompute
    /// batch, high_min and high_max of each CPU's pageset (`pcp->high`
    /// itself is left to be clamped lazily).
    pub fn zone_pcp_update(&self, cpu_online: u32) {
        for (zi, z) in self.node.zones().iter().enumerate() {
            if z.is_populated() {
                self.zone_pcp_update_one(zi, z, cpu_online);
            }
        }
    }

    fn zone_pcp_update_one(&self, zi: usize, z: &Zone<'m>, cpu_online: u32) {
        let managed = z.managed_pages();
        let batch = zone_batchsize(managed);
        let ncpus = self.nr_cpus as u32;
        let fraction = self.high_fraction.load(Relaxed);
        let low = z.low_wmark_pages();
        let (high_min, high_max) = if let Some(h) = self.pcp_high_override {
            (h, h)
        } else if fraction != 0 {
            let h = zone_highsize(managed, low, batch, ncpus, cpu_online, ncpus, fraction);
            (h, h)
        } else {
            (
                zone_highsize(managed, low, batch, ncpus, cpu_online, ncpus, 0),
                zone_highsize(managed, low, batch, ncpus, cpu_online, ncpus, MIN_PERCPU_PAGELIST_HIGH_FRACTION),
            )
        };
        let free_high_batch = (self.llc_bytes_per_cpu >> PAGE_SHIFT) > 3 * batch as u64;
        for cpu in 0..self.nr_cpus {
            let mut p = self.pcp_of(zi, cpu).lock();
            p.batch = batch;
            p.high_min = high_min;
            p.high_max = high_max;
            if free_high_batch {
                p.flags |= PCPF_FREE_HIGH_BATCH;
            } else {
                p.flags &= !PCPF_FREE_HIGH_BATCH;
            }
        }
    }

    /// Write `vm.percpu_pagelist_high_fraction`
    /// (`percpu_pagelist_high_fraction_sysctl_handler`).
    ///
    /// # Errors
    /// [`SysctlError::HighFraction`] for a value from 1 to 7; the setting stays.
    pub fn set_percpu_pagelist_high_fraction(&self, v: u32) -> Result<(), SysctlError> {
        if v != 0 && v < MIN_PERCPU_PAGELIST_HIGH_FRACTION {
            return Err(SysctlError::HighFraction(v));
        }
        self.high_fraction.store(v, Relaxed);
        self.zone_pcp_update(0);
        Ok(())
    }
    /// `vm.percpu_pagelist_high_fraction`.
    pub fn percpu_pagelist_high_fraction(&self) -> u32 {
        self.high_fraction.load(Relaxed)
    }

    /// Write `vm.min_free_kbytes`: new watermarks, then new pagesets
    /// (`min_free_kbytes_sysctl_handler` → `setup_per_zone_wmarks`).
    ///
    /// # Errors
    /// A value above [`MIN_FREE_KBYTES_MAX`] (the kernel's -EINVAL); the
    /// watermarks stay as they were.
    pub fn set_min_free_kbytes(&self, kbytes: u64) -> Result<(), SysctlError> {
        if kbytes > MIN_FREE_KBYTES_MAX {
            return Err(SysctlError::MinFreeKbytes(kbytes));
        }
        self.node.setup_per_zone_wmarks(kbytes);
        self.min_free_kbytes.store(kbytes, Relaxed);
        self.zone_pcp_update(0);
        Ok(())
    }

    /// One CPU's pageset of the preferred zone ([`PageAllocator::zone`]),
    /// as /proc/zoneinfo prints it.
    pub fn pageset(&self, cpu: usize) -> Option<PagesetInfo> {
        self.pageset_of(self.zonelist[0], cpu)
    }
    /// One CPU's pageset of zone `zt`.
    pub fn pageset_of(&self, zt: ZoneType, cpu: usize) -> Option<PagesetInfo> {
        (cpu < self.nr_cpus).then(|| self.pcp_of(zt as usize, cpu).lock().info())
    }
    /// Pages on every pcp list of every zone and CPU.
    pub fn pcp_pages(&self) -> i64 {
        self.pcp.iter().map(|p| p.lock().count as i64).sum()
    }

    /// Arm `fail_page_alloc` with `attr`, or disarm it with None (as writing
    /// its debugfs attributes does).
    ///
    /// # Errors
    /// An attribute out of its range; the previous setting stays.
    pub fn set_fail_page_alloc(&self, attr: Option<FaultAttr>) -> Result<(), FaultAttrError> {
        self.fail_page_alloc.set(attr)
    }
    /// Allocations `fail_page_alloc` failed since it was last armed.
    pub fn fail_page_alloc_injected(&self) -> u64 {
        self.fail_page_alloc.injected()
    }
    /// Write fail-nth (`/proc/self/task/<tid>/fail-nth`): of the requests that pass
    /// fail_page_alloc's filters from now on, fail the `nth[0]`-th, then
    /// the `nth[1]`-th after it, and so on. Does nothing while disarmed.
    pub fn set_fail_nth(&self, nth: &[u32]) {
        self.fail_page_alloc.set_fail_nth(nth);
    }
    /// The number of requests that passed fail_page_alloc's filters since
    /// it was armed, and which of them failed since the last call (their
    /// numbers, oldest first): what a fuzzer records to replay the same
    /// failures with fail-nth.
    pub fn take_fail_page_alloc_log(&self) -> (u64, Vec<u64>) {
        self.fail_page_alloc.take_log()
    }

    /// Whether `cpu` is a handle of another machine. Every entry point that
    /// takes a CPU refuses such a handle before touching per-cpu data:
    /// Result-returning ones with a `ForeignCpu` error, `alloc_pages` with
    /// None, `alloc_pages_bulk` with nothing populated, and the drains and
    /// `decay_pcp_high` by doing nothing (with an error event in the log).
    #[inline(always)]
    pub(crate) fn foreign(&self, cpu: &Cpu<'m>) -> bool {
        !self.m.owns(cpu) && Self::refuse_foreign(cpu)
    }
    #[cold]
    #[inline(never)]
    fn refuse_foreign(cpu: &Cpu<'m>) -> bool {
        tracing::error!(target: "mmlab::page_alloc", cpu = cpu.id(), "a CPU handle of another machine was refused");
        true
    }

    /// Turn the after-every-operation invariant check on or off.
    pub fn set_debug_checks(&self, on: bool) {
        self.debug_checks.store(on, Relaxed);
    }

    /// Run the invariant check if the debug switch is on; a failure is a bug
    /// in mmlab, so it panics with the report.
    #[inline(always)]
    pub(crate) fn after_op(&self) {
        if self.debug_checks.load(Relaxed) {
            self.run_debug_checks();
        }
    }

    #[cold]
    #[inline(never)]
    fn run_debug_checks(&self) {
        if let Err(e) = self.check_invariants() {
            panic!("mmlab invariant violated: {e}");
        }
    }
}

/// Page-table pages after boot come from the page allocator
/// (`pagetable_alloc(GFP_PGTABLE_KERNEL, 0)`: `GFP_KERNEL | __GFP_ZERO`).
impl<'m> mmlab_engine::arch::arm64::pgtable::PgtableAlloc<Cpu<'m>> for PageAllocator<'m> {
    fn alloc_table(&self, cpu: &Cpu<'m>) -> Option<mmlab_engine::PhysAddr> {
        self.alloc_pages(cpu, mmlab_engine::Gfp::GFP_KERNEL | mmlab_engine::Gfp::__GFP_ZERO, 0).map(|p| p.phys())
    }
    fn free_table(&self, cpu: &Cpu<'m>, pa: mmlab_engine::PhysAddr) {
        // A table page this allocator handed out: a failure here is a bug
        // in the caller, and the page is then left as it was.
        let _ = self.free_pages(cpu, pa.pfn(), 0);
    }
}

/// A layer's boot state kept by the allocator (opaque to it).
struct KeptState(Option<Box<dyn std::any::Any + Send>>);

impl std::fmt::Debug for KeptState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "KeptState(Some(..))" } else { "KeptState(None)" })
    }
}
