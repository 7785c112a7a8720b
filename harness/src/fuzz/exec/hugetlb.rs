//! hugetlb in the executor: the pools' sysfs writes, reservations, faults
//! and frees of folios, with the outcomes the oracle accepts, the checks
//! after each call, and the invariants of the periodic check.
//!
//! # The oracle
//!
//! A store's outcome follows from the file and the text alone, as the
//! kernel's store functions decide it (mm/hugetlb.c): a file the hstate's
//! directory lacks is ENOENT (`NoSuchFile`: the demote files of 64K), a
//! read-only one EACCES (`ReadOnly`), `nr_overcommit_hugepages` of a
//! gigantic size EINVAL before the number is read (`GiganticOvercommit`),
//! a value `kstrtoul` cannot read EINVAL (`BadValue`) or ERANGE
//! (`ValueRange`), a `demote_size` `memparse` cannot read `BadValue`, one
//! arm64 does not offer `UnsupportedSize`, one not smaller than the size
//! or below 2M `BadDemoteSize`. A refused store must leave every hstate's
//! files as they were. After an accepted `nr_hugepages` write of N the
//! persistent pool (`nr - surplus`) must be what `set_max_huge_pages`
//! leaves: N, or less if a grow ran out of memory (a pool allocation
//! failed), or more if a shrink was held up (every page left surplus, or a
//! vmemmap restore failed); and `max_huge_pages` equals it.
//!
//! A reservation (`hugetlb_acct_memory(+n)`) must raise `resv_hugepages`
//! by n, or fail with `NoMemory` changing no file. Giving back a handle's
//! unused pages must lower it by as many; giving back more than is
//! reserved is `NoMemory`. A fault holding a reservation page must succeed
//! (the reservation promised a free page) and consume it; one without may
//! fail with `NoMemory`. `free_huge_folio` of a folio handed out must
//! succeed; of one already freed it is `NotInUse`.
//!
//! One known kernel defect is steered around: under `hugetlb.demote=v6.12`
//! (7.2's) a `demote` write of more than the free unreserved pages, when
//! there are some, takes reserved pages too and leaves `resv > free` (hugetlb/src/demote.rs), so
//! such a write is skipped. `hugetlb.demote=v6.11` runs every write.
//! A second one, in both releases: demote takes folios off the free list
//! without adjusting `surplus_huge_pages`, so demoting a free surplus page
//! (which a vmemmap restore that failed during a shrink leaves,
//! `bulk_vmemmap_restore_error`) leaves `surplus > nr`; a demote write that
//! could do that (`surplus` plus the most it can demote above `nr`) is
//! skipped.
//!
//! # The invariants (what CONFIG_DEBUG_VM and the hstate accounting imply)
//!
//! Per hstate: `free_hugepages` is the length of the free list;
//! `resv <= free`; `surplus <= nr`; `nr = free + folios handed out of that
//! size` (the fuzzer's live `h` handles; `folios_in_use()` must be their
//! number); the reservations the fuzzer holds add up to `resv`. Every
//! folio on a free list or handed out is aligned to its order, its head
//! frame allocated (at its order for the buddy sizes), and no folio is on
//! a free list and handed out at once, or on a free list twice. The pages
//! of the pools (and of folios waiting for `free_hpage_workfn`) and the
//! vmemmap pages HVO holds count as allocated in page conservation.

use super::expect::{Expect, errors, only, skipped, succeeds};
use super::{Executor, Obj};
use crate::fuzz::op::{Call, Handle, ResvRef, StoreValue};
use crate::fuzz::oracle::{Outcome, Violation, ViolationKind};
use mmlab_engine::mm::page::PageExt;
use mmlab_hugetlb::hstate::memparse;
use mmlab_hugetlb::{HUGETLB_PAGE_ORDER, HstateAttr, HstateSysfs, HugePageSize, Store};

/// Up to 20 decimal digits of `n` in `buf`, without allocating.
fn decimal(n: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("0")
}

