//! The live peer: the host kernel runs the same page allocator that mmlab
//! emulates, and its /proc/zoneinfo shows the results of the same formulas.
//! For every populated zone of the host, this test recomputes, with mmlab's
//! own functions, what the kernel printed:
//!
//! - `batch` = `zone_batchsize(managed)`;
//! - `high_min` = `zone_highsize(managed, low + boost, batch, node CPUs, 0, 0)`;
//! - `high_max` = `zone_highsize(..., fraction 8)` (or both equal to the
//!   fraction's value when `vm.percpu_pagelist_high_fraction` is set);
//! - the watermark spacing `low - min == high - low == max(min / 4,
//!   managed * watermark_scale_factor / 10000)` per zone.
//!
//! These are architecture-neutral: x86_64 and arm64 run the same code.
//! `high_max` and the watermark spacing use the managed pages of the last
//! pageset or watermark update, and managed pages move after boot without
//! either being redone (freed init memory; HVO freeing boot vmemmap pages
//! with `free_reserved_page` when a hugetlb pool grows, which raises
//! managed pages for good), so those are compared within 1 %; the other
//! values must match exactly. A host kernel older than
//! 6.7 prints no high_min/high_max, and then only batch is compared.

use mmlab_pcp::{zone_batchsize, zone_highsize};

#[derive(Debug, Default)]
struct HostZone {
    name: String,
    managed: u64,
    min: u64,
    low: u64,
    high: u64,
    boost: u64,
    pagesets: Vec<(i64, Option<i64>, Option<i64>)>, // batch, high_min, high_max
}

fn parse_zoneinfo(text: &str) -> Vec<HostZone> {
    let mut zones: Vec<HostZone> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            let name = rest.rsplit(' ').next().unwrap_or("").to_string();
            zones.push(HostZone { name, ..Default::default() });
            continue;
        }
        let Some(z) = zones.last_mut() else { continue };
        let mut it = t.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else { continue };
        let num = v.parse::<i64>().ok();
        match (k, num) {
            ("managed", Some(n)) => z.managed = n as u64,
            ("min", Some(n)) => z.min = n as u64,
            ("low", Some(n)) => z.low = n as u64,
            ("high", Some(n)) if z.pagesets.is_empty() && z.high == 0 => z.high = n as u64,
            ("boost", Some(n)) => z.boost = n as u64,
            ("batch:", Some(n)) => z.pagesets.push((n, None, None)),
            ("high_min:", Some(n)) => {
                if let Some(p) = z.pagesets.last_mut() {
                    p.1 = Some(n)
                }
            }
            ("high_max:", Some(n)) => {
                if let Some(p) = z.pagesets.last_mut() {
                    p.2 = Some(n)
                }
            }
            _ => {}
        }
    }
    zones
}

fn node0_cpus() -> Option<u32> {
    let list = std::fs::read_to_string("/sys/devices/system/node/node0/cpulist").ok()?;
    let mut n = 0;
    for part in list.trim().split(',').filter(|s| !s.is_empty()) {
        let mut r = part.split('-').map(|x| x.parse::<u32>().ok());
        let (a, b) = (r.next()??, r.next().flatten());
        n += b.map_or(1, |b| b - a + 1);
    }
    Some(n)
}

#[test]
fn parser_reads_a_zoneinfo_block() {
    let z = parse_zoneinfo(
        "Node 0, zone   Normal\n  pages free     1\n        boost    0\n        min      9438\n        low      11797\n        high     14156\n        managed  983040\n  pagesets\n    cpu: 0\n              count:    5\n              high:     0\n              batch:    63\n              high_min: 5898\n              high_max: 61440\n",
    );
    assert_eq!(z.len(), 1);
    assert_eq!(
        (z[0].name.as_str(), z[0].managed, z[0].min, z[0].low, z[0].high),
        ("Normal", 983040, 9438, 11797, 14156)
    );
    assert_eq!(z[0].pagesets, vec![(63, Some(5898), Some(61440))]);
}

#[test]
fn host_kernel_pagesets_follow_the_same_formulas() {
    let Ok(text) = std::fs::read_to_string("/proc/zoneinfo") else {
        eprintln!("no /proc/zoneinfo on this host: nothing to compare");
        return;
    };
    let fraction: u32 = std::fs::read_to_string("/proc/sys/vm/percpu_pagelist_high_fraction")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let scale: u64 = std::fs::read_to_string("/proc/sys/vm/watermark_scale_factor")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(10);
    let zones = parse_zoneinfo(&text);
    let mut compared = 0;
    for z in zones.iter().filter(|z| z.managed > 0 && !z.pagesets.is_empty()) {
        let ncpus = node0_cpus().unwrap_or(z.pagesets.len() as u32);
        let batch = zone_batchsize(z.managed);
        // Watermark spacing (__setup_per_zone_wmarks).
        let delta = (z.min / 4).max(z.managed / 10000 * scale + z.managed % 10000 * scale / 10000);
        let close = |got: u64| got.abs_diff(delta) as f64 <= (delta as f64 * 0.01).max(1.0);
        assert!(close(z.low - z.min), "zone {}: low - min {} vs {delta}", z.name, z.low - z.min);
        assert!(close(z.high - z.low), "zone {}: high - low {} vs {delta}", z.name, z.high - z.low);
        for &(kbatch, hmin, hmax) in &z.pagesets {
            assert_eq!(kbatch as i32, batch, "zone {} managed {}: batch", z.name, z.managed);
            let (Some(hmin), Some(hmax)) = (hmin, hmax) else { continue };
            let (emin, emax) = if fraction != 0 {
                let h = zone_highsize(z.managed, z.low + z.boost, batch, ncpus, 0, ncpus, fraction);
                (h, h)
            } else {
                (
                    zone_highsize(z.managed, z.low + z.boost, batch, ncpus, 0, ncpus, 0),
                    zone_highsize(z.managed, z.low + z.boost, batch, ncpus, 0, ncpus, 8),
                )
            };
            if z.boost == 0 {
                assert_eq!(hmin as i32, emin, "zone {}: high_min", z.name);
            }
            let tol = (emax as f64 * 0.01).max(1.0);
            assert!(((hmax as i32 - emax) as f64).abs() <= tol, "zone {}: high_max {hmax} vs {emax}", z.name);
            compared += 1;
        }
    }
    eprintln!("compared {compared} host pagesets with mmlab's formulas");
}
