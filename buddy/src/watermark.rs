//! Watermarks: `min_free_kbytes`, `__setup_per_zone_wmarks`, `__zone_watermark_ok`.
//!
//! Worked example (4 GiB machine: 1,048,576 frames less 16,385 for the 64 MiB
//! memmap and the pageblock bitmap = 1,032,191 managed pages):
//! lowmem_kbytes = 4,128,764; int_sqrt(4,128,764 × 16) = 8,127 = min_free_kbytes;
//! min = 8,127 >> 2 = 2,031 pages; delta = max(2,031 >> 2, 1,032,191 × 10 / 10,000)
//! = 1,032; low = 3,063; high = 4,095 (tests/tests/pcp_sizing.rs checks these).

use crate::zone::{AllocFlags, Zone};
use mmlab_engine::mm::{MAX_PAGE_ORDER, MIGRATE_PCPTYPES, Migratetype};
use std::sync::atomic::Ordering::Relaxed;

/// `WMARK_MIN`.
pub const WMARK_MIN: usize = 0;
/// `WMARK_LOW`.
pub const WMARK_LOW: usize = 1;
/// `WMARK_HIGH`.
pub const WMARK_HIGH: usize = 2;
/// `WMARK_PROMO`.
pub const WMARK_PROMO: usize = 3;
/// `watermark_scale_factor` default (0.1 % of the zone).
pub const WATERMARK_SCALE_FACTOR: u64 = 10;
/// `watermark_boost_factor` default.
pub const WATERMARK_BOOST_FACTOR: u64 = 15000;

/// `mult_frac(x, n, d)` without overflow of the intermediate.
pub const fn mult_frac(x: u64, n: u64, d: u64) -> u64 {
    (x / d) * n + (x % d) * n / d
}

/// `int_sqrt()`: floor of the square root, for every `u64`.
pub fn int_sqrt(x: u64) -> u64 {
    if x < 2 {
        return x;
    }
    // The f64 estimate may be one off either way; near u64::MAX it rounds
    // up to 2³², whose square does not fit.
    let mut r = (x as f64).sqrt() as u64;
    while r.checked_mul(r).is_none_or(|s| s > x) {
        r -= 1;
    }
    // (r + 1)² overflows u64 for x ≥ (2³² − 1)²: then r + 1 is too big.
    while (r + 1).checked_mul(r + 1).is_some_and(|s| s <= x) {
        r += 1;
    }
    r
}

/// `calculate_min_free_kbytes()`: sqrt(lowmem_kbytes × 16) clamped to
/// [128, 262144], from the managed pages of the lowmem zones.
pub fn calculate_min_free_kbytes(lowmem_pages: u64) -> u64 {
    let lowmem_kbytes = lowmem_pages * (mmlab_engine::PAGE_SIZE >> 10);
    int_sqrt(lowmem_kbytes * 16).clamp(128, 262_144)
}

