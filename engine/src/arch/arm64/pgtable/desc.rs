//! arm64 translation-table descriptors, bit for bit
//! (arch/arm64/include/asm/pgtable-hwdef.h, pgtable-prot.h).
//!
//! A descriptor is a `u64` with its attribute bits at their architectural
//! positions. [`Desc`] wraps one and decodes it per [`Level`]: bits\[1:0\]
//! say invalid (bit 0 clear), table (`0b11` at levels 0-2), block (`0b01` at
//! levels 1-2) or page (`0b11` at level 3). The kernel's protection values
//! are [`PgProt`]s (its `pgprot_t`) built from the same named bits as in
//! pgtable-prot.h, so `PAGE_KERNEL` for a page at PA 0 is
//! `0x0068_0000_0000_0703` (no nG).

use std::fmt;

/// Translation level, named as Linux names the table at that level.
///
/// The discriminant is the architectural level. A four-level machine (48-bit
/// VA) starts its walks at level 0; a five-level one (FEAT_LPA2, 52-bit VA
/// with a 4 KiB granule) at level -1. As in the kernel, the root is always
/// called the pgd: on a four-level machine the p4d is folded into it
/// (`pgd_to_folded_p4d()`), so the level-0 table *is* the pgd there, and
/// [`AddressSpace::level_name`](super::AddressSpace::level_name) names it so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i8)]
pub enum Level {
    /// Level -1: the `pgd` of a five-level machine, 256 TiB per entry,
    /// [`PTRS_PER_PGD_52`] entries, tables only.
    Pgd = -1,
    /// Level 0: `p4d` (the pgd itself when the p4d is folded), 512 GiB per
    /// entry, tables only.
    P4d = 0,
    /// Level 1: `pud`, 1 GiB per entry, table or block.
    Pud = 1,
    /// Level 2: `pmd`, 2 MiB per entry, table or block.
    Pmd = 2,
    /// Level 3: `pte`, 4 KiB per entry, pages.
    Pte = 3,
}

/// `PTRS_PER_PGD` with 52-bit VA and a 4 KiB granule: the level -1 table
/// resolves VA bits \[51:48\].
pub const PTRS_PER_PGD_52: usize = 16;

impl Level {
    /// Levels from level 0 down (a four-level walk).
    pub const ALL: [Level; 4] = [Level::P4d, Level::Pud, Level::Pmd, Level::Pte];
    /// `ARM64_HW_PGTABLE_LEVEL_SHIFT(n)` = 9 * (4 - n) + 3 for a 4 KiB granule.
    #[inline]
    pub const fn shift(self) -> u32 {
        (9 * (4 - self as i32) + 3) as u32
    }
    /// Bytes one entry of this level maps.
    #[inline]
    pub const fn entry_size(self) -> u64 {
        1 << self.shift()
    }
    /// Entries in a table of this level: 512, or [`PTRS_PER_PGD_52`] at level -1.
    #[inline]
    pub const fn ptrs(self) -> usize {
        match self {
            Level::Pgd => PTRS_PER_PGD_52,
            _ => PTRS_PER_TABLE,
        }
    }
    /// The entry index `va` selects in a table of this level.
    #[inline]
    pub const fn index(self, va: u64) -> usize {
        ((va >> self.shift()) & (self.ptrs() as u64 - 1)) as usize
    }
    /// The next level down.
    pub const fn next(self) -> Option<Level> {
        match self {
            Level::Pgd => Some(Level::P4d),
            Level::P4d => Some(Level::Pud),
            Level::Pud => Some(Level::Pmd),
            Level::Pmd => Some(Level::Pte),
            Level::Pte => None,
        }
    }
    /// The kernel's name for the level when it is not the root (the root is
    /// always `pgd`: [`AddressSpace::level_name`](super::AddressSpace::level_name)).
    pub const fn name(self) -> &'static str {
        match self {
            Level::Pgd => "pgd",
            Level::P4d => "p4d",
            Level::Pud => "pud",
            Level::Pmd => "pmd",
            Level::Pte => "pte",
        }
    }
}

