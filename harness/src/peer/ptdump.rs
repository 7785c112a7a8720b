//! The kernel's page-table dump (arm64 ptdump's `kernel_page_tables`, and
//! mmlab's own in the same format) compared region by region, and the
//! table pages per level derived from it.
//!
//! The dump notes every entry of every table it visits, empty or not, at
//! the entry's level (mm/pagewalk.c with ptdump's callbacks), and never
//! anything below an empty or leaf entry. So the runs printed at the PTE
//! level cover exactly the spans (2M each) of the PTE tables, the runs at
//! PMD level or below those of the PMD tables (1G each), and so on: the
//! number of tables of a level is the number of distinct spans of that
//! level the runs at or below it touch. A table belongs to the region (the
//! `---[ marker ]---` section) of its first non-empty entry, which is how
//! `scripts/arm64-peer/ptdump/mmlab_ptdump.c` counts them on the real
//! kernel (its `pgtable_pages`, [`PgtablePages`]); `tests/tests/arm64_peer.rs`
//! checks that both agree on every capture.
//!
//! Keys: `va_bits`, `levels`, `tables/LEVEL` and `tables/total` (the whole
//! dump), and per region R: `R/tables LEVEL`, `R/range` (the first mapped
//! address to the end of the last mapping), `R/runs` (lines with
//! attributes), `R/mapped kB`, and `R/LEVEL ATTRS` (kB mapped at that level
//! with those attributes, as ptdump prints them, spaces collapsed).

use super::fields::{Fields, LineError, check_whole, number};
use std::collections::{BTreeMap, BTreeSet};

/// Table levels, from the top: the names ptdump prints, and the keys.
pub const LEVELS: [&str; 5] = ["PGD", "P4D", "PUD", "PMD", "PTE"];
/// Lower-case level names as `pgtable_pages` and the keys use them.
pub const LEVEL_KEYS: [&str; 5] = ["pgd", "p4d", "pud", "pmd", "pte"];

/// One printed run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// First address.
    pub start: u64,
    /// End (exclusive), as u128 so that the top of the address space is 2^64.
    pub end: u128,
    /// The level it is printed at (0 PGD .. 4 PTE).
    pub level: usize,
    /// The attributes, spaces collapsed; empty for a hole.
    pub attrs: String,
    /// Index into [`Dump::regions`].
    pub region: usize,
}

/// A parsed dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dump {
    /// The marker sections, in order (`Linear Mapping start`, ...).
    pub regions: Vec<String>,
    /// The runs, in address order.
    pub runs: Vec<Run>,
}

/// Table pages per level (pgd, p4d, pud, pmd, pte).
pub type Tables = [u64; 5];

/// `(end - start)` as ptdump prints it: `(%9lu, unit)`, dividing by 1024
/// while it divides evenly.
fn printed_size(start: u64, end: u128) -> (u64, char) {
    const UNITS: &[u8] = b"KMGTPE";
    let mut delta = (end - u128::from(start)) >> 10;
    let mut u = 0;
    while delta & 1023 == 0 && u + 1 < UNITS.len() {
        delta >>= 10;
        u += 1;
    }
    (delta as u64, UNITS[u] as char)
}

fn hex(n: usize, s: &str) -> Result<u64, LineError> {
    let h = s.strip_prefix("0x").ok_or_else(|| LineError::at(n, format!("`{s}` is not an address (0x...)")))?;
    u64::from_str_radix(h, 16).map_err(|_| LineError::at(n, format!("`{s}` is not a 64-bit hexadecimal address")))
}

