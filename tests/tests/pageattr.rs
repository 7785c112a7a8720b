//! `set_memory_ro/rw` on the linear map (arch/arm64/mm/pageattr.c), with
//! and without block splitting (6.18's `split_kernel_leaf_mapping()` on a
//! BBML2_NOABORT CPU, or mmlab's break-before-make sequence).
//!
//! With `rodata=off` and KFENCE started early (`kfence.sample_interval=100`;
//! with Debian's 0, late KFENCE keeps the linear map page-granular) a
//! 64 MiB machine's linear map is PMD blocks: the first 32 MiB one
//! contiguous run; the second holds the KFENCE pool's PTE tables near its
//! top (memblock, top-down), so its blocks carry no contiguous bit (7.2's
//! `pmd_range_has_valid_noncont()`). Making the one page at `PAGE_OFFSET + 2M + 4K`
//! read-only needs, at its start: the contiguous PMD run split (16 PMDs
//! lose PTE_CONT), the 2 MiB block split into a PTE table (512 PTEs, in
//! contiguous runs), that 64 KiB run split; at its end (`+ 2M + 8K`)
//! nothing more (already a non-contiguous PTE boundary). One table, one
//! leaf changed.

use mmlab_engine::arch::arm64::memory::{PAGE_END, PHYS_OFFSET, VaLayout};
const PAGE_OFFSET: u64 = VaLayout::VA48.page_offset();
use mmlab_engine::arch::arm64::mmu::Rodata;
use mmlab_engine::arch::arm64::pageattr::{
    PageattrCounts, PageattrError, SplitMode, set_memory_nx, set_memory_ro, set_memory_rw, set_memory_x,
};
use mmlab_engine::arch::arm64::pgtable::{self, Level, mmu};
use mmlab_engine::machine::MemblockTables;
use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE};

fn boot(rodata: Rodata) -> Machine {
    let cfg = MachineConfig {
        barrier_backend: mmlab_engine::arch::arm64::barrier::BarrierBackend::Count,
        linear_map: true,
        rodata,
        // Blocks need early KFENCE (module docs).
        kfence_sample_interval: if rodata == Rodata::On { 0 } else { 100 },
        ..MachineConfig::with("64M", 1).expect("size")
    };
    mmlab_tests::boot(cfg).expect("boots")
}

fn leaf(m: &Machine, va: u64) -> pgtable::Leaf {
    pgtable::walk(m, &m.kernel_as(), va).leaf.expect("mapped")
}

#[test]
fn page_granular_map_changes_in_place() {
    let m = boot(Rodata::On);
    let cpu = m.cpu(0).unwrap();
    let k = m.kernel_as();
    let va = PAGE_OFFSET + PAGE_SIZE;
    let r = set_memory_ro(&cpu, &MemblockTables(&m), va, 16, SplitMode::None).unwrap();
    assert_eq!(r.counts, PageattrCounts { leaves_changed: 16, ..Default::default() });
    assert!(r.tlbi.total() > 0);
    assert!(mmu::write_u64(&cpu, &k, va + 8, 1).is_err(), "read-only now");
    assert!(mmu::read_u64(&cpu, &k, va + 8).is_ok());
    assert!(mmu::write_u64(&cpu, &k, va + 16 * PAGE_SIZE, 1).is_ok(), "the page after the range");
    set_memory_rw(&cpu, &MemblockTables(&m), va, 16, SplitMode::None).unwrap();
    mmu::write_u64(&cpu, &k, va + 8, 0x77).unwrap();
    assert_eq!(
        m.arena().word(mmlab_engine::PhysAddr(PHYS_OFFSET + PAGE_SIZE + 8)).load(std::sync::atomic::Ordering::Relaxed),
        0x77
    );
}

#[test]
fn blocks_are_refused_without_a_split_and_nothing_changes() {
    let m = boot(Rodata::Off);
    let cpu = m.cpu(0).unwrap();
    let va = PAGE_OFFSET + (2 << 20) + PAGE_SIZE;
    let before = leaf(&m, va);
    assert_eq!(before.level, Level::Pmd);
    assert!(before.desc.is_cont());
    assert_eq!(
        set_memory_ro(&cpu, &MemblockTables(&m), va, 1, SplitMode::None).unwrap_err(),
        PageattrError::NotPageGranular { addr: va, level: Level::Pmd }
    );
    assert_eq!(leaf(&m, va).desc, before.desc);
    // A whole contiguous run may change in place.
    // Nor may a whole contiguous run change without BBML2 (pgattr_change_is_safe()).
    assert_eq!(
        set_memory_ro(&cpu, &MemblockTables(&m), PAGE_OFFSET, (32 << 20) / PAGE_SIZE, SplitMode::None).unwrap_err(),
        PageattrError::NotPageGranular { addr: PAGE_OFFSET, level: Level::Pmd }
    );
    assert!(leaf(&m, PAGE_OFFSET).desc.writable());
    // With BBML2 it may, in place: 16 blocks, no split.
    let r =
        set_memory_ro(&cpu, &MemblockTables(&m), PAGE_OFFSET, (32 << 20) / PAGE_SIZE, SplitMode::Bbml2NoAbort).unwrap();
    assert_eq!(r.counts, PageattrCounts { leaves_changed: 16, ..Default::default() });
    assert!(!leaf(&m, PAGE_OFFSET + (31 << 20)).desc.writable() && leaf(&m, PAGE_OFFSET + (32 << 20)).desc.writable());
}

