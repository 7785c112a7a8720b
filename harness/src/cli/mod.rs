//! Checks of the `mmlab` command line that run before anything boots: typed
//! parsers for the numeric options (so that clap names the option in its
//! error, negative numbers included), mmlab's own bounds on the counts that
//! drive a loop, and the check that an output file can be written.
//!
//! The options that name a value of a library type parse straight into
//! that type, so the command mirrors no enum: `compare --metric` into
//! [`Metric`] (which derives `clap::ValueEnum`), `test-vmalloc --mode` into
//! [`Mode`] and `compare --format` into [`OutFormat`] (a [`Format`] or a
//! jsonl shard), both through a `ValueEnum` here whose values carry no help
//! of their own (the option's help describes them), and `trace --format`
//! into the trace printer's [`TraceFormat`] through its own `FromStr`
//! ([`trace_format`]).
//!
//! # Why bounds, not progress and Ctrl-C
//!
//! A count such as `--after-ops 18446744073709551615` or `--warmup
//! 1000000000000` is a typo or a probe, not an experiment: no run of it can
//! finish. mmlab refuses it with an error that names the option and the
//! bound, before booting, rather than starting a run that only Ctrl-C (whose
//! default action already ends the process) can stop. The bounds are
//! mmlab's, not the kernel's; each is far above what the published
//! experiments use:
//!
//! | count | bound | a run at the bound |
//! |---|---|---|
//! | `stat --after-ops`, `trace --ops` | [`MAX_WORKLOAD_OPS`] = 10^9 | minutes (release build); `trace` writes ~150 bytes per op |
//! | `compare --repeat`, `--warmup` | [`MAX_RUNS`] = 10,000 | one test_vmalloc load per run, row and side |
//! | `compare --seeds` | [`MAX_RUNS`] seeds | as `--repeat` |
//! | test_vmalloc `test_loop_count × test_repeat_count` | [`MAX_CALLS_PER_CASE`] = 2^31 - 1 | the largest `test_loop_count` the module takes, once |
//! | `fuzz --ops`; `--ops` × seeds × `--threads` without `--time` | [`MAX_WORKLOAD_OPS`] | minutes to hours (release build) |
//! | `fuzz --time`, `--shrink-time` | 7 days ([`crate::fuzz::args::MAX_TIME`]) | a progress line every second |

use crate::compare::Format;
use crate::output::trace::TraceFormat;
use crate::test_vmalloc::Mode;
use clap::ValueEnum;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

#[cfg(doc)]
use crate::compare::Metric;

mod parse;

pub use parse::{
    MAX_CALLS_PER_CASE, MAX_RUNS, MAX_WORKLOAD_OPS, check_dir_writable, check_out_dir, check_writable, parse_count,
    parse_cpus, parse_mem, parse_ops, parse_repeat, parse_seed, parse_seed_range, parse_warmup,
};

impl ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &[Mode::Performance, Mode::Smoke, Mode::Stress]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

/// What `compare --format` writes: the table in one of the [`Format`]s, or
/// the samples of a `--seeds` run as a jsonl shard (for `--merge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFormat {
    /// The comparison, rendered.
    Report(Format),
    /// One JSON line per sample, with a header line.
    Jsonl,
}

impl ValueEnum for OutFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            OutFormat::Report(Format::Table),
            OutFormat::Report(Format::Markdown),
            OutFormat::Report(Format::Csv),
            OutFormat::Report(Format::Json),
            OutFormat::Jsonl,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            OutFormat::Report(f) => PossibleValue::new(f.name()),
            OutFormat::Jsonl => {
                PossibleValue::new("jsonl").help("One JSON line per sample, with a header line (a shard for --merge)")
            }
        })
    }
}

