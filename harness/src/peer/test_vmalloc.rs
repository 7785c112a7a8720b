//! `mmlab peer DIR`, second part: lib/test_vmalloc.c on the real kernel
//! against `mmlab test-vmalloc`, case by case.
//!
//! `PEER_TEST_VMALLOC=1 scripts/arm64-peer/boot.sh` builds the module for
//! the booted kernel and writes `test_vmalloc`: one block per `insmod`,
//!
//! ```text
//! case run_test_mask=1 nr_threads=1 test_loop_count=1000
//! before pgalloc_normal 1234
//! ...
//! after pgalloc_normal 2388
//! ...
//! dmesg Summary: fix_size_alloc_test passed: 1 failed: 0 xfailed: 0 repeat: 1 loops: 1000 avg: 11809 usec
//! end
//! ```
//!
//! For each case [`compare`] takes the real kernel's `pgalloc` (the sum of
//! the `pgalloc_*` lines) and `pgfree` deltas, less those of the
//! `run_test_mask=0` case (loading and removing the module, which the other
//! cases pay too), and runs the same parameters in mmlab on a machine
//! booted afresh, as [`crate::workloads::test_vmalloc`] does. The real
//! kernel runs the cases one after another on one booted machine, so its
//! deltas also hold whatever else the kernel did meanwhile (a few pages:
//! see the baseline); mmlab's hold the case only.
//!
//! The module's pass/fail summary is compared too: `p/f/x` is passed,
//! failed and xfailed summed over the workers.

use super::fields::{LineError, check_whole, number};
use crate::settings::Configs;
use crate::workloads::test_vmalloc;
use std::collections::BTreeMap;
use std::fmt;

/// The capture file, as the peer script names it.
pub const CAPTURE_FILE: &str = "test_vmalloc";

/// One `insmod` of the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RealCase {
    /// The `case` line, from 1.
    pub line: usize,
    /// The module parameters.
    pub args: Vec<String>,
    /// vmstat before, by name.
    pub before: BTreeMap<String, i64>,
    /// vmstat after, by name.
    pub after: BTreeMap<String, i64>,
    /// The module's summary lines (`Summary: ...`).
    pub summaries: Vec<String>,
}

impl RealCase {
    /// `after - before` of the lines whose name starts with `prefix`.
    fn delta(&self, prefix: &str) -> i64 {
        self.after.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v).sum::<i64>()
            - self.before.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v).sum::<i64>()
    }

    /// Pages allocated during the case (`pgalloc_*`).
    pub fn pgalloc(&self) -> i64 {
        self.delta("pgalloc_")
    }

    /// Pages freed during the case.
    pub fn pgfree(&self) -> i64 {
        self.delta("pgfree")
    }

    /// Whether this is the load-only case (`run_test_mask=0`).
    pub fn is_baseline(&self) -> bool {
        self.args.iter().any(|a| a == "run_test_mask=0")
    }

    /// passed/failed/xfailed over the summary lines.
    pub fn results(&self) -> Results {
        let mut r = Results::default();
        for s in &self.summaries {
            let w: Vec<&str> = s.split_whitespace().collect();
            let after = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1)?.parse::<u64>().ok());
            r.passed += after("passed:").unwrap_or(0);
            r.failed += after("failed:").unwrap_or(0);
            r.xfailed += after("xfailed:").unwrap_or(0);
        }
        r
    }
}

/// Cases passed, failed and expected-to-fail-and-failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Results {
    /// Passed.
    pub passed: u64,
    /// Failed.
    pub failed: u64,
    /// xfail cases that failed.
    pub xfailed: u64,
}

impl fmt::Display for Results {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.passed, self.failed, self.xfailed)
    }
}

