//! `mmlab peer DIR`: mmlab's /proc files beside a real arm64 kernel's, field
//! by field.
//!
//! `scripts/arm64-peer/boot.sh` boots Debian's arm64 kernel under
//! `qemu-system-aarch64 -M virt -cpu neoverse-n1` and writes one file per
//! captured /proc file into DIR (`proc_meminfo`, `proc_vmstat`,
//! `proc_zoneinfo`, `proc_buddyinfo`, `proc_pagetypeinfo`). [`mmlab_files`]
//! boots the same machine in mmlab (the global `--mem`/`--cpus`/`--set`) and
//! prints the same files; [`compare`] splits both into fields and marks each:
//!
//! | mark | meaning |
//! |------|---------|
//! | `equal` | the same value |
//! | `formula-equal` | different value, but mmlab's formula applied to the real kernel's own inputs (its `managed` pages, its `MemTotal`, ...) gives the real value: the machines differ, the computation does not |
//! | `not-modelled` | mmlab prints 0 because it does not model the thing (meminfo, vmstat) |
//! | `different` | anything else |
//! | `only-real`, `only-mmlab` | the field exists on one side (zones mmlab does not split yet, per-node stats) |
//!
//! Fields are keyed `zone NAME/field` (zoneinfo, with `cpu N/field` for a
//! pageset), `zone NAME/order N` (buddyinfo), `zone NAME/TYPE/order N` and
//! `zone NAME/blocks/TYPE` (pagetypeinfo), the name (meminfo, vmstat).
//!
//! A capture made with `PEER_TEST_VMALLOC=1` also holds lib/test_vmalloc.c's
//! runs on the real kernel; [`test_vmalloc`] compares them with mmlab's.

pub mod test_vmalloc;

use crate::procfs::{self, Meminfo, Vmstat};
use crate::settings::Configs;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The files compared, as the peer script names them.
pub const PEER_FILES: [&str; 5] =
    ["proc_meminfo", "proc_vmstat", "proc_zoneinfo", "proc_buddyinfo", "proc_pagetypeinfo"];

/// How a field compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    /// The same value.
    Equal,
    /// mmlab's formula on the real machine's inputs gives the real value.
    FormulaEqual,
    /// mmlab prints 0 for something it does not model.
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
            Mark::NotModelled => "not-modelled",
            Mark::Different => "different",
            Mark::OnlyReal => "only-real",
            Mark::OnlyMmlab => "only-mmlab",
        })
    }
}

/// One field of one file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PeerField {
    /// The file (`proc_meminfo`, ...).
    pub file: &'static str,
    /// The field's key.
    pub key: String,
    /// The real kernel's value.
    pub real: Option<String>,
    /// mmlab's value.
    pub mmlab: Option<String>,
    /// How they compare.
    pub mark: Mark,
}

/// Every field of every file, in file order.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PeerReport {
    /// The fields.
    pub fields: Vec<PeerField>,
    /// lib/test_vmalloc.c's cases, where the capture has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_vmalloc: Option<test_vmalloc::Report>,
}

impl PeerReport {
    /// The field `key` of `file`.
    pub fn field(&self, file: &str, key: &str) -> Option<&PeerField> {
        self.fields.iter().find(|f| f.file == file && f.key == key)
    }

    /// How many fields of `file` carry each mark.
    pub fn counts(&self, file: &str) -> BTreeMap<Mark, usize> {
        let mut c = BTreeMap::new();
        for f in self.fields.iter().filter(|f| f.file == file) {
            *c.entry(f.mark).or_insert(0) += 1;
        }
        c
    }
}

