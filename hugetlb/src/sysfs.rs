//! The user interface of the pools: the files of
//! `/sys/kernel/mm/hugepages/hugepages-<size>kB/` (mm/hugetlb.c
//! `hstate_attrs`, `hstate_demote_attrs`), their `store` functions, and the
//! hugetlb lines of /proc/meminfo (`hugetlb_report_meminfo`).
//!
//! # The algorithm
//!
//! Every hstate has a directory named after its size in kB
//! (`hugetlb_sysfs_add_hstate`). Its files, in the kernel's order:
//!
//! | file | mode | store (Linux 6.12) |
//! |------|------|--------------------|
//! | `nr_hugepages` | rw | `kstrtoul(buf, 10)`, then `set_max_huge_pages` |
//! | `nr_overcommit_hugepages` | rw | `-EINVAL` for a gigantic size (before the number is read), else `kstrtoul` and the cap is set |
//! | `free_hugepages`, `resv_hugepages`, `surplus_hugepages` | ro | none |
//! | `demote_size` | rw, only with a demote size | `memparse`; `-EINVAL` unless a size of at least 2M (`HUGETLB_PAGE_ORDER`) below this one |
//! | `demote` | wo, only with a demote size | `kstrtoul`, then the demote loop |
//!
//! 64K has no smaller size, so no demote files; 2M demotes to 64K
//! (`hugetlb_init_hstates`), and its `demote_size` accepts no other value
//! (nothing of at least 2M is below it). The sysctls
//! `vm.nr_hugepages` and `vm.nr_overcommit_hugepages` (/proc/sys/vm) act on
//! the default size with the same parsing (`proc_hugetlb_doulongvec_minmax`).
//!
//! [`HstateAttr::parse_store`] does a store's checks that need no pool
//! (the number or size, a file that does not exist or cannot be written,
//! `-EINVAL` for gigantic overcommit) and returns the [`Store`] to apply
//! with [`Hugetlb::store`](crate::Hugetlb::store), so a list of writes can be checked before any
//! machine boots. `kstrtoul` takes decimal digits with an optional leading
//! `+` and one trailing newline; anything else is `-EINVAL`, a number above
//! `u64::MAX` `-ERANGE`. `memparse` reads a number with an optional
//! K/M/G/... suffix; like the kernel, a `B` after the suffix (as `2048kB`,
//! the way `demote_size` prints it) is ignored.
//!
//! # Fidelity
//!
//! | piece | label |
//! |-------|-------|
//! | file names, modes, order, store checks and errno, meminfo layout | faithful (Linux 6.12) |
//! | per-node files (`/sys/devices/system/node/node*/hugepages`), `nr_hugepages_mempolicy` | not modelled (one node) |
//! | text after a number (`memparse` stops at the first byte it cannot read) | simplified: anything but a `B` after the suffix is refused |

use crate::hstate::{HstateSysfs, HugePageSize, memparse};
mod apply;

use crate::error::HugetlbError;
use crate::hstate::HUGETLB_PAGE_ORDER;

/// A file of an hstate's sysfs directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HstateAttr {
    /// `nr_hugepages`.
    NrHugepages,
    /// `nr_overcommit_hugepages`.
    NrOvercommitHugepages,
    /// `free_hugepages` (read-only).
    FreeHugepages,
    /// `resv_hugepages` (read-only).
    ResvHugepages,
    /// `surplus_hugepages` (read-only).
    SurplusHugepages,
    /// `demote_size`.
    DemoteSize,
    /// `demote` (write-only).
    Demote,
}

impl HstateAttr {
    /// Every file, in the kernel's order (`hstate_attrs`, then
    /// `hstate_demote_attrs`).
    pub const ALL: [HstateAttr; 7] = [
        HstateAttr::NrHugepages,
        HstateAttr::NrOvercommitHugepages,
        HstateAttr::FreeHugepages,
        HstateAttr::ResvHugepages,
        HstateAttr::SurplusHugepages,
        HstateAttr::DemoteSize,
        HstateAttr::Demote,
    ];

