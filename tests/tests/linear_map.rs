//! The arm64 linear map built at boot (`arm64.linear_map=1`): `map_mem()` of
//! Linux v6.9-rc1 and the three patches of "Speed up boot with faster linear
//! map creation" (v1), checked against counts derived by hand from the
//! kernel's algorithm, and the map itself checked by walks and accesses.
//!
//! # The hand derivation (64 MiB at PA 0x4000_0000, rodata=full, 4 KiB pages)
//!
//! `rodata=full` gives `NO_BLOCK_MAPPINGS | NO_CONT_MAPPINGS`, so the 64 MiB
//! are 16384 PTEs in 32 PTE tables (2 MiB each), under one PMD table and one
//! PUD table (pgd entry 0, pud entry 0; 64 MiB < 1 GiB). Every leaf write is
//! `__set_pte()`: `dsb ishst; isb`. Every table descriptor write (`set_p4d`
//! into swapper, `set_pud`, `set_pmd`) is also `dsb ishst; isb`: 34 pairs.
//! `set_fixmap` is `__set_pte()` of the slot's PTE: one `dsb ishst; isb`.
//! `clear_fixmap` is `dsb ishst; tlbi vaale1is; dsb ish; isb`.
//!
//! **base (v6.9-rc1).** Each of the 34 tables is zeroed through FIX_PTE at
//! allocation (1 map, 1 clear). `init_pmd()` maps FIX_PMD per 32 MiB chunk:
//! 2 chunks, 2 maps and clears. `init_pte()` maps FIX_PTE per 64 KiB chunk:
//! 32 chunks per table x 32 tables = 1024. FIX_PUD is mapped once.
//! Maps = clears = 34 + 2 + 1024 + 1 = 1061 = TLBIs = `dsb ish`.
//! `dsb ishst` = `isb` = 2 x 1061 (sets and clears) + 34 (table
//! descriptors) + 16384 (PTEs) = 18540.
//!
//! **no-cont-remap (v1 1/3).** Allocation as base (34 maps and clears);
//! each PMD and PTE table is mapped once for population (1 + 32), the PUD
//! table once: maps = clears = TLBIs = `dsb ish` = 34 + 33 + 1 = 68;
//! `dsb ishst` = `isb` = 2 x 68 + 34 + 16384 = 16554.
//!
//! **no-alloc-remap (v1 2/3).** A new table is mapped in its own slot,
//! zeroed and followed by a `dsb ishst`, populated and cleared once: maps =
//! clears = TLBIs = `dsb ish` = 34. `dsb ishst` = 34 (sets) + 34 (clears) +
//! 34 (after zeroing) + 34 + 16384 = 16520; `isb` = 34 + 34 + 34 + 16384 =
//! 16486.
//!
//! **lazy-unmap (v1 3/3).** As no-alloc-remap, but the 32 PTE tables take
//! slots 995 down to 980 in turn; the 17th finds them used up and clears
//! all 16 with `clear_fixmap_nosync` and one `flush_tlb_kernel_range()`
//! over 16 pages (`dsb ishst`, 16 `vaale1is`, `dsb ish`, `isb`); the cleanup
//! at the end of `__create_pgd_mapping` does the same for the other 16.
//! FIX_PMD and FIX_PUD are cleared as before. TLBIs = 32 + 2 = 34, but
//! `dsb ish` = 2 + 2 = 4. `dsb ishst` = 34 + 34 + 34 + 16384 + 2 + 2 =
//! 16490; `isb` = 34 + 34 + 16384 + 2 + 2 = 16456.
//!
//! **v6.10 (the series as merged).** As no-alloc-remap, but `init_pte()`
//! writes with `__set_pte_nosync()`: the 16384 PTE pairs go, the fixmap
//! clear after each table publishes it. TLBIs = `dsb ish` = 34; `dsb ishst`
//! = 16520 - 16384 = 136; `isb` = 16486 - 16384 = 102.
//!
//! **v7.2.** On bare RAM (no kernel image, KFENCE late) the walk is 6.10's:
//! the table descriptors gain `PMD_TABLE_AF`, which costs nothing, and no
//! range is mapped twice. What 7.2 changes with the image is derived at
//! [`kernel_alias_is_mapped_first_and_made_read_only_as_7_2_does`].

