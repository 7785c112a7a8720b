//! Helpers shared by the integration tests in `tests/tests/`.
#![forbid(unsafe_code)]

pub mod browser;

use mmlab_engine::{Machine, MachineConfig};
use mmlab_harness::stack::{Stack, StackError};

/// Divide a workload size by `MMLAB_TEST_SCALE` (default 1; the qemu-aarch64
/// leg sets 16) so that long tests stay short under emulation. Never 0: every
/// test still runs.
pub fn scale(n: u64) -> u64 {
    let s: u64 = std::env::var("MMLAB_TEST_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    (n / s).max(1)
}

/// Boot a machine of `mem` (e.g. "64M") with `cpus` CPUs and the default
/// configuration; panics on a bad size, which in a test is the test's bug.
pub fn machine(mem: &str, cpus: usize) -> Machine {
    boot(MachineConfig::with(mem, cpus).expect("test machine size")).expect("test machine boots")
}

/// Boot the machine of `cfg` through the harness's one boot path
/// ([`Stack`]), every other layer at its default; the caller brings the
/// allocator up on it.
///
/// # Errors
/// The machine failing to boot ([`StackError::Boot`]).
pub fn boot(cfg: MachineConfig) -> Result<Machine, StackError> {
    Stack::boot_machine(cfg).map(Stack::into_machine)
}

/// A machine of `mem` and `cpus` with `boot.state=bare`: RAM less only
/// mmlab's memmap, usemap and tables, for tests whose counts are derived
/// by hand on bare RAM (or need the page allocator to free the CMA area).
pub fn bare_machine(mem: &str, cpus: usize) -> Machine {
    boot(MachineConfig::with(mem, cpus).expect("test machine size").bare()).expect("test machine boots")
}

/// A machine with the `count` barrier backend and lazy-MMU batching on or
/// off (2 CPUs), for barrier-count tests.
pub fn counting_machine(mem: &str, batching: bool) -> Machine {
    let cfg = MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        lazy_mmu_barrier_batching: batching,
        ..MachineConfig::with(mem, 2).expect("test machine size")
    };
    boot(cfg).expect("test machine boots")
}

/// (dsb ishst, isb) issued by `cpu` since `before`.
pub fn barrier_pairs(
    cpu: &mmlab_engine::Cpu<'_>,
    before: mmlab_engine::arch::arm64::barrier::BarrierCounts,
) -> (u64, u64) {
    use mmlab_engine::arch::arm64::barrier::BarrierKind;
    let now = cpu.arch_data().barriers.snapshot();
    let d = |k, o| now.get(k, o).unwrap_or(0) - before.get(k, o).unwrap_or(0);
    (d(BarrierKind::Dsb, "ishst"), d(BarrierKind::Isb, "sy"))
}
