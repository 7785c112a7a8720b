//! Generating the wrong calls below vmalloc and on another machine's CPU
//! (op/raw.rs, exec/raw.rs):
//!
//! - `map_range_remap`: map a live unit at a live mapping's address
//!   (`BreakBeforeMake`);
//! - `map_range_outside`: map it at a user address, or an unaligned one
//!   (`OutsideAddressSpace`, `BadRange`);
//! - `set_cont_ptes_bad`: a contiguous run at a slot outside RAM, or with
//!   an address off the 64 KiB grid (`OutsideRam`, `ContAlignment`);
//! - `pci_remap_iospace_again`: map RAM over a PCI I/O window the fuzzer
//!   mapped with a right call ([`Generator::pci_remap_iospace`], drawn
//!   with the map_range calls), or a bad window (`Map`, `BadRequest`,
//!   `ZeroSize`);
//! - `dma_remap_unallocated`: `dma_common_contiguous_remap` of frames the
//!   fuzzer freed, or the reserved frame (`PageNotAllocated`);
//! - `foreign_cpu`: an allocation or free made with a CPU handle of another
//!   machine (`ForeignCpu`).
//!
//! No wrong call changes the generator's model: each must be refused.

use super::{Generator, Source, pick, unit_ref};
use crate::fuzz::op::{Call, FOREIGN_CPU, HandleKind, Op, Ref};
use mmlab_engine::{Gfp, PAGE_SIZE};

/// `VIRT_PCIE_PIO`'s base: a boot that maps the virt machine's I/O window
/// maps port 0 to it.
const PIO_PHYS: u64 = 0x3eff_0000;
/// The I/O ports of one window; the fuzzer maps in windows 1 to
/// [`MAX_PIO`] (window 0 is the boot's, on a machine whose boot maps it).
const PIO_WINDOW: u64 = 0x1_0000;
/// Windows the fuzzer maps at once, at most.
const MAX_PIO: u64 = 4;

impl Generator {
    /// `pci_remap_iospace` of 1 to 8 pages of a window not mapped yet
    /// (ports 64K to 320K), to device memory below RAM: a `t` mapping,
    /// unmapped by `unmap_range` as by `pci_unmap_iospace()`.
    pub(super) fn pci_remap_iospace(&mut self, s: &mut dyn Source) -> Option<Option<Call>> {
        let w = 1 + s.below(MAX_PIO)?;
        let port = w * PIO_WINDOW;
        if self.pio.iter().any(|p| p.1 == port) {
            return Some(None);
        }
        let order = s.below(4)? as u32;
        let out = self.handle(HandleKind::Table);
        self.tables.push((out, order));
        self.pio.push((out, port));
        Some(Some(Call::PciRemapIospace { port, size: PAGE_SIZE << order, phys: 0x1000_0000 + port, out }))
    }

    /// A wrong call of `kind` of this module, or None if there is nothing
    /// to build it on.
    pub(super) fn wrong_raw(&mut self, s: &mut dyn Source, cpu: usize, kind: &str) -> Option<Option<Op>> {
        let live_unit = |g: &Generator, s: &mut dyn Source| -> Option<Option<Ref>> {
            let Some(i) = g.live_page_index(s)? else { return Some(None) };
            let u = g.pick_live_unit(s, i)?;
            Some(Some(unit_ref(&g.pages[i], u)))
        };
        let call = match kind {
            "map_range_remap" => {
                let Some((t, order)) = pick(s, &self.tables)? else { return Some(None) };
                let Some(page) = live_unit(self, s)? else { return Some(None) };
                let k = s.below(1 << order)?;
                Call::MapRangeAt { page, va: if k == 0 { Ref::Whole(t) } else { Ref::Offset(t, k) } }
            }
            "map_range_outside" => {
                let Some(page) = live_unit(self, s)? else { return Some(None) };
                let va = [0x1000, 0x0000_ffff_ffff_f000, 0xffff_8000_1000_0800][s.below(3)? as usize];
                Call::MapRangeAt { page, va: Ref::Raw(va) }
            }
            "set_cont_ptes_bad" => {
                // Slot 0 of a table page outside RAM (below 0x40000000),
                // and a VA of PTE index 0 or off the grid.
                let ptep = [0x1000, 0x3fff_f000][s.below(2)? as usize];
                let va = 0xffff_8000_0800_0000 + [0, PAGE_SIZE][s.below(2)? as usize];
                let pa = 0x4000_0000 + [0, PAGE_SIZE][s.below(2)? as usize];
                Call::SetContPtes { ptep, va, pa }
            }
            "pci_remap_iospace_again" => {
                // RAM over a window of ours (or over the boot's, port 0,
                // on a machine whose boot maps it), or a bad window.
                let ours = pick(s, &self.pio)?.map(|(_, port)| port);
                let (port, size, phys) = match s.below(4)? {
                    0 | 1 => (ours.unwrap_or(0), PAGE_SIZE, 0x4000_0000),
                    2 => (1, PAGE_SIZE, PIO_PHYS),
                    _ => (PIO_WINDOW, 0, PIO_PHYS),
                };
                Call::PciRemapIospace { port, size, phys, out: self.handle(HandleKind::Table) }
            }
            "dma_remap_unallocated" => {
                let count = 1 + s.below(4)?;
                let page = match (pick(s, &self.dead_pages)?, self.cfg.reserved_pfn) {
                    (Some((h, _)), _) if s.below(2)? == 0 => Ref::Whole(h),
                    (_, Some(pfn)) => Ref::Raw(pfn),
                    (Some((h, _)), None) => Ref::Whole(h),
                    (None, None) => return Some(None),
                };
                Call::DmaRemap { page, count }
            }
            "foreign_cpu" => {
                let call = match s.below(5)? {
                    0 => Call::AllocPages {
                        order: s.below(4)? as u32,
                        gfp: Gfp::GFP_KERNEL,
                        out: self.handle(HandleKind::Pages),
                    },
                    1 => {
                        let Some(i) = self.live_page_index(s)? else { return Some(None) };
                        let u = self.pick_live_unit(s, i)?;
                        let p = &self.pages[i];
                        Call::FreePages { page: unit_ref(p, u), order: p.units[u].0 }
                    }
                    2 => Call::Vmalloc { size: PAGE_SIZE * (1 + s.below(8)?), out: self.handle(HandleKind::Vmalloc) },
                    3 => {
                        let Some((h, _)) = pick(s, &self.vmallocs)? else { return Some(None) };
                        Call::Vfree { area: Ref::Whole(h) }
                    }
                    _ => Call::PurgeVmapAreaLazy,
                };
                return Some(Some(Op::new(FOREIGN_CPU, call)));
            }
            _ => return Some(None),
        };
        Some(Some(Op::new(cpu, call)))
    }
}
