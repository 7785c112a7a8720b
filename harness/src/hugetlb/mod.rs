//! `mmlab hugetlb`: the hugetlb sysfs interface, written to as a shell
//! script would, with what each write cost.
//!
//! Each argument is one write, `FILE=VALUE`, done in order on CPU 0 of one
//! booted machine, as `echo VALUE > FILE` would do it:
//!
//! | FILE | the kernel's file |
//! |------|-------------------|
//! | `hugepages-2048kB/nr_hugepages` (also with the `/sys/kernel/mm/hugepages/` prefix) | `/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages` |
//! | `2M/nr_hugepages` (a size as `hugepagesz=` takes it) | the same |
//! | `vm.nr_hugepages`, `vm.nr_overcommit_hugepages` (or `/proc/sys/vm/...`) | the sysctls: the default size |
//!
//! The files are those of [`mmlab_hugetlb::sysfs`]: `nr_hugepages`,
//! `nr_overcommit_hugepages`, `demote_size`, `demote`; the read-only ones
//! (`free_hugepages`, `resv_hugepages`, `surplus_hugepages`) are refused as
//! the kernel refuses them. Every write is checked ([`parse_writes`]) before
//! the machine boots; a bad one is a typed [`WriteError`] and nothing runs.
//!
//! For each write the report ([`HugetlbReport`], [`WriteResult`]) gives the
//! file read back (for `nr_hugepages`, the pool the write reached), the
//! hstate's counters, the time the write took, measured (host time of the
//! emulation) and modelled (grace periods, TLBIs, barriers from the cost
//! profile) kept apart, and the counters ([`OpCounters`]). A write the
//! kernel would fail at run time (`demote` whose vmemmap restore runs out
//! of memory: `-ENOMEM`) is reported with its error and the writes after it
//! still run, as in a shell script.

pub mod counters;
pub mod render;

pub use counters::{Modelled, OpCounters};

use crate::settings::Configs;
use mmlab_engine::{Machine, MachineConfig};
use mmlab_hugetlb::hstate::memparse;
use mmlab_hugetlb::{
    HstateAttr, HstateSysfs, HugePageSize, Hugetlb, HugetlbConfig, HugetlbMeminfo, Store, StoreOutcome, SysfsError,
};
use serde::Serialize;
use std::time::Instant;

/// The sysfs directory of the pools.
pub const SYSFS_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/";

/// A write checked against the interface ([`parse_write`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SysfsWrite {
    /// The file, as the kernel names it (`hugepages-2048kB/nr_hugepages`,
    /// or `vm.nr_hugepages` for a sysctl).
    pub file: String,
    /// The value as given.
    pub value: String,
    /// The size the file belongs to.
    pub size: HugePageSize,
    /// What the write does.
    pub store: Store,
}

/// A write mmlab refuses before booting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// No `=`.
    NotFileValue(String),
    /// Not a file of the hugetlb interface.
    UnknownFile(String),
    /// A directory for a size arm64 does not offer (`ENOENT`).
    UnknownSize {
        /// The file as given.
        file: String,
        /// The size it names, in bytes, if it names one.
        bytes: Option<u64>,
    },
    /// The kernel's refusal ([`SysfsError`]).
    Sysfs {
        /// The file as given.
        file: String,
        /// Why.
        err: SysfsError,
    },
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::NotFileValue(a) => write!(
                f,
                "{a:?} is not FILE=VALUE (e.g. hugepages-2048kB/nr_hugepages=16, 1G/nr_hugepages=2, vm.nr_hugepages=16)"
            ),
            WriteError::UnknownFile(a) => write!(
                f,
                "{a:?} is not a hugetlb file: expected hugepages-<N>kB/<file> or <size>/<file> with <file> one of \
                 nr_hugepages, nr_overcommit_hugepages, demote_size, demote; or vm.nr_hugepages, vm.nr_overcommit_hugepages"
            ),
            WriteError::UnknownSize { file, bytes } => {
                let sizes = HugePageSize::ALL.map(|s| s.sysfs_name()).join(", ");
                match bytes {
                    Some(b) => write!(
                        f,
                        "{file}: no huge page size of {b} bytes on arm64 with 4K pages (ENOENT); sizes: {sizes}"
                    ),
                    None => write!(f, "{file}: not a huge page size (ENOENT); sizes: {sizes}"),
                }
            }
            WriteError::Sysfs { file, err } => write!(f, "write to {file}: {err}"),
        }
    }
}
impl std::error::Error for WriteError {}

/// The size a directory name or size word names: `hugepages-2048kB`, or a
/// size as `hugepagesz=` takes it (`2M`, `2048K`, `1G`).
fn size_of_dir(file: &str, dir: &str) -> Result<HugePageSize, WriteError> {
    let bytes = match dir.strip_prefix("hugepages-").and_then(|d| d.strip_suffix("kB")) {
        Some(kb) => kb.parse::<u64>().ok().and_then(|k| k.checked_mul(1024)),
        None => memparse(dir),
    };
    let unknown = || WriteError::UnknownSize { file: file.to_string(), bytes };
    bytes.and_then(HugePageSize::from_bytes).ok_or_else(unknown)
}

