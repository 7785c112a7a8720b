//! FEAT_LPA2 (`arm64.lpa2=on`, qemu's `-cpu max`): the kernel runs with
//! 52-bit VA and five levels of tables. These tests walk, map, unmap and
//! free through the level -1 pgd and the p4d below it, for the kernel's
//! space (linear map, vmalloc, vmemmap) and a user one (pages and huge
//! pages), and check the descriptors carry no SH bits. The numbers are the
//! kernel's geometry: PGDIR_SHIFT 48 with 16 pgd entries, P4D_SHIFT 39.

use mmlab_engine::arch::arm64::memory::{PHYS_OFFSET, VMALLOC_START, VaLayout};
use mmlab_engine::arch::arm64::pgtable::desc::bits::PTE_SHARED;
use mmlab_engine::arch::arm64::pgtable::desc::{PAGE_SHARED, PMD_SIZE};
use mmlab_engine::arch::arm64::pgtable::ptdump::{kernel_markers, ptdump};
use mmlab_engine::arch::arm64::pgtable::{self, AddressSpace, Level, MapFlags, TABLE_NAMES, walk};
use mmlab_engine::{Gfp, Machine, MachineConfig, PAGE_SIZE};
use mmlab_hugetlb::hugetlbpage::{arch_make_huge_pte, free_pgtables, huge_pte_alloc, huge_pte_offset};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{Vmalloc, VmallocConfig};

fn boot(mem: &str) -> Machine {
    let cfg = MachineConfig { lpa2: Some(true), ..MachineConfig::with(mem, 1).unwrap() };
    mmlab_tests::boot(cfg).unwrap()
}

#[test]
fn the_linear_map_is_walked_through_five_levels() {
    let m = boot("1G");
    let k = m.kernel_as();
    assert_eq!((m.va_layout(), k.root_level(), k.va_bits()), (VaLayout::VA52, Level::Pgd, 52));
    // PHYS_OFFSET is mapped at -(1 << 52), pgd entry 0.
    let va = m.va_layout().phys_to_virt(PHYS_OFFSET + 0x1234);
    assert_eq!(va, 0xfff0_0000_0000_1234);
    let w = walk(&m, &k, va);
    let names: Vec<&str> = w.steps.iter().map(|s| k.level_name(s.level)).collect();
    assert_eq!(names, ["pgd", "p4d", "pud", "pmd", "pte"]);
    assert_eq!(w.steps[0].slot, pgtable::entry_pa(k.pgd(), 0));
    let leaf = w.leaf.unwrap();
    assert_eq!(leaf.pa.0, PHYS_OFFSET + 0x1234);
    // PTE_MAYBE_SHARED is 0 with LPA2: no SH bits in a leaf.
    assert_eq!(leaf.desc.bits() & PTE_SHARED, 0);
    // The 48-bit linear map's start is a hole: pgd 15's p4d has no entry 0.
    let hole = walk(&m, &k, 0xffff_0000_0000_0000);
    assert!(hole.leaf.is_none());
    assert_eq!((hole.steps.len(), hole.steps[1].level), (2, Level::P4d));
    // Two p4d tables: the linear map's (pgd 0) and the image's, shared
    // with the vmemmap and the fixmap (pgd 15).
    let st = pgtable::stats(&m, &k);
    assert_eq!(TABLE_NAMES[1], "p4d");
    assert_eq!((st.tables[0], st.tables[1], st.table_entries[0]), (1, 2, 2));
}

#[test]
fn vmalloc_maps_and_unmaps_below_the_52_bit_vmalloc_end() {
    let m = boot("1G");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    let cpu = m.cpu(0).unwrap();
    // VmallocTotal of the real -cpu max boot.
    assert_eq!(vm.meminfo_counts().vmalloc_total_kb, 70_863_806_464);
    let a = vm.vmalloc(&cpu, 3 * PAGE_SIZE).unwrap();
    assert!((VMALLOC_START..VaLayout::VA52.vmalloc_end()).contains(&a));
    let w = walk(&m, &m.kernel_as(), a + PAGE_SIZE);
    assert_eq!(w.steps.len(), 5);
    assert_eq!(w.leaf.unwrap().desc.bits() & PTE_SHARED, 0);
    vm.vfree(&cpu, a).unwrap();
    vm.check().unwrap();
}

#[test]
fn a_user_space_maps_a_52_bit_address_and_frees_every_table() {
    let m = boot("1G");
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let cpu = m.cpu(0).unwrap();
    let free0 = pa.nr_free_pages() + pa.pcp_pages();
    let user = AddressSpace::alloc_user(&cpu, &pa, 3).unwrap();
    assert_eq!(user.root_level(), Level::Pgd);
    let page = pa.alloc_pages(&cpu, Gfp::GFP_HIGHUSER_MOVABLE | Gfp::__GFP_ZERO, 0).unwrap();
    // The last page of the 52-bit user half: pgd entry 15, p4d entry 511.
    let top = (1u64 << 52) - PAGE_SIZE;
    pgtable::map_range(&cpu, &user, &pa, top, page.phys().0, PAGE_SIZE, PAGE_SHARED, MapFlags::default())
        .unwrap()
        .ignore();
    let w = walk(&m, &user, top);
    assert_eq!(w.steps.iter().map(|s| s.level.index(top)).collect::<Vec<_>>(), [15, 511, 511, 511, 511]);
    assert_eq!(w.leaf.unwrap().pa, page.phys());
    // Beyond 52 bits is not this space's.
    let beyond =
        pgtable::map_range(&cpu, &user, &pa, 1 << 52, page.phys().0, PAGE_SIZE, PAGE_SHARED, MapFlags::default());
    assert!(beyond.is_err());
    // A 2 MiB huge page elsewhere: its pmd slot through pgd 0's p4d.
    let addr = 1u64 << 40;
    let ptep = huge_pte_alloc(&cpu, &user, &pa, addr, PMD_SIZE).unwrap();
    assert_eq!(huge_pte_offset(&m, &user, addr, PMD_SIZE), Some(ptep));
    assert!(arch_make_huge_pte(0x4000_0000, PAGE_SHARED, PMD_SIZE).is_ok());
    pgtable::unmap_range(&cpu, &user, top, PAGE_SIZE).unwrap().flush(&cpu);
    pa.free_pages(&cpu, page, 0).unwrap();
    // The pgd; p4d, pud, pmd and pte tables above the top page (pgd 15);
    // p4d, pud and pmd tables above the huge page's slot (pgd 0): 8 tables,
    // all given back.
    assert_eq!(free_pgtables(&cpu, &user, &pa), 8);
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages(), free0);
}

#[test]
fn ptdump_starts_at_the_52_bit_linear_map_and_names_p4d_holes() {
    let m = boot("1G");
    let out = ptdump(&m, &m.kernel_as(), &kernel_markers(m.va_layout(), m.fixmap_layout()));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "---[ Linear Mapping start ]---");
    assert!(lines[1].starts_with("0xfff0000000000000-"), "{}", lines[1]);
    assert!(!out.contains(" SHD "), "no SH bits with LPA2");
    // After 1 GiB of RAM, the rest of pgd 0's 256 TiB is p4d holes, and
    // whole pgd entries are PGD holes.
    assert!(out.lines().any(|l| l.ends_with(" P4D")), "{out}");
    assert!(out.lines().any(|l| l.ends_with(" PGD")), "{out}");
    assert!(out.contains("---[ vmemmap start ]---\n0xffffc1ffc0000000-"), "{out}");
}
