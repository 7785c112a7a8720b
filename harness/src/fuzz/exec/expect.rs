//! The oracle's tables: for an op and the executor's model of what the
//! fuzzer holds, the outcomes the library may return.
//!
//! [`Executor::expect`] answers, per call, from the handle table alone:
//! a free of a live unit must succeed; a double free, a free at the wrong
//! order or of an address never handed out must fail with the typed error
//! the kernel's checks would raise (and change nothing, which the executor
//! then checks against a snapshot); a call on memory someone else now
//! holds is skipped. The outcome kinds themselves and the violations are
//! [`crate::fuzz::oracle`]'s.

mod allowed;

pub(super) use allowed::Expect;
pub(super) use allowed::{errors, only, skipped, succeeds};

use super::{Executor, Obj, Unit, scratch_slot};
use crate::fuzz::op::{Call, Handle, HandleKind, Op, Ref, Sysctl};
use crate::fuzz::oracle::Outcome;
use mmlab_engine::mm::page::PageExt;
use mmlab_engine::{PAGE_SIZE, Pfn};
use mmlab_vmalloc::percpu::{PCPU_MIN_ALLOC_SIZE, PCPU_MIN_UNIT_SIZE};

impl<'a, 'm> Executor<'a, 'm> {
    /// Acceptable outcomes of a page call on `pfn` that is not a live unit
    /// of ours: from the frame's state; Skipped if someone else holds it.
    fn foreign_pfn(&self, pfn: Pfn, order: u32) -> Expect {
        if order > mmlab_engine::MAX_PAGE_ORDER {
            return only(Outcome::OrderTooLarge);
        }
        if !self.m.memmap().pfn_valid(pfn) {
            return only(Outcome::InvalidPfn);
        }
        match self.m.page(pfn).ext() {
            PageExt::Alloc(..) => skipped(),
            PageExt::Buddy(_) | PageExt::Pcp(_) => errors(&[Outcome::DoubleFree, Outcome::NotAllocated]),
            PageExt::Tail => only(Outcome::NotAllocated),
            PageExt::Reserved => only(Outcome::Reserved),
        }
    }

    /// Acceptable outcomes of a call on an area address. `kind` is the
    /// handle kind the call frees; `op` names the call.
    pub(super) fn area_expect(&self, r: &Ref, kind: HandleKind) -> Expect {
        let Some(addr) = self.area_addr(r) else { return skipped() };
        let h = r.handle();
        let obj = h.and_then(|h| self.handles.get(&h));
        let offset = matches!(r, Ref::Offset(_, k) if *k > 0);
        match obj {
            Some(o) if !offset && self.is_live(h.unwrap_or(Handle { kind, id: 0 })) => {
                let right = match o {
                    Obj::Vmalloc { .. } => HandleKind::Vmalloc,
                    Obj::Vmap { .. } => HandleKind::Vmap,
                    Obj::MapRam { .. } => HandleKind::MapRam,
                    Obj::Percpu { .. } => HandleKind::Percpu,
                    Obj::Pages(_) | Obj::Table { .. } | Obj::HugeFolio { .. } | Obj::Resv { .. } => return skipped(),
                };
                if right == kind {
                    only(Outcome::Ok)
                } else if right == HandleKind::MapRam || right == HandleKind::Percpu || kind == HandleKind::Percpu {
                    // Cross-kind calls on vm_map_ram blocks and percpu
                    // chunks are not modelled.
                    skipped()
                } else {
                    only(Outcome::WrongKind)
                }
            }
            Some(Obj::Vmalloc { live: true, size, .. }) if offset => {
                let off = if let Ref::Offset(_, k) = *r { k } else { 0 };
                if off < *size && kind != HandleKind::Percpu { only(Outcome::InsideArea) } else { skipped() }
            }
            Some(Obj::Vmalloc { kvfree_pending: true, live: false, .. }) if !offset && kind == HandleKind::Vmalloc => {
                // Queued by kvfree_rcu: freeing it again is a double free,
                // unless the address was reused after the grace period, by
                // a handle or by an area of the library's own (the page
                // array of a large vmalloc is vmalloc'd itself); freeing
                // that one would be the caller's bug, as in the kernel.
                if self.held_live(addr) || !self.vm.kvfree_queued(addr) && self.addr_in_use(addr) {
                    skipped()
                } else {
                    errors(&[Outcome::DoubleFree, Outcome::NotVmalloc, Outcome::InsideArea])
                }
            }
            _ => {
                if self.addr_in_use(addr) {
                    return skipped();
                }
                if kind == HandleKind::Percpu {
                    return only(Outcome::NotPercpu);
                }
                errors(&[Outcome::DoubleFree, Outcome::NotVmalloc, Outcome::InsideArea])
            }
        }
    }

