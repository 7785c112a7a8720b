//! Configuration keys as typed tables, shaped like the kernel's sysctl
//! tables: one [`KnobTable`] per crate lists the `--set` keys of that
//! crate's configuration struct.
//!
//! # How it works
//!
//! The kernel's tunables are spread over sysctl tables (`struct ctl_table`
//! in `kernel/sysctl.c`: a name, the data, bounds and a handler such as
//! `proc_dointvec_minmax`) and boot parameters (`early_param`, `__setup`).
//! mmlab's crates keep the same shape in one place per crate: a [`Knob`]
//! row holds the key as `--set key=value` takes it, the accepted values as
//! an error lists them, the same values as the command's `--help` sentence
//! summarises them, the kernel's name for the knob ([`KernelName`]) and a
//! setter that parses the value and applies it to the configuration
//! struct, or returns a typed [`KnobError`] with the configuration
//! unchanged. Help text ([`Knob::help`], [`Knob::summary`]) and the errors
//! for a bad key or value come from the same row, so they cannot drift
//! apart.
//!
//! The value parsers the rows share ([`parse_bool`], [`parse_on_off`],
//! [`sysctl_int`]) follow the kernel's handlers: a `proc_dointvec_minmax`
//! int with a floor of 0 refuses anything outside `0..=INT_MAX` with
//! -EINVAL.
//!
//! The tables live in the engine, the lowest crate, so that the machine's
//! own keys ([`MachineConfig::KNOBS`](crate::MachineConfig::KNOBS)) use them
//! as the allocator crates do (`mmlab_buddy::knob` re-exports this module
//! under its earlier path).

use std::fmt;
use std::num::ParseIntError;

/// What the kernel calls a knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelName {
    /// A sysctl, by its `/proc/sys` name (`vm.min_free_kbytes`).
    Sysctl(&'static str),
    /// A boot parameter, with what it does.
    BootParam(&'static str),
    /// Not a knob in the kernel: the code the switch selects (a function,
    /// an architecture hook, a posted patch, a release).
    Code(&'static str),
    /// mmlab's own instrumented switch, with what it emulates.
    Instrumented(&'static str),
}

impl fmt::Display for KernelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelName::Sysctl(s) => write!(f, "sysctl {s}"),
            KernelName::BootParam(s) => write!(f, "boot parameter {s}"),
            KernelName::Code(s) => write!(f, "kernel code: {s}"),
            KernelName::Instrumented(s) => write!(f, "instrumented: {s}"),
        }
    }
}

/// Why a value was refused by its parser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// Not `0` or `1`.
    NotBool,
    /// Not `on`, `off`, `1` or `0`.
    NotOnOff,
    /// Not an integer of the knob's type.
    NotInt(ParseIntError),
    /// An integer outside the knob's range (`expected` is the range as the
    /// message prints it).
    OutOfRange {
        /// The accepted range, e.g. `1..=1048576`.
        expected: &'static str,
    },
    /// A sysctl int that does not parse: the write fails with -EINVAL.
    SysctlNotInt(ParseIntError),
    /// A sysctl int outside `0..=max`: the write fails with -EINVAL.
    SysctlOutOfRange {
        /// The largest value the sysctl takes (`INT_MAX`).
        max: i64,
    },
    /// A value the knob's own parser refused, with its message.
    Other(String),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::NotBool => f.write_str("expected 0 or 1"),
            ValueError::NotOnOff => f.write_str("expected on, off, 1 or 0"),
            ValueError::NotInt(e) => write!(f, "{e}"),
            ValueError::OutOfRange { expected } => write!(f, "expected {expected}"),
            ValueError::SysctlNotInt(e) => write!(f, "Invalid argument (EINVAL): {e}"),
            ValueError::SysctlOutOfRange { max } => {
                write!(f, "Invalid argument (EINVAL): the sysctl is an int in 0..={max}")
            }
            ValueError::Other(s) => f.write_str(s),
        }
    }
}

/// A setting that could not be applied; the configuration is unchanged.
#[derive(Debug)]
pub enum KnobError {
    /// The argument is not of the form `key=value`.
    NotKeyValue(String),
    /// No knob of this table has the key.
    UnknownKey(String),
    /// The value does not parse or is out of the knob's range.
    BadValue {
        /// The knob.
        key: &'static str,
        /// The value as given.
        value: String,
        /// Why it was refused.
        why: ValueError,
    },
    /// The value parses but the kernel's handler for the knob refuses it;
    /// the handler's error (e.g. pcp's `SysctlError`) is kept as the source.
    Refused {
        /// The knob.
        key: &'static str,
        /// The value as given.
        value: String,
        /// The handler's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::NotKeyValue(kv) => write!(f, "--set expects key=value, got {kv:?}"),
            KnobError::UnknownKey(key) => write!(f, "unknown setting {key:?}"),
            KnobError::BadValue { key, value, why } => write!(f, "bad value {value:?} for {key}: {why}"),
            KnobError::Refused { source, .. } => write!(f, "{source}"),
        }
    }
}

