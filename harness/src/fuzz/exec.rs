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
//! swapper_pg_dir that the page allocator handed out; boot tables are
//! memblock-reserved). [`Executor::finish`] frees everything the fuzzer
//! holds, waits for kvfree_rcu, purges, drains every pcp, and requires
//! the buddy to hold managed minus the page-table pages that stayed, and,
//! if no table page was ever allocated, the post-boot buddyinfo.

use super::op::{Call, Handle, HandleKind, Op, Ref, Sysctl};
use super::oracle::{Outcome, Snapshot, Violation, ViolationKind};
use mmlab_engine::page::PageExt;
use mmlab_engine::pgtable::{DescKind, Level};
use mmlab_engine::{Cpu, Machine, PAGE_SIZE, Pfn};
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::percpu::{PCPU_MIN_ALLOC_SIZE, PCPU_MIN_UNIT_SIZE, PercpuAllocator};
use mmlab_vmalloc::{VM_ALLOC, Vmalloc};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

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
    let per_lane = mmlab_engine::layout::MODULES_VSIZE / SCRATCH_SLOT / lanes.max(1);
    mmlab_engine::layout::MODULES_VADDR + ((u64::from(h.id) % per_lane) * lanes.max(1) + lane) * SCRATCH_SLOT
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
pub type Hook = Box<dyn Fn(&HookView) -> Option<String>>;

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

/// The result of one op.
#[derive(Clone, Debug)]
pub struct StepResult {
    pub outcome: Outcome,
    /// Details for `mmlab replay` (the address or pfn, the error text).
    pub detail: String,
    pub violation: Option<Violation>,
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
}

/// The executor of one run.
pub struct Executor<'a, 'm> {
    m: &'m Machine,
    pa: &'a PageAllocator<'m>,
    vm: &'a Vmalloc<'a, 'm>,
    percpu: &'a PercpuAllocator,
    cpus: Vec<Cpu<'m>>,
    handles: BTreeMap<Handle, Obj>,
    /// Head pfn of every live unit -> (handle, unit index).
    live_pfns: std::collections::HashMap<Pfn, (Handle, usize)>,
    /// Dead handles, oldest first; only the last [`KEEP_DEAD`] are kept
    /// (for double frees), so the table stays small in long runs.
    dead: std::collections::VecDeque<Handle>,
    /// Handles whose units changed in this step.
    touched: Vec<Handle>,
    /// A violation found while running the call (a wrong translation).
    late: Option<(ViolationKind, String)>,
    opts: ExecOptions,
    boot_buddyinfo: [u64; 11],
    pub coverage: Coverage,
    hook: Option<Hook>,
    ops_run: usize,
}

impl std::fmt::Debug for Executor<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("handles", &self.handles.len()).field("ops_run", &self.ops_run).finish()
    }
}

type Expect = (Vec<Outcome>, bool);

/// Dead handles kept for wrong calls on them.
const KEEP_DEAD: usize = 256;

fn only(o: Outcome) -> Expect {
    (vec![o], o.is_error())
}
fn errors(v: &[Outcome]) -> Expect {
    (v.to_vec(), true)
}
fn succeeds(v: &[Outcome]) -> Expect {
    (v.to_vec(), false)
}

impl<'a, 'm> Executor<'a, 'm> {
    /// An executor over `cpus` (handles of the CPUs its ops may name; an
    /// op naming a CPU beyond them runs on `cpus[cpu % len]`).
    pub fn new(
        pa: &'a PageAllocator<'m>,
        vm: &'a Vmalloc<'a, 'm>,
        percpu: &'a PercpuAllocator,
        cpus: Vec<Cpu<'m>>,
        opts: ExecOptions,
    ) -> Executor<'a, 'm> {
        Executor {
            m: pa.machine(),
            pa,
            vm,
            percpu,
            cpus,
            handles: BTreeMap::new(),
            live_pfns: std::collections::HashMap::new(),
            dead: std::collections::VecDeque::new(),
            touched: Vec::new(),
            late: None,
            opts,
            boot_buddyinfo: pa.zone().nr_free_per_order(),
            coverage: Coverage::default(),
            hook: None,
            ops_run: 0,
        }
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

    /// Take the CPU handles back (for another executor or the final drain).
    pub fn into_cpus(self) -> Vec<Cpu<'m>> {
        self.cpus
    }

    pub fn snapshot(&self) -> Snapshot {
        let z = self.pa.zone();
        let busy: u64 = self.vm.areas().iter().map(|a| a.size).sum();
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
        let (h, i) = *self.live_pfns.get(&pfn)?;
        self.units(h)?.get(i).filter(|u| u.live && u.pfn == pfn).map(|_| (h, i))
    }

    /// Bring the pfn index and the dead list up to date for `h`.
    fn reindex(&mut self, h: Handle) {
        if let Some(Obj::Pages(units)) = self.handles.get(&h) {
            for (i, u) in units.iter().enumerate() {
                if u.live {
                    self.live_pfns.insert(u.pfn, (h, i));
                } else if self.live_pfns.get(&u.pfn) == Some(&(h, i)) {
                    self.live_pfns.remove(&u.pfn);
                }
            }
        }
        if self.handles.contains_key(&h) && !self.is_live(h) && !self.dead.contains(&h) {
            self.dead.push_back(h);
            while self.dead.len() > KEEP_DEAD {
                if let Some(old) = self.dead.pop_front()
                    && !self.is_live(old)
                {
                    self.handles.remove(&old);
                }
            }
        }
    }

