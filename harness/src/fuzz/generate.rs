//! Generating operation sequences from a random stream or from bytes.
//!
//! # The algorithm
//!
//! [`Generator`] keeps its own model of the handles it has bound, assuming
//! every allocation succeeds: live page handles (with their units, orders
//! and extra references), live vmalloc areas, vmap and vm_map_ram
//! mappings, percpu objects, map_range mappings, and a short list of handles it has freed.
//! Each step draws a CPU and then an operation class by weight: right
//! calls (allocate at every order and several gfp types, free what is
//! live with the right order, bulk, get_page + extra free, split_page,
//! drains, sysctls, vmalloc family, vmap/vm_map_ram of live pages,
//! percpu, kvfree_rcu, purge, map_range/unmap_range of a scratch region,
//! `check`) and, with about one chance in
//! eight, a deliberately wrong call (double free, wrong order, a tail
//! page, a bogus pfn, order above MAX_PAGE_ORDER, vfree of an inside or
//! bogus address or of a vmap area, vfree or kvfree_rcu of an object
//! already queued by kvfree_rcu, vunmap of a vmalloc area, vm_unmap_ram
//! twice or with a wrong count, a bad sysctl value, size 0 or too large,
//! a size whose rounding up overflows, unmapping part of a contiguous
//! or block mapping; set_memory_* of an unaligned address, outside the
//! linear map's range or past RAM; below vmalloc, `generate/raw.rs`:
//! map_range over a live mapping or outside the kernel's half,
//! set_cont_ptes off its grid or outside RAM, RAM over a PCI I/O window,
//! a DMA remap of freed frames, calls on another machine's CPU).
//! Frees are forced once the live pages pass `max_live_pages`. One op in
//! eight goes to the newer layers (vrealloc, hugetlb; `generate/layers.rs`;
//! the linear map's `set_memory_*`, `generate/pageattr.rs`), with their own
//! wrong calls among the wrong kinds.
//!
//! Generation never looks at the machine, so a sequence depends only on
//! its source: the same seed gives the same sequence on every host, and
//! [`decode`] turns fuzzer bytes into a sequence with the same model.
//! Whether a call really succeeds is for the executor: a call whose
//! handle did not get bound is skipped there.

use super::op::{Call, Handle, HandleKind, Op, Ref, Sysctl};

mod hvo;
mod layers;
mod pageattr;
mod raw;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Gfp, MAX_PAGE_ORDER, PAGE_SIZE};

/// Where choices come from.
pub trait Source {
    /// Uniform-ish in `0..n` (n > 0); None when the source is exhausted.
    fn below(&mut self, n: u64) -> Option<u64>;
}

impl Source for Xoshiro256StarStar {
    fn below(&mut self, n: u64) -> Option<u64> {
        Some(Xoshiro256StarStar::below(self, n))
    }
}

/// Choices read from a byte string (libFuzzer input): each choice takes
/// one byte, or two when `n` exceeds 256.
#[derive(Debug)]
pub struct ByteSource<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> ByteSource<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        ByteSource { data, pos: 0 }
    }
}

impl Source for ByteSource<'_> {
    fn below(&mut self, n: u64) -> Option<u64> {
        let width = if n > 256 { 2 } else { 1 };
        let bytes = self.data.get(self.pos..self.pos + width)?;
        self.pos += width;
        let v = bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        Some(v % n)
    }
}

/// The gfp types allocations are drawn from.
pub const GFPS: [Gfp; 6] = [
    Gfp::GFP_KERNEL,
    Gfp::GFP_HIGHUSER_MOVABLE,
    Gfp::GFP_KERNEL.union(Gfp::__GFP_RECLAIMABLE),
    Gfp::GFP_ATOMIC,
    Gfp::GFP_NOWAIT,
    Gfp::GFP_KERNEL.union(Gfp::__GFP_ZERO),
];

/// What the generator may produce.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// CPUs of the machine.
    pub nr_cpus: usize,
    /// Page budget of the live handles (frees forced above it).
    pub max_live_pages: u64,
    /// Wrong calls mixed in, per 64 ops (0: none).
    pub wrong_per_64: u64,
    /// Wrong-call kinds left out (names as in [`WRONG_KINDS`]).
    pub exclude: Vec<String>,
    /// The machine has HVO (`hugetlb_optimize_vmemmap=on` with
    /// `hugetlb_vmemmap.arm64=pause|unsafe`): HVO calls and their wrong
    /// kinds are made (without it the sequence is as it was before them).
    pub hvo: bool,
    /// A frame the boot reserved, for wrong frees and remaps: the last
    /// frame of RAM, which memblock's top-down allocations take first
    /// ([`reserved_pfn`]). None: no such wrong call.
    pub reserved_pfn: Option<u64>,
}

