//! hugetlb's switches and their `--set` keys.
//!
//! [`HugetlbConfig`] holds the `hugepages=` boot parameter (the pool the
//! 2 MiB hstate is grown to at init) and HVO's switches
//! ([`HvoConfig`], whose own keys it accepts too).

use mmlab_buddy::knob::{KernelName, Knob, KnobError, KnobTable, ValueError};
use mmlab_vmemmap::HvoConfig;

/// hugetlb's switches (`--set hugepages=…` and HVO's keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HugetlbConfig {
    /// `hugepages=`: huge pages of the default size (2 MiB) allocated at
    /// init (`hugetlb_hstate_alloc_pages`); 0 by default, as in the kernel.
    pub hugepages: u64,
    /// HVO (`vm.hugetlb_optimize_vmemmap` and mmlab's policy switches).
    pub hvo: HvoConfig,
}

impl HugetlbConfig {
    /// hugetlb's own `--set` keys, in help order (HVO's are in
    /// [`HvoConfig::KNOBS`]).
    pub const KNOBS: KnobTable<HugetlbConfig> = KnobTable(&[Knob {
        key: "hugepages",
        values: "<count>",
        summary: "<count>",
        kernel: KernelName::BootParam("hugepages="),
        set: |c: &mut HugetlbConfig, key, value| {
            c.hugepages = value.parse().map_err(|e| KnobError::bad_value(key, value, ValueError::NotInt(e)))?;
            Ok(())
        },
    }]);

    /// Apply `value` to the knob `key`: one of [`HugetlbConfig::KNOBS`] or
    /// of [`HvoConfig::KNOBS`].
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] or [`KnobError::BadValue`]; `self` is then
    /// unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KnobError> {
        if HvoConfig::KNOBS.contains(key) {
            return self.hvo.set(key, value);
        }
        Self::KNOBS.set(self, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_and_defaults() {
        let mut c = HugetlbConfig::default();
        assert_eq!(c.hugepages, 0);
        assert!(c.hvo.hugetlb_optimize_vmemmap);
        c.set("hugepages", "16").unwrap();
        c.set("hugetlb_optimize_vmemmap", "off").unwrap();
        assert_eq!((c.hugepages, c.hvo.hugetlb_optimize_vmemmap), (16, false));
        let before = c;
        assert!(c.set("hugepages", "-1").is_err());
        assert!(c.set("hugepages", "x").is_err());
        assert!(c.set("hugetlb.nope", "1").is_err());
        assert_eq!(c, before, "a refused value changes nothing");
        assert_eq!(HugetlbConfig::KNOBS.help().count(), 1);
    }
}
