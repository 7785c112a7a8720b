//! The linear map built at boot (arch/arm64/mm/mmu.c `paging_init()` →
//! `map_mem()` → `__create_pgd_mapping()`), as Linux 7.2 builds it (the
//! default), and as v6.9-rc1, each of the three patches of Ryan Roberts'
//! "Speed up boot with faster linear map creation" (v1, March 2024) and the
//! series as merged for 6.10 built it ([`LinearMapVariant`]).
//!
//! # The algorithm
//!
//! `map_mem()` maps every memblock memory region at `PAGE_OFFSET + (pa -
//! PHYS_OFFSET)` in `swapper_pg_dir` with `pgprot_tagged(PAGE_KERNEL)`
//! (`MT_NORMAL_TAGGED`) and the flags
//! `NO_EXEC_MAPPINGS` (table descriptors get PXNTable) plus, when
//! `can_set_direct_map()` (`rodata=full`, the default),
//! `NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS`: the whole linear map is then
//! made of 4 KiB PTEs, so that permissions can later change page by page.
//! With `rodata=on` or `rodata=off` PUD and PMD blocks and contiguous runs
//! are used wherever VA, PA and size are aligned.
//!
//! The walk goes down level by level. `__create_pgd_mapping_locked()`
//! steps over PGD entries (p4d is folded, so `alloc_init_p4d()` only passes
//! through); `alloc_init_pud()` allocates a PUD table if the PGD entry is
//! empty, maps the PUD table into `FIX_PUD`, and for each 1 GiB either
//! writes a block or calls `alloc_init_cont_pmd()`; that allocates a PMD
//! table if needed and, per 32 MiB (a contiguous-PMD run), calls
//! `init_pmd()`, which per 2 MiB writes a block or calls
//! `alloc_init_cont_pte()`; that allocates a PTE table if needed and, per
//! 64 KiB (a contiguous-PTE run), calls `init_pte()` to write the PTEs.
//! Tables are not reachable through the linear map while it is being
//! built, so every table is written through its level's fixmap slot, and
//! every `clear_fixmap` of a slot costs a TLBI and a completion wait (see
//! [`super::fixmap`]). Where the variants differ:
//!
//! | variant | table allocation (`early_pgtable_alloc`) | populating a PMD or PTE table |
//! |---|---|---|
//! | `base` (v6.9-rc1) | memblock page, zeroed through `FIX_PTE` (map, memset, clear: 1 TLBI) | mapped and cleared per 32 MiB / 64 KiB chunk: 32 TLBIs per full table |
//! | `no-cont-remap` (v1 1/3) | as base | mapped once per `alloc_init_cont_*` call: 1 TLBI |
//! | `no-alloc-remap` (v1 2/3) | mapped in its own level's slot, zeroed, `dsb ishst`, left mapped for the populate step | mapped only if it already existed; one clear: 1 TLBI per table |
//! | `lazy-unmap` (v1 3/3) | as no-alloc-remap, but a PTE table takes the next of 16 `FIX_PTE` slots | PTE slots are cleared 16 at a time with `clear_fixmap_nosync` and one `flush_tlb_kernel_range` over 16 pages (16 TLBIs, one `dsb ish`), and once more at the end of each `__create_pgd_mapping` |
//!
//! | `v6.10` (v3 as merged) | as no-alloc-remap | as no-alloc-remap, and `init_pte()` writes with `__set_pte_nosync()`: no barrier pair per PTE; the fixmap clear that ends the table publishes it |
//!
//! | `v7.2` (the default) | as v6.10 | as v6.10, and: table descriptors carry `PMD_TABLE_AF`; a block is put down only where no table is, a contiguous bit only where the run holds no valid non-contiguous entry (so a range mapped twice keeps what the first pass left) |
//!
//! 7.2's `map_mem()` also orders the work differently: the KFENCE pool
//! first (early KFENCE only, page by page), then the kernel's linear alias
//! — `[_text, __init_begin)` and `[__init_end, __bss_stop)` with the same
//! flags as memory — then every memory range, the alias included (its
//! entries are written again with the same values); no NOMAP carve-out.
//! `force_pte_mapping()` replaces `can_set_direct_map()` as the test for
//! page granularity: CPUs that all have BBML2_NOABORT keep blocks and split
//! them on demand ([`super::pageattr`]); Neoverse N1 has no BBML2, so with
//! `rodata=on` (7.2's default, the former `full`) or late KFENCE (Debian's
//! `kfence.sample_interval=0`) its linear map is page-granular. Later in
//! boot `mark_linear_text_alias_ro()` and `mark_rodata_ro()` make the alias
//! of `[_text, __init_begin)` and of `[__init_end, __bss_stop)` read-only
//! through [`update_mapping_prot`] (in the variants before 7.2: the alias
//! of `[_stext, __init_begin)`, and the image's rodata only).
//!
//! Every leaf is written with `__set_pte()` / `set_pmd()` / `set_pud()`,
//! each followed by `dsb ishst; isb` (the barrier batching of the series'
//! v2 is not part of v1). Table descriptors are written with `set_p4d()`
//! (straight into `swapper_pg_dir`, which is still writable this early:
//! `set_swapper_pgd()` skips the fixmap while `rodata_is_rw`, so `FIX_PGD`
//! is not used; checked in 6.12), `set_pud()` and `set_pmd()`. Every
//! `clear_fixmap()` is `flush_tlb_kernel_range()` of one page, which in
//! these kernels is a loop of `tlbi vaale1is`, one per page, between `dsb
//! ishst` and `dsb ish; isb` (checked in 6.12's `asm/tlbflush.h`; range
//! TLBIs for kernel ranges came later), and `flush_tlb_all()` above
//! `MAX_DVM_OPS` pages.
//!
//! # Fidelity
//!
//! - *Faithful*: the walk, the order of table allocation, fixmap map and
//!   unmap, the entries and table descriptors written, and every barrier
//!   and TLBI of all the variants, for 4 KiB pages, 48-bit VA, 4 levels;
//!   7.2's order of the KFENCE pool, the alias and memory.
//! - *Simplified*: the series' variants take 7.2's KFENCE rule for page
//!   granularity but allocate no pool; the kernel's BUGs (a live entry that
//!   cannot change) are errors. `map_mem()` runs after the memmap is placed
//!   (the [`crate::Machine`] needs it), where the kernel runs it before
//!   `sparse_init()`; with the real boot state the tables it takes are
//!   reserved at the kernel's point in boot beforehand
//!   ([`map_mem_table_pages`]), so they land where the kernel's do.
//! - *Instrumented*: [`LinearMapCounts`], the per-phase counts a tester of
//!   the series asked for.
//!
//! The linear map is built on every machine unless `arm64.linear_map=0`
//! leaves it out (a bare machine for tests that do not want its ~2,000
//! table pages per 4 GiB).

