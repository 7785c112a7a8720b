//! Allocation-context flags (`gfp_t`), with the kernel's bit values and names.
//!
//! A [`Gfp`] carries what a caller of the page allocator allows it to do:
//! which zones it may use, which migratetype the pages belong to, whether it
//! may sleep and reclaim, whether the pages must be zeroed, and how hard it
//! should try before failing. mmlab uses the same bit values as Linux 6.12
//! (`include/linux/gfp_types.h`) so that a flags word copied from a real
//! trace means the same thing here, and it prints and parses them the way
//! the kernel's tracepoints do (`show_gfp_flags` in
//! `include/trace/events/mmflags.h`).
//!
//! ## Which kernel configuration the bits assume
//!
//! The low 24 bits are fixed in every configuration. The bits after
//! `__GFP_ZEROTAGS` depend on the kernel config; mmlab models a kernel built
//! without `CONFIG_KASAN_HW_TAGS` and without `CONFIG_LOCKDEP`, so
//! `__GFP_SKIP_ZERO`, `__GFP_SKIP_KASAN` and `__GFP_NOLOCKDEP` are zero (as the
//! header defines them in that case), and with `CONFIG_SLAB_OBJ_EXT` (selected
//! by `CONFIG_MEMCG`, which distribution and defconfig kernels enable), so
//! `__GFP_NO_OBJ_EXT` takes bit 24. The running x86_64 6.18 host kernel's
//! `events/kmem/mm_page_alloc/format` shows the same values.
//!
//! ## Printing
//!
//! [`Gfp`]'s `Display` follows the kernel's flag printer: an empty mask prints
//! `none`; otherwise the 6.12 name table is walked in order, every entry whose
//! bits are all present is printed and its bits removed, and whatever is left
//! at the end is printed as one hex number. Because the composite masks come
//! first, `GFP_KERNEL | __GFP_ZERO` prints as `GFP_KERNEL|__GFP_ZERO`. The
//! table order changed in later kernels (6.18 lists single bits in bit order);
//! mmlab keeps the 6.12 order.
#![allow(non_upper_case_globals)]

use std::fmt;
use std::str::FromStr;

/// A set of allocation flags: the kernel's `gfp_t`.
///
/// A [`bitflags`] type over the kernel's bit values: combine with `|` (or
/// [`Gfp::union`]), take flags away with `-` ([`Gfp::difference`], which
/// keeps every other bit, as `gfp & ~__GFP_X` does in C), test with
/// [`Gfp::contains`] or [`Gfp::intersects`]. The field is the raw `gfp_t`
/// word, bits the 6.12 tables do not name included (as a trace may carry
/// them); [`Gfp::from_bits_retain`] and [`Gfp::bits`] convert.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gfp(u32);

/// Bit positions, in the order of the kernel's `___GFP_*_BIT` enum.
mod bit {
    pub const DMA: u32 = 0;
    pub const HIGHMEM: u32 = 1;
    pub const DMA32: u32 = 2;
    pub const MOVABLE: u32 = 3;
    pub const RECLAIMABLE: u32 = 4;
    pub const HIGH: u32 = 5;
    pub const IO: u32 = 6;
    pub const FS: u32 = 7;
    pub const ZERO: u32 = 8;
    /// Formerly `__GFP_ATOMIC`; unused since 6.4 but still holds its slot.
    pub const UNUSED: u32 = 9;
    pub const DIRECT_RECLAIM: u32 = 10;
    pub const KSWAPD_RECLAIM: u32 = 11;
    pub const WRITE: u32 = 12;
    pub const NOWARN: u32 = 13;
    pub const RETRY_MAYFAIL: u32 = 14;
    pub const NOFAIL: u32 = 15;
    pub const NORETRY: u32 = 16;
    pub const MEMALLOC: u32 = 17;
    pub const COMP: u32 = 18;
    pub const NOMEMALLOC: u32 = 19;
    pub const HARDWALL: u32 = 20;
    pub const THISNODE: u32 = 21;
    pub const ACCOUNT: u32 = 22;
    pub const ZEROTAGS: u32 = 23;
    // No CONFIG_KASAN_HW_TAGS, no CONFIG_LOCKDEP: the next bit is NO_OBJ_EXT.
    pub const NO_OBJ_EXT: u32 = 24;
    pub const LAST: u32 = 25;
}

