//! Address and frame-number types, and the page-size constants.
//!
//! Three kinds of number travel through the memory-management code and are
//! easy to confuse: physical addresses, page frame numbers and virtual
//! addresses. Each gets its own newtype so that the compiler keeps them apart;
//! conversions are explicit and named as the kernel names them (`PFN_PHYS`,
//! `PHYS_PFN`, `__va`/`__pa` come with the linear map in a later layer).
//!
//! Only the 4 KiB granule is implemented. The granule is still a named
//! constant so that every size in the code is written in terms of it.

use std::fmt;

/// log2 of the translation granule (4 KiB).
pub const PAGE_SHIFT: u32 = 12;
/// Bytes per base page.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Mask that clears the offset within a page.
pub const PAGE_MASK: u64 = !(PAGE_SIZE - 1);

/// A physical address in the emulated machine.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PhysAddr(pub u64);

/// A page frame number: a physical address shifted right by [`PAGE_SHIFT`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pfn(pub u64);

/// A virtual address in the emulated machine's address space.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl PhysAddr {
    /// Mirrors `PHYS_PFN()`: the frame that contains this address.
    #[inline]
    pub const fn pfn(self) -> Pfn {
        Pfn(self.0 >> PAGE_SHIFT)
    }
    /// True if the address is aligned to `align` bytes (a power of two).
    #[inline]
    pub const fn is_aligned(self, align: u64) -> bool {
        self.0 & (align - 1) == 0
    }
}

impl Pfn {
    /// Mirrors `PFN_PHYS()`.
    #[inline]
    pub const fn phys(self) -> PhysAddr {
        PhysAddr(self.0 << PAGE_SHIFT)
    }
    /// The frame `n` frames above this one.
    #[inline]
    pub const fn add(self, n: u64) -> Pfn {
        Pfn(self.0 + n)
    }
    /// True if the frame number is a multiple of `2^order`.
    #[inline]
    pub const fn is_aligned_order(self, order: u32) -> bool {
        self.0 & ((1 << order) - 1) == 0
    }
}

impl fmt::Debug for PhysAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PhysAddr({:#x})", self.0)
    }
}
impl fmt::Display for PhysAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
impl fmt::Debug for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pfn({:#x})", self.0)
    }
}
impl fmt::Display for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
impl fmt::Debug for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VirtAddr({:#018x})", self.0)
    }
}
impl fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// Parse a size such as `4G`, `512M`, `64K`, `4096` (binary units, as the
/// kernel's `memparse()` reads `mem=`).
///
/// # Errors
///
/// A message if `s` is not a number with an optional K/M/G/T suffix, or if the size overflows 64
/// bits.
pub fn memparse(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, shift) = match s.as_bytes().last().map(|b| b.to_ascii_uppercase()) {
        Some(b'K') => (&s[..s.len() - 1], 10),
        Some(b'M') => (&s[..s.len() - 1], 20),
        Some(b'G') => (&s[..s.len() - 1], 30),
        Some(b'T') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n: u64 =
        num.parse().map_err(|_| format!("invalid size {s:?}: expected a number with an optional K/M/G/T suffix"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("size {s:?} overflows 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfn_phys_round_trip() {
        let pa = PhysAddr(0x4000_3123);
        assert_eq!(pa.pfn(), Pfn(0x40003));
        assert_eq!(Pfn(0x40003).phys(), PhysAddr(0x4000_3000));
        assert!(Pfn(0x40400).is_aligned_order(10));
        assert!(!Pfn(0x40200).is_aligned_order(10));
    }

    #[test]
    fn memparse_units() {
        assert_eq!(memparse("4G").unwrap(), 4 << 30);
        assert_eq!(memparse("64k").unwrap(), 64 << 10);
        assert_eq!(memparse("4096").unwrap(), 4096);
        assert!(memparse("4X").is_err());
        assert!(memparse("").is_err());
        assert!(memparse("99999999999T").is_err());
    }
}
