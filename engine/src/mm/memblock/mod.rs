//! memblock: the boot-time allocator that hands out memory before the buddy
//! allocator exists (mm/memblock.c, include/linux/memblock.h).
//!
//! # How it works
//!
//! memblock keeps two region arrays, `memory` (RAM, registered with
//! [`Memblock::add`]) and `reserved` (what boot has taken: the kernel image,
//! the memmap, page tables, ...). Each array is sorted by address, its
//! regions never overlap, and it is kept minimal: two neighbours that touch
//! and have the same node id and flags are one region. Adding a range
//! (`memblock_add_range()`) inserts only the parts of it that no region
//! covers yet, then merges what became neighbours; an add or reservation may
//! overlap, repeat or bridge earlier ones. Removing or freeing a range
//! (`memblock_remove_range()`) first splits the regions that cross its ends
//! (`memblock_isolate_range()`), then drops those inside. Sizes are capped so
//! that no region ends beyond `PHYS_ADDR_MAX` (`memblock_cap_size()`), and a
//! size of 0 changes nothing.
//!
//! An allocation ([`Memblock::alloc_range_nid`] and the helpers built on it)
//! walks the free ranges, memory less reserved (`for_each_free_mem_range`),
//! on the node it asks for (then, unless it must be that node, on any),
//! top-down by default or bottom-up after [`Memblock::set_bottom_up`], takes
//! the first place of the right size and alignment inside `[start, end)`
//! (never the first page), and reserves it with `MEMBLOCK_RSRV_KERN`. A
//! plain [`Memblock::reserve`] has no flag, so an allocation and a
//! reservation that touch stay two regions, as in the kernel. When the page
//! allocator comes up, [`Memblock::for_each_free_block`] walks the free
//! ranges in the largest naturally aligned blocks, which
//! `memblock_free_all()` / `__free_pages_memory()` hand to
//! `__free_pages_core()`.
//!
//! Who reserved what is not memblock's state: the regions merge whoever
//! asked. It is kept beside them as `memblock=debug` prints it
//! ([`Memblock::debug_log`], [`Memblock::reservations`]): one line per add,
//! removal, reservation (allocations included) and free, in order, each
//! with the name of the caller where the kernel prints its address (`%pS`).
//!
//! # Fidelity
//!
//! | piece | fidelity |
//! |---|---|
//! | region arrays: insertion, merging (same nid and flags), isolation, removal, `total_size`, the size cap | faithful |
//! | allocation: free-range walk in both directions, clamping, alignment, the first page skipped, `current_limit`, the lower limit dropped on failure (`memblock_alloc_internal()`), `MEMBLOCK_RSRV_KERN` on what it reserves | faithful |
//! | flags: `NOMAP`, `HOTPLUG`, `RSRV_KERN` set, cleared, merged; `NOMAP` and `DRIVER_MANAGED` memory skipped by allocations and by the free-range walk | faithful |
//! | NUMA | faithful (`CONFIG_NUMA`, `MAX_NUMNODES` 16): regions carry a node id, which `memblock_add_node()` / `memblock_set_node()` set (neighbours of different nodes do not merge); an allocation may ask for a node ([`Memblock::alloc_try_nid`], [`Memblock::alloc_exact_nid_raw`], [`Memblock::alloc_node`], [`Memblock::alloc_range_nid`]): the free-range walk then keeps to that node's memory, the reservation carries its id, and unless the node is exact a failed search is made again on any node, whose reservation has none (`memblock_reserve_kern()`). mmlab's own boot allocations ask for no node |
//! | array size | simplified: the arrays are `Vec`s that grow, so `memblock_double_array()` (and the reservation it makes for the bigger array) never happens; [`INIT_MEMBLOCK_REGIONS`] is informational |
//! | `movable_node`, mirrored memory, kexec handover scratch | absent: the flags exist, but `choose_memblock_flags()` is always `MEMBLOCK_NONE` and hotplug memory is never skipped |
//! | memory contents | absent: memblock here is bookkeeping; `memblock_alloc()` zeroes memory, which is the caller's business in mmlab (the machine zeroes its table pages) |
//! | `memblock=debug` lines ([`DebugLine`]) | instrumented: the kernel's lines, the caller named instead of its address; the request lines the allocation functions print before their `__memblock_reserve` line are not kept |
//! | return values | adapted: where the kernel returns 0 or NULL for a failed allocation, a [`MemblockError`] says what was asked (and an alignment that is not a power of two, or a node id that is neither a node nor `NUMA_NO_NODE`, is refused where the kernel computes on); the kernel's only other failure, `-ENOMEM` from doubling an array, cannot happen, so add, reserve, remove and free return nothing (free: the bytes it released) |

