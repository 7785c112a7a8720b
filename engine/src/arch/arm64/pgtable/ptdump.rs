//! The kernel's ptdump (arch/arm64/mm/ptdump.c,
//! `/sys/kernel/debug/kernel_page_tables`), printed from the tables it
//! describes, as the kernel prints it next to them.
//!
//! The ptdump walk follows mm/pagewalk.c as `ptdump_walk_pgd()` drives it
//! for `init_mm` over `[PAGE_OFFSET, ~0UL)`: an empty entry is a hole noted
//! at its level (with four levels the p4d is folded, so a level-0 hole is a
//! PGD one; with five it is a P4D one under a level -1 PGD),
//! a block is noted at its level, a table is descended into, and every
//! entry of a PTE table is noted, empty or not. `note_page()` merges
//! consecutive notes of the same level and masked attributes into one line
//! and starts a new line at each address marker. Only tables are visited,
//! never the unmapped address space page by page.

use crate::PhysAddr;
use crate::arch::arm64::fixmap::FixmapLayout;
use crate::arch::arm64::memory::{
    FIXADDR_TOP, MODULES_END, MODULES_VADDR, PAGE_END, PCI_IO_END, PCI_IO_START, VMALLOC_START, VMEMMAP_END, VaLayout,
};
use crate::arch::arm64::pgtable::TableMemory;
use crate::arch::arm64::pgtable::desc::bits;
use crate::arch::arm64::pgtable::desc::bits::{
    PTE_AF, PTE_ATTRINDX_MASK, PTE_CONT, PTE_GP, PTE_NG, PTE_PXN, PTE_RDONLY, PTE_SHARED, PTE_USER, PTE_UXN, PTE_VALID,
};
use crate::arch::arm64::pgtable::{AddressSpace, DescKind, Level, entry_pa};
use std::fmt::Write as _;

/// An `addr_marker`: a named boundary in the kernel VA space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// First address of the region.
    pub start: u64,
    /// The name printed as `---[ name ]---`.
    pub name: &'static str,
}

/// The `address_markers[]` of `ptdump_init()` (without KASAN), in order,
/// for layout `va` and the fixmap's slots `fixmap` (`FIXADDR_TOT_START`). The linear map starts at `_PAGE_OFFSET(vabits_actual)`;
/// `vmemmap start` is `virt_to_page()` of it: the struct page of
/// `memstart_addr`'s frame.
pub fn kernel_markers(va: VaLayout, fixmap: FixmapLayout) -> Vec<Marker> {
    [
        (va.page_offset(), "Linear Mapping start"),
        (PAGE_END, "Linear Mapping end"),
        (MODULES_VADDR, "Modules start"),
        (MODULES_END, "Modules end"),
        (VMALLOC_START, "vmalloc() area"),
        (va.vmalloc_end(), "vmalloc() end"),
        (va.vmemmap_start(), "vmemmap start"),
        (VMEMMAP_END, "vmemmap end"),
        (PCI_IO_START, "PCI I/O start"),
        (PCI_IO_END, "PCI I/O end"),
        (fixmap.fixaddr_tot_start(), "Fixmap start"),
        (FIXADDR_TOP, "Fixmap end"),
    ]
    .into_iter()
    .map(|(start, name)| Marker { start, name })
    .collect()
}

/// One row of ptdump.c's `pte_bits[]`: `set` when `val & mask == bits`,
/// else `clear` (nothing printed when `clear` is None).
struct ProtBits {
    mask: u64,
    val: u64,
    set: &'static str,
    clear: Option<&'static str>,
}

/// `PTE_TABLE_BIT`: bit 1 (set for tables and pages, clear for blocks).
const PTE_TABLE_BIT: u64 = 1 << 1;