impl std::error::Error for KnobError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KnobError::Refused { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl KnobError {
    /// A [`KnobError::BadValue`] for `key`.
    pub fn bad_value(key: &'static str, value: &str, why: ValueError) -> KnobError {
        KnobError::BadValue { key, value: value.to_string(), why }
    }
}

/// The setter of a knob: parse `value` and apply it to the configuration.
pub type KnobSetter<C> = fn(&mut C, &'static str, &str) -> Result<(), KnobError>;

/// One `--set` key of a configuration struct `C`.
pub struct Knob<C: 'static> {
    /// The key as `--set key=value` takes it.
    pub key: &'static str,
    /// The accepted values, as an error's list of valid keys prints them.
    pub values: &'static str,
    /// The values as the command's `--help` sentence summarises them
    /// (empty: the key alone); neighbouring keys with the same summary
    /// share it ([`KnobTable::summaries`]).
    pub summary: &'static str,
    /// The kernel's name for the knob.
    pub kernel: KernelName,
    /// Parses a value and applies it (called with the key, for errors).
    pub set: KnobSetter<C>,
}

impl<C> fmt::Debug for Knob<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Knob")
            .field("key", &self.key)
            .field("values", &self.values)
            .field("summary", &self.summary)
            .field("kernel", &self.kernel)
            .finish()
    }
}

impl<C> Knob<C> {
    /// The help entry: `key (values)`.
    pub fn help(&self) -> String {
        format!("{} ({})", self.key, self.values)
    }

    /// Parse `value` and apply it to `cfg`.
    ///
    /// # Errors
    /// [`KnobError::BadValue`] or [`KnobError::Refused`]; `cfg` is then
    /// unchanged.
    pub fn apply(&self, cfg: &mut C, value: &str) -> Result<(), KnobError> {
        (self.set)(cfg, self.key, value.trim())
    }
}

/// The knobs of one configuration struct, in help order.
pub struct KnobTable<C: 'static>(pub &'static [Knob<C>]);

impl<C> fmt::Debug for KnobTable<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|k| k.key)).finish()
    }
}

impl<C> KnobTable<C> {
    /// Every knob, in help order.
    pub fn knobs(&self) -> &'static [Knob<C>] {
        self.0
    }

    /// The knob with this key.
    pub fn get(&self, key: &str) -> Option<&'static Knob<C>> {
        self.0.iter().find(|k| k.key == key)
    }

    /// Whether a knob has this key.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Apply `value` to the knob `key` of `cfg`.
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] when no knob has the key; otherwise the
    /// knob's error ([`Knob::apply`]). `cfg` is unchanged on error.
    pub fn set(&self, cfg: &mut C, key: &str, value: &str) -> Result<(), KnobError> {
        let key = key.trim();
        self.get(key).ok_or_else(|| KnobError::UnknownKey(key.to_string()))?.apply(cfg, value)
    }

    /// Apply one `key=value` argument to `cfg`.
    ///
    /// # Errors
    /// [`KnobError::NotKeyValue`] without an `=`, then as [`KnobTable::set`].
    pub fn apply(&self, cfg: &mut C, kv: &str) -> Result<(), KnobError> {
        let (key, value) = split_key_value(kv)?;
        self.set(cfg, key, value)
    }

    /// The help entries, `key (values)` each, in table order.
    pub fn help(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(Knob::help)
    }

    /// The `(key, summary)` pairs, in table order, for [`summarise`].
    pub fn summaries(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.0.iter().map(|k| (k.key, k.summary))
    }
}

/// The `--help` sentence for `(key, summary)` pairs: `key (summary)` each,
/// comma-separated, a run of neighbours with the same summary sharing one
/// (`a, b (0|1)`), an empty summary printing the key alone.
pub fn summarise(entries: impl IntoIterator<Item = (&'static str, &'static str)>) -> String {
    let entries: Vec<_> = entries.into_iter().collect();
    let mut out = Vec::with_capacity(entries.len());
    for (i, (key, summary)) in entries.iter().enumerate() {
        let last_of_run = entries.get(i + 1).is_none_or(|(_, next)| next != summary);
        out.push(if summary.is_empty() || !last_of_run { key.to_string() } else { format!("{key} ({summary})") });
    }
    out.join(", ")
}

