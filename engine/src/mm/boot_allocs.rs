//! The boot's own memblock allocations between `paging_init()` and
//! `mem_init()`, as Debian's arm64 7.2 kernel makes them on QEMU's `virt`
//! machine (`boot.state=real`): the unflattened device tree, `NODE_DATA`, sparse's
//! section roots and usemap, the vmemmap's tables, the saved command line,
//! the first percpu chunk, and the dentry and inode hash tables.
//!
//! Every size and alignment below was read from `memblock=debug` boots of
//! that kernel with `earlycon` (so that nothing before the console is
//! lost) at 1 GiB / 1 CPU, 4 GiB / 2 CPUs and 16 GiB / 4 CPUs; the ones
//! that change with the machine follow the rule each doc comment names.
//! They are placed top-down in the kernel's order, so that the small ones
//! share pages as the kernel's do: the page count they leave reserved is
//! what `Memory: ... reserved` and MemTotal see.
//!
//! | piece | fidelity |
//! |---|---|
//! | sizes, alignments and order | faithful to that kernel and machine (the three boots) |
//! | callers the debug output names (`sparse_index_alloc`, `pcpu_fc_alloc`, `alloc_large_system_hash`, ...) | faithful |
//! | callers it prints only as `__memblock_alloc_or_panic` | named from the kernel source by size and place in the sequence; the two 64-byte ones and the 1,032/1,024/256-byte ones are not identified (simplified: their sizes are the observed ones on every machine) |

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::mm::boot_state::BootReservation;
use crate::mm::memblock::{Memblock, MemblockError};

/// `SMP_CACHE_BYTES` on arm64: the alignment of `memblock_alloc()`.
const SMP_CACHE_BYTES: u64 = 64;
/// The unflattened device tree of the virt machine with one CPU, bytes
/// (44,492; 45,948 with two CPUs, 48,636 with four: the second CPU node
/// adds 1,456 bytes, each further one 1,344).
const UNFLATTENED_DT_1CPU: u64 = 44_492;
/// `sizeof(pg_data_t)` of Debian's 7.2 build (`alloc_node_data()`).
const PG_DATA_SIZE: u64 = 14_336;
/// `sizeof(struct mem_section_usage)` plus one section's pageblock flags:
/// the usemap bytes per present section (2,816 for 32 sections).
pub const USEMAP_PER_SECTION: u64 = 88;
/// The first percpu chunk's unit: 36 pages per CPU ("percpu: Embedded 36
/// pages/cpu").
const PCPU_UNIT_PAGES: u64 = 36;
/// `ADAPT_SCALE_NPAGES`: hash tables scale up once past 64 GiB.
const ADAPT_SCALE_NPAGES: u64 = (64 << 30) / PAGE_SIZE;

fn alloc(
    mb: &mut Memblock,
    out: &mut Vec<BootReservation>,
    size: u64,
    align: u64,
    name: &'static str,
    kernel: &'static str,
    fidelity: &'static str,
) -> Result<PhysAddr, MemblockError> {
    let pa = mb.alloc(size, align, name)?;
    out.push(BootReservation { name, base: pa.0, size, kernel, fidelity, freed_at_end_of_boot: 0 });
    Ok(pa)
}

/// One of `bootmem_init()`'s two 64-byte allocations (callers not
/// identified: `memblock=debug` prints them as `__memblock_alloc_or_panic`).
fn bootmem_init_64(mb: &mut Memblock, out: &mut Vec<BootReservation>) -> Result<PhysAddr, MemblockError> {
    alloc(
        mb,
        out,
        64,
        SMP_CACHE_BYTES,
        "bootmem_init",
        "bootmem_init(): 64 bytes",
        "simplified (caller not identified)",
    )
}

/// `setup_arch()` → `unflatten_device_tree()` (its size by CPU count:
/// measured at 1, 2 and 4 CPUs, interpolated between and beyond), then
/// `bootmem_init()` → `arm64_numa_init()` → `alloc_node_data()`
/// (`NODE_DATA(0)`, "NUMA: Faking a node") and its first unidentified
/// 64-byte allocation.
///
/// # Errors
///
/// [`MemblockError::NoSpace`] (the kernel panics).
pub fn setup_arch_early(mb: &mut Memblock, nr_cpus: u64, out: &mut Vec<BootReservation>) -> Result<(), MemblockError> {
    let dt = UNFLATTENED_DT_1CPU + if nr_cpus >= 2 { 1_456 + 1_344 * (nr_cpus - 2) } else { 0 };
    alloc(mb, out, dt, 8, "unflatten_device_tree", "setup_arch() -> unflatten_device_tree()", "faithful size")?;
    alloc(mb, out, PG_DATA_SIZE, SMP_CACHE_BYTES, "NODE_DATA", "arm64_numa_init() -> alloc_node_data()", "faithful")?;
    bootmem_init_64(mb, out)?;
    Ok(())
}

