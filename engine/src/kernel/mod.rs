//! Core kernel services the memory-management code stands on, as the
//! kernel's `kernel/` holds them.
//!
//! - [`cpu`]: CPUs as handles and their per-cpu data (`kernel/cpu.c`,
//!   `include/linux/percpu.h`).
//! - [`params`]: the machine's `--set` keys (`kernel/params.c` parses
//!   boot parameters).
//! - [`rcu`]: tree RCU with one node (`kernel/rcu/tree.c`).
//! - [`sysctl`]: typed `--set` tables shaped like sysctl tables
//!   (`kernel/sysctl.c`).
//! - [`sync`]: locks with lock_stat (`kernel/locking/`) and the atomics
//!   facade that swaps to loom under `cfg(loom)`.

pub mod cpu;
pub mod params;
pub mod rcu;
pub mod sync;
pub mod sysctl;