    /// Acceptable outcomes of a page call on `pfn` that is not a live unit
    /// of ours: from the frame's state; Skipped if someone else holds it.
    fn foreign_pfn(&self, pfn: Pfn, order: u32) -> Expect {
        if order > mmlab_engine::MAX_PAGE_ORDER {
            return only(Outcome::OrderTooLarge);
        }
        if !self.m.memmap().pfn_valid(pfn) {
            return only(Outcome::InvalidPfn);
        }
        match self.m.page(pfn).ext() {
            PageExt::Alloc(..) => (vec![Outcome::Skipped], false),
            PageExt::Buddy(_) | PageExt::Pcp(_) => errors(&[Outcome::DoubleFree, Outcome::NotAllocated]),
            PageExt::Tail => only(Outcome::NotAllocated),
            PageExt::Reserved => only(Outcome::Reserved),
        }
    }

    /// Whether `addr` starts a busy vmalloc area, or lies in a live
    /// mapping of ours, so a wrong call on it would hit a live object.
    fn addr_in_use(&self, addr: u64) -> bool {
        self.held_live(addr) || self.vm.areas().iter().any(|a| a.addr == addr)
    }

    /// Whether a live handle of any kind covers `addr` (an address freed
    /// once may since have been handed out again, to a vmalloc, a vmap, a
    /// vm_map_ram block or a percpu chunk).
    fn held_live(&self, addr: u64) -> bool {
        self.handles.values().any(|o| match *o {
            Obj::Vmalloc { addr: a, live: true, .. } | Obj::Vmap { addr: a, live: true } => a == addr,
            Obj::MapRam { addr: a, count, live: true } => addr >= a && addr < a + count * PAGE_SIZE,
            Obj::Percpu { ptr, live: true } => ptr == addr,
            _ => false,
        })
    }

