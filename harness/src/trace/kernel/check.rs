//! The whole trace, read and checked before anything boots.
//!
//! The `# mmlab:` header ([`super::TracedMachine`]): every word `key=value`
//! with a key of [`KEYS`], each key once, each value valid for its key
//! (`cpus=` 1 to `NR_CPUS`, `managed=` and `batch=` at least 1, `high_min=`
//! at most `high_max=` and at least `batch << 2` as `zone_highsize()`
//! keeps it, a `mem=` mmlab boots, ...), all before the first event.
//! Consistent with the events: `events=` (scripts/arm64-peer/
//! boot-kmem-trace.py's count) the number of event lines, a from-boot
//! capture with none lost (`written=` equal to `entries=`).
//!
//! The events: at least one allocation or free; timestamps in order (ftrace
//! merges its per-CPU buffers by time, `trace-cmd report` too: a file out
//! of order was edited or concatenated, and the replay would run the
//! operations in another order than the kernel's). Lines that are not
//! events (malformed, or an event the replay does not take) are kept for
//! `--on-error`: refused before the boot with `stop`, counted with `skip`.
//! Each error names the line.

use super::error::TraceError;
use super::parse::{KEvent, KEventKind, LineError, parse_line};
use super::replay::{ReplayError, warn};
use std::collections::BTreeMap;

/// What a header key's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// Free text, not empty.
    Text,
    /// A number (decimal, or hex with 0x) in `min..=max`.
    Count { min: u64, max: u64 },
    /// `0` or `1`.
    Flag,
    /// vm.percpu_pagelist_high_fraction: 0 or 8..=INT_MAX.
    HighFraction,
    /// A `--mem` size.
    Mem,
    /// A zone name.
    Zone,
}

const INT_MAX: u64 = i32::MAX as u64;
const ANY: Value = Value::Count { min: 0, max: u64::MAX };

/// The header's keys (those scripts/capture-kernel-trace.sh and
/// scripts/arm64-peer/boot-kmem-trace.py write; `pcp_count_cpuN` for every
/// CPU N).
pub const KEYS: [(&str, Value); 21] = [
    ("kernel", Value::Text),
    ("machine", Value::Text),
    ("cpu", Value::Text),
    ("workload", Value::Text),
    ("mem", Value::Mem),
    ("cpus", Value::Count { min: 1, max: mmlab_engine::machine::NR_CPUS as u64 }),
    ("traced_cpu", Value::Count { min: 0, max: mmlab_engine::machine::NR_CPUS as u64 - 1 }),
    ("pages", ANY),
    ("rounds", ANY),
    ("boot_trace", Value::Flag),
    ("entries", ANY),
    ("written", ANY),
    ("events", ANY),
    ("zone", Value::Zone),
    ("managed", Value::Count { min: 1, max: u64::MAX }),
    ("batch", Value::Count { min: 1, max: INT_MAX }),
    ("high_min", Value::Count { min: 0, max: INT_MAX }),
    ("high_max", Value::Count { min: 0, max: INT_MAX }),
    ("percpu_pagelist_high_fraction", Value::HighFraction),
    ("max_pfn", Value::Count { min: 1, max: u64::MAX }),
    ("pcp_count_cpuN", Value::Count { min: 0, max: INT_MAX }),
];

/// The zones a kmem trace's machine may name.
const ZONE_NAMES: [&str; 6] = ["DMA", "DMA32", "Normal", "HighMem", "Movable", "Device"];

/// A header value as a number (decimal, or hex with `0x`).
pub fn header_number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None if v.bytes().all(|b| b.is_ascii_digit()) => v.parse().ok(),
        None => None,
    }
}

/// The trace, read and checked.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// The header's pairs.
    pub header: BTreeMap<String, String>,
    /// The line of each header key.
    pub header_lines: BTreeMap<String, usize>,
    /// The events, in file order.
    pub events: Vec<KEvent>,
    /// The lines that are not events (nor comments, nor blank).
    pub bad: Vec<(usize, LineError)>,
}

impl Checked {
    /// A header key's number (after [`read`] checked it).
    pub fn num(&self, key: &str) -> Option<u64> {
        header_number(self.header.get(key)?)
    }