/// `kstrtoul` as the oracle reads it: Ok(number), or the outcome.
fn kstrtoul_outcome(value: &StoreValue) -> Result<u64, Outcome> {
    match value {
        StoreValue::Num(n) => Ok(*n),
        StoreValue::Text(t) => {
            let s = t.strip_suffix('\n').unwrap_or(t);
            let s = s.strip_prefix('+').unwrap_or(s);
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                Err(Outcome::BadValue)
            } else {
                s.parse::<u64>().map_err(|_| Outcome::ValueRange)
            }
        }
    }
}

/// What a store of `value` to `attr` of `size` must return, from the text
/// alone (see the module documentation).
fn store_outcome(size: HugePageSize, attr: HstateAttr, value: &StoreValue) -> Outcome {
    let has_demote = size != HugePageSize::Cont64K;
    match attr {
        HstateAttr::Demote | HstateAttr::DemoteSize if !has_demote => Outcome::NoSuchFile,
        HstateAttr::FreeHugepages | HstateAttr::ResvHugepages | HstateAttr::SurplusHugepages => Outcome::ReadOnly,
        HstateAttr::NrOvercommitHugepages if size.is_gigantic() => Outcome::GiganticOvercommit,
        HstateAttr::NrHugepages | HstateAttr::NrOvercommitHugepages | HstateAttr::Demote => {
            kstrtoul_outcome(value).err().unwrap_or(Outcome::Ok)
        }
        HstateAttr::DemoteSize => {
            let bytes = match value {
                StoreValue::Num(n) => Some(*n),
                StoreValue::Text(t) => memparse(t.strip_suffix(['B', 'b']).unwrap_or(t)),
            };
            let Some(bytes) = bytes else { return Outcome::BadValue };
            match HugePageSize::ALL.into_iter().find(|z| z.bytes() == bytes) {
                None => Outcome::UnsupportedSize,
                Some(dst) if dst.order() < HUGETLB_PAGE_ORDER || dst.order() >= size.order() => Outcome::BadDemoteSize,
                Some(_) => Outcome::Ok,
            }
        }
    }
}

impl<'a, 'm> Executor<'a, 'm> {
    fn sysfs_all(&self) -> Option<[HstateSysfs; 4]> {
        let ht = self.hugetlb.as_ref()?;
        Some(HugePageSize::ALL.map(|z| ht.hstate_of(z).sysfs()))
    }

    pub(super) fn late_hugetlb(&mut self, msg: String) {
        if self.late.is_none() {
            self.late = Some((ViolationKind::Hugetlb, msg));
        }
    }

