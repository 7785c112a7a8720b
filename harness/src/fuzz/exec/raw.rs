//! The executor's side of the calls below vmalloc (`map_range ... va=`,
//! `set_cont_ptes`, `pci_remap_iospace`, `dma_common_contiguous_remap`)
//! and of ops on a CPU handle of another machine (`foreign`).
//!
//! Each of these but a `pci_remap_iospace` of a free window the fuzzer
//! picked (a `t` mapping) is a wrong call: the oracle names the one typed
//! error the call must return, from the executor's model and the page
//! tables as they are, in the order the library checks; an instance that
//! would succeed (and so change a machine the fuzzer does not model
//! there) is skipped. A refused call must change nothing: the snapshot,
//! and the translation that was there (a live mapping's first page, the
//! PCI I/O window's).
//!
//! # The other machine
//!
//! `foreign` ops need a CPU handle of a machine other than the fuzzed one.
//! One is booted once per process ([`OTHER`]: the smallest RAM, 64 CPUs),
//! and each executor that runs a `foreign` op claims one of its CPUs
//! until it is dropped; with all 64 claimed (64 executors at once), the
//! op is skipped. No call on it ever reaches the other machine: every
//! entry point refuses a foreign handle first (`ForeignCpu`).
//!
//! Fidelity: the checks are the library's own order (pgtable `map_range`:
//! range, address space, then the walk; `set_cont_ptes`: alignment, then
//! the slots; `pci_remap_iospace`: size, window, then the tables;
//! `dma_common_contiguous_remap`: count, then each frame).

use super::expect::{Expect, only, skipped, succeeds};
use super::{Executor, Obj};
use crate::fuzz::op::{Call, FOREIGN_CPU, Op, Ref};
use crate::fuzz::oracle::Outcome;
use crate::stack::Stack;
use mmlab_engine::arch::arm64::memory::{IO_SPACE_LIMIT, PCI_IO_START};
use mmlab_engine::arch::arm64::pgtable::desc::{CONT_PTE_SIZE, PAGE_KERNEL};
use mmlab_engine::arch::arm64::pgtable::{self, Level, MapFlags};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Cpu, MachineConfig, PAGE_SIZE, Pfn, PhysAddr};
use std::sync::OnceLock;

/// The machine whose CPU handles `foreign` ops use (None if it could not
/// boot, and then every `foreign` op is skipped).
static OTHER: OnceLock<Option<Stack>> = OnceLock::new();

/// A CPU handle of [`OTHER`] no one else holds.
pub(super) fn other_cpu() -> Option<Cpu<'static>> {
    let other =
        OTHER.get_or_init(|| Stack::boot_machine(MachineConfig::with("16M", 64).ok()?).ok()).as_ref()?.machine();
    (0..other.nr_cpus()).find_map(|i| other.cpu(i).ok())
}

/// The caller named by `dma_common_contiguous_remap`'s area.
const DMA_REMAP_CALLER: &str = "dma_common_contiguous_remap+0x9c/0xd0";

impl<'a, 'm> Executor<'a, 'm> {
    /// The acceptable outcomes of an op on another machine's CPU: the one
    /// error every entry point the generator aims it at returns first, if
    /// the op is otherwise one the executor would run.
    pub(super) fn expect_foreign(&self, op: &Op, own: Expect) -> Expect {
        if self.foreign.is_none() || own.allowed == [Outcome::Skipped] {
            return skipped();
        }
        match op.call {
            Call::AllocPages { .. }
            | Call::FreePages { .. }
            | Call::Vmalloc { .. }
            | Call::Vzalloc { .. }
            | Call::VmallocHuge { .. }
            | Call::VmallocNode { .. }
            | Call::Vfree { .. }
            | Call::Vunmap { .. }
            | Call::Vmap { .. }
            | Call::VmMapRam { .. }
            | Call::PurgeVmapAreaLazy => only(Outcome::ForeignCpu),
            _ => skipped(),
        }
    }

    /// Claim a CPU of the other machine before the first `foreign` op.
    pub(super) fn claim_foreign(&mut self, op: &Op) {
        if op.cpu == FOREIGN_CPU && self.foreign.is_none() {
            self.foreign = other_cpu();
        }
    }

    /// The translation of `va` in the kernel's tables (its pa), if any.
    fn translation(&self, va: u64) -> Option<u64> {
        pgtable::walk(self.m, &self.m.kernel_as(), va).leaf.map(|l| l.pa.0)
    }

    /// The address a `map_range ... va=` names: a raw one, or K pages into a
    /// live mapping (then also the pa mapped there).
    fn map_at(&self, va: &Ref) -> Option<(u64, Option<u64>)> {
        let (h, k) = match *va {
            Ref::Raw(v) => return Some((v, None)),
            Ref::Whole(h) => (h, 0),
            Ref::Offset(h, k) => (h, k),
            Ref::Unit(..) => return None,
        };
        match self.handles.get(&h) {
            Some(&Obj::Table { va, pa, pages, live: true }) if k < pages => {
                Some((va + k * PAGE_SIZE, Some(pa + k * PAGE_SIZE)))
            }
            _ => None,
        }
    }