    /// The file name.
    pub const fn name(self) -> &'static str {
        match self {
            HstateAttr::NrHugepages => "nr_hugepages",
            HstateAttr::NrOvercommitHugepages => "nr_overcommit_hugepages",
            HstateAttr::FreeHugepages => "free_hugepages",
            HstateAttr::ResvHugepages => "resv_hugepages",
            HstateAttr::SurplusHugepages => "surplus_hugepages",
            HstateAttr::DemoteSize => "demote_size",
            HstateAttr::Demote => "demote",
        }
    }

    /// The file called `name`.
    pub fn from_name(name: &str) -> Option<HstateAttr> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether the file can be written (`demote` is write-only).
    pub const fn writable(self) -> bool {
        matches!(
            self,
            HstateAttr::NrHugepages | HstateAttr::NrOvercommitHugepages | HstateAttr::DemoteSize | HstateAttr::Demote
        )
    }

    /// Whether the file can be read.
    pub const fn readable(self) -> bool {
        !matches!(self, HstateAttr::Demote)
    }

    /// Whether `size`'s directory has the file (the demote files only with
    /// a demote order: every size but the smallest, 64K).
    pub fn exists_for(self, size: HugePageSize) -> bool {
        match self {
            HstateAttr::DemoteSize | HstateAttr::Demote => size != HugePageSize::ALL[0],
            _ => true,
        }
    }

    /// The file's contents as its `show` function prints them (without the
    /// newline); `None` for `demote` (write-only) or a file `s`'s directory
    /// does not have.
    pub fn show(self, s: &HstateSysfs) -> Option<String> {
        if !self.exists_for(s.size) {
            return None;
        }
        Some(match self {
            HstateAttr::NrHugepages => s.nr_hugepages.to_string(),
            HstateAttr::NrOvercommitHugepages => s.nr_overcommit_hugepages.to_string(),
            HstateAttr::FreeHugepages => s.free_hugepages.to_string(),
            HstateAttr::ResvHugepages => s.resv_hugepages.to_string(),
            HstateAttr::SurplusHugepages => s.surplus_hugepages.to_string(),
            HstateAttr::DemoteSize => format!("{}kB", s.demote_size_kb?),
            HstateAttr::Demote => return None,
        })
    }

    /// The checks of the file's `store` that need no pool: parse `buf` and
    /// return what to apply.
    ///
    /// # Errors
    /// [`SysfsError`]: a file `size` does not have or cannot write, a value
    /// the store refuses, gigantic overcommit. Nothing is changed anywhere.
    pub fn parse_store(self, size: HugePageSize, buf: &str) -> Result<Store, SysfsError> {
        if !self.exists_for(size) {
            return Err(SysfsError::NoSuchFile { size, attr: self });
        }
        if !self.writable() {
            return Err(SysfsError::ReadOnly { size, attr: self });
        }
        let attr = self;
        Ok(match self {
            HstateAttr::NrHugepages => Store::NrHugepages(kstrtoul(buf).map_err(|why| SysfsError::Value {
                attr,
                value: buf.to_string(),
                why,
            })?),
            HstateAttr::NrOvercommitHugepages => {
                if size.is_gigantic() {
                    return Err(SysfsError::Hugetlb(HugetlbError::GiganticOvercommit { size }));
                }
                Store::NrOvercommitHugepages(kstrtoul(buf).map_err(|why| SysfsError::Value {
                    attr,
                    value: buf.to_string(),
                    why,
                })?)
            }
            HstateAttr::Demote => {
                Store::Demote(kstrtoul(buf).map_err(|why| SysfsError::Value { attr, value: buf.to_string(), why })?)
            }
            HstateAttr::DemoteSize => {
                let text = buf.strip_suffix('\n').unwrap_or(buf);
                let text = text.strip_suffix(['B', 'b']).unwrap_or(text);
                let bytes = memparse(text).ok_or_else(|| SysfsError::Value {
                    attr,
                    value: buf.to_string(),
                    why: ValueError::NotASize,
                })?;
                // `size_to_hstate()` (as `Hugetlb::size_to_hstate`).
                let dst = HugePageSize::from_bytes(bytes)
                    .ok_or(HugetlbError::UnsupportedSize { bytes })
                    .map_err(SysfsError::Hugetlb)?;
                if dst.order() < HUGETLB_PAGE_ORDER || dst.order() >= size.order() {
                    return Err(SysfsError::Hugetlb(HugetlbError::BadDemoteSize { size, demote_bytes: bytes }));
                }
                Store::DemoteSize(dst)
            }
            HstateAttr::FreeHugepages | HstateAttr::ResvHugepages | HstateAttr::SurplusHugepages => {
                return Err(SysfsError::ReadOnly { size, attr: self });
            }
        })
    }
}