    fn area_addr(&self, r: &Ref) -> Option<u64> {
        match *r {
            Ref::Raw(a) => Some(a),
            Ref::Whole(h) | Ref::Offset(h, _) => {
                let off = if let Ref::Offset(_, k) = *r { k } else { 0 };
                match self.handles.get(&h)? {
                    Obj::Vmalloc { addr, .. } | Obj::Vmap { addr, .. } | Obj::MapRam { addr, .. } => Some(addr + off),
                    Obj::Percpu { ptr, .. } => Some(ptr + off),
                    Obj::Pages(_) | Obj::Table { .. } => None,
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
                | Obj::Table { live, .. },
            ) => *live,
            None => false,
        }
    }

    /// Acceptable outcomes of a call on an area address. `kind` is the
    /// handle kind the call frees; `op` names the call.
    fn area_expect(&self, r: &Ref, kind: HandleKind) -> Expect {
        let Some(addr) = self.area_addr(r) else { return (vec![Outcome::Skipped], false) };
        let h = r.handle();
        let obj = h.and_then(|h| self.handles.get(&h));
        let offset = matches!(r, Ref::Offset(_, k) if *k > 0);
        match obj {
            Some(o) if !offset && self.is_live(h.unwrap_or(Handle { kind, id: 0 })) => {
                let right = match o {
                    Obj::Vmalloc { .. } => HandleKind::Vmalloc,
                    Obj::Vmap { .. } => HandleKind::Vmap,
                    Obj::MapRam { .. } => HandleKind::MapRam,
                    Obj::Percpu { .. } => HandleKind::Percpu,
                    Obj::Pages(_) | Obj::Table { .. } => return (vec![Outcome::Skipped], false),
                };
                if right == kind {
                    only(Outcome::Ok)
                } else if right == HandleKind::MapRam || right == HandleKind::Percpu || kind == HandleKind::Percpu {
                    // Cross-kind calls on vm_map_ram blocks and percpu
                    // chunks are not modelled.
                    (vec![Outcome::Skipped], false)
                } else {
                    only(Outcome::WrongKind)
                }
            }
            Some(Obj::Vmalloc { live: true, size, .. }) if offset => {
                let off = if let Ref::Offset(_, k) = *r { k } else { 0 };
                if off < *size && kind != HandleKind::Percpu {
                    only(Outcome::InsideArea)
                } else {
                    (vec![Outcome::Skipped], false)
                }
            }
            Some(Obj::Vmalloc { kvfree_pending: true, live: false, .. }) if !offset && kind == HandleKind::Vmalloc => {
                // Queued by kvfree_rcu: freeing it again is a double free,
                // unless the address was reused after the grace period, by
                // a handle or by an area of the library's own (the page
                // array of a large vmalloc is vmalloc'd itself); freeing
                // that one would be the caller's bug, as in the kernel.
                if self.held_live(addr) || !self.vm.kvfree_queued(addr) && self.addr_in_use(addr) {
                    (vec![Outcome::Skipped], false)
                } else {
                    errors(&[Outcome::DoubleFree, Outcome::NotVmalloc, Outcome::InsideArea])
                }
            }
            _ => {
                if self.addr_in_use(addr) {
                    return (vec![Outcome::Skipped], false);
                }
                if kind == HandleKind::Percpu {
                    return only(Outcome::NotPercpu);
                }
                errors(&[Outcome::DoubleFree, Outcome::NotVmalloc, Outcome::InsideArea])
            }
        }
    }

    /// The acceptable outcomes of `op`.
    fn expect(&self, op: &Op) -> Expect {
        use Outcome as O;
        let alloc_ok = succeeds(&[O::Ok, O::NoMemory, O::NoVmapSpace]);
        let bind_free = |h: &Handle| !self.is_live(*h);
        match &op.call {
            Call::AllocPages { order, out, .. } => {
                if !bind_free(out) {
                    (vec![O::Skipped], false)
                } else if *order > mmlab_engine::MAX_PAGE_ORDER {
                    only(O::OrderTooLarge)
                } else {
                    succeeds(&[O::Ok, O::NoMemory])
                }
            }
            Call::AllocPagesBulk { out, .. } => {
                if bind_free(out) {
                    succeeds(&[O::Ok, O::NoMemory])
                } else {
                    (vec![O::Skipped], false)
                }
            }
            Call::FreePages { page, order } => {
                if let Some((h, i)) = self.unit_of(page) {
                    let Some(u) = self.units(h).and_then(|u| u.get(i)).copied() else {
                        return (vec![O::Skipped], false);
                    };
                    if u.live {
                        if *order > mmlab_engine::MAX_PAGE_ORDER {
                            return only(O::OrderTooLarge);
                        }
                        return if *order == u.order { only(O::Ok) } else { only(O::WrongOrder) };
                    }
                    return self.foreign_pfn(u.pfn, *order);
                }
                let Some(pfn) = self.pfn_of(page) else { return (vec![O::Skipped], false) };
                if let Some((h, i)) = self.live_unit_at(pfn) {
                    let u = self.units(h).map(|u| u[i]);
                    return match u {
                        Some(_) if *order > mmlab_engine::MAX_PAGE_ORDER => only(O::OrderTooLarge),
                        Some(u) if u.order == *order => only(O::Ok),
                        _ => only(O::WrongOrder),
                    };
                }
                self.foreign_pfn(pfn, *order)
            }
            Call::ReleasePages { page } => {
                if self.units(*page).is_some_and(|u| u.iter().any(|u| u.live)) {
                    only(O::Ok)
                } else {
                    (vec![O::Skipped], false)
                }
            }
            Call::GetPage { page } | Call::SplitPage { page, .. } => {
                let Some(pfn) = self.pfn_of(page) else { return (vec![O::Skipped], false) };
                if let Some((h, i)) = self.live_unit_at(pfn) {
                    let u = self.units(h).map(|u| u[i]).unwrap_or(Unit { pfn, order: 0, refs: 1, live: true });
                    if let Call::SplitPage { order, .. } = op.call {
                        if u.refs != 1 || (order > 0 && self.units(h).is_some_and(|v| v.len() > 1)) {
                            return (vec![O::Skipped], false);
                        }
                        return if order == u.order { only(O::Ok) } else { only(O::WrongOrder) };
                    }
                    return only(O::Ok);
                }
                if !self.m.memmap().pfn_valid(pfn) {
                    return only(O::InvalidPfn);
                }
                match self.m.page(pfn).ext() {
                    PageExt::Alloc(..) => (vec![O::Skipped], false),
                    _ => only(O::NotAllocated),
                }
            }
            Call::DrainLocalPages
            | Call::DrainAllPages
            | Call::DecayPcpHigh
            | Call::KvfreeRcuBarrier
            | Call::PurgeVmapAreaLazy
            | Call::Check => only(O::Ok),
            Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v)) => {
                if *v != 0 && *v < mmlab_pcp::MIN_PERCPU_PAGELIST_HIGH_FRACTION {
                    only(O::HighFraction)
                } else {
                    only(O::Ok)
                }
            }
            Call::Sysctl(Sysctl::MinFreeKbytes(v)) => {
                if *v > mmlab_pcp::MIN_FREE_KBYTES_MAX {
                    only(O::MinFreeKbytes)
                } else {
                    only(O::Ok)
                }
            }
            Call::Vmalloc { size, out }
            | Call::Vzalloc { size, out }
            | Call::VmallocHuge { size, out, .. }
            | Call::VmallocNode { size, out, .. } => {
                let align = if let Call::VmallocNode { align, .. } = op.call { align } else { 1 };
                if !bind_free(out) {
                    (vec![O::Skipped], false)
                } else if *size == 0 {
                    only(O::ZeroSize)
                } else if !align.is_power_of_two() {
                    only(O::BadAlign)
                } else if *size > self.pa.zone().managed_pages() * PAGE_SIZE {
                    only(O::TooLarge)
                } else {
                    alloc_ok
                }
            }
            Call::Vmap { pages, out } | Call::VmMapRam { pages, out } => {
                if !bind_free(out) {
                    return (vec![O::Skipped], false);
                }
                if pages.is_empty() {
                    return only(O::ZeroSize);
                }
                for p in pages {
                    let live = self.unit_of(p).and_then(|(h, i)| self.units(h).map(|u| u[i].live));
                    if live != Some(true) {
                        return (vec![O::Skipped], false);
                    }
                }
                alloc_ok
            }
            Call::Vfree { area } => self.area_expect(area, HandleKind::Vmalloc),
            Call::KvfreeRcu { area } => self.area_expect(area, HandleKind::Vmalloc),
            Call::Vunmap { area } => self.area_expect(area, HandleKind::Vmap),
            Call::VmUnmapRam { area, count } => {
                let e = self.area_expect(area, HandleKind::MapRam);
                if e.0 == [O::Ok] {
                    let right = match area.handle().and_then(|h| self.handles.get(&h)) {
                        Some(Obj::MapRam { count: c, .. }) => *c,
                        _ => 0,
                    };
                    if *count == 0 {
                        return only(O::ZeroSize);
                    }
                    if *count != right {
                        return errors(&[O::WrongCount, O::NotVmalloc, O::WrongKind, O::ZeroSize]);
                    }
                    return e;
                }
                if e.0 == [O::Skipped] {
                    return e;
                }
                if *count == 0 {
                    return only(O::ZeroSize);
                }
                errors(&[O::NotVmalloc, O::DoubleFree, O::WrongCount, O::WrongKind, O::InsideArea])
            }
            Call::AllocPercpu { size, align, out } => {
                let align = (*align).max(PCPU_MIN_ALLOC_SIZE);
                if !bind_free(out) {
                    (vec![O::Skipped], false)
                } else if *size == 0 || *size > PCPU_MIN_UNIT_SIZE || !align.is_power_of_two() || align > PAGE_SIZE {
                    only(O::BadRequest)
                } else {
                    succeeds(&[O::Ok, O::NoMemory, O::NoVmapSpace])
                }
            }
            Call::FreePercpu { ptr } => self.area_expect(ptr, HandleKind::Percpu),
            Call::MapRange { page, out } => {
                let live = self.unit_of(page).and_then(|(h, i)| self.units(h).map(|u| u[i].live));
                let slot = scratch_slot(*out, self.opts.lane, self.opts.lanes);
                let slot_busy = self
                    .handles
                    .values()
                    .any(|o| matches!(*o, Obj::Table { va: v, live: true, .. } if v & !(SCRATCH_SLOT - 1) == slot));
                if !bind_free(out) || live != Some(true) || slot_busy {
                    (vec![O::Skipped], false)
                } else {
                    succeeds(&[O::Ok, O::NoMemory])
                }
            }
            Call::UnmapRange { map } => {
                let (h, k) = match *map {
                    Ref::Whole(h) => (h, 0),
                    Ref::Offset(h, k) => (h, k),
                    _ => return (vec![O::Skipped], false),
                };
                match self.handles.get(&h) {
                    Some(Obj::Table { live: true, .. }) if k == 0 => only(O::Ok),
                    // Part of a mapping made of contiguous runs (16 pages)
                    // or PMD blocks (512): refused unless the cut is on a
                    // run or block boundary.
                    Some(Obj::Table { pages, live: true, .. }) if *pages >= 16 && k < *pages => {
                        let granule = if *pages >= 512 { 512 } else { 16 };
                        if k % granule == 0 { only(O::Ok) } else { only(O::PartialHugeUnmap) }
                    }
                    _ => (vec![O::Skipped], false),
                }
            }
        }
    }

    /// Run one op.
    pub fn step(&mut self, index: usize, op: &Op) -> StepResult {
        let (allowed, must_not_change) = self.expect(op);
        *self.coverage.ops.entry(op.name().to_string()).or_default() += 1;
        if allowed == [Outcome::Skipped] {
            *self.coverage.outcomes.entry("Skipped".to_string()).or_default() += 1;
            return StepResult { outcome: Outcome::Skipped, detail: String::new(), violation: None };
        }
        // vfree and kvfree_rcu first free kvfree_rcu objects whose grace
        // period ended: a legitimate change even when the call is refused.
        let snap_ok = self.opts.exclusive
            && must_not_change
            && !(matches!(op.call, Call::Vfree { .. } | Call::FreePercpu { .. }) && self.vm.kvfree_pending() > 0);
        let before = if snap_ok { Some(self.snapshot()) } else { None };
        let free_before = self.pa.zone().nr_free_pages();
        let r = catch_unwind(AssertUnwindSafe(|| self.run(op)));
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
        touched.extend(op.uses());
        touched.extend(op.binds());
        for h in touched.drain(..) {
            self.reindex(h);
        }
        self.touched = touched;
        *self.coverage.outcomes.entry(outcome.name().to_string()).or_default() += 1;
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
            && free_before > (self.pa.zone().managed_pages() / 4) as i64
            && free_before > 2 * (self.pa.zone().high_wmark_pages() + self.pa.zone().watermark_boost()) as i64
        {
            violation = Some(v(
                ViolationKind::SpuriousNoMemory,
                format!(
                    "`{op}` failed with {free_before} of {} pages free (high watermark {})",
                    self.pa.zone().managed_pages(),
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
        // With other threads on the machine, checks wait for the end.
        if violation.is_none() && op.call == Call::Check && self.opts.exclusive {
            violation = self.check().err().map(|mut e| {
                e.op_index = Some(index);
                e
            });
        }
        StepResult { outcome, detail, violation }
    }

    fn bind(&mut self, h: Handle, o: Obj) {
        self.dead.retain(|d| *d != h);
        self.handles.insert(h, o);
        self.touched.push(h);
    }

    /// Execute the call and update the model; (outcome, detail).
    fn run(&mut self, op: &Op) -> (Outcome, String) {
        let cpu_i = op.cpu;
        macro_rules! cpu {
            () => {
                &self.cpus[cpu_i % self.cpus.len()]
            };
        }
        match &op.call {
            Call::AllocPages { order, gfp, out } => match self.pa.try_alloc_pages(cpu!(), *gfp, *order) {
                Ok(pfn) => {
                    self.bind(*out, Obj::Pages(vec![Unit { pfn, order: *order, refs: 1, live: true }]));
                    (Outcome::Ok, format!("pfn {pfn}"))
                }
                Err(e) => (e.into(), e.to_string()),
            },
            Call::AllocPagesBulk { nr, gfp, out } => {
                let mut arr = vec![None; *nr as usize];
                let n = self.pa.alloc_pages_bulk(cpu!(), *gfp, &mut arr);
                let units: Vec<Unit> =
                    arr.iter().flatten().map(|&pfn| Unit { pfn, order: 0, refs: 1, live: true }).collect();
                if units.len() != n {
                    return (Outcome::Panic, format!("alloc_pages_bulk returned {n} but filled {}", units.len()));
                }
                if units.is_empty() && *nr > 0 {
                    return (Outcome::NoMemory, "no page".to_string());
                }
                self.bind(*out, Obj::Pages(units));
                (Outcome::Ok, format!("{n} pages"))
            }
            Call::FreePages { page, order } => {
                let Some(pfn) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.pa.free_pages(cpu!(), pfn, *order) {
                    Ok(()) => {
                        self.freed(pfn);
                        (Outcome::Ok, format!("pfn {pfn}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::ReleasePages { page } => {
                let units: Vec<Unit> = self.units(*page).cloned().unwrap_or_default();
                for u in units.iter().filter(|u| u.live) {
                    if let Err(e) = self.pa.free_pages(cpu!(), u.pfn, u.order) {
                        return (e.into(), e.to_string());
                    }
                    self.freed(u.pfn);
                }
                (Outcome::Ok, String::new())
            }
            Call::GetPage { page } => {
                let Some(pfn) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.pa.get_page(pfn) {
                    Ok(n) => {
                        if let Some((h, i)) = self.live_unit_at(pfn)
                            && let Some(u) = self.units_mut(h)
                        {
                            u[i].refs += 1;
                        }
                        (Outcome::Ok, format!("refcount {n}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::SplitPage { page, order } => {
                let Some(pfn) = self.pfn_of(page) else { return (Outcome::Skipped, String::new()) };
                match self.pa.split_page(pfn, *order) {
                    Ok(()) => {
                        if let Some((h, i)) = self.live_unit_at(pfn)
                            && let Some(u) = self.units_mut(h)
                            && u[i].order > 0
                        {
                            let head = u[i];
                            self.touched.push(h);
                            let Some(u) = self.units_mut(h) else { return (Outcome::Ok, String::new()) };
                            *u = (0..1u64 << head.order)
                                .map(|k| Unit { pfn: head.pfn.add(k), order: 0, refs: 1, live: true })
                                .collect();
                        }
                        (Outcome::Ok, format!("pfn {pfn}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::DrainLocalPages => {
                self.pa.drain_local_pages(cpu!());
                (Outcome::Ok, String::new())
            }
            Call::DrainAllPages => {
                self.pa.drain_all_pages(cpu!());
                (Outcome::Ok, String::new())
            }
            Call::DecayPcpHigh => {
                let more = self.pa.decay_pcp_high(cpu!());
                (Outcome::Ok, if more { "more to do".to_string() } else { String::new() })
            }
            Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v)) => {
                match self.pa.set_percpu_pagelist_high_fraction(*v) {
                    Ok(()) => (Outcome::Ok, String::new()),
                    Err(e) => (e.clone().into(), e.to_string()),
                }
            }
            Call::Sysctl(Sysctl::MinFreeKbytes(v)) => match self.pa.set_min_free_kbytes(*v) {
                Ok(()) => (Outcome::Ok, String::new()),
                Err(e) => (e.clone().into(), e.to_string()),
            },
            Call::Vmalloc { size, out }
            | Call::Vzalloc { size, out }
            | Call::VmallocHuge { size, out, .. }
            | Call::VmallocNode { size, out, .. } => {
                let cpu = cpu!();
                let r = match &op.call {
                    Call::Vmalloc { .. } => self.vm.vmalloc(cpu, *size),
                    Call::Vzalloc { .. } => self.vm.vzalloc(cpu, *size),
                    Call::VmallocHuge { gfp, .. } => self.vm.vmalloc_huge(cpu, *size, *gfp),
                    Call::VmallocNode { align, gfp, .. } => self.vm.__vmalloc_node(cpu, *size, *align, *gfp),
                    _ => unreachable!("matched above"),
                };
                match r {
                    Ok(addr) => {
                        self.bind(*out, Obj::Vmalloc { addr, size: *size, live: true, kvfree_pending: false });
                        (Outcome::Ok, format!("{addr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::Vfree { area } | Call::KvfreeRcu { area } => {
                let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
                let kv = matches!(op.call, Call::KvfreeRcu { .. });
                let r = if kv { self.vm.kvfree_rcu(cpu!(), addr) } else { self.vm.vfree(cpu!(), addr) };
                match r {
                    Ok(()) => {
                        if let Some(h) = area.handle()
                            && let Some(Obj::Vmalloc { live, kvfree_pending, addr: a, .. }) = self.handles.get_mut(&h)
                            && *a == addr
                        {
                            *live = false;
                            *kvfree_pending = kv;
                        }
                        (Outcome::Ok, format!("{addr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::Vmap { pages, out } | Call::VmMapRam { pages, out } => {
                let pfns: Vec<Pfn> = pages.iter().filter_map(|p| self.pfn_of(p)).collect();
                let ram = matches!(op.call, Call::VmMapRam { .. });
                let r = if ram {
                    self.vm.vm_map_ram(cpu!(), &pfns)
                } else {
                    self.vm.vmap(cpu!(), &pfns, mmlab_engine::pgtable::desc::PAGE_KERNEL)
                };
                match r {
                    Ok(addr) => {
                        let o = if ram {
                            Obj::MapRam { addr, count: pfns.len() as u64, live: true }
                        } else {
                            Obj::Vmap { addr, live: true }
                        };
                        self.bind(*out, o);
                        (Outcome::Ok, format!("{addr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::Vunmap { area } => {
                let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
                match self.vm.vunmap(cpu!(), addr) {
                    Ok(()) => {
                        if let Some(h) = area.handle()
                            && let Some(Obj::Vmap { live, .. }) = self.handles.get_mut(&h)
                        {
                            *live = false;
                        }
                        (Outcome::Ok, format!("{addr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::VmUnmapRam { area, count } => {
                let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
                let Ok(n) = usize::try_from(*count) else { return (Outcome::TooLarge, String::new()) };
                match self.vm.vm_unmap_ram(cpu!(), addr, n) {
                    Ok(()) => {
                        if let Some(h) = area.handle()
                            && let Some(Obj::MapRam { live, count: c, .. }) = self.handles.get_mut(&h)
                            && *c == *count
                        {
                            *live = false;
                        }
                        (Outcome::Ok, format!("{addr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::AllocPercpu { size, align, out } => {
                match self.percpu.alloc_percpu(self.vm, &self.cpus[cpu_i % self.cpus.len()], *size, *align) {
                    Ok(ptr) => {
                        self.bind(*out, Obj::Percpu { ptr, live: true });
                        (Outcome::Ok, format!("{ptr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::FreePercpu { ptr } => {
                let Some(addr) = self.area_addr(ptr) else { return (Outcome::Skipped, String::new()) };
                match self.percpu.free_percpu(self.vm, &self.cpus[cpu_i % self.cpus.len()], addr) {
                    Ok(()) => {
                        if let Some(h) = ptr.handle()
                            && let Some(Obj::Percpu { live, .. }) = self.handles.get_mut(&h)
                        {
                            *live = false;
                        }
                        (Outcome::Ok, format!("{addr:#x}"))
                    }
                    Err(e) => (e.into(), e.to_string()),
                }
            }
            Call::KvfreeRcuBarrier => match self.vm.kvfree_rcu_barrier(cpu!()) {
                Ok(()) => {
                    for o in self.handles.values_mut() {
                        if let Obj::Vmalloc { kvfree_pending, .. } = o {
                            *kvfree_pending = false;
                        }
                    }
                    (Outcome::Ok, String::new())
                }
                Err(e) => (e.into(), e.to_string()),
            },
            Call::PurgeVmapAreaLazy => match self.vm.purge_vmap_area_lazy(cpu!()) {
                Ok(did) => (Outcome::Ok, if did { "purged".to_string() } else { String::new() }),
                Err(e) => (e.into(), e.to_string()),
            },
            Call::MapRange { page, out } => {
                let Some((h, i)) = self.unit_of(page) else { return (Outcome::Skipped, String::new()) };
                let Some(u) = self.units(h).map(|u| u[i]) else { return (Outcome::Skipped, String::new()) };
                let (pa, pages) = (u.pfn.phys().0, 1u64 << u.order);
                let va = scratch_va(scratch_slot(*out, self.opts.lane, self.opts.lanes), pages);
                let asp = self.m.kernel_as();
                let flags = mmlab_engine::pgtable::MapFlags { block: true, cont: true };
                let prot = mmlab_engine::pgtable::desc::PAGE_KERNEL;
                let r = mmlab_engine::pgtable::map_range(cpu!(), &asp, self.pa, va, pa, pages * PAGE_SIZE, prot, flags);
                match r {
                    Ok(flush) => {
                        flush.flush(cpu!());
                        self.bind(*out, Obj::Table { va, pa, pages, live: true });
                        for k in [0, pages - 1] {
                            self.expect_translation(va + k * PAGE_SIZE, Some(pa + k * PAGE_SIZE));
                        }
                        (Outcome::Ok, format!("{va:#x} -> {pa:#x}, {pages} pages"))
                    }
                    Err(e) => {
                        // A failed map_range must leave nothing mapped.
                        self.expect_translation(va, None);
                        (e.into(), e.to_string())
                    }
                }
            }
            Call::UnmapRange { map } => {
                let (h, k) = match *map {
                    Ref::Whole(h) => (h, 0),
                    Ref::Offset(h, k) => (h, k),
                    _ => return (Outcome::Skipped, String::new()),
                };
                let Some(&Obj::Table { va, pa, pages, .. }) = self.handles.get(&h) else {
                    return (Outcome::Skipped, String::new());
                };
                let start = va + k * PAGE_SIZE;
                let size = pages.saturating_sub(k) * PAGE_SIZE;
                let asp = self.m.kernel_as();
                match mmlab_engine::pgtable::unmap_range(cpu!(), &asp, start, size) {
                    Ok(flush) => {
                        flush.flush(cpu!());
                        if let Some(Obj::Table { live, pages, .. }) = self.handles.get_mut(&h) {
                            // The head stays mapped after a cut at page k.
                            *pages = k;
                            *live = k > 0;
                        }
                        self.expect_translation(start, None);
                        (Outcome::Ok, format!("{start:#x}"))
                    }
                    Err(e) => {
                        // Refused: still mapped as before.
                        self.expect_translation(va, Some(pa));
                        (e.into(), e.to_string())
                    }
                }
            }
            Call::Check => (Outcome::Ok, String::new()),
        }
    }

    /// Walk the kernel tables for `va`: it must translate to `want`
    /// (None: no translation); else a late page-table violation.
    fn expect_translation(&mut self, va: u64, want: Option<u64>) {
        let got = mmlab_engine::pgtable::walk(self.m, &self.m.kernel_as(), va).leaf.map(|l| l.pa.0);
        if got != want && self.late.is_none() {
            self.late = Some((
                ViolationKind::PageTable,
                format!("va {va:#x} translates to {}, expected {}", show_pa(got), show_pa(want)),
            ));
        }
    }

    /// A successful free of `pfn`: drop one of the fuzzer's references.
    fn freed(&mut self, pfn: Pfn) {
        if let Some((h, i)) = self.live_unit_at(pfn) {
            self.touched.push(h);
            let Some(u) = self.units_mut(h) else { return };
            if u[i].refs > 1 {
                // __free_pages with another reference: the upper halves go,
                // the head stays allocated at order 0.
                u[i].refs -= 1;
                u[i].order = 0;
            } else {
                u[i].live = false;
                u[i].refs = 0;
            }
        }
    }

    /// Live handles.
    pub fn live_handles(&self) -> usize {
        self.handles.keys().filter(|h| self.is_live(**h)).count()
    }

    /// Pages the fuzzer holds.
    pub fn held_pages(&self) -> u64 {
        self.handles
            .values()
            .map(|o| match o {
                Obj::Pages(u) => u.iter().filter(|u| u.live).map(|u| 1u64 << u.order).sum(),
                _ => 0,
            })
            .sum()
    }

    /// Page-table pages the page allocator handed out, reachable from
    /// swapper_pg_dir.
    pub fn pgtable_pages(&self) -> u64 {
        fn visit(m: &Machine, table: mmlab_engine::PhysAddr, level: Level, n: &mut u64) {
            if matches!(m.page(table.pfn()).ext(), PageExt::Alloc(..)) {
                *n += 1;
            }
            let Some(next) = level.next() else { return };
            for slot in m.table(table) {
                let d = mmlab_engine::pgtable::Desc(slot.load(std::sync::atomic::Ordering::Relaxed));
                if d.kind(level) == DescKind::Table {
                    visit(m, mmlab_engine::PhysAddr(d.addr()), next, n);
                }
            }
        }
        let mut n = 0;
        visit(self.m, self.m.kernel_as().pgd(), Level::Pgd, &mut n);
        n
    }

    /// The invariant checks (see the module documentation).
    pub fn check(&self) -> Result<(), Violation> {
        let v = |kind, message| Err(Violation { kind, op_index: None, op_name: None, message });
        if let Err(e) = self.pa.check_invariants() {
            return v(ViolationKind::Invariant, e);
        }
        if let Err(e) = self.vm.check().and_then(|()| self.percpu.check()) {
            return v(ViolationKind::VmallocCheck, e);
        }
        for (h, o) in &self.handles {
            if let Obj::Pages(units) = o {
                for u in units.iter().filter(|u| u.live) {
                    let p = self.m.page(u.pfn);
                    let ok = matches!(p.ext(), PageExt::Alloc(o, _) if u32::from(o) == u.order);
                    if !ok || p.refcount() != u.refs {
                        return v(
                            ViolationKind::HandleState,
                            format!(
                                "{h}: pfn {} held at order {} with {} references is {:?} with refcount {}",
                                u.pfn,
                                u.order,
                                u.refs,
                                p.ext(),
                                p.refcount()
                            ),
                        );
                    }
                }
            }
        }
        let mem = self.m.memmap();
        let mut allocated = 0u64;
        for pfn in mem.start_pfn().0..mem.end_pfn().0 {
            if let PageExt::Alloc(o, _) = self.m.page(Pfn(pfn)).ext() {
                allocated += 1 << o;
            }
        }
        let z = self.pa.zone();
        let free = z.nr_free_pages();
        let pcp = self.pa.pcp_pages();
        let managed = z.managed_pages();
        if free + pcp + allocated as i64 != managed as i64 {
            return v(
                ViolationKind::Conservation,
                format!("free {free} + pcp {pcp} + allocated {allocated} != managed {managed}"),
            );
        }
        let held = self.held_pages();
        let vmalloc: u64 =
            self.vm.areas().iter().filter(|a| a.flags & VM_ALLOC != 0).map(|a| a.pages.len() as u64).sum();
        let tables = self.pgtable_pages();
        if held + vmalloc + tables != allocated {
            return v(
                ViolationKind::Conservation,
                format!("allocated {allocated} != held {held} + vmalloc {vmalloc} + page tables {tables}"),
            );
        }
        Ok(())
    }

    /// Free everything the fuzzer holds, shrink percpu, wait for
    /// kvfree_rcu, purge the lazy areas and drain every pcp.
    pub fn release_all(&mut self) -> Result<(), Violation> {
        let v = |kind, message| Err(Violation { kind, op_index: None, op_name: None, message });
        let handles: Vec<(Handle, Obj)> = self.handles.iter().map(|(h, o)| (*h, o.clone())).collect();
        let cpu = &self.cpus[0];
        for (h, o) in handles {
            let r: Result<(), String> = match o {
                Obj::Pages(units) => {
                    let mut r = Ok(());
                    for u in units.iter().filter(|u| u.live) {
                        let mut order = u.order;
                        for _ in 0..u.refs {
                            if let Err(e) = self.pa.free_pages(cpu, u.pfn, order) {
                                r = Err(e.to_string());
                            }
                            order = 0;
                        }
                    }
                    r
                }
                Obj::Vmalloc { addr, live: true, .. } => self.vm.vfree(cpu, addr).map_err(|e| e.to_string()),
                Obj::Vmap { addr, live: true } => self.vm.vunmap(cpu, addr).map_err(|e| e.to_string()),
                Obj::MapRam { addr, count, live: true } => {
                    self.vm.vm_unmap_ram(cpu, addr, count as usize).map_err(|e| e.to_string())
                }
                Obj::Percpu { ptr, live: true } => {
                    self.percpu.free_percpu(self.vm, cpu, ptr).map_err(|e| e.to_string())
                }
                Obj::Table { va, pages, live: true, .. } => {
                    mmlab_engine::pgtable::unmap_range(cpu, &self.m.kernel_as(), va, pages * PAGE_SIZE)
                        .map(|f| f.flush(cpu))
                        .map_err(|e| e.to_string())
                }
                _ => Ok(()),
            };
            if let Err(e) = r {
                return v(ViolationKind::FinalState, format!("freeing {h} at the end: {e}"));
            }
        }
        self.handles.clear();
        self.live_pfns.clear();
        self.dead.clear();
        if let Err(e) = self.percpu.shrink(self.vm, cpu) {
            return v(ViolationKind::FinalState, format!("percpu shrink: {e}"));
        }
        if let Err(e) = self.vm.kvfree_rcu_barrier(cpu) {
            return v(ViolationKind::FinalState, format!("kvfree_rcu_barrier: {e}"));
        }
        self.vm.purge_vmap_area_lazy(cpu).expect("the fuzzer drives its own machine's CPUs");
        self.pa.drain_all_pages(cpu);
        Ok(())
    }

    /// Free everything the fuzzer holds, wait for kvfree_rcu, purge, drain,
    /// and check that memory came back. Returns the first violation.
    pub fn finish(&mut self) -> Result<(), Violation> {
        let v = |kind, message| Err(Violation { kind, op_index: None, op_name: None, message });
        self.check()?;
        self.release_all()?;
        self.check()?;
        let z = self.pa.zone();
        let tables = self.pgtable_pages();
        let vmalloc: u64 = self.vm.areas().iter().map(|a| a.pages.len() as u64).sum();
        let free = z.nr_free_pages() as u64;
        let managed = z.managed_pages();
        if self.pa.pcp_pages() != 0 || free + tables + vmalloc != managed {
            return v(
                ViolationKind::FinalState,
                format!(
                    "after freeing everything: buddy {free} + page tables {tables} + vmalloc left {vmalloc} != managed \
                     {managed} (pcp {})",
                    self.pa.pcp_pages()
                ),
            );
        }
        if tables == 0 && vmalloc == 0 && z.nr_free_per_order() != self.boot_buddyinfo {
            return v(
                ViolationKind::FinalState,
                format!("buddyinfo {:?} != post-boot {:?}", z.nr_free_per_order(), self.boot_buddyinfo),
            );
        }
        Ok(())
    }
}
