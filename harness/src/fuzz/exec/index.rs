//! The executor's indexes over its handle table, so that the questions
//! it asks on every op (which live unit heads this pfn, which live object
//! sits at this address) are a lookup and not a scan of every handle.
//!
//! Each index is kept by `Executor::reindex` from the handles a step
//! touched, and `Executor::check` rebuilds the address index from the
//! handle table and compares (an index out of step with the table would
//! make the oracle wrong without any library defect).

use crate::fuzz::op::{Handle, HandleKind};
use mmlab_engine::{Machine, Pfn};
use std::collections::{BTreeMap, HashMap};

/// A handle's hash: its id and kind mixed by one multiply (FxHash's step).
/// Ids are small and dense, so this spreads them well enough, and the
/// executor looks handles up several times per op, where SipHash (or a
/// B-tree's comparisons) cost more than the call under test.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
    fn write_isize(&mut self, x: isize) {
        self.write_u64(x as u64);
    }
}

pub(super) type HandleBuild = std::hash::BuildHasherDefault<HandleHasher>;

/// An address's hash: the same multiply, with the product's high half
/// (which every bit of the address reaches) turned down to where the
/// table takes its bucket index; page-aligned addresses would otherwise
/// all land in every 4096th bucket.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AddrHasher(HandleHasher);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0.finish().rotate_left(32)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }
    fn write_u64(&mut self, x: u64) {
        self.0.write_u64(x);
    }
}

type AddrBuild = std::hash::BuildHasherDefault<AddrHasher>;

/// Head pfn -> the live unit there: a flat table over the memmap's pfn
/// range (an array lookup per page call, where a hash map would hash).
#[derive(Debug)]
pub(super) struct PfnIndex {
    start: u64,
    slots: Vec<Option<(Handle, u32)>>,
}

impl PfnIndex {
    pub(super) fn new(m: &Machine) -> PfnIndex {
        let mem = m.memmap();
        let (start, end) = (mem.start_pfn().0, mem.end_pfn().0);
        PfnIndex { start, slots: vec![None; (end - start) as usize] }
    }
    fn slot(&self, pfn: Pfn) -> Option<usize> {
        let i = usize::try_from(pfn.0.checked_sub(self.start)?).ok()?;
        (i < self.slots.len()).then_some(i)
    }
    pub(super) fn get(&self, pfn: Pfn) -> Option<(Handle, usize)> {
        self.slots[self.slot(pfn)?].map(|(h, i)| (h, i as usize))
    }
    pub(super) fn insert(&mut self, pfn: Pfn, (h, i): (Handle, usize)) {
        if let Some(s) = self.slot(pfn) {
            self.slots[s] = Some((h, i as u32));
        }
    }
    /// Forget `pfn` if it still names unit `i` of `h`.
    pub(super) fn remove_if(&mut self, pfn: Pfn, (h, i): (Handle, usize)) {
        if let Some(s) = self.slot(pfn)
            && self.slots[s] == Some((h, i as u32))
        {
            self.slots[s] = None;
        }
    }
    pub(super) fn clear(&mut self) {
        self.slots.fill(None);
    }
}

/// Where a live object of the fuzzer's sits in the kernel's address
/// space, as the oracle asks about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AddrKey {
    /// A vmalloc or vmap area, or a percpu pointer, starting here (the
    /// oracle compares starts: a free names the address it was given).
    Start(u64),
    /// A vm_map_ram block: `[start, end)` (any address inside it is the
    /// block's).
    Range(u64, u64),
    /// A map_range mapping in the scratch slot starting here.
    Slot(u64),
}

/// The live objects by address: a multiset of area starts, the
/// vm_map_ram blocks by start, and the busy map_range slots, with what
/// was indexed for each handle so that an update removes exactly that.
#[derive(Debug, Default)]
pub(super) struct AddrIndex {
    of: HashMap<Handle, AddrKey, HandleBuild>,
    starts: HashMap<u64, u32, AddrBuild>,
    ranges: BTreeMap<(u64, Handle), u64>,
    slots: HashMap<u64, u32, AddrBuild>,
    /// The longest block indexed since the last clear: a lookup walks back
    /// from the address no further than this.
    longest: u64,
}

fn bump(m: &mut HashMap<u64, u32, AddrBuild>, k: u64) {
    *m.entry(k).or_insert(0) += 1;
}

fn drop_one(m: &mut HashMap<u64, u32, AddrBuild>, k: u64) {
    if let Some(n) = m.get_mut(&k) {
        *n -= 1;
        if *n == 0 {
            m.remove(&k);
        }
    }
}

