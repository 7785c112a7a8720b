//! The invariant checks after each op and at the end of a run.
//!
//! [`Executor::check`] runs what CONFIG_DEBUG_VM, page_owner and the page
//! table checks would, and page conservation; [`Executor::release_all`]
//! and [`Executor::finish`] free everything the fuzzer holds and require
//! the buddy to have every page back (module docs of [`super`]).

use super::index::AddrIndex;
use super::{Executor, Obj};
use crate::fuzz::op::Handle;
use crate::fuzz::oracle::{Violation, ViolationKind};
use mmlab_engine::arch::arm64::pgtable::{DescKind, Level};
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{Machine, PAGE_SIZE, Pfn};
use mmlab_vmalloc::VM_ALLOC;

impl<'a, 'm> Executor<'a, 'm> {
    /// Live handles.
    pub fn live_handles(&self) -> usize {
        self.handles.keys().filter(|h| self.is_live(**h)).count()
    }

    /// Pages the fuzzer holds.
    pub fn held_pages(&self) -> u64 {
        self.handles
            .values()
            .map(|o| match o {
                Obj::Pages(u) => u.iter().filter(|u| u.live).map(|u| 1u64 << u.order).sum(),
                _ => 0,
            })
            .sum()
    }

    /// Page-table pages the page allocator handed out, reachable from
    /// swapper_pg_dir.
    pub fn pgtable_pages(&self) -> u64 {
        fn visit(m: &Machine, table: mmlab_engine::PhysAddr, level: Level, n: &mut u64) {
            if matches!(m.page(table.pfn()).ext(), PageExt::Alloc(..)) {
                *n += 1;
            }
            let Some(next) = level.next() else { return };
            for slot in mmlab_engine::arch::arm64::pgtable::TableMemory::table(m, table) {
                let d = mmlab_engine::arch::arm64::pgtable::Desc(slot.load(std::sync::atomic::Ordering::Relaxed));
                if d.kind(level) == DescKind::Table {
                    visit(m, mmlab_engine::PhysAddr(d.addr()), next, n);
                }
            }
        }
        let mut n = 0;
        let k = self.m.kernel_as();
        visit(self.m, k.pgd(), k.root_level(), &mut n);
        n
    }

    /// The invariant checks (see the module documentation).
    /// The address index against the handle table it is kept from (a
    /// harness defect if they differ: the oracle would be wrong).
    fn check_addr_index(&self) -> Result<(), Violation> {
        let mut fresh = AddrIndex::default();
        for (h, o) in &self.handles {
            fresh.set(*h, o.addr_key());
        }
        if self.live_addrs.agrees(&fresh) {
            return Ok(());
        }
        let diff = self.live_addrs.differences(&fresh);
        Err(Violation {
            kind: ViolationKind::HandleState,
            op_index: None,
            op_name: None,
            message: format!(
                "the executor's address index is out of step with its handles (handle, indexed, in the table): \
                 {:x?}",
                &diff[..diff.len().min(4)]
            ),
        })
    }