use mmlab_engine::arch::arm64::memory::{PHYS_OFFSET, VaLayout};
const PAGE_OFFSET: u64 = VaLayout::VA48.page_offset();
use mmlab_engine::arch::arm64::mmu::{LinearMapCounts, LinearMapVariant, Rodata};
use mmlab_engine::arch::arm64::pgtable::{self, Level, mmu};
use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE};

fn boot(mem: &str, variant: LinearMapVariant, rodata: Rodata) -> Machine {
    boot_kfence(mem, variant, rodata, 0)
}

/// As [`boot`] with `kfence.sample_interval`: nonzero (KFENCE starts early)
/// is what lets `rodata=off` or `noalias` keep blocks
/// (`can_set_direct_map()`).
fn boot_kfence(mem: &str, variant: LinearMapVariant, rodata: Rodata, kfence_sample_interval: u64) -> Machine {
    let cfg = MachineConfig {
        kfence_sample_interval,
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        linear_map: true,
        linear_map_variant: variant,
        rodata,
        // The counts are derived by hand on bare RAM (no kernel image).
        ..MachineConfig::with(mem, 1).expect("size").bare()
    };
    mmlab_tests::boot(cfg).expect("boots with the linear map")
}

/// The counts derived by hand in the module documentation, per variant.
fn expected_64m(variant: LinearMapVariant) -> LinearMapCounts {
    let common =
        LinearMapCounts { pgtable_pud: 1, pgtable_pmd: 1, pgtable_pte: 32, pte_leaves: 16384, ..Default::default() };
    // (PTE maps, PMD maps, PUD maps, nosync clears, TLBIs, dsb ish, dsb ishst, isb)
    let (pte, pmd, pud, nosync, tlbi, ish, ishst, isb) = match variant {
        LinearMapVariant::Base => (34 + 1024, 2, 1, 0, 1061, 1061, 18540, 18540),
        LinearMapVariant::NoContRemap => (34 + 32, 1, 1, 0, 68, 68, 16554, 16554),
        LinearMapVariant::NoAllocRemap => (32, 1, 1, 0, 34, 34, 16520, 16486),
        LinearMapVariant::LazyUnmap => (32, 1, 1, 32, 34, 4, 16490, 16456),
        // 7.2 on bare RAM (no image, no KFENCE pool): 6.10's walk.
        LinearMapVariant::V6_10 | LinearMapVariant::V7_2 => (32, 1, 1, 0, 34, 34, 136, 102),
    };
    LinearMapCounts {
        fixmap_map_pte: pte,
        fixmap_map_pmd: pmd,
        fixmap_map_pud: pud,
        fixmap_unmap_pte: pte,
        fixmap_unmap_pmd: pmd,
        fixmap_unmap_pud: pud,
        fixmap_unmap_nosync: nosync,
        tlbi_vaale1is: tlbi,
        tlbi_total: tlbi,
        dsb_ish: ish,
        dsb_ishst: ishst,
        isb,
        ..common
    }
}

#[test]
fn counts_per_variant_match_the_hand_derivation() {
    for v in LinearMapVariant::ALL {
        let m = boot("64M", v, Rodata::On);
        let r = m.linear_map_report().expect("map_mem ran");
        assert_eq!(r.counts, expected_64m(v), "variant {}", v.name());
        assert_eq!(r.regions, [(PHYS_OFFSET, PHYS_OFFSET + (64 << 20))]);
        // Every TLBI was a one-page kernel invalidation.
        assert_eq!(r.tlbi.total(), r.counts.tlbi_vaale1is);
    }
}

