//! MMU access: read and write emulated memory at a virtual address on a CPU.
//!
//! A translation goes through the CPU's soft-MMU cache (a direct-mapped
//! array of host-page pointers, like QEMU's softmmu TLB), then the CPU's TLB
//! model, then a table walk that fills both. Permissions are checked on
//! the leaf: a missing entry is a translation fault, a write to a read-only
//! entry or a user access to a kernel entry a permission fault, an access
//! through a leaf whose output address has no RAM behind it (device
//! memory, a hole) an external abort. A fault is a value ([`Fault`]) with
//! the address and the descriptor, never a crash.
//! TLBIs invalidate the cache and the model, so a stale translation lives
//! exactly as long as it would on hardware.

use super::{AddressSpace, Desc, Level};
use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::arch::arm64::cpu::ArchCpu;
use crate::arch::arm64::pgtable::desc::bits::{PTE_AF, PTE_NG, PTE_PXN, PTE_RDONLY, PTE_USER, PTE_UXN, PTE_WRITE};
use crate::arch::arm64::tlb::{TlbEntry, TlbPerms};

/// What the access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// A write (needs a writable leaf).
    pub write: bool,
    /// An EL0 access (needs `PTE_USER`).
    pub user: bool,
}

impl Access {
    /// A kernel read.
    pub const READ: Access = Access { write: false, user: false };
    /// A kernel write.
    pub const WRITE: Access = Access { write: true, user: false };
}

/// Why an access faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// No valid entry at `level`.
    Translation {
        /// The level whose entry was invalid.
        level: Level,
    },
    /// The leaf forbids the access.
    Permission {
        /// The level of the leaf.
        level: Level,
    },
    /// The leaf's access flag is clear.
    AccessFlag {
        /// The level of the leaf.
        level: Level,
    },
    /// The translation succeeded but nothing emulated lies behind the
    /// output address `pa` (a leaf mapping device memory or a hole outside
    /// RAM): on hardware a synchronous external abort, or a device access
    /// mmlab does not model.
    ExternalAbort {
        /// The output address of the translation.
        pa: PhysAddr,
    },
}

/// A fault: the address, the kind, and the descriptor the walk stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The faulting virtual address.
    pub va: u64,
    /// Why it faulted.
    pub kind: FaultKind,
    /// The descriptor the walk stopped at (invalid for a translation fault).
    pub desc: Desc,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} fault at {:#018x} (descriptor {:#018x})", self.kind, self.va, self.desc.0)
    }
}
impl std::error::Error for Fault {}

/// Check `access` against a leaf descriptor. Writable means AP\[2\] clear, or
/// DBM set (FEAT_HAFDBS: hardware would clear AP\[2\] on the first write).
#[inline]
pub fn permits(d: Desc, access: Access) -> bool {
    (!access.user || d.has(PTE_USER)) && (!access.write || !d.has(PTE_RDONLY) || d.has(PTE_WRITE))
}

/// Translate `va` for `access` by walking the tables (the slow path).
///
/// # Errors
///
/// A [`Fault`]: translation (no valid leaf), access flag (AF clear) or permission (the leaf forbids
/// `access`).
pub fn translate_walk(
    cpu: &ArchCpu<'_>,
    asp: &AddressSpace,
    va: u64,
    access: Access,
) -> Result<(PhysAddr, super::Leaf), Fault> {
    let m = cpu.ram();
    let mut last = None;
    let leaf = super::walk_with(|pa| super::TableMemory::read_desc(m, pa).0, asp, va, |s| last = Some(s));
    let Some(leaf) = leaf else {
        return Err(Fault {
            va,
            kind: FaultKind::Translation { level: last.map_or(Level::P4d, |s| s.level) },
            desc: last.map_or(Desc::INVALID, |s| s.desc),
        });
    };
    if !leaf.desc.has(PTE_AF) {
        return Err(Fault { va, kind: FaultKind::AccessFlag { level: leaf.level }, desc: leaf.desc });
    }
    if !permits(leaf.desc, access) {
        return Err(Fault { va, kind: FaultKind::Permission { level: leaf.level }, desc: leaf.desc });
    }
    Ok((leaf.pa, leaf))
}

/// Translate `va` on `cpu` for `access`: soft-MMU cache, TLB model, walk.
/// A walk fills the TLB model (a contiguous run or block as one entry)
/// and the soft-MMU slot of the page.
///
/// # Errors
///
/// A [`Fault`], as [`translate_walk`].
#[inline]
pub fn translate(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, access: Access) -> Result<PhysAddr, Fault> {
    let asid = asp.asid().unwrap_or(0);
    // The soft-MMU cache keeps no user bit: EL0 accesses take the model.
    if !access.user
        && let Some(pa) = cpu.arch_data().tlb.fast_lookup(va, asid, access.write)
    {
        return Ok(PhysAddr(pa));
    }
    translate_slow(cpu, asp, va, access)
}

