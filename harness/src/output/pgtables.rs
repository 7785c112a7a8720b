//! Reports on the kernel's translation tables for the `mmlab` command: the
//! `mmlab stat pagetables` summary and the per-level dump of `mmlab walk`.
//! The ptdump printer lives with the tables, in the engine
//! ([`mmlab_engine::arch::arm64::pgtable::ptdump`]), and is re-exported here.

use mmlab_engine::arch::arm64::memory::VaLayout;
use mmlab_engine::arch::arm64::pgtable::desc::PTRS_PER_TABLE;
use mmlab_engine::arch::arm64::pgtable::ptdump::size_str;
use mmlab_engine::arch::arm64::pgtable::{AddressSpace, DescKind, Level, PgtableStats, stats, walk};
use mmlab_engine::{Machine, PAGE_SIZE, Pfn};
use std::fmt::Write as _;

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
    let levels = asp.layout().pgtable_levels();
    let root = if levels == 5 { " (the pgd: 16 entries)" } else { "" };
    let _ = writeln!(
        s,
        "{}-bit VA, 4K granule, {levels} levels, {PTRS_PER_TABLE} entries of 8 bytes per table (one page){root}\n",
        asp.va_bits()
    );
    let _ = writeln!(
        s,
        "{:<6} {:>11} {:>14} {:>8} {:>8} {:>10} {:>10}",
        "level", "table pages", "table entries", "blocks", "pages", "cont runs", "maps"
    );
    let dash = |ok: bool, v: u64| if ok { v.to_string() } else { "-".to_string() };
    let mut mapped_total = 0;
    let mut next = Some(asp.root_level());
    while let Some(level) = next {
        next = level.next();
        let i = asp.name_index(level);
        let leaves = if level == Level::Pte { st.pages } else { st.blocks[i] };
        let mapped = leaves * level.entry_size();
        mapped_total += mapped;
        let _ = writeln!(
            s,
            "{:<6} {:>11} {:>14} {:>8} {:>8} {:>10} {:>10}",
            asp.level_name(level),
            st.tables[i],
            dash(level != Level::Pte, st.table_entries[i]),
            dash(matches!(level, Level::Pud | Level::Pmd), st.blocks[i]),
            dash(level == Level::Pte, st.pages),
            dash(matches!(level, Level::Pmd | Level::Pte), st.cont_runs[i]),
            if level <= Level::P4d { "-".to_string() } else { size_str(mapped) },
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

/// Check that `va` is a kernel (TTBR1) address of layout `layout`.
pub fn check_kernel_va(va: u64, layout: VaLayout) -> Result<(), String> {
    let (start, bits) = (layout.page_offset(), layout.va_bits());
    if va >= start {
        Ok(())
    } else if va < 1 << bits {
        Err(format!("{va:#018x} is a user (TTBR0) address: the kernel's tables (TTBR1) map {start:#018x} and above"))
    } else {
        Err(format!("{va:#018x} is not canonical for {bits}-bit virtual addresses"))
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
/// Returns the text and whether the walk ended in a translation fault.
pub fn walk_report(m: &Machine, asp: &AddressSpace, va: u64) -> (String, bool) {
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
        let hi = if l == asp.root_level() { asp.va_bits() - 1 } else { l.shift() + 8 };
        let _ = writeln!(
            s,
            "{}[{}] (va bits {}:{}) at {}: {:#018x} {}",
            asp.level_name(l),
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
                asp.level_name(leaf.level),
            );
        }
        None => {
            let last = w.steps.last().expect("a walk reads at least the pgd entry");
            let why = if last.desc.kind(last.level) == DescKind::Reserved { "reserved" } else { "invalid" };
            let _ = writeln!(
                s,
                "=> translation fault at level {} ({}[{}] is {why})",
                last.level as i8,
                asp.level_name(last.level),
                last.level.index(va),
            );
        }
    }
    let faulted = w.leaf.is_none();
    (s, faulted)
}

/// `mmlab walk --struct-page <pfn>`: the walk of `pfn`'s struct page, and
/// whether it faulted.
pub fn walk_struct_page(m: &Machine, pfn: u64) -> Result<(String, bool), String> {
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
    let (walk, faulted) = walk_report(m, &m.kernel_as(), va);
    s.push_str(&walk);
    Ok((s, faulted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmlab_engine::MachineConfig;

    const VMEMMAP_START: u64 = VaLayout::VA48.vmemmap_start();
    const PAGE_OFFSET: u64 = VaLayout::VA48.page_offset();

    fn boot(mem: u64) -> Machine {
        crate::stack::Stack::boot_machine(MachineConfig { mem_bytes: mem, ..Default::default() }.bare())
            .expect("boot")
            .into_machine()
    }

    #[test]
    fn stats_of_4g() {
        let m = boot(4 << 30);
        let st = stats(&m, &m.kernel_as());
        // pud: the linear map's (4 GiB < 512 GiB), the vmemmap's, bm_pud;
        // pmd: the linear map's four (one per GiB), the vmemmap's, bm_pmd;
        // pte: the linear map's 2048 (one per 2 MiB, rodata=on), the three
        // bm_pte of 7.2's fixmap.
        assert_eq!(st.tables, [1, 0, 3, 6, 2051]);
        assert_eq!(st.blocks[3], 32);
        let s = summary_of(&m.kernel_as(), &st);
        assert!(s.starts_with("Page tables of swapper_pg_dir at 0x"), "{s}");
        // 2048 + 3 PMD entries point to PTE tables; the vmemmap's 64 MiB
        // of struct pages are 32 blocks; every page of RAM is one PTE.
        assert!(s.contains("\npmd              6           2051       32        -          0        64M\n"), "{s}");
        assert!(s.contains("\npte           2051              -        -  1048576          0         4G\n"), "{s}");
        assert!(s.contains("Memory in page tables: 2061 pages (8244K)"), "{s}");
    }

    #[test]
    fn walk_of_a_struct_page_in_a_pmd_block() {
        let m = boot(256 << 20);
        let (s, faulted) = walk_struct_page(&m, 0x40001).unwrap();
        assert!(!faulted);
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
        let (s, faulted) = walk_report(&m, &m.kernel_as(), VMEMMAP_START + 0x40);
        assert!(!faulted);
        assert!(s.lines().any(|l| l.starts_with("pte[") && l.ends_with(" PAGE")), "{s}");
        assert!(s.contains("in a pte page\n"), "{s}");
        // The linear map ends with RAM: 64 MiB is PMD entries 0..32 of its
        // one PMD table.
        let (s, faulted) = walk_report(&m, &m.kernel_as(), PAGE_OFFSET);
        assert!(!faulted, "{s}");
        let (s, faulted) = walk_report(&m, &m.kernel_as(), PAGE_OFFSET + (64 << 20));
        assert!(faulted);
        assert!(s.ends_with("=> translation fault at level 2 (pmd[32] is invalid)\n"), "{s}");
        let (s, _) = walk_report(&m, &m.kernel_as(), VMEMMAP_START - (1 << 30));
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
        assert!(check_kernel_va(PAGE_OFFSET, VaLayout::VA48).is_ok());
        assert!(check_kernel_va(0x4000, VaLayout::VA48).unwrap_err().contains("user (TTBR0)"));
        assert!(check_kernel_va(0x8000_0000_0000_0000, VaLayout::VA48).unwrap_err().contains("not canonical"));
        // 52-bit VA (FEAT_LPA2): the linear map starts 15 * 256 TiB lower.
        assert!(check_kernel_va(0xfff0_0000_0000_0000, VaLayout::VA52).is_ok());
        assert!(check_kernel_va(0xfff0_0000_0000_0000, VaLayout::VA48).unwrap_err().contains("not canonical"));
    }
}
