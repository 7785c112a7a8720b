//! Struct-page writes that respect the vmemmap's permissions: the refcount
//! update of a speculative PFN walker (include/linux/page_ref.h, Linux 6.12).
//!
//! # The algorithm
//!
//! A PFN walker (compaction, say) takes a reference on a page it does not
//! own with `get_page_unless_zero()` → `page_ref_add_unless(page, 1, 0)`.
//! Since the race fix of Linux 6.11 that runs under `rcu_read_lock()` and
//! bails out on a fake head (a tail struct page that HVO mapped onto the
//! head's copy) or when the count already is the excluded value; only then
//! does it do the atomic add. HVO's `synchronize_rcu()` before remapping
//! therefore waits out every walker that checked the page before the remap.
//!
//! The atomic add is a write to the struct page *through the vmemmap
//! mapping*: here it is translated by the MMU of the walker's CPU (its TLB
//! model, then the kernel tables) for a write, so a write to a tail that
//! HVO made read-only is a permission [`Fault`] returned as a value, where
//! the kernel crashed. The compare-and-swap is done only after the
//! translation succeeded, as a hardware atomic needs a writable mapping
//! whatever value it would store.
//!
//! [`scan_folio`] is such a walker over one folio's struct pages (as
//! compaction's `isolate_migratepages_block` or `memory_failure` scan PFNs
//! they do not own), run between HVO's calls rather than against one: it
//! reports what it saw, so that a caller can check it is what the kernel's
//! `compound_head()`/`page_fixed_fake_head()` and refcount rules promise.
//!
//! Fidelity: faithful check order and access path; the atomic is the
//! engine's 32-bit compare-and-swap on the translated physical address.
//! [`scan_folio`] samples the struct pages (the first few, and the first
//! two of each vmemmap page, where fake heads are) and is mmlab's own.

use crate::folio::{Folio, HUGETLB_VMEMMAP_RESERVE_PAGES};
use mmlab_engine::arch::arm64::pgtable::mmu::{self, Access, Fault};
use mmlab_engine::mm::page::pg;
use mmlab_engine::{Cpu, Machine, Pfn, PhysAddr, kernel::rcu};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Offset of `_refcount` in struct page.
const REFCOUNT_OFFSET: u64 = 52;

/// `atomic_add_unless(&page->_refcount, nr, u)` through the MMU of `cpu`:
/// translate the refcount's vmemmap address for a write, then add `nr`
/// unless the count is `u`. Returns whether it added.
///
/// # Errors
/// The [`Fault`] of the write translation (a permission fault on a
/// read-only tail struct page).
pub fn page_ref_atomic_add_unless(cpu: &Cpu<'_>, m: &Machine, pfn: Pfn, nr: i32, u: i32) -> Result<bool, Fault> {
    let va = m.memmap().page_va(pfn) + REFCOUNT_OFFSET;
    let pa = mmu::translate(cpu, &mmlab_engine::arch::arm64::pgtable::init_mm(cpu), va, Access::WRITE)?;
    // The refcount is the upper half of the aligned word at offset 48.
    let word: &AtomicU64 = m.arena().word(PhysAddr(pa.0 & !7));
    let added = word
        .fetch_update(Relaxed, Relaxed, |w| {
            let count = (w >> 32) as u32 as i32;
            (count != u).then(|| (w & 0xffff_ffff) | (u64::from(count.wrapping_add(nr) as u32) << 32))
        })
        .is_ok();
    Ok(added)
}

/// `page_ref_add_unless()` (6.12): under `rcu_read_lock()`, skip a fake head
/// or a count equal to `u`, else [`page_ref_atomic_add_unless`]. The reads
/// go through the struct-page accessor, the write through the MMU.
///
/// # Errors
/// As [`page_ref_atomic_add_unless`].
pub fn page_ref_add_unless(cpu: &Cpu<'_>, m: &Machine, pfn: Pfn, nr: i32, u: i32) -> Result<bool, Fault> {
    rcu::rcu_read_lock(cpu);
    let r = match page_count_writable(m, pfn, u) {
        CountCheck::Writable => page_ref_atomic_add_unless(cpu, m, pfn, nr, u),
        CountCheck::FakeHead | CountCheck::Excluded => Ok(false),
    };
    rcu::rcu_read_unlock(cpu);
    r
}

/// What the check before the atomic add found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountCheck {
    /// Not a fake head and the count is not the excluded value: the add may
    /// be tried.
    Writable,
    /// A fake head (`page_is_fake_head()`, 6.11+): HVO mapped this struct
    /// page onto the head's copy; leave it alone.
    FakeHead,
    /// The count is the excluded value (0 for `get_page_unless_zero`).
    Excluded,
}