/// `trace --format`: `ftrace` or `json`, parsed by [`TraceFormat`]'s own
/// `FromStr` (the possible values are listed for the help and the error).
pub fn trace_format() -> impl TypedValueParser<Value = TraceFormat> {
    PossibleValuesParser::new(["ftrace", "json"]).try_map(|s| s.parse::<TraceFormat>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_cpus("4"), Ok(4));
        assert!(parse_cpus("0").unwrap_err().contains("1 to 256"));
        assert!(parse_cpus("1000").unwrap_err().contains("1 to 256"));
        assert!(parse_cpus("-1").unwrap_err().contains("negative"));
        assert!(parse_cpus("").unwrap_err().contains("empty"));
        assert!(parse_seed("18446744073709551616").unwrap_err().contains("above"));
        assert_eq!(parse_seed("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_ops("1000000000"), Ok(MAX_WORKLOAD_OPS));
        assert!(parse_ops("1000000001").unwrap_err().contains("at most"));
        assert!(parse_repeat("1").unwrap_err().contains("at least 2"));
        assert_eq!(parse_warmup("0"), Ok(0));
        assert!(parse_warmup("1000000000000").unwrap_err().contains("at most 10000"));
        assert!(parse_mem("1K").unwrap_err().contains("multiples of the 4K page"));
        assert!(parse_mem("8M").unwrap_err().contains("16M to 1T"));
        assert_eq!(parse_mem("64M"), Ok((64 << 20, vec![])));
        assert_eq!(parse_mem("64M,64M@0x100000000").unwrap().1.len(), 2);
        assert!(parse_mem("64M,4097@0x100000000").unwrap_err().contains("multiples of the 4K page"));
        assert_eq!(parse_seed_range("3..6"), Ok(vec![3, 4, 5]));
        assert_eq!(parse_seed_range("3..=6"), Ok(vec![3, 4, 5, 6]));
        assert_eq!(parse_seed_range("18446744073709551615..=18446744073709551615"), Ok(vec![u64::MAX]));
        for bad in ["5..5", "6..3", "3", "a..b", "-1..3", "0..10001", "..4"] {
            assert!(parse_seed_range(bad).is_err(), "{bad}");
        }
    }
}

/// The options every command takes, flattened into `mmlab` (global: they
/// may come before or after the command). An option not given is `None`;
/// the command applies its own default ([`MachineDefaults`]).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct GlobalOpts {
    /// RAM of the machine, like `mem=` (K/M/G/T suffixes), one bank at
    /// 0x40000000; or banks as a device tree memory node lists them,
    /// `SIZE[@BASE],SIZE@BASE,...` (e.g. `2G,2G@0x100000000`: a hole between)
    /// [default: 4G; fuzz: 64M].
    #[arg(long, global = true, value_name = "SIZE")]
    pub mem: Option<String>,
    /// Number of CPUs, 1..=256 [default: 2; test-vmalloc and compare: max(2, nr_threads); fuzz: 4].
    #[arg(long, global = true, value_name = "N", allow_negative_numbers = true, value_parser = parse_cpus)]
    pub cpus: Option<usize>,
    // The help sentence lists every key of the crates' tables (settings::set_help).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE", help = crate::settings::set_help())]
    pub set: Vec<String>,
    /// Seed of the workload's random stream [default: 1] (compare --seeds
    /// gives its own; refused by the commands that draw no random numbers,
    /// and by replay, whose file names its seed).
    #[arg(long, global = true, value_name = "S", allow_negative_numbers = true, value_parser = parse_seed)]
    pub seed: Option<u64>,
    /// Re-run with the settings a run recorded: the `run` object of an
    /// mmlab JSON output (or the object alone). The record is the whole
    /// configuration: --mem, --cpus, --seed and --set do not apply with it.
    #[arg(long, global = true, value_name = "RUN.json")]
    pub config: Option<std::path::PathBuf>,
    /// The record read from `--config`, its configuration checked against
    /// every resolution ([`GlobalOpts::configs`]).
    #[arg(skip)]
    pub recorded: Option<crate::provenance::Recorded>,
}

/// A command's machine where `--mem` and `--cpus` are not given.
#[derive(Clone, Copy, Debug)]
pub struct MachineDefaults {
    /// `--mem`.
    pub mem: &'static str,
    /// `--cpus`.
    pub cpus: usize,
}

