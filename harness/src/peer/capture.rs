//! A capture directory of `scripts/arm64-peer/boot.sh`, read and checked
//! whole before anything is compared: a missing, empty, cut or malformed
//! file is a [`CaptureError`] naming the file and the line.

use super::fields::{Fields, LineError, ZONES, check_whole, number, parse};
use super::ptdump::{Dump, PgtablePages, parse as parse_dump, parse_pgtable_pages};
use super::test_vmalloc::{self, RealCase};
use super::vmallocinfo::{Area, parse as parse_vmallocinfo};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The /proc files compared field by field, as the peer script names them.
pub const PROC_FILES: [&str; 5] =
    ["proc_meminfo", "proc_vmstat", "proc_zoneinfo", "proc_buddyinfo", "proc_pagetypeinfo"];

/// The vmallocinfo capture.
pub const VMALLOCINFO: &str = "proc_vmallocinfo";
/// The page-table dump (`PEER_PTDUMP=1`, boot.sh's default since it was
/// added; older captures lack it).
pub const KERNEL_PAGE_TABLES: &str = "kernel_page_tables";
/// The module's table counts, beside [`KERNEL_PAGE_TABLES`].
pub const PGTABLE_PAGES: &str = "pgtable_pages";

/// The files boot.sh writes in every capture that are not compared field
/// by field: each is checked whole and in its format all the same, so that
/// a capture cut short (boot.sh refuses an empty one) is never compared.
pub const OTHER_FILES: [&str; 5] = [
    "proc_version",
    "proc_sys_vm_min_free_kbytes",
    "proc_sys_vm_lowmem_reserve_ratio",
    "proc_sys_vm_percpu_pagelist_high_fraction",
    "sys_kernel_mm_hugepages",
];

/// The kernel command-line words boot.sh always passes: not options of the
/// machine.
pub const BASE_CMDLINE: [&str; 4] = ["nokaslr", "no_hash_pointers", "console=ttyAMA0", "rdinit=/init"];

/// The CPU boot.sh emulates unless told otherwise, the one mmlab models.
pub const DEFAULT_CPU: &str = "neoverse-n1";

/// What is wrong with a capture: the file, the line (when one is at fault)
/// and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureError {
    /// The file (or the directory, for a capture that is not one).
    pub path: PathBuf,
    /// The line, from 1, when a line is at fault.
    pub line: Option<usize>,
    /// What is wrong.
    pub what: String,
}

impl CaptureError {
    fn new(path: &Path, e: LineError) -> CaptureError {
        CaptureError { path: path.to_path_buf(), line: (e.line > 0).then_some(e.line), what: e.what }
    }

    fn whole(path: &Path, what: impl Into<String>) -> CaptureError {
        CaptureError { path: path.to_path_buf(), line: None, what: what.into() }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}: line {l}: {}", self.path.display(), self.what),
            None => write!(f, "{}: {}", self.path.display(), self.what),
        }
    }
}

impl std::error::Error for CaptureError {}

impl From<CaptureError> for String {
    fn from(e: CaptureError) -> String {
        e.to_string()
    }
}

/// The machine a capture was taken on (kernel.txt's qemu line).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RealMachine {
    /// `-m`.
    pub mem: String,
    /// `-smp`.
    pub cpus: usize,
    /// `-cpu` (captures before it was recorded: neoverse-n1, the only one
    /// boot.sh used then).
    pub cpu: String,
}

impl fmt::Display for RealMachine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "-m {} -smp {} -cpu {}", self.mem, self.cpus, self.cpu)
    }
}

