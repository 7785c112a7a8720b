//! The operation model of `mmlab fuzz`: one [`Op`] is one call into the
//! emulated kernel, on one emulated CPU, written as one line of a replay
//! file.
//!
//! # The model
//!
//! An operation names the kernel function it calls (`alloc_pages`,
//! `vfree`, `vm_unmap_ram`, ...) and carries the CPU it runs on. Objects
//! are not addresses but named handles: an allocating call binds a handle
//! (`-> p4`), later calls refer to it (`free_pages p4 order=3`). A handle
//! is a name and nothing else, so a sequence stays meaningful as text and
//! after the shrinker has cut operations out of it: a call whose handle
//! was never bound (its allocation failed or was removed) is skipped.
//!
//! Handle letters: `p` page blocks (alloc_pages, alloc_pages_bulk), `v`
//! vmalloc areas, `m` vmap mappings, `r` vm_map_ram mappings, `c` percpu
//! objects, `t` map_range mappings, `h` hugetlb folios handed out by
//! `alloc_hugetlb_folio`, `s` hugetlb reservations. A page handle holds units: one block for `alloc_pages`, one
//! order-0 page per slot for `alloc_pages_bulk`, and 2^order order-0
//! pages after `split_page`. `pH` is unit 0, `pH.K` unit K, `pH+K` the
//! frame K pages after unit 0's head (a tail page, for wrong calls).
//! `vH+OFF` is a byte offset inside a vmalloc area (for wrong calls);
//! `tH+K` is K pages into a map_range mapping.
//!
//! A line starts with the CPU the call runs on (`cpu2`), or `foreign`: a
//! CPU handle of another machine in the same process, which every entry
//! point refuses (`ForeignCpu`).
//!
//! Printing and parsing are inverse: `parse_line(op.to_string())` gives
//! the op back, and printing that gives the same text.

use mmlab_engine::Gfp;
use std::fmt;

mod layers;
mod raw;
pub use layers::{HvoCall, SetMemory, StoreValue};
use mmlab_hugetlb::{HstateAttr, HugePageSize};

/// A handle name: a kind letter and a number (`p4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle {
    pub kind: HandleKind,
    pub id: u32,
}

/// What a handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HandleKind {
    /// Pages from the page allocator.
    Pages,
    /// A vmalloc area.
    Vmalloc,
    /// A vmap mapping.
    Vmap,
    /// A vm_map_ram mapping.
    MapRam,
    /// A percpu object.
    Percpu,
    /// A mapping made with map_range in the scratch region.
    Table,
    /// A hugetlb folio handed out by alloc_hugetlb_folio (a fault).
    HugeFolio,
    /// A hugetlb reservation (hugetlb_acct_memory), with its pages not
    /// yet consumed by a fault.
    Resv,
}

impl HandleKind {
    fn letter(self) -> char {
        match self {
            HandleKind::Pages => 'p',
            HandleKind::Vmalloc => 'v',
            HandleKind::Vmap => 'm',
            HandleKind::MapRam => 'r',
            HandleKind::Percpu => 'c',
            HandleKind::Table => 't',
            HandleKind::HugeFolio => 'h',
            HandleKind::Resv => 's',
        }
    }
    fn from_letter(c: char) -> Option<HandleKind> {
        Some(match c {
            'p' => HandleKind::Pages,
            'v' => HandleKind::Vmalloc,
            'm' => HandleKind::Vmap,
            'r' => HandleKind::MapRam,
            'c' => HandleKind::Percpu,
            't' => HandleKind::Table,
            'h' => HandleKind::HugeFolio,
            's' => HandleKind::Resv,
            _ => return None,
        })
    }
}

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.kind.letter(), self.id)
    }
}

/// A reference to (part of) a handle's object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ref {
    /// `pH` / `vH`: the object itself (unit 0 of a page handle).
    Whole(Handle),
    /// `pH.K`: unit K of a page handle.
    Unit(Handle, u32),
    /// `pH+K` (frames) or `vH+K` (bytes): K past the start.
    Offset(Handle, u64),
    /// `pfn=N` / `addr=N`: a raw number, not from any handle.
    Raw(u64),
}

impl Ref {
    /// The handle referred to, if any.
    pub fn handle(&self) -> Option<Handle> {
        match *self {
            Ref::Whole(h) | Ref::Unit(h, _) | Ref::Offset(h, _) => Some(h),
            Ref::Raw(_) => None,
        }
    }
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ref::Whole(h) => write!(f, "{h}"),
            Ref::Unit(h, k) => write!(f, "{h}.{k}"),
            Ref::Offset(h, k) => write!(f, "{h}+{k}"),
            Ref::Raw(n) => write!(f, "{n:#x}"),
        }
    }
}

/// A sysctl the fuzzer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sysctl {
    PercpuPagelistHighFraction(u32),
    MinFreeKbytes(u64),
}

