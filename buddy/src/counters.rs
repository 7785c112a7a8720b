//! Counter snapshots as types: [`counter_snapshot!`](crate::counter_snapshot)
//! declares a struct of `u64` event counters with the arithmetic a
//! before/after measurement needs.
//!
//! # How it works
//!
//! The kernel keeps its event counters (`enum vm_event_item`, the
//! `pcpu_stats` of percpu, ...) as plain arrays of `unsigned long` and prints
//! them by name from a parallel table of strings (`vmstat_text[]` in
//! mm/vmstat.c). A measurement reads them twice and subtracts. mmlab's
//! counter snapshots do the same job with one declaration: the macro takes a
//! struct whose fields are all `u64` counters and adds
//!
//! - `Clone, Copy, Debug, Default, PartialEq, Eq` and `serde::Serialize`
//!   (the calling crate depends on `serde` with `derive`), so a report
//!   records every field by its name, by construction;
//! - `delta(&self, before)`: the events between two snapshots, field by
//!   field (counters only grow, so a smaller `self` is a caller's bug and
//!   overflows as the subtraction it is);
//! - `add(&mut self, other)`: the sum of two snapshots (per-CPU or per-run
//!   totals);
//! - `FIELDS` and `values()`: the field names in declaration order and the
//!   values in the same order, for tables and CSV columns.
//!
//! Every field's doc comment names the kernel vmstat item or tracepoint it
//! corresponds to, or says that it is mmlab's own, instrumented. The macro
//! lives in the lowest of the allocator crates so that buddy, pcp and
//! vmalloc share it without the engine knowing about it.

/// Declares a counter snapshot struct (see the [module docs](crate::counters)).
///
/// ```
/// mmlab_buddy::counter_snapshot! {
///     /// Events of an example.
///     pub struct ExampleCounts {
///         /// `pgalloc`-like: pages handed out.
///         pub allocs: u64,
///         /// mmlab's own, instrumented: pages given back.
///         pub frees: u64,
///     }
/// }
/// let before = ExampleCounts { allocs: 3, frees: 1 };
/// let after = ExampleCounts { allocs: 10, frees: 4 };
/// let d = after.delta(&before);
/// assert_eq!(d, ExampleCounts { allocs: 7, frees: 3 });
/// let mut total = d;
/// total.add(&before);
/// assert_eq!(total, after);
/// assert_eq!(ExampleCounts::FIELDS, ["allocs", "frees"]);
/// assert_eq!(after.values(), [10, 4]);
/// ```
#[macro_export]
macro_rules! counter_snapshot {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : u64 ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ::serde::Serialize)]
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: u64, )+
        }

        impl $name {
            /// The field names, in declaration order (the order of
            /// [`values`](Self::values) and of the serialised fields).
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// The events between `before` and this snapshot, field by field.
            #[must_use]
            pub fn delta(&self, before: &Self) -> Self {
                Self { $( $field: self.$field - before.$field, )+ }
            }

            /// Add `other` into this snapshot, field by field.
            pub fn add(&mut self, other: &Self) {
                $( self.$field += other.$field; )+
            }

            /// The values in the order of [`FIELDS`](Self::FIELDS).
            pub fn values(&self) -> ::std::vec::Vec<u64> {
                ::std::vec![$(self.$field),+]
            }
        }
    };
}
