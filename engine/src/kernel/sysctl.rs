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
//! parser that turns the value text into a [`Parsed`] value, or returns a
//! typed [`KnobError`]. A value is parsed once, when the command line is
//! read; applying the [`Parsed`] value to the configuration struct later
//! does not look at the text again. Help text ([`Knob::help`],
//! [`Knob::summary`]) and the errors for a bad key or value come from the
//! same row, so they cannot drift apart.
//!
//! # Shared value parsers
//!
//! - [`parse_bool`]: every boolean knob takes the words the kernel's
//!   `kstrtobool()` takes, [`BOOL_VALUES`]: `1|0`, `y|n`, `yes|no`,
//!   `true|false`, `on|off`, in any case ([`kstrtobool`]). The kernel
//!   reads only the first one or two characters (`yolo` is true there);
//!   here a word outside the list is refused, so a typo is never taken as
//!   a value.
//!   [`bool_knob!`](crate::bool_knob) writes such a row.
//! - [`parse_named`]: one of a fixed list of names, exactly as listed (no
//!   aliases); [`parse_from_str`] the same through a type's `FromStr`.
//! - [`sysctl_int`]: a `proc_dointvec_minmax` int with a floor of 0
//!   refuses anything outside `0..=INT_MAX` with -EINVAL.
//!
//! A value a knob does not take is one short line naming the key and the
//! values it takes, with a "did you mean" when one is close
//! ([`suggest`]); so is a key no table has.
//!
//! # Registering tables
//!
//! A program that sets several configuration structs at once (the
//! harness's `--set`) keeps them in one outer struct `O` and registers
//! each crate's table once as a [`Registered`] (the table, and where its
//! struct sits in `O`); a slice of them, as [`AnyTable`]s, answers every
//! key ([`find_knob`]).
//!
//! The tables live in the engine, the lowest crate, so that the machine's
//! own keys ([`MachineConfig::KNOBS`](crate::MachineConfig::KNOBS)) use them
//! as the allocator crates do.

use std::fmt;
use std::num::ParseIntError;
use std::sync::Arc;

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

/// The values every boolean knob takes: `kstrtobool()`'s words.
pub const BOOL_VALUES: &str = "1|0|y|n|yes|no|true|false|on|off";

/// The `--help` summary of a boolean knob (the full list is
/// [`BOOL_VALUES`]).
pub const BOOL_SUMMARY: &str = "on|off";

/// Why a value was refused by its parser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// Not one of [`BOOL_VALUES`].
    NotBool,
    /// Not one of the knob's listed values; `suggestion` is the closest
    /// listed one, if any is close ([`suggest`]).
    NotOneOf {
        /// The listed value the given one is probably a typo of.
        suggestion: Option<&'static str>,
    },
    /// Not an integer of the knob's type.
    NotInt(ParseIntError),
    /// An integer outside the knob's range (its values name the range).
    OutOfRange,
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

impl ValueError {
    /// Whether the knob's list of values says all there is to say.
    fn is_listing(&self) -> bool {
        matches!(self, ValueError::NotBool | ValueError::NotOneOf { .. } | ValueError::OutOfRange)
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::NotBool => write!(f, "not one of {BOOL_VALUES}"),
            ValueError::NotOneOf { suggestion: Some(s) } => write!(f, "did you mean {s}?"),
            ValueError::NotOneOf { suggestion: None } => f.write_str("not one of its values"),
            ValueError::NotInt(e) => write!(f, "{e}"),
            ValueError::OutOfRange => f.write_str("out of range"),
            ValueError::SysctlNotInt(e) => write!(f, "Invalid argument (EINVAL): {e}"),
            ValueError::SysctlOutOfRange { max } => {
                write!(f, "Invalid argument (EINVAL): the sysctl is an int in 0..={max}")
            }
            ValueError::Other(s) => f.write_str(s),
        }
    }
}