/// A capture, read and checked.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The directory.
    pub dir: PathBuf,
    /// kernel.txt's first line (the kernel package).
    pub kernel: String,
    /// The machine.
    pub machine: RealMachine,
    /// The kernel command line (proc_cmdline), as words.
    pub cmdline: Vec<String>,
    /// The /proc files of [`PROC_FILES`], split into fields.
    pub fields: BTreeMap<&'static str, Fields>,
    /// vmallocinfo.
    pub vmalloc: Vec<Area>,
    /// The page-table dump and the module's counts, where captured.
    pub ptdump: Option<(Dump, PgtablePages)>,
    /// dmesg.
    pub dmesg: String,
    /// lib/test_vmalloc.c's cases on the real kernel, where captured
    /// (`PEER_TEST_VMALLOC=1`), their parameters checked.
    pub test_vmalloc: Option<Vec<RealCase>>,
}

fn read(dir: &Path, file: &str) -> Result<String, CaptureError> {
    let p = dir.join(file);
    std::fs::read_to_string(&p).map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::NotFound {
            "missing (not a complete capture of scripts/arm64-peer/boot.sh?)".to_string()
        } else {
            e.to_string()
        };
        CaptureError::whole(&p, what)
    })
}

/// kernel.txt: the package line, the qemu line (`-m`, `-smp`, `-cpu`,
/// each at most once: qemu would take the last, mmlab would boot another
/// machine than the one compared).
fn kernel_txt(path: &Path, text: &str) -> Result<(String, RealMachine), CaptureError> {
    check_whole(text).map_err(|e| CaptureError::new(path, e))?;
    let kernel = text.lines().next().unwrap_or_default().to_string();
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.starts_with("qemu-system-aarch64"))
        .ok_or_else(|| CaptureError::whole(path, "no `qemu-system-aarch64 ...` line"))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let bad = |what: String| CaptureError::new(path, LineError::at(n + 1, what));
    let after = |flag: &str| -> Result<Option<&str>, CaptureError> {
        let mut at = w.iter().enumerate().filter(|(_, x)| **x == flag).map(|(i, _)| i);
        match (at.next(), at.next()) {
            (_, Some(_)) => Err(bad(format!("`{flag}` given twice"))),
            (Some(i), None) => w.get(i + 1).copied().map(Some).ok_or_else(|| bad(format!("`{flag}` without a value"))),
            (None, None) => Ok(None),
        }
    };
    let mem = after("-m")?.ok_or_else(|| bad("no `-m SIZE`".to_string()))?;
    crate::cli::parse_mem(mem).map_err(|e| {
        let e = e.strip_prefix(&format!("--mem {mem}: ")).unwrap_or(&e).to_string();
        bad(format!("-m {mem}: {e}"))
    })?;
    let cpus = after("-smp")?.ok_or_else(|| bad("no `-smp N`".to_string()))?;
    let cpus = number(n + 1, cpus).map_err(|e| CaptureError::new(path, e))?;
    if cpus == 0 || cpus > mmlab_engine::machine::NR_CPUS as u64 {
        return Err(bad(format!("-smp {cpus}: mmlab emulates 1 to {} CPUs", mmlab_engine::machine::NR_CPUS)));
    }
    let cpu = after("-cpu")?.unwrap_or(DEFAULT_CPU).to_string();
    Ok((kernel, RealMachine { mem: mem.to_string(), cpus: cpus as usize, cpu }))
}

/// One line of `file` (proc_version, the sysctls), checked whole.
fn one_line<'a>(path: &Path, text: &'a str) -> Result<&'a str, CaptureError> {
    check_whole(text).map_err(|e| CaptureError::new(path, e))?;
    match text.lines().count() {
        1 => Ok(text.trim_end_matches('\n')),
        n => Err(CaptureError::new(path, LineError::at(2, format!("{n} lines; the kernel prints one")))),
    }
}

/// A sysctl's int (`proc_dointvec`): decimal digits that fit in an int.
fn int(path: &Path, v: &str) -> Result<u64, CaptureError> {
    let x = number(1, v).map_err(|e| CaptureError::new(path, e))?;
    if x > i32::MAX as u64 {
        return Err(CaptureError::new(path, LineError::at(1, format!("`{v}` is above INT_MAX (a sysctl int)"))));
    }
    Ok(x)
}

