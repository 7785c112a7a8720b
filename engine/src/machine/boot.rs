//! Building a [`Machine`]: boot.
//!
//! [`Machine::boot`] does what arm64's `setup_arch()` / `bootmem_init()` and
//! mm_init's early steps do for the page allocator's benefit:
//!
//! 1. map the arena (RAM at [`PHYS_OFFSET`]) and register it with memblock;
//!    with the real boot state (`boot.state=real`), reserve the DTB, the
//!    kernel image and the initrd, then make the boot's memblock
//!    allocations in the kernel's order and at its sizes: the linear map's
//!    tables, the device tree, `NODE_DATA`, the CMA area, sparse's roots,
//!    usemap and vmemmap tables, the memmap, the command line, the first
//!    percpu chunk, the dentry and inode hash tables
//!    ([`crate::mm::boot_state`], [`crate::mm::boot_allocs`]);
//! 2. allocate the memmap (64 bytes per frame) and the pageblock flags from
//!    memblock, top-down, as sparse_init/vmemmap_populate and
//!    `setup_usemap()` do;
//! 3. initialise every struct page (`memmap_init_range()` →
//!    `__init_single_page()`: zone and node in `flags`, refcount 1, no page
//!    type, an empty `lru`), mark every pageblock MOVABLE, and mark reserved
//!    frames PG_reserved (`reserve_bootmem_region()`);
//! 4. unless `arm64.linear_map=0`, `paging_init()`: `early_fixmap_init()`
//!    and `map_mem()` build the linear map ([`crate::arch::arm64::mmu`]);
//!    with the image, `mark_linear_text_alias_ro()` and `mark_rodata_ro()`
//!    follow (the "rodata ro" phase);
//! 5. map the memmap at the vmemmap (`vmemmap_populate()`);
//! 6. with the real boot state: `swiotlb_init()`, then what the end of boot
//!    gives back (the initrd, the init sections) — "end of boot".
//!
//! Handing the unreserved frames to the buddy allocator
//! (`memblock_free_all()`) is left to the allocator crate, which owns the
//! zone: it calls [`Machine::memblock`] and [`crate::mm::memblock::Memblock::for_each_free_block`].
//!
//! Faithful: memmap contents and layout, memblock's top-down placement, the
//! order of initialisation. Simplified: one node, one zone (Normal), one
//! contiguous memmap (the vmemmap mapping of it arrives with the page tables).

use super::{BootError, ImageTables, Machine, MachineConfig, MemblockTables, NR_CPUS};
use crate::addr::{PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr};
use crate::arch::arm64::cpu::{ArchCpuData, Arm64};
use crate::arch::arm64::memory::PHYS_OFFSET;
use crate::arena::Arena;
use crate::kernel::cpu::CpuData;
use crate::mm::PAGEBLOCK_ORDER;
use crate::mm::banks::check_banks;
use crate::mm::boot_allocs;
use crate::mm::boot_state::{self, BootState, BootStateReport};
use crate::mm::memblock::Memblock;
use crate::mm::memmap::{Memmap, MemmapPiece, PAGES_PER_SECTION};

use crate::mm::mm_init::{self, BootPhase, first_deferred_pfn};
use crate::mm::page::{NODES_PGSHIFT, PageExt, STRUCT_PAGE_SIZE, pg};
use crate::mm::zone_layout;
use crate::sync::Mutex;
use crate::trace::TraceClock;
use crossbeam::utils::CachePadded;

