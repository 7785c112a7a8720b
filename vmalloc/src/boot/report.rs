//! The report of the boot's vmalloc work ([`super`]), apart from the code
//! so that the allocator's own type can hold it.

use std::fmt;

/// Why [`Vmalloc::boot`](crate::Vmalloc::boot) could not run the boot's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmallocBootError {
    /// A CPU's handle is held elsewhere.
    CpuBusy,
}

impl fmt::Display for VmallocBootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmallocBootError::CpuBusy => write!(f, "vmalloc boot: a CPU's handle is held elsewhere"),
        }
    }
}
impl std::error::Error for VmallocBootError {}

/// What the boot's vmalloc work did (`mmlab stat boot-state`, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VmallocBootWork {
    /// Areas made (vmalloc, ioremap, DMA remap, percpu).
    pub areas: u64,
    /// Calls that failed (skipped).
    pub failed: u64,
    /// Pages of vmalloc areas allocated (`nr_vmalloc`'s part of the boot).
    pub vmalloc_pages: u64,
    /// Task stacks vmalloc'd.
    pub stacks: u64,
    /// Task stacks taken from a CPU's stack cache instead.
    pub stacks_reused: u64,
    /// Task stacks vfree'd at exit (a full cache): the unpurged areas.
    pub stacks_freed: u64,
    /// Task stacks left in the CPUs' caches (still busy areas).
    pub stacks_cached: u64,
    /// ioremaps made.
    pub ioremaps: u64,
    /// iounmaps (unpurged too).
    pub iounmaps: u64,
    /// Pages of the DMA pools (CMA, or the page allocator without CMA).
    pub dma_pool_pages: u64,
    /// Pages of the percpu chunk's units.
    pub percpu_pages: u64,
}

impl VmallocBootWork {
    /// Pages the boot's vmalloc work holds outside any area's page list:
    /// the DMA pools' and the percpu chunk's.
    pub fn pages_outside_areas(&self) -> u64 {
        self.dma_pool_pages + self.percpu_pages
    }
}

/// What one rule added (`mmlab stat boot-state`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VmallocBootRule {
    /// The rule's name (as its marker in the base record).
    pub rule: &'static str,
    /// The kernel function whose areas the rule stands for.
    pub kernel: &'static str,
    /// How the areas follow from the machine.
    pub formula: String,
    /// Areas made.
    pub areas: u64,
    /// Pages allocated (vmalloc, DMA pool, percpu).
    pub pages: u64,
}

/// The boot's vmalloc state kept by [`Vmalloc`].
#[derive(Debug, Default)]
pub(crate) struct BootVmalloc {
    pub(crate) work: VmallocBootWork,
    pub(crate) rules: Vec<VmallocBootRule>,
}
