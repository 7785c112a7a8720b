//! Reports on the kernel's translation tables: the `mmlab stat pagetables`
//! summary, the kernel's ptdump format (arch/arm64/mm/ptdump.c,
//! `/sys/kernel/debug/kernel_page_tables`) and the per-level dump of
//! `mmlab walk`.
//!
//! The ptdump walk follows mm/pagewalk.c as `ptdump_walk_pgd()` drives it
//! for `init_mm` over `[PAGE_OFFSET, ~0UL)`: an empty entry is a hole noted
//! at its level (a p4d hole counts as PGD: the p4d is folded with 4 levels),
//! a block is noted at its level, a table is descended into, and every
//! entry of a PTE table is noted, empty or not. `note_page()` merges
//! consecutive notes of the same level and masked attributes into one line
//! and starts a new line at each address marker. Only tables are visited,
//! never the unmapped address space page by page.

use mmlab_engine::layout::{
    FIXADDR_TOP, MODULES_END, MODULES_VADDR, PAGE_END, PAGE_OFFSET, PCI_IO_START, VA_BITS, VMALLOC_END, VMALLOC_START,
    VMEMMAP_END,
};
use mmlab_engine::pgtable::desc::bits::{
    PTE_AF, PTE_ATTRINDX_MASK, PTE_CONT, PTE_GP, PTE_NG, PTE_PXN, PTE_RDONLY, PTE_SHARED, PTE_USER, PTE_UXN, PTE_VALID,
};
use mmlab_engine::pgtable::desc::{PTRS_PER_TABLE, bits};
use mmlab_engine::pgtable::{AddressSpace, DescKind, Level, PgtableStats, entry_pa, stats, walk};
use mmlab_engine::{Machine, PAGE_SIZE, Pfn, PhysAddr};
use std::fmt::Write as _;

/// `PCI_IO_SIZE`: 16 MiB.
pub const PCI_IO_SIZE: u64 = 16 << 20;
/// `PCI_IO_END`.
pub const PCI_IO_END: u64 = PCI_IO_START + PCI_IO_SIZE;
/// `__end_of_fixed_addresses` of arch/arm64/include/asm/fixmap.h for a
/// defconfig build (`CONFIG_ACPI_APEI_GHES`, `CONFIG_ARM_SDE_INTERFACE`,
/// `CONFIG_UNMAP_KERNEL_AT_EL0`, `CONFIG_RELOCATABLE`): FIX_HOLE, the FDT
/// window (1 + 512 + 1 slots), earlycon, text poke, four GHES slots, four
/// trampoline slots (525 permanent), 7 * 65 early-ioremap slots, and
/// FIX_PTE..FIX_PGD.
pub const END_OF_FIXED_ADDRESSES: u64 = 985;
/// `FIXADDR_TOT_SIZE`.
pub const FIXADDR_TOT_SIZE: u64 = END_OF_FIXED_ADDRESSES * PAGE_SIZE;
/// `FIXADDR_TOT_START`.
pub const FIXADDR_TOT_START: u64 = FIXADDR_TOP - FIXADDR_TOT_SIZE;

/// An `addr_marker`: a named boundary in the kernel VA space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub start: u64,
    pub name: &'static str,
}