    /// The acceptable outcomes of a hugetlb call.
    pub(super) fn expect_hugetlb(&self, call: &Call) -> Expect {
        let Some(ht) = self.hugetlb.as_ref() else { return skipped() };
        let free_handle = |h: &Handle| !self.is_live(*h);
        match call {
            Call::HugetlbStore { size, attr, value } => match store_outcome(*size, *attr, value) {
                // 6.12's demote of more than the unreserved free pages takes
                // reserved ones (a kernel defect, hugetlb/src/demote.rs):
                // steered around, as a fuzzer suppresses a known bug. The
                // folios waiting for free_hpage_workfn may come back to the
                // free list when demote_store flushes them first, so with
                // any pending the count is not known here: skipped too.
                Outcome::Ok
                    if *attr == HstateAttr::Demote
                        && ht.config().demote == mmlab_hugetlb::DemoteBatching::V6_12
                        && kstrtoul_outcome(value).is_ok_and(|n| {
                            let available = ht.hstate_of(*size).available_huge_pages();
                            (available > 0 || ht.pending_frees() > 0) && n > available
                        }) =>
                {
                    skipped()
                }
                // Demote takes free folios out without adjusting surplus
                // (`remove_hugetlb_folio(.., false)`), so demoting a free
                // surplus page (one a failed vmemmap restore left) leaves
                // surplus above nr in the kernel too
                // (hugetlb/src/demote.rs): steered around as well.
                Outcome::Ok
                    if *attr == HstateAttr::Demote
                        && kstrtoul_outcome(value).is_ok_and(|n| {
                            // The most it can demote: none without an
                            // unreserved free page; then 6.12 may take
                            // any free page, 6.11 the unreserved ones.
                            // Demote first runs free_hpage_workfn: each
                            // folio waiting there may come back free and
                            // surplus (its restore failed).
                            let h = ht.hstate_of(*size);
                            let back = ht.pending_folios().filter(|(z, _)| z == size).count() as u64;
                            let available = h.available_huge_pages() + back;
                            let most = match ht.config().demote {
                                _ if available == 0 => 0,
                                mmlab_hugetlb::DemoteBatching::V6_12 => n.min(h.free_huge_pages + back),
                                mmlab_hugetlb::DemoteBatching::V6_11 => n.min(available),
                            };
                            most > 0 && h.surplus_huge_pages + most > h.nr_huge_pages
                        }) =>
                {
                    skipped()
                }
                Outcome::Ok if *attr == HstateAttr::Demote => succeeds(&[Outcome::Ok, Outcome::NoMemory]),
                Outcome::Ok => succeeds(&[Outcome::Ok]),
                o => only(o),
            },
            Call::HugetlbReserve { out, .. } if free_handle(out) => succeeds(&[Outcome::Ok, Outcome::NoMemory]),
            Call::HugetlbUnreserve { resv: ResvRef::Handle(h) } => match self.handles.get(h) {
                Some(Obj::Resv { live: true, .. }) => only(Outcome::Ok),
                _ => skipped(),
            },
            Call::HugetlbUnreserve { resv: ResvRef::Raw { size, nr } } => {
                if *nr == 0 {
                    only(Outcome::Ok)
                } else if *nr > ht.hstate_of(*size).resv_huge_pages {
                    errors(&[Outcome::NoMemory])
                } else {
                    // Would give back pages a handle holds.
                    skipped()
                }
            }
            Call::AllocHugetlbFolio { size, resv, out } if free_handle(out) => match resv {
                None => succeeds(&[Outcome::Ok, Outcome::NoMemory]),
                Some(r) => match self.handles.get(r) {
                    Some(Obj::Resv { size: s, left, live: true }) if s == size && *left > 0 => only(Outcome::Ok),
                    _ => skipped(),
                },
            },
            Call::FreeHugeFolio { folio } => match self.handles.get(folio) {
                Some(Obj::HugeFolio { live: true, .. }) => only(Outcome::Ok),
                Some(Obj::HugeFolio { folio: f, live: false, .. }) => {
                    let reused = self
                        .handles
                        .values()
                        .any(|o| matches!(o, Obj::HugeFolio { folio: g, live: true, .. } if g.pfn == f.pfn));
                    if reused { skipped() } else { errors(&[Outcome::NotInUse]) }
                }
                _ => skipped(),
            },
            _ => skipped(),
        }
    }

