//! The text and JSON of `mmlab hugetlb`: laid out from the typed
//! [`HugetlbReport`], nothing computed that the numbers depend on.
//!
//! One block per write: the write, the file read back and the hstate's
//! files, the time (measured host time and modelled time on separate
//! lines, the modelled time split by what it models), then the counters in
//! four groups: HVO, the modelled effects (grace periods, TLBIs, barriers),
//! the page allocator, and the folios' own work (compound tails prepared
//! and cleared; for gigantic folios the contiguous-range search, refcount
//! freezes and page-by-page frees). A group whose counters are all zero is
//! left out.

use super::{HugetlbReport, Modelled, OpCounters, WriteResult};
use mmlab_engine::arch::arm64::barrier::{ish, ishst};
use std::fmt::Write as _;

/// Milliseconds with three decimals.
pub fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// `name value` pairs whose value is not 0, joined; `None` if all are 0.
fn nonzero(pairs: &[(&str, u64)]) -> Option<String> {
    let parts: Vec<String> = pairs.iter().filter(|(_, v)| *v != 0).map(|(n, v)| format!("{n} {v}")).collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The modelled time, split.
pub fn modelled_line(m: &Modelled) -> String {
    format!(
        "{} (grace periods {}, TLBIs {}, barriers {})",
        ms(m.total_ns),
        ms(m.grace_period_ns),
        ms(m.tlbi_ns),
        ms(m.barrier_ns)
    )
}

/// The counter lines of one operation, each `  <group> <counters>`.
pub fn counter_lines(c: &OpCounters) -> Vec<String> {
    let h = &c.hvo;
    let hvo = nonzero(&[
        ("folios optimized", h.folios_optimized),
        ("restored", h.folios_restored),
        ("vmemmap pages freed", h.vmemmap_pages_freed),
        ("allocated", h.vmemmap_pages_allocated),
        ("PMD splits", h.vmemmap_pmd_splits),
        ("flush_tlb_all", h.flush_tlb_all),
        (
            "range flushes",
            h.flush_tlb_kernel_range_split + h.flush_tlb_kernel_range_remap + h.flush_tlb_kernel_range_bbm,
        ),
        ("remote CPU pauses", h.remote_cpu_pauses),
        ("BBM violations", h.bbm_violations),
        ("ENOMEM", h.optimize_enomem + h.restore_enomem),
    ]);
    let b = &c.barriers;
    let effects = nonzero(&[
        ("synchronize_rcu", c.rcu.synchronize_rcu),
        ("grace periods", c.rcu.grace_periods),
        ("TLBIs", c.tlbi.total()),
        ("barriers", b.total()),
        ("dsb(ish)", b.dsb_count(ish)),
        ("dsb(ishst)", b.dsb_count(ishst)),
        ("isb", b.isb),
    ]);
    let v = &c.vm;
    let pages = nonzero(&[
        ("buddy allocs", v.buddy_alloc),
        ("buddy merges", v.buddy_merge),
        ("pcp refills", v.pcp_refill),
        ("refill pages", v.pcp_refill_pages),
        ("pcp drains", v.pcp_drain),
        ("drain pages", v.pcp_drain_pages),
        ("free_one_page pages", v.free_one_page_pages),
        ("zone lock", v.zone_lock_acquire),
    ]);
    let g = &c.hugetlb;
    let s = &c.contig;
    let folios = nonzero(&[
        ("contig ranges scanned", s.ranges_scanned),
        ("struct pages read", s.pages_scanned),
        ("pages prepped", s.pages_prepped),
        ("tails prepped", g.compound_tails_prepped),
        ("tails cleared", g.compound_tails_cleared),
        ("refs frozen", g.gigantic_refs_frozen),
        ("order-0 frees", g.contig_order0_frees),
        ("folio_put", g.gigantic_folio_puts),
    ]);
    [("hvo", hvo), ("cost", effects), ("pages", pages), ("folios", folios)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("  {k:<8} {v}")))
        .collect()
}

fn write_block(s: &mut String, w: &WriteResult) {
    let _ = writeln!(s, "{}={}", w.write.file, w.write.value);
    let f = &w.sysfs;
    let files = format!(
        "nr_hugepages {} free {} resv {} surplus {} overcommit {}",
        f.nr_hugepages, f.free_hugepages, f.resv_hugepages, f.surplus_hugepages, f.nr_overcommit_hugepages
    );
    match (&w.error, &w.read_back, &w.outcome) {
        (Some(e), _, _) => {
            let _ = writeln!(s, "  error    {e}");
        }
        (None, Some(r), _) => {
            let _ = writeln!(s, "  reads    {r:<12} ({files})");
        }
        (None, None, Some(o)) => {
            let _ = writeln!(s, "  demoted  {:<12} ({files})", o.demoted);
        }
        (None, None, None) => {}
    }
    if let Some(t) = &w.demote_target {
        let _ =
            writeln!(s, "  into     {} nr_hugepages {} free {}", t.size.sysfs_name(), t.nr_hugepages, t.free_hugepages);
    }
    let _ = writeln!(s, "  measured {} host time", ms(w.measured_ns));
    let _ = writeln!(s, "  modelled {}", modelled_line(&w.modelled));
    for l in counter_lines(&w.counters) {
        let _ = writeln!(s, "{l}");
    }
}

/// The report as text.
pub fn text(r: &HugetlbReport) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let c = &r.config;
    let _ = writeln!(
        s,
        "# mmlab hugetlb: {} MiB RAM, {} CPUs, writes on CPU 0; cost profile {} (barrier backend {}; TLBIs and grace periods modelled, a grace period is {})",
        m.mem_bytes >> 20,
        m.nr_cpus,
        m.cost_profile,
        m.barrier_backend,
        ms(m.grace_period_ns)
    );
    let _ = writeln!(
        s,
        "# hugetlb.gigantic={} hugetlb.demote={} hugetlb_optimize_vmemmap={} hugetlb_vmemmap.rcu={} hugetlb_vmemmap.arm64={} default_hugepagesz={}",
        c.gigantic.name(),
        c.demote.name(),
        if c.hvo.hugetlb_optimize_vmemmap { "on" } else { "off" },
        c.hvo.rcu.name(),
        c.hvo.arm64.name(),
        c.default_hugepagesz
    );
    if r.boot_pools.iter().any(|&n| n > 0) {
        let pools: Vec<String> = mmlab_hugetlb::HugePageSize::ALL
            .iter()
            .zip(r.boot_pools)
            .filter(|(_, n)| *n > 0)
            .map(|(sz, n)| format!("{} {n}", sz.sysfs_name()))
            .collect();
        let _ = writeln!(s, "# boot-time pools (hugepages=): {}", pools.join(", "));
    }
    let _ = writeln!(s, "# measured: host time of the emulation; modelled: the cost profile's charges, never measured");
    for w in &r.writes {
        write_block(&mut s, w);
    }
    if !r.writes.is_empty() {
        s.push('\n');
    }
    s.push_str(&r.meminfo.to_string());
    s
}

/// The report as one line of JSON.
pub fn json(r: &HugetlbReport) -> String {
    crate::output::json::to_line(r)
}
