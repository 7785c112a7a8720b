//! `mmlab reproduce linear-map`: "Speed up boot with faster linear map
//! creation" (Ryan Roberts, 2024; `seeds.md` §3, reference §4.1): the
//! `map_mem()` time of v6.9-rc1 and of its three v1 patches applied in turn
//! on Apple M2 VM 16G, Ampere Altra VM 64G and 256G and Altra metal 512G,
//! and the series as merged for 6.10 against the v3 posting's last column.
//!
//! # What runs
//!
//! `map_mem()` itself, through the fixmap, with `rodata=full` (the
//! page-granular linear map the figures were taken with), once per variant
//! and cost profile on machines of 1 GiB and 2 GiB (and 16 GiB under the
//! `apple-m2` profile). With `rodata=full` every GiB of RAM past the first
//! costs the same — 512 PTE tables, one PMD table, and per table the same
//! fixmap maps, TLBIs, completion waits and barriers (512 and 32 are
//! multiples of the lazy-unmap batch of 16) — so the counts and modelled
//! time of 64, 256 and 512 GiB are the 1 GiB run's plus (N - 1) times the
//! 2 GiB run's increment. The 16 GiB row is run in full and checked against
//! the same extrapolation (a mismatch is an error), so the shortcut is
//! itself tested on every run. No full 512 GiB boot is needed, and the
//! reproduction takes a second or two.
//!
//! # What is priced, and what is fitted
//!
//! Our ms are *modelled*: TLBIs with their completion waits and the
//! barriers, priced by the row's cost profile (`apple-m2` for the M2 row,
//! `ampere-altra` for the others; engine/src/arch/arm64/cost.rs). Nothing
//! else the kernel does in `map_mem()` (the loops, the page writes) is
//! priced, so absolute times come out below the published ones where that
//! work matters. The profiles' completion wait is fitted on the published
//! *difference* base − no-cont-remap (v1: M2 16G for `apple-m2`, Altra VM
//! 64G and metal 512G for `ampere-altra`), and the `dsb ishst; isb` pair on
//! the v3 difference no-cont-remap − batch-barriers. Every other number —
//! each variant's absolute time, the no-alloc-remap and lazy-unmap changes,
//! the 256G row, and v6.10 — is a prediction.
//!
//! # Agreement
//!
//! Each variant's change against base is judged like a row of a published
//! A/B table ([`Agreement::judge`]): the model has no noise, so both sides
//! count as significant; `agrees` is the same sign within 2x, `direction`
//! the same sign further off. The ratio of our ms to the published ms is
//! printed beside it.

use super::agreement::{Agreement, Tally};
use super::published::Change;
use crate::stats::Mark;
use mmlab_engine::MachineConfig;
use mmlab_engine::arch::arm64::cost::CostProfile;
use mmlab_engine::arch::arm64::mmu::{LinearMapCounts, LinearMapVariant, Rodata};
use serde::Serialize;
use std::fmt::Write as _;

/// One machine of the published table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MachineRow {
    /// As the posting names it.
    pub name: &'static str,
    /// GiB of RAM.
    pub gib: u64,
    /// The cost profile that prices it.
    pub profile: &'static str,
}

/// The posting's machines, in its column order.
pub const MACHINES: [MachineRow; 4] = [
    MachineRow { name: "Apple M2 VM", gib: 16, profile: "apple-m2" },
    MachineRow { name: "Ampere Altra VM", gib: 64, profile: "ampere-altra" },
    MachineRow { name: "Ampere Altra VM", gib: 256, profile: "ampere-altra" },
    MachineRow { name: "Ampere Altra metal", gib: 512, profile: "ampere-altra" },
];

/// Published `map_mem()` ms, v1 (seeds.md §3): per variant, per machine.
pub const PUBLISHED_V1: [(LinearMapVariant, [f64; 4]); 4] = [
    (LinearMapVariant::Base, [151.0, 2191.0, 8990.0, 17443.0]),
    (LinearMapVariant::NoContRemap, [77.0, 429.0, 1753.0, 3796.0]),
    (LinearMapVariant::NoAllocRemap, [77.0, 375.0, 1532.0, 3366.0]),
    (LinearMapVariant::LazyUnmap, [63.0, 330.0, 1312.0, 2929.0]),
];

/// Published v3 (as merged for 6.10; reference §4.1): base and the last
/// column (no-alloc-remap on top of batch-barriers).
pub const PUBLISHED_V3: [[f64; 4]; 2] = [[168.0, 2198.0, 8644.0, 17447.0], [10.0, 104.0, 438.0, 1223.0]];

/// What one variant did on one machine.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// The variant.
    pub variant: LinearMapVariant,
    /// Our modelled ms.
    pub ours_ms: f64,
    /// The published ms.
    pub published_ms: f64,
    /// Our change against our base, and the published one against theirs.
    pub ours_pct: f64,
    /// Published change in percent.
    pub published_pct: f64,
    /// Verdict on the change (None for the base itself).
    pub agreement: Option<&'static str>,
    /// Our ms by what it is spent on.
    pub split: Split,
    /// The counts behind our ms.
    pub counts: LinearMapCounts,
    /// Whether the counts were run (16 GiB) or extrapolated from the 1 and
    /// 2 GiB runs (module docs).
    pub run_in_full: bool,
}