/// A setting that could not be parsed or applied; the configuration is
/// unchanged.
#[derive(Debug)]
pub enum KnobError {
    /// The argument is not of the form `key=value`.
    NotKeyValue(String),
    /// No knob has the key.
    UnknownKey {
        /// The key as given.
        key: String,
        /// The closest key, if one is close ([`suggest`]).
        suggestion: Option<&'static str>,
    },
    /// The value does not parse or is out of the knob's range.
    BadValue {
        /// The knob.
        key: &'static str,
        /// The value as given.
        value: String,
        /// The values the knob takes (its row's `values`; filled in by
        /// [`Knob::parse`], empty before).
        values: &'static str,
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
            KnobError::UnknownKey { key, suggestion: Some(s) } => {
                write!(f, "unknown setting {key:?}; did you mean {s}?")
            }
            KnobError::UnknownKey { key, suggestion: None } => {
                write!(f, "unknown setting {key:?} (`mmlab --help` lists the keys under --set)")
            }
            KnobError::BadValue { key, value, values, why } => {
                write!(f, "bad value {value:?} for {key}")?;
                if !values.is_empty() {
                    write!(f, " ({values})")?;
                }
                match why {
                    ValueError::NotOneOf { suggestion: Some(s) } => write!(f, "; did you mean {s}?"),
                    w if w.is_listing() && !values.is_empty() => Ok(()),
                    w => write!(f, ": {w}"),
                }
            }
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
    /// A [`KnobError::BadValue`] for `key` (its values are filled in by
    /// [`Knob::parse`]).
    pub fn bad_value(key: &'static str, value: &str, why: ValueError) -> KnobError {
        KnobError::BadValue { key, value: value.to_string(), values: "", why }
    }

    /// An [`KnobError::UnknownKey`] for `key`, suggesting the closest of
    /// `keys`.
    pub fn unknown_key<'k>(key: &str, keys: impl IntoIterator<Item = &'k &'static str>) -> KnobError {
        KnobError::UnknownKey { key: key.to_string(), suggestion: suggest(key, keys.into_iter().copied()) }
    }

    /// This error with the knob's `values` filled in; a value not among
    /// listed values (`a|b|c`) gets the closest of them as a suggestion.
    fn with_values(self, values: &'static str) -> KnobError {
        match self {
            KnobError::BadValue { key, value, why, .. } => {
                let why = match why {
                    ValueError::NotOneOf { suggestion: None } => {
                        ValueError::NotOneOf { suggestion: suggest(&value, values.split('|')) }
                    }
                    w => w,
                };
                KnobError::BadValue { key, value, values, why }
            }
            e => e,
        }
    }
}

/// The listed word `word` is probably a typo of: the candidate at the
/// smallest edit distance (insertions, deletions, substitutions and
/// swaps of neighbours), if that is at most a third of the word's length
/// (at least 1, at most 3; a word shorter than 3 characters is not
/// corrected: `no` is not a typo of `on`), or else the one candidate that
/// contains the word (`m2` in `apple-m2`).
pub fn suggest(word: &str, candidates: impl IntoIterator<Item = &'static str>) -> Option<&'static str> {
    let word = word.trim();
    if word.is_empty() {
        return None;
    }
    let candidates: Vec<&'static str> = candidates.into_iter().collect();
    let len = word.chars().count();
    let limit = if len < 3 { 0 } else { (len / 3).clamp(1, 3) };
    let best = candidates.iter().map(|c| (edit_distance(word, c), *c)).min_by_key(|(d, _)| *d);
    match best {
        Some((d, c)) if d <= limit => Some(c),
        _ => {
            let mut containing = candidates.iter().filter(|c| word.len() >= 2 && c.contains(word));
            match (containing.next(), containing.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        }
    }
}

/// The optimal-string-alignment distance of `a` and `b`: the edits
/// (insert, delete, substitute a character, swap two neighbours) that
/// turn one into the other.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Rows i-2, i-1 and i of the distance table.
    let mut prev2 = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// A value a knob parsed, ready to apply to a configuration `C`: the typed
/// value and what the knob does with it. Applying does not parse again.
pub struct Parsed<C>(Arc<ApplyFn<C>>);

/// What a [`Parsed`] value does to a configuration.
type ApplyFn<C> = dyn Fn(&mut C) -> Result<(), KnobError> + Send + Sync;

impl<C> Clone for Parsed<C> {
    fn clone(&self) -> Self {
        Parsed(Arc::clone(&self.0))
    }
}

impl<C> fmt::Debug for Parsed<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Parsed(..)")
    }
}

