//! Every output records the run that made it: [`RunRecord`].
//!
//! The JSON of every command carries a `"run"` object: the revision the
//! binary was built from (`git describe --always --dirty` at build time, or
//! the crate version outside a checkout), the host architecture, the
//! command line, the seed, the machine's memory and CPUs, the `--set`
//! settings as given, and `config`: the resolved value of every field of
//! every layer's configuration (machine, page allocator, vmalloc, hugetlb
//! with HVO), defaults included. A text output starts with one header line
//! ([`RunRecord::header`]) naming the machine and the settings that differ
//! from the defaults, as a kernel command line would:
//!
//! ```text
//! # mmlab 0899451-dirty mem=4G cpus=2 seed=1 vmalloc.contpte=off
//! ```
//!
//! The /proc and sysfs files of `stat`, and `trace`'s ftrace and Perfetto
//! outputs, keep the kernel's format byte for byte: their header goes to
//! stderr.
//!
//! # Re-running a record
//!
//! `mmlab --config RUN.json <command>` reads the `run` object (of a whole
//! JSON output, the first line of JSON lines that has one, or a bare
//! record; [`RunRecord::load`]) and runs the command with its memory, CPUs,
//! seed and settings. The settings are applied to this build's defaults and
//! the configuration they give must equal the recorded `config`, field by
//! field ([`Recorded::check`]): a field deleted from the record, a value
//! changed in it, or a default that moved since the recorded revision is an
//! error naming the field. `--mem`, `--cpus`, `--seed` and `--set` given
//! alongside `--config` are an error: the record is the whole configuration.

use crate::settings::Configs;
use mmlab_engine::MachineConfig;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// The revision the binary was built from (build.rs).
pub const REVISION: &str = env!("MMLAB_GIT_REV");

/// The run an output came from (module docs).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// `git describe --always --dirty` at build time, or `v<version>`.
    pub revision: String,
    /// The host's architecture (`std::env::consts::ARCH`).
    pub host_arch: String,
    /// The command line, as the process received it.
    pub command_line: Vec<String>,
    /// The workload's seed.
    pub seed: u64,
    /// The machine's RAM as `--mem` takes it.
    pub mem: String,
    /// The machine's CPUs.
    pub cpus: usize,
    /// The `--set` settings as given, in order.
    pub sets: Vec<String>,
    /// Every layer's configuration, resolved ([`config_json`]).
    pub config: Value,
}

impl RunRecord {
    /// The record of a run of `configs` (the machine actually booted),
    /// made from `sets` and `seed`, with this process's command line.
    pub fn new(configs: &Configs, sets: &[String], seed: u64) -> RunRecord {
        RunRecord {
            revision: REVISION.to_string(),
            host_arch: std::env::consts::ARCH.to_string(),
            command_line: std::env::args().collect(),
            seed,
            mem: mem_spec(&configs.machine),
            cpus: configs.machine.nr_cpus,
            sets: sets.to_vec(),
            config: config_json(configs),
        }
    }

    /// The record as one JSON object, without a newline.
    pub fn to_json(&self) -> String {
        crate::output::json::to_string(self)
    }

    /// The header line of a text output, with its newline: revision,
    /// machine, seed and the settings as given (module docs).
    pub fn header(&self) -> String {
        let mut s = format!("# mmlab {} mem={} cpus={} seed={}", self.revision, self.mem, self.cpus, self.seed);
        for set in &self.sets {
            let _ = write!(s, " {}", set.split_whitespace().collect::<String>());
        }
        s.push('\n');
        s
    }

    /// `json`, one JSON object (a line or a whole output), with this
    /// record as its first member `"run"`; anything else is returned as it
    /// was.
    pub fn insert_into(&self, json: &str) -> String {
        match json.strip_prefix('{') {
            Some(rest) if rest.trim_start().starts_with('}') => format!("{{\"run\":{}{rest}", self.to_json()),
            Some(rest) => format!("{{\"run\":{},{rest}", self.to_json()),
            None => json.to_string(),
        }
    }

    /// `json` with this record as the member `"run"` right after the
    /// first member (a shard's header keeps `"type"` first).
    pub fn insert_after_first(&self, json: &str) -> String {
        if !json.starts_with('{') {
            return json.to_string();
        }
        // The first member ends at the first `,` or `}` outside a string
        // and outside a nested value.
        let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
        for (i, ch) in json.char_indices().skip(1) {
            match ch {
                _ if escaped => escaped = false,
                '\\' if in_str => escaped = true,
                '"' => in_str = !in_str,
                _ if in_str => {}
                '{' | '[' => depth += 1,
                '}' | ']' if depth > 0 => depth -= 1,
                ',' | '}' => return format!("{},\"run\":{}{}", &json[..i], self.to_json(), &json[i..]),
                _ => {}
            }
        }
        json.to_string()
    }