/// `pte_bits[]` of arch/arm64/mm/ptdump.c, in its order.
const PTE_BITS: [ProtBits; 16] = [
    ProtBits { mask: PTE_VALID, val: PTE_VALID, set: " ", clear: Some("F") },
    ProtBits { mask: PTE_USER, val: PTE_USER, set: "USR", clear: Some("   ") },
    ProtBits { mask: PTE_RDONLY, val: PTE_RDONLY, set: "ro", clear: Some("RW") },
    ProtBits { mask: PTE_PXN, val: PTE_PXN, set: "NX", clear: Some("x ") },
    ProtBits { mask: PTE_SHARED, val: PTE_SHARED, set: "SHD", clear: Some("   ") },
    ProtBits { mask: PTE_AF, val: PTE_AF, set: "AF", clear: Some("  ") },
    ProtBits { mask: PTE_NG, val: PTE_NG, set: "NG", clear: Some("  ") },
    ProtBits { mask: PTE_CONT, val: PTE_CONT, set: "CON", clear: Some("   ") },
    ProtBits { mask: PTE_TABLE_BIT, val: PTE_TABLE_BIT, set: "   ", clear: Some("BLK") },
    ProtBits { mask: PTE_UXN, val: PTE_UXN, set: "UXN", clear: Some("   ") },
    ProtBits { mask: PTE_GP, val: PTE_GP, set: "GP", clear: Some("  ") },
    ProtBits {
        mask: PTE_ATTRINDX_MASK,
        val: bits::attrindx(bits::MT_DEVICE_NGNRNE),
        set: "DEVICE/nGnRnE",
        clear: None,
    },
    ProtBits { mask: PTE_ATTRINDX_MASK, val: bits::attrindx(bits::MT_DEVICE_NGNRE), set: "DEVICE/nGnRE", clear: None },
    ProtBits { mask: PTE_ATTRINDX_MASK, val: bits::attrindx(bits::MT_NORMAL_NC), set: "MEM/NORMAL-NC", clear: None },
    ProtBits { mask: PTE_ATTRINDX_MASK, val: bits::attrindx(bits::MT_NORMAL), set: "MEM/NORMAL", clear: None },
    ProtBits {
        mask: PTE_ATTRINDX_MASK,
        val: bits::attrindx(bits::MT_NORMAL_TAGGED),
        set: "MEM/NORMAL-TAGGED",
        clear: None,
    },
];

/// `kernel_pg_levels[i].mask` after `ptdump_initialize()`: every mask of
/// `pte_bits[]` or-ed together.
pub const PTDUMP_PROT_MASK: u64 = {
    let mut m = 0;
    let mut i = 0;
    while i < PTE_BITS.len() {
        m |= PTE_BITS[i].mask;
        i += 1;
    }
    m
};

/// ptdump's level numbering (0 pgd, 1 p4d, 2 pud, 3 pmd, 4 pte) and names.
const PTDUMP_LEVEL_NAMES: [&str; 5] = ["PGD", "P4D", "PUD", "PMD", "PTE"];

/// ptdump's number of a table level: the architectural level plus one,
/// except that a folded p4d (four levels) is the pgd, level 0.
fn ptdump_level(level: Level, p4d_folded: bool) -> i32 {
    if p4d_folded && level == Level::P4d { 0 } else { level as i32 + 1 }
}

/// `dump_prot()`: the attribute strings of masked attributes `prot`.
pub fn dump_prot(prot: u64) -> String {
    let mut s = String::new();
    for b in &PTE_BITS {
        let txt = if prot & b.mask == b.val { Some(b.set) } else { b.clear };
        if let Some(t) = txt {
            s.push(' ');
            s.push_str(t);
        }
    }
    s
}

/// The size of `[start, end)` as `note_page()` prints it: `(%9lu, unit)`,
/// in KiB divided by 1024 while it divides evenly (K, M, G, T, P, E).
pub fn ptdump_size(start: u64, end: u64) -> (u64, char) {
    const UNITS: &[u8] = b"KMGTPE";
    let mut delta = end.wrapping_sub(start) >> 10;
    let mut u = 0;
    while delta & 1023 == 0 && u + 1 < UNITS.len() {
        delta >>= 10;
        u += 1;
    }
    (delta, UNITS[u] as char)
}

/// One ptdump line (without the newline): `0x%016lx-0x%016lx   %9lu%c %s`
/// and, when `prot` is not 0, its attribute strings.
pub fn ptdump_line(start: u64, end: u64, level_name: &str, prot: u64) -> String {
    let (delta, unit) = ptdump_size(start, end);
    let mut s = format!("0x{start:016x}-0x{end:016x}   {delta:9}{unit} {level_name}");
    if prot != 0 {
        s.push_str(&dump_prot(prot));
    }
    s
}