#[test]
fn the_variants_cut_tlbis_as_the_series_says() {
    let c = |v| boot("64M", v, Rodata::On).linear_map_report().unwrap().counts;
    let (base, ncr, nar, lazy) = (
        c(LinearMapVariant::Base),
        c(LinearMapVariant::NoContRemap),
        c(LinearMapVariant::NoAllocRemap),
        c(LinearMapVariant::LazyUnmap),
    );
    // no-cont-remap: 31 TLBIs saved per full PTE table (32 -> 1) and per
    // 32 MiB chunk of the PMD table beyond the first.
    assert_eq!(base.tlbi_total - ncr.tlbi_total, 32 * 31 + 1);
    // no-alloc-remap: half of what is left, one TLBI per table.
    assert_eq!(nar.tlbi_total, ncr.pgtables());
    assert_eq!(ncr.tlbi_total, 2 * nar.tlbi_total);
    // lazy-unmap: the same TLBIs, one completion wait per 16 PTE tables.
    assert_eq!(lazy.tlbi_total, nar.tlbi_total);
    assert_eq!(lazy.dsb_ish, lazy.pgtable_pte / 16 + 2);
    assert_eq!(nar.dsb_ish, nar.tlbi_total);
}

/// Walk and access the first and last page of RAM through the linear map.
fn check_ends(m: &Machine, expect_level: Level) {
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let mem = m.config().mem_bytes;
    for pa in [PHYS_OFFSET, PHYS_OFFSET + mem - PAGE_SIZE] {
        let va = VaLayout::VA48.phys_to_virt(pa);
        let w = pgtable::walk(m, &k, va + 0x18);
        let leaf = w.leaf.unwrap_or_else(|| panic!("{va:#x} is not mapped"));
        assert_eq!(leaf.pa.0, pa + 0x18);
        assert_eq!(leaf.level, expect_level);
        // A store through the MMU lands in that page of RAM.
        mmu::write_u64(&cpu, &k, va + 0x18, 0xfeed_0000 ^ pa).unwrap();
        assert_eq!(
            m.arena().word(mmlab_engine::PhysAddr(pa + 0x18)).load(std::sync::atomic::Ordering::Relaxed),
            0xfeed_0000 ^ pa
        );
    }
    assert_eq!(VaLayout::VA48.phys_to_virt(PHYS_OFFSET), PAGE_OFFSET);
    // Nothing beyond the end of RAM.
    assert!(pgtable::walk(m, &k, VaLayout::VA48.phys_to_virt(PHYS_OFFSET + mem)).leaf.is_none());
}

#[test]
fn walks_land_on_the_right_pa_for_every_variant() {
    for v in LinearMapVariant::ALL {
        check_ends(&boot("64M", v, Rodata::On), Level::Pte);
    }
}

#[test]
fn rodata_full_has_no_block_or_contiguous_entry() {
    let m = boot("64M", LinearMapVariant::Base, Rodata::On);
    let k = m.kernel_as();
    let leaves = pgtable::leaves(&m, &k, PAGE_OFFSET, PAGE_OFFSET + (64 << 20));
    assert_eq!(leaves.iter().map(|(_, len)| len).sum::<u64>(), 64 << 20);
    let mut va = PAGE_OFFSET;
    while va < PAGE_OFFSET + (64 << 20) {
        let leaf = pgtable::walk(&m, &k, va).leaf.expect("mapped");
        assert_eq!(leaf.level, Level::Pte, "{va:#x}");
        assert!(!leaf.desc.is_cont(), "{va:#x}");
        va += PAGE_SIZE;
    }
    let c = m.linear_map_report().unwrap().counts;
    assert_eq!((c.pmd_blocks, c.pud_blocks, c.cont_leaves), (0, 0, 0));
}

