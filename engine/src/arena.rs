//! Physical memory: one anonymous host mapping that stands for the machine's RAM.
//!
//! The arena is created with `MAP_NORESERVE` so that 64 GiB of emulated RAM
//! costs host memory only for the pages something touches (the memmap, page
//! tables, pages a workload writes). Everything the kernel keeps in memory lives
//! here: struct pages, pageblock flags, later the translation tables.
//!
//! All `unsafe` that turns arena bytes into Rust references is in this file.
//! The only types handed out by reference are made of atomics ([`ArenaPod`]),
//! so every bit pattern is a valid value, shared references may alias, and
//! concurrent access is a race in the kernel's sense (a lost update), never
//! undefined behaviour in Rust's.

use crate::addr::{PAGE_SIZE, PhysAddr};
use memmap2::{MmapMut, MmapOptions};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Types that may be viewed in place inside the arena.
///
/// # Safety
///
/// Implementors must be `repr(C)` or primitive, made only of atomics (so that
/// any bit pattern is valid and shared mutation is sound), with an alignment
/// that divides 8.
pub unsafe trait ArenaPod: Sync {}
// SAFETY: an atomic byte accepts any bit pattern and allows shared mutation.
unsafe impl ArenaPod for AtomicU8 {}
// SAFETY: as above, alignment 8.
unsafe impl ArenaPod for AtomicU64 {}

/// Errors while creating the arena.
#[derive(Debug)]
pub enum ArenaError {
    /// Size zero, not page-aligned, or the base is not page-aligned.
    BadGeometry {
        /// The base asked for.
        base: PhysAddr,
        /// The size asked for.
        size: u64,
    },
    /// The host refused the mapping.
    Map(std::io::Error),
}

impl std::fmt::Display for ArenaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArenaError::BadGeometry { base, size } => {
                write!(f, "arena base {base} size {size:#x} must be non-zero and page-aligned")
            }
            ArenaError::Map(e) => write!(f, "cannot map the arena: {e}"),
        }
    }
}
impl std::error::Error for ArenaError {}

/// The machine's RAM: `size` bytes of physical address space starting at `base`.
#[derive(Debug)]
pub struct Arena {
    map: MmapMut,
    base: PhysAddr,
    size: u64,
}