/// One call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    AllocPages {
        order: u32,
        gfp: Gfp,
        out: Handle,
    },
    FreePages {
        page: Ref,
        order: u32,
    },
    AllocPagesBulk {
        nr: u32,
        gfp: Gfp,
        out: Handle,
    },
    /// Free every live unit of a page handle at order 0 (`release_pages`).
    ReleasePages {
        page: Handle,
    },
    GetPage {
        page: Ref,
    },
    SplitPage {
        page: Ref,
        order: u32,
    },
    DrainLocalPages,
    DrainAllPages,
    DecayPcpHigh,
    Sysctl(Sysctl),
    Vmalloc {
        size: u64,
        out: Handle,
    },
    Vzalloc {
        size: u64,
        out: Handle,
    },
    VmallocHuge {
        size: u64,
        gfp: Gfp,
        out: Handle,
    },
    VmallocNode {
        size: u64,
        align: u64,
        gfp: Gfp,
        out: Handle,
    },
    Vfree {
        area: Ref,
    },
    Vmap {
        pages: Vec<Ref>,
        out: Handle,
    },
    Vunmap {
        area: Ref,
    },
    VmMapRam {
        pages: Vec<Ref>,
        out: Handle,
    },
    VmUnmapRam {
        area: Ref,
        count: u64,
    },
    AllocPercpu {
        size: u64,
        align: u64,
        out: Handle,
    },
    FreePercpu {
        ptr: Ref,
    },
    KvfreeRcu {
        area: Ref,
    },
    KvfreeRcuBarrier,
    PurgeVmapAreaLazy,
    /// Map a page unit's block (2^order pages) at a scratch kernel VA in the
    /// modules region, with block and contiguous mappings allowed.
    MapRange {
        page: Ref,
        out: Handle,
    },
    /// Unmap a map_range mapping (`tH`), or from `tH+K` (K pages in) to its
    /// end, and flush the TLB.
    UnmapRange {
        map: Ref,
    },
    /// `vrealloc(p, size, gfp)` of a vmalloc area (`vH`, or `addr=`):
    /// resized in place or moved; size 0 frees it.
    Vrealloc {
        area: Ref,
        size: u64,
        gfp: Gfp,
    },
    /// A write to `/sys/kernel/mm/hugepages/hugepages-<size>kB/<attr>`
    /// (`hugepages-2048kB/nr_hugepages=4`).
    HugetlbStore {
        size: mmlab_hugetlb::HugePageSize,
        attr: mmlab_hugetlb::HstateAttr,
        value: StoreValue,
    },
    /// `hugetlb_acct_memory(+nr)`: reserve `nr` huge pages (as
    /// `hugetlb_reserve_pages` does for a new mapping).
    HugetlbReserve {
        size: mmlab_hugetlb::HugePageSize,
        nr: u64,
        out: Handle,
    },
    /// `hugetlb_acct_memory(-n)`: give back the unused pages of a
    /// reservation (`sH`), or `nr` pages of `size` not held by any handle
    /// (`size=2M nr=N`, a wrong call when N exceeds what is reserved).
    HugetlbUnreserve {
        resv: ResvRef,
    },
    /// `alloc_hugetlb_folio()`: a fault of one huge page, consuming a page
    /// of reservation `resv` when given.
    AllocHugetlbFolio {
        size: mmlab_hugetlb::HugePageSize,
        resv: Option<Handle>,
        out: Handle,
    },
    /// `free_huge_folio()`: the last unmap of a folio handed out.
    FreeHugeFolio {
        folio: Handle,
    },
    /// `set_memory_ro/rw/nx/x(addr, nr)` on the linear map: `addr` is the
    /// linear-map address of a page reference (`page_address()`) plus
    /// `off` bytes, or a raw `addr=`.
    SetMemory {
        how: SetMemory,
        addr: Ref,
        off: u64,
        nr: u64,
    },
    /// HVO of folios hugetlb holds (`hvo_optimize h3`,
    /// `hvo_restore_folios h3,2M@0`): see [`HvoCall`].
    Hvo {
        call: HvoCall,
        folios: Vec<FolioRef>,
    },
    /// A speculative PFN walker over a folio's struct pages
    /// (`vmemmap::walker::scan_folio`).
    PfnWalker {
        folio: FolioRef,
    },
    /// `map_range` of a page unit's block at an address the op names
    /// (`va=tH`: a live mapping's, so break-before-make; `va=0x...`: a raw
    /// address): wrong calls only, it binds nothing (op/raw.rs).
    MapRangeAt {
        page: Ref,
        va: Ref,
    },
    /// `set_cont_ptes(ptep, va, pa)`: one contiguous run of 16 PTEs at a
    /// raw slot; wrong calls only (op/raw.rs).
    SetContPtes {
        ptep: u64,
        va: u64,
        pa: u64,
    },
    /// `pci_remap_iospace(port, size, phys)`: map I/O ports at
    /// `PCI_IO_START + port` (a `t` mapping; `unmap_range` is
    /// `pci_unmap_iospace()`), or a wrong window (op/raw.rs).
    PciRemapIospace {
        port: u64,
        size: u64,
        phys: u64,
        out: Handle,
    },
    /// `dma_common_contiguous_remap(page, count)` of frames not all
    /// allocated; wrong calls only (op/raw.rs).
    DmaRemap {
        page: Ref,
        count: u64,
    },
    /// Run every invariant check now.
    Check,
}