impl fmt::Display for PeerReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in PEER_FILES {
            let counts: Vec<String> = self.counts(file).iter().map(|(m, n)| format!("{m} {n}")).collect();
            writeln!(f, "== {file}: {}", counts.join(", "))?;
            writeln!(f, "{:<44} {:>16} {:>16}  mark", "field", "real", "mmlab")?;
            for x in self.fields.iter().filter(|x| x.file == file) {
                writeln!(
                    f,
                    "{:<44} {:>16} {:>16}  {}",
                    x.key,
                    x.real.as_deref().unwrap_or("-"),
                    x.mmlab.as_deref().unwrap_or("-"),
                    x.mark
                )?;
            }
            writeln!(f)?;
        }
        if let Some(t) = &self.test_vmalloc {
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

/// mmlab's side: the files of the machine `c` describes, right after boot
/// (the boot-time hugetlb pools included), keyed as [`PEER_FILES`]; and
/// which meminfo/vmstat fields mmlab models.
#[derive(Debug)]
pub struct MmlabFiles {
    /// File name to text.
    pub files: BTreeMap<&'static str, String>,
    /// Names of meminfo and vmstat lines mmlab computes.
    pub modelled: Vec<&'static str>,
}

/// Boot the machine of `c` and print its files ([`MmlabFiles`]).
///
/// # Errors
///
/// A boot that fails (bad memory map, allocator or hugetlb boot).
pub fn mmlab_files(c: &Configs) -> Result<MmlabFiles, String> {
    let stack = crate::stack::Stack::boot(c)?;
    let m = stack.machine();
    let pa = stack.allocator()?;
    let (ht, _) = stack.hugetlb(&pa)?;
    let vm = stack.vmalloc(&pa);
    let vmi = vm.meminfo_counts();
    let hm = ht.meminfo();
    let meminfo = Meminfo::collect(&pa, vmi, hm);
    let vmstat = Vmstat::collect(&m.vm_events(), &pa, vmi.nr_vmalloc, hm.hugetlb_kb / (mmlab_engine::PAGE_SIZE >> 10));
    let mut modelled: Vec<&'static str> = meminfo.lines.iter().filter(|l| l.modelled).map(|l| l.name).collect();
    modelled.extend(vmstat.kernel.iter().filter(|l| l.modelled).map(|l| l.name));
    modelled.extend([
        "HugePages_Total",
        "HugePages_Free",
        "HugePages_Rsvd",
        "HugePages_Surp",
        "Hugepagesize",
        "Hugetlb",
    ]);
    let files = BTreeMap::from([
        ("proc_meminfo", meminfo.to_string()),
        ("proc_vmstat", vmstat.to_string()),
        ("proc_zoneinfo", procfs::zoneinfo_with(&pa, &vmstat)),
        ("proc_buddyinfo", procfs::buddyinfo(&pa)),
        ("proc_pagetypeinfo", procfs::pagetypeinfo(&pa)),
    ]);
    Ok(MmlabFiles { files, modelled })
}

/// Read the real kernel's files from `dir`.
///
/// # Errors
///
/// A file that is missing or unreadable.
pub fn read_capture(dir: &Path) -> Result<BTreeMap<&'static str, String>, String> {
    PEER_FILES
        .iter()
        .map(|&f| {
            std::fs::read_to_string(dir.join(f)).map(|s| (f, s)).map_err(|e| format!("{}: {e}", dir.join(f).display()))
        })
        .collect()
}

/// The machine a capture was taken on, from the `qemu-system-aarch64 ...
/// -smp N -m M` line the peer script writes to `kernel.txt`: (M, N).
pub fn capture_machine(dir: &Path) -> Option<(String, usize)> {
    let text = std::fs::read_to_string(dir.join("kernel.txt")).ok()?;
    let line = text.lines().find(|l| l.starts_with("qemu-system-aarch64"))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| w.iter().position(|x| *x == flag).and_then(|i| w.get(i + 1)).copied();
    Some((after("-m")?.to_string(), after("-smp")?.parse().ok()?))
}

/// The fields of one file, in order.
pub fn fields(file: &str, text: &str) -> Vec<(String, String)> {
    match file {
        "proc_meminfo" => text
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.to_string(), v.split_whitespace().next()?.to_string()))
            })
            .collect(),
        "proc_vmstat" => text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.to_string(), w.next()?.to_string()))
            })
            .collect(),
        "proc_zoneinfo" => zoneinfo_fields(text),
        "proc_buddyinfo" => text
            .lines()
            .filter_map(|l| {
                let (_, rest) = l.split_once("zone")?;
                let mut w = rest.split_whitespace();
                let zone = w.next()?;
                Some(
                    w.enumerate()
                        .map(move |(o, v)| (format!("zone {zone}/order {o}"), v.to_string()))
                        .collect::<Vec<_>>(),
                )
            })
            .flatten()
            .collect(),
        "proc_pagetypeinfo" => pagetypeinfo_fields(text),
        _ => Vec::new(),
    }
}

/// zoneinfo: `zone NAME/field` (the first words of a line), `zone
/// NAME/cpu N/field` inside pagesets, `zone NAME/node/field` for the
/// per-node stats.
fn zoneinfo_fields(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (mut zone, mut cpu, mut node_stats) = (String::new(), None::<String>, false);
    for l in text.lines() {
        let t = l.trim();
        if let Some((_, z)) = t.split_once(", zone") {
            zone = z.trim().to_string();
            (cpu, node_stats) = (None, false);
            continue;
        }
        if t == "per-node stats" {
            node_stats = true;
            continue;
        }
        if t == "pagesets" {
            node_stats = false;
            continue;
        }
        if let Some(c) = t.strip_prefix("cpu:") {
            cpu = Some(c.trim().to_string());
            continue;
        }
        if let Some(p) = t.strip_prefix("protection:") {
            out.push((format!("zone {zone}/protection"), p.trim().replace(' ', "")));
            continue;
        }
        let (k, v) = match t.rsplit_once(|c: char| c.is_whitespace()) {
            Some((k, v)) => (k.trim().trim_end_matches(':').to_string(), v.to_string()),
            None => continue,
        };
        if k == "pages free" {
            (cpu, node_stats) = (None, false);
        }
        let key = match (&cpu, node_stats) {
            (_, true) => format!("zone {zone}/node/{k}"),
            (Some(c), _) if k != "vm stats threshold" && l.starts_with("              ") => {
                format!("zone {zone}/cpu {c}/{k}")
            }
            (Some(c), _) if k == "vm stats threshold" => format!("zone {zone}/cpu {c}/{k}"),
            _ => format!("zone {zone}/{k}"),
        };
        out.push((key, v));
    }
    out
}