use crate::addr::{PAGE_SIZE, Pfn, PhysAddr};
use crate::mm::MAX_PAGE_ORDER;

mod alloc;
#[cfg(test)]
mod tests;

/// `PHYS_ADDR_MAX`: the highest physical address (`~(phys_addr_t)0`).
pub const PHYS_ADDR_MAX: u64 = u64::MAX;
/// `MEMBLOCK_ALLOC_ANYWHERE`: an allocation limit that is no limit.
pub const MEMBLOCK_ALLOC_ANYWHERE: u64 = u64::MAX;
/// `MEMBLOCK_ALLOC_ACCESSIBLE`: as an upper limit, `current_limit`.
pub const MEMBLOCK_ALLOC_ACCESSIBLE: u64 = 0;
/// `MEMBLOCK_ALLOC_NOLEAKTRACE`: `MEMBLOCK_ALLOC_ACCESSIBLE` without
/// kmemleak tracking (mmlab has no kmemleak).
pub const MEMBLOCK_ALLOC_NOLEAKTRACE: u64 = 1;
/// `MEMBLOCK_LOW_LIMIT`: no lower limit.
pub const MEMBLOCK_LOW_LIMIT: u64 = 0;
/// `NUMA_NO_NODE`.
pub const NUMA_NO_NODE: i32 = -1;
/// `MAX_NUMNODES` with arm64's default `CONFIG_NODES_SHIFT=4`; also the
/// node id `memblock_add()` gives a region ("no node yet").
pub const MAX_NUMNODES: i32 = 1 << 4;
/// `SMP_CACHE_BYTES` on arm64 (`L1_CACHE_BYTES`, 64): the alignment an
/// allocation asked with alignment 0 gets.
pub const SMP_CACHE_BYTES: u64 = 64;
/// `INIT_MEMBLOCK_REGIONS`: the size of the kernel's static arrays. mmlab's
/// arrays grow without doubling (module docs), so nothing depends on it.
pub const INIT_MEMBLOCK_REGIONS: usize = 128;

/// Mirrors include/linux/numa.h `numa_valid_node()`.
pub const fn numa_valid_node(nid: i32) -> bool {
    nid >= 0 && nid < MAX_NUMNODES
}

bitflags::bitflags! {
    /// Mirrors include/linux/memblock.h `enum memblock_flags`; the empty
    /// set is `MEMBLOCK_NONE`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MemblockFlags: u32 {
        /// `MEMBLOCK_HOTPLUG`: hot(un)pluggable RAM.
        const HOTPLUG = 0x1;
        /// `MEMBLOCK_MIRROR`: mirrored memory.
        const MIRROR = 0x2;
        /// `MEMBLOCK_NOMAP`: not in the linear map, reserved in the memmap.
        const NOMAP = 0x4;
        /// `MEMBLOCK_DRIVER_MANAGED`: added by a driver, not firmware.
        const DRIVER_MANAGED = 0x8;
        /// `MEMBLOCK_RSRV_NOINIT`: a reservation whose struct pages are
        /// left to their owner.
        const RSRV_NOINIT = 0x10;
        /// `MEMBLOCK_RSRV_KERN`: reserved for the kernel (every allocation,
        /// `memblock_reserve_kern()`).
        const RSRV_KERN = 0x20;
        /// `MEMBLOCK_KHO_SCRATCH`: kexec handover scratch memory.
        const KHO_SCRATCH = 0x40;
    }
}