/// The files of [`OTHER_FILES`]: proc_version the kernel of kernel.txt's
/// package, the sysctls numbers the kernel's handlers allow, the hugepage
/// pools' attributes as sysfs names them.
fn check_other_files(dir: &Path, kernel: &str) -> Result<(), CaptureError> {
    let p = dir.join("proc_version");
    let text = read(dir, "proc_version")?;
    let v = one_line(&p, &text)?;
    let release = v
        .strip_prefix("Linux version ")
        .and_then(|r| r.split_whitespace().next())
        .ok_or_else(|| CaptureError::new(&p, LineError::at(1, format!("not `Linux version RELEASE ...`: {v:?}"))))?;
    // boot.sh's package names are linux-image-RELEASE.
    let package = kernel.split_whitespace().next().unwrap_or_default();
    if let Some(r) = package.strip_prefix("linux-image-").filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        && r != release
    {
        let what = format!("kernel {release}, but kernel.txt says {package} (files of two captures?)");
        return Err(CaptureError::new(&p, LineError::at(1, what)));
    }
    let p = dir.join("proc_sys_vm_min_free_kbytes");
    int(&p, one_line(&p, &read(dir, "proc_sys_vm_min_free_kbytes")?)?)?;
    let p = dir.join("proc_sys_vm_percpu_pagelist_high_fraction");
    let f = int(&p, one_line(&p, &read(dir, "proc_sys_vm_percpu_pagelist_high_fraction")?)?)?;
    if (1..8).contains(&f) {
        let what = format!("`{f}`: the sysctl takes 0 or 8 and above");
        return Err(CaptureError::new(&p, LineError::at(1, what)));
    }
    let p = dir.join("proc_sys_vm_lowmem_reserve_ratio");
    let text = read(dir, "proc_sys_vm_lowmem_reserve_ratio")?;
    let l = one_line(&p, &text)?;
    let ratios: Vec<&str> = l.split_whitespace().collect();
    if ratios.len() != ZONES.len() {
        let what =
            format!("{} values; the kernel prints one per zone, {} ({})", ratios.len(), ZONES.len(), ZONES.join(", "));
        return Err(CaptureError::new(&p, LineError::at(1, what)));
    }
    for r in ratios {
        int(&p, r)?;
    }
    check_hugepages(&dir.join("sys_kernel_mm_hugepages"), &read(dir, "sys_kernel_mm_hugepages")?)
}

/// sys_kernel_mm_hugepages: `/sys/kernel/mm/hugepages/hugepages-NkB/ATTR
/// VALUE` lines (`demote` is write-only: no value; `demote_size` is a size).
fn check_hugepages(path: &Path, text: &str) -> Result<(), CaptureError> {
    const ATTRS: [&str; 8] = [
        "demote",
        "demote_size",
        "free_hugepages",
        "nr_hugepages",
        "nr_hugepages_mempolicy",
        "nr_overcommit_hugepages",
        "resv_hugepages",
        "surplus_hugepages",
    ];
    check_whole(text).map_err(|e| CaptureError::new(path, e))?;
    let mut seen = std::collections::BTreeSet::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let bad = |what: String| CaptureError::new(path, LineError::at(n, what));
        let (file, value) = l.split_once(' ').unwrap_or((l, ""));
        let (size, attr) =
            file.strip_prefix("/sys/kernel/mm/hugepages/hugepages-")
                .and_then(|r| r.split_once("kB/"))
                .ok_or_else(|| bad(format!("not `/sys/kernel/mm/hugepages/hugepages-NkB/ATTR VALUE`: {l:?}")))?;
        number(n, size).map_err(|e| CaptureError::new(path, e))?;
        if !ATTRS.contains(&attr) {
            return Err(bad(format!("`{attr}` is not one of {}", ATTRS.join(", "))));
        }
        if !seen.insert(file) {
            return Err(bad(format!("`{file}` a second time")));
        }
        match attr {
            "demote" if !value.is_empty() => return Err(bad(format!("demote is write-only, read as {value:?}"))),
            "demote" => {}
            "demote_size" => {
                let kb = value.strip_suffix("kB").ok_or_else(|| bad(format!("demote_size {value:?} is not `NkB`")))?;
                number(n, kb).map_err(|e| CaptureError::new(path, e))?;
            }
            _ => {
                number(n, value).map_err(|e| CaptureError::new(path, e))?;
            }
        }
    }
    Ok(())
}

