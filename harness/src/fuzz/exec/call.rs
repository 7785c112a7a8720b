//! The executor's side of a step: running the call against the library
//! and updating the model from what really happened.
//!
//! [`Executor::run`] resolves the op's handle references to pfns and
//! addresses, makes the call on the op's CPU, and records the objects it
//! bound or freed; a successful page-table call is followed by a walk of
//! the kernel tables that must find the translation the call promised
//! ([`Executor::expect_translation`]).

use super::{Executor, Obj, Unit, scratch_slot, scratch_va, show_pa};
use crate::fuzz::op::{Call, Handle, Op, Ref, Sysctl};
use crate::fuzz::oracle::{Outcome, ViolationKind};
use mmlab_engine::{PAGE_SIZE, Pfn};

impl<'a, 'm> Executor<'a, 'm> {
    /// Execute the call and update the model; (outcome, detail).
    pub(super) fn run(&mut self, op: &Op) -> (Outcome, String) {
        let cpu_i = op.cpu;
        // A `foreign` op runs on the other machine's CPU (raw.rs).
        macro_rules! cpu {
            () => {
                match &self.foreign {
                    Some(other) if cpu_i == crate::fuzz::op::FOREIGN_CPU => other,
                    _ => &self.cpus[cpu_i % self.cpus.len()],
                }
            };
        }
        match &op.call {
            Call::AllocPages { order, gfp, out } => match self.pa.try_alloc_pages(cpu!(), *gfp, *order) {
                Ok(pfn) => {
                    self.bind(*out, Obj::Pages(vec![Unit { pfn, order: *order, refs: 1, live: true }]));
                    (Outcome::Ok, self.ok_detail(format_args!("pfn {pfn}")))
                }
                Err(e) => (e.into(), e.to_string()),
            },
            Call::AllocPagesBulk { nr, gfp, out } => {
                let mut arr = vec![None; *nr as usize];
                let n = self.pa.alloc_pages_bulk(cpu!(), *gfp, &mut arr);
                let units: Vec<Unit> =
                    arr.iter().flatten().map(|&pfn| Unit { pfn, order: 0, refs: 1, live: true }).collect();
                if units.len() != n {
                    return (Outcome::Panic, format!("alloc_pages_bulk returned {n} but filled {}", units.len()));
                }
                if units.is_empty() && *nr > 0 {
                    return (Outcome::NoMemory, "no page".to_string());
                }
                self.bind(*out, Obj::Pages(units));
                (Outcome::Ok, self.ok_detail(format_args!("{n} pages")))
            }
            Call::FreePages { page, order } => {
                let Some(pfn) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.pa.free_pages(cpu!(), pfn, *order) {
                    Ok(()) => {
                        self.freed(pfn);
                        (Outcome::Ok, self.ok_detail(format_args!("pfn {pfn}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::ReleasePages { page } => {
                let units: Vec<Unit> = self.units(*page).cloned().unwrap_or_default();
                for u in units.iter().filter(|u| u.live) {
                    if let Err(e) = self.pa.free_pages(cpu!(), u.pfn, u.order) {
                        return (e.into(), e.to_string());
                    }
                    self.freed(u.pfn);
                }
                (Outcome::Ok, String::new())
            }
            Call::GetPage { page } => {
                let Some(pfn) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.pa.get_page(pfn) {
                    Ok(n) => {
                        if let Some((h, i)) = self.live_unit_at(pfn)
                            && let Some(u) = self.units_mut(h)
                        {
                            u[i].refs += 1;
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("refcount {n}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::SplitPage { page, order } => {
                let Some(pfn) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.pa.split_page(pfn, *order) {
                    Ok(()) => {
                        if let Some((h, i)) = self.live_unit_at(pfn)
                            && let Some(u) = self.units_mut(h)
                            && u[i].order > 0
                        {
                            let head = u[i];
                            self.touched.push((h, super::Touch::All));
                            let Some(u) = self.units_mut(h) else { return (Outcome::Ok, String::new()) };
                            *u = (0..1u64 << head.order)
                                .map(|k| Unit { pfn: head.pfn.add(k), order: 0, refs: 1, live: true })
                                .collect();
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("pfn {pfn}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::DrainLocalPages => {
                self.pa.drain_local_pages(cpu!());
                (Outcome::Ok, String::new())
            }
            Call::DrainAllPages => {
                self.pa.drain_all_pages(cpu!());
                (Outcome::Ok, String::new())
            }
            Call::DecayPcpHigh => {
                let more = self.pa.decay_pcp_high(cpu!());
                (Outcome::Ok, if more { "more to do".to_string() } else { String::new() })
            }
            Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v)) => {
                match self.pa.set_percpu_pagelist_high_fraction(*v) {
                    Ok(()) => (Outcome::Ok, String::new()),
                    Err(e) => (e.clone().into(), e.to_string()),
                }
            }
            Call::Sysctl(Sysctl::MinFreeKbytes(v)) => match self.pa.set_min_free_kbytes(*v) {
                Ok(()) => (Outcome::Ok, String::new()),
                Err(e) => (e.clone().into(), e.to_string()),
            },
            Call::Vmalloc { size, out }
            | Call::Vzalloc { size, out }
            | Call::VmallocHuge { size, out, .. }
            | Call::VmallocNode { size, out, .. } => {
                let cpu = cpu!();
                let r = match &op.call {
                    Call::Vmalloc { .. } => self.vm.vmalloc(cpu, *size),
                    Call::Vzalloc { .. } => self.vm.vzalloc(cpu, *size),
                    Call::VmallocHuge { gfp, .. } => self.vm.vmalloc_huge(cpu, *size, *gfp),
                    Call::VmallocNode { align, gfp, .. } => self.vm.__vmalloc_node(cpu, *size, *align, *gfp),
                    _ => unreachable!("matched above"),
                };
                match r {
                    Ok(addr) => {
                        self.bind(*out, Obj::Vmalloc { addr, size: *size, live: true, kvfree_pending: false });
                        (Outcome::Ok, self.ok_detail(format_args!("{addr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::Vfree { area } | Call::KvfreeRcu { area } => {
                let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
                let kv = matches!(op.call, Call::KvfreeRcu { .. });
                let r = if kv { self.vm.kvfree_rcu(cpu!(), addr) } else { self.vm.vfree(cpu!(), addr) };
                match r {
                    Ok(()) => {
                        if let Some(h) = area.handle()
                            && let Some(Obj::Vmalloc { live, kvfree_pending, addr: a, .. }) = self.handles.get_mut(&h)
                            && *a == addr
                        {
                            *live = false;
                            *kvfree_pending = kv;
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("{addr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::Vmap { pages, out } | Call::VmMapRam { pages, out } => {
                let pfns: Vec<Pfn> = pages.iter().filter_map(|p| self.pfn_of(p)).collect();
                let ram = matches!(op.call, Call::VmMapRam { .. });
                let r = if ram {
                    self.vm.vm_map_ram(cpu!(), &pfns)
                } else {
                    self.vm.vmap(cpu!(), &pfns, mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL)
                };
                match r {
                    Ok(addr) => {
                        let o = if ram {
                            Obj::MapRam { addr, count: pfns.len() as u64, live: true }
                        } else {
                            Obj::Vmap { addr, live: true }
                        };
                        self.bind(*out, o);
                        (Outcome::Ok, self.ok_detail(format_args!("{addr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::Vunmap { area } => {
                let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
                match self.vm.vunmap(cpu!(), addr) {
                    Ok(()) => {
                        if let Some(h) = area.handle()
                            && let Some(Obj::Vmap { live, .. }) = self.handles.get_mut(&h)
                        {
                            *live = false;
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("{addr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::VmUnmapRam { area, count } => {
                let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
                let Ok(n) = usize::try_from(*count) else { return (Outcome::TooLarge, String::new()) };
                match self.vm.vm_unmap_ram(cpu!(), addr, n) {
                    Ok(()) => {
                        if let Some(h) = area.handle()
                            && let Some(Obj::MapRam { live, count: c, .. }) = self.handles.get_mut(&h)
                            && *c == *count
                        {
                            *live = false;
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("{addr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::AllocPercpu { size, align, out } => {
                match self.percpu.alloc_percpu(self.vm, &self.cpus[cpu_i % self.cpus.len()], *size, *align) {
                    Ok(ptr) => {
                        self.bind(*out, Obj::Percpu { ptr, live: true });
                        (Outcome::Ok, self.ok_detail(format_args!("{ptr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::FreePercpu { ptr } => {
                let Some(addr) = self.area_addr(ptr) else { return (Outcome::Skipped, String::new()) };
                match self.percpu.free_percpu(self.vm, &self.cpus[cpu_i % self.cpus.len()], addr) {
                    Ok(()) => {
                        if let Some(h) = ptr.handle()
                            && let Some(Obj::Percpu { live, .. }) = self.handles.get_mut(&h)
                        {
                            *live = false;
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("{addr:#x}")))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::KvfreeRcuBarrier => match self.vm.kvfree_rcu_barrier(cpu!()) {
                Ok(()) => {
                    for o in self.handles.values_mut() {
                        if let Obj::Vmalloc { kvfree_pending, .. } = o {
                            *kvfree_pending = false;
                        }
                    }
                    (Outcome::Ok, String::new())
                }
                Err(e) => (e.into(), e.to_string()),
            },
            Call::PurgeVmapAreaLazy => match self.vm.purge_vmap_area_lazy(cpu!()) {
                Ok(did) => (Outcome::Ok, if did { "purged".to_string() } else { String::new() }),
                Err(e) => (e.into(), e.to_string()),
            },
            Call::MapRange { page, out } => {
                let Some((h, i)) = self.unit_of(page) else { return (Outcome::Skipped, String::new()) };
                let Some(u) = self.units(h).map(|u| u[i]) else { return (Outcome::Skipped, String::new()) };
                let (pa, pages) = (u.pfn.phys().0, 1u64 << u.order);
                let va = scratch_va(scratch_slot(*out, self.opts.lane, self.opts.lanes), pages);
                let asp = self.m.kernel_as();
                let flags = mmlab_engine::arch::arm64::pgtable::MapFlags { block: true, cont: true };
                let prot = mmlab_engine::arch::arm64::pgtable::desc::PAGE_KERNEL;
                let r = mmlab_engine::arch::arm64::pgtable::map_range(
                    cpu!(),
                    &asp,
                    self.pa,
                    va,
                    pa,
                    pages * PAGE_SIZE,
                    prot,
                    flags,
                );
                match r {
                    Ok(flush) => {
                        flush.flush(cpu!());
                        self.bind_table(*out, va, pa, pages)
                    }
                    Err(e) => {
                        // A failed map_range must leave nothing mapped.
                        self.expect_translation(va, None);
                        (e.into(), e.to_string())
                    }
                }
            }
            Call::UnmapRange { map } => {
                let (h, k) = match *map {
                    Ref::Whole(h) => (h, 0),
                    Ref::Offset(h, k) => (h, k),
                    _ => return (Outcome::Skipped, String::new()),
                };
                let Some(&Obj::Table { va, pa, pages, .. }) = self.handles.get(&h) else {
                    return (Outcome::Skipped, String::new());
                };
                let start = va + k * PAGE_SIZE;
                let size = pages.saturating_sub(k) * PAGE_SIZE;
                let asp = self.m.kernel_as();
                match mmlab_engine::arch::arm64::pgtable::unmap_range(cpu!(), &asp, start, size) {
                    Ok(flush) => {
                        flush.flush(cpu!());
                        if let Some(Obj::Table { live, pages, .. }) = self.handles.get_mut(&h) {
                            // The head stays mapped after a cut at page k.
                            *pages = k;
                            *live = k > 0;
                        }
                        self.expect_translation(start, None);
                        (Outcome::Ok, self.ok_detail(format_args!("{start:#x}")))
                    }
                    Err(e) => {
                        // Refused: still mapped as before.
                        self.expect_translation(va, Some(pa));
                        (e.into(), e.to_string())
                    }
                }
            }
            Call::Vrealloc { area, size, gfp } => self.run_vrealloc(cpu_i, area, *size, *gfp),
            Call::SetMemory { how, addr, off, nr } => self.run_set_memory(cpu_i, *how, addr, *off, *nr),
            Call::HugetlbStore { .. }
            | Call::HugetlbReserve { .. }
            | Call::HugetlbUnreserve { .. }
            | Call::AllocHugetlbFolio { .. }
            | Call::FreeHugeFolio { .. } => self.run_hugetlb(cpu_i, &op.call),
            Call::Hvo { .. } | Call::PfnWalker { .. } => self.run_hvo(cpu_i, &op.call),
            Call::MapRangeAt { .. }
            | Call::SetContPtes { .. }
            | Call::PciRemapIospace { .. }
            | Call::DmaRemap { .. } => self.run_raw(cpu_i, &op.call),
            Call::Check => (Outcome::Ok, String::new()),
        }
    }

    /// Walk the kernel tables for `va`: it must translate to `want`
    /// (None: no translation); else a late page-table violation.
    pub(super) fn expect_translation(&mut self, va: u64, want: Option<u64>) {
        let got = mmlab_engine::arch::arm64::pgtable::walk(self.m, &self.m.kernel_as(), va).leaf.map(|l| l.pa.0);
        if got != want && self.late.is_none() {
            self.late = Some((
                ViolationKind::PageTable,
                format!("va {va:#x} translates to {}, expected {}", show_pa(got), show_pa(want)),
            ));
        }
    }

    /// A mapping of `pages` from `va` to `pa` made: bound to `out` (a `t`
    /// handle), its first and last pages translating as promised.
    pub(super) fn bind_table(&mut self, out: Handle, va: u64, pa: u64, pages: u64) -> (Outcome, String) {
        self.bind(out, Obj::Table { va, pa, pages, live: true });
        for k in [0, pages - 1] {
            self.expect_translation(va + k * PAGE_SIZE, Some(pa + k * PAGE_SIZE));
        }
        (Outcome::Ok, self.ok_detail(format_args!("{va:#x} -> {pa:#x}, {pages} pages")))
    }

    /// A successful free of `pfn`: drop one of the fuzzer's references.
    pub(super) fn freed(&mut self, pfn: Pfn) {
        if let Some((h, i)) = self.live_unit_at(pfn) {
            self.touched.push((h, super::Touch::Unit(i)));
            let Some(u) = self.units_mut(h) else { return };
            if u[i].refs > 1 {
                // __free_pages with another reference: the upper halves go,
                // the head stays allocated at order 0.
                u[i].refs -= 1;
                u[i].order = 0;
            } else {
                u[i].live = false;
                u[i].refs = 0;
            }
        }
    }
}
