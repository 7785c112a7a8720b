//! test_vmalloc's module parameters: the names and values `key=value`
//! takes as modprobe does (`kstrtoint` with base 0, `kstrtobool`), the
//! module's normalisation (`init_test_configuration()`), mmlab's bounds on
//! the work of one case, and the modes of test_vmalloc.sh, resolved
//! together with `--cpus` into the parameters and the machine's CPU count.

/// Number of test cases of 7.2's lib/test_vmalloc.c (its `test_case_array`,
/// ending with no_block_alloc_test and vrealloc_test): the bits
/// `run_test_mask` has, one per entry (`super::cases`).
pub const NR_TEST_CASES: usize = 13;

/// `USHRT_MAX`: the module's bound on `nr_threads`.
const MAX_THREADS: i32 = u16::MAX as i32;
/// The module parameters, as given (ints and bools like the module's).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    pub run_test_mask: i32,
    pub nr_threads: i32,
    pub test_loop_count: i32,
    pub test_repeat_count: i32,
    pub sequential_test_order: bool,
    pub nr_pages: i32,
    pub use_huge: bool,
    /// `nr_pcpu_objects`: the objects pcpu_alloc_test allocates (35000;
    /// a module parameter in 7.2). mmlab refuses a value below 1, for
    /// which the module's case fails at its first `vmalloc`.
    pub nr_pcpu_objects: i32,
    /// mmlab extension (instrumented, not in the module): long_busy_list
    /// sleeps this many ms between its two vmallocs and the two vfrees, as
    /// the `msleep(1)` experiment of the huge-vmalloc-by-default thread
    /// did. The sleep is emulated time (whole jiffies at HZ = 250, as
    /// msleep rounds): it is not measured or modelled (so it does not
    /// dilute the result), but the per-CPU vmstat work (`vmstat_update` →
    /// `decay_pcp_high`) runs once per emulated `sysctl_stat_interval`
    /// (1 s) that passes.
    pub msleep_before_free: u32,
    /// mmlab extension: sample the worker's pcp after every this many
    /// long_busy_list iterations (0: never), into
    /// [`WorkerReport::pcp_series`](super::runner::WorkerReport::pcp_series).
    pub pcp_sample_interval: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            run_test_mask: 7,
            nr_threads: 0,
            test_loop_count: 1_000_000,
            test_repeat_count: 1,
            sequential_test_order: false,
            nr_pages: 0,
            use_huge: false,
            nr_pcpu_objects: 35000,
            msleep_before_free: 0,
            pcp_sample_interval: 0,
        }
    }
}

/// The parameter names `key=value` accepts (the last two are mmlab's).
pub const PARAM_NAMES: [&str; 10] = [
    "nr_threads",
    "sequential_test_order",
    "test_repeat_count",
    "test_loop_count",
    "nr_pages",
    "use_huge",
    "run_test_mask",
    "nr_pcpu_objects",
    "msleep_before_free",
    "pcp_sample_interval",
];

/// `kstrtobool()`, as module bool parameters are parsed (the same words
/// as every boolean `--set` knob takes).
fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    mmlab_engine::kernel::sysctl::kstrtobool(value)
        .ok_or_else(|| format!("bad value {value:?} for {key} ({})", mmlab_engine::kernel::sysctl::BOOL_VALUES))
}

fn parse_int(key: &str, value: &str) -> Result<i32, String> {
    // param_set_int: kstrtoint with base 0 (decimal, 0x hex, 0 octal).
    let (neg, digits) = match value.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let parsed = if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        i64::from_str_radix(h, 16)
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8)
    } else {
        digits.parse::<i64>()
    };
    let v = parsed.map_err(|e| format!("bad value {value:?} for {key}: {e}"))?;
    let v = if neg { -v } else { v };
    i32::try_from(v).map_err(|_| format!("bad value {value:?} for {key}: out of range for an int"))
}

