use mmlab_engine::{Gfp, MachineConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};

#[test]
fn boot_alloc_free_check() {
    let m = mmlab_tests::boot(MachineConfig::with("64M", 2).unwrap()).unwrap();
    let pa = PageAllocator::boot(&m, AllocatorConfig { debug_checks: true, ..Default::default() }).unwrap();
    let cpu = m.cpu(0).unwrap();
    let before = pa.zone().nr_free_per_order();
    println!("buddyinfo {before:?} managed {}", pa.managed_pages());
    let mut v = vec![];
    for o in 0..5 {
        v.push((pa.alloc_pages(&cpu, Gfp::GFP_KERNEL, o).unwrap(), o));
    }
    for (p, o) in v {
        pa.free_pages(&cpu, p, o).unwrap();
    }
    pa.drain_all_pages(&cpu);
    assert_eq!(pa.zone().nr_free_per_order(), before);
    pa.check_invariants().unwrap();
}