mod create;
mod options;
mod report;

pub use options::*;
pub use report::*;

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::barrier::BarrierKind;
use crate::arch::arm64::cpu::{ArchCpu, EarlyAlloc};
use crate::arch::arm64::fixmap::{Fixmap, FixmapCounts};
use crate::arch::arm64::kimage::KernelImage;
use crate::arch::arm64::memory::{PHYS_OFFSET, VaLayout};
use crate::arch::arm64::pgtable::Level;
use crate::arch::arm64::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_RO, PgProt, pgprot_tagged};
use crate::arch::arm64::tlb::TlbiKind;
use crate::counters::CounterSet;
use create::Walker;

/// Mirrors arch/arm64/mm/mmu.c `map_mem()` (in the version `opts.variant`
/// names), under the caller's `fixmap_lock` (the `&mut Fixmap`): every
/// memblock memory region at `PAGE_OFFSET` with `pgprot_tagged(PAGE_KERNEL)`
/// (`__map_memblock()` → `__create_pgd_mapping()`), with the kernel image's
/// alias handled as that version does (module docs). Returns what the phase
/// did.
///
/// # Errors
///
/// A [`LinearMapError`] where the kernel would panic or BUG: no memblock
/// page for a table, a region outside the linear map, a live entry that
/// cannot change.
pub fn map_mem(
    cpu: &ArchCpu<'_>,
    early: &dyn EarlyAlloc,
    fixmap: &mut Fixmap,
    opts: &MapMemOptions,
    image: Option<&KernelImage>,
) -> Result<LinearMapReport, LinearMapError> {
    let flags = opts.map_mem_flags();
    let v7_2 = opts.variant == LinearMapVariant::V7_2;
    let (t0, b0, f0) = (cpu.system_tlbi_counts(), cpu.system_barrier_counts(), fixmap.counts());
    let start = std::time::Instant::now();
    let mut regions: Vec<(u64, u64)> = Vec::new();
    let mut kernel_alias: Vec<(u64, u64)> = Vec::new();
    let mut kfence_pool = None;
    let mut w = Walker::new(cpu, Some(early), fixmap, opts.variant);
    let va = cpu.arch().va;
    let map = |w: &mut Walker<'_, '_>, (s, e): (u64, u64), flags: u32| {
        if s < PHYS_OFFSET || e <= s || e - PHYS_OFFSET > va.linear_map_size() {
            return Err(LinearMapError::OutOfRange { start: s, end: e });
        }
        w.create_pgd_mapping(s, va.phys_to_virt(s), e - s, pgprot_tagged(PAGE_KERNEL), flags)
    };
    if v7_2 {
        // arm64_kfence_map_pool(): memblock_phys_alloc(), then pages only.
        if opts.kfence_early_init() {
            let pa = early.alloc(KFENCE_POOL_SIZE, PAGE_SIZE, "kfence").map_err(LinearMapError::Memblock)?;
            let pool = (pa.0, pa.0 + KFENCE_POOL_SIZE);
            map(&mut w, pool, NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS | NO_EXEC_MAPPINGS)?;
            kfence_pool = Some(pool);
        }
        if let Some(k) = image {
            kernel_alias = vec![(k.phys, k.init_begin()), (k.init_end(), k.bss_stop())];
            for &a in &kernel_alias {
                map(&mut w, a, flags)?;
            }
        }
        regions = early.memory();
        for &r in &regions {
            map(&mut w, r, flags)?;
        }
    } else {
        // memblock_mark_nomap(kernel_start, ...): for_each_mem_range() skips it.
        let alias = image.map(|k| (k.stext(), k.init_begin()));
        for (s, e) in early.memory() {
            match alias {
                Some((ks, ke)) if ks < e && s < ke => {
                    regions.extend([(s, ks.max(s)), (ke.min(e), e)].into_iter().filter(|(a, b)| a < b));
                }
                _ => regions.push((s, e)),
            }
        }
        for &r in &regions {
            map(&mut w, r, flags)?;
        }
        if let Some(a) = alias {
            // The alias of [_stext, __init_begin): non-executable leaves,
            // blocks allowed, no contiguous runs, no PXNTable, untagged.
            w.create_pgd_mapping(a.0, va.phys_to_virt(a.0), a.1 - a.0, PAGE_KERNEL, NO_CONT_MAPPINGS)?;
            kernel_alias.push(a);
        }
    }
    let host_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut counts = w.counts;
    let (tlbi, barriers) = (cpu.system_tlbi_counts().delta(&t0), cpu.system_barrier_counts().delta(&b0));
    let fx: FixmapCounts = fixmap.counts().delta(&f0);
    counts.fixmap_map_pte = fx.map_pte;
    counts.fixmap_map_pmd = fx.map_pmd;
    counts.fixmap_map_pud = fx.map_pud;
    counts.fixmap_unmap_pte = fx.unmap_pte;
    counts.fixmap_unmap_pmd = fx.unmap_pmd;
    counts.fixmap_unmap_pud = fx.unmap_pud;
    counts.fixmap_unmap_nosync = fx.unmap_nosync;
    counts.tlbi_vaale1is = tlbi.get(TlbiKind::Vaale1is);
    counts.tlbi_total = tlbi.total();
    counts.dsb_ishst = barriers.get(BarrierKind::Dsb, "ishst").unwrap_or(0);
    counts.dsb_ish = barriers.get(BarrierKind::Dsb, "ish").unwrap_or(0);
    counts.isb = barriers.get(BarrierKind::Isb, "").unwrap_or(0);
    Ok(LinearMapReport {
        variant: opts.variant,
        rodata: opts.rodata,
        flags,
        regions,
        kernel_alias,
        kfence_pool,
        counts,
        tlbi,
        barriers,
        host_ns,
    })
}

