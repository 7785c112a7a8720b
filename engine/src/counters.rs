//! Counters as types: one mechanism for every per-CPU stat family and every
//! crate's counter snapshot.
//!
//! # How it works
//!
//! The kernel counts events per CPU with a plain increment of a per-CPU
//! variable (`this_cpu_add()`, `__count_vm_events()`), and a reader sums the
//! CPUs when it wants a total (`sum_vm_events()` in mm/vmstat.c, `for_each_
//! possible_cpu` loops elsewhere). A measurement reads the totals twice and
//! subtracts. mmlab's per-CPU stat families — the vm events
//! ([`crate::mm::vmstat::VmEvents`]), the barrier counts
//! ([`crate::arch::arm64::barrier::BarrierStats`]), the TLBI counts
//! ([`crate::arch::arm64::tlb::TlbiStats`]) and RCU's per-CPU counters
//! ([`crate::kernel::rcu::RcuCpu`]) — all work this way, and share three pieces:
//!
//! - [`this_cpu_add`]: the one increment of a per-CPU counter. Only the
//!   owning CPU's thread writes its counters, so it is a relaxed load, an
//!   add and a relaxed store: a plain load, add and store on arm64 and
//!   x86_64, no atomic read-modify-write (`ldadd`, `lock xadd`) whose cost
//!   would disturb what is measured. Readers see each counter untorn but
//!   possibly stale. If two threads did write one counter, increments could
//!   be lost (never undefined behaviour).
//! - [`PerCpuStat`]: a family's per-CPU part (atomics) names its plain
//!   snapshot type and takes a snapshot; [`Machine::sum_cpus`] is the one
//!   aggregation over CPUs, as `sum_vm_events()` is.
//! - [`CounterSet`]: a snapshot type (plain `u64`s, `Copy`,
//!   `serde::Serialize`) with `add` (per-CPU or per-run totals), `delta`
//!   (the events between two snapshots) and a walk over every counter by
//!   its name.
//!
//! A snapshot made of named `u64` fields is declared with
//! [`counter_snapshot!`](crate::counter_snapshot), which derives all of
//! that; the field's name is the counter's name, so it is written once.
//! The families whose counters are arrays indexed by a kind (barriers by
//! option, TLBIs by op) implement [`CounterSet`] by hand over their arrays,
//! with names from the kind's own table.
//!
//! [`Machine::sum_cpus`]: crate::Machine::sum_cpus

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Add `n` to a per-CPU counter that only the calling CPU's thread writes:
/// a relaxed load and a relaxed store (see the [module docs](self)).
///
/// Mirrors `this_cpu_add()` (include/linux/percpu-defs.h) as
/// `__count_vm_events()` uses it.
#[inline(always)]
pub fn this_cpu_add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// A plain snapshot of counters (one CPU's, a sum, or a difference).
pub trait CounterSet: Copy + Default + serde::Serialize {
    /// Add `other` into this snapshot, counter by counter.
    fn add(&mut self, other: &Self);
    /// The events between `before` and this snapshot, counter by counter
    /// (counters only grow; they wrap as the kernel's `unsigned long` do).
    #[must_use]
    fn delta(&self, before: &Self) -> Self;
    /// Call `f` with every counter's name and value, in report order.
    fn for_each_counter(&self, f: &mut dyn FnMut(&'static str, u64));
    /// Set the counter that [`for_each_counter`](Self::for_each_counter)
    /// calls `name` to `value` (reading a report back); `false`, and no
    /// change, if no counter has that name.
    fn set_counter(&mut self, name: &str, value: u64) -> bool;
}

/// The per-CPU part of a stat family: counters that one CPU's thread bumps
/// with [`this_cpu_add`] and anyone reads with [`snapshot`](Self::snapshot).
pub trait PerCpuStat {
    /// The plain copy of this CPU's counters.
    type Counts: CounterSet;
    /// A copy of the counters, each read relaxed (not one instant across
    /// counters while the owner runs).
    fn snapshot(&self) -> Self::Counts;
}

/// Declares a counter snapshot struct (see the [module docs](crate::counters)):
/// a struct whose fields are all `u64` counters, with
///
/// - `Clone, Copy, Debug, Default, PartialEq, Eq` and `serde::Serialize`
///   (the calling crate depends on `serde` with `derive`), so a report
///   records every field by its name, by construction;
/// - `delta(&self, before)`: the events between two snapshots, field by
///   field (wrapping, as the counters do);
/// - `add(&mut self, other)`: the sum of two snapshots (per-CPU or per-run
///   totals);
/// - `FIELDS` and `values()`: the field names in declaration order and the
///   values in the same order, for tables and CSV columns;
/// - an implementation of [`CounterSet`](crate::counters::CounterSet).
///
/// Every field's doc comment names the kernel vmstat item or tracepoint it
/// corresponds to, or says that it is mmlab's own, instrumented.
///
/// ```
/// mmlab_engine::counter_snapshot! {
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
                Self { $( $field: self.$field.wrapping_sub(before.$field), )+ }
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

        impl $crate::counters::CounterSet for $name {
            fn add(&mut self, other: &Self) {
                $name::add(self, other)
            }
            fn delta(&self, before: &Self) -> Self {
                $name::delta(self, before)
            }
            fn for_each_counter(&self, f: &mut dyn FnMut(&'static str, u64)) {
                $( f(stringify!($field), self.$field); )+
            }
            fn set_counter(&mut self, name: &str, value: u64) -> bool {
                $( if name == stringify!($field) {
                    self.$field = value;
                    return true;
                } )+
                false
            }
        }
    };
}

/// Serialise a [`CounterSet`] as a map of every counter's name to its value
/// (for the families that implement the trait by hand).
pub fn serialize_counters<C: CounterSet, S: serde::Serializer>(c: &C, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(None)?;
    let mut res = Ok(());
    c.for_each_counter(&mut |name, n| {
        if res.is_ok() {
            res = map.serialize_entry(name, &n);
        }
    });
    res?;
    map.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::counter_snapshot! {
        /// Test counts.
        struct Two {
            a: u64,
            b: u64,
        }
    }

    #[test]
    fn bump_snapshot_sum() {
        let c = AtomicU64::new(0);
        this_cpu_add(&c, 3);
        this_cpu_add(&c, 4);
        assert_eq!(c.load(Relaxed), 7);
        let mut t = Two { a: 1, b: 2 };
        CounterSet::add(&mut t, &Two { a: 10, b: 20 });
        assert_eq!(CounterSet::delta(&t, &Two { a: 1, b: 2 }), Two { a: 10, b: 20 });
        let mut seen = Vec::new();
        t.for_each_counter(&mut |n, v| seen.push((n, v)));
        assert_eq!(seen, [("a", 11), ("b", 22)]);
        assert_eq!((Two::FIELDS, t.values()), (&["a", "b"][..], vec![11, 22]));
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"a":11,"b":22}"#);
        assert!(t.set_counter("b", 5) && !t.set_counter("c", 1));
        assert_eq!(t, Two { a: 11, b: 5 });
    }

    /// Every name [`CounterSet::for_each_counter`] walks is one
    /// [`CounterSet::set_counter`] writes back, for the hand-written sets too.
    fn names_write_back<C: CounterSet + PartialEq + std::fmt::Debug>() {
        let mut names = Vec::new();
        C::default().for_each_counter(&mut |n, _| names.push(n));
        let mut c = C::default();
        for (i, n) in names.iter().enumerate() {
            assert!(c.set_counter(n, i as u64 + 1), "{n}");
        }
        let mut seen = Vec::new();
        c.for_each_counter(&mut |n, v| seen.push((n, v)));
        assert_eq!(seen, names.iter().enumerate().map(|(i, &n)| (n, i as u64 + 1)).collect::<Vec<_>>());
        assert!(!c.set_counter("no such counter", 1));
    }

    #[test]
    fn every_family_writes_back_by_name() {
        names_write_back::<Two>();
        names_write_back::<crate::arch::arm64::barrier::BarrierCounts>();
        names_write_back::<crate::arch::arm64::tlb::TlbiCounts>();
        names_write_back::<crate::mm::vmstat::VmCounts>();
        names_write_back::<crate::kernel::rcu::RcuCounts>();
    }
}