    pub fn check(&self) -> Result<(), Violation> {
        let v = |kind, message| Err(Violation { kind, op_index: None, op_name: None, message });
        if let Err(e) = self.pa.check_invariants() {
            return v(ViolationKind::Invariant, e);
        }
        if let Err(e) = self.vm.check().and_then(|()| self.percpu.check(self.vm)) {
            return v(ViolationKind::VmallocCheck, e);
        }
        self.check_hugetlb()?;
        self.check_linear_map()?;
        self.check_hvo()?;
        self.check_addr_index()?;
        for (h, o) in &self.handles {
            if let Obj::Pages(units) = o {
                for u in units.iter().filter(|u| u.live) {
                    let p = self.m.page(u.pfn);
                    let ok = matches!(p.ext(), PageExt::Alloc(o, _) if u32::from(o) == u.order);
                    if !ok || p.refcount() != u.refs {
                        return v(
                            ViolationKind::HandleState,
                            format!(
                                "{h}: pfn {} held at order {} with {} references is {:?} with refcount {}",
                                u.pfn,
                                u.order,
                                u.refs,
                                p.ext(),
                                p.refcount()
                            ),
                        );
                    }
                }
            }
        }
        let mem = self.m.memmap();
        let mut allocated = 0u64;
        // A head's tails are skipped (as PFN walkers skip a compound page):
        // the tail struct pages of an HVO-optimized folio read as copies of
        // the head page's vmemmap page, fake heads.
        let mut pfn = mem.start_pfn().0;
        while pfn < mem.end_pfn().0 {
            if mem.pfn_valid(Pfn(pfn))
                && let PageExt::Alloc(o, _) = self.m.page(Pfn(pfn)).ext()
            {
                allocated += 1 << o;
                pfn += 1 << o;
            } else {
                pfn += 1;
            }
        }
        let free = self.pa.nr_free_pages();
        let pcp = self.pa.pcp_pages();
        let managed = self.pa.managed_pages();
        if free + pcp + allocated as i64 != managed as i64 {
            return v(
                ViolationKind::Conservation,
                format!("free {free} + pcp {pcp} + allocated {allocated} != managed {managed}"),
            );
        }
        let held = self.held_pages();
        let mut vmalloc = 0u64;
        self.vm.for_each_area(|a| {
            if a.flags.contains(VM_ALLOC) {
                vmalloc += a.pages.len() as u64;
            }
        });
        let tables = self.pgtable_pages();
        // Percpu chunks hold their units' pages themselves (mm/percpu-vm.c).
        let percpu = self.percpu.nr_pages();
        // The boot's own kernel memory (boot.state=real) is allocated too:
        // the page allocator's boot work, and the DMA pools' and percpu
        // chunk's pages of vmalloc's boot work (outside any area's pages).
        let boot = self.pa.boot_work().held_pages + self.vm.boot_work().pages_outside_areas();
        let hugetlb = self.hugetlb_pages();
        if held + vmalloc + percpu + tables + boot + hugetlb != allocated {
            return v(
                ViolationKind::Conservation,
                format!(
                    "allocated {allocated} != held {held} + vmalloc {vmalloc} + percpu {percpu} + page tables \
                     {tables} + boot {boot} + hugetlb {hugetlb}"
                ),
            );
        }
        Ok(())
    }