/// Mirrors `struct memblock_region`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub base: PhysAddr,
    /// Length in bytes (never past [`PHYS_ADDR_MAX`]).
    pub size: u64,
    /// Attributes.
    pub flags: MemblockFlags,
    /// Node id (`memblock_get_region_node()`): [`MAX_NUMNODES`] for memory
    /// not yet given a node, [`NUMA_NO_NODE`] for reservations.
    pub nid: i32,
}

impl Region {
    /// One past the last byte (`base + size`, which the size cap keeps
    /// from overflowing).
    pub fn end(&self) -> u64 {
        self.base.0 + self.size
    }
    /// `memblock_is_nomap()`.
    pub fn is_nomap(&self) -> bool {
        self.flags.contains(MemblockFlags::NOMAP)
    }
    /// `memblock_is_hotpluggable()`.
    pub fn is_hotpluggable(&self) -> bool {
        self.flags.contains(MemblockFlags::HOTPLUG)
    }
}

/// Which of memblock's arrays a call acts on (`&memblock.memory`,
/// `&memblock.reserved`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemblockType {
    /// `memblock.memory`.
    Memory,
    /// `memblock.reserved`.
    Reserved,
}

impl MemblockType {
    /// `memblock_type.name`.
    pub const fn name(self) -> &'static str {
        match self {
            MemblockType::Memory => "memory",
            MemblockType::Reserved => "reserved",
        }
    }
}

/// One line of `memblock=debug` output (mm/memblock.c `memblock_dbg()`):
/// the function that prints it, the range it was given, and who called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebugLine {
    /// The printing function: `memblock_add`, `memblock_add_node`,
    /// `memblock_remove`, `__memblock_reserve` (reservations and
    /// allocations) or `memblock_phys_free`.
    pub func: &'static str,
    /// The base as given.
    pub base: PhysAddr,
    /// The size as given (before the cap).
    pub size: u64,
    /// The node id (`memblock_add_node` and `__memblock_reserve` print it).
    pub nid: i32,
    /// The flags (`memblock_add_node` and `__memblock_reserve` print them;
    /// `RSRV_KERN` marks an allocation).
    pub flags: MemblockFlags,
    /// The caller, where the kernel prints its address (`%pS`): the owner
    /// of a reservation or allocation ("memmap", "pgtable", "kernel",
    /// "fixmap", ...); empty for adds, removals and frees, whose callers
    /// mmlab does not name.
    pub name: &'static str,
}

impl DebugLine {
    /// True for a reservation or an allocation's reservation.
    pub fn is_reservation(&self) -> bool {
        self.func == "__memblock_reserve"
    }
}

impl std::fmt::Display for DebugLine {
    /// The kernel's layout: `func: [first-last][ nid=N flags=F][ caller]`,
    /// `%pa` being 0x and 16 hex digits (`last` is `base + size - 1`, as
    /// the kernel computes it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let last = self.base.0.wrapping_add(self.size).wrapping_sub(1);
        write!(f, "{}: [{:#018x}-{:#018x}]", self.func, self.base.0, last)?;
        if matches!(self.func, "memblock_add_node" | "__memblock_reserve") {
            write!(f, " nid={} flags={:x}", self.nid, self.flags.bits())?;
        }
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        Ok(())
    }
}

/// memblock failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemblockError {
    /// No free range of `size` bytes aligned to `align` inside the limits
    /// asked for (the kernel returns 0 or NULL).
    NoSpace {
        /// Bytes asked for.
        size: u64,
        /// Alignment asked for.
        align: u64,
        /// The would-be owner.
        name: &'static str,
    },
    /// An alignment that is not a power of two (the kernel's
    /// `round_up()`/`round_down()` would compute garbage).
    BadAlign {
        /// The alignment given.
        align: u64,
        /// The caller (an allocation's owner, or the memblock function).
        name: &'static str,
    },
    /// An allocation asked for a node id that is neither a node
    /// (`numa_valid_node()`) nor [`NUMA_NO_NODE`] (the kernel takes it for
    /// any node and records it on the reservation).
    BadNode {
        /// The node id given.
        nid: i32,
        /// The would-be owner.
        name: &'static str,
    },
}

