//! mmlab's machine: the pieces of an arm64 Linux system that the
//! memory-management code stands on.
//!
//! | module     | what it emulates                                         | fidelity      |
//! |------------|----------------------------------------------------------|---------------|
//! | `arena`    | physical RAM (an anonymous `MAP_NORESERVE` mapping)       | faithful      |
//! | `memblock` | the boot allocator                                       | faithful      |
//! | `page`     | `struct page` and the memmap                              | faithful layout, instrumented state word |
//! | `list`     | `struct list_head` through struct pages                  | faithful shape |
//! | `machine`  | boot: memmap init, reservations                           | simplified (one node, one zone) |
//! | `cpu`      | CPUs as handles; per-cpu data                             | faithful in ownership |
//! | `barrier`  | dmb/dsb/isb                                              | faithful on aarch64 (native), modelled or counted elsewhere |
//! | `pgtable`  | arm64 descriptors, table writes with barrier rules and lazy-MMU batching, BBM checks, walks, MMU access, the vmemmap | faithful formats, barriers and BBM; walk caches not modelled |
//! | `tlb`      | TLBI, per-CPU TLB model and soft-MMU cache, tlbflush.h    | faithful ops and sequences; TLB contents simplified; TLBI cost modelled |
//! | `cost`     | cost profiles for effects userspace cannot execute        | modelled (sources in the module) |
//! | `vmstat`   | event counters                                           | instrumented |
//! | `trace`    | kmem tracepoints                                         | faithful text |
//! | `sync`     | locks (zone lock with lock_stat)                          | instrumented |
//! | `rcu`      | RCU: grace periods, quiescent states, call_rcu, rcu_barrier | faithful gp_seq/QS rules, one node; GP latency modelled |
//!
//! All of mmlab's `unsafe` lives in this crate (arena views, the memmap
//! pointer, inline assembly), each block with its reasoning.

#![deny(missing_docs)]

pub mod arch;
pub mod kernel;
pub mod mm;

pub mod addr;
pub mod arena;
pub mod clock;
pub mod machine;
pub mod rng;
pub mod trace;

// The stable API: every path the other crates use, as before the regrouping.
pub use arch::arm64::{barrier, cost, memory as layout, tlb};
pub use kernel::{cpu, rcu, sync};
pub use mm::{gfp, list, memblock, page, vmstat};

/// arm64 translation tables ([`arch::arm64::pgtable`]), with the vmemmap
/// under its former path `pgtable::vmemmap`.
pub mod pgtable {
    pub use crate::arch::arm64::pgtable::*;
    /// The vmemmap ([`crate::mm::sparse_vmemmap`], [`crate::mm::vmemmap`]).
    pub mod vmemmap {
        pub use crate::mm::sparse_vmemmap::*;
        pub use crate::mm::vmemmap::*;
    }
}

pub use addr::{PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr, VirtAddr};
pub use cpu::Cpu;
pub use gfp::Gfp;
pub use machine::{Machine, MachineConfig};
pub use mm::{MAX_PAGE_ORDER, Migratetype};
