//! The allocator's knobs and switches as user space and the layers above
//! reach them: `vm.percpu_pagelist_high_fraction` and `vm.min_free_kbytes`
//! with the pagesets they recompute (`zone_pcp_update()`, the cache-info
//! flag), fail_page_alloc and fail-nth, CPU handles of another machine,
//! and the boot state kept for the layers above.

use super::{allocator, machine};
use crate::fault::FaultAttr;
use crate::sizing::{MIN_FREE_KBYTES_MAX, MIN_PERCPU_PAGELIST_HIGH_FRACTION, zone_highsize};
use crate::{AllocError, AllocatorConfig, FreeError, PCPF_FREE_HIGH_BATCH, PageAllocator, SysctlError};
use mmlab_engine::{Gfp, Machine, MachineConfig, Pfn};

/// `percpu_pagelist_high_fraction_sysctl_handler()`: 1 to 7 are -EINVAL
/// and change nothing; 8 or more makes high_min = high_max = the zone's
/// managed pages over the fraction, split over the CPUs
/// (`zone_highsize()` with the fraction); 0 goes back to the scaled
/// range, high_min below high_max.
#[test]
fn high_fraction_is_0_or_at_least_8_and_sets_high_from_it() {
    let m = machine();
    let pa = allocator(&m);
    let before = pa.pageset(0).unwrap();
    assert!(before.high_min < before.high_max, "fraction 0: a range {before:?}");
    for v in 1..MIN_PERCPU_PAGELIST_HIGH_FRACTION {
        assert_eq!(pa.set_percpu_pagelist_high_fraction(v), Err(SysctlError::HighFraction(v)));
        assert_eq!(pa.percpu_pagelist_high_fraction(), 0);
        assert_eq!(pa.pageset(0).unwrap(), before);
    }
    pa.set_percpu_pagelist_high_fraction(8).unwrap();
    assert_eq!(pa.percpu_pagelist_high_fraction(), 8);
    let z = pa.zone();
    let ncpus = m.nr_cpus() as u32;
    let want = zone_highsize(z.managed_pages(), z.low_wmark_pages(), before.batch, ncpus, 0, ncpus, 8);
    for cpu in 0..m.nr_cpus() {
        let p = pa.pageset(cpu).unwrap();
        assert_eq!((p.high_min, p.high_max), (want, want), "cpu {cpu}");
    }
    // Fraction 0's high_max is the one fraction 8 gives.
    assert_eq!(want, before.high_max);
    pa.set_percpu_pagelist_high_fraction(64).unwrap();
    let w64 = zone_highsize(z.managed_pages(), z.low_wmark_pages(), before.batch, ncpus, 0, ncpus, 64);
    assert_eq!((pa.pageset(1).unwrap().high_min, pa.pageset(1).unwrap().high_max), (w64, w64));
    assert!(w64 < want, "a larger fraction, a smaller high ({w64} vs {want})");
    pa.set_percpu_pagelist_high_fraction(0).unwrap();
    let back = pa.pageset(0).unwrap();
    assert_eq!((back.high_min, back.high_max), (before.high_min, before.high_max));
}

/// `min_free_kbytes_sysctl_handler()`: up to `INT_MAX` is taken (new
/// watermarks), above it is -EINVAL with the watermarks kept.
#[test]
fn min_free_kbytes_takes_up_to_int_max() {
    let m = machine();
    let pa = allocator(&m);
    let (kb, min) = (pa.min_free_kbytes(), pa.zone().min_wmark_pages());
    assert!(kb > 1, "the boot's value is computed ({kb})");
    assert_eq!(
        pa.set_min_free_kbytes(MIN_FREE_KBYTES_MAX + 1),
        Err(SysctlError::MinFreeKbytes(MIN_FREE_KBYTES_MAX + 1))
    );
    assert_eq!((pa.min_free_kbytes(), pa.zone().min_wmark_pages()), (kb, min));
    pa.set_min_free_kbytes(2 * kb).unwrap();
    assert_eq!(pa.min_free_kbytes(), 2 * kb);
    assert!(pa.zone().min_wmark_pages() > min);
    pa.set_min_free_kbytes(MIN_FREE_KBYTES_MAX).unwrap();
    assert_eq!(pa.min_free_kbytes(), MIN_FREE_KBYTES_MAX);
}

/// `zone_pcp_update_cacheinfo()`: `PCPF_FREE_HIGH_BATCH` is set when the
/// per-CPU share of the last-level cache holds more than three batches of
/// pages, and cleared again when it does not.
#[test]
fn free_high_batch_needs_more_than_three_batches_of_cache() {
    let m = machine();
    let batch = allocator(&m).pageset(0).unwrap().batch as u64;
    drop(m);
    for (pages, set) in [(3 * batch, false), (3 * batch + 1, true), (0, false)] {
        let m = machine();
        let cfg = AllocatorConfig { llc_bytes_per_cpu: pages << 12, ..AllocatorConfig::default() };
        let pa = PageAllocator::boot(&m, cfg).unwrap();
        for cpu in 0..m.nr_cpus() {
            let flags = pa.pcp_of(pa.zonelist()[0] as usize, cpu).lock().flags;
            assert_eq!(flags & PCPF_FREE_HIGH_BATCH != 0, set, "{pages} pages of cache, batch {batch}, cpu {cpu}");
        }
        // A recompute keeps it as it was.
        pa.zone_pcp_update(0);
        let flags = pa.pcp_of(pa.zonelist()[0] as usize, 0).lock().flags;
        assert_eq!(flags & PCPF_FREE_HIGH_BATCH != 0, set);
    }
}

