//! The machine's RAM as banks: what a device tree's `memory` node describes
//! with several `reg` entries (`early_init_dt_scan_memory()` →
//! `early_init_dt_add_memory_arch()` → `memblock_add()` per entry), and the
//! checks arm64 applies before it maps them (`arm64_memblock_init()`).
//!
//! `--mem` takes one size (`4G`: one bank at `PHYS_OFFSET`, 0x4000_0000, as
//! on QEMU's `virt`) or a comma list of `SIZE@BASE` banks
//! (`2G@0x40000000,2G@0x100000000`: two banks with a 2 GiB hole between
//! them); the first bank may leave out `@BASE` and then starts at
//! `PHYS_OFFSET`.
//!
//! | check | kernel | here |
//! |---|---|---|
//! | base and size page-aligned | `early_init_dt_add_memory_arch()` rounds the base up and the size down to `PAGE_SIZE`, dropping what is left | [`MemError::NotPageAligned`] |
//! | banks do not overlap | memblock merges overlapping `memblock_add()`s | [`MemError::Overlap`] |
//! | RAM starts at `PHYS_OFFSET` | `memstart_addr` is the start of DRAM rounded down to `ARM64_MEMSTART_ALIGN` | mmlab's `PHYS_OFFSET` is fixed: [`MemError::FirstBank`] |
//! | RAM ends inside the linear map | `arm64_memblock_init()` removes memory beyond `PHYS_OFFSET` + the linear region (`PAGE_END - PAGE_OFFSET`, 128 TiB with 48-bit VA) and warns | [`MemError::BeyondLinearMap`] |
//! | total size | none | 16 MiB..=1 TiB of RAM ([`MemError::Total`]), at most [`MAX_SPAN`] from the first byte to the last ([`MemError::Span`]: the host maps the whole span, holes included) |
//!
//! Fidelity: *faithful* to what the kernel takes from a memory node (banks
//! as memblock memory regions, holes between them); *simplified*: where the
//! kernel trims or warns, mmlab refuses with a typed error, so a run never
//! starts with less memory than was asked for.

use crate::addr::{PAGE_SIZE, memparse};
use crate::arch::arm64::memory::{PHYS_OFFSET, VaLayout};

/// Fewest bytes of RAM a machine boots with.
pub const MIN_MEM: u64 = 16 << 20;
/// Most bytes of RAM (the memmap alone is then 16 GiB).
pub const MAX_MEM: u64 = 1 << 40;
/// Largest distance from the first byte of RAM to the last that mmlab maps
/// on the host (holes cost address space, not memory: the arena is one
/// `MAP_NORESERVE` mapping).
pub const MAX_SPAN: u64 = 4 << 40;
/// Most banks (the kernel's static memblock array has 128 regions).
pub const MAX_BANKS: usize = 64;
/// Bytes of physical address space the linear map covers from
/// `PHYS_OFFSET` (`PAGE_END - PAGE_OFFSET`) with 48-bit VA: 2^47. Banks are
/// checked before the CPU is known, so against the smaller linear map.
pub const LINEAR_MAP_SIZE: u64 = VaLayout::VA48.linear_map_size();

/// One bank of RAM: a `reg` entry of the memory node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemBank {
    /// First byte.
    pub base: u64,
    /// Bytes.
    pub size: u64,
}

impl MemBank {
    /// One past the last byte.
    pub const fn end(&self) -> u64 {
        self.base + self.size
    }
}