#[test]
fn rodata_off_uses_contiguous_pmd_blocks_and_pud_blocks() {
    // 64 MiB: two 32 MiB chunks, each 16 PMD blocks with the contiguous bit;
    // the tables are one PUD and one PMD table, the base kernel zeroes both
    // through FIX_PTE, maps FIX_PMD per chunk and FIX_PUD once: 5 TLBIs.
    // (KFENCE must start early, or can_set_direct_map() forces pages; the
    // series' variants take that rule but allocate no pool.)
    let m = boot_kfence("64M", LinearMapVariant::Base, Rodata::Off, 100);
    let c = m.linear_map_report().unwrap().counts;
    assert_eq!((c.pgtable_pud, c.pgtable_pmd, c.pgtable_pte), (1, 1, 0));
    assert_eq!((c.pmd_blocks, c.cont_leaves, c.pte_leaves), (32, 32, 0));
    assert_eq!((c.fixmap_map_pte, c.fixmap_map_pmd, c.fixmap_map_pud, c.tlbi_total), (2, 2, 1, 5));
    check_ends(&m, Level::Pmd);
    let leaf = pgtable::walk(&m, &m.kernel_as(), PAGE_OFFSET).leaf.unwrap();
    assert!(leaf.desc.is_cont());
    // 1 GiB at a 1 GiB-aligned PA: one PUD block, no PMD table.
    let m = boot_kfence("1G", LinearMapVariant::NoAllocRemap, Rodata::NoAlias, 100);
    let c = m.linear_map_report().unwrap().counts;
    assert_eq!((c.pgtable_pud, c.pgtable_pmd, c.pud_blocks, c.tlbi_total), (1, 0, 1, 1));
    check_ends(&m, Level::Pud);
}

#[test]
fn debug_pagealloc_forces_page_granularity() {
    // rodata=off alone maps blocks; debug_pagealloc=on makes
    // can_set_direct_map() true, so the linear map is page-granular.
    let cfg = MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        linear_map: true,
        rodata: Rodata::Off,
        debug_pagealloc: true,
        ..MachineConfig::with("64M", 1).expect("size")
    };
    let m = mmlab_tests::boot(cfg).unwrap();
    let c = m.linear_map_report().unwrap().counts;
    assert_eq!((c.pmd_blocks, c.pud_blocks, c.cont_leaves, c.pte_leaves), (0, 0, 0, 16384));
    check_ends(&m, Level::Pte);
}

#[test]
fn default_boot_builds_the_linear_map_and_it_can_be_left_out() {
    let m = mmlab_tests::machine("64M", 1);
    let r = m.linear_map_report().expect("every arm64 kernel builds it");
    assert_eq!((r.variant, r.rodata), (LinearMapVariant::V7_2, Rodata::On));
    check_ends(&m, Level::Pte);
    let cfg = MachineConfig { linear_map: false, ..MachineConfig::with("64M", 1).expect("size") };
    let m = mmlab_tests::boot(cfg).unwrap();
    assert!(m.linear_map_report().is_none());
    assert!(pgtable::walk(&m, &m.kernel_as(), PAGE_OFFSET).leaf.is_none());
    assert!(!m.memblock().reservations().any(|r| r.name == "fixmap"));
}

#[test]
fn linear_map_tables_come_from_memblock_and_are_reserved() {
    let m = boot("64M", LinearMapVariant::LazyUnmap, Rodata::On);
    let mb = m.memblock();
    let fixmap = mb.reservations().filter(|r| r.name == "fixmap").map(|r| r.size).sum::<u64>();
    // v6.9-rc1's slots (no KVM FIX_VNCR) span two PMDs: two bm_pte.
    assert_eq!(fixmap, 4 * PAGE_SIZE, "bm_pud, bm_pmd, bm_pte[2]");
    // swapper + 4 vmemmap tables as before, plus 34 linear-map tables.
    let tables = mb.reservations().filter(|r| r.name == "pgtable").map(|r| r.size).sum::<u64>();
    assert_eq!(tables / PAGE_SIZE, 1 + 3 + 34);
}

