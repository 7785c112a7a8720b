//! Tests of the TLB code as a whole: encodings, the model, the flush
//! functions and their counts, across CPUs and threads.

use super::*;
use crate::addr::{PAGE_SHIFT, PAGE_SIZE};
use crate::arch::arm64::barrier::{BarrierBackend, BarrierCounts, BarrierKind, ModelCosts};
use crate::arch::arm64::cost::CostProfile;
use crate::counters::CounterSet;
use crate::machine::{Machine, MachineConfig};

const K: u64 = 0xffff_8000_1000_0000; // a kernel VA, 1 GiB aligned
const RW: TlbPerms = TlbPerms { writable: true, user: false, exec: false };
const RO: TlbPerms = TlbPerms { writable: false, user: false, exec: false };

fn machine(tlbi_range: bool) -> Machine {
    // Without the linear map: its fixmap clears would add their TLBIs to
    // the machine's totals these tests read.
    let cfg = MachineConfig {
        barrier_backend: BarrierBackend::Count,
        tlbi_range: Some(tlbi_range),
        linear_map: false,
        ..MachineConfig::with("16M", 2).unwrap()
    };
    Machine::boot(cfg).unwrap()
}

fn page(va: u64, asid: Option<u16>) -> TlbEntry {
    TlbEntry::new(va, 0x4000_0000 + (va & 0xfff_f000), 4096, RW, asid).unwrap()
}

/// TLBI and barrier counts that `f` adds on the machine.
fn delta(m: &Machine, f: impl FnOnce()) -> (TlbiCounts, BarrierCounts) {
    let (t0, b0) = (m.tlbi_counts(), m.barrier_counts());
    f();
    let (t1, b1) = (m.tlbi_counts(), m.barrier_counts());
    let mut b = b1;
    for (x, y) in b.dsb.iter_mut().zip(b0.dsb) {
        *x -= y;
    }
    for (x, y) in b.dmb.iter_mut().zip(b0.dmb) {
        *x -= y;
    }
    b.isb -= b0.isb;
    (t1.delta(&t0), b)
}

fn barriers(b: &BarrierCounts) -> (u64, u64, u64) {
    let get = |k, o| b.get(k, o).unwrap();
    (get(BarrierKind::Dsb, "ishst"), get(BarrierKind::Dsb, "ish"), b.isb)
}

#[test]
fn kernel_range_tlbi_counts() {
    // (pages, without range ops: vaale1is, vmalle1is,
    //         with range ops: vaale1is, rvaale1is, vmalle1is)
    // Without FEAT_TLBIRANGE: one vaale1is per page below MAX_DVM_OPS;
    // 512 pages or more -> flush_tlb_all (one vmalle1is).
    // With it (range pages at scale s: (num+1) << (5s+1)):
    //   1    -> the single-page special case: 1 vaale1is.
    //   2    -> scales 3..1 give num -1; scale 0: 2>>1 - 1 = 0 -> 1 op of 2 pages.
    //   3    -> scale 0: 3>>1 - 1 = 0 -> 2 pages; 1 page left -> 1 vaale1is.
    //   64   -> scale 1: 64>>6 - 1 = 0 -> 1 op of 64.
    //   101  -> scale 1: 101>>6 - 1 = 0 -> 64; 37 left, scale 0: 37>>1 - 1 = 17 -> 36; 1 left -> vaale1is.
    //   511  -> scale 1: 511>>6 - 1 = 6 -> 448; 63 left, scale 0: num 30 -> 62; 1 left -> vaale1is.
    //   512  -> scale 1: 512>>6 - 1 = 7 -> 1 op of 512.
    //   8192 -> scale 2: 8192>>11 - 1 = 3 -> 1 op of 8192.
    //   2^21 -> scale 3: num 31 -> 1 op of MAX_TLBI_RANGE_PAGES.
    //   2^21 + 1 -> over the limit: flush_tlb_all.
    type Row = (u64, (u64, u64), (u64, u64, u64));
    let table: [Row; 10] = [
        (1, (1, 0), (1, 0, 0)),
        (2, (2, 0), (0, 1, 0)),
        (3, (3, 0), (1, 1, 0)),
        (64, (64, 0), (0, 1, 0)),
        (101, (101, 0), (1, 2, 0)),
        (511, (511, 0), (1, 2, 0)),
        (512, (0, 1), (0, 1, 0)),
        (8192, (0, 1), (0, 1, 0)),
        (1 << 21, (0, 1), (0, 1, 0)),
        ((1 << 21) + 1, (0, 1), (0, 0, 1)),
    ];
    for tlbi_range in [false, true] {
        let m = machine(tlbi_range);
        let cpu = m.cpu(0).unwrap();
        for &(pages, without, with) in &table {
            let (t, b) = delta(&m, || flush_tlb_kernel_range(&cpu, K, K + pages * PAGE_SIZE));
            let got = (t.get(TlbiKind::Vaale1is), t.get(TlbiKind::Rvaale1is), t.get(TlbiKind::Vmalle1is));
            let want = if tlbi_range { with } else { (without.0, 0, without.1) };
            assert_eq!(got, want, "pages {pages} range {tlbi_range}");
            assert_eq!(t.total(), got.0 + got.1 + got.2);
            // Every kernel flush: dsb ishst, dsb ish, isb, once each.
            assert_eq!(barriers(&b), (1, 1, 1), "pages {pages} range {tlbi_range}");
        }
    }
}

