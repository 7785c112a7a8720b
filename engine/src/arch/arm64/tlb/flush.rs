//! The kernel's TLB flush API (arch/arm64/include/asm/tlbflush.h):
//! executing a TLBI, and the flush functions built from it.
//!
//! [`tlbi()`] executes one [`Tlbi`] on a [`ArchCpu`]: it counts the op by
//! [`TlbiKind`](super::TlbiKind) on that CPU, adds its modelled cost from the
//! machine's [`CostProfile`](crate::arch::arm64::cost::CostProfile), invalidates the
//! matching entries in every CPU's [`CpuTlb`](super::CpuTlb) (the
//! broadcast), and tells the machine's secondary TLB (a [`SecondaryTlb`](crate::arch::arm64::cpu::SecondaryTlb)
//! registered at boot: the struct-page accessor's cached vmemmap
//! translations) which VA range the op covered. The hook is how this module
//! reaches state owned by a higher layer without calling up into it, as the
//! page-table code reaches the page allocator through `PgtableAlloc`.
//! [`tlbi_sync_s1ish`] is the `dsb ish` that follows; the first one after
//! outstanding TLBIs adds the modelled completion wait.
//!
//! The flush functions ([`flush_tlb_all`], [`flush_tlb_kernel_range`],
//! [`flush_tlb_range`], [`flush_tlb_mm`], [`flush_tlb_page`],
//! [`flush_tlb_kernel_pgtable`]) issue exactly the barriers and TLBIs of the
//! kernel's, with the barriers going through the CPU's barrier backend. A
//! range is rounded to its stride, checked against the limits
//! (`__flush_tlb_range_limit_excess()`: over them, everything is flushed),
//! and turned into ops by [`RangeOps`], `__flush_tlb_range_op()`'s loop:
//! without FEAT_TLBIRANGE one single op per stride; with it, range ops from
//! scale 3 down, each as large as fits, and a single op for a last odd page.
//!
//! [`TlbFlush`] is a `#[must_use]` token that page-table changes hand out so
//! that the maintenance they owe cannot be forgotten; tokens merge into one
//! covering flush.

use super::tlbi::{MAX_DVM_OPS, MAX_TLBI_RANGE_PAGES, Scope, TLBI_TTL_UNKNOWN, Tlbi, tlbi_range_pages};
use crate::addr::{PAGE_SHIFT, PAGE_SIZE};
use crate::arch::arm64::barrier::{ish, ishst};
use crate::arch::arm64::cpu::ArchCpu;
use crate::counters::this_cpu_add as bump;
use std::sync::atomic::Ordering::Relaxed;

// ---------------------------------------------------------------------------
// Executing TLBIs and the flush functions
// ---------------------------------------------------------------------------

/// Execute one TLBI on `cpu`: count it, model its issue cost, and
/// invalidate the matching entries of every CPU's TLB model and soft-MMU
/// cache. Mirrors `__tlbi(op, arg)`.
pub fn tlbi(cpu: &ArchCpu<'_>, op: Tlbi) {
    let stats = &cpu.arch_data().tlb.tlbi;
    let kind = op.kind();
    bump(&stats.counts[kind as usize], 1);
    bump(&stats.modelled_ns, cpu.arch().cost_profile.tlbi_cost_ns(kind));
    bump(&stats.pending, 1);
    let scope = op.scope();
    for d in cpu.all_arch_data() {
        d.tlb.invalidate(scope);
    }
    let (start, end) = match scope {
        Scope::All => (0, u64::MAX),
        Scope::Range { start, last, .. } => (start, last.saturating_add(1)),
        Scope::Asid(_) => (0, 0),
    };
    crate::trace::mmlab::tlbi(cpu.id(), cpu.trace_clock(), kind.name(), op.operand(), start, end, || {
        cpu.arch_data().tlb.counts().entries
    });
    // The secondary TLB registered at boot (the struct-page accessor's
    // vmemmap translations) hears of every address range an op covers.
    let hook = cpu.secondary_tlb();
    match scope {
        Scope::All => hook.invalidate_range(0, u64::MAX),
        Scope::Range { start, last, .. } => hook.invalidate_range(start, last.saturating_add(1)),
        Scope::Asid(_) => {}
    }
}