/// Parse the capture.
///
/// # Errors
///
/// An empty file or a cut last line; a line outside a `case ... end`
/// block; a counter that is not a number, or given twice; a case whose
/// `after` counters are not its `before` ones (no `pgfree` or `pgalloc_*`
/// among them); a second load-only case; no case at all.
pub fn parse(text: &str) -> Result<Vec<RealCase>, LineError> {
    check_whole(text)?;
    let mut cases: Vec<RealCase> = Vec::new();
    let mut cur: Option<RealCase> = None;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let bad = |what: &str| LineError::at(n, format!("{what}: {line:?}"));
        if let Some(args) = line.strip_prefix("case ") {
            if let Some(c) = &cur {
                return Err(bad(&format!("a case inside the case of line {}", c.line)));
            }
            cur = Some(RealCase {
                line: n,
                args: args.split_whitespace().map(str::to_string).collect(),
                before: BTreeMap::new(),
                after: BTreeMap::new(),
                summaries: Vec::new(),
            });
            continue;
        }
        if line.trim().is_empty() || line.starts_with('[') {
            continue; // a kernel message echoed on the console
        }
        let c = cur.as_mut().ok_or_else(|| bad("outside a case"))?;
        if line == "end" {
            check_counters(c, n)?;
            if c.is_baseline()
                && let Some(b) = cases.iter().find(|b| b.is_baseline())
            {
                return Err(LineError::at(c.line, format!("a second load-only case (the first is line {})", b.line)));
            }
            cases.extend(cur.take());
        } else if let Some(s) = line.strip_prefix("dmesg ") {
            if let Some(i) = s.find("Summary: ") {
                c.summaries.push(s[i..].to_string());
            }
        } else {
            let (map, rest) = match line.split_once(' ') {
                Some(("before", rest)) => (&mut c.before, rest),
                Some(("after", rest)) => (&mut c.after, rest),
                _ => return Err(bad("not a case, before, after, dmesg or end line")),
            };
            let (k, v) = rest.split_once(' ').ok_or_else(|| bad("no value"))?;
            let v = number(n, v.trim())?;
            let v = i64::try_from(v).map_err(|_| LineError::at(n, format!("`{v}` is above i64::MAX")))?;
            if map.insert(k.to_string(), v).is_some() {
                return Err(bad(&format!("`{k}` a second time in this case")));
            }
        }
    }
    if let Some(c) = cur {
        return Err(LineError::at(
            text.lines().count(),
            format!("the case of line {} has no `end` (the boot was cut short?)", c.line),
        ));
    }
    if cases.is_empty() {
        return Err(LineError::at(0, "no `case ... end` block"));
    }
    Ok(cases)
}

/// A case's counters: the same names before and after, `pgfree` and at
/// least one `pgalloc_*` among them (the deltas compared).
fn check_counters(c: &RealCase, end: usize) -> Result<(), LineError> {
    let what = |w: String| LineError::at(end, format!("the case of line {}: {w}", c.line));
    if let Some(k) = c.before.keys().find(|k| !c.after.contains_key(*k)) {
        return Err(what(format!("`before {k}` without `after {k}`")));
    }
    if let Some(k) = c.after.keys().find(|k| !c.before.contains_key(*k)) {
        return Err(what(format!("`after {k}` without `before {k}`")));
    }
    if !c.before.contains_key("pgfree") || !c.before.keys().any(|k| k.starts_with("pgalloc_")) {
        return Err(what("no `pgfree` or no `pgalloc_*` counters (the deltas compared)".to_string()));
    }
    Ok(())
}

/// Check every case's parameters as `mmlab test-vmalloc` takes them on a
/// machine of `cpus` CPUs (the load-only case's other parameters as module
/// parameters), before anything runs.
///
/// # Errors
/// The `case` line of the first case whose parameters mmlab refuses.
pub fn check_params(cases: &[RealCase], cpus: usize) -> Result<(), LineError> {
    for c in cases {
        let r = if c.is_baseline() {
            let mut p = test_vmalloc::Params::default();
            c.args.iter().filter(|a| *a != "run_test_mask=0").try_for_each(|a| p.set(a))
        } else {
            test_vmalloc::resolve(&c.args, None, None).and_then(|(p, _)| match p.threads() {
                t if t > cpus => Err(format!(
                    "nr_threads={t} needs {t} CPUs (each worker runs on an emulated CPU of its own); kernel.txt says -smp {cpus}"
                )),
                _ => Ok(()),
            })
        };
        r.map_err(|e| LineError::at(c.line, e))?;
    }
    Ok(())
}

/// One case, side by side.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Row {
    /// The module parameters.
    pub args: String,
    /// The real kernel's pgalloc, less the baseline's.
    pub real_pgalloc: i64,
    /// mmlab's.
    pub mmlab_pgalloc: u64,
    /// The real kernel's pgfree, less the baseline's.
    pub real_pgfree: i64,
    /// mmlab's.
    pub mmlab_pgfree: u64,
    /// The module's results on the real kernel.
    pub real_results: Results,
    /// mmlab's.
    pub mmlab_results: Results,
}

impl Row {
    /// `(mmlab - real) / real` of pgalloc, percent (0 when real is 0).
    pub fn pgalloc_diff_pct(&self) -> f64 {
        diff_pct(self.real_pgalloc, self.mmlab_pgalloc)
    }