impl Params {
    /// Apply one `key=value` (a module parameter, as modprobe takes it).
    pub fn set(&mut self, kv: &str) -> Result<(), String> {
        let Some((key, value)) = kv.split_once('=') else {
            return Err(format!(
                "test-vmalloc expects parameters as key=value, got {kv:?}; parameters: {}",
                PARAM_NAMES.join(", ")
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "nr_threads" => self.nr_threads = parse_int(key, value)?,
            "sequential_test_order" => self.sequential_test_order = parse_bool(key, value)?,
            "test_repeat_count" => self.test_repeat_count = parse_int(key, value)?,
            "test_loop_count" => self.test_loop_count = parse_int(key, value)?,
            "nr_pages" => self.nr_pages = parse_int(key, value)?,
            "use_huge" => self.use_huge = parse_bool(key, value)?,
            "run_test_mask" => {
                // The module tests bit i for each of its 13 cases and ignores
                // the rest: mask 0 (or only higher bits) loads, runs nothing
                // and reports nothing. mmlab refuses both rather than print
                // a run of nothing that looks like success.
                let v = parse_int(key, value)?;
                let all = (1u32 << NR_TEST_CASES) - 1;
                if v == 0 {
                    return Err(format!(
                        "run_test_mask={value} selects no test case (the module would run nothing); bits 0..={} select the {NR_TEST_CASES} cases, {all:#x} all of them",
                        NR_TEST_CASES - 1
                    ));
                }
                let extra = v as u32 & !all;
                if extra != 0 {
                    return Err(format!(
                        "run_test_mask={value} has bits {extra:#x} above the {NR_TEST_CASES} test cases of Linux 7.2 (the module ignores them); bits 0..={} select cases, {all:#x} all of them",
                        NR_TEST_CASES - 1
                    ));
                }
                self.run_test_mask = v;
            }
            "nr_pcpu_objects" => {
                let v = parse_int(key, value)?;
                if v <= 0 {
                    return Err(format!("bad value {value:?} for {key}: expected a positive number"));
                }
                self.nr_pcpu_objects = v;
            }
            "msleep_before_free" | "pcp_sample_interval" => {
                let v = parse_int(key, value)?;
                let v = u32::try_from(v)
                    .map_err(|_| format!("bad value {value:?} for {key}: expected 0 or a positive number"))?;
                if key == "msleep_before_free" {
                    self.msleep_before_free = v;
                } else {
                    self.pcp_sample_interval = v;
                }
            }
            _ => {
                return Err(format!("unknown test_vmalloc parameter {key:?}; parameters: {}", PARAM_NAMES.join(", ")));
            }
        }
        Ok(())
    }

    /// Workers: `clamp(nr_threads, 1, USHRT_MAX)`.
    pub fn threads(&self) -> usize {
        self.nr_threads.clamp(1, MAX_THREADS) as usize
    }
    /// `test_loop_count`, at least 1.
    pub fn loops(&self) -> u64 {
        self.test_loop_count.max(1) as u64
    }
    /// `test_repeat_count`, at least 1.
    pub fn repeats(&self) -> u64 {
        self.test_repeat_count.max(1) as u64
    }
    /// `nr_pages > 0 ? nr_pages : 1`.
    pub fn pages(&self) -> usize {
        self.nr_pages.max(1) as usize
    }
    /// Whether `run_test_mask` selects case `index`.
    pub fn selected(&self, index: usize) -> bool {
        (self.run_test_mask as u32) & (1 << index) != 0
    }

    /// mmlab's bound on the work of one case on one worker (see
    /// [`crate::cli::MAX_CALLS_PER_CASE`]): `test_loop_count ×
    /// test_repeat_count` after the module's normalisation.
    pub fn check_bounds(&self) -> Result<(), String> {
        let calls = self.loops().saturating_mul(self.repeats());
        if calls > crate::cli::MAX_CALLS_PER_CASE {
            return Err(format!(
                "test_loop_count={} x test_repeat_count={} = {calls} loop iterations per case and worker; mmlab runs at most {} (INT_MAX, the largest test_loop_count the module takes)",
                self.test_loop_count,
                self.test_repeat_count,
                crate::cli::MAX_CALLS_PER_CASE
            ));
        }
        // Each emulated second of msleep_before_free runs vmstat_update once
        // per CPU, a loop of its own: bound those runs the same way.
        let stat_runs = calls.saturating_mul(u64::from(self.msleep_before_free)) / 1000;
        if stat_runs > crate::cli::MAX_CALLS_PER_CASE {
            return Err(format!(
                "msleep_before_free={} over {calls} loop iterations is {stat_runs} emulated vmstat_update runs; mmlab runs at most {}",
                self.msleep_before_free,
                crate::cli::MAX_CALLS_PER_CASE
            ));
        }
        Ok(())
    }

    /// The workers fit a machine: each runs on an emulated CPU of its own,
    /// and a machine has at most `NR_CPUS`.
    pub fn check_threads(&self) -> Result<(), String> {
        let threads = self.threads();
        if threads <= mmlab_engine::machine::NR_CPUS {
            return Ok(());
        }
        let clamped = if threads as i32 == self.nr_threads {
            String::new()
        } else {
            format!(" ({threads} after the module's clamp to USHRT_MAX)")
        };
        Err(format!(
            "nr_threads={}{clamped}: each worker runs on an emulated CPU of its own, and a machine has at most {} CPUs",
            self.nr_threads,
            mmlab_engine::machine::NR_CPUS
        ))
    }

    /// What the module's normalisation changed in values given explicitly
    /// (`init_test_configuration()`: `test_loop_count` and
    /// `test_repeat_count` `<= 0` become 1), as notes for the user.
    pub fn normalisation_notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        for (key, v) in [("test_loop_count", self.test_loop_count), ("test_repeat_count", self.test_repeat_count)] {
            if v <= 0 {
                n.push(format!("{key}={v} is taken as 1, as test_vmalloc.c's init_test_configuration() does"));
            }
        }
        n
    }

    /// The parameters after the module's normalisation, as `key=value`s.
    pub fn effective(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("run_test_mask", i64::from(self.run_test_mask)),
            ("nr_threads", self.threads() as i64),
            ("test_loop_count", self.loops() as i64),
            ("test_repeat_count", self.repeats() as i64),
            ("sequential_test_order", i64::from(self.sequential_test_order)),
            ("nr_pages", self.pages() as i64),
            ("use_huge", i64::from(self.use_huge)),
            ("nr_pcpu_objects", i64::from(self.nr_pcpu_objects)),
            ("msleep_before_free", i64::from(self.msleep_before_free)),
            ("pcp_sample_interval", i64::from(self.pcp_sample_interval)),
        ]
    }
}

