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
//! Fidelity: faithful check order and access path; the atomic is the
//! engine's 32-bit compare-and-swap on the translated physical address.

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
pub fn page_ref_atomic_add_unless(cpu: &Cpu<'_>, pfn: Pfn, nr: i32, u: i32) -> Result<bool, Fault> {
    let m = cpu.machine();
    let va = m.memmap().page_va(pfn) + REFCOUNT_OFFSET;
    let pa = mmu::translate(cpu, &m.kernel_as(), va, Access::WRITE)?;
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
pub fn page_ref_add_unless(cpu: &Cpu<'_>, pfn: Pfn, nr: i32, u: i32) -> Result<bool, Fault> {
    rcu::rcu_read_lock(cpu);
    let r = match page_count_writable(cpu.machine(), pfn, u) {
        CountCheck::Writable => page_ref_atomic_add_unless(cpu, pfn, nr, u),
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
pub fn get_page_unless_zero(cpu: &Cpu<'_>, pfn: Pfn) -> Result<bool, Fault> {
    page_ref_add_unless(cpu, pfn, 1, 0)
}
