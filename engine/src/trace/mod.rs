//! Tracepoints of every layer: the kernel's events under the kernel's names
//! where the kernel has them, and mmlab's own, clearly named as such, where
//! it has none.
//!
//! | system (`tracing` target) | events | origin |
//! |---|---|---|
//! | `kmem` | `mm_page_alloc`, `mm_page_free`, `mm_page_free_batched`, `mm_page_alloc_zone_locked`, `mm_page_pcpu_drain`, `mm_page_alloc_extfrag` | kernel: include/trace/events/kmem.h |
//! | `vmalloc` | `alloc_vmap_area`, `purge_vmap_area_lazy`, `free_vmap_area_noflush` | kernel: include/trace/events/vmalloc.h |
//! | `rcu` | `rcu_grace_period` (gpevent `start`, `end`) | kernel: include/trace/events/rcu.h (TREE_RCU) |
//! | `mmlab_rcu` | `synchronize_rcu` (a wait finished) | mmlab's own: the kernel has no event for a synchronize_rcu() wait |
//! | `mmlab_tlb` | `tlbi` | mmlab's own: arm64 has no TLB tracepoint (x86's `tlb:tlb_flush` does not fit a broadcast TLBI) |
//! | `mmlab_barrier` | `dmb`, `dsb`, `isb` | mmlab's own |
//! | `mmlab_hvo` | `vmemmap_optimize_folio`, `vmemmap_restore_folio` | mmlab's own: the kernel has no HVO tracepoint |
//! | `mmlab_hugetlb` | `hugetlb_alloc_folio`, `hugetlb_free_folio` | mmlab's own: the kernel has no tracepoint for hugetlb pool folios |
//! | `mmlab_func` | `func_entry`, `func_exit` | mmlab's own, in the spirit of the function_graph tracer: bracket an operation (vmalloc, vfree, purge, drain, refill, synchronize_rcu, HVO batches, hugetlb pool writes and demote) so a timeline can draw it as a slice |
//! | `mmlab_state` | `pcp_state`, `buddyinfo` | mmlab's own: gauges (pages on a CPU's pcp lists and its high; free blocks per order) for counter tracks |
//!
//! [`EVENTS`] lists them all, for filters and help texts.
//!
//! # Conventions
//!
//! Each tracepoint is a plain function the emulation calls at the point
//! where the kernel fires the event (or, for mmlab's own, where the effect
//! happens). It emits one `tracing` event, level `TRACE`, whose target is
//! the system and whose metadata name is the event name. Its fields are
//! `cpu`, `ts` and then the values the kernel's record holds, under the
//! kernel's names. Callers never touch `tracing` themselves. The harness
//! prints them (`mmlab_harness::output::trace` and `mmlab_harness::trace`).
//!
//! Nothing is paid for a tracepoint nobody listens to. `tracing` guards
//! every event with, first, a comparison against its static maximum level
//! (the `max_level_*` / `release_max_level_*` cargo features remove `TRACE`
//! events from the binary altogether) and the global dynamic maximum level,
//! which is `OFF` while no subscriber exists: one relaxed atomic load and a
//! branch. When subscribers exist, each call site caches their combined
//! interest, so a site that no subscriber wants is again one load and a
//! branch. The field expressions — including the tick of the trace clock —
//! are evaluated only after these checks pass, so a disabled tracepoint
//! neither formats anything nor moves the clock.
//!
//! Time in a trace is logical. A [`TraceClock`] gives each emitted event the
//! next tick, and one tick counts as one microsecond when printed. Host time
//! would make two runs of the same seed differ in every line, and differ
//! again between an arm64 and an x86_64 host; a counter does not, so a
//! single-CPU trace for a given seed is byte-identical everywhere and two
//! traces can be compared with `diff`. Because only emitted events tick,
//! enabling one more system shifts the timestamps of the others; traces
//! are comparable between runs with the same event selection.
//!
//! | piece | fidelity |
//! |---|---|
//! | kmem, vmalloc, rcu events | faithful: names, fields and the points where they fire |
//! | mmlab_* events | instrumented: mmlab's own, no kernel counterpart |
//! | timestamps | simplified: a logical clock, one tick per event |