/// The last frame of RAM of `--mem` banks (`SIZE[@BASE],...`), which the
/// boot reserves: memblock allocates from the top of memory down, and its
/// first allocations (the memmap, the pageblock flags) are there.
pub fn reserved_pfn(mem: &str) -> Option<u64> {
    let banks = mmlab_engine::mm::banks::parse_mem(mem).ok()?;
    let end = banks.iter().map(|b| b.end()).max()?;
    (end >> mmlab_engine::PAGE_SHIFT).checked_sub(1)
}

/// Names of the wrong-call kinds (for `--exclude`).
pub const WRONG_KINDS: [&str; 37] = [
    "double_free",
    "wrong_order",
    "tail_page",
    "bogus_pfn",
    "order_too_large",
    "vfree_inside",
    "vfree_bogus",
    "vfree_twice",
    "vfree_after_kvfree_rcu",
    "vfree_vmap",
    "vunmap_vmalloc",
    "vm_unmap_ram_twice",
    "vm_unmap_ram_wrong_count",
    "bad_sysctl",
    "bad_size",
    "size_overflow",
    "unmap_range_partial",
    "vrealloc_wrong_kind",
    "vrealloc_freed",
    "vrealloc_inside",
    "vrealloc_too_large",
    "hugetlb_bad_store",
    "free_huge_folio_twice",
    "hugetlb_unreserve_too_many",
    "set_memory_unaligned",
    "set_memory_bad_range",
    "set_memory_not_mapped",
    "map_range_remap",
    "map_range_outside",
    "set_cont_ptes_bad",
    "pci_remap_iospace_again",
    "dma_remap_unallocated",
    "foreign_cpu",
    // HVO's, drawn only with HVO on (generate/hvo.rs), kept last.
    "hvo_restore_not_optimized",
    "hvo_optimize_twice",
    "hvo_not_optimizable",
    "hvo_freed_folio",
];

#[derive(Clone, Debug)]
struct PageUnits {
    h: Handle,
    /// (order, extra references, live) per unit.
    units: Vec<(u32, u32, bool)>,
    /// How many of `units` are not live.
    dead: u32,
    bulk: bool,
}

/// What the generator holds in the newer layers (their calls are made
/// in `generate/layers.rs`).
#[derive(Clone, Debug, Default)]
struct LayerModel {
    /// Reservations and their pages not yet faulted in.
    resv: Vec<(Handle, mmlab_hugetlb::HugePageSize, u64)>,
    /// Folios handed out.
    folios: Vec<Handle>,
    dead_folios: Vec<Handle>,
    /// Page units whose linear-map permissions a call changed.
    perms: Vec<Changed>,
    /// Folios handed out, their sizes, and whether assumed optimized
    /// (HVO on only; `generate/hvo.rs`).
    hvo: Vec<(Handle, mmlab_hugetlb::HugePageSize, bool)>,
    /// The `nr_hugepages` last written per size ([`mmlab_hugetlb::HugePageSize::index`]).
    pool_target: [u64; 4],
}

/// A unit whose permissions a call changed.
#[derive(Clone, Copy, Debug)]
struct Changed {
    h: Handle,
    unit: u32,
    /// Pages from the unit's head.
    nr: u64,
    flags: u8,
}

/// The wrong-call kinds of HVO (last in `WRONG_KINDS`; drawn only with HVO
/// on).
const HVO_WRONG_KINDS: [&str; 4] =
    ["hvo_restore_not_optimized", "hvo_optimize_twice", "hvo_not_optimizable", "hvo_freed_folio"];

/// The generator and its model.
#[derive(Debug)]
pub struct Generator {
    cfg: GenConfig,
    next_id: u32,
    pages: Vec<PageUnits>,
    dead_pages: Vec<(Handle, u32)>,
    vmallocs: Vec<(Handle, u64)>,
    /// Freed vmalloc handles, and whether by kvfree_rcu.
    dead_vmallocs: Vec<(Handle, bool)>,
    vmaps: Vec<Handle>,
    dead_vmaps: Vec<Handle>,
    maprams: Vec<(Handle, u64)>,
    dead_maprams: Vec<(Handle, u64)>,
    percpus: Vec<Handle>,
    dead_percpus: Vec<Handle>,
    /// map_range mappings and the order of the block they map (and the
    /// PCI I/O windows, which are also in `pio`).
    tables: Vec<(Handle, u32)>,
    /// PCI I/O windows mapped (`pci_remap_iospace`), by their port.
    pio: Vec<(Handle, u64)>,
    live_pages: u64,
    /// The model of the newer layers' calls (vrealloc, hugetlb).
    layers: LayerModel,
}