    fn bad_value(&self, key: &'static str, why: String) -> TraceError {
        let line = self.header_lines.get(key).copied().unwrap_or(0);
        TraceError::BadHeader { line, key, word: format!("{key}={}", self.header[key]), why }
    }
}

/// The static key of `k` in [`KEYS`] (`pcp_count_cpuN` for `pcp_count_cpu7`).
fn key_of(k: &str) -> Option<(&'static str, Value)> {
    let generic = match k.strip_prefix("pcp_count_cpu") {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => "pcp_count_cpuN",
        _ => k,
    };
    KEYS.iter().find(|(name, _)| *name == generic).copied()
}

/// Why `v` is not a valid value of a key of kind `kind`.
fn check_value(kind: Value, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err("no value".to_owned());
    }
    match kind {
        Value::Text => Ok(()),
        Value::Count { min, max } => match header_number(v) {
            None => Err("not a number (decimal, or hex with 0x)".to_owned()),
            Some(x) if x < min && max == u64::MAX => Err(format!("out of range: at least {min}")),
            Some(x) if x < min || x > max => Err(format!("out of range: {min}..={max}")),
            Some(_) => Ok(()),
        },
        Value::Flag => match v {
            "0" | "1" => Ok(()),
            _ => Err("expected 0 or 1".to_owned()),
        },
        Value::HighFraction => match header_number(v) {
            Some(x) if x == 0 || (8..=INT_MAX).contains(&x) => Ok(()),
            _ => Err("the sysctl takes 0 or 8..=2147483647 (EINVAL)".to_owned()),
        },
        Value::Mem => crate::cli::parse_mem(v).map(|_| ()),
        Value::Zone if ZONE_NAMES.contains(&v) => Ok(()),
        Value::Zone => Err(format!("not a zone ({})", ZONE_NAMES.join(", "))),
    }
}

/// Read the header and every line of `text`, and check them (module docs).
///
/// # Errors
/// [`TraceError::Header`] and [`TraceError::BadHeader`] for the header,
/// [`TraceError::NoEvents`], [`TraceError::Event`] for events out of
/// order, each with its line.
pub fn read(text: &str) -> Result<Checked, TraceError> {
    let mut c = Checked::default();
    let mut first_event: Option<usize> = None;
    let mut event_lines = 0usize;
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let t = l.trim();
        if let Some(rest) = t.strip_prefix('#').map(str::trim_start).and_then(|r| r.strip_prefix("mmlab:")) {
            if let Some(e) = first_event {
                let what = format!("a `# mmlab:` line after the first event (line {e}): the header comes first");
                return Err(TraceError::Header { line: n, what });
            }
            read_header_line(&mut c, n, rest)?;
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        event_lines += 1;
        first_event.get_or_insert(n);
        match parse_line(n, l) {
            Ok(Some(e)) => c.events.push(e),
            Ok(None) => {}
            Err(e) => c.bad.push((n, e)),
        }
    }
    check_header(&c, event_lines)?;
    if c.events.is_empty() {
        return Err(TraceError::NoEvents { lines: text.lines().count(), first_bad: c.bad.first().cloned() });
    }
    let replayed = |e: &&KEvent| match e.kind {
        KEventKind::Alloc { .. } => !e.null_page,
        KEventKind::Free { .. } | KEventKind::FreeBatched => true,
        _ => false,
    };
    if !c.events.iter().any(|e| replayed(&e)) {
        return Err(TraceError::Event {
            line: c.events[0].line,
            what: format!(
                "none of the {} events is an allocation that succeeded or a free: nothing to replay",
                c.events.len()
            ),
        });
    }
    for w in c.events.windows(2) {
        if w[1].ts_us < w[0].ts_us {
            let s = |us: u64| format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
            return Err(TraceError::Event {
                line: w[1].line,
                what: format!(
                    "timestamp {} is before line {}'s {}: ftrace prints the events in time order (the file was edited \
                     or concatenated out of order?)",
                    s(w[1].ts_us),
                    w[0].line,
                    s(w[0].ts_us)
                ),
            });
        }
    }
    Ok(c)
}