pub mod clock;
pub mod kmem;
pub mod mmlab;
pub mod rcu;
pub mod vmalloc;

pub use clock::TraceClock;
pub use kmem::{
    NO_PFN, PAGEBLOCK_ORDER, TARGET, mm_page_alloc, mm_page_alloc_extfrag, mm_page_alloc_zone_locked, mm_page_free,
    mm_page_free_batched, mm_page_pcpu_drain,
};

/// Whether an event is the kernel's or mmlab's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Named, laid out and fired as a kernel tracepoint.
    Kernel,
    /// mmlab's own event (system `mmlab_*`).
    Mmlab,
}

/// One event of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EventDesc {
    /// The ftrace system (the `tracing` target).
    pub system: &'static str,
    /// The event name (the `tracing` metadata name).
    pub name: &'static str,
    /// Kernel or mmlab.
    pub origin: Origin,
}

const fn k(system: &'static str, name: &'static str) -> EventDesc {
    EventDesc { system, name, origin: Origin::Kernel }
}
const fn o(system: &'static str, name: &'static str) -> EventDesc {
    EventDesc { system, name, origin: Origin::Mmlab }
}

/// Every event the emulation can emit, system by system.
pub const EVENTS: &[EventDesc] = &[
    k("kmem", "mm_page_alloc"),
    k("kmem", "mm_page_free"),
    k("kmem", "mm_page_free_batched"),
    k("kmem", "mm_page_alloc_zone_locked"),
    k("kmem", "mm_page_pcpu_drain"),
    k("kmem", "mm_page_alloc_extfrag"),
    k("vmalloc", "alloc_vmap_area"),
    k("vmalloc", "purge_vmap_area_lazy"),
    k("vmalloc", "free_vmap_area_noflush"),
    k("rcu", "rcu_grace_period"),
    o("mmlab_rcu", "synchronize_rcu"),
    o("mmlab_tlb", "tlbi"),
    o("mmlab_barrier", "dmb"),
    o("mmlab_barrier", "dsb"),
    o("mmlab_barrier", "isb"),
    o("mmlab_hvo", "vmemmap_optimize_folio"),
    o("mmlab_hvo", "vmemmap_restore_folio"),
    o("mmlab_hugetlb", "hugetlb_alloc_folio"),
    o("mmlab_hugetlb", "hugetlb_free_folio"),
    o("mmlab_func", "func_entry"),
    o("mmlab_func", "func_exit"),
    o("mmlab_state", "pcp_state"),
    o("mmlab_state", "buddyinfo"),
];

/// The catalogue entry of `system:name`, if the emulation has that event.
pub fn find_event(system: &str, name: &str) -> Option<&'static EventDesc> {
    EVENTS.iter().find(|e| e.system == system && e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ticks_from_one() {
        let clock = TraceClock::new();
        assert_eq!(clock.now(), 0);
        assert_eq!(clock.tick(), 1);
        assert_eq!(clock.tick(), 2);
        assert_eq!(clock.now(), 2);
        clock.reset();
        assert_eq!(clock.now(), 0);
        assert_eq!(clock.tick(), 1);
    }

    #[test]
    fn catalogue_names_are_unique_and_mmlab_systems_say_so() {
        for (i, a) in EVENTS.iter().enumerate() {
            assert!(EVENTS[i + 1..].iter().all(|b| (a.system, a.name) != (b.system, b.name)), "{a:?} twice");
            assert_eq!(a.system.starts_with("mmlab_"), a.origin == Origin::Mmlab, "{a:?}");
        }
        assert!(find_event("kmem", "mm_page_alloc").is_some());
        assert!(find_event("kmem", "mm_page_mystery").is_none());
    }
}