/// [`Op::cpu`] of an op made with a CPU handle of another machine in the
/// same process (`foreign` in place of `cpuN`): every entry point must
/// refuse it (`ForeignCpu`) before touching anything.
pub const FOREIGN_CPU: usize = usize::MAX;

/// One operation: a call on a CPU, with an optional expected outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub cpu: usize,
    pub call: Call,
    /// `expect=NAME`: the outcome the call must have ([`super::oracle::Outcome`]
    /// names: `Ok`, `DoubleFree`, ...). None: whatever the oracle allows.
    pub expect: Option<String>,
    /// `fail_nth=N[,M...]`: with fail_page_alloc armed, fail the N-th
    /// allocation request of this op that passes its filters (then the
    /// M-th after that), as `/proc/self/task/<tid>/fail-nth` does; a fuzz
    /// run records the failures it injected this way (empty: none).
    pub fail_nth: Vec<u32>,
}

impl Op {
    /// `check` runs on no CPU in particular: it is kept as CPU 0, so that
    /// it prints and parses back the same.
    pub fn new(cpu: usize, call: Call) -> Op {
        let cpu = if call == Call::Check { 0 } else { cpu };
        Op { cpu, call, expect: None, fail_nth: Vec::new() }
    }

    /// The kernel name of the call (also the coverage key).
    pub fn name(&self) -> &'static str {
        self.call.name()
    }

    /// The handle this op binds.
    pub fn binds(&self) -> Option<Handle> {
        match &self.call {
            Call::AllocPages { out, .. }
            | Call::AllocPagesBulk { out, .. }
            | Call::Vmalloc { out, .. }
            | Call::Vzalloc { out, .. }
            | Call::VmallocHuge { out, .. }
            | Call::VmallocNode { out, .. }
            | Call::Vmap { out, .. }
            | Call::VmMapRam { out, .. }
            | Call::AllocPercpu { out, .. }
            | Call::MapRange { out, .. }
            | Call::PciRemapIospace { out, .. }
            | Call::HugetlbReserve { out, .. }
            | Call::AllocHugetlbFolio { out, .. } => Some(*out),
            _ => None,
        }
    }

    /// The handles this op uses.
    pub fn uses(&self) -> Vec<Handle> {
        let mut v = Vec::new();
        self.for_each_use(|h| v.push(h));
        v
    }

    /// Visit the handles this op uses (as [`Op::uses`], without a Vec: the
    /// executor asks for every op).
    pub fn for_each_use(&self, mut f: impl FnMut(Handle)) {
        let mut one = |r: &Ref| {
            if let Some(h) = r.handle() {
                f(h);
            }
        };
        match &self.call {
            Call::FreePages { page, .. } | Call::GetPage { page } | Call::SplitPage { page, .. } => one(page),
            Call::ReleasePages { page } => one(&Ref::Whole(*page)),
            Call::Vfree { area } | Call::Vunmap { area } | Call::VmUnmapRam { area, .. } | Call::KvfreeRcu { area } => {
                one(area)
            }
            Call::FreePercpu { ptr } => one(ptr),
            Call::MapRange { page, .. } | Call::DmaRemap { page, .. } => one(page),
            Call::MapRangeAt { page, va } => {
                one(page);
                one(va)
            }
            Call::UnmapRange { map } => one(map),
            Call::Vmap { pages, .. } | Call::VmMapRam { pages, .. } => pages.iter().for_each(one),
            Call::Vrealloc { area, .. } => one(area),
            Call::SetMemory { addr, .. } => one(addr),
            Call::HugetlbUnreserve { resv: ResvRef::Handle(h) } | Call::AllocHugetlbFolio { resv: Some(h), .. } => {
                one(&Ref::Whole(*h))
            }
            Call::FreeHugeFolio { folio } => one(&Ref::Whole(*folio)),
            Call::Hvo { folios, .. } => folios.iter().for_each(|r| {
                if let FolioRef::Handle(h) = r {
                    one(&Ref::Whole(*h))
                }
            }),
            Call::PfnWalker { folio: FolioRef::Handle(h) } => one(&Ref::Whole(*h)),
            _ => {}
        }
    }
}