// The unused slot still separates ZERO from DIRECT_RECLAIM.
const _: () = assert!(bit::ZERO + 1 == bit::UNUSED && bit::UNUSED + 1 == bit::DIRECT_RECLAIM);

bitflags::bitflags! {
    impl Gfp: u32 {
        // Zone modifiers.
        /// From `ZONE_DMA`.
        const __GFP_DMA = 1 << bit::DMA;
        /// May use highmem (no-op on 64-bit).
        const __GFP_HIGHMEM = 1 << bit::HIGHMEM;
        /// From `ZONE_DMA32`.
        const __GFP_DMA32 = 1 << bit::DMA32;
        /// Movable: `MIGRATE_MOVABLE`, may use `ZONE_MOVABLE`.
        const __GFP_MOVABLE = 1 << bit::MOVABLE;
        /// Zone modifier bits together (`GFP_ZONEMASK`).
        const GFP_ZONEMASK = Self::__GFP_DMA.bits()
            | Self::__GFP_HIGHMEM.bits()
            | Self::__GFP_DMA32.bits()
            | Self::__GFP_MOVABLE.bits();

        // Page mobility and placement.
        /// Reclaimable: `MIGRATE_RECLAIMABLE`.
        const __GFP_RECLAIMABLE = 1 << bit::RECLAIMABLE;
        /// The page will be dirtied (dirty-limit spreading).
        const __GFP_WRITE = 1 << bit::WRITE;
        /// Enforce the cpuset memory policy.
        const __GFP_HARDWALL = 1 << bit::HARDWALL;
        /// This node only, no fallback.
        const __GFP_THISNODE = 1 << bit::THISNODE;
        /// Charge to the memory cgroup.
        const __GFP_ACCOUNT = 1 << bit::ACCOUNT;
        /// No slab object extension vector.
        const __GFP_NO_OBJ_EXT = 1 << bit::NO_OBJ_EXT;

        // Watermark modifiers.
        /// High priority: may dip below the min watermark.
        const __GFP_HIGH = 1 << bit::HIGH;
        /// May use all reserves.
        const __GFP_MEMALLOC = 1 << bit::MEMALLOC;
        /// Never use the emergency reserves.
        const __GFP_NOMEMALLOC = 1 << bit::NOMEMALLOC;

        // Reclaim modifiers.
        /// May start physical I/O.
        const __GFP_IO = 1 << bit::IO;
        /// May call into the filesystem.
        const __GFP_FS = 1 << bit::FS;
        /// May enter direct reclaim.
        const __GFP_DIRECT_RECLAIM = 1 << bit::DIRECT_RECLAIM;
        /// May wake kswapd at the low watermark.
        const __GFP_KSWAPD_RECLAIM = 1 << bit::KSWAPD_RECLAIM;
        /// Both reclaim bits.
        const __GFP_RECLAIM = Self::__GFP_DIRECT_RECLAIM.bits() | Self::__GFP_KSWAPD_RECLAIM.bits();
        /// Retry hard, but may fail.
        const __GFP_RETRY_MAYFAIL = 1 << bit::RETRY_MAYFAIL;
        /// Retry forever; must not fail.
        const __GFP_NOFAIL = 1 << bit::NOFAIL;
        /// Give up after one light reclaim attempt.
        const __GFP_NORETRY = 1 << bit::NORETRY;

        // Action modifiers.
        /// No allocation-failure warning.
        const __GFP_NOWARN = 1 << bit::NOWARN;
        /// Make a compound page.
        const __GFP_COMP = 1 << bit::COMP;
        /// Return zeroed pages.
        const __GFP_ZERO = 1 << bit::ZERO;
        /// Zero the MTE tags along with the memory.
        const __GFP_ZEROTAGS = 1 << bit::ZEROTAGS;

        /// Every defined bit (`__GFP_BITS_MASK`), the unused slot included.
        const __GFP_BITS_MASK = (1 << bit::LAST) - 1;

        // Composites, as gfp_types.h builds them.
        /// `GFP_ATOMIC`: cannot sleep, may use reserves.
        const GFP_ATOMIC = Self::__GFP_HIGH.bits() | Self::__GFP_KSWAPD_RECLAIM.bits();
        /// `GFP_KERNEL`: the usual kernel allocation, may sleep and reclaim.
        const GFP_KERNEL = Self::__GFP_RECLAIM.bits() | Self::__GFP_IO.bits() | Self::__GFP_FS.bits();
        /// `GFP_KERNEL_ACCOUNT`: `GFP_KERNEL`, charged to the memory cgroup.
        const GFP_KERNEL_ACCOUNT = Self::GFP_KERNEL.bits() | Self::__GFP_ACCOUNT.bits();
        /// `GFP_NOWAIT`: no direct reclaim, no warning.
        const GFP_NOWAIT = Self::__GFP_KSWAPD_RECLAIM.bits() | Self::__GFP_NOWARN.bits();
        /// `GFP_NOIO`: may reclaim but start no I/O.
        const GFP_NOIO = Self::__GFP_RECLAIM.bits();
        /// `GFP_NOFS`: may reclaim but not call into the filesystem.
        const GFP_NOFS = Self::__GFP_RECLAIM.bits() | Self::__GFP_IO.bits();
        /// `GFP_USER`: for user space, cpuset-bound.
        const GFP_USER = Self::__GFP_RECLAIM.bits()
            | Self::__GFP_IO.bits()
            | Self::__GFP_FS.bits()
            | Self::__GFP_HARDWALL.bits();
        /// `GFP_DMA`.
        const GFP_DMA = Self::__GFP_DMA.bits();
        /// `GFP_DMA32`.
        const GFP_DMA32 = Self::__GFP_DMA32.bits();
        /// `GFP_HIGHUSER`: user pages, highmem allowed.
        const GFP_HIGHUSER = Self::GFP_USER.bits() | Self::__GFP_HIGHMEM.bits();
        /// `GFP_HIGHUSER_MOVABLE`: movable user pages (`__GFP_SKIP_KASAN`
        /// is 0 here).
        const GFP_HIGHUSER_MOVABLE = Self::GFP_HIGHUSER.bits() | Self::__GFP_MOVABLE.bits();
        /// `GFP_TRANSHUGE_LIGHT`: THP without reclaim.
        const GFP_TRANSHUGE_LIGHT = (Self::GFP_HIGHUSER_MOVABLE.bits()
            | Self::__GFP_COMP.bits()
            | Self::__GFP_NOMEMALLOC.bits()
            | Self::__GFP_NOWARN.bits())
            & !Self::__GFP_RECLAIM.bits();
        /// `GFP_TRANSHUGE`: THP with direct reclaim.
        const GFP_TRANSHUGE = Self::GFP_TRANSHUGE_LIGHT.bits() | Self::__GFP_DIRECT_RECLAIM.bits();
    }
}

