//! Running operations against a booted machine, with the oracle and the
//! invariant checks.
//!
//! # The algorithm
//!
//! [`Executor`] owns the handle table: for each bound handle the objects
//! it names (page units with their pfn, order and the references the
//! fuzzer holds; vmalloc, vmap and vm_map_ram addresses; percpu pointers)
//! and whether they are live. [`Executor::step`] resolves an op's handle
//! references, derives the acceptable outcomes from that model
//! ([`super::oracle`]), takes a snapshot when only errors are acceptable,
//! runs the call (a panic inside the library is caught and is a
//! violation), compares, and updates the model from what really happened.
//!
//! A call is skipped, not run, when a handle it names was never bound (its
//! allocation failed, or the shrinker removed it), or when it would touch
//! memory the fuzzer does not own: a double free of a page or area that
//! has since been handed to someone else would corrupt their object in
//! the kernel as well, and says nothing about the allocator.
//!
//! [`Executor::check`] runs what CONFIG_DEBUG_VM, page_owner and the page
//! table checks would: `check_invariants`, `Vmalloc::check`, every held
//! page still allocated at its order with the references the fuzzer
//! holds, and page conservation. Conservation counts allocated frames by
//! walking the memmap (heads in the allocated state, 2^order each) and
//! requires free (buddy) + pcp + allocated = managed, and allocated =
//! pages the fuzzer holds + pages of vmalloc areas (percpu chunks and
//! page arrays included) + page-table pages (tables reachable from
//! swapper_pg_dir that the page allocator handed out, linear-map split
//! tables included; boot tables are memblock-reserved), and the linear
//! map against the executor's model of it (`pageattr`: each RAM page
//! mapped once at its `page_address()` with the permissions the
//! set_memory_* calls gave it). [`Executor::finish`] gives changed
//! permissions back, frees everything the fuzzer
//! holds, waits for kvfree_rcu, purges, drains every pcp, and requires
//! the buddy to hold managed minus the page-table pages that stayed, and,
//! if no table page was ever allocated, the post-boot buddyinfo.
//!
//! The executor is split along that seam: this file holds the handle
//! table and [`Executor::step`]; `expect` the oracle's tables (the
//! outcomes acceptable for an op, from the model alone); `call` the
//! executor's side (making the call and updating the model from what
//! happened); `check` the invariant checks and the end of a run;
//! `hugetlb`, `vrealloc` and `pageattr` the newer layers' calls, each with
//! its oracle and model; `index` the lookups over the handle table (live
//! units by pfn, live objects by address), kept as the steps go.

use super::op::{Call, Handle, HandleKind, Op, Ref};
use super::oracle::{Outcome, Snapshot, Violation, ViolationKind};
use index::{AddrIndex, AddrKey, HandleBuild, PfnIndex};
use mmlab_engine::{Cpu, Machine, PAGE_SIZE, Pfn};
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::Vmalloc;
use mmlab_vmalloc::percpu::PercpuAllocator;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

mod call;
mod check;
mod expect;
mod hugetlb;
mod hvo;
mod index;
mod pageattr;
mod raw;
mod vrealloc;

/// One block of pages the fuzzer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unit {
    pfn: Pfn,
    order: u32,
    /// References the fuzzer holds (1 after allocation, +1 per get_page).
    refs: i32,
    live: bool,
}

#[derive(Clone, Debug)]
enum Obj {
    Pages(Vec<Unit>),
    Vmalloc {
        addr: u64,
        size: u64,
        live: bool,
        kvfree_pending: bool,
    },
    Vmap {
        addr: u64,
        live: bool,
    },
    MapRam {
        addr: u64,
        count: u64,
        live: bool,
    },
    Percpu {
        ptr: u64,
        live: bool,
    },
    /// A map_range mapping of `pages` pages at `va` to `pa`.
    Table {
        va: u64,
        pa: u64,
        pages: u64,
        live: bool,
    },
    /// A hugetlb folio handed out by alloc_hugetlb_folio.
    HugeFolio {
        folio: mmlab_vmemmap::Folio,
        size: mmlab_hugetlb::HugePageSize,
        live: bool,
    },
    /// A hugetlb reservation and its pages not yet consumed.
    Resv {
        size: mmlab_hugetlb::HugePageSize,
        left: u64,
        live: bool,
    },
}

