//! The marks: how a real field compares with mmlab's, over one boot or
//! several boots of the same configuration.

use super::capture::Capture;
use super::ptdump::region_of;
use super::vmallocinfo::caller_of;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// How a field compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    /// The same value.
    Equal,
    /// mmlab's formula on the real machine's inputs gives the real value.
    FormulaEqual,
    /// Within the values of several boots of the real machine.
    WithinSpread,
    /// mmlab does not model the thing.
    NotModelled,
    /// The values differ.
    Different,
    /// Only the real kernel prints it.
    OnlyReal,
    /// Only mmlab prints it.
    OnlyMmlab,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mark::Equal => "equal",
            Mark::FormulaEqual => "formula-equal",
            Mark::WithinSpread => "within-spread",
            Mark::NotModelled => "not-modelled",
            Mark::Different => "different",
            Mark::OnlyReal => "only-real",
            Mark::OnlyMmlab => "only-mmlab",
        })
    }
}

/// vmallocinfo callers mmlab's boot has (the kernel image's areas, which
/// paging_init() registers): a real caller that mmlab lacks is
/// `not-modelled`, unless it is one of these (`only-real`: mmlab lost it).
pub const MODELLED_CALLERS: [&str; 1] = ["paging_init"];

/// ptdump regions mmlab maps: the linear map, the kernel image in the
/// vmalloc area, the vmemmap. What only the real kernel has in another
/// region (modules, PCI I/O, the fixmap) is `not-modelled`.
pub const MODELLED_REGIONS: [&str; 3] = ["Linear Mapping start", "vmalloc() area", "vmemmap start"];

/// One file's fields on every side.
#[derive(Debug)]
pub struct Sides<'a> {
    /// The file.
    pub file: &'static str,
    /// The fields of each real boot, the first one first.
    pub boots: Vec<Vec<(String, String)>>,
    /// mmlab's.
    pub mmlab: Vec<(String, String)>,
    /// The first boot's capture (for the formulas' inputs).
    pub capture: &'a Capture,
    /// The meminfo and vmstat lines mmlab computes (the others it prints
    /// as 0).
    pub modelled: &'a [&'static str],
    /// CPUs.
    pub nr_cpus: usize,
}

/// One compared field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compared {
    /// The key.
    pub key: String,
    /// The first boot's value.
    pub real: Option<String>,
    /// `min..max` (numbers) or `a|b|...` over the boots, when they differ.
    pub spread: Option<String>,
    /// mmlab's value.
    pub mmlab: Option<String>,
    /// The mark.
    pub mark: Mark,
}

/// The values of `key` over the boots that have it, distinct, in boot order.
fn boot_values<'v>(boots: &'v [BTreeMap<&str, &str>], key: &str) -> Vec<&'v str> {
    let mut v: Vec<&str> = Vec::new();
    for b in boots {
        if let Some(x) = b.get(key)
            && !v.contains(x)
        {
            v.push(x);
        }
    }
    v
}

/// How the boots' values spread, printed: `min..max` when they are all
/// numbers, else the values joined by `|`. None when they agree.
fn spread_text(values: &[&str]) -> Option<String> {
    if values.len() < 2 {
        return None;
    }
    let nums: Option<Vec<u64>> = values.iter().map(|v| v.parse::<u64>().ok()).collect();
    Some(match nums {
        Some(n) => format!("{}..{}", n.iter().min()?, n.iter().max()?),
        None => values.join("|"),
    })
}

/// Whether `ours` is within what the boots printed.
fn within(values: &[&str], ours: &str) -> bool {
    if values.len() < 2 {
        return false;
    }
    let nums: Option<Vec<u64>> = values.iter().map(|v| v.parse::<u64>().ok()).collect();
    match (nums, ours.parse::<u64>()) {
        (Some(n), Ok(o)) => n.iter().min().is_some_and(|m| *m <= o) && n.iter().max().is_some_and(|m| o <= *m),
        _ => values.contains(&ours),
    }
}

