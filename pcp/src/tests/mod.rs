//! Unit tests of the pcp formulas and drains, one rule of mm/page_alloc.c
//! per test, exact numbers from the kernel's rules (`cargo mutants -p
//! mmlab-pcp`, docs/mutants.md).

mod alloc;
mod bulk;
mod check;
mod drain;
mod formulas;
mod free;
mod free_bulk;
mod sysctl;

use crate::pageset::PerCpuPages;
use crate::{AllocatorConfig, PageAllocator};
use mmlab_engine::{Machine, MachineConfig};

/// A 64 MiB machine with 2 CPUs.
pub(crate) fn machine() -> Machine {
    Machine::boot(MachineConfig::with("64M", 2).unwrap()).unwrap()
}

pub(crate) fn allocator(m: &Machine) -> PageAllocator<'_> {
    PageAllocator::boot(m, AllocatorConfig::default()).unwrap()
}

/// The pageset numbers the formulas read, as (high, high_min, high_max,
/// batch, count, free_count, alloc_factor).
pub(crate) fn set(p: &mut PerCpuPages, v: (i32, i32, i32, i32, i32, i32, u8)) {
    (p.high, p.high_min, p.high_max, p.batch, p.count, p.free_count, p.alloc_factor) = v;
}