impl Obj {
    /// Where the object sits while live, as the address index keeps it
    /// (None when dead, or not an address-space object).
    fn addr_key(&self) -> Option<AddrKey> {
        match *self {
            Obj::Vmalloc { addr, live: true, .. } | Obj::Vmap { addr, live: true } => Some(AddrKey::Start(addr)),
            Obj::Percpu { ptr, live: true } => Some(AddrKey::Start(ptr)),
            Obj::MapRam { addr, count, live: true } => {
                Some(AddrKey::Range(addr, addr.saturating_add(count.saturating_mul(PAGE_SIZE))))
            }
            Obj::Table { va, live: true, .. } => Some(AddrKey::Slot(va & !(SCRATCH_SLOT - 1))),
            _ => None,
        }
    }
}

/// Scratch slots for map_range: 4 MiB each in the modules region (which
/// nothing else maps), slot = handle number mod 512.
const SCRATCH_SLOT: u64 = 4 << 20;

/// A translation for messages: the physical address, or `nothing`.
fn show_pa(pa: Option<u64>) -> String {
    pa.map_or_else(|| "nothing".to_string(), |p| format!("pa {p:#x}"))
}

/// The scratch slot of a map_range handle for lane `lane` of `lanes`
/// (threads share the region: each gets every `lanes`-th slot).
fn scratch_slot(h: Handle, lane: u64, lanes: u64) -> u64 {
    let per_lane = mmlab_engine::arch::arm64::memory::MODULES_VSIZE / SCRATCH_SLOT / lanes.max(1);
    mmlab_engine::arch::arm64::memory::MODULES_VADDR
        + ((u64::from(h.id) % per_lane) * lanes.max(1) + lane) * SCRATCH_SLOT
}

/// Where in its slot a block of `pages` pages is mapped: blocks of 2 MiB
/// or more at the slot's start (PMD blocks); smaller ones end just past the
/// slot's middle, 64 KiB aligned, so that those over 64 KiB span two PTE
/// tables (a table allocation can then fail half-way).
fn scratch_va(base: u64, pages: u64) -> u64 {
    let size = pages * PAGE_SIZE;
    if size >= 2 << 20 {
        base
    } else {
        let half = (size / 2) & !0xffff;
        base + (2 << 20) - half.max(64 << 10)
    }
}

/// A test-only extra check: called with the executor after every op;
/// Some(message) is a [`ViolationKind::Hook`] violation.
pub type Hook = Box<dyn Fn(&HookView) -> Option<String> + Send>;

/// What a hook may look at.
#[derive(Debug)]
pub struct HookView {
    /// Bound handles that are live, per kind letter order (p, v, m, r, c).
    pub live_handles: usize,
    /// Pages the fuzzer holds.
    pub held_pages: u64,
}

/// Counts per op kind and per outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    pub ops: BTreeMap<String, u64>,
    pub outcomes: BTreeMap<String, u64>,
}

impl Coverage {
    pub fn add(&mut self, other: &Coverage) {
        for (k, v) in &other.ops {
            *self.ops.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.outcomes {
            *self.outcomes.entry(k.clone()).or_default() += v;
        }
    }
    /// One line: `alloc_pages=12 free_pages=10 ... | Ok=20 DoubleFree=1`.
    pub fn line(&self) -> String {
        let a: Vec<String> = self.ops.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let b: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{} | {}", a.join(" "), b.join(" "))
    }
}

/// Counts per name, for the few dozen call and outcome names. A name is
/// a `'static` literal, and the same literal may live at several
/// addresses (one per codegen unit that inlined it): a small table keyed
/// by the address maps each address seen to the name's entry, so a count
/// is one multiply and one compare; a name is compared by text only the
/// first time an address of it comes up (or when two addresses share a
/// slot of the table).
#[derive(Clone, Debug, Default)]
pub struct Tally {
    names: Vec<(&'static str, u64)>,
    /// Slot -> (address, index in `names`).
    by_addr: Vec<(usize, u32)>,
}

/// Slots of [`Tally`]'s address table (a power of two).
const TALLY_SLOTS: usize = 256;

impl Tally {
    /// Count one `name`.
    pub fn bump(&mut self, name: &'static str) {
        let addr = name.as_ptr() as usize;
        let slot =
            (addr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) as usize >> (usize::BITS - TALLY_SLOTS.trailing_zeros());
        if let Some(&(a, i)) = self.by_addr.get(slot)
            && a == addr
            && self.names[i as usize].0.len() == name.len()
        {
            self.names[i as usize].1 += 1;
            return;
        }
        let i = match self.names.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.names.push((name, 0));
                self.names.len() - 1
            }
        };
        self.names[i].1 += 1;
        if self.by_addr.is_empty() {
            self.by_addr = vec![(0, 0); TALLY_SLOTS];
        }
        self.by_addr[slot] = (addr, i as u32);
    }
    /// Names counted.
    pub fn len(&self) -> usize {
        self.names.len()
    }
    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
    fn to_map(&self) -> BTreeMap<String, u64> {
        self.names.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }
}

