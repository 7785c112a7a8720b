//! mmlab against a real arm64 kernel: the captures of Debian's 7.2.13
//! kernel booted under `qemu-system-aarch64 -M virt -cpu neoverse-n1`
//! (`scripts/arm64-peer/boot.sh`, committed under `tests/data/arm64-peer/`:
//! 1G-1cpu, 4G-2cpu, 16G-4cpu, two more boots of each under `spread/`, and
//! 4G-2cpu with rodata=noalias, rodata=on, kfence.sample_interval=100 and
//! -cpu max), compared field by field with mmlab's same machine
//! ([`mmlab_harness::peer`]).
//!
//! Asserted: the structure of each comparison and its categories; the
//! fields mmlab computes exactly; the pcp and vmstat formulas on the real
//! zone's own inputs (formula-equal); that the page-table counts the
//! harness derives from the ptdump text are the ones the module counted on
//! the real kernel, on every capture; the spread of three boots; and
//! lib/test_vmalloc.c's pages per case against the real module's. The boot
//! state's own checks are in `boot_state.rs`, CMA's in `cma.rs`.
//!
//! Since the boot makes the real kernel's memblock allocations
//! (`boot.state=real`, engine/src/mm/boot_allocs.rs) and builds the linear
//! map by default, MemTotal, every zone's managed pages and everything
//! derived from them (watermarks, lowmem_reserve, the pagesets' batch and
//! bounds, CommitLimit) are equal, no longer only formula-equal.
//!
//! Not yet equal (see `what_differs_today`): what the running kernel does
//! after boot (the free pages, the pcp lists' contents and highs, CMA and
//! vmalloc pages, slab and the page cache).

use mmlab_harness::peer::capture::{Capture, KERNEL_PAGE_TABLES, VMALLOCINFO};
use mmlab_harness::peer::compare::Mark;
use mmlab_harness::peer::machine::OptionUse;
use mmlab_harness::peer::{self, MmlabFiles, ptdump};
use mmlab_harness::settings::Configs;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/arm64-peer").join(name)
}