/// The kernel image in RAM (`arm64.kernel_image=1`, Debian 7.2's sizes at
/// 0x40200000) with the linear-map code before 7.2: `[_text, _end)`
/// reserved; `map_mem()` maps the banks less
/// `[_stext, __init_begin)` = [0x40210000, 0x42710000) page by page
/// (rodata=full), then that interval as the alias with `NO_CONT_MAPPINGS`
/// only: its 2 MiB-aligned interior [0x40400000, 0x42600000) becomes 17
/// PMD blocks, its edges fill the PTE tables the first pass made for the
/// 2 MiB ranges they share with memory (496 + 272 PTEs). 64 MiB = 32 PMD
/// entries, 17 of them blocks: 15 PTE tables.
#[test]
fn kernel_image_is_carved_out_and_mapped_as_its_alias() {
    use mmlab_engine::arch::arm64::kimage::KernelImage;
    let k = KernelImage::DEBIAN_7_2;
    assert_eq!((k.stext(), k.init_begin()), (0x4021_0000, 0x4271_0000));
    for v in LinearMapVariant::SERIES {
        let cfg = MachineConfig {
            barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
            linear_map: true,
            linear_map_variant: v,
            kernel_image: Some(true),
            ..MachineConfig::with("64M", 1).expect("size")
        };
        let m = mmlab_tests::boot(cfg).unwrap();
        let kernel = *m.memblock().reservations().find(|r| r.name == "kernel").expect("reserved");
        assert_eq!((kernel.base.0, kernel.size), (0x4020_0000, 48128 << 10));
        let r = m.linear_map_report().unwrap();
        assert_eq!(r.regions, [(PHYS_OFFSET, 0x4021_0000), (0x4271_0000, PHYS_OFFSET + (64 << 20))]);
        assert_eq!(r.kernel_alias, [(0x4021_0000, 0x4271_0000)]);
        let c = r.counts;
        assert_eq!((c.pgtable_pud, c.pgtable_pmd, c.pgtable_pte), (1, 1, 15), "{}", v.name());
        assert_eq!((c.pmd_blocks, c.cont_leaves), (17, 0));
        assert_eq!(c.pte_leaves, 16384 - 17 * 512);
        let k_as = m.kernel_as();
        for (pa, level) in [
            (0x4020_f000, Level::Pte),
            (0x4021_0000, Level::Pte),
            (0x4040_0000, Level::Pmd),
            (0x4270_f000, Level::Pte),
            (0x4271_0000, Level::Pte),
        ] {
            let leaf = pgtable::walk(&m, &k_as, VaLayout::VA48.phys_to_virt(pa) + 8).leaf.expect("mapped");
            assert_eq!((leaf.pa.0, leaf.level), (pa + 8, level), "{pa:#x}");
        }
        check_ends(&m, Level::Pte);
    }
}

/// 7.2's `map_mem()` with the image on 64 MiB (rodata=on, KFENCE late: page
/// granularity). It maps the alias first: `[_text, __init_begin)` =
/// [0x40200000, 0x42710000) is 9488 PTEs in the PTE tables of PMD entries
/// 1..=18 (18 tables), then `[__init_end, __bss_stop)` = [0x42ae0000,
/// 0x430e6000) (`__bss_stop` is `_data` + 5282 KiB rwdata + 884 KiB bss,
/// page-aligned) is 1542 PTEs in the tables of entries 21..=24 (4 tables);
/// then all of memory, 16384 PTEs, rewriting the alias's entries with the
/// same values and adding the tables of the 10 entries left (0, 19, 20,
/// 25..=31): 32 PTE tables, 27414 PTE writes. Later
/// `mark_linear_text_alias_ro()` and `mark_rodata_ro()` make the alias of
/// `[_text, __init_begin)` and of `[__init_end, __bss_stop)` read-only; the
/// init sections between stay writable (they return to the page allocator).
#[test]
fn kernel_alias_is_mapped_first_and_made_read_only_as_7_2_does() {
    use mmlab_engine::arch::arm64::kimage::KernelImage;
    let k = KernelImage::DEBIAN_7_2;
    assert_eq!(
        (k.phys, k.init_begin(), k.init_end(), k.bss_stop()),
        (0x4020_0000, 0x4271_0000, 0x42ae_0000, 0x430e_6000)
    );
    let cfg = MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        kernel_image: Some(true),
        ..MachineConfig::with("64M", 1).expect("size")
    };
    let m = mmlab_tests::boot(cfg).unwrap();
    let r = m.linear_map_report().unwrap();
    assert_eq!(r.variant, LinearMapVariant::V7_2);
    assert_eq!(r.kernel_alias, [(0x4020_0000, 0x4271_0000), (0x42ae_0000, 0x430e_6000)]);
    assert_eq!(r.regions, [(PHYS_OFFSET, PHYS_OFFSET + (64 << 20))]);
    let c = r.counts;
    assert_eq!((c.pgtable_pud, c.pgtable_pmd, c.pgtable_pte), (1, 1, 32));
    assert_eq!((c.pmd_blocks, c.cont_leaves, c.pte_leaves), (0, 0, 9488 + 1542 + 16384));
    let k_as = m.kernel_as();
    for (pa, ro) in [
        (0x4000_0000, false),
        (0x4020_0000, true),
        (0x4270_f000, true),
        (0x4271_0000, false),
        (0x42ad_f000, false),
        (0x42ae_0000, true),
        (0x430e_5000, true),
        (0x430e_6000, false),
    ] {
        let leaf = pgtable::walk(&m, &k_as, VaLayout::VA48.phys_to_virt(pa)).leaf.expect("mapped");
        assert_eq!((leaf.level, !leaf.desc.writable()), (Level::Pte, ro), "{pa:#x}");
    }
    check_ends(&m, Level::Pte);
}