/// One `# mmlab:` line's words.
fn read_header_line(c: &mut Checked, n: usize, rest: &str) -> Result<(), TraceError> {
    for word in rest.split_whitespace() {
        let Some((k, v)) = word.split_once('=') else {
            return Err(TraceError::Header { line: n, what: format!("`{word}` is not key=value") });
        };
        let Some((key, kind)) = key_of(k) else {
            let keys: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(TraceError::Header { line: n, what: format!("unknown key `{k}` (keys: {})", keys.join(", ")) });
        };
        if let Some(first) = c.header_lines.get(k) {
            return Err(TraceError::Header { line: n, what: format!("`{k}` a second time (first on line {first})") });
        }
        check_value(kind, v).map_err(|why| TraceError::BadHeader { line: n, key, word: word.to_owned(), why })?;
        c.header.insert(k.to_owned(), v.to_owned());
        c.header_lines.insert(k.to_owned(), n);
    }
    Ok(())
}

/// The header's values against each other and against the events.
fn check_header(c: &Checked, event_lines: usize) -> Result<(), TraceError> {
    if let (Some(lo), Some(hi)) = (c.num("high_min"), c.num("high_max"))
        && lo > hi
    {
        return Err(
            c.bad_value("high_min", format!("above high_max={hi}: the pcp high ranges from high_min to high_max"))
        );
    }
    if let (Some(lo), Some(b)) = (c.num("high_min"), c.num("batch"))
        && lo < b << 2
    {
        return Err(
            c.bad_value("high_min", format!("below 4 x batch={b}: zone_highsize() keeps high at least batch << 2"))
        );
    }
    if let Some(cpus) = c.num("cpus") {
        if let Some(t) = c.num("traced_cpu")
            && t >= cpus
        {
            return Err(c.bad_value("traced_cpu", format!("not a CPU of cpus={cpus}")));
        }
        for (k, line) in &c.header_lines {
            if let Some(cpu) = k.strip_prefix("pcp_count_cpu").and_then(|n| n.parse::<u64>().ok())
                && cpu >= cpus
            {
                let word = format!("{k}={}", c.header[k]);
                let why = format!("CPU {cpu} is not a CPU of cpus={cpus}");
                return Err(TraceError::BadHeader { line: *line, key: "pcp_count_cpuN", word, why });
            }
        }
    }
    if let (Some(e), Some(w)) = (c.num("entries"), c.num("written")) {
        if e > w {
            return Err(c.bad_value("entries", format!("above written={w}: ftrace cannot hold more than it wrote")));
        }
        if e < w && c.header.get("boot_trace").is_some_and(|b| b == "1") {
            return Err(c.bad_value(
                "written",
                format!("{} events lost (entries={e}): a from-boot capture must start at the boot", w - e),
            ));
        }
    }
    if let Some(e) = c.num("events")
        && e != event_lines as u64
    {
        return Err(c.bad_value("events", format!("the file has {event_lines} event lines (cut, or lines added?)")));
    }
    Ok(())
}

/// Every event on a CPU of a machine of `cpus` CPUs.
///
/// # Errors
/// The first event on another CPU (always an error: `# mmlab: cpus=` or
/// --cpus is wrong).
pub fn check_cpus(events: &[KEvent], cpus: usize) -> Result<(), ReplayError> {
    match events.iter().find(|e| e.cpu >= cpus) {
        Some(e) => Err(ReplayError {
            line: e.line,
            message: format!(
                "{}: CPU {} on a machine of {cpus} CPUs (the trace's `# mmlab: cpus=` or --cpus is wrong)",
                warn::CPU_OUTSIDE,
                e.cpu
            ),
        }),
        None => Ok(()),
    }
}

