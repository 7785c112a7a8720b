//! `mmlab test-vmalloc`: the kernel's vmalloc test module (lib/test_vmalloc.c,
//! Linux 7.2) run on the emulated machine, with the modes of
//! tools/testing/selftests/mm/test_vmalloc.sh.
//!
//! # What it does
//!
//! `nr_threads` workers start together (the module holds them on an SRCU read
//! section; here a [`Barrier`](std::sync::Barrier)). Worker `i` runs on emulated CPU `i`, on a
//! host thread of its own. Each worker shuffles the indexes of the thirteen
//! test cases (unless `sequential_test_order`), with the module's shuffle:
//! for i from n-1 down to 1, swap with j uniform in `[0, i)` (never `j = i`),
//! then runs the cases whose bit is set in `run_test_mask`, each
//! `test_repeat_count` times, and stores avg = elapsed µs / repeat count.
//! Every loop iteration of every case does what the module's does (see
//! [`TEST_CASES`]); an allocation that fails makes the case return failure,
//! as the module's `return -1` does, never a panic.
//!
//! All workers share one [`Vmalloc`](mmlab_vmalloc::Vmalloc) and one
//! [`PercpuAllocator`](mmlab_vmalloc::percpu::PercpuAllocator) on one
//! machine, as all kthreads share the kernel's.
//!
//! # Fidelity
//!
//! Faithful: the case list and mask bits, the per-iteration calls, sizes,
//! alignments, GFP flags, the setup/teardown of full_fit and long_busy_list
//! (their pointer arrays are vmalloc'd too), the shuffle, the repeat/loop
//! normalisation (`<= 0` → 1, `nr_threads` clamped to 1..=65535) and the
//! 7.2 classification: passed if the case returned 0 (xfail or not),
//! xfailed if it returned non-zero and is xfail, failed otherwise.
//! Simplified: the pointer arrays' contents stay in host memory (the arrays
//! are allocated and mapped, the pointer stores are not emulated);
//! `kvfree_rcu` objects are freed after a grace period of the engine's RCU
//! (the workers report quiescent states at vmalloc/vfree, which may sleep);
//! `vm_map_ram_test`
//! returns failure where the module would dereference NULL.
//! Instrumented: times are measured host time of the emulation, not a
//! kernel's; the "cycles" are the host's counter ([`clock::ticks`](mmlab_engine::clock::ticks): TSC on
//! x86_64, CNTVCT_EL0 on aarch64 — the latter is what arm64's `get_cycles()`
//! reads).
//!
//! [`run`] also tears down what the run left behind so that the machine is
//! as it was found, apart from the page-table pages the vmalloc range
//! gained (the kernel never frees those either): empty percpu chunks are
//! destroyed, lazy vmap areas purged and every pcp list drained.

mod cases;
pub mod counters;
mod params;
mod render;
mod runner;

pub use cases::{CallUnit, PcpSample, TEST_CASES, TestCase};
pub use counters::Counters;
pub use params::{Mode, NR_TEST_CASES, PARAM_NAMES, Params, resolve};
pub use render::{render_json, render_text};
pub use runner::{CaseResult, MachineInfo, Report, WorkerReport, run};
