//! HVO in the executor: `hvo_optimize`, `hvo_restore` and their batched
//! `_folios` forms on folios hugetlb holds (handed out, or on a free
//! list), `pfn_walker` over a folio's struct pages, and the HVO
//! invariants of the periodic check.
//!
//! # The oracle
//!
//! The calls go through `Hugetlb::vmemmap_optimize`/`vmemmap_restore`
//! (hugetlb/src/vmemmap.rs), which run the kernel's
//! `hugetlb_vmemmap_optimize_folio(s)`/`hugetlb_vmemmap_restore_folio(s)`
//! only where a kernel caller would (a folio moving between its optimized
//! and restored states, both of which a folio in use or in a pool can be
//! in) and refuse the rest. The folios' state decides the outcome, for the
//! first folio of the call that is wrong: a folio hugetlb no longer holds
//! (a freed handle whose folio went back to the page allocator) is
//! `NotHugetlb`; optimizing one of a size HVO cannot optimize (64K), or
//! with HVO off, `NotOptimizable`, or one already optimized
//! `AlreadyOptimized`; restoring one that is not optimized `NotOptimized`.
//! A refused call must change nothing (the snapshot). A right call must
//! succeed, or fail with `NoMemory` (an optimization that found no page
//! for a PTE table leaves the folio as it was, as the kernel does; a
//! restore that cannot have its pages leaves the folio optimized where it
//! was). A freed handle whose folio is now another handle's is skipped.
//!
//! `pfn_walker` runs `vmemmap::walker::scan_folio`, a speculative PFN
//! walker (`get_page_unless_zero` on every struct page it samples), and
//! requires what the kernel promises such a walker: every page's
//! `compound_head()` is the folio's head, tails have count 0 and are
//! never written, fake heads only in an optimized folio, the head's
//! reference taken and dropped.
//!
//! # The invariants (what CONFIG_DEBUG_VM and HVO's own accounting imply)
//!
//! For every hugetlb folio (handed out, on a free list, or waiting for
//! `free_hpage_workfn`) of a size with more than one vmemmap page: if
//! `folio_test_hugetlb_vmemmap_optimized`, the vmemmap PTEs of its struct
//! pages (walked in the kernel tables) map the first page read-write and
//! every other one to that same page, read-only; if not, its vmemmap pages
//! are distinct and writable. The folios optimized now are
//! `hugetlb_optimize_vmemmap_key`'s count, and the vmemmap pages HVO gave
//! back net of those it allocated are the pages those folios save
//! (`vmemmap_pages_saved`: 7 per 2M, 127 per 32M, 4095 per 1G), so every
//! vmemmap page is accounted; page conservation counts the ones HVO holds.

use super::expect::{Expect, errors, only, skipped, succeeds};
use super::{Executor, Obj};
use crate::fuzz::op::{Call, FolioRef};
use crate::fuzz::oracle::{Outcome, Violation, ViolationKind};
use mmlab_engine::arch::arm64::pgtable::{self, mmu};
use mmlab_engine::{Machine, PAGE_SIZE};
use mmlab_vmemmap::folio::{hugetlb_vmemmap_optimizable, hugetlb_vmemmap_size, vmemmap_pages_saved};
use mmlab_vmemmap::{Arm64Hvo, Folio};

