//! The captured /proc files split into fields, strictly: a line that is not
//! in the kernel's layout, a value that is not a number (`-5`, `x`, one
//! above `u64::MAX`), an empty file, a last line without its newline, a
//! zone cut short, are each a [`LineError`] naming the line; nothing is
//! skipped silently.
//!
//! Keys: `zone NAME/field` (zoneinfo, with `zone NAME/cpu N/field` inside a
//! pageset and `zone NAME/node/field` for the per-node stats), `zone
//! NAME/order N` (buddyinfo), `zone NAME/TYPE/order N` and `zone
//! NAME/blocks/TYPE` (pagetypeinfo), the name (meminfo, vmstat).

use std::collections::BTreeSet;
use std::fmt;

/// A file's fields, in file order: (key, value).
pub type Fields = Vec<(String, String)>;

/// What is wrong with a file, and on which line (1-based; 0 for the file as
/// a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// The line, from 1; 0 when no single line is at fault.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl LineError {
    /// An error at `line` (1-based).
    pub fn at(line: usize, what: impl Into<String>) -> LineError {
        LineError { line, what: what.into() }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 { f.write_str(&self.what) } else { write!(f, "line {}: {}", self.line, self.what) }
    }
}

impl std::error::Error for LineError {}

/// The zones of Debian's arm64 7.2 kernel, in the order zoneinfo prints
/// them (ZONE_DMA, ZONE_DMA32, ZONE_NORMAL, ZONE_MOVABLE, ZONE_DEVICE).
pub const ZONES: [&str; 5] = ["DMA", "DMA32", "Normal", "Movable", "Device"];

/// Free-list orders buddyinfo and pagetypeinfo print: 0..=MAX_PAGE_ORDER (10).
pub const NR_ORDERS: usize = 11;

/// Check the text as a whole: not empty, and its last line complete.
///
/// # Errors
/// An empty text, or one whose last line has no newline (a capture cut in
/// the middle of a line).
pub fn check_whole(text: &str) -> Result<(), LineError> {
    if text.trim().is_empty() {
        return Err(LineError::at(0, "empty (the capture was cut before this file?)"));
    }
    if !text.ends_with('\n') {
        return Err(LineError::at(text.lines().count(), "the last line is cut (no newline at the end)"));
    }
    Ok(())
}

/// A counter's value: decimal digits that fit in 64 bits.
///
/// # Errors
/// Anything else, with what it is.
pub fn number(line: usize, s: &str) -> Result<u64, LineError> {
    if s.is_empty() {
        return Err(LineError::at(line, "no value"));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(LineError::at(line, format!("`{s}` is not a number (decimal digits)")));
    }
    s.parse::<u64>().map_err(|_| LineError::at(line, format!("`{s}` does not fit in 64 bits")))
}

/// Split `file`'s text (as the peer script names it) into fields.
///
/// # Errors
/// The first line that is not in the kernel's layout, or a file cut short.
pub fn parse(file: &str, text: &str) -> Result<Fields, LineError> {
    check_whole(text)?;
    match file {
        "proc_meminfo" => meminfo(text),
        "proc_vmstat" => vmstat(text),
        "proc_zoneinfo" => zoneinfo(text),
        "proc_buddyinfo" => buddyinfo(text),
        "proc_pagetypeinfo" => pagetypeinfo(text),
        _ => Err(LineError::at(0, format!("no parser for {file}"))),
    }
}

fn no_duplicate(seen: &mut BTreeSet<String>, n: usize, key: &str) -> Result<(), LineError> {
    if seen.insert(key.to_string()) { Ok(()) } else { Err(LineError::at(n, format!("`{key}` a second time"))) }
}

/// `Name:   value[ kB]`.
fn meminfo(text: &str) -> Result<Fields, LineError> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let (k, v) = l.split_once(':').ok_or_else(|| LineError::at(n, format!("not `Name: value`: {l:?}")))?;
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(LineError::at(n, format!("not a meminfo name: {k:?}")));
        }
        let v = v.trim();
        let v = v.strip_suffix(" kB").unwrap_or(v).trim_end();
        number(n, v)?;
        no_duplicate(&mut seen, n, k)?;
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// `name value`.
fn vmstat(text: &str) -> Result<Fields, LineError> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let w: Vec<&str> = l.split_whitespace().collect();
        let [k, v] = w[..] else {
            return Err(LineError::at(n, format!("not `name value`: {l:?}")));
        };
        number(n, v)?;
        no_duplicate(&mut seen, n, k)?;
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// `Node N, zone NAME` (both files' line heads): the node and zone name.
fn node_zone(n: usize, head: &str) -> Result<String, LineError> {
    let rest = head.trim_start().strip_prefix("Node").ok_or_else(|| LineError::at(n, "does not start with `Node`"))?;
    let (node, zone) = rest.split_once(", zone").ok_or_else(|| LineError::at(n, "no `, zone` after the node"))?;
    number(n, node.trim())?;
    let zone = zone.trim();
    if !ZONES.contains(&zone) {
        return Err(LineError::at(n, format!("zone `{zone}` is not one of {}", ZONES.join(", "))));
    }
    Ok(zone.to_string())
}

