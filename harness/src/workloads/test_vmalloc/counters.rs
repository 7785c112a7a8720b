//! The counters of a test_vmalloc run: a view over the crates' own typed
//! snapshots, with the names of the run's scalar counters in one table.
//!
//! [`Counters`] holds each family's delta as its owner declares it: the
//! engine's vm events ([`VmCounts`]), barriers ([`BarrierCounts`]), TLBIs
//! ([`TlbiCounts`]) and RCU counters ([`RcuCounts`]), and vmalloc's own
//! events ([`VmallocCounts`]). Nothing is copied into fields of its own.
//!
//! [`FIELDS`] is the one ordered table of the scalar counters a run
//! reports: the output name and the typed accessor of each. It produces
//! the `counters` object of `test-vmalloc --json` and its text lines
//! ([`super::render_json`], [`super::render_text`]) and the `counters` of
//! every sample of a `compare` shard ([`crate::shard`], which reads them
//! back through the same table). An entry is one of
//! - [`Naming::Own`]: the output name is the owning type's field name,
//!   written once in the entry as the field it reads (`own!(vm.pcp_drain)`
//!   reads `VmCounts::pcp_drain` and is called `"pcp_drain"`, the name
//!   `stringify!` takes from that field); the compiler checks the field
//!   exists, so the name cannot drift from its owner's;
//! - [`Naming::Alias`]: an output name that predates this table and differs
//!   from the owner's field, kept so that reports and shards keep their
//!   bytes: `vmalloc_purges` for [`VmallocCounts::purges`],
//!   `rcu_modelled_ns` for [`RcuCounts::modelled_ns`], `barrier_modelled_ns`
//!   for [`BarrierCounts::modelled_ns`], `tlbi_modelled_ns` for
//!   [`TlbiCounts::modelled_ns`];
//! - [`Naming::Derived`]: the harness's own quantity, computed from the
//!   owners' counters: `pcp_free_pages`, [`Counters::pcp_free_pages`].
//!
//! The barrier and TLBI counts by kind are reported beside the table as
//! maps, named by the engine's own kind tables ([`BarrierCounts::iter`],
//! [`TlbiKind::name`](mmlab_engine::arch::arm64::tlb::TlbiKind::name)) and read back
//! with [`CounterSet::set_counter`].

use mmlab_engine::Machine;
use mmlab_engine::arch::arm64::barrier::BarrierCounts;
use mmlab_engine::arch::arm64::tlb::TlbiCounts;
use mmlab_engine::counters::CounterSet;
use mmlab_engine::kernel::rcu::RcuCounts;
use mmlab_engine::mm::vmstat::VmCounts;
use mmlab_vmalloc::{Vmalloc, VmallocCounts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Counter deltas over the workers' run (teardown excluded), each family
/// in its owner's snapshot type (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// The engine's vm events: page allocator, pcp lists, buddy, zone lock.
    pub vm: VmCounts,
    /// Barriers by instruction and option; modelled time (model backend).
    pub barriers: BarrierCounts,
    /// TLBIs by kind; modelled time (cost profile) with completion waits.
    pub tlbi: TlbiCounts,
    /// vmalloc's own events.
    pub vmalloc: VmallocCounts,
    /// RCU: grace periods, `synchronize_rcu()` calls and their modelled wait.
    pub rcu: RcuCounts,
}

impl Counters {
    /// The machine's and `vm`'s counters now (totals over the CPUs).
    pub fn take(m: &Machine, vm: &Vmalloc<'_, '_>) -> Counters {
        Counters {
            vm: m.vm_events(),
            barriers: m.barrier_counts(),
            tlbi: m.tlbi_counts(),
            vmalloc: vm.counts(),
            rcu: m.rcu_counts(),
        }
    }

    /// The events between `before` and this snapshot, family by family
    /// ([`CounterSet::delta`]).
    #[must_use]
    pub fn delta(&self, before: &Counters) -> Counters {
        Counters {
            vm: self.vm.delta(&before.vm),
            barriers: self.barriers.delta(&before.barriers),
            tlbi: self.tlbi.delta(&before.tlbi),
            vmalloc: self.vmalloc.delta(&before.vmalloc),
            rcu: self.rcu.delta(&before.rcu),
        }
    }

    /// Pages freed onto pcp lists: `pgfree` minus the pages freed straight
    /// to the buddy lists (`free_one_page_pages`).
    pub fn pcp_free_pages(&self) -> u64 {
        self.vm.pgfree.wrapping_sub(self.vm.free_one_page_pages)
    }