/// Parse a dump.
///
/// # Errors
/// A line that is neither a marker nor a run, a run that does not start
/// where the previous one ended or whose printed size is not its range's,
/// and a dump that does not end at the top of the address space (one that
/// was cut).
pub fn parse(text: &str) -> Result<Dump, LineError> {
    check_whole(text)?;
    let mut regions = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(name) = l.strip_prefix("---[ ").and_then(|r| r.strip_suffix(" ]---")) {
            regions.push(name.to_string());
            continue;
        }
        if regions.is_empty() {
            return Err(LineError::at(n, format!("a run before the first `---[ marker ]---`: {l:?}")));
        }
        let mut w = l.split_whitespace();
        let range = w.next().ok_or_else(|| LineError::at(n, "an empty line"))?;
        let (s, e) =
            range.split_once('-').ok_or_else(|| LineError::at(n, format!("not `0xSTART-0xEND`: {range:?}")))?;
        let start = hex(n, s)?;
        let end = match hex(n, e)? {
            0 => 1u128 << 64,
            e => u128::from(e),
        };
        if end <= u128::from(start) {
            return Err(LineError::at(n, format!("the run ends at {e} before it starts")));
        }
        if let Some(prev) = runs.last()
            && prev.end != u128::from(start)
        {
            return Err(LineError::at(n, format!("the run starts at {s}, not where the previous one ended")));
        }
        let size = w.next().ok_or_else(|| LineError::at(n, "no size"))?;
        let (digits, unit) = size.split_at(size.len().saturating_sub(1));
        let want = printed_size(start, end);
        if (number(n, digits)?, unit.chars().next().unwrap_or(' ')) != want {
            return Err(LineError::at(n, format!("size {size} is not the range's {}{}", want.0, want.1)));
        }
        let lv = w.next().ok_or_else(|| LineError::at(n, "no level"))?;
        let level = LEVELS.iter().position(|x| *x == lv).ok_or_else(|| LineError::at(n, format!("level `{lv}`")))?;
        let attrs: Vec<&str> = w.collect();
        runs.push(Run { start, end, level, attrs: attrs.join(" "), region: regions.len() - 1 });
    }
    match runs.last() {
        Some(r) if r.end == 1 << 64 => Ok(Dump { regions, runs }),
        Some(_) => Err(LineError::at(
            text.lines().count(),
            "the dump ends before the top of the address space (the capture was cut?)",
        )),
        None => Err(LineError::at(text.lines().count(), "no runs")),
    }
}

/// log2 of the span of one table of each level with 4K pages (the pgd's is
/// the whole space).
const TABLE_SHIFT: [u32; 5] = [64, 48, 39, 30, 21];

impl Dump {
    /// The VA bits: the dump starts at PAGE_OFFSET = -(1 << va_bits).
    pub fn va_bits(&self) -> u32 {
        self.runs.first().map_or(0, |r| 64 - r.start.leading_ones())
    }

    /// Translation levels: 5 with 52-bit VAs (LPA2), else 4 (4K pages).
    pub fn levels(&self) -> usize {
        if self.va_bits() > 48 { 5 } else { 4 }
    }

    /// The region (index) of the run holding `addr`.
    fn region_at(&self, addr: u128) -> usize {
        let i = self.runs.partition_point(|r| r.end <= addr);
        self.runs.get(i).map_or(0, |r| r.region)
    }

    /// Table pages per level, in all and per region.
    pub fn tables(&self) -> (Tables, BTreeMap<usize, Tables>) {
        let mut total = [0; 5];
        let mut by_region: BTreeMap<usize, Tables> = BTreeMap::new();
        // The pgd: one, in the region of the first entry that is not empty.
        let first_used = self.runs.iter().find(|r| r.level > 0 || !r.attrs.is_empty());
        total[0] = 1;
        by_region.entry(first_used.map_or(0, |r| r.region)).or_default()[0] += 1;
        for level in 1..5 {
            if level == 1 && self.levels() < 5 {
                continue; // the p4d is folded
            }
            let shift = TABLE_SHIFT[level];
            // The tables' spans, each with the first address of a
            // non-empty entry in it (a deeper run, or one with attributes).
            let mut spans: BTreeMap<u128, Option<u128>> = BTreeMap::new();
            for r in self.runs.iter().filter(|r| r.level >= level) {
                let used = r.level > level || !r.attrs.is_empty();
                let (first, last) = (u128::from(r.start) >> shift, (r.end - 1) >> shift);
                for span in first..=last {
                    let at = u128::from(r.start).max(span << shift);
                    let slot = spans.entry(span).or_insert(None);
                    if used && slot.is_none_or(|s| at < s) {
                        *slot = Some(at);
                    }
                }
            }
            for (span, used) in spans {
                let at = used.unwrap_or_else(|| (span << shift).max(u128::from(self.runs[0].start)));
                total[level] += 1;
                by_region.entry(self.region_at(at)).or_default()[level] += 1;
            }
        }
        (total, by_region)
    }
}

fn kb(bytes: u128) -> String {
    (bytes >> 10).to_string()
}

