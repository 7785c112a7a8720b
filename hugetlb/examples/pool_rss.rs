//! Host memory of an emulated machine with a large hugetlb pool, HVO off
//! and on: boot a machine of `MEM` (default 64G), grow a pool of 2 MiB pages
//! to `POOL` (default 32G) with one write of `nr_hugepages`, shrink it to 0,
//! and print, after each step, the process's VmRSS and VmHWM
//! (/proc/self/status) with the pool's counters, one JSON line per step.
//!
//! Usage: `cargo run --release -p mmlab-hugetlb --example pool_rss -- off|on [MEM] [POOL]`
//!
//! What to expect: the emulated memory is a lazily touched anonymous
//! mapping, so host RSS counts the struct pages (1/64 of RAM, touched at
//! boot), the tables and every emulated page written since. HVO frees
//! vmemmap pages *inside* the emulated machine (they return to its page
//! allocator) but does not give host memory back: the host pages behind
//! them stay resident, and the fresh head pages and restored pages HVO
//! allocates are host pages touched for the first time.

use mmlab_engine::MachineConfig;
use mmlab_hugetlb::{Hugetlb, HugetlbConfig};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmemmap::{Arm64Hvo, HvoConfig, RcuPolicy};

/// One measurement.
#[derive(Debug, serde::Serialize)]
struct Step {
    step: &'static str,
    hvo: bool,
    mem: String,
    nr_hugepages: u64,
    vmemmap_pages_freed: u64,
    vmemmap_pages_allocated: u64,
    vm_rss_kib: u64,
    vm_hwm_kib: u64,
    seconds: f64,
}

/// `(VmRSS, VmHWM)` in KiB.
fn rss_kib() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let hvo_on = match args.get(1).map(String::as_str) {
        Some("on") => true,
        Some("off") => false,
        _ => return Err("usage: pool_rss off|on [MEM] [POOL]".into()),
    };
    let mem = args.get(2).cloned().unwrap_or_else(|| "64G".into());
    let pool = args.get(3).cloned().unwrap_or_else(|| "32G".into());
    let pool_bytes = mmlab_engine::addr::memparse(&pool)?;
    let count = pool_bytes >> 21;
    let t = std::time::Instant::now();
    let m = mmlab_harness::stack::Stack::boot_machine(MachineConfig::with(&mem, 1)?)
        .map(mmlab_harness::stack::Stack::into_machine)?;
    let pa = PageAllocator::boot(&m, AllocatorConfig::default())?;
    let cpu = m.cpu(0)?;
    let hvo = HvoConfig {
        hugetlb_optimize_vmemmap: hvo_on,
        rcu: RcuPolicy::V6_12,
        arm64: if hvo_on { Arm64Hvo::Unsafe } else { Arm64Hvo::Off },
    };
    let mut ht = Hugetlb::new(&pa, HugetlbConfig::with_hvo(hvo));
    let print = |step, ht: &Hugetlb<'_, '_>, t: std::time::Instant| {
        let (vm_rss_kib, vm_hwm_kib) = rss_kib();
        let c = ht.hvo().counts();
        let s = Step {
            step,
            hvo: hvo_on,
            mem: mem.clone(),
            nr_hugepages: ht.hstate().nr_huge_pages,
            vmemmap_pages_freed: c.vmemmap_pages_freed,
            vmemmap_pages_allocated: c.vmemmap_pages_allocated,
            vm_rss_kib,
            vm_hwm_kib,
            seconds: t.elapsed().as_secs_f64(),
        };
        println!("{}", serde_json::to_string(&s).unwrap_or_default());
    };
    print("boot", &ht, t);
    let t = std::time::Instant::now();
    ht.set_max_huge_pages(&cpu, count)?;
    print("grow", &ht, t);
    let t = std::time::Instant::now();
    ht.set_max_huge_pages(&cpu, 0)?;
    print("shrink", &ht, t);
    pa.check_invariants()?;
    Ok(())
}