/// The result of one op.
#[derive(Clone, Debug)]
pub struct StepResult {
    pub outcome: Outcome,
    /// Details for `mmlab replay` (the address or pfn, the error text).
    pub detail: String,
    pub violation: Option<Violation>,
    /// How many units the handle the op binds holds after it (1 for a
    /// handle that is not pages; `alloc_pages_bulk` may fill fewer pages
    /// than asked); None when the op binds nothing or the call failed.
    /// The generator's model follows it ([`Generator::observe`]).
    ///
    /// [`Generator::observe`]: crate::fuzz::generate::Generator::observe
    pub bound: Option<usize>,
    /// The allocation failures fail_page_alloc injected during the op, as
    /// the op's `fail_nth=` would make them again (empty: none, or fault
    /// injection off, or other threads on the machine).
    pub fail_nth: Vec<u32>,
}

/// Options of an executor.
#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    /// fail_page_alloc is armed (allocation failures are then expected).
    pub fault_injection: bool,
    /// Compare snapshots around refused calls and flag spurious NoMemory
    /// (off when other threads share the machine).
    pub exclusive: bool,
    /// This executor's lane of the map_range scratch region, and the
    /// number of lanes (threads); 0 and 1 for a single executor.
    pub lane: u64,
    pub lanes: u64,
    /// Describe each successful call in [`StepResult::detail`] (the pfn or
    /// address it returned: `mmlab replay` prints them); off, a success
    /// formats nothing. Errors are always described.
    pub details: bool,
}

/// The executor's model of the linear map (`pageattr.rs`, which holds its code; declared here so that this
/// module names nothing of its child).
#[derive(Debug)]
struct LinearModel {
    start: u64,
    /// Per pfn: the boot leaf's attributes (`ATTRS`), 0 if not mapped.
    boot: Vec<u64>,
    /// Per pfn: log2 of the pages of the boot leaf or run covering it,
    /// `CONT` if a contiguous run.
    span: Vec<u8>,
    /// Per pfn: the permissions now.
    perm: Vec<u8>,
    /// Per pfn index: the end of the run of boot-mapped plain pages (one
    /// page each, not contiguous) it starts, itself if it is none (the
    /// oracle passes such a run in one step).
    plain_end: Vec<u32>,
    /// Pfns whose permissions differ from the boot's.
    changed: u64,
    /// Per pfn index: its permissions differ from the boot's (a range is
    /// checked a word of 64 pfns at a time).
    differs: bitvec::vec::BitVec,
    mode: mmlab_engine::arch::arm64::pageattr::SplitMode,
    page_offset: u64,
}

/// The executor of one run.
pub struct Executor<'a, 'm> {
    m: &'m Machine,
    pa: &'a PageAllocator<'m>,
    vm: &'a Vmalloc<'a, 'm>,
    percpu: &'a PercpuAllocator,
    cpus: Vec<Cpu<'m>>,
    /// Every handle bound, live or not (a dead one stays for wrong calls
    /// until it leaves `dead`). Iteration order is the hasher's: sort
    /// where order is seen (`release_all`).
    handles: std::collections::HashMap<Handle, Obj, HandleBuild>,
    /// Head pfn of every live unit -> (handle, unit index).
    live_pfns: PfnIndex,
    /// The live objects by address (`index.rs`).
    live_addrs: AddrIndex,
    /// Dead handles, oldest first; only the last [`KEEP_DEAD`] are kept
    /// (for double frees), so the table stays small in long runs.
    dead: std::collections::VecDeque<Handle>,
    /// The handles in `dead`, for lookups.
    dead_set: std::collections::HashSet<Handle, HandleBuild>,
    /// Handles (and which of their units) changed in this step.
    touched: Vec<(Handle, Touch)>,
    /// A violation found while running the call (a wrong translation).
    late: Option<(ViolationKind, String)>,
    opts: ExecOptions,
    boot_buddyinfo: [u64; 11],
    ops_tally: Tally,
    outcomes_tally: Tally,
    hook: Option<Hook>,
    ops_run: usize,
    /// hugetlb, when the machine brings it up (not in `--threads` runs).
    hugetlb: Option<mmlab_hugetlb::Hugetlb<'a, 'm>>,
    /// The model of the linear map (None without one).
    linear: Option<LinearModel>,
    /// A CPU of another machine, for `foreign` ops (claimed at the first;
    /// raw.rs).
    foreign: Option<Cpu<'static>>,
}

