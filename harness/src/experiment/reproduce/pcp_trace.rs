//! The pcp-drain regression as it happens: the pcp of the CPU running
//! long_busy_list after each of its first iterations, for mainline and
//! huge-by-default, booted from the same resolved configurations as the
//! main comparison.
//!
//! What the seed describes shows here: with huge vmalloc by default the
//! 100-page area comes from order-4 blocks taken from the buddy lists,
//! while vfree gives its pages back one by one onto the pcp; `pcp->count`
//! climbs by about 100 pages an iteration until it passes `pcp->high`, and
//! `free_pcppages_bulk()` drains it. Mainline takes its pages from the
//! pcp and returns them there, so the count stays level and nothing
//! drains. Each sample also carries `pcp->high` and `high_min` (7.2's
//! adaptive high moves between them) and the drains of the iteration with
//! their size.

use crate::compare::{Outcome, Row};
use crate::stack::Stack;
use crate::test_vmalloc::{self, PcpSample};

/// Iterations traced: enough for several fill-and-drain cycles.
pub const TRACE_ITERATIONS: i32 = 300;

/// One variant's trace.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PcpTrace {
    /// The variant (`mainline`, `huge-by-default`).
    pub variant: String,
    /// One sample after each iteration.
    pub samples: Vec<PcpSample>,
}

/// Traces the first [`TRACE_ITERATIONS`] iterations of `row` under the
/// first two variants of `main` (mainline and huge-by-default), one run
/// each, seeded as the main runs.
///
/// # Errors
///
/// A configuration that does not boot, or a failed run.
pub fn pcp_traces(main: &Outcome, row: &Row, seed: u64) -> Result<Vec<PcpTrace>, String> {
    main.variants
        .iter()
        .take(2)
        .map(|v| {
            let stack = Stack::boot(&v.configs)?;
            let pa = stack.allocator()?;
            let vm = stack.vmalloc(&pa);
            let mut p = row.params.clone();
            p.test_loop_count = TRACE_ITERATIONS;
            p.pcp_sample_interval = 1;
            let r = test_vmalloc::run(stack.machine(), &pa, &vm, &p, seed)?;
            let samples = r.workers.first().map(|w| w.pcp_series.clone()).unwrap_or_default();
            if samples.is_empty() {
                return Err(format!("pcp-drain trace, {}: the run recorded no samples", v.label));
            }
            Ok(PcpTrace { variant: v.label.clone(), samples })
        })
        .collect()
}
