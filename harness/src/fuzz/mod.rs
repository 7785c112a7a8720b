//! `mmlab fuzz` and `mmlab replay`: random and scripted operation
//! sequences against the page allocator, vmalloc and percpu, checked
//! against the kernel's invariants.
//!
//! # How it works
//!
//! A seed drives a xoshiro256** stream; [`generate::Generator`] turns it into
//! a sequence of [`op::Op`]s over every CPU of the machine: allocations
//! and frees at every order and several gfp types, bulk allocation,
//! get_page, split_page, drains, decay, sysctl writes, the vmalloc family,
//! vmap, vm_map_ram, percpu, kvfree_rcu, purges, map_range/unmap_range of
//! a scratch region of the kernel tables, vrealloc, hugetlb (sysfs writes
//! to every hstate, reservations, faults and frees of folios, demote), and
//! deliberately wrong calls. Generation is pure (it never looks at the machine), so a seed
//! names a sequence on every host. [`exec::Executor`] runs the sequence
//! from one host thread, switching between the CPU handles
//! (`Machine::all_cpus()`), and for every op checks the outcome against
//! the oracle ([`oracle`]): a wrong call must return one of the expected
//! typed errors and change nothing; a right call must succeed or fail for
//! lack of memory. Every `--check-every` ops and at the end it runs the
//! CONFIG_DEBUG_VM-style checks and page conservation; at the end it
//! frees everything and requires all memory back.
//!
//! On a violation the run stops, [`run::shrink`] reduces the sequence by
//! delta debugging to a small one failing the same way, and the result is
//! written as a replay file ([`replay`]), which `mmlab replay FILE` runs
//! deterministically. A hand-written replay file is a scripted workload.
//!
//! `--threads N` runs N host threads at once, each with its own stream
//! and CPU, on one machine, to hunt races: such runs are not replayable
//! (the interleaving is the host's), only the per-op oracle and the
//! end-of-run checks apply, wrong calls that could touch another thread's
//! memory (double frees, frees of freed areas) are left out, and each
//! thread maps into its own slots of the scratch region.
//!
//! [`decode`] turns bytes (a libFuzzer input) into a sequence with the
//! same generator, so the cargo-fuzz target under `tests/fuzz/` runs the
//! same model and checks.

pub mod args;
pub mod cli;
pub mod exec;
pub mod generate;
pub mod op;
pub mod oracle;
pub mod replay;
pub mod run;

pub use generate::decode;
