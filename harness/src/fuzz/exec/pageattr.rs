//! `set_memory_ro/rw/nx/x` in the executor: the model of the linear map,
//! the outcomes the oracle accepts, the call, and the linear-map
//! invariant.
//!
//! # The model
//!
//! [`LinearModel`] holds, per pfn of the memmap, what the boot's linear
//! map gave it (the attribute bits of its leaf, without the output
//! address, the type and the contiguous bit; the size of the leaf or
//! contiguous run covering it) and the permissions the fuzzer's
//! successful `set_memory_*()` calls left (read-only, executable). The
//! boot layout is read once, when the executor starts, by a walk of the
//! linear map; after that the model changes only by the calls.
//!
//! # The oracle
//!
//! From the model alone, in the order `change_memory_common()` checks:
//! a start that is not page-aligned, below `PAGE_OFFSET`, or a range
//! past `PAGE_END` (or overflowing) is `BadRange`; a page of the range
//! the boot did not map is `NotMapped`; without a split mode
//! (`arm64.split_mode=none`, the default on CPUs without BBML2_NOABORT)
//! a boot block or contiguous run the range covers in part, or any
//! contiguous run, is `NotPageGranular` (nothing splits the linear map
//! then, so the boot layout is the layout). Such a refused call must
//! change nothing: the executor's snapshot, and the range's leaves (the
//! first 64 pages and the last, compared descriptor for descriptor).
//! Otherwise the call may succeed only on pages the fuzzer holds
//! (else it is skipped: the pages are someone else's), and with a split
//! mode, when an end of the range lies inside a block the boot mapped, it
//! may fail with `NoMemory` (a split's table comes from the page
//! allocator, `GFP_PGTABLE_KERNEL`; fail_page_alloc reaches it). After
//! any outcome every page of the range must still translate to its own
//! pfn with the model's permissions (a failed split leaves the splits it
//! made, which map the same).
//!
//! The kernel requires callers to give pages their permissions back
//! before freeing them (`set_memory_rw()` then free; vfree's
//! `vm_reset_perms()` for `VM_FLUSH_RESET_PERMS`): freeing a read-only
//! or executable page is a caller's bug with no defined result, so a free
//! of a unit whose pages the model has changed is skipped, and the
//! generator restores them first. At the end [`Executor::restore_linear_map`]
//! gives every changed page its boot permissions back, as the callers
//! would.
//!
//! # The invariant
//!
//! [`Executor::check_linear_map`] walks every leaf of `[PAGE_OFFSET,
//! PAGE_END)` (holes skipped a whole entry at a time): each leaf maps its
//! own linear-map address (`page_address(pfn)` = the VA, so no pfn is
//! mapped twice), each pfn the boot mapped is mapped (exactly once) with
//! its boot attributes and the model's permissions, and nothing else in
//! the memmap is mapped. About 16k leaves on a 64M machine.
//!
//! Fidelity: *faithful* to `change_memory_common()`'s checks as mmlab's
//! engine makes them (engine/src/arch/arm64/pageattr.rs, whose own
//! simplifications apply: linear-map ranges are taken, as
//! `set_direct_map_*()` takes them); *simplified*: the kernel's caller
//! contract on frees is enforced by skipping, not modelled.

use super::expect::{Expect, errors, only, skipped, succeeds};
use super::{Executor, LinearModel, Obj};
use crate::fuzz::op::{Ref, SetMemory};
use crate::fuzz::oracle::{Outcome, Violation, ViolationKind};
use mmlab_engine::arch::arm64::memory::{PAGE_END, PHYS_OFFSET};
use mmlab_engine::arch::arm64::pageattr::{self, SplitMode};
use mmlab_engine::arch::arm64::pgtable::desc::bits::{
    PTE_ADDR_MASK, PTE_CONT, PTE_PXN, PTE_RDONLY, PTE_TYPE_MASK, PTE_WRITE,
};
use mmlab_engine::arch::arm64::pgtable::{Desc, for_each_leaf};
use mmlab_engine::{Machine, PAGE_SIZE, Pfn};
use std::ops::ControlFlow;

/// The bits of a leaf the model keeps: all but the output address, the
/// type and the contiguous bit (a split changes those, not the mapping).
const ATTRS: u64 = !(PTE_ADDR_MASK | PTE_CONT | PTE_TYPE_MASK);
/// Permission bits of the model: read-only, executable.
const RO: u8 = 1;
const EXEC: u8 = 2;
/// A run of a boot leaf that is contiguous.
const CONT: u8 = 0x80;