/// One zone block of zoneinfo while it is read.
#[derive(Default)]
struct ZoneBlock {
    name: String,
    header_line: usize,
    keys: BTreeSet<String>,
    cpus: Vec<(String, BTreeSet<String>)>,
}

/// What a complete zone block holds.
const ZONE_KEYS: [&str; 4] = ["pages free", "present", "managed", "protection"];
const POPULATED_KEYS: [&str; 3] = ["pagesets", "start_pfn", "free_highatomic"];
const PAGESET_KEYS: [&str; 6] = ["count", "high", "batch", "high_min", "high_max", "vm stats threshold"];

impl ZoneBlock {
    /// Whether the block is complete; `end` is the line after it.
    fn check(&self, present: u64, end: usize) -> Result<(), LineError> {
        let cut = |what: &str| {
            LineError::at(
                end,
                format!(
                    "zone {} (from line {}) ends without {what} (the capture was cut?)",
                    self.name, self.header_line
                ),
            )
        };
        if let Some(k) = ZONE_KEYS.iter().find(|k| !self.keys.contains(**k)) {
            return Err(cut(&format!("its `{k}` line")));
        }
        if present == 0 {
            return Ok(());
        }
        if let Some(k) = POPULATED_KEYS.iter().find(|k| !self.keys.contains(**k)) {
            return Err(cut(&format!("its `{k}` line")));
        }
        if self.cpus.is_empty() {
            return Err(cut("a pageset"));
        }
        for (cpu, keys) in &self.cpus {
            if let Some(k) = PAGESET_KEYS.iter().find(|k| !keys.contains(**k)) {
                return Err(cut(&format!("the `{k}` line of cpu {cpu}'s pageset")));
            }
        }
        Ok(())
    }
}

/// zoneinfo, with the structure of mm/vmstat.c's zoneinfo_show_print():
/// every zone of [`ZONES`] in order, each complete.
fn zoneinfo(text: &str) -> Result<Fields, LineError> {
    let mut out = Vec::new();
    let mut zones: Vec<String> = Vec::new();
    let mut block: Option<ZoneBlock> = None;
    let mut present = 0;
    let (mut cpu, mut node_stats) = (None::<String>, false);
    let nlines = text.lines().count();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let t = l.trim();
        if t.starts_with("Node") {
            if let Some(b) = block.take() {
                b.check(present, n)?;
            }
            let z = node_zone(n, t)?;
            let expected = ZONES.get(zones.len()).copied().unwrap_or("(none)");
            if z != expected {
                return Err(LineError::at(n, format!("zone {z} where Linux 7.2 on arm64 prints {expected}")));
            }
            zones.push(z.clone());
            block = Some(ZoneBlock { name: z, header_line: n, ..ZoneBlock::default() });
            (cpu, node_stats, present) = (None, false, 0);
            continue;
        }
        let b = block.as_mut().ok_or_else(|| LineError::at(n, format!("before the first zone: {l:?}")))?;
        let zone = b.name.clone();
        match t {
            "per-node stats" => {
                node_stats = true;
                continue;
            }
            "pagesets" => {
                (node_stats, cpu) = (false, None);
                b.keys.insert("pagesets".to_string());
                continue;
            }
            _ => {}
        }
        if let Some(c) = t.strip_prefix("cpu:") {
            let c = c.trim();
            number(n, c)?;
            cpu = Some(c.to_string());
            b.cpus.push((c.to_string(), BTreeSet::new()));
            continue;
        }
        if let Some(p) = t.strip_prefix("protection:") {
            let p = p.trim();
            let inner = p
                .strip_prefix('(')
                .and_then(|p| p.strip_suffix(')'))
                .ok_or_else(|| LineError::at(n, format!("protection not in parentheses: {p:?}")))?;
            for v in inner.split(',') {
                number(n, v.trim())?;
            }
            b.keys.insert("protection".to_string());
            out.push((format!("zone {zone}/protection"), p.replace(' ', "")));
            continue;
        }
        let (k, v) = t
            .rsplit_once(char::is_whitespace)
            .map(|(k, v)| (k.trim().trim_end_matches(':').to_string(), v))
            .ok_or_else(|| LineError::at(n, format!("not `name value`: {l:?}")))?;
        let value = number(n, v)?;
        if k == "pages free" {
            (cpu, node_stats) = (None, false);
        }
        if k == "present" {
            present = value;
        }
        // A pageset's lines are indented deeper than the zone's; the
        // vm stats threshold closes it.
        let key = match (&cpu, node_stats) {
            (_, true) => format!("zone {zone}/node/{k}"),
            (Some(c), _) if k == "vm stats threshold" || l.starts_with("              ") => {
                if let Some((_, keys)) = b.cpus.last_mut() {
                    keys.insert(k.clone());
                }
                format!("zone {zone}/cpu {c}/{k}")
            }
            _ => {
                b.keys.insert(k.clone());
                format!("zone {zone}/{k}")
            }
        };
        out.push((key, v.to_string()));
    }
    match block {
        Some(b) => b.check(present, nlines + 1)?,
        None => return Err(LineError::at(1, "no `Node 0, zone` line")),
    }
    if zones.len() != ZONES.len() {
        return Err(LineError::at(
            nlines,
            format!(
                "the zones end with {} at the last line; Linux 7.2 on arm64 prints {} (the capture was cut?)",
                zones.last().map_or("(none)", String::as_str),
                ZONES.join(", ")
            ),
        ));
    }
    Ok(out)
}