impl Machine {
    /// Build and boot a machine (see the module documentation).
    ///
    /// # Errors
    ///
    /// [`BootError::Mem`] for RAM banks the machine cannot have (sizes, holes, the linear map's
    /// reach: [`crate::mm::banks`]); [`BootError::Config`] for a CPU count outside
    /// 1..=`NR_CPUS`; [`BootError::Arena`] if the host refuses the RAM mapping;
    /// [`BootError::Memblock`] or [`BootError::Pgtable`] if the memmap, the usemap or the vmemmap
    /// tables cannot be placed.
    pub fn boot(config: MachineConfig) -> Result<Machine, BootError> {
        let t_start = std::time::Instant::now();
        let mut banks = config.banks();
        check_banks(&mut banks).map_err(BootError::Mem)?;
        let total: u64 = banks.iter().map(|b| b.size).sum();
        if total != config.mem_bytes {
            return Err(BootError::Config(format!(
                "mem_bytes {:#x} is not the sum of the memory banks ({total:#x})",
                config.mem_bytes
            )));
        }
        if config.nr_cpus == 0 || config.nr_cpus > NR_CPUS {
            return Err(BootError::Config(format!("cpus must be between 1 and {NR_CPUS}, got {}", config.nr_cpus)));
        }
        let span = banks[banks.len() - 1].end() - PHYS_OFFSET;
        let arena = Arena::new(PhysAddr(PHYS_OFFSET), span).map_err(BootError::Arena)?;
        let mut mb = Memblock::default();
        for b in &banks {
            mb.add(PhysAddr(b.base), b.size);
        }
        let bank_pfns: Vec<(u64, u64)> = banks.iter().map(|b| (b.base >> PAGE_SHIFT, b.end() >> PAGE_SHIFT)).collect();
        // The early reservations of a real boot (mm::boot_state): the DTB,
        // the kernel image and the initrd (arm64_memblock_init()), then the
        // CMA area below the DMA zone's limit (dma_contiguous_reserve()).
        let dram_end = banks[banks.len() - 1].end();
        let (max_zone_pfn, arm64_dma_phys_limit) =
            zone_layout::arm64_zone_sizes_init(banks[0].base, dram_end, u64::MAX);
        let (in_force, reason) = config.boot_state_in_force();
        let real = in_force == BootState::Real;
        let image = config.kernel_image().then_some(crate::arch::arm64::kimage::KernelImage::DEBIAN_7_2);
        let mut boot_state = BootStateReport {
            requested: config.boot_state,
            in_force,
            reason,
            kernel_image: image,
            ..Default::default()
        };
        boot_state::arm64_memblock_init(
            &mut mb,
            image.as_ref(),
            real,
            (banks[0].base, total),
            &mut boot_state.reservations,
        )?;
        // paging_init() -> map_mem(): the linear map's tables come from
        // memblock first, top-down, page by page; taken here, at the
        // kernel's point, and handed to map_mem() when it runs below.
        let mut table_pool = std::collections::VecDeque::new();
        if config.linear_map && real {
            let memory: Vec<(u64, u64)> = mb.memory().iter().map(|r| (r.base.0, r.end())).collect();
            if let Some(n) =
                crate::arch::arm64::mmu::map_mem_table_pages(&config.map_mem_options(), &memory, config.va_layout())
            {
                for _ in 0..n {
                    table_pool.push_back(mb.alloc(PAGE_SIZE, PAGE_SIZE, "pgtable")?);
                }
            }
        }
        let nr_cpus = config.nr_cpus as u64;
        if real {
            boot_allocs::setup_arch_early(&mut mb, nr_cpus, &mut boot_state.reservations)?;
            boot_state.cma =
                boot_state::dma_contiguous_reserve(&mut mb, arm64_dma_phys_limit, &mut boot_state.reservations);
        }
        if let Some(k) = &image {
            boot_state.kernel_vmas = k.kernel_vmas().to_vec();
        }

        // The memmap: the present sections' struct pages, one buffer
        // (sparse_buffer_init); vmemmap_populate() backs it with PMD-sized blocks.
        let pieces = MemmapPiece::for_banks(&bank_pfns);
        let nr_pages = span >> PAGE_SHIFT;
        let memmap_pages: u64 = pieces.iter().map(|p| p.end_pfn - p.start_pfn).sum();
        let memmap_bytes = (memmap_pages * STRUCT_PAGE_SIZE).next_multiple_of(PAGE_SIZE);
        // Pageblock flags (usemap), one byte per pageblock here.
        let nr_pageblocks = nr_pages.div_ceil(1 << PAGEBLOCK_ORDER) as usize;
        // sparse_init(): with the real boot state the section roots, the
        // usemap and the vmemmap's tables come before the memmap's blocks,
        // as the kernel takes them (mmlab's own usemap, a byte per
        // pageblock, fits in the kernel's 88 bytes per section unless holes
        // widen the span); bare, the memmap first and mmlab's usemap.
        let (memmap_pa, usemap_pa) = if real {
            let usemap_bytes =
                (memmap_pages.div_ceil(PAGES_PER_SECTION) * boot_allocs::USEMAP_PER_SECTION).max(nr_pageblocks as u64);
            let (usemap, tables) = boot_allocs::sparse_init_early(
                &mut mb,
                boot_allocs::mem_section_roots_bytes(config.va_layout()),
                section_roots(&bank_pfns),
                usemap_bytes,
                memmap_bytes,
                &mut boot_state.reservations,
            )?;
            table_pool.extend(tables);
            (mb.alloc(memmap_bytes, 2 << 20, "memmap")?, usemap)
        } else {
            let memmap = mb.alloc(memmap_bytes, 2 << 20, "memmap")?;
            (memmap, mb.alloc((nr_pageblocks as u64).next_multiple_of(64), 64, "usemap")?)
        };
        if real {
            // free_area_init() counted nr_kernel_pages before
            // setup_per_cpu_areas() and vfs_caches_init_early() ran.
            let nr_kernel_pages: u64 =
                mb.free_ranges().iter().map(|&(s, e)| (e >> PAGE_SHIFT).saturating_sub(s.div_ceil(PAGE_SIZE))).sum();
            boot_allocs::start_kernel_early(
                &mut mb,
                nr_cpus,
                config.cmdline().len() as u64,
                nr_kernel_pages,
                &mut boot_state.reservations,
            )?;
            if config.kfence_sample_interval != 0 {
                boot_allocs::kfence_alloc_metadata(&mut mb, &mut boot_state.reservations)?;
            }
        }

        let first_deferred = if config.deferred_struct_page_init { first_deferred_pfn(&bank_pfns) } else { u64::MAX };
        // zone_sizes_init() → free_area_init(): the zones' limits (above);
        // each struct page gets its zone number from them (__init_single_page).
        let bank_ranges: Vec<(u64, u64)> = banks.iter().map(|b| (b.base, b.size)).collect();
        let zone_spans = zone_layout::free_area_init(&max_zone_pfn, &bank_ranges);
        let init_flags = 0 << NODES_PGSHIFT;
        // SAFETY: the memmap buffer was just taken from memblock inside
        // `arena` (2 MiB-aligned, as long as the pieces' struct pages rounded
        // up to a page); the Machine owns the arena and drops it after the
        // Memmap (field order), and the mapping never moves.
        let memmap = unsafe {
            Memmap::new(memmap_pa, &pieces, first_deferred, init_flags, max_zone_pfn, &arena, config.va_layout())
        };

        let nr_cpus = config.nr_cpus;
        let cpus = (0..config.nr_cpus).map(|_| CachePadded::new(CpuData::default())).collect();
        let arch_cpus = (0..config.nr_cpus).map(|_| CachePadded::new(ArchCpuData::new(config.tlb_entries))).collect();
        // swapper_pg_dir: one page of the image (before __init_begin), or
        // from memblock on a machine without it; zeroed.
        let swapper_pg_dir = match &image {
            Some(k) => PhysAddr(k.init_begin() - PAGE_SIZE),
            None => mb.alloc(PAGE_SIZE, PAGE_SIZE, "pgtable")?,
        };
        arena.zero(swapper_pg_dir, PAGE_SIZE);
        let t_memblock = t_start.elapsed();
        let arch = Arm64 {
            barrier_backend: config.barrier_backend,
            lazy_mmu_barrier_batching: config.lazy_mmu_barrier_batching,
            tlbi_range: config.tlbi_range(),
            cost_profile: config.cost_profile,
            swapper_pg_dir,
            va: config.va_layout(),
        };
        let mut m = Machine {
            config,
            arch,
            arch_cpus,
            memmap,
            pageblock_flags: usemap_pa,
            nr_pageblocks,
            zone_spans,
            arena,
            memblock: Mutex::new(mb),
            memblock_released: std::sync::atomic::AtomicBool::new(false),
            cpus,
            trace_clock: TraceClock::new(),
            rcu: crate::kernel::rcu::RcuState::new(nr_cpus),
            fixmap: Mutex::new(None),
            linear_map: None,
            boot_phases: Vec::new(),
            boot_state,
            table_pool: Mutex::new(table_pool),
        };
        let ((), p) = m.measure_phase("memmap init", "memmap_init() (struct pages below first_deferred_pfn)", || {
            mm_init::memmap_init(&m.memmap, m.pageblock_flags(), &m.memblock.lock(), &bank_pfns);
            m.memmap.set_pgd(swapper_pg_dir);
        });
        let mut phases = vec![
            BootPhase {
                name: "memblock",
                kernel: "arm64_memblock_init(), the boot's memblock allocations (boot_allocs), the memmap",
                host_ns: ns(t_memblock),
                tlbi: Default::default(),
                barriers: Default::default(),
            },
            p,
        ];
        if let Some(k) = image {
            // map_kernel() (early C code since 6.9, before paging_init()).
            let (r, p) = m.measure_phase("kernel image map", "map_kernel() (pi/map_kernel.c)", || {
                let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
                crate::arch::arm64::kimage::map_kernel(
                    &cpu0,
                    &crate::arch::arm64::pgtable::init_mm(&cpu0),
                    &ImageTables::init_pg_dir(&m, &k),
                    &k,
                    m.config.rodata.enabled(),
                    !m.config.linear_map,
                )
                .map_err(BootError::Pgtable)
            });
            r?;
            phases.push(p);
        }
        if m.config.linear_map {
            // paging_init() on the boot CPU: early_fixmap_init(), map_mem().
            let (r, p) = m.measure_phase("linear map", "paging_init() -> early_fixmap_init(), map_mem()", || {
                let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
                let pgtbl = m.kernel_image().map(|k| ImageTables::pgtbl(&m, k));
                let statics: &dyn crate::arch::arm64::cpu::EarlyAlloc = match &pgtbl {
                    Some(t) => t,
                    None => &m,
                };
                let fdt =
                    m.boot_state.reservations.iter().find(|r| r.name == "dtb").map(|r| (PhysAddr(r.base), r.size));
                crate::arch::arm64::mmu::paging_init(
                    &cpu0,
                    &m,
                    statics,
                    &m.config.map_mem_options(),
                    m.kernel_image(),
                    fdt,
                )
                .map_err(BootError::LinearMap)
            });
            let (fixmap, report) = r?;
            *m.fixmap.lock() = Some(fixmap);
            m.linear_map = Some(report);
            phases.push(p);
        }
        // bootmem_init() → sparse_init() on the boot CPU: map the memmap at
        // the vmemmap.
        let (r, p) = m.measure_phase("vmemmap", "sparse_init() -> vmemmap_populate()", || {
            let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
            crate::mm::sparse_vmemmap::vmemmap_populate(
                &cpu0,
                &crate::arch::arm64::pgtable::init_mm(&cpu0),
                &MemblockTables(&m),
                &m.memmap,
                memmap_pa,
            )
            .map_err(BootError::Pgtable)
        });
        r?;
        phases.push(p);
        if let (Some(k), true) = (image, m.config.linear_map) {
            // smp_cpus_done() -> mark_linear_text_alias_ro(); kernel_init()
            // -> mark_readonly() -> mark_rodata_ro() when rodata is enabled.
            let (r, p) = m.measure_phase(
                "rodata ro",
                "mark_linear_text_alias_ro(), mark_rodata_ro() (update_mapping_prot())",
                || -> Result<(), BootError> {
                    let cpu0 = m.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
                    let mut fixmap = m.fixmap.lock();
                    let fixmap = fixmap.as_mut().ok_or_else(|| BootError::Config("no fixmap".into()))?;
                    let v = m.config.linear_map_variant;
                    crate::arch::arm64::mmu::mark_linear_text_alias_ro(&cpu0, fixmap, v, &k)
                        .map_err(BootError::LinearMap)?;
                    if m.config.rodata.enabled() {
                        crate::arch::arm64::mmu::mark_rodata_ro(&cpu0, fixmap, v, &k).map_err(BootError::LinearMap)?;
                    }
                    Ok(())
                },
            );
            r?;
            phases.push(p);
        }
        if real {
            let (r, p) = m.measure_phase(
                "end of boot",
                "mem_init() -> swiotlb_init(); free_initrd_mem(), free_initmem()",
                || m.end_of_boot(arm64_dma_phys_limit),
            );
            let (swiotlb, given_back) = r?;
            m.boot_state.reservations.extend(swiotlb);
            m.boot_state.given_back = given_back;
            phases.push(p);
        }
        m.boot_phases = phases;
        Ok(m)
    }

