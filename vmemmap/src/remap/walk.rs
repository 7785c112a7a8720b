//! `struct vmemmap_remap_walk` and its flags: what a walk does, kept apart
//! from the walk so that HVO's methods can name them.

use mmlab_engine::Pfn;

bitflags::bitflags! {
    /// `vmemmap_remap_walk.flags`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct VmemmapFlags: u32 {
        /// `VMEMMAP_SPLIT_NO_TLB_FLUSH`: no flush after a PMD split.
        const SPLIT_NO_TLB_FLUSH = 1 << 0;
        /// `VMEMMAP_REMAP_NO_TLB_FLUSH`: no flush after remapping PTEs.
        const REMAP_NO_TLB_FLUSH = 1 << 1;
        /// `VMEMMAP_SYNCHRONIZE_RCU`: a grace period before remapping.
        const SYNCHRONIZE_RCU = 1 << 2;
    }
}

/// What a walk does at the PTE level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PteOp {
    /// `vmemmap_remap_split`: split PMDs only.
    Split,
    /// `vmemmap_remap_pte`.
    Remap,
    /// `vmemmap_restore_pte`.
    Restore,
}

/// `struct vmemmap_remap_walk`.
#[derive(Debug)]
pub(crate) struct RemapWalk {
    pub(crate) op: PteOp,
    /// PTEs visited (`nr_walked`).
    pub(crate) nr_walked: u64,
    /// The vmemmap address of the page kept (`reuse_addr`).
    pub(crate) reuse_addr: u64,
    /// The page every tail entry maps (`reuse_page`).
    pub(crate) reuse_page: Option<Pfn>,
    /// `vmemmap_pages`: the top of the stack is the list's first entry.
    pub(crate) pages: Vec<Pfn>,
    pub(crate) flags: VmemmapFlags,
}

impl RemapWalk {
    pub(crate) fn new(op: PteOp, reuse_addr: u64, pages: Vec<Pfn>, flags: VmemmapFlags) -> RemapWalk {
        RemapWalk { op, nr_walked: 0, reuse_addr, reuse_page: None, pages, flags }
    }
}

/// Which generic flush a walk asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FlushFor {
    Split,
    Remap,
}