impl Gfp {
    /// The empty set (`0`).
    pub const NONE: Gfp = Gfp::empty();
    /// Zero without `CONFIG_KASAN_HW_TAGS`.
    pub const __GFP_SKIP_ZERO: Gfp = Gfp::empty();
    /// Zero without `CONFIG_KASAN_HW_TAGS`.
    pub const __GFP_SKIP_KASAN: Gfp = Gfp::empty();
    /// Zero without `CONFIG_LOCKDEP`.
    pub const __GFP_NOLOCKDEP: Gfp = Gfp::empty();
    /// Number of defined bits (`__GFP_BITS_SHIFT`).
    pub const __GFP_BITS_SHIFT: u32 = bit::LAST;

    /// The migratetype the flags ask for: 0 unmovable, 1 movable,
    /// 2 reclaimable. The value is the two mobility bits shifted down, so
    /// setting both (which the kernel warns about) gives 3, the high-atomic
    /// type, just as in the kernel.
    ///
    /// Mirrors include/linux/gfp.h gfp_migratetype() with mobility grouping
    /// enabled (`page_group_by_mobility_disabled` false).
    #[inline]
    pub const fn gfp_migratetype(self) -> u8 {
        ((self.bits() & (Self::__GFP_MOVABLE.bits() | Self::__GFP_RECLAIMABLE.bits())) >> bit::MOVABLE) as u8
    }