fn capture(name: &str) -> Capture {
    Capture::read(&dir(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// Every committed capture (the three machines, their spread boots, the
/// option captures).
const ALL: [&str; 13] = [
    "1G-1cpu",
    "4G-2cpu",
    "16G-4cpu",
    "spread/1G-1cpu/boot2",
    "spread/1G-1cpu/boot3",
    "spread/4G-2cpu/boot2",
    "spread/4G-2cpu/boot3",
    "spread/16G-4cpu/boot2",
    "spread/16G-4cpu/boot3",
    "4G-2cpu-rodata-noalias",
    "4G-2cpu-rodata-on",
    "4G-2cpu-kfence",
    "4G-2cpu-cpu-max",
];

fn report(names: &[&str]) -> peer::PeerReport {
    let dirs: Vec<PathBuf> = names.iter().map(|n| dir(n)).collect();
    peer::run(&dirs, None, None, &[]).unwrap_or_else(|e| panic!("{e}")).0
}

fn mark(r: &peer::PeerReport, file: &str, key: &str) -> Mark {
    r.field(file, key).unwrap_or_else(|| panic!("{file} {key} missing")).mark
}

#[test]
fn every_capture_reads_and_names_its_machine() {
    for name in ALL {
        let c = capture(name);
        assert!(c.kernel.starts_with("linux-image-7.2.13+deb14-arm64"), "{name}");
        let want = match name {
            n if n.contains("1G-1cpu") => ("1G", 1),
            n if n.contains("16G-4cpu") => ("16G", 4),
            _ => ("4G", 2),
        };
        assert_eq!((c.machine.mem.as_str(), c.machine.cpus), want, "{name}");
        assert!(c.ptdump.is_some(), "{name}: kernel_page_tables");
    }
    assert_eq!(capture("4G-2cpu-cpu-max").options(), ["-cpu max"]);
    assert_eq!(capture("4G-2cpu-kfence").options(), ["kfence.sample_interval=100"]);
    assert!(capture("4G-2cpu").options().is_empty());
}

#[test]
fn meminfo_and_vmstat_print_every_line_of_the_kernel_in_its_order() {
    let real = capture("4G-2cpu");
    let c = Configs::from_options("4G", Some(2), &[], 2).unwrap();
    let ours = peer::mmlab_proc_fields(&peer::mmlab_files(&c).unwrap()).unwrap();
    for file in ["proc_meminfo", "proc_vmstat"] {
        let names = |f: &[(String, String)]| -> Vec<String> { f.iter().map(|(k, _)| k.clone()).collect() };
        let r = names(&real.fields[file]);
        let o = names(&ours[file]);
        // vmstat: mmlab's own counters follow the kernel's lines.
        assert_eq!(&o[..r.len()], &r[..], "{file}");
    }
    assert_eq!(real.fields["proc_meminfo"].len(), ours["proc_meminfo"].len());
}

/// The page-table counts derived from the dump's text (runs at or below a
/// level cover that level's tables) are the ones the module counted by
/// walking swapper_pg_dir, per level and per region, on every capture; and
/// the module's text is the kernel's own ptdump_walk().
#[test]
fn tables_derived_from_the_dump_are_the_modules_count() {
    for name in ALL {
        let c = capture(name);
        let (d, p) = c.ptdump.as_ref().unwrap();
        let (total, by_region) = d.tables();
        assert_eq!(total, p.tables, "{name}");
        let derived: Vec<(String, ptdump::Tables)> =
            by_region.iter().map(|(r, t)| (d.regions[*r].clone(), *t)).collect();
        assert_eq!(derived, p.regions, "{name}");
        assert_eq!((d.va_bits(), d.levels()), (p.va_bits, p.levels), "{name}");
        assert!(p.text.starts_with("the kernel's ptdump_walk(), the same as this module's walk"), "{name}: {}", p.text);
    }
}

/// The real kernel's table pages (the 4G/2 numbers of an earlier ad-hoc
/// capture were 1/4/9/2,064): the linear map all 4K PTEs, one PTE table per
/// 2 MiB of RAM.
#[test]
fn the_real_kernels_table_pages() {
    let t = |name: &str| capture(name).ptdump.unwrap().1;
    assert_eq!(t("4G-2cpu").tables, [1, 0, 4, 9, 2064]);
    assert_eq!(t("1G-1cpu").tables, [1, 0, 4, 6, 526]);
    assert_eq!(t("16G-4cpu").tables, [1, 0, 4, 21, 8209]);
    for (name, ram) in [("1G-1cpu", 1u64 << 30), ("4G-2cpu", 4 << 30), ("16G-4cpu", 16 << 30)] {
        let p = t(name);
        let lm = &p.regions.iter().find(|(r, _)| r == "Linear Mapping start").unwrap().1;
        assert_eq!(lm[4], ram >> 21, "{name}: a PTE table per 2M");
        assert_eq!(lm[3], ram >> 30, "{name}: a PMD table per 1G");
    }
    // -cpu max: FEAT_LPA2, 52-bit VAs, five levels, two P4D tables.
    let lpa2 = capture("4G-2cpu-cpu-max");
    let (d, p) = lpa2.ptdump.as_ref().unwrap();
    assert_eq!((p.va_bits, p.levels), (52, 5));
    assert_eq!(p.tables, [1, 2, 4, 9, 2063]);
    assert_eq!(d.runs[0].start, 0xfff0_0000_0000_0000, "PAGE_OFFSET");
    // VMALLOC_END moves down by the vmemmap of the 52-bit linear map:
    // 70,863,806,464 kB, against 135,288,315,904 kB with 48 bits.
    assert_eq!(lpa2.field("proc_meminfo", "VmallocTotal"), Some("70863806464"));
    assert_eq!(capture("4G-2cpu").field("proc_meminfo", "VmallocTotal"), Some("135288315904"));
}

#[test]
fn vmallocinfo_by_caller() {
    let r = report(&["4G-2cpu"]);
    let real = |k: &str| r.field(VMALLOCINFO, k).and_then(|f| f.real.clone()).unwrap_or_else(|| panic!("{k}"));
    // The kernel image's five areas first, then the boot's ioremaps,
    // stacks (kernel_clone: 63 of 4 pages + guard), percpu, bpf.
    assert_eq!(real("paging_init/areas"), "5");
    assert_eq!(real("paging_init/rank"), "1");
    assert_eq!(real("paging_init/kind"), "vmap");
    assert_eq!(real("kernel_clone/areas"), "63");
    assert_eq!(real("kernel_clone/sizes"), "20480x63");
    assert_eq!(real("areas"), "112");
    // The boot's stacks are made by vmalloc/src/boot.rs: compared (58 here).
    assert!(
        matches!(mark(&r, VMALLOCINFO, "kernel_clone/areas"), Mark::Equal | Mark::Different | Mark::WithinSpread),
        "boot-time stacks"
    );
    // What mmlab emulates is compared, whatever it prints today.
    assert!(matches!(mark(&r, VMALLOCINFO, "paging_init/areas"), Mark::Equal | Mark::Different));
}

#[test]
fn fields_mmlab_emulates_exactly() {
    let r = report(&["4G-2cpu"]);
    for key in ["VmallocTotal", "Hugepagesize", "HugePages_Total", "Hugetlb"] {
        assert_eq!(mark(&r, "proc_meminfo", key), Mark::Equal, "{key}");
    }
    // MemTotal (was within 64 MiB): the managed pages below, 758,735 +
    // 241,854 = 1,000,589 pages = 4,002,356 kB. CommitLimit (was
    // formula-equal): vm_commit_limit() on that total, 1,000,589 x 50 / 100
    // = 500,294 pages = 2,001,176 kB, no hugetlb pages and no swap.
    for key in ["MemTotal", "CommitLimit"] {
        assert_eq!(mark(&r, "proc_meminfo", key), Mark::Equal, "{key}");
    }
    for key in ["nr_hugetlb", "pgalloc_movable", "pgalloc_device"] {
        assert_eq!(mark(&r, "proc_vmstat", key), Mark::Equal, "{key}");
    }
    for key in ["Page block order", "Pages per block"] {
        assert_eq!(mark(&r, "proc_pagetypeinfo", key), Mark::Equal, "{key}");
    }
    // The zones are split as the real kernel's: the same spans, and now
    // the same managed pages (were different):
    // - DMA [1 GiB, 4 GiB): 786,432 - 27,697 reserved = 758,735: the kernel
    //   image's 12,032 pages less the 976 of its init sections freed at the
    //   end of boot, the swiotlb buffer's 16,384, the DTB's 256 and the one
    //   page the initrd keeps of its 256 (the CMA area's 16,384 pages are
    //   managed);
    // - Normal [4 GiB, 5 GiB): 262,144 - 20,290 reserved = 241,854: the
    //   memmap's 16,384, the linear map's 2,053 tables (2,048 pte, 4 pmd, 1
    //   pud: 7.2 maps memory page by page, force_pte_mapping()), the dentry
    //   and inode hash tables' 1,536, swiotlb's slots and areas 193, the
    //   first percpu chunk's 73, the mem_section roots and index 33, the
    //   unflattened DT's 12, NODE_DATA's 3, the vmemmap's pud and pmd 2 and
    //   the usemap's 1 (the cmdline and bootmem_init's bytes share pages).
    for z in ["DMA", "Normal"] {
        for f in ["spanned", "present", "managed", "cma"] {
            let key = format!("zone {z}/{f}");
            assert_eq!(mark(&r, "proc_zoneinfo", &key), Mark::Equal, "{key}");
        }
    }
    // Derived from the managed pages when init_per_zone_wmark_min() and
    // the pagesets ran, now equal (were different):
    // - lowmem then: DMA 758,735 - 976 - 255 = 757,504 (the init sections
    //   and the initrd come back later, without a recomputation) + Normal
    //   241,854 = 999,358;
    // - min_free_kbytes 45,056 (khugepaged: 512 x 2 zones x 11 pages), so
    //   min: DMA 11,264 x 757,504 / 999,358 = 8,538, delta 8,538 / 4 =
    //   2,134: low 10,672, high 12,806, promo 14,940; Normal 11,264 x
    //   241,854 / 999,358 = 2,725, delta 681: 3,406, 4,087, 4,768;
    // - protection: DMA keeps Normal's 241,854 / 256 = 944 pages;
    // - pagesets: batch min(managed >> 12, 64) = 64 (DMA) or 59 (Normal)
    //   -> 63; high_min = low / 2 CPUs: DMA 5,336, Normal 1,703; high_max =
    //   managed / 8 / 2: DMA 757,504 / 16 = 47,344, Normal 15,115 (were
    //   formula-equal); the vmstat threshold 2 x fls(2) x (1 + fls(managed
    //   >> 15)): DMA 24, Normal 16 (already equal).
    for z in ["DMA", "Normal"] {
        for f in ["min", "low", "high", "promo", "protection"] {
            let key = format!("zone {z}/{f}");
            assert_eq!(mark(&r, "proc_zoneinfo", &key), Mark::Equal, "{key}");
        }
        for cpu in 0..2 {
            for f in ["batch", "high_min", "high_max", "vm stats threshold"] {
                let key = format!("zone {z}/cpu {cpu}/{f}");
                assert_eq!(mark(&r, "proc_zoneinfo", &key), Mark::Equal, "{key}");
            }
        }
    }
    assert_eq!(mark(&r, KERNEL_PAGE_TABLES, "va_bits"), Mark::Equal);
    assert_eq!(mark(&r, KERNEL_PAGE_TABLES, "levels"), Mark::Equal);
}

/// `-cpu max` (FEAT_LPA2) boots mmlab's five-level, 52-bit machine
/// (`arm64.lpa2=on`), and what LPA2 changes is equal to the real boot's:
/// - the layout: the linear map at 0xfff0000000000000 and VMALLOC_END
///   8 MiB below the vmemmap of the 52-bit linear map (VmallocTotal
///   70,863,806,464 kB), the same markers in the dump;
/// - five levels: two p4d tables (the linear map's from memblock, the one
///   the image, modules, vmemmap and fixmap share from init_pg_dir);
/// - MemTotal 4,000,432 kB, 481 pages below the four-level machine's: the
///   p4d table (early_pgtable_alloc()) and the mem_section root array of
///   2 MiB instead of 128 KiB (MAX_PHYSMEM_BITS = PHYS_MASK_SHIFT = 52:
///   2^25 sections / 128 per root x 8 bytes), 480 pages more, as the real
///   boot's `memblock=debug` log shows;
/// - no SHD in the dump (PTE_MAYBE_SHARED is 0 with LPA2): the linear
///   map's run is "RW NX AF UXN MEM/NORMAL-TAGGED" in both.
#[test]
fn lpa2_is_the_cpu_max_boot() {
    let r = report(&["4G-2cpu-cpu-max"]);
    assert_eq!(r.options[0].used, OptionUse::Set("arm64.lpa2=on".to_string()));
    for key in ["MemTotal", "VmallocTotal", "CommitLimit"] {
        assert_eq!(mark(&r, "proc_meminfo", key), Mark::Equal, "{key}");
    }
    assert_eq!(r.field("proc_meminfo", "MemTotal").unwrap().mmlab.as_deref(), Some("4000432"));
    for z in ["DMA", "Normal"] {
        for f in ["managed", "min", "low", "high"] {
            let key = format!("zone {z}/{f}");
            assert_eq!(mark(&r, "proc_zoneinfo", &key), Mark::Equal, "{key}");
        }
    }
    for key in ["va_bits", "levels", "tables/pgd", "tables/p4d", "tables/pud"] {
        assert_eq!(mark(&r, KERNEL_PAGE_TABLES, key), Mark::Equal, "{key}");
    }
    assert_eq!(r.field(KERNEL_PAGE_TABLES, "tables/p4d").unwrap().mmlab.as_deref(), Some("2"));
    let run = "Linear Mapping start/PTE RW NX AF UXN MEM/NORMAL-TAGGED";
    assert!(r.field(KERNEL_PAGE_TABLES, run).is_some_and(|f| f.real.is_some() && f.mmlab.is_some()), "{run}");
}

#[test]
fn what_differs_today() {
    let r = report(&["4G-2cpu"]);
    // What the kernel does once it runs: the real boot's page allocations
    // are made for this machine (pcp/src/boot_work.rs), with its CMA
    // allocations (cma_alloc_success 2: 256 pages) and its vmalloc areas
    // (vmalloc/src/boot.rs), but not the pcp lists they leave nor this
    // boot's exact number of stacks.
    assert_eq!(mark(&r, "proc_meminfo", "CmaFree"), Mark::Equal);
    for key in ["MemFree", "MemAvailable", "VmallocUsed"] {
        assert_eq!(mark(&r, "proc_meminfo", key), Mark::Different, "{key}");
    }
    for key in ["zone Normal/pages free", "zone Normal/cpu 0/count", "zone Normal/cpu 0/high"] {
        assert_eq!(mark(&r, "proc_zoneinfo", key), Mark::Different, "{key}");
    }
    // With MemTotal equal, MemFree differs only by what is allocated after
    // boot: mmlab holds less than the real kernel (8,292 kB less today;
    // the pcp lists alone hold 4,063 pages there and 2,672 here, 5,564 kB,
    // and the CMA and vmalloc pages 4,464 kB). 16 MiB is the tolerance.
    let f = r.field("proc_meminfo", "MemFree").unwrap();
    let (real, ours): (u64, u64) =
        (f.real.as_ref().unwrap().parse().unwrap(), f.mmlab.as_ref().unwrap().parse().unwrap());
    assert!(ours > real && ours - real <= 16_384 && real > 3_900_000, "{real} {ours}");
    // The page cache and slab the real boot has are not modelled.
    assert_eq!(mark(&r, "proc_meminfo", "Slab"), Mark::NotModelled);
}

/// high_max was computed when khugepaged raised min_free_kbytes (a subsys
/// initcall), before the initrd and the init sections were freed into the
/// lowest zone: the formula takes the managed pages of that moment.
#[test]
fn high_max_takes_the_managed_pages_before_free_initmem() {
    for (name, cpus) in [("4G-2cpu", 2u32), ("16G-4cpu", 4), ("1G-1cpu", 1)] {
        let c = capture(name);
        let real: BTreeMap<&str, &str> =
            c.fields["proc_zoneinfo"].iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let managed: u64 = real["zone DMA/managed"].parse().unwrap();
        let low: u64 = real["zone DMA/low"].parse().unwrap();
        let high_max = real["zone DMA/cpu 0/high_max"];
        // "Freeing initrd memory: 1020K", "Freeing unused kernel memory: 3904K".
        assert_eq!(c.freed_after_pcp_setup(), (1020 + 3904) / 4, "{name}");
        let f = peer::compare::formula("proc_zoneinfo", "zone DMA/cpu 0/high_max", &real, &c, cpus as usize);
        assert_eq!(f.as_deref(), Some(high_max), "{name}");
        // With today's managed pages it would not be.
        let batch = mmlab_pcp::zone_batchsize(managed);
        let f8 = mmlab_pcp::MIN_PERCPU_PAGELIST_HIGH_FRACTION;
        let now = mmlab_pcp::zone_highsize(managed, low, batch, cpus, 0, cpus, f8);
        assert_ne!(now.to_string(), high_max, "{name}");
    }
}

/// The per-node and NUMA counters of zoneinfo that mmlab prints as 0
/// without computing them are not-modelled, never different.
#[test]
fn zero_counters_mmlab_does_not_model_are_not_modelled() {
    let r = report(&["4G-2cpu"]);
    let zero_counters: Vec<&peer::PeerField> = r
        .fields
        .iter()
        .filter(|f| f.file == "proc_zoneinfo" && f.mmlab.as_deref() == Some("0") && f.real.as_deref() != Some("0"))
        .filter(|f| {
            let name = f.key.rsplit('/').next().unwrap();
            name.starts_with("numa_") || (f.key.contains("/node/") && name != "nr_vmalloc")
        })
        .collect();
    assert!(zero_counters.len() >= 10, "{zero_counters:?}");
    for f in zero_counters {
        assert_eq!(f.mark, Mark::NotModelled, "{f:?}");
    }
    assert_eq!(mark(&r, "proc_zoneinfo", "zone Normal/numa_hit"), Mark::NotModelled);
    assert_eq!(mark(&r, "proc_meminfo", "Slab"), Mark::NotModelled);
}

/// Three boots: the fields that differ between them carry their spread;
/// a side whose value is within it is within-spread. "mmlab" here is the
/// third boot's own files, so every field is equal or within the spread,
/// none different.
#[test]
fn three_boots_give_the_spread() {
    let names = ["4G-2cpu", "spread/4G-2cpu/boot2", "spread/4G-2cpu/boot3"];
    let caps: Vec<Capture> = names.iter().map(|n| capture(n)).collect();
    let files: BTreeMap<&'static str, String> =
        peer::PEER_FILES.iter().map(|&f| (f, std::fs::read_to_string(dir(names[2]).join(f)).unwrap())).collect();
    let third = MmlabFiles { files, modelled: Vec::new() };
    let r = peer::compare(&caps, &third, Vec::new()).unwrap();
    assert_eq!(r.boots.len(), 3);
    let mut within = 0;
    for f in &r.fields {
        assert!(
            matches!(f.mark, Mark::Equal | Mark::WithinSpread | Mark::FormulaEqual | Mark::OnlyReal | Mark::OnlyMmlab),
            "{f:?}"
        );
        if f.mark == Mark::WithinSpread {
            within += 1;
            assert!(f.spread.is_some(), "{f:?}");
        }
        if f.spread.is_none() && f.mark != Mark::OnlyMmlab && f.mark != Mark::OnlyReal {
            assert_eq!(f.mark, Mark::Equal, "no spread, the same value: {f:?}");
        }
    }
    assert!(within > 20, "{within}");
    // The boots differ in the page allocator's state and the boot's
    // vmalloc users, not in the machine: the zones' spans, managed pages,
    // watermarks and pageset bounds are the same in every boot.
    for key in ["zone DMA/managed", "zone Normal/managed", "zone Normal/low", "zone DMA/cpu 0/high_max"] {
        assert_eq!(r.field("proc_zoneinfo", key).unwrap().spread, None, "{key}");
    }
    assert_eq!(r.field("proc_meminfo", "MemTotal").unwrap().spread, None);
    assert_eq!(r.field(KERNEL_PAGE_TABLES, "tables/pte").unwrap().spread.as_deref(), Some("2063..2064"));
    assert!(r.field("proc_meminfo", "MemFree").unwrap().spread.is_some());
    assert!(!r.spread_fields(VMALLOCINFO).is_empty());
}

/// The real boots against mmlab: a field within-spread has mmlab's value
/// inside the real boots' and not the first boot's.
#[test]
fn within_spread_against_mmlab() {
    let r = report(&["16G-4cpu", "spread/16G-4cpu/boot2", "spread/16G-4cpu/boot3"]);
    assert_eq!(r.machine.cpus, 4);
    for f in r.fields.iter().filter(|f| f.mark == Mark::WithinSpread) {
        let (lo, hi) = f.spread.as_deref().unwrap().split_once("..").unwrap();
        let v: u64 = f.mmlab.as_deref().unwrap().parse().unwrap();
        assert!(lo.parse::<u64>().unwrap() <= v && v <= hi.parse::<u64>().unwrap(), "{f:?}");
        assert_ne!(f.real, f.mmlab, "{f:?}");
    }
    let text = r.to_string();
    assert!(text.contains("fields differ between the 3 boots"), "{text}");
}

#[test]
fn boots_of_another_configuration_are_refused() {
    let dirs = [dir("4G-2cpu"), dir("spread/1G-1cpu/boot2")];
    let e = peer::run(&dirs, None, None, &[]).unwrap_err();
    assert!(e.contains("is not a boot of the configuration of"), "{e}");
    let dirs = [dir("4G-2cpu"), dir("4G-2cpu-rodata-on")];
    assert!(peer::run(&dirs, None, None, &[]).is_err());
}

/// Each option of a capture is booted in mmlab where mmlab has the
/// setting, and named `not modelled` where it has not: never a silent
/// other machine.
#[test]
fn options_are_mapped_or_named_not_modelled() {
    let used = |name: &str| {
        let r = report(&[name]);
        assert_eq!(r.options.len(), 1, "{name}");
        (r.options[0].used.clone(), r.not_modelled(), r.to_string())
    };
    let (u, nm, _) = used("4G-2cpu-rodata-on");
    assert_eq!(u, OptionUse::Set("rodata=on".to_string()));
    assert!(nm.is_empty());
    for (name, option) in [
        ("4G-2cpu-rodata-noalias", "rodata=noalias"),
        ("4G-2cpu-kfence", "kfence.sample_interval=100"),
        ("4G-2cpu-cpu-max", "-cpu max"),
    ] {
        let (u, nm, text) = used(name);
        match u {
            OptionUse::Set(_) => assert!(nm.is_empty(), "{name}"),
            OptionUse::NotModelled(_) => {
                assert_eq!(nm.len(), 1, "{name}");
                assert!(nm[0].starts_with(&format!("not modelled: {option} (")), "{nm:?}");
                assert!(text.lines().any(|l| l == nm[0]), "{text}");
            }
            OptionUse::Default => panic!("{name}: {option} is not mmlab's default"),
        }
    }
}

/// The page-table counts the harness derives from mmlab's own dump are the
/// engine's count of its tables.
#[test]
fn mmlab_tables_derived_from_its_dump_are_its_tables() {
    for sets in [vec![], vec!["arm64.linear_map=on".to_string()]] {
        let c = Configs::from_options("1G", Some(1), &sets, 1).unwrap();
        let ours = peer::mmlab_files(&c).unwrap();
        let d = ptdump::parse(&ours.files[KERNEL_PAGE_TABLES]).unwrap();
        let stack = mmlab_harness::stack::Stack::boot(&c).unwrap();
        // The allocator with the boot's vmalloc areas, whose tables the dump has.
        let _pa = stack.allocator().unwrap();
        let m = stack.machine();
        let st = mmlab_engine::arch::arm64::pgtable::stats(m, &m.kernel_as());
        let (t, _) = d.tables();
        assert_eq!(t, st.tables, "{sets:?}");
    }
}

/// lib/test_vmalloc.c on the real kernel (`PEER_TEST_VMALLOC=1`, the
/// module built for Debian's kernel by `scripts/arm64-peer/test_vmalloc/`)
/// against `mmlab test-vmalloc` with the same parameters: the pages each
/// case allocates and frees agree within 6 %, and the results agree. The
/// cases here are the capture's cheaper ones (a debug build runs them in
/// seconds); `mmlab peer` runs all of them.
#[test]
fn test_vmalloc_pages_per_case_match_the_real_kernel() {
    let text = std::fs::read_to_string(dir("4G-2cpu").join(peer::test_vmalloc::CAPTURE_FILE)).unwrap();
    let all = peer::test_vmalloc::parse(&text).unwrap();
    assert_eq!(all.len(), 17, "the baseline and sixteen cases");
    // Under qemu-user (MMLAB_TEST_SCALE > 1) only the three cheapest cases.
    let cheap: &[u32] =
        if mmlab_tests::scale(16) < 16 { &[0, 1, 256, 2048] } else { &[0, 1, 16, 128, 256, 2048, 4096] };
    let cases: Vec<_> = all
        .into_iter()
        .filter(|c| {
            let mask = c.args.iter().find_map(|a| a.strip_prefix("run_test_mask=")?.parse::<u32>().ok());
            mask.is_some_and(|m| cheap.contains(&m)) && !c.args.iter().any(|a| a.starts_with("nr_pages="))
        })
        .collect();
    assert_eq!(cases.len(), cheap.len());
    let c = Configs::from_options("4G", Some(2), &[], 2).unwrap();
    let r = peer::test_vmalloc::compare(&c, &cases, 1).unwrap();
    assert_eq!(r.rows.len(), cheap.len() - 1, "the baseline is not a row");
    for row in &r.rows {
        assert!(row.real_pgalloc > 9_000, "{row:?}");
        assert!(row.pgalloc_diff_pct().abs() <= 6.0 && row.pgfree_diff_pct().abs() <= 6.0, "{row:?}");
        assert_eq!(row.real_results, row.mmlab_results, "{row:?}");
    }
}