/// Mirrors the linear-map part of arch/arm64/mm/mmu.c `paging_init()` (with
/// what `setup_arch()` does with the fixmap before it: `early_fixmap_init()`
/// and `setup_machine_fdt()`'s read-only mapping of the device tree `fdt`,
/// address and size, when there is one): set up the fixmap, its static
/// tables from `statics` (the image's `.pgtbl`, or memblock on a machine
/// without the image), then `map_mem()`. Called from boot when the
/// machine's `arm64.linear_map` knob is on (the default).
///
/// # Errors
///
/// As [`map_mem`], and a fixmap that cannot be set up.
pub fn paging_init(
    cpu: &ArchCpu<'_>,
    early: &dyn EarlyAlloc,
    statics: &dyn EarlyAlloc,
    opts: &MapMemOptions,
    image: Option<&KernelImage>,
    fdt: Option<(PhysAddr, u64)>,
) -> Result<(Fixmap, LinearMapReport), LinearMapError> {
    let mut fixmap = Fixmap::early_fixmap_init(cpu, statics, opts.variant.fixmap_layout())?;
    if let Some((dt_phys, size)) = fdt {
        fixmap.remap_fdt(cpu, dt_phys, size)?;
    }
    let report = map_mem(cpu, early, &mut fixmap, opts, image)?;
    Ok((fixmap, report))
}