/// The permissions a leaf's attributes say.
fn perm_of(attrs: u64) -> u8 {
    let ro = if attrs & PTE_RDONLY != 0 && attrs & PTE_WRITE == 0 { RO } else { 0 };
    let x = if attrs & PTE_PXN == 0 { EXEC } else { 0 };
    ro | x
}

/// `attrs` with the permissions `perm`.
fn with_perm(attrs: u64, perm: u8) -> u64 {
    let a = if perm & RO != 0 { (attrs & !PTE_WRITE) | PTE_RDONLY } else { (attrs & !PTE_RDONLY) | PTE_WRITE };
    if perm & EXEC != 0 { a & !PTE_PXN } else { a | PTE_PXN }
}

impl LinearModel {
    /// Read the boot's linear map; None if the machine has none.
    pub(super) fn new(m: &Machine) -> Option<LinearModel> {
        if !m.config().linear_map {
            return None;
        }
        let mem = m.memmap();
        let (start, end) = (mem.start_pfn().0, mem.end_pfn().0);
        let n = (end - start) as usize;
        let page_offset = m.va_layout().page_offset();
        let mut lm = LinearModel {
            start,
            boot: vec![0; n],
            span: vec![0; n],
            perm: vec![0; n],
            plain_end: Vec::new(),
            changed: 0,
            differs: bitvec::vec::BitVec::repeat(false, n),
            mode: m.config().split_mode(),
            page_offset,
        };
        let asp = m.kernel_as();
        for_each_leaf(m, &asp, lm.va_of(start), lm.va_of(end), |_, leaf| {
            let run = leaf.span();
            let code = (run.trailing_zeros() as u8 - 12) | if leaf.desc.is_cont() { CONT } else { 0 };
            let attrs = leaf.desc.0 & ATTRS;
            let first = leaf.desc.pfn();
            for k in 0..leaf.level.entry_size() / PAGE_SIZE {
                if let Some(i) = lm.index(first + k) {
                    (lm.boot[i], lm.span[i], lm.perm[i]) = (attrs, code, perm_of(attrs));
                }
            }
            ControlFlow::Continue(())
        });
        // As changed_in() asks it (a pfn the boot left unmapped has no
        // permissions, which differ from those of no attributes).
        for i in 0..n {
            lm.differs.set(i, lm.perm[i] != perm_of(lm.boot[i]));
        }
        // From the top down: a plain page's run ends where the next one's
        // does.
        lm.plain_end = vec![0; n];
        let mut until = n as u32;
        for i in (0..n).rev() {
            if lm.boot[i] == 0 || lm.span[i] != 0 {
                until = i as u32;
            }
            lm.plain_end[i] = until;
        }
        Some(lm)
    }

    fn index(&self, pfn: u64) -> Option<usize> {
        let i = usize::try_from(pfn.checked_sub(self.start)?).ok()?;
        (i < self.boot.len()).then_some(i)
    }

    /// `page_address()` of a pfn.
    fn va_of(&self, pfn: u64) -> u64 {
        ((pfn << 12) - PHYS_OFFSET) | self.page_offset
    }

    /// The pfn a linear-map address maps (`virt_to_pfn()`).
    fn pfn_at(&self, va: u64) -> u64 {
        (va - self.page_offset + PHYS_OFFSET) >> 12
    }

    /// Whether a page of `[pfn, pfn + n)` has other permissions than the
    /// boot gave it.
    pub(super) fn changed_in(&self, pfn: Pfn, n: u64) -> bool {
        if self.changed == 0 {
            return false;
        }
        // The part of the range inside the memmap.
        let lo = pfn.0.clamp(self.start, self.start + self.boot.len() as u64);
        let hi = pfn.0.saturating_add(n).clamp(lo, self.start + self.boot.len() as u64);
        self.differs[(lo - self.start) as usize..(hi - self.start) as usize].any()
    }

    fn set_perm(&mut self, i: usize, perm: u8) {
        let boot = perm_of(self.boot[i]);
        let was = self.perm[i] != boot;
        self.perm[i] = perm;
        self.differs.set(i, perm != boot);
        match (was, perm != boot) {
            (false, true) => self.changed += 1,
            (true, false) => self.changed -= 1,
            _ => {}
        }
    }

    /// The leaf attributes the model expects for pfn index `i`: the
    /// boot's, with the permissions the calls changed.
    fn expected(&self, i: usize) -> u64 {
        if self.perm[i] == perm_of(self.boot[i]) { self.boot[i] } else { with_perm(self.boot[i], self.perm[i]) }
    }
}