/// A random element: None when the source ran dry, Some(None) when `v`
/// is empty.
fn pick<T: Clone>(s: &mut dyn Source, v: &[T]) -> Option<Option<T>> {
    if v.is_empty() {
        return Some(None);
    }
    Some(Some(v[s.below(v.len() as u64)? as usize].clone()))
}

fn push_dead<T>(v: &mut Vec<T>, x: T) {
    if v.len() >= 16 {
        v.remove(0);
    }
    v.push(x);
}

impl Generator {
    pub fn new(cfg: GenConfig) -> Generator {
        Generator {
            cfg,
            next_id: 1,
            pages: Vec::new(),
            dead_pages: Vec::new(),
            vmallocs: Vec::new(),
            dead_vmallocs: Vec::new(),
            vmaps: Vec::new(),
            dead_vmaps: Vec::new(),
            maprams: Vec::new(),
            dead_maprams: Vec::new(),
            percpus: Vec::new(),
            dead_percpus: Vec::new(),
            tables: Vec::new(),
            pio: Vec::new(),
            live_pages: 0,
            layers: LayerModel::default(),
        }
    }

    /// Follow what the executor did with `op`, the op this generator made
    /// last: a handle the call did not bind (the allocation failed) leaves
    /// the model, with the pages it counted and the reservation page a
    /// failed fault took; an `alloc_pages_bulk` that filled `n` of its
    /// pages keeps `n` units. Without it, every later call on such a handle
    /// is skipped (`decode_with`, which runs no executor, has no feedback).
    pub fn observe(&mut self, op: &Op, bound: Option<usize>) {
        let Some(h) = op.binds() else { return };
        match (&op.call, bound) {
            (Call::AllocPagesBulk { .. }, Some(n)) => {
                if let Some(p) = self.pages.iter_mut().rev().find(|p| p.h == h)
                    && n < p.units.len()
                {
                    self.live_pages -= (p.units.len() - n) as u64;
                    p.units.truncate(n);
                    p.dead = p.units.iter().filter(|u| !u.2).count() as u32;
                }
            }
            (_, Some(_)) => {}
            (call, None) => self.forget(call, h),
        }
    }

    /// Drop `h`, which `call` did not bind, from the model.
    fn forget(&mut self, call: &Call, h: Handle) {
        match call {
            Call::AllocPages { .. } | Call::AllocPagesBulk { .. } => {
                self.forget_perms(h);
                if let Some(i) = self.pages.iter().rposition(|p| p.h == h) {
                    let p = self.pages.remove(i);
                    self.live_pages -= p.units.iter().filter(|u| u.2).map(|u| 1u64 << u.0).sum::<u64>();
                }
            }
            Call::Vmalloc { .. } | Call::Vzalloc { .. } | Call::VmallocHuge { .. } | Call::VmallocNode { .. } => {
                if let Some(i) = self.vmallocs.iter().rposition(|v| v.0 == h) {
                    let (_, size) = self.vmallocs.remove(i);
                    self.live_pages -= size.div_ceil(PAGE_SIZE);
                }
            }
            Call::Vmap { .. } => self.vmaps.retain(|v| *v != h),
            Call::VmMapRam { .. } => self.maprams.retain(|v| v.0 != h),
            Call::AllocPercpu { .. } => self.percpus.retain(|v| *v != h),
            Call::MapRange { .. } | Call::PciRemapIospace { .. } => {
                self.tables.retain(|v| v.0 != h);
                self.pio.retain(|v| v.0 != h);
            }
            Call::HugetlbReserve { .. } => self.layers.resv.retain(|v| v.0 != h),
            Call::AllocHugetlbFolio { resv, .. } => {
                self.layers.folios.retain(|v| *v != h);
                self.hvo_forget_folio(h);
                if let Some(r) = resv
                    && let Some(v) = self.layers.resv.iter_mut().find(|v| v.0 == *r)
                {
                    v.2 += 1;
                }
            }
            _ => {}
        }
    }

    fn handle(&mut self, kind: HandleKind) -> Handle {
        let h = Handle { kind, id: self.next_id };
        self.next_id += 1;
        h
    }

    fn allowed(&self, kind: &str) -> bool {
        !self.cfg.exclude.iter().any(|e| e == kind)
    }

