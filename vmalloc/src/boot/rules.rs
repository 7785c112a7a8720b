//! The rules of the boot's vmalloc work: the areas whose number or size
//! depends on the machine, expanded at their markers (`r <rule>`) of the
//! base record (module docs of the parent).
//!
//! | rule | kernel | areas |
//! |---|---|---|
//! | `irq_stacks` | `init_IRQ()` → `init_irq_stacks()` (arch/arm64/kernel/irq.c) | one `IRQ_STACK_SIZE` (16 KiB) stack per possible CPU, aligned to `THREAD_ALIGN`, caller `start_kernel` (inlined) |
//! | `idle_threads` | `idle_threads_init()` → `fork_idle()` (kernel/smpboot.c) | a task stack per CPU after the boot CPU |
//! | `percpu_kthreads` | `smpboot_create_threads()` (cpuhp/N, migration/N, ksoftirqd/N), `workqueue_prepare_cpu()` (kworker/N:0, kworker/N:0H) | 5 task stacks per CPU after the boot CPU, forked by kthreadd on the boot CPU |
//! | `percpu_kworker` | `worker_thread()` → `manage_workers()`: a per-CPU pool's second worker once the first runs work | 1 task stack per CPU after the boot CPU, on that CPU |
//! | `dma_pools` | `dma_atomic_pool_init()` (kernel/dma/pool.c): a pool per zone with managed pages (Normal: `GFP_KERNEL`, DMA, DMA32), each `atomic_pool_expand()` | `cma_alloc()` of 128 KiB per GiB of `totalram_pages()` (at least 128 KiB, at most `MAX_PAGE_ORDER`, rounded to an order) when CMA lies in the zone, else `alloc_pages()`; `dma_common_contiguous_remap()` of it; `gen_pool_add_owner()`'s chunk (`vzalloc`, 1 page) |
//! | `pcpu_chunk` | `pcpu_balance_workfn()` → `pcpu_create_chunk()` (mm/percpu-vm.c) | `pcpu_mem_zalloc()` of the chunk's `alloc_map`, `bound_map` and, with memcg, `obj_exts` (2, 2, 72 pages for the 147,456-byte unit); `pcpu_get_vm_areas()` of CPUs × unit; 3 pages per unit populated (the peers' `pcpu_populate_chunk`) |
//! | `pci_iospace` | `pci_host_common_probe()` → `devm_of_pci_bridge_init()` → `devm_pci_remap_iospace()` → `pci_remap_iospace()` (drivers/pci/) | no area: the virt machine's PCIe I/O port window (`VIRT_PCIE_PIO`, 64 KiB at 0x3eff0000) mapped at `PCI_IO_START` with device memory, one contiguous PTE run (a PTE table) |
//! | `acomp_streams` | `crypto_acomp_alloc_streams()`, `acomp_stream_workfn()` (crypto/acompress.c) → `lz4_alloc_ctx()` | the self-test's stream, and one more CPU's when there is one (the peers: 1 at 1 CPU, 1-2 at 2 and 4) |

use super::{KERNEL_CLONE, Replay, THREAD_ALIGN, THREAD_SIZE, VmallocBootRule, note_outside};
use crate::percpu::PCPU_UNIT_SIZE;
use mmlab_engine::mm::gfp::Gfp;
use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;
use mmlab_engine::mm::{MAX_PAGE_ORDER, ZoneType};
use mmlab_engine::{PAGE_SHIFT, PAGE_SIZE, Pfn};

/// QEMU virt's `VIRT_PCIE_PIO`: the PCIe host bridge's I/O port window.
pub const VIRT_PCIE_PIO: (u64, u64) = (0x3eff_0000, 0x1_0000);
/// `IRQ_STACK_SIZE` (`THREAD_SIZE`).
pub const IRQ_STACK_SIZE: u64 = THREAD_SIZE;
/// Task stacks each CPU after the boot CPU adds when it comes up.
pub const PERCPU_KTHREADS: usize = 5;
/// Pages populated per unit of the boot's second percpu chunk.
pub const PCPU_BOOT_POPULATED_PAGES: u64 = 3;
/// `LZ4_MEM_COMPRESS` (16 KiB of hash table and the stream state).
pub const LZ4_MEM_COMPRESS: u64 = (1 << 14) + 32;
/// `PCPU_MIN_ALLOC_SIZE`: a bitmap bit per 4 bytes.
const PCPU_MIN_ALLOC_SIZE: u64 = 4;
/// `sizeof(struct pcpuobj_ext)` (one obj_cgroup pointer).
const PCPUOBJ_EXT_SIZE: u64 = 8;
/// `sizeof(struct gen_pool_chunk)` on arm64.
const GEN_POOL_CHUNK_SIZE: u64 = 64;