impl Capture {
    /// Read and check the capture in `dir`.
    ///
    /// # Errors
    /// A missing, empty, cut or malformed file (kernel.txt, proc_cmdline,
    /// [`OTHER_FILES`], dmesg, the /proc files, vmallocinfo, the page-table
    /// dump and test_vmalloc's cases where captured), pagesets for another
    /// number of CPUs than kernel.txt's, or a test_vmalloc case mmlab
    /// cannot run on that many.
    pub fn read(dir: &Path) -> Result<Capture, CaptureError> {
        if !dir.is_dir() {
            return Err(CaptureError::whole(dir, "not a directory"));
        }
        let kt = dir.join("kernel.txt");
        let (kernel, machine) = kernel_txt(&kt, &read(dir, "kernel.txt")?)?;
        let cl = dir.join("proc_cmdline");
        let cmdline_text = read(dir, "proc_cmdline")?;
        check_whole(&cmdline_text).map_err(|e| CaptureError::new(&cl, e))?;
        let cmdline = cmdline_text.split_whitespace().map(str::to_string).collect();
        check_other_files(dir, &kernel)?;
        let dmesg = read(dir, "dmesg")?;
        let dm = dir.join("dmesg");
        check_whole(&dmesg).map_err(|e| CaptureError::new(&dm, e))?;
        // free_initmem() prints it at the end of boot, after every page the
        // formulas need to know about was freed.
        if !dmesg.contains("Freeing unused kernel memory:") {
            let what = "no `Freeing unused kernel memory:` line (the log was cut before the end of boot?)";
            return Err(CaptureError::new(&dm, LineError::at(dmesg.lines().count(), what)));
        }
        let mut parsed = BTreeMap::new();
        for file in PROC_FILES {
            let text = read(dir, file)?;
            let f = parse(file, &text).map_err(|e| CaptureError::new(&dir.join(file), e))?;
            parsed.insert(file, f);
        }
        let zi = dir.join("proc_zoneinfo");
        check_pagesets(&parsed["proc_zoneinfo"], machine.cpus).map_err(|e| CaptureError::new(&zi, e))?;
        for file in ["proc_buddyinfo", "proc_pagetypeinfo"] {
            check_populated_zones(&parsed["proc_zoneinfo"], &parsed[file])
                .map_err(|e| CaptureError::new(&dir.join(file), e))?;
        }
        let vmalloc =
            parse_vmallocinfo(&read(dir, VMALLOCINFO)?).map_err(|e| CaptureError::new(&dir.join(VMALLOCINFO), e))?;
        let ptdump = if dir.join(KERNEL_PAGE_TABLES).exists() {
            let d = parse_dump(&read(dir, KERNEL_PAGE_TABLES)?)
                .map_err(|e| CaptureError::new(&dir.join(KERNEL_PAGE_TABLES), e))?;
            let p = parse_pgtable_pages(&read(dir, PGTABLE_PAGES)?)
                .map_err(|e| CaptureError::new(&dir.join(PGTABLE_PAGES), e))?;
            Some((d, p))
        } else {
            None
        };
        let tv = dir.join(test_vmalloc::CAPTURE_FILE);
        let test_vmalloc = if tv.exists() {
            let cases = test_vmalloc::parse(&read(dir, test_vmalloc::CAPTURE_FILE)?)
                .and_then(|c| test_vmalloc::check_params(&c, machine.cpus).map(|()| c))
                .map_err(|e| CaptureError::new(&tv, e))?;
            Some(cases)
        } else {
            None
        };
        Ok(Capture {
            dir: dir.to_path_buf(),
            kernel,
            machine,
            cmdline,
            fields: parsed,
            vmalloc,
            ptdump,
            dmesg,
            test_vmalloc,
        })
    }

