//! Rendering that is the harness's own, not a kernel file's: SVG charts
//! ([`plot`]) and the translation-table reports of `stat pagetables` and
//! `walk` ([`pgtables`]).

pub mod pgtables;
pub mod plot;