/// pagetypeinfo: free blocks per type and order, and the pageblock counts.
fn pagetypeinfo_fields(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut block_types: Vec<String> = Vec::new();
    for l in text.lines() {
        if let Some(h) = l.strip_prefix("Number of blocks type") {
            block_types = h.split_whitespace().map(str::to_string).collect();
            continue;
        }
        if let Some((k, v)) = l.split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
            continue;
        }
        let Some((_, rest)) = l.split_once(", zone") else { continue };
        if let Some((z, r)) = rest.split_once(", type") {
            let mut w = r.split_whitespace();
            let Some(ty) = w.next() else { continue };
            for (o, v) in w.enumerate() {
                out.push((format!("zone {}/{ty}/order {o}", z.trim()), v.to_string()));
            }
        } else {
            let mut w = rest.split_whitespace();
            let Some(z) = w.next() else { continue };
            for (ty, v) in block_types.iter().zip(w) {
                out.push((format!("zone {z}/blocks/{ty}"), v.to_string()));
            }
        }
    }
    out
}

/// The real value recomputed with mmlab's formula from the real file's own
/// inputs, for the fields that have one.
fn formula(file: &str, key: &str, real: &BTreeMap<String, String>, nr_cpus: usize) -> Option<String> {
    let num = |k: &str| real.get(k).and_then(|v| v.parse::<u64>().ok());
    match (file, key) {
        ("proc_meminfo", "CommitLimit") => {
            let pages = num("MemTotal")? / 4 - num("Hugetlb")? / 4;
            Some((pages * 50 / 100 * 4).to_string())
        }
        ("proc_zoneinfo", k) => {
            let (zone, rest) = k.split_once('/')?;
            let managed = num(&format!("{zone}/managed"))?;
            if rest.ends_with("/batch") {
                Some(mmlab_pcp::zone_batchsize(managed).to_string())
            } else if rest.ends_with("/vm stats threshold") {
                Some(mmlab_pcp::vmstat::calculate_normal_threshold(managed, nr_cpus).to_string())
            } else if rest.ends_with("/high_min") {
                let low = num(&format!("{zone}/low"))?;
                let batch = mmlab_pcp::zone_batchsize(managed);
                let n = nr_cpus as u32;
                Some(mmlab_pcp::zone_highsize(managed, low, batch, n, 0, n, 0).to_string())
            } else if rest.ends_with("/high_max") {
                let low = num(&format!("{zone}/low"))?;
                let batch = mmlab_pcp::zone_batchsize(managed);
                let (n, f) = (nr_cpus as u32, mmlab_pcp::MIN_PERCPU_PAGELIST_HIGH_FRACTION);
                Some(mmlab_pcp::zone_highsize(managed, low, batch, n, 0, n, f).to_string())
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Compare the real kernel's files with mmlab's, field by field.
pub fn compare(real: &BTreeMap<&'static str, String>, ours: &MmlabFiles, nr_cpus: usize) -> PeerReport {
    let mut out = Vec::new();
    for file in PEER_FILES {
        let r = fields(file, real.get(file).map_or("", String::as_str));
        let o = fields(file, ours.files.get(file).map_or("", String::as_str));
        let rmap: BTreeMap<String, String> = r.iter().cloned().collect();
        let omap: BTreeMap<String, String> = o.iter().cloned().collect();
        for (k, rv) in &r {
            let mark = match omap.get(k) {
                None => Mark::OnlyReal,
                Some(ov) if ov == rv => Mark::Equal,
                Some(_) if formula(file, k, &rmap, nr_cpus).as_ref() == Some(rv) => Mark::FormulaEqual,
                Some(ov)
                    if matches!(file, "proc_meminfo" | "proc_vmstat")
                        && ov == "0"
                        && !ours.modelled.contains(&k.as_str()) =>
                {
                    Mark::NotModelled
                }
                Some(_) => Mark::Different,
            };
            out.push(PeerField { file, key: k.clone(), real: Some(rv.clone()), mmlab: omap.get(k).cloned(), mark });
        }
        for (k, ov) in o.iter().filter(|(k, _)| !rmap.contains_key(k)) {
            out.push(PeerField { file, key: k.clone(), real: None, mmlab: Some(ov.clone()), mark: Mark::OnlyMmlab });
        }
    }
    PeerReport { fields: out, test_vmalloc: None }
}