    /// The next op, or None when the source ran dry.
    pub fn next_op(&mut self, s: &mut dyn Source) -> Option<Op> {
        let cpu = s.below(self.cfg.nr_cpus as u64)? as usize;
        if self.cfg.wrong_per_64 > 0 && s.below(64)? < self.cfg.wrong_per_64 {
            // HVO's kinds are last, and drawn only with HVO on.
            let n = if self.cfg.hvo { WRONG_KINDS.len() } else { WRONG_KINDS.len() - HVO_WRONG_KINDS.len() };
            let kind = WRONG_KINDS[s.below(n as u64)? as usize];
            if self.allowed(kind)
                && let Some(op) = self.wrong(s, cpu, kind)?
            {
                return Some(op);
            }
        }
        // One op in eight calls into the newer layers.
        if s.below(8)? == 0
            && let Some(call) = self.layer_call(s)?
        {
            return Some(Op::new(cpu, call));
        }
        for attempt in 0.. {
            // Above the budget, frees are forced (pages or vmalloc areas);
            // after a few draws with nothing to free, anything goes.
            if let Some(call) = self.right(s, attempt < 8)? {
                return Some(Op::new(cpu, call));
            }
        }
        None
    }

    /// A size in bytes: mostly 1..=64 pages, sometimes up to 2 MiB + a bit
    /// (huge mappings), sometimes not page-aligned.
    fn size(s: &mut dyn Source) -> Option<u64> {
        let pages = match s.below(8)? {
            0..=4 => 1 + s.below(16)?,
            5 | 6 => 1 + s.below(64)?,
            _ => 1 + s.below(600)?,
        };
        let odd = if s.below(4)? == 0 { s.below(PAGE_SIZE)? } else { 0 };
        Some((pages * PAGE_SIZE).saturating_sub(odd).max(1))
    }

