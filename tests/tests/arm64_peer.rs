//! mmlab against a real arm64 kernel: the captures of Debian's 7.2.13
//! kernel booted under `qemu-system-aarch64 -M virt -cpu neoverse-n1 -smp 2
//! -m 4G` (`scripts/arm64-peer/boot.sh`, committed under
//! `tests/data/arm64-peer/4G-2cpu/`), compared field by field with mmlab's
//! same machine ([`mmlab_harness::peer`]).
//!
//! Only what holds today is asserted: the complete meminfo and vmstat
//! layouts, the fields mmlab computes exactly, and the pcp and vmstat
//! formulas on the real zone's own inputs (formula-equal).
//!
//! TODO, as mmlab's machine comes closer to the real boot (issue 13):
//! - zones: the real kernel has DMA [1 GiB, 4 GiB), DMA32 empty, Normal
//!   above 4 GiB; mmlab one Normal zone over everything. After the zone
//!   split, assert the `zone DMA/...` and `zone DMA32/...` keys exist,
//!   `spanned`/`present`/`start_pfn` per zone equal, `protection` equal
//!   (5 entries, DMA's nonzero), and buddyinfo's and pagetypeinfo's zone
//!   rows present.
//! - `min_free_kbytes` (45,056 with THP's raise) and then `min`/`low`/`high`
//!   /`promo` per zone formula-equal.
//! - DMA's `high_max` (47,344) is not `managed / 8 / 2` (47,420): managed
//!   pages moved after the last pageset update (freed init memory, as
//!   `live_peer.rs` explains), so it is formula-equal only within 1 %;
//!   assert that once the DMA zone exists.
//! - boot state: the early reservations and the kernel image's vmalloc
//!   areas are emulated (`boot.state=real`, `boot_state.rs` tests them
//!   against these captures); still to come: the CMA area freed as
//!   MIGRATE_CMA (then `MemTotal` within the not-emulated allocations of
//!   the real one), pagesets with count/high nonzero,
//!   Unmovable/Reclaimable/CMA pageblocks in pagetypeinfo, the ~120 other
//!   vmallocinfo areas and `VmallocUsed` 3,440 kB.
//! - per-node stats in zoneinfo (printed under the first zone).

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
