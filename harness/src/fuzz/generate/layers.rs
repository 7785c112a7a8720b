//! Generating calls into the newer layers: `vrealloc` of the generator's
//! vmalloc areas, hugetlb (pool writes to every hstate's files,
//! reservations, faults and frees of folios, demote), and the linear
//! map's permission changes (`pageattr.rs`), right and wrong.
//!
//! The model assumes every call succeeds, as the rest of the generator
//! does: a reservation holds its pages until given back or faulted in, a
//! folio is held until freed. hugetlb calls are left out when the
//! configuration excludes `hugetlb` (`--threads` runs, which have no
//! hugetlb). Pool sizes are drawn up to half the live-page budget per
//! size (at least one page, so that a gigantic size the machine cannot
//! hold is still asked for and reads back what it got).

use super::{Generator, pick, push_dead};
use crate::fuzz::op::{Call, HandleKind, Ref, ResvRef, StoreValue};
use mmlab_engine::{Gfp, PAGE_SIZE};
use mmlab_hugetlb::{HstateAttr, HugePageSize};

/// A huge page size: mostly 2M, then 64K, the gigantic ones less often.
fn huge_size(s: &mut dyn super::Source) -> Option<HugePageSize> {
    Some(match s.below(20)? {
        0..=9 => HugePageSize::Pmd2M,
        10..=14 => HugePageSize::Cont64K,
        15..=17 => HugePageSize::ContPmd32M,
        _ => HugePageSize::Pud1G,
    })
}

/// Text the stores must refuse as `kstrtoul`/`memparse` do.
const BAD_TEXT: [&str; 6] = ["", "-1", "abc", "1.5", "18446744073709551616", "0x10"];

impl Generator {
    /// The most pages of `size` a pool write asks for.
    fn max_pool(&self, size: HugePageSize) -> u64 {
        ((self.cfg.max_live_pages / 2) >> size.order()).max(1)
    }

    /// A right call into the newer layers, or None to draw again.
    pub(super) fn layer_call(&mut self, s: &mut dyn super::Source) -> Option<Option<Call>> {
        let hugetlb = self.allowed("hugetlb");
        let set_memory = self.allowed("set_memory");
        let class = match (hugetlb, set_memory) {
            (true, true) => s.below(24)?,
            (true, false) => s.below(20)?,
            (false, true) => [0, 20][s.below(2)? as usize],
            (false, false) => 0,
        };
        // HVO's four classes (24..28) only with HVO on: the draws of a
        // machine without it stay as they were.
        let class = if hugetlb && self.cfg.hvo && s.below(6)? == 0 { 24 + s.below(4)? } else { class };
        Some(match class {
            0..=4 => self.vrealloc(s)?,
            20..=23 => self.set_memory(s)?,
            5..=8 => {
                let size = huge_size(s)?;
                let n = s.below(self.max_pool(size) + 1)?;
                self.layers.pool_target[size.index()] = n;
                Some(Call::HugetlbStore { size, attr: HstateAttr::NrHugepages, value: StoreValue::Num(n) })
            }
            9 => {
                let size = [HugePageSize::Cont64K, HugePageSize::Pmd2M][s.below(2)? as usize];
                let n = s.below(self.max_pool(size) / 2 + 2)?;
                Some(Call::HugetlbStore { size, attr: HstateAttr::NrOvercommitHugepages, value: StoreValue::Num(n) })
            }
            10 => {
                let size = [HugePageSize::Pmd2M, HugePageSize::ContPmd32M, HugePageSize::Pud1G][s.below(3)? as usize];
                if s.below(2)? == 0 {
                    Some(Call::HugetlbStore { size, attr: HstateAttr::Demote, value: StoreValue::Num(1 + s.below(2)?) })
                } else {
                    // The sizes of at least 2M below it.
                    let below: Vec<HugePageSize> =
                        [HugePageSize::Pmd2M, HugePageSize::ContPmd32M].into_iter().filter(|d| *d < size).collect();
                    let Some(dst) = pick(s, &below)? else { return Some(None) };
                    let value = StoreValue::Num(dst.bytes());
                    Some(Call::HugetlbStore { size, attr: HstateAttr::DemoteSize, value })
                }
            }
            11 | 12 => {
                if self.layers.resv.len() >= 4 {
                    return self.unreserve(s);
                }
                let size = huge_size(s)?;
                let nr = 1 + s.below(3)?;
                let out = self.handle(HandleKind::Resv);
                self.layers.resv.push((out, size, nr));
                Some(Call::HugetlbReserve { size, nr, out })
            }
            13 => self.unreserve(s)?,
            14..=16 => {
                if self.layers.folios.len() >= 8 {
                    return self.free_folio(s);
                }
                let with: Vec<usize> = (0..self.layers.resv.len()).filter(|&i| self.layers.resv[i].2 > 0).collect();
                let out = self.handle(HandleKind::HugeFolio);
                let call = match pick(s, &with)? {
                    Some(i) if s.below(2)? == 0 => {
                        let r = &mut self.layers.resv[i];
                        r.2 -= 1;
                        Call::AllocHugetlbFolio { size: r.1, resv: Some(r.0), out }
                    }
                    _ => Call::AllocHugetlbFolio { size: huge_size(s)?, resv: None, out },
                };
                if let Call::AllocHugetlbFolio { size, .. } = &call {
                    self.hvo_note_folio(out, *size);
                }
                self.layers.folios.push(out);
                Some(call)
            }
            17..=19 => self.free_folio(s)?,
            c => self.hvo_call(s, c - 24)?,
        })
    }