/// `rodata=noalias` lets the linear map use blocks only when KFENCE starts
/// early: with Debian's `kfence.sample_interval=0` late KFENCE still forces
/// pages (`can_set_direct_map()`); with 100 ms the 2 MiB pool is taken from
/// memblock (top-down: the last 2 MiB of the 64 MiB, aligned) and mapped
/// first with pages, and the 31 other 2 MiB ranges become PMD blocks (one
/// 32 MiB run is contiguous: [0x40000000, 0x42000000); the second run holds
/// the pool's table, so it stays without the bit).
#[test]
fn kfence_pool_is_a_page_mapped_island_with_rodata_noalias() {
    let boot = |kfence| {
        let cfg = MachineConfig {
            rodata: Rodata::NoAlias,
            kfence_sample_interval: kfence,
            ..MachineConfig::with("64M", 1).expect("size").bare()
        };
        mmlab_tests::boot(cfg).unwrap()
    };
    let late = boot(0);
    let c = late.linear_map_report().unwrap().counts;
    assert_eq!((c.pmd_blocks, c.pte_leaves), (0, 16384));
    let m = boot(100);
    let r = m.linear_map_report().unwrap();
    let (ps, pe) = r.kfence_pool.expect("early KFENCE allocates its pool");
    assert_eq!(pe - ps, 2 << 20);
    assert_eq!(ps % PAGE_SIZE, 0);
    let c = r.counts;
    let pool_tables = if ps % (2 << 20) == 0 { 1 } else { 2 };
    assert_eq!(c.pgtable_pte, pool_tables);
    assert_eq!(c.pmd_blocks, 32 - pool_tables);
    // The memory pass writes the pool's 2 MiB ranges again through their
    // tables (no block over a table).
    assert_eq!(c.pte_leaves, 512 + 512 * pool_tables);
    let k_as = m.kernel_as();
    let pool = pgtable::walk(&m, &k_as, VaLayout::VA48.phys_to_virt(ps)).leaf.unwrap();
    assert_eq!(pool.level, Level::Pte);
    let block = pgtable::walk(&m, &k_as, PAGE_OFFSET).leaf.unwrap();
    assert_eq!(block.level, Level::Pmd);
    assert!(block.desc.is_cont());
}