/// Why a `--mem` description is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemError {
    /// Not a size, or not `SIZE@BASE`.
    Parse(String),
    /// No bank, or more than [`MAX_BANKS`].
    Banks(usize),
    /// A base or size that is not a multiple of 4 KiB, or a zero size.
    NotPageAligned {
        /// The bank's base.
        base: u64,
        /// Its size.
        size: u64,
    },
    /// Two banks overlap.
    Overlap {
        /// The lower bank.
        a: MemBank,
        /// The one that starts inside it.
        b: MemBank,
    },
    /// The lowest bank does not start at `PHYS_OFFSET`.
    FirstBank {
        /// Its base.
        base: u64,
    },
    /// RAM reaches beyond what the linear map can cover.
    BeyondLinearMap {
        /// One past the last byte of RAM.
        end: u64,
    },
    /// Total RAM outside [`MIN_MEM`]..=[`MAX_MEM`].
    Total(u64),
    /// First to last byte wider than [`MAX_SPAN`].
    Span(u64),
}

impl std::fmt::Display for MemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemError::Parse(s) => write!(f, "{s}"),
            MemError::Banks(n) => write!(f, "{n} memory banks: a machine has 1 to {MAX_BANKS}"),
            MemError::NotPageAligned { base, size } => {
                write!(f, "memory bank {size:#x}@{base:#x}: base and size must be non-zero multiples of the 4K page")
            }
            MemError::Overlap { a, b } => {
                write!(f, "memory banks {:#x}@{:#x} and {:#x}@{:#x} overlap", a.size, a.base, b.size, b.base)
            }
            MemError::FirstBank { base } => write!(
                f,
                "the lowest memory bank starts at {base:#x}; RAM starts at PHYS_OFFSET {PHYS_OFFSET:#x} here \
                 (memstart_addr is fixed)"
            ),
            MemError::BeyondLinearMap { end } => write!(
                f,
                "RAM ends at {end:#x}, beyond the linear map: with 48-bit VA it covers {LINEAR_MAP_SIZE:#x} bytes \
                 from PHYS_OFFSET (up to {:#x}); the kernel would drop the rest (\"Memory doesn't fit in the \
                 linear mapping, VA_BITS too small\")",
                PHYS_OFFSET + LINEAR_MAP_SIZE
            ),
            MemError::Total(t) => write!(f, "{t:#x} bytes of RAM: the machine's RAM is 16M to 1T"),
            MemError::Span(s) => {
                write!(f, "RAM spans {s:#x} bytes from its first byte to its last; mmlab maps at most {MAX_SPAN:#x}")
            }
        }
    }
}
impl std::error::Error for MemError {}

/// A number as the kernel's `memparse()` or a hex/decimal address takes it.
fn parse_addr(s: &str) -> Result<u64, MemError> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).map_err(|e| e.to_string()),
        None => memparse(t),
    };
    r.map_err(|e| MemError::Parse(format!("bad memory bank base {t:?}: {e}")))
}

/// Parse `--mem`: `SIZE` or `SIZE[@BASE],SIZE@BASE,...` (module docs), and
/// check the banks ([`check_banks`]).
///
/// # Errors
///
/// A [`MemError`] naming what is wrong.
pub fn parse_mem(s: &str) -> Result<Vec<MemBank>, MemError> {
    let mut banks = parse_banks(s)?;
    check_banks(&mut banks)?;
    Ok(banks)
}

/// Parse `--mem` into banks without checking them (boot checks them).
///
/// # Errors
///
/// [`MemError::Parse`] if `s` is not `SIZE` or `SIZE[@BASE],SIZE@BASE,...`.
pub fn parse_banks(s: &str) -> Result<Vec<MemBank>, MemError> {
    let mut banks = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        let (size, base) = match part.split_once('@') {
            Some((size, base)) => (size, Some(parse_addr(base)?)),
            None => (part, None),
        };
        let size = memparse(size).map_err(|e| MemError::Parse(format!("--mem {s}: {e}")))?;
        let base = match (base, i) {
            (Some(b), _) => b,
            (None, 0) => PHYS_OFFSET,
            (None, _) => return Err(MemError::Parse(format!("--mem {s}: bank {i} needs @BASE"))),
        };
        banks.push(MemBank { base, size });
    }
    Ok(banks)
}

