//! mmlab against a real arm64 kernel: the captures of Debian's 7.2.13
//! kernel booted under `qemu-system-aarch64 -M virt -cpu neoverse-n1 -smp 2
//! -m 4G` (`scripts/arm64-peer/boot.sh`, committed under
//! `tests/data/arm64-peer/4G-2cpu/`), compared field by field with mmlab's
//! same machine ([`mmlab_harness::peer`]).
//!
//! Asserted: the complete meminfo and vmstat layouts, the fields mmlab
//! computes exactly, the pcp and vmstat formulas on the real zone's own
//! inputs (formula-equal), the zones' spans, and lib/test_vmalloc.c's pages
//! per case against the real module's. The boot state's own checks are in
//! `boot_state.rs`, CMA's in `cma.rs`.
//!
//! Not yet equal (see `what_differs_today`): the managed pages (the real
//! boot's percpu areas, hash tables and printk buffers are not emulated),
//! and so every watermark and pageset bound derived from them.

use mmlab_harness::peer::{self, Mark};
use mmlab_harness::settings::Configs;
use std::path::Path;

fn capture() -> std::collections::BTreeMap<&'static str, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/arm64-peer/4G-2cpu");
    peer::read_capture(&dir).unwrap()
}

fn report() -> peer::PeerReport {
    let c = Configs::from_options("4G", Some(2), &[], 2).unwrap();
    let ours = peer::mmlab_files(&c).unwrap();
    peer::compare(&capture(), &ours, 2)
}

fn mark(r: &peer::PeerReport, file: &str, key: &str) -> Mark {
    r.field(file, key).unwrap_or_else(|| panic!("{file} {key} missing")).mark
}

#[test]
fn meminfo_and_vmstat_print_every_line_of_the_kernel_in_its_order() {
    let real = capture();
    let ours = peer::mmlab_files(&Configs::from_options("4G", Some(2), &[], 2).unwrap()).unwrap();
    for file in ["proc_meminfo", "proc_vmstat"] {
        let names = |t: &str| -> Vec<String> { peer::fields(file, t).into_iter().map(|(k, _)| k).collect() };
        let r = names(&real[file]);
        let o = names(&ours.files[file]);
        // vmstat: mmlab's own counters follow the kernel's lines.
        assert_eq!(&o[..r.len()], &r[..], "{file}");
    }
    // Every line mmlab prints for meminfo is the kernel's.
    assert_eq!(real["proc_meminfo"].lines().count(), ours.files["proc_meminfo"].lines().count());
}

#[test]
fn fields_mmlab_emulates_exactly() {
    let r = report();
    for key in ["VmallocTotal", "VmallocChunk", "Hugepagesize", "HugePages_Total", "Hugetlb"] {
        assert_eq!(mark(&r, "proc_meminfo", key), Mark::Equal, "{key}");
    }
    // vm_commit_limit() on the real MemTotal.
    assert_eq!(mark(&r, "proc_meminfo", "CommitLimit"), Mark::FormulaEqual);
    for key in ["nr_hugetlb", "pgalloc_movable", "pgalloc_device"] {
        assert_eq!(mark(&r, "proc_vmstat", key), Mark::Equal, "{key}");
    }
    for key in ["Page block order", "Pages per block"] {
        assert_eq!(mark(&r, "proc_pagetypeinfo", key), Mark::Equal, "{key}");
    }
    // The Normal zone's pagesets: the batch and the vmstat threshold equal
    // (both from managed pages in the same power-of-two band), the high
    // bounds from the kernel's formulas on the real zone's managed pages
    // and low watermark.
    for cpu in 0..2 {
        for f in ["batch", "vm stats threshold"] {
            let key = format!("zone Normal/cpu {cpu}/{f}");
            assert_eq!(mark(&r, "proc_zoneinfo", &key), Mark::Equal, "{key}");
        }
        for f in ["high_min", "high_max"] {
            let key = format!("zone Normal/cpu {cpu}/{f}");
            assert_eq!(mark(&r, "proc_zoneinfo", &key), Mark::FormulaEqual, "{key}");
        }
    }
}

#[test]
fn what_differs_today() {
    let r = report();
    // The zones are split as the real kernel's: the same spans; the
    // managed pages differ by what the emulated boot state does not leave.
    for z in ["DMA", "Normal"] {
        assert_eq!(mark(&r, "proc_zoneinfo", &format!("zone {z}/spanned")), Mark::Equal, "{z}");
        assert_eq!(mark(&r, "proc_zoneinfo", &format!("zone {z}/present")), Mark::Equal, "{z}");
        assert_eq!(mark(&r, "proc_zoneinfo", &format!("zone {z}/managed")), Mark::Different, "{z}");
    }
    // The emulated boot state (boot.state=real) reserves what the real
    // boot reserves early and frees the CMA area as MIGRATE_CMA; MemTotal
    // is above the real one by what is not emulated (percpu, hash tables,
    // printk, ...). Bare RAM was 126,396 kB above.
    let f = r.field("proc_meminfo", "MemTotal").unwrap();
    let (real, ours): (u64, u64) =
        (f.real.as_ref().unwrap().parse().unwrap(), f.mmlab.as_ref().unwrap().parse().unwrap());
    assert!(real.abs_diff(ours) <= 65_536 && real > 3_900_000, "{real} {ours}");
    // The page cache and slab the real boot has are not modelled.
    assert_eq!(mark(&r, "proc_meminfo", "Slab"), Mark::NotModelled);
}

#[test]
fn the_capture_names_its_machine() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/arm64-peer/4G-2cpu");
    assert_eq!(peer::capture_machine(&dir), Some(("4G".to_string(), 2)));
    assert_eq!(peer::capture_machine(Path::new("/nonexistent")), None);
}

/// lib/test_vmalloc.c on the real kernel (`PEER_TEST_VMALLOC=1`, the
/// module built for Debian's kernel by `scripts/arm64-peer/test_vmalloc/`)
/// against `mmlab test-vmalloc` with the same parameters: the pages each
/// case allocates and frees agree within 6 %, and the results agree. The
/// cases here are the capture's cheaper ones (a debug build runs them in
/// seconds); `mmlab peer` runs all of them.
#[test]
fn test_vmalloc_pages_per_case_match_the_real_kernel() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/arm64-peer/4G-2cpu");
    let text = std::fs::read_to_string(dir.join(peer::test_vmalloc::CAPTURE_FILE)).unwrap();
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
