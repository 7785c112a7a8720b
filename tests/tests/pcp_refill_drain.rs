//! Refill (`nr_pcp_alloc`) and drain (`nr_pcp_high` / `nr_pcp_free`) sizes of
//! order-0 streams, worked out by hand from reference section 2.5 / 2.6.
//!
//! Machine: 4 GiB, 2 CPUs. GFP_HIGHUSER_MOVABLE prefers the Normal zone,
//! [4 GiB, 5 GiB), managed = 243,700 (see pcp_sizing.rs: the linear map's
//! and the fixmap's 2,056 tables come out of it too; 245,756 before the
//! linear map was built by default), so batch = 63, low watermark = 3,330,
//! high_min = max(3,330 / 2, 252) = 1,665, high_max = max(243,700 / 8 / 2,
//! 252) = 15,231. S = CONFIG_PCP_BATCH_SCALE_MAX = 5.
//!
//! All pageblocks boot MOVABLE, so GFP_HIGHUSER_MOVABLE order-0 pages use one
//! pcp list and never fall back; free memory stays far above the high
//! watermark (3,996), so ZONE_BELOW_HIGH is never set.

use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::{Gfp, Machine, Pfn};
use mmlab_pcp::{AllocatorConfig, KernelRules, PageAllocator};

const BATCH: i32 = 63;
const HIGH_MIN: i32 = 1_665;
const HIGH_MAX: i32 = 15_231;

/// Allocations of the refill test: 63 + 126 + 252 + 504 + 1,008 + 3 x 2,016
/// = 8,001, so the stream ends exactly when the 8th refill's pages are used.
const N: usize = 8_001;

fn boot() -> Machine {
    mmlab_tests::bare_machine("4G", 2)
}

fn ev(m: &Machine, cpu: usize, e: VmEvent) -> u64 {
    m.cpu_vm_events(cpu).unwrap().get(e)
}

/// Allocate `n` order-0 movable pages one by one on CPU `cpu`, returning
/// the pages and the size of each refill (PcpRefillPages delta of each
/// allocation that did a PcpRefill).
fn alloc_stream(pa: &PageAllocator<'_>, m: &Machine, cpu: &mmlab_engine::Cpu<'_>, n: usize) -> (Vec<Pfn>, Vec<u64>) {
    let mut pages = Vec::with_capacity(n);
    let mut refills = Vec::new();
    for _ in 0..n {
        let r0 = ev(m, cpu.id(), VmEvent::PcpRefill);
        let p0 = ev(m, cpu.id(), VmEvent::PcpRefillPages);
        pages.push(pa.alloc_pages(cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap());
        let r1 = ev(m, cpu.id(), VmEvent::PcpRefill);
        if r1 != r0 {
            assert_eq!(r1 - r0, 1);
            refills.push(ev(m, cpu.id(), VmEvent::PcpRefillPages) - p0);
        }
    }
    (pages, refills)
}

/// Free `pages` one by one on `cpu`; for every free that drained, record
/// (index of the free, pages drained, free_pcppages_bulk calls).
fn free_stream(
    pa: &PageAllocator<'_>,
    m: &Machine,
    cpu: &mmlab_engine::Cpu<'_>,
    pages: &[Pfn],
) -> Vec<(usize, u64, u64)> {
    let mut drains = Vec::new();
    for (i, &p) in pages.iter().enumerate() {
        let d0 = ev(m, cpu.id(), VmEvent::PcpDrain);
        let p0 = ev(m, cpu.id(), VmEvent::PcpDrainPages);
        pa.free_pages(cpu, p, 0).unwrap();
        let d1 = ev(m, cpu.id(), VmEvent::PcpDrain);
        if d1 != d0 {
            drains.push((i + 1, ev(m, cpu.id(), VmEvent::PcpDrainPages) - p0, d1 - d0));
        }
    }
    drains
}

#[test]
fn order0_refill_sequence() {
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.batch, ps.high_min, ps.high_max, ps.high), (BATCH, HIGH_MIN, HIGH_MAX, 0));

    // nr_pcp_alloc, refill k (list empty each time, so count = 0):
    //  1: high = clamp(0, 1665, 15231) = 1665; b = 63 << 0 = 63; high = 1665 + 63 = 1728;
    //     m = max(1728 - 0 - 63, 63) = 1665 >= b -> alloc_factor 1; b = 63
    //  2: b = 63 << 1 = 126; high = 1854; m = 1791; af 2; b = 126
    //  3: b = 252; high = 2106; m = 2043; af 3
    //  4: b = 504; high = 2610; m = 2547; af 4
    //  5: b = 1008; high = 3618; m = 3555; af 5 (= S, stops growing)
    //  6: b = 63 << 5 = 2016; high = 5634; m = 5571; b = 2016
    //  7: 2016; high = 7650.   8: 2016; high = 9666 (below high_max 15,231).
    let (pages, refills) = alloc_stream(&pa, &m, &cpu, N);
    assert_eq!(refills, [63, 126, 252, 504, 1008, 2016, 2016, 2016]);
    let ps = pa.pageset(0).unwrap();
    assert_eq!(ps.high, 9_666);
    assert_eq!(ps.count, 0);
    assert_eq!(ps.alloc_factor, 5);
    assert_eq!(ps.free_count, 0);
    // Every page came through the pcp: PGALLOC counts each.
    assert_eq!(ev(&m, 0, VmEvent::PgallocNormal), N as u64);
    assert_eq!(ev(&m, 0, VmEvent::PgallocDma), 0, "Normal had room: DMA untouched");
    assert_eq!(ev(&m, 0, VmEvent::PcpRefillPages), N as u64);
    // One more allocation: 9th refill of 2016 raises high to 11,682.
    let extra = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.high, ps.count), (11_682, 2_015));

    // Free everything on the same CPU: each free halves alloc_factor and
    // bumps free_count (capped once it reaches 63 << 5 = 2016). high is
    // 11,682 and count ends at 2,015 + 8,002 = 10,017 < 11,682: no drain.
    pa.free_pages(&cpu, extra, 0).unwrap();
    let drains = free_stream(&pa, &m, &cpu, &pages);
    assert!(drains.is_empty(), "{drains:?}");
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.count, ps.high, ps.alloc_factor, ps.free_count), (10_017, 11_682, 0, 2_016));
    // An alloc halves free_count (rmqueue_pcplist), with no refill needed.
    let p = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert_eq!(pa.pageset(0).unwrap().free_count, 1_008);
    pa.free_pages(&cpu, p, 0).unwrap();

    pa.drain_all_pages(&cpu);
    assert_eq!(pa.pageset(0).unwrap().count, 0);
    assert_eq!(pa.nr_free_pages() as u64, pa.managed_pages());
    pa.check_invariants().unwrap();
}

