//! Generating HVO calls (`hvo_optimize`, `hvo_restore`, their batched
//! `_folios` forms, `pfn_walker`) on the folios the generator holds and on
//! pool folios (`2M@N`), right and wrong. Only made when the machine has
//! HVO ([`GenConfig::hvo`](super::GenConfig::hvo)), so the sequence of a
//! machine without it stays as it was.
//!
//! The model: a folio handed out is assumed optimized if its size can be
//! (2M, 32M, 1G: the pool optimized it); a right call restores an
//! optimized one or optimizes a restored one, and flips the assumption.
//! Pool folios are named by position, of a pool the generator last wrote
//! a non-zero `nr_hugepages` to; the generator does not know their state, so a call on them may be right or refused, and the oracle
//! decides from the machine. The wrong kinds: restore of a folio assumed
//! restored, optimize of one assumed optimized, optimize of a 64K folio,
//! a call on a freed folio.

use super::{Generator, Source, pick};
use crate::fuzz::op::{Call, FolioRef, Handle, HvoCall};
use mmlab_hugetlb::HugePageSize;

impl Generator {
    /// A pool folio of an optimizable size whose pool the generator last
    /// asked to be non-empty (`nr_hugepages` written above 0), mostly 2M;
    /// None when there is none.
    fn pool_ref(&self, s: &mut dyn Source) -> Option<Option<FolioRef>> {
        let sizes: Vec<HugePageSize> = [HugePageSize::Pmd2M, HugePageSize::ContPmd32M, HugePageSize::Pud1G]
            .into_iter()
            .filter(|z| self.layers.pool_target[z.index()] > 0)
            .collect();
        let Some(size) = pick(s, &sizes)? else { return Some(None) };
        Some(Some(FolioRef::Pool { size, nth: s.below(4)? as u32 }))
    }

    /// Note a folio handed out (for the HVO model).
    pub(super) fn hvo_note_folio(&mut self, h: Handle, size: HugePageSize) {
        if self.cfg.hvo {
            self.layers.hvo.push((h, size, size != HugePageSize::Cont64K));
        }
    }

    /// Forget a folio freed or never bound.
    pub(super) fn hvo_forget_folio(&mut self, h: Handle) {
        self.layers.hvo.retain(|v| v.0 != h);
    }

    /// Held folios of an optimizable size assumed `optimized`.
    fn hvo_held(&self, optimized: bool) -> Vec<usize> {
        (0..self.layers.hvo.len())
            .filter(|&i| self.layers.hvo[i].1 != HugePageSize::Cont64K && self.layers.hvo[i].2 == optimized)
            .collect()
    }

    /// A right HVO call (class `class` of 4), or None to draw again.
    pub(super) fn hvo_call(&mut self, s: &mut dyn Source, class: u64) -> Option<Option<Call>> {
        Some(match class {
            // One held folio: restore it if optimized, else optimize it.
            0 => {
                let all: Vec<usize> =
                    (0..self.layers.hvo.len()).filter(|&i| self.layers.hvo[i].1 != HugePageSize::Cont64K).collect();
                let Some(i) = pick(s, &all)? else { return Some(None) };
                let (h, _, optimized) = self.layers.hvo[i];
                self.layers.hvo[i].2 = !optimized;
                let call = if optimized { HvoCall::Restore } else { HvoCall::Optimize };
                Some(Call::Hvo { call, folios: vec![FolioRef::Handle(h)] })
            }
            // A batch of held folios in the same state, maybe with a pool folio.
            1 => {
                let optimized = s.below(2)? == 0;
                let mut held = self.hvo_held(optimized);
                let mut folios = Vec::new();
                for _ in 0..1 + s.below(3)? {
                    let Some(k) = pick(s, &(0..held.len()).collect::<Vec<_>>())? else { break };
                    let i = held.swap_remove(k);
                    self.layers.hvo[i].2 = !optimized;
                    folios.push(FolioRef::Handle(self.layers.hvo[i].0));
                }
                if (folios.is_empty() || s.below(4)? == 0)
                    && let Some(r) = self.pool_ref(s)?
                {
                    folios.push(r);
                }
                if folios.is_empty() {
                    return Some(None);
                }
                let call = if optimized { HvoCall::RestoreFolios } else { HvoCall::OptimizeFolios };
                Some(Call::Hvo { call, folios })
            }
            // Pool folios, one or a batch, either way.
            2 => {
                let call = HvoCall::ALL[s.below(4)? as usize].0;
                let n = if call.batched() { 1 + s.below(3)? } else { 1 };
                let mut folios = Vec::new();
                for _ in 0..n {
                    let Some(r) = self.pool_ref(s)? else { return Some(None) };
                    folios.push(r);
                }
                Some(Call::Hvo { call, folios })
            }
            // A speculative walker over a held or a pool folio.
            _ => {
                let held: Vec<Handle> = self.layers.hvo.iter().map(|v| v.0).collect();
                let folio = match pick(s, &held)? {
                    Some(h) if s.below(3)? != 0 => FolioRef::Handle(h),
                    _ => match self.pool_ref(s)? {
                        Some(r) => r,
                        None => return Some(None),
                    },
                };
                Some(Call::PfnWalker { folio })
            }
        })
    }

    /// A wrong HVO call of `kind`, or None if there is nothing to build it on.
    pub(super) fn wrong_hvo(&mut self, s: &mut dyn Source, kind: &str) -> Option<Option<Call>> {
        if !self.cfg.hvo || !self.allowed("hugetlb") {
            return Some(None);
        }
        let one = |call, r| Some(Some(Call::Hvo { call, folios: vec![r] }));
        match kind {
            "hvo_restore_not_optimized" => {
                let restored = self.hvo_held(false);
                let small: Vec<Handle> =
                    self.layers.hvo.iter().filter(|v| v.1 == HugePageSize::Cont64K).map(|v| v.0).collect();
                let h = match pick(s, &restored)? {
                    Some(i) => self.layers.hvo[i].0,
                    None => match pick(s, &small)? {
                        Some(h) => h,
                        None => return Some(None),
                    },
                };
                let call = [HvoCall::Restore, HvoCall::RestoreFolios][s.below(2)? as usize];
                one(call, FolioRef::Handle(h))
            }
            "hvo_optimize_twice" => {
                let Some(i) = pick(s, &self.hvo_held(true))? else { return Some(None) };
                let call = [HvoCall::Optimize, HvoCall::OptimizeFolios][s.below(2)? as usize];
                one(call, FolioRef::Handle(self.layers.hvo[i].0))
            }
            "hvo_not_optimizable" => {
                let small: Vec<Handle> =
                    self.layers.hvo.iter().filter(|v| v.1 == HugePageSize::Cont64K).map(|v| v.0).collect();
                let r = match pick(s, &small)? {
                    Some(h) => FolioRef::Handle(h),
                    None => FolioRef::Pool { size: HugePageSize::Cont64K, nth: s.below(4)? as u32 },
                };
                let call = [HvoCall::Optimize, HvoCall::OptimizeFolios][s.below(2)? as usize];
                one(call, r)
            }
            "hvo_freed_folio" => {
                let Some(h) = pick(s, &self.layers.dead_folios)? else { return Some(None) };
                let call = HvoCall::ALL[s.below(4)? as usize].0;
                one(call, FolioRef::Handle(h))
            }
            _ => Some(None),
        }
    }
}