fn split_one_page(mode: SplitMode) -> (Machine, PageattrCounts, u64) {
    let m = boot(Rodata::Off);
    let (counts, tlbi) = {
        let cpu = m.cpu(0).unwrap();
        let va = PAGE_OFFSET + (2 << 20) + PAGE_SIZE;
        let r = set_memory_ro(&cpu, &MemblockTables(&m), va, 1, mode).unwrap();
        let k = m.kernel_as();
        assert!(mmu::write_u64(&cpu, &k, va, 1).is_err());
        // Every other page still writable and where it was.
        for other in [va - PAGE_SIZE, va + PAGE_SIZE, PAGE_OFFSET + (2 << 20) + (64 << 10), PAGE_OFFSET + (4 << 20)] {
            mmu::write_u64(&cpu, &k, other, other).unwrap();
            let pa = other - PAGE_OFFSET + PHYS_OFFSET;
            assert_eq!(m.arena().word(mmlab_engine::PhysAddr(pa)).load(std::sync::atomic::Ordering::Relaxed), other);
        }
        (r.counts, r.tlbi.total())
    };
    (m, counts, tlbi)
}

#[test]
fn bbml2_splits_in_place() {
    let (m, c, tlbi) = split_one_page(SplitMode::Bbml2NoAbort);
    assert_eq!(
        c,
        PageattrCounts {
            split_cont_pmd: 1,
            split_pmd: 1,
            split_cont_pte: 1,
            tables: 1,
            leaves_changed: 1,
            ..Default::default()
        }
    );
    let base = PAGE_OFFSET + (2 << 20);
    let l = leaf(&m, base + PAGE_SIZE);
    assert_eq!(l.level, Level::Pte);
    assert!(!l.desc.writable() && !l.desc.is_cont());
    assert!(!leaf(&m, base + 2 * PAGE_SIZE).desc.is_cont());
    assert!(leaf(&m, base + (64 << 10)).desc.is_cont(), "the next 64K run keeps its contiguous bit");
    let l4m = leaf(&m, PAGE_OFFSET + (4 << 20));
    assert_eq!((l4m.level, l4m.desc.is_cont()), (Level::Pmd, false));
    // The second 32 MiB holds the KFENCE pool's tables: blocks, no run.
    let l32m = leaf(&m, PAGE_OFFSET + (32 << 20));
    assert_eq!((l32m.level, l32m.desc.is_cont()), (Level::Pmd, false));
    // Only the change's own flush.
    let (_, bbm, bbm_tlbi) = split_one_page(SplitMode::BreakBeforeMake);
    assert_eq!(bbm, PageattrCounts { breaks: 3, ..c });
    assert!(bbm_tlbi > tlbi, "{bbm_tlbi} > {tlbi}");
}

#[test]
fn bad_ranges_are_typed_errors() {
    let m = boot(Rodata::On);
    let cpu = m.cpu(0).unwrap();
    for (addr, n) in [(PAGE_OFFSET + 1, 1), (PAGE_END - PAGE_SIZE, 2), (0x1000, 1), (PAGE_OFFSET, u64::MAX)] {
        assert_eq!(
            set_memory_ro(&cpu, &MemblockTables(&m), addr, n, SplitMode::None).unwrap_err(),
            PageattrError::BadRange { addr, numpages: n }
        );
    }
    let beyond = VaLayout::VA48.phys_to_virt(PHYS_OFFSET + (64 << 20));
    assert_eq!(
        set_memory_ro(&cpu, &MemblockTables(&m), beyond - PAGE_SIZE, 2, SplitMode::Bbml2NoAbort).unwrap_err(),
        PageattrError::NotMapped { addr: beyond }
    );
    assert!(leaf(&m, beyond - PAGE_SIZE).desc.writable(), "nothing changed");
}

/// `set_memory_x` clears `PTE_PXN` (the linear map is mapped
/// `NO_EXEC_MAPPINGS`), `set_memory_nx` sets it again; `PTE_MAYBE_GP` is 0
/// (no BTI), so nothing else changes.
#[test]
fn nx_and_x_flip_pxn_only() {
    use mmlab_engine::arch::arm64::pgtable::desc::bits::PTE_PXN;
    let m = boot(Rodata::On);
    let cpu = m.cpu(0).unwrap();
    let va = PAGE_OFFSET + 3 * PAGE_SIZE;
    let before = leaf(&m, va).desc;
    assert!(before.has(PTE_PXN));
    let r = set_memory_x(&cpu, &MemblockTables(&m), va, 2, SplitMode::None).unwrap();
    assert_eq!(r.counts.leaves_changed, 2);
    assert_eq!(leaf(&m, va).desc.0, before.0 & !PTE_PXN);
    assert!(!leaf(&m, va + PAGE_SIZE).desc.has(PTE_PXN) && leaf(&m, va + 2 * PAGE_SIZE).desc.has(PTE_PXN));
    set_memory_nx(&cpu, &MemblockTables(&m), va, 2, SplitMode::None).unwrap();
    assert_eq!(leaf(&m, va).desc, before);
    assert_eq!(
        set_memory_x(&cpu, &MemblockTables(&m), va + 1, 1, SplitMode::None).unwrap_err(),
        PageattrError::BadRange { addr: va + 1, numpages: 1 }
    );
}