#[test]
fn range_ops_sequence_and_coverage() {
    let ops: Vec<Tlbi> = RangeOps::new(RangeOp::Vaale1is, true, K, 101, PAGE_SIZE, 0, 0).collect();
    assert_eq!(
        ops,
        [
            Tlbi::Rvaale1is { base_va: K, scale: 1, num: 0, ttl: 0 },
            Tlbi::Rvaale1is { base_va: K + 64 * PAGE_SIZE, scale: 0, num: 17, ttl: 0 },
            Tlbi::Vaale1is { va: K + 100 * PAGE_SIZE },
        ]
    );
    // The ops tile the range exactly, for every size up to a few
    // thousand pages and a few large ones.
    for pages in (1..3000).chain([65535, 65536, 65537, (1 << 21) - 1, 1 << 21]) {
        let mut next = K;
        for t in RangeOps::new(RangeOp::Vaale1is, true, K, pages, PAGE_SIZE, 0, 0) {
            let (base, n) = match t {
                Tlbi::Rvaale1is { base_va, .. } => (base_va, t.pages_covered().unwrap()),
                Tlbi::Vaale1is { va } => (va, 1),
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(base, next, "pages {pages}");
            next = base + n * PAGE_SIZE;
        }
        assert_eq!(next, K + pages * PAGE_SIZE, "pages {pages}");
    }
    // Without range ops, a 2 MiB stride issues one op per stride.
    let ops: Vec<Tlbi> = RangeOps::new(RangeOp::Vale1is, false, 0x40_0000, 1024, 2 << 20, 7, 0).collect();
    assert_eq!(ops, [Tlbi::Vale1is { va: 0x40_0000, asid: 7 }, Tlbi::Vale1is { va: 0x60_0000, asid: 7 }]);
}

#[test]
fn flush_barrier_sequences() {
    let m = machine(true);
    let cpu = m.cpu(0).unwrap();
    let (t, b) = delta(&m, || flush_tlb_all(&cpu));
    assert_eq!((t.get(TlbiKind::Vmalle1is), t.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 1));
    let (t, b) = delta(&m, || flush_tlb_kernel_pgtable(&cpu, K));
    assert_eq!((t.get(TlbiKind::Vaae1is), t.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 1));
    // User flushes end without isb.
    let (t, b) = delta(&m, || flush_tlb_mm(&cpu, 3));
    assert_eq!((t.get(TlbiKind::Aside1is), t.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 0));
    let (t, b) = delta(&m, || flush_tlb_page(&cpu, 3, 0x1000));
    assert_eq!((t.get(TlbiKind::Vale1is), t.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 0));
    // 4 MiB at a 2 MiB stride = 1024 pages: scale 1, num 15, one rvale1is.
    let (t, b) = delta(&m, || flush_tlb_range(&cpu, 3, 0x40_0000, 0x80_0000, 2 << 20, true));
    assert_eq!((t.get(TlbiKind::Rvale1is), t.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 0));
    let (t, _) = delta(&m, || flush_tlb_range(&cpu, 3, 0x1000, 0x4000, PAGE_SIZE, false));
    assert_eq!((t.get(TlbiKind::Rvae1is), t.get(TlbiKind::Vae1is)), (1, 1));
    // No range ops: 512 strides or more -> flush_tlb_mm.
    let m = machine(false);
    let cpu = m.cpu(0).unwrap();
    let (t, b) = delta(&m, || flush_tlb_range(&cpu, 3, 0, 512 * PAGE_SIZE, PAGE_SIZE, true));
    assert_eq!((t.get(TlbiKind::Aside1is), t.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 0));
    let (t, _) = delta(&m, || flush_tlb_range(&cpu, 3, 0, 511 * PAGE_SIZE, PAGE_SIZE, true));
    assert_eq!((t.get(TlbiKind::Vale1is), t.total()), (511, 511));
    // end < start is a huge range, as in the kernel: a full flush.
    let (t, _) = delta(&m, || flush_tlb_kernel_range(&cpu, K + PAGE_SIZE, K));
    assert_eq!(t.get(TlbiKind::Vmalle1is), 1);
}

#[test]
fn operand_encodings() {
    // (VA >> 12)[43:0]: VA[55:12] of 0xffff_8000_1234_5000.
    assert_eq!(Tlbi::Vaale1is { va: 0xffff_8000_1234_5000 }.operand(), 0x0000_0ff8_0001_2345);
    assert_eq!(Tlbi::Vaae1is { va: 0xffff_8000_1234_5000 }.operand(), 0x0000_0ff8_0001_2345);
    // ASID in [63:48].
    assert_eq!(Tlbi::Vale1is { va: 0x7fff_dead_b000, asid: 0x2a }.operand(), 0x002a_0007_fffd_eadb);
    assert_eq!(Tlbi::Aside1is { asid: 0xbeef }.operand(), 0xbeef_0000_0000_0000);
    assert_eq!(Tlbi::Vmalle1is.operand(), 0);
    // BADDR 0x1_8000_0400, NUM 7 << 39, SCALE 1 << 44, TG 1 << 46.
    let r = Tlbi::Rvaale1is { base_va: 0xffff_8000_0040_0000, scale: 1, num: 7, ttl: 0 };
    assert_eq!(r.operand(), 0x0000_5398_0000_0400);
    assert_eq!(r.pages_covered(), Some(8 << 6));
    // ASID 0x1234, TG 1, SCALE 3, NUM 31, TTL 2, BADDR 0x40_0020_0.
    let r = Tlbi::Rvale1is { base_va: 0x40_0020_0000, asid: 0x1234, scale: 3, num: 31, ttl: 2 };
    assert_eq!(r.operand(), 0x1234_7fc0_0400_0200);
    assert_eq!(r.pages_covered(), Some(MAX_TLBI_RANGE_PAGES));
    assert_eq!(Tlbi::Rvae1is { base_va: 0, asid: 0, scale: 0, num: 0, ttl: 0 }.pages_covered(), Some(2));
    assert_eq!(Tlbi::Vmalle1is.pages_covered(), None);
    assert_eq!(r.to_string(), "tlbi rvale1is, 0x12347fc004000200");
    // Decoding gives the op back for canonical addresses.
    let ops = [
        Tlbi::Vale1is { va: 0x7fff_dead_b000, asid: 0x2a },
        Tlbi::Vae1is { va: 0xffff_ffff_ffff_f000, asid: 1 },
        Tlbi::Vaale1is { va: 0xffff_8000_1234_5000 },
        Tlbi::Vaae1is { va: 0 },
        Tlbi::Vmalle1is,
        Tlbi::Aside1is { asid: 9 },
        Tlbi::Rvaale1is { base_va: 0xffff_8000_0040_0000, scale: 1, num: 7, ttl: 0 },
        Tlbi::Rvale1is { base_va: 0x40_0020_0000, asid: 0x1234, scale: 3, num: 31, ttl: 2 },
        Tlbi::Rvae1is { base_va: 0xffff_ffff_ffe0_0000, asid: 3, scale: 2, num: 5, ttl: 3 },
    ];
    for op in ops {
        assert_eq!(Tlbi::from_operand(op.kind(), op.operand()), op);
    }
    assert!(Tlbi::Vaae1is { va: 0 }.all_levels() && !Tlbi::Vaale1is { va: 0 }.all_levels());
}

#[test]
fn model_fill_hit_miss_and_plru_eviction() {
    // 4 entries: one set of 4 ways.
    let t = CpuTlb::new(4);
    assert_eq!(t.geometry(), TlbGeometry { sets: 1, ways: 4, extra: 0 });
    let e: Vec<TlbEntry> = (0..6).map(|i| page(K + i * PAGE_SIZE, None)).collect();
    for x in &e[..4] {
        t.fill(*x);
    }
    // The fourth fill marked every way: only e3 stays marked.
    assert_eq!(t.lookup(K + 0x123, 9).and_then(|x| x.translate(K + 0x123)), Some(0x4000_0123));
    assert_eq!(t.lookup(K + 10 * PAGE_SIZE, 9), None);
    // Full: e0 (hit) and e3 are marked, e1 is the first way not: replaced.
    t.fill(e[4]);
    assert_eq!(t.entries(), [e[0], e[2], e[3], e[4]]);
    // e0, e4, e3 marked: e2 goes, and the set's marks reset to e5's.
    t.fill(e[5]);
    assert_eq!(t.entries(), [e[0], e[3], e[4], e[5]]);
    let c = t.counts();
    assert_eq!((c.hits, c.misses, c.fills, c.evictions, c.entries), (1, 1, 6, 2, 4));
    // Refilling a cached translation replaces it in place.
    t.fill(e[0]);
    assert_eq!((t.counts().evictions, t.counts().entries), (2, 4));
    // A 2 MiB block serves every page in it; ASID entries only their ASID.
    let t = CpuTlb::new(8);
    let block = TlbEntry::new(K + (2 << 20), 0x8020_0000, 2 << 20, RO, None).unwrap();
    t.fill(block);
    t.fill(page(0x1000, Some(5)));
    assert_eq!(t.lookup(K + (3 << 20) + 8, 1).unwrap(), block);
    assert_eq!(block.translate(K + (3 << 20) + 8), Some(0x8030_0008));
    assert!(t.lookup(0x1000, 5).is_some());
    assert!(t.lookup(0x1000, 6).is_none());
    // Bad entries are errors; a zero-capacity TLB caches nothing.
    assert_eq!(TlbEntry::new(0, 0, 8192, RW, None), Err(TlbEntryError::BadSize(8192)));
    assert!(matches!(TlbEntry::new(0x1000, 0, 1 << 16, RW, None), Err(TlbEntryError::Misaligned { .. })));
    let z = CpuTlb::new(0);
    z.fill(page(0x1000, None));
    assert!(z.lookup(0x1000, 0).is_none() && z.entries().is_empty());
}

#[test]
fn model_is_set_associative() {
    // The default: the Neoverse N1's L2 TLB, 256 sets of 5 ways.
    let t = CpuTlb::new(1280);
    assert_eq!(t.geometry(), TlbGeometry { sets: 256, ways: 5, extra: 0 });
    assert_eq!(TlbGeometry::for_capacity(48), TlbGeometry { sets: 8, ways: 6, extra: 0 });
    let g = TlbGeometry::for_capacity(1000);
    assert_eq!((g, g.capacity()), (TlbGeometry { sets: 128, ways: 7, extra: 104 }, 1000));
    assert_eq!(TlbGeometry::for_capacity(3), TlbGeometry { sets: 1, ways: 3, extra: 0 });
    // Six pages 256 pages apart index one set: the sixth replaces one.
    let same: Vec<TlbEntry> = (0..6).map(|i| page(K + i * 256 * PAGE_SIZE, None)).collect();
    let next = page(K + PAGE_SIZE, None);
    t.fill(next);
    for e in &same {
        t.fill(*e);
    }
    let c = t.counts();
    assert_eq!((c.evictions, c.entries), (1, 6));
    assert_eq!(t.entries(), [next, same[1], same[2], same[3], same[4], same[5]]);
    assert!(t.lookup(same[0].va(), 0).is_none(), "the first way not recently used was replaced");
    assert!(t.lookup(next.va(), 0).is_some(), "another set is untouched");
    // A 2 MiB block indexes by VA >> 21: it shares set 0 with none of them.
    let blk = TlbEntry::new(K + (2 << 20), 0x8020_0000, 2 << 20, RW, None).unwrap();
    t.fill(blk);
    assert_eq!(t.counts().evictions, 1);
    assert_eq!(t.lookup(K + (2 << 20) + 0x5000, 3), Some(blk));
}

#[test]
fn tlbi_on_one_cpu_invalidates_every_cpu() {
    let m = machine(true);
    let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
    let t1 = &c1.arch_data().tlb;
    let (a, b) = (page(K, None), page(K + PAGE_SIZE, None));
    let g = t1.generation();
    for e in [a, b] {
        assert!(t1.fill_checked(e, g));
        assert!(c1.arch_data().tlb.fast_fill(e.va() + 8, &e, g));
    }
    assert_eq!(c1.arch_data().tlb.fast_lookup(K + 0x10, 0, true), Some(0x4000_0010));
    flush_tlb_kernel_range(&c0, K, K + PAGE_SIZE);
    assert_eq!(t1.lookup(K, 0), None);
    assert_eq!(t1.lookup(K + PAGE_SIZE, 0), Some(b));
    assert_eq!(c1.arch_data().tlb.fast_lookup(K + 0x10, 0, false), None);
    assert_eq!(c1.arch_data().tlb.fast_lookup(K + PAGE_SIZE + 4, 0, false), Some(0x4000_1004));
    assert_eq!(t1.counts().invalidated, 1);
    // Counted on the issuer only.
    assert_eq!(c0.arch_data().tlb.tlbi_stats().snapshot().get(TlbiKind::Vaale1is), 1);
    assert_eq!(t1.tlbi_stats().snapshot().total(), 0);
    // A fill from a walk that raced with the TLBI is refused.
    assert!(!t1.fill_checked(a, g));
    assert!(!c1.arch_data().tlb.fast_fill(K, &a, g));
    assert_eq!(c1.arch_data().tlb.fast_lookup(K, 0, false), None);
    // A fast slot caching one page of a 2 MiB block goes with a TLBI at
    // another address in the block (another slot index).
    let blk = TlbEntry::new(K + (2 << 20), 0x8020_0000, 2 << 20, RW, None).unwrap();
    let g = t1.generation();
    assert!(c1.arch_data().tlb.fast_fill(K + (2 << 20) + 0x3000, &blk, g));
    assert_eq!(c1.arch_data().tlb.fast_lookup(K + (2 << 20) + 0x3004, 0, true), Some(0x8020_3004));
    tlbi(&c0, Tlbi::Vaale1is { va: K + (2 << 20) + 0x10_0000 });
    assert_eq!(c1.arch_data().tlb.fast_lookup(K + (2 << 20) + 0x3004, 0, true), None);
    assert_eq!(t1.fast_valid(), 1);
    // A fast write to a read-only page misses.
    let ro = TlbEntry::new(0x5000, 0x9000, PAGE_SIZE, RO, Some(4)).unwrap();
    assert!(c1.arch_data().tlb.fast_fill(0x5000, &ro, t1.generation()));
    assert_eq!(c1.arch_data().tlb.fast_lookup(0x5008, 4, false), Some(0x9008));
    assert_eq!(c1.arch_data().tlb.fast_lookup(0x5008, 4, true), None);
    assert_eq!(c1.arch_data().tlb.fast_lookup(0x5008, 3, false), None);
    flush_tlb_all(&c0);
    assert_eq!(t1.fast_valid(), 0);
}

#[test]
fn range_tlbi_hits_exactly_the_overlapping_entries() {
    let m = machine(true);
    let cpu = m.cpu(0).unwrap();
    let t = &cpu.arch_data().tlb;
    let fill_set = || {
        let v = vec![
            page(K - PAGE_SIZE, None),                                               // just below
            page(K, None),                                                           // first page
            page(K + 3 * PAGE_SIZE, Some(7)),                                        // last page, ASID 7
            page(K + 4 * PAGE_SIZE, None),                                           // just above
            TlbEntry::new(K - (64 << 10), 0x9000_0000, 64 << 10, RW, None).unwrap(), // ends below
            TlbEntry::new(K + (64 << 10), 0x9001_0000, 64 << 10, RW, None).unwrap(), // above
            TlbEntry::new(K, 0xa000_0000, 2 << 20, RW, None).unwrap(),               // block over it
        ];
        for e in &v {
            t.fill(*e);
        }
        v
    };
    // 4 pages from K: the first, the ASID-7 last one and the block.
    let v = fill_set();
    tlbi(&cpu, Tlbi::Rvaale1is { base_va: K, scale: 0, num: 1, ttl: 0 });
    assert_eq!(t.entries(), [v[4], v[0], v[3], v[5]]);
    // The same by scan (range far larger than the entry count).
    flush_tlb_all(&cpu);
    let v = fill_set();
    let r = Tlbi::Rvale1is { base_va: K - (1 << 30), asid: 9, scale: 3, num: 7, ttl: 0 };
    assert!(r.pages_covered().unwrap() > 1 << 18);
    tlbi(&cpu, r);
    // By VA with ASID 9: globals go, the ASID-7 entry stays.
    assert_eq!(t.entries(), [v[2]]);
}

#[test]
fn asid_invalidation_leaves_globals() {
    let m = machine(true);
    let cpu = m.cpu(0).unwrap();
    let t = &cpu.arch_data().tlb;
    let (g, a5, a6) = (page(0x1000, None), page(0x1000, Some(5)), page(0x1000, Some(6)));
    for e in [g, a5, a6] {
        t.fill(e);
    }
    for e in [g, a5] {
        assert!(cpu.arch_data().tlb.fast_fill(0x2000 - 1, &e, t.generation()));
    }
    assert_eq!(t.entries().len(), 3);
    flush_tlb_mm(&cpu, 5);
    assert_eq!(t.entries(), [g, a6]);
    // Slot held the ASID-5 copy last: gone, the global one not cached.
    assert_eq!(cpu.arch_data().tlb.fast_lookup(0x1000, 5, false), None);
    assert!(cpu.arch_data().tlb.fast_fill(0x1000, &g, t.generation()));
    flush_tlb_mm(&cpu, 6);
    assert_eq!(t.entries(), [g]);
    assert!(cpu.arch_data().tlb.fast_lookup(0x1000, 6, false).is_some());
    // By VA with an ASID also removes the global entry.
    flush_tlb_page(&cpu, 6, 0x1000);
    assert!(t.entries().is_empty());
    assert_eq!(cpu.arch_data().tlb.fast_lookup(0x1000, 6, false), None);
}

#[test]
fn flush_token() {
    let m = machine(true);
    let cpu = m.cpu(0).unwrap();
    let t = &cpu.arch_data().tlb;
    for i in 0..8 {
        t.fill(page(K + i * PAGE_SIZE, None));
    }
    let (c, b) = delta(&m, || TlbFlush::kernel_range(K + PAGE_SIZE, K + 3 * PAGE_SIZE).flush(&cpu));
    assert_eq!((c.get(TlbiKind::Rvaale1is), c.total()), (1, 1));
    assert_eq!(barriers(&b), (1, 1, 1));
    let left: Vec<u64> = t.entries().iter().map(|e| (e.va() - K) >> PAGE_SHIFT).collect();
    assert_eq!(left, [0, 3, 4, 5, 6, 7]);
    // Merge: the hull of two kernel ranges, one flush.
    let f = TlbFlush::kernel_page(K + 4 * PAGE_SIZE).merge(TlbFlush::kernel_page(K + 6 * PAGE_SIZE)).unwrap();
    assert_eq!(f.as_kernel_range(), Some((K + 4 * PAGE_SIZE, K + 7 * PAGE_SIZE)));
    let (c, _) = delta(&m, || f.flush(&cpu));
    // 3 pages: one range op of 2 and one single op.
    assert_eq!((c.get(TlbiKind::Rvaale1is), c.get(TlbiKind::Vaale1is)), (1, 1));
    let left: Vec<u64> = t.entries().iter().map(|e| (e.va() - K) >> PAGE_SHIFT).collect();
    assert_eq!(left, [0, 3, 7]);
    // Ignoring issues nothing.
    let (c, b) = delta(&m, || TlbFlush::kernel_page(K).ignore());
    assert_eq!((c.total(), b.total()), (0, 0));
    assert_eq!(t.entries().len(), 3);
    // Kernel and user ranges do not merge; `all` absorbs anything.
    let (a, u) = (TlbFlush::kernel_page(K), TlbFlush::page(0x1000, 1));
    let (a, u) = a.merge(u).unwrap_err();
    assert_eq!(a.as_kernel_range(), Some((K, K + PAGE_SIZE)));
    assert_eq!(u.merge(TlbFlush::all()), Ok(TlbFlush::all()));
    assert_eq!(TlbFlush::kernel_range(5, 5).merge(a), Ok(TlbFlush::kernel_range(K, K + PAGE_SIZE)));
    let ur = TlbFlush::user_range(1, 0, 0x2000, PAGE_SIZE, true)
        .merge(TlbFlush::user_range(1, 0x8000, 0x9000, PAGE_SIZE, false))
        .unwrap();
    assert_eq!(ur, TlbFlush::user_range(1, 0, 0x9000, PAGE_SIZE, false));
    ur.ignore();
    let (c, _) = delta(&m, || TlbFlush::kernel_pgtable(K).flush(&cpu));
    assert_eq!(c.get(TlbiKind::Vaae1is), 1);
    let left: Vec<u64> = t.entries().iter().map(|e| (e.va() - K) >> PAGE_SHIFT).collect();
    assert_eq!(left, [3, 7]);
}

#[test]
fn modelled_cost_follows_the_profile() {
    let p = CostProfile {
        tlbi_ns: std::array::from_fn(|i| 100 * (i as u32 + 1)),
        dsb_ish_after_tlbi_ns: 5000,
        ..CostProfile::default()
    };
    // Range TLBIs set explicitly: the default profile's N1 has none.
    let cfg = MachineConfig {
        barrier_backend: BarrierBackend::Model(ModelCosts::default()),
        cost_profile: p,
        tlbi_range: Some(true),
        // No linear map: the counts below are the test's own TLBIs.
        linear_map: false,
        ..MachineConfig::with("16M", 2).unwrap()
    };
    let m = Machine::boot(cfg).unwrap();
    let cpu = m.cpu(1).unwrap();
    let ns = |k: TlbiKind| u64::from(p.tlbi_ns[k as usize]);
    // 3 pages: rvaale1is + vaale1is, then one completion wait.
    let boot_barrier_ns = m.barrier_counts().modelled_ns;
    let (c, b) = delta(&m, || flush_tlb_kernel_range(&cpu, K, K + 3 * PAGE_SIZE));
    assert_eq!(c.modelled_ns, ns(TlbiKind::Rvaale1is) + ns(TlbiKind::Vaale1is) + 5000);
    // Barrier time stays with the barrier backend, TLBI time apart.
    let d = ModelCosts::default();
    let pair = u64::from(
        d.dsb[crate::arch::arm64::barrier::IshSt::INDEX] + d.dsb[crate::arch::arm64::barrier::Ish::INDEX] + d.isb,
    );
    assert_eq!(m.barrier_counts().modelled_ns - boot_barrier_ns, pair);
    assert_eq!(b.total(), 3);
    let (c, _) = delta(&m, || flush_tlb_all(&cpu));
    assert_eq!(c.modelled_ns, ns(TlbiKind::Vmalle1is) + 5000);
    // A dsb ish with nothing outstanding waits for nothing.
    let (c, _) = delta(&m, || tlbi_sync_s1ish(&cpu));
    assert_eq!(c.modelled_ns, 0);
    // Issued without a sync: issue cost only, the wait comes at the sync.
    let (c, _) = delta(&m, || {
        tlbi(&cpu, Tlbi::Vale1is { va: 0, asid: 1 });
        tlbi(&cpu, Tlbi::Vale1is { va: 0x1000, asid: 1 });
    });
    assert_eq!(c.modelled_ns, 2 * ns(TlbiKind::Vale1is));
    let (c, _) = delta(&m, || tlbi_sync_s1ish(&cpu));
    assert_eq!(c.modelled_ns, 5000);
    assert_eq!(cpu.arch_data().tlb.tlbi_stats().snapshot(), m.tlbi_counts());
    use crate::arch::arm64::barrier::BarrierOption;
}

#[test]
fn counts_sum_and_print() {
    let m = machine(false);
    let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
    flush_tlb_kernel_range(&c0, K, K + 2 * PAGE_SIZE);
    flush_tlb_all(&c1);
    let all = m.tlbi_counts();
    assert_eq!((all.get(TlbiKind::Vaale1is), all.get(TlbiKind::Vmalle1is)), (2, 1));
    let (s0, s1) = (c0.arch_data().tlb.tlbi_stats().snapshot(), c1.arch_data().tlb.tlbi_stats().snapshot());
    let mut sum = s0;
    sum.add(&s1);
    assert_eq!(sum, all);
    let p = CostProfile::default();
    assert_eq!(
        all.modelled_ns,
        2 * p.tlbi_cost_ns(TlbiKind::Vaale1is)
            + p.tlbi_cost_ns(TlbiKind::Vmalle1is)
            + 2 * u64::from(p.dsb_ish_after_tlbi_ns)
    );
    let text = all.to_string();
    assert!(text.starts_with("tlbi(vaale1is)   2\ntlbi(vmalle1is)  1\ntlbi_modelled_ns  "), "{text}");
    assert_eq!(TlbiCounts::default().to_string(), "");
    assert_eq!(m.arch_cpu_data(1).map(|d| d.tlb.capacity()), Some(1280));
    assert!(m.arch_cpu_data(2).is_none());
}

#[test]
fn entries_needed() {
    // 128 KiB mapped as two contiguous runs, then a 2 MiB block and 3 pages.
    let leaves = [(0, 64 << 10), (64 << 10, 64 << 10), (2 << 20, 2 << 20), (4 << 20, 4096), (0x40_1000, 4096)];
    assert_eq!(tlb_entries_needed(leaves.iter().copied().chain([(0x40_2000, 4096)])), 6);
    // The same 128 KiB as pages needs 16x more.
    assert_eq!(tlb_entries_needed((0..32).map(|i| (i * 4096, 4096))), 32);
    assert_eq!(tlb_entries_needed([(0, 32 << 20), (1 << 30, 1 << 30)]), 2);
    // Not a leaf shape: counted as pages; empty leaves need nothing.
    assert_eq!(tlb_entries_needed([(0, 3 * 4096), (0, 0)]), 3);
}

#[test]
fn owner_and_remote_threads() {
    // CPU 1's thread fills and looks up; CPU 0's thread invalidates.
    // After both join, nothing stale is left, whatever the interleaving.
    let m = machine(true);
    let (c0, c1) = (m.cpu(0).unwrap(), m.cpu(1).unwrap());
    std::thread::scope(|s| {
        s.spawn(move || {
            for i in 0..2000u64 {
                let va = K + (i % 64) * PAGE_SIZE;
                let e = page(va, None);
                let g = c1.arch_data().tlb.generation();
                c1.arch_data().tlb.fill_checked(e, g);
                c1.arch_data().tlb.fast_fill(va, &e, g);
                if let Some(pa) = c1.arch_data().tlb.fast_lookup(va, 0, false) {
                    assert_eq!(pa, e.pa());
                }
            }
        });
        s.spawn(move || {
            for _ in 0..200 {
                flush_tlb_kernel_range(&c0, K, K + 64 * PAGE_SIZE);
            }
        });
    });
    let c0 = m.cpu(0).unwrap();
    flush_tlb_kernel_range(&c0, K, K + 64 * PAGE_SIZE);
    let t1 = &m.arch_cpu_data(1).unwrap().tlb;
    assert!(t1.entries().is_empty());
    assert_eq!(t1.fast_valid(), 0);
    assert_eq!(m.tlbi_counts().get(TlbiKind::Rvaale1is), 201);
}