impl<'a, 'm> Executor<'a, 'm> {
    /// The address a set_memory call names.
    fn set_memory_addr(&self, r: &Ref, off: u64) -> Option<u64> {
        let lm = self.linear.as_ref()?;
        let a = match r {
            Ref::Raw(a) => *a,
            _ => lm.va_of(self.pfn_of(r)?.0),
        };
        Some(a.wrapping_add(off))
    }

    /// Whether a live unit of ours covers `pfn`; the pfn after that unit.
    fn owned_until(&self, pfn: u64) -> Option<u64> {
        (0..=mmlab_engine::MAX_PAGE_ORDER).find_map(|o| {
            let head = pfn & !((1u64 << o) - 1);
            let (h, i) = self.live_unit_at(Pfn(head))?;
            let u = self.units(h)?.get(i)?;
            (pfn < head + (1u64 << u.order)).then_some(head + (1u64 << u.order))
        })
    }

    /// The acceptable outcomes of `set_memory_*(addr + off, nr)`.
    pub(super) fn expect_set_memory(&self, addr: &Ref, off: u64, nr: u64) -> Expect {
        let Some(lm) = self.linear.as_ref() else { return skipped() };
        let Some(addr) = self.set_memory_addr(addr, off) else { return skipped() };
        let end = nr.checked_mul(PAGE_SIZE).and_then(|b| addr.checked_add(b));
        let Some(end) = end.filter(|&e| addr.is_multiple_of(PAGE_SIZE) && addr >= lm.page_offset && e <= PAGE_END)
        else {
            return only(Outcome::BadRange);
        };
        if nr == 0 {
            return only(Outcome::Ok);
        }
        let mut va = addr;
        while va < end {
            let Some(i) = lm.index(lm.pfn_at(va)).filter(|&i| lm.boot[i] != 0) else {
                return only(Outcome::NotMapped);
            };
            // A run of plain pages passes whole.
            if lm.plain_end[i] as usize > i {
                va = va.saturating_add((u64::from(lm.plain_end[i]) - i as u64) * PAGE_SIZE);
                continue;
            }
            let span = PAGE_SIZE << (lm.span[i] & !CONT);
            let base = va & !(span - 1);
            if lm.mode == SplitMode::None && (base < addr || base + span > end || lm.span[i] & CONT != 0) {
                return errors(&[Outcome::NotPageGranular]);
            }
            va = base + span;
        }
        let (mut pfn, end_pfn) = (lm.pfn_at(addr), lm.pfn_at(end - PAGE_SIZE) + 1);
        while pfn < end_pfn {
            match self.owned_until(pfn) {
                Some(next) => pfn = next,
                None => return skipped(),
            }
        }
        // Only a block split takes a table: an end inside a block the boot
        // mapped (a split since may have made the table already).
        let in_block = |va: u64| {
            !va.is_multiple_of(mmlab_engine::arch::arm64::pgtable::desc::PMD_SIZE)
                && lm.index(lm.pfn_at(va)).is_some_and(|i| lm.boot[i] != 0 && lm.span[i] & !CONT >= 9)
        };
        if lm.mode != SplitMode::None && (in_block(addr) || end < PAGE_END && in_block(end)) {
            succeeds(&[Outcome::Ok, Outcome::NoMemory])
        } else {
            only(Outcome::Ok)
        }
    }

    /// Whether freeing `[pfn, pfn + n)` would free pages whose permissions
    /// the fuzzer changed (the free is then skipped: module docs).
    pub(super) fn perms_changed(&self, pfn: Pfn, n: u64) -> bool {
        self.linear.as_ref().is_some_and(|lm| lm.changed_in(pfn, n))
    }

