//! The machine `mmlab peer` boots for a capture: its memory and CPUs from
//! kernel.txt, its options (the command line past boot.sh's own words, and
//! a `-cpu` other than neoverse-n1) mapped to mmlab's settings where mmlab
//! has one, and named as not modelled where it has none, so that the
//! comparison never runs silently on another machine than the capture's.
//!
//! | option | mmlab setting |
//! |--------|---------------|
//! | `rodata=on\|off\|noalias` | `rodata=` (7.2's values) |
//! | `kfence.sample_interval=N` | `kfence.sample_interval=N` (0, Debian's default, is the default) |
//! | `-cpu max` (FEAT_LPA2: 52-bit VA, 5 levels) | `arm64.lpa2=on` (its FEAT_TLBIRANGE changes only modelled costs, which the capture has not) |
//! | anything else | none |
//!
//! A setting mmlab refuses (no such key, or not that value) leaves the
//! option not modelled, with mmlab's reason.

use super::capture::{Capture, RealMachine};
use crate::settings::Configs;
use std::fmt;

/// What mmlab does with one option of the real machine.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptionUse {
    /// Booted with this `--set`.
    Set(String),
    /// mmlab's default is already the kernel's.
    Default,
    /// Not modelled, and why.
    NotModelled(String),
}

/// One option and what mmlab does with it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PeerOption {
    /// The option as the capture has it (`rodata=noalias`, `-cpu max`).
    pub option: String,
    /// What mmlab does with it.
    pub used: OptionUse,
}

impl fmt::Display for PeerOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.used {
            OptionUse::Set(s) => write!(f, "{}: --set {s}", self.option),
            OptionUse::Default => write!(f, "{}: mmlab's default", self.option),
            OptionUse::NotModelled(why) => write!(f, "not modelled: {} ({why})", self.option),
        }
    }
}

/// The mmlab setting an option maps to, and a note on what the option is.
fn candidate(option: &str) -> Result<Option<String>, String> {
    if let Some(v) = option.strip_prefix("rodata=") {
        return Ok(Some(format!("rodata={v}")));
    }
    if let Some(v) = option.strip_prefix("kfence.sample_interval=") {
        return Ok((v != "0").then(|| format!("kfence.sample_interval={v}")));
    }
    match option {
        "-cpu max" => Ok(Some("arm64.lpa2=on".to_string())),
        _ => Err("mmlab has no setting for it".to_string()),
    }
}

/// What each option of `options` becomes.
pub fn map_options(options: &[String]) -> Vec<PeerOption> {
    options
        .iter()
        .map(|o| {
            let used = match candidate(o) {
                Ok(None) => OptionUse::Default,
                Ok(Some(set)) => match crate::settings::parse(std::slice::from_ref(&set)) {
                    Ok(_) => OptionUse::Set(set),
                    Err(e) => OptionUse::NotModelled(format!("--set {set}: {e}")),
                },
                Err(why) => OptionUse::NotModelled(why),
            };
            PeerOption { option: o.clone(), used }
        })
        .collect()
}

/// The machine for `capture`: its memory and CPUs unless `--mem`/`--cpus`
/// are given (then they must be the capture's), the options' settings,
/// then the user's `--set`s (which may override them).
///
/// # Errors
/// `--mem` or `--cpus` other than the capture's, or settings mmlab refuses.
pub fn configs(
    capture: &Capture,
    mem: Option<&str>,
    cpus: Option<usize>,
    user_sets: &[String],
) -> Result<(Configs, Vec<PeerOption>, Vec<String>), String> {
    let RealMachine { mem: real_mem, cpus: real_cpus, .. } = &capture.machine;
    let (real_bytes, _) = crate::cli::parse_mem(real_mem)
        .map_err(|e| format!("{}: kernel.txt: -m {real_mem}: {e}", capture.dir.display()))?;
    if let Some(m) = mem {
        let (bytes, _) = crate::cli::parse_mem(m)?;
        if bytes != real_bytes {
            return Err(format!(
                "{} is a capture of -m {real_mem} -smp {real_cpus}: run `mmlab peer` without --mem, or with --mem {real_mem}",
                capture.dir.display()
            ));
        }
    }
    if cpus.is_some_and(|c| c != *real_cpus) {
        return Err(format!(
            "{} is a capture of -m {real_mem} -smp {real_cpus}: run `mmlab peer` without --cpus, or with --cpus {real_cpus}",
            capture.dir.display()
        ));
    }
    let options = map_options(&capture.options());
    let mut sets: Vec<String> = options
        .iter()
        .filter_map(|o| match &o.used {
            OptionUse::Set(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    sets.extend(user_sets.iter().cloned());
    let c = Configs::from_options(mem.unwrap_or(real_mem), Some(*real_cpus), &sets, *real_cpus)?;
    Ok((c, options, sets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_or_are_named_not_modelled() {
        let o = map_options(&["rodata=on".to_string(), "kfence.sample_interval=0".to_string(), "quiet".to_string()]);
        assert_eq!(o[0].used, OptionUse::Set("rodata=on".to_string()));
        assert_eq!(o[1].used, OptionUse::Default);
        assert_eq!(o[2].to_string(), "not modelled: quiet (mmlab has no setting for it)");
        // -cpu max: FEAT_LPA2, 52-bit VA and five levels.
        let o = map_options(&["-cpu max".to_string()]);
        assert_eq!(o[0].used, OptionUse::Set("arm64.lpa2=on".to_string()));
    }
}