/// `Node N, zone NAME` and one free count per order.
fn buddyinfo(text: &str) -> Result<Fields, LineError> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let (head, counts) = split_zone_head(n, l)?;
        let zone = node_zone(n, head)?;
        no_duplicate(&mut seen, n, &zone)?;
        let counts: Vec<&str> = counts.split_whitespace().collect();
        if counts.len() != NR_ORDERS {
            return Err(LineError::at(
                n,
                format!("{} free counts; Linux 7.2 prints {NR_ORDERS} (orders 0..10)", counts.len()),
            ));
        }
        for (o, v) in counts.iter().enumerate() {
            number(n, v)?;
            out.push((format!("zone {zone}/order {o}"), v.to_string()));
        }
    }
    Ok(out)
}

/// `Node N, zone NAME` then the rest of the line: the zone name is the
/// first word after `zone`.
fn split_zone_head(n: usize, l: &str) -> Result<(&str, &str), LineError> {
    let z = l.find(", zone").ok_or_else(|| LineError::at(n, format!("not `Node N, zone NAME ...`: {l:?}")))?;
    let after = &l[z + ", zone".len()..];
    let name_start = after.len() - after.trim_start().len();
    let name_len =
        after[name_start..].find(|c: char| c.is_whitespace() || c == ',').unwrap_or(after.len() - name_start);
    let split = z + ", zone".len() + name_start + name_len;
    Ok((&l[..split], &l[split..]))
}

