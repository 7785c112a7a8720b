//! `mmlab peer DIR [DIR...]`: mmlab's /proc files and page tables beside a
//! real arm64 kernel's, field by field.
//!
//! `scripts/arm64-peer/boot.sh` boots Debian's arm64 kernel under
//! `qemu-system-aarch64 -M virt` and writes one file per captured file into
//! DIR (`proc_meminfo`, `proc_vmstat`, `proc_zoneinfo`, `proc_buddyinfo`,
//! `proc_pagetypeinfo`, `proc_vmallocinfo`, and `kernel_page_tables` with
//! the module's `pgtable_pages`), and the machine in `kernel.txt`. Each
//! capture is read and checked whole first ([`capture::Capture`]): a
//! missing, empty, cut or malformed file is an error naming the file and
//! the line. [`mmlab_files`] boots the same machine in mmlab (memory, CPUs
//! and options from the capture, [`machine`]) and prints the same files;
//! [`compare()`] splits both into fields and marks each:
//!
//! | mark | meaning |
//! |------|---------|
//! | `equal` | the same value |
//! | `formula-equal` | different value, but mmlab's formula applied to the real kernel's own inputs (its `managed` pages when it sized the pagesets, its `MemTotal`, ...) gives the real value: the machines differ, the computation does not |
//! | `within-spread` | several boots of the same configuration were given, they differ, and mmlab's value is within theirs (min..max) |
//! | `not-modelled` | mmlab does not model the thing: it prints 0 for a counter it does not compute (meminfo, vmstat, zoneinfo's per-node and NUMA counters), or lacks a vmallocinfo caller or a ptdump region it does not emulate (boot-time vmalloc users, modules, PCI I/O, fixmap) |
//! | `different` | anything else |
//! | `only-real`, `only-mmlab` | the field exists on one side only |
//!
//! Fields are keyed as [`fields`] (the /proc files), [`vmallocinfo`] and
//! [`ptdump`] describe. The first DIR is the capture compared; the others
//! are more boots of the same configuration (`tests/data/arm64-peer/spread/`)
//! and give each field its boot-to-boot spread.
//!
//! A capture made with `PEER_TEST_VMALLOC=1` also holds lib/test_vmalloc.c's
//! runs on the real kernel; [`test_vmalloc`] compares them with mmlab's.

pub mod capture;
pub mod compare;
pub mod fields;
pub mod machine;
pub mod ptdump;
pub mod test_vmalloc;
pub mod vmallocinfo;

use crate::procfs::{self, Meminfo, Vmstat};
use crate::settings::Configs;
use capture::{Capture, CaptureError, KERNEL_PAGE_TABLES, PROC_FILES, VMALLOCINFO};
use compare::Mark;
use std::collections::BTreeMap;
use std::fmt;

/// The files compared, in report order.
pub const PEER_FILES: [&str; 7] = [
    "proc_meminfo",
    "proc_vmstat",
    "proc_zoneinfo",
    "proc_buddyinfo",
    "proc_pagetypeinfo",
    VMALLOCINFO,
    KERNEL_PAGE_TABLES,
];

/// One field of one file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PeerField {
    /// The file (`proc_meminfo`, ...).
    pub file: &'static str,
    /// The field's key.
    pub key: String,
    /// The real kernel's value (the first boot's).
    pub real: Option<String>,
    /// How the real boots' values spread (`min..max`, or `a|b`), when
    /// several boots were given and they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<String>,
    /// mmlab's value.
    pub mmlab: Option<String>,
    /// How they compare.
    pub mark: Mark,
}

