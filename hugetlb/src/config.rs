//! hugetlb's switches and their `--set` keys.
//!
//! [`HugetlbConfig`] holds the boot parameters `hugepagesz=`, `hugepages=`
//! and `default_hugepagesz=` as the kernel parses them (mm/hugetlb.c
//! `hugepagesz_setup`, `hugepages_setup`, `default_hugepagesz_setup`,
//! then `hugetlb_init`), two switches that select kernel code paths by
//! release ([`GiganticAlloc`], [`DemoteBatching`]), and HVO's switches
//! ([`HvoConfig`], whose own keys it accepts too).
//!
//! # Boot parameters
//!
//! They are read in order, as on a command line:
//!
//! - `hugepagesz=<size>` names the size the next `hugepages=` applies to.
//!   A size arm64 does not offer (`arch_hugetlb_valid_size`) is refused,
//!   and so is a size named twice (unless it is the default size named by
//!   an earlier `default_hugepagesz=` whose count is not set yet).
//! - `hugepages=<count>` (or `0:<count>` for node 0) sets the count of the
//!   size named last; before any size is named it applies to the default
//!   size. It is refused after a refused size, or twice for one size.
//! - `default_hugepagesz=<size>` (once) names the default size; a
//!   `hugepages=` given before any size then applies to it.
//!
//! The kernel prints a warning and ignores a refused parameter; here
//! [`HugetlbConfig::set`] returns a [`BootParamError`] inside the
//! [`KnobError`], and the parse state moves as the kernel's would (a
//! refused `hugepagesz=` makes the next `hugepages=` refused too), while
//! the counts stay as they were. [`HugetlbConfig::parse_cmdline`] reads a
//! whole command line and returns the refusals as the kernel's warnings.

use crate::hstate::{HugePageSize, memparse};
use mmlab_engine::kernel::sysctl::{KernelName, Knob, KnobError, KnobTable, Parsed, ValueError, parse_named};
use mmlab_vmemmap::HvoConfig;

/// How gigantic folios (32M, 1G) are allocated and freed, by the kernel
/// that did it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum GiganticAlloc {
    /// Up to Linux 6.11: `alloc_contig_pages` hands out order-0 pages
    /// (`split_free_pages` prepares each), `prep_compound_gigantic_folio`
    /// freezes every page's reference and points each tail at the head;
    /// freeing undoes it tail by tail (`destroy_compound_gigantic_folio`)
    /// and `free_contig_range` frees every page as an order-0 page.
    V6_11,
    /// Linux 6.12, cf54f310d0d3 "mm/hugetlb: use __GFP_COMP for gigantic
    /// folios" (Yu Zhao, 2024): `folio_alloc_gigantic` asks
    /// `alloc_contig_range` for a compound page (`__GFP_COMP`), whose head
    /// alone is prepared; freeing is one `folio_put` of the whole folio,
    /// given back one pageblock at a time.
    V6_12,
}

impl GiganticAlloc {
    /// Every variant with its `--set` value.
    pub const ALL: [(GiganticAlloc, &'static str); 2] =
        [(GiganticAlloc::V6_11, "v6.11"), (GiganticAlloc::V6_12, "v6.12")];
    /// The `--set` value.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, _)| *p == self).map_or("?", |(_, n)| n)
    }
}

/// How `demote` handles the vmemmap of the folios it splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum DemoteBatching {
    /// Up to Linux 6.11 (`demote_free_hugetlb_folio`): one folio per
    /// `demote_pool_huge_page`; its vmemmap is restored alone
    /// (`hugetlb_vmemmap_restore_folio`), and each smaller folio is
    /// optimized alone (`prep_new_hugetlb_folio`): with the 6.11 grace
    /// period, 1 + 512 `synchronize_rcu()` for one 1G → 2M.
    V6_11,
    /// Linux 6.12, c0f398c3b2cf "mm/hugetlb_vmemmap: batch HVO work when
    /// demoting": a list of folios per call, restored as one batch
    /// (`hugetlb_vmemmap_restore_folios`), the smaller folios optimized as
    /// one batch (`prep_and_add_allocated_folios`): 2 grace periods.
    V6_12,
}