/// `struct ptdump_pg_state` and `note_page()`.
struct PtdumpState<'a> {
    out: String,
    markers: &'a [Marker],
    marker: usize,
    /// ptdump level of the current run; -1 before the first note.
    level: i32,
    current_prot: u64,
    start_address: u64,
    /// Four levels: the level-0 table is the pgd.
    p4d_folded: bool,
}

impl PtdumpState<'_> {
    /// `marker[1].start_address`: the start of the next marker, -1 after
    /// the last one.
    fn next_marker(&self) -> u64 {
        self.markers.get(self.marker + 1).map_or(u64::MAX, |mk| mk.start)
    }

    fn header(&mut self) {
        let name = self.markers.get(self.marker).map_or("(null)", |mk| mk.name);
        let _ = writeln!(self.out, "---[ {name} ]---");
    }

    fn note_page(&mut self, addr: u64, level: i32, val: u64) {
        let prot = if level >= 0 { val & PTDUMP_PROT_MASK } else { 0 };
        if self.level == -1 {
            self.level = level;
            self.current_prot = prot;
            self.start_address = addr;
            self.header();
        } else if prot != self.current_prot || level != self.level || addr >= self.next_marker() {
            let name = PTDUMP_LEVEL_NAMES[self.level as usize];
            let line = ptdump_line(self.start_address, addr, name, self.current_prot);
            self.out.push_str(&line);
            self.out.push('\n');
            if addr >= self.next_marker() {
                self.marker += 1;
                self.header();
            }
            self.start_address = addr;
            self.current_prot = prot;
            self.level = level;
        }
        if addr >= self.next_marker() {
            self.marker += 1;
            self.header();
        }
    }

    /// Walk the entries of `table` (at `level`) covering `[addr, end)`, as
    /// `walk_{pgd,pud,pmd,pte}_range()` do with the ptdump callbacks.
    fn walk_range(&mut self, m: &dyn TableMemory, table: PhysAddr, level: Level, mut addr: u64, end: u64) {
        let size = level.entry_size();
        loop {
            // `pXd_addr_end()`, which copes with the boundary wrapping to 0.
            let boundary = (addr & !(size - 1)).wrapping_add(size);
            let next = if boundary.wrapping_sub(1) < end.wrapping_sub(1) { boundary } else { end };
            let d = m.read_desc(entry_pa(table, level.index(addr)));
            let lvl = ptdump_level(level, self.p4d_folded);
            match (level, d.kind(level)) {
                // `ptdump_pte_entry()`: every PTE is noted, empty or not.
                (Level::Pte, _) => self.note_page(addr, lvl, d.0),
                (_, DescKind::Table) => {
                    if let Some(below) = level.next() {
                        self.walk_range(m, PhysAddr(d.addr()), below, addr, next);
                    }
                }
                (_, DescKind::Block) => self.note_page(addr, lvl, d.0),
                // `pXd_none()`: a hole at this level. At the pgd and the p4d
                // a bad entry is cleared and reported as a hole too.
                _ if d.0 == 0 || level <= Level::P4d => self.note_page(addr, lvl, 0),
                // A non-zero, non-present pud or pmd: skipped, not noted.
                _ => {}
            }
            addr = next;
            if addr == end {
                break;
            }
        }
    }
}

/// The kernel's `kernel_page_tables` dump of `asp` from the linear map's
/// start to the top of the address space, with `markers`.
pub fn ptdump(m: &dyn TableMemory, asp: &AddressSpace, markers: &[Marker]) -> String {
    let p4d_folded = asp.root_level() == Level::P4d;
    let mut st = PtdumpState {
        out: String::new(),
        markers,
        marker: 0,
        level: -1,
        current_prot: 0,
        start_address: 0,
        p4d_folded,
    };
    let (start, end) = (asp.layout().page_offset(), u64::MAX);
    st.walk_range(m, asp.pgd(), asp.root_level(), start, end);
    // `note_page_flush()`: end_address ULONG_MAX becomes 0.
    st.note_page(0, -1, 0);
    st.out
}