/// Split a `key=value` argument at its first `=`, both sides trimmed.
///
/// # Errors
/// [`KnobError::NotKeyValue`] when there is no `=`.
pub fn split_key_value(kv: &str) -> Result<(&str, &str), KnobError> {
    let (k, v) = kv.split_once('=').ok_or_else(|| KnobError::NotKeyValue(kv.to_string()))?;
    Ok((k.trim(), v.trim()))
}

/// `0` or `1`.
///
/// # Errors
/// [`ValueError::NotBool`] for anything else.
pub fn parse_bool(key: &'static str, value: &str) -> Result<bool, KnobError> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(KnobError::bad_value(key, value, ValueError::NotBool)),
    }
}

/// `on`, `off`, `1` or `0` (a boot parameter's spelling or a switch's).
///
/// # Errors
/// [`ValueError::NotOnOff`] for anything else.
pub fn parse_on_off(key: &'static str, value: &str) -> Result<bool, KnobError> {
    match value {
        "on" | "1" => Ok(true),
        "off" | "0" => Ok(false),
        _ => Err(KnobError::bad_value(key, value, ValueError::NotOnOff)),
    }
}

/// A value `proc_dointvec_minmax` with a minimum of 0 takes: `0..=INT_MAX`.
///
/// # Errors
/// [`ValueError::SysctlNotInt`] or [`ValueError::SysctlOutOfRange`] (the
/// kernel's -EINVAL).
pub fn sysctl_int(key: &'static str, value: &str) -> Result<u32, KnobError> {
    let v: i64 = value.parse().map_err(|e| KnobError::bad_value(key, value, ValueError::SysctlNotInt(e)))?;
    u32::try_from(v)
        .ok()
        .filter(|&v| v <= i32::MAX as u32)
        .ok_or_else(|| KnobError::bad_value(key, value, ValueError::SysctlOutOfRange { max: i32::MAX.into() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Cfg {
        on: bool,
        n: u32,
    }

    const TABLE: KnobTable<Cfg> = KnobTable(&[
        Knob {
            key: "x.on",
            values: "on|off|1|0",
            summary: "on|off",
            kernel: KernelName::Instrumented("a test switch"),
            set: |c, k, v| {
                c.on = parse_on_off(k, v)?;
                Ok(())
            },
        },
        Knob {
            key: "x.n",
            values: "0..=2147483647",
            summary: "",
            kernel: KernelName::Sysctl("vm.x"),
            set: |c, k, v| {
                c.n = sysctl_int(k, v)?;
                Ok(())
            },
        },
    ]);

    #[test]
    fn table_sets_and_refuses() {
        let mut c = Cfg::default();
        TABLE.apply(&mut c, "x.on = on").unwrap();
        TABLE.set(&mut c, "x.n", "42").unwrap();
        assert!(c.on && c.n == 42);
        assert_eq!(TABLE.apply(&mut c, "x.on").unwrap_err().to_string(), "--set expects key=value, got \"x.on\"");
        assert_eq!(TABLE.set(&mut c, "y", "1").unwrap_err().to_string(), "unknown setting \"y\"");
        assert_eq!(
            TABLE.set(&mut c, "x.on", "yes").unwrap_err().to_string(),
            "bad value \"yes\" for x.on: expected on, off, 1 or 0"
        );
        assert_eq!(
            TABLE.set(&mut c, "x.n", "2147483648").unwrap_err().to_string(),
            "bad value \"2147483648\" for x.n: Invalid argument (EINVAL): the sysctl is an int in 0..=2147483647"
        );
        assert!(TABLE.set(&mut c, "x.n", "-1").is_err());
        assert!(c.on && c.n == 42, "a refused value changes nothing");
        assert_eq!(TABLE.help().collect::<Vec<_>>(), ["x.on (on|off|1|0)", "x.n (0..=2147483647)"]);
        assert_eq!(TABLE.get("x.n").unwrap().kernel.to_string(), "sysctl vm.x");
        assert_eq!(summarise(TABLE.summaries()), "x.on (on|off), x.n");
        assert_eq!(summarise([("a", "0|1"), ("b", "0|1"), ("c", "on"), ("d", "")]), "a, b (0|1), c (on), d");
    }
}