impl DemoteBatching {
    /// Every variant with its `--set` value.
    pub const ALL: [(DemoteBatching, &'static str); 2] =
        [(DemoteBatching::V6_11, "v6.11"), (DemoteBatching::V6_12, "v6.12")];
    /// The `--set` value.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, _)| *p == self).map_or("?", |(_, n)| n)
    }
}

/// A boot parameter the kernel refuses (prints a warning and ignores).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootParamError {
    /// `hugepagesz=` / `default_hugepagesz=` of a size arm64 does not offer
    /// (`arch_hugetlb_valid_size`), or not a size at all.
    UnsupportedSize {
        /// The parameter.
        param: &'static str,
        /// Its value.
        value: String,
    },
    /// `hugepagesz=` of a size already named.
    SizeTwice {
        /// The size.
        size: HugePageSize,
    },
    /// A second `default_hugepagesz=`.
    DefaultTwice,
    /// `hugepages=` right after a refused size.
    NoValidSize,
    /// `hugepages=` twice for one size without a `hugepagesz=` between.
    CountTwice,
    /// `hugepages=` that is not a count (or `0:<count>`: one node here).
    BadCount {
        /// Its value.
        value: String,
    },
}

impl std::fmt::Display for BootParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootParamError::UnsupportedSize { param, value } => write!(f, "unsupported {param}{value}"),
            BootParamError::SizeTwice { size } => write!(f, "hugepagesz={size} specified twice, ignoring"),
            BootParamError::DefaultTwice => write!(f, "default_hugepagesz previously specified, ignoring"),
            BootParamError::NoValidSize => write!(f, "hugepages= does not follow a valid hugepagesz, ignoring"),
            BootParamError::CountTwice => {
                write!(f, "hugepages= specified twice without interleaving hugepagesz=, ignoring")
            }
            BootParamError::BadCount { value } => write!(f, "Invalid hugepages parameter {value}"),
        }
    }
}
impl std::error::Error for BootParamError {}

/// Which count a `hugepages=` writes (`mhp` in `hugepages_setup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum CountSlot {
    /// None yet.
    #[default]
    Unset,
    /// `default_hstate_max_huge_pages` (before any size is named).
    Default,
    /// That size's `max_huge_pages`.
    Size(HugePageSize),
}

/// The parser's globals (`parsed_valid_hugepagesz`, `parsed_hstate`,
/// `hugetlb_max_hstate`, `last_mhp`, `parsed_default_hugepagesz`,
/// `default_hstate_max_huge_pages`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ParseState {
    invalid_size_parsed: bool,
    parsed_hstate: Option<HugePageSize>,
    added: [bool; 4],
    last_slot: CountSlot,
    parsed_default: bool,
    default_pending: u64,
}

/// hugetlb's switches (`--set hugepagesz=… hugepages=…`, the code-path
/// switches, and HVO's keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HugetlbConfig {
    /// `default_hugepagesz=`: the default size (2M, `HPAGE_SIZE`, unless
    /// set).
    pub default_hugepagesz: HugePageSize,
    /// `hugepages=` per size, in [`HugePageSize::ALL`] order (64K, 2M,
    /// 32M, 1G): the pool each hstate is grown to at init; 0 by default.
    pub hugepages: [u64; 4],
    /// `hugetlb.gigantic`: how gigantic folios are allocated and freed.
    pub gigantic: GiganticAlloc,
    /// `hugetlb.demote`: unbatched (6.11) or batched (6.12) demote.
    pub demote: DemoteBatching,
    /// HVO (`vm.hugetlb_optimize_vmemmap` and mmlab's policy switches).
    pub hvo: HvoConfig,
    #[serde(skip)]
    parse: ParseState,
}

impl Default for HugetlbConfig {
    fn default() -> Self {
        HugetlbConfig {
            default_hugepagesz: HugePageSize::Pmd2M,
            hugepages: [0; 4],
            gigantic: GiganticAlloc::V6_12,
            demote: DemoteBatching::V6_12,
            hvo: HvoConfig::default(),
            parse: ParseState::default(),
        }
    }
}

fn boot_err(key: &'static str, value: &str, e: BootParamError) -> KnobError {
    KnobError::bad_value(key, value, ValueError::Other(e.to_string()))
}

impl HugetlbConfig {
    /// The configuration with HVO's switches `hvo` and every other default.
    pub fn with_hvo(hvo: HvoConfig) -> HugetlbConfig {
        HugetlbConfig { hvo, ..HugetlbConfig::default() }
    }

    /// The `hugepages=` count of `size`.
    pub fn hugepages_of(&self, size: HugePageSize) -> u64 {
        self.hugepages[size.index()]
    }