/// With `--on-error stop`, the first line that is not an event, as the
/// replay would stop at it.
///
/// # Errors
/// That line.
pub fn check_lines(bad: &[(usize, LineError)]) -> Result<(), ReplayError> {
    match bad.first() {
        // The error's text starts with its kind (warn::MALFORMED, warn::UNKNOWN_EVENT).
        Some((line, e)) => Err(ReplayError { line: *line, message: e.to_string() }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str =
        " t-1 [000] ..... 1.000001: mm_page_alloc: page=1 pfn=0x1000 order=0 migratetype=1 gfp_flags=X\n";

    fn err(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn header_values_are_checked_with_their_line() {
        let h = |line: &str| err(&format!("# tracer: nop\n# mmlab: {line}\n{EVENT}"));
        assert_eq!(h("cpus=0"), "line 2: the trace's header: `cpus=0`: out of range: 1..=256");
        assert!(h("managed=0").ends_with("`managed=0`: out of range: at least 1"));
        assert!(h("batch=0").ends_with("`batch=0`: out of range: 1..=2147483647"));
        assert!(h("cpus=").contains("`cpus=`: no value"));
        assert!(h("cpus=two").contains("not a number"));
        assert!(h("percpu_pagelist_high_fraction=3").contains("EINVAL"));
        assert!(h("mem=banana").contains("`mem=banana`: --mem banana"));
        assert!(h("boot_trace=2").contains("expected 0 or 1"));
        assert!(h("zone=Nromal").contains("not a zone"));
        assert!(h("cpus").starts_with("line 2: `cpus` is not key=value"));
        assert!(h("cpu_count=2").starts_with("line 2: unknown key `cpu_count`"));
        assert!(h("cpus=2 cpus=2").starts_with("line 2: `cpus` a second time (first on line 2)"));
        let e = h("batch=63 high_min=300 high_max=252");
        assert!(e.contains("`high_min=300`: above high_max=252"), "{e}");
        assert!(h("batch=63 high_min=100 high_max=252").contains("below 4 x batch=63"));
        assert!(h("cpus=2 pcp_count_cpu2=5").contains("`pcp_count_cpu2=5`: CPU 2 is not a CPU of cpus=2"));
        assert!(h("cpus=2 traced_cpu=2").contains("`traced_cpu=2`: not a CPU of cpus=2"));
        assert!(h("entries=5 written=4").contains("`entries=5`: above written=4"));
        assert!(h("entries=4 written=5 boot_trace=1").contains("1 events lost"));
        assert!(h("events=2").contains("`events=2`: the file has 1 event lines"));
        let late = err(&format!("{EVENT}# mmlab: cpus=1\n"));
        assert!(late.starts_with("line 2: a `# mmlab:` line after the first event (line 1)"), "{late}");
    }

    #[test]
    fn events_are_checked() {
        assert_eq!(err(""), "no events: the file is empty");
        assert_eq!(err("# mmlab: cpus=1\n# tracer: nop\n"), "no events in 2 lines (comments and the header only)");
        let e = err("# mmlab: cpus=1\ngarbage\n");
        assert!(e.starts_with("no events in 2 lines; line 2: malformed line"), "{e}");
        let drain = " t-1 [000] ..... 1.0: mm_page_pcpu_drain: page=1 pfn=0x10 order=0 migratetype=0\n";
        assert!(err(drain).starts_with("line 1: none of the 1 events is an allocation"));
        let later = EVENT.replace("1.000001", "2.000000");
        let e = err(&format!("{later}{EVENT}"));
        assert!(e.starts_with("line 2: timestamp 1.000001 is before line 1's 2.000000"), "{e}");
        let c = read(&format!("# mmlab: cpus=2 max_pfn=0x100000\n{EVENT}garbage\n")).unwrap();
        assert_eq!((c.events.len(), c.bad.len(), c.num("max_pfn")), (1, 1, Some(0x100000)));
        assert_eq!(check_lines(&c.bad).unwrap_err().line, 3);
        assert!(check_cpus(&c.events, 1).is_ok());
        let on1 = EVENT.replace("[000]", "[001]");
        let c = read(&on1).unwrap();
        assert!(check_cpus(&c.events, 1).unwrap_err().message.contains("CPU 1 on a machine of 1 CPUs"));
    }

    #[test]
    fn the_shipped_traces_pass() {
        for t in [
            include_str!("../../../../tests/data/trace/anon-touch-cpu1.trace"),
            include_str!("../../../../tests/data/trace/arm64-7.2.13-2G-3cpu-boot.trace"),
            include_str!("../../../../tests/data/trace/arm64-7.2.13-2G-3cpu-workload.trace"),
        ] {
            let c = read(t).unwrap_or_else(|e| panic!("{e}"));
            assert!(c.bad.is_empty() && !c.events.is_empty());
        }
    }
}