/// pagetypeinfo: the block order, the free counts per zone, type and
/// order, and the pageblocks per zone and type.
fn pagetypeinfo(text: &str) -> Result<Fields, LineError> {
    let mut out = Vec::new();
    let mut block_types: Vec<String> = Vec::new();
    let (mut free_zones, mut block_zones) = (BTreeSet::new(), Vec::new());
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        if let Some(h) = l.strip_prefix("Number of blocks type") {
            block_types = h.split_whitespace().map(str::to_string).collect();
            if block_types.is_empty() {
                return Err(LineError::at(n, "no migrate types after `Number of blocks type`"));
            }
            continue;
        }
        if let Some(h) = l.strip_prefix("Free pages count per migrate type at order") {
            let orders: Vec<&str> = h.split_whitespace().collect();
            if orders.len() != NR_ORDERS {
                return Err(LineError::at(n, format!("{} orders; Linux 7.2 prints {NR_ORDERS}", orders.len())));
            }
            continue;
        }
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim();
            if !matches!(k, "Page block order" | "Pages per block") {
                return Err(LineError::at(n, format!("not a pagetypeinfo line: {l:?}")));
            }
            number(n, v.trim())?;
            out.push((k.to_string(), v.trim().to_string()));
            continue;
        }
        let (head, rest) = split_zone_head(n, l)?;
        let zone = node_zone(n, head)?;
        if let Some(r) = rest.strip_prefix(", type") {
            let mut w = r.split_whitespace();
            let ty = w.next().ok_or_else(|| LineError::at(n, "no migrate type after `type`"))?;
            let counts: Vec<&str> = w.collect();
            if counts.len() != NR_ORDERS {
                return Err(LineError::at(n, format!("{} free counts; Linux 7.2 prints {NR_ORDERS}", counts.len())));
            }
            for (o, v) in counts.iter().enumerate() {
                number(n, v)?;
                out.push((format!("zone {zone}/{ty}/order {o}"), v.to_string()));
            }
            free_zones.insert(zone);
        } else {
            if block_types.is_empty() {
                return Err(LineError::at(n, format!("a pageblock row before `Number of blocks type`: {l:?}")));
            }
            let counts: Vec<&str> = rest.split_whitespace().collect();
            if counts.len() != block_types.len() {
                return Err(LineError::at(
                    n,
                    format!("{} pageblock counts for {} migrate types", counts.len(), block_types.len()),
                ));
            }
            for (ty, v) in block_types.iter().zip(&counts) {
                number(n, v)?;
                out.push((format!("zone {zone}/blocks/{ty}"), v.to_string()));
            }
            block_zones.push(zone);
        }
    }
    let nlines = text.lines().count();
    if block_types.is_empty() {
        return Err(LineError::at(nlines, "no `Number of blocks type` table (the capture was cut?)"));
    }
    if let Some(z) = free_zones.iter().find(|z| !block_zones.contains(z)) {
        return Err(LineError::at(nlines, format!("no pageblock row for zone {z} (the capture was cut?)")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(number(3, "18446744073709551615"), Ok(u64::MAX));
        assert!(number(3, "18446744073709551616").unwrap_err().what.contains("does not fit in 64 bits"));
        assert_eq!(number(3, "-5").unwrap_err(), LineError::at(3, "`-5` is not a number (decimal digits)"));
        assert!(number(3, "").unwrap_err().what.contains("no value"));
        assert!(number(3, "0x10").is_err());
    }

    #[test]
    fn whole_file() {
        assert!(check_whole("").unwrap_err().what.contains("empty"));
        assert!(check_whole("\n \n").unwrap_err().what.contains("empty"));
        assert_eq!(check_whole("a 1\nb 2").unwrap_err().line, 2);
        assert!(check_whole("a 1\n").is_ok());
    }

    #[test]
    fn meminfo_and_vmstat_lines() {
        let m = parse("proc_meminfo", "MemTotal:        4002356 kB\nHugePages_Total:       0\n").unwrap();
        assert_eq!(m, [("MemTotal".into(), "4002356".into()), ("HugePages_Total".into(), "0".into())]);
        assert_eq!(parse("proc_meminfo", "MemTotal 5 kB\n").unwrap_err().line, 1);
        assert_eq!(parse("proc_meminfo", "A: 1 kB\nA: 2 kB\n").unwrap_err().line, 2);
        assert_eq!(
            parse("proc_vmstat", "nr_free_pages 5\npgfree\n").unwrap_err(),
            LineError::at(2, "not `name value`: \"pgfree\"")
        );
        assert!(parse("proc_vmstat", "a 1 2\n").is_err());
    }

    #[test]
    fn buddyinfo_lines() {
        let ok =
            "Node 0, zone      DMA      0      0      1      0      0      0      0      0      4      3    737 \n";
        let f = parse("proc_buddyinfo", ok).unwrap();
        assert_eq!(f[10], ("zone DMA/order 10".to_string(), "737".to_string()));
        let e = parse("proc_buddyinfo", "Node 0, zone DMA 1 2 3\n").unwrap_err();
        assert!(e.what.contains("3 free counts"), "{e}");
        assert!(parse("proc_buddyinfo", "Node 0, zone HighMem 0 0 0 0 0 0 0 0 0 0 0\n").is_err());
        assert!(parse("proc_buddyinfo", "garbage\n").unwrap_err().what.contains("not `Node N, zone NAME"));
    }

    #[test]
    fn split_zone_heads() {
        assert_eq!(split_zone_head(1, "Node 0, zone   Normal  1 2").unwrap(), ("Node 0, zone   Normal", "  1 2"));
        assert_eq!(
            split_zone_head(1, "Node    0, zone      DMA, type    Unmovable 0").unwrap(),
            ("Node    0, zone      DMA", ", type    Unmovable 0")
        );
    }
}