impl std::fmt::Debug for Executor<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("handles", &self.handles.len()).field("ops_run", &self.ops_run).finish()
    }
}

/// Dead handles kept for wrong calls on them.
const KEEP_DEAD: usize = 256;

/// What of a handle changed in a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Touch {
    /// Its units were replaced (bound, split).
    All,
    /// One unit was freed (or lost references).
    Unit(usize),
    /// Nothing of its units; it may have died (a call named it).
    Liveness,
}

impl<'a, 'm> Executor<'a, 'm> {
    /// An executor over `cpus` (handles of the CPUs its ops may name; an
    /// op naming a CPU beyond them runs on `cpus[cpu % len]`, a `foreign`
    /// op on another machine's CPU: raw.rs).
    pub fn new(
        pa: &'a PageAllocator<'m>,
        vm: &'a Vmalloc<'a, 'm>,
        percpu: &'a PercpuAllocator,
        cpus: Vec<Cpu<'m>>,
        opts: ExecOptions,
    ) -> Executor<'a, 'm> {
        // The boot may leave pages on the pcp lists (boot.state=real); the
        // final check compares the buddy lists with everything drained.
        if let Some(cpu) = cpus.first() {
            pa.drain_all_pages(cpu);
        }
        Executor {
            m: pa.machine(),
            pa,
            vm,
            percpu,
            cpus,
            handles: std::collections::HashMap::default(),
            live_pfns: PfnIndex::new(pa.machine()),
            live_addrs: AddrIndex::default(),
            dead: std::collections::VecDeque::new(),
            dead_set: std::collections::HashSet::default(),
            touched: Vec::new(),
            late: None,
            opts,
            boot_buddyinfo: pa.zone().nr_free_per_order(),
            ops_tally: Tally::default(),
            outcomes_tally: Tally::default(),
            hook: None,
            ops_run: 0,
            hugetlb: None,
            linear: LinearModel::new(pa.machine()),
            foreign: None,
        }
    }

    /// The counts per call and per outcome so far.
    pub fn coverage(&self) -> Coverage {
        Coverage { ops: self.ops_tally.to_map(), outcomes: self.outcomes_tally.to_map() }
    }

    /// Give the executor hugetlb (its calls are skipped without it).
    pub fn set_hugetlb(&mut self, ht: mmlab_hugetlb::Hugetlb<'a, 'm>) {
        self.hugetlb = Some(ht);
    }

    /// hugetlb's and HVO's counters, when the machine has hugetlb.
    pub fn hugetlb_counts(&self) -> Option<(mmlab_hugetlb::HugetlbCounts, mmlab_vmemmap::HvoCounts)> {
        self.hugetlb.as_ref().map(|h| (h.counts(), h.hvo().counts()))
    }

    /// Install a test-only check run after every op.
    pub fn set_hook(&mut self, hook: Hook) {
        self.hook = Some(hook);
    }

    /// Set the buddyinfo the final check compares with (the post-boot one
    /// by default).
    pub fn set_boot_buddyinfo(&mut self, b: [u64; 11]) {
        self.boot_buddyinfo = b;
    }

    /// The CPU handles the executor drives.
    pub fn cpus(&self) -> &[Cpu<'m>] {
        &self.cpus
    }