    /// The real boot state's last steps: `swiotlb_init()` from
    /// `mem_init()`, then what the kernel gives back once boot is done:
    /// the initrd (`free_initrd_mem()`) and the init sections
    /// (`free_initmem()`: `memblock_free()`, the pages cleared of
    /// PG_reserved, and `vunmap_range()` of the init segment at
    /// `KIMAGE_VADDR`, its vmalloc areas kept).
    #[allow(clippy::type_complexity)]
    fn end_of_boot(&self, dma_limit: u64) -> Result<(Vec<boot_state::BootReservation>, Vec<(u64, u64)>), BootError> {
        let mut mb = self.memblock.lock();
        let mut swiotlb = Vec::new();
        boot_state::swiotlb_init(&mut mb, dma_limit, self.config.nr_cpus as u64, &mut swiotlb)?;
        let mut freed: Vec<(u64, u64)> = Vec::new();
        if let Some(r) = self.boot_state.reservations.iter().find(|r| r.name == "initrd") {
            freed.push((r.base, r.freed_at_end_of_boot));
        }
        if let Some(k) = &self.boot_state.kernel_image {
            freed.push((k.init_begin(), k.init));
        }
        // The pages stay reserved here: the page allocator gives them back
        // after its own initcalls (`free_reserved_area()`, one page at a
        // time through the pcp), as the kernel does from
        // `populate_rootfs()` and `kernel_init()`.
        drop(mb);
        // The swiotlb pages were reserved after memmap_init(): mark them.
        for r in &swiotlb {
            for pfn in r.base >> PAGE_SHIFT..(r.base + r.size).div_ceil(PAGE_SIZE) {
                let p = self.memmap.page(Pfn(pfn));
                p.set_flag(pg::PG_RESERVED);
                p.set_ext(PageExt::Reserved);
            }
        }
        if let Some(k) = self.boot_state.kernel_image {
            let cpu0 = self.cpu(0).map_err(|e| BootError::Config(e.to_string()))?;
            crate::arch::arm64::pgtable::unmap_range(&cpu0, &self.kernel_as(), k.va(k.init_begin()), k.init)
                .map_err(BootError::Pgtable)?
                .flush(&cpu0);
        }
        Ok((swiotlb, freed))
    }