    /// Run `set_memory_*` and follow it in the model; then check the range.
    pub(super) fn run_set_memory(
        &mut self,
        cpu_i: usize,
        how: SetMemory,
        r: &Ref,
        off: u64,
        nr: u64,
    ) -> (Outcome, String) {
        let Some(addr) = self.set_memory_addr(r, off) else { return (Outcome::Skipped, String::new()) };
        let Some(mode) = self.linear.as_ref().map(|lm| lm.mode) else { return (Outcome::Skipped, String::new()) };
        // The leaves a refused call must leave as they were.
        let before = self.sample_leaves(addr, nr);
        let cpu = &self.cpus[cpu_i % self.cpus.len()];
        let r = match how {
            SetMemory::Ro => pageattr::set_memory_ro(cpu, self.pa, addr, nr, mode),
            SetMemory::Rw => pageattr::set_memory_rw(cpu, self.pa, addr, nr, mode),
            SetMemory::Nx => pageattr::set_memory_nx(cpu, self.pa, addr, nr, mode),
            SetMemory::X => pageattr::set_memory_x(cpu, self.pa, addr, nr, mode),
        };
        let (outcome, detail) = match &r {
            Ok(rep) => {
                let c = rep.counts;
                (
                    Outcome::Ok,
                    self.ok_detail(format_args!("{addr:#x}: {} leaves, {} split tables", c.leaves_changed, c.tables)),
                )
            }
            Err(e) => (Outcome::from(e.clone()), e.to_string()),
        };
        if outcome == Outcome::Ok
            && let Some(lm) = self.linear.as_mut()
        {
            let first = lm.pfn_at(addr);
            for p in first..first + nr {
                if let Some(i) = lm.index(p) {
                    let perm = match how {
                        SetMemory::Ro => lm.perm[i] | RO,
                        SetMemory::Rw => lm.perm[i] & !RO,
                        SetMemory::Nx => lm.perm[i] & !EXEC,
                        SetMemory::X => lm.perm[i] | EXEC,
                    };
                    lm.set_perm(i, perm);
                }
            }
        }
        if outcome.is_error() && outcome != Outcome::NoMemory && self.late.is_none() {
            let after = self.sample_leaves(addr, nr);
            if after != before {
                let (b, a) =
                    before.iter().zip(&after).find(|(b, a)| b != a).map_or((None, None), |(b, a)| (Some(b), Some(a)));
                self.late = Some((
                    ViolationKind::LinearMap,
                    format!(
                        "refused: the leaves of {addr:#x} changed ({} leaf entries before, {} after; first \
                         difference (va, descriptor) {b:x?} -> {a:x?})",
                        before.len(),
                        after.len()
                    ),
                ));
            }
        }
        if outcome == Outcome::Ok || outcome == Outcome::NoMemory {
            let first = self.linear.as_ref().map_or(0, |lm| lm.pfn_at(addr));
            if let Err(msg) = self.check_pages(first, nr.min(1 << 12))
                && self.late.is_none()
            {
                self.late = Some((ViolationKind::LinearMap, msg));
            }
        }
        (outcome, detail)
    }

    /// The leaf entries (start, descriptor) over the first 64 pages of a
    /// range and its last page, inside the linear map.
    fn sample_leaves(&self, addr: u64, nr: u64) -> Vec<(u64, Desc)> {
        let Some(lm) = self.linear.as_ref() else { return Vec::new() };
        let clamp = |va: u64| va.clamp(lm.page_offset, PAGE_END);
        let first_end = addr.saturating_add(nr.min(64) * PAGE_SIZE);
        let last = nr.checked_sub(1).and_then(|k| k.checked_mul(PAGE_SIZE)).and_then(|b| addr.checked_add(b));
        let mut v = Vec::new();
        let asp = self.m.kernel_as();
        let mut ranges = [(addr, first_end), (0, 0)];
        if let Some(last) = last.filter(|&l| l >= first_end) {
            ranges[1] = (last, last.saturating_add(PAGE_SIZE));
        }
        for (a, b) in ranges {
            for_each_leaf(self.m, &asp, clamp(a), clamp(b), |base, l| {
                v.push((base, l.desc));
                ControlFlow::Continue(())
            });
        }
        v
    }