/// `dma_atomic_pool_init()`'s pool size for `totalram` pages: 128 KiB per
/// GiB, at least 128 KiB, at most `MAX_ORDER_NR_PAGES`; then the order
/// `atomic_pool_expand()` allocates.
pub fn atomic_pool_order(totalram: u64) -> u32 {
    let pages = (totalram / ((1 << 30) / (128 << 10))).min(1 << MAX_PAGE_ORDER);
    let size = (pages << PAGE_SHIFT).max(128 << 10);
    crate::boot::rules::get_order(size).min(MAX_PAGE_ORDER)
}

/// `get_order()`.
pub fn get_order(size: u64) -> u32 {
    size.max(1).div_ceil(PAGE_SIZE).next_power_of_two().trailing_zeros()
}

/// The pcpu_mem_zalloc() sizes of a chunk: `alloc_map`, `bound_map`,
/// `obj_exts` (the `md_blocks` array is under a page: kzalloc).
pub fn pcpu_chunk_metadata() -> [u64; 3] {
    let bits = PCPU_UNIT_SIZE / PCPU_MIN_ALLOC_SIZE;
    [bits.div_ceil(64) * 8, (bits + 1).div_ceil(64) * 8, bits * PCPUOBJ_EXT_SIZE]
}

/// Start a rule's report line; its steps count into it.
fn begin(r: &mut Replay<'_, '_, '_>, rule: &'static str, kernel: &'static str, formula: String) {
    r.rules.push(VmallocBootRule { rule, kernel, formula, areas: 0, pages: 0 });
    r.rule = Some(r.rules.len() - 1);
}

/// Expand rule `name` (module docs); an unknown rule is skipped.
pub(crate) fn expand(r: &mut Replay<'_, '_, '_>, name: &str) {
    let n = r.cpus.len();
    match name {
        "irq_stacks" => {
            begin(r, "irq_stacks", "init_IRQ() -> init_irq_stacks()", format!("{n} CPUs x {IRQ_STACK_SIZE} bytes"));
            for _ in 0..n {
                r.vmalloc(
                    0,
                    IRQ_STACK_SIZE,
                    THREAD_ALIGN,
                    Gfp::GFP_KERNEL_ACCOUNT | Gfp::__GFP_ZERO,
                    "start_kernel+0x6e8/0x8e0",
                );
            }
        }
        "idle_threads" => {
            begin(
                r,
                "idle_threads",
                "idle_threads_init() -> fork_idle()",
                format!("{} CPUs after the boot CPU", n - 1),
            );
            for c in 1..n {
                r.fork(0, (1, c), "fork_idle+0x9c/0x1a8");
            }
        }
        "percpu_kthreads" => {
            begin(
                r,
                "percpu_kthreads",
                "smpboot_create_threads(), workqueue_prepare_cpu()",
                format!("{} CPUs after the boot CPU x {PERCPU_KTHREADS} kthreads", n - 1),
            );
            for c in 1..n {
                for k in 0..PERCPU_KTHREADS {
                    r.fork(0, (2, c * PERCPU_KTHREADS + k), KERNEL_CLONE);
                }
            }
        }
        "percpu_kworker" => {
            begin(
                r,
                "percpu_kworker",
                "manage_workers() -> create_worker()",
                format!("{} CPUs after the boot CPU", n - 1),
            );
            for c in 1..n {
                r.fork(c, (3, c), KERNEL_CLONE);
            }
        }
        "pci_iospace" => {
            let (phys, size) = VIRT_PCIE_PIO;
            begin(
                r,
                "pci_iospace",
                "devm_pci_remap_iospace() -> pci_remap_iospace()",
                format!("{size} bytes at port 0"),
            );
            // The window is fixed and mapped once: a failure here is a bug
            // the boot's counters show (`failed`), as a failed vmalloc is.
            if r.vm.pci_remap_iospace(r.cpu(0), 0, size, phys).is_err() {
                r.work.failed += 1;
            }
        }
        "dma_pools" => dma_pools(r),
        "pcpu_chunk" => pcpu_chunk(r),
        "acomp_streams" => {
            let streams = if n > 1 { 2 } else { 1 };
            begin(r, "acomp_streams", "crypto_acomp_alloc_streams() -> lz4_alloc_ctx()", format!("{streams} streams"));
            for c in 0..streams {
                r.vmalloc(c, LZ4_MEM_COMPRESS, 1, Gfp::GFP_KERNEL, "lz4_alloc_ctx+0x1c/0x40");
            }
        }
        _ => {}
    }
    r.rule = None;
}

