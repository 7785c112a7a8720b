//! /proc/vmallocinfo compared by caller: how many areas each caller
//! (the function, without its offset: `paging_init+0x388/0x440` is
//! `paging_init`) has, their pages and bytes, their sizes, what they are
//! (`vmalloc`, `vmap`, `ioremap`, ...), and where the caller's first area
//! comes in address order.
//!
//! Keys: `areas` and `pages` (the whole file), `CALLER/areas`,
//! `CALLER/pages` (the `pages=` of its areas), `CALLER/bytes` (the size
//! column, guard pages included, as printed), `CALLER/sizes` (each size
//! with its count, `20480x26`), `CALLER/kind` and `CALLER/rank` (1 for the
//! caller of the lowest area).

use super::fields::{Fields, LineError, check_whole, number};
use std::collections::BTreeMap;

/// One line of vmallocinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Area {
    /// First address.
    pub start: u64,
    /// Size in bytes as printed (end - start).
    pub size: u64,
    /// The caller's function, or `vm_map_ram` / `unpurged vm_area`.
    pub caller: String,
    /// `pages=`, where printed.
    pub pages: Option<u64>,
    /// The flag words (`vmalloc`, `vmap`, `ioremap`, `user`, `vpages`, ...).
    pub kind: String,
}

fn hex(n: usize, s: &str) -> Result<u64, LineError> {
    let h = s.strip_prefix("0x").ok_or_else(|| LineError::at(n, format!("`{s}` is not an address (0x...)")))?;
    u64::from_str_radix(h, 16).map_err(|_| LineError::at(n, format!("`{s}` is not a 64-bit hexadecimal address")))
}

/// Parse the file.
///
/// # Errors
/// A line that is not `0xSTART-0xEND SIZE CALLER ...`, or whose size is not
/// END - START; an empty file or a cut last line.
pub fn parse(text: &str) -> Result<Vec<Area>, LineError> {
    check_whole(text)?;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let mut w = l.split_whitespace();
        let range = w.next().ok_or_else(|| LineError::at(n, "an empty line"))?;
        let (s, e) =
            range.split_once('-').ok_or_else(|| LineError::at(n, format!("not `0xSTART-0xEND`: {range:?}")))?;
        let (start, end) = (hex(n, s)?, hex(n, e)?);
        let size = number(n, w.next().ok_or_else(|| LineError::at(n, "no size"))?)?;
        if end.checked_sub(start) != Some(size) {
            return Err(LineError::at(n, format!("size {size} is not the range's {}", end.wrapping_sub(start))));
        }
        let rest: Vec<&str> = w.collect();
        let (caller, flags) = match rest.as_slice() {
            ["unpurged", "vm_area", f @ ..] => ("unpurged vm_area".to_string(), f),
            [c, f @ ..] => (function(c), f),
            [] => return Err(LineError::at(n, "no caller")),
        };
        let mut pages = None;
        let mut kind = Vec::new();
        for f in flags {
            if let Some(p) = f.strip_prefix("pages=") {
                pages = Some(number(n, p)?);
            } else if f.starts_with("phys=") || (f.starts_with('N') && f.contains('=')) {
                // The physical address and the pages per node.
            } else {
                kind.push(*f);
            }
        }
        out.push(Area { start, size, caller, pages, kind: kind.join(" ") });
    }
    Ok(out)
}

/// `paging_init+0x388/0x440` -> `paging_init`.
fn function(caller: &str) -> String {
    caller.split_once('+').map_or(caller, |(f, _)| f).to_string()
}