/// The managed pages a zone had when the kernel last sized its pagesets:
/// today's, less what it freed into the lowest populated zone since
/// ([`Capture::freed_after_pcp_setup`]).
fn managed_at_pcp_setup(zone: &str, real: &BTreeMap<&str, &str>, capture: &Capture) -> Option<u64> {
    let managed = real.get(format!("{zone}/managed").as_str())?.parse::<u64>().ok()?;
    let lowest = capture
        .fields
        .get("proc_zoneinfo")?
        .iter()
        .find(|(k, v)| k.ends_with("/present") && v != "0")
        .and_then(|(k, _)| k.strip_suffix("/present"))?;
    Some(if lowest == zone { managed.checked_sub(capture.freed_after_pcp_setup())? } else { managed })
}

/// The real value recomputed with mmlab's formula from the real file's own
/// inputs, for the fields that have one.
pub fn formula(
    file: &str,
    key: &str,
    real: &BTreeMap<&str, &str>,
    capture: &Capture,
    nr_cpus: usize,
) -> Option<String> {
    let num = |k: &str| real.get(k).and_then(|v| v.parse::<u64>().ok());
    match (file, key) {
        ("proc_meminfo", "CommitLimit") => {
            let pages = num("MemTotal")? / 4 - num("Hugetlb")? / 4;
            Some((pages * 50 / 100 * 4).to_string())
        }
        ("proc_zoneinfo", k) => {
            let (zone, rest) = k.split_once('/')?;
            let managed = managed_at_pcp_setup(zone, real, capture)?;
            let n = nr_cpus as u32;
            if rest.ends_with("/batch") {
                Some(mmlab_pcp::zone_batchsize(managed).to_string())
            } else if rest.ends_with("/vm stats threshold") {
                Some(mmlab_pcp::vmstat::calculate_normal_threshold(managed, nr_cpus).to_string())
            } else if rest.ends_with("/high_min") {
                let low = num(&format!("{zone}/low"))?;
                let batch = mmlab_pcp::zone_batchsize(managed);
                Some(mmlab_pcp::zone_highsize(managed, low, batch, n, 0, n, 0).to_string())
            } else if rest.ends_with("/high_max") {
                let low = num(&format!("{zone}/low"))?;
                let batch = mmlab_pcp::zone_batchsize(managed);
                let f = mmlab_pcp::MIN_PERCPU_PAGELIST_HIGH_FRACTION;
                Some(mmlab_pcp::zone_highsize(managed, low, batch, n, 0, n, f).to_string())
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether mmlab prints `ours` for `key` because it does not model the
/// thing: a meminfo, vmstat or zoneinfo counter it prints as 0 and does not
/// compute (the per-node and NUMA counters of zoneinfo are vmstat items).
fn prints_zero_unmodelled(file: &str, key: &str, ours: &str, modelled: &[&str]) -> bool {
    let name = match file {
        "proc_meminfo" | "proc_vmstat" => key,
        "proc_zoneinfo" => key.rsplit('/').next().unwrap_or(key),
        _ => return false,
    };
    ours == "0" && !modelled.contains(&name) && (file != "proc_zoneinfo" || is_counter(name))
}

/// A zoneinfo line that is a vmstat item (`nr_*`, `numa_*`, the
/// workingset counters), not a zone's own field.
fn is_counter(name: &str) -> bool {
    name.starts_with("nr_") || name.starts_with("numa_") || name.starts_with("workingset_")
}

/// How a field only the real kernel prints is marked.
fn absent_mark(file: &str, key: &str, mmlab_groups: &BTreeSet<&str>) -> Mark {
    let group = match file {
        "proc_vmallocinfo" => caller_of(key).filter(|c| !MODELLED_CALLERS.contains(c)),
        "kernel_page_tables" => region_of(key).filter(|r| !MODELLED_REGIONS.contains(r)),
        _ => None,
    };
    match group {
        Some(g) if !mmlab_groups.contains(g) => Mark::NotModelled,
        _ => Mark::OnlyReal,
    }
}

/// Compare one file's fields.
pub fn compare(s: &Sides<'_>) -> Vec<Compared> {
    let boots: Vec<BTreeMap<&str, &str>> =
        s.boots.iter().map(|b| b.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()).collect();
    let first = &boots[0];
    let omap: BTreeMap<&str, &str> = s.mmlab.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let groups: BTreeSet<&str> = s
        .mmlab
        .iter()
        .filter_map(|(k, _)| match s.file {
            "proc_vmallocinfo" => caller_of(k),
            "kernel_page_tables" => region_of(k),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (k, rv) in &s.boots[0] {
        let values = boot_values(&boots, k);
        let ov = omap.get(k.as_str()).copied();
        let mark = match ov {
            None => absent_mark(s.file, k, &groups),
            Some(ov) if ov == rv => Mark::Equal,
            Some(_) if formula(s.file, k, first, s.capture, s.nr_cpus).as_ref() == Some(rv) => Mark::FormulaEqual,
            Some(ov) if within(&values, ov) => Mark::WithinSpread,
            Some(ov) if prints_zero_unmodelled(s.file, k, ov, s.modelled) => Mark::NotModelled,
            Some(_) => Mark::Different,
        };
        out.push(Compared {
            key: k.clone(),
            real: Some(rv.clone()),
            spread: spread_text(&values),
            mmlab: ov.map(str::to_string),
            mark,
        });
    }
    for (k, ov) in s.mmlab.iter().filter(|(k, _)| !first.contains_key(k.as_str())) {
        out.push(Compared { key: k.clone(), real: None, spread: None, mmlab: Some(ov.clone()), mark: Mark::OnlyMmlab });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_within() {
        assert_eq!(spread_text(&["5"]), None);
        assert_eq!(spread_text(&["7", "5", "6"]), Some("5..7".to_string()));
        assert_eq!(spread_text(&["(0,1)", "(0,2)"]), Some("(0,1)|(0,2)".to_string()));
        assert!(within(&["7", "5"], "6"));
        assert!(within(&["7", "5"], "5"));
        assert!(!within(&["7", "5"], "8"));
        assert!(!within(&["7"], "7"), "one value is no spread");
        assert!(within(&["a", "b"], "b"));
        assert!(!within(&["a", "b"], "c"));
    }

    #[test]
    fn zero_counters_mmlab_does_not_compute_are_not_modelled() {
        let modelled = ["nr_free_pages", "nr_vmalloc"];
        assert!(prints_zero_unmodelled("proc_zoneinfo", "zone DMA/node/nr_active_anon", "0", &modelled));
        assert!(prints_zero_unmodelled("proc_zoneinfo", "zone Normal/numa_hit", "0", &modelled));
        assert!(!prints_zero_unmodelled("proc_zoneinfo", "zone Normal/numa_hit", "5", &modelled));
        assert!(!prints_zero_unmodelled("proc_zoneinfo", "zone DMA/node/nr_vmalloc", "0", &modelled));
        assert!(!prints_zero_unmodelled("proc_zoneinfo", "zone DMA/cpu 1/count", "0", &modelled));
        assert!(prints_zero_unmodelled("proc_vmstat", "pgfault", "0", &modelled));
        assert!(!prints_zero_unmodelled("proc_buddyinfo", "zone DMA/order 0", "0", &modelled));
    }

    #[test]
    fn absent_groups() {
        let none = BTreeSet::new();
        assert_eq!(absent_mark("proc_vmallocinfo", "kernel_clone/areas", &none), Mark::NotModelled);
        assert_eq!(absent_mark("proc_vmallocinfo", "paging_init/areas", &none), Mark::OnlyReal);
        let has = BTreeSet::from(["kernel_clone"]);
        assert_eq!(absent_mark("proc_vmallocinfo", "kernel_clone/pages", &has), Mark::OnlyReal);
        assert_eq!(absent_mark("kernel_page_tables", "Modules start/runs", &none), Mark::NotModelled);
        assert_eq!(absent_mark("kernel_page_tables", "vmemmap start/runs", &none), Mark::OnlyReal);
        assert_eq!(absent_mark("kernel_page_tables", "tables/p4d", &none), Mark::OnlyReal);
        assert_eq!(absent_mark("proc_vmstat", "nr_foo", &none), Mark::OnlyReal);
    }
}
