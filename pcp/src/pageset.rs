//! `struct per_cpu_pages` (a pageset): its lists, counters and the mapping
//! of (migratetype, order) to a list index.

use mmlab_engine::mm::list::ListArray;
use mmlab_engine::mm::memmap::Memmap;
use mmlab_engine::mm::{HPAGE_PMD_ORDER, MIGRATE_PCPTYPES, Migratetype, PAGE_ALLOC_COSTLY_ORDER};

/// `NR_LOWORDER_PCP_LISTS`: orders 0..=3 times the three pcp types.
pub const NR_LOWORDER_PCP_LISTS: usize = MIGRATE_PCPTYPES * (PAGE_ALLOC_COSTLY_ORDER as usize + 1);
/// `NR_PCP_LISTS`: plus two THP lists (movable and not).
pub const NR_PCP_LISTS: usize = NR_LOWORDER_PCP_LISTS + 2;
/// `PCPF_PREV_FREE_HIGH_ORDER`.
pub const PCPF_PREV_FREE_HIGH_ORDER: u8 = 1 << 0;
/// `PCPF_FREE_HIGH_BATCH`.
pub const PCPF_FREE_HIGH_BATCH: u8 = 1 << 1;

/// The kernel's `clamp()`: `min(max(v, lo), hi)`, which (unlike
/// `Ord::clamp`) returns `hi` when `lo > hi`.
#[inline]
pub(crate) fn kclamp(v: i32, lo: i32, hi: i32) -> i32 {
    v.max(lo).min(hi)
}

/// `order_to_pindex()`.
#[inline]
pub const fn order_to_pindex(mt: Migratetype, order: u32) -> usize {
    if order > PAGE_ALLOC_COSTLY_ORDER {
        NR_LOWORDER_PCP_LISTS + (mt as usize == Migratetype::Movable as usize) as usize
    } else {
        MIGRATE_PCPTYPES * order as usize + mt as usize
    }
}

/// `pindex_to_order()`.
#[inline]
pub const fn pindex_to_order(pindex: usize) -> u32 {
    if pindex >= NR_LOWORDER_PCP_LISTS { HPAGE_PMD_ORDER } else { (pindex / MIGRATE_PCPTYPES) as u32 }
}

/// `struct per_cpu_pages`: one CPU's cache of free pages for the zone.
#[derive(Debug)]
pub struct PerCpuPages {
    /// Pages (not blocks) on all lists.
    pub(crate) count: i32,
    /// Current drain threshold; auto-tuned within [high_min, high_max].
    pub(crate) high: i32,
    pub(crate) high_min: i32,
    pub(crate) high_max: i32,
    pub(crate) batch: i32,
    pub(crate) flags: u8,
    pub(crate) alloc_factor: u8,
    pub(crate) free_count: i32,
    pub(crate) lists: ListArray,
}

/// A snapshot of one CPU's pageset (`struct per_cpu_pages`), as
/// /proc/zoneinfo prints it. Gauges, not counters: there is no delta.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub struct PagesetInfo {
    /// `pcp->count`, zoneinfo's `count:`: pages on the lists.
    pub count: i32,
    /// `pcp->high`, zoneinfo's `high:`: the current drain threshold.
    pub high: i32,
    /// `pcp->batch`, zoneinfo's `batch:`.
    pub batch: i32,
    /// `pcp->high_min`, zoneinfo's `high_min:`.
    pub high_min: i32,
    /// `pcp->high_max`, zoneinfo's `high_max:`.
    pub high_max: i32,
    /// `pcp->free_count` (not printed by the kernel): the run of
    /// consecutive frees that sizes a drain (`nr_pcp_free`).
    pub free_count: i32,
    /// `pcp->alloc_factor` (not printed by the kernel): the refill scale of
    /// `nr_pcp_alloc`.
    pub alloc_factor: u8,
}

impl PerCpuPages {
    /// The boot pageset (`pageset_init`): high 0, batch 1.
    pub(crate) fn new(mem: &Memmap, base_va: u64) -> PerCpuPages {
        PerCpuPages {
            count: 0,
            high: 0,
            high_min: 0,
            high_max: 0,
            batch: 1,
            flags: 0,
            alloc_factor: 0,
            free_count: 0,
            lists: ListArray::new(mem, base_va, NR_PCP_LISTS),
        }
    }

    pub(crate) fn info(&self) -> PagesetInfo {
        PagesetInfo {
            count: self.count,
            high: self.high,
            batch: self.batch,
            high_min: self.high_min,
            high_max: self.high_max,
            free_count: self.free_count,
            alloc_factor: self.alloc_factor,
        }
    }

    /// The clamp both `nr_pcp_alloc` and `nr_pcp_high` start with.
    #[inline]
    pub(crate) fn clamp_high(&mut self) -> i32 {
        self.high = kclamp(self.high, self.high_min, self.high_max);
        self.high
    }
}