/// Expected drains of a pure order-0 free stream of 8,001 pages on a CPU
/// whose pcp has never been used (high 0, free_count 0):
///  - free #1665: count 1665 >= high 1665 (lazily clamped to high_min);
///    free_count = 1665; need = 1665 + 63 = 1728 > high -> high := 1728;
///    nr_pcp_high returns the pre-raise 1665; to_free = clamp(1665, 63,
///    1665 - 63 = 1602) = 1602. count -> 63.
///  - free #3330 (1665 later): count 1728 >= 1728; free_count saturated at
///    2016; need = 2079 -> high := 2079; to_free = clamp(2016, 63, 1728 - 63
///    = 1665) = 1665. count -> 63.
///  - free #5346 (2016 later): count 2079 >= 2079; need 2079, not raised;
///    to_free = clamp(2016, 63, 2016) = 2016. count -> 63.
///  - free #7362: the same, 2016. Then 639 more frees: count 702.
///
/// 7.2 drains in chunks of batch: 1602 = 25 x 63 + 27 -> 26 calls;
/// 1665 = 26 x 63 + 27 -> 27 calls; 2016 = 32 x 63 -> 32 calls.
const DRAINS_72: [(usize, u64, u64); 4] =
    [(1_665, 1_602, 26), (3_330, 1_665, 27), (5_346, 2_016, 32), (7_362, 2_016, 32)];
/// 6.12: the same sizes, one free_pcppages_bulk call each.
const DRAINS_612: [(usize, u64, u64); 4] = [(1_665, 1_602, 1), (3_330, 1_665, 1), (5_346, 2_016, 1), (7_362, 2_016, 1)];