/// Entries per table (`PTRS_PER_PTE` etc.): one 4 KiB page of 8-byte descriptors.
pub const PTRS_PER_TABLE: usize = 512;
/// `CONT_PTES`: entries in a contiguous PTE run (64 KiB).
pub const CONT_PTES: usize = 16;
/// `CONT_PTE_SIZE`.
pub const CONT_PTE_SIZE: u64 = CONT_PTES as u64 * 4096;
/// `CONT_PMDS`: entries in a contiguous PMD run (32 MiB).
pub const CONT_PMDS: usize = 16;
/// `CONT_PMD_SIZE`.
pub const CONT_PMD_SIZE: u64 = CONT_PMDS as u64 * (2 << 20);
/// `PMD_SIZE`.
pub const PMD_SIZE: u64 = 2 << 20;
/// `PUD_SIZE`.
pub const PUD_SIZE: u64 = 1 << 30;

/// Descriptor bits at their architectural positions.
pub mod bits {
    /// `PTE_VALID`.
    pub const PTE_VALID: u64 = 1 << 0;
    /// bits\[1:0\] mask.
    pub const PTE_TYPE_MASK: u64 = 3;
    /// `PTE_TYPE_PAGE` (level 3) and `PMD_TYPE_TABLE` (levels 0-2).
    pub const PTE_TYPE_PAGE: u64 = 3;
    /// `PMD_TYPE_TABLE`.
    pub const PMD_TYPE_TABLE: u64 = 3;
    /// `PMD_TYPE_SECT` / `PUD_TYPE_SECT`: a block.
    pub const PMD_TYPE_SECT: u64 = 1;
    /// `PTE_ATTRINDX_MASK`: MAIR index, bits\[4:2\].
    pub const PTE_ATTRINDX_MASK: u64 = 7 << 2;
    /// `PTE_NS`.
    pub const PTE_NS: u64 = 1 << 5;
    /// `PTE_USER` (AP\[1\]).
    pub const PTE_USER: u64 = 1 << 6;
    /// `PTE_RDONLY` (AP\[2\]).
    pub const PTE_RDONLY: u64 = 1 << 7;
    /// `PTE_SHARED`: SH = inner shareable, bits\[9:8\].
    pub const PTE_SHARED: u64 = 3 << 8;
    /// `PTE_AF`: access flag.
    pub const PTE_AF: u64 = 1 << 10;
    /// `PTE_NG`: not global (ASID-tagged).
    pub const PTE_NG: u64 = 1 << 11;
    /// `PTE_ADDR_LOW`: output address bits\[49:12\].
    pub const PTE_ADDR_MASK: u64 = ((1 << (50 - 12)) - 1) << 12;
    /// `PTE_GP`: BTI guarded page.
    pub const PTE_GP: u64 = 1 << 50;
    /// `PTE_DBM`, which Linux uses as `PTE_WRITE`.
    pub const PTE_WRITE: u64 = 1 << 51;
    /// `PTE_CONT`: contiguous hint (also `PMD_SECT_CONT`).
    pub const PTE_CONT: u64 = 1 << 52;
    /// `PTE_PXN`: privileged execute-never.
    pub const PTE_PXN: u64 = 1 << 53;
    /// `PTE_MAYBE_GP`: `PTE_GP` when the kernel uses BTI; 0 here, as in a
    /// kernel built without `CONFIG_ARM64_BTI_KERNEL` (no kernel protection
    /// carries `PTE_GP`).
    pub const PTE_MAYBE_GP: u64 = 0;
    /// `PTE_UXN`: user execute-never.
    pub const PTE_UXN: u64 = 1 << 54;
    /// `PTE_DIRTY` (software).
    pub const PTE_DIRTY: u64 = 1 << 55;
    /// `PTE_SPECIAL` (software).
    pub const PTE_SPECIAL: u64 = 1 << 56;
    /// `PTE_SWBITS_MASK`: bit 63 and bits\[58:55\].
    pub const PTE_SWBITS_MASK: u64 = 1 << 63 | 0xf << 55;
    /// `PMD_TABLE_AF` (ignored without FEAT_HAFT).
    pub const TABLE_AF: u64 = 1 << 10;
    /// `PMD_TABLE_PXN` / `PUD_TABLE_PXN` / `PGD_TABLE_PXN`.
    pub const TABLE_PXN: u64 = 1 << 59;
    /// `PMD_TABLE_UXN` / ...
    pub const TABLE_UXN: u64 = 1 << 60;
    /// `MT_NORMAL`, `MT_NORMAL_TAGGED`, `MT_NORMAL_NC`, `MT_DEVICE_nGnRnE`, `MT_DEVICE_nGnRE`.
    pub const MT_NORMAL: u64 = 0;
    /// `MT_NORMAL_TAGGED`: normal memory with MTE tags.
    pub const MT_NORMAL_TAGGED: u64 = 1;
    /// `MT_NORMAL_NC`: normal non-cacheable.
    pub const MT_NORMAL_NC: u64 = 2;
    /// `MT_DEVICE_nGnRnE`: strongly ordered device memory.
    pub const MT_DEVICE_NGNRNE: u64 = 3;
    /// `MT_DEVICE_nGnRE`: device memory with early write acknowledgement.
    pub const MT_DEVICE_NGNRE: u64 = 4;
    /// `PTE_ATTRINDX(t)`.
    pub const fn attrindx(t: u64) -> u64 {
        t << 2
    }
}

