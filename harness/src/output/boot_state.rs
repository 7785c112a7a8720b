//! `mmlab stat boot-state`: which parts of the machine are emulated boot
//! state (`boot.state=real`, [`mmlab_engine::mm::boot_state`]), rendered
//! from the engine's typed report; and the one-line note every other
//! `stat` prints on stderr, so that a /proc file keeps the kernel's layout
//! while its reader still learns what produced it.

use mmlab_engine::Machine;
use mmlab_engine::arch::arm64::pgtable::ptdump::size_str;
use mmlab_engine::mm::boot_state::BootState;
use std::fmt::Write as _;

/// What is not emulated of a real boot, as `stat boot-state` lists it.
pub const NOT_EMULATED: &str = "the boot's slab objects and page cache as such (their pages are replayed, not \
     what they hold); the boot's timing (the page allocator's work runs after its initcalls and before the end of \
     boot, vmalloc's after it, not interleaved); the per-CPU lzo and lzorle contexts (kmalloc'd when a compression \
     first runs on a CPU, which depends on the boot's timing)";

/// The one-line note (for stderr) of the boot state machine `m` runs on.
pub fn note(m: &Machine) -> String {
    let b = m.boot_state();
    match (b.in_force, &b.reason) {
        (BootState::Real, _) => {
            let names: Vec<&str> = b.reservations.iter().map(|r| r.name).fold(Vec::new(), |mut v, n| {
                if !v.contains(&n) {
                    v.push(n);
                }
                v
            });
            format!(
                "mmlab: emulated boot state (boot.state=real): {} reserved in memblock; {} kernel-image vmalloc areas; \
                 `stat boot-state` lists them, --set boot.state=bare leaves them out",
                names.join(", "),
                b.kernel_vmas.len()
            )
        }
        (BootState::Bare, Some(why)) => format!("mmlab: {why}"),
        (BootState::Bare, None) => {
            "mmlab: bare boot state (boot.state=bare): no emulated boot reservations".to_string()
        }
    }
}

/// `stat boot-state`: the labelled section, with what the page allocator's
/// replay of the boot's own allocations and vmalloc's boot areas left.
pub fn render(m: &Machine, pa: &mmlab_pcp::PageAllocator<'_>, vm: &mmlab_vmalloc::Vmalloc<'_, '_>) -> String {
    let b = m.boot_state();
    let mut s = String::new();
    let _ = writeln!(s, "boot state: {} (boot.state={})", b.in_force.name(), b.requested.name());
    if let Some(why) = &b.reason {
        let _ = writeln!(s, "note: {why}");
    }
    match &b.kernel_image {
        Some(k) => {
            let _ = writeln!(
                s,
                "kernel image: Debian arm64 7.2.13 at {:#x}-{:#x} ({}), mapped at {:#x}",
                k.phys,
                k.end(),
                size_str(k.size()),
                k.va(k.phys)
            );
        }
        None => {
            let _ = writeln!(s, "kernel image: not in RAM");
        }
    }
    if !b.reservations.is_empty() {
        let _ = writeln!(s, "\nemulated early reservations (memblock), in the kernel's order:");
        let w = b.reservations.iter().map(|r| r.name.len()).max().unwrap_or(0).max(8);
        let _ = writeln!(s, "{:<w$} {:<37} {:>9} {:>9}  {:<58}  fidelity", "owner", "range", "size", "freed", "kernel");
        for r in &b.reservations {
            let _ = writeln!(
                s,
                "{:<w$} {:#018x}-{:#018x} {:>9} {:>9}  {:<58}  {}",
                r.name,
                r.base,
                r.base + r.size,
                size_str(r.size),
                if r.freed_at_end_of_boot > 0 { size_str(r.freed_at_end_of_boot) } else { "-".to_string() },
                r.kernel,
                r.fidelity
            );
        }
    }
    if let Some((pfn, pages)) = m.cma_area() {
        let _ = writeln!(
            s,
            "\nCMA area: {} at {:#018x} (pfn {:#x}, {pages} pages), kept out of memblock_free_all(); \
             {} pages handed out by cma_alloc() (dma_atomic_pool_init())",
            size_str(pages * mmlab_engine::PAGE_SIZE),
            pfn.0 << mmlab_engine::PAGE_SHIFT,
            pfn.0,
            pa.cma_allocated_pages()
        );
    }
    if !b.kernel_vmas.is_empty() {
        let _ = writeln!(s, "\nkernel image vmalloc areas (declare_kernel_vmas(), first in /proc/vmallocinfo):");
        for v in &b.kernel_vmas {
            let _ = writeln!(
                s,
                "0x{:016x}-0x{:016x} {:>8} {:<18} phys={:#018x}{}",
                v.addr,
                v.addr + v.size,
                v.size,
                v.segment,
                v.phys_addr,
                if v.no_guard { " VM_NO_GUARD" } else { "" }
            );
        }
    }
    if b.in_force == BootState::Real {
        work_sections(&mut s, pa, vm);
        let _ = writeln!(s, "\nnot emulated: {NOT_EMULATED}");
    }
    s
}

