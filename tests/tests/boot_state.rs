//! The real boot state (`boot.state=real`, the default): the early
//! reservations of Debian's arm64 7.2.13 kernel on QEMU virt and the
//! kernel image's vmalloc areas, checked against the peer captures under
//! `tests/data/arm64-peer/` (dmesg and /proc/vmallocinfo), and
//! `boot.state=bare` giving the machine mmlab had before.

use mmlab_engine::mm::boot_state::BootState;
use mmlab_engine::mm::page::pg;
use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE, Pfn};
use mmlab_pcp::{AllocatorConfig, PageAllocator};
use mmlab_vmalloc::{AreaKind, Vmalloc, VmallocConfig, VmallocError};
use std::path::Path;

fn peer(run: &str, file: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/arm64-peer").join(run).join(file);
    std::fs::read_to_string(p).unwrap()
}

/// The hex number after `prefix` in the first dmesg line holding it.
fn dmesg_hex(run: &str, prefix: &str) -> u64 {
    let d = peer(run, "dmesg");
    let line = d.lines().find(|l| l.contains(prefix)).unwrap_or_else(|| panic!("{prefix} in {run}"));
    let rest = &line[line.find(prefix).unwrap() + prefix.len()..];
    let hex: String = rest.trim_start_matches("0x").chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    u64::from_str_radix(&hex, 16).unwrap()
}

fn machine(mem: &str, cpus: usize) -> Machine {
    mmlab_tests::boot(MachineConfig::with(mem, cpus).unwrap()).unwrap()
}

fn reserved(m: &Machine, name: &str) -> Vec<(u64, u64)> {
    m.memblock().reserved().iter().filter(|r| r.name == name).map(|r| (r.base.0, r.size)).collect()
}

/// "cma: Reserved 64 MiB at ..." and "software IO TLB: mapped [mem
/// A-B]" of the 4 and 16 GiB runs; the 1 GiB run's 1 MiB bounce buffer.
#[test]
fn cma_and_swiotlb_where_the_real_kernel_put_them() {
    for (run, mem, cpus) in [("4G-2cpu", "4G", 2), ("16G-4cpu", "16G", 4)] {
        let m = machine(mem, cpus);
        let cma = dmesg_hex(run, "cma: Reserved 64 MiB at ");
        assert_eq!(m.cma_area(), Some((Pfn(cma / PAGE_SIZE), 16384)), "{run}");
        let io = dmesg_hex(run, "software IO TLB: mapped [mem ");
        assert_eq!(reserved(&m, "swiotlb")[0], (io, 64 << 20), "{run}");
        // The CMA pages stay reserved until the allocator frees them as
        // MIGRATE_CMA: memblock_free_all() leaves them out.
        assert!(m.page(Pfn(cma / PAGE_SIZE)).test_flag(pg::PG_RESERVED));
    }
    let m = machine("1G", 1);
    // The buffer and its slot array (memblock merges the two neighbours).
    let sw: Vec<u64> = m.boot_state().reservations.iter().filter(|r| r.name == "swiotlb").map(|r| r.size).collect();
    assert_eq!(sw, [1 << 20, 3 * PAGE_SIZE], "adjusted to 1MB");
    assert_eq!(reserved(&m, "swiotlb").iter().map(|r| r.1).sum::<u64>(), (1 << 20) + 3 * PAGE_SIZE);
    // The real kernel's CMA area is 4 MiB lower (its early page tables
    // and NODE_DATA came first): simplified, and said so in the docs.
    assert_eq!(dmesg_hex("1G-1cpu", "cma: Reserved 64 MiB at "), 0x7bc0_0000);
    assert_eq!(m.cma_area(), Some((Pfn(0x7c000), 16384)));
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
    let initrd = m.boot_state().reservations.iter().find(|r| r.name == "initrd").unwrap();
    assert_eq!((initrd.base, initrd.size, initrd.freed_at_end_of_boot), (0x4800_0000, 1004 << 10, 1004 << 10));
    assert_eq!(m.boot_state().given_back, [(0x4800_0000, 1004 << 10), (k.init_begin(), k.init)]);
    for pa in [0x4800_0000, k.init_begin(), k.init_end() - PAGE_SIZE] {
        assert!(m.page(Pfn(pa / PAGE_SIZE)).test_flag(pg::PG_RESERVED), "{pa:#x}");
    }
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    for pa in [0x4800_0000, k.init_begin(), k.init_end() - PAGE_SIZE] {
        assert!(!m.page(Pfn(pa / PAGE_SIZE)).test_flag(pg::PG_RESERVED), "{pa:#x}");
    }
    assert!(m.page(Pfn(k.init_end() / PAGE_SIZE)).test_flag(pg::PG_RESERVED));
    // The 1,227 pages went through CPU 0's DMA pageset, below its high:
    // a nonzero pageset after boot, as the real kernel's.
    let given_back = (1004 + 3904) / 4;
    assert_eq!(pa.pageset_of(mmlab_engine::mm::ZoneType::Dma, 0).unwrap().count, given_back);
    pa.check_invariants().unwrap();
    // free_initmem() unmapped the init segment at KIMAGE_VADDR; the rest stays.
    let asp = m.kernel_as();
    assert!(mmlab_engine::arch::arm64::pgtable::walk(&m, &asp, k.va(k.init_begin())).leaf.is_none());
    assert!(mmlab_engine::arch::arm64::pgtable::walk(&m, &asp, k.va(k.init_end())).leaf.is_some());
}