use bits::*;

/// A page protection: the attribute bits of a leaf descriptor, without its
/// output address. Mirrors the kernel's `pgprot_t`
/// (arch/arm64/include/asm/pgtable-types.h), a struct around `pteval_t` so a
/// protection cannot be mixed up with a descriptor or an address. Build one
/// from the named values ([`PAGE_KERNEL`], ...) and the helpers below; the
/// raw constructor is [`__pgprot`], the raw value [`pgprot_val`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct PgProt(u64);

/// `__pgprot(x)`: a protection from raw descriptor attribute bits (the
/// [`bits`] constants, at their architectural positions).
#[inline]
pub const fn __pgprot(val: u64) -> PgProt {
    PgProt(val)
}

/// `pgprot_val(prot)`: the raw attribute bits.
#[inline]
pub const fn pgprot_val(prot: PgProt) -> u64 {
    prot.0
}

/// `__pgprot_modify(prot, mask, bits)` (arch/arm64/include/asm/pgtable.h):
/// clear `mask`, then set `bits`.
#[inline]
pub const fn __pgprot_modify(prot: PgProt, mask: u64, bits: u64) -> PgProt {
    PgProt((prot.0 & !mask) | bits)
}

/// `pgprot_nx(prot)`: not executable by the kernel (sets `PTE_PXN`). The
/// kernel also clears `PTE_MAYBE_GP`, which is 0 here: the emulated kernel
/// does not use BTI, so no kernel protection carries `PTE_GP`.
#[inline]
pub const fn pgprot_nx(prot: PgProt) -> PgProt {
    __pgprot_modify(prot, 0, PTE_PXN)
}

/// `pgprot_noncached(prot)`: strongly ordered device memory
/// (`MT_DEVICE_nGnRnE`), never executable.
#[inline]
pub const fn pgprot_noncached(prot: PgProt) -> PgProt {
    __pgprot_modify(prot, PTE_ATTRINDX_MASK, attrindx(MT_DEVICE_NGNRNE) | PTE_PXN | PTE_UXN)
}

/// `pgprot_dmacoherent(prot)`: Normal non-cacheable memory
/// (`MT_NORMAL_NC`), never executable, as coherent DMA buffers are
/// remapped on arm64 without hardware coherency.
#[inline]
pub const fn pgprot_dmacoherent(prot: PgProt) -> PgProt {
    __pgprot_modify(prot, PTE_ATTRINDX_MASK, attrindx(MT_NORMAL_NC) | PTE_PXN | PTE_UXN)
}

/// `pgprot_tagged(prot)`: normal memory that may carry MTE tags
/// (`MT_NORMAL_TAGGED`; without MTE the MAIR gives that index the same
/// attributes as `MT_NORMAL`). The linear map's memory is mapped so.
#[inline]
pub const fn pgprot_tagged(prot: PgProt) -> PgProt {
    __pgprot_modify(prot, PTE_ATTRINDX_MASK, attrindx(MT_NORMAL_TAGGED))
}

/// `pgprot_device(prot)`: device memory with early write acknowledgement
/// (`MT_DEVICE_nGnRE`), never executable.
#[inline]
pub const fn pgprot_device(prot: PgProt) -> PgProt {
    __pgprot_modify(prot, PTE_ATTRINDX_MASK, attrindx(MT_DEVICE_NGNRE) | PTE_PXN | PTE_UXN)
}