    /// Pages `[pfn, pfn + n)` that the boot mapped: each translates at its
    /// `page_address()` to itself, with the model's attributes.
    fn check_pages(&self, pfn: u64, n: u64) -> Result<(), String> {
        let Some(lm) = self.linear.as_ref() else { return Ok(()) };
        let end_pfn = pfn.saturating_add(n);
        // The boot-mapped pages of [from, to) that no leaf maps.
        let hole = |from: u64, to: u64| match (from..to).find(|&p| lm.index(p).is_some_and(|i| lm.boot[i] != 0)) {
            Some(p) => Err(format!("pfn {p:#x} is not mapped at {:#x}", lm.va_of(p))),
            None => Ok(()),
        };
        let mut next = pfn;
        let mut r = Ok(());
        for_each_leaf(self.m, &self.m.kernel_as(), lm.va_of(pfn), lm.va_of(end_pfn), |base, l| {
            let first = lm.pfn_at(base);
            r = hole(next, first).and_then(|()| {
                let pages = l.level.entry_size() / PAGE_SIZE;
                for p in first.max(pfn)..(first + pages).min(end_pfn) {
                    let Some(i) = lm.index(p).filter(|&i| lm.boot[i] != 0) else { continue };
                    let pa = l.pa.0 + ((p - first) << 12);
                    if pa != p << 12 || l.desc.0 & ATTRS != lm.expected(i) {
                        return Err(format!(
                            "pfn {p:#x} at {:#x}: leaf {:#x} ({}) maps pa {pa:#x} with attributes {:#x}, expected pa \
                             {:#x} with {:#x}",
                            lm.va_of(p),
                            l.desc.0,
                            l.level.name(),
                            l.desc.0 & ATTRS,
                            p << 12,
                            lm.expected(i)
                        ));
                    }
                }
                next = first + pages;
                Ok(())
            });
            if r.is_err() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
        r.and_then(|()| hole(next, end_pfn))
    }

    /// The linear-map invariant (module docs).
    pub(super) fn check_linear_map(&self) -> Result<(), Violation> {
        let Some(lm) = self.linear.as_ref() else { return Ok(()) };
        let v = |message| Err(Violation { kind: ViolationKind::LinearMap, op_index: None, op_name: None, message });
        let asp = self.m.kernel_as();
        let mut seen = vec![false; lm.boot.len()];
        let mut found = None;
        for_each_leaf(self.m, &asp, lm.page_offset, PAGE_END, |base, leaf| {
            let pa = leaf.pa.0;
            if lm.pfn_at(base) << 12 != pa {
                found = Some(format!("the linear map's leaf at {base:#x} maps pa {pa:#x}, not its own page"));
                return ControlFlow::Break(());
            }
            for k in 0..leaf.level.entry_size() / PAGE_SIZE {
                let p = (pa >> 12) + k;
                let Some(i) = lm.index(p) else { continue };
                if lm.boot[i] == 0 {
                    found = Some(format!("pfn {p:#x}, not mapped at boot, is mapped at {:#x}", lm.va_of(p)));
                    return ControlFlow::Break(());
                }
                if leaf.desc.0 & ATTRS != lm.expected(i) {
                    found = Some(format!(
                        "pfn {p:#x} at {:#x}: attributes {:#x} ({} leaf), expected {:#x} (boot {:#x}, permissions {})",
                        lm.va_of(p),
                        leaf.desc.0 & ATTRS,
                        leaf.level.name(),
                        lm.expected(i),
                        lm.boot[i],
                        lm.perm[i]
                    ));
                    return ControlFlow::Break(());
                }
                seen[i] = true;
            }
            ControlFlow::Continue(())
        });
        if let Some(message) = found {
            return v(message);
        }
        if let Some(i) = (0..seen.len()).find(|&i| lm.boot[i] != 0 && !seen[i]) {
            return v(format!("pfn {:#x} is not in the linear map any more", lm.start + i as u64));
        }
        Ok(())
    }

    /// Give every page whose permissions the fuzzer changed its boot
    /// permissions back (as callers must before freeing), run by run.
    pub(super) fn restore_linear_map(&mut self) -> Result<(), String> {
        let Some(lm) = self.linear.as_ref() else { return Ok(()) };
        if lm.changed == 0 {
            return Ok(());
        }
        let mode = lm.mode;
        let mut fixes: Vec<(SetMemory, u64, u64)> = Vec::new();
        for (bit, how_back) in [(RO, [SetMemory::Rw, SetMemory::Ro]), (EXEC, [SetMemory::Nx, SetMemory::X])] {
            let mut i = 0;
            while i < lm.boot.len() {
                let differs = |i: usize| lm.boot[i] != 0 && (lm.perm[i] ^ perm_of(lm.boot[i])) & bit != 0;
                if !differs(i) {
                    i += 1;
                    continue;
                }
                let j = (i..lm.boot.len()).find(|&j| !differs(j)).unwrap_or(lm.boot.len());
                let how = if perm_of(lm.boot[i]) & bit != 0 { how_back[1] } else { how_back[0] };
                fixes.push((how, lm.start + i as u64, (j - i) as u64));
                i = j;
            }
        }
        for (how, pfn, n) in fixes {
            let Some(addr) = self.linear.as_ref().map(|lm| lm.va_of(pfn)) else { break };
            let (o, d) = self.run_set_memory(0, how, &Ref::Raw(addr), 0, n);
            if let Some((_, msg)) = self.late.take() {
                return Err(format!("{} of {n} pages at {addr:#x}: {msg}", how.name()));
            }
            if o != Outcome::Ok {
                return Err(format!("{} of {n} pages at {addr:#x} ({mode:?}): {o} ({d})", how.name()));
            }
        }
        Ok(())
    }

    /// Whether a handle is a page handle one of whose live units has
    /// changed permissions.
    pub(super) fn handle_perms_changed(&self, h: crate::fuzz::op::Handle) -> bool {
        match self.handles.get(&h) {
            Some(Obj::Pages(units)) => units.iter().any(|u| u.live && self.perms_changed(u.pfn, 1 << u.order)),
            _ => false,
        }
    }
}