/// Parse one `FILE=VALUE` write; `default` is the default size (the
/// sysctls' hstate).
///
/// # Errors
/// A [`WriteError`] that names what is wrong.
pub fn parse_write(arg: &str, default: HugePageSize) -> Result<SysfsWrite, WriteError> {
    let (path, value) = arg.split_once('=').ok_or_else(|| WriteError::NotFileValue(arg.to_string()))?;
    let path = path.trim();
    let (size, attr, file) =
        match path.strip_prefix("/proc/sys/vm/").map(|f| format!("vm.{f}")).as_deref().unwrap_or(path) {
            "vm.nr_hugepages" => (default, HstateAttr::NrHugepages, "vm.nr_hugepages".to_string()),
            "vm.nr_overcommit_hugepages" => {
                (default, HstateAttr::NrOvercommitHugepages, "vm.nr_overcommit_hugepages".to_string())
            }
            p => {
                let rel = p.strip_prefix(SYSFS_HUGEPAGES).unwrap_or(p);
                let (dir, name) = rel.split_once('/').ok_or_else(|| WriteError::UnknownFile(path.to_string()))?;
                let size = size_of_dir(path, dir)?;
                let attr = HstateAttr::from_name(name).ok_or_else(|| WriteError::UnknownFile(path.to_string()))?;
                (size, attr, format!("{}/{}", size.sysfs_name(), attr.name()))
            }
        };
    let store = attr.parse_store(size, value).map_err(|err| WriteError::Sysfs { file: path.to_string(), err })?;
    Ok(SysfsWrite { file, value: value.to_string(), size, store })
}

/// Parse every write, in order.
///
/// # Errors
/// The first bad one.
pub fn parse_writes(args: &[String], default: HugePageSize) -> Result<Vec<SysfsWrite>, WriteError> {
    args.iter().map(|a| parse_write(a, default)).collect()
}

/// One write done: what it read back, what it cost, what it did.
#[derive(Clone, Debug, Serialize)]
pub struct WriteResult {
    /// The write.
    pub write: SysfsWrite,
    /// What the store did (`None` when it failed).
    pub outcome: Option<StoreOutcome>,
    /// The store's error, as `echo` would report it (`None` on success).
    pub error: Option<String>,
    /// The file read back afterwards (`None` for the write-only `demote`).
    pub read_back: Option<String>,
    /// The written size's files afterwards.
    pub sysfs: HstateSysfs,
    /// For `demote`: the files of the size demoted into, afterwards.
    pub demote_target: Option<HstateSysfs>,
    /// Measured host time of the write, ns.
    pub measured_ns: u64,
    /// Modelled time of the write.
    pub modelled: Modelled,
    /// The counters of the write.
    pub counters: OpCounters,
}

/// The machine a report ran on.
#[derive(Clone, Debug, Serialize)]
pub struct MachineInfo {
    /// RAM in bytes.
    pub mem_bytes: u64,
    /// CPUs (the writes run on CPU 0).
    pub nr_cpus: usize,
    /// The cost profile's name.
    pub cost_profile: &'static str,
    /// The barrier backend.
    pub barrier_backend: String,
    /// The modelled grace period, ns.
    pub grace_period_ns: u64,
}

impl MachineInfo {
    /// The description of `mc`.
    pub fn of(mc: &MachineConfig) -> MachineInfo {
        MachineInfo {
            mem_bytes: mc.mem_bytes,
            nr_cpus: mc.nr_cpus,
            cost_profile: mc.cost_profile.name,
            barrier_backend: mc.barrier_backend.to_string(),
            grace_period_ns: mc.cost_profile.grace_period_ns,
        }
    }
}

/// What `mmlab hugetlb` did.
#[derive(Clone, Debug, Serialize)]
pub struct HugetlbReport {
    /// The machine.
    pub machine: MachineInfo,
    /// hugetlb's and HVO's switches.
    pub config: HugetlbConfig,
    /// The pools the boot parameters (`hugepages=`) reached, per size
    /// (64K, 2M, 32M, 1G).
    pub boot_pools: [u64; 4],
    /// The writes, in order.
    pub writes: Vec<WriteResult>,
    /// /proc/meminfo's hugetlb lines at the end.
    pub meminfo: HugetlbMeminfo,
}

impl HugetlbReport {
    /// Whether a write failed.
    pub fn any_failed(&self) -> bool {
        self.writes.iter().any(|w| w.error.is_some())
    }
}