/// The modes of test_vmalloc.sh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `sequential_test_order=1 test_repeat_count=3`.
    Performance,
    /// `test_loop_count=10000 test_repeat_count=10`.
    Smoke,
    /// `nr_threads=$NUM_CPUS test_repeat_count=20`.
    Stress,
}

impl Mode {
    /// The name test_vmalloc.sh (and `test-vmalloc --mode`) gives the mode.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Performance => "performance",
            Mode::Smoke => "smoke",
            Mode::Stress => "stress",
        }
    }

    /// The parameters the script passes for this mode, for a machine of
    /// `cpus` CPUs.
    pub fn params(self, cpus: usize) -> Vec<String> {
        match self {
            Mode::Performance => vec!["sequential_test_order=1".into(), "test_repeat_count=3".into()],
            Mode::Smoke => vec!["test_loop_count=10000".into(), "test_repeat_count=10".into()],
            Mode::Stress => vec![format!("nr_threads={cpus}"), "test_repeat_count=20".into()],
        }
    }
}

/// Parameters and machine size from the command line: the mode's
/// parameters first, then the explicit `key=value`s (which override them;
/// test_vmalloc.sh takes either a mode or parameters, mmlab takes both).
/// `cpus` is `--cpus` if given; the result's CPU count is `cpus`, else
/// max(2, nr_threads) (in stress mode without `--cpus`: 2, and
/// `nr_threads` = that count, as the script uses the machine's CPU count).
pub fn resolve(args: &[String], mode: Option<Mode>, cpus: Option<usize>) -> Result<(Params, usize), String> {
    let mut p = Params::default();
    if let Some(mode) = mode {
        for kv in mode.params(cpus.unwrap_or(2)) {
            p.set(&kv)?;
        }
    }
    let mut given: Vec<&str> = Vec::new();
    for kv in args {
        if let Some((k, v)) = kv.split_once('=') {
            let k = k.trim();
            if given.contains(&k) {
                return Err(format!("{k} given twice (modprobe would take the last; give it once)"));
            }
            given.push(k);
            if v.contains(',') && PARAM_NAMES.contains(&k) {
                return Err(format!("{kv}: test_vmalloc takes one value per parameter (comma lists are for compare)"));
            }
        }
        p.set(kv)?;
    }
    p.check_bounds()?;
    p.check_threads()?;
    let threads = p.threads();
    let nr_cpus = cpus.unwrap_or(threads.max(2));
    if threads > nr_cpus {
        return Err(format!(
            "nr_threads={threads} needs at least {threads} CPUs (each worker runs on an emulated CPU of its own); got --cpus {nr_cpus}"
        ));
    }
    Ok((p, nr_cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse_like_module_parameters() {
        let mut p = Params::default();
        p.set("run_test_mask=0x7ff").unwrap();
        assert_eq!(p.run_test_mask, 2047);
        p.set("use_huge=Y").unwrap();
        assert!(p.use_huge);
        p.set("nr_threads=-3").unwrap();
        assert_eq!(p.threads(), 1);
        p.set("test_loop_count=0").unwrap();
        assert_eq!(p.loops(), 1);
        assert!(p.set("bogus=1").unwrap_err().contains("unknown test_vmalloc parameter"));
        assert!(p.set("nr_pages=x").is_err());
        assert!(p.set("use_huge=2").is_err());
        assert!(p.set("nr_pages").unwrap_err().contains("key=value"));
    }

    #[test]
    fn modes_then_explicit_overrides() {
        let (p, cpus) = resolve(&[], Some(Mode::Performance), None).unwrap();
        assert!(p.sequential_test_order && p.repeats() == 3 && cpus == 2);
        let (p, cpus) = resolve(&["test_repeat_count=5".into()], Some(Mode::Smoke), None).unwrap();
        assert_eq!((p.loops(), p.repeats(), cpus), (10000, 5, 2));
        let (p, cpus) = resolve(&[], Some(Mode::Stress), Some(4)).unwrap();
        assert_eq!((p.threads(), p.repeats(), cpus), (4, 20, 4));
        let (p, cpus) = resolve(&["nr_threads=3".into()], None, None).unwrap();
        assert_eq!((p.threads(), cpus), (3, 3));
        assert!(resolve(&["nr_threads=3".into()], None, Some(2)).is_err());
        assert!(resolve(&["nr_threads=300".into()], None, None).is_err());
        let e = resolve(&["nr_threads=100000".into()], None, None).unwrap_err();
        assert!(e.starts_with("nr_threads=100000 (65535 after the module's clamp to USHRT_MAX): each worker"), "{e}");
    }

    #[test]
    fn lists_and_repeated_keys_are_refused() {
        let e = |a: &[&str]| resolve(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), None, None).unwrap_err();
        assert_eq!(
            e(&["nr_pages=1,,2"]),
            "nr_pages=1,,2: test_vmalloc takes one value per parameter (comma lists are for compare)"
        );
        assert_eq!(
            e(&["nr_pages=1", "nr_pages=2"]),
            "nr_pages given twice (modprobe would take the last; give it once)"
        );
        // A mode's parameters are overridden, not repeated.
        let (p, _) = resolve(&["test_repeat_count=5".into()], Some(Mode::Smoke), None).unwrap();
        assert_eq!(p.repeats(), 5);
    }
}
