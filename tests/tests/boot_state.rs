//! The real boot state (`boot.state=real`, the default): the early
//! reservations of Debian's arm64 7.2.13 kernel on QEMU virt and the
//! kernel image's vmalloc areas, checked against the peer captures under
//! `tests/data/arm64-peer/` (dmesg, /proc/meminfo and /proc/vmallocinfo),
//! the boot's own memblock allocations (mm/boot_allocs.rs) at the kernel's
//! sizes, and `boot.state=bare` giving RAM less mmlab's own tables (the
//! machine mmlab had before when the linear map is off too).

use mmlab_engine::mm::boot_state::BootState;
use mmlab_engine::mm::page::pg;
use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE, Pfn, PhysAddr};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{AreaKind, Vmalloc, VmallocConfig, VmallocError};
use std::path::Path;

fn peer(run: &str, file: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/arm64-peer").join(run).join(file);
    std::fs::read_to_string(p).unwrap()
}

/// What follows `prefix` in the first dmesg line holding it.
fn dmesg_after(run: &str, prefix: &str) -> String {
    let d = peer(run, "dmesg");
    let line = d.lines().find(|l| l.contains(prefix)).unwrap_or_else(|| panic!("{prefix} in {run}"));
    line[line.find(prefix).unwrap() + prefix.len()..].to_string()
}

/// The hex number after `prefix` in the first dmesg line holding it.
fn dmesg_hex(run: &str, prefix: &str) -> u64 {
    let rest = dmesg_after(run, prefix);
    let hex: String = rest.trim_start_matches("0x").chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    u64::from_str_radix(&hex, 16).unwrap()
}

/// The decimal number after `prefix` in the first dmesg line holding it.
fn dmesg_dec(run: &str, prefix: &str) -> u64 {
    let rest = dmesg_after(run, prefix);
    rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
}

/// The (first byte, bytes) of a `[mem 0xA-0xB]` that follows `prefix` in
/// dmesg, B being the last byte (`inclusive`, as alloc_node_data() prints
/// it) or one past it (swiotlb's `mem->end`).
fn dmesg_range(run: &str, prefix: &str, inclusive: bool) -> (u64, u64) {
    let start = dmesg_hex(run, prefix);
    let rest = dmesg_after(run, prefix);
    let end = rest.split_once('-').unwrap().1.trim_start_matches("0x");
    let end = u64::from_str_radix(&end[..end.find(']').unwrap()], 16).unwrap();
    (start, end + u64::from(inclusive) - start)
}

/// The sizes of the boot's reservations named `name`, in the kernel's order.
fn sizes(m: &Machine, name: &str) -> Vec<u64> {
    m.boot_state().reservations.iter().filter(|r| r.name == name).map(|r| r.size).collect()
}

fn machine(mem: &str, cpus: usize) -> Machine {
    mmlab_tests::boot(MachineConfig::with(mem, cpus).unwrap()).unwrap()
}

fn reserved(m: &Machine, name: &str) -> Vec<(u64, u64)> {
    m.memblock().reservations().filter(|r| r.name == name).map(|r| (r.base.0, r.size)).collect()
}

/// "cma: Reserved 64 MiB at ..." and "software IO TLB: mapped [mem
/// A-B]" of the three runs (the 1 GiB run's bounce buffer "adjusted to
/// 1MB"), and the slot and area arrays that swiotlb_init_remap() takes
/// after it.
#[test]
fn cma_and_swiotlb_where_the_real_kernel_put_them() {
    for (run, mem, cpus) in [("4G-2cpu", "4G", 2), ("16G-4cpu", "16G", 4), ("1G-1cpu", "1G", 1)] {
        let m = machine(mem, cpus);
        // On 1 GiB the area lies below the top of RAM, under the linear
        // map's tables, NODE_DATA and the device tree that the kernel
        // allocated first: 0x7bc00000 as in the real kernel.
        let cma = dmesg_hex(run, "cma: Reserved 64 MiB at ");
        assert_eq!(m.cma_area(), Some((Pfn(cma / PAGE_SIZE), 16384)), "{run}");
        // The CMA pages stay reserved until the allocator frees them as
        // MIGRATE_CMA: memblock_free_all() leaves them out.
        assert!(m.page(Pfn(cma / PAGE_SIZE)).test_flag(pg::PG_RESERVED));
        let io = dmesg_range(run, "software IO TLB: mapped [mem ", false);
        assert_eq!(reserved(&m, "swiotlb")[0], io, "{run}");
        // 64 MiB when RAM reaches past the DMA limit (4 GiB), else 1 MiB
        // per GiB of RAM.
        assert_eq!(io.1, if mem == "1G" { 1 << 20 } else { 64 << 20 }, "{run}");
        // mem->slots: one 24-byte io_tlb_slot per 2 KiB slab, page-aligned
        // (1 MiB: 512 slots, 12,288 bytes = 3 pages; 64 MiB: 32,768
        // slots, 768 KiB); mem->areas: one 16-byte io_tlb_area per area
        // ("software IO TLB: area num N.", the CPU count).
        let areas = dmesg_dec(run, "software IO TLB: area num ");
        assert_eq!(areas, cpus as u64, "{run}");
        let slots = (io.1 >> 11) * 24;
        assert_eq!(sizes(&m, "swiotlb"), [io.1, slots.next_multiple_of(PAGE_SIZE), 16 * areas], "{run}");
    }
}