impl std::fmt::Display for MemblockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemblockError::NoSpace { size, align, name } => {
                write!(f, "memblock: cannot allocate {size:#x} bytes aligned to {align:#x} for {name}")
            }
            MemblockError::BadAlign { align, name } => {
                write!(f, "memblock: alignment {align:#x} for {name} is not a power of two")
            }
            MemblockError::BadNode { nid, name } => {
                write!(f, "memblock: node {nid} asked for {name} is not a node id nor NUMA_NO_NODE")
            }
        }
    }
}
impl std::error::Error for MemblockError {}

/// Mirrors mm/memblock.c `memblock_cap_size()`: `size`, shortened so that
/// `base + size` does not pass [`PHYS_ADDR_MAX`].
pub const fn memblock_cap_size(base: u64, size: u64) -> u64 {
    let room = PHYS_ADDR_MAX - base;
    if size < room { size } else { room }
}

/// Mirrors mm/memblock.c `memblock_addrs_overlap()`.
pub const fn memblock_addrs_overlap(base1: u64, size1: u64, base2: u64, size2: u64) -> bool {
    base1 < base2.saturating_add(size2) && base2 < base1.saturating_add(size1)
}

/// One array of regions with its running total (`struct memblock_type`
/// without `cnt` and `max`: the `Vec` has both).
#[derive(Clone, Debug, Default)]
struct RegionArray {
    regions: Vec<Region>,
    total_size: u64,
}

impl RegionArray {
    /// The index of the first region that ends above `base` (the regions
    /// before it are the ones the kernel's loops skip with `rend <= base`).
    fn first_ending_above(&self, base: u64) -> usize {
        self.regions.partition_point(|r| r.end() <= base)
    }

    /// Mirrors `memblock_insert_region()`.
    fn insert_region(&mut self, idx: usize, base: u64, size: u64, nid: i32, flags: MemblockFlags) {
        self.regions.insert(idx, Region { base: PhysAddr(base), size, flags, nid });
        self.total_size += size;
    }

    /// Mirrors `memblock_remove_region()` (an empty array is an empty `Vec`
    /// where the kernel keeps one zeroed dummy region).
    fn remove_region(&mut self, r: usize) {
        let gone = self.regions.remove(r);
        self.total_size -= gone.size;
        debug_assert!(!self.regions.is_empty() || self.total_size == 0);
    }

    /// Mirrors `memblock_merge_regions()`: merge the neighbours that touch
    /// and have the same node and flags, scanning regions
    /// `[start_rgn - 1, end_rgn)`.
    fn merge_regions(&mut self, start_rgn: usize, end_rgn: usize) {
        if self.regions.is_empty() {
            return;
        }
        let mut i = start_rgn.saturating_sub(1);
        let mut end_rgn = end_rgn.min(self.regions.len() - 1);
        while i < end_rgn {
            let (this, next) = (self.regions[i], self.regions[i + 1]);
            if this.end() != next.base.0 || this.nid != next.nid || this.flags != next.flags {
                debug_assert!(this.end() <= next.base.0, "overlapping memblock regions {this:?} {next:?}");
                i += 1;
                continue;
            }
            self.regions[i].size += next.size;
            self.regions.remove(i + 1);
            end_rgn -= 1;
        }
    }

    /// Mirrors `memblock_add_range()`: insert the parts of `[base, base +
    /// size)` that no region covers yet, each with `nid` and `flags`, then
    /// merge. Regions already there keep their node and flags.
    fn add_range(&mut self, base: u64, size: u64, nid: i32, flags: MemblockFlags) {
        let size = memblock_cap_size(base, size);
        if size == 0 {
            return;
        }
        let end = base + size;
        let mut base = base;
        let mut start_rgn = None;
        let mut end_rgn = 0;
        let mut idx = self.first_ending_above(base);
        while idx < self.regions.len() {
            let (rbase, rend) = (self.regions[idx].base.0, self.regions[idx].end());
            if rbase >= end {
                break;
            }
            if rbase > base {
                // The region leaves a hole below it: fill it.
                self.insert_region(idx, base, rbase - base, nid, flags);
                start_rgn.get_or_insert(idx);
                end_rgn = idx + 1;
                idx += 1;
            }
            base = rend.min(end);
            idx += 1;
        }
        if base < end {
            self.insert_region(idx, base, end - base, nid, flags);
            start_rgn.get_or_insert(idx);
            end_rgn = idx + 1;
        }
        if let Some(start_rgn) = start_rgn {
            self.merge_regions(start_rgn, end_rgn);
        }
    }

