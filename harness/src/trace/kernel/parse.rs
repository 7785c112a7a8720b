//! Reading a real kernel's kmem trace: the `trace` file's text
//! (`cat /sys/kernel/tracing/trace`, `trace_pipe`) or `trace-cmd report`.
//!
//! A line is `<comm>-<pid> [<cpu>] [<flags>] <secs>.<usecs>: <event>: <fields>`;
//! `trace-cmd report` may put the system before the name
//! (`kmem:mm_page_alloc:`), omit the flags, or pad the fields, and all of
//! these are read. Fields are `key=value` words (`page=` and `pfn=` in hex,
//! the others decimal; `gfp_flags=` is kept as text). Lines starting with
//! `#` are comments, except `# mmlab: key=value ...` lines, which carry the
//! traced machine's description (see [`super::TracedMachine`]).

use mmlab_engine::MAX_PAGE_ORDER;
use mmlab_engine::mm::mmzone::MIGRATE_TYPES;
use std::collections::BTreeMap;

/// The kmem events the replay understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KEventKind {
    /// `mm_page_alloc`: an allocation returned (pfn 0 with a NULL page: failed).
    Alloc { order: u32, migratetype: i32, gfp: String },
    /// `mm_page_free`: `free_pages_prepare()` of a block.
    Free { order: u32 },
    /// `mm_page_free_batched`: a folio committed by `free_unref_folios()`.
    FreeBatched,
    /// `mm_page_alloc_zone_locked`: a block off the buddy lists under the zone lock.
    ZoneLocked { order: u32, migratetype: i32, percpu_refill: bool },
    /// `mm_page_pcpu_drain`: a page from a pcp list back to the buddy.
    PcpuDrain { order: u32, migratetype: i32 },
}

/// One parsed event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KEvent {
    /// 1-based line number in the file.
    pub line: usize,
    /// The CPU column.
    pub cpu: usize,
    /// Timestamp in microseconds.
    pub ts_us: u64,
    /// The pfn field (0 for a failed allocation).
    pub pfn: u64,
    /// Whether the page field was NULL (a failed allocation).
    pub null_page: bool,
    /// The task's command name (`pgdatinit0`, `kworker/u12:1`, `<idle>`).
    pub comm: String,
    pub kind: KEventKind,
}

/// Why a line was not an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineError {
    /// Not the `comm-pid [cpu] ... ts: event: fields` shape, or a bad field.
    Malformed(String),
    /// A well-formed line of an event the replay does not take.
    UnknownEvent(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Malformed(m) => write!(f, "malformed line: {m}"),
            LineError::UnknownEvent(e) => write!(
                f,
                "unknown event `{e}` (the replay takes kmem:mm_page_alloc, \
                 mm_page_free, mm_page_free_batched, mm_page_alloc_zone_locked, mm_page_pcpu_drain)"
            ),
        }
    }
}

/// A `# mmlab: k=v k=v` line's pairs, or None for another line.
pub fn meta_line(line: &str) -> Option<BTreeMap<String, String>> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start().strip_prefix("mmlab:")?;
    Some(
        rest.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    )
}

/// The `[NNN]` CPU column: its value, the text before it (the task) and
/// the rest of the line after it.
fn cpu_column(line: &str) -> Option<(usize, &str, &str)> {
    let mut from = 0;
    while let Some(i) = line[from..].find('[') {
        let at = from + i;
        let rest = &line[at + 1..];
        if let Some(j) = rest.find(']') {
            let inner = &rest[..j];
            if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
                return Some((inner.parse().ok()?, &line[..at], &rest[j + 1..]));
            }
        }
        from = at + 1;
    }
    None
}

fn num(key: &str, v: &str) -> Result<u64, LineError> {
    let r = match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse::<u64>(),
    };
    r.map_err(|_| LineError::Malformed(format!("{key}={v} is not a number")))
}

fn int(key: &str, v: &str) -> Result<i64, LineError> {
    v.parse::<i64>().map_err(|_| LineError::Malformed(format!("{key}={v} is not a number")))
}