impl std::fmt::Display for HstateAttr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A checked write to an hstate's file ([`HstateAttr::parse_store`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// `nr_hugepages`: the pool size asked for.
    NrHugepages(u64),
    /// `nr_overcommit_hugepages`: the surplus cap.
    NrOvercommitHugepages(u64),
    /// `demote`: pages to demote.
    Demote(u64),
    /// `demote_size`: the size demote splits into.
    DemoteSize(HugePageSize),
}

impl Store {
    /// The file it writes.
    pub fn attr(self) -> HstateAttr {
        match self {
            Store::NrHugepages(_) => HstateAttr::NrHugepages,
            Store::NrOvercommitHugepages(_) => HstateAttr::NrOvercommitHugepages,
            Store::Demote(_) => HstateAttr::Demote,
            Store::DemoteSize(_) => HstateAttr::DemoteSize,
        }
    }
}

/// Why `kstrtoul` refused a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueError {
    /// Not a decimal number (`-EINVAL`): empty, a sign other than `+`,
    /// another character.
    NotANumber,
    /// Above `u64::MAX` (`-ERANGE`).
    Range,
    /// Not a size `memparse` reads (`demote_size`; `-EINVAL`).
    NotASize,
}

impl ValueError {
    /// The errno the store returns.
    pub const fn errno(self) -> &'static str {
        match self {
            ValueError::NotANumber | ValueError::NotASize => "EINVAL",
            ValueError::Range => "ERANGE",
        }
    }
}

/// A sysfs write the kernel refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SysfsError {
    /// The directory has no such file (`ENOENT`).
    NoSuchFile {
        /// The size.
        size: HugePageSize,
        /// The file.
        attr: HstateAttr,
    },
    /// The file is read-only (`EACCES` at open).
    ReadOnly {
        /// The size.
        size: HugePageSize,
        /// The file.
        attr: HstateAttr,
    },
    /// The store refused the value.
    Value {
        /// The file.
        attr: HstateAttr,
        /// The buffer written.
        value: String,
        /// Why.
        why: ValueError,
    },
    /// The store's own error (`-EINVAL`, `-ENOMEM`) or a bug below it.
    Hugetlb(HugetlbError),
}

impl std::fmt::Display for SysfsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SysfsError::NoSuchFile { size, attr } => {
                write!(f, "{}/{attr}: No such file or directory (ENOENT)", size.sysfs_name())
            }
            SysfsError::ReadOnly { size, attr } => {
                write!(f, "{}/{attr}: Permission denied (EACCES: the file is read-only)", size.sysfs_name())
            }
            SysfsError::Value { attr, value, why } => {
                let what = match why {
                    ValueError::NotASize => "a size (memparse: a number with an optional K/M/G suffix)",
                    ValueError::NotANumber | ValueError::Range => "an unsigned decimal number (kstrtoul)",
                };
                write!(f, "{attr}: {value:?} is not {what} ({})", why.errno())
            }
            SysfsError::Hugetlb(e) => write!(f, "{e}"),
        }
    }
}
impl std::error::Error for SysfsError {}

