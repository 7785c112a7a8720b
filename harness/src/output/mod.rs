//! Rendering that is the harness's own, not a kernel file's: SVG charts
//! ([`plot`]), the translation-table reports of `stat pagetables` and
//! `walk` ([`pgtables`]), the JSON writer every machine-readable report
//! goes through ([`json`]), and the printer of the engine's kmem
//! tracepoints as ftrace text or JSON lines ([`trace`]), and the per-phase
//! boot breakdown of `mmlab boot` ([`boot`]), and what of a real boot the
//! machine emulates (`stat boot-state`, [`boot_state`]).
//!
//! Reports are typed structs deriving `serde::Serialize`; [`json`] writes
//! them with serde_json, keeping the number and string spelling mmlab's
//! JSON has always had.

pub mod boot;
pub mod boot_state;
pub mod json;
pub mod pgtables;
pub mod plot;
pub mod trace;
