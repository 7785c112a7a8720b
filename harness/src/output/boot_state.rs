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
pub const NOT_EMULATED: &str = "ioremaps and the other vmalloc areas (the boot's vmalloc pages are replayed, not \
     its areas), and what the page allocator hands out after boot's replay (slab, stacks, page cache)";

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
/// replay of the boot's own allocations left (`work`).
pub fn render(m: &Machine, work: &mmlab_pcp::BootWork) -> String {
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
            "\nCMA area: {} at {:#018x} (pfn {:#x}, {pages} pages), kept out of memblock_free_all()",
            size_str(pages * mmlab_engine::PAGE_SIZE),
            pfn.0 << mmlab_engine::PAGE_SHIFT,
            pfn.0
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
        let _ = writeln!(
            s,
            "\nboot work (pcp/src/boot_work.rs: a real 4G/2-CPU boot's page allocations and frees, replayed; \
             instrumented): {} allocations ({} failed), {} frees, {} pages held by the boot's kernel memory",
            work.allocations, work.failed, work.frees, work.held_pages
        );
        let _ = writeln!(s, "\nnot emulated: {NOT_EMULATED}");
    }
    s
}