    /// Run a hugetlb call, update the model, and check what it did.
    pub(super) fn run_hugetlb(&mut self, cpu_i: usize, call: &Call) -> (Outcome, String) {
        let Some(before) = self.sysfs_all() else { return (Outcome::Skipped, String::new()) };
        let counts = self.hugetlb.as_ref().map(|h| h.counts()).unwrap_or_default();
        let cpu = &self.cpus[cpu_i % self.cpus.len()];
        let Some(ht) = self.hugetlb.as_mut() else { return (Outcome::Skipped, String::new()) };
        let (outcome, detail, refused) = match call {
            Call::HugetlbStore { size, attr, value } => {
                let mut buf = [0u8; 20];
                let text = match value {
                    StoreValue::Num(n) => decimal(*n, &mut buf),
                    StoreValue::Text(t) => t.as_str(),
                };
                match attr.parse_store(*size, text).and_then(|st| ht.store(cpu, *size, st)) {
                    Ok(o) => {
                        if let Store::NrHugepages(n) = o.store {
                            let h = ht.hstate_of(*size);
                            let (p, was) = (h.persistent_huge_pages(), before[size.index()]);
                            let was_p = was.nr_hugepages - was.surplus_hugepages;
                            let c = ht.counts();
                            let ok = if n > was_p {
                                p <= n && (p == n || c.pool_alloc_failures > counts.pool_alloc_failures)
                            } else {
                                p >= n
                                    && (p == n
                                        || h.surplus_huge_pages == h.nr_huge_pages
                                        || c.restore_failed_to_surplus > counts.restore_failed_to_surplus)
                            };
                            if !ok || h.max_huge_pages != p {
                                let msg = format!(
                                    "{}/nr_hugepages={n}: persistent pool {was_p} -> {p} (max_huge_pages {}), \
                                     nr {} surplus {}",
                                    size.sysfs_name(),
                                    h.max_huge_pages,
                                    h.nr_huge_pages,
                                    h.surplus_huge_pages
                                );
                                self.late_hugetlb(msg);
                            }
                        }
                        (Outcome::Ok, String::new(), false)
                    }
                    Err(e) => {
                        let o = Outcome::from(&e);
                        // A failed demote keeps what it demoted before.
                        let keeps = *attr == HstateAttr::Demote && o == Outcome::NoMemory;
                        (o, e.to_string(), !keeps)
                    }
                }
            }
            Call::HugetlbReserve { size, nr, out } => {
                let delta = i64::try_from(*nr).unwrap_or(i64::MAX);
                match ht.hugetlb_acct_memory(cpu, *size, delta) {
                    Ok(()) => {
                        let resv = ht.hstate_of(*size).resv_huge_pages;
                        if resv != before[size.index()].resv_hugepages + nr {
                            let was = before[size.index()].resv_hugepages;
                            self.late_hugetlb(format!("reserving {nr} {size} pages: resv {was} -> {resv}"));
                        }
                        self.bind(*out, Obj::Resv { size: *size, left: *nr, live: true });
                        (Outcome::Ok, String::new(), false)
                    }
                    Err(e) => (e.into(), e.to_string(), true),
                }
            }
            Call::HugetlbUnreserve { resv } => {
                let (size, nr) = match *resv {
                    ResvRef::Raw { size, nr } => (size, nr),
                    ResvRef::Handle(h) => match self.handles.get(&h) {
                        Some(&Obj::Resv { size, left, live: true }) => (size, left),
                        _ => return (Outcome::Skipped, String::new()),
                    },
                };
                let delta = i64::try_from(nr).map_or(i64::MIN, |n| -n);
                match ht.hugetlb_acct_memory(cpu, size, delta) {
                    Ok(()) => {
                        let resv_now = ht.hstate_of(size).resv_huge_pages;
                        let was = before[size.index()].resv_hugepages;
                        if resv_now + nr != was {
                            self.late_hugetlb(format!("giving back {nr} {size} pages: resv {was} -> {resv_now}"));
                        }
                        if let ResvRef::Handle(h) = *resv
                            && let Some(Obj::Resv { left, live, .. }) = self.handles.get_mut(&h)
                        {
                            (*left, *live) = (0, false);
                            self.touched.push((h, super::Touch::Liveness));
                        }
                        (Outcome::Ok, String::new(), false)
                    }
                    Err(e) => (e.into(), e.to_string(), true),
                }
            }
            Call::AllocHugetlbFolio { size, resv, out } => match ht.alloc_hugetlb_folio(cpu, *size, resv.is_some()) {
                Ok(folio) => {
                    if let Some(r) = resv
                        && let Some(Obj::Resv { left, .. }) = self.handles.get_mut(r)
                    {
                        *left -= 1;
                    }
                    self.bind(*out, Obj::HugeFolio { folio, size: *size, live: true });
                    (Outcome::Ok, self.ok_detail(format_args!("pfn {}", folio.pfn)), false)
                }
                Err(e) => (e.into(), e.to_string(), true),
            },
            Call::FreeHugeFolio { folio: h } => {
                let Some(&Obj::HugeFolio { folio, .. }) = self.handles.get(h) else {
                    return (Outcome::Skipped, String::new());
                };
                match ht.free_huge_folio(cpu, folio) {
                    Ok(()) => {
                        if let Some(Obj::HugeFolio { live, .. }) = self.handles.get_mut(h) {
                            *live = false;
                        }
                        (Outcome::Ok, self.ok_detail(format_args!("pfn {}", folio.pfn)), false)
                    }
                    Err(e) => (e.into(), e.to_string(), true),
                }
            }
            _ => return (Outcome::Skipped, String::new()),
        };
        if refused
            && let Some(after) = self.sysfs_all()
            && after != before
        {
            self.late_hugetlb(format!("a refused call ({outcome}) changed the hstates: {before:?} -> {after:?}"));
        }
        (outcome, detail)
    }