    /// Mirrors `memblock_isolate_range()`: split the regions that cross
    /// either end of `[base, base + size)`; returns the index range of the
    /// regions inside it (empty when none is).
    fn isolate_range(&mut self, base: u64, size: u64) -> (usize, usize) {
        let (mut start_rgn, mut end_rgn) = (0, 0);
        let size = memblock_cap_size(base, size);
        if size == 0 {
            return (0, 0);
        }
        let end = base + size;
        let mut idx = self.first_ending_above(base);
        while idx < self.regions.len() {
            let r = self.regions[idx];
            let (rbase, rend) = (r.base.0, r.end());
            if rbase >= end {
                break;
            }
            if rbase < base {
                // Crosses the lower end: split off the part below, then
                // look at the upper part (now at idx + 1).
                self.regions[idx].base = PhysAddr(base);
                self.regions[idx].size -= base - rbase;
                self.total_size -= base - rbase;
                self.insert_region(idx, rbase, base - rbase, r.nid, r.flags);
                idx += 1;
            } else if rend > end {
                // Crosses the upper end: split off the part below `end`
                // and look at it again (it is now at idx).
                self.regions[idx].base = PhysAddr(end);
                self.regions[idx].size -= end - rbase;
                self.total_size -= end - rbase;
                self.insert_region(idx, rbase, end - rbase, r.nid, r.flags);
            } else {
                if end_rgn == 0 {
                    start_rgn = idx;
                }
                end_rgn = idx + 1;
                idx += 1;
            }
        }
        (start_rgn, end_rgn)
    }

    /// Mirrors `memblock_remove_range()`; returns the bytes removed.
    fn remove_range(&mut self, base: u64, size: u64) -> u64 {
        let (start_rgn, end_rgn) = self.isolate_range(base, size);
        let removed = self.regions[start_rgn..end_rgn].iter().map(|r| r.size).sum();
        for i in (start_rgn..end_rgn).rev() {
            self.remove_region(i);
        }
        removed
    }

    /// Mirrors `memblock_setclr_flag()`.
    fn setclr_flag(&mut self, base: u64, size: u64, set: bool, flag: MemblockFlags) {
        let (start_rgn, end_rgn) = self.isolate_range(base, size);
        for r in &mut self.regions[start_rgn..end_rgn] {
            r.flags.set(flag, set);
        }
        self.merge_regions(start_rgn, end_rgn);
    }

    /// Mirrors `memblock_overlaps_region()`.
    fn overlaps(&self, base: u64, size: u64) -> bool {
        let size = memblock_cap_size(base, size);
        self.regions.iter().any(|r| memblock_addrs_overlap(base, size, r.base.0, r.size))
    }

    /// Mirrors `memblock_search()`: the region holding `addr`.
    fn search(&self, addr: u64) -> Option<usize> {
        let i = self.first_ending_above(addr);
        (i < self.regions.len() && self.regions[i].base.0 <= addr).then_some(i)
    }
}

/// The boot allocator's state (mirrors `struct memblock`), with the
/// `memblock=debug` log beside it.
#[derive(Clone, Debug)]
pub struct Memblock {
    memory: RegionArray,
    reserved: RegionArray,
    bottom_up: bool,
    current_limit: u64,
    log: Vec<DebugLine>,
}

impl Default for Memblock {
    /// Mirrors the static initialiser of `memblock`: empty arrays,
    /// top-down, no limit.
    fn default() -> Self {
        Memblock {
            memory: RegionArray::default(),
            reserved: RegionArray::default(),
            bottom_up: false,
            current_limit: MEMBLOCK_ALLOC_ANYWHERE,
            log: Vec::new(),
        }
    }
}