/// Every frame is accounted for: what the real state takes from the
/// allocator is exactly its reservations (and the tables that map the
/// image), and `boot.state=bare` is the machine mmlab had before
/// (1,032,188 managed pages at 4 GiB).
#[test]
fn bare_is_the_old_machine_and_real_takes_its_reservations() {
    let bare = mmlab_tests::boot(MachineConfig::with("4G", 2).unwrap().bare()).unwrap();
    assert_eq!(bare.boot_state().in_force, BootState::Bare);
    assert!(bare.kernel_image().is_none() && bare.cma_area().is_none());
    let names: Vec<&str> = bare.memblock().reserved().iter().map(|r| r.name).collect();
    assert!(names.iter().all(|n| ["memmap", "usemap", "pgtable"].contains(n)), "{names:?}");
    let pa = PageAllocator::boot(&bare, AllocatorConfig::default()).unwrap();
    assert_eq!(pa.managed_pages(), 1_032_188);
    let vm = Vmalloc::new(&pa, VmallocConfig::default());
    assert_eq!(vm.vmallocinfo(), "");

    let real = machine("4G", 2);
    let pa_real = PageAllocator::boot(&real, AllocatorConfig::default()).unwrap();
    // The CMA area stays reserved in memblock and its 16,384 pages are
    // managed once cma_init_reserved_areas() has freed them as MIGRATE_CMA.
    // Likewise the initrd and init sections (1,227 pages) given back at
    // the end of boot: managed, and still in memblock's reserved list.
    let cma = 16_384;
    let given_back = (1004 + 3904) / 4;
    let real_managed = pa_real.managed_pages() - cma;
    assert_eq!(real.cma_area().map(|(_, n)| n), Some(cma));
    let res_pages = |m: &Machine| m.memblock().reserved_pages();
    assert_eq!(1_032_188 + res_pages(&bare) + given_back, real_managed + res_pages(&real));
    // The image (less init), DTB, CMA and swiotlb: 44,224 + 1,024 + 65,536
    // + 65,536 + 768 kB, plus the image's page tables.
    let boot_kb = (44_224 + 1_024 + 65_536 + 65_536 + 768) / 4;
    let extra_tables = 1_032_188 - real_managed - boot_kb;
    assert!((1..=8).contains(&extra_tables), "{extra_tables}");
    assert_eq!(real_managed, 987_909);
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
    let s = mmlab_harness::output::boot_state::render(&m4, &pa4.boot_work());
    assert!(s.starts_with("boot state: real (boot.state=real)\n"), "{s}");
    for want in [
        "\ncma      0x00000000fc000000-0x0000000100000000",
        "\nswiotlb  0x00000000f8000000-0x00000000fc000000",
        "\ninitrd   0x0000000048000000-0x00000000480fb000",
        "CMA area: 64M at 0x00000000fc000000",
        "0xffff8000828e0000-0xffff800082f01000  6426624 _data",
        "\nboot work (pcp/src/boot_work.rs: ",
        ": 3972 allocations (0 failed), ",
        "\nnot emulated: ",
    ] {
        assert!(s.contains(want), "{want} in\n{s}");
    }
    // `mmlab boot` lists the end-of-boot step before the free into buddy,
    // where mmlab runs it.
    let m = machine("1G", 1);
    let (pa, free) = m.measure_phase("free into buddy", "memblock_free_all()", || {
        PageAllocator::boot(&m, AllocatorConfig::default()).unwrap()
    });
    let r = mmlab_harness::output::boot::BootReport::collect(&m, &pa, &free);
    let names: Vec<&str> = r.phases.iter().map(|p| p.phase).collect();
    assert_eq!(
        names,
        ["memblock", "linear map", "kernel image map", "vmemmap", "memmap init", "end of boot", "free into buddy"]
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
/// boot's kernel memory held; a bare machine replays nothing; the same boot
/// twice leaves the same free lists.
#[test]
fn the_boots_own_allocations_leave_the_real_boots_pageblocks() {
    use mmlab_engine::mm::{Migratetype, ZoneType};
    let m = machine("4G", 2);
    let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
    let w = pa.boot_work();
    assert_eq!((w.allocations, w.failed), (3972, 0));
    assert!(w.frees > 2000 && w.held_pages > 4000, "{w:?}");
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
    use mmlab_engine::arch::arm64::memory::{VMALLOC_START, VMEMMAP_END, VMEMMAP_START};
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