impl AddrIndex {
    /// Index `h` at `key` (None: it holds no live address any more).
    pub(super) fn set(&mut self, h: Handle, key: Option<AddrKey>) {
        let old = match key {
            Some(k) => self.of.insert(h, k),
            None => self.of.remove(&h),
        };
        if old == key {
            return;
        }
        match old {
            Some(AddrKey::Start(a)) => drop_one(&mut self.starts, a),
            Some(AddrKey::Range(a, _)) => {
                self.ranges.remove(&(a, h));
            }
            Some(AddrKey::Slot(s)) => drop_one(&mut self.slots, s),
            None => {}
        }
        match key {
            Some(AddrKey::Start(a)) => bump(&mut self.starts, a),
            Some(AddrKey::Range(a, e)) => {
                self.ranges.insert((a, h), e);
                self.longest = self.longest.max(e.saturating_sub(a));
            }
            Some(AddrKey::Slot(s)) => bump(&mut self.slots, s),
            None => {}
        }
    }

    /// Whether a live object starts at `addr` or a live block covers it.
    pub(super) fn covers(&self, addr: u64) -> bool {
        if self.starts.contains_key(&addr) {
            return true;
        }
        // The least handle (pages sort first), so the range starts at the
        // first block beginning `longest` bytes before `addr`.
        let from = (addr.saturating_sub(self.longest), Handle { kind: HandleKind::Pages, id: 0 });
        self.ranges.range(from..).take_while(|((a, _), _)| *a <= addr).any(|(_, &e)| addr < e)
    }

    /// Whether a live map_range mapping uses the scratch slot at `slot`.
    pub(super) fn slot_busy(&self, slot: u64) -> bool {
        self.slots.contains_key(&slot)
    }

    /// Forget everything.
    pub(super) fn clear(&mut self) {
        *self = AddrIndex::default();
    }

    /// Whether every lookup gives what it gives on `other` (the
    /// longest block aside, which only bounds a search).
    pub(super) fn agrees(&self, other: &AddrIndex) -> bool {
        self.of == other.of && self.starts == other.starts && self.ranges == other.ranges && self.slots == other.slots
    }

    /// The handles whose entries differ between two indexes (for the
    /// check's message).
    pub(super) fn differences(&self, other: &AddrIndex) -> Vec<(Handle, Option<AddrKey>, Option<AddrKey>)> {
        let mut v: Vec<_> = self
            .of
            .iter()
            .filter(|(h, k)| other.of.get(h) != Some(k))
            .map(|(h, k)| (*h, Some(*k), other.of.get(h).copied()))
            .chain(other.of.iter().filter(|(h, _)| !self.of.contains_key(h)).map(|(h, k)| (*h, None, Some(*k))))
            .collect();
        v.sort_by_key(|d| d.0);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(kind: HandleKind, id: u32) -> Handle {
        Handle { kind, id }
    }

    #[test]
    fn addr_index_answers_as_a_scan_of_the_live_objects_would() {
        let mut ix = AddrIndex::default();
        let (v1, v2, r1, r2, t1) = (
            h(HandleKind::Vmalloc, 1),
            h(HandleKind::Vmalloc, 2),
            h(HandleKind::MapRam, 1),
            h(HandleKind::MapRam, 2),
            h(HandleKind::Table, 1),
        );
        ix.set(v1, Some(AddrKey::Start(0x1000_0000)));
        ix.set(v2, Some(AddrKey::Start(0x1000_0000)));
        ix.set(r1, Some(AddrKey::Range(0x2000_0000, 0x2000_4000)));
        ix.set(r2, Some(AddrKey::Range(0x2010_0000, 0x2010_1000)));
        ix.set(t1, Some(AddrKey::Slot(0x4000_0000)));
        // A start matches only itself; a block covers [start, end).
        assert!(ix.covers(0x1000_0000));
        assert!(!ix.covers(0x1000_1000));
        assert!(ix.covers(0x2000_0000) && ix.covers(0x2000_3fff));
        assert!(!ix.covers(0x2000_4000) && !ix.covers(0x1fff_ffff));
        assert!(ix.covers(0x2010_0800));
        assert!(ix.slot_busy(0x4000_0000) && !ix.slot_busy(0x4040_0000));
        // Two handles at one start: the address stays in use until both die.
        ix.set(v1, None);
        assert!(ix.covers(0x1000_0000));
        ix.set(v2, None);
        assert!(!ix.covers(0x1000_0000));
        // A handle that moves (vrealloc) leaves its old place.
        ix.set(r1, Some(AddrKey::Range(0x3000_0000, 0x3000_2000)));
        assert!(!ix.covers(0x2000_0000) && ix.covers(0x3000_1000));
        ix.set(t1, None);
        assert!(!ix.slot_busy(0x4000_0000));
        // Built again from the same entries, it agrees; one entry off, not.
        let mut fresh = AddrIndex::default();
        fresh.set(r1, Some(AddrKey::Range(0x3000_0000, 0x3000_2000)));
        fresh.set(r2, Some(AddrKey::Range(0x2010_0000, 0x2010_1000)));
        assert!(ix.agrees(&fresh) && ix.differences(&fresh).is_empty());
        fresh.set(r2, None);
        assert!(!ix.agrees(&fresh));
        assert_eq!(ix.differences(&fresh), vec![(r2, Some(AddrKey::Range(0x2010_0000, 0x2010_1000)), None)]);
    }
}