    /// The machine's options beyond boot.sh's own: the command-line words
    /// past [`BASE_CMDLINE`], and `-cpu X` for another CPU than
    /// [`DEFAULT_CPU`].
    pub fn options(&self) -> Vec<String> {
        let mut o: Vec<String> = self.cmdline.iter().filter(|w| !BASE_CMDLINE.contains(&w.as_str())).cloned().collect();
        if self.machine.cpu != DEFAULT_CPU {
            o.push(format!("-cpu {}", self.machine.cpu));
        }
        o
    }

    /// A field's value in the real file.
    pub fn field(&self, file: &str, key: &str) -> Option<&str> {
        self.fields.get(file)?.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Pages the kernel freed into the zone holding the start of RAM (where
    /// QEMU loads the kernel image and the initrd) after the last time it
    /// sized the pagesets (the watermark update of khugepaged's
    /// min_free_kbytes, a subsys initcall): the initrd (`Freeing initrd
    /// memory: NK`, a rootfs initcall) and the init sections (`Freeing
    /// unused kernel memory: NK`, free_initmem() after the initcalls).
    /// Their managed pages were not yet counted when high_min and high_max
    /// were computed.
    pub fn freed_after_pcp_setup(&self) -> u64 {
        let kb = |prefix: &str| -> u64 {
            self.dmesg
                .lines()
                .filter_map(|l| l.split_once(prefix).map(|(_, r)| r.trim()))
                .filter_map(|r| r.strip_suffix('K')?.parse::<u64>().ok())
                .sum()
        };
        (kb("Freeing initrd memory:") + kb("Freeing unused kernel memory:")) / 4
    }
}

/// buddyinfo and pagetypeinfo list the zones zoneinfo says are populated
/// (present pages), no fewer: a file cut at a line boundary lacks some.
fn check_populated_zones(zoneinfo: &Fields, other: &Fields) -> Result<(), LineError> {
    let populated: Vec<&str> = zoneinfo
        .iter()
        .filter(|(k, v)| k.ends_with("/present") && v != "0")
        .filter_map(|(k, _)| k.strip_prefix("zone ")?.strip_suffix("/present"))
        .collect();
    let listed: std::collections::BTreeSet<&str> =
        other.iter().filter_map(|(k, _)| k.strip_prefix("zone ")?.split('/').next()).collect();
    match populated.iter().find(|z| !listed.contains(**z)) {
        Some(z) => Err(LineError::at(
            0,
            format!("no line for zone {z}, which zoneinfo lists as populated (the capture was cut?)"),
        )),
        None => Ok(()),
    }
}

/// Every populated zone has one pageset per CPU of the machine.
fn check_pagesets(zoneinfo: &Fields, cpus: usize) -> Result<(), LineError> {
    let mut per_zone: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for (k, _) in zoneinfo {
        let mut parts = k.splitn(3, '/');
        if let (Some(z), Some(c), Some(_)) = (parts.next(), parts.next(), parts.next())
            && let Some(c) = c.strip_prefix("cpu ")
        {
            per_zone.entry(z).or_default().insert(c);
        }
    }
    match per_zone.iter().find(|(_, c)| c.len() != cpus) {
        Some((z, c)) => Err(LineError::at(
            0,
            format!("{z} has pagesets for {} CPUs, kernel.txt says -smp {cpus} (not this machine's capture?)", c.len()),
        )),
        None => Ok(()),
    }
}
