//! `mmlab boot`'s report: the phases in the kernel's order, measured and
//! modelled time apart, the counts behind them taken from the engine's
//! records, and `map_mem()` on its own.

use mmlab_engine::MachineConfig;
use mmlab_engine::arch::arm64::mmu::{LinearMapVariant, Rodata};
use mmlab_harness::output::boot::BootReport;
use mmlab_pcp::{AllocatorConfig, PageAllocator};

fn report(variant: LinearMapVariant) -> BootReport {
    let cfg = MachineConfig {
        linear_map: true,
        linear_map_variant: variant,
        rodata: Rodata::On,
        cost_profile: mmlab_engine::arch::arm64::cost::CostProfile::ampere_altra(),
        barrier_backend: mmlab_engine::arch::arm64::cost::CostProfile::ampere_altra().barrier_backend(),
        ..MachineConfig::with("64M", 2).unwrap()
    };
    let m = mmlab_tests::boot(cfg).unwrap();
    let (pa, free) = m.measure_phase("free into buddy", "memblock_free_all()", || {
        PageAllocator::boot(&m, AllocatorConfig::default()).unwrap()
    });
    BootReport::collect(&m, &pa, &free)
}

#[test]
fn phases_counts_and_times_come_from_the_records() {
    let r = report(LinearMapVariant::Base);
    let names: Vec<&str> = r.phases.iter().map(|p| p.phase).collect();
    assert_eq!(names, ["memblock", "linear map", "kernel image map", "vmemmap", "memmap init", "free into buddy"]);
    let lm = &r.phases[1];
    let mm = r.map_mem.as_ref().unwrap();
    // The hand-derived 64M counts (tests/linear_map.rs): 1061 TLBIs.
    assert_eq!((lm.tlbi_total, mm.report.counts.tlbi_total), (1061, 1061));
    assert_eq!(lm.tlbi, [("vaale1is".to_string(), 1061)]);
    // 1 pud + 1 pmd + 32 pte tables, plus the fixmap's bm_pud/bm_pmd and
    // v6.9-rc1's two bm_pte (its slots span two PMDs).
    assert_eq!(lm.table_pages, [0, 0, 2, 2, 34]);
    assert_eq!(mm.fixmap.maps(), 1061);
    // Modelled: Altra's 30 ns per TLBI + 1640 ns per completion wait, and
    // 6 + 10 ns per dsb(ishst) + isb pair.
    let tlbi_ns = 1061.0 * (30.0 + 1640.0);
    assert!((lm.modelled_tlbi_ms - tlbi_ns / 1e6).abs() < 1e-9, "{}", lm.modelled_tlbi_ms);
    assert!((lm.modelled_ms - lm.modelled_tlbi_ms - lm.modelled_barrier_ms).abs() < 1e-9);
    assert!(lm.modelled_barrier_ms > 0.0);
    assert!(!r.phases[2].emulated);
    assert_eq!(r.phases[3].table_pages, [0, 0, 1, 1, 1]);
    // The text names every phase and map_mem() on its own; the JSON parses.
    let text = r.render();
    for n in names {
        assert!(text.contains(n), "{n}");
    }
    assert!(text.contains("map_mem() (base)") && text.contains("fixmap: 1061 maps"));
    let v: serde_json::Value = serde_json::from_str(&mmlab_harness::output::json::to_string(&r)).unwrap();
    assert_eq!(v["map_mem"]["report"]["counts"]["tlbi_total"], 1061);
    // lazy-unmap: same TLBIs as no-alloc-remap, fewer completion waits.
    let lazy = report(LinearMapVariant::LazyUnmap);
    assert_eq!(lazy.phases[1].tlbi_total, 34);
    assert!(lazy.phases[1].modelled_tlbi_ms < 34.0 * 1.67e-3);
}