    /// Whether the caller may sleep in direct reclaim.
    ///
    /// Mirrors include/linux/gfp.h gfpflags_allow_blocking().
    #[inline]
    pub const fn gfpflags_allow_blocking(self) -> bool {
        self.contains(Self::__GFP_DIRECT_RECLAIM)
    }
}

/// The name table used for printing, in the order of 6.12's
/// `__def_gfpflag_names` (composites first, so they win).
const PRINT_NAMES: &[(Gfp, &str)] = &[
    (Gfp::GFP_TRANSHUGE, "GFP_TRANSHUGE"),
    (Gfp::GFP_TRANSHUGE_LIGHT, "GFP_TRANSHUGE_LIGHT"),
    (Gfp::GFP_HIGHUSER_MOVABLE, "GFP_HIGHUSER_MOVABLE"),
    (Gfp::GFP_HIGHUSER, "GFP_HIGHUSER"),
    (Gfp::GFP_USER, "GFP_USER"),
    (Gfp::GFP_KERNEL_ACCOUNT, "GFP_KERNEL_ACCOUNT"),
    (Gfp::GFP_KERNEL, "GFP_KERNEL"),
    (Gfp::GFP_NOFS, "GFP_NOFS"),
    (Gfp::GFP_ATOMIC, "GFP_ATOMIC"),
    (Gfp::GFP_NOIO, "GFP_NOIO"),
    (Gfp::GFP_NOWAIT, "GFP_NOWAIT"),
    (Gfp::GFP_DMA, "GFP_DMA"),
    (Gfp::__GFP_HIGHMEM, "__GFP_HIGHMEM"),
    (Gfp::GFP_DMA32, "GFP_DMA32"),
    (Gfp::__GFP_HIGH, "__GFP_HIGH"),
    (Gfp::__GFP_IO, "__GFP_IO"),
    (Gfp::__GFP_FS, "__GFP_FS"),
    (Gfp::__GFP_NOWARN, "__GFP_NOWARN"),
    (Gfp::__GFP_RETRY_MAYFAIL, "__GFP_RETRY_MAYFAIL"),
    (Gfp::__GFP_NOFAIL, "__GFP_NOFAIL"),
    (Gfp::__GFP_NORETRY, "__GFP_NORETRY"),
    (Gfp::__GFP_COMP, "__GFP_COMP"),
    (Gfp::__GFP_ZERO, "__GFP_ZERO"),
    (Gfp::__GFP_NOMEMALLOC, "__GFP_NOMEMALLOC"),
    (Gfp::__GFP_MEMALLOC, "__GFP_MEMALLOC"),
    (Gfp::__GFP_HARDWALL, "__GFP_HARDWALL"),
    (Gfp::__GFP_THISNODE, "__GFP_THISNODE"),
    (Gfp::__GFP_RECLAIMABLE, "__GFP_RECLAIMABLE"),
    (Gfp::__GFP_MOVABLE, "__GFP_MOVABLE"),
    (Gfp::__GFP_ACCOUNT, "__GFP_ACCOUNT"),
    (Gfp::__GFP_WRITE, "__GFP_WRITE"),
    (Gfp::__GFP_RECLAIM, "__GFP_RECLAIM"),
    (Gfp::__GFP_DIRECT_RECLAIM, "__GFP_DIRECT_RECLAIM"),
    (Gfp::__GFP_KSWAPD_RECLAIM, "__GFP_KSWAPD_RECLAIM"),
    (Gfp::__GFP_ZEROTAGS, "__GFP_ZEROTAGS"),
];

/// Names accepted by [`FromStr`] that the printer never produces (the
/// single-bit spellings of `GFP_DMA`/`GFP_DMA32`, and bits the 6.12 printer
/// leaves as hex).
const EXTRA_PARSE_NAMES: &[(Gfp, &str)] =
    &[(Gfp::__GFP_DMA, "__GFP_DMA"), (Gfp::__GFP_DMA32, "__GFP_DMA32"), (Gfp::__GFP_NO_OBJ_EXT, "__GFP_NO_OBJ_EXT")];

