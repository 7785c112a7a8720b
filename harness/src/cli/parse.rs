//! The checks of the command line that need nothing of mmlab's own types:
//! typed parsers for the numeric options, mmlab's bounds on the counts
//! that drive a loop (the table in [`super`]), `--mem`, and whether an
//! output file can be written. The layers below the command line use
//! them too (the settings parse `--mem`; test_vmalloc's parameters check
//! their bound), so they depend on nothing above.

use std::path::Path;

/// Most operations of the seeded random workload (`stat --after-ops`,
/// `trace --ops`).
pub const MAX_WORKLOAD_OPS: u64 = 1_000_000_000;

/// Most kept or warm-up runs per row and side of `compare`, and most seeds
/// of `compare --seeds`.
pub const MAX_RUNS: usize = 10_000;

/// Most loop iterations one worker runs per test case:
/// `test_loop_count × test_repeat_count` (after the module's `<= 0 → 1`).
/// It is `INT_MAX`, the largest `test_loop_count` the module accepts, so any
/// single repetition the module can run is allowed.
pub const MAX_CALLS_PER_CASE: u64 = i32::MAX as u64;

/// A whole non-negative number; the error names what was wrong.
fn whole(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty; expected a whole number".to_string());
    }
    if t.starts_with('-') {
        return Err(format!("{t} is not a count (negative)"));
    }
    t.parse::<u64>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => format!("{t} is above {}", u64::MAX),
        _ => format!("{t} is not a whole number"),
    })
}

/// `--cpus`: 1..=NR_CPUS.
pub fn parse_cpus(s: &str) -> Result<usize, String> {
    let n = whole(s)?;
    let max = mmlab_engine::machine::NR_CPUS;
    if n == 0 || n > max as u64 {
        return Err(format!("{n} CPUs: a machine has 1 to {max}"));
    }
    Ok(n as usize)
}

/// `--seed`: any u64.
pub fn parse_seed(s: &str) -> Result<u64, String> {
    whole(s).map_err(|e| format!("{e} (a seed is 0..={})", u64::MAX))
}

/// A count with no bound of its own (`fuzz --check-every`): any u64.
pub fn parse_count(s: &str) -> Result<u64, String> {
    whole(s)
}

/// `--after-ops`, `--ops`: 0..=[`MAX_WORKLOAD_OPS`].
pub fn parse_ops(s: &str) -> Result<u64, String> {
    let n = whole(s)?;
    if n > MAX_WORKLOAD_OPS {
        return Err(format!("{n} operations: mmlab runs at most {MAX_WORKLOAD_OPS} (10^9) in one workload"));
    }
    Ok(n)
}

/// `compare --repeat`: 2..=[`MAX_RUNS`] (a 95 % interval needs two samples).
pub fn parse_repeat(s: &str) -> Result<usize, String> {
    let n = whole(s)?;
    if n < 2 {
        return Err(format!(
            "{n} kept run(s): the 95 % interval and the (I)/(R) marks need at least 2 kept runs per side"
        ));
    }
    if n > MAX_RUNS as u64 {
        return Err(format!("{n} runs: at most {MAX_RUNS}"));
    }
    Ok(n as usize)
}

/// `compare --warmup`: 0..=[`MAX_RUNS`].
pub fn parse_warmup(s: &str) -> Result<usize, String> {
    let n = whole(s)?;
    if n > MAX_RUNS as u64 {
        return Err(format!("{n} runs: at most {MAX_RUNS}"));
    }
    Ok(n as usize)
}

/// `--mem`: a size as `mem=` takes it (one bank at `PHYS_OFFSET`), or banks
/// as a device tree's memory node lists them, `SIZE[@BASE],SIZE@BASE,...`
/// ([`mmlab_engine::mm::banks`]): page multiples, 16M..=1T in all, inside
/// the linear map. Returns the total and the banks (empty for one bank at
/// `PHYS_OFFSET`), as [`mmlab_engine::MachineConfig`] takes them.
pub fn parse_mem(s: &str) -> Result<(u64, Vec<mmlab_engine::mm::banks::MemBank>), String> {
    // Some of the engine's messages name the option already: prefix the rest.
    let banks = mmlab_engine::mm::banks::parse_mem(s).map_err(|e| {
        let e = e.to_string();
        if e.starts_with("--mem ") { e } else { format!("--mem {s}: {e}") }
    })?;
    let total = banks.iter().map(|b| b.size).sum();
    let single = banks.len() == 1 && banks[0].base == mmlab_engine::arch::arm64::memory::PHYS_OFFSET;
    Ok((total, if single { Vec::new() } else { banks }))
}

/// `compare --seeds`: `A..B` (half-open) or `A..=B`, not empty, at most
/// [`MAX_RUNS`] seeds, in ascending order.
pub fn parse_seed_range(s: &str) -> Result<Vec<u64>, String> {
    let bad = |why: String| format!("--seeds {s}: {why}");
    let (a, b, inclusive) = if let Some((a, b)) = s.split_once("..=") {
        (a, b, true)
    } else if let Some((a, b)) = s.split_once("..") {
        (a, b, false)
    } else {
        return Err(bad("expected A..B (B excluded) or A..=B".to_string()));
    };
    let a = parse_seed(a).map_err(|e| bad(format!("start: {e}")))?;
    let b = parse_seed(b).map_err(|e| bad(format!("end: {e}")))?;
    let last = if inclusive { Some(b) } else { b.checked_sub(1) };
    let Some(last) = last.filter(|&l| l >= a) else {
        return Err(bad("the range is empty".to_string()));
    };
    if last - a >= MAX_RUNS as u64 {
        return Err(bad(format!("{} seeds; at most {MAX_RUNS} in one run", u128::from(last - a) + 1)));
    }
    Ok((a..=last).collect())
}

/// Fail now, not after a long run, if `path` cannot be written: open it for
/// writing (without truncating) if it exists, else create it and remove it
/// again. `what` names the option in the error.
pub fn check_writable(what: &str, path: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{what}: cannot write {}: {e}", path.display());
    if path.is_dir() {
        return Err(format!("{what}: {} is a directory", path.display()));
    }
    if path.exists() {
        return std::fs::OpenOptions::new().write(true).open(path).map(drop).map_err(err);
    }
    std::fs::OpenOptions::new().write(true).create_new(true).open(path).map_err(err)?;
    std::fs::remove_file(path).map_err(err)
}

/// Fail now if no file can be created in the directory of `path` (for
/// outputs whose names are derived from `path` after the run).
pub fn check_dir_writable(what: &str, path: &Path) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    probe_dir(dir).map_err(|e| format!("{what}: {e}"))
}

/// Fail now if `dir` is not an existing directory a file can be created
/// in (an output directory, such as `fuzz --out-dir`, that mmlab does not
/// create). The message names the directory, not the option.
pub fn check_out_dir(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Err(e) => Err(format!("{}: {e} (the directory must exist)", dir.display())),
        Ok(m) if !m.is_dir() => Err(format!("{} is not a directory", dir.display())),
        Ok(_) => probe_dir(dir),
    }
}

/// Create a file in `dir` and remove it again.
fn probe_dir(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".mmlab-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| format!("cannot create files in {}: {e}", dir.display()))?;
    std::fs::remove_file(&probe).map_err(|e| format!("{}: {e}", probe.display()))
}
