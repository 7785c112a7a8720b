//! Why `mmlab trace kernel` refuses a trace ([`TraceError`]): each error
//! names the line at fault where one is; [`super::run`] puts the file before
//! it (a replay stop names it itself).

use super::parse;
use super::replay::ReplayError;

/// Why a trace cannot be replayed: its header disagrees with its events or
/// with the command line, or the machine cannot be booted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceError {
    /// The trace does not say how many CPUs the machine had, and `--cpus` was not given.
    NoCpuCount,
    /// `--cpus` or `--mem` disagrees with the trace's header.
    MachineOption { option: &'static str, given: String, traced: String },
    /// A header value not valid for its key (the `key=value` word).
    BadHeader { line: usize, key: &'static str, word: String, why: String },
    /// A header line that is not `# mmlab: key=value ...` with known keys,
    /// each once, before the first event.
    Header { line: usize, what: String },
    /// No event in the file: empty, comments only, or not one line the
    /// replay reads (the first of those).
    NoEvents { lines: usize, first_bad: Option<(usize, parse::LineError)> },
    /// Events the replay cannot run as given (out of time order, none to replay).
    Event { line: usize, what: String },
    /// Every allocation and free was skipped (`--on-error skip`): nothing
    /// was compared.
    NothingReplayed { events: usize, warnings: String },
    /// More pages live at once (allocated in the trace, not yet freed) than
    /// the header's managed pages.
    ManagedTooSmall { line: usize, live: u64, managed: u64 },
    /// mmlab's boot of the traced machine does not have the kernel's managed pages.
    ManagedDiffers { traced: u64, mmlab: u64 },
    /// The machine did not boot.
    Boot(String),
    /// The replay stopped at a line (the replay's `warn` names the kind).
    Replay { file: String, error: ReplayError },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::NoCpuCount => write!(
                f,
                "the trace does not say how many CPUs the traced machine had (no `# mmlab: cpus=N`); give --cpus"
            ),
            TraceError::MachineOption { option, given, traced } => {
                write!(f, "{option} {given} disagrees with the trace's machine ({traced}); leave it out")
            }
            TraceError::BadHeader { line, word, why, .. } => {
                write!(f, "line {line}: the trace's header: `{word}`: {why}")
            }
            TraceError::Header { line, what } | TraceError::Event { line, what } => write!(f, "line {line}: {what}"),
            TraceError::NoEvents { lines: 0, .. } => write!(f, "no events: the file is empty"),
            TraceError::NoEvents { lines, first_bad: None } => {
                write!(f, "no events in {lines} lines (comments and the header only)")
            }
            TraceError::NoEvents { lines, first_bad: Some((line, e)) } => {
                write!(f, "no events in {lines} lines; line {line}: {e}")
            }
            TraceError::NothingReplayed { events, warnings } => write!(
                f,
                "nothing replayed: every allocation and free of the {events} events was skipped ({warnings}); \
                 --on-error stop names the first"
            ),
            TraceError::ManagedTooSmall { line, live, managed } => {
                write!(f, "line {line}: {live} pages allocated and not freed, more than the header's managed={managed}")
            }
            TraceError::ManagedDiffers { traced, mmlab } => write!(
                f,
                "mmlab's boot of the traced machine has {mmlab} managed pages, the kernel's {traced}: not the same \
                 machine"
            ),
            TraceError::Boot(e) => write!(f, "booting the traced machine: {e}"),
            TraceError::Replay { file, error } => write!(f, "{file}: {error}"),
        }
    }
}

impl std::error::Error for TraceError {}

impl From<TraceError> for String {
    fn from(e: TraceError) -> String {
        e.to_string()
    }
}