/// Sort `banks` by address and check them (module docs).
///
/// # Errors
///
/// The first [`MemError`] found.
pub fn check_banks(banks: &mut [MemBank]) -> Result<(), MemError> {
    if banks.is_empty() || banks.len() > MAX_BANKS {
        return Err(MemError::Banks(banks.len()));
    }
    for b in banks.iter() {
        if b.size == 0 || !b.size.is_multiple_of(PAGE_SIZE) || !b.base.is_multiple_of(PAGE_SIZE) {
            return Err(MemError::NotPageAligned { base: b.base, size: b.size });
        }
        if b.base.checked_add(b.size).is_none() {
            return Err(MemError::BeyondLinearMap { end: u64::MAX });
        }
    }
    banks.sort_by_key(|b| b.base);
    for w in banks.windows(2) {
        if w[1].base < w[0].end() {
            return Err(MemError::Overlap { a: w[0], b: w[1] });
        }
    }
    if banks[0].base != PHYS_OFFSET {
        return Err(MemError::FirstBank { base: banks[0].base });
    }
    let end = banks[banks.len() - 1].end();
    if end - PHYS_OFFSET > LINEAR_MAP_SIZE {
        return Err(MemError::BeyondLinearMap { end });
    }
    let total: u64 = banks.iter().map(|b| b.size).sum();
    if !(MIN_MEM..=MAX_MEM).contains(&total) {
        return Err(MemError::Total(total));
    }
    if end - PHYS_OFFSET > MAX_SPAN {
        return Err(MemError::Span(end - PHYS_OFFSET));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_size_or_banks() {
        assert_eq!(parse_mem("4G"), Ok(vec![MemBank { base: PHYS_OFFSET, size: 4 << 30 }]));
        assert_eq!(
            parse_mem("2G@0x100000000,2G@0x40000000"),
            Ok(vec![MemBank { base: PHYS_OFFSET, size: 2 << 30 }, MemBank { base: 1 << 32, size: 2 << 30 }])
        );
        assert_eq!(parse_mem("2G,1G@4G").unwrap()[1], MemBank { base: 4 << 30, size: 1 << 30 });
    }

    #[test]
    fn bad_banks_are_typed_errors() {
        assert!(matches!(parse_mem("lots"), Err(MemError::Parse(_))));
        assert!(matches!(parse_mem("1G,1G"), Err(MemError::Parse(_))));
        assert!(matches!(parse_mem("1G@0xzz"), Err(MemError::Parse(_))));
        assert_eq!(parse_mem("64M,4097@0x100000000"), Err(MemError::NotPageAligned { base: 1 << 32, size: 4097 }));
        assert!(matches!(parse_mem("64M,0@0x100000000"), Err(MemError::NotPageAligned { .. })));
        assert!(matches!(parse_mem("2G,1G@0x80000000"), Err(MemError::Overlap { .. })));
        assert_eq!(parse_mem("1G@0x80000000"), Err(MemError::FirstBank { base: 0x8000_0000 }));
        let beyond = PHYS_OFFSET + LINEAR_MAP_SIZE;
        assert_eq!(
            parse_mem(&format!("1G,1G@{beyond:#x}")),
            Err(MemError::BeyondLinearMap { end: beyond + (1 << 30) })
        );
        assert!(matches!(parse_mem("1G,1G@0xfffffffffffff000"), Err(MemError::BeyondLinearMap { .. })));
        assert_eq!(parse_mem("8M"), Err(MemError::Total(8 << 20)));
        assert_eq!(parse_mem("2T"), Err(MemError::Total(2 << 40)));
        assert!(matches!(parse_mem("1G,1G@0x100000000000"), Err(MemError::Span(_))));
        let many = (0..65).map(|i| format!("16M@{:#x}", PHYS_OFFSET + i * (32 << 20))).collect::<Vec<_>>();
        assert_eq!(parse_mem(&many.join(",")), Err(MemError::Banks(65)));
        // Every message names the problem.
        assert!(parse_mem("1G,1G@0x800040000000").unwrap_err().to_string().contains("linear map"));
    }
}