impl PgProt {
    /// `pgprot_val(self)`.
    #[inline]
    pub const fn val(self) -> u64 {
        self.0
    }
    /// True if any of the attribute bits `b` is set.
    #[inline]
    pub const fn has(self, b: u64) -> bool {
        self.0 & b != 0
    }
    /// `__pgprot(pgprot_val(self) | b)`: with the attribute bits `b` set.
    #[inline]
    pub const fn with(self, b: u64) -> PgProt {
        PgProt(self.0 | b)
    }
    /// `__pgprot(pgprot_val(self) & ~b)`: with the attribute bits `b` clear.
    #[inline]
    pub const fn without(self, b: u64) -> PgProt {
        PgProt(self.0 & !b)
    }
    /// With the contiguous hint, as arch/arm64/mm/mmu.c builds a cont run
    /// (`__pgprot(pgprot_val(prot) | PTE_CONT)`; `pte_mkcont()` on a prot).
    #[inline]
    pub const fn mkcont(self) -> PgProt {
        self.with(PTE_CONT)
    }
    /// Without the contiguous hint (`pte_mknoncont()` on a prot): the
    /// mapping walkers decide `PTE_CONT` per run themselves, as
    /// `alloc_init_cont_pte()` does.
    #[inline]
    pub const fn mknoncont(self) -> PgProt {
        self.without(PTE_CONT)
    }
    /// `pte_cont()` of a descriptor with this prot.
    #[inline]
    pub const fn is_cont(self) -> bool {
        self.has(PTE_CONT)
    }
}

impl fmt::Debug for PgProt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgProt({:#018x})", self.0)
    }
}

/// `PROT_DEFAULT` without nG (`arm64_use_ng_mappings` off).
pub const PROT_DEFAULT: PgProt = __pgprot(PTE_TYPE_PAGE | PTE_SHARED | PTE_AF);
/// `PROT_NORMAL`.
pub const PROT_NORMAL: PgProt = PROT_DEFAULT.with(PTE_PXN | PTE_UXN | PTE_WRITE | attrindx(MT_NORMAL));
/// `PAGE_KERNEL`.
pub const PAGE_KERNEL: PgProt = PROT_NORMAL;
/// `PAGE_KERNEL_RO`.
pub const PAGE_KERNEL_RO: PgProt = PROT_NORMAL.without(PTE_WRITE).with(PTE_RDONLY);
/// `PAGE_KERNEL_ROX`.
pub const PAGE_KERNEL_ROX: PgProt = PROT_NORMAL.without(PTE_WRITE | PTE_PXN).with(PTE_RDONLY);
/// `PAGE_KERNEL_EXEC`.
pub const PAGE_KERNEL_EXEC: PgProt = PROT_NORMAL.without(PTE_PXN);
/// `_PAGE_DEFAULT`.
pub const PAGE_DEFAULT: PgProt = PROT_DEFAULT.with(attrindx(MT_NORMAL));
/// `PAGE_SHARED`: user read-write (writable through DBM; clean = RDONLY).
pub const PAGE_SHARED: PgProt = PAGE_DEFAULT.with(PTE_USER | PTE_RDONLY | PTE_NG | PTE_PXN | PTE_UXN | PTE_WRITE);
/// `PAGE_READONLY`.
pub const PAGE_READONLY: PgProt = PAGE_DEFAULT.with(PTE_USER | PTE_RDONLY | PTE_NG | PTE_PXN | PTE_UXN);
/// A kernel table descriptor's attributes (`pmd_populate_kernel`, `pud_populate`):
/// `TYPE_TABLE | TABLE_AF | TABLE_UXN`.
pub const KERNEL_TABLE: u64 = PMD_TYPE_TABLE | TABLE_AF | TABLE_UXN;
/// A user table descriptor (`__pmd_populate` with `PMD_TABLE_PXN`).
pub const USER_TABLE: u64 = PMD_TYPE_TABLE | TABLE_AF | TABLE_PXN;