/// The image, initrd and DTB where QEMU loads them; the initrd and the
/// init sections given back at the end of boot ("Freeing initrd memory:
/// 1004K", "Freeing unused kernel memory: 3904K").
#[test]
fn image_initrd_dtb_and_what_boot_gives_back() {
    let m = machine("4G", 2);
    let k = *m.kernel_image().unwrap();
    assert_eq!((k.init_begin(), k.init), (0x4271_0000, 3904 << 10));
    // memblock keeps every reservation (arm64 keeps memblock after boot);
    // what boot gives back is listed, still PG_reserved until the page
    // allocator frees it (free_reserved_area()).
    assert_eq!(reserved(&m, "kernel"), [(0x4020_0000, 0x4310_0000 - 0x4020_0000)]);
    assert_eq!(reserved(&m, "dtb"), [(0x4820_0000, 1 << 20)]);
    // The initramfs is 1,046,528 bytes (between 1,020 and 1,024 KiB):
    // reserve_initrd_mem() reserves it rounded out to whole pages, 256
    // (1,024 KiB), and free_initrd_mem() -> free_reserved_area() frees the
    // whole pages inside it, 255 ("Freeing initrd memory: 1020K"); the last,
    // partial page stays reserved.
    let initrd = m.boot_state().reservations.iter().find(|r| r.name == "initrd").unwrap();
    assert_eq!((initrd.base, initrd.size, initrd.freed_at_end_of_boot), (0x4800_0000, 1024 << 10, 1020 << 10));
    assert_eq!(dmesg_dec("4G-2cpu", "Freeing initrd memory: ") << 10, initrd.freed_at_end_of_boot);
    assert_eq!(reserved(&m, "initrd"), [(0x4800_0000, 1024 << 10)]);
    assert_eq!(m.boot_state().given_back, [(0x4800_0000, 1020 << 10), (k.init_begin(), k.init)]);
    for pa in [0x4800_0000, k.init_begin(), k.init_end() - PAGE_SIZE] {
        assert!(m.page(Pfn(pa / PAGE_SIZE)).test_flag(pg::PG_RESERVED), "{pa:#x}");
    }
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    for pa in [0x4800_0000, k.init_begin(), k.init_end() - PAGE_SIZE] {
        assert!(!m.page(Pfn(pa / PAGE_SIZE)).test_flag(pg::PG_RESERVED), "{pa:#x}");
    }
    assert!(m.page(Pfn(k.init_end() / PAGE_SIZE)).test_flag(pg::PG_RESERVED));
    // The initrd's last page, 0x480ff, was not given back.
    assert!(m.page(Pfn(0x480ff)).test_flag(pg::PG_RESERVED));
    // free_initrd_mem() gave the initrd's 1,020 KiB = 255 pages back
    // through CPU 0's DMA pageset, free_initmem() the init sections' 3,904
    // KiB = 976 pages through the last CPU's (pcp/src/boot_work/spread.rs
    // end_of_boot_cpu()), each below its high (5,336) and nothing else in
    // the DMA zone allocated after them on a 4 GiB machine (Normal is
    // preferred): the capture's zoneinfo, DMA cpu 0 count 255 and cpu 1
    // count 976.
    let dma = |cpu| pa.pageset_of(mmlab_engine::mm::ZoneType::Dma, cpu).unwrap().count;
    assert_eq!((dma(0), dma(1)), (1020 / 4, 3904 / 4));
    pa.check_invariants().unwrap();
    // free_initmem() unmapped the init segment at KIMAGE_VADDR; the rest stays.
    let asp = m.kernel_as();
    assert!(mmlab_engine::arch::arm64::pgtable::walk(&m, &asp, k.va(k.init_begin())).leaf.is_none());
    assert!(mmlab_engine::arch::arm64::pgtable::walk(&m, &asp, k.va(k.init_end())).leaf.is_some());
}

