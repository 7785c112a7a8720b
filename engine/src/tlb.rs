//! (stub: the TLB model and TLBI land from the tlb work)

/// One CPU's TLB model.
#[derive(Debug, Default)]
pub struct CpuTlb {
    capacity: usize,
}

impl CpuTlb {
    /// A TLB of `capacity` entries.
    pub fn new(capacity: usize) -> CpuTlb {
        CpuTlb { capacity }
    }
    /// Entries it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// (stub) TLB maintenance owed after a table change.
#[must_use = "a changed live mapping needs its TLB maintenance: call flush() or ignore()"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlbFlush {
    range: Option<(Option<u16>, u64, u64)>,
}

impl TlbFlush {
    /// Nothing to flush.
    pub const fn none() -> TlbFlush {
        TlbFlush { range: None }
    }
    /// `flush_tlb_kernel_range(start, end)` owed.
    pub const fn kernel_range(start: u64, end: u64) -> TlbFlush {
        TlbFlush { range: Some((None, start, end)) }
    }
    /// `flush_tlb_range()` for `asid` owed.
    pub const fn user_range(asid: u16, start: u64, end: u64) -> TlbFlush {
        TlbFlush { range: Some((Some(asid), start, end)) }
    }
    /// Drop without flushing.
    pub fn ignore(self) {}
}