/// `dma_atomic_pool_init()` (module docs).
fn dma_pools(r: &mut Replay<'_, '_, '_>) {
    let pa = r.vm.pa;
    let order = atomic_pool_order(pa.managed_pages());
    let managed = |zt: ZoneType| (zt as usize) < NR_ZONE_TYPES && pa.zone_of(zt).managed_pages() > 0;
    let cma = pa.machine().cma_area();
    // cma_in_zone(): the area must end below the zone's limit for
    // GFP_DMA / GFP_DMA32; any zone will do for GFP_KERNEL.
    let cma_in = |zt: Option<ZoneType>| match (cma, zt) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((base, nr)), Some(zt)) => base.0 + nr <= pa.zone_of(zt).zone_end_pfn().0,
    };
    let pools: Vec<(Option<ZoneType>, Gfp)> = [
        (ZoneType::Normal, None, Gfp::GFP_KERNEL),
        (ZoneType::Dma, Some(ZoneType::Dma), Gfp::GFP_KERNEL | Gfp::__GFP_DMA),
        (ZoneType::Dma32, Some(ZoneType::Dma32), Gfp::GFP_KERNEL | Gfp::__GFP_DMA32),
    ]
    .into_iter()
    .filter(|&(zt, ..)| managed(zt))
    .map(|(_, z, g)| (z, g))
    .collect();
    begin(
        r,
        "dma_pools",
        "dma_atomic_pool_init() -> atomic_pool_expand()",
        format!("{} pools x order {order} (128 KiB per GiB of totalram_pages)", pools.len()),
    );
    for (zone, gfp) in pools {
        let cpu = r.cpu(0);
        let count = 1u64 << order;
        let first = if cma_in(zone) { pa.cma_alloc(cpu, count, order).ok() } else { None };
        let first = first.or_else(|| {
            let p = pa.alloc_pages(cpu, gfp | Gfp::__GFP_NOWARN, order)?;
            pa.split_page(p, order).ok().map(|()| p)
        });
        let Some(first) = first else {
            r.work.failed += 1;
            continue;
        };
        note_outside(r, count, 0);
        match r.vm.dma_common_contiguous_remap(r.cpu(0), first, count, "dma_common_contiguous_remap+0x9c/0xd0") {
            Ok(_) => r.work.areas += 1,
            Err(_) => r.work.failed += 1,
        }
        if let Some(rule) = r.rule.and_then(|i| r.rules.get_mut(i)) {
            rule.areas += 1;
        }
        // gen_pool_add_owner(): the chunk with its bitmap, vzalloc'd.
        let nbytes = GEN_POOL_CHUNK_SIZE + count.div_ceil(64) * 8;
        r.vmalloc(0, nbytes, 1, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO, "gen_pool_add_owner+0x54/0x100");
    }
}

/// `pcpu_create_chunk()` and its first population (module docs).
fn pcpu_chunk(r: &mut Replay<'_, '_, '_>) {
    let n = r.cpus.len() as u64;
    begin(
        r,
        "pcpu_chunk",
        "pcpu_balance_workfn() -> pcpu_create_chunk(), pcpu_populate_chunk()",
        format!(
            "metadata {:?} bytes; {n} units x {PCPU_UNIT_SIZE} bytes; {PCPU_BOOT_POPULATED_PAGES} pages per unit",
            pcpu_chunk_metadata()
        ),
    );
    let gfp = Gfp::GFP_KERNEL | Gfp::__GFP_NORETRY | Gfp::__GFP_NOWARN | Gfp::__GFP_ZERO;
    for size in pcpu_chunk_metadata() {
        if size > PAGE_SIZE {
            r.vmalloc(0, size, 1, gfp, "pcpu_mem_zalloc+0x40/0x88");
        }
    }
    let Ok(base) = r.vm.pcpu_get_vm_areas(r.cpu(0), n * PCPU_UNIT_SIZE, PAGE_SIZE) else {
        r.work.failed += 1;
        return;
    };
    r.work.areas += 1;
    if let Some(rule) = r.rule.and_then(|i| r.rules.get_mut(i)) {
        rule.areas += 1;
    }
    let pa = r.vm.pa;
    for unit in 0..n {
        let pages: Vec<Pfn> = (0..PCPU_BOOT_POPULATED_PAGES)
            .filter_map(|_| pa.alloc_pages(r.cpu(0), Gfp::GFP_KERNEL | Gfp::__GFP_HIGHMEM | Gfp::__GFP_NOWARN, 0))
            .collect();
        note_outside(r, 0, pages.len() as u64);
        if pages.len() as u64 != PCPU_BOOT_POPULATED_PAGES
            || r.vm.pcpu_map_pages(r.cpu(0), base + unit * PCPU_UNIT_SIZE, &pages).is_err()
        {
            r.work.failed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool orders the peers used: 32, 128 and 512 pages.
    #[test]
    fn atomic_pool_sizes_of_the_peers() {
        assert_eq!(atomic_pool_order(245_491), 5);
        assert_eq!(atomic_pool_order(1_000_589), 7);
        assert_eq!(atomic_pool_order(4_086_326), 9);
        assert_eq!(atomic_pool_order(1000), 5);
    }

    /// 12288, 12288 and 299008 bytes with their guard pages.
    #[test]
    fn pcpu_chunk_metadata_of_the_147456_byte_unit() {
        assert_eq!(pcpu_chunk_metadata(), [4608, 4616, 294_912]);
    }
}