impl<C: 'static> Parsed<C> {
    /// `value`, applied by `apply` (which cannot fail).
    pub fn new<T: Clone + Send + Sync + 'static>(value: T, apply: fn(&mut C, T)) -> Parsed<C> {
        Parsed(Arc::new(move |c| {
            apply(c, value.clone());
            Ok(())
        }))
    }

    /// A value applied by `apply`, which may refuse it in the state it
    /// finds `C` in (a boot parameter read in order); `C` is then
    /// unchanged but for that state.
    pub fn with(apply: impl Fn(&mut C) -> Result<(), KnobError> + Send + Sync + 'static) -> Parsed<C> {
        Parsed(Arc::new(apply))
    }

    /// Apply the value to `cfg`.
    ///
    /// # Errors
    /// Only from a knob whose handler depends on the state of `cfg`
    /// ([`Parsed::with`]).
    pub fn apply(&self, cfg: &mut C) -> Result<(), KnobError> {
        (self.0)(cfg)
    }

    /// The same value, applied to the `C` inside an outer `O`.
    pub fn lift<O: 'static>(self, field: fn(&mut O) -> &mut C) -> Parsed<O> {
        Parsed(Arc::new(move |o| (self.0)(field(o))))
    }
}

/// The parser of a knob: the key (for errors) and the value text, to a
/// [`Parsed`] value.
pub type KnobParser<C> = fn(&'static str, &str) -> Result<Parsed<C>, KnobError>;

/// What a row says about its knob, without its configuration type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnobDoc {
    /// The key as `--set key=value` takes it.
    pub key: &'static str,
    /// The accepted values, as an error prints them.
    pub values: &'static str,
    /// The values as the `--help` sentence summarises them.
    pub summary: &'static str,
    /// The kernel's name for the knob.
    pub kernel: KernelName,
}

impl KnobDoc {
    /// The help entry: `key (values)`.
    pub fn help(&self) -> String {
        format!("{} ({})", self.key, self.values)
    }
}

/// One `--set` key of a configuration struct `C`.
pub struct Knob<C: 'static> {
    /// The key as `--set key=value` takes it.
    pub key: &'static str,
    /// The accepted values, as an error prints them (`a|b|c` for a list:
    /// a value not in it gets the closest as a suggestion).
    pub values: &'static str,
    /// The values as the command's `--help` sentence summarises them
    /// (empty: the key alone); neighbouring keys with the same summary
    /// share it ([`KnobTable::summaries`]).
    pub summary: &'static str,
    /// The kernel's name for the knob.
    pub kernel: KernelName,
    /// Parses a value (called with the key, for errors).
    pub parser: KnobParser<C>,
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

impl<C: 'static> Knob<C> {
    /// The help entry: `key (values)`.
    pub fn help(&self) -> String {
        self.doc().help()
    }

    /// The row without its parser.
    pub fn doc(&self) -> KnobDoc {
        KnobDoc { key: self.key, values: self.values, summary: self.summary, kernel: self.kernel }
    }

    /// Parse `value` (trimmed) once, for applying later.
    ///
    /// # Errors
    /// [`KnobError::BadValue`] (naming the values the knob takes) or
    /// [`KnobError::Refused`].
    pub fn parse(&self, value: &str) -> Result<Parsed<C>, KnobError> {
        (self.parser)(self.key, value.trim()).map_err(|e| e.with_values(self.values))
    }

    /// Parse `value` and apply it to `cfg`.
    ///
    /// # Errors
    /// As [`Knob::parse`] and [`Parsed::apply`]; `cfg` is then unchanged.
    pub fn apply(&self, cfg: &mut C, value: &str) -> Result<(), KnobError> {
        self.parse(value)?.apply(cfg)
    }
}

/// The knobs of one configuration struct, in help order.
pub struct KnobTable<C: 'static>(pub &'static [Knob<C>]);

impl<C> Clone for KnobTable<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for KnobTable<C> {}

impl<C> fmt::Debug for KnobTable<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|k| k.key)).finish()
    }
}

