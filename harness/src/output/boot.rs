//! `mmlab boot`: the per-phase breakdown of a boot that a tester of "Speed
//! up boot with faster linear map creation" asked for (seeds.md §3), from
//! the engine's typed records.
//!
//! Phases are listed in the kernel's order (`setup_arch()`:
//! `arm64_memblock_init()`, `paging_init()` → `map_mem()`, `bootmem_init()`
//! → `sparse_init()`; `free_area_init()` → `memmap_init()`;
//! `mm_core_init()` → `memblock_free_all()`, then
//! `page_alloc_init_late()` → `deferred_init_memmap()`); mmlab runs
//! `memmap_init()` before `map_mem()` (the engine's module docs say why),
//! which changes no count. For each phase: measured host time, modelled
//! time (TLBIs with their completion waits, plus barriers when the barrier
//! backend is `model`), kept apart; table pages per level; TLBIs by kind;
//! barriers. `map_mem()`, the step the published figures time, is printed
//! again on its own with its fixmap operations. The kernel image map
//! (`map_kernel()`) runs only with the image in RAM (`arm64.kernel_image=1`);
//! otherwise its row says so.

use mmlab_engine::arch::arm64::fixmap::FixmapCounts;
use mmlab_engine::arch::arm64::memory::{FIXADDR_TOP, PAGE_END, VMEMMAP_END};
use mmlab_engine::arch::arm64::mmu::{LinearMapReport, LinearMapVariant};
use mmlab_engine::arch::arm64::pgtable::table_pages_in;
use mmlab_engine::mm::banks::MemBank;
use mmlab_engine::mm::memmap::DeferredInitCounts;
use mmlab_engine::mm::mm_init::BootPhase;
use mmlab_engine::{Machine, PAGE_SIZE};
use mmlab_pcp::PageAllocator;
use serde::Serialize;
use std::fmt::Write as _;

/// One phase of the breakdown.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRow {
    /// The phase.
    pub phase: &'static str,
    /// The kernel function(s) it mirrors.
    pub kernel: &'static str,
    /// False for a phase mmlab does not emulate (reported with zeroes).
    pub emulated: bool,
    /// Measured host time, ms (not deterministic).
    pub measured_ms: f64,
    /// Modelled time, ms: TLBIs and their completion waits, plus barriers
    /// under the `model` backend.
    pub modelled_ms: f64,
    /// Of the modelled time, the TLBIs' and their completion waits', ms.
    pub modelled_tlbi_ms: f64,
    /// Of the modelled time, the barriers', ms.
    pub modelled_barrier_ms: f64,
    /// Table pages per level (pgd, p4d, pud, pmd, pte: `TABLE_NAMES`) under
    /// the phase's region (the linear map's with the fixmap's three `bm_*`
    /// tables; the memmap's part of the vmemmap; swapper_pg_dir counts for
    /// memblock).
    pub table_pages: [u64; 5],
    /// TLBIs by kind (kernel spelling), and in all.
    pub tlbi: Vec<(String, u64)>,
    /// TLBIs of every kind.
    pub tlbi_total: u64,
    /// Barriers by instruction (`dsb(ishst)`, `isb`, ...).
    pub barriers: Vec<(String, u64)>,
    /// Barriers of every kind.
    pub barriers_total: u64,
}

impl PhaseRow {
    fn from_phase(p: &BootPhase, table_pages: [u64; 5]) -> PhaseRow {
        let ms = |ns: u64| ns as f64 / 1e6;
        PhaseRow {
            phase: p.name,
            kernel: p.kernel,
            emulated: true,
            measured_ms: ms(p.host_ns),
            modelled_ms: ms(p.tlbi.modelled_ns + p.barriers.modelled_ns),
            modelled_tlbi_ms: ms(p.tlbi.modelled_ns),
            modelled_barrier_ms: ms(p.barriers.modelled_ns),
            table_pages,
            tlbi: p.tlbi.iter().map(|(k, n)| (k.name().to_string(), n)).collect(),
            tlbi_total: p.tlbi.total(),
            barriers: p.barriers.iter().filter(|&(_, n)| n != 0).map(|(k, n)| (k.to_string(), n)).collect(),
            barriers_total: p.barriers.total(),
        }
    }

    fn not_emulated(phase: &'static str, kernel: &'static str) -> PhaseRow {
        PhaseRow {
            phase,
            kernel,
            emulated: false,
            measured_ms: 0.0,
            modelled_ms: 0.0,
            modelled_tlbi_ms: 0.0,
            modelled_barrier_ms: 0.0,
            table_pages: [0; 5],
            tlbi: Vec::new(),
            tlbi_total: 0,
            barriers: Vec::new(),
            barriers_total: 0,
        }
    }
}

