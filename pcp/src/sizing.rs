//! pcp sizing: `zone_batchsize`, `zone_highsize`,
//! `zone_set_pageset_high_and_batch`.
//!
//! Worked example (reference, 6,000,000 managed pages, 2 CPUs): batch = 63,
//! min_free_kbytes = 19,595, low = 10,898, high_min = max(10,898 / 2, 252) =
//! 5,449 and high_max = max(6,000,000 / 8 / 2, 252) = 375,000.

/// `MIN_PERCPU_PAGELIST_HIGH_FRACTION`.
pub const MIN_PERCPU_PAGELIST_HIGH_FRACTION: u32 = 8;
/// The largest `vm.min_free_kbytes` the sysctl accepts (`INT_MAX`).
pub const MIN_FREE_KBYTES_MAX: u64 = i32::MAX as u64;
/// `CONFIG_PCP_BATCH_SCALE_MAX` (default 5).
pub const PCP_BATCH_SCALE_MAX: u32 = 5;

/// `rounddown_pow_of_two()`.
const fn rounddown_pow_of_two(x: u64) -> u64 {
    if x == 0 { 0 } else { 1 << (63 - x.leading_zeros()) }
}

/// `zone_batchsize()` (the 7.x form; 6.12's `min(managed >> 10, 256) / 4`
/// gives the same batch): about 0.025 % of the zone, at most 64 pages, then
/// rounded to 2^n − 1 for cache-colouring reasons.
pub const fn zone_batchsize(managed_pages: u64) -> i32 {
    let b = {
        let x = managed_pages >> 12;
        if x < 64 { x } else { 64 }
    };
    if b <= 1 {
        return 1;
    }
    (rounddown_pow_of_two(b + b / 2) - 1) as i32
}

/// `zone_highsize()`: the pcp high bound for one CPU. `total` is the low
/// watermark (fraction 0) or `managed / fraction`, split over the CPUs of
/// the zone's node (plus one while a CPU is coming online), at least
/// `4 * batch`.
pub fn zone_highsize(
    managed_pages: u64,
    low_wmark: u64,
    batch: i32,
    node_cpus: u32,
    cpu_online: u32,
    online_cpus: u32,
    high_fraction: u32,
) -> i32 {
    let total = if high_fraction == 0 { low_wmark } else { managed_pages / high_fraction as u64 };
    let mut nr_split = node_cpus + cpu_online;
    if nr_split == 0 {
        nr_split = online_cpus;
    }
    let high = (total / nr_split.max(1) as u64).min(i32::MAX as u64) as i32;
    high.max(batch << 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_by_hand() {
        assert_eq!(zone_batchsize(6_000_000), 63); // min(1464, 64) = 64 -> 96 -> 64 -> 63
        assert_eq!(zone_batchsize(200_000), 63); // 48 -> 72 -> 64 -> 63
        assert_eq!(zone_batchsize(100_000), 31); // 24 -> 36 -> 32 -> 31
        assert_eq!(zone_batchsize(16_384), 3); // 4 -> 6 -> 4 -> 3
        assert_eq!(zone_batchsize(8_192), 1); // 2 -> 3 -> 2 -> 1
        assert_eq!(zone_batchsize(4_096), 1); // 1 -> 1
    }

    #[test]
    fn high_by_hand() {
        // Reference example: low 10,898, 2 CPUs, batch 63.
        assert_eq!(zone_highsize(6_000_000, 10_898, 63, 2, 0, 2, 0), 5_449);
        assert_eq!(zone_highsize(6_000_000, 10_898, 63, 2, 0, 2, 8), 375_000);
        // Floor of 4 * batch.
        assert_eq!(zone_highsize(16_384, 300, 3, 2, 0, 2, 0), 150);
        assert_eq!(zone_highsize(16_384, 20, 3, 2, 0, 2, 0), 12); // 20 / 2 = 10 < 4 * 3
        // A CPU coming online counts in the split.
        assert_eq!(zone_highsize(6_000_000, 10_898, 63, 2, 1, 2, 0), 3_632);
    }
}
