//! Seeded random allocation workloads.
//!
//! [`RandomWorkload`] drives order-0..=`max_order` allocations and frees over
//! the given CPUs from one thread, choosing the CPU, the operation, the
//! order, the gfp type and which live block to free from one
//! xoshiro256** stream. One thread and one stream make the run, and so its
//! trace, identical for the same seed on every host.

use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Cpu, Gfp, Pfn};
use mmlab_pcp::PageAllocator;

/// Parameters of a random workload.
#[derive(Clone, Debug)]
pub struct RandomWorkload {
    /// Operations (allocations plus frees).
    pub ops: u64,
    /// RNG seed.
    pub seed: u64,
    /// Highest order allocated.
    pub max_order: u32,
    /// Live pages are kept below this many (frees are forced above it).
    pub max_live_pages: u64,
    /// Free everything still live at the end.
    pub free_at_end: bool,
}

impl RandomWorkload {
    /// A workload of `ops` operations with `seed`, orders 0..=3, at most
    /// `max_live_pages` pages live.
    pub fn new(ops: u64, seed: u64, max_live_pages: u64) -> Self {
        RandomWorkload { ops, seed, max_order: 3, max_live_pages, free_at_end: false }
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadStats {
    pub allocs: u64,
    pub alloc_failures: u64,
    pub frees: u64,
    /// Pages still allocated at the end.
    pub live_pages: u64,
}

const GFPS: [Gfp; 3] = [Gfp::GFP_KERNEL, Gfp::GFP_HIGHUSER_MOVABLE, Gfp::GFP_KERNEL.union(Gfp::__GFP_RECLAIMABLE)];

impl RandomWorkload {
    /// Run on `cpus` (at least one). `after_op` is called after every
    /// operation with its index.
    pub fn run<'m>(
        &self,
        pa: &PageAllocator<'m>,
        cpus: &[Cpu<'m>],
        mut after_op: impl FnMut(u64),
    ) -> (WorkloadStats, Vec<(Pfn, u32)>) {
        let mut rng = Xoshiro256StarStar::seed_from_u64(self.seed);
        let mut live: Vec<(Pfn, u32)> = Vec::new();
        let mut live_pages = 0u64;
        let mut st = WorkloadStats::default();
        for i in 0..self.ops {
            let cpu = &cpus[rng.below(cpus.len() as u64) as usize];
            let alloc = live.is_empty() || (live_pages < self.max_live_pages && rng.chance(11, 20));
            if alloc {
                let order = rng.below(self.max_order as u64 + 1) as u32;
                let gfp = GFPS[rng.below(GFPS.len() as u64) as usize];
                match pa.alloc_pages(cpu, gfp | Gfp::__GFP_NOWARN, order) {
                    Some(p) => {
                        live.push((p, order));
                        live_pages += 1 << order;
                        st.allocs += 1;
                    }
                    None => st.alloc_failures += 1,
                }
            } else {
                let idx = rng.below(live.len() as u64) as usize;
                let (p, o) = live.swap_remove(idx);
                pa.free_pages(cpu, p, o).expect("workload frees only what it allocated");
                live_pages -= 1 << o;
                st.frees += 1;
            }
            after_op(i);
        }
        if self.free_at_end {
            for (p, o) in live.drain(..) {
                pa.free_pages(&cpus[0], p, o).expect("workload frees only what it allocated");
                live_pages -= 1 << o;
                st.frees += 1;
            }
        }
        st.live_pages = live_pages;
        (st, live)
    }
}