/// Translate `va` the way the hardware does: every access consults the TLB
/// model (hit or miss, counted in its [`crate::arch::arm64::tlb::TlbCounts`]), then
/// walks on a miss. [`translate`] first tries the soft-MMU cache, a host
/// shortcut that hides TLB-model hits and misses; experiments that count
/// TLB misses use this instead.
///
/// # Errors
///
/// A [`Fault`], as [`translate_walk`].
pub fn translate_uncached(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, access: Access) -> Result<PhysAddr, Fault> {
    translate_slow(cpu, asp, va, access)
}

#[cold]
fn translate_slow(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, access: Access) -> Result<PhysAddr, Fault> {
    let t = &cpu.arch_data().tlb;
    let asid = asp.asid().unwrap_or(0);
    let generation = t.generation();
    if let Some(e) = t.lookup(va, asid) {
        let p = e.perms();
        if (!access.user || p.user) && (!access.write || p.writable) {
            if !access.user {
                cpu.arch_data().tlb.fast_fill(va, &e, generation);
            }
            if let Some(pa) = e.translate(va) {
                return Ok(PhysAddr(pa));
            }
        }
    }
    let (pa, leaf) = translate_walk(cpu, asp, va, access)?;
    let span = leaf.span();
    let d = leaf.desc;
    let perms = TlbPerms {
        writable: permits(d, Access { write: true, user: false }),
        user: d.has(PTE_USER),
        exec: !d.has(if access.user { PTE_UXN } else { PTE_PXN }),
    };
    let base_va = va & !(span - 1);
    let base_pa = pa.0 - (va - base_va);
    let owner = if d.has(PTE_NG) { Some(asid) } else { None };
    if let Ok(e) = TlbEntry::new(base_va, base_pa, span, perms, owner) {
        // fill_checked, then fast_fill for a kernel access, in one hold of
        // the model's lock.
        t.fill_checked_fast(e, generation, (!access.user).then_some(va));
    }
    Ok(pa)
}

/// `pa` translated from `va` must have `len` bytes of RAM behind it; else
/// an [`FaultKind::ExternalAbort`] fault (leaves may map non-RAM output
/// addresses, which the emulator has nothing behind).
#[inline]
fn ram_behind(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, pa: PhysAddr, len: u64) -> Result<PhysAddr, Fault> {
    if cpu.ram().contains(pa, len) {
        return Ok(pa);
    }
    let desc = super::walk(cpu.ram(), asp, va).leaf.map_or(super::Desc::INVALID, |l| l.desc);
    Err(Fault { va, kind: FaultKind::ExternalAbort { pa }, desc })
}

/// Read a u64 at `va`: one 64-bit load (`READ_ONCE`) when aligned.
///
/// # Errors
///
/// A [`Fault`] from the translation, or [`FaultKind::ExternalAbort`] if no RAM lies behind the
/// output address.
#[inline]
pub fn read_u64(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64) -> Result<u64, Fault> {
    if va.is_multiple_of(8) {
        let pa = ram_behind(cpu, asp, va, translate(cpu, asp, va, Access::READ)?, 8)?;
        return Ok(cpu.ram().word(pa).load(std::sync::atomic::Ordering::Relaxed));
    }
    let mut b = [0u8; 8];
    read_bytes(cpu, asp, va, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Write a u64 at `va`: one 64-bit store (`WRITE_ONCE`) when aligned.
///
/// # Errors
///
/// As [`read_u64`], for a write access.
#[inline]
pub fn write_u64(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, v: u64) -> Result<(), Fault> {
    if va.is_multiple_of(8) {
        let pa = ram_behind(cpu, asp, va, translate(cpu, asp, va, Access::WRITE)?, 8)?;
        cpu.ram().word(pa).store(v, std::sync::atomic::Ordering::Relaxed);
        return Ok(());
    }
    write_bytes(cpu, asp, va, &v.to_le_bytes())
}

/// Read bytes at `va`, page by page.
///
/// # Errors
///
/// As [`read_u64`], for the first page that faults (`buf` is then partly filled).
pub fn read_bytes(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
    let mut done = 0usize;
    while done < buf.len() {
        let cur = va + done as u64;
        let n = ((PAGE_SIZE - cur % PAGE_SIZE) as usize).min(buf.len() - done);
        let pa = ram_behind(cpu, asp, cur, translate(cpu, asp, cur, Access::READ)?, n as u64)?;
        cpu.ram().read(pa, &mut buf[done..done + n]);
        done += n;
    }
    Ok(())
}

/// Write bytes at `va`, page by page; stops at the first fault.
///
/// # Errors
///
/// As [`read_u64`], for the first page that faults (the pages before it are written).
pub fn write_bytes(cpu: &ArchCpu<'_>, asp: &AddressSpace, va: u64, buf: &[u8]) -> Result<(), Fault> {
    let mut done = 0usize;
    while done < buf.len() {
        let cur = va + done as u64;
        let n = ((PAGE_SIZE - cur % PAGE_SIZE) as usize).min(buf.len() - done);
        let pa = ram_behind(cpu, asp, cur, translate(cpu, asp, cur, Access::WRITE)?, n as u64)?;
        cpu.ram().write(pa, &buf[done..done + n]);
        done += n;
    }
    Ok(())
}