    /// The record of the first line of `text` that has one (a shard's
    /// header), as it was written.
    pub fn of_lines(text: &str) -> Option<RunRecord> {
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v.get("run").and_then(|r| serde_json::from_value(r.clone()).ok()))
    }

    /// The record in `text`: the `run` member of a JSON output (or of the
    /// first of its JSON lines that has one), or a bare record.
    ///
    /// # Errors
    /// No record in `text`, or one whose fields are missing or mistyped;
    /// the message names the field.
    pub fn load(text: &str) -> Result<Recorded, String> {
        let whole = serde_json::from_str::<Value>(text).ok();
        let candidates = whole.into_iter().chain(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
        for v in candidates {
            let run = match v.get("run") {
                Some(r) => r.clone(),
                None if v.get("config").is_some() && v.get("revision").is_some() => v,
                None => continue,
            };
            return Recorded::from_value(&run);
        }
        Err("no run record: expected a JSON output of mmlab with a \"run\" object, or the object itself".to_string())
    }
}

/// A record read back for `--config` (module docs).
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The revision that wrote it.
    pub revision: String,
    /// `--mem`.
    pub mem: String,
    /// `--cpus`.
    pub cpus: usize,
    /// `--seed`.
    pub seed: u64,
    /// `--set`, in order.
    pub sets: Vec<String>,
    /// The resolved configuration it recorded.
    pub config: Value,
}

impl Recorded {
    fn from_value(run: &Value) -> Result<Recorded, String> {
        let field = |k: &str| run.get(k).ok_or_else(|| format!("run record: \"{k}\" is missing"));
        let text =
            |k: &str| field(k)?.as_str().map(str::to_string).ok_or(format!("run record: \"{k}\" is not a string"));
        let count = |k: &str| field(k)?.as_u64().ok_or(format!("run record: \"{k}\" is not a whole number"));
        let sets = field("sets")?
            .as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
            .ok_or("run record: \"sets\" is not a list of strings")?;
        Ok(Recorded {
            revision: text("revision")?,
            mem: text("mem")?,
            cpus: usize::try_from(count("cpus")?).map_err(|_| "run record: \"cpus\" is too large".to_string())?,
            seed: count("seed")?,
            sets,
            config: field("config")?.clone(),
        })
    }

    /// Check that `configs` (this build's resolution of the record's
    /// settings) is the configuration the record holds.
    ///
    /// # Errors
    /// The first field that differs or is missing, by its path
    /// (`config.vmalloc.contpte`).
    pub fn check(&self, configs: &Configs) -> Result<(), String> {
        let now = config_json(configs);
        diff("config", &self.config, &now).map_or(Ok(()), |(path, rec, now)| {
            Err(match rec {
                None => format!("run record: {path} is missing (this build resolves it to {now})"),
                Some(rec) => format!(
                    "run record: {path} is {rec} in the record, but its settings give {now} in this build \
                     (edited, or the default moved since {})",
                    self.revision
                ),
            })
        })
    }
}

/// The first path where `rec` and `now` differ: the path, the recorded
/// value (`None`: missing) and this build's.
fn diff(path: &str, rec: &Value, now: &Value) -> Option<(String, Option<String>, String)> {
    match (rec, now) {
        (Value::Object(r), Value::Object(n)) => {
            let extra = r.keys().find(|k| !n.contains_key(*k));
            if let Some(k) = extra {
                return Some((format!("{path}.{k}"), Some(r[k].to_string()), "no such field".to_string()));
            }
            n.iter().find_map(|(k, nv)| match r.get(k) {
                None => Some((format!("{path}.{k}"), None, nv.to_string())),
                Some(rv) => diff(&format!("{path}.{k}"), rv, nv),
            })
        }
        _ if rec == now => None,
        _ => Some((path.to_string(), Some(rec.to_string()), now.to_string())),
    }
}

/// `--mem` as it gives `mc`'s RAM: one size, or the banks.
fn mem_spec(mc: &MachineConfig) -> String {
    if mc.mem_banks.is_empty() {
        size(mc.mem_bytes)
    } else {
        mc.mem_banks.iter().map(|b| format!("{}@{:#x}", size(b.size), b.base)).collect::<Vec<_>>().join(",")
    }
}