/// Parse one line: `Ok(None)` for a comment or blank line.
///
/// # Errors
/// [`LineError`] for anything else that is not one of the five events.
pub fn parse_line(line_no: usize, line: &str) -> Result<Option<KEvent>, LineError> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    // `CPU:N [LOST EVENTS]`-style notes of trace-cmd, and the like.
    let Some((cpu, task, rest)) = cpu_column(t) else {
        return Err(LineError::Malformed("no [CPU] column".to_owned()));
    };
    let mut words = rest.split_whitespace().peekable();
    // Optional flags column, then `secs.usecs:`.
    let mut ts_us = None;
    for w in words.by_ref() {
        if let Some(ts) = w.strip_suffix(':')
            && let Some((s, us)) = ts.split_once('.')
            && let (Ok(s), Ok(_)) = (s.parse::<u64>(), us.parse::<u64>())
        {
            // Microseconds from the first six fraction digits (ns traces have nine).
            let frac: String = us.chars().chain(std::iter::repeat('0')).take(6).collect();
            let us = s.checked_mul(1_000_000).and_then(|s| s.checked_add(frac.parse::<u64>().unwrap_or(0)));
            ts_us = Some(us.ok_or_else(|| LineError::Malformed(format!("timestamp {ts} out of range")))?);
            break;
        }
    }
    let ts_us = ts_us.ok_or_else(|| LineError::Malformed("no timestamp".to_owned()))?;
    let name = words
        .next()
        .and_then(|w| w.strip_suffix(':'))
        .ok_or_else(|| LineError::Malformed("no event name".to_owned()))?;
    let name = name.rsplit(':').next().unwrap_or(name);
    let mut f: BTreeMap<&str, &str> = BTreeMap::new();
    for w in words {
        if let Some((k, v)) = w.split_once('=') {
            f.insert(k, v);
        }
    }
    let get = |k: &str| f.get(k).copied().ok_or_else(|| LineError::Malformed(format!("{name}: no {k}=")));
    let order = || -> Result<u32, LineError> {
        let o = int("order", get("order")?)?;
        u32::try_from(o).ok().filter(|&o| o <= MAX_PAGE_ORDER).ok_or_else(|| {
            LineError::Malformed(format!("order={o} out of range (0..={MAX_PAGE_ORDER}, MAX_PAGE_ORDER)"))
        })
    };
    let mt = || -> Result<i32, LineError> {
        let m = int("migratetype", get("migratetype")?)?;
        i32::try_from(m).ok().filter(|&m| (0..MIGRATE_TYPES as i32).contains(&m)).ok_or_else(|| {
            LineError::Malformed(format!("migratetype={m} out of range (0..{MIGRATE_TYPES}, MIGRATE_TYPES)"))
        })
    };
    let kind = match name {
        "mm_page_alloc" => KEventKind::Alloc { order: order()?, migratetype: mt()?, gfp: get("gfp_flags")?.to_owned() },
        "mm_page_free" => KEventKind::Free { order: order()? },
        "mm_page_free_batched" => KEventKind::FreeBatched,
        "mm_page_alloc_zone_locked" => KEventKind::ZoneLocked {
            order: order()?,
            migratetype: mt()?,
            percpu_refill: int("percpu_refill", get("percpu_refill")?)? != 0,
        },
        "mm_page_pcpu_drain" => KEventKind::PcpuDrain { order: order()?, migratetype: mt()? },
        other => return Err(LineError::UnknownEvent(other.to_owned())),
    };
    let pfn = num("pfn", get("pfn")?)?;
    // `page=` may be left out (the compacted captures of
    // scripts/arm64-peer/boot-kmem-trace.py): then a failed allocation is
    // the pfn the tracepoint prints for a NULL page, 0 or -1.
    let null_page = match f.get("page") {
        Some(page) => page.trim_start_matches("0x").bytes().all(|b| b == b'0') || *page == "(nil)",
        None => pfn == 0 || pfn == u64::MAX,
    };
    // `comm-pid` (ftrace) or `comm` (compacted): the command name.
    let task = task.trim();
    let comm = match task.rsplit_once('-') {
        Some((c, pid)) if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => c,
        _ => task,
    };
    Ok(Some(KEvent { line: line_no, cpu, ts_us, pfn, null_page, comm: comm.to_owned(), kind }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftrace_and_trace_cmd_lines() {
        let a = parse_line(
            3,
            "           touch-4242    [001] ..... 12345.678901: mm_page_alloc: page=ffffea0004a1b2c0 pfn=0x1286cb \
             order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO",
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.line, a.cpu, a.ts_us, a.pfn, a.null_page), (3, 1, 12_345_678_901, 0x1286cb, false));
        assert_eq!(a.comm, "touch");
        assert_eq!(
            a.kind,
            KEventKind::Alloc { order: 0, migratetype: 1, gfp: "GFP_HIGHUSER_MOVABLE|__GFP_ZERO".to_owned() }
        );
        // trace-cmd report: no flags, system prefix, nine fraction digits.
        let b = parse_line(
            4,
            "  touch-4242  [000] 12345.678901234: kmem:mm_page_alloc_zone_locked: page=0xffffea0004a1b2c0 \
             pfn=0x1286cb order=0 migratetype=1 percpu_refill=1",
        )
        .unwrap()
        .unwrap();
        assert_eq!((b.cpu, b.ts_us), (0, 12_345_678_901));
        assert_eq!(b.kind, KEventKind::ZoneLocked { order: 0, migratetype: 1, percpu_refill: true });
        let c =
            parse_line(5, "<idle>-0 [003] d.s2. 1.000002: mm_page_pcpu_drain: page=x pfn=0x10 order=0 migratetype=0");
        assert_eq!(c.unwrap().unwrap().kind, KEventKind::PcpuDrain { order: 0, migratetype: 0 });
        let f = parse_line(
            6,
            "x-1 [000] ..... 1.5: mm_page_alloc: page=0000000000000000 pfn=0x0 order=9 migratetype=1 gfp_flags=GFP_KERNEL",
        );
        assert!(f.unwrap().unwrap().null_page);
    }

    #[test]
    fn bad_lines() {
        assert_eq!(parse_line(1, "# tracer: nop"), Ok(None));
        assert_eq!(parse_line(1, "   "), Ok(None));
        assert!(matches!(parse_line(1, "garbage"), Err(LineError::Malformed(_))));
        assert!(matches!(parse_line(1, "a-1 [000] ..... nots: x:"), Err(LineError::Malformed(_))));
        assert!(matches!(
            parse_line(1, "a-1 [000] ..... 1.0: sched_switch: prev_comm=a"),
            Err(LineError::UnknownEvent(e)) if e == "sched_switch"
        ));
        assert!(matches!(
            parse_line(1, "a-1 [000] ..... 1.0: mm_page_free: page=1 pfn=zz order=0"),
            Err(LineError::Malformed(_))
        ));
        assert!(matches!(
            parse_line(1, "a-1 [000] ..... 1.0: mm_page_free: page=1 order=0"),
            Err(LineError::Malformed(_))
        ));
        // Out of the kernel's ranges: an order above MAX_PAGE_ORDER, a
        // migratetype outside 0..MIGRATE_TYPES, a timestamp past u64 µs.
        let m = |l: &str| match parse_line(1, l) {
            Err(LineError::Malformed(m)) => m,
            r => panic!("{r:?}"),
        };
        assert_eq!(
            m("a-1 [000] 1.0: mm_page_free: pfn=0x1 order=11"),
            "order=11 out of range (0..=10, MAX_PAGE_ORDER)"
        );
        assert!(m("a-1 [000] 1.0: mm_page_pcpu_drain: pfn=0x1 order=0 migratetype=-1").starts_with("migratetype=-1"));
        assert!(m("a-1 [000] 1.0: mm_page_pcpu_drain: pfn=0x1 order=0 migratetype=6").starts_with("migratetype=6"));
        assert_eq!(
            m("a-1 [000] 99999999999999999.0: mm_page_free: pfn=0x1 order=0"),
            "timestamp 99999999999999999.0 out of range"
        );
        // Compacted: no pid, no flags, no page=.
        let c =
            parse_line(2, "init [001] 0.062600: mm_page_alloc: pfn=0x439f8 order=2 migratetype=0 gfp_flags=GFP_KERNEL")
                .unwrap()
                .unwrap();
        assert_eq!((c.cpu, c.pfn, c.null_page, c.comm.as_str()), (1, 0x439f8, false, "init"));
        assert_eq!(meta_line("# mmlab: cpus=2 kernel=6.18").unwrap()["cpus"], "2");
        assert!(meta_line("# tracer: nop").is_none());
    }
}