impl Memblock {
    fn array(&self, t: MemblockType) -> &RegionArray {
        match t {
            MemblockType::Memory => &self.memory,
            MemblockType::Reserved => &self.reserved,
        }
    }

    fn array_mut(&mut self, t: MemblockType) -> &mut RegionArray {
        match t {
            MemblockType::Memory => &mut self.memory,
            MemblockType::Reserved => &mut self.reserved,
        }
    }

    fn dbg(&mut self, func: &'static str, base: u64, size: u64, nid: i32, flags: MemblockFlags, name: &'static str) {
        self.log.push(DebugLine { func, base: PhysAddr(base), size, nid, flags, name });
    }

    /// Mirrors `memblock_add()`: register RAM `[base, base + size)`, merged
    /// with what it overlaps or touches (no node yet: [`MAX_NUMNODES`]).
    pub fn add(&mut self, base: PhysAddr, size: u64) {
        self.dbg("memblock_add", base.0, size, MAX_NUMNODES, MemblockFlags::empty(), "");
        self.memory.add_range(base.0, size, MAX_NUMNODES, MemblockFlags::empty());
    }

    /// Mirrors `memblock_add_node()`: register RAM on node `nid` with
    /// `flags`.
    pub fn add_node(&mut self, base: PhysAddr, size: u64, nid: i32, flags: MemblockFlags) {
        self.dbg("memblock_add_node", base.0, size, nid, flags, "");
        self.memory.add_range(base.0, size, nid, flags);
    }

    /// Mirrors `memblock_remove()`: take `[base, base + size)` out of RAM,
    /// splitting the regions it cuts.
    pub fn remove(&mut self, base: PhysAddr, size: u64) {
        self.dbg("memblock_remove", base.0, size, NUMA_NO_NODE, MemblockFlags::empty(), "");
        self.memory.remove_range(base.0, size);
    }

    /// Mirrors `memblock_reserve()` (`__memblock_reserve(base, size,
    /// NUMA_NO_NODE, 0)`): mark `[base, base + size)` reserved for `name`.
    /// Anything goes, as in the kernel: the range may overlap or repeat a
    /// reservation, bridge two, or lie outside RAM; it is merged with the
    /// reservations it overlaps or touches that have no flags.
    pub fn reserve(&mut self, base: PhysAddr, size: u64, name: &'static str) {
        self.reserve_nid(base, size, NUMA_NO_NODE, MemblockFlags::empty(), name);
    }

    /// Mirrors `memblock_reserve_kern()`: [`Memblock::reserve`] with
    /// `MEMBLOCK_RSRV_KERN`, the flag allocations carry (so the two merge).
    pub fn reserve_kern(&mut self, base: PhysAddr, size: u64, name: &'static str) {
        self.reserve_nid(base, size, NUMA_NO_NODE, MemblockFlags::RSRV_KERN, name);
    }

    /// Mirrors `__memblock_reserve()`: a reservation on node `nid` with
    /// `flags`.
    pub fn reserve_nid(&mut self, base: PhysAddr, size: u64, nid: i32, flags: MemblockFlags, name: &'static str) {
        self.dbg("__memblock_reserve", base.0, size, nid, flags, name);
        self.reserved.add_range(base.0, size, nid, flags);
    }

    /// Mirrors `memblock_phys_free()` / `memblock_free()` before the page
    /// allocator runs: take `[base, base + size)` out of the reserved
    /// regions, splitting those it cuts (`memblock_remove_range()` on
    /// `memblock.reserved`). Freeing what is not reserved changes nothing.
    /// Returns the bytes that were reserved (mmlab's; the kernel returns
    /// 0). Giving the pages to the page allocator (`__free_reserved_area()`)
    /// is the caller's part.
    pub fn free(&mut self, base: PhysAddr, size: u64) -> u64 {
        self.dbg("memblock_phys_free", base.0, size, NUMA_NO_NODE, MemblockFlags::empty(), "");
        self.reserved.remove_range(base.0, size)
    }