/// `SECTIONS_PER_ROOT`: a page of 32-byte `struct mem_section`s
/// (`CONFIG_PAGE_EXTENSION` makes it 32 bytes).
pub const SECTIONS_PER_ROOT: u64 = PAGE_SIZE / 32;

/// The `mem_section` root array's size, `sizeof(struct mem_section *) *
/// NR_SECTION_ROOTS`: `NR_MEM_SECTIONS` = 2^(`MAX_PHYSMEM_BITS` -
/// `SECTION_SIZE_BITS`), where `MAX_PHYSMEM_BITS` is `PHYS_MASK_SHIFT`, 48 or
/// (with LPA2) 52. 128 KiB, or 2 MiB with LPA2 (the real -cpu max boot's
/// `memblock=debug` log has both).
pub const fn mem_section_roots_bytes(va: crate::arch::arm64::memory::VaLayout) -> u64 {
    let nr_mem_sections = 1u64 << (va.phys_mask_shift() - 27);
    8 * nr_mem_sections.div_ceil(SECTIONS_PER_ROOT)
}

/// After `dma_contiguous_reserve()`: the second 64-byte allocation, then
/// `sparse_init()`: the `mem_section` root array (`roots_bytes`: 128 KiB,
/// 2 MiB with LPA2), one page per
/// root in use (`sparse_index_alloc()`), the usemap (`sparse_init_nid()`,
/// [`USEMAP_PER_SECTION`] bytes per present section; `usemap_bytes`), and
/// the vmemmap's PUD and PMD tables
/// (`vmemmap_populate()` → `memmap_alloc()`, one page each: a PMD table
/// maps 1 GiB of struct pages). Returns (the usemap, the table pages in
/// the order the vmemmap takes them).
///
/// # Errors
///
/// [`MemblockError::NoSpace`] (the kernel panics).
pub fn sparse_init_early(
    mb: &mut Memblock,
    roots_bytes: u64,
    nr_roots: u64,
    usemap_bytes: u64,
    memmap_bytes: u64,
    out: &mut Vec<BootReservation>,
) -> Result<(PhysAddr, Vec<PhysAddr>), MemblockError> {
    bootmem_init_64(mb, out)?;
    alloc(
        mb,
        out,
        roots_bytes,
        SMP_CACHE_BYTES,
        "mem_section",
        "sparse_init() -> memblocks_present(): mem_section roots",
        "faithful size",
    )?;
    for _ in 0..nr_roots {
        alloc(mb, out, PAGE_SIZE, SMP_CACHE_BYTES, "mem_section", "sparse_index_alloc()", "faithful")?;
    }
    let usemap =
        alloc(mb, out, usemap_bytes, SMP_CACHE_BYTES, "usemap", "sparse_init_nid(): the usemap", "faithful size")?;
    let nr_tables = 1 + memmap_bytes.div_ceil(1 << 30);
    let mut tables = Vec::new();
    for _ in 0..nr_tables {
        tables.push(alloc(
            mb,
            out,
            PAGE_SIZE,
            PAGE_SIZE,
            "pgtable",
            "vmemmap_populate() -> memmap_alloc()",
            "faithful",
        )?);
    }
    Ok((usemap, tables))
}

