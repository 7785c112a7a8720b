//! arm64 translation tables (stub until the page-table work lands).

use std::sync::atomic::AtomicBool;

/// Per-CPU lazy-MMU state: `TIF_LAZY_MMU` and `TIF_LAZY_MMU_PENDING`.
#[derive(Debug, Default)]
pub struct LazyMmu {
    pub(crate) active: AtomicBool,
    pub(crate) pending: AtomicBool,
}