impl Call {
    /// The kernel function name.
    pub fn name(&self) -> &'static str {
        match self {
            Call::AllocPages { .. } => "alloc_pages",
            Call::FreePages { .. } => "free_pages",
            Call::AllocPagesBulk { .. } => "alloc_pages_bulk",
            Call::ReleasePages { .. } => "release_pages",
            Call::GetPage { .. } => "get_page",
            Call::SplitPage { .. } => "split_page",
            Call::DrainLocalPages => "drain_local_pages",
            Call::DrainAllPages => "drain_all_pages",
            Call::DecayPcpHigh => "decay_pcp_high",
            Call::Sysctl(_) => "sysctl",
            Call::Vmalloc { .. } => "vmalloc",
            Call::Vzalloc { .. } => "vzalloc",
            Call::VmallocHuge { .. } => "vmalloc_huge",
            Call::VmallocNode { .. } => "__vmalloc_node",
            Call::Vfree { .. } => "vfree",
            Call::Vmap { .. } => "vmap",
            Call::Vunmap { .. } => "vunmap",
            Call::VmMapRam { .. } => "vm_map_ram",
            Call::VmUnmapRam { .. } => "vm_unmap_ram",
            Call::AllocPercpu { .. } => "__alloc_percpu",
            Call::FreePercpu { .. } => "free_percpu",
            Call::KvfreeRcu { .. } => "kvfree_rcu",
            Call::KvfreeRcuBarrier => "kvfree_rcu_barrier",
            Call::PurgeVmapAreaLazy => "purge_vmap_area_lazy",
            Call::MapRange { .. } | Call::MapRangeAt { .. } => "map_range",
            Call::SetContPtes { .. } => "set_cont_ptes",
            Call::PciRemapIospace { .. } => "pci_remap_iospace",
            Call::DmaRemap { .. } => "dma_common_contiguous_remap",
            Call::UnmapRange { .. } => "unmap_range",
            Call::Vrealloc { .. } => "vrealloc",
            Call::HugetlbStore { .. } => "hugetlb_store",
            Call::HugetlbReserve { .. } => "hugetlb_reserve",
            Call::HugetlbUnreserve { .. } => "hugetlb_unreserve",
            Call::AllocHugetlbFolio { .. } => "alloc_hugetlb_folio",
            Call::FreeHugeFolio { .. } => "free_huge_folio",
            Call::SetMemory { how, .. } => how.name(),
            Call::Hvo { call, .. } => call.name(),
            Call::PfnWalker { .. } => "pfn_walker",
            Call::Check => "check",
        }
    }
}

fn refs(f: &mut fmt::Formatter<'_>, pages: &[Ref]) -> fmt::Result {
    f.write_str(" pages=")?;
    for (i, p) in pages.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{p}")?;
    }
    Ok(())
}

/// A raw pfn/address is printed `pfn=`/`addr=`, a handle reference bare.
fn target(f: &mut fmt::Formatter<'_>, key: &str, r: &Ref) -> fmt::Result {
    match r {
        Ref::Raw(n) => write!(f, " {key}={n:#x}"),
        r => write!(f, " {r}"),
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.call == Call::Check {
            f.write_str("check")?;
        } else if self.cpu == FOREIGN_CPU {
            write!(f, "foreign {}", self.name())?;
        } else {
            write!(f, "cpu{} {}", self.cpu, self.name())?;
        }
        match &self.call {
            Call::AllocPages { order, gfp, .. } => write!(f, " order={order} gfp={gfp}")?,
            Call::FreePages { page, order } => {
                target(f, "pfn", page)?;
                write!(f, " order={order}")?
            }
            Call::AllocPagesBulk { nr, gfp, .. } => write!(f, " nr={nr} gfp={gfp}")?,
            Call::ReleasePages { page } => write!(f, " {page}")?,
            Call::GetPage { page } => target(f, "pfn", page)?,
            Call::SplitPage { page, order } => {
                target(f, "pfn", page)?;
                write!(f, " order={order}")?
            }
            Call::DrainLocalPages
            | Call::DrainAllPages
            | Call::DecayPcpHigh
            | Call::KvfreeRcuBarrier
            | Call::PurgeVmapAreaLazy
            | Call::Check => {}
            Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v)) => write!(f, " percpu_pagelist_high_fraction={v}")?,
            Call::Sysctl(Sysctl::MinFreeKbytes(v)) => write!(f, " min_free_kbytes={v}")?,
            Call::Vmalloc { size, .. } | Call::Vzalloc { size, .. } => write!(f, " size={size}")?,
            Call::VmallocHuge { size, gfp, .. } => write!(f, " size={size} gfp={gfp}")?,
            Call::VmallocNode { size, align, gfp, .. } => write!(f, " size={size} align={align} gfp={gfp}")?,
            Call::Vfree { area } | Call::Vunmap { area } | Call::KvfreeRcu { area } => target(f, "addr", area)?,
            Call::Vmap { pages, .. } | Call::VmMapRam { pages, .. } => refs(f, pages)?,
            Call::VmUnmapRam { area, count } => {
                target(f, "addr", area)?;
                write!(f, " count={count}")?
            }
            Call::AllocPercpu { size, align, .. } => write!(f, " size={size} align={align}")?,
            Call::FreePercpu { ptr } => target(f, "addr", ptr)?,
            Call::MapRange { page, .. } => target(f, "pfn", page)?,
            Call::UnmapRange { map } => target(f, "addr", map)?,
            Call::Vrealloc { area, size, gfp } => {
                target(f, "addr", area)?;
                write!(f, " size={size} gfp={gfp}")?
            }
            Call::HugetlbStore { .. }
            | Call::HugetlbReserve { .. }
            | Call::HugetlbUnreserve { .. }
            | Call::AllocHugetlbFolio { .. }
            | Call::FreeHugeFolio { .. }
            | Call::Hvo { .. }
            | Call::PfnWalker { .. } => fmt_layer_args(f, &self.call)?,
            Call::MapRangeAt { .. }
            | Call::SetContPtes { .. }
            | Call::PciRemapIospace { .. }
            | Call::DmaRemap { .. } => self.call.fmt_raw_args(f)?,
            Call::SetMemory { addr, off, nr, .. } => {
                target(f, "addr", addr)?;
                if *off != 0 {
                    write!(f, " off={off}")?;
                }
                write!(f, " nr={nr}")?
            }
        }
        if let Some(e) = &self.expect {
            write!(f, " expect={e}")?;
        }
        for (i, n) in self.fail_nth.iter().enumerate() {
            write!(f, "{}{n}", if i == 0 { " fail_nth=" } else { "," })?;
        }
        if let Some(h) = self.binds() {
            write!(f, " -> {h}")?;
        }
        Ok(())
    }
}