/// Every field of every file, in file order.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PeerReport {
    /// The capture directories: the one compared, then the other boots.
    pub boots: Vec<String>,
    /// The real machine (kernel.txt).
    pub machine: capture::RealMachine,
    /// The kernel package.
    pub kernel: String,
    /// The capture's options and what mmlab does with each.
    pub options: Vec<machine::PeerOption>,
    /// The fields.
    pub fields: Vec<PeerField>,
    /// The ptdump module's own count of the real kernel's table pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pgtable_pages: Option<ptdump::PgtablePages>,
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

    /// The fields of `file` whose value differs between the real boots.
    pub fn spread_fields(&self, file: &str) -> Vec<&PeerField> {
        self.fields.iter().filter(|f| f.file == file && f.spread.is_some()).collect()
    }

    /// The options mmlab does not model, as printed.
    pub fn not_modelled(&self) -> Vec<String> {
        self.options
            .iter()
            .filter(|o| matches!(o.used, machine::OptionUse::NotModelled(_)))
            .map(|o| o.to_string())
            .collect()
    }
}

impl fmt::Display for PeerReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# real: {}: {} on {}", self.boots[0], self.kernel, self.machine)?;
        if self.boots.len() > 1 {
            writeln!(
                f,
                "# {} boots of this configuration for the spread: {}",
                self.boots.len(),
                self.boots.join(", ")
            )?;
        }
        for o in &self.options {
            match o.used {
                machine::OptionUse::NotModelled(_) => writeln!(f, "{o}")?,
                _ => writeln!(f, "# option {o}")?,
            }
        }
        if let Some(p) = &self.pgtable_pages {
            let t: Vec<String> = ptdump::LEVEL_KEYS.iter().zip(p.tables).map(|(l, n)| format!("{l} {n}")).collect();
            writeln!(
                f,
                "# pgtable_pages (the real kernel's table pages, counted by the ptdump module): {}",
                t.join(" ")
            )?;
        }
        writeln!(f)?;
        let spread = self.boots.len() > 1;
        for file in PEER_FILES {
            let rows: Vec<&PeerField> = self.fields.iter().filter(|x| x.file == file).collect();
            if rows.is_empty() {
                continue;
            }
            let counts: Vec<String> = self.counts(file).iter().map(|(m, n)| format!("{m} {n}")).collect();
            write!(f, "== {file}: {}", counts.join(", "))?;
            if spread {
                let n = rows.iter().filter(|x| x.spread.is_some()).count();
                write!(f, "; {n} of {} fields differ between the {} boots", rows.len(), self.boots.len())?;
            }
            writeln!(f)?;
            write!(f, "{:<52} {:>18}", "field", "real")?;
            if spread {
                write!(f, " {:>24}", "spread")?;
            }
            writeln!(f, " {:>18}  mark", "mmlab")?;
            for x in rows {
                write!(f, "{:<52} {:>18}", x.key, x.real.as_deref().unwrap_or("-"))?;
                if spread {
                    write!(f, " {:>24}", x.spread.as_deref().unwrap_or(""))?;
                }
                writeln!(f, " {:>18}  {}", x.mmlab.as_deref().unwrap_or("-"), x.mark)?;
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
    use mmlab_engine::arch::arm64::pgtable::ptdump as engine_ptdump;
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
    let markers = engine_ptdump::kernel_markers(m.va_layout(), m.fixmap_layout());
    let files = BTreeMap::from([
        ("proc_meminfo", meminfo.to_string()),
        ("proc_vmstat", vmstat.to_string()),
        ("proc_zoneinfo", procfs::zoneinfo_with(&pa, &vmstat)),
        ("proc_buddyinfo", procfs::buddyinfo(&pa)),
        ("proc_pagetypeinfo", procfs::pagetypeinfo(&pa)),
        (VMALLOCINFO, vm.vmallocinfo()),
        (KERNEL_PAGE_TABLES, engine_ptdump::ptdump(m, &m.kernel_as(), &markers)),
    ]);
    Ok(MmlabFiles { files, modelled })
}

/// The fields of `file` in a capture, or None where it was not captured
/// (a capture from before the page-table dump).
fn capture_fields(c: &Capture, file: &str) -> Option<fields::Fields> {
    match file {
        VMALLOCINFO => Some(vmallocinfo::fields(&c.vmalloc)),
        KERNEL_PAGE_TABLES => c.ptdump.as_ref().map(|(d, _)| ptdump::fields(d)),
        f => c.fields.get(f).cloned(),
    }
}

/// The fields of mmlab's `file`.
///
/// # Errors
/// mmlab's own file not in the kernel's layout (a bug of mmlab's printer),
/// or a real file that is a cut copy of the kernel's layout (its lines a
/// strict prefix of the lines Linux 7.2 prints, which mmlab prints all of).
fn mmlab_fields(ours: &MmlabFiles, file: &str) -> Result<fields::Fields, String> {
    let text = ours.files.get(file).map_or("", String::as_str);
    let own = |e: fields::LineError| format!("mmlab's own {file}: {e} (a bug in mmlab's printer)");
    match file {
        VMALLOCINFO if text.is_empty() => Ok(vec![("areas".into(), "0".into()), ("pages".into(), "0".into())]),
        VMALLOCINFO => Ok(vmallocinfo::fields(&vmallocinfo::parse(text).map_err(own)?)),
        KERNEL_PAGE_TABLES => Ok(ptdump::fields(&ptdump::parse(text).map_err(own)?)),
        f => fields::parse(f, text).map_err(own),
    }
}

/// A real meminfo or vmstat whose lines are a strict prefix of the lines
/// Linux 7.2 prints on arm64 (mmlab's meminfo prints every one of them, its
/// vmstat [`procfs::vmstat::VMSTAT_ITEMS`] then its own) was cut.
fn check_not_cut(
    c: &Capture,
    file: &'static str,
    real: &fields::Fields,
    ours: &fields::Fields,
) -> Result<(), CaptureError> {
    let kernel: Vec<&str> = match file {
        "proc_meminfo" => ours.iter().map(|(k, _)| k.as_str()).collect(),
        "proc_vmstat" => procfs::vmstat::VMSTAT_ITEMS.to_vec(),
        _ => return Ok(()),
    };
    if real.len() < kernel.len() && real.iter().zip(&kernel).all(|((a, _), b)| a == b) {
        return Err(CaptureError {
            path: c.dir.join(file),
            line: Some(real.len()),
            what: format!("the file ends here; Linux 7.2 prints `{}` next (the capture was cut?)", kernel[real.len()]),
        });
    }
    Ok(())
}

/// Compare the captures (one configuration: the first compared, the others
/// its spread) with mmlab's files.
///
/// # Errors
/// Captures of different configurations, a real file cut short, or mmlab's
/// own file not in the kernel's layout.
pub fn compare(caps: &[Capture], ours: &MmlabFiles, options: Vec<machine::PeerOption>) -> Result<PeerReport, String> {
    let first = caps.first().ok_or("no capture")?;
    for c in &caps[1..] {
        if c.machine != first.machine || c.options() != first.options() || c.kernel != first.kernel {
            return Err(format!(
                "{} ({}, {}, options {:?}) is not a boot of the configuration of {} ({}, {}, options {:?})",
                c.dir.display(),
                c.kernel,
                c.machine,
                c.options(),
                first.dir.display(),
                first.kernel,
                first.machine,
                first.options()
            ));
        }
    }
    let mut out = Vec::new();
    for file in PEER_FILES {
        let Some(real) = capture_fields(first, file) else { continue };
        let mine = mmlab_fields(ours, file)?;
        for c in caps {
            if let Some(r) = capture_fields(c, file) {
                check_not_cut(c, file, &r, &mine)?;
            }
        }
        let mut boots = vec![real];
        boots.extend(caps[1..].iter().filter_map(|c| capture_fields(c, file)));
        let sides = compare::Sides {
            file,
            boots,
            mmlab: mine,
            capture: first,
            modelled: &ours.modelled,
            nr_cpus: first.machine.cpus,
        };
        out.extend(compare::compare(&sides).into_iter().map(|x| PeerField {
            file,
            key: x.key,
            real: x.real,
            spread: x.spread,
            mmlab: x.mmlab,
            mark: x.mark,
        }));
    }
    Ok(PeerReport {
        boots: caps.iter().map(|c| c.dir.display().to_string()).collect(),
        machine: first.machine.clone(),
        kernel: first.kernel.clone(),
        options,
        fields: out,
        pgtable_pages: first.ptdump.as_ref().map(|(_, p)| p.clone()),
        test_vmalloc: None,
    })
}

/// Every capture of `mmlab peer`, read and checked, and the machine to
/// boot: nothing has run yet.
#[derive(Debug)]
pub struct Prepared {
    /// The captures: the one compared first.
    pub captures: Vec<Capture>,
    /// The machine's configuration.
    pub configs: Configs,
    /// The capture's options and what mmlab does with each.
    pub options: Vec<machine::PeerOption>,
    /// The settings the machine boots with (the options', then `--set`).
    pub sets: Vec<String>,
}

/// Read and check every capture whole ([`Capture::read`]: every file, the
/// test_vmalloc cases' parameters included) and resolve the first one's
/// machine (with `mem`, `cpus` and `sets` from the command line, checked
/// against it), before anything boots.
///
/// # Errors
/// A capture that cannot be read ([`CaptureError`]), a machine option
/// other than the capture's, a setting mmlab refuses.
pub fn prepare(
    dirs: &[std::path::PathBuf],
    mem: Option<&str>,
    cpus: Option<usize>,
    sets: &[String],
) -> Result<Prepared, String> {
    let captures: Vec<Capture> = dirs.iter().map(|d| Capture::read(d)).collect::<Result<_, _>>()?;
    let first = captures.first().ok_or("mmlab peer needs a capture directory")?;
    let (configs, options, sets) = machine::configs(first, mem, cpus, sets)?;
    Ok(Prepared { captures, configs, options, sets })
}

impl Prepared {
    /// Boot the machine and compare every file ([`compare()`]).
    ///
    /// # Errors
    /// As [`compare()`], or a boot that fails.
    pub fn compare(&self) -> Result<PeerReport, String> {
        let ours = mmlab_files(&self.configs)?;
        compare(&self.captures, &ours, self.options.clone())
    }

    /// The first capture's test_vmalloc cases run in mmlab, where it has
    /// them ([`test_vmalloc::compare`]).
    ///
    /// # Errors
    /// A boot or a run that fails.
    pub fn test_vmalloc(&self, seed: u64) -> Result<Option<test_vmalloc::Report>, String> {
        match &self.captures[0].test_vmalloc {
            Some(cases) => test_vmalloc::compare(&self.configs, cases, seed).map(Some),
            None => Ok(None),
        }
    }
}

/// `mmlab peer` without test_vmalloc: [`prepare`], then
/// [`Prepared::compare`]. Returns the report and the machine's
/// configuration and settings, for the run's record.
///
/// # Errors
/// As [`prepare`] and [`Prepared::compare`].
pub fn run(
    dirs: &[std::path::PathBuf],
    mem: Option<&str>,
    cpus: Option<usize>,
    sets: &[String],
) -> Result<(PeerReport, Configs, Vec<String>), String> {
    let p = prepare(dirs, mem, cpus, sets)?;
    let report = p.compare()?;
    Ok((report, p.configs, p.sets))
}

/// The files of [`PROC_FILES`] mmlab prints for `c`'s machine, split into
/// fields (for tests that compare layouts).
///
/// # Errors
/// As `mmlab_fields`.
pub fn mmlab_proc_fields(ours: &MmlabFiles) -> Result<BTreeMap<&'static str, fields::Fields>, String> {
    PROC_FILES.iter().map(|&f| mmlab_fields(ours, f).map(|x| (f, x))).collect()
}
