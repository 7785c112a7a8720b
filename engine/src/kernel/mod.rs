//! Core kernel services the memory-management code stands on, as the
//! kernel's `kernel/` holds them.
//!
//! - [`cpu`]: CPUs as handles and their per-cpu data (`kernel/cpu.c`,
//!   `include/linux/percpu.h`).
//! - [`rcu`]: tree RCU with one node (`kernel/rcu/tree.c`).
//! - [`sysctl`]: typed `--set` tables shaped like sysctl tables
//!   (`kernel/sysctl.c`).
//! - [`lockstat`]: the zone lock with lock_stat's accounting
//!   (`kernel/locking/`).

pub mod cpu;
pub mod lockstat;
pub mod rcu;
pub mod sysctl;
