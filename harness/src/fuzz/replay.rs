//! Replay files: a header and one operation per line.
//!
//! ```text
//! # mmlab fuzz replay: unexpected-outcome at op 7 (vfree) ...
//! format 1
//! machine mem=64M cpus=2
//! set percpu_pagelist_high_fraction=8
//! seed 42
//! fail_page_alloc probability=10,interval=1,times=-1,space=0,min-order=0,ignore-gfp-wait=0
//! check_every 10000
//! cpu1 alloc_pages order=3 gfp=GFP_KERNEL -> p4
//! cpu0 free_pages p4 order=3
//! cpu0 vfree v2 expect=DoubleFree
//! check
//! ```
//!
//! `#` starts a comment (whole line or after an op); blank lines are
//! ignored. `format 1` must come first. `machine`, `set` (repeatable, the
//! `--set` settings), `seed`, `fail_page_alloc` (the kernel's attribute
//! names; seeded from `seed`) and `check_every` are optional and must come
//! before the first op, each header word but `set` once. Every other line
//! is an op ([`super::op`]) on one of the machine's CPUs. The whole file
//! is checked before anything runs ([`Replay::parse`]); an error names
//! its line.

use super::op::{Op, parse_line, parse_num};
use mmlab_pcp::FaultAttr;
use std::fmt;

/// The replay format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// A replay file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// `mem=` of the machine (memparse syntax).
    pub mem: String,
    pub cpus: usize,
    /// `--set` settings, in order.
    pub sets: Vec<String>,
    pub seed: u64,
    pub fault: Option<FaultAttr>,
    /// Run the checks every this many ops (0: only at `check` and the end).
    pub check_every: u64,
    /// Comment lines written after the header (without `# `).
    pub comments: Vec<String>,
    pub ops: Vec<Op>,
}

impl Default for Replay {
    fn default() -> Self {
        Replay {
            mem: "64M".to_string(),
            cpus: 2,
            sets: Vec::new(),
            seed: 1,
            fault: None,
            check_every: 10_000,
            comments: Vec::new(),
            ops: Vec::new(),
        }
    }
}

/// A replay file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}
impl std::error::Error for ReplayError {}

/// Print fault attributes as `fail_page_alloc` takes them.
pub fn fault_attr_string(a: &FaultAttr) -> String {
    format!(
        "probability={},interval={},times={},space={},min-order={},ignore-gfp-wait={},ignore-gfp-highmem={}",
        a.probability,
        a.interval,
        a.times,
        a.space,
        a.min_order,
        u8::from(a.ignore_gfp_reclaim),
        u8::from(a.ignore_gfp_highmem)
    )
}