    /// The same for pgfree.
    pub fn pgfree_diff_pct(&self) -> f64 {
        diff_pct(self.real_pgfree, self.mmlab_pgfree)
    }
}

/// Below this many pages a case's real count is within the noise of the
/// shell's own processes between two vmstat reads: the load-only case took
/// from 129 to 277 pages in four boots here. Such a case's difference is not
/// printed as a percentage.
pub const NOISE_PAGES: i64 = 300;

/// The difference as printed: a percentage, or `~` within the noise.
fn shown_pct(real: i64, pct: f64) -> String {
    if real.abs() < NOISE_PAGES { "~".to_string() } else { format!("{pct:+.1}%") }
}

fn diff_pct(real: i64, mmlab: u64) -> f64 {
    if real == 0 { 0.0 } else { (mmlab as f64 - real as f64) * 100.0 / real as f64 }
}

/// Every case of the capture, side by side.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Report {
    /// The load-only case's pgalloc and pgfree (subtracted from the others).
    pub baseline: (i64, i64),
    /// The cases in capture order.
    pub rows: Vec<Row>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== {CAPTURE_FILE}: pages allocated and freed per case, real (less the module load's {} / {}) and mmlab (~: within {NOISE_PAGES} pages of noise); results passed/failed/xfailed",
            self.baseline.0, self.baseline.1
        )?;
        writeln!(
            f,
            "{:<62} {:>9} {:>9} {:>7}  {:>9} {:>9} {:>7}  {:>7} {:>7}",
            "case", "pgalloc", "mmlab", "diff", "pgfree", "mmlab", "diff", "real", "mmlab"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<62} {:>9} {:>9} {:>7}  {:>9} {:>9} {:>7}  {:>7} {:>7}",
                r.args,
                r.real_pgalloc,
                r.mmlab_pgalloc,
                shown_pct(r.real_pgalloc, r.pgalloc_diff_pct()),
                r.real_pgfree,
                r.mmlab_pgfree,
                shown_pct(r.real_pgfree, r.pgfree_diff_pct()),
                r.real_results.to_string(),
                r.mmlab_results.to_string()
            )?;
        }
        Ok(())
    }
}