/// What a descriptor is at its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescKind {
    /// Bit 0 clear: no translation.
    Invalid,
    /// Points to the next-level table (levels -1 to 2).
    Table,
    /// A leaf above level 3 (1 GiB at the pud, 2 MiB at the pmd).
    Block,
    /// A leaf at level 3 (4 KiB).
    Page,
    /// `0b01` at level 3 or a block at level 0 or -1: treated as invalid by the MMU.
    Reserved,
}

/// One descriptor.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Desc(pub u64);

impl Desc {
    /// The empty entry.
    pub const INVALID: Desc = Desc(0);

    /// `pfn_pte(pfn, prot)` for a physical address.
    #[inline]
    pub const fn page(pa: u64, prot: PgProt) -> Desc {
        Desc((pa & PTE_ADDR_MASK) | pgprot_val(prot))
    }
    /// `mk_pmd_sect_prot` / `mk_pud_sect_prot`: a block from a page prot.
    #[inline]
    pub const fn block(pa: u64, prot: PgProt) -> Desc {
        Desc((pa & PTE_ADDR_MASK) | (pgprot_val(prot) & !PTE_TYPE_MASK) | PMD_TYPE_SECT)
    }
    /// A table descriptor pointing at `table_pa` with `attrs` (e.g. [`KERNEL_TABLE`]).
    #[inline]
    pub const fn table(table_pa: u64, attrs: u64) -> Desc {
        Desc((table_pa & PTE_ADDR_MASK) | attrs)
    }
    /// The raw value.
    #[inline]
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// `pte_valid()`.
    #[inline]
    pub const fn is_valid(self) -> bool {
        self.0 & PTE_VALID != 0
    }
    /// Kind at `level`.
    #[inline]
    pub const fn kind(self, level: Level) -> DescKind {
        if !self.is_valid() {
            return DescKind::Invalid;
        }
        match (self.0 & PTE_TYPE_MASK, level) {
            (3, Level::Pte) => DescKind::Page,
            (3, _) => DescKind::Table,
            (1, Level::Pud | Level::Pmd) => DescKind::Block,
            _ => DescKind::Reserved,
        }
    }
    /// Output address (next table, block or page).
    #[inline]
    pub const fn addr(self) -> u64 {
        self.0 & PTE_ADDR_MASK
    }
    /// `pte_pfn()`.
    #[inline]
    pub const fn pfn(self) -> u64 {
        self.addr() >> 12
    }
    /// True if any of `b` is set.
    #[inline]
    pub const fn has(self, b: u64) -> bool {
        self.0 & b != 0
    }
    /// `pte_valid_not_user()`: valid, kernel-only (UXN set, USER clear).
    #[inline]
    pub const fn valid_not_user(self) -> bool {
        self.0 & (PTE_VALID | PTE_USER | PTE_UXN) == (PTE_VALID | PTE_UXN)
    }
    /// `pte_write()`.
    #[inline]
    pub const fn writable(self) -> bool {
        self.0 & PTE_RDONLY == 0 || self.0 & PTE_WRITE != 0 && self.0 & PTE_DIRTY != 0
    }
    /// `pte_cont()`.
    #[inline]
    pub const fn is_cont(self) -> bool {
        self.0 & PTE_CONT != 0
    }
    /// MAIR index.
    #[inline]
    pub const fn attrindx(self) -> u64 {
        (self.0 & PTE_ATTRINDX_MASK) >> 2
    }
    /// The attribute bits without the address.
    #[inline]
    pub const fn attrs(self) -> u64 {
        self.0 & !PTE_ADDR_MASK
    }