/// Parse `probability=P,interval=N,...` (kernel attribute names; unset
/// ones keep the kernel's defaults); `seed` seeds the attribute's stream.
pub fn parse_fault_attr(s: &str, seed: u64) -> Result<FaultAttr, String> {
    let mut a = FaultAttr { seed, ..FaultAttr::default() };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}` is not KEY=VALUE"))?;
        let num = || parse_num(v).map_err(|e| format!("{k}: {e}"));
        let flag = || match v {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("{k}={v}: must be 0 or 1")),
        };
        match k {
            "probability" => {
                a.probability = u32::try_from(num()?).map_err(|_| format!("probability={v} out of range"))?;
            }
            "interval" => a.interval = num()?,
            "times" => a.times = v.parse::<i64>().map_err(|_| format!("times={v} is not a number"))?,
            "space" => a.space = num()?,
            "min-order" => a.min_order = u32::try_from(num()?).map_err(|_| format!("min-order={v} out of range"))?,
            "ignore-gfp-wait" => a.ignore_gfp_reclaim = flag()?,
            "ignore-gfp-highmem" => a.ignore_gfp_highmem = flag()?,
            _ => {
                return Err(format!(
                    "unknown fail_page_alloc attribute `{k}` (probability, interval, times, space, min-order, \
                     ignore-gfp-wait, ignore-gfp-highmem)"
                ));
            }
        }
    }
    if a.probability > 100 {
        return Err(format!("probability={} is not a percentage", a.probability));
    }
    if a.times < -1 {
        return Err(format!("times={} must be -1 or at least 0", a.times));
    }
    Ok(a)
}

impl fmt::Display for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# mmlab fuzz replay (run with `mmlab replay FILE`)")?;
        writeln!(f, "format {FORMAT_VERSION}")?;
        writeln!(f, "machine mem={} cpus={}", self.mem, self.cpus)?;
        for s in &self.sets {
            writeln!(f, "set {s}")?;
        }
        writeln!(f, "seed {}", self.seed)?;
        if let Some(a) = &self.fault {
            writeln!(f, "fail_page_alloc {}", fault_attr_string(a))?;
        }
        writeln!(f, "check_every {}", self.check_every)?;
        for c in &self.comments {
            writeln!(f, "# {c}")?;
        }
        for op in &self.ops {
            writeln!(f, "{op}")?;
        }
        Ok(())
    }
}

impl Replay {
    /// Parse a replay file's text and check it whole, before anything
    /// runs: every line parses, a header line comes once, the machine's
    /// `mem=` and `cpus=` are ones `--mem` and `--cpus` take, the settings
    /// apply together, every op's CPU is one of the machine's, and every
    /// `expect=` names an outcome ([`super::op::parse_line`]).
    ///
    /// # Errors
    /// The first bad line, by number.
    pub fn parse(text: &str) -> Result<Replay, ReplayError> {
        let mut r = Replay::default();
        let mut fault: Option<(usize, String)> = None;
        let mut saw_format = false;
        // The line of each header word given, and of each `set` and op.
        let mut header_lines: Vec<(&str, usize)> = Vec::new();
        let mut set_lines = Vec::new();
        let mut op_lines = Vec::new();
        let mut cpus_line = None;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let e = |message: String| ReplayError { line: line_no, message };
            if let Some(c) = raw.trim_start().strip_prefix('#') {
                // Header comments are kept (and printed back).
                let c = c.strip_prefix(' ').unwrap_or(c);
                if saw_format && r.ops.is_empty() {
                    r.comments.push(c.to_string());
                }
                continue;
            }
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            let header = matches!(word, "format" | "machine" | "set" | "seed" | "fail_page_alloc" | "check_every");
            if !saw_format && word != "format" {
                return Err(e("the file must start with `format 1`".to_string()));
            }
            if header && !r.ops.is_empty() {
                return Err(e(format!("`{word}` must come before the first operation")));
            }
            if header && word != "set" {
                if let Some((_, first)) = header_lines.iter().find(|(w, _)| *w == word) {
                    return Err(e(format!("`{word}` given twice (first on line {first})")));
                }
                header_lines.push((word, line_no));
            }
            match word {
                "format" => {
                    if rest != FORMAT_VERSION.to_string() {
                        return Err(e(format!("format `{rest}` is not supported (this build reads {FORMAT_VERSION})")));
                    }
                    saw_format = true;
                }
                "machine" => {
                    for kv in rest.split_whitespace() {
                        match kv.split_once('=') {
                            Some(("mem", v)) => {
                                crate::cli::parse_mem(v).map_err(|m| {
                                    let m = m.strip_prefix(&format!("--mem {v}: ")).unwrap_or(&m).to_string();
                                    e(format!("machine mem={v}: {m}"))
                                })?;
                                r.mem = v.to_string();
                            }
                            Some(("cpus", v)) => {
                                r.cpus = crate::cli::parse_cpus(v).map_err(|m| e(format!("machine cpus={v}: {m}")))?;
                                cpus_line = Some(line_no);
                            }
                            _ => return Err(e(format!("machine takes mem=SIZE cpus=N, not `{kv}`"))),
                        }
                    }
                }
                "set" => {
                    if !rest.contains('=') || rest.contains(char::is_whitespace) {
                        return Err(e(format!("set takes one KEY=VALUE, not `{rest}`")));
                    }
                    r.sets.push(rest.to_string());
                    set_lines.push(line_no);
                }
                "seed" => r.seed = parse_num(rest).map_err(|x| e(x.0))?,
                "check_every" => r.check_every = parse_num(rest).map_err(|x| e(x.0))?,
                "fail_page_alloc" => fault = Some((line_no, rest.to_string())),
                _ => {
                    r.ops.push(parse_line(line).map_err(|x| e(x.0))?);
                    op_lines.push(line_no);
                }
            }
        }
        if !saw_format {
            return Err(ReplayError { line: 1, message: "empty file: it must start with `format 1`".to_string() });
        }
        if let Some((line, f)) = fault {
            r.fault = Some(parse_fault_attr(&f, r.seed).map_err(|message| ReplayError { line, message })?);
        }
        r.check_sets(&set_lines)?;
        if r.fault.is_none()
            && let Some((_, &line)) = r.ops.iter().zip(&op_lines).find(|(op, _)| !op.fail_nth.is_empty())
        {
            return Err(ReplayError {
                line,
                message: "fail_nth= needs fail_page_alloc armed: add a `fail_page_alloc` line (probability=0 \
                          fails only what fail_nth= names)"
                    .to_string(),
            });
        }
        for (op, &line) in r.ops.iter().zip(&op_lines) {
            if op.cpu >= r.cpus && op.cpu != super::op::FOREIGN_CPU {
                let whose = match cpus_line {
                    Some(l) => format!("the machine of line {l}"),
                    None => "the machine (no `machine cpus=N` line: the default)".to_string(),
                };
                let (cpu, n) = (op.cpu, r.cpus);
                return Err(ReplayError {
                    line,
                    message: format!("cpu{cpu}: {whose} has {n} CPUs, cpu0 to cpu{}", n - 1),
                });
            }
        }
        Ok(r)
    }

    /// The `set` lines (at `lines`) apply to the file's machine, in order:
    /// the first that does not is named.
    fn check_sets(&self, lines: &[usize]) -> Result<(), ReplayError> {
        let Ok((mem_bytes, mem_banks)) = crate::cli::parse_mem(&self.mem) else { return Ok(()) };
        let mc = mmlab_engine::MachineConfig { mem_bytes, mem_banks, nr_cpus: self.cpus, ..Default::default() };
        if crate::settings::Configs::new(mc.clone(), &self.sets).is_ok() {
            return Ok(());
        }
        for (n, &line) in lines.iter().enumerate() {
            if let Err(e) = crate::settings::Configs::new(mc.clone(), &self.sets[..=n]) {
                return Err(ReplayError { line, message: format!("set {}: {e}", self.sets[n]) });
            }
        }
        Ok(())
    }
}