    /// Pages hugetlb holds in the allocated state: every pool page,
    /// folios waiting for `free_hpage_workfn`, and the vmemmap pages HVO
    /// allocated and has not given back.
    pub(super) fn hugetlb_pages(&self) -> u64 {
        let Some(ht) = self.hugetlb.as_ref() else { return 0 };
        let pools: u64 = ht.hstates().map(|h| h.nr_huge_pages << h.huge_page_order()).sum();
        let c = ht.hvo().counts();
        let vmemmap = c.vmemmap_pages_allocated.saturating_sub(c.vmemmap_pages_freed - c.vmemmap_boot_pages_freed);
        pools + ht.pending_free_pages() + vmemmap
    }

    /// The hstate invariants (module documentation).
    pub(super) fn check_hugetlb(&self) -> Result<(), Violation> {
        let Some(ht) = self.hugetlb.as_ref() else { return Ok(()) };
        let v = |message| Err(Violation { kind: ViolationKind::Hugetlb, op_index: None, op_name: None, message });
        let mut in_use = [0u64; 4];
        let mut resv = [0u64; 4];
        let mut folios = Vec::new();
        for (h, o) in &self.handles {
            match *o {
                Obj::HugeFolio { folio, size, live: true } => {
                    in_use[size.index()] += 1;
                    folios.push((folio, *h));
                }
                Obj::Resv { size, left, live: true } => resv[size.index()] += left,
                _ => {}
            }
        }
        if ht.folios_in_use() != folios.len() {
            return v(format!("{} folios in use, the fuzzer holds {}", ht.folios_in_use(), folios.len()));
        }
        let nil = Handle { kind: crate::fuzz::op::HandleKind::HugeFolio, id: 0 };
        for h in ht.hstates() {
            let s = h.sysfs();
            let z = h.size();
            let on_list = h.free_folios().count() as u64;
            if on_list != s.free_hugepages
                || s.resv_hugepages > s.free_hugepages
                || s.surplus_hugepages > s.nr_hugepages
                || s.nr_hugepages != s.free_hugepages + in_use[z.index()]
                || s.resv_hugepages != resv[z.index()]
            {
                return v(format!(
                    "{}: nr {} free {} (free list {on_list}) resv {} (reservations held {}) surplus {}, {} folios \
                     handed out",
                    z.sysfs_name(),
                    s.nr_hugepages,
                    s.free_hugepages,
                    s.resv_hugepages,
                    resv[z.index()],
                    s.surplus_hugepages,
                    in_use[z.index()]
                ));
            }
            folios.extend(h.free_folios().map(|f| (f, nil)));
        }
        folios.sort_unstable_by_key(|(f, _)| f.pfn);
        let mut end = 0;
        for (f, h) in &folios {
            let head = self.m.page(f.pfn);
            let state_ok = match head.ext() {
                PageExt::Alloc(o, _) => f.order > mmlab_engine::MAX_PAGE_ORDER || u32::from(o) == f.order,
                _ => false,
            };
            if f.pfn.0 < end || !f.pfn.0.is_multiple_of(1 << f.order) || !state_ok {
                let whose = if h.id == 0 { "on a free list".to_string() } else { format!("handed out as {h}") };
                return v(format!(
                    "folio pfn {} order {} {whose}: overlaps another, is misaligned, or is {:?}",
                    f.pfn,
                    f.order,
                    head.ext()
                ));
            }
            end = f.pfn.0 + (1 << f.order);
        }
        Ok(())
    }