/// The fields of a dump.
pub fn fields(d: &Dump) -> Fields {
    let mut out =
        vec![("va_bits".to_string(), d.va_bits().to_string()), ("levels".to_string(), d.levels().to_string())];
    let (total, by_region) = d.tables();
    let levels: Vec<usize> = (0..5).filter(|&l| l != 1 || d.levels() == 5).collect();
    for &l in &levels {
        out.push((format!("tables/{}", LEVEL_KEYS[l]), total[l].to_string()));
    }
    out.push(("tables/total".to_string(), total.iter().sum::<u64>().to_string()));
    for (ri, name) in d.regions.iter().enumerate() {
        let runs: Vec<&Run> = d.runs.iter().filter(|r| r.region == ri).collect();
        if let Some(t) = by_region.get(&ri) {
            for &l in &levels {
                out.push((format!("{name}/tables {}", LEVEL_KEYS[l]), t[l].to_string()));
            }
        }
        let mapped: Vec<&&Run> = runs.iter().filter(|r| !r.attrs.is_empty()).collect();
        let (Some(first), Some(last)) = (mapped.first(), mapped.last()) else { continue };
        out.push((format!("{name}/range"), format!("0x{:016x}-0x{:016x}", first.start, last.end as u64)));
        out.push((format!("{name}/runs"), mapped.len().to_string()));
        out.push((format!("{name}/mapped kB"), kb(mapped.iter().map(|r| r.end - u128::from(r.start)).sum())));
        let mut by_attrs: BTreeMap<(usize, &str), u128> = BTreeMap::new();
        let mut order = Vec::new();
        for r in &mapped {
            let k = (r.level, r.attrs.as_str());
            if !by_attrs.contains_key(&k) {
                order.push(k);
            }
            *by_attrs.entry(k).or_default() += r.end - u128::from(r.start);
        }
        for k in order {
            out.push((format!("{name}/{} {}", LEVELS[k.0], k.1), kb(by_attrs[&k])));
        }
    }
    out
}

/// The region a key belongs to (`vmalloc() area/runs` -> `vmalloc() area`);
/// None for the dump's own keys (`tables/...`, `va_bits`, `levels`).
pub fn region_of(key: &str) -> Option<&str> {
    let (r, _) = key.split_once('/')?;
    (r != "tables").then_some(r)
}

/// The module's `pgtable_pages` (see scripts/arm64-peer/ptdump/mmlab_ptdump.c).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PgtablePages {
    /// `va_bits:`.
    pub va_bits: u32,
    /// `levels:`.
    pub levels: usize,
    /// `tables:`, per level.
    pub tables: Tables,
    /// `region NAME:` lines, per level.
    pub regions: Vec<(String, Tables)>,
    /// `text:`: which walk the dump's text is, and whether the two agree.
    pub text: String,
}

/// `pgd N p4d N pud N pmd N pte N total N`.
fn level_counts(n: usize, s: &str) -> Result<Tables, LineError> {
    let w: Vec<&str> = s.split_whitespace().collect();
    let mut t = [0; 5];
    if w.len() != 12 {
        return Err(LineError::at(n, format!("not `pgd N p4d N pud N pmd N pte N total N`: {s:?}")));
    }
    for (i, k) in LEVEL_KEYS.iter().enumerate() {
        if w[2 * i] != *k {
            return Err(LineError::at(n, format!("`{}` where `{k}` was expected", w[2 * i])));
        }
        t[i] = number(n, w[2 * i + 1])?;
    }
    if w[10] != "total" || number(n, w[11])? != t.iter().sum::<u64>() {
        return Err(LineError::at(n, "the total is not the sum of the levels"));
    }
    Ok(t)
}

/// Parse `pgtable_pages`.
///
/// # Errors
/// A line the module does not print, an `error:` line the module printed,
/// or a file without its `tables:` or its last (`text:`) line.
pub fn parse_pgtable_pages(text: &str) -> Result<PgtablePages, LineError> {
    check_whole(text)?;
    let mut p = PgtablePages { va_bits: 0, levels: 0, tables: [0; 5], regions: Vec::new(), text: String::new() };
    let mut has_tables = false;
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if l.starts_with('#') {
            continue;
        }
        let (k, v) = l.split_once(':').ok_or_else(|| LineError::at(n, format!("not `key: value`: {l:?}")))?;
        match k {
            "va_bits" => p.va_bits = number(n, v.trim())? as u32,
            "levels" => p.levels = number(n, v.trim())? as usize,
            "walk" | "reached twice" => {}
            "tables" => {
                p.tables = level_counts(n, v)?;
                has_tables = true;
            }
            "text" => p.text = v.trim().to_string(),
            "error" => return Err(LineError::at(n, format!("the module reported an error: {}", v.trim()))),
            _ => match k.strip_prefix("region ") {
                Some(r) => p.regions.push((r.to_string(), level_counts(n, v)?)),
                None => return Err(LineError::at(n, format!("not a pgtable_pages line: {l:?}"))),
            },
        }
    }
    let last = text.lines().count();
    if !has_tables {
        return Err(LineError::at(last, "no `tables:` line"));
    }
    if p.text.is_empty() {
        return Err(LineError::at(last, "no `text:` line at the end (the capture was cut?)"));
    }
    Ok(p)
}