    /// All modelled time: barriers (model backend), TLBIs with their
    /// completion waits, and `synchronize_rcu()` waits; ns.
    pub fn modelled_ns(&self) -> u64 {
        self.barriers.modelled_ns + self.tlbi.modelled_ns + self.rcu.modelled_ns
    }

    /// The scalar counters as `(output name, value)`, in [`FIELDS`] order.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        FIELDS.iter().map(|f| (f.name, (f.get)(self))).collect()
    }

    /// The non-zero barrier counts by the engine's names (`"dsb(ishst)"`),
    /// in the engine's order.
    pub fn barriers_by_kind(&self) -> Vec<(&'static str, u64)> {
        self.barriers.iter().collect()
    }

    /// The non-zero TLBI counts by the engine's names (`"vale1is"`), in
    /// the engine's order.
    pub fn tlbis_by_kind(&self) -> Vec<(&'static str, u64)> {
        self.tlbi.iter().map(|(k, n)| (k.name(), n)).collect()
    }
}

/// How an output name in [`FIELDS`] relates to its counter (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// The owning snapshot type's field name.
    Own,
    /// A name of the reports for a field called otherwise by its owner.
    Alias,
    /// The harness's own quantity, computed from the owners' counters.
    Derived,
}

/// One scalar counter of a run: its output name and typed accessor.
#[derive(Clone, Copy, Debug)]
pub struct CounterField {
    /// The name in the JSON, the text lines and the shards.
    pub name: &'static str,
    pub naming: Naming,
    /// The value, read from the owner's snapshot.
    pub get: fn(&Counters) -> u64,
    /// Write the value back (reading a shard); a derived entry writes the
    /// owner's counter it is derived from, after the others are set.
    set: fn(&mut Counters, u64),
}

/// Output names of earlier versions, read as today's: shards written when
/// the allocator ran one zone counted every page as `pgalloc_normal`.
const LEGACY_NAMES: [(&str, &str); 1] = [("pgalloc_normal", "pgalloc")];

/// An entry named by the field it reads: `own!(vm.pcp_drain)`.
macro_rules! own {
    ($family:ident . $field:ident) => {
        CounterField {
            name: stringify!($field),
            naming: Naming::Own,
            get: |c| c.$family.$field,
            set: |c, v| c.$family.$field = v,
        }
    };
}

/// An entry whose output name is an alias of the field it reads.
macro_rules! alias {
    ($name:literal, $family:ident . $field:ident) => {
        CounterField { name: $name, naming: Naming::Alias, get: |c| c.$family.$field, set: |c, v| c.$family.$field = v }
    };
}

/// The scalar counters of a run, in report order (module docs): the one
/// table of their output names.
pub const FIELDS: [CounterField; 24] = [
    own!(vm.pcp_refill),
    own!(vm.pcp_refill_pages),
    own!(vm.pcp_drain),
    own!(vm.pcp_drain_pages),
    CounterField {
        name: "pcp_free_pages",
        naming: Naming::Derived,
        get: Counters::pcp_free_pages,
        set: |c, v| c.vm.free_one_page_pages = c.vm.pgfree.wrapping_sub(v),
    },
    own!(vm.rmqueue_buddy_pages),
    own!(vm.pcp_decay_drain),
    own!(vm.zone_lock_acquire),
    own!(vm.zone_lock_contended),
    own!(vm.zone_lock_hold_ns),
    own!(vm.buddy_merge),
    CounterField {
        name: "pgalloc",
        naming: Naming::Derived,
        get: |c| c.vm.pgalloc(),
        set: |c, v| {
            (c.vm.pgalloc_dma, c.vm.pgalloc_dma32, c.vm.pgalloc_movable) = (0, 0, 0);
            c.vm.pgalloc_normal = v
        },
    },
    own!(vm.pgfree),
    own!(vm.pgalloc_fail),
    own!(vmalloc.vmallocs),
    own!(vmalloc.vfrees),
    alias!("vmalloc_purges", vmalloc.purges),
    own!(vmalloc.purged_pages),
    own!(vmalloc.huge_fallbacks),
    own!(rcu.grace_periods),
    own!(rcu.synchronize_rcu),
    alias!("rcu_modelled_ns", rcu.modelled_ns),
    alias!("barrier_modelled_ns", barriers.modelled_ns),
    alias!("tlbi_modelled_ns", tlbi.modelled_ns),
];

/// `(name, value)` pairs serialised as an object's members, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pairs(pub Vec<(&'static str, u64)>);

impl Serialize for Pairs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::output::json::pairs_as_map(&self.0, s)
    }
}