/// The boot's own memblock allocations (mm/boot_allocs.rs), in the
/// kernel's order and at the kernel's sizes: what the three runs' dmesg
/// prints (NODE_DATA's place, the command line, "percpu: Embedded 36
/// pages/cpu", the hash tables' bytes), the rest by the kernel's rules; and
/// together with the early reservations they leave reserved exactly what
/// the real kernel's "Memory: ... reserved" line counts.
#[test]
fn the_boots_memblock_allocations_at_the_kernels_sizes() {
    for (run, mem, cpus, gib) in [("1G-1cpu", "1G", 1u64, 1u64), ("4G-2cpu", "4G", 2, 4), ("16G-4cpu", "16G", 4, 16)] {
        let m = machine(mem, cpus as usize);
        let mut order: Vec<&str> = m.boot_state().reservations.iter().map(|r| r.name).collect();
        order.dedup();
        assert_eq!(
            order,
            [
                "dtb",
                "kernel",
                "initrd",
                "unflatten_device_tree",
                "NODE_DATA",
                "bootmem_init",
                "cma",
                "bootmem_init",
                "mem_section",
                "usemap",
                "pgtable",
                "cmdline",
                "pcpu",
                "dentry hash",
                "inode hash",
                "swiotlb"
            ],
            "{run}"
        );
        // unflatten_device_tree(): the virt machine's tree, 44,492 bytes
        // with one CPU node, 1,456 more for the second, 1,344 for each
        // further one (measured with memblock=debug; boot_allocs.rs).
        let dt = 44_492 + if cpus >= 2 { 1_456 + 1_344 * (cpus - 2) } else { 0 };
        assert_eq!(sizes(&m, "unflatten_device_tree"), [dt], "{run}");
        // alloc_node_data(): sizeof(pg_data_t), where the real kernel put it
        // ("NODE_DATA(0) allocated [mem A-B]"): top-down below the linear
        // map's tables and the device tree.
        let nd = m.boot_state().reservations.iter().find(|r| r.name == "NODE_DATA").unwrap();
        assert_eq!((nd.base, nd.size), dmesg_range(run, "NODE_DATA(0) allocated [mem ", true), "{run}");
        assert_eq!(nd.size, 14_336);
        assert_eq!(sizes(&m, "bootmem_init"), [64, 64], "{run}");
        // memblocks_present(): the mem_section root array, NR_SECTION_ROOTS
        // pointers = 2^(48 - 27) sections / 128 per root (32-byte
        // mem_sections with CONFIG_PAGE_EXTENSION) x 8 B = 128 KiB; then
        // sparse_index_alloc() one 4 KiB root (128 sections, 16 GiB) per
        // root in use: RAM [1 GiB, 1 GiB + size) needs one up to 15 GiB,
        // two at 16 GiB.
        let roots = if gib >= 16 { 2 } else { 1 };
        let mut want = vec![128 << 10];
        want.extend(std::iter::repeat_n(PAGE_SIZE, roots));
        assert_eq!(sizes(&m, "mem_section"), want, "{run}");
        // The usemap: per 128 MiB section, a 24-byte mem_section_usage
        // (rcu_head, 64-bit subsection map) and 64 pageblocks x 8 bits
        // (NR_PAGEBLOCK_BITS: 5 rounded up): 88 bytes.
        assert_eq!(sizes(&m, "usemap"), [88 * gib * 8], "{run}");
        // vmemmap_populate(): a PUD table and one PMD table per GiB of
        // memmap (16 to 256 MiB here: one).
        assert_eq!(sizes(&m, "pgtable"), [PAGE_SIZE; 2], "{run}");
        // setup_command_line(): saved_command_line and static_command_line,
        // strlen + 1 each.
        let cmdline = dmesg_after(run, "Kernel command line: ");
        assert_eq!(cmdline, mmlab_engine::mm::boot_state::PEER_CMDLINE);
        assert_eq!(sizes(&m, "cmdline"), [cmdline.len() as u64 + 1; 2], "{run}");
        // pcpu_fc_alloc(): one unit per possible CPU; then
        // pcpu_setup_first_chunk()'s 13 arrays. pcpu_build_alloc_info()'s
        // and the areas array's pages were given back (memblock_free()).
        let unit_pages = dmesg_dec(run, "percpu: Embedded ");
        assert_eq!(unit_pages, 36);
        let pcpu = sizes(&m, "pcpu");
        assert_eq!((pcpu[0], pcpu.len()), (unit_pages * PAGE_SIZE * cpus, 1 + 13), "{run}");
        // alloc_large_system_hash(): the bytes the kernel printed.
        for (name, prefix) in
            [("dentry hash", "Dentry cache hash table entries: "), ("inode hash", "Inode-cache hash table entries: ")]
        {
            let line = dmesg_after(run, prefix);
            let bytes: u64 = line.split(", ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            assert_eq!(sizes(&m, name), [bytes], "{run} {name}");
        }
        // mem_init()'s "Memory: ... NK reserved" is every page neither
        // managed nor CMA when the page allocator starts, before the initrd
        // and init are given back: memblock's reserved pages less the CMA
        // area.
        let reserved_kb = dmesg_dec(run, "K bss, ");
        assert_eq!(m.memblock().reserved_pages() - 16_384, reserved_kb / 4, "{run}");
    }
}

/// Every frame is accounted for: `boot.state=bare` is RAM less mmlab's
/// own memmap, usemap and tables (with `arm64.linear_map=0`, the machine
/// mmlab had before: 1,032,188 managed pages at 4 GiB), and what the real
/// state takes from the allocator is exactly its reservations, which leave
/// the real kernel's MemTotal.
#[test]
fn bare_is_the_old_machine_and_real_takes_its_reservations() {
    let frames = (4u64 << 30) / PAGE_SIZE;
    let old =
        mmlab_tests::boot(MachineConfig { linear_map: false, ..MachineConfig::with("4G", 2).unwrap().bare() }).unwrap();
    let pa_old = PageAllocator::boot(&old, AllocatorConfig::default()).unwrap();
    // The memmap (1,048,576 x 64 B = 16,384 pages), the usemap (2,048
    // pageblocks, a byte each: one page), swapper_pg_dir and the vmemmap's
    // PUD and PMD tables (full sections: PMD blocks, no PTE tables).
    assert_eq!(pa_old.managed_pages(), frames - (16_384 + 1 + 1 + 2));
    assert_eq!(pa_old.managed_pages(), 1_032_188);
    drop(pa_old);

    let bare = mmlab_tests::boot(MachineConfig::with("4G", 2).unwrap().bare()).unwrap();
    assert_eq!(bare.boot_state().in_force, BootState::Bare);
    assert!(bare.kernel_image().is_none() && bare.cma_area().is_none());
    let names: Vec<&str> = bare.memblock().reservations().map(|r| r.name).collect();
    assert!(names.iter().all(|n| ["memmap", "usemap", "pgtable", "fixmap"].contains(n)), "{names:?}");
    let pa = PageAllocator::boot(&bare, AllocatorConfig::default()).unwrap();
    // The linear map (the default) adds the fixmap's 5 tables (bm_pud,
    // bm_pmd and a bm_pte for each of the three PMDs 7.2's slots span; no
    // image to hold them: from memblock) and map_mem()'s 2,053: 2,048 PTE
    // + 4 PMD + 1 PUD for 4 GiB of 4 KiB pages (rodata=on, no BBML2_NOABORT).
    assert_eq!(pa.managed_pages(), 1_032_188 - 5 - 2_053);
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    assert_eq!(vm.vmallocinfo(), "");

    let real = machine("4G", 2);
    let pa_real = PageAllocator::boot(&real, AllocatorConfig::default()).unwrap();
    // The CMA area stays reserved in memblock and its 16,384 pages are
    // managed once cma_init_reserved_areas() has freed them as MIGRATE_CMA.
    // The initrd and init sections (1,231 pages) given back at the end of
    // boot are managed and, as 7.2's free_reserved_area() does on arm64
    // (which keeps memblock), out of memblock's reserved list.
    let cma = 16_384;
    let given_back = (1020 + 3904) / 4;
    let real_managed = pa_real.managed_pages() - cma;
    assert_eq!(real.cma_area().map(|(_, n)| n), Some(cma));
    let res_pages = |m: &Machine| m.memblock().reserved_pages();
    assert_eq!(pa.managed_pages() + res_pages(&bare), frames);
    assert_eq!(real_managed + res_pages(&real), frames);
    let k0 = *real.kernel_image().unwrap();
    let mb = real.memblock();
    assert!(!mb.is_region_reserved(PhysAddr(k0.init_begin()), k0.init));
    assert!(!mb.is_region_reserved(PhysAddr(0x4800_0000), (given_back - k0.init / PAGE_SIZE) * PAGE_SIZE));
    // The initrd's last, partial page and the rest of the image stay.
    assert!(mb.is_region_reserved(PhysAddr(0x480f_f000), PAGE_SIZE));
    assert!(mb.is_region_reserved(PhysAddr(k0.init_end()), PAGE_SIZE));
    drop(mb);
    // swapper_pg_dir and the fixmap's tables are pages of the image (the
    // page before __init_begin; .pgtbl), not memblock's.
    let k = *real.kernel_image().unwrap();
    assert_eq!(real.kernel_as().pgd().0, k.init_begin() - PAGE_SIZE);
    assert!(reserved(&real, "fixmap").is_empty());
    // What the real state keeps, in pages: the image less init (44,224
    // kB: 11,056), the initrd's last page (1), the DTB (256), CMA and the
    // swiotlb buffer (16,384 each), swiotlb's slot array (192), the memmap
    // (16,384), the linear map's 2,053 tables, the dentry and inode hash
    // tables (4 + 2 MiB: 1,536), and 125 pages that the smaller allocations
    // fill (the first percpu chunk's 2 x 36 pages, the mem_section roots'
    // 128 KiB + one root page, the device tree's 45,948 bytes, NODE_DATA's
    // 14,336, the usemap's 2,816, the vmemmap's 2 tables, the command lines
    // and the percpu arrays, packed top-down).
    let kept = 11_056 + 1 + 256 + 2 * 16_384 + 192 + 16_384 + 2_053 + 1_536 + 125;
    assert_eq!(real_managed, frames - kept);
    assert_eq!(real_managed, 984_205);
    // The real kernel's MemTotal: 4,002,356 kB, CMA included.
    let memtotal = peer("4G-2cpu", "proc_meminfo");
    let memtotal: u64 = memtotal.lines().next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(pa_real.managed_pages() * 4, memtotal);
}

/// /proc/vmallocinfo starts as the real kernel's does, and the first
/// vmalloc lands where the real kernel's first area (an ioremap) did.
#[test]
fn vmallocinfo_starts_with_the_kernel_image() {
    for (run, mem, cpus) in [("4G-2cpu", "4G", 2), ("1G-1cpu", "1G", 1), ("16G-4cpu", "16G", 4)] {
        let m = machine(mem, cpus);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        let ours = vm.vmallocinfo();
        let real = peer(run, "proc_vmallocinfo");
        // The image's areas of each vmap node come first in its list: the
        // lines of ours are the real file's lines that name paging_init,
        // in the same order.
        let real_image: Vec<&str> = real.lines().filter(|l| l.contains("paging_init")).collect();
        assert_eq!(ours.lines().collect::<Vec<_>>(), real_image, "{run}");
        let first_of_node0 = real.lines().take_while(|l| l.contains("paging_init")).count();
        assert_eq!(
            &real.lines().collect::<Vec<_>>()[..first_of_node0],
            &ours.lines().collect::<Vec<_>>()[..first_of_node0]
        );
        let cpu = m.cpu(0).unwrap();
        let a = vm.vmalloc(&cpu, PAGE_SIZE).unwrap();
        assert_eq!(a, 0xffff_8000_82f0_1000, "{run}");
        // The early areas are never freed.
        assert_eq!(vm.vfree(&cpu, 0xffff_8000_8000_0000), Err(VmallocError::WrongKind { addr: 0xffff_8000_8000_0000 }));
        assert!(vm.areas().iter().filter(|x| x.kind == AreaKind::Early).count() == 5);
        vm.vfree(&cpu, a).unwrap();
        vm.check().unwrap();
    }
}

/// Small machines (fast tests) cannot hold the image and the CMA area:
/// they boot bare and say why; `stat boot-state` labels what is emulated.
#[test]
fn small_machines_boot_bare_and_stat_says_so() {
    let m = machine("64M", 1);
    let b = m.boot_state();
    assert_eq!((b.requested, b.in_force), (BootState::Real, BootState::Bare));
    assert!(b.reason.as_deref().unwrap().contains("256 MiB"));
    let note = mmlab_harness::output::boot_state::note(&m);
    assert!(note.contains("boots bare"), "{note}");
    let m4 = machine("4G", 2);
    let pa4 = PageAllocator::boot(&m4, AllocatorConfig::default()).unwrap();
    let vm4 = Vmalloc::boot(&pa4, VmallocConfig::default()).unwrap();
    let s = mmlab_harness::output::boot_state::render(&m4, &pa4, &vm4);
    let allocations = format!(": {} allocations (0 failed), ", pa4.boot_work().allocations);
    assert!(s.starts_with("boot state: real (boot.state=real)\n"), "{s}");
    for want in [
        // The owner column is as wide as the longest owner,
        // "unflatten_device_tree".
        "\ncma                   0x00000000fc000000-0x0000000100000000",
        "\nswiotlb               0x00000000f8000000-0x00000000fc000000",
        "\ninitrd                0x0000000048000000-0x0000000048100000        1M     1020K",
        "\ndentry hash           0x000000013b200000-0x000000013b600000        4M",
        "CMA area: 64M at 0x00000000fc000000",
        "0xffff8000828e0000-0xffff800082f01000  6426624 _data",
        "\nboot work (pcp/src/boot_work.rs: ",
        &allocations,
        "\nhash TCP established                  1     64  tcp_init() (net/ipv4/tcp.c)",
        "\nboot vmalloc areas (vmalloc/src/boot.rs: ",
        "\nirq_stacks            2      8  init_IRQ() -> init_irq_stacks()",
        "\n     7 __ioremap_prot                                0 pages\n",
        "\nnot emulated: ",
    ] {
        assert!(s.contains(want), "{want} in\n{s}");
    }
    // `mmlab boot` lists the end-of-boot step before the free into buddy,
    // where mmlab runs it; with the image and the linear map, the alias and
    // rodata are made read-only before it.
    let m = machine("1G", 1);
    let (pa, free) = m.measure_phase("free into buddy", "memblock_free_all()", || {
        PageAllocator::boot(&m, AllocatorConfig::default()).unwrap()
    });
    let r = mmlab_harness::output::boot::BootReport::collect(&m, &pa, &free);
    let names: Vec<&str> = r.phases.iter().map(|p| p.phase).collect();
    assert_eq!(
        names,
        [
            "memblock",
            "linear map",
            "kernel image map",
            "vmemmap",
            "memmap init",
            "rodata ro",
            "end of boot",
            "free into buddy"
        ]
    );
    assert_eq!((r.machine.boot_state, r.machine.kernel_image), ("real", true));
    let mut c = MachineConfig::default();
    MachineConfig::KNOBS.apply(&mut c, "boot.state=bare").unwrap();
    assert_eq!(c.boot_state, BootState::Bare);
    assert_eq!(
        MachineConfig::KNOBS.apply(&mut c, "boot.state=half").unwrap_err().to_string(),
        "bad value \"half\" for boot.state (real|bare)"
    );
}

/// The boot's own allocations, replayed (pcp/src/boot_work.rs): the 4G/2
/// machine starts with Unmovable and Reclaimable pageblocks in Normal, as
/// the real one (16 and 2 there), nonzero pagesets on both CPUs, and the
/// boot's kernel memory held; every allocation is the base record's or a
/// rule's; a bare machine replays nothing; the same boot twice leaves the
/// same free lists.
#[test]
fn the_boots_own_allocations_leave_the_real_boots_pageblocks() {
    use mmlab_engine::mm::{Migratetype, ZoneType};
    let m = machine("4G", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let w = pa.boot_work();
    let base = include_str!("../../pcp/data/boot-work-7.2-virt.txt").lines().filter(|l| l.starts_with("a ")).count();
    let by_rules: u64 = pa.boot_rules().iter().map(|r| r.allocations).sum();
    assert_eq!((w.allocations, w.failed), (base as u64 + by_rules, 0));
    assert_eq!(w.held_pages, w.pages_allocated - w.pages_freed);
    assert!(w.frees > 600 && w.held_pages > 4000, "{w:?}");
    let normal = pa.zone_of(ZoneType::Normal);
    let blocks = normal.pageblock_counts();
    assert!(blocks[Migratetype::Unmovable as usize] >= 8, "{blocks:?}");
    assert_eq!(blocks[Migratetype::Reclaimable as usize], 2, "{blocks:?}");
    for cpu in 0..2 {
        assert!(pa.pageset_of(ZoneType::Normal, cpu).unwrap().count > 0, "cpu {cpu}");
    }
    assert_eq!(pa.nr_free_pages() + pa.pcp_pages() + w.held_pages as i64, pa.managed_pages() as i64);
    pa.check_invariants().unwrap();
    let again = machine("4G", 2);
    let pa2 = PageAllocator::boot(&again, AllocatorConfig::default()).unwrap();
    assert_eq!(pa2.boot_work(), w);
    assert_eq!(pa2.zone().nr_free_per_order(), pa.zone().nr_free_per_order());
    let bare = mmlab_tests::boot(MachineConfig::with("4G", 2).unwrap().bare()).unwrap();
    let pa3 = PageAllocator::boot(&bare, AllocatorConfig::default()).unwrap();
    assert_eq!(pa3.boot_work(), mmlab_pcp::BootWork::default());
}

/// The heads of the free lists and pcp lists have the addresses of kernel
/// statics: the list-head window at the start of the image's `[_data, _end)`
/// (`mmlab_engine::mm::list`), held by the image's `_data` vmalloc area
/// when the image is in RAM and kept out of vmalloc's free space when it
/// is not, so that a vmalloc big enough to cover it from wherever it
/// starts lands clear of it. (Before, the window was at KIMAGE_VADDR +
/// 128 MiB, in the free vmalloc space of either machine.)
#[test]
fn list_heads_are_statics_no_vmalloc_covers() {
    use mmlab_engine::arch::arm64::memory::{VMALLOC_START, VMEMMAP_END, VaLayout};
    const VMEMMAP_START: u64 = VaLayout::VA48.vmemmap_start();
    use mmlab_engine::mm::list::{KERNEL_DATA_LISTS, KERNEL_DATA_LISTS_SIZE};
    let (ws, we) = (KERNEL_DATA_LISTS, KERNEL_DATA_LISTS + KERNEL_DATA_LISTS_SIZE);
    for bare in [false, true] {
        let cfg = MachineConfig::with("1G", 1).unwrap();
        let m = mmlab_tests::boot(if bare { cfg.bare() } else { cfg }).unwrap();
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let cpu = m.cpu(0).unwrap();
        // A page on a pcp list, then every link to a head: in the window.
        let p = pa.alloc_pages(&cpu, mmlab_engine::Gfp::GFP_KERNEL, 0).unwrap();
        pa.free_pages(&cpu, p, 0).unwrap();
        let mut heads = 0;
        let free: Vec<Pfn> = pa.zone().check_free_lists().unwrap().into_iter().map(|(f, _)| f).collect();
        for pfn in free.into_iter().chain([p]) {
            for link in [m.page(pfn).lru_prev(), m.page(pfn).lru_next()] {
                if !(VMEMMAP_START..VMEMMAP_END).contains(&link) {
                    assert!((ws..we).contains(&link), "head {link:#x} outside {ws:#x}..{we:#x}");
                    heads += 1;
                }
            }
        }
        assert!(heads > 2, "bare={bare}: {heads} head links seen");
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        if !bare {
            let k = *m.kernel_image().unwrap();
            assert!(k.va(k.init_end()) <= ws && we <= k.va_end());
            let holders: Vec<_> = vm.areas().into_iter().filter(|a| a.addr <= ws && we <= a.addr + a.size).collect();
            assert_eq!(holders.len(), 1);
            assert_eq!(holders[0].kind, AreaKind::Early);
            assert_eq!(holders[0].addr, k.va(k.init_end()), "the [_data, _end) area");
        }
        // From VMALLOC_START to the window's end: on the bare machine it
        // would start at VMALLOC_START and cover the window; it goes after it.
        let size = we - VMALLOC_START;
        let a = vm.vmalloc(&cpu, size).unwrap();
        assert!(a >= we, "bare={bare}: vmalloc at {a:#x}");
        // Nor does any other area (the page array's nested vmalloc).
        let others: Vec<_> = vm.areas().into_iter().filter(|x| x.kind != AreaKind::Early).collect();
        assert_eq!(others.len(), 2, "the area and its page array");
        assert!(others.iter().all(|x| x.addr >= we || x.addr + x.size <= ws));
        vm.vfree(&cpu, a).unwrap();
        vm.check().unwrap();
    }
}