    /// hugetlb's own `--set` keys, in help order (HVO's are in
    /// [`HvoConfig::KNOBS`]).
    pub const KNOBS: KnobTable<HugetlbConfig> = KnobTable(&[
        Knob {
            key: "hugepagesz",
            values: "64K|2M|32M|1G",
            summary: "<size>",
            kernel: KernelName::BootParam("hugepagesz="),
            parser: |key, value| {
                let size = HugetlbConfig::parse_size("hugepagesz=", value).map_err(|e| boot_err(key, value, e))?;
                let value = value.to_string();
                Ok(Parsed::with(move |c: &mut HugetlbConfig| {
                    c.hugepagesz_apply(size).map_err(|e| boot_err(key, &value, e))
                }))
            },
        },
        Knob {
            key: "hugepages",
            values: "<count>|0:<count>",
            summary: "<count>",
            kernel: KernelName::BootParam("hugepages="),
            parser: |key, value| {
                let n = HugetlbConfig::parse_count(value).map_err(|e| boot_err(key, value, e))?;
                let value = value.to_string();
                Ok(Parsed::with(move |c: &mut HugetlbConfig| {
                    c.hugepages_apply(n).map_err(|e| boot_err(key, &value, e))
                }))
            },
        },
        Knob {
            key: "default_hugepagesz",
            values: "64K|2M|32M|1G",
            summary: "<size>",
            kernel: KernelName::BootParam("default_hugepagesz="),
            parser: |key, value| {
                let size =
                    HugetlbConfig::parse_size("default_hugepagesz=", value).map_err(|e| boot_err(key, value, e))?;
                let value = value.to_string();
                Ok(Parsed::with(move |c: &mut HugetlbConfig| {
                    c.default_hugepagesz_apply(size).map_err(|e| boot_err(key, &value, e))
                }))
            },
        },
        Knob {
            key: "hugetlb.gigantic",
            values: "v6.11|v6.12",
            summary: "v6.11|v6.12",
            kernel: KernelName::Code("cf54f310d0d3 mm/hugetlb: use __GFP_COMP for gigantic folios (6.12)"),
            parser: |key, value| {
                Ok(Parsed::new(parse_named(key, value, &GiganticAlloc::ALL)?, |c: &mut HugetlbConfig, g| {
                    c.gigantic = g
                }))
            },
        },
        Knob {
            key: "hugetlb.demote",
            values: "v6.11|v6.12",
            summary: "v6.11|v6.12",
            kernel: KernelName::Code("c0f398c3b2cf mm/hugetlb_vmemmap: batch HVO work when demoting (6.12)"),
            parser: |key, value| {
                Ok(Parsed::new(parse_named(key, value, &DemoteBatching::ALL)?, |c: &mut HugetlbConfig, d| c.demote = d))
            },
        },
    ]);