/// `map_mem()` on its own: the record, the fixmap's operations and the
/// modelled time split.
#[derive(Clone, Debug, Serialize)]
pub struct MapMemRow {
    /// What `map_mem()` did (variant, regions, counts, TLBIs, barriers).
    pub report: LinearMapReport,
    /// Fixmap sets and clears during boot (all of them `map_mem()`'s).
    pub fixmap: FixmapCounts,
    /// Measured host time, ms.
    pub measured_ms: f64,
    /// Modelled TLBI time (issue + completion waits), ms.
    pub modelled_tlbi_ms: f64,
    /// Modelled barrier time (model backend), ms.
    pub modelled_barrier_ms: f64,
}

/// The machine as booted.
#[derive(Clone, Debug, Serialize)]
pub struct BootMachine {
    /// RAM banks.
    pub banks: Vec<MemBank>,
    /// CPUs.
    pub cpus: usize,
    /// The cost profile that prices the modelled time.
    pub cost_profile: &'static str,
    /// The barrier backend.
    pub barrier_backend: String,
    /// `arm64.linear_map`.
    pub linear_map: bool,
    /// `arm64.linear_map_variant`.
    pub linear_map_variant: &'static str,
    /// `rodata=`.
    pub rodata: String,
    /// `debug_pagealloc`.
    pub debug_pagealloc: bool,
    /// The kernel image is in RAM (`arm64.kernel_image`, or the real boot
    /// state).
    pub kernel_image: bool,
    /// `boot.state` in force (`real` or `bare`).
    pub boot_state: &'static str,
    /// `CONFIG_DEFERRED_STRUCT_PAGE_INIT`.
    pub deferred_struct_page_init: bool,
    /// Levels of translation tables (5 with FEAT_LPA2's 52-bit VA).
    pub pgtable_levels: u32,
}