/// The region names of `d` that map something (lines with attributes).
pub fn mapped_regions(d: &Dump) -> BTreeSet<&str> {
    d.runs.iter().filter(|r| !r.attrs.is_empty()).map(|r| d.regions[r.region].as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4-level dump: 4M of linear map in PTEs (two PTE tables, one PMD
    /// table), a 2M block in the vmalloc area, the vmemmap in a PMD block.
    const DUMP: &str = "\
---[ Linear Mapping start ]---
0xffff000000000000-0xffff000000200000           2M PTE       RW NX SHD AF            UXN    MEM/NORMAL
0xffff000000200000-0xffff000000400000           2M PTE       ro NX SHD AF            UXN    MEM/NORMAL
0xffff000000400000-0xffff000040000000        1020M PMD
0xffff000040000000-0xffff008000000000         511G PUD
0xffff008000000000-0xffff800000000000      130560G PGD
---[ Linear Mapping end ]---
---[ vmalloc() area ]---
0xffff800000000000-0xffff800000200000           2M PMD       RW NX SHD AF        BLK UXN    MEM/NORMAL
0xffff800000200000-0xffff800040000000        1022M PMD
0xffff800040000000-0xffff808000000000         511G PUD
0xffff808000000000-0xfffffd8000000000         125T PGD
0xfffffd8000000000-0xfffffdffc0000000         511G PUD
---[ vmemmap start ]---
0xfffffdffc0000000-0xfffffdffc0200000           2M PMD       RW NX SHD AF        BLK UXN    MEM/NORMAL
0xfffffdffc0200000-0xfffffe0000000000        1022M PMD
0xfffffe0000000000-0x0000000000000000           2T PGD
";

    #[test]
    fn tables_per_level_and_region() {
        let d = parse(DUMP).unwrap();
        assert_eq!((d.va_bits(), d.levels()), (48, 4));
        let (total, by_region) = d.tables();
        assert_eq!(total, [1, 0, 3, 3, 2]);
        assert_eq!(by_region[&0], [1, 0, 1, 1, 2]);
        assert_eq!(by_region[&2], [0, 0, 1, 1, 0]);
        // The vmemmap's pud table starts in the vmalloc area's section but
        // maps nothing before the vmemmap.
        assert_eq!(by_region[&3], [0, 0, 1, 1, 0]);
        let f: BTreeMap<String, String> = fields(&d).into_iter().collect();
        assert_eq!(f["tables/total"], "9");
        assert_eq!(f["Linear Mapping start/range"], "0xffff000000000000-0xffff000000400000");
        assert_eq!(f["Linear Mapping start/PTE ro NX SHD AF UXN MEM/NORMAL"], "2048");
        assert_eq!(f["vmalloc() area/PMD RW NX SHD AF BLK UXN MEM/NORMAL"], "2048");
        assert_eq!(f["vmalloc() area/runs"], "1");
        assert!(!f.contains_key("tables/p4d"));
        assert_eq!(region_of("vmalloc() area/runs"), Some("vmalloc() area"));
        assert_eq!(region_of("tables/pte"), None);
    }

    #[test]
    fn a_cut_or_broken_dump_is_an_error() {
        let cut: String = DUMP.lines().take(4).map(|l| format!("{l}\n")).collect();
        assert!(parse(&cut).unwrap_err().what.contains("ends before the top"));
        let gap = DUMP.replacen("0xffff000000200000-0xffff000000400000", "0xffff000000201000-0xffff000000400000", 1);
        assert_eq!(parse(&gap).unwrap_err().line, 3);
        let size = DUMP.replacen("1020M PMD", "1021M PMD", 1);
        assert!(parse(&size).unwrap_err().what.contains("size 1021M"));
        let level = DUMP.replacen("2M PTE", "2M PTX", 1);
        assert_eq!(parse(&level).unwrap_err().line, 2);
    }

    #[test]
    fn pgtable_pages() {
        let text = "# x\nva_bits: 48\nlevels: 4\nwalk: 0xffff000000000000-0x0000000000000000\n\
            tables: pgd 1 p4d 0 pud 4 pmd 9 pte 2063 total 2077\n\
            region Linear Mapping start: pgd 1 p4d 0 pud 1 pmd 4 pte 2048 total 2054\n\
            reached twice: 0\ntext: the kernel's ptdump_walk(), the same as this module's walk (242 lines)\n";
        let p = parse_pgtable_pages(text).unwrap();
        assert_eq!(p.tables, [1, 0, 4, 9, 2063]);
        assert_eq!(p.regions[0], ("Linear Mapping start".to_string(), [1, 0, 1, 4, 2048]));
        let bad_total = text.replace("total 2077", "total 2078");
        assert_eq!(parse_pgtable_pages(&bad_total).unwrap_err().line, 5);
        let cut: String = text.lines().take(6).map(|l| format!("{l}\n")).collect();
        assert!(parse_pgtable_pages(&cut).unwrap_err().what.contains("no `text:`"));
        let err = text.replace("reached twice: 0", "error: -12");
        assert!(parse_pgtable_pages(&err).unwrap_err().what.contains("-12"));
    }
}