    /// Apply `value` to the knob `key`: one of [`HugetlbConfig::KNOBS`] or
    /// of [`HvoConfig::KNOBS`].
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] or [`KnobError::BadValue`]; the settings
    /// are then unchanged (a refused boot parameter moves only the parse
    /// state, as in the kernel; see the module docs).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KnobError> {
        if HvoConfig::KNOBS.contains(key) {
            return self.hvo.set(key, value);
        }
        let key = key.trim();
        let value = value.trim();
        match Self::KNOBS.get(key) {
            Some(knob) => match self.boot_param(knob.key, value) {
                Some(r) => r.map_err(|e| boot_err(knob.key, value, e)),
                None => knob.apply(self, value),
            },
            None => Self::KNOBS.set(self, key, value),
        }
    }

    /// One of the boot parameters `hugepagesz=`, `hugepages=`,
    /// `default_hugepagesz=` as the kernel's `__setup` handler reads it
    /// (a refused value moves the parse state as there); `None` for
    /// another key.
    fn boot_param(&mut self, key: &str, value: &str) -> Option<Result<(), BootParamError>> {
        Some(match key {
            "hugepagesz" => self.hugepagesz_setup(value),
            "hugepages" => self.hugepages_setup(value),
            "default_hugepagesz" => self.default_hugepagesz_setup(value),
            _ => return None,
        })
    }

    /// Read a kernel command line: the hugetlb parameters in order, every
    /// other word ignored; then `hugetlb_init`'s resolution of the default
    /// size's count. Returns the configuration (other settings from
    /// `self`) and the parameters refused, as the kernel's warnings.
    pub fn parse_cmdline(&self, cmdline: &str) -> (HugetlbConfig, Vec<BootParamError>) {
        let mut c = *self;
        let mut refused = Vec::new();
        for word in cmdline.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else { continue };
            if let Some(Err(e)) = c.boot_param(k, v) {
                refused.push(e);
            }
        }
        (c, refused)
    }

    /// `hugetlb_init()`'s part: a `hugepages=` given before any size goes
    /// to the default size, over any count set for it by name.
    pub fn resolved_hugepages(&self) -> [u64; 4] {
        let mut h = self.hugepages;
        if !self.parse.parsed_default && self.parse.default_pending != 0 {
            h[self.default_hugepagesz.index()] = self.parse.default_pending;
        }
        h
    }

    /// `hugetlb_add_hstate()` at parse time.
    fn add_hstate(&mut self, size: HugePageSize) {
        if !self.parse.added[size.index()] {
            self.parse.added[size.index()] = true;
            self.parse.parsed_hstate = Some(size);
        }
    }

    fn parse_size(param: &'static str, value: &str) -> Result<HugePageSize, BootParamError> {
        memparse(value)
            .and_then(HugePageSize::from_bytes)
            .ok_or_else(|| BootParamError::UnsupportedSize { param, value: value.to_string() })
    }

    /// `hugepagesz_setup()`.
    fn hugepagesz_setup(&mut self, value: &str) -> Result<(), BootParamError> {
        self.parse.invalid_size_parsed = true;
        let size = Self::parse_size("hugepagesz=", value)?;
        self.hugepagesz_apply(size)
    }

    /// `hugepagesz_setup()` once the size is known to be valid.
    fn hugepagesz_apply(&mut self, size: HugePageSize) -> Result<(), BootParamError> {
        self.parse.invalid_size_parsed = true;
        if self.parse.added[size.index()] {
            let default_unset =
                self.parse.parsed_default && size == self.default_hugepagesz && self.hugepages[size.index()] == 0;
            if !default_unset {
                return Err(BootParamError::SizeTwice { size });
            }
            self.parse.parsed_hstate = Some(size);
        } else {
            self.add_hstate(size);
        }
        self.parse.invalid_size_parsed = false;
        Ok(())
    }

    /// `hugepages_setup()`.
    fn hugepages_setup(&mut self, value: &str) -> Result<(), BootParamError> {
        if self.parse.invalid_size_parsed {
            self.parse.invalid_size_parsed = false;
            return Err(BootParamError::NoValidSize);
        }
        if self.count_slot() == self.parse.last_slot {
            return Err(BootParamError::CountTwice);
        }
        self.hugepages_apply(Self::parse_count(value)?)
    }

    /// The count of `hugepages=`: `<count>` or `0:<count>` (one node).
    fn parse_count(value: &str) -> Result<u64, BootParamError> {
        let count = value.strip_prefix("0:").unwrap_or(value);
        count.parse().map_err(|_| BootParamError::BadCount { value: value.to_string() })
    }

    /// The count a `hugepages=` writes now.
    fn count_slot(&self) -> CountSlot {
        match self.parse.parsed_hstate {
            None => CountSlot::Default,
            Some(s) => CountSlot::Size(s),
        }
    }

    /// `hugepages_setup()` with the count parsed already.
    fn hugepages_apply(&mut self, n: u64) -> Result<(), BootParamError> {
        if self.parse.invalid_size_parsed {
            self.parse.invalid_size_parsed = false;
            return Err(BootParamError::NoValidSize);
        }
        let slot = self.count_slot();
        if slot == self.parse.last_slot {
            return Err(BootParamError::CountTwice);
        }
        match slot {
            CountSlot::Default | CountSlot::Unset => self.parse.default_pending = n,
            CountSlot::Size(s) => self.hugepages[s.index()] = n,
        }
        self.parse.last_slot = slot;
        Ok(())
    }

    /// `default_hugepagesz_setup()`.
    fn default_hugepagesz_setup(&mut self, value: &str) -> Result<(), BootParamError> {
        self.parse.invalid_size_parsed = true;
        if self.parse.parsed_default {
            return Err(BootParamError::DefaultTwice);
        }
        let size = Self::parse_size("default_hugepagesz=", value)?;
        self.default_hugepagesz_apply(size)
    }

    /// `default_hugepagesz_setup()` once the size is known to be valid.
    fn default_hugepagesz_apply(&mut self, size: HugePageSize) -> Result<(), BootParamError> {
        self.parse.invalid_size_parsed = true;
        if self.parse.parsed_default {
            return Err(BootParamError::DefaultTwice);
        }
        self.add_hstate(size);
        self.parse.invalid_size_parsed = false;
        self.parse.parsed_default = true;
        self.default_hugepagesz = size;
        if self.parse.default_pending != 0 {
            self.hugepages[size.index()] = self.parse.default_pending;
            self.parse.default_pending = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_and_defaults() {
        let mut c = HugetlbConfig::default();
        assert_eq!((c.hugepages, c.default_hugepagesz), ([0; 4], HugePageSize::Pmd2M));
        assert!(c.hvo.hugetlb_optimize_vmemmap);
        c.set("hugepages", "16").unwrap();
        c.set("hugetlb_optimize_vmemmap", "off").unwrap();
        c.set("hugetlb.gigantic", "v6.11").unwrap();
        c.set("hugetlb.demote", "v6.11").unwrap();
        assert_eq!(c.resolved_hugepages(), [0, 16, 0, 0]);
        assert!(!c.hvo.hugetlb_optimize_vmemmap);
        assert_eq!((c.gigantic, c.demote), (GiganticAlloc::V6_11, DemoteBatching::V6_11));
        let before = c;
        assert!(c.set("hugetlb.gigantic", "v6.13").is_err());
        assert!(c.set("hugetlb.nope", "1").is_err());
        assert_eq!(c, before, "a refused value changes nothing");
        assert_eq!(HugetlbConfig::KNOBS.help().count(), 5);
    }

    /// The kernel's examples (Documentation/admin-guide/mm/hugetlbpage.rst)
    /// and its refusals.
    #[test]
    fn boot_parameters_as_the_kernel_parses_them() {
        let d = HugetlbConfig::default();
        let (c, w) =
            d.parse_cmdline("hugepagesz=1G hugepages=2 hugepagesz=2M hugepages=512 hugepagesz=64K hugepages=0:8");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.resolved_hugepages(), [8, 512, 0, 2]);

        // hugepages= before any size: the default size.
        let (c, w) = d.parse_cmdline("hugepages=16 hugepagesz=32M hugepages=3");
        assert!(w.is_empty());
        assert_eq!(c.resolved_hugepages(), [0, 16, 3, 0]);

        // default_hugepagesz= takes the pending count.
        let (c, w) = d.parse_cmdline("hugepages=4 default_hugepagesz=1G");
        assert!(w.is_empty());
        assert_eq!((c.default_hugepagesz, c.resolved_hugepages()), (HugePageSize::Pud1G, [0, 0, 0, 4]));
        // ... and hugepagesz= of the default size is then allowed once.
        let (c, w) = d.parse_cmdline("default_hugepagesz=1G hugepagesz=1G hugepages=2");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.resolved_hugepages(), [0, 0, 0, 2]);

        // Refusals: the size arm64 does not offer, and the count after it.
        let (c, w) = d.parse_cmdline("hugepagesz=4M hugepages=10 hugepagesz=2M hugepages=5");
        assert_eq!(
            w,
            vec![
                BootParamError::UnsupportedSize { param: "hugepagesz=", value: "4M".into() },
                BootParamError::NoValidSize
            ]
        );
        assert_eq!(c.resolved_hugepages(), [0, 5, 0, 0]);
        let (c, w) = d.parse_cmdline(
            "hugepagesz=2M hugepages=1 hugepages=2 hugepagesz=2M default_hugepagesz=1G default_hugepagesz=2M hugepages=x",
        );
        assert_eq!(
            w,
            vec![
                BootParamError::CountTwice,
                BootParamError::SizeTwice { size: HugePageSize::Pmd2M },
                BootParamError::DefaultTwice,
                BootParamError::NoValidSize,
            ]
        );
        assert_eq!((c.resolved_hugepages(), c.default_hugepagesz), ([0, 1, 0, 0], HugePageSize::Pud1G));
        let (_, w) = d.parse_cmdline("hugepagesz=2M hugepages=1:5");
        assert_eq!(w, vec![BootParamError::BadCount { value: "1:5".into() }]);

        // Through --set: a typed error, counts unchanged.
        let mut c = HugetlbConfig::default();
        let before = c.resolved_hugepages();
        assert!(matches!(c.set("hugepagesz", "3M"), Err(KnobError::BadValue { .. })));
        assert!(c.set("hugepages", "7").is_err(), "refused after a refused size, as the kernel does");
        assert_eq!(c.resolved_hugepages(), before);
        c.set("hugepagesz", "1G").unwrap();
        c.set("hugepages", "1").unwrap();
        assert_eq!(c.hugepages_of(HugePageSize::Pud1G), 1);
    }
}