    /// `vrealloc` of a live vmalloc area: shrink, grow in place or by a
    /// move, or size 0 (a free).
    fn vrealloc(&mut self, s: &mut dyn super::Source) -> Option<Option<Call>> {
        let Some(i) = pick(s, &(0..self.vmallocs.len()).collect::<Vec<_>>())? else { return Some(None) };
        let (h, old) = self.vmallocs[i];
        let size = match s.below(8)? {
            0 => 0,
            1 | 2 => (old / 2).max(1),
            3 => old.saturating_sub(s.below(PAGE_SIZE)?).max(1),
            4 => old.div_ceil(PAGE_SIZE) * PAGE_SIZE,
            _ => Self::size(s)?,
        };
        // GFP_NOFS: a shrink keeps its pages (no IO and FS to free them).
        let gfp = if s.below(4)? == 0 { Gfp::GFP_NOFS } else { Gfp::GFP_KERNEL };
        self.live_pages -= old.div_ceil(PAGE_SIZE);
        if size == 0 {
            self.vmallocs.swap_remove(i);
            push_dead(&mut self.dead_vmallocs, (h, false));
        } else {
            self.vmallocs[i].1 = size;
            self.live_pages += size.div_ceil(PAGE_SIZE);
        }
        Some(Some(Call::Vrealloc { area: Ref::Whole(h), size, gfp }))
    }

    fn unreserve(&mut self, s: &mut dyn super::Source) -> Option<Option<Call>> {
        let Some(i) = pick(s, &(0..self.layers.resv.len()).collect::<Vec<_>>())? else { return Some(None) };
        let (h, _, _) = self.layers.resv.swap_remove(i);
        Some(Some(Call::HugetlbUnreserve { resv: ResvRef::Handle(h) }))
    }

    fn free_folio(&mut self, s: &mut dyn super::Source) -> Option<Option<Call>> {
        let Some(i) = pick(s, &(0..self.layers.folios.len()).collect::<Vec<_>>())? else { return Some(None) };
        let h = self.layers.folios.swap_remove(i);
        self.hvo_forget_folio(h);
        push_dead(&mut self.layers.dead_folios, h);
        Some(Some(Call::FreeHugeFolio { folio: h }))
    }