impl Zone<'_> {
    /// `__setup_per_zone_wmarks()` for the only zone (which is all lowmem).
    ///
    /// The sysctl bounds `min_free_kbytes` to an int before it gets here;
    /// called directly with more, the products saturate instead of wrapping.
    pub fn setup_per_zone_wmarks(&self, min_free_kbytes: u64) {
        let _z = self.lock.lock_unaccounted();
        let managed = self.managed_pages();
        let pages_min = min_free_kbytes >> (mmlab_engine::PAGE_SHIFT - 10);
        let lowmem_pages = managed;
        let tmp = pages_min.saturating_mul(managed).checked_div(lowmem_pages).unwrap_or(0);
        let min = tmp;
        let delta = (tmp >> 2).max(mult_frac(managed, WATERMARK_SCALE_FACTOR, 10000));
        self.watermark_boost.store(0, Relaxed);
        self.watermark[WMARK_MIN].store(min, Relaxed);
        let at = |n: u64| min.saturating_add(delta.saturating_mul(n));
        self.watermark[WMARK_LOW].store(at(1), Relaxed);
        self.watermark[WMARK_HIGH].store(at(2), Relaxed);
        self.watermark[WMARK_PROMO].store(at(3), Relaxed);
        self.min_free_kbytes.store(min_free_kbytes, Relaxed);
    }

    /// Install watermarks computed for every zone at once
    /// ([`crate::zones::setup_per_zone_wmarks`], the per-zone part of
    /// `__setup_per_zone_wmarks`): `[min, low, high, promo]`, boost cleared.
    pub fn set_watermarks(&self, wm: [u64; 4], min_free_kbytes: u64) {
        let _z = self.lock.lock_unaccounted();
        self.watermark_boost.store(0, Relaxed);
        for (a, v) in self.watermark.iter().zip(wm) {
            a.store(v, Relaxed);
        }
        self.min_free_kbytes.store(min_free_kbytes, Relaxed);
    }

    /// `wakeup_kswapd()` for a boosted watermark. mmlab has no kswapd and
    /// nothing to reclaim; what `balance_pgdat()` leaves behind in that case
    /// is a zone without its boost, so the boost is dropped at once
    /// (simplified: no reclaim, no delay).
    pub fn wakeup_kswapd(&self) {
        self.watermark_boost.store(0, Relaxed);
    }

    /// `_watermark[i]` without the boost.
    pub fn watermark_raw(&self, i: usize) -> u64 {
        self.watermark[i].load(Relaxed)
    }
    /// `wmark_pages()`: the watermark plus the boost.
    #[inline]
    pub fn wmark_pages(&self, i: usize) -> u64 {
        self.watermark[i].load(Relaxed) + self.watermark_boost.load(Relaxed)
    }
    /// `min_wmark_pages()`.
    #[inline]
    pub fn min_wmark_pages(&self) -> u64 {
        self.wmark_pages(WMARK_MIN)
    }
    /// `low_wmark_pages()`.
    #[inline]
    pub fn low_wmark_pages(&self) -> u64 {
        self.wmark_pages(WMARK_LOW)
    }
    /// `high_wmark_pages()`.
    #[inline]
    pub fn high_wmark_pages(&self) -> u64 {
        self.wmark_pages(WMARK_HIGH)
    }
    /// `promo_wmark_pages()`.
    #[inline]
    pub fn promo_wmark_pages(&self) -> u64 {
        self.wmark_pages(WMARK_PROMO)
    }
    /// `zone->watermark_boost`.
    #[inline]
    pub fn watermark_boost(&self) -> u64 {
        self.watermark_boost.load(Relaxed)
    }
    /// The `min_free_kbytes` in force.
    pub fn min_free_kbytes(&self) -> u64 {
        self.min_free_kbytes.load(Relaxed)
    }

    /// `__zone_watermark_unusable_free()`.
    #[inline]
    fn watermark_unusable_free(&self, order: u32, alloc_flags: AllocFlags) -> i64 {
        let mut unusable = (1i64 << order) - 1;
        if !alloc_flags.has(AllocFlags::RESERVES) {
            unusable += self.nr_free_highatomic();
        }
        // Free CMA pages only count for allocations that may use them.
        if !alloc_flags.has(AllocFlags::CMA) {
            unusable += self.nr_free_cma();
        }
        unusable
    }

    /// `__zone_watermark_ok()`: `free_pages` must stay above the mark (less
    /// what the reserve flags allow) plus `lowmem_reserve[highest_zoneidx]`,
    /// what this zone keeps back from allocations that could use a higher
    /// zone.
    #[inline]
    pub fn zone_watermark_ok_free(
        &self,
        order: u32,
        mark: u64,
        highest_zoneidx: usize,
        alloc_flags: AllocFlags,
        free_pages: i64,
    ) -> bool {
        let mut min = mark as i64;
        let free = free_pages - self.watermark_unusable_free(order, alloc_flags);
        if alloc_flags.0 & AllocFlags::RESERVES.0 != 0 {
            if alloc_flags.has(AllocFlags::MIN_RESERVE) {
                min -= min / 2;
                if alloc_flags.has(AllocFlags::NON_BLOCK) {
                    min -= min / 4;
                }
            }
            if alloc_flags.has(AllocFlags::OOM) {
                min -= min / 2;
            }
        }
        if free <= min + self.lowmem_reserve[highest_zoneidx].load(Relaxed) as i64 {
            return false;
        }
        if order == 0 {
            return true;
        }
        // Order > 0 also needs a block of at least that order on a usable
        // list. The kernel reads free_area without the lock here; mmlab takes
        // it (unaccounted), which gives the same answer without the race.
        let z = self.lock.lock_unaccounted();
        let highatomic_ok = alloc_flags.0 & (AllocFlags::OOM.0 | AllocFlags::HIGHATOMIC.0) != 0;
        let cma_ok = alloc_flags.has(AllocFlags::CMA);
        (order..=MAX_PAGE_ORDER).any(|o| {
            Migratetype::ALL[..MIGRATE_PCPTYPES].iter().any(|&mt| !z.lists.list_is_empty(crate::zone::fl(o, mt)))
                || (highatomic_ok && !z.lists.list_is_empty(crate::zone::fl(o, Migratetype::HighAtomic)))
                || (cma_ok && !z.lists.list_is_empty(crate::zone::fl(o, Migratetype::Cma)))
        })
    }

    /// `zone_watermark_ok()`.
    #[inline]
    pub fn zone_watermark_ok(&self, order: u32, mark: u64, highest_zoneidx: usize, alloc_flags: AllocFlags) -> bool {
        self.zone_watermark_ok_free(order, mark, highest_zoneidx, alloc_flags, self.nr_free_pages())
    }

    /// `zone_watermark_fast()`: the order-0 shortcut, then the full check;
    /// an order-0 `ALLOC_MIN_RESERVE` (`__GFP_HIGH`) check against the min
    /// watermark that fails only because of the boost is checked again
    /// against the min watermark without it (the boost is what kswapd
    /// reclaims; the min watermark is where it stops counting).
    #[inline]
    pub fn zone_watermark_fast(&self, order: u32, mark: u64, highest_zoneidx: usize, alloc_flags: AllocFlags) -> bool {
        let free = self.nr_free_pages();
        if order == 0 {
            let reserved = self.watermark_unusable_free(0, alloc_flags);
            let fast_free = free - reserved.min(free.max(0));
            if fast_free > (mark + self.lowmem_reserve[highest_zoneidx].load(Relaxed)) as i64 {
                return true;
            }
        }
        if self.zone_watermark_ok_free(order, mark, highest_zoneidx, alloc_flags, free) {
            return true;
        }
        if order == 0
            && alloc_flags.has(AllocFlags::MIN_RESERVE)
            && self.watermark_boost() != 0
            && alloc_flags.wmark() == WMARK_MIN
        {
            let min = self.watermark_raw(WMARK_MIN);
            return self.zone_watermark_ok_free(order, min, highest_zoneidx, alloc_flags, free);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_free_kbytes_of_the_reference_example() {
        // 6,000,000 managed pages: int_sqrt(384,000,000) = 19,595.
        assert_eq!(calculate_min_free_kbytes(6_000_000), 19_595);
        assert_eq!(int_sqrt(383_964_025), 19_595);
        assert_eq!(int_sqrt(383_964_024), 19_594);
        assert_eq!(calculate_min_free_kbytes(10), 128);
        assert_eq!(calculate_min_free_kbytes(1 << 40), 262_144);
        assert_eq!(mult_frac(6_000_000, 10, 10_000), 6_000);
    }
}