/// `dsb ish` completing this CPU's broadcast TLB maintenance: the barrier
/// through the backend, plus the modelled completion wait if TLBIs are
/// outstanding. Mirrors `__tlbi_sync_s1ish()`.
pub fn tlbi_sync_s1ish(cpu: &ArchCpu<'_>) {
    cpu.dsb(ish);
    let stats = &cpu.arch_data().tlb.tlbi;
    if stats.pending.load(Relaxed) != 0 {
        stats.pending.store(0, Relaxed);
        bump(&stats.modelled_ns, u64::from(cpu.arch().cost_profile.dsb_ish_after_tlbi_ns));
    }
}

/// Invalidate everything on every CPU. Mirrors `flush_tlb_all()`:
/// `dsb ishst; tlbi vmalle1is; dsb ish; isb`.
pub fn flush_tlb_all(cpu: &ArchCpu<'_>) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Vmalle1is);
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

/// Invalidate a user address space. Mirrors `flush_tlb_mm()`:
/// `dsb ishst; tlbi aside1is; dsb ish` (no isb: user mappings).
pub fn flush_tlb_mm(cpu: &ArchCpu<'_>, asid: u16) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Aside1is { asid });
    tlbi_sync_s1ish(cpu);
}

/// Invalidate one user page, last level. Mirrors `flush_tlb_page()`:
/// `dsb ishst; tlbi vale1is; dsb ish`.
pub fn flush_tlb_page(cpu: &ArchCpu<'_>, asid: u16, va: u64) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Vale1is { va, asid });
    tlbi_sync_s1ish(cpu);
}

/// Invalidate a kernel VA at all levels, walk caches included, after an
/// intermediate table was removed. Mirrors `__flush_tlb_kernel_pgtable()`:
/// `dsb ishst; tlbi vaae1is; dsb ish; isb`.
pub fn flush_tlb_kernel_pgtable(cpu: &ArchCpu<'_>, va: u64) {
    cpu.dsb(ishst);
    tlbi(cpu, Tlbi::Vaae1is { va });
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

/// The by-VA operation a range flush is made of, and its range form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeOp {
    /// `vale1is` / `rvale1is`: one ASID, last level.
    Vale1is,
    /// `vae1is` / `rvae1is`: one ASID, all levels.
    Vae1is,
    /// `vaale1is` / `rvaale1is`: all ASIDs, last level (kernel ranges).
    Vaale1is,
}

impl RangeOp {
    fn single(self, va: u64, asid: u16) -> Tlbi {
        match self {
            RangeOp::Vale1is => Tlbi::Vale1is { va, asid },
            RangeOp::Vae1is => Tlbi::Vae1is { va, asid },
            RangeOp::Vaale1is => Tlbi::Vaale1is { va },
        }
    }
    fn range(self, base_va: u64, asid: u16, scale: u8, num: u8, ttl: u8) -> Tlbi {
        match self {
            RangeOp::Vale1is => Tlbi::Rvale1is { base_va, asid, scale, num, ttl },
            RangeOp::Vae1is => Tlbi::Rvae1is { base_va, asid, scale, num, ttl },
            RangeOp::Vaale1is => Tlbi::Rvaale1is { base_va, scale, num, ttl },
        }
    }
}

/// `__TLBI_RANGE_NUM(pages, scale)`: the `num` field of the largest range
/// op at `scale` that fits in `pages`, or -1 if none does.
#[inline]
pub fn tlbi_range_num(pages: u64, scale: u32) -> i64 {
    (pages.min(tlbi_range_pages(31, scale)) >> (5 * scale + 1)) as i64 - 1
}

/// The TLBIs `__flush_tlb_range_op()` issues for `pages` pages from
/// `start`, in order (no LPA2, no KPTI user op): without range support,
/// or for a last single page, one single op per `stride`; otherwise range
/// ops from scale 3 down, each as large as fits. The caller has applied the
/// limit (at most `MAX_TLBI_RANGE_PAGES`).
#[derive(Clone, Debug)]
pub struct RangeOps {
    op: RangeOp,
    addr: u64,
    pages: u64,
    stride_pages: u64,
    scale: i32,
    asid: u16,
    ttl: u8,
    use_range: bool,
}

impl RangeOps {
    /// The ops for `[start, start + pages * 4K)`; `use_range` is
    /// FEAT_TLBIRANGE. A `stride` below 4 KiB is taken as 4 KiB.
    pub fn new(op: RangeOp, use_range: bool, start: u64, pages: u64, stride: u64, asid: u16, ttl: u8) -> RangeOps {
        let stride_pages = (stride >> PAGE_SHIFT).max(1);
        RangeOps { op, addr: start, pages, stride_pages, scale: 3, asid, ttl, use_range }
    }
}

impl Iterator for RangeOps {
    type Item = Tlbi;

    fn next(&mut self) -> Option<Tlbi> {
        while self.pages > 0 {
            // `scale < 0` cannot happen for pages <= MAX_TLBI_RANGE_PAGES
            // (each scale leaves fewer pages than the next one's maximum);
            // it guards against a loop without progress.
            if !self.use_range || self.pages == 1 || self.scale < 0 {
                let t = self.op.single(self.addr, self.asid);
                self.addr = self.addr.wrapping_add(self.stride_pages << PAGE_SHIFT);
                self.pages = self.pages.saturating_sub(self.stride_pages);
                return Some(t);
            }
            let scale = self.scale as u32;
            self.scale -= 1;
            let num = tlbi_range_num(self.pages, scale);
            if num >= 0 {
                let t = self.op.range(self.addr, self.asid, scale as u8, num as u8, self.ttl);
                let n = tlbi_range_pages(num as u64, scale);
                self.addr = self.addr.wrapping_add(n << PAGE_SHIFT);
                self.pages -= n;
                return Some(t);
            }
        }
        None
    }
}

/// Issue the TLBIs for `pages` pages from `start` on `cpu`. Mirrors
/// `__flush_tlb_range_op()`; the ops are those of [`RangeOps`], with range
/// support as the machine's `arm64.tlbi_range` says.
pub fn flush_tlb_range_op(cpu: &ArchCpu<'_>, op: RangeOp, start: u64, pages: u64, stride: u64, asid: u16, ttl: u8) {
    let use_range = cpu.arch().tlbi_range;
    for t in RangeOps::new(op, use_range, start, pages, stride, asid, ttl) {
        tlbi(cpu, t);
    }
}

/// Whether a range is too large for per-page maintenance. Mirrors
/// `__flush_tlb_range_limit_excess()`: without range ops, `MAX_DVM_OPS`
/// strides or more; with them, more than `MAX_TLBI_RANGE_PAGES` pages.
pub fn flush_tlb_range_limit_excess(tlbi_range: bool, start: u64, end: u64, pages: u64, stride: u64) -> bool {
    (!tlbi_range && end.wrapping_sub(start) >= MAX_DVM_OPS.saturating_mul(stride)) || pages > MAX_TLBI_RANGE_PAGES
}

/// `stride` made a usable power of two of at least a page.
fn sane_stride(stride: u64) -> u64 {
    if stride.is_power_of_two() { stride.max(PAGE_SIZE) } else { PAGE_SIZE }
}

/// Invalidate kernel mappings of `[start, end)` on every CPU. Mirrors
/// `flush_tlb_kernel_range()` (Linux 6.17): round to pages; over the limit
/// `flush_tlb_all()`; else `dsb ishst`, `vaale1is`/`rvaale1is` ops,
/// `dsb ish`, `isb`. Like the kernel, `end < start` counts as a huge range.
pub fn flush_tlb_kernel_range(cpu: &ArchCpu<'_>, start: u64, end: u64) {
    let start = start & !(PAGE_SIZE - 1);
    let end = end.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
    let pages = end.wrapping_sub(start) >> PAGE_SHIFT;
    if flush_tlb_range_limit_excess(cpu.arch().tlbi_range, start, end, pages, PAGE_SIZE) {
        return flush_tlb_all(cpu);
    }
    cpu.dsb(ishst);
    flush_tlb_range_op(cpu, RangeOp::Vaale1is, start, pages, PAGE_SIZE, 0, TLBI_TTL_UNKNOWN);
    tlbi_sync_s1ish(cpu);
    cpu.isb();
}

/// Invalidate `[start, end)` of the user address space `asid`. Mirrors
/// `__flush_tlb_range()` (= `__flush_tlb_range_nosync()` + `dsb ish`):
/// round to `stride`; over the limit `flush_tlb_mm()`; else `dsb ishst`,
/// `vale1is` (`last_level`) or `vae1is` ops, `dsb ish`; no isb. A `stride`
/// that is not a power of two of at least 4 KiB is taken as 4 KiB.
pub fn flush_tlb_range(cpu: &ArchCpu<'_>, asid: u16, start: u64, end: u64, stride: u64, last_level: bool) {
    let stride = sane_stride(stride);
    let start = start & !(stride - 1);
    let end = end.wrapping_add(stride - 1) & !(stride - 1);
    let pages = end.wrapping_sub(start) >> PAGE_SHIFT;
    if flush_tlb_range_limit_excess(cpu.arch().tlbi_range, start, end, pages, stride) {
        return flush_tlb_mm(cpu, asid);
    }
    cpu.dsb(ishst);
    let op = if last_level { RangeOp::Vale1is } else { RangeOp::Vae1is };
    flush_tlb_range_op(cpu, op, start, pages, stride, asid, TLBI_TTL_UNKNOWN);
    tlbi_sync_s1ish(cpu);
}

// ---------------------------------------------------------------------------
// The flush token
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlushKind {
    /// No live translation changed: nothing is owed.
    Nothing,
    All,
    KernelRange {
        start: u64,
        end: u64,
    },
    KernelPgtable {
        va: u64,
    },
    UserPage {
        asid: u16,
        va: u64,
    },
    UserRange {
        asid: u16,
        start: u64,
        end: u64,
        stride: u64,
        last_level: bool,
    },
}

/// TLB maintenance owed by a page-table change (after rust-osdev/x86_64's
/// `MapperFlush`). Dropping it unused is a warning: call
/// [`flush`](Self::flush), or [`ignore`](Self::ignore) to take the
/// responsibility elsewhere (e.g. batching many into one range flush, as
/// vmalloc's lazy purge does).
#[must_use = "the TLB still holds the old translation: flush() it or ignore() it deliberately"]
#[derive(Debug, PartialEq, Eq)]
pub struct TlbFlush(FlushKind);

impl TlbFlush {
    /// Nothing owed (only empty entries were written).
    pub fn none() -> TlbFlush {
        TlbFlush(FlushKind::Nothing)
    }
    /// True if the token owes no maintenance.
    pub fn is_none(&self) -> bool {
        self.0 == FlushKind::Nothing
    }
    /// Everything (`flush_tlb_all`).
    pub fn all() -> TlbFlush {
        TlbFlush(FlushKind::All)
    }
    /// Kernel mappings of `[start, end)` (`flush_tlb_kernel_range`).
    pub fn kernel_range(start: u64, end: u64) -> TlbFlush {
        TlbFlush(FlushKind::KernelRange { start, end })
    }
    /// One kernel page (`flush_tlb_kernel_range(va, va + PAGE_SIZE)`).
    pub fn kernel_page(va: u64) -> TlbFlush {
        let start = va & !(PAGE_SIZE - 1);
        TlbFlush::kernel_range(start, start.wrapping_add(PAGE_SIZE))
    }
    /// A kernel VA whose intermediate table was freed
    /// (`__flush_tlb_kernel_pgtable`).
    pub fn kernel_pgtable(va: u64) -> TlbFlush {
        TlbFlush(FlushKind::KernelPgtable { va })
    }
    /// One user page of `asid` (`flush_tlb_page`).
    pub fn page(va: u64, asid: u16) -> TlbFlush {
        TlbFlush(FlushKind::UserPage { asid, va })
    }
    /// A user range of `asid` (`__flush_tlb_range`).
    pub fn user_range(asid: u16, start: u64, end: u64, stride: u64, last_level: bool) -> TlbFlush {
        TlbFlush(FlushKind::UserRange { asid, start, end, stride, last_level })
    }

    /// The kernel range `[start, end)` this token flushes, if it is one.
    pub fn as_kernel_range(&self) -> Option<(u64, u64)> {
        match self.0 {
            FlushKind::KernelRange { start, end } => Some((start, end)),
            _ => None,
        }
    }

    /// Issue the maintenance on `cpu`.
    pub fn flush(self, cpu: &ArchCpu<'_>) {
        match self.0 {
            FlushKind::Nothing => {}
            FlushKind::All => flush_tlb_all(cpu),
            FlushKind::KernelRange { start, end } => flush_tlb_kernel_range(cpu, start, end),
            FlushKind::KernelPgtable { va } => flush_tlb_kernel_pgtable(cpu, va),
            FlushKind::UserPage { asid, va } => flush_tlb_page(cpu, asid, va),
            FlushKind::UserRange { asid, start, end, stride, last_level } => {
                flush_tlb_range(cpu, asid, start, end, stride, last_level)
            }
        }
    }

    /// Drop the token without flushing: the caller takes responsibility
    /// for an equivalent or larger flush later.
    pub fn ignore(self) {}

    /// One token covering both: two kernel ranges become the smallest range
    /// covering both (possibly with addresses of neither in between, which
    /// costs over-invalidation, never staleness); [`TlbFlush::all`] absorbs
    /// anything; two user ranges of one ASID and stride merge likewise
    /// (last-level only if both are). Anything else cannot merge and is
    /// handed back unchanged as `Err((self, other))`.
    ///
    /// # Errors
    ///
    /// `Err((self, other))`, both unchanged, when the two cannot be covered by one flush (different
    /// kinds, ASIDs or strides).
    pub fn merge(self, other: TlbFlush) -> Result<TlbFlush, (TlbFlush, TlbFlush)> {
        let hull = |s1: u64, e1: u64, s2: u64, e2: u64| {
            if s1 >= e1 {
                (s2, e2)
            } else if s2 >= e2 {
                (s1, e1)
            } else {
                (s1.min(s2), e1.max(e2))
            }
        };
        match (self.0, other.0) {
            (FlushKind::Nothing, _) => Ok(other),
            (_, FlushKind::Nothing) => Ok(self),
            (FlushKind::All, _) | (_, FlushKind::All) => Ok(TlbFlush::all()),
            (FlushKind::KernelRange { start: s1, end: e1 }, FlushKind::KernelRange { start: s2, end: e2 }) => {
                let (start, end) = hull(s1, e1, s2, e2);
                Ok(TlbFlush::kernel_range(start, end))
            }
            (
                FlushKind::UserRange { asid: a1, start: s1, end: e1, stride: t1, last_level: l1 },
                FlushKind::UserRange { asid: a2, start: s2, end: e2, stride: t2, last_level: l2 },
            ) if a1 == a2 && t1 == t2 => {
                let (start, end) = hull(s1, e1, s2, e2);
                Ok(TlbFlush::user_range(a1, start, end, t1, l1 && l2))
            }
            _ => Err((self, other)),
        }
    }
}