    /// Mirrors `memblock_mark_nomap()`: RAM `[base, base + size)` stays out
    /// of the linear map and of allocations and the free-range walk.
    pub fn mark_nomap(&mut self, base: PhysAddr, size: u64) {
        self.memory.setclr_flag(base.0, size, true, MemblockFlags::NOMAP);
    }

    /// Mirrors `memblock_clear_nomap()`.
    pub fn clear_nomap(&mut self, base: PhysAddr, size: u64) {
        self.memory.setclr_flag(base.0, size, false, MemblockFlags::NOMAP);
    }

    /// Mirrors `memblock_mark_hotplug()` (recorded; without `movable_node`
    /// it changes no allocation).
    pub fn mark_hotplug(&mut self, base: PhysAddr, size: u64) {
        self.memory.setclr_flag(base.0, size, true, MemblockFlags::HOTPLUG);
    }

    /// Mirrors `memblock_clear_hotplug()`.
    pub fn clear_hotplug(&mut self, base: PhysAddr, size: u64) {
        self.memory.setclr_flag(base.0, size, false, MemblockFlags::HOTPLUG);
    }

    /// Mirrors `memblock_set_node()`: the regions of `t` in `[base, base +
    /// size)` (split at its ends) go to node `nid`, then merge.
    pub fn set_node(&mut self, base: PhysAddr, size: u64, t: MemblockType, nid: i32) {
        let a = self.array_mut(t);
        let (start_rgn, end_rgn) = a.isolate_range(base.0, size);
        for r in &mut a.regions[start_rgn..end_rgn] {
            r.nid = nid;
        }
        a.merge_regions(start_rgn, end_rgn);
    }

    /// Mirrors `memblock_trim_memory()`: shrink every RAM region to its
    /// `align`-aligned part, dropping the regions that have none. Unlike
    /// the kernel, which subtracts only the regions it drops,
    /// `total_size` also loses what a shrunk region loses (it stays the sum
    /// of the regions, as [`Memblock::phys_mem_size`] reads it).
    ///
    /// # Errors
    ///
    /// [`MemblockError::BadAlign`] if `align` is not a power of two.
    pub fn trim_memory(&mut self, align: u64) -> Result<(), MemblockError> {
        if !align.is_power_of_two() {
            return Err(MemblockError::BadAlign { align, name: "memblock_trim_memory" });
        }
        let mut i = 0;
        while i < self.memory.regions.len() {
            let r = self.memory.regions[i];
            // A region within `align` of the top of the address space has
            // no aligned start (the kernel's round_up() would wrap to 0).
            let start = r.base.0.checked_next_multiple_of(align);
            let end = r.end() & !(align - 1);
            match start {
                Some(start) if start == r.base.0 && end == r.end() => i += 1,
                Some(start) if start < end => {
                    self.memory.total_size -= r.size - (end - start);
                    self.memory.regions[i].base = PhysAddr(start);
                    self.memory.regions[i].size = end - start;
                    i += 1;
                }
                _ => self.memory.remove_region(i),
            }
        }
        Ok(())
    }

    /// RAM regions, sorted by address (`memblock.memory.regions`).
    pub fn memory(&self) -> &[Region] {
        &self.memory.regions
    }

    /// Reserved regions, sorted by address (`memblock.reserved.regions`).
    /// They say what is taken, not by whom: see [`Memblock::reservations`].
    pub fn reserved(&self) -> &[Region] {
        &self.reserved.regions
    }

    /// The regions of `t`.
    pub fn regions(&self, t: MemblockType) -> &[Region] {
        &self.array(t).regions
    }

    /// The `memblock=debug` log: every add, removal, reservation
    /// (allocations included) and free, in order.
    pub fn debug_log(&self) -> &[DebugLine] {
        &self.log
    }

    /// The reservations and allocations in the order they were made, each
    /// with its owner's name, base and size as asked (`__memblock_reserve`
    /// lines of [`Memblock::debug_log`]); later frees do not shorten them.
    pub fn reservations(&self) -> impl Iterator<Item = &DebugLine> {
        self.log.iter().filter(|l| l.is_reservation())
    }