impl fmt::Display for Gfp {
    /// Prints like the kernel's `show_gfp_flags()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let mut left = self.bits();
        let mut first = true;
        for &(mask, name) in PRINT_NAMES {
            if left == 0 {
                break;
            }
            if left & mask.bits() != mask.bits() {
                continue;
            }
            left &= !mask.bits();
            if !first {
                f.write_str("|")?;
            }
            first = false;
            f.write_str(name)?;
        }
        if left != 0 {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{left:#x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Gfp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gfp({:#x}: {})", self.bits(), self)
    }
}

/// Error from parsing a [`Gfp`]: a `|`-separated part that is neither a known
/// flag name, `none`, nor a hex number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseGfpError {
    /// The part that was not understood.
    pub name: String,
}

impl fmt::Display for ParseGfpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            f.write_str("empty gfp flag name")
        } else {
            write!(f, "unknown gfp flag name `{}`", self.name)
        }
    }
}

impl std::error::Error for ParseGfpError {}

impl FromStr for Gfp {
    type Err = ParseGfpError;

    /// Parses the `|`-joined form that `Display` prints, e.g.
    /// `GFP_KERNEL|__GFP_ZERO`. Also accepts `none`, hex leftovers such as
    /// `0x1000000`, `__GFP_DMA`/`__GFP_DMA32`/`__GFP_NO_OBJ_EXT`, and spaces
    /// around the separators.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = Gfp::empty();
        for part in s.split('|') {
            let part = part.trim();
            if part == "none" {
                continue;
            }
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X"))
                && let Ok(v) = u32::from_str_radix(hex, 16)
            {
                out |= Gfp::from_bits_retain(v);
                continue;
            }
            let found = PRINT_NAMES.iter().chain(EXTRA_PARSE_NAMES).find(|(_, name)| *name == part);
            match found {
                Some(&(mask, _)) => out |= mask,
                None => {
                    return Err(ParseGfpError { name: part.to_owned() });
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_values_match_gfp_types_h() {
        assert_eq!(Gfp::__GFP_DMA.bits(), 0x1);
        assert_eq!(Gfp::__GFP_HIGHMEM.bits(), 0x2);
        assert_eq!(Gfp::__GFP_DMA32.bits(), 0x4);
        assert_eq!(Gfp::__GFP_MOVABLE.bits(), 0x8);
        assert_eq!(Gfp::__GFP_RECLAIMABLE.bits(), 0x10);
        assert_eq!(Gfp::__GFP_HIGH.bits(), 0x20);
        assert_eq!(Gfp::__GFP_IO.bits(), 0x40);
        assert_eq!(Gfp::__GFP_FS.bits(), 0x80);
        assert_eq!(Gfp::__GFP_ZERO.bits(), 0x100);
        assert_eq!(Gfp::__GFP_DIRECT_RECLAIM.bits(), 0x400);
        assert_eq!(Gfp::__GFP_KSWAPD_RECLAIM.bits(), 0x800);
        assert_eq!(Gfp::__GFP_WRITE.bits(), 0x1000);
        assert_eq!(Gfp::__GFP_NOWARN.bits(), 0x2000);
        assert_eq!(Gfp::__GFP_RETRY_MAYFAIL.bits(), 0x4000);
        assert_eq!(Gfp::__GFP_NOFAIL.bits(), 0x8000);
        assert_eq!(Gfp::__GFP_NORETRY.bits(), 0x10000);
        assert_eq!(Gfp::__GFP_MEMALLOC.bits(), 0x20000);
        assert_eq!(Gfp::__GFP_COMP.bits(), 0x40000);
        assert_eq!(Gfp::__GFP_NOMEMALLOC.bits(), 0x80000);
        assert_eq!(Gfp::__GFP_HARDWALL.bits(), 0x100000);
        assert_eq!(Gfp::__GFP_THISNODE.bits(), 0x200000);
        assert_eq!(Gfp::__GFP_ACCOUNT.bits(), 0x400000);
        assert_eq!(Gfp::__GFP_ZEROTAGS.bits(), 0x800000);
        assert_eq!(Gfp::__GFP_NO_OBJ_EXT.bits(), 0x1000000);
        assert_eq!(Gfp::__GFP_BITS_MASK.bits(), 0x1ffffff);
    }

    #[test]
    fn composite_values() {
        assert_eq!(Gfp::GFP_ATOMIC.bits(), 0x820);
        assert_eq!(Gfp::GFP_KERNEL.bits(), 0xcc0);
        assert_eq!(Gfp::GFP_KERNEL_ACCOUNT.bits(), 0x400cc0);
        assert_eq!(Gfp::GFP_NOWAIT.bits(), 0x2800);
        assert_eq!(Gfp::GFP_NOIO.bits(), 0xc00);
        assert_eq!(Gfp::GFP_NOFS.bits(), 0xc40);
        assert_eq!(Gfp::GFP_USER.bits(), 0x100cc0);
        assert_eq!(Gfp::GFP_DMA.bits(), 0x1);
        assert_eq!(Gfp::GFP_DMA32.bits(), 0x4);
        assert_eq!(Gfp::GFP_HIGHUSER.bits(), 0x100cc2);
        assert_eq!(Gfp::GFP_HIGHUSER_MOVABLE.bits(), 0x100cca);
        assert_eq!(Gfp::GFP_TRANSHUGE_LIGHT.bits(), 0x1c20ca);
        assert_eq!(Gfp::GFP_TRANSHUGE.bits(), 0x1c24ca);
    }

    #[test]
    fn migratetype_and_blocking() {
        assert_eq!(Gfp::GFP_KERNEL.gfp_migratetype(), 0);
        assert_eq!(Gfp::GFP_HIGHUSER_MOVABLE.gfp_migratetype(), 1);
        assert_eq!((Gfp::GFP_KERNEL | Gfp::__GFP_RECLAIMABLE).gfp_migratetype(), 2);
        assert_eq!((Gfp::__GFP_MOVABLE | Gfp::__GFP_RECLAIMABLE).gfp_migratetype(), 3);
        assert!(Gfp::GFP_KERNEL.gfpflags_allow_blocking());
        assert!(Gfp::GFP_TRANSHUGE.gfpflags_allow_blocking());
        assert!(!Gfp::GFP_ATOMIC.gfpflags_allow_blocking());
        assert!(!Gfp::GFP_NOWAIT.gfpflags_allow_blocking());
        assert!(!Gfp::GFP_TRANSHUGE_LIGHT.gfpflags_allow_blocking());
    }

    #[test]
    fn ops() {
        let g = Gfp::GFP_KERNEL | Gfp::__GFP_ZERO;
        assert!(g.contains(Gfp::__GFP_ZERO));
        assert!(g.contains(Gfp::GFP_KERNEL));
        assert!(!g.contains(Gfp::GFP_USER));
        assert_eq!(g - Gfp::__GFP_ZERO, Gfp::GFP_KERNEL);
        assert_eq!(g & !Gfp::__GFP_ZERO, Gfp::GFP_KERNEL);
        // `-` keeps bits no table names, as `gfp & ~__GFP_ZERO` does.
        let odd = Gfp::from_bits_retain(0x8000_0000) | Gfp::__GFP_ZERO;
        assert_eq!((odd - Gfp::__GFP_ZERO).bits(), 0x8000_0000);
        assert_eq!(g & Gfp::__GFP_RECLAIM, Gfp::__GFP_RECLAIM);
        let mut h = Gfp::NONE;
        h |= Gfp::__GFP_IO;
        h &= Gfp::__GFP_IO | Gfp::__GFP_FS;
        assert_eq!(h, Gfp::__GFP_IO);
        assert_eq!(Gfp::default(), Gfp::NONE);
    }

    fn show(g: Gfp) -> String {
        g.to_string()
    }

    #[test]
    fn display_like_show_gfp_flags() {
        assert_eq!(show(Gfp::from_bits_retain(0)), "none");
        assert_eq!(show(Gfp::GFP_KERNEL), "GFP_KERNEL");
        assert_eq!(show(Gfp::GFP_KERNEL | Gfp::__GFP_ZERO), "GFP_KERNEL|__GFP_ZERO");
        assert_eq!(show(Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_ZERO), "GFP_HIGHUSER_MOVABLE|__GFP_ZERO");
        assert_eq!(show(Gfp::GFP_TRANSHUGE), "GFP_TRANSHUGE");
        assert_eq!(show(Gfp::GFP_TRANSHUGE_LIGHT), "GFP_TRANSHUGE_LIGHT");
        assert_eq!(show(Gfp::GFP_KERNEL_ACCOUNT), "GFP_KERNEL_ACCOUNT");
        assert_eq!(show(Gfp::GFP_USER), "GFP_USER");
        assert_eq!(show(Gfp::GFP_HIGHUSER), "GFP_HIGHUSER");
        assert_eq!(show(Gfp::GFP_ATOMIC), "GFP_ATOMIC");
        assert_eq!(show(Gfp::GFP_ATOMIC | Gfp::__GFP_NOWARN), "GFP_ATOMIC|__GFP_NOWARN");
        assert_eq!(show(Gfp::GFP_NOWAIT), "GFP_NOWAIT");
        assert_eq!(show(Gfp::GFP_NOIO), "GFP_NOIO");
        assert_eq!(show(Gfp::GFP_NOFS), "GFP_NOFS");
        assert_eq!(show(Gfp::GFP_DMA32), "GFP_DMA32");
        assert_eq!(show(Gfp::__GFP_DMA), "GFP_DMA");
        // Composite beats the single bits it contains; leftovers follow in table order.
        assert_eq!(
            show(Gfp::GFP_KERNEL | Gfp::__GFP_COMP | Gfp::__GFP_NOWARN | Gfp::__GFP_NORETRY),
            "GFP_KERNEL|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP"
        );
        // KSWAPD alone after GFP_NOWAIT/NOIO are ruled out.
        assert_eq!(show(Gfp::__GFP_KSWAPD_RECLAIM), "__GFP_KSWAPD_RECLAIM");
        assert_eq!(show(Gfp::__GFP_DIRECT_RECLAIM), "__GFP_DIRECT_RECLAIM");
        // GFP_USER minus FS: GFP_NOFS then HARDWALL.
        assert_eq!(show(Gfp::GFP_NOFS | Gfp::__GFP_HARDWALL), "GFP_NOFS|__GFP_HARDWALL");
        assert_eq!(
            show(Gfp::__GFP_MOVABLE | Gfp::__GFP_WRITE | Gfp::__GFP_ZEROTAGS),
            "__GFP_MOVABLE|__GFP_WRITE|__GFP_ZEROTAGS"
        );
        // Bits outside the 6.12 table print as one hex leftover.
        assert_eq!(show(Gfp::__GFP_NO_OBJ_EXT), "0x1000000");
        assert_eq!(show(Gfp::GFP_KERNEL | Gfp::from_bits_retain(0x200)), "GFP_KERNEL|0x200");
        assert_eq!(show(Gfp::from_bits_retain(0x8000_0200)), "0x80000200");
    }

    #[test]
    fn parse_round_trips() {
        for g in [
            Gfp::from_bits_retain(0),
            Gfp::GFP_KERNEL,
            Gfp::GFP_KERNEL | Gfp::__GFP_ZERO,
            Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_ZERO,
            Gfp::GFP_TRANSHUGE | Gfp::__GFP_THISNODE,
            Gfp::GFP_KERNEL | Gfp::from_bits_retain(0x200) | Gfp::__GFP_NO_OBJ_EXT,
            Gfp::from_bits_retain(0xffff_ffff),
        ] {
            assert_eq!(show(g).parse::<Gfp>(), Ok(g), "{}", show(g));
        }
        assert_eq!("GFP_KERNEL | __GFP_ZERO".parse(), Ok(Gfp::from_bits_retain(0xdc0)));
        assert_eq!("__GFP_DMA32".parse(), Ok(Gfp::GFP_DMA32));
        assert_eq!("none".parse(), Ok(Gfp::from_bits_retain(0)));
    }

    #[test]
    fn parse_errors() {
        let e = "GFP_KERNEL|__GFP_BOGUS".parse::<Gfp>().unwrap_err();
        assert_eq!(e, ParseGfpError { name: "__GFP_BOGUS".into() });
        assert_eq!(e.to_string(), "unknown gfp flag name `__GFP_BOGUS`");
        assert_eq!("".parse::<Gfp>().unwrap_err().to_string(), "empty gfp flag name");
        assert!("GFP_KERNEL||__GFP_ZERO".parse::<Gfp>().is_err());
        assert!("0xzz".parse::<Gfp>().is_err());
        assert!("gfp_kernel".parse::<Gfp>().is_err());
    }
}