/// One machine: every variant.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The machine.
    pub machine: MachineRow,
    /// base, no-cont-remap, no-alloc-remap, lazy-unmap (v1), then v6.10
    /// against v3's merged column.
    pub cells: Vec<Cell>,
}

/// The reproduction's result.
#[derive(Clone, Debug, Serialize)]
pub struct LinearMap {
    /// One row per machine.
    pub rows: Vec<Row>,
    /// The verdicts summed.
    #[serde(skip)]
    pub tally: Tally,
}

/// Counts and modelled ns of one `map_mem()` run.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    counts: LinearMapCounts,
    modelled_ns: u64,
    /// Of `modelled_ns`: issuing TLBIs, waiting for their completion
    /// (`dsb ish` after broadcast TLBIs), and the barrier backend.
    split: [u64; 3],
}

/// Modelled `map_mem()` time split by what it is spent on, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Split {
    /// Issuing TLBIs (`tlbi vaale1is` and the others).
    pub tlbi_ms: f64,
    /// Waiting for broadcast TLBIs to complete (`dsb ish` after them).
    pub wait_ms: f64,
    /// Barriers (`dsb ishst`, `dsb ish`, `isb`) as the profile prices them.
    pub barrier_ms: f64,
}

fn run_once(gib: u64, variant: LinearMapVariant, profile: CostProfile) -> Result<Sample, String> {
    let cfg = MachineConfig {
        linear_map: true,
        linear_map_variant: variant,
        rodata: Rodata::On,
        cost_profile: profile,
        barrier_backend: profile.barrier_backend(),
        nr_cpus: 1,
        // Bare RAM: the published runs are not QEMU virt with Debian's
        // image and initrd, and the counts are derived on bare RAM.
        ..MachineConfig::with(&format!("{gib}G"), 1).map_err(|e| e.to_string())?.bare()
    };
    let stack =
        crate::stack::Stack::boot_machine(cfg).map_err(|e| format!("linear-map {gib}G {}: {e}", variant.name()))?;
    let m = stack.machine();
    let r = m.linear_map_report().ok_or("map_mem did not run")?;
    let issue: u64 = r.tlbi.iter().map(|(k, n)| n * u64::from(profile.tlbi_ns[k as usize])).sum();
    let wait = r.tlbi.modelled_ns.checked_sub(issue).ok_or("linear-map: TLBI time below its issue cost")?;
    Ok(Sample {
        counts: r.counts,
        modelled_ns: r.tlbi.modelled_ns + r.barriers.modelled_ns,
        split: [issue, wait, r.barriers.modelled_ns],
    })
}

/// `a + k * (b - a)`, field by field.
fn extrapolate(a: &Sample, b: &Sample, k: u64) -> Sample {
    let step = b.counts.delta(&a.counts);
    let mut c = a.counts;
    for _ in 0..k {
        c.add(&step);
    }
    let line = |a: u64, b: u64| a + k * (b - a);
    Sample {
        counts: c,
        modelled_ns: line(a.modelled_ns, b.modelled_ns),
        split: [0, 1, 2].map(|i| line(a.split[i], b.split[i])),
    }
}

/// The variants and their published ms on machine `i` (v6.10 against v3).
fn published(variant: LinearMapVariant, i: usize) -> (f64, f64) {
    match variant {
        LinearMapVariant::V6_10 => (PUBLISHED_V3[1][i], PUBLISHED_V3[0][i]),
        v => {
            let p = |w| PUBLISHED_V1.iter().find(|(x, _)| *x == w).map_or(f64::NAN, |(_, ms)| ms[i]);
            (p(v), p(LinearMapVariant::Base))
        }
    }
}

/// Run the reproduction (module docs).
///
/// # Errors
///
/// A machine that does not boot, or a 16 GiB run that the 1 and 2 GiB runs
/// do not extrapolate to.
pub fn linear_map() -> Result<LinearMap, String> {
    let machines: Vec<(usize, MachineRow)> = MACHINES.iter().copied().enumerate().collect();
    linear_map_on(&machines, 16)
}

