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
