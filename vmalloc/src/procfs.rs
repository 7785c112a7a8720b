//! The /proc files vmalloc prints, from its own data: /proc/vmallocinfo
//! (`vmalloc_info_show` in mm/vmalloc.c) and the Vmalloc lines of
//! /proc/meminfo (`meminfo_proc_show` in fs/proc/meminfo.c).
//!
//! /proc/vmallocinfo lists every busy area by address with its size, the
//! caller, `pages=` and the kind words (`vmalloc`, `vmap`, `vpages`) from
//! the area's `VM_*` flags, and `N0=` (pages per node; one node here); then
//! the vm_map_ram blocks and the lazily freed ("unpurged") areas, merged
//! into the same address order.

use crate::area::VM_ALLOC;
use crate::area::VM_MAP;
use crate::area::{VM_DMA_COHERENT, VM_IOREMAP};
use crate::counts::VmallocMeminfo;
use crate::lazy::LazyArea;
use crate::vmalloc::Vmalloc;
use crate::vmap_block::VMAP_BLOCK_SIZE;
use mmlab_engine::PAGE_SIZE;
use mmlab_engine::arch::arm64::memory::VMALLOC_START;
impl Vmalloc<'_, '_> {
    /// `/proc/vmallocinfo` (`vmalloc_info_show`): node by node, each
    /// node's busy areas and vm_map_ram blocks by address, then
    /// (`show_purge_info`) each node's lazily freed ("unpurged") areas by
    /// address. With more than one vmap node the file is therefore not in
    /// address order, as the kernel's is not.
    pub fn vmallocinfo(&self) -> String {
        use std::fmt::Write;
        let nodes = self.busy.len();
        let mut busy: Vec<Vec<(u64, String)>> = vec![Vec::new(); nodes];
        for a in self.areas() {
            let mut l = format!("0x{:016x}-0x{:016x} {:7} {}", a.addr, a.addr + a.size, a.size, a.caller);
            if !a.pages.is_empty() && a.flags.intersects(VM_ALLOC | VM_MAP) {
                let _ = write!(l, " pages={}", a.pages.len());
            }
            if let Some(pa) = a.phys_addr {
                let _ = write!(l, " phys={pa:#018x}");
            }
            if a.flags.contains(VM_IOREMAP) {
                l.push_str(" ioremap");
            }
            if a.flags.contains(VM_ALLOC) {
                l.push_str(" vmalloc");
            }
            if a.flags.contains(VM_MAP) {
                l.push_str(" vmap");
            }
            if a.flags.contains(VM_DMA_COHERENT) {
                l.push_str(" dma-coherent");
            }
            if a.array_area.is_some() {
                l.push_str(" vpages");
            }
            if a.flags.intersects(VM_ALLOC | VM_MAP) && !a.pages.is_empty() {
                let _ = write!(l, " N0={}", a.pages.len());
            }
            busy[self.node_of(a.addr)].push((a.addr, l));
        }
        for b in self.blocks.lock().values() {
            busy[self.node_of(b.va_start)].push((
                b.va_start,
                format!(
                    "0x{:016x}-0x{:016x} {:7} vm_map_ram",
                    b.va_start,
                    b.va_start + VMAP_BLOCK_SIZE,
                    VMAP_BLOCK_SIZE
                ),
            ));
        }
        let lazy = self.lazy.snapshot_by_node().into_iter().map(|list| {
            list.into_iter()
                .map(|LazyArea { start: st, size: n, .. }| {
                    (st, format!("0x{:016x}-0x{:016x} {:7} unpurged vm_area", st, st + n, n))
                })
                .collect::<Vec<_>>()
        });
        let mut s = String::new();
        for mut list in busy.into_iter().chain(lazy) {
            list.sort();
            for (_, l) in list {
                s.push_str(&l);
                s.push('\n');
            }
        }
        s
    }

    /// The Vmalloc lines of `/proc/meminfo` (`meminfo_proc_show`):
    /// VmallocTotal, VmallocUsed (pages of vmalloc areas), VmallocChunk (0).
    pub fn meminfo(&self) -> String {
        let v = self.meminfo_counts();
        format!(
            "VmallocTotal:   {:8} kB\nVmallocUsed:    {:8} kB\nVmallocChunk:   {:8} kB\n",
            v.vmalloc_total_kb, v.vmalloc_used_kb, v.vmalloc_chunk_kb
        )
    }

    /// The values of the Vmalloc lines of `/proc/meminfo` and of
    /// `nr_vmalloc` in /proc/vmstat: `vmalloc_nr_pages()`, the pages of
    /// `VM_ALLOC` areas.
    pub fn meminfo_counts(&self) -> VmallocMeminfo {
        let used: u64 = self.areas().iter().filter(|a| a.flags.contains(VM_ALLOC)).map(|a| a.pages.len() as u64).sum();
        VmallocMeminfo {
            vmalloc_total_kb: (self.vmalloc_end() - VMALLOC_START) >> 10,
            vmalloc_used_kb: used * (PAGE_SIZE >> 10),
            vmalloc_chunk_kb: 0,
            nr_vmalloc: used,
        }
    }
}