fn free_on_other_cpu(rules: KernelRules) -> Vec<(usize, u64, u64)> {
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig { rules, ..Default::default() }).unwrap();
    let cpus = m.all_cpus().unwrap();
    let (pages, refills) = alloc_stream(&pa, &m, &cpus[0], N);
    assert_eq!(refills, [63, 126, 252, 504, 1008, 2016, 2016, 2016]);
    let before = pa.nr_free_pages();
    let drains = free_stream(&pa, &m, &cpus[1], &pages);
    let ps1 = pa.pageset(1).unwrap();
    assert_eq!((ps1.count, ps1.high, ps1.free_count), (702, 2_079, 2_016));
    // What left the pcp reached the buddy lists.
    let drained: u64 = drains.iter().map(|d| d.1).sum();
    assert_eq!(drained, 1_602 + 1_665 + 2 * 2_016);
    assert_eq!(pa.nr_free_pages() - before, drained as i64);
    assert_eq!(ev(&m, 1, VmEvent::Pgfree), N as u64);
    // CPU 0 is untouched by CPU 1's frees.
    let ps0 = pa.pageset(0).unwrap();
    assert_eq!((ps0.count, ps0.high), (0, 9_666));
    // drain_pages_zone empties CPU 1 in rounds of batch << 5 = 2016: 702 in one call.
    let d0 = ev(&m, 1, VmEvent::PcpDrain);
    pa.drain_local_pages(&cpus[1]);
    assert_eq!(ev(&m, 1, VmEvent::PcpDrain) - d0, 1);
    assert_eq!(pa.nr_free_pages() as u64, pa.managed_pages());
    pa.check_invariants().unwrap();
    drains
}

#[test]
fn order0_free_stream_drains_7_2() {
    assert_eq!(free_on_other_cpu(KernelRules::Linux7_2), DRAINS_72);
}

#[test]
fn order0_free_stream_drains_6_12() {
    assert_eq!(free_on_other_cpu(KernelRules::Linux6_12), DRAINS_612);
}

#[test]
fn drain_all_pages_rounds_of_batch_shift_s() {
    // drain_pages_zone takes min(count, batch << 5 = 2016) per round:
    // a pcp of 10,017 pages needs 5 rounds of 2016 (10,080 >= 10,017), the
    // last one 1,953.
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let (pages, _) = alloc_stream(&pa, &m, &cpu, N + 1);
    let drains = free_stream(&pa, &m, &cpu, &pages);
    assert!(drains.is_empty());
    assert_eq!(pa.pageset(0).unwrap().count, 2_015 + 8_002);
    let d0 = ev(&m, 0, VmEvent::PcpDrain);
    let p0 = ev(&m, 0, VmEvent::PcpDrainPages);
    pa.drain_all_pages(&cpu);
    assert_eq!(ev(&m, 0, VmEvent::PcpDrain) - d0, 5);
    assert_eq!(ev(&m, 0, VmEvent::PcpDrainPages) - p0, 10_017);
    assert_eq!(ev(&m, 0, VmEvent::DrainAllPages), 1);
    let ps = pa.pageset(0).unwrap();
    // drain_all_pages does not touch high.
    assert_eq!((ps.count, ps.high), (0, 11_682));
    pa.check_invariants().unwrap();
}

#[test]
fn decay_pcp_high_steps() {
    // decay_pcp_high: if high > high_min: high = max(count - (batch << 5),
    // high - high / 8, high_min); then drain count - high in chunks of batch.
    let m = boot();
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let (pages, _) = alloc_stream(&pa, &m, &cpu, N + 1);
    free_stream(&pa, &m, &cpu, &pages);
    // count 10,017, high 11,682.
    // tick 1: max(10,017 - 2,016 = 8,001, 11,682 - 1,460 = 10,222, 1,665) = 10,222;
    //         count 10,017 < 10,222: nothing drained.
    assert!(pa.decay_pcp_high(&cpu));
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.high, ps.count), (10_222, 10_017));
    // tick 2: max(8,001, 10,222 - 1,277 = 8,945, 1,665) = 8,945; drain
    //         10,017 - 8,945 = 1,072 = 17 x 63 + 1 -> 18 calls.
    let d0 = ev(&m, 0, VmEvent::PcpDrain);
    assert!(pa.decay_pcp_high(&cpu));
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.high, ps.count), (8_945, 8_945));
    assert_eq!(ev(&m, 0, VmEvent::PcpDrain) - d0, 18);
    assert_eq!(ev(&m, 0, VmEvent::PcpDecayDrain), 1);
    // Keep ticking: high never goes below high_min and count follows it.
    for _ in 0..100 {
        pa.decay_pcp_high(&cpu);
    }
    let ps = pa.pageset(0).unwrap();
    assert_eq!((ps.high, ps.count), (HIGH_MIN, HIGH_MIN));
    assert!(!pa.decay_pcp_high(&cpu), "nothing left to do at high_min");
    pa.check_invariants().unwrap();
}