impl<C: 'static> KnobTable<C> {
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

    /// Parse `value` for the knob `key`.
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] (with the closest key of this table) when
    /// no knob has the key; otherwise as [`Knob::parse`].
    pub fn parse(&self, key: &str, value: &str) -> Result<Parsed<C>, KnobError> {
        let key = key.trim();
        let knob = self.get(key).ok_or_else(|| KnobError::unknown_key(key, self.0.iter().map(|k| &k.key)))?;
        knob.parse(value)
    }

    /// Apply `value` to the knob `key` of `cfg`.
    ///
    /// # Errors
    /// As [`KnobTable::parse`] and [`Parsed::apply`]. `cfg` is unchanged
    /// on error.
    pub fn set(&self, cfg: &mut C, key: &str, value: &str) -> Result<(), KnobError> {
        self.parse(key, value)?.apply(cfg)
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

/// A knob table of some configuration type, seen from an outer
/// configuration `O` that holds it: what a registry of every crate's
/// tables iterates over.
pub trait AnyTable<O>: Sync {
    /// Every row, in help order.
    fn docs(&self) -> Vec<KnobDoc>;
    /// Parse `value` for `key`, as a value applied to `O`; `None` when no
    /// row of this table has the key.
    fn parse(&self, key: &str, value: &str) -> Option<(KnobDoc, Result<Parsed<O>, KnobError>)>;
}

/// A crate's table registered in an outer configuration `O`: the table and
/// where its configuration struct sits in `O`.
pub struct Registered<O: 'static, C: 'static> {
    /// The crate's table.
    pub table: KnobTable<C>,
    /// The table's configuration struct inside `O`.
    pub field: fn(&mut O) -> &mut C,
}

impl<O, C> fmt::Debug for Registered<O, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered").field("table", &self.table).finish()
    }
}

impl<O: 'static, C: 'static> AnyTable<O> for Registered<O, C> {
    fn docs(&self) -> Vec<KnobDoc> {
        self.table.knobs().iter().map(Knob::doc).collect()
    }

    fn parse(&self, key: &str, value: &str) -> Option<(KnobDoc, Result<Parsed<O>, KnobError>)> {
        let knob = self.table.get(key)?;
        Some((knob.doc(), knob.parse(value).map(|p| p.lift(self.field))))
    }
}

/// Parse `key=value` with the first table of `tables` that has the key.
///
/// # Errors
/// [`KnobError::NotKeyValue`]; [`KnobError::UnknownKey`] with the closest
/// key of all the tables; the knob's error ([`Knob::parse`]).
pub fn find_knob<O>(tables: &[&dyn AnyTable<O>], kv: &str) -> Result<(KnobDoc, Parsed<O>), KnobError> {
    let (key, value) = split_key_value(kv)?;
    for t in tables {
        if let Some((doc, parsed)) = t.parse(key, value) {
            return parsed.map(|p| (doc, p));
        }
    }
    let keys: Vec<&'static str> = tables.iter().flat_map(|t| t.docs()).map(|d| d.key).collect();
    Err(KnobError::unknown_key(key, &keys))
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

/// A boolean, spelled as the kernel's `kstrtobool()` takes it: one of the
/// words of [`BOOL_VALUES`] in any case (`1`, `y`, `yes`, `true`, `on` are
/// true; `0`, `n`, `no`, `false`, `off` false). The kernel looks at the
/// first one or two characters only; a word outside the list is `None`
/// here, so a typo is never taken as a value.
pub fn kstrtobool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "y" | "yes" | "true" | "on" => Some(true),
        "0" | "n" | "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// A boolean knob's value ([`kstrtobool`]).
///
/// # Errors
/// [`ValueError::NotBool`] for a word outside [`BOOL_VALUES`].
pub fn parse_bool(key: &'static str, value: &str) -> Result<bool, KnobError> {
    kstrtobool(value).ok_or_else(|| KnobError::bad_value(key, value, ValueError::NotBool))
}

/// One of the names of `all`, exactly as listed (no aliases).
///
/// # Errors
/// [`ValueError::NotOneOf`], with the closest name as a suggestion.
pub fn parse_named<T: Copy>(key: &'static str, value: &str, all: &[(T, &'static str)]) -> Result<T, KnobError> {
    all.iter().find(|(_, n)| *n == value).map(|(v, _)| *v).ok_or_else(|| {
        let suggestion = suggest(value, all.iter().map(|(_, n)| *n));
        KnobError::bad_value(key, value, ValueError::NotOneOf { suggestion })
    })
}

