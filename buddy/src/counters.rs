//! Counter snapshots as types: [`counter_snapshot!`](mmlab_engine::counter_snapshot)
//! declares a struct of `u64` event counters with the arithmetic a
//! before/after measurement needs (`delta`, `add`, `FIELDS`, `values()`,
//! `serde::Serialize` and [`CounterSet`](mmlab_engine::counters::CounterSet)).
//!
//! The macro and the trait live in the engine ([`mmlab_engine::counters`]),
//! the lowest crate, so that the engine's own per-CPU stat families (vm
//! events, barriers, TLBIs, RCU) and the allocator crates' snapshots
//! (vmalloc's `VmallocCounts`, percpu's `PercpuCounts`) are one mechanism.
//! Every crate names them there; this module holds buddy's own snapshot.
//!
//! ```
//! mmlab_engine::counter_snapshot! {
//!     /// Events of an example.
//!     pub struct ExampleCounts {
//!         /// `pgalloc`-like: pages handed out.
//!         pub allocs: u64,
//!     }
//! }
//! let d = ExampleCounts { allocs: 10 }.delta(&ExampleCounts { allocs: 3 });
//! assert_eq!(d.allocs, 7);
//! ```