    /// Free everything the fuzzer holds, shrink percpu, wait for
    /// kvfree_rcu, purge the lazy areas, drain every pcp, then shrink the
    /// hugetlb pools to nothing.
    pub fn release_all(&mut self) -> Result<(), Violation> {
        let v = |kind, message| Err(Violation { kind, op_index: None, op_name: None, message });
        // Callers give pages their permissions back before freeing them.
        if let Err(e) = self.restore_linear_map() {
            return v(ViolationKind::LinearMap, format!("restoring permissions at the end: {e}"));
        }
        let mut handles: Vec<(Handle, Obj)> = self.handles.iter().map(|(h, o)| (*h, o.clone())).collect();
        handles.sort_unstable_by_key(|(h, _)| *h);
        let cpu = &self.cpus[0];
        for (h, o) in handles {
            let r: Result<(), String> = match o {
                Obj::Pages(units) => {
                    let mut r = Ok(());
                    for u in units.iter().filter(|u| u.live) {
                        let mut order = u.order;
                        for _ in 0..u.refs {
                            if let Err(e) = self.pa.free_pages(cpu, u.pfn, order) {
                                r = Err(e.to_string());
                            }
                            order = 0;
                        }
                    }
                    r
                }
                Obj::Vmalloc { addr, live: true, .. } => self.vm.vfree(cpu, addr).map_err(|e| e.to_string()),
                Obj::Vmap { addr, live: true } => self.vm.vunmap(cpu, addr).map_err(|e| e.to_string()),
                Obj::MapRam { addr, count, live: true } => {
                    self.vm.vm_unmap_ram(cpu, addr, count as usize).map_err(|e| e.to_string())
                }
                Obj::Percpu { ptr, live: true } => {
                    self.percpu.free_percpu(self.vm, cpu, ptr).map_err(|e| e.to_string())
                }
                Obj::Table { va, pages, live: true, .. } => {
                    mmlab_engine::arch::arm64::pgtable::unmap_range(cpu, &self.m.kernel_as(), va, pages * PAGE_SIZE)
                        .map(|f| f.flush(cpu))
                        .map_err(|e| e.to_string())
                }
                _ => Ok(()),
            };
            if let Err(e) = r {
                return v(ViolationKind::FinalState, format!("freeing {h} at the end: {e}"));
            }
        }
        if let Err(e) = self.percpu.shrink(self.vm, cpu) {
            return v(ViolationKind::FinalState, format!("percpu shrink: {e}"));
        }
        if let Err(e) = self.vm.kvfree_rcu_barrier(cpu) {
            return v(ViolationKind::FinalState, format!("kvfree_rcu_barrier: {e}"));
        }
        self.vm.purge_vmap_area_lazy(cpu).expect("the fuzzer drives its own machine's CPUs");
        self.pa.drain_all_pages(cpu);
        // The pools shrink last: restoring an optimized folio's vmemmap
        // allocates, and while the run's other memory is held that may
        // fail for real, which keeps the folio in its pool as surplus (as
        // update_and_free_pages_bulk() does) and is no defect.
        if let Err(e) = self.release_hugetlb() {
            return v(ViolationKind::FinalState, format!("hugetlb at the end: {e}"));
        }
        self.handles.clear();
        self.live_pfns.clear();
        self.live_addrs.clear();
        self.dead.clear();
        // The pools' frees and the restores' allocations went through the
        // pcp lists.
        self.pa.drain_all_pages(&self.cpus[0]);
        Ok(())
    }

    /// Free everything the fuzzer holds, wait for kvfree_rcu, purge, drain,
    /// and check that memory came back. Returns the first violation.
    pub fn finish(&mut self) -> Result<(), Violation> {
        let v = |kind, message| Err(Violation { kind, op_index: None, op_name: None, message });
        self.check()?;
        self.release_all()?;
        self.check()?;
        let tables = self.pgtable_pages();
        let mut vmalloc = 0u64;
        self.vm.for_each_area(|a| vmalloc += a.pages.len() as u64);
        // What the boot's own allocations hold stays (boot.state=real).
        // And the vmemmap pages HVO allocated to restore folios (the pools
        // are empty now).
        let boot = self.pa.boot_work().held_pages + self.vm.boot_work().pages_outside_areas() + self.hugetlb_pages();
        let free = self.pa.nr_free_pages() as u64;
        let managed = self.pa.managed_pages();
        if self.pa.pcp_pages() != 0 || free + tables + vmalloc + boot != managed {
            return v(
                ViolationKind::FinalState,
                format!(
                    "after freeing everything: buddy {free} + page tables {tables} + vmalloc left {vmalloc} + boot \
                     {boot} != managed {managed} (pcp {})",
                    self.pa.pcp_pages()
                ),
            );
        }
        // HVO gives boot memmap pages to the buddy and restores folios with
        // pages from it: the memmap moved, so the free pages are as many
        // but not where they were.
        let memmap_moved = self.hugetlb.as_ref().is_some_and(|h| h.hvo().counts().vmemmap_boot_pages_freed > 0);
        if tables == 0 && vmalloc == 0 && !memmap_moved && self.pa.zone().nr_free_per_order() != self.boot_buddyinfo {
            return v(
                ViolationKind::FinalState,
                format!("buddyinfo {:?} != post-boot {:?}", self.pa.zone().nr_free_per_order(), self.boot_buddyinfo),
            );
        }
        Ok(())
    }
}