/// A value of a type whose `FromStr` takes exactly the knob's listed
/// values; its error becomes [`ValueError::NotOneOf`] (the suggestion
/// comes from the row's values, [`Knob::parse`]).
///
/// # Errors
/// [`ValueError::NotOneOf`] when `T` refuses the text.
pub fn parse_from_str<T: std::str::FromStr>(key: &'static str, value: &str) -> Result<T, KnobError> {
    value.parse().map_err(|_| KnobError::bad_value(key, value, ValueError::NotOneOf { suggestion: None }))
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

/// A [`Knob`] row of a boolean knob ([`parse_bool`], values
/// [`BOOL_VALUES`]): `bool_knob!(Config, "key", kernel_name, field)` sets
/// `field`, `bool_knob!(Config, "key", kernel_name, |c, v| body)` runs
/// `body` with the parsed `v: bool`.
#[macro_export]
macro_rules! bool_knob {
    ($cfg:ty, $key:expr, $kernel:expr, |$c:ident, $v:ident| $body:expr) => {
        $crate::kernel::sysctl::Knob::<$cfg> {
            key: $key,
            values: $crate::kernel::sysctl::BOOL_VALUES,
            summary: $crate::kernel::sysctl::BOOL_SUMMARY,
            kernel: $kernel,
            parser: |key, value| {
                let v = $crate::kernel::sysctl::parse_bool(key, value)?;
                Ok($crate::kernel::sysctl::Parsed::new(v, |$c: &mut $cfg, $v: bool| $body))
            },
        }
    };
    ($cfg:ty, $key:expr, $kernel:expr, $field:ident) => {
        $crate::bool_knob!($cfg, $key, $kernel, |c, v| c.$field = v)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Cfg {
        on: bool,
        n: u32,
        mode: u8,
    }

    const TABLE: KnobTable<Cfg> = KnobTable(&[
        crate::bool_knob!(Cfg, "x.on", KernelName::Instrumented("a test switch"), on),
        Knob {
            key: "x.n",
            values: "0..=2147483647",
            summary: "",
            kernel: KernelName::Sysctl("vm.x"),
            parser: |k, v| Ok(Parsed::new(sysctl_int(k, v)?, |c: &mut Cfg, n| c.n = n)),
        },
        Knob {
            key: "x.mode",
            values: "fast|slow|apple-m2",
            summary: "fast|slow|apple-m2",
            kernel: KernelName::Instrumented("a test mode"),
            parser: |k, v| {
                Ok(Parsed::new(parse_named(k, v, &[(1, "fast"), (2, "slow"), (3, "apple-m2")])?, |c: &mut Cfg, m| {
                    c.mode = m
                }))
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
        assert_eq!(
            TABLE.set(&mut c, "y", "1").unwrap_err().to_string(),
            "unknown setting \"y\" (`mmlab --help` lists the keys under --set)"
        );
        assert_eq!(
            TABLE.set(&mut c, "x.no", "1").unwrap_err().to_string(),
            "unknown setting \"x.no\"; did you mean x.on?"
        );
        assert_eq!(
            TABLE.set(&mut c, "x.on", "maybe").unwrap_err().to_string(),
            "bad value \"maybe\" for x.on (1|0|y|n|yes|no|true|false|on|off)"
        );
        assert_eq!(
            TABLE.set(&mut c, "x.n", "2147483648").unwrap_err().to_string(),
            "bad value \"2147483648\" for x.n (0..=2147483647): Invalid argument (EINVAL): the sysctl is an int in 0..=2147483647"
        );
        assert!(TABLE.set(&mut c, "x.n", "-1").is_err());
        assert!(c.on && c.n == 42, "a refused value changes nothing");
        assert_eq!(TABLE.help().collect::<Vec<_>>()[1], "x.n (0..=2147483647)");
        assert_eq!(TABLE.get("x.n").unwrap().kernel.to_string(), "sysctl vm.x");
        assert_eq!(summarise(TABLE.summaries()), "x.on (on|off), x.n, x.mode (fast|slow|apple-m2)");
        assert_eq!(summarise([("a", "0|1"), ("b", "0|1"), ("c", "on"), ("d", "")]), "a, b (0|1), c (on), d");
    }

    /// Every boolean knob takes kstrtobool's words, and only those.
    #[test]
    fn one_boolean_spelling() {
        for (word, v) in [("1", true), ("y", true), ("yes", true), ("true", true), ("on", true)] {
            assert_eq!(parse_bool("k", word).unwrap(), v, "{word}");
        }
        for word in ["0", "n", "no", "false", "off"] {
            assert!(!parse_bool("k", word).unwrap(), "{word}");
        }
        assert_eq!((kstrtobool("Y"), kstrtobool("OFF"), kstrtobool("True")), (Some(true), Some(false), Some(true)));
        for word in ["maybe", "yolo", "2", "", "onn"] {
            assert!(parse_bool("k", word).is_err(), "{word:?}");
        }
        let mut c = Cfg::default();
        for word in BOOL_VALUES.split('|') {
            TABLE.set(&mut c, "x.on", word).unwrap();
        }
    }

    /// A value is parsed once: the parsed value applies without its text,
    /// as often as asked.
    #[test]
    fn parsed_once_applied_later() {
        let p = TABLE.parse("x.n", "7").unwrap();
        let (mut a, mut b) = (Cfg::default(), Cfg::default());
        p.apply(&mut a).unwrap();
        p.clone().apply(&mut b).unwrap();
        assert_eq!((a.n, b.n), (7, 7));
        struct Outer {
            inner: Cfg,
        }
        let mut o = Outer { inner: Cfg::default() };
        TABLE.parse("x.on", "yes").unwrap().lift(|o: &mut Outer| &mut o.inner).apply(&mut o).unwrap();
        assert!(o.inner.on);
    }

    /// Named values: exact, no aliases, a suggestion for a near miss.
    #[test]
    fn named_values_and_suggestions() {
        let mut c = Cfg::default();
        TABLE.set(&mut c, "x.mode", "slow").unwrap();
        assert_eq!(c.mode, 2);
        assert_eq!(
            TABLE.set(&mut c, "x.mode", "m2").unwrap_err().to_string(),
            "bad value \"m2\" for x.mode (fast|slow|apple-m2); did you mean apple-m2?"
        );
        assert_eq!(
            TABLE.set(&mut c, "x.mode", "fsat").unwrap_err().to_string(),
            "bad value \"fsat\" for x.mode (fast|slow|apple-m2); did you mean fast?"
        );
        assert_eq!(
            TABLE.set(&mut c, "x.mode", "zzzz").unwrap_err().to_string(),
            "bad value \"zzzz\" for x.mode (fast|slow|apple-m2)"
        );
        assert_eq!(c.mode, 2);
        assert_eq!(edit_distance("pcp.rule", "pcp.rules"), 1);
        assert_eq!(edit_distance("lcok_stat", "lock_stat"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(suggest("pcp.rule", ["pcp.rules", "pcp.high"]), Some("pcp.rules"));
        assert_eq!(suggest("zzz", ["pcp.rules", "pcp.high"]), None);
    }

    #[test]
    fn registry_of_tables() {
        #[derive(Default)]
        struct Outer {
            a: Cfg,
            b: Cfg,
        }
        static A: Registered<Outer, Cfg> = Registered { table: TABLE, field: |o| &mut o.a };
        static B: Registered<Outer, Cfg> = Registered { table: KnobTable(&[]), field: |o| &mut o.b };
        let tables: [&dyn AnyTable<Outer>; 2] = [&B, &A];
        let (doc, p) = find_knob(&tables, "x.n=3").unwrap();
        assert_eq!(doc.key, "x.n");
        let mut o = Outer::default();
        p.apply(&mut o).unwrap();
        assert_eq!((o.a.n, o.b.n), (3, 0));
        assert_eq!(find_knob(&tables, "x.m=3").unwrap_err().to_string(), "unknown setting \"x.m\"; did you mean x.n?");
    }
}