    /// A wrong call of the newer layers' `kind`, or None if there is
    /// nothing to build it on.
    pub(super) fn wrong_layer(&mut self, s: &mut dyn super::Source, kind: &str) -> Option<Option<Call>> {
        let gfp = Gfp::GFP_KERNEL;
        let call = match kind {
            "vrealloc_wrong_kind" => {
                let size = [0, 1, PAGE_SIZE, 5 * PAGE_SIZE][s.below(4)? as usize];
                let h = if s.below(2)? == 0 { pick(s, &self.vmaps)? } else { pick(s, &self.percpus)? };
                let Some(h) = h else { return Some(None) };
                Call::Vrealloc { area: Ref::Whole(h), size, gfp }
            }
            "vrealloc_freed" => {
                let Some((h, _)) = pick(s, &self.dead_vmallocs)? else { return Some(None) };
                let size = [0, PAGE_SIZE, 3 * PAGE_SIZE][s.below(3)? as usize];
                Call::Vrealloc { area: Ref::Whole(h), size, gfp }
            }
            "vrealloc_inside" => {
                let Some((h, size)) = pick(s, &self.vmallocs)? else { return Some(None) };
                if size <= 1 {
                    return Some(None);
                }
                Call::Vrealloc { area: Ref::Offset(h, 1 + s.below(size - 1)?), size: PAGE_SIZE, gfp }
            }
            "vrealloc_too_large" => {
                let Some((h, _)) = pick(s, &self.vmallocs)? else { return Some(None) };
                let size = [1 << 40, 1 << 46, u64::MAX][s.below(3)? as usize];
                Call::Vrealloc { area: Ref::Whole(h), size, gfp }
            }
            "hugetlb_bad_store" if self.allowed("hugetlb") => {
                let text = |s: &mut dyn super::Source| {
                    Some(StoreValue::Text(BAD_TEXT[s.below(BAD_TEXT.len() as u64)? as usize].to_string()))
                };
                let (size, attr, value) = match s.below(6)? {
                    0 => {
                        let attr = [HstateAttr::Demote, HstateAttr::DemoteSize][s.below(2)? as usize];
                        (HugePageSize::Cont64K, attr, StoreValue::Num(1))
                    }
                    1 => {
                        let attr = [HstateAttr::FreeHugepages, HstateAttr::ResvHugepages, HstateAttr::SurplusHugepages]
                            [s.below(3)? as usize];
                        (huge_size(s)?, attr, StoreValue::Num(s.below(4)?))
                    }
                    2 => {
                        let size = [HugePageSize::ContPmd32M, HugePageSize::Pud1G][s.below(2)? as usize];
                        (size, HstateAttr::NrOvercommitHugepages, StoreValue::Num(s.below(4)?))
                    }
                    3 => {
                        let attr = [HstateAttr::NrHugepages, HstateAttr::NrOvercommitHugepages, HstateAttr::Demote]
                            [s.below(3)? as usize];
                        (HugePageSize::Pmd2M, attr, text(s)?)
                    }
                    4 => {
                        let bytes = [64 << 10, 4 << 20, 2 << 20, 1 << 30][s.below(4)? as usize];
                        let size = [HugePageSize::Pmd2M, HugePageSize::ContPmd32M][s.below(2)? as usize];
                        (size, HstateAttr::DemoteSize, StoreValue::Num(bytes))
                    }
                    _ => (HugePageSize::Pud1G, HstateAttr::DemoteSize, text(s)?),
                };
                Call::HugetlbStore { size, attr, value }
            }
            "free_huge_folio_twice" => {
                let Some(h) = pick(s, &self.layers.dead_folios)? else { return Some(None) };
                Call::FreeHugeFolio { folio: h }
            }
            "set_memory_unaligned" | "set_memory_bad_range" | "set_memory_not_mapped" if self.allowed("set_memory") => {
                return self.wrong_set_memory(s, kind);
            }
            "hugetlb_unreserve_too_many" if self.allowed("hugetlb") => {
                let nr = [1 << 20, 1 << 40, u64::MAX][s.below(3)? as usize];
                Call::HugetlbUnreserve { resv: ResvRef::Raw { size: huge_size(s)?, nr } }
            }
            _ => return Some(None),
        };
        Some(Some(call))
    }
}