/// [`linear_map`] on `machines` (each with the index of its published
/// column), running in full those of at most `full_upto_gib` GiB and
/// checking them against the extrapolation from 1 and 2 GiB.
///
/// # Errors
///
/// As [`linear_map`].
pub fn linear_map_on(machines: &[(usize, MachineRow)], full_upto_gib: u64) -> Result<LinearMap, String> {
    let mut rows = Vec::new();
    let mut tally = Tally::default();
    let mut cache: Vec<((LinearMapVariant, &str, u64), Sample)> = Vec::new();
    let mut run = |gib: u64, v: LinearMapVariant, profile: CostProfile| -> Result<Sample, String> {
        let key = (v, profile.name, gib);
        if let Some((_, s)) = cache.iter().find(|(k, _)| *k == key) {
            return Ok(*s);
        }
        let s = run_once(gib, v, profile)?;
        cache.push((key, s));
        Ok(s)
    };
    for &(i, ref mr) in machines {
        let profile = CostProfile::by_name(mr.profile).ok_or("no such profile")?;
        let mut samples = Vec::new();
        for v in LinearMapVariant::SERIES {
            let (one, two) = (run(1, v, profile)?, run(2, v, profile)?);
            let predicted = extrapolate(&one, &two, mr.gib - 1);
            let run_in_full = mr.gib <= full_upto_gib;
            let s = if run_in_full {
                let full = run(mr.gib, v, profile)?;
                if full.counts != predicted.counts || full.modelled_ns != predicted.modelled_ns {
                    return Err(format!(
                        "linear-map: {}G {} does not scale linearly from 1G and 2G: run {:?}, extrapolated {:?}",
                        mr.gib,
                        v.name(),
                        full.counts,
                        predicted.counts
                    ));
                }
                full
            } else {
                predicted
            };
            samples.push((v, s, run_in_full));
        }
        let base_ns = samples[0].1.modelled_ns as f64;
        let cells = samples
            .iter()
            .map(|&(v, s, run_in_full)| {
                let ours_ms = s.modelled_ns as f64 / 1e6;
                let (published_ms, published_base) = published(v, i);
                let ours_pct = 100.0 * (s.modelled_ns as f64 / base_ns - 1.0);
                let published_pct = 100.0 * (published_ms / published_base - 1.0);
                let agreement = (v != LinearMapVariant::Base).then(|| {
                    let a = Agreement::judge(
                        Change::new(ours_pct, Some(Mark::Improvement)),
                        Change::new(published_pct, Some(Mark::Improvement)),
                    );
                    tally.significant += 1;
                    tally.direction += usize::from(matches!(a, Agreement::Agrees | Agreement::Direction));
                    tally.size += usize::from(a == Agreement::Agrees);
                    a.as_str()
                });
                Cell {
                    variant: v,
                    ours_ms,
                    published_ms,
                    ours_pct,
                    published_pct,
                    agreement,
                    split: Split {
                        tlbi_ms: s.split[0] as f64 / 1e6,
                        wait_ms: s.split[1] as f64 / 1e6,
                        barrier_ms: s.split[2] as f64 / 1e6,
                    },
                    counts: s.counts,
                    run_in_full,
                }
            })
            .collect();
        rows.push(Row { machine: *mr, cells });
    }
    Ok(LinearMap { rows, tally })
}

/// The report's text.
pub fn render(r: &LinearMap) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== linear-map: \"Speed up boot with faster linear map creation\" (v1 on v6.9-rc1, seeds.md §3; v3 as merged for 6.10), map_mem() with rodata=full"
    );
    let _ = writeln!(
        s,
        "ours = modelled ms (TLBIs + completion waits + barriers, priced by the profile); fitted: each profile's completion wait on the published base - no-cont-remap difference, the barrier pair on v3's no-cont-remap - batch-barriers; all else predicted"
    );
    for row in &r.rows {
        let m = &row.machine;
        let _ = writeln!(s, "\n{} {}G (cost profile {})", m.name, m.gib, m.profile);
        let _ = writeln!(
            s,
            "{:<15} {:>10} {:>10} {:>6}  {:>8} {:>8}  {:<10} {:>8} {:>9} {:>9} {:>10} {:>11}",
            "variant",
            "ours ms",
            "published",
            "ratio",
            "ours %",
            "publ. %",
            "agreement",
            "tables",
            "fixmaps",
            "TLBIs",
            "dsb(ish)",
            "isb"
        );
        for c in &row.cells {
            let k = &c.counts;
            let label = if c.variant == LinearMapVariant::V6_10 { "v6.10 (v3)" } else { c.variant.name() };
            let _ = writeln!(
                s,
                "{:<15} {:>10.1} {:>10.0} {:>6.2}  {:>7.1}% {:>7.1}%  {:<10} {:>8} {:>9} {:>9} {:>10} {:>11}",
                label,
                c.ours_ms,
                c.published_ms,
                c.ours_ms / c.published_ms,
                c.ours_pct,
                c.published_pct,
                c.agreement.unwrap_or("-"),
                k.pgtables(),
                k.fixmap_maps(),
                k.tlbi_total,
                k.dsb_ish,
                k.isb
            );
        }
    }
    let t = &r.tally;
    let _ = writeln!(
        s,
        "\nagreement: the change against base agrees in direction on {} of {} cells, within 2x on {}; v6.10 is held against v3's merged column (its own base), the v1 variants against v1's",
        t.direction, t.significant, t.size
    );
    let _ = writeln!(
        s,
        "counts: 64G, 256G and 512G are the 1G run plus (N - 1) x the 2G run's increment (exact for rodata=full, checked against a full 16G run each time)"
    );
    s
}