/// The largest `alloc_pages_bulk nr=` a replay may ask for (the array is
/// host memory).
pub const MAX_BULK: u32 = 1 << 16;

/// A replay line that could not be understood (the caller adds the line
/// number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseOpError(pub String);

impl fmt::Display for ParseOpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ParseOpError {}

fn err<T>(s: impl Into<String>) -> Result<T, ParseOpError> {
    Err(ParseOpError(s.into()))
}

/// Parse a number: decimal or 0x hex.
pub fn parse_num(s: &str) -> Result<u64, ParseOpError> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        s.parse::<u64>()
    };
    r.map_err(|_| ParseOpError(format!("`{s}` is not a number")))
}

fn parse_handle(s: &str) -> Result<Handle, ParseOpError> {
    let mut ch = s.chars();
    let kind = ch.next().and_then(HandleKind::from_letter);
    let id = ch.as_str().parse::<u32>();
    match (kind, id) {
        (Some(kind), Ok(id)) => Ok(Handle { kind, id }),
        _ => err(format!("`{s}` is not a handle (p4, v2, m1, r3, c5)")),
    }
}

/// Parse a handle reference (`p4`, `p4.2`, `p4+1`).
pub fn parse_ref(s: &str) -> Result<Ref, ParseOpError> {
    if let Some((h, k)) = s.split_once('.') {
        let k = u32::try_from(parse_num(k)?).map_err(|_| ParseOpError(format!("unit `{k}` too large")))?;
        return Ok(Ref::Unit(parse_handle(h)?, k));
    }
    if let Some((h, k)) = s.split_once('+') {
        return Ok(Ref::Offset(parse_handle(h)?, parse_num(k)?));
    }
    Ok(Ref::Whole(parse_handle(s)?))
}

/// The words of an op line after the call name.
struct Args<'a> {
    keys: Vec<(&'a str, &'a str)>,
    bare: Vec<&'a str>,
    out: Option<Handle>,
}

impl<'a> Args<'a> {
    fn take(&mut self, key: &str) -> Result<&'a str, ParseOpError> {
        match self.keys.iter().position(|(k, _)| *k == key) {
            Some(i) => Ok(self.keys.remove(i).1),
            None => err(format!("missing `{key}=`")),
        }
    }
    fn num(&mut self, key: &str) -> Result<u64, ParseOpError> {
        parse_num(self.take(key)?)
    }
    fn u32(&mut self, key: &str) -> Result<u32, ParseOpError> {
        let v = self.num(key)?;
        u32::try_from(v).map_err(|_| ParseOpError(format!("{key}={v} is too large")))
    }
    fn gfp(&mut self) -> Result<Gfp, ParseOpError> {
        let s = self.take("gfp")?;
        s.parse::<Gfp>().map_err(|e| ParseOpError(format!("gfp={s}: {e}")))
    }
    fn out(&mut self, kind: HandleKind) -> Result<Handle, ParseOpError> {
        match self.out.take() {
            Some(h) if h.kind == kind => Ok(h),
            Some(h) => err(format!("`-> {h}`: this call binds a `{}` handle", kind.letter())),
            None => err(format!("missing `-> {}N`", kind.letter())),
        }
    }
    /// The target: one bare handle reference, or `raw_key=N`.
    fn target(&mut self, raw_key: &str) -> Result<Ref, ParseOpError> {
        if let Some(i) = self.keys.iter().position(|(k, _)| *k == raw_key) {
            return Ok(Ref::Raw(parse_num(self.keys.remove(i).1)?));
        }
        if self.bare.is_empty() {
            return err(format!("missing a handle or `{raw_key}=`"));
        }
        parse_ref(self.bare.remove(0))
    }
    fn pages(&mut self) -> Result<Vec<Ref>, ParseOpError> {
        let s = self.take("pages")?;
        if s.is_empty() {
            // `pages=`: no pages (a wrong call: size 0).
            return Ok(Vec::new());
        }
        s.split(',').map(parse_ref).collect()
    }
    fn finish(self) -> Result<(), ParseOpError> {
        if let Some((k, _)) = self.keys.first() {
            return err(format!("unknown argument `{k}=`"));
        }
        if let Some(b) = self.bare.first() {
            return err(format!("unexpected `{b}`"));
        }
        if let Some(h) = self.out {
            return err(format!("this call binds no handle (`-> {h}`)"));
        }
        Ok(())
    }
}