    /// A right call, or None to draw again.
    fn right(&mut self, s: &mut dyn Source, force_free: bool) -> Option<Option<Call>> {
        let over = force_free && self.live_pages > self.cfg.max_live_pages;
        let class = if over { [40, 45, 50, 55, 68, 72][s.below(6)? as usize] } else { s.below(100)? };
        Some(match class {
            0..=21 => {
                let order = match s.below(10)? {
                    0..=5 => 0,
                    6 | 7 => 1 + s.below(3)? as u32,
                    _ => s.below(u64::from(MAX_PAGE_ORDER) + 1)? as u32,
                };
                let gfp = GFPS[s.below(GFPS.len() as u64)? as usize];
                let out = self.handle(HandleKind::Pages);
                self.pages.push(PageUnits { h: out, units: vec![(order, 0, true)], dead: 0, bulk: false });
                self.live_pages += 1 << order;
                Some(Call::AllocPages { order, gfp, out })
            }
            22..=25 => {
                let nr = 1 + s.below(32)? as u32;
                let gfp = GFPS[s.below(3)? as usize];
                let out = self.handle(HandleKind::Pages);
                self.pages.push(PageUnits { h: out, units: vec![(0, 0, true); nr as usize], dead: 0, bulk: true });
                self.live_pages += u64::from(nr);
                Some(Call::AllocPagesBulk { nr, gfp, out })
            }
            26..=28 => {
                // get_page on a live unit (the next free drops the extra ref).
                let Some(i) = self.live_page_index(s)? else { return Some(None) };
                let u = self.pick_live_unit(s, i)?;
                let p = &mut self.pages[i];
                p.units[u].1 += 1;
                Some(Call::GetPage { page: unit_ref(p, u) })
            }
            29..=31 => {
                // split_page of a live, unsplit block of order > 0 without extra refs.
                let cands: Vec<usize> = (0..self.pages.len())
                    .filter(|&i| {
                        let p = &self.pages[i];
                        !p.bulk
                            && p.units.len() == 1
                            && p.units[0].2
                            && p.units[0].0 > 0
                            && p.units[0].1 == 0
                            && !self.perms_changed(p.h)
                    })
                    .collect();
                let Some(i) = pick(s, &cands)? else { return Some(None) };
                let p = &mut self.pages[i];
                let order = p.units[0].0;
                p.units = vec![(0, 0, true); 1 << order];
                p.dead = 0;
                Some(Call::SplitPage { page: Ref::Whole(p.h), order })
            }
            32 => Some(Call::DrainLocalPages),
            33 => Some(Call::DrainAllPages),
            34 | 35 => Some(Call::DecayPcpHigh),
            36 => {
                let v = [0, 8, 10, 16, 100, 1000][s.below(6)? as usize];
                Some(Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v)))
            }
            37 => {
                let v = [128, 256, 512, 1024, 2048][s.below(5)? as usize];
                Some(Call::Sysctl(Sysctl::MinFreeKbytes(v)))
            }
            // A check walks all of memory (millions of instructions on
            // 64M): about one op in 90,000, beside the run's periodic
            // checks (--check-every).
            38 | 39 => Some(Call::Check).filter(|_| s.below(1024) == Some(0)),
            40..=57 => {
                // Free a live unit at its order (or release a bulk handle);
                // permissions changed by set_memory_* are given back first.
                let Some(i) = self.live_page_index(s)? else { return Some(None) };
                if let Some(call) = self.restore(self.pages[i].h) {
                    return Some(Some(call));
                }
                if self.pages[i].bulk && s.below(3)? == 0 {
                    let p = self.pages.remove(i);
                    let n = p.units.iter().filter(|u| u.2).count() as u64;
                    self.live_pages -= n;
                    push_dead(&mut self.dead_pages, (p.h, 0));
                    return Some(Some(Call::ReleasePages { page: p.h }));
                }
                let u = self.pick_live_unit(s, i)?;
                let p = &mut self.pages[i];
                let (order, refs, _) = p.units[u];
                let r = unit_ref(p, u);
                if refs > 0 {
                    // Drops the extra reference; a block keeps only its head.
                    p.units[u] = (0, refs - 1, true);
                    self.live_pages -= (1 << order) - 1;
                } else {
                    if p.units[u].2 {
                        p.units[u].2 = false;
                        p.dead += 1;
                    }
                    self.live_pages -= 1 << order;
                    if u == 0 && p.units.len() == 1 {
                        push_dead(&mut self.dead_pages, (p.h, order));
                    }
                    if p.dead as usize == p.units.len() {
                        self.pages.remove(i);
                    }
                }
                Some(Call::FreePages { page: r, order })
            }
            58..=67 => {
                let size = Self::size(s)?;
                let out = self.handle(HandleKind::Vmalloc);
                let call = match s.below(8)? {
                    0..=3 => Call::Vmalloc { size, out },
                    4 => Call::Vzalloc { size, out },
                    5 | 6 => Call::VmallocHuge { size, gfp: GFPS[s.below(2)? as usize], out },
                    _ => {
                        let align = PAGE_SIZE << s.below(6)?;
                        Call::VmallocNode { size, align, gfp: Gfp::GFP_KERNEL, out }
                    }
                };
                self.live_pages += size.div_ceil(PAGE_SIZE);
                self.vmallocs.push((out, size));
                Some(call)
            }
            68..=75 => {
                let Some(i) = pick(s, &(0..self.vmallocs.len()).collect::<Vec<_>>())? else { return Some(None) };
                let (h, size) = self.vmallocs.swap_remove(i);
                self.live_pages -= size.div_ceil(PAGE_SIZE);
                let kv = s.below(4)? == 0;
                push_dead(&mut self.dead_vmallocs, (h, kv));
                if kv {
                    Some(Call::KvfreeRcu { area: Ref::Whole(h) })
                } else {
                    Some(Call::Vfree { area: Ref::Whole(h) })
                }
            }
            76..=79 => {
                let n = 1 + s.below(8)? as usize;
                let pages = self.some_live_pages(s, n)?;
                if pages.is_empty() {
                    return Some(None);
                }
                if s.below(2)? == 0 {
                    let out = self.handle(HandleKind::Vmap);
                    self.vmaps.push(out);
                    Some(Call::Vmap { pages, out })
                } else {
                    let out = self.handle(HandleKind::MapRam);
                    self.maprams.push((out, pages.len() as u64));
                    Some(Call::VmMapRam { pages, out })
                }
            }
            80..=83 => {
                if s.below(2)? == 0 {
                    let Some(i) = pick(s, &(0..self.vmaps.len()).collect::<Vec<_>>())? else { return Some(None) };
                    let h = self.vmaps.swap_remove(i);
                    push_dead(&mut self.dead_vmaps, h);
                    Some(Call::Vunmap { area: Ref::Whole(h) })
                } else {
                    let Some(i) = pick(s, &(0..self.maprams.len()).collect::<Vec<_>>())? else {
                        return Some(None);
                    };
                    let (h, n) = self.maprams.swap_remove(i);
                    push_dead(&mut self.dead_maprams, (h, n));
                    Some(Call::VmUnmapRam { area: Ref::Whole(h), count: n })
                }
            }
            84..=87 => {
                let size = [4, 8, 16, 64, 256, 1000, 4096][s.below(7)? as usize];
                let align = [0, 8, 16, 64, 4096][s.below(5)? as usize];
                let out = self.handle(HandleKind::Percpu);
                self.percpus.push(out);
                Some(Call::AllocPercpu { size, align, out })
            }
            88..=90 => {
                let Some(i) = pick(s, &(0..self.percpus.len()).collect::<Vec<_>>())? else { return Some(None) };
                let h = self.percpus.swap_remove(i);
                push_dead(&mut self.dead_percpus, h);
                Some(Call::FreePercpu { ptr: Ref::Whole(h) })
            }
            91 => Some(Call::KvfreeRcuBarrier),
            92 | 93 => Some(Call::PurgeVmapAreaLazy),
            95 if self.allowed("pci_iospace") && s.below(4)? == 0 => self.pci_remap_iospace(s)?,
            94 | 95 => {
                // map_range of a live unit's block at a scratch VA.
                let Some(i) = self.live_page_index(s)? else { return Some(None) };
                let u = self.pick_live_unit(s, i)?;
                let p = &self.pages[i];
                let (order, r) = (p.units[u].0, unit_ref(p, u));
                let out = self.handle(HandleKind::Table);
                self.tables.push((out, order));
                Some(Call::MapRange { page: r, out })
            }
            96 => {
                let Some(i) = pick(s, &(0..self.tables.len()).collect::<Vec<_>>())? else { return Some(None) };
                let (h, _) = self.tables.swap_remove(i);
                self.pio.retain(|p| p.0 != h);
                Some(Call::UnmapRange { map: Ref::Whole(h) })
            }
            _ => {
                // Bias towards allocation again (order 0, the common case).
                let gfp = GFPS[s.below(3)? as usize];
                let out = self.handle(HandleKind::Pages);
                self.pages.push(PageUnits { h: out, units: vec![(0, 0, true)], dead: 0, bulk: false });
                self.live_pages += 1;
                Some(Call::AllocPages { order: 0, gfp, out })
            }
        })
    }

    // The pickers below build no list of candidates: they run for most ops.

    /// Index of a page handle with a live unit.
    fn live_page_index(&self, s: &mut dyn Source) -> Option<Option<usize>> {
        // A handle leaves `pages` when its last live unit goes, so every
        // entry is a candidate.
        if self.pages.is_empty() {
            return Some(None);
        }
        Some(Some(s.below(self.pages.len() as u64)? as usize))
    }

    fn pick_live_unit(&self, s: &mut dyn Source, i: usize) -> Option<usize> {
        let units = &self.pages[i].units;
        let n = units.len() - self.pages[i].dead as usize;
        debug_assert_eq!(n, units.iter().filter(|u| u.2).count(), "the dead count of {}", self.pages[i].h);
        if n == 0 {
            return Some(0);
        }
        let k = s.below(n as u64)? as usize;
        // Every unit live (a block, or a split one none of whose pages was
        // freed yet): the k-th live unit is unit k.
        if n == units.len() {
            return Some(k);
        }
        Some(units.iter().enumerate().filter(|(_, u)| u.2).nth(k).map_or(0, |(u, _)| u))
    }

    /// Up to `n` references to live units: each a live unit of a random
    /// page handle (no list of every unit is built: vmap and vm_map_ram
    /// run often enough that it cost more than the calls).
    fn some_live_pages(&mut self, s: &mut dyn Source, n: usize) -> Option<Vec<Ref>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(i) = self.live_page_index(s)? else { break };
            let u = self.pick_live_unit(s, i)?;
            let r = unit_ref(&self.pages[i], u);
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Some(out)
    }

    /// A wrong call of `kind`, or None if there is nothing to build it on.
    fn wrong(&mut self, s: &mut dyn Source, cpu: usize, kind: &str) -> Option<Option<Op>> {
        let call = match kind {
            "double_free" => {
                let Some((h, order)) = pick(s, &self.dead_pages)? else { return Some(None) };
                Call::FreePages { page: Ref::Whole(h), order }
            }
            "wrong_order" | "tail_page" => {
                let cands: Vec<usize> = (0..self.pages.len())
                    .filter(|&i| {
                        let p = &self.pages[i];
                        !p.bulk && p.units.len() == 1 && p.units[0].2
                    })
                    .collect();
                let Some(i) = pick(s, &cands)? else { return Some(None) };
                let p = &self.pages[i];
                let order = p.units[0].0;
                if kind == "tail_page" {
                    if order == 0 {
                        return Some(None);
                    }
                    let k = 1 + s.below((1 << order) - 1)?;
                    Call::FreePages { page: Ref::Offset(p.h, k), order: s.below(u64::from(order) + 1)? as u32 }
                } else {
                    let wrong = (order + 1 + s.below(u64::from(MAX_PAGE_ORDER))? as u32) % (MAX_PAGE_ORDER + 1);
                    if s.below(2)? == 0 {
                        Call::FreePages { page: Ref::Whole(p.h), order: wrong }
                    } else {
                        Call::SplitPage { page: Ref::Whole(p.h), order: wrong }
                    }
                }
            }
            "bogus_pfn" => {
                let reserved = self.cfg.reserved_pfn.unwrap_or(1);
                let pfn = [0, 1, 0x3ffff, u64::MAX >> 12, u64::MAX, reserved][s.below(6)? as usize];
                match s.below(3)? {
                    0 => Call::GetPage { page: Ref::Raw(pfn) },
                    1 => Call::SplitPage { page: Ref::Raw(pfn), order: 0 },
                    _ => Call::FreePages { page: Ref::Raw(pfn), order: 0 },
                }
            }
            "order_too_large" => {
                let order = [MAX_PAGE_ORDER + 1, 12, 31, 64, u32::MAX][s.below(5)? as usize];
                if s.below(2)? == 0 {
                    let out = self.handle(HandleKind::Pages);
                    Call::AllocPages { order, gfp: Gfp::GFP_KERNEL, out }
                } else {
                    let Some(i) = self.live_page_index(s)? else { return Some(None) };
                    Call::FreePages { page: Ref::Whole(self.pages[i].h), order }
                }
            }
            "vfree_inside" => {
                let Some((h, size)) = pick(s, &self.vmallocs)? else { return Some(None) };
                if size <= 1 {
                    return Some(None);
                }
                Call::Vfree { area: Ref::Offset(h, 1 + s.below(size - 1)?) }
            }
            "vfree_bogus" => {
                let addr = [0, 0x1234_5000, 0xffff_0000_0000_0000, !0xfff][s.below(4)? as usize];
                match s.below(3)? {
                    0 => Call::Vfree { area: Ref::Raw(addr) },
                    1 => Call::Vunmap { area: Ref::Raw(addr) },
                    _ => Call::FreePercpu { ptr: Ref::Raw(addr) },
                }
            }
            "vfree_twice" => {
                if s.below(3)? == 0 {
                    let Some(h) = pick(s, &self.dead_percpus)? else { return Some(None) };
                    Call::FreePercpu { ptr: Ref::Whole(h) }
                } else {
                    let vfreed: Vec<Handle> =
                        self.dead_vmallocs.iter().filter(|(_, kv)| !kv).map(|(h, _)| *h).collect();
                    let Some(h) = pick(s, &vfreed)? else { return Some(None) };
                    if s.below(2)? == 0 {
                        Call::Vfree { area: Ref::Whole(h) }
                    } else {
                        Call::KvfreeRcu { area: Ref::Whole(h) }
                    }
                }
            }
            "vfree_after_kvfree_rcu" => {
                // The object is queued by kvfree_rcu (or freed by it since).
                let queued: Vec<Handle> = self.dead_vmallocs.iter().filter(|(_, kv)| *kv).map(|(h, _)| *h).collect();
                let Some(h) = pick(s, &queued)? else { return Some(None) };
                if s.below(2)? == 0 {
                    Call::Vfree { area: Ref::Whole(h) }
                } else {
                    Call::KvfreeRcu { area: Ref::Whole(h) }
                }
            }
            "vfree_vmap" => {
                let Some(h) = pick(s, &self.vmaps)? else { return Some(None) };
                if s.below(2)? == 0 {
                    Call::Vfree { area: Ref::Whole(h) }
                } else {
                    Call::KvfreeRcu { area: Ref::Whole(h) }
                }
            }
            "vunmap_vmalloc" => {
                if s.below(2)? == 0 {
                    let Some((h, _)) = pick(s, &self.vmallocs)? else { return Some(None) };
                    Call::Vunmap { area: Ref::Whole(h) }
                } else {
                    let Some(h) = pick(s, &self.dead_vmaps)? else { return Some(None) };
                    Call::Vunmap { area: Ref::Whole(h) }
                }
            }
            "vm_unmap_ram_twice" => {
                let Some((h, n)) = pick(s, &self.dead_maprams)? else { return Some(None) };
                Call::VmUnmapRam { area: Ref::Whole(h), count: n }
            }
            "vm_unmap_ram_wrong_count" => {
                let Some((h, n)) = pick(s, &self.maprams)? else { return Some(None) };
                let wrong = [0, n + 1, n * 2 + 1, 65, n.saturating_sub(1)][s.below(5)? as usize];
                if wrong == n {
                    return Some(None);
                }
                Call::VmUnmapRam { area: Ref::Whole(h), count: wrong }
            }
            "bad_sysctl" => match s.below(2)? {
                0 => Call::Sysctl(Sysctl::PercpuPagelistHighFraction(1 + s.below(7)? as u32)),
                _ => Call::Sysctl(Sysctl::MinFreeKbytes(
                    mmlab_pcp::MIN_FREE_KBYTES_MAX + 1 + [0, 1 << 40, u64::MAX >> 1][s.below(3)? as usize],
                )),
            },
            "bad_size" => {
                let out = self.handle(HandleKind::Vmalloc);
                let size = [0, 1 << 40, 1 << 46][s.below(3)? as usize];
                match s.below(4)? {
                    0 => Call::Vmalloc { size, out },
                    // Not a power of two; larger than the vmalloc range.
                    1 => {
                        let align = [3 * PAGE_SIZE, 1 << 62][s.below(2)? as usize];
                        Call::VmallocNode { size: PAGE_SIZE, align, gfp: Gfp::GFP_KERNEL, out }
                    }
                    2 => Call::Vmap { pages: Vec::new(), out: Handle { kind: HandleKind::Vmap, id: out.id } },
                    _ => Call::AllocPercpu {
                        size: [0, 1 << 20][s.below(2)? as usize],
                        align: 8,
                        out: Handle { kind: HandleKind::Percpu, id: out.id },
                    },
                }
            }
            "unmap_range_partial" => {
                // Part of a mapping of 16 pages or more (contiguous runs or
                // blocks).
                let big: Vec<(Handle, u32)> = self.tables.iter().copied().filter(|(_, o)| *o >= 4).collect();
                let Some((h, order)) = pick(s, &big)? else { return Some(None) };
                Call::UnmapRange { map: Ref::Offset(h, 1 + s.below((1 << order) - 1)?) }
            }
            "size_overflow" => {
                // Sizes whose rounding up to a page (or more) overflows.
                let out = self.handle(HandleKind::Vmalloc);
                let size = [u64::MAX, u64::MAX - PAGE_SIZE + 2, u64::MAX - (1 << 20)][s.below(3)? as usize];
                match s.below(3)? {
                    0 => Call::Vmalloc { size, out },
                    1 => Call::VmallocHuge { size, gfp: Gfp::GFP_KERNEL, out },
                    _ => Call::VmallocNode { size, align: PAGE_SIZE, gfp: Gfp::GFP_KERNEL, out },
                }
            }
            "map_range_remap"
            | "map_range_outside"
            | "set_cont_ptes_bad"
            | "pci_remap_iospace_again"
            | "dma_remap_unallocated"
            | "foreign_cpu" => return self.wrong_raw(s, cpu, kind),
            k if k.starts_with("hvo_") => return self.wrong_hvo(s, k).map(|c| c.map(|call| Op::new(cpu, call))),
            _ => return self.wrong_layer(s, kind).map(|c| c.map(|call| Op::new(cpu, call))),
        };
        Some(Some(Op::new(cpu, call)))
    }
}

fn unit_ref(p: &PageUnits, u: usize) -> Ref {
    if u == 0 { Ref::Whole(p.h) } else { Ref::Unit(p.h, u as u32) }
}

/// Decode fuzzer bytes into an operation sequence (at most `max_ops`).
pub fn decode_with(data: &[u8], cfg: GenConfig, max_ops: usize) -> Vec<Op> {
    let mut src = ByteSource::new(data);
    let mut g = Generator::new(cfg);
    let mut ops = Vec::new();
    while ops.len() < max_ops {
        match g.next_op(&mut src) {
            Some(op) => ops.push(op),
            None => break,
        }
    }
    ops
}

/// [`decode_with`] for the default fuzz machine (2 CPUs, 4096 live pages,
/// wrong calls 8 in 64, at most 4096 ops).
pub fn decode(data: &[u8]) -> Vec<Op> {
    decode_with(
        data,
        GenConfig {
            nr_cpus: 2,
            max_live_pages: 4096,
            wrong_per_64: 8,
            exclude: Vec::new(),
            hvo: false,
            reserved_pfn: reserved_pfn("64M"),
        },
        4096,
    )
}