/// Do `writes` in order on CPU 0 of `ht`'s machine.
///
/// # Errors
/// CPU 0 already taken.
pub fn run_writes<'m>(
    m: &'m Machine,
    ht: &mut Hugetlb<'_, 'm>,
    writes: &[SysfsWrite],
) -> Result<Vec<WriteResult>, String> {
    let cpu = m.cpu(0).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(writes.len());
    for w in writes {
        let before = OpCounters::take(m, ht);
        let t0 = Instant::now();
        let r = ht.store(&cpu, w.size, w.store);
        let measured_ns = t0.elapsed().as_nanos() as u64;
        let counters = OpCounters::take(m, ht).delta(&before);
        let sysfs = ht.hstate_of(w.size).sysfs();
        let demote_target = match w.store {
            Store::Demote(_) => ht.hstate_of(w.size).demote_size.map(|d| ht.hstate_of(d).sysfs()),
            _ => None,
        };
        let (outcome, error) = match r {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(WriteResult {
            write: w.clone(),
            outcome,
            error,
            read_back: w.store.attr().show(&sysfs),
            sysfs,
            demote_target,
            measured_ns,
            modelled: counters.modelled(),
            counters,
        });
    }
    Ok(out)
}

/// `mmlab hugetlb`: boot `c`'s machine, grow the boot-time pools, do the
/// writes (checked already), report.
///
/// # Errors
/// A machine or page allocator that does not boot, or a bug reported by
/// hugetlb at init.
pub fn run(c: &Configs, writes: &[SysfsWrite]) -> Result<HugetlbReport, String> {
    let stack = crate::stack::Stack::boot(c)?;
    let m = stack.machine();
    let pa = stack.allocator()?;
    let (mut ht, boot_pools) = stack.hugetlb(&pa)?;
    let writes = run_writes(m, &mut ht, writes)?;
    Ok(HugetlbReport {
        machine: MachineInfo::of(m.config()),
        config: ht.config(),
        boot_pools,
        writes,
        meminfo: ht.meminfo(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_hugetlb::{HugetlbError, sysfs::ValueError};

    const M2: HugePageSize = HugePageSize::Pmd2M;

    #[test]
    fn paths() {
        let w = |a: &str| parse_write(a, M2);
        let want = |file: &str, size, store| SysfsWrite { file: file.to_string(), value: String::new(), size, store };
        let strip = |r: Result<SysfsWrite, WriteError>| r.map(|w| SysfsWrite { value: String::new(), ..w });
        let nr = want("hugepages-2048kB/nr_hugepages", M2, Store::NrHugepages(16));
        for a in [
            "hugepages-2048kB/nr_hugepages=16",
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages=16",
            "2M/nr_hugepages=16",
            "2048K/nr_hugepages=16",
        ] {
            assert_eq!(strip(w(a)), Ok(nr.clone()), "{a}");
        }
        assert_eq!(strip(w("vm.nr_hugepages=16")), Ok(want("vm.nr_hugepages", M2, Store::NrHugepages(16))));
        assert_eq!(
            strip(parse_write("/proc/sys/vm/nr_overcommit_hugepages=3", HugePageSize::Cont64K)),
            Ok(want("vm.nr_overcommit_hugepages", HugePageSize::Cont64K, Store::NrOvercommitHugepages(3)))
        );
        assert_eq!(
            strip(w("1G/demote_size=2048kB")),
            Ok(want("hugepages-1048576kB/demote_size", HugePageSize::Pud1G, Store::DemoteSize(M2)))
        );
        assert_eq!(w("2M/nr_hugepages").unwrap_err(), WriteError::NotFileValue("2M/nr_hugepages".into()));
        assert_eq!(
            w("hugepages-4096kB/nr_hugepages=1").unwrap_err(),
            WriteError::UnknownSize { file: "hugepages-4096kB/nr_hugepages".into(), bytes: Some(4 << 20) }
        );
        assert_eq!(
            w("huge/nr_hugepages=1").unwrap_err(),
            WriteError::UnknownSize { file: "huge/nr_hugepages".into(), bytes: None }
        );
        assert_eq!(w("2M/nr_pages=1").unwrap_err(), WriteError::UnknownFile("2M/nr_pages".into()));
        assert_eq!(w("nr_hugepages=1").unwrap_err(), WriteError::UnknownFile("nr_hugepages".into()));
        assert!(matches!(
            w("2M/nr_hugepages=-1"),
            Err(WriteError::Sysfs { err: SysfsError::Value { why: ValueError::NotANumber, .. }, .. })
        ));
        assert!(matches!(
            w("1G/nr_overcommit_hugepages=1"),
            Err(WriteError::Sysfs { err: SysfsError::Hugetlb(HugetlbError::GiganticOvercommit { .. }), .. })
        ));
        assert!(matches!(w("2M/free_hugepages=1"), Err(WriteError::Sysfs { err: SysfsError::ReadOnly { .. }, .. })));
        let e = w("hugepages-4096kB/nr_hugepages=1").unwrap_err().to_string();
        assert!(e.contains("hugepages-64kB, hugepages-2048kB, hugepages-32768kB, hugepages-1048576kB"), "{e}");
    }
}