/// How many table pages `map_mem()` will take from memblock for `memory`
/// when it maps page by page ([`MapMemOptions::force_pte_mapping`]): one
/// PTE table per 2 MiB, one PMD table per 1 GiB, one PUD table per
/// 512 GiB and, with five levels (`va`), one P4D table per 256 TiB of
/// linear-map address touched. `None` when blocks are allowed (the count
/// then depends on alignment, the alias and the KFENCE pool).
pub fn map_mem_table_pages(opts: &MapMemOptions, memory: &[(u64, u64)], va: VaLayout) -> Option<u64> {
    if !opts.force_pte_mapping() {
        return None;
    }
    let mut total = 0;
    let levels: &[Level] = if va.pgtable_levels() == 5 {
        &[Level::Pmd, Level::Pud, Level::P4d, Level::Pgd]
    } else {
        &[Level::Pmd, Level::Pud, Level::P4d]
    };
    for shift in levels.iter().map(|l| l.shift()) {
        let mut blocks: Vec<u64> = Vec::new();
        for &(s, e) in memory {
            let (first, last) = ((s - PHYS_OFFSET) >> shift, (e - 1 - PHYS_OFFSET) >> shift);
            blocks.extend(first..=last);
        }
        blocks.sort_unstable();
        blocks.dedup();
        total += blocks.len() as u64;
    }
    Some(total)
}

/// Mirrors arch/arm64/mm/mmu.c `update_mapping_prot()`: walk the kernel's
/// existing tables for `[virt, virt + size)` (no table allocator: every
/// table must exist) writing `prot`, which may differ from what is there
/// only in permission bits, then `flush_tlb_kernel_range()` the range.
///
/// # Errors
///
/// [`LinearMapError::NoTableAllocator`] where a table is missing, or a
/// change that is not a permission change ([`LinearMapError::Pgtable`]).
pub fn update_mapping_prot(
    cpu: &ArchCpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    phys: u64,
    virt: u64,
    size: u64,
    prot: PgProt,
) -> Result<(), LinearMapError> {
    // Before 7.2 the walk refused contiguous runs here; 7.2 allows them
    // where no valid non-contiguous entry is (the walker's check).
    let flags = if variant == LinearMapVariant::V7_2 { 0 } else { NO_CONT_MAPPINGS };
    let mut w = Walker::new(cpu, None, fixmap, variant);
    w.create_pgd_mapping(phys, virt, size, prot, flags)?;
    crate::arch::arm64::tlb::flush::flush_tlb_kernel_range(cpu, virt, virt + size);
    Ok(())
}

/// Mirrors arch/arm64/mm/mmu.c `mark_linear_text_alias_ro()` (from
/// `smp_cpus_done()`): the linear alias of `[_text, __init_begin)` loses
/// its write permission.
///
/// # Errors
///
/// As [`update_mapping_prot`].
pub fn mark_linear_text_alias_ro(
    cpu: &ArchCpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    k: &KernelImage,
) -> Result<(), LinearMapError> {
    let (s, e) = if variant == LinearMapVariant::V7_2 { (k.phys, k.init_begin()) } else { (k.stext(), k.init_begin()) };
    update_mapping_prot(cpu, fixmap, variant, s, cpu.arch().va.phys_to_virt(s), e - s, PAGE_KERNEL_RO)
}

/// Mirrors arch/arm64/mm/mmu.c `mark_rodata_ro()` (from `mark_readonly()`
/// when `rodata_enabled`): the image's `[__start_rodata, __init_begin)`
/// read-only at `KIMAGE_VADDR`; in 7.2 also `[_text, _stext)` there and the
/// linear alias of `[__init_end, __bss_stop)`.
///
/// # Errors
///
/// As [`update_mapping_prot`].
pub fn mark_rodata_ro(
    cpu: &ArchCpu<'_>,
    fixmap: &mut Fixmap,
    variant: LinearMapVariant,
    k: &KernelImage,
) -> Result<(), LinearMapError> {
    let rodata = k.stext() + k.text;
    update_mapping_prot(cpu, fixmap, variant, rodata, k.va(rodata), k.init_begin() - rodata, PAGE_KERNEL_RO)?;
    if variant != LinearMapVariant::V7_2 {
        return Ok(());
    }
    update_mapping_prot(cpu, fixmap, variant, k.phys, k.va(k.phys), k.head, PAGE_KERNEL_RO)?;
    update_mapping_prot(
        cpu,
        fixmap,
        variant,
        k.init_end(),
        cpu.arch().va.phys_to_virt(k.init_end()),
        k.bss_stop() - k.init_end(),
        PAGE_KERNEL_RO,
    )
}
