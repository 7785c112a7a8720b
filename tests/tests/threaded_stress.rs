//! Two emulated CPUs on two host threads, each allocating and freeing at
//! random on its own CPU handle, one of them also draining every CPU's pcp
//! now and then (`drain_all_pages` takes the other CPU's pcp lock, so the
//! other thread's trylocks fail and fall back to the buddy lists). At the
//! end nothing may be lost.

use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Cpu, Gfp, MachineConfig, Pfn};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

/// `MMLAB_TEST_SCALE` (default 1) divides the length of long workloads.
use mmlab_tests::scale;

const GFPS: [Gfp; 3] = [Gfp::GFP_KERNEL, Gfp::GFP_HIGHUSER_MOVABLE, Gfp::GFP_KERNEL.union(Gfp::__GFP_RECLAIMABLE)];

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    allocs: u64,
    frees: u64,
    failures: u64,
    drains: u64,
}

/// One CPU's random mix; returns what it still holds.
fn worker<'m>(
    pa: &PageAllocator<'m>,
    cpu: &Cpu<'m>,
    seed: u64,
    ops: u64,
    max_order: u32,
    max_live_pages: u64,
    drain_every: Option<u64>,
) -> (Stats, Vec<(Pfn, u32)>) {
    let mut rng = Xoshiro256StarStar::seed_from_u64(seed);
    let mut live: Vec<(Pfn, u32)> = Vec::new();
    let mut live_pages = 0u64;
    let mut st = Stats::default();
    for i in 0..ops {
        if drain_every.is_some_and(|n| i % n == n - 1) {
            pa.drain_all_pages(cpu);
            st.drains += 1;
        }
        let alloc = live.is_empty() || (live_pages < max_live_pages && rng.chance(1, 2));
        if alloc {
            let order = rng.below(max_order as u64 + 1) as u32;
            let gfp = GFPS[rng.below(3) as usize] | Gfp::__GFP_NOWARN;
            match pa.alloc_pages(cpu, gfp, order) {
                Some(p) => {
                    live.push((p, order));
                    live_pages += 1 << order;
                    st.allocs += 1;
                }
                None => st.failures += 1,
            }
        } else {
            let (p, o) = live.swap_remove(rng.below(live.len() as u64) as usize);
            pa.free_pages(cpu, p, o).expect("only frees what it allocated");
            live_pages -= 1 << o;
            st.frees += 1;
        }
    }
    (st, live)
}

fn stress(mem: &str, ops: u64, max_order: u32, seeds: [u64; 2]) {
    let m = mmlab_tests::boot(MachineConfig::with(mem, 2).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let boot_buddyinfo = pa.zone().nr_free_per_order();
    let managed = pa.managed_pages();
    let max_live = managed / 8;
    let cpus = m.all_cpus().unwrap();
    let mut it = cpus.into_iter();
    let (c0, c1) = (it.next().unwrap(), it.next().unwrap());

    let (r0, r1) = std::thread::scope(|s| {
        let pa = &pa;
        let h0 = s.spawn(move || {
            let (st, live) = worker(pa, &c0, seeds[0], ops, max_order, max_live, Some(997));
            // Free what is left on the same CPU before handing it back.
            for &(p, o) in &live {
                pa.free_pages(&c0, p, o).unwrap();
            }
            (st, live.len(), c0)
        });
        let h1 = s.spawn(move || {
            let (st, live) = worker(pa, &c1, seeds[1], ops, max_order, max_live, None);
            for &(p, o) in &live {
                pa.free_pages(&c1, p, o).unwrap();
            }
            (st, live.len(), c1)
        });
        (h0.join().unwrap(), h1.join().unwrap())
    });
    let (st0, left0, c0) = r0;
    let (st1, left1, _c1) = r1;
    for (st, left) in [(st0, left0), (st1, left1)] {
        assert_eq!(st.allocs + st.frees + st.failures, ops);
        assert_eq!(st.failures, 0, "{st:?}: live pages stay far from the watermarks");
        assert_eq!(st.allocs, st.frees + left as u64);
    }
    assert_eq!(st0.drains, ops / 997);
    assert_eq!(m.vm_events().get(VmEvent::DrainAllPages), ops / 997);

    // Everything is free now: in the buddy lists or parked on a pcp list.
    pa.check_invariants().unwrap();
    assert_eq!(pa.nr_free_pages() as u64 + pa.pcp_pages() as u64, managed);
    pa.drain_all_pages(&c0);
    assert_eq!(pa.pcp_pages(), 0);
    assert_eq!(pa.nr_free_pages() as u64, managed);
    assert_eq!(pa.zone().nr_free_per_order(), boot_buddyinfo);
    pa.check_invariants().unwrap();
    // Pages in = pages out: PGALLOC equals PGFREE minus the boot frees.
    let ev = m.vm_events();
    assert_eq!(ev.pgalloc() + managed, ev.get(VmEvent::Pgfree));
    eprintln!(
        "{mem} orders 0..={max_order}: pcp trylock failures {}, zone lock contended {}",
        ev.get(VmEvent::PcpTrylockFail),
        ev.get(VmEvent::ZoneLockContended)
    );
}

#[test]
fn two_cpus_orders_0_to_3() {
    stress("128M", scale(1_000_000), 3, [0xc0ffee, 0xdecade]);
}

#[test]
fn two_cpus_order_0() {
    stress("128M", scale(1_000_000), 0, [7, 8]);
}