/// An `expect=` value: the name of an outcome a call can have.
fn check_expect(v: &str) -> Result<&str, ParseOpError> {
    use super::oracle::{OUTCOMES, Outcome};
    match Outcome::parse(v) {
        Some(Outcome::Panic) => err("expect=Panic: a panic is always a violation"),
        Some(_) => Ok(v),
        None => {
            let names: Vec<&str> = OUTCOMES.iter().filter(|o| **o != Outcome::Panic).map(|o| o.name()).collect();
            err(format!("expect={v}: no such outcome ({})", names.join(", ")))
        }
    }
}

/// Parse one op line (no comment, not empty); an `expect=` must name an
/// outcome.
pub fn parse_line(line: &str) -> Result<Op, ParseOpError> {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    let mut out = None;
    if let Some(i) = words.iter().position(|w| *w == "->") {
        if i + 2 != words.len() {
            return err("`->` must be followed by exactly one handle at the end of the line");
        }
        out = Some(parse_handle(words[i + 1])?);
        words.truncate(i);
    }
    let Some(&first) = words.first() else {
        return err("empty operation");
    };
    let (cpu, rest) = if first == "foreign" {
        (FOREIGN_CPU, &words[1..])
    } else if let Some(n) = first.strip_prefix("cpu") {
        let cpu = n.parse::<usize>().map_err(|_| ParseOpError(format!("`{first}` is not cpuN")))?;
        (cpu, &words[1..])
    } else {
        (0, &words[..])
    };
    let Some((&name, rest)) = rest.split_first() else {
        return err("missing the call name after the CPU");
    };
    let mut a = Args { keys: Vec::new(), bare: Vec::new(), out };
    let mut expect = None;
    let mut fail_nth = None;
    for w in rest {
        match w.split_once('=') {
            Some(("expect", v)) => {
                if expect.is_some() {
                    return err("`expect=` given twice");
                }
                expect = Some(check_expect(v)?.to_string());
            }
            Some(("fail_nth", v)) => {
                if fail_nth.is_some() {
                    return err("`fail_nth=` given twice");
                }
                fail_nth = Some(parse_fail_nth(v)?);
            }
            Some((k, v)) => {
                if a.keys.iter().any(|(kk, _)| *kk == k) {
                    return err(format!("`{k}=` given twice"));
                }
                a.keys.push((k, v))
            }
            None => a.bare.push(w),
        }
    }
    use HandleKind as K;
    let call = match name {
        "alloc_pages" => Call::AllocPages { order: a.u32("order")?, gfp: a.gfp()?, out: a.out(K::Pages)? },
        "free_pages" => Call::FreePages { page: a.target("pfn")?, order: a.u32("order")? },
        "alloc_pages_bulk" => {
            let nr = a.u32("nr")?;
            if nr > MAX_BULK {
                return err(format!("nr={nr} is too large (at most {MAX_BULK})"));
            }
            Call::AllocPagesBulk { nr, gfp: a.gfp()?, out: a.out(K::Pages)? }
        }
        "release_pages" => match a.target("pfn")? {
            Ref::Whole(h) => Call::ReleasePages { page: h },
            r => return err(format!("release_pages takes a whole page handle, not `{r}`")),
        },
        "get_page" => Call::GetPage { page: a.target("pfn")? },
        "split_page" => Call::SplitPage { page: a.target("pfn")?, order: a.u32("order")? },
        "drain_local_pages" => Call::DrainLocalPages,
        "drain_all_pages" => Call::DrainAllPages,
        "decay_pcp_high" => Call::DecayPcpHigh,
        "sysctl" => {
            if a.keys.len() != 1 {
                return err("sysctl takes one KEY=VALUE");
            }
            let (k, v) = a.keys.remove(0);
            match k {
                "percpu_pagelist_high_fraction" => {
                    let v = parse_num(v)?;
                    let v = u32::try_from(v).map_err(|_| ParseOpError(format!("{k}={v} is too large")))?;
                    Call::Sysctl(Sysctl::PercpuPagelistHighFraction(v))
                }
                "min_free_kbytes" => Call::Sysctl(Sysctl::MinFreeKbytes(parse_num(v)?)),
                _ => return err(format!("unknown sysctl `{k}` (percpu_pagelist_high_fraction, min_free_kbytes)")),
            }
        }
        "vmalloc" => Call::Vmalloc { size: a.num("size")?, out: a.out(K::Vmalloc)? },
        "vzalloc" => Call::Vzalloc { size: a.num("size")?, out: a.out(K::Vmalloc)? },
        "vmalloc_huge" => Call::VmallocHuge { size: a.num("size")?, gfp: a.gfp()?, out: a.out(K::Vmalloc)? },
        "__vmalloc_node" => {
            Call::VmallocNode { size: a.num("size")?, align: a.num("align")?, gfp: a.gfp()?, out: a.out(K::Vmalloc)? }
        }
        "vfree" => Call::Vfree { area: a.target("addr")? },
        "vmap" => Call::Vmap { pages: a.pages()?, out: a.out(K::Vmap)? },
        "vunmap" => Call::Vunmap { area: a.target("addr")? },
        "vm_map_ram" => Call::VmMapRam { pages: a.pages()?, out: a.out(K::MapRam)? },
        "vm_unmap_ram" => Call::VmUnmapRam { area: a.target("addr")?, count: a.num("count")? },
        "__alloc_percpu" => Call::AllocPercpu { size: a.num("size")?, align: a.num("align")?, out: a.out(K::Percpu)? },
        "free_percpu" => Call::FreePercpu { ptr: a.target("addr")? },
        "kvfree_rcu" => Call::KvfreeRcu { area: a.target("addr")? },
        "kvfree_rcu_barrier" => Call::KvfreeRcuBarrier,
        "purge_vmap_area_lazy" => Call::PurgeVmapAreaLazy,
        "map_range" if a.keys.iter().any(|(k, _)| *k == "va") => a.raw_call(name)?,
        "map_range" => Call::MapRange { page: a.target("pfn")?, out: a.out(K::Table)? },
        "set_cont_ptes" | "pci_remap_iospace" | "dma_common_contiguous_remap" => a.raw_call(name)?,
        "unmap_range" => Call::UnmapRange { map: a.target("addr")? },
        "vrealloc" => Call::Vrealloc { area: a.target("addr")?, size: a.num("size")?, gfp: a.gfp()? },
        "hugetlb_store"
        | "hugetlb_reserve"
        | "hugetlb_unreserve"
        | "alloc_hugetlb_folio"
        | "free_huge_folio"
        | "hvo_optimize"
        | "hvo_restore"
        | "hvo_optimize_folios"
        | "hvo_restore_folios"
        | "pfn_walker" => parse_layer_call(name, &mut a)?,
        "check" => Call::Check,
        _ if SetMemory::by_name(name).is_some() => {
            let how = SetMemory::by_name(name).unwrap_or(SetMemory::Ro);
            let addr = a.target("addr")?;
            let off = if a.keys.iter().any(|(k, _)| *k == "off") { a.num("off")? } else { 0 };
            Call::SetMemory { how, addr, off, nr: a.num("nr")? }
        }
        _ => return err(format!("unknown call `{name}`")),
    };
    a.finish()?;
    let cpu = if call == Call::Check { 0 } else { cpu };
    Ok(Op { cpu, call, expect, fail_nth: fail_nth.unwrap_or_default() })
}