/// The page allocator's boot work and vmalloc's boot areas, rule by rule.
fn work_sections(s: &mut String, pa: &mmlab_pcp::PageAllocator<'_>, vm: &mmlab_vmalloc::Vmalloc<'_, '_>) {
    let w = pa.boot_work();
    let bm = pa.boot_machine();
    let _ = writeln!(
        s,
        "\nboot work (pcp/src/boot_work.rs: a real 4G/1-CPU boot's page allocations and frees with the rules of \
         this machine: {} CPUs, nr_kernel_pages {}, {} memory blocks): {} allocations ({} failed), {} frees; \
         pgalloc {}, pgfree {}, {} pages held by the boot's kernel memory",
        bm.cpus,
        bm.nr_kernel_pages,
        bm.memory_blocks,
        w.allocations,
        w.failed,
        w.frees,
        w.pages_allocated,
        w.pages_freed,
        w.held_pages
    );
    let _ = writeln!(s, "{:<32} {:>6} {:>6}  {:<62}  formula; fidelity", "rule", "allocs", "pages", "kernel");
    for r in pa.boot_rules() {
        let _ = writeln!(
            s,
            "{:<32} {:>6} {:>6}  {:<62}  {}; {}",
            r.rule, r.allocations, r.pages, r.kernel, r.formula, r.fidelity
        );
    }
    let v = vm.boot_work();
    if v == mmlab_vmalloc::VmallocBootWork::default() {
        return;
    }
    let _ = writeln!(
        s,
        "\nboot vmalloc areas (vmalloc/src/boot.rs: a real 16G/4-CPU boot's areas and task stacks with the rules \
         of this machine): {} areas ({} failed), {} vmalloc pages; stacks {} vmalloc'd, {} reused from the \
         stack cache, {} left cached, {} vfree'd (unpurged); ioremaps {} ({} unmapped); DMA pool pages {}, \
         percpu chunk pages {}",
        v.areas,
        v.failed,
        v.vmalloc_pages,
        v.stacks,
        v.stacks_reused,
        v.stacks_cached,
        v.stacks_freed,
        v.ioremaps,
        v.iounmaps,
        v.dma_pool_pages,
        v.percpu_pages
    );
    let _ = writeln!(s, "{:<16} {:>6} {:>6}  {:<62}  formula", "rule", "areas", "pages", "kernel");
    for r in vm.boot_rules() {
        let _ = writeln!(s, "{:<16} {:>6} {:>6}  {:<62}  {}", r.rule, r.areas, r.pages, r.kernel, r.formula);
    }
    let _ = writeln!(s, "areas by caller (/proc/vmallocinfo):");
    for (caller, n, pages) in areas_by_caller(vm) {
        let _ = writeln!(s, "  {n:>4} {caller:<40} {pages:>6} pages");
    }
}

/// /proc/vmallocinfo's lines counted by caller (the `%pS` name without the
/// offset; `unpurged vm_area` for the lazily freed ranges), with their
/// `pages=`, in the order of first appearance.
pub fn areas_by_caller(vm: &mmlab_vmalloc::Vmalloc<'_, '_>) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for line in vm.vmallocinfo().lines() {
        let mut f = line.split_whitespace().skip(2);
        let caller = match f.next() {
            Some("unpurged") => "unpurged vm_area".to_string(),
            Some(c) => c.split('+').next().unwrap_or(c).to_string(),
            None => continue,
        };
        let pages: u64 = line.split_whitespace().find_map(|w| w.strip_prefix("pages=")?.parse().ok()).unwrap_or(0);
        match out.iter_mut().find(|(c, ..)| *c == caller) {
            Some(e) => {
                e.1 += 1;
                e.2 += pages;
            }
            None => out.push((caller, 1, pages)),
        }
    }
    out
}