impl Arena {
    /// Map `size` bytes of emulated RAM that appears at physical address `base`.
    ///
    /// # Errors
    ///
    /// [`ArenaError::BadGeometry`] for a zero or unaligned size or base; [`ArenaError::Map`] if the
    /// host refuses the mapping.
    pub fn new(base: PhysAddr, size: u64) -> Result<Arena, ArenaError> {
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) || !base.0.is_multiple_of(PAGE_SIZE) {
            return Err(ArenaError::BadGeometry { base, size });
        }
        let len = usize::try_from(size).map_err(|_| ArenaError::BadGeometry { base, size })?;
        let map = MmapOptions::new().len(len).no_reserve_swap().map_anon().map_err(ArenaError::Map)?;
        Ok(Arena { map, base, size })
    }

    /// First physical address of RAM.
    pub fn base(&self) -> PhysAddr {
        self.base
    }
    /// Bytes of RAM.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// One past the last physical address of RAM.
    pub fn end(&self) -> PhysAddr {
        PhysAddr(self.base.0 + self.size)
    }
    /// True if `[pa, pa + len)` lies inside RAM.
    pub fn contains(&self, pa: PhysAddr, len: u64) -> bool {
        pa.0 >= self.base.0 && len <= self.size && pa.0 - self.base.0 <= self.size - len
    }

    /// View `count` values of `T` in place at `pa`.
    ///
    /// Panics if the range is outside RAM or misaligned: callers pass ranges
    /// they took from memblock, so this is a bug, never user input.
    pub fn slice<T: ArenaPod>(&self, pa: PhysAddr, count: usize) -> &[T] {
        let bytes = (count as u64).checked_mul(size_of::<T>() as u64);
        let Some(bytes) = bytes.filter(|&b| self.contains(pa, b)) else {
            panic!("arena slice {pa}+{count}x{} outside RAM", size_of::<T>());
        };
        let _ = bytes;
        assert!(pa.0.is_multiple_of(align_of::<T>() as u64), "misaligned arena slice at {pa}");
        let off = (pa.0 - self.base.0) as usize;
        // SAFETY: the range [off, off + count * size_of::<T>()) was checked to lie
        // inside the mapping, which lives as long as `self`; the mapping is
        // page-aligned and `pa` is aligned for T, so the pointer is aligned. T is
        // ArenaPod: made of atomics, valid for every bit pattern (including the
        // zeroes of a fresh anonymous mapping) and sound to share and mutate
        // through `&`. Nothing in mmlab creates `&mut` to arena bytes.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off).cast::<T>(), count) }
    }

    /// Host address of `[pa, pa + len)`, if it lies in RAM (for the
    /// vmemmap shadow, which the engine keeps pointing into the arena).
    pub(crate) fn host_addr(&self, pa: PhysAddr, len: u64) -> Option<usize> {
        self.contains(pa, len).then(|| self.map.as_ptr() as usize + (pa.0 - self.base.0) as usize)
    }

    /// The 64-bit word at `pa` (8-byte aligned, in RAM): one range check,
    /// for descriptor accesses.
    #[inline]
    pub fn word(&self, pa: PhysAddr) -> &AtomicU64 {
        let off = pa.0.wrapping_sub(self.base.0);
        assert!(off < self.size && off.is_multiple_of(8), "descriptor address {pa} outside RAM or misaligned");
        // SAFETY: off + 8 <= size (off < size and both are multiples of 8),
        // so the word lies inside the mapping, which lives as long as self;
        // it is 8-byte aligned; AtomicU64 accepts any bit pattern and arena
        // memory is only accessed through atomics.
        unsafe { &*(self.map.as_ptr().add(off as usize) as *const AtomicU64) }
    }

    /// [`Arena::word`] for an address that may lie outside RAM (or be
    /// misaligned): None instead of a panic, for callers that take the
    /// address from their own caller.
    #[inline]
    pub fn try_word(&self, pa: PhysAddr) -> Option<&AtomicU64> {
        let off = pa.0.wrapping_sub(self.base.0);
        (off < self.size && off.is_multiple_of(8)).then(|| self.word(pa))
    }

    /// Zero `len` bytes at `pa` (8-byte aligned) with relaxed atomic stores, as
    /// `clear_page()` does for `__GFP_ZERO`.
    pub fn zero(&self, pa: PhysAddr, len: u64) {
        for w in self.slice::<AtomicU64>(pa, (len / 8) as usize) {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// How `len` bytes at `pa` split for a copy: the bytes before the
    /// first 8-byte aligned address, the whole words after it, the bytes
    /// left (relaxed word accesses cost an eighth of byte ones, and give
    /// a racing reader what some order of byte accesses would).
    fn split_words(pa: PhysAddr, len: usize) -> (usize, usize) {
        let head = (pa.0.wrapping_neg() % 8).min(len as u64) as usize;
        (head, (len - head) / 8)
    }

    /// Copy bytes out of RAM.
    pub fn read(&self, pa: PhysAddr, buf: &mut [u8]) {
        let (head, words) = Self::split_words(pa, buf.len());
        let (h, rest) = buf.split_at_mut(head);
        let (w, t) = rest.split_at_mut(words * 8);
        let wpa = PhysAddr(pa.0 + head as u64);
        let tpa = PhysAddr(wpa.0 + w.len() as u64);
        for (b, a) in h.iter_mut().zip(self.slice::<AtomicU8>(pa, head)) {
            *b = a.load(Ordering::Relaxed);
        }
        let wslots: &[AtomicU64] = if words == 0 { &[] } else { self.slice(wpa, words) };
        for (c, a) in w.chunks_exact_mut(8).zip(wslots) {
            c.copy_from_slice(&a.load(Ordering::Relaxed).to_ne_bytes());
        }
        let tail = self.slice::<AtomicU8>(tpa, t.len());
        for (b, a) in t.iter_mut().zip(tail) {
            *b = a.load(Ordering::Relaxed);
        }
    }

    /// Copy bytes into RAM.
    pub fn write(&self, pa: PhysAddr, buf: &[u8]) {
        let (head, words) = Self::split_words(pa, buf.len());
        let (h, rest) = buf.split_at(head);
        let (w, t) = rest.split_at(words * 8);
        let wpa = PhysAddr(pa.0 + head as u64);
        let tpa = PhysAddr(wpa.0 + w.len() as u64);
        for (b, a) in h.iter().zip(self.slice::<AtomicU8>(pa, head)) {
            a.store(*b, Ordering::Relaxed);
        }
        let wslots: &[AtomicU64] = if words == 0 { &[] } else { self.slice(wpa, words) };
        for (c, a) in w.chunks_exact(8).zip(wslots) {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            a.store(u64::from_ne_bytes(word), Ordering::Relaxed);
        }
        for (b, a) in t.iter().zip(self.slice::<AtomicU8>(tpa, t.len())) {
            a.store(*b, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_zero() {
        let a = Arena::new(PhysAddr(0x4000_0000), 1 << 20).unwrap();
        a.write(PhysAddr(0x4000_1000), b"hello");
        let mut buf = [0u8; 5];
        a.read(PhysAddr(0x4000_1000), &mut buf);
        assert_eq!(&buf, b"hello");
        a.zero(PhysAddr(0x4000_1000), 4096);
        a.read(PhysAddr(0x4000_1000), &mut buf);
        assert_eq!(buf, [0; 5]);
        assert!(a.contains(PhysAddr(0x400f_f000), 4096));
        assert!(!a.contains(PhysAddr(0x400f_f000), 4097));
        assert!(!a.contains(PhysAddr(0x3fff_f000), 8));
    }

    #[test]
    fn copies_agree_with_byte_accesses_at_every_alignment() {
        let a = Arena::new(PhysAddr(0x4000_0000), 1 << 20).unwrap();
        let base = 0x4000_2000u64;
        let src: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(1)).collect();
        for start in 0..16u64 {
            for len in 0..40usize {
                a.zero(PhysAddr(base), 128);
                a.write(PhysAddr(base + start), &src[..len]);
                // Byte by byte: the copy's bytes, zeroes around them.
                for i in 0..128u64 {
                    let want = if i >= start && i < start + len as u64 { src[(i - start) as usize] } else { 0 };
                    let got = a.slice::<AtomicU8>(PhysAddr(base + i), 1)[0].load(Ordering::Relaxed);
                    assert_eq!(got, want, "write of {len} bytes at +{start}: byte +{i}");
                }
                let mut back = vec![0xffu8; len];
                a.read(PhysAddr(base + start), &mut back);
                assert_eq!(back, &src[..len], "read of {len} bytes at +{start}");
            }
        }
        // Up to the last byte of RAM, from an odd address.
        let end = 0x4000_0000u64 + (1 << 20);
        a.write(PhysAddr(end - 11), &src[..11]);
        let mut back = [0u8; 11];
        a.read(PhysAddr(end - 11), &mut back);
        assert_eq!(back, src[..11]);
    }

    #[test]
    fn rejects_bad_geometry() {
        assert!(matches!(Arena::new(PhysAddr(0), 0), Err(ArenaError::BadGeometry { .. })));
        assert!(matches!(Arena::new(PhysAddr(0x123), 4096), Err(ArenaError::BadGeometry { .. })));
    }

    #[test]
    fn large_arena_costs_nothing_until_touched() {
        // 64 GiB of address space; only what is written is backed.
        let a = Arena::new(PhysAddr(0x4000_0000), 64 << 30).unwrap();
        a.write(PhysAddr(0x4000_0000 + (63 << 30)), &[1]);
        let mut b = [0u8];
        a.read(PhysAddr(0x4000_0000 + (63 << 30)), &mut b);
        assert_eq!(b[0], 1);
    }
}