/// The most fail_nth values one op may list.
pub const MAX_FAIL_NTH: usize = 64;

/// `fail_nth=3,1`: positive counts, comma-separated, at most
/// [`MAX_FAIL_NTH`] of them.
fn parse_fail_nth(v: &str) -> Result<Vec<u32>, ParseOpError> {
    let mut out = Vec::new();
    for w in v.split(',') {
        let n = w.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
            ParseOpError(format!("fail_nth={v}: `{w}` is not a count from 1 to {} (comma-separated)", u32::MAX))
        })?;
        out.push(n);
    }
    if out.len() > MAX_FAIL_NTH {
        return err(format!("fail_nth={v}: {} values, at most {MAX_FAIL_NTH}", out.len()));
    }
    Ok(out)
}

/// A folio an HVO call names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolioRef {
    /// `hN`: a folio the fuzzer holds (or held).
    Handle(Handle),
    /// `2M@N`: the Nth folio of a pool's free list, from its head, modulo
    /// the list's length.
    Pool { size: HugePageSize, nth: u32 },
}

impl fmt::Display for FolioRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FolioRef::Handle(h) => write!(f, "{h}"),
            FolioRef::Pool { size, nth } => write!(f, "{}@{nth}", size.label()),
        }
    }
}

/// The unused pages of a reservation to give back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResvRef {
    /// `sH`: what is left of a reservation handle.
    Handle(Handle),
    /// `size=2M nr=N`: pages of no handle.
    Raw { size: HugePageSize, nr: u64 },
}

/// `size=2M`: a huge page size by its short name (64K, 2M, 32M, 1G).
pub fn parse_size(s: &str) -> Result<HugePageSize, ParseOpError> {
    match layers::size_by_label(s) {
        Some(z) => Ok(z),
        None => err(format!("size={s}: not a huge page size (64K, 2M, 32M, 1G)")),
    }
}