    /// Take the CPU handles back (for another executor or the final drain).
    pub fn into_cpus(self) -> Vec<Cpu<'m>> {
        self.cpus
    }

    pub fn snapshot(&self) -> Snapshot {
        let z = self.pa.zone();
        let mut busy = 0;
        self.vm.for_each_area(|a| busy += a.size);
        Snapshot {
            buddyinfo: z.nr_free_per_order(),
            per_type: z.nr_free_per_type(),
            nr_free: z.nr_free_pages(),
            pcp: (0..self.m.nr_cpus()).filter_map(|c| self.pa.pageset(c)).collect(),
            events: self.m.vm_events(),
            vmalloc_busy_bytes: busy,
            vmalloc_lazy_pages: self.vm.lazy_nr(),
            vmalloc_free_bytes: self.vm.free_bytes(),
            vmalloc_counts: self.vm.counts(),
            kvfree_pending: self.vm.kvfree_pending(),
            percpu: self.percpu.counts(),
        }
    }

    fn unit_of(&self, r: &Ref) -> Option<(Handle, usize)> {
        match *r {
            Ref::Whole(h) if h.kind == HandleKind::Pages => Some((h, 0)),
            Ref::Unit(h, k) if h.kind == HandleKind::Pages => match self.handles.get(&h) {
                Some(Obj::Pages(u)) if (k as usize) < u.len() => Some((h, k as usize)),
                _ => None,
            },
            _ => None,
        }
    }

    fn units(&self, h: Handle) -> Option<&Vec<Unit>> {
        match self.handles.get(&h) {
            Some(Obj::Pages(u)) => Some(u),
            _ => None,
        }
    }

    fn units_mut(&mut self, h: Handle) -> Option<&mut Vec<Unit>> {
        match self.handles.get_mut(&h) {
            Some(Obj::Pages(u)) => Some(u),
            _ => None,
        }
    }

    /// The pfn a page reference names.
    fn pfn_of(&self, r: &Ref) -> Option<Pfn> {
        match *r {
            Ref::Raw(p) => Some(Pfn(p)),
            Ref::Offset(h, k) => self.units(h)?.first().map(|u| u.pfn.add(k)),
            _ => {
                let (h, i) = self.unit_of(r)?;
                self.units(h)?.get(i).map(|u| u.pfn)
            }
        }
    }

    /// Whether `pfn` heads one of the fuzzer's live units (then which).
    fn live_unit_at(&self, pfn: Pfn) -> Option<(Handle, usize)> {
        let (h, i) = self.live_pfns.get(pfn)?;
        self.units(h)?.get(i).filter(|u| u.live && u.pfn == pfn).map(|_| (h, i))
    }

    /// Bring the pfn index (for the units `t` names) and the dead list up
    /// to date for `h`.
    fn reindex(&mut self, h: Handle, t: Touch) {
        if let Some(Obj::Pages(units)) = self.handles.get(&h) {
            let range = match t {
                Touch::All => 0..units.len(),
                Touch::Unit(i) => i..(i + 1).min(units.len()),
                Touch::Liveness => 0..0,
            };
            for i in range {
                let u = units[i];
                if u.live {
                    self.live_pfns.insert(u.pfn, (h, i));
                } else {
                    self.live_pfns.remove_if(u.pfn, (h, i));
                }
            }
        }
        // Pages, folios and reservations have no address of their own.
        if !matches!(h.kind, HandleKind::Pages | HandleKind::HugeFolio | HandleKind::Resv) {
            self.live_addrs.set(h, self.handles.get(&h).and_then(Obj::addr_key));
        }
        if self.handles.contains_key(&h) && !self.is_live(h) && self.dead_set.insert(h) {
            self.dead.push_back(h);
            while self.dead.len() > KEEP_DEAD {
                if let Some(old) = self.dead.pop_front() {
                    self.dead_set.remove(&old);
                    if !self.is_live(old) {
                        self.handles.remove(&old);
                    }
                }
            }
        }
    }

    /// Whether `addr` starts a busy vmalloc area, or lies in a live
    /// mapping of ours, so a wrong call on it would hit a live object.
    fn addr_in_use(&self, addr: u64) -> bool {
        self.held_live(addr) || self.vm.is_busy_area(addr)
    }

    /// Whether a live handle of any kind covers `addr` (an address freed
    /// once may since have been handed out again, to a vmalloc, a vmap, a
    /// vm_map_ram block or a percpu chunk).
    fn held_live(&self, addr: u64) -> bool {
        self.live_addrs.covers(addr)
    }

    fn area_addr(&self, r: &Ref) -> Option<u64> {
        match *r {
            Ref::Raw(a) => Some(a),
            Ref::Whole(h) | Ref::Offset(h, _) => {
                let off = if let Ref::Offset(_, k) = *r { k } else { 0 };
                match self.handles.get(&h)? {
                    Obj::Vmalloc { addr, .. } | Obj::Vmap { addr, .. } | Obj::MapRam { addr, .. } => Some(addr + off),
                    Obj::Percpu { ptr, .. } => Some(ptr + off),
                    Obj::Pages(_) | Obj::Table { .. } | Obj::HugeFolio { .. } | Obj::Resv { .. } => None,
                }
            }
            Ref::Unit(..) => None,
        }
    }

    fn is_live(&self, h: Handle) -> bool {
        match self.handles.get(&h) {
            Some(Obj::Pages(u)) => u.iter().any(|u| u.live),
            Some(
                Obj::Vmalloc { live, .. }
                | Obj::Vmap { live, .. }
                | Obj::MapRam { live, .. }
                | Obj::Percpu { live, .. }
                | Obj::Table { live, .. }
                | Obj::HugeFolio { live, .. }
                | Obj::Resv { live, .. },
            ) => *live,
            None => false,
        }
    }

    /// Run one op.
    pub fn step(&mut self, index: usize, op: &Op) -> StepResult {
        self.claim_foreign(op);
        let expect::Expect { allowed, must_not_change } = self.expect(op);
        self.ops_tally.bump(op.name());
        if allowed == [Outcome::Skipped] {
            self.outcomes_tally.bump(Outcome::Skipped.name());
            return StepResult {
                outcome: Outcome::Skipped,
                detail: String::new(),
                violation: None,
                bound: None,
                fail_nth: Vec::new(),
            };
        }
        // vfree and kvfree_rcu first free kvfree_rcu objects whose grace
        // period ended: a legitimate change even when the call is refused.
        let snap_ok = self.opts.exclusive
            && must_not_change
            && !(matches!(op.call, Call::Vfree { .. } | Call::FreePercpu { .. } | Call::Vrealloc { .. })
                && self.vm.kvfree_pending() > 0);
        let before = if snap_ok { Some(self.snapshot()) } else { None };
        let free_before = self.pa.nr_free_pages();
        let record = self.opts.fault_injection && self.opts.exclusive;
        let filtered_before = if record {
            let (n, _) = self.pa.take_fail_page_alloc_log();
            self.pa.set_fail_nth(&op.fail_nth);
            n
        } else {
            0
        };
        let r = catch_unwind(AssertUnwindSafe(|| self.run(op)));
        let fail_nth = if record { self.injected_as_fail_nth(filtered_before) } else { Vec::new() };
        let (outcome, detail) = match r {
            Ok(x) => x,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".to_string());
                (Outcome::Panic, msg)
            }
        };
        self.ops_run += 1;
        let mut touched = std::mem::take(&mut self.touched);
        op.for_each_use(|h| touched.push((h, Touch::Liveness)));
        touched.extend(op.binds().map(|h| (h, Touch::Liveness)));
        for (h, t) in touched.drain(..) {
            self.reindex(h, t);
        }
        self.touched = touched;
        self.outcomes_tally.bump(outcome.name());
        let v = |kind, message: String| Violation { kind, op_index: Some(index), op_name: Some(op.name()), message };
        let mut violation = None;
        let late = self.late.take();
        if outcome == Outcome::Panic {
            violation = Some(v(ViolationKind::Panic, format!("`{op}` panicked: {detail}")));
        } else if !allowed.contains(&outcome) {
            let want: Vec<&str> = allowed.iter().map(|o| o.name()).collect();
            violation = Some(v(
                ViolationKind::UnexpectedOutcome,
                format!("`{op}` returned {outcome} ({detail}), expected {}", want.join(" or ")),
            ));
        } else if let Some(e) = op.expect.as_deref()
            && e != outcome.name()
        {
            violation =
                Some(v(ViolationKind::ExpectMismatch, format!("`{op}` returned {outcome} ({detail}), expect={e}")));
        } else if let Some((kind, msg)) = late {
            violation = Some(v(kind, format!("`{op}`: {msg}")));
        } else if let Some(before) = before
            && outcome.is_error()
        {
            let after = self.snapshot();
            if after != before {
                violation = Some(v(
                    ViolationKind::StateChanged,
                    format!("refused `{op}` ({outcome}) changed: {}", before.diff(&after)),
                ));
            }
        }
        if violation.is_none()
            && outcome == Outcome::NoMemory
            && self.opts.exclusive
            && !self.opts.fault_injection
            && matches!(op.call, Call::AllocPages { order: 0, .. })
            && free_before > (self.pa.managed_pages() / 4) as i64
            && free_before > 2 * (self.pa.zone().high_wmark_pages() + self.pa.zone().watermark_boost()) as i64
        {
            violation = Some(v(
                ViolationKind::SpuriousNoMemory,
                format!(
                    "`{op}` failed with {free_before} of {} pages free (high watermark {})",
                    self.pa.managed_pages(),
                    self.pa.zone().high_wmark_pages()
                ),
            ));
        }
        if violation.is_none()
            && let Some(hook) = &self.hook
        {
            let view = HookView { live_handles: self.live_handles(), held_pages: self.held_pages() };
            if let Some(msg) = hook(&view) {
                violation = Some(v(ViolationKind::Hook, msg));
            }
        }
        // vmap_lazy_nr counts pages waiting for a purge: never below zero,
        // also while other CPUs free and purge (one atomic read per op).
        let nr = self.vm.lazy_nr();
        if violation.is_none() && nr < 0 {
            violation = Some(v(ViolationKind::VmallocCheck, format!("after `{op}`: vmap_lazy_nr is {nr}")));
        }
        // With other threads on the machine, checks wait for the end.
        if violation.is_none() && op.call == Call::Check && self.opts.exclusive {
            violation = self.check().err().map(|mut e| {
                e.op_index = Some(index);
                e
            });
        }
        let bound = op.binds().and_then(|h| self.bound_units(h));
        StepResult { outcome, detail, violation, bound, fail_nth }
    }

    /// The failures injected since `filtered_before` requests had passed
    /// fail_page_alloc's filters, as fail-nth counts (each from the request
    /// after the previous failure); a pending countdown is cleared.
    fn injected_as_fail_nth(&self, filtered_before: u64) -> Vec<u32> {
        self.pa.set_fail_nth(&[]);
        let (_, log) = self.pa.take_fail_page_alloc_log();
        let mut prev = filtered_before;
        log.into_iter()
            .map(|at| {
                let n = u32::try_from(at - prev).unwrap_or(u32::MAX);
                prev = at;
                n
            })
            .collect()
    }

    /// The detail of a success, formatted only when asked for
    /// ([`ExecOptions::details`]).
    fn ok_detail(&self, a: std::fmt::Arguments<'_>) -> String {
        if self.opts.details { a.to_string() } else { String::new() }
    }

    /// The number of units a live handle holds (1 when it is not pages).
    fn bound_units(&self, h: Handle) -> Option<usize> {
        match self.handles.get(&h)? {
            Obj::Pages(units) => Some(units.len()),
            _ if self.is_live(h) => Some(1),
            _ => None,
        }
    }

    fn bind(&mut self, h: Handle, o: Obj) {
        if self.dead_set.remove(&h) {
            self.dead.retain(|d| *d != h);
        }
        // A rebound handle's old units leave the index first.
        if let Some(Obj::Pages(old)) = self.handles.get(&h) {
            for (i, u) in old.iter().enumerate() {
                self.live_pfns.remove_if(u.pfn, (h, i));
            }
        }
        self.handles.insert(h, o);
        self.touched.push((h, Touch::All));
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn tally_counts_by_text_whatever_the_address() {
        let mut t = Tally::default();
        // One name at two addresses counts once; a prefix at the same
        // address as a longer name is another name.
        let long: &'static str = Box::leak(String::from("vmalloc_huge").into_boxed_str());
        let short = &long[..7];
        let other: &'static str = Box::leak(String::from("vmalloc").into_boxed_str());
        for _ in 0..3 {
            t.bump(long);
            t.bump(short);
        }
        t.bump(other);
        t.bump("free_pages");
        let m = t.to_map();
        assert_eq!(m.get("vmalloc_huge"), Some(&3));
        assert_eq!(m.get("vmalloc"), Some(&4));
        assert_eq!(m.get("free_pages"), Some(&1));
        assert_eq!(t.len(), 3);
    }
}