    /// Each field decoded, for `mmlab walk` (name, value).
    pub fn fields(self, level: Level) -> Vec<(&'static str, String)> {
        let mut f = vec![("type", format!("{:?}", self.kind(level)).to_lowercase())];
        match self.kind(level) {
            DescKind::Invalid | DescKind::Reserved => return f,
            DescKind::Table => {
                f.push(("next-level table", format!("{:#x}", self.addr())));
                for (b, n) in [(TABLE_AF, "AF"), (TABLE_PXN, "PXNTable"), (TABLE_UXN, "UXNTable")] {
                    f.push((n, u8::from(self.has(b)).to_string()));
                }
                return f;
            }
            DescKind::Block | DescKind::Page => {}
        }
        f.push(("output address", format!("{:#x}", self.addr())));
        let mt = match self.attrindx() {
            MT_NORMAL => "MT_NORMAL",
            MT_NORMAL_TAGGED => "MT_NORMAL_TAGGED",
            MT_NORMAL_NC => "MT_NORMAL_NC",
            MT_DEVICE_NGNRNE => "MT_DEVICE_nGnRnE",
            MT_DEVICE_NGNRE => "MT_DEVICE_nGnRE",
            _ => "?",
        };
        f.push(("AttrIndx", format!("{} ({mt})", self.attrindx())));
        let ap = match (self.has(PTE_USER), self.has(PTE_RDONLY)) {
            (false, false) => "RW kernel",
            (false, true) => "RO kernel",
            (true, false) => "RW kernel+user",
            (true, true) => "RO kernel+user",
        };
        f.push(("AP", format!("{} ({ap})", (self.0 >> 6) & 3)));
        f.push(("SH", format!("{}", (self.0 >> 8) & 3)));
        for (b, n) in [
            (PTE_NS, "NS"),
            (PTE_AF, "AF"),
            (PTE_NG, "nG"),
            (PTE_GP, "GP"),
            (PTE_WRITE, "DBM/WRITE"),
            (PTE_CONT, "CONT"),
            (PTE_PXN, "PXN"),
            (PTE_UXN, "UXN"),
            (PTE_DIRTY, "DIRTY(sw)"),
            (PTE_SPECIAL, "SPECIAL(sw)"),
        ] {
            f.push((n, u8::from(self.has(b)).to_string()));
        }
        f
    }
}

impl fmt::Debug for Desc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Desc({:#018x})", self.0)
    }
}

