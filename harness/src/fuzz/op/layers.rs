//! The text of the hugetlb calls (`hugetlb_store`, `hugetlb_reserve`,
//! `hugetlb_unreserve`, `alloc_hugetlb_folio`, `free_huge_folio`):
//!
//! ```text
//! cpu0 hugetlb_store hugepages-2048kB/nr_hugepages=4
//! cpu1 hugetlb_store hugepages-1048576kB/demote_size=33554432
//! cpu0 hugetlb_store hugepages-32768kB/nr_overcommit_hugepages=1 expect=GiganticOvercommit
//! cpu0 hugetlb_reserve size=2M nr=3 -> s5
//! cpu2 alloc_hugetlb_folio size=2M resv=s5 -> h6
//! cpu2 alloc_hugetlb_folio size=64K -> h7
//! cpu3 free_huge_folio h6
//! cpu0 hugetlb_unreserve s5
//! cpu0 hugetlb_unreserve size=2M nr=9 expect=NoMemory
//! ```
//!
//! and of the linear map's permission changes (`set_memory_ro`,
//! `set_memory_rw`, `set_memory_nx`, `set_memory_x`): a page reference's
//! linear-map address (`page_address()`), plus `off=` bytes if given, or a
//! raw `addr=`, and `nr=` pages:
//!
//! ```text
//! cpu0 set_memory_ro p12 nr=4
//! cpu1 set_memory_rw p12.3 nr=1
//! cpu0 set_memory_x p12 off=1 nr=1 expect=BadRange
//! cpu0 set_memory_nx addr=0x1000 nr=1 expect=BadRange
//! ```
//!
//! and of HVO on folios (`hvo_optimize`, `hvo_restore`, their batched
//! `_folios` forms, and `pfn_walker`, a speculative walker reading a
//! folio's struct pages); a folio is a handle (`h3`) or the Nth folio of a
//! pool's free list, counted from its head modulo its length (`2M@0`):
//!
//! ```text
//! cpu0 hvo_restore h6
//! cpu1 hvo_optimize h6
//! cpu0 hvo_optimize_folios h6,2M@1
//! cpu1 hvo_restore_folios 2M@0,2M@1 expect=NotOptimized
//! cpu2 pfn_walker 2M@0
//! ```
//!
//! A store's value is written as the file would get it: a number, or any
//! other text without blanks (`abc`, `-1`, empty), which the store must
//! refuse as the kernel's `kstrtoul`/`memparse` would. This module holds
//! the values (it names nothing of `op`, so the modules stay
//! acyclic); `op.rs` prints and parses the calls.

use mmlab_hugetlb::HugePageSize;
use std::fmt;

/// What a `hugetlb_store` writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreValue {
    /// A number, printed in decimal.
    Num(u64),
    /// Anything else (never a canonical decimal number): for wrong calls.
    Text(String),
}

impl fmt::Display for StoreValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreValue::Num(n) => write!(f, "{n}"),
            StoreValue::Text(t) => f.write_str(t),
        }
    }
}

impl StoreValue {
    /// The value of `text`: a number when `text` is exactly how the number
    /// prints (so printing gives `text` back), else the text.
    pub fn parse(text: &str) -> StoreValue {
        let canonical =
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
        match text.parse::<u64>() {
            Ok(n) if canonical => StoreValue::Num(n),
            _ => StoreValue::Text(text.to_string()),
        }
    }
}

/// Which `set_memory_*()` a [`super::Call::SetMemory`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMemory {
    /// `set_memory_ro()`: clear `PTE_WRITE`, set `PTE_RDONLY`.
    Ro,
    /// `set_memory_rw()`: the reverse.
    Rw,
    /// `set_memory_nx()`: set `PTE_PXN`.
    Nx,
    /// `set_memory_x()`: clear `PTE_PXN`.
    X,
}