/// Check that `folio`'s vmemmap is mapped as its optimized flag says (see
/// the module documentation); Err(what is wrong).
pub(super) fn check_vmemmap_mapping(m: &Machine, folio: Folio) -> Result<(), String> {
    let optimized = folio.test_vmemmap_optimized(m);
    let n = hugetlb_vmemmap_size(folio.order) / PAGE_SIZE;
    if n <= 1 {
        return if optimized {
            Err(format!("folio {} of order {} is flagged optimized", folio.pfn, folio.order))
        } else {
            Ok(())
        };
    }
    let asp = m.kernel_as();
    let start = folio.vmemmap_start(m);
    let mut first = 0;
    let mut seen = Vec::with_capacity(if optimized { 0 } else { n as usize });
    for i in 0..n {
        let va = start + i * PAGE_SIZE;
        let Some(leaf) = pgtable::walk(m, &asp, va).leaf else {
            return Err(format!("folio {}: vmemmap page {i} ({va:#x}) is not mapped", folio.pfn));
        };
        let pa = leaf.pa.0 & !(PAGE_SIZE - 1);
        let writable = mmu::permits(leaf.desc, mmu::Access::WRITE);
        let what = if optimized { "optimized" } else { "not optimized" };
        let bad = if i == 0 {
            first = pa;
            !writable
        } else if optimized {
            pa != first || writable
        } else {
            seen.push(pa);
            !writable || pa == first
        };
        if bad {
            return Err(format!(
                "folio {} ({what}): vmemmap page {i} maps {pa:#x} (first page {first:#x}), writable {writable}",
                folio.pfn
            ));
        }
    }
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("folio {} (not optimized): two of its vmemmap pages map {:#x}", folio.pfn, w[0]));
    }
    Ok(())
}

impl<'a, 'm> Executor<'a, 'm> {
    /// The folio `r` names; None (skip) when it names nothing (an unbound
    /// handle, an empty pool) or a freed handle's folio is someone else's
    /// now.
    fn resolve_folio(&self, r: &FolioRef) -> Option<Folio> {
        let ht = self.hugetlb.as_ref()?;
        match *r {
            FolioRef::Handle(h) => match self.handles.get(&h)? {
                Obj::HugeFolio { folio, live: true, .. } => Some(*folio),
                Obj::HugeFolio { folio, live: false, .. } => {
                    let reused = self
                        .handles
                        .values()
                        .any(|o| matches!(o, Obj::HugeFolio { folio: g, live: true, .. } if g.pfn == folio.pfn));
                    (!reused).then_some(*folio)
                }
                _ => None,
            },
            FolioRef::Pool { size, nth } => {
                let h = ht.hstate_of(size);
                let n = h.free_folios().count();
                if n == 0 {
                    return None;
                }
                h.free_folios().nth(nth as usize % n)
            }
        }
    }

    /// The acceptable outcomes of an HVO call or a walker.
    pub(super) fn expect_hvo(&self, call: &Call) -> Expect {
        let Some(ht) = self.hugetlb.as_ref() else { return skipped() };
        match call {
            Call::Hvo { call, folios } => {
                let cfg = ht.hvo().config();
                let hvo_on = cfg.hugetlb_optimize_vmemmap && cfg.arm64 != Arm64Hvo::Off;
                let Some(list) = folios.iter().map(|r| self.resolve_folio(r)).collect::<Option<Vec<Folio>>>() else {
                    return skipped();
                };
                for f in list {
                    let optimized = f.test_vmemmap_optimized(self.m);
                    let wrong = if ht.hugetlb_folio_size(f).is_none() {
                        Some(Outcome::NotHugetlb)
                    } else if call.optimizes() && (!hvo_on || !hugetlb_vmemmap_optimizable(f.order)) {
                        Some(Outcome::NotOptimizable)
                    } else if call.optimizes() && optimized {
                        Some(Outcome::AlreadyOptimized)
                    } else if !call.optimizes() && !optimized {
                        Some(Outcome::NotOptimized)
                    } else {
                        None
                    };
                    if let Some(o) = wrong {
                        return errors(&[o]);
                    }
                }
                succeeds(&[Outcome::Ok, Outcome::NoMemory])
            }
            Call::PfnWalker { folio } => match self.resolve_folio(folio) {
                Some(f) if ht.hugetlb_folio_size(f).is_some() => only(Outcome::Ok),
                _ => skipped(),
            },
            _ => skipped(),
        }
    }