    /// The steps of [`Machine::boot`] as they ran, with their measured host
    /// time and what they issued.
    pub fn boot_phases(&self) -> &[BootPhase] {
        &self.boot_phases
    }
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Machine {
    /// Run `f` on this machine as the boot step `name` (mirroring
    /// `kernel`) and record its host time and the TLBIs and barriers every
    /// CPU issued. Boot records its own steps with it; a page allocator's
    /// `memblock_free_all()` is recorded the same way by its caller.
    pub fn measure_phase<T>(&self, name: &'static str, kernel: &'static str, f: impl FnOnce() -> T) -> (T, BootPhase) {
        use crate::counters::CounterSet;
        let (t0, b0) = (self.tlbi_counts(), self.barrier_counts());
        let start = std::time::Instant::now();
        let r = f();
        let host_ns = ns(start.elapsed());
        let tlbi = self.tlbi_counts().delta(&t0);
        let barriers = self.barrier_counts().delta(&b0);
        (r, BootPhase { name, kernel, host_ns, tlbi, barriers })
    }
}

/// How many `mem_section` root pages `sparse_index_init()` allocates: one
/// per `SECTIONS_PER_ROOT` sections that hold RAM.
fn section_roots(bank_pfns: &[(u64, u64)]) -> u64 {
    let mut roots: Vec<u64> = Vec::new();
    for &(s, e) in bank_pfns {
        let (first, last) = (s / PAGES_PER_SECTION, (e - 1) / PAGES_PER_SECTION);
        roots.extend((first..=last).map(|sec| sec / boot_allocs::SECTIONS_PER_ROOT));
    }
    roots.sort_unstable();
    roots.dedup();
    roots.len() as u64
}