    /// Mirrors `memblock_phys_mem_size()`: `memblock.memory.total_size`.
    pub fn phys_mem_size(&self) -> u64 {
        self.memory.total_size
    }

    /// Mirrors `memblock_reserved_size()`: `memblock.reserved.total_size`.
    pub fn reserved_size(&self) -> u64 {
        self.reserved.total_size
    }

    /// Mirrors `memblock_start_of_DRAM()` (0 without memory, the base of the
    /// kernel's dummy region).
    pub fn start_of_dram(&self) -> PhysAddr {
        self.memory.regions.first().map_or(PhysAddr(0), |r| r.base)
    }

    /// Mirrors `memblock_end_of_DRAM()` (0 without memory).
    pub fn end_of_dram(&self) -> PhysAddr {
        PhysAddr(self.memory.regions.last().map_or(0, |r| r.end()))
    }

    /// Mirrors `memblock_overlaps_region()`: does `[base, base + size)`
    /// meet a region of `t`?
    pub fn overlaps_region(&self, t: MemblockType, base: PhysAddr, size: u64) -> bool {
        self.array(t).overlaps(base.0, size)
    }

    /// Mirrors `memblock_is_memory()`.
    pub fn is_memory(&self, addr: PhysAddr) -> bool {
        self.memory.search(addr.0).is_some()
    }

    /// Mirrors `memblock_is_map_memory()`: RAM and not `NOMAP`.
    pub fn is_map_memory(&self, addr: PhysAddr) -> bool {
        self.memory.search(addr.0).is_some_and(|i| !self.memory.regions[i].is_nomap())
    }

    /// Mirrors `memblock_is_region_memory()`: is `[base, base + size)`
    /// inside one RAM region?
    pub fn is_region_memory(&self, base: PhysAddr, size: u64) -> bool {
        let end = base.0 + memblock_cap_size(base.0, size);
        self.memory.search(base.0).is_some_and(|i| self.memory.regions[i].end() >= end)
    }

    /// Mirrors `memblock_is_reserved()`.
    pub fn is_reserved(&self, addr: PhysAddr) -> bool {
        self.reserved.search(addr.0).is_some()
    }

    /// Mirrors `memblock_is_region_reserved()`: does `[base, base + size)`
    /// meet a reservation?
    pub fn is_region_reserved(&self, base: PhysAddr, size: u64) -> bool {
        self.reserved.overlaps(base.0, size)
    }

    /// Mirrors `memblock_set_bottom_up()`: the direction of allocations.
    pub fn set_bottom_up(&mut self, enable: bool) {
        self.bottom_up = enable;
    }

    /// Mirrors `memblock_bottom_up()`.
    pub fn bottom_up(&self) -> bool {
        self.bottom_up
    }

    /// Mirrors `memblock_set_current_limit()`: the upper limit of
    /// allocations asked with [`MEMBLOCK_ALLOC_ACCESSIBLE`].
    pub fn set_current_limit(&mut self, limit: u64) {
        self.current_limit = limit;
    }

    /// Mirrors `memblock_get_current_limit()`.
    pub fn current_limit(&self) -> u64 {
        self.current_limit
    }

    /// Pages covered by reservations (each page counted once).
    pub fn reserved_pages(&self) -> u64 {
        let mut pages = 0;
        let mut last_end = 0;
        for r in &self.reserved.regions {
            let s = (r.base.0 / PAGE_SIZE).max(last_end);
            let e = r.end().div_ceil(PAGE_SIZE);
            if e > s {
                pages += e - s;
                last_end = e;
            }
        }
        pages
    }
}

/// Mirrors mm/memblock.c `__free_pages_memory()`: cover `[start, end)` (PFNs)
/// with the largest aligned power-of-two blocks.
pub fn free_pages_memory(mut start: u64, end: u64, f: &mut impl FnMut(Pfn, u32)) {
    while start < end {
        let mut order = if start == 0 { MAX_PAGE_ORDER } else { start.trailing_zeros().min(MAX_PAGE_ORDER) };
        while start + (1 << order) > end {
            order -= 1;
        }
        f(Pfn(start), order);
        start += 1 << order;
    }
}
