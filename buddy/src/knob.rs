//! Configuration keys as typed tables: one [`KnobTable`] per crate lists the
//! `--set` keys of that crate's configuration struct.
//!
//! The types live in the engine ([`mmlab_engine::kernel::sysctl`]), the
//! lowest crate, so that the machine's keys use them too; this module keeps
//! the path the allocator crates (pcp, vmalloc) import them by.

pub use mmlab_engine::kernel::sysctl::*;