impl MachineDefaults {
    /// The machine of every command but fuzz: 4G, 2 CPUs.
    pub const MACHINE: MachineDefaults = MachineDefaults { mem: "4G", cpus: 2 };
    /// `fuzz`: 64M (small enough to run out of memory often), 4 CPUs.
    pub const FUZZ: MachineDefaults = MachineDefaults { mem: "64M", cpus: 4 };
}

impl GlobalOpts {
    /// Read `--config`'s record and take its memory, CPUs, seed and
    /// settings as if given (module docs of [`crate::provenance`]).
    ///
    /// # Errors
    /// The file unreadable or without a record, or a machine option given
    /// alongside it.
    pub fn load_config(self) -> Result<GlobalOpts, String> {
        let Some(path) = &self.config else { return Ok(self) };
        if self.mem.is_some() || self.cpus.is_some() || self.seed.is_some() || !self.set.is_empty() {
            return Err("--config takes --mem, --cpus, --seed and --set from the record; give them there".to_string());
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("--config: reading {}: {e}", path.display()))?;
        let r = crate::provenance::RunRecord::load(&text).map_err(|e| format!("--config {}: {e}", path.display()))?;
        Ok(GlobalOpts {
            mem: Some(r.mem.clone()),
            cpus: Some(r.cpus),
            set: r.sets.clone(),
            seed: Some(r.seed),
            config: self.config.clone(),
            recorded: Some(r),
        })
    }

    /// The seed (1 unless given).
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or(1)
    }

    /// Refuse an explicit `--seed` for a command that draws no random
    /// numbers (`what` names it), rather than record a seed that did
    /// nothing. A seed taken from `--config`'s record is not refused.
    ///
    /// # Errors
    /// `--seed` given on the command line.
    pub fn refuse_seed(&self, what: &str) -> Result<(), String> {
        match self.seed {
            Some(_) if self.config.is_none() => Err(format!("--seed: {what} draws no random numbers")),
            _ => Ok(()),
        }
    }

    /// Refuse hugetlb's settings (`hugepages=`, `hugepagesz=`,
    /// `hugetlb.*`, HVO's) for a command that brings up no hugetlb: its
    /// pools would not be grown, and the run's header would show a setting
    /// the run ignored.
    pub fn refuse_hugetlb(&self, what: &str) -> Result<(), String> {
        let key = |kv: &str| kv.split_once('=').map_or(kv, |(k, _)| k).to_string();
        match self.set.iter().find(|kv| crate::settings::is_hugetlb_key(&key(kv))) {
            Some(kv) => Err(format!(
                "--set {kv}: {what} brings up no hugetlb (stat, hugetlb, peer and trace do); the setting would be ignored"
            )),
            None => Ok(()),
        }
    }

    /// Whether any machine option (`--mem`, `--cpus`, `--set`) was given,
    /// for the commands that take their machine from elsewhere.
    pub fn machine_given(&self) -> bool {
        self.mem.is_some() || self.cpus.is_some() || !self.set.is_empty()
    }

    /// Every layer's configuration: `--mem` and `--cpus` (`d` where not
    /// given) and every `--set`, in order; warnings about settings that do
    /// nothing go to stderr. With `--config`, the result is checked against
    /// the recorded configuration.
    ///
    /// # Errors
    /// A bad `--mem` or `--set`, or a configuration other than the
    /// record's, as text for the command line.
    pub fn configs(&self, d: MachineDefaults) -> Result<crate::settings::Configs, String> {
        let c =
            crate::settings::Configs::from_options(self.mem.as_deref().unwrap_or(d.mem), self.cpus, &self.set, d.cpus)?;
        if let Some(r) = &self.recorded {
            r.check(&c)?;
        }
        Ok(c)
    }

    /// The record of a run of `c` (the machine as booted) with these
    /// options.
    pub fn record(&self, c: &crate::settings::Configs) -> crate::provenance::RunRecord {
        crate::provenance::RunRecord::new(c, &self.set, self.seed())
    }
}