/// What `start_kernel()` takes from memblock after `setup_arch()`:
/// `setup_command_line()` (two copies of the command line), the first
/// percpu chunk (`pcpu_build_alloc_info()` and `pcpu_embed_first_chunk()`
/// pages, freed again at the end; `pcpu_fc_alloc()`: 36 pages per CPU;
/// `pcpu_setup_first_chunk()`'s arrays, four of them sized by the CPU
/// count), then `vfs_caches_init_early()`: the dentry and inode hash
/// tables ([`alloc_large_system_hash`]) sized from `nr_kernel_pages`, the
/// pages memblock had free when the zones were set up.
///
/// # Errors
///
/// [`MemblockError::NoSpace`] (the kernel panics).
pub fn start_kernel_early(
    mb: &mut Memblock,
    nr_cpus: u64,
    cmdline_len: u64,
    nr_kernel_pages: u64,
    out: &mut Vec<BootReservation>,
) -> Result<(), MemblockError> {
    const CMD: &str = "setup_command_line()";
    for _ in 0..2 {
        alloc(mb, out, cmdline_len + 1, SMP_CACHE_BYTES, "cmdline", CMD, "faithful (this machine's command line)")?;
    }
    const PCPU: &str = "setup_per_cpu_areas() -> pcpu_embed_first_chunk()";
    let info = alloc(mb, out, PAGE_SIZE, PAGE_SIZE, "pcpu", "pcpu_build_alloc_info()", "faithful")?;
    let areas = alloc(mb, out, PAGE_SIZE, SMP_CACHE_BYTES, "pcpu", PCPU, "faithful")?;
    alloc(mb, out, PCPU_UNIT_PAGES * PAGE_SIZE * nr_cpus, PAGE_SIZE, "pcpu", "pcpu_fc_alloc()", "faithful")?;
    let first_chunk = [8, 8, 4 * nr_cpus, 8 * nr_cpus, 304, 136, 384, 392, 96, 136, 1024, 1032, 256];
    for size in first_chunk {
        alloc(
            mb,
            out,
            size,
            SMP_CACHE_BYTES,
            "pcpu",
            "pcpu_setup_first_chunk()",
            "faithful sizes (callers: simplified)",
        )?;
    }
    // pcpu_free_alloc_info() and the areas array: memblock_free().
    mb.free(areas, PAGE_SIZE);
    mb.free(info, PAGE_SIZE);
    out.retain(|r| r.base != areas.0 && r.base != info.0);
    for (name, scale) in [("dentry hash", 13), ("inode hash", 14)] {
        let size = alloc_large_system_hash(8, scale, nr_kernel_pages, nr_kernel_pages);
        alloc(
            mb,
            out,
            size,
            SMP_CACHE_BYTES,
            name,
            "vfs_caches_init_early() -> alloc_large_system_hash()",
            "faithful",
        )?;
    }
    Ok(())
}

/// `KFENCE_METADATA_SIZE` of Debian's build: 255 objects' `struct
/// kfence_metadata`, page-aligned: 299,008 bytes (73 pages; `memblock=debug`).
const KFENCE_METADATA_SIZE: u64 = 299_008;

/// `mm_core_init()` → `kfence_alloc_pool_and_metadata()` with early KFENCE:
/// the objects' metadata from memblock (the pool itself was allocated and
/// mapped by arm64's `map_mem()`).
///
/// # Errors
///
/// [`MemblockError::NoSpace`] (the kernel prints an error and runs
/// without KFENCE; mmlab refuses the machine).
pub fn kfence_alloc_metadata(mb: &mut Memblock, out: &mut Vec<BootReservation>) -> Result<(), MemblockError> {
    alloc(mb, out, KFENCE_METADATA_SIZE, PAGE_SIZE, "kfence", "kfence_alloc_pool_and_metadata()", "faithful size")?;
    Ok(())
}

/// Mirrors mm/mm_init.c `alloc_large_system_hash()` for a table with no
/// size given on the command line and no limits: one bucket of
/// `bucketsize` bytes per `2^scale` bytes of `nr_kernel_pages` (rounded up
/// to a MiB, scaled up past 64 GiB), a power of two, at most 1/16 of
/// `nr_all_pages`. Returns the table's bytes.
pub fn alloc_large_system_hash(bucketsize: u64, mut scale: u32, nr_kernel_pages: u64, nr_all_pages: u64) -> u64 {
    let mut n = nr_kernel_pages.next_multiple_of((1 << 20) / PAGE_SIZE);
    let mut adapt = ADAPT_SCALE_NPAGES;
    while adapt < n {
        scale += 1;
        adapt <<= 2;
    }
    let shift = crate::addr::PAGE_SHIFT;
    n = if scale > shift { n >> (scale - shift) } else { n << (shift - scale) };
    if n * bucketsize < PAGE_SIZE {
        n = PAGE_SIZE / bucketsize;
    }
    n = n.next_power_of_two();
    let max = (((nr_all_pages * PAGE_SIZE) >> 4) / bucketsize).min(0x8000_0000);
    n = n.min(max);
    bucketsize << n.ilog2()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the peer boots printed ("Dentry cache hash table entries:
    /// 524288 (order: 10, 4194304 bytes, linear)" at 4 GiB, ...), from the
    /// free pages the rule sees: present pages less the memmap's.
    #[test]
    fn hash_tables_as_the_peer_kernel_sized_them() {
        for (gib, dentry, inode) in [(1u64, 1 << 20, 512 << 10), (4, 4 << 20, 2 << 20), (16, 16 << 20, 8 << 20)] {
            let pages = (gib << 30) / PAGE_SIZE;
            let free = pages - pages / 64 - 30_000;
            assert_eq!(alloc_large_system_hash(8, 13, free, free), dentry, "{gib}G");
            assert_eq!(alloc_large_system_hash(8, 14, free, free), inode, "{gib}G");
        }
    }
}
