//! Helpers shared by the integration tests in `tests/tests/`.
#![forbid(unsafe_code)]

use mmlab_engine::{Machine, MachineConfig};

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
    Machine::boot(MachineConfig::with(mem, cpus).expect("test machine size")).expect("test machine boots")
}