impl SetMemory {
    /// All four, in name order.
    pub const ALL: [SetMemory; 4] = [SetMemory::Ro, SetMemory::Rw, SetMemory::Nx, SetMemory::X];
    /// The kernel function's name.
    pub const fn name(self) -> &'static str {
        match self {
            SetMemory::Ro => "set_memory_ro",
            SetMemory::Rw => "set_memory_rw",
            SetMemory::Nx => "set_memory_nx",
            SetMemory::X => "set_memory_x",
        }
    }
    /// The call of a name.
    pub fn by_name(name: &str) -> Option<SetMemory> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Which HVO entry an `hvo_*` call runs (`Hugetlb::vmemmap_optimize` /
/// `vmemmap_restore`, one folio at a time or as one batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HvoCall {
    /// `hvo_optimize`: `hugetlb_vmemmap_optimize_folio()`.
    Optimize,
    /// `hvo_restore`: `hugetlb_vmemmap_restore_folio()`.
    Restore,
    /// `hvo_optimize_folios`: `hugetlb_vmemmap_optimize_folios()`.
    OptimizeFolios,
    /// `hvo_restore_folios`: `hugetlb_vmemmap_restore_folios()`.
    RestoreFolios,
}

impl HvoCall {
    /// Every call with its name.
    pub const ALL: [(HvoCall, &'static str); 4] = [
        (HvoCall::Optimize, "hvo_optimize"),
        (HvoCall::Restore, "hvo_restore"),
        (HvoCall::OptimizeFolios, "hvo_optimize_folios"),
        (HvoCall::RestoreFolios, "hvo_restore_folios"),
    ];
    /// The call's name.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(c, _)| *c == self).map_or("?", |(_, n)| n)
    }
    /// Whether it optimizes (else restores).
    pub fn optimizes(self) -> bool {
        matches!(self, HvoCall::Optimize | HvoCall::OptimizeFolios)
    }
    /// Whether it is the batched form (takes a list).
    pub fn batched(self) -> bool {
        matches!(self, HvoCall::OptimizeFolios | HvoCall::RestoreFolios)
    }
}

/// The huge page size of a short name (64K, 2M, 32M, 1G).
pub fn size_by_label(s: &str) -> Option<HugePageSize> {
    HugePageSize::ALL.into_iter().find(|z| z.label() == s)
}

#[cfg(test)]
mod tests {
    use super::super::{Call, FolioRef, Handle, HandleKind, HvoCall, Op, Ref, ResvRef, SetMemory, parse_line};
    use super::*;
    use mmlab_engine::Gfp;
    use mmlab_hugetlb::HstateAttr;

    fn h(kind: HandleKind, id: u32) -> Handle {
        Handle { kind, id }
    }