/// A size in bytes with the largest of K/M/G/T that divides it, as ptdump
/// prints sizes ("0" for 0).
pub fn size_str(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_string();
    }
    if !bytes.is_multiple_of(1024) {
        return format!("{bytes}B");
    }
    let (n, u) = ptdump_size(0, bytes);
    format!("{n}{u}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::arm64::pgtable::Desc;
    use crate::arch::arm64::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_ROX};
    use crate::{Machine, MachineConfig};

    fn boot(mem: u64) -> Machine {
        Machine::boot(MachineConfig { mem_bytes: mem, ..Default::default() }).expect("boot")
    }

    #[test]
    fn ptdump_line_of_a_page_kernel_block() {
        let d = Desc::block(0x4020_0000, PAGE_KERNEL);
        let line = ptdump_line(0xffff_0000_0020_0000, 0xffff_0000_0040_0000, "PMD", d.0 & PTDUMP_PROT_MASK);
        assert_eq!(
            line,
            "0xffff000000200000-0xffff000000400000           2M PMD       RW NX SHD AF        BLK UXN    MEM/NORMAL"
        );
        let p = Desc::page(0x4000_0000, PAGE_KERNEL_ROX.mkcont());
        let line = ptdump_line(0xffff_8000_8000_0000, 0xffff_8000_8001_0000, "PTE", p.0 & PTDUMP_PROT_MASK);
        assert_eq!(
            line,
            "0xffff800080000000-0xffff800080010000          64K PTE       ro x  SHD AF    CON     UXN    MEM/NORMAL"
        );
        // A hole: no attributes.
        assert_eq!(
            ptdump_line(0xffff_0000_0000_0000, 0xffff_8000_0000_0000, "PGD", 0),
            "0xffff000000000000-0xffff800000000000         128T PGD"
        );
    }

    #[test]
    fn ptdump_sizes() {
        assert_eq!(ptdump_size(0, 4096), (4, 'K'));
        assert_eq!(ptdump_size(0, 3 << 20), (3, 'M'));
        assert_eq!(ptdump_size(0, 1 << 30), (1, 'G'));
        assert_eq!(ptdump_size(0, 1536 << 20), (1536, 'M'));
        // The last line ends at the wrapped end of the address space.
        assert_eq!(ptdump_size(0xffff_ffff_ff80_0000, 0), (8, 'M'));
    }

    #[test]
    fn ptdump_vmemmap_of_64m_struct_pages_is_one_pmd_run() {
        let m = boot(4 << 30);
        let out = ptdump(&m, &m.kernel_as(), &kernel_markers(m.va_layout(), m.fixmap_layout()));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "---[ Linear Mapping start ]---");
        let i = lines.iter().position(|l| *l == "---[ vmemmap start ]---").expect("vmemmap marker");
        assert_eq!(
            lines[i + 1],
            "0xfffffdffc0000000-0xfffffdffc4000000          64M PMD       RW NX SHD AF        BLK UXN    MEM/NORMAL"
        );
        // The fixmap's tables are the last ones: past its PMD entry the top
        // 8 MiB are an empty stretch of that PMD table.
        assert_eq!(*lines.last().unwrap(), "0xffffffffff800000-0x0000000000000000           8M PMD");
        // Markers appear in order, each once; as in the kernel, those above
        // the last entry noted (the fixmap's tables, the last ones mapped)
        // are never reached.
        let names: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("---[ ")?.strip_suffix(" ]---")).collect();
        let want: Vec<&str> = kernel_markers(m.va_layout(), m.fixmap_layout()).iter().map(|mk| mk.name).collect();
        assert_eq!(names, want[..names.len()]);
        assert_eq!(names.last(), Some(&"Fixmap end"));
        // Lines are contiguous.
        let mut prev_end = None;
        for l in lines.iter().filter(|l| l.starts_with("0x")) {
            let start = u64::from_str_radix(&l[2..18], 16).unwrap();
            let end = u64::from_str_radix(&l[21..37], 16).unwrap();
            if let Some(p) = prev_end {
                assert_eq!(p, start, "{l}");
            }
            prev_end = Some(end);
        }
        assert_eq!(prev_end, Some(0));
    }
}
