//! `struct Vmalloc`: the vmalloc allocator of one machine, its vmap nodes,
//! lazy lists and counters, and the vmalloc/vfree family (mm/vmalloc.c).

use crate::area::VM_ALLOC;
use crate::area::VM_ALLOW_HUGE_VMAP;
use crate::area::VmFlags;
use crate::area::{AreaKind, VM_MAP, VM_NO_GUARD, VmArea};
use crate::config::VmallocConfig;
use crate::counts::{CallCount, NR_CALL_COUNTS, VmallocCounts};
use crate::error::VmallocError;
use crate::lazy::{LazyArea, LazyAreas};
use crate::lockstat::LockStats;
use crate::lockstat::VmallocLockStat;
use crate::lockstat::VmapLockClass;
use crate::vmap_area::FreeVmapTree;
use crate::vmap_block::VmapBlock;
use crossbeam::utils::CachePadded;
use mmlab_engine::arch::arm64::memory::VMALLOC_START;
use mmlab_engine::arch::arm64::pgtable::desc::{CONT_PTE_SIZE, CONT_PTES, PAGE_KERNEL, PMD_SIZE, PgProt};
use mmlab_engine::arch::arm64::pgtable::{
    self, AddressSpace, Desc, PgtableError, arch_enter_lazy_mmu_mode, arch_leave_lazy_mmu_mode, pmd_alloc,
    pte_alloc_kernel, try_huge_pmd,
};
use mmlab_engine::arch::arm64::tlb::TlbFlush;
use mmlab_engine::counters::this_cpu_add;
use mmlab_engine::kernel::rcu;
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::sync::{Mutex, SpinGuard, SpinLock};
use mmlab_engine::trace::{mmlab as trace_mmlab, vmalloc as trace};
use mmlab_engine::{Cpu, Machine, PAGE_SHIFT, PAGE_SIZE, Pfn};
use mmlab_pcp::PageAllocator;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Acquire};

/// `PMD_SHIFT`.
pub(crate) const PMD_SHIFT: u32 = 21;
/// `CONT_PTE_SHIFT`.
pub(crate) const CONT_PTE_SHIFT: u32 = 16;
/// Chunk of the bulk allocator (`vm_area_alloc_pages`).
pub(crate) const BULK_CHUNK: usize = 100;

/// `MAX_VA_SIZE_PAGES`: areas up to this many pages (guard included) are
/// kept in per-node size pools after a purge (`node_pool_add_va`).
pub const MAX_VA_SIZE_PAGES: u64 = 256;

/// One vmap node's busy areas by start address (`vn->busy.root`). Each
/// area is an allocation of its own, as the kernel's `vmap_area` (from
/// `vmap_area_cachep`) is: the tree's nodes then hold pointers, and an
/// insert or remove moves 8 bytes per entry instead of a whole area. In
/// interleaved runs that took fix_size p:1 from 199-200 to 186 ns
/// (criterion) and a two-worker test_vmalloc run 4 % off, for 10 more
/// instructions per iteration.
pub(crate) type BusyTree = BTreeMap<u64, Box<VmArea>>;
/// One vmap node's pools of purged ranges, by size in pages minus one
/// (`vn->pool[]`).
pub(crate) type NodePools = Vec<std::collections::VecDeque<u64>>;

/// The vmalloc allocator of one machine.
///
/// Every lock and every node's and CPU's hot data sits in a cache line of
/// its own (`CachePadded`), as in the kernel, where a `struct vmap_node`
/// spans several lines and per-CPU data lives in per-CPU areas. Packed, two
/// CPUs' unrelated words shared a line: with two workers of test_vmalloc,
/// the per-CPU call counters and the lazy-list lock words were the hottest
/// instructions of `vmalloc_area` and `free_vmap_area_noflush` in `perf
/// annotate`, and a two-worker run (run_test_mask=7, 100,000 loops) took
/// 14 % longer: 2,280 against 1,994 M host ticks per worker, means of five
/// interleaved runs each, with one worker unchanged.
pub struct Vmalloc<'a, 'm> {
    pub(crate) pa: &'a PageAllocator<'m>,
    pub(crate) m: &'m Machine,
    pub(crate) asp: AddressSpace,
    pub(crate) cfg: VmallocConfig,
    /// `free_vmap_area_root` under `free_vmap_area_lock`. It, the busy and
    /// the pool locks are spinlocks, as in the kernel; the lazy lists keep
    /// the `sync` facade's mutex, so that loom can check their accounting.
    pub(crate) free: CachePadded<SpinLock<FreeVmapTree>>,
    /// A range of the vmalloc range that is neither free nor an area: the
    /// list-head window on a machine without the kernel image
    /// ([`crate::reserved`]).
    pub(crate) reserved: Option<(u64, u64)>,
    /// Busy areas per vmap node (`vmap_nodes[i].busy`), by start address.
    pub(crate) busy: Box<[CachePadded<SpinLock<BusyTree>>]>,
    /// Lazily freed areas per vmap node (`vmap_nodes[i].lazy`) and
    /// `vmap_lazy_nr`.
    pub(crate) lazy: LazyAreas,
    /// `vmap_purge_lock`.
    pub(crate) purge_lock: Mutex<()>,
    /// The rare counters (purges, fallbacks); the per-call ones are per
    /// CPU in `pcpu_counts`.
    pub(crate) counts: Mutex<VmallocCounts>,
    /// Per CPU, the counters of every call, indexed by [`CallCount`], each
    /// written only by its CPU's thread (`this_cpu_add`), summed by
    /// [`Vmalloc::counts`]. A lock per call cost more than the rest of a
    /// one-page vfree's bookkeeping.
    pub(crate) pcpu_counts: Box<[CachePadded<[AtomicU64; NR_CALL_COUNTS]>]>,
    /// Every vmap block by start (`vmap_blocks` xarray).
    pub(crate) blocks: Mutex<BTreeMap<u64, VmapBlock>>,
    /// Per node, `MAX_VA_SIZE_PAGES` pools of purged ranges by size
    /// (`vmap_nodes[i].pool[(size - 1) / PAGE_SIZE]`).
    pub(crate) pools: Box<[CachePadded<SpinLock<NodePools>>]>,
    /// `kvfree_rcu` objects waiting for their grace period.
    pub(crate) kvfree_pending: Mutex<Vec<KvfreeQueued>>,
    /// `kvfree_pending`'s length, stored under its lock after every change,
    /// so that `vfree` can see the queue is empty without taking the lock.
    pub(crate) kvfree_nr: AtomicUsize,
    /// lock_stat's counts of vmalloc's lock classes (see the `lockstat`
    /// module), per CPU.
    pub(crate) lock_stats: LockStats,
    /// What the boot's vmalloc work made ([`Vmalloc::boot`]).
    pub(crate) boot: Mutex<crate::boot::report::BootVmalloc>,
}