/// The serialised shape of [`Counters`] (the `counters` of a shard sample,
/// format `mmlab-compare-samples/1`): the barrier and TLBI maps, then the
/// [`FIELDS`] as members. Shards written before [`Counters`] became a view
/// have the same members (in another order) and read back the same.
#[derive(Serialize, Deserialize)]
struct Repr<M, S> {
    /// Barriers by kind, non-zero only.
    barriers: M,
    /// TLBIs by kind, non-zero only.
    tlbis: M,
    #[serde(flatten)]
    scalars: S,
}

impl Serialize for Counters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Repr {
            barriers: Pairs(self.barriers_by_kind()),
            tlbis: Pairs(self.tlbis_by_kind()),
            scalars: Pairs(self.fields()),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Counters {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Counters, D::Error> {
        use serde::de::Error as _;
        type Map = BTreeMap<String, u64>;
        let mut r = Repr::<Map, Map>::deserialize(d)?;
        // Shards written before the zone split name the one zone's count.
        for (old, new) in LEGACY_NAMES {
            if !r.scalars.contains_key(new)
                && let Some(n) = r.scalars.remove(old)
            {
                r.scalars.insert(new.to_string(), n);
            }
        }
        let mut c = Counters::default();
        let unknown = |k: &str| D::Error::custom(format!("unknown counter {k:?}"));
        for (k, &n) in &r.barriers {
            if !c.barriers.set_counter(k, n) {
                return Err(unknown(k));
            }
        }
        for (k, &n) in &r.tlbis {
            if !c.tlbi.set_counter(k, n) {
                return Err(unknown(k));
            }
        }
        if let Some(k) = r.scalars.keys().find(|k| !FIELDS.iter().any(|f| f.name == k.as_str())) {
            return Err(unknown(k));
        }
        // The owners' counters first, then what is derived from them.
        for f in FIELDS
            .iter()
            .filter(|f| f.naming != Naming::Derived)
            .chain(FIELDS.iter().filter(|f| f.naming == Naming::Derived))
        {
            let n = r.scalars.get(f.name).ok_or_else(|| D::Error::missing_field(f.name))?;
            (f.set)(&mut c, *n);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::arch::arm64::tlb::TlbiKind;

    fn sample() -> Counters {
        let mut c = Counters::default();
        c.barriers.set_counter(BarrierCounts::dsb_name(mmlab_engine::arch::arm64::barrier::ishst), 3);
        c.barriers.isb = 2;
        c.barriers.modelled_ns = 11;
        c.tlbi.counts[TlbiKind::ALL[0] as usize] = 5;
        c.vm.pcp_drain = 7;
        c.vm.pgfree = 40;
        c.vm.free_one_page_pages = 15;
        c.vmalloc.purges = 4;
        c.rcu.synchronize_rcu = 1;
        c
    }

    #[test]
    fn round_trip() {
        let c = sample();
        assert_eq!(c.pcp_free_pages(), 25);
        let j = serde_json::to_string(&c).unwrap();
        assert!(j.starts_with(r#"{"barriers":{"dsb(ishst)":3,"isb":2},"tlbis":{"#), "{j}");
        assert!(j.contains(r#""pcp_free_pages":25,"#) && j.contains(r#""vmalloc_purges":4,"#), "{j}");
        assert!(j.ends_with(r#""barrier_modelled_ns":11,"tlbi_modelled_ns":0}"#), "{j}");
        assert_eq!(serde_json::from_str::<Counters>(&j).unwrap(), c);
        let bad = j.replace("dsb(ishst)", "dsb(bogus)");
        assert!(serde_json::from_str::<Counters>(&bad).unwrap_err().to_string().contains("unknown counter"));
        let bad = j.replace("\"pgfree\"", "\"pgfrees\"");
        assert!(serde_json::from_str::<Counters>(&bad).unwrap_err().to_string().contains("unknown counter"));
        let bad = j.replace(",\"pgfree\":40", "");
        assert!(serde_json::from_str::<Counters>(&bad).unwrap_err().to_string().contains("pgfree"));
    }

    #[test]
    fn names_are_unique_and_own_names_are_the_owners() {
        let mut names: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FIELDS.len());
        // Every own-named entry is a counter of its owner by that name
        // (setting it through the owner changes what the entry reads).
        let c = Counters::default();
        for f in FIELDS.iter().filter(|f| f.naming == Naming::Own) {
            let mut d = c;
            let owned = d.vm.set_counter(f.name, 1)
                || d.vmalloc.set_counter(f.name, 1)
                || d.rcu.set_counter(f.name, 1)
                || d.barriers.set_counter(f.name, 1)
                || d.tlbi.set_counter(f.name, 1);
            assert!(owned && (f.get)(&d) == 1, "{}", f.name);
        }
    }
}