/// The whole `mmlab boot` report.
#[derive(Clone, Debug, Serialize)]
pub struct BootReport {
    /// The machine.
    pub machine: BootMachine,
    /// Phases in the kernel's order.
    pub phases: Vec<PhaseRow>,
    /// `map_mem()` on its own (None without the linear map).
    pub map_mem: Option<MapMemRow>,
    /// Struct pages: vmemmap pages initialised early and at first touch.
    pub struct_pages: DeferredInitCounts,
    /// `pgdat->first_deferred_pfn` (None: nothing deferred).
    pub first_deferred_pfn: Option<u64>,
    /// memblock's reservations by owner: (owner, bytes).
    pub reserved: Vec<(&'static str, u64)>,
    /// Pages the buddy allocator manages after boot.
    pub managed_pages: u64,
    /// Totals of the emulated phases: measured and modelled ms.
    pub total_measured_ms: f64,
    /// Modelled ms in all.
    pub total_modelled_ms: f64,
}

impl BootReport {
    /// Collect the report of machine `m`, whose page allocator `pa` was
    /// booted as the phase `free` ([`Machine::measure_phase`](mmlab_engine::Machine::measure_phase)).
    pub fn collect(m: &Machine, pa: &PageAllocator<'_>, free: &BootPhase) -> BootReport {
        let cfg = m.config();
        let k = m.kernel_as();
        let phase = |name: &str| m.boot_phases().iter().find(|p| p.name == name);
        let mut phases = Vec::new();
        if let Some(p) = phase("memblock") {
            phases.push(PhaseRow::from_phase(p, [1, 0, 0, 0, 0]));
        }
        match phase("linear map") {
            Some(p) => {
                let mut t = table_pages_in(m, &k, m.va_layout().page_offset(), PAGE_END);
                t[0] = 0; // swapper_pg_dir is memblock's phase's
                // early_fixmap_init()'s bm_pud, bm_pmd, bm_pte[] (a p4d
                // above them is map_kernel()'s).
                let fx_start = m.fixmap_layout().fixaddr_tot_start() & !((2 << 20) - 1);
                let fx = table_pages_in(m, &k, fx_start, FIXADDR_TOP);
                for l in 2..5 {
                    t[l] += fx[l];
                }
                phases.push(PhaseRow::from_phase(p, t));
            }
            None => {
                phases.push(PhaseRow::not_emulated("linear map", "paging_init() -> map_mem() (arm64.linear_map=0)"))
            }
        }
        match phase("kernel image map") {
            Some(p) => {
                let kimg =
                    m.kernel_image().copied().unwrap_or(mmlab_engine::arch::arm64::kimage::KernelImage::DEBIAN_7_2);
                let mut t = table_pages_in(m, &k, kimg.va(kimg.phys), kimg.va_end());
                t[0] = 0;
                phases.push(PhaseRow::from_phase(p, t));
            }
            None => phases.push(PhaseRow::not_emulated(
                "kernel image map",
                "map_kernel() (early C code since 6.9, no fixmap; arm64.kernel_image=0)",
            )),
        }
        if let Some(p) = phase("vmemmap") {
            // The memmap's own part of the vmemmap (the fixmap shares the
            // last PGD entry of the vmemmap window).
            let mem = m.memmap();
            let (lo, hi) = (mem.page_va(mem.start_pfn()), mem.page_va(mem.end_pfn()));
            let mut t = table_pages_in(m, &k, lo.max(m.va_layout().vmemmap_start()), hi.min(VMEMMAP_END));
            t[0] = 0;
            phases.push(PhaseRow::from_phase(p, t));
        }
        if let Some(p) = phase("memmap init") {
            phases.push(PhaseRow::from_phase(p, [0; 5]));
        }
        // smp_cpus_done() and kernel_init(): the alias and rodata made
        // read-only in place (no table taken).
        if let Some(p) = phase("rodata ro") {
            phases.push(PhaseRow::from_phase(p, [0; 5]));
        }
        // mmlab gives the initrd and init back before memblock_free_all()
        // (mm::boot_state: the same end state), so the row comes first.
        if let Some(p) = phase("end of boot") {
            phases.push(PhaseRow::from_phase(p, [0; 5]));
        }
        phases.push(PhaseRow::from_phase(free, [0; 5]));
        let map_mem = m.linear_map_report().map(|r| MapMemRow {
            report: r.clone(),
            fixmap: m.fixmap_counts().unwrap_or_default(),
            measured_ms: r.host_ns as f64 / 1e6,
            modelled_tlbi_ms: r.tlbi.modelled_ns as f64 / 1e6,
            modelled_barrier_ms: r.barriers.modelled_ns as f64 / 1e6,
        });
        let mut reserved: Vec<(&'static str, u64)> = Vec::new();
        for r in m.memblock().reservations() {
            match reserved.iter_mut().find(|(n, _)| *n == r.name) {
                Some((_, b)) => *b += r.size,
                None => reserved.push((r.name, r.size)),
            }
        }
        let mem = m.memmap();
        let fd = mem.first_deferred_pfn().0;
        BootReport {
            machine: BootMachine {
                banks: cfg.banks(),
                cpus: cfg.nr_cpus,
                cost_profile: cfg.cost_profile.name,
                barrier_backend: cfg.barrier_backend.to_string(),
                linear_map: cfg.linear_map,
                linear_map_variant: cfg.linear_map_variant.name(),
                rodata: format!("{:?}", cfg.rodata).to_lowercase(),
                debug_pagealloc: cfg.debug_pagealloc,
                kernel_image: m.kernel_image().is_some(),
                boot_state: m.boot_state().in_force.name(),
                deferred_struct_page_init: cfg.deferred_struct_page_init,
                pgtable_levels: m.va_layout().pgtable_levels(),
            },
            total_measured_ms: phases.iter().map(|p| p.measured_ms).sum(),
            total_modelled_ms: phases.iter().map(|p| p.modelled_ms).sum(),
            phases,
            map_mem,
            struct_pages: mem.deferred_init_counts(),
            first_deferred_pfn: (fd != u64::MAX).then_some(fd),
            reserved,
            managed_pages: pa.managed_pages(),
        }
    }

    /// The report as text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let mc = &self.machine;
        let banks: Vec<String> = mc
            .banks
            .iter()
            .map(|b| format!("{}@{:#x}", mmlab_engine::arch::arm64::pgtable::ptdump::size_str(b.size), b.base))
            .collect();
        let _ = writeln!(
            s,
            "boot: {} RAM ({}), {} CPUs; linear map {} (variant {}, rodata={}{}{}); cost profile {}, barriers {}; boot state {}",
            mmlab_engine::arch::arm64::pgtable::ptdump::size_str(mc.banks.iter().map(|b| b.size).sum()),
            banks.join(", "),
            mc.cpus,
            if mc.linear_map { "on" } else { "off" },
            mc.linear_map_variant,
            mc.rodata,
            if mc.debug_pagealloc { ", debug_pagealloc" } else { "" },
            if mc.kernel_image { ", kernel image in RAM" } else { "" },
            mc.cost_profile,
            mc.barrier_backend,
            mc.boot_state,
        );
        let _ = writeln!(
            s,
            "measured = host time of the emulation; modelled = TLBIs + completion waits (+ barriers with the model backend), priced by the cost profile\n"
        );
        // Four levels: the p4d is folded (never a table of its own), so
        // its column is left out, as the kernel's own counts do.
        let five = mc.pgtable_levels == 5;
        let tables_head = if five { "tables pgd/p4d/pud/pmd/pte" } else { "tables pgd/pud/pmd/pte" };
        let _ = writeln!(
            s,
            "{:<17} {:>11} {:>11}  {:>22}  {:>9}  {:>9}  kernel",
            "phase", "measured ms", "modelled ms", tables_head, "TLBIs", "barriers"
        );
        for p in &self.phases {
            if !p.emulated {
                let _ = writeln!(
                    s,
                    "{:<17} {:>11} {:>11}  {:>22}  {:>9}  {:>9}  {}",
                    p.phase, "-", "-", "-", "-", "-", p.kernel
                );
                continue;
            }
            let t = p.table_pages;
            let _ = writeln!(
                s,
                "{:<17} {:>11.3} {:>11.3}  {:>22}  {:>9}  {:>9}  {}",
                p.phase,
                p.measured_ms,
                p.modelled_ms,
                if five {
                    format!("{}/{}/{}/{}/{}", t[0], t[1], t[2], t[3], t[4])
                } else {
                    format!("{}/{}/{}/{}", t[0], t[2], t[3], t[4])
                },
                p.tlbi_total,
                p.barriers_total,
                p.kernel
            );
        }
        let _ = writeln!(s, "{:<17} {:>11.3} {:>11.3}", "total", self.total_measured_ms, self.total_modelled_ms);
        let _ = writeln!(s);
        for p in self.phases.iter().filter(|p| p.emulated && (p.tlbi_total > 0 || p.barriers_total > 0)) {
            let tl: Vec<String> = p.tlbi.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let br: Vec<String> = p.barriers.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(
                s,
                "{:<17} TLBIs: {}; barriers: {}",
                p.phase,
                if tl.is_empty() { "none".into() } else { tl.join(", ") },
                br.join(", ")
            );
        }
        if let Some(mm) = &self.map_mem {
            let c = &mm.report.counts;
            let _ = writeln!(
                s,
                "\nmap_mem() ({}): measured {:.3} ms; modelled {:.3} ms = TLBIs and completion waits {:.3} ms + barriers {:.3} ms",
                mm.report.variant.name(),
                mm.measured_ms,
                mm.modelled_tlbi_ms + mm.modelled_barrier_ms,
                mm.modelled_tlbi_ms,
                mm.modelled_barrier_ms
            );
            let _ = writeln!(
                s,
                "  table pages: {} pud, {} pmd, {} pte; leaves: {} pte, {} pmd blocks, {} pud blocks, {} contiguous",
                c.pgtable_pud, c.pgtable_pmd, c.pgtable_pte, c.pte_leaves, c.pmd_blocks, c.pud_blocks, c.cont_leaves
            );
            let _ = writeln!(
                s,
                "  fixmap: {} maps (pte {}, pmd {}, pud {}), {} unmaps ({} without their own TLBI)",
                c.fixmap_maps(),
                c.fixmap_map_pte,
                c.fixmap_map_pmd,
                c.fixmap_map_pud,
                c.fixmap_unmaps(),
                c.fixmap_unmap_nosync
            );
            let _ = writeln!(
                s,
                "  TLBIs: {} (vaale1is {}); dsb(ish) {} (completion waits), dsb(ishst) {}, isb {}",
                c.tlbi_total, c.tlbi_vaale1is, c.dsb_ish, c.dsb_ishst, c.isb
            );
            let regions: Vec<String> = mm.report.regions.iter().map(|(a, b)| format!("{a:#x}-{b:#x}")).collect();
            let _ = write!(s, "  regions: {}", regions.join(", "));
            if !mm.report.kernel_alias.is_empty() {
                let alias: Vec<String> = mm.report.kernel_alias.iter().map(|(a, b)| format!("{a:#x}-{b:#x}")).collect();
                let flags =
                    if mm.report.variant == LinearMapVariant::V7_2 { "first" } else { "last, NO_CONT_MAPPINGS" };
                let _ = write!(s, "; kernel alias {} ({flags})", alias.join(", "));
            }
            if let Some((a, b)) = mm.report.kfence_pool {
                let _ = write!(s, "; KFENCE pool {a:#x}-{b:#x} (pages)");
            }
            let _ = writeln!(s);
        }
        let sp = &self.struct_pages;
        let _ = writeln!(
            s,
            "\nstruct pages: {} of {} vmemmap pages (64 struct pages each) initialised by memmap_init(), {} at first touch{}",
            sp.early,
            sp.present,
            sp.deferred,
            match self.first_deferred_pfn {
                Some(p) => format!(" (first_deferred_pfn {p:#x})"),
                None => " (nothing deferred)".to_string(),
            }
        );
        let res: Vec<String> = self.reserved.iter().map(|(n, b)| format!("{n} {}", b.div_ceil(PAGE_SIZE))).collect();
        let _ = writeln!(
            s,
            "memblock reserved pages: {}; managed pages after boot: {}",
            res.join(", "),
            self.managed_pages
        );
        s
    }
}