impl From<HugetlbError> for SysfsError {
    fn from(e: HugetlbError) -> Self {
        SysfsError::Hugetlb(e)
    }
}

/// `kstrtoul(buf, 10, &val)` as sysfs stores call it: decimal digits, an
/// optional leading `+`, one optional trailing newline.
///
/// # Errors
/// [`ValueError::NotANumber`] or [`ValueError::Range`].
pub fn kstrtoul(buf: &str) -> Result<u64, ValueError> {
    let s = buf.strip_suffix('\n').unwrap_or(buf);
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::NotANumber);
    }
    s.parse::<u64>().map_err(|_| ValueError::Range)
}

/// What a write did, beyond the file's new contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StoreOutcome {
    /// The size written.
    pub size: HugePageSize,
    /// The write.
    pub store: Store,
    /// `nr_hugepages` of the size afterwards (what a grow reached).
    pub nr_hugepages: u64,
    /// Pages demoted (a `demote` write; 0 otherwise).
    pub demoted: u64,
}

/// The hugetlb lines of /proc/meminfo: the default size's counters, and the
/// memory of every pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HugetlbMeminfo {
    /// `HugePages_Total`: the default size's `nr_huge_pages`.
    pub hugepages_total: u64,
    /// `HugePages_Free`.
    pub hugepages_free: u64,
    /// `HugePages_Rsvd`.
    pub hugepages_rsvd: u64,
    /// `HugePages_Surp`.
    pub hugepages_surp: u64,
    /// `Hugepagesize`: the default size in kB.
    pub hugepagesize_kb: u64,
    /// `Hugetlb`: the pages of every size's pool, in kB.
    pub hugetlb_kb: u64,
}

impl std::fmt::Display for HugetlbMeminfo {
    /// The lines as `hugetlb_report_meminfo` prints them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "HugePages_Total:   {:5}", self.hugepages_total)?;
        writeln!(f, "HugePages_Free:    {:5}", self.hugepages_free)?;
        writeln!(f, "HugePages_Rsvd:    {:5}", self.hugepages_rsvd)?;
        writeln!(f, "HugePages_Surp:    {:5}", self.hugepages_surp)?;
        writeln!(f, "Hugepagesize:   {:8} kB", self.hugepagesize_kb)?;
        writeln!(f, "Hugetlb:        {:8} kB", self.hugetlb_kb)
    }
}