    /// The acceptable outcomes of a raw call (module documentation).
    pub(super) fn expect_raw(&self, call: &Call) -> Expect {
        match call {
            Call::MapRangeAt { page, va } => {
                let unit = self.unit_of(page).and_then(|(h, i)| self.units(h).map(|u| u[i]));
                let (Some(u), Some((va, mapped))) = (unit.filter(|u| u.live), self.map_at(va)) else {
                    return skipped();
                };
                let size = PAGE_SIZE << u.order;
                if !va.is_multiple_of(PAGE_SIZE) || va.checked_add(size - 1).is_none() {
                    return only(Outcome::BadRange);
                }
                if !self.m.kernel_as().covers(va, va + (size - 1)) {
                    return only(Outcome::OutsideAddressSpace);
                }
                // A live mapping of other memory: its leaf must not be
                // replaced without a break (a raw kernel address is never
                // mapped over).
                match mapped {
                    Some(pa) if pa != u.pfn.phys().0 => only(Outcome::BreakBeforeMake),
                    _ => skipped(),
                }
            }
            Call::SetContPtes { ptep, va, pa } => {
                let slot = ((ptep % PAGE_SIZE) / 8) as usize;
                if !(va | pa).is_multiple_of(CONT_PTE_SIZE) || Level::Pte.index(*va) != slot {
                    only(Outcome::ContAlignment)
                } else if self.m.arena().try_word(PhysAddr(*ptep)).is_none() {
                    only(Outcome::OutsideRam)
                } else {
                    skipped()
                }
            }
            Call::PciRemapIospace { port, size, phys, out } => {
                if self.is_live(*out) {
                    return skipped();
                }
                if *size == 0 {
                    return only(Outcome::ZeroSize);
                }
                let last = port.checked_add(size - 1);
                if !(port | size | phys).is_multiple_of(PAGE_SIZE) || last.is_none_or(|l| l > IO_SPACE_LIMIT) {
                    return only(Outcome::BadRequest);
                }
                // Over a live window with other memory: refused whole. A
                // window the fuzzer maps must be free (at most 64 pages
                // looked at; the boot's, port 0, is never taken).
                let pages = size / PAGE_SIZE;
                match self.translation(PCI_IO_START + port) {
                    Some(pa) if pa != *phys => only(Outcome::Map),
                    None if *port > 0
                        && pages <= 64
                        && (1..pages).all(|i| self.translation(PCI_IO_START + port + i * PAGE_SIZE).is_none()) =>
                    {
                        succeeds(&[Outcome::Ok, Outcome::NoMemory])
                    }
                    _ => skipped(),
                }
            }
            Call::DmaRemap { page, count } => {
                if *count == 0 {
                    return only(Outcome::ZeroSize);
                }
                let Some(first) = self.pfn_of(page) else { return skipped() };
                let not_allocated = |p: Pfn| {
                    !self.m.memmap().pfn_valid(p)
                        || match self.m.page(p).ext() {
                            PageExt::Alloc(..) => false,
                            PageExt::Tail => self.pa.check_allocated(p).is_err(),
                            PageExt::Buddy(_) | PageExt::Pcp(_) | PageExt::Reserved => true,
                        }
                };
                if (0..(*count).min(64)).any(|i| not_allocated(first.add(i))) {
                    only(Outcome::PageNotAllocated)
                } else {
                    skipped()
                }
            }
            _ => skipped(),
        }
    }

    /// Make a raw call on `cpu_i`'s CPU; (outcome, detail). After a refusal
    /// the translation that was there must still be there.
    pub(super) fn run_raw(&mut self, cpu_i: usize, call: &Call) -> (Outcome, String) {
        let cpu = &self.cpus[cpu_i % self.cpus.len()];
        match call {
            Call::MapRangeAt { page, va } => {
                let unit = self.unit_of(page).and_then(|(h, i)| self.units(h).map(|u| u[i]));
                let (Some(u), Some((va, was))) = (unit, self.map_at(va)) else {
                    return (Outcome::Skipped, String::new());
                };
                let flags = MapFlags { block: true, cont: true };
                let asp = self.m.kernel_as();
                let r = pgtable::map_range(
                    cpu,
                    &asp,
                    self.pa,
                    va,
                    u.pfn.phys().0,
                    PAGE_SIZE << u.order,
                    PAGE_KERNEL,
                    flags,
                );
                match r {
                    Ok(flush) => {
                        flush.flush(cpu);
                        (Outcome::Ok, format!("mapped {va:#x}"))
                    }
                    Err(e) => {
                        if let Some(pa) = was {
                            self.expect_translation(va, Some(pa));
                        }
                        (e.into(), e.to_string())
                    }
                }
            }
            Call::SetContPtes { ptep, va, pa } => {
                match pgtable::set_cont_ptes(cpu, PhysAddr(*ptep), *va, *pa, PAGE_KERNEL) {
                    Ok(()) => (Outcome::Ok, format!("wrote {ptep:#x}")),
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::PciRemapIospace { port, size, phys, out } => {
                let va = PCI_IO_START + port;
                let was = self.translation(va);
                match self.vm.pci_remap_iospace(cpu, *port, *size, *phys) {
                    Ok(()) => self.bind_table(*out, va, *phys, size / PAGE_SIZE),
                    Err(e) => {
                        // Refused: what was mapped there still is.
                        self.expect_translation(va, was);
                        (e.into(), e.to_string())
                    }
                }
            }
            Call::DmaRemap { page, count } => {
                let Some(first) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.vm.dma_common_contiguous_remap(cpu, first, *count, DMA_REMAP_CALLER) {
                    Ok(addr) => (Outcome::Ok, format!("mapped at {addr:#x}")),
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            _ => (Outcome::Skipped, String::new()),
        }
    }
}
