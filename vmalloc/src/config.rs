//! vmalloc's switches and their `--set` keys.
//!
//! [`VmallocConfig`] holds the one vmalloc knob the kernel has
//! (`vmap_allow_huge`, cleared by the `nohugevmalloc` boot parameter) and
//! the switches that select between kernel code paths the reference
//! experiments compare (contpte and PMD mappings, the huge-by-default RFC,
//! aligning the size up to the huge size). Its [`VmallocConfig::KNOBS`]
//! table lists the keys `--set` accepts, each with its values, its kernel
//! name and a setter. The fields are declared in the order reports print
//! them, so the serialised form keeps that order.

use mmlab_engine::bool_knob;
use mmlab_engine::kernel::sysctl::{KernelName, KnobError, KnobTable};

/// vmalloc's switches (`--set vmalloc.*`, `vmap_allow_huge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VmallocConfig {
    /// `vmap_allow_huge` (the `nohugevmalloc` boot option clears it).
    pub vmap_allow_huge: bool,
    /// `vmalloc.contpte`: 64 KiB contiguous-PTE huge mappings
    /// (`arch_vmap_pte_supported_shift`), on in mainline.
    pub contpte: bool,
    /// `vmalloc.pmd`: 2 MiB PMD block mappings (`arch_vmap_pmd_supported`),
    /// on in mainline. Off leaves contiguous PTEs as the largest mapping,
    /// so the contpte experiment can map any size with them.
    pub pmd: bool,
    /// `vmalloc.huge_by_default`: huge mappings without VM_ALLOW_HUGE_VMAP
    /// (Dev Jain's RFC, Nov/Dec 2025), off in mainline.
    pub huge_by_default: bool,
    /// `vmalloc.align_size_to_huge`: round a huge request up to the huge
    /// size (mainline); off = the RFC's 1/2: blocks for the aligned prefix,
    /// order-0 pages for the tail.
    pub align_size_to_huge: bool,
    /// `vmalloc.large_order_pages`: 7.2's `vm_area_alloc_pages` first asks
    /// the buddy allocator for the largest blocks that fit (order
    /// `ilog2(pages left)`, no direct reclaim, one order lower after each
    /// failure) and splits them, before the order-0 bulk path (Vishal
    /// Moola, "mm/vmalloc: request large order pages from buddy
    /// allocator"), on; off takes order-0 pages in bulk, as 6.x and the
    /// kernels of the published vmalloc experiments do.
    pub large_order_pages: bool,
    /// `vmalloc.free_pages_bulk`: `vfree` returns the pages with 7.2's
    /// `free_pages_bulk` (contiguous runs as aligned blocks, see
    /// `PageAllocator::free_pages_bulk`), on; off frees each page at order
    /// 0 with `__free_page`, as 6.x and the kernels of the published vmalloc
    /// experiments do.
    pub free_pages_bulk: bool,
}

impl Default for VmallocConfig {
    fn default() -> Self {
        VmallocConfig {
            vmap_allow_huge: true,
            contpte: true,
            pmd: true,
            huge_by_default: false,
            align_size_to_huge: true,
            large_order_pages: true,
            free_pages_bulk: true,
        }
    }
}

impl VmallocConfig {
    /// The `--set` keys of vmalloc, in help order (the fields' order).
    pub const KNOBS: KnobTable<VmallocConfig> = KnobTable(&[
        bool_knob!(
            VmallocConfig,
            "vmap_allow_huge",
            KernelName::BootParam("nohugevmalloc clears vmap_allow_huge"),
            vmap_allow_huge
        ),
        bool_knob!(VmallocConfig, "vmalloc.contpte", KernelName::Code("arm64 arch_vmap_pte_supported_shift"), contpte),
        bool_knob!(VmallocConfig, "vmalloc.pmd", KernelName::Code("arm64 arch_vmap_pmd_supported"), pmd),
        bool_knob!(
            VmallocConfig,
            "vmalloc.huge_by_default",
            KernelName::Code("Dev Jain's RFC: huge vmalloc without VM_ALLOW_HUGE_VMAP"),
            huge_by_default
        ),
        bool_knob!(
            VmallocConfig,
            "vmalloc.align_size_to_huge",
            KernelName::Code("__vmalloc_node_range_noprof: size = ALIGN(real_size, 1UL << shift)"),
            align_size_to_huge
        ),
        bool_knob!(
            VmallocConfig,
            "vmalloc.large_order_pages",
            KernelName::Code("7.2 vm_area_alloc_pages: large orders first (off: order-0 bulk, 6.x)"),
            large_order_pages
        ),
        bool_knob!(
            VmallocConfig,
            "vmalloc.free_pages_bulk",
            KernelName::Code("7.2 vm_area_free_pages: free_pages_bulk (off: __free_page per page, 6.x)"),
            free_pages_bulk
        ),
    ]);

    /// Apply `value` to the knob `key` ([`VmallocConfig::KNOBS`]).
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] or [`KnobError::BadValue`]; `self` is then
    /// unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), KnobError> {
        Self::KNOBS.set(self, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vset(kv: &str) -> Result<VmallocConfig, String> {
        let mut c = VmallocConfig::default();
        VmallocConfig::KNOBS.apply(&mut c, kv).map(|()| c).map_err(|e| e.to_string())
    }

    /// The keys, values and messages of the harness's `--set` today.
    #[test]
    fn keys_values_and_messages() {
        assert!(vset("vmalloc.huge_by_default=on").unwrap().huge_by_default);
        assert!(!vset("vmalloc.contpte=0").unwrap().contpte);
        assert!(!vset("vmalloc.align_size_to_huge=off").unwrap().align_size_to_huge);
        assert!(!vset("vmap_allow_huge=off").unwrap().vmap_allow_huge);
        assert!(vset("vmap_allow_huge=1").unwrap().vmap_allow_huge);
        assert!(!vset("vmalloc.pmd=off").unwrap().pmd);
        assert!(vset("vmalloc.contpte=yes").unwrap().contpte);
        assert!(!vset("vmalloc.contpte=false").unwrap().contpte);
        assert_eq!(
            vset("vmalloc.contpte=maybe").unwrap_err(),
            "bad value \"maybe\" for vmalloc.contpte (1|0|y|n|yes|no|true|false|on|off)"
        );
        let help: Vec<String> = VmallocConfig::KNOBS.help().collect();
        assert_eq!(help[0], "vmap_allow_huge (1|0|y|n|yes|no|true|false|on|off)");
        assert_eq!(help.len(), 7);
        assert!(!vset("vmalloc.free_pages_bulk=off").unwrap().free_pages_bulk);
        assert!(!vset("vmalloc.large_order_pages=off").unwrap().large_order_pages);
    }

    #[test]
    fn serialised_in_report_order() {
        assert_eq!(
            serde_json::to_string(&VmallocConfig::default()).unwrap(),
            r#"{"vmap_allow_huge":true,"contpte":true,"pmd":true,"huge_by_default":false,"align_size_to_huge":true,"large_order_pages":true,"free_pages_bulk":true}"#
        );
    }
}