    #[test]
    fn every_layer_call_prints_and_parses_back() {
        let calls = [
            Call::Vrealloc { area: Ref::Whole(h(HandleKind::Vmalloc, 3)), size: 8192, gfp: Gfp::GFP_KERNEL },
            Call::Vrealloc { area: Ref::Raw(0x1234_5000), size: 0, gfp: Gfp::GFP_NOFS },
            Call::HugetlbStore { size: HugePageSize::Pmd2M, attr: HstateAttr::NrHugepages, value: StoreValue::Num(4) },
            Call::HugetlbStore {
                size: HugePageSize::Pud1G,
                attr: HstateAttr::DemoteSize,
                value: StoreValue::Num(32 << 20),
            },
            Call::HugetlbStore {
                size: HugePageSize::Cont64K,
                attr: HstateAttr::NrOvercommitHugepages,
                value: StoreValue::Text("-1".into()),
            },
            Call::HugetlbStore {
                size: HugePageSize::ContPmd32M,
                attr: HstateAttr::FreeHugepages,
                value: StoreValue::Text(String::new()),
            },
            Call::HugetlbStore {
                size: HugePageSize::Pmd2M,
                attr: HstateAttr::Demote,
                value: StoreValue::Text("007".into()),
            },
            Call::HugetlbReserve { size: HugePageSize::Pmd2M, nr: 3, out: h(HandleKind::Resv, 5) },
            Call::HugetlbUnreserve { resv: ResvRef::Handle(h(HandleKind::Resv, 5)) },
            Call::HugetlbUnreserve { resv: ResvRef::Raw { size: HugePageSize::Cont64K, nr: 9 } },
            Call::AllocHugetlbFolio {
                size: HugePageSize::Pmd2M,
                resv: Some(h(HandleKind::Resv, 5)),
                out: h(HandleKind::HugeFolio, 6),
            },
            Call::AllocHugetlbFolio { size: HugePageSize::Pud1G, resv: None, out: h(HandleKind::HugeFolio, 7) },
            Call::FreeHugeFolio { folio: h(HandleKind::HugeFolio, 6) },
            Call::SetMemory { how: SetMemory::Ro, addr: Ref::Whole(h(HandleKind::Pages, 12)), off: 0, nr: 4 },
            Call::SetMemory { how: SetMemory::Rw, addr: Ref::Unit(h(HandleKind::Pages, 12), 3), off: 0, nr: 1 },
            Call::SetMemory { how: SetMemory::X, addr: Ref::Whole(h(HandleKind::Pages, 2)), off: 1, nr: 1 },
            Call::SetMemory { how: SetMemory::Nx, addr: Ref::Raw(0x1000), off: 0, nr: u64::MAX },
            Call::Hvo { call: HvoCall::Restore, folios: vec![FolioRef::Handle(h(HandleKind::HugeFolio, 6))] },
            Call::Hvo { call: HvoCall::Optimize, folios: vec![FolioRef::Pool { size: HugePageSize::Pud1G, nth: 2 }] },
            Call::Hvo {
                call: HvoCall::OptimizeFolios,
                folios: vec![
                    FolioRef::Handle(h(HandleKind::HugeFolio, 3)),
                    FolioRef::Pool { size: HugePageSize::Pmd2M, nth: 0 },
                ],
            },
            Call::Hvo { call: HvoCall::RestoreFolios, folios: vec![FolioRef::Handle(h(HandleKind::HugeFolio, 3))] },
            Call::PfnWalker { folio: FolioRef::Pool { size: HugePageSize::ContPmd32M, nth: 1 } },
        ];
        for call in calls {
            let op = Op { cpu: 2, call, expect: Some("Ok".into()), fail_nth: Vec::new() };
            let text = op.to_string();
            let back = parse_line(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(back, op, "{text}");
            assert_eq!(back.to_string(), text);
        }
    }

    #[test]
    fn layer_lines_are_read_as_written_and_bad_ones_refused() {
        let op = parse_line("cpu1 hugetlb_store hugepages-2048kB/nr_hugepages=12").unwrap();
        assert_eq!(
            op.call,
            Call::HugetlbStore { size: HugePageSize::Pmd2M, attr: HstateAttr::NrHugepages, value: StoreValue::Num(12) }
        );
        let op = parse_line("cpu0 vrealloc v4 size=100 gfp=GFP_KERNEL").unwrap();
        assert_eq!(op.uses(), vec![h(HandleKind::Vmalloc, 4)]);
        let op = parse_line("cpu1 hvo_restore_folios h4,2M@1,h5").unwrap();
        assert_eq!(op.uses(), vec![h(HandleKind::HugeFolio, 4), h(HandleKind::HugeFolio, 5)]);
        let op = parse_line("cpu0 alloc_hugetlb_folio size=2M resv=s2 -> h3").unwrap();
        assert_eq!((op.uses(), op.binds()), (vec![h(HandleKind::Resv, 2)], Some(h(HandleKind::HugeFolio, 3))));
        for (bad, why) in [
            ("cpu0 hugetlb_store hugepages-4kB/nr_hugepages=1", "no such hstate directory"),
            ("cpu0 hugetlb_store hugepages-2048kB/nr_pages=1", "no such hstate file"),
            ("cpu0 hugetlb_store nr_hugepages=1", "not hugepages-<size>kB/<file>"),
            ("cpu0 hugetlb_reserve size=4M nr=1 -> s1", "not a huge page size"),
            ("cpu0 hugetlb_reserve size=2M nr=1 -> h1", "binds a `s` handle"),
            ("cpu0 free_huge_folio s1", "takes a `h` handle"),
            ("cpu0 free_huge_folio", "takes an `h` handle"),
            ("cpu0 alloc_hugetlb_folio size=2M resv=h1 -> h2", "takes a `s` handle"),
            ("cpu0 vrealloc v1 size=1", "missing `gfp=`"),
            ("cpu0 set_memory_ro p1", "missing `nr=`"),
            ("cpu0 set_memory_rw nr=1", "missing a handle or `addr=`"),
            ("cpu0 set_memory_nx p1 nr=1 -> p2", "binds no handle"),
            ("cpu0 hvo_optimize h1,h2", "takes one folio"),
            ("cpu0 hvo_restore_folios", "takes folios"),
            ("cpu0 hvo_restore p1", "takes a `h` handle"),
            ("cpu0 hvo_optimize 4M@0", "not a huge page size"),
            ("cpu0 pfn_walker", "takes one folio"),
        ] {
            let e = parse_line(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(StoreValue::parse("18446744073709551616"), StoreValue::Text("18446744073709551616".into()));
        assert_eq!(StoreValue::parse("+5"), StoreValue::Text("+5".into()));
    }
}