/// The arguments of a hugetlb call, after its name.
fn fmt_layer_args(f: &mut fmt::Formatter<'_>, call: &Call) -> fmt::Result {
    match call {
        Call::HugetlbStore { size, attr, value } => write!(f, " {}/{attr}={value}", size.sysfs_name()),
        Call::HugetlbReserve { size, nr, .. } => write!(f, " size={size} nr={nr}"),
        Call::HugetlbUnreserve { resv: ResvRef::Handle(h) } => write!(f, " {h}"),
        Call::HugetlbUnreserve { resv: ResvRef::Raw { size, nr } } => write!(f, " size={size} nr={nr}"),
        Call::AllocHugetlbFolio { size, resv, .. } => {
            write!(f, " size={size}")?;
            match resv {
                Some(h) => write!(f, " resv={h}"),
                None => Ok(()),
            }
        }
        Call::FreeHugeFolio { folio } => write!(f, " {folio}"),
        Call::Hvo { folios, .. } => {
            for (i, r) in folios.iter().enumerate() {
                write!(f, "{}{r}", if i == 0 { " " } else { "," })?;
            }
            Ok(())
        }
        Call::PfnWalker { folio } => write!(f, " {folio}"),
        _ => Ok(()),
    }
}

fn handle_of(s: &str, kind: HandleKind) -> Result<Handle, ParseOpError> {
    let h = parse_handle(s)?;
    if h.kind != kind {
        return err(format!("`{s}`: this call takes a `{}` handle", kind.letter()));
    }
    Ok(h)
}

/// Parse the arguments of the hugetlb call `name`.
fn parse_layer_call(name: &str, a: &mut Args<'_>) -> Result<Call, ParseOpError> {
    Ok(match name {
        "hugetlb_store" => {
            if a.keys.len() != 1 {
                return err("hugetlb_store takes one hugepages-<size>kB/<file>=VALUE");
            }
            let (path, value) = a.keys.remove(0);
            let Some((dir, file)) = path.split_once('/') else {
                return err(format!("`{path}`: not hugepages-<size>kB/<file>"));
            };
            let Some(size) = HugePageSize::ALL.into_iter().find(|z| z.sysfs_name() == dir) else {
                return err(format!(
                    "`{dir}`: no such hstate directory (hugepages-64kB, hugepages-2048kB, hugepages-32768kB, \
                     hugepages-1048576kB)"
                ));
            };
            let Some(attr) = HstateAttr::from_name(file) else {
                let names: Vec<&str> = HstateAttr::ALL.iter().map(|a| a.name()).collect();
                return err(format!("`{file}`: no such hstate file ({})", names.join(", ")));
            };
            Call::HugetlbStore { size, attr, value: StoreValue::parse(value) }
        }
        "hugetlb_reserve" => {
            Call::HugetlbReserve { size: parse_size(a.take("size")?)?, nr: a.num("nr")?, out: a.out(HandleKind::Resv)? }
        }
        "hugetlb_unreserve" => {
            if a.bare.is_empty() {
                Call::HugetlbUnreserve { resv: ResvRef::Raw { size: parse_size(a.take("size")?)?, nr: a.num("nr")? } }
            } else {
                Call::HugetlbUnreserve { resv: ResvRef::Handle(handle_of(a.bare.remove(0), HandleKind::Resv)?) }
            }
        }
        "alloc_hugetlb_folio" => {
            let size = parse_size(a.take("size")?)?;
            let resv = match a.keys.iter().position(|(k, _)| *k == "resv") {
                Some(i) => Some(handle_of(a.keys.remove(i).1, HandleKind::Resv)?),
                None => None,
            };
            Call::AllocHugetlbFolio { size, resv, out: a.out(HandleKind::HugeFolio)? }
        }
        "free_huge_folio" => {
            if a.bare.is_empty() {
                return err("free_huge_folio takes an `h` handle");
            }
            Call::FreeHugeFolio { folio: handle_of(a.bare.remove(0), HandleKind::HugeFolio)? }
        }
        "pfn_walker" => {
            if a.bare.len() != 1 {
                return err("pfn_walker takes one folio (`h3` or `2M@0`)");
            }
            Call::PfnWalker { folio: parse_folio_ref(a.bare.remove(0))? }
        }
        _ => {
            let Some(&(call, _)) = HvoCall::ALL.iter().find(|(_, n)| *n == name) else {
                return err(format!("unknown call `{name}`"));
            };
            if a.bare.len() != 1 {
                return err(format!("{name} takes folios (`h3` or `2M@0`, comma-separated for a batch)"));
            }
            let folios = a.bare.remove(0).split(',').map(parse_folio_ref).collect::<Result<Vec<_>, _>>()?;
            if !call.batched() && folios.len() != 1 {
                return err(format!("{name} takes one folio; {}_folios takes a list", name));
            }
            Call::Hvo { call, folios }
        }
    })
}

/// A folio: `hN`, or `SIZE@N` (the Nth folio of that pool's free list).
fn parse_folio_ref(s: &str) -> Result<FolioRef, ParseOpError> {
    match s.split_once('@') {
        Some((size, nth)) => {
            let nth = u32::try_from(parse_num(nth)?).map_err(|_| ParseOpError(format!("`{s}`: index too large")))?;
            Ok(FolioRef::Pool { size: parse_size(size)?, nth })
        }
        None => Ok(FolioRef::Handle(handle_of(s, HandleKind::HugeFolio)?)),
    }
}