/// A size with the largest suffix that divides it (`4G`, `64M`, `4096`).
fn size(bytes: u64) -> String {
    for (shift, suffix) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes != 0 && bytes.trailing_zeros() >= shift {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The machine's configuration, every field (the engine's type does not
/// derive `Serialize`; the destructuring fails to compile when a field is
/// added, so none is left out).
#[derive(Serialize)]
struct MachineRecord {
    mem_bytes: u64,
    mem_banks: Vec<mmlab_engine::mm::banks::MemBank>,
    deferred_struct_page_init: bool,
    nr_cpus: usize,
    barrier_backend: String,
    lock_stat: bool,
    lazy_mmu_barrier_batching: bool,
    tlbi_range: Option<bool>,
    lpa2: Option<bool>,
    tlb_entries: usize,
    cost_profile: &'static str,
    linear_map: bool,
    linear_map_variant: mmlab_engine::arch::arm64::mmu::LinearMapVariant,
    rodata: mmlab_engine::arch::arm64::mmu::Rodata,
    debug_pagealloc: bool,
    kfence_sample_interval: u64,
    split_mode: Option<mmlab_engine::arch::arm64::pageattr::SplitMode>,
    kernel_image: Option<bool>,
    boot_state: mmlab_engine::mm::boot_state::BootState,
}

impl MachineRecord {
    fn of(mc: &MachineConfig) -> MachineRecord {
        let MachineConfig {
            mem_bytes,
            mem_banks,
            deferred_struct_page_init,
            nr_cpus,
            barrier_backend,
            lock_stat,
            lazy_mmu_barrier_batching,
            tlbi_range,
            lpa2,
            tlb_entries,
            cost_profile,
            linear_map,
            linear_map_variant,
            rodata,
            debug_pagealloc,
            kfence_sample_interval,
            split_mode,
            kernel_image,
            boot_state,
        } = mc;
        MachineRecord {
            mem_bytes: *mem_bytes,
            mem_banks: mem_banks.clone(),
            deferred_struct_page_init: *deferred_struct_page_init,
            nr_cpus: *nr_cpus,
            barrier_backend: format!("{barrier_backend:?}"),
            lock_stat: *lock_stat,
            lazy_mmu_barrier_batching: *lazy_mmu_barrier_batching,
            tlbi_range: *tlbi_range,
            lpa2: *lpa2,
            tlb_entries: *tlb_entries,
            cost_profile: cost_profile.name,
            linear_map: *linear_map,
            linear_map_variant: *linear_map_variant,
            rodata: *rodata,
            debug_pagealloc: *debug_pagealloc,
            kfence_sample_interval: *kfence_sample_interval,
            split_mode: *split_mode,
            kernel_image: *kernel_image,
            boot_state: *boot_state,
        }
    }
}

/// Every layer's configuration as JSON: `{machine, allocator, vmalloc,
/// hugetlb}`, each with every field of its type.
pub fn config_json(c: &Configs) -> Value {
    #[derive(Serialize)]
    struct All<'a> {
        machine: MachineRecord,
        allocator: &'a mmlab_pcp::AllocatorConfig,
        vmalloc: &'a mmlab_vmalloc::VmallocConfig,
        hugetlb: &'a mmlab_hugetlb::HugetlbConfig,
    }
    let all = All {
        machine: MachineRecord::of(&c.machine),
        allocator: &c.allocator,
        vmalloc: &c.vmalloc,
        hugetlb: &c.hugetlb,
    };
    serde_json::to_value(&all).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(sets: &[&str]) -> Configs {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Configs::new(MachineConfig::default(), &sets).unwrap()
    }

    #[test]
    fn a_record_reads_back_and_checks() {
        let c = configs(&["vmalloc.contpte=off", "hugepages=2"]);
        let r = RunRecord::new(&c, &["vmalloc.contpte=off".into(), "hugepages=2".into()], 7);
        assert_eq!((r.mem.as_str(), r.cpus), ("4G", 2));
        assert!(r.header().starts_with(&format!("# mmlab {REVISION} mem=4G cpus=2 seed=7 vmalloc.contpte=off")));
        let line = r.insert_after_first("{\"type\":\"h\",\"a\":[1,{\"b\":\"},\"}]}");
        assert!(
            line.starts_with("{\"type\":\"h\",\"run\":{") && line.ends_with("},\"a\":[1,{\"b\":\"},\"}]}"),
            "{line}"
        );
        assert_eq!(RunRecord::of_lines(&line).unwrap().seed, 7);
        let out = r.insert_into("{\"a\":1}\n");
        assert!(out.starts_with("{\"run\":{\"revision\":") && out.ends_with(",\"a\":1}\n"), "{out}");
        let back = RunRecord::load(&out).unwrap();
        assert_eq!((back.seed, back.sets.len()), (7, 2));
        back.check(&c).unwrap();
        let e = back.check(&configs(&["hugepages=2"])).unwrap_err();
        assert!(e.contains("config.vmalloc.contpte is false in the record"), "{e}");
        let deleted = out.replace("\"contpte\":false,", "");
        let e = RunRecord::load(&deleted).unwrap().check(&c).unwrap_err();
        assert!(e.contains("config.vmalloc.contpte is missing"), "{e}");
        assert!(RunRecord::load("{\"a\":1}").unwrap_err().contains("no run record"));
        let no_seed = out.replace("\"seed\":7,", "");
        assert!(RunRecord::load(&no_seed).unwrap_err().contains("\"seed\" is missing"));
    }

    #[test]
    fn sizes_and_banks() {
        assert_eq!(size(64 << 20), "64M");
        assert_eq!(size(3 << 29), "1536M");
        assert_eq!(size(4097), "4097");
        let (mem_bytes, mem_banks) = crate::cli::parse_mem("2G,2G@0x100000000").unwrap();
        let mc = MachineConfig { mem_bytes, mem_banks, ..Default::default() };
        assert_eq!(crate::cli::parse_mem(&mem_spec(&mc)).unwrap(), (mc.mem_bytes, mc.mem_banks.clone()));
    }
}