/// `pgattr_change_is_safe()` (arch/arm64/mm/mmu.c, 7.2): may a live entry
/// go from `old` to `new` without break-before-make? Only the permission
/// bits, nG -> G never, and Normal <-> Normal-Tagged may change; the
/// contiguous bit must stay as it is. (Kernels before 6.18 refused every
/// change to a live contiguous entry; 7.2 allows permission changes on one,
/// which its `map_mem()` needs: the alias is written again by the memory
/// pass, and `mark_linear_text_alias_ro()` changes it in place.)
pub const fn pgattr_change_is_safe(old: u64, new: u64) -> bool {
    let mut mask = PTE_PXN | PTE_RDONLY | PTE_WRITE | PTE_NG | PTE_SWBITS_MASK;
    if old & PTE_VALID == 0 || new & PTE_VALID == 0 {
        return true;
    }
    if (old & PTE_ADDR_MASK) != (new & PTE_ADDR_MASK) {
        return false;
    }
    if old & !new & PTE_NG != 0 {
        return false;
    }
    const fn normal(v: u64) -> bool {
        let a = v & PTE_ATTRINDX_MASK;
        a == attrindx(MT_NORMAL) || a == attrindx(MT_NORMAL_TAGGED)
    }
    if normal(old) && normal(new) {
        mask |= PTE_ATTRINDX_MASK;
    }
    (old ^ new) & !mask == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_prots_bit_for_bit() {
        assert_eq!(Desc::page(0, PAGE_KERNEL).bits(), 0x0068_0000_0000_0703);
        assert_eq!(Desc::page(0, PAGE_KERNEL.with(PTE_NG)).bits(), 0x0068_0000_0000_0f03);
        assert_eq!(Desc::page(0x4000_1000, PAGE_KERNEL.mkcont()).bits(), 0x0078_0000_4000_1703);
        assert_eq!(Desc::block(0x4020_0000, PAGE_KERNEL).bits(), 0x0068_0000_4020_0701);
        assert_eq!(Desc::table(0x4000_5000, KERNEL_TABLE).bits(), 0x1000_0000_4000_5403);
        assert_eq!(pgprot_val(PAGE_KERNEL_RO), 0x0060_0000_0000_0783);
        assert_eq!(pgprot_val(PAGE_KERNEL_EXEC), 0x0048_0000_0000_0703);
    }

    #[test]
    fn pgprot_helpers() {
        assert_eq!(__pgprot(pgprot_val(PAGE_KERNEL)), PAGE_KERNEL);
        assert_eq!(PAGE_KERNEL.mkcont().mknoncont(), PAGE_KERNEL);
        assert!(PAGE_KERNEL.mkcont().is_cont() && !PAGE_KERNEL.is_cont());
        assert_eq!(pgprot_nx(PAGE_KERNEL_EXEC), PAGE_KERNEL);
        let nc = pgprot_noncached(PAGE_KERNEL);
        assert_eq!(Desc::page(0, nc).attrindx(), MT_DEVICE_NGNRNE);
        assert_eq!(Desc::page(0, pgprot_device(PAGE_KERNEL)).attrindx(), MT_DEVICE_NGNRE);
        assert_eq!(__pgprot_modify(nc, PTE_ATTRINDX_MASK, attrindx(MT_NORMAL)), PAGE_KERNEL);
        assert_eq!(format!("{PAGE_KERNEL:?}"), "PgProt(0x0068000000000703)");
    }

    #[test]
    fn kinds_per_level() {
        let t = Desc::table(0x1000, KERNEL_TABLE);
        assert_eq!(t.kind(Level::P4d), DescKind::Table);
        assert_eq!(t.kind(Level::Pte), DescKind::Page);
        let b = Desc::block(0x20_0000, PAGE_KERNEL);
        assert_eq!(b.kind(Level::Pmd), DescKind::Block);
        assert_eq!(b.kind(Level::Pud), DescKind::Block);
        assert_eq!(b.kind(Level::P4d), DescKind::Reserved);
        assert_eq!(b.kind(Level::Pgd), DescKind::Reserved);
        assert_eq!(t.kind(Level::Pgd), DescKind::Table);
        assert_eq!(b.kind(Level::Pte), DescKind::Reserved);
        assert_eq!(Desc::INVALID.kind(Level::Pte), DescKind::Invalid);
        assert!(Desc::page(0, PAGE_KERNEL).valid_not_user());
        assert!(!Desc::page(0, PAGE_SHARED).valid_not_user());
    }

    #[test]
    fn geometry() {
        assert_eq!([Level::P4d.shift(), Level::Pud.shift(), Level::Pmd.shift(), Level::Pte.shift()], [39, 30, 21, 12]);
        let va = 0xffff_8000_1234_5678u64;
        assert_eq!(Level::P4d.index(va), 256);
        // 52-bit VA: PGDIR_SHIFT 48, VA bits [51:48] pick one of 16 entries.
        assert_eq!((Level::Pgd.shift(), Level::Pgd.ptrs()), (48, 16));
        assert_eq!(Level::Pgd.index(0xfff0_0000_0000_0000), 0);
        assert_eq!(Level::Pgd.index(va), 15);
        assert_eq!(Level::Pte.index(va), 0x145);
    }

    #[test]
    fn break_before_make_rules() {
        let a = Desc::page(0x4000_0000, PAGE_KERNEL).bits();
        assert!(pgattr_change_is_safe(0, a), "creating is safe");
        assert!(pgattr_change_is_safe(a, 0), "removing is safe");
        assert!(pgattr_change_is_safe(a, Desc::page(0x4000_0000, PAGE_KERNEL_RO).bits()), "permissions may change");
        assert!(!pgattr_change_is_safe(a, Desc::page(0x4000_1000, PAGE_KERNEL).bits()), "pfn change");
        assert!(!pgattr_change_is_safe(a, a | PTE_CONT), "live cont change");
        // 7.2: a contiguous entry's permissions may change, its bit may not.
        let c = a | PTE_CONT;
        assert!(pgattr_change_is_safe(c, Desc::page(0x4000_0000, PAGE_KERNEL_RO).bits() | PTE_CONT));
        assert!(pgattr_change_is_safe(c, c), "the same value again");
        assert!(!pgattr_change_is_safe(c, a), "live cont clear");
        assert!(!pgattr_change_is_safe(a | PTE_NG, a), "nG to global");
        assert!(pgattr_change_is_safe(a, a | PTE_NG), "global to nG");
        let dev = (a & !PTE_ATTRINDX_MASK) | attrindx(MT_DEVICE_NGNRE);
        assert!(!pgattr_change_is_safe(a, dev), "memory type change");
        let tagged = (a & !PTE_ATTRINDX_MASK) | attrindx(MT_NORMAL_TAGGED);
        assert!(pgattr_change_is_safe(a, tagged), "normal <-> tagged");
    }
}