/// Run every case of `real` in mmlab on the machine of `c` (booted afresh
/// per case), seeded with `seed`.
///
/// # Errors
///
/// Parameters mmlab refuses, or a boot that fails.
pub fn compare(c: &Configs, real: &[RealCase], seed: u64) -> Result<Report, String> {
    let baseline = real.iter().find(|r| r.is_baseline()).map_or((0, 0), |b| (b.pgalloc(), b.pgfree()));
    let mut rows = Vec::new();
    for case in real.iter().filter(|r| !r.is_baseline()) {
        let (params, _) = test_vmalloc::resolve(&case.args, None, Some(c.machine.nr_cpus))?;
        let stack = crate::stack::Stack::boot(c)?;
        let pa = stack.allocator()?;
        let vm = stack.vmalloc(&pa);
        let report = test_vmalloc::run(stack.machine(), &pa, &vm, &params, seed)?;
        let mut mmlab_results = Results::default();
        for cr in report.workers.iter().flat_map(|w| &w.cases) {
            mmlab_results.passed += cr.passed;
            mmlab_results.failed += cr.failed;
            mmlab_results.xfailed += cr.xfailed;
        }
        rows.push(Row {
            args: case.args.join(" "),
            real_pgalloc: case.pgalloc() - baseline.0,
            mmlab_pgalloc: report.counters.vm.pgalloc(),
            real_pgfree: case.pgfree() - baseline.1,
            mmlab_pgfree: report.counters.vm.pgfree,
            real_results: case.results(),
            mmlab_results,
        });
    }
    Ok(Report { baseline, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE: &str = "case run_test_mask=0\n\
        before pgalloc_dma 10\nbefore pgalloc_normal 100\nbefore pgfree 50\n\
        after pgalloc_dma 10\nafter pgalloc_normal 130\nafter pgfree 75\n\
        end\n\
        case run_test_mask=1 nr_threads=1 test_loop_count=10\n\
        before pgalloc_dma 10\nbefore pgalloc_normal 130\nbefore pgfree 75\n\
        [    3.6] Summary: echoed on the console\n\
        after pgalloc_dma 12\nafter pgalloc_normal 178\nafter pgfree 120\n\
        dmesg Summary: fix_size_alloc_test passed: 1 failed: 0 xfailed: 0 repeat: 1 loops: 10 avg: 5 usec\n\
        dmesg All test took worker0=1 cycles\n\
        end\n";

    #[test]
    fn parses_cases_deltas_and_results() {
        let c = parse(CAPTURE).unwrap();
        assert_eq!(c.len(), 2);
        assert!(c[0].is_baseline() && !c[1].is_baseline());
        assert_eq!((c[0].pgalloc(), c[0].pgfree()), (30, 25));
        assert_eq!((c[1].pgalloc(), c[1].pgfree()), (50, 45), "pgalloc sums the zones");
        assert_eq!(c[1].args, ["run_test_mask=1", "nr_threads=1", "test_loop_count=10"]);
        assert_eq!(c[1].results(), Results { passed: 1, failed: 0, xfailed: 0 });
    }

    #[test]
    fn refuses_a_cut_or_malformed_capture() {
        let e = |t: &str| parse(t).unwrap_err().to_string();
        let c = "case run_test_mask=1\nbefore pgfree 1\nbefore pgalloc_dma 1\n";
        assert_eq!(e(c), "line 3: the case of line 1 has no `end` (the boot was cut short?)");
        assert!(e("before pgfree 1\n").starts_with("line 1: outside a case"));
        assert!(e("case x\nbefore pgfree one\nend\n").starts_with("line 2: `one` is not a number"));
        assert!(e("case x\ncase y\n").starts_with("line 2: a case inside the case of line 1"));
        assert!(e("").contains("empty"));
        assert!(e("case x\nend").contains("line 2: the last line is cut"));
        assert_eq!(e("\n[ 1.0] echoed\n"), "no `case ... end` block");
        assert!(e("case x\nbefore pgfree 1\nbefore pgfree 2\n").starts_with("line 3: `pgfree` a second time"));
        let above = "case x\nbefore pgfree 18446744073709551615\n";
        assert!(e(above).starts_with("line 2: `18446744073709551615` is above i64::MAX"));
        let no_after = "case x\nbefore pgfree 1\nbefore pgalloc_dma 1\nafter pgfree 2\nend\n";
        assert_eq!(e(no_after), "line 5: the case of line 1: `before pgalloc_dma` without `after pgalloc_dma`");
        let no_alloc = "case x\nbefore pgfree 1\nafter pgfree 2\nend\n";
        assert!(e(no_alloc).starts_with("line 4: the case of line 1: no `pgfree` or no `pgalloc_*`"));
        let two = format!("{CAPTURE}{}", CAPTURE.lines().take(8).map(|l| format!("{l}\n")).collect::<String>());
        assert_eq!(e(&two), "line 20: a second load-only case (the first is line 1)");
    }

    #[test]
    fn case_parameters_are_checked_before_anything_runs() {
        let c = parse(CAPTURE).unwrap();
        assert_eq!((c[0].line, c[1].line), (1, 9));
        check_params(&c, 1).unwrap();
        let bad = CAPTURE.replace("nr_threads=1 ", "nr_threads=2 ");
        let e = check_params(&parse(&bad).unwrap(), 1).unwrap_err();
        assert_eq!(e.line, 9);
        assert_eq!(
            e.what,
            "nr_threads=2 needs 2 CPUs (each worker runs on an emulated CPU of its own); kernel.txt says -smp 1"
        );
        let bad = CAPTURE.replace("test_loop_count=10", "test_loop_count=1,,2");
        let e = check_params(&parse(&bad).unwrap(), 2).unwrap_err();
        assert!(e.to_string().starts_with("line 9: test_loop_count=1,,2: test_vmalloc takes one value"), "{e}");
        let bad = CAPTURE.replace("case run_test_mask=0", "case run_test_mask=0 bogus=1");
        let e = check_params(&parse(&bad).unwrap(), 2).unwrap_err();
        assert!(e.to_string().starts_with("line 1: unknown test_vmalloc parameter \"bogus\""), "{e}");
    }

    #[test]
    fn diff_is_relative_to_the_real_kernel() {
        let r = Row {
            args: String::new(),
            real_pgalloc: 1000,
            mmlab_pgalloc: 1020,
            real_pgfree: 0,
            mmlab_pgfree: 5,
            real_results: Results::default(),
            mmlab_results: Results::default(),
        };
        assert!((r.pgalloc_diff_pct() - 2.0).abs() < 1e-9);
        assert_eq!(r.pgfree_diff_pct(), 0.0);
    }
}