/// The `address_markers[]` of `ptdump_init()` (without KASAN), in order.
/// `vmemmap start` is `virt_to_page(PAGE_OFFSET)`: the struct page of
/// `memstart_addr`'s frame.
pub fn kernel_markers(m: &Machine) -> Vec<Marker> {
    let mem = m.memmap();
    let vmemmap_start = mem.page_va(Pfn(mem.vmemmap_pfn0()));
    [
        (PAGE_OFFSET, "Linear Mapping start"),
        (PAGE_END, "Linear Mapping end"),
        (MODULES_VADDR, "Modules start"),
        (MODULES_END, "Modules end"),
        (VMALLOC_START, "vmalloc() area"),
        (VMALLOC_END, "vmalloc() end"),
        (vmemmap_start, "vmemmap start"),
        (VMEMMAP_END, "vmemmap end"),
        (PCI_IO_START, "PCI I/O start"),
        (PCI_IO_END, "PCI I/O end"),
        (FIXADDR_TOT_START, "Fixmap start"),
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

fn ptdump_level(level: Level) -> i32 {
    match level {
        Level::Pgd => 0,
        Level::Pud => 2,
        Level::Pmd => 3,
        Level::Pte => 4,
    }
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
    fn walk_range(&mut self, m: &Machine, table: PhysAddr, level: Level, mut addr: u64, end: u64) {
        let size = level.entry_size();
        loop {
            // `pXd_addr_end()`, which copes with the boundary wrapping to 0.
            let boundary = (addr & !(size - 1)).wrapping_add(size);
            let next = if boundary.wrapping_sub(1) < end.wrapping_sub(1) { boundary } else { end };
            let d = m.read_desc(entry_pa(table, level.index(addr)));
            let lvl = ptdump_level(level);
            match (level, d.kind(level)) {
                // `ptdump_pte_entry()`: every PTE is noted, empty or not.
                (Level::Pte, _) => self.note_page(addr, lvl, d.0),
                (_, DescKind::Table) => {
                    if let Some(below) = level.next() {
                        self.walk_range(m, PhysAddr(d.addr()), below, addr, next);
                    }
                }
                (_, DescKind::Block) => self.note_page(addr, lvl, d.0),
                // `pXd_none()`: a hole at this level. At the pgd (the folded
                // p4d) a bad entry is cleared and reported as a hole too.
                _ if d.0 == 0 || level == Level::Pgd => self.note_page(addr, lvl, 0),
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

/// The kernel's `kernel_page_tables` dump of `asp` from `PAGE_OFFSET` to the
/// top of the address space, with `markers`.
pub fn ptdump(m: &Machine, asp: &AddressSpace, markers: &[Marker]) -> String {
    let mut st = PtdumpState { out: String::new(), markers, marker: 0, level: -1, current_prot: 0, start_address: 0 };
    let (start, end) = (PAGE_OFFSET, u64::MAX);
    st.walk_range(m, asp.pgd(), Level::Pgd, start, end);
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

/// `mmlab stat pagetables`: per-level counts of the tables of `asp`.
pub fn summary(m: &Machine, asp: &AddressSpace) -> String {
    let st = stats(m, asp);
    summary_of(asp, &st)
}

/// The summary for counts `st` already taken.
pub fn summary_of(asp: &AddressSpace, st: &PgtableStats) -> String {
    let mut s = String::new();
    match asp.asid() {
        None => {
            let _ = writeln!(s, "Page tables of swapper_pg_dir at {} (kernel, global entries, no ASID)", asp.pgd());
        }
        Some(a) => {
            let _ = writeln!(s, "Page tables of the user address space with ASID {a}, pgd at {}", asp.pgd());
        }
    }
    let _ = writeln!(
        s,
        "{VA_BITS}-bit VA, 4K granule, 4 levels, {PTRS_PER_TABLE} entries of 8 bytes per table (one page)\n"
    );
    let _ = writeln!(
        s,
        "{:<6} {:>11} {:>14} {:>8} {:>8} {:>10} {:>10}",
        "level", "table pages", "table entries", "blocks", "pages", "cont runs", "maps"
    );
    let dash = |ok: bool, v: u64| if ok { v.to_string() } else { "-".to_string() };
    let mut mapped_total = 0;
    for level in Level::ALL {
        let i = level as usize;
        let leaves = if level == Level::Pte { st.pages } else { st.blocks[i] };
        let mapped = leaves * level.entry_size();
        mapped_total += mapped;
        let _ = writeln!(
            s,
            "{:<6} {:>11} {:>14} {:>8} {:>8} {:>10} {:>10}",
            level.name(),
            st.tables[i],
            dash(level != Level::Pte, st.table_entries[i]),
            dash(matches!(level, Level::Pud | Level::Pmd), st.blocks[i]),
            dash(level == Level::Pte, st.pages),
            dash(matches!(level, Level::Pmd | Level::Pte), st.cont_runs[i]),
            if level == Level::Pgd { "-".to_string() } else { size_str(mapped) },
        );
    }
    let tables: u64 = st.tables.iter().sum();
    let _ = writeln!(
        s,
        "{:<6} {:>11} {:>14} {:>8} {:>8} {:>10} {:>10}",
        "total",
        tables,
        st.table_entries.iter().sum::<u64>(),
        st.blocks.iter().sum::<u64>(),
        st.pages,
        st.cont_runs.iter().sum::<u64>(),
        size_str(mapped_total),
    );
    let _ = writeln!(s, "\nMemory in page tables: {tables} pages ({})", size_str(tables * PAGE_SIZE));
    if st.reserved != 0 {
        let _ = writeln!(s, "Reserved (invalid) encodings found: {}", st.reserved);
    }
    s
}

/// Parse a number given as hex with `0x` or decimal (`_` separators allowed).
pub fn parse_number(what: &str, s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    r.map_err(|_| format!("bad {what} {s:?}: expected a hexadecimal number with 0x or a decimal number"))
}

/// Check that `va` is a kernel (TTBR1) address of the 48-bit layout.
pub fn check_kernel_va(va: u64) -> Result<(), String> {
    if va >= PAGE_OFFSET {
        Ok(())
    } else if va < 1 << VA_BITS {
        Err(format!(
            "{va:#018x} is a user (TTBR0) address: the kernel's tables (TTBR1) map {PAGE_OFFSET:#018x} and above"
        ))
    } else {
        Err(format!("{va:#018x} is not canonical for {VA_BITS}-bit virtual addresses"))
    }
}

fn kind_name(k: DescKind) -> &'static str {
    match k {
        DescKind::Invalid => "INVALID",
        DescKind::Table => "TABLE",
        DescKind::Block => "BLOCK",
        DescKind::Page => "PAGE",
        DescKind::Reserved => "RESERVED",
    }
}

/// The per-level dump of a walk of `va` in `asp`, as `mmlab walk` prints it.
pub fn walk_report(m: &Machine, asp: &AddressSpace, va: u64) -> String {
    let w = walk(m, asp, va);
    let mut s = String::new();
    match asp.asid() {
        None => {
            let _ = writeln!(s, "walk of {va:#018x} in swapper_pg_dir at {} (kernel, TTBR1)", asp.pgd());
        }
        Some(a) => {
            let _ = writeln!(s, "walk of {va:#018x} in the address space of ASID {a}, pgd at {}", asp.pgd());
        }
    }
    for step in &w.steps {
        let l = step.level;
        let hi = if l == Level::Pgd { VA_BITS - 1 } else { l.shift() + 8 };
        let _ = writeln!(
            s,
            "{}[{}] (va bits {}:{}) at {}: {:#018x} {}",
            l.name(),
            l.index(va),
            hi,
            l.shift(),
            step.slot,
            step.desc.0,
            kind_name(step.desc.kind(l)),
        );
        for (name, value) in step.desc.fields(l) {
            let _ = writeln!(s, "    {name}: {value}");
        }
    }
    match w.leaf {
        Some(leaf) => {
            let span = leaf.level.entry_size();
            let what = match (leaf.level, leaf.desc.is_cont()) {
                (Level::Pte, false) => "page".to_string(),
                (Level::Pte, true) => "page of a contiguous 64K run".to_string(),
                (_, false) => format!("{} block", size_str(span)),
                (l, true) => format!("{} block of a contiguous {} run", size_str(span), size_str(l.entry_size() * 16)),
            };
            let _ = writeln!(
                s,
                "=> pa {} (pfn {}), offset {:#x} in a {} {what}",
                leaf.pa,
                leaf.pa.pfn(),
                va & (span - 1),
                leaf.level.name(),
            );
        }
        None => {
            let last = w.steps.last().expect("a walk reads at least the pgd entry");
            let why = if last.desc.kind(last.level) == DescKind::Reserved { "reserved" } else { "invalid" };
            let _ = writeln!(
                s,
                "=> translation fault at level {} ({}[{}] is {why})",
                last.level as usize,
                last.level.name(),
                last.level.index(va),
            );
        }
    }
    s
}

/// `mmlab walk --struct-page <pfn>`: the walk of `pfn`'s struct page.
pub fn walk_struct_page(m: &Machine, pfn: u64) -> Result<String, String> {
    let mem = m.memmap();
    if !mem.pfn_valid(Pfn(pfn)) {
        return Err(format!(
            "pfn {pfn:#x} is not a frame of RAM (valid: {:#x}..{:#x})",
            mem.start_pfn().0,
            mem.end_pfn().0
        ));
    }
    let va = mem.page_va(Pfn(pfn));
    let mut s = format!("struct page of pfn {pfn:#x} (pa {:#x}) is at {va:#018x}\n", pfn * PAGE_SIZE);
    s.push_str(&walk_report(m, &m.kernel_as(), va));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::MachineConfig;
    use mmlab_engine::layout::VMEMMAP_START;
    use mmlab_engine::pgtable::Desc;
    use mmlab_engine::pgtable::desc::{PAGE_KERNEL, PAGE_KERNEL_ROX};

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
        let p = Desc::page(0x4000_0000, PAGE_KERNEL_ROX | PTE_CONT);
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
        let out = ptdump(&m, &m.kernel_as(), &kernel_markers(&m));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "---[ Linear Mapping start ]---");
        let i = lines.iter().position(|l| *l == "---[ vmemmap start ]---").expect("vmemmap marker");
        assert_eq!(
            lines[i + 1],
            "0xfffffdffc0000000-0xfffffdffc4000000          64M PMD       RW NX SHD AF        BLK UXN    MEM/NORMAL"
        );
        assert_eq!(*lines.last().unwrap(), "0xfffffe0000000000-0x0000000000000000           2T PGD");
        // Markers appear in order, each once; as in the kernel, those above
        // the last entry noted (nothing is mapped past the vmemmap here) are
        // never reached.
        let names: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("---[ ")?.strip_suffix(" ]---")).collect();
        let want: Vec<&str> = kernel_markers(&m).iter().map(|mk| mk.name).collect();
        assert_eq!(names, want[..names.len()]);
        assert_eq!(names.last(), Some(&"vmemmap start"));
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

    #[test]
    fn stats_of_4g() {
        let m = boot(4 << 30);
        let st = stats(&m, &m.kernel_as());
        assert_eq!(st.tables, [1, 1, 1, 0]);
        assert_eq!(st.blocks[2], 32);
        let s = summary_of(&m.kernel_as(), &st);
        assert!(s.starts_with("Page tables of swapper_pg_dir at 0x"), "{s}");
        assert!(s.contains("\npmd              1              0       32        -          0        64M\n"), "{s}");
        assert!(s.contains("Memory in page tables: 3 pages (12K)"), "{s}");
    }

    #[test]
    fn walk_of_a_struct_page_in_a_pmd_block() {
        let m = boot(256 << 20);
        let s = walk_struct_page(&m, 0x40001).unwrap();
        assert!(s.contains("struct page of pfn 0x40001 (pa 0x40001000) is at 0xfffffdffc0000040"), "{s}");
        assert!(s.contains("\npgd[507] ") && s.contains(" TABLE\n"), "{s}");
        let pmd = s.lines().find(|l| l.starts_with("pmd[")).unwrap();
        assert!(pmd.ends_with(" BLOCK"), "{s}");
        assert!(s.contains("    type: block\n"), "{s}");
        let pa = m.vmemmap_pa(Pfn(0x40001)).unwrap();
        assert_eq!(pa.0 % (2 << 20), 0x40);
        assert!(s.contains(&format!("=> pa {pa} (pfn {}), offset 0x40 in a pmd 2M block", pa.pfn())), "{s}");
    }

    #[test]
    fn walk_of_a_small_machine_ends_in_a_pte_page_and_faults_elsewhere() {
        let m = boot(64 << 20);
        let s = walk_report(&m, &m.kernel_as(), VMEMMAP_START + 0x40);
        assert!(s.lines().any(|l| l.starts_with("pte[") && l.ends_with(" PAGE")), "{s}");
        assert!(s.contains("in a pte page\n"), "{s}");
        let s = walk_report(&m, &m.kernel_as(), PAGE_OFFSET);
        assert!(s.ends_with("=> translation fault at level 0 (pgd[0] is invalid)\n"), "{s}");
        let s = walk_report(&m, &m.kernel_as(), VMEMMAP_START - (1 << 30));
        assert!(s.contains("=> translation fault at level 1 (pud["), "{s}");
        assert!(walk_struct_page(&m, 0x1).unwrap_err().contains("not a frame of RAM"));
    }

    #[test]
    fn numbers_and_addresses() {
        assert_eq!(parse_number("va", "0xfffffdffc0000040").unwrap(), 0xffff_fdff_c000_0040);
        assert_eq!(parse_number("va", "0xffff_0000_0000_0000").unwrap(), PAGE_OFFSET);
        assert_eq!(parse_number("pfn", "262145").unwrap(), 0x40001);
        assert!(parse_number("va", "fffffdffc0000040").unwrap_err().contains("bad va"));
        assert!(parse_number("va", "0x").is_err());
        assert!(check_kernel_va(PAGE_OFFSET).is_ok());
        assert!(check_kernel_va(0x4000).unwrap_err().contains("user (TTBR0)"));
        assert!(check_kernel_va(0x8000_0000_0000_0000).unwrap_err().contains("not canonical"));
    }
}
