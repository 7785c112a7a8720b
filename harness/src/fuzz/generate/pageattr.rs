//! Generating the linear map's permission changes: `set_memory_ro`,
//! `set_memory_rw`, `set_memory_nx`, `set_memory_x` on the pages the
//! generator holds (their linear-map address, `page_address()`), right and
//! wrong.
//!
//! The model keeps the units whose permissions a call changed (read-only,
//! executable) and the pages it changed from the unit's head. As the
//! kernel requires of its callers, a unit's permissions are given back
//! (`set_memory_rw`, `set_memory_nx` over the same pages) before it is
//! freed: a free drawn for such a handle becomes the restoring call, and
//! `split_page` leaves such blocks alone. Wrong calls: an unaligned start
//! (`BadRange`), a start below `PAGE_OFFSET` or a range past `PAGE_END`
//! (`BadRange`), a range reaching past RAM (`NotMapped`). Whether a right
//! call on a block mapping is `NotPageGranular`, or a split fails for
//! lack of memory, is for the executor, which knows the machine.

use super::{Changed, Generator};
use crate::fuzz::op::{Call, Handle, Ref, SetMemory};
use mmlab_engine::PAGE_SIZE;

/// The flags of a changed unit.
const RO: u8 = 1;
const EXEC: u8 = 2;
/// Units with changed permissions the model keeps at most.
const MAX_CHANGED: usize = 16;

fn unit_ref(h: Handle, unit: u32) -> Ref {
    if unit == 0 { Ref::Whole(h) } else { Ref::Unit(h, unit) }
}

impl Generator {
    /// Whether a unit of `h` has changed permissions.
    pub(super) fn perms_changed(&self, h: Handle) -> bool {
        self.layers.perms.iter().any(|c| c.h == h)
    }

    /// The call giving back one changed permission of a unit of `h` (the
    /// first), if any: a free of `h` waits for it.
    pub(super) fn restore(&mut self, h: Handle) -> Option<Call> {
        let i = self.layers.perms.iter().position(|c| c.h == h)?;
        Some(self.restore_at(i))
    }

    fn restore_at(&mut self, i: usize) -> Call {
        let c = &mut self.layers.perms[i];
        let how = if c.flags & RO != 0 { SetMemory::Rw } else { SetMemory::Nx };
        c.flags &= if how == SetMemory::Rw { !RO } else { !EXEC };
        let call = Call::SetMemory { how, addr: unit_ref(c.h, c.unit), off: 0, nr: c.nr };
        if c.flags == 0 {
            self.layers.perms.swap_remove(i);
        }
        call
    }

    /// A right `set_memory_*` call, or None to draw again.
    pub(super) fn set_memory(&mut self, s: &mut dyn super::Source) -> Option<Option<Call>> {
        let n = self.layers.perms.len();
        if n >= MAX_CHANGED || n > 0 && s.below(3)? == 0 {
            let i = s.below(n as u64)? as usize;
            return Some(Some(self.restore_at(i)));
        }
        let Some(i) = self.live_page_index(s)? else { return Some(None) };
        let u = self.pick_live_unit(s, i)?;
        let p = &self.pages[i];
        let (h, order) = (p.h, p.units[u].0);
        let pages = 1u64 << order;
        // Mostly the whole unit, sometimes its first pages.
        let nr = if order > 0 && s.below(4)? == 0 { 1 + s.below(pages)? } else { pages };
        let how = [SetMemory::Ro, SetMemory::Ro, SetMemory::X, SetMemory::Rw, SetMemory::Nx][s.below(5)? as usize];
        let unit = u as u32;
        let at = self.layers.perms.iter().position(|c| c.h == h && c.unit == unit);
        let flag = match how {
            SetMemory::Ro | SetMemory::Rw => RO,
            SetMemory::Nx | SetMemory::X => EXEC,
        };
        match (how, at) {
            (SetMemory::Ro | SetMemory::X, Some(k)) => {
                let c = &mut self.layers.perms[k];
                c.flags |= flag;
                c.nr = c.nr.max(nr);
            }
            (SetMemory::Ro | SetMemory::X, None) => self.layers.perms.push(Changed { h, unit, nr, flags: flag }),
            // Giving back on a changed unit: over all it changed.
            (_, Some(k)) => {
                let c = &mut self.layers.perms[k];
                let nr = c.nr;
                c.flags &= !flag;
                if c.flags == 0 {
                    self.layers.perms.swap_remove(k);
                }
                return Some(Some(Call::SetMemory { how, addr: unit_ref(h, unit), off: 0, nr }));
            }
            // On pages as the boot left them: changes nothing.
            (_, None) => {}
        }
        Some(Some(Call::SetMemory { how, addr: unit_ref(h, unit), off: 0, nr }))
    }

    /// A wrong `set_memory_*` call of `kind`, or None.
    pub(super) fn wrong_set_memory(&mut self, s: &mut dyn super::Source, kind: &str) -> Option<Option<Call>> {
        let how = SetMemory::ALL[s.below(4)? as usize];
        let live = match self.live_page_index(s)? {
            Some(i) => {
                let u = self.pick_live_unit(s, i)?;
                Some(unit_ref(self.pages[i].h, u as u32))
            }
            None => None,
        };
        let call = match kind {
            "set_memory_unaligned" => {
                let Some(addr) = live else { return Some(None) };
                Call::SetMemory { how, addr, off: 1 + s.below(PAGE_SIZE - 1)?, nr: 1 + s.below(4)? }
            }
            "set_memory_bad_range" => {
                if s.below(2)? == 0 {
                    // Below PAGE_OFFSET, or at or above PAGE_END (VA48 and VA52).
                    let addr =
                        [0x1000, 0x1234_5000, 0xffff_8000_0000_0000, 0xffff_ffff_ffff_f000][s.below(4)? as usize];
                    Call::SetMemory { how, addr: Ref::Raw(addr), off: 0, nr: 1 + s.below(4)? }
                } else {
                    let Some(addr) = live else { return Some(None) };
                    let nr = [1 << 36, 1 << 52, u64::MAX][s.below(3)? as usize];
                    Call::SetMemory { how, addr, off: 0, nr }
                }
            }
            "set_memory_not_mapped" => {
                let Some(addr) = live else { return Some(None) };
                if s.below(2)? == 0 {
                    // A TiB or 16 past a page the fuzzer holds: past RAM.
                    let off = [1 << 40, 1 << 44][s.below(2)? as usize];
                    Call::SetMemory { how, addr, off, nr: 1 + s.below(4)? }
                } else {
                    // From a page the fuzzer holds to past the end of RAM.
                    Call::SetMemory { how, addr, off: 0, nr: [1 << 20, 1 << 28][s.below(2)? as usize] }
                }
            }
            _ => return Some(None),
        };
        Some(Some(call))
    }

    /// Drop the changed units of a handle that left the model.
    pub(super) fn forget_perms(&mut self, h: Handle) {
        self.layers.perms.retain(|c| c.h != h);
    }
}