/// `page_count_writable()` (the check `page_ref_add_unless()` gained in
/// 6.11, before its atomic add): a fake head or a count equal to `u` is not
/// to be written. Reads through the struct-page accessor.
pub fn page_count_writable(m: &Machine, pfn: Pfn, u: i32) -> CountCheck {
    let p = m.page(pfn);
    if m.memmap().page_fixed_fake_head(pfn) != pfn && p.test_flag(pg::PG_HEAD) {
        CountCheck::FakeHead
    } else if p.refcount() == u {
        CountCheck::Excluded
    } else {
        CountCheck::Writable
    }
}

/// `get_page_unless_zero()`: take a reference unless the count is 0.
///
/// # Errors
/// As [`page_ref_add_unless`].
pub fn get_page_unless_zero(cpu: &Cpu<'_>, m: &Machine, pfn: Pfn) -> Result<bool, Fault> {
    page_ref_add_unless(cpu, m, pfn, 1, 0)
}

/// What a speculative walker saw of one folio ([`scan_folio`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FolioScan {
    /// Struct pages looked at.
    pub pages: u64,
    /// Of those, fake heads (`page_fixed_fake_head()` moved them).
    pub fake_heads: u64,
    /// References taken (and dropped again): the head's.
    pub refs_taken: u64,
    /// What was not as the kernel promises, first few.
    pub wrong: Vec<String>,
}

/// The struct pages of a folio of `nr` pages [`scan_folio`] looks at: the
/// first five, the first two of each vmemmap page, and the last.
fn sampled(nr: u64) -> impl Iterator<Item = u64> {
    let per = HUGETLB_VMEMMAP_RESERVE_PAGES;
    (0..nr.min(5))
        .chain((1..nr.div_ceil(per)).flat_map(move |k| [k * per, k * per + 1]))
        .chain([nr - 1])
        .filter(move |&i| i < nr)
}

/// A speculative PFN walker over `folio`'s struct pages on `cpu`, as a
/// compaction or memory-failure scan meets a hugetlb folio it does not
/// own: for each page looked at, `compound_head()` (through
/// `page_fixed_fake_head()`) and `get_page_unless_zero()`. What the kernel
/// promises, and what is recorded in [`FolioScan::wrong`] otherwise:
/// every page's head is the folio's head; the head is `PG_head` with a
/// count above 0, so the walker's reference is taken (and dropped again,
/// `put_page`); a tail either reads as a tail of this head with count 0,
/// or, only if `optimized`, is the first struct page of a vmemmap page
/// HVO shares (a fake head); the walker never writes a tail, so no
/// permission fault. Simplified: the walker holds no reference across
/// calls.
pub fn scan_folio(cpu: &Cpu<'_>, m: &Machine, folio: Folio, optimized: bool) -> FolioScan {
    let mem = m.memmap();
    let head_va = mem.page_va(folio.pfn);
    let mut scan = FolioScan::default();
    let wrong = |scan: &mut FolioScan, msg: String| {
        if scan.wrong.len() < 4 {
            scan.wrong.push(msg);
        }
    };
    for i in sampled(folio.nr_pages()) {
        let pfn = Pfn(folio.pfn.0 + i);
        scan.pages += 1;
        let real = mem.page_fixed_fake_head(pfn);
        let p = m.page(pfn);
        if i == 0 {
            if !p.test_flag(pg::PG_HEAD) || p.refcount() <= 0 {
                wrong(&mut scan, format!("head {pfn}: PG_head {} count {}", p.test_flag(pg::PG_HEAD), p.refcount()));
                continue;
            }
            match get_page_unless_zero(cpu, m, pfn) {
                Ok(true) => {
                    scan.refs_taken += 1;
                    // put_page(): the head stays held by hugetlb.
                    if !matches!(page_ref_atomic_add_unless(cpu, m, pfn, -1, 0), Ok(true)) {
                        wrong(&mut scan, format!("head {pfn}: the walker's reference could not be dropped"));
                    }
                }
                r => wrong(&mut scan, format!("head {pfn}: get_page_unless_zero {r:?}")),
            }
            continue;
        }
        if real != pfn {
            scan.fake_heads += 1;
            if !optimized || real != folio.pfn || i % HUGETLB_VMEMMAP_RESERVE_PAGES != 0 {
                wrong(&mut scan, format!("tail {pfn}: a fake head of {real} (optimized {optimized})"));
            }
        } else if p.lru_next() != head_va | 1 || p.refcount() != 0 {
            wrong(&mut scan, format!("tail {pfn}: compound_head {:#x} count {}", p.lru_next(), p.refcount()));
        }
        match get_page_unless_zero(cpu, m, pfn) {
            Ok(false) => {}
            r => wrong(&mut scan, format!("tail {pfn}: get_page_unless_zero {r:?}")),
        }
    }
    scan
}