/// fail_page_alloc armed through the allocator: failures counted, each
/// logged by the number of the request that passed the filters, and
/// fail-nth failing exactly the n-th such request.
#[test]
fn fail_page_alloc_counts_logs_and_fails_the_nth() {
    let m = machine();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let attr =
        FaultAttr { probability: 100, times: 2, min_order: 0, ignore_gfp_reclaim: false, ..FaultAttr::default() };
    pa.set_fail_page_alloc(Some(attr)).unwrap();
    assert!(pa.set_fail_page_alloc(Some(FaultAttr { probability: 101, ..attr })).is_err());
    assert!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).is_none());
    assert!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).is_none());
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).expect("times=2: the third succeeds");
    assert_eq!(pa.fail_page_alloc_injected(), 2);
    assert_eq!(pa.take_fail_page_alloc_log(), (3, vec![1, 2]));
    assert_eq!(pa.take_fail_page_alloc_log(), (3, vec![]));
    pa.free_pages(&cpu, p, 0).unwrap();
    // fail-nth: only the second request from now fails.
    pa.set_fail_page_alloc(Some(FaultAttr { probability: 0, ..attr })).unwrap();
    pa.set_fail_nth(&[2]);
    let a = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).expect("the first passes");
    assert!(pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).is_none());
    let b = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).expect("and the third");
    let (passed, failed) = pa.take_fail_page_alloc_log();
    assert_eq!((passed, failed), (3, vec![2]));
    pa.free_pages(&cpu, a, 0).unwrap();
    pa.free_pages(&cpu, b, 0).unwrap();
}

/// A CPU handle of another machine is refused at every entry point before
/// any per-cpu data is touched.
#[test]
fn a_cpu_of_another_machine_is_refused() {
    let m = machine();
    let other = Machine::boot(MachineConfig::with("16M", 1).unwrap()).unwrap();
    let pa = allocator(&m);
    let cpu = m.cpu(0).unwrap();
    let theirs = other.cpu(0).unwrap();
    let free = pa.nr_free_pages() + pa.pcp_pages();
    assert!(pa.alloc_pages(&theirs, Gfp::GFP_KERNEL, 0).is_none());
    assert_eq!(pa.try_alloc_pages(&theirs, Gfp::GFP_KERNEL, 0), Err(AllocError::ForeignCpu { cpu: 0 }));
    let p = pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, 0).unwrap();
    assert_eq!(pa.free_pages(&theirs, p, 0), Err(FreeError::ForeignCpu { cpu: 0 }));
    pa.free_pages(&cpu, p, 0).unwrap();
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free);
    assert_eq!(pa.free_pages(&cpu, Pfn(0), 0), Err(FreeError::InvalidPfn { pfn: Pfn(0) }));
}

/// What a layer above keeps at boot is taken once; the boot's vmalloc
/// work is claimed once, and only on a machine booted for real.
#[test]
fn boot_state_and_the_boot_vmalloc_claim_are_taken_once() {
    let m = machine();
    let pa = allocator(&m);
    assert!(pa.take_boot_state().is_none());
    pa.keep_boot_state(Box::new(7u32));
    let got = pa.take_boot_state().expect("kept");
    assert_eq!(got.downcast_ref::<u32>(), Some(&7));
    assert!(pa.take_boot_state().is_none());
    let real = m.boot_state().in_force == mmlab_engine::mm::boot_state::BootState::Real;
    assert!(!pa.boot_vmalloc_claimed());
    assert_eq!(pa.claim_boot_vmalloc(), real);
    assert_eq!(pa.boot_vmalloc_claimed(), real);
    assert!(!pa.claim_boot_vmalloc(), "a second claim is refused");
}

/// The populated zones are those with managed pages, lowest first; a CPU
/// past the last has no pageset.
#[test]
fn populated_zones_and_pagesets_per_cpu() {
    let m = machine();
    let pa = allocator(&m);
    let zones: Vec<_> = pa.populated_zones().map(|z| z.zone_type()).collect();
    assert!(!zones.is_empty());
    assert!(zones.windows(2).all(|w| (w[0] as usize) < (w[1] as usize)));
    assert!(pa.populated_zones().all(|z| z.managed_pages() > 0));
    assert!(zones.contains(&pa.zonelist()[0]));
    let zt = pa.zonelist()[0];
    assert!(pa.pageset_of(zt, m.nr_cpus() - 1).is_some());
    assert!(pa.pageset_of(zt, m.nr_cpus()).is_none());
}