impl fmt::Debug for Vmalloc<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vmalloc").field("cfg", &self.cfg).field("lazy_nr", &self.lazy.nr()).finish()
    }
}

/// `x mod nodes` (nodes >= 1): a mask for a power of two (the common
/// 1, 2, 4, ... CPUs), else a division; the same value either way.
#[inline]
pub(crate) fn mod_nodes(x: u64, nodes: usize) -> usize {
    if nodes.is_power_of_two() { (x & (nodes as u64 - 1)) as usize } else { (x % nodes as u64) as usize }
}

/// `fls()`.
pub(crate) const fn fls(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// What `vmalloc_init()` leaves: the free tree, the busy areas per node,
/// and the range kept out of both (the list-head window on a machine
/// without the image: [`crate::reserved`]).
pub(crate) type VmallocInit = (FreeVmapTree, Vec<BusyTree>, Option<(u64, u64)>);

/// `vmalloc_init()` → `vmap_init_free_space()`: the vmalloc range less the
/// early areas (`vmlist`: the kernel image's `declare_kernel_vmas()`
/// areas when the image is in RAM), which become busy areas of the vmap
/// node their address falls in (`addr_to_node()`), listed first in
/// /proc/vmallocinfo; and less the list-head window when no early area
/// holds it.
pub(crate) fn vmalloc_init(m: &Machine, nodes: usize) -> VmallocInit {
    let (mut free, busy) = vmap_init_free_space(m, nodes);
    let reserved = crate::reserved::reserve_list_head_window(&mut free, &m.boot_state().kernel_vmas);
    (free, busy, reserved)
}

/// `vmap_init_free_space()` with the early areas of `vmalloc_init()`.
fn vmap_init_free_space(m: &Machine, nodes: usize) -> (FreeVmapTree, Vec<BusyTree>) {
    let mut busy: Vec<BusyTree> = (0..nodes).map(|_| BTreeMap::new()).collect();
    let vmas = &m.boot_state().kernel_vmas;
    // The early areas tile [VMALLOC_START, end) (declare_kernel_vmas()
    // places them back to back from KIMAGE_VADDR).
    let mut end = VMALLOC_START;
    for v in vmas {
        if v.addr != end {
            break;
        }
        end = v.addr + v.size;
        let area = VmArea {
            addr: v.addr,
            size: v.size,
            flags: if v.no_guard { VM_MAP | VM_NO_GUARD } else { VM_MAP },
            kind: AreaKind::Early,
            pages: Vec::new(),
            requested_size: v.size,
            leaf_entries: 0,
            page_order: 0,
            caller: v.caller,
            array_area: None,
            vn: 0,
            phys_addr: Some(v.phys_addr),
        };
        busy[((v.addr >> 16) % nodes as u64) as usize].insert(v.addr, Box::new(area));
    }
    if end > VMALLOC_START
        && let Ok(t) = FreeVmapTree::new(end, m.va_layout().vmalloc_end())
    {
        return (t, busy);
    }
    (FreeVmapTree::vmalloc_range(m.va_layout().vmalloc_end()), (0..nodes).map(|_| BTreeMap::new()).collect())
}

impl<'a, 'm> Vmalloc<'a, 'm> {
    /// `vmalloc_init()`: the whole vmalloc range free less the early areas
    /// (the kernel image's, when it is in RAM), one vmap node per CPU
    /// (`nr_vmap_nodes` = clamp(CPUs, 1, 128)).
    ///
    /// If vmalloc already made the boot's areas while the allocator booted
    /// (`Vmalloc::boot_before_end_of_boot`), the first `new` over that
    /// allocator picks them up instead ([`Vmalloc::resume`]): one vmalloc
    /// per machine, as in the kernel.
    pub fn new(pa: &'a PageAllocator<'m>, cfg: VmallocConfig) -> Vmalloc<'a, 'm> {
        if let Some(state) = pa.take_boot_state().and_then(|b| b.downcast::<VmallocState>().ok()) {
            return Vmalloc::resume(pa, cfg, *state);
        }
        let m = pa.machine();
        let nodes = m.nr_cpus().clamp(1, 128);
        let (free, busy, reserved) = vmalloc_init(m, nodes);
        Vmalloc {
            pa,
            m,
            asp: m.kernel_as(),
            cfg,
            free: CachePadded::new(SpinLock::new(free)),
            reserved,
            busy: busy.into_iter().map(|b| CachePadded::new(SpinLock::new(b))).collect(),
            lazy: LazyAreas::new(nodes),
            purge_lock: Mutex::new(()),
            counts: Mutex::new(VmallocCounts::default()),
            pcpu_counts: (0..m.nr_cpus()).map(|_| Default::default()).collect(),
            blocks: Mutex::new(BTreeMap::new()),
            pools: (0..nodes)
                .map(|_| {
                    CachePadded::new(SpinLock::new(vec![std::collections::VecDeque::new(); MAX_VA_SIZE_PAGES as usize]))
                })
                .collect(),
            kvfree_pending: Mutex::new(Vec::new()),
            kvfree_nr: AtomicUsize::new(0),
            lock_stats: LockStats::new(m.nr_cpus()),
            boot: Mutex::new(Default::default()),
        }
    }

    /// The switches in force.
    pub fn config(&self) -> VmallocConfig {
        self.cfg
    }
    /// lock_stat's counts of vmalloc's lock classes, summed over the CPUs
    /// (all zero unless the machine's `lock_stat` switch is on).
    pub fn lock_stat(&self) -> VmallocLockStat {
        self.lock_stats.snapshot()
    }

    /// Take `lock` of `class` on `cpu`, counted by lock_stat when it is on.
    #[inline(always)]
    fn lock_on<'l, T>(&self, cpu: &Cpu<'m>, class: VmapLockClass, lock: &'l SpinLock<T>) -> SpinGuard<'l, T> {
        if self.m.config().lock_stat { self.lock_counted(cpu, class, lock) } else { lock.lock() }
    }

    /// [`lock_on`](Self::lock_on) with lock_stat on, out of the default path.
    #[inline(never)]
    fn lock_counted<'l, T>(&self, cpu: &Cpu<'m>, class: VmapLockClass, lock: &'l SpinLock<T>) -> SpinGuard<'l, T> {
        let (g, acq) = lock.lock_stat(cpu.id());
        self.lock_stats.note(cpu.id(), class, acq);
        g
    }

    /// `vn->busy.lock` of the node `addr` belongs to, taken on `cpu`.
    #[inline(always)]
    pub(crate) fn busy_lock(&self, cpu: &Cpu<'m>, addr: u64) -> SpinGuard<'_, BusyTree> {
        self.lock_on(cpu, VmapLockClass::VnBusy, &self.busy[self.node_of(addr)])
    }

    /// `free_vmap_area_lock`, taken on `cpu`.
    #[inline(always)]
    fn free_lock(&self, cpu: &Cpu<'m>) -> SpinGuard<'_, FreeVmapTree> {
        self.lock_on(cpu, VmapLockClass::FreeVmapArea, &self.free)
    }

    /// `vn->pool_lock` of node `vn`, taken on `cpu`.
    #[inline(always)]
    fn pool_lock(&self, cpu: &Cpu<'m>, vn: usize) -> SpinGuard<'_, NodePools> {
        self.lock_on(cpu, VmapLockClass::VnPool, &self.pools[vn])
    }

    /// `vmap_lazy_nr`: pages waiting for a purge. Signed, as the kernel's
    /// `atomic_long_t`; never negative (see the `lazy` module).
    pub fn lazy_nr(&self) -> i64 {
        self.lazy.nr()
    }
    /// `lazy_max_pages()`: fls(online CPUs) × 32 MiB / PAGE_SIZE.
    pub fn lazy_max_pages(&self) -> u64 {
        u64::from(fls(self.m.nr_cpus() as u64)) * ((32 << 20) / PAGE_SIZE)
    }
    /// Refuse a CPU handle of another machine before it can index this
    /// machine's per-cpu data or write into the other machine's tables.
    pub(crate) fn this_machine(&self, cpu: &Cpu<'m>) -> Result<(), VmallocError> {
        if self.m.owns(cpu) { Ok(()) } else { Err(VmallocError::ForeignCpu { cpu: cpu.id() }) }
    }

    /// `addr_to_node_id()`: (addr / 64 KiB) mod nodes.
    #[inline]
    pub(crate) fn node_of(&self, addr: u64) -> usize {
        mod_nodes(addr >> 16, self.busy.len())
    }

    /// `vmalloc(size)`.
    ///
    /// # Errors
    /// [`VmallocError::ZeroSize`], [`VmallocError::TooLarge`], [`VmallocError::BadAlign`],
    /// [`VmallocError::NoVmapSpace`] when no free range is left even after a purge,
    /// [`VmallocError::NoMemory`] when the page allocator or a page table allocation fails,
    /// [`VmallocError::ForeignCpu`]. Nothing is taken on error.
    pub fn vmalloc(&self, cpu: &Cpu<'m>, size: u64) -> Result<u64, VmallocError> {
        self.vmalloc_node(cpu, size, 1, Gfp::GFP_KERNEL, VmFlags::empty(), "vmalloc")
    }
    /// `vzalloc(size)`.
    ///
    /// # Errors
    /// As [`Vmalloc::vmalloc`].
    pub fn vzalloc(&self, cpu: &Cpu<'m>, size: u64) -> Result<u64, VmallocError> {
        self.vmalloc_node(cpu, size, 1, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO, VmFlags::empty(), "vzalloc")
    }
    /// `vmalloc_huge(size, gfp)`: huge mappings allowed.
    ///
    /// # Errors
    /// As [`Vmalloc::vmalloc`]; a huge attempt that runs out of memory falls back to small pages
    /// before failing.
    pub fn vmalloc_huge(&self, cpu: &Cpu<'m>, size: u64, gfp: Gfp) -> Result<u64, VmallocError> {
        self.vmalloc_node(cpu, size, 1, gfp, VM_ALLOW_HUGE_VMAP, "vmalloc_huge")
    }
    /// `__vmalloc_node(size, align, gfp, node)`.
    ///
    /// # Errors
    /// As [`Vmalloc::vmalloc`].
    pub fn __vmalloc_node(&self, cpu: &Cpu<'m>, size: u64, align: u64, gfp: Gfp) -> Result<u64, VmallocError> {
        self.vmalloc_node(cpu, size, align, gfp, VmFlags::empty(), "__vmalloc_node")
    }

    pub(crate) fn vmalloc_node(
        &self,
        cpu: &Cpu<'m>,
        size: u64,
        align: u64,
        gfp: Gfp,
        vm_flags: VmFlags,
        caller: &'static str,
    ) -> Result<u64, VmallocError> {
        self.vmalloc_node_range(cpu, size, align, gfp, PAGE_KERNEL, vm_flags, caller)
    }

    /// `__vmalloc_node_range_noprof()`.
    ///
    /// # Errors
    /// As [`Vmalloc::vmalloc`], and [`VmallocError::Map`] when the page tables refuse the mapping
    /// for another reason than memory.
    #[allow(clippy::too_many_arguments)]
    pub fn vmalloc_node_range(
        &self,
        cpu: &Cpu<'m>,
        size: u64,
        align: u64,
        gfp: Gfp,
        prot: PgProt,
        vm_flags: VmFlags,
        caller: &'static str,
    ) -> Result<u64, VmallocError> {
        self.this_machine(cpu)?;
        let _slice = trace_mmlab::func(cpu.id(), self.m.trace_clock(), caller);
        // might_sleep(): a point where this CPU may be scheduled, which
        // reports a quiescent state to RCU.
        rcu::rcu_quiescent_state(cpu);
        if size == 0 {
            return Err(VmallocError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(VmallocError::BadAlign { align });
        }
        // PAGE_ALIGN(size) without wrapping: a size within a page of 2^64
        // is simply too large (the kernel's `size > totalram` test).
        let real_size = size.checked_next_multiple_of(PAGE_SIZE).ok_or(VmallocError::TooLarge { size })?;
        if real_size > self.pa.managed_pages() * PAGE_SIZE || real_size > self.vmalloc_end() - VMALLOC_START {
            return Err(VmallocError::TooLarge { size });
        }
        if align > self.vmalloc_end() - VMALLOC_START {
            return Err(VmallocError::NoVmapSpace { size, align });
        }
        let huge_ok = self.cfg.vmap_allow_huge && (vm_flags.contains(VM_ALLOW_HUGE_VMAP) || self.cfg.huge_by_default);
        let mut shift = PAGE_SHIFT;
        if huge_ok {
            if self.cfg.pmd && real_size >= PMD_SIZE {
                shift = PMD_SHIFT;
            } else if self.cfg.contpte && real_size >= CONT_PTE_SIZE {
                shift = CONT_PTE_SHIFT;
            }
        }
        if shift > PAGE_SHIFT {
            match self.vmalloc_area(cpu, size, real_size, align.max(1 << shift), shift, gfp, prot, vm_flags, caller) {
                Ok(a) => return Ok(a),
                Err(VmallocError::NoMemory { .. }) => {
                    // Retry with small pages and the caller's alignment.
                    self.counts.lock().huge_fallbacks += 1;
                }
                Err(e) => return Err(e),
            }
        }
        self.vmalloc_area(cpu, size, real_size, align, PAGE_SHIFT, gfp, prot, vm_flags, caller)
    }

    /// `__get_vm_area_node()` + `__vmalloc_area_node()` for one shift.
    #[allow(clippy::too_many_arguments)]
    fn vmalloc_area(
        &self,
        cpu: &Cpu<'m>,
        requested_size: u64,
        real_size: u64,
        align: u64,
        shift: u32,
        gfp: Gfp,
        prot: PgProt,
        vm_flags: VmFlags,
        caller: &'static str,
    ) -> Result<u64, VmallocError> {
        let huge_size = 1u64 << shift;
        let area_size = if self.cfg.align_size_to_huge || shift == PAGE_SHIFT {
            real_size.next_multiple_of(huge_size)
        } else {
            real_size
        };
        let flags = VM_ALLOC | vm_flags;
        let va_size = area_size + if flags.contains(VM_NO_GUARD) { 0 } else { PAGE_SIZE };
        let addr = self.alloc_vmap_area(cpu, va_size, align.max(PAGE_SIZE))?;
        // Step 2: the pages.
        let nr = (area_size / PAGE_SIZE) as usize;
        let array_area = if nr * 8 > PAGE_SIZE as usize {
            // The page array itself is vmalloc'd (bounded recursion).
            match self.vmalloc_node_range(
                cpu,
                (nr * 8) as u64,
                1,
                gfp - Gfp::__GFP_ZERO,
                PAGE_KERNEL,
                VmFlags::empty(),
                "vmalloc pages",
            ) {
                Ok(a) => Some(a),
                Err(e) => {
                    self.free_vmap_area(addr, va_size);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let pages = match self.alloc_pages(cpu, nr, shift, gfp) {
            Ok(p) => p,
            Err(got) => {
                for p in got {
                    let _ = self.pa.free_pages(cpu, p, 0);
                }
                if let Some(a) = array_area {
                    let _ = self.vfree(cpu, a);
                }
                self.free_vmap_area(addr, va_size);
                return Err(VmallocError::NoMemory { size: real_size });
            }
        };
        // Step 3: map.
        let leaf_entries = match self.vmap_pages_range(cpu, addr, &pages, prot, shift) {
            Ok(n) => n,
            Err(e) => {
                let _ = pgtable::unmap_range(cpu, &self.asp, addr, area_size).map(TlbFlush::ignore);
                for &p in &pages {
                    let _ = self.pa.free_pages(cpu, p, 0);
                }
                if let Some(a) = array_area {
                    let _ = self.vfree(cpu, a);
                }
                self.free_vmap_area_noflush(cpu, addr, va_size, self.cpu_node(cpu));
                return Err(match e {
                    PgtableError::NoMemory => VmallocError::NoMemory { size: real_size },
                    other => VmallocError::Map(other),
                });
            }
        };
        self.count_call(cpu, CallCount::PteEntries, leaf_entries);
        let area = VmArea {
            addr,
            size: va_size,
            flags,
            kind: AreaKind::Vmalloc,
            pages,
            requested_size,
            leaf_entries,
            page_order: shift - PAGE_SHIFT,
            caller,
            array_area,
            vn: self.cpu_node(cpu),
            phys_addr: None,
        };
        self.busy_lock(cpu, addr).insert(addr, Box::new(area));
        self.count_call(cpu, CallCount::Vmallocs, 1);
        Ok(addr)
    }

    /// `VMALLOC_END` of the machine's VA layout.
    pub(crate) fn vmalloc_end(&self) -> u64 {
        self.m.va_layout().vmalloc_end()
    }

    /// `alloc_vmap_area()`: cut `size` out of the free tree; on failure purge
    /// the lazy areas and retry once.
    pub(crate) fn alloc_vmap_area(&self, cpu: &Cpu<'m>, size: u64, align: u64) -> Result<u64, VmallocError> {
        let r = self.alloc_vmap_area_inner(cpu, size, align);
        let addr = *r.as_ref().unwrap_or(&self.vmalloc_end());
        trace::alloc_vmap_area(
            cpu.id(),
            self.m.trace_clock(),
            addr,
            size,
            align,
            VMALLOC_START,
            self.vmalloc_end(),
            r.is_err(),
        );
        r
    }

    fn alloc_vmap_area_inner(&self, cpu: &Cpu<'m>, size: u64, align: u64) -> Result<u64, VmallocError> {
        if let Some(a) = self.node_alloc(cpu, size, align) {
            return Ok(a);
        }
        for attempt in 0..2 {
            if let Ok(a) = self.free_lock(cpu).alloc(size, align, VMALLOC_START, self.vmalloc_end()) {
                return Ok(a);
            }
            if attempt == 0 {
                // reclaim_and_purge_vmap_areas(): purge with a full pool decay.
                self.purge(cpu, true);
            }
        }
        Err(VmallocError::NoVmapSpace { size, align })
    }

    /// The vmap node of `cpu` (`cpu % nr_vmap_nodes`).
    #[inline]
    pub(crate) fn cpu_node(&self, cpu: &Cpu<'m>) -> usize {
        mod_nodes(cpu.id() as u64, self.busy.len())
    }

    /// `node_alloc()`: with more than one vmap node, a request of at most
    /// `MAX_VA_SIZE_PAGES` pages first tries the CPU's node pool of that
    /// size; the first range is taken if it is aligned, else it is rotated
    /// to the tail and the free tree is searched.
    fn node_alloc(&self, cpu: &Cpu<'m>, size: u64, align: u64) -> Option<u64> {
        if self.busy.len() < 2 || size / PAGE_SIZE > MAX_VA_SIZE_PAGES {
            return None;
        }
        let mut pools = self.pool_lock(cpu, self.cpu_node(cpu));
        let pool = &mut pools[(size / PAGE_SIZE - 1) as usize];
        let first = pool.pop_front()?;
        if first.is_multiple_of(align) {
            return Some(first);
        }
        pool.push_back(first);
        None
    }

    /// Give a never-mapped range straight back to the free tree.
    fn free_vmap_area(&self, addr: u64, size: u64) {
        self.free.lock().free(addr, size).expect("a range just cut out of the free tree goes back in");
    }

    /// `vmap_pages_range()`: map `pages` at `addr`; returns the leaf
    /// entries written (one per PTE, one per PMD block).
    pub(crate) fn vmap_pages_range(
        &self,
        cpu: &Cpu<'m>,
        addr: u64,
        pages: &[Pfn],
        prot: PgProt,
        shift: u32,
    ) -> Result<u64, PgtableError> {
        let block = 1usize << (shift - PAGE_SHIFT);
        let mut entries = 0;
        let mut i = 0;
        while i < pages.len() {
            let va = addr + i as u64 * PAGE_SIZE;
            let phys = pages[i].phys().0;
            let whole = shift > PAGE_SHIFT && pages.len() - i >= block;
            if whole && shift == PMD_SHIFT {
                // vmap_range_noflush() of one 2 MiB block.
                let pmd = pmd_alloc(cpu, &self.asp, self.pa, va)?;
                if try_huge_pmd(cpu, self.pa, pmd, va, phys, prot)? {
                    i += block;
                    entries += 1;
                    continue;
                }
            }
            // vmap_pte_range(): one PTE table, one lazy-MMU section.
            let table = pte_alloc_kernel(cpu, &self.asp, self.pa, va)?;
            let first = pgtable::Level::Pte.index(va);
            let in_table = (512 - first).min(pages.len() - i);
            let end = if whole { i + block.min(in_table) } else { i + in_table };
            arch_enter_lazy_mmu_mode(cpu);
            let mut r = Ok(());
            let mut j = i;
            while j < end {
                let v = addr + j as u64 * PAGE_SIZE;
                let p = pages[j].phys().0;
                let idx = pgtable::Level::Pte.index(v);
                let cont = shift > PAGE_SHIFT
                    && self.cfg.contpte
                    && end - j >= CONT_PTES
                    && (v | p).is_multiple_of(CONT_PTE_SIZE)
                    && (1..CONT_PTES).all(|k| pages[j + k].phys().0 == p + k as u64 * PAGE_SIZE);
                if cont {
                    // arch_make_huge_pte + set_huge_pte_at: one run of 16.
                    r = pgtable::set_ptes(
                        cpu,
                        pgtable::entry_pa(table.pa(), idx),
                        Desc::page(p, prot.mkcont()),
                        CONT_PTES,
                        PAGE_SIZE,
                    );
                    j += CONT_PTES;
                } else {
                    r = table.set_pte(cpu, idx, Desc::page(p, prot));
                    j += 1;
                }
                if r.is_err() {
                    break;
                }
            }
            arch_leave_lazy_mmu_mode(cpu);
            r?;
            entries += (end - i) as u64;
            i = end;
        }
        Ok(entries)
    }

    /// `find_unlink_vmap_area()`: take the area starting at `addr` out of
    /// its busy tree, telling apart the ways `addr` can be wrong.
    pub(crate) fn find_unlink(&self, cpu: &Cpu<'m>, addr: u64) -> Result<Box<VmArea>, VmallocError> {
        if let Some(a) = self.busy_lock(cpu, addr).remove(&addr) {
            return Ok(a);
        }
        Err(self.no_area_at(addr))
    }

    /// [`Vmalloc::find_unlink`] for a free of one `kind` of area: an area
    /// of another kind goes back where it was and the free is
    /// [`VmallocError::WrongKind`] (vfree of a vmap, vunmap of a vmalloc, ...).
    pub(crate) fn find_unlink_kind(
        &self,
        cpu: &Cpu<'m>,
        addr: u64,
        kind: AreaKind,
    ) -> Result<Box<VmArea>, VmallocError> {
        let area = self.find_unlink(cpu, addr)?;
        if area.kind != kind {
            self.busy[self.node_of(addr)].lock().insert(addr, area);
            return Err(VmallocError::WrongKind { addr });
        }
        Ok(area)
    }

    /// Why no busy area starts at `addr`: inside one, freed (lazy), or never
    /// returned.
    pub(crate) fn no_area_at(&self, addr: u64) -> VmallocError {
        for node in self.busy.iter() {
            let b = node.lock();
            if let Some((&start, a)) = b.range(..addr).next_back()
                && addr < start + a.size
            {
                return VmallocError::InsideArea { addr, start };
            }
        }
        if self.lazy.contains(addr) {
            return VmallocError::DoubleFree { addr };
        }
        VmallocError::NotVmalloc { addr }
    }

    /// `vfree(addr)`.
    ///
    /// # Errors
    /// [`VmallocError::NotVmalloc`] for an address never returned, [`VmallocError::InsideArea`] for
    /// one inside an area, [`VmallocError::DoubleFree`] for an area already freed (lazy or queued
    /// by `kvfree_rcu`), [`VmallocError::WrongKind`] for a vmap or vm_map_ram area,
    /// [`VmallocError::ForeignCpu`]. Nothing is changed.
    pub fn vfree(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        let _slice = trace_mmlab::func(cpu.id(), self.m.trace_clock(), "vfree");
        // vfree() may sleep (cond_resched between page frees): a quiescent state.
        rcu::rcu_quiescent_state(cpu);
        if self.kvfree_nr.load(Acquire) != 0 {
            self.kvfree_drain_ready(cpu);
            // Queued by kvfree_rcu and not yet freed: the queue owns it, and
            // this vfree is a second free (found by `mmlab fuzz`).
            if self.kvfree_pending.lock().iter().any(|q| q.addr == addr) {
                return Err(VmallocError::DoubleFree { addr });
            }
        }
        let area = self.find_unlink_kind(cpu, addr, AreaKind::Vmalloc)?;
        self.remove_vm_area(cpu, &area);
        self.count_call(cpu, CallCount::PteEntries, area.leaf_entries);
        // Physical pages go back before any TLB flush (vm_area_free_pages).
        self.free_area_pages(cpu, &area.pages);
        if let Some(a) = area.array_area {
            self.vfree(cpu, a)?;
        }
        self.count_call(cpu, CallCount::Vfrees, 1);
        Ok(())
    }

    /// `remove_vm_area()` → `free_unmap_vmap_area()`: unmap without a flush,
    /// then the range goes lazy.
    pub(crate) fn remove_vm_area(&self, cpu: &Cpu<'m>, area: &VmArea) {
        let mapped = area.usable_size();
        // vunmap_range_noflush: no TLB maintenance, the purge flushes.
        pgtable::vunmap_range_noflush(cpu, &self.asp, area.addr, mapped).expect("a vmalloc area is mapped whole");
        self.free_vmap_area_noflush(cpu, area.addr, area.size, area.vn);
    }

    /// `free_vmap_area_noflush()`: counted in `vmap_lazy_nr`, then onto the
    /// lazy list (in that order: see the `lazy` module) of node `vn`, the
    /// node of the CPU that allocated the area (the kernel decodes it from
    /// `va->flags`; with one node it is node 0, `addr_to_node()`'s answer
    /// too), so that the purge returns the range to that node's pool;
    /// purge past the limit.
    pub(crate) fn free_vmap_area_noflush(&self, cpu: &Cpu<'m>, addr: u64, size: u64, vn: usize) {
        let area = LazyArea { start: addr, size, vn };
        let node = vn % self.busy.len();
        let nr = if self.m.config().lock_stat {
            let (nr, nr_acq, lock_acq) = self.lazy.add_stat(node, area, cpu.id());
            self.lock_stats.note(cpu.id(), VmapLockClass::VmapLazyNr, nr_acq);
            self.lock_stats.note(cpu.id(), VmapLockClass::VnLazy, lock_acq);
            nr
        } else {
            self.lazy.add(node, area)
        };
        trace::free_vmap_area_noflush(cpu.id(), self.m.trace_clock(), addr, nr.max(0) as u64, self.lazy_max_pages());
        if nr > self.lazy_max_pages() as i64 {
            // The kernel schedules drain_vmap_work; mmlab runs it here.
            self.purge(cpu, false);
        }
    }

    /// `__purge_vmap_area_lazy()`: one TLB flush over the span of every
    /// lazy area, then the ranges go back to the free tree. Returns whether
    /// anything was purged.
    ///
    /// # Errors
    /// [`VmallocError::ForeignCpu`] only.
    pub fn purge_vmap_area_lazy(&self, cpu: &Cpu<'m>) -> Result<bool, VmallocError> {
        self.this_machine(cpu)?;
        Ok(self.purge(cpu, false))
    }

    /// `__purge_vmap_area_lazy(start, end, full_decay)`: decay the node
    /// pools (a quarter of each, or all), flush the TLB once over every
    /// lazy range, then put each range in its node's pool (if small) or
    /// back in the free tree.
    fn purge(&self, cpu: &Cpu<'m>, full_decay: bool) -> bool {
        let _g = self.purge_lock.lock();
        let mut decayed = Vec::new();
        for vn in 0..self.pools.len() {
            for (i, pool) in self.pool_lock(cpu, vn).iter_mut().enumerate() {
                let n = if full_decay { pool.len() } else { pool.len() / 4 };
                decayed.extend(pool.drain(..n).map(|a| (a, (i as u64 + 1) * PAGE_SIZE)));
            }
        }
        if !decayed.is_empty() {
            let mut free = self.free_lock(cpu);
            for (a, n) in decayed {
                free.free(a, n).expect("a pooled range was cut out of the free tree");
            }
        }
        let all = self.lazy.take_all();
        if all.is_empty() {
            return false;
        }
        let _slice = trace_mmlab::func(cpu.id(), self.m.trace_clock(), "__purge_vmap_area_lazy");
        let start = all.iter().map(|a| a.start).min().unwrap_or(0);
        let end = all.iter().map(|a| a.start + a.size).max().unwrap_or(0);
        TlbFlush::kernel_range(start, end).flush(cpu);
        // purge_vmap_node(): each small range to its node's pool, under
        // that pool's lock alone (node_pool_add_va()); the others back to
        // the free tree under one hold of the free lock
        // (reclaim_list_global()), so that a CPU allocating meanwhile
        // waits on the free lock only while they go in.
        let mut pages = 0;
        let mut global = Vec::new();
        for &LazyArea { start: s, size: n, vn } in &all {
            pages += n / PAGE_SIZE;
            if self.busy.len() > 1 && n / PAGE_SIZE <= MAX_VA_SIZE_PAGES {
                self.pool_lock(cpu, vn % self.pools.len())[(n / PAGE_SIZE - 1) as usize].push_front(s);
            } else {
                global.push((s, n));
            }
        }
        if !global.is_empty() {
            let mut free = self.free_lock(cpu);
            for (s, n) in global {
                free.free(s, n).expect("a purged range was cut out of the free tree");
            }
        }
        self.lazy.purged(pages as i64);
        trace::purge_vmap_area_lazy(cpu.id(), self.m.trace_clock(), start, end, all.len() as u32);
        let mut c = self.counts.lock();
        c.purges += 1;
        c.purged_pages += pages;
        true
    }

    /// `find_vmap_area()`: whether a busy area starts at `addr` (any kind),
    /// without copying it.
    pub fn is_busy_area(&self, addr: u64) -> bool {
        self.busy[self.node_of(addr)].lock().contains_key(&addr)
    }

    /// Visit every busy area, node by node (not by address), without copying
    /// them: for sums over the areas (what `areas()` would give, minus the
    /// copies and the sort).
    pub fn for_each_area(&self, mut f: impl FnMut(&VmArea)) {
        for b in self.busy.iter() {
            for a in b.lock().values() {
                f(a);
            }
        }
    }

    /// Every busy area, by address (for /proc/vmallocinfo and checks).
    pub fn areas(&self) -> Vec<VmArea> {
        let mut v: Vec<VmArea> =
            self.busy.iter().flat_map(|b| b.lock().values().map(|a| (**a).clone()).collect::<Vec<_>>()).collect();
        v.sort_by_key(|a| a.addr);
        v
    }

    /// Free bytes of the vmalloc range (the free tree, lazy areas excluded).
    pub fn free_bytes(&self) -> u64 {
        self.free.lock().free_bytes()
    }
}

/// A `kvfree_rcu` object waiting for its grace period.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvfreeQueued {
    /// The vmalloc address to free.
    pub(crate) addr: u64,
    /// The grace period it waits for (`start_poll_synchronize_rcu`).
    pub(crate) cookie: rcu::RcuCookie,
}

impl<'m> Vmalloc<'_, 'm> {
    /// Counters.
    pub fn counts(&self) -> VmallocCounts {
        let mut c = *self.counts.lock();
        for counts in self.pcpu_counts.iter() {
            let [vmallocs, vfrees, pte_entries, vm_map_rams, vm_unmap_rams] = &**counts;
            c.vmallocs += vmallocs.load(Relaxed);
            c.vfrees += vfrees.load(Relaxed);
            c.pte_entries += pte_entries.load(Relaxed);
            c.vm_map_rams += vm_map_rams.load(Relaxed);
            c.vm_unmap_rams += vm_unmap_rams.load(Relaxed);
        }
        c
    }

    /// Add `n` to this CPU's call counter `which`.
    #[inline(always)]
    pub(crate) fn count_call(&self, cpu: &Cpu<'m>, which: CallCount, n: u64) {
        this_cpu_add(&self.pcpu_counts[cpu.id()][which as usize], n);
    }
}

/// vmalloc's state without the allocator it borrows: the boot's vmalloc
/// areas are made while the page allocator is still booting (before the end
/// of boot frees the initrd and the init sections, as on the real boot:
/// `PageAllocator::boot_with`), by a [`Vmalloc`] that cannot outlive that
/// step; [`Vmalloc::into_state`] keeps what it made and
/// [`Vmalloc::resume`] picks it up over the booted allocator.
/// Everything a [`Vmalloc`] holds but its borrows and its configuration:
/// the free tree, the busy areas, the lazy lists, the node pools, the vmap
/// blocks, the counters, the boot's report.
pub struct VmallocState {
    free: crossbeam::utils::CachePadded<mmlab_engine::sync::SpinLock<crate::vmap_area::FreeVmapTree>>,
    busy: Box<[crossbeam::utils::CachePadded<mmlab_engine::sync::SpinLock<crate::vmalloc::BusyTree>>]>,
    lazy: crate::lazy::LazyAreas,
    counts: mmlab_engine::sync::Mutex<crate::VmallocCounts>,
    pcpu_counts: Box<[crossbeam::utils::CachePadded<[std::sync::atomic::AtomicU64; crate::counts::NR_CALL_COUNTS]>]>,
    blocks: mmlab_engine::sync::Mutex<std::collections::BTreeMap<u64, crate::vmap_block::VmapBlock>>,
    pools: Box<[crossbeam::utils::CachePadded<mmlab_engine::sync::SpinLock<crate::vmalloc::NodePools>>]>,
    kvfree_pending: mmlab_engine::sync::Mutex<Vec<crate::vmalloc::KvfreeQueued>>,
    kvfree_nr: std::sync::atomic::AtomicUsize,
    lock_stats: crate::lockstat::LockStats,
    boot: mmlab_engine::sync::Mutex<crate::boot::report::BootVmalloc>,
    reserved: Option<(u64, u64)>,
}

impl fmt::Debug for VmallocState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VmallocState").field("lazy_nr", &self.lazy.nr()).finish()
    }
}

impl<'a, 'm> Vmalloc<'a, 'm> {
    /// Keep this vmalloc's state, to [`resume`](Vmalloc::resume) it over
    /// the same machine's allocator later.
    pub fn into_state(self) -> VmallocState {
        let Vmalloc {
            free,
            busy,
            lazy,
            counts,
            pcpu_counts,
            blocks,
            pools,
            kvfree_pending,
            kvfree_nr,
            lock_stats,
            boot,
            reserved,
            ..
        } = self;
        VmallocState {
            free,
            busy,
            lazy,
            counts,
            pcpu_counts,
            blocks,
            pools,
            kvfree_pending,
            kvfree_nr,
            lock_stats,
            boot,
            reserved,
        }
    }

    /// vmalloc over `pa` with `state`, which a [`Vmalloc`] over the same
    /// machine's allocator left ([`Vmalloc::into_state`]); `vmalloc_init()`
    /// is not run again. A state of another machine is a caller's bug the
    /// tables would not survive: `pa`'s machine must be the one it was
    /// made on.
    pub fn resume(pa: &'a PageAllocator<'m>, cfg: crate::VmallocConfig, state: VmallocState) -> Vmalloc<'a, 'm> {
        let m = pa.machine();
        let VmallocState {
            free,
            busy,
            lazy,
            counts,
            pcpu_counts,
            blocks,
            pools,
            kvfree_pending,
            kvfree_nr,
            lock_stats,
            boot,
            reserved,
        } = state;
        Vmalloc {
            pa,
            m,
            asp: m.kernel_as(),
            cfg,
            free,
            busy,
            lazy,
            purge_lock: mmlab_engine::sync::Mutex::new(()),
            counts,
            pcpu_counts,
            blocks,
            pools,
            kvfree_pending,
            kvfree_nr,
            lock_stats,
            boot,
            reserved,
        }
    }
}