/// `reproduce linear-map`'s counts: a 3 GiB Altra machine run in full
/// agrees with the 1 GiB run plus 2 x the 2 GiB increment (else the
/// reproduction errs), and the 64 GiB base row holds the counts derived by
/// hand: 32768 PTE tables x (1 zeroing + 32 chunk maps) + 64 PMD tables x
/// (1 + 32) + the PUD table's zeroing and one map = 1083458 TLBIs, each a
/// completion wait in base.
#[test]
fn reproduce_counts_extrapolate_and_match_the_hand_derivation() {
    use mmlab_harness::reproduce::linear_map::{MachineRow, linear_map_on};
    let altra = |gib| MachineRow { name: "test", gib, profile: "ampere-altra" };
    let r = linear_map_on(&[(1, altra(3)), (1, altra(64))], 3).expect("runs and extrapolates");
    let base64 = &r.rows[1].cells[0];
    assert_eq!(base64.variant, LinearMapVariant::Base);
    assert!(!base64.run_in_full);
    assert_eq!(base64.counts.tlbi_total, 32768 * 33 + 64 * 33 + 2);
    assert_eq!(base64.counts.dsb_ish, base64.counts.tlbi_total);
    assert_eq!(base64.counts.pgtables(), 32768 + 64 + 1);
    // lazy-unmap: one completion wait per 16 PTE tables, plus the PMD and
    // PUD tables' own clears.
    let lazy = r.rows[1].cells.iter().find(|c| c.variant == LinearMapVariant::LazyUnmap).unwrap();
    assert_eq!(lazy.counts.dsb_ish, 32768 / 16 + 64 + 1);
    assert!(r.rows[0].cells.iter().all(|c| c.run_in_full));
    // Every variant is faster than base, on both rows.
    assert!(r.rows.iter().flat_map(|row| &row.cells[1..]).all(|c| c.ours_pct < 0.0 && c.agreement.is_some()));
}

/// `map_kernel()` with the image in RAM: the segments at `KIMAGE_VADDR`
/// with their permissions, translating to the image's PAs; vmalloc starts
/// after the image; `mmlab boot` reports the phase.
#[test]
fn kernel_image_is_mapped_at_kimage_vaddr() {
    use mmlab_engine::arch::arm64::kimage::KernelImage;
    use mmlab_engine::arch::arm64::memory::KIMAGE_VADDR;
    let k = KernelImage::DEBIAN_7_2;
    let cfg = MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        linear_map: true,
        kernel_image: Some(true),
        ..MachineConfig::with("128M", 1).expect("size")
    };
    let m = mmlab_tests::boot(cfg).unwrap();
    let asp = m.kernel_as();
    let cpu = m.cpu(0).unwrap();
    // (pa in the image, writable, executable)
    for (pa, w, x) in [
        // The header, read-only since 7.2's mark_rodata_ro().
        (k.phys, false, false),
        (k.stext() + 0x1234, false, true),
        (k.stext() + k.text + 8, false, false),
        (k.init_begin(), false, true),
        (k.end() - 8, true, false),
    ] {
        let va = k.va(pa);
        let leaf = pgtable::walk(&m, &asp, va).leaf.unwrap_or_else(|| panic!("{va:#x} unmapped"));
        assert_eq!(leaf.pa.0, pa, "{va:#x}");
        assert_eq!(leaf.desc.writable(), w, "{va:#x}");
        assert_eq!(!leaf.desc.has(mmlab_engine::arch::arm64::pgtable::desc::bits::PTE_PXN), x, "{va:#x}");
        assert_eq!(mmu::write_u64(&cpu, &asp, va & !7, 1).is_ok(), w, "{va:#x}");
    }
    assert_eq!(k.va(k.phys), KIMAGE_VADDR);
    assert!(pgtable::walk(&m, &asp, k.va_end()).leaf.is_none());
    let text = pgtable::walk(&m, &asp, k.va(k.stext() + (64 << 10))).leaf.unwrap();
    assert!(text.desc.is_cont(), "text in contiguous runs");
    drop(cpu);
    let pa = mmlab_pcp::PageAllocator::boot(&m, mmlab_pcp::AllocatorConfig::default()).unwrap();
    let vm = mmlab_vmalloc::Vmalloc::new(&pa, mmlab_vmalloc::VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    let v = vm.vmalloc(&cpu, 4096).unwrap();
    assert!(v >= k.va_end(), "vmalloc above the image: {v:#x}");
    assert!(m.boot_phases().iter().any(|p| p.name == "kernel image map"));
}