    /// The acceptable outcomes of `op`.
    pub(super) fn expect(&self, op: &Op) -> Expect {
        let own = self.expect_own(op);
        if op.cpu == crate::fuzz::op::FOREIGN_CPU { self.expect_foreign(op, own) } else { own }
    }

    /// The acceptable outcomes of `op` on a CPU of the machine.
    fn expect_own(&self, op: &Op) -> Expect {
        use Outcome as O;
        let alloc_ok = succeeds(&[O::Ok, O::NoMemory, O::NoVmapSpace]);
        let bind_free = |h: &Handle| !self.is_live(*h);
        match &op.call {
            Call::AllocPages { order, out, .. } => {
                if !bind_free(out) {
                    skipped()
                } else if *order > mmlab_engine::MAX_PAGE_ORDER {
                    only(O::OrderTooLarge)
                } else {
                    succeeds(&[O::Ok, O::NoMemory])
                }
            }
            Call::AllocPagesBulk { out, .. } => {
                if bind_free(out) {
                    succeeds(&[O::Ok, O::NoMemory])
                } else {
                    skipped()
                }
            }
            Call::FreePages { page, order } => {
                if let Some((h, i)) = self.unit_of(page) {
                    let Some(u) = self.units(h).and_then(|u| u.get(i)).copied() else {
                        return skipped();
                    };
                    if u.live {
                        if *order > mmlab_engine::MAX_PAGE_ORDER {
                            return only(O::OrderTooLarge);
                        }
                        if *order == u.order && self.perms_changed(u.pfn, 1 << u.order) {
                            // Read-only or executable: the caller's bug (pageattr.rs).
                            return skipped();
                        }
                        return if *order == u.order { only(O::Ok) } else { only(O::WrongOrder) };
                    }
                    return self.foreign_pfn(u.pfn, *order);
                }
                let Some(pfn) = self.pfn_of(page) else { return skipped() };
                if let Some((h, i)) = self.live_unit_at(pfn) {
                    let u = self.units(h).map(|u| u[i]);
                    return match u {
                        Some(_) if *order > mmlab_engine::MAX_PAGE_ORDER => only(O::OrderTooLarge),
                        Some(u) if u.order == *order && self.perms_changed(u.pfn, 1 << u.order) => skipped(),
                        Some(u) if u.order == *order => only(O::Ok),
                        _ => only(O::WrongOrder),
                    };
                }
                self.foreign_pfn(pfn, *order)
            }
            Call::ReleasePages { page } => {
                if self.handle_perms_changed(*page) {
                    skipped()
                } else if self.units(*page).is_some_and(|u| u.iter().any(|u| u.live)) {
                    only(O::Ok)
                } else {
                    skipped()
                }
            }
            Call::GetPage { page } | Call::SplitPage { page, .. } => {
                let Some(pfn) = self.pfn_of(page) else { return skipped() };
                if let Some((h, i)) = self.live_unit_at(pfn) {
                    let u = self.units(h).map(|u| u[i]).unwrap_or(Unit { pfn, order: 0, refs: 1, live: true });
                    if let Call::SplitPage { order, .. } = op.call {
                        if u.refs != 1 || (order > 0 && self.units(h).is_some_and(|v| v.len() > 1)) {
                            return skipped();
                        }
                        return if order == u.order { only(O::Ok) } else { only(O::WrongOrder) };
                    }
                    return only(O::Ok);
                }
                if !self.m.memmap().pfn_valid(pfn) {
                    return only(O::InvalidPfn);
                }
                match self.m.page(pfn).ext() {
                    PageExt::Alloc(..) => skipped(),
                    _ => only(O::NotAllocated),
                }
            }
            Call::DrainLocalPages
            | Call::DrainAllPages
            | Call::DecayPcpHigh
            | Call::KvfreeRcuBarrier
            | Call::PurgeVmapAreaLazy
            | Call::Check => only(O::Ok),
            Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v)) => {
                if *v != 0 && *v < mmlab_pcp::MIN_PERCPU_PAGELIST_HIGH_FRACTION {
                    only(O::HighFraction)
                } else {
                    only(O::Ok)
                }
            }
            Call::Sysctl(Sysctl::MinFreeKbytes(v)) => {
                if *v > mmlab_pcp::MIN_FREE_KBYTES_MAX {
                    only(O::MinFreeKbytes)
                } else {
                    only(O::Ok)
                }
            }
            Call::Vmalloc { size, out }
            | Call::Vzalloc { size, out }
            | Call::VmallocHuge { size, out, .. }
            | Call::VmallocNode { size, out, .. } => {
                let align = if let Call::VmallocNode { align, .. } = op.call { align } else { 1 };
                if !bind_free(out) {
                    skipped()
                } else if *size == 0 {
                    only(O::ZeroSize)
                } else if !align.is_power_of_two() {
                    only(O::BadAlign)
                } else if *size > self.pa.managed_pages() * PAGE_SIZE {
                    only(O::TooLarge)
                } else if align > self.m.va_layout().vmalloc_end() - mmlab_engine::arch::arm64::memory::VMALLOC_START {
                    // No area of the vmalloc range can be that aligned.
                    only(O::NoVmapSpace)
                } else {
                    alloc_ok
                }
            }
            Call::Vmap { pages, out } | Call::VmMapRam { pages, out } => {
                if !bind_free(out) {
                    return skipped();
                }
                if pages.is_empty() {
                    return only(O::ZeroSize);
                }
                for p in pages {
                    let live = self.unit_of(p).and_then(|(h, i)| self.units(h).map(|u| u[i].live));
                    if live != Some(true) {
                        return skipped();
                    }
                }
                alloc_ok
            }
            Call::Vfree { area } => self.area_expect(area, HandleKind::Vmalloc),
            Call::KvfreeRcu { area } => self.area_expect(area, HandleKind::Vmalloc),
            Call::Vunmap { area } => self.area_expect(area, HandleKind::Vmap),
            Call::VmUnmapRam { area, count } => {
                let e = self.area_expect(area, HandleKind::MapRam);
                if e.allowed == [O::Ok] {
                    let right = match area.handle().and_then(|h| self.handles.get(&h)) {
                        Some(Obj::MapRam { count: c, .. }) => *c,
                        _ => 0,
                    };
                    if *count == 0 {
                        return only(O::ZeroSize);
                    }
                    if *count != right {
                        return errors(&[O::WrongCount, O::NotVmalloc, O::WrongKind, O::ZeroSize]);
                    }
                    return e;
                }
                if e.allowed == [O::Skipped] {
                    return e;
                }
                if *count == 0 {
                    return only(O::ZeroSize);
                }
                errors(&[O::NotVmalloc, O::DoubleFree, O::WrongCount, O::WrongKind, O::InsideArea])
            }
            Call::AllocPercpu { size, align, out } => {
                let align = (*align).max(PCPU_MIN_ALLOC_SIZE);
                if !bind_free(out) {
                    skipped()
                } else if *size == 0 || *size > PCPU_MIN_UNIT_SIZE || !align.is_power_of_two() || align > PAGE_SIZE {
                    only(O::BadRequest)
                } else {
                    succeeds(&[O::Ok, O::NoMemory, O::NoVmapSpace])
                }
            }
            Call::FreePercpu { ptr } => self.area_expect(ptr, HandleKind::Percpu),
            Call::MapRange { page, out } => {
                let live = self.unit_of(page).and_then(|(h, i)| self.units(h).map(|u| u[i].live));
                let slot = scratch_slot(*out, self.opts.lane, self.opts.lanes);
                let slot_busy = self.live_addrs.slot_busy(slot);
                if !bind_free(out) || live != Some(true) || slot_busy {
                    skipped()
                } else {
                    succeeds(&[O::Ok, O::NoMemory])
                }
            }
            Call::Vrealloc { area, size, .. } => self.expect_vrealloc(area, *size),
            Call::SetMemory { addr, off, nr, .. } => self.expect_set_memory(addr, *off, *nr),
            Call::HugetlbStore { .. }
            | Call::HugetlbReserve { .. }
            | Call::HugetlbUnreserve { .. }
            | Call::AllocHugetlbFolio { .. }
            | Call::FreeHugeFolio { .. } => self.expect_hugetlb(&op.call),
            Call::Hvo { .. } | Call::PfnWalker { .. } => self.expect_hvo(&op.call),
            Call::MapRangeAt { .. }
            | Call::SetContPtes { .. }
            | Call::PciRemapIospace { .. }
            | Call::DmaRemap { .. } => self.expect_raw(&op.call),
            Call::UnmapRange { map } => {
                let (h, k) = match *map {
                    Ref::Whole(h) => (h, 0),
                    Ref::Offset(h, k) => (h, k),
                    _ => return skipped(),
                };
                match self.handles.get(&h) {
                    Some(Obj::Table { live: true, .. }) if k == 0 => only(O::Ok),
                    // Part of a mapping made of contiguous runs (16 pages)
                    // or PMD blocks (512): refused unless the cut is on a
                    // run or block boundary.
                    Some(Obj::Table { pages, live: true, .. }) if *pages >= 16 && k < *pages => {
                        let granule = if *pages >= 512 { 512 } else { 16 };
                        if k % granule == 0 { only(O::Ok) } else { only(O::PartialHugeUnmap) }
                    }
                    _ => skipped(),
                }
            }
        }
    }
}