/// Every readable file of every hstate as `grep -r . /sys/kernel/mm/hugepages`
/// prints them: `path:value`, one per line, smallest size first, files in
/// the kernel's order.
pub fn sysfs_listing(sysfs: &[HstateSysfs]) -> String {
    let mut s = String::new();
    for h in sysfs {
        for attr in HstateAttr::ALL {
            if let Some(v) = attr.show(h) {
                s.push_str(&format!("/sys/kernel/mm/hugepages/{}/{}:{v}\n", h.size.sysfs_name(), attr.name()));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_parse_as_the_kernel_parses() {
        let m2 = HugePageSize::Pmd2M;
        let g = HugePageSize::Pud1G;
        assert_eq!(kstrtoul("12\n"), Ok(12));
        assert_eq!(kstrtoul("+7"), Ok(7));
        for bad in ["", "-1", "1.5", "0x10", " 3", "3 ", "12\n\n", "1e3"] {
            assert_eq!(kstrtoul(bad), Err(ValueError::NotANumber), "{bad:?}");
        }
        assert_eq!(kstrtoul("18446744073709551616"), Err(ValueError::Range));
        assert_eq!(HstateAttr::NrHugepages.parse_store(m2, "1000"), Ok(Store::NrHugepages(1000)));
        assert!(matches!(
            HstateAttr::NrHugepages.parse_store(m2, "lots"),
            Err(SysfsError::Value { why: ValueError::NotANumber, .. })
        ));
        // Gigantic overcommit is refused before the number is read.
        assert_eq!(
            HstateAttr::NrOvercommitHugepages.parse_store(g, "x"),
            Err(SysfsError::Hugetlb(HugetlbError::GiganticOvercommit { size: g }))
        );
        assert_eq!(
            HstateAttr::FreeHugepages.parse_store(m2, "1"),
            Err(SysfsError::ReadOnly { size: m2, attr: HstateAttr::FreeHugepages })
        );
        // 64K has no demote files; 2M has (it demotes to 64K), but no
        // other demote size: nothing of 2M or more is below it.
        let k64 = HugePageSize::Cont64K;
        assert_eq!(
            HstateAttr::Demote.parse_store(k64, "1"),
            Err(SysfsError::NoSuchFile { size: k64, attr: HstateAttr::Demote })
        );
        assert_eq!(HstateAttr::Demote.parse_store(m2, "1"), Ok(Store::Demote(1)));
        assert_eq!(
            HstateAttr::DemoteSize.parse_store(m2, "64K"),
            Err(SysfsError::Hugetlb(HugetlbError::BadDemoteSize { size: m2, demote_bytes: 64 << 10 }))
        );
        // demote_size takes what demote_size shows, and memparse sizes.
        for v in ["2048kB", "2M", "2097152", "2048k\n"] {
            assert_eq!(HstateAttr::DemoteSize.parse_store(g, v), Ok(Store::DemoteSize(m2)), "{v}");
        }
        assert_eq!(
            HstateAttr::DemoteSize.parse_store(g, "64K"),
            Err(SysfsError::Hugetlb(HugetlbError::BadDemoteSize { size: g, demote_bytes: 64 << 10 }))
        );
        assert_eq!(
            HstateAttr::DemoteSize.parse_store(g, "3M"),
            Err(SysfsError::Hugetlb(HugetlbError::UnsupportedSize { bytes: 3 << 20 }))
        );
        assert!(matches!(
            HstateAttr::DemoteSize.parse_store(g, "big"),
            Err(SysfsError::Value { why: ValueError::NotASize, .. })
        ));
        assert_eq!(HstateAttr::from_name("surplus_hugepages"), Some(HstateAttr::SurplusHugepages));
        assert_eq!(HstateAttr::from_name("nr_hugepages_mempolicy"), None);
    }

    #[test]
    fn meminfo_and_listing_layout() {
        let mi = HugetlbMeminfo {
            hugepages_total: 3,
            hugepages_free: 2,
            hugepages_rsvd: 1,
            hugepages_surp: 0,
            hugepagesize_kb: 2048,
            hugetlb_kb: 1054720,
        };
        assert_eq!(
            mi.to_string(),
            "HugePages_Total:       3\nHugePages_Free:        2\nHugePages_Rsvd:        1\nHugePages_Surp:        0\n\
             Hugepagesize:       2048 kB\nHugetlb:         1054720 kB\n"
        );
        let h = crate::Hstate::new(HugePageSize::ContPmd32M);
        let mut s = h.sysfs();
        s.demote_size_kb = Some(2048);
        assert_eq!(
            sysfs_listing(&[s]),
            "/sys/kernel/mm/hugepages/hugepages-32768kB/nr_hugepages:0\n\
             /sys/kernel/mm/hugepages/hugepages-32768kB/nr_overcommit_hugepages:0\n\
             /sys/kernel/mm/hugepages/hugepages-32768kB/free_hugepages:0\n\
             /sys/kernel/mm/hugepages/hugepages-32768kB/resv_hugepages:0\n\
             /sys/kernel/mm/hugepages/hugepages-32768kB/surplus_hugepages:0\n\
             /sys/kernel/mm/hugepages/hugepages-32768kB/demote_size:2048kB\n"
        );
    }
}