/// The fields of `areas`, callers in the order of their lowest area.
pub fn fields(areas: &[Area]) -> Fields {
    let mut by_addr: Vec<&Area> = areas.iter().collect();
    by_addr.sort_by_key(|a| a.start);
    let mut order: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<&str, Vec<&Area>> = BTreeMap::new();
    for a in &by_addr {
        if !groups.contains_key(a.caller.as_str()) {
            order.push(&a.caller);
        }
        groups.entry(&a.caller).or_default().push(a);
    }
    let total_pages: u64 = areas.iter().filter_map(|a| a.pages).sum();
    let mut out = vec![("areas".to_string(), areas.len().to_string()), ("pages".to_string(), total_pages.to_string())];
    for (rank, c) in order.iter().enumerate() {
        let g = &groups[c];
        let mut sizes: BTreeMap<u64, usize> = BTreeMap::new();
        for a in g {
            *sizes.entry(a.size).or_default() += 1;
        }
        let sizes: Vec<String> = sizes.iter().map(|(s, n)| format!("{s}x{n}")).collect();
        let mut kinds: Vec<&str> = g.iter().map(|a| a.kind.as_str()).collect();
        kinds.dedup();
        out.push((format!("{c}/areas"), g.len().to_string()));
        if g.iter().any(|a| a.pages.is_some()) {
            out.push((format!("{c}/pages"), g.iter().filter_map(|a| a.pages).sum::<u64>().to_string()));
        }
        out.push((format!("{c}/bytes"), g.iter().map(|a| a.size).sum::<u64>().to_string()));
        out.push((format!("{c}/sizes"), sizes.join(",")));
        if kinds.iter().any(|k| !k.is_empty()) {
            out.push((format!("{c}/kind"), kinds.join("|")));
        }
        out.push((format!("{c}/rank"), (rank + 1).to_string()));
    }
    out
}

/// The caller a key belongs to (`kernel_clone/areas` -> `kernel_clone`);
/// None for the whole file's keys.
pub fn caller_of(key: &str) -> Option<&str> {
    key.rsplit_once('/').map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
0xffff800080000000-0xffff8000812c0000 19660800 paging_init+0x388/0x440 phys=0x0000000040200000 vmap
0xffff800082f01000-0xffff800082f03000    8192 __ioremap_prot+0x6c/0xe0 phys=0x0000000008020000 ioremap
0xffff800082f68000-0xffff800082f6d000   20480 kernel_clone+0xb0/0x558 pages=4 vmalloc N0=4
0xffff800082f60000-0xffff800082f65000   20480 kernel_clone+0xb0/0x558 pages=4 vmalloc N0=4
0xffff800082f70000-0xffff800082f72000    8192 unpurged vm_area
";

    #[test]
    fn groups_by_caller_in_address_order() {
        let a = parse(TEXT).unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a[2].caller, "kernel_clone");
        assert_eq!(a[2].pages, Some(4));
        assert_eq!(a[1].kind, "ioremap");
        let f: BTreeMap<String, String> = fields(&a).into_iter().collect();
        assert_eq!(f["areas"], "5");
        assert_eq!(f["pages"], "8");
        assert_eq!(f["kernel_clone/areas"], "2");
        assert_eq!(f["kernel_clone/sizes"], "20480x2");
        assert_eq!(f["kernel_clone/rank"], "3");
        assert_eq!(f["paging_init/rank"], "1");
        assert_eq!(f["paging_init/kind"], "vmap");
        assert!(!f.contains_key("paging_init/pages"));
        assert_eq!(f["unpurged vm_area/bytes"], "8192");
        assert_eq!(caller_of("unpurged vm_area/bytes"), Some("unpurged vm_area"));
    }

    #[test]
    fn malformed_lines_name_their_line() {
        let e = parse("0xffff800080000000-0xffff800080002000 8192 f+0x1/0x2 vmalloc\n0xffff 12 x\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("0xffff800080000000-0xffff800080002000 4096 f vmalloc\n").unwrap_err();
        assert!(e.what.contains("size 4096 is not the range's 8192"), "{e}");
        let e = parse("0xffff800080000000-0xffff800080002000 8192\n").unwrap_err();
        assert!(e.what.contains("no caller"));
        assert!(parse("0xffff800080000000-0xffff800080002000 8192 f pages=-1 vmalloc\n").is_err());
    }
}