    /// Free every folio the fuzzer holds, give back every reservation, and
    /// shrink every pool to nothing (the end of a run).
    pub(super) fn release_hugetlb(&mut self) -> Result<(), String> {
        let cpu = &self.cpus[0];
        let Some(ht) = self.hugetlb.as_mut() else { return Ok(()) };
        // Restoring an optimized folio's vmemmap allocates, and a folio
        // whose restore fails stays in its pool as surplus (as the kernel
        // keeps it): the end of the run frees with fault injection off.
        let hvo = ht.hvo().config();
        if hvo.hugetlb_optimize_vmemmap && hvo.arm64 != mmlab_vmemmap::Arm64Hvo::Off {
            self.pa.set_fail_page_alloc(None).map_err(|e| e.to_string())?;
        }
        for o in self.handles.values_mut() {
            match o {
                Obj::HugeFolio { folio, live, .. } if *live => {
                    ht.free_huge_folio(cpu, *folio).map_err(|e| format!("free_huge_folio: {e}"))?;
                    *live = false;
                }
                Obj::Resv { size, left, live } if *live => {
                    let d = i64::try_from(*left).unwrap_or(i64::MAX);
                    ht.hugetlb_acct_memory(cpu, *size, -d).map_err(|e| format!("unreserve: {e}"))?;
                    *live = false;
                }
                _ => {}
            }
        }
        for z in HugePageSize::ALL {
            if !z.is_gigantic() {
                ht.set_nr_overcommit_hugepages(z, 0).map_err(|e| e.to_string())?;
            }
            // Free surplus pages (kept by a failed vmemmap restore) are not
            // freed by a shrink, as in the kernel: writing the pool's size
            // first makes them persistent (adjust_pool_surplus(-1)).
            let nr = ht.hstate_of(z).nr_huge_pages;
            for count in [nr, 0] {
                ht.set_max_huge_pages_of(cpu, z, count)
                    .map_err(|e| format!("{}/nr_hugepages={count}: {e}", z.sysfs_name()))?;
            }
        }
        ht.flush_free_hpage_work(cpu).map_err(|e| e.to_string())?;
        let left: u64 = ht.hstates().map(|h| h.nr_huge_pages).sum();
        if left != 0 {
            return Err(format!("{left} huge pages stay in the pools after nr_hugepages=0 everywhere"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_prints_without_allocating() {
        let mut b = [0u8; 20];
        assert_eq!(decimal(0, &mut b), "0");
        assert_eq!(decimal(4096, &mut b), "4096");
        assert_eq!(decimal(u64::MAX, &mut b), "18446744073709551615");
    }

    #[test]
    fn store_outcomes_as_the_kernel_stores_decide() {
        use HstateAttr as A;
        use HugePageSize as Z;
        let t = |s: &str| StoreValue::Text(s.to_string());
        for (size, attr, value, want) in [
            (Z::Pmd2M, A::NrHugepages, StoreValue::Num(4), Outcome::Ok),
            (Z::Pmd2M, A::NrHugepages, t("+4"), Outcome::Ok),
            (Z::Pmd2M, A::NrHugepages, t(""), Outcome::BadValue),
            (Z::Pmd2M, A::NrHugepages, t("-1"), Outcome::BadValue),
            (Z::Pmd2M, A::NrHugepages, t("18446744073709551616"), Outcome::ValueRange),
            (Z::Cont64K, A::Demote, StoreValue::Num(1), Outcome::NoSuchFile),
            (Z::Cont64K, A::DemoteSize, StoreValue::Num(1), Outcome::NoSuchFile),
            (Z::Pud1G, A::FreeHugepages, StoreValue::Num(1), Outcome::ReadOnly),
            (Z::ContPmd32M, A::NrOvercommitHugepages, t("abc"), Outcome::GiganticOvercommit),
            (Z::Pud1G, A::DemoteSize, StoreValue::Num(2 << 20), Outcome::Ok),
            (Z::Pud1G, A::DemoteSize, t("32M"), Outcome::Ok),
            (Z::Pud1G, A::DemoteSize, t("2048kB"), Outcome::Ok),
            (Z::Pud1G, A::DemoteSize, StoreValue::Num(64 << 10), Outcome::BadDemoteSize),
            (Z::Pmd2M, A::DemoteSize, StoreValue::Num(2 << 20), Outcome::BadDemoteSize),
            (Z::Pud1G, A::DemoteSize, StoreValue::Num(4 << 20), Outcome::UnsupportedSize),
            (Z::Pud1G, A::DemoteSize, t("lots"), Outcome::BadValue),
        ] {
            assert_eq!(store_outcome(size, attr, &value), want, "{size} {attr}={value}");
        }
    }
}