    /// Run an HVO call or a walker, and check the folios it named.
    pub(super) fn run_hvo(&mut self, cpu_i: usize, call: &Call) -> (Outcome, String) {
        let cpu = &self.cpus[cpu_i % self.cpus.len()];
        let m = self.m;
        match call {
            Call::Hvo { call, folios } => {
                let Some(list) = folios.iter().map(|r| self.resolve_folio(r)).collect::<Option<Vec<Folio>>>() else {
                    return (Outcome::Skipped, String::new());
                };
                let Some(ht) = self.hugetlb.as_mut() else { return (Outcome::Skipped, String::new()) };
                let r = if call.optimizes() {
                    ht.vmemmap_optimize(cpu, &list, call.batched())
                } else {
                    ht.vmemmap_restore(cpu, &list, call.batched())
                };
                let (outcome, detail) = match r {
                    Ok(n) => (Outcome::Ok, format!("{n} folio(s)")),
                    Err(e) => (Outcome::from(e), e.to_string()),
                };
                if outcome == Outcome::Ok
                    && let Some(f) = list.iter().find(|f| f.test_vmemmap_optimized(m) != call.optimizes())
                {
                    let msg =
                        format!("{} returned Ok but folio {} is optimized: {}", call.name(), f.pfn, !call.optimizes());
                    self.late_hugetlb(msg);
                }
                let held = |f: &&Folio| self.hugetlb.as_ref().is_some_and(|ht| ht.hugetlb_folio_size(**f).is_some());
                if let Some(e) = list.iter().filter(held).find_map(|f| check_vmemmap_mapping(m, *f).err()) {
                    self.late_hugetlb(format!("after {}: {e}", call.name()));
                }
                (outcome, detail)
            }
            Call::PfnWalker { folio } => {
                let Some(f) = self.resolve_folio(folio) else { return (Outcome::Skipped, String::new()) };
                let scan = mmlab_vmemmap::walker::scan_folio(cpu, m, f, f.test_vmemmap_optimized(m));
                if !scan.wrong.is_empty() {
                    self.late_hugetlb(format!("a speculative walker over folio {}: {}", f.pfn, scan.wrong.join("; ")));
                }
                (Outcome::Ok, format!("{} struct pages, {} fake heads", scan.pages, scan.fake_heads))
            }
            _ => (Outcome::Skipped, String::new()),
        }
    }

    /// The HVO invariants (module documentation).
    pub(super) fn check_hvo(&self) -> Result<(), Violation> {
        let Some(ht) = self.hugetlb.as_ref() else { return Ok(()) };
        let v = |message| Err(Violation { kind: ViolationKind::Hugetlb, op_index: None, op_name: None, message });
        let mut folios: Vec<Folio> = self
            .handles
            .values()
            .filter_map(|o| match o {
                Obj::HugeFolio { folio, live: true, .. } => Some(*folio),
                _ => None,
            })
            .collect();
        for h in ht.hstates() {
            folios.extend(h.free_folios());
        }
        folios.extend(ht.pending_folios().map(|(_, f)| f));
        let (mut optimized, mut saved) = (0i64, 0u64);
        for f in &folios {
            if let Err(e) = check_vmemmap_mapping(self.m, *f) {
                return v(e);
            }
            if f.test_vmemmap_optimized(self.m) {
                optimized += 1;
                saved += vmemmap_pages_saved(f.order);
            }
        }
        let hvo = ht.hvo();
        let c = hvo.counts();
        let net = c.vmemmap_pages_freed as i64 - c.vmemmap_pages_allocated as i64;
        if hvo.nr_optimized() != optimized || net != saved as i64 {
            return v(format!(
                "{optimized} folios optimized saving {saved} vmemmap pages; HVO counts {} optimized, {} vmemmap pages \
                 freed, {} allocated",
                hvo.nr_optimized(),
                c.vmemmap_pages_freed,
                c.vmemmap_pages_allocated
            ));
        }
        Ok(())
    }
}
