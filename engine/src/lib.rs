//! mmlab's machine: the pieces of an arm64 Linux system that the
//! memory-management code stands on.
//!
//! # Module map
//!
//! The modules are grouped as the kernel's tree is, so that a kernel
//! developer finds `flush_tlb_kernel_range` under the path where arm64 keeps
//! it (`arch/arm64/include/asm/tlbflush.h` → [`arch::arm64::tlb::flush`]).
//!
//! ```text
//! arch/arm64/                     arch/arm64/
//!   barrier      dmb/dsb/isb and their backends          include/asm/barrier.h
//!   memory       the kernel VA layout                    include/asm/memory.h
//!   pgtable/     descriptors, entry writes, BBM checks   include/asm/pgtable*.h
//!     desc         the descriptor format                 include/asm/pgtable-hwdef.h
//!     map          map_range / unmap_range               mm/mmu.c, mm/vmalloc.c
//!     walk         walks, leaves, table statistics       (the MMU's walker)
//!     mmu          memory access through the TLB model   (the MMU)
//!   tlb/         TLB maintenance                         include/asm/tlbflush.h
//!     tlbi         TLBI encoding and counters
//!     model        per-CPU TLB model, soft-MMU cache
//!     flush        tlbi(), flush_tlb_*(), TlbFlush, the secondary-TLB hook
//!   cost         modelled costs of TLBIs and grace periods (mmlab's model)
//!   fixmap       FIX_PTE/PMD/PUD/PGD, set/clear_fixmap     include/asm/fixmap.h, mm/fixmap.c
//!   mmu          map_mem(): the linear map at boot       mm/mmu.c (opt-in: arm64.linear_map=1)
//!   kimage       the kernel image in RAM, its carve-out  vmlinux.lds.S, arm64_memblock_init()
//!   pageattr     set_memory_ro/rw, block splitting       mm/pageattr.c, split_kernel_leaf_mapping()
//! mm/                             mm/, include/linux/
//!   mmzone       orders, migratetypes, zones             include/linux/mmzone.h
//!   memblock     the boot allocator                      mm/memblock.c
//!   page         struct page                             include/linux/mm_types.h
//!   memmap       the memmap: present sections, deferred struct page init   mm/mm_init.c, mm/sparse.c
//!   banks        RAM banks (a DT memory node), their checks   drivers/of/fdt.c, arm64_memblock_init()
//!   list         list_head through struct pages          include/linux/list.h
//!   gfp          GFP flags                               include/linux/gfp_types.h
//!   vmstat       event counters                          mm/vmstat.c
//!   mm_init      boot: Machine::boot, memmap init        mm/mm_init.c
//!   sparse_vmemmap  vmemmap population at boot           mm/sparse-vmemmap.c
//!   vmemmap      the memmap's view of the vmemmap at run time
//! kernel/                         kernel/
//!   cpu          CPU handles and per-cpu data            kernel/cpu.c, percpu.h
//!   rcu          grace periods, call_rcu, rcu_barrier    kernel/rcu/tree.c
//!   sync         locks with lock_stat; the loom facade   kernel/locking/
//! trace          tracepoints: kmem, vmalloc, rcu, mmlab_* include/trace/events/{kmem,vmalloc,rcu}.h
//! machine        the Machine value and its accessors     (no kernel counterpart)
//! addr, arena, clock, counters, rng                      (the emulator's own)
//! ```
//!
//! Five top-level modules have no place in the kernel's tree and stay at the
//! top, as the emulator's own: [`addr`] (physical and virtual address and
//! frame types that every layer uses), [`arena`] (the host mapping that is
//! the emulated RAM), [`clock`] (the host cycle counter for lock timing),
//! [`counters`] (the one mechanism behind every per-CPU stat family and
//! every crate's counter snapshot) and [`rng`] (the deterministic generator
//! of workloads). [`machine`] holds the
//! [`Machine`], which gathers what the kernel keeps in globals; building it
//! is boot, in [`mm::mm_init`].
//!
//! Lower layers do not call up into higher ones: where a lower layer must
//! reach state a higher one owns, a hook is registered at boot (the TLB code
//! reaches the struct-page accessor's cached vmemmap translations through
//! [`tlb::SecondaryTlbHook`]) or passed in by the caller (the table code
//! gets table pages through [`pgtable::PgtableAlloc`]).
//!
//! # Fidelity
//!
//! | module     | what it emulates                                         | fidelity      |
//! |------------|----------------------------------------------------------|---------------|
//! | `arena`    | physical RAM (an anonymous `MAP_NORESERVE` mapping)       | faithful      |
//! | `memblock` | the boot allocator                                       | faithful      |
//! | `page`     | `struct page` and the memmap                              | faithful layout, instrumented state word |
//! | `list`     | `struct list_head` through struct pages                  | faithful shape |
//! | `mm_init`  | boot: memmap init, reservations                           | simplified (one node, one zone) |
//! | `cpu`      | CPUs as handles; per-cpu data                             | faithful in ownership |
//! | `barrier`  | dmb/dsb/isb                                              | faithful on aarch64 (native), modelled or counted elsewhere |
//! | `pgtable`  | arm64 descriptors, table writes with barrier rules and lazy-MMU batching, BBM checks, walks, MMU access | faithful formats, barriers and BBM; walk caches not modelled |
//! | `vmemmap`  | the memmap mapped by the kernel's tables                  | faithful mapping; the accessor's cache is instrumented |
//! | `tlb`      | TLBI, per-CPU TLB model and soft-MMU cache, tlbflush.h    | faithful ops and sequences; TLB contents simplified; TLBI cost modelled |
//! | `cost`     | cost profiles for effects userspace cannot execute        | modelled (sources in the module) |
//! | `fixmap`   | fixmap slots and their TLB maintenance (v6.9)             | faithful slots, PTEs, barriers, TLBIs; only the page-table slots' `bm_pte` emulated |
//! | `mmu`      | `map_mem()` of v6.9-rc1, the 2024 series' three v1 patches, and 6.10 as merged | faithful walk, allocation/fixmap/TLBI order, kernel-image carve-out; no KFENCE |
//! | `kimage`   | the kernel image's place in RAM and its linear alias       | faithful to Debian 7.2 on QEMU virt; `map_kernel()` with final permissions at once |
//! | `pageattr` | `set_memory_ro/rw` with 6.18's block splitting (BBML2) or break-before-make | faithful boundary walk and leaves; any linear-map range accepted |
//! | `memmap`   | the memmap: present sections, deferred struct page init    | faithful contents; written at first touch (simplified timing) |
//! | `banks`    | RAM banks and the checks on them                           | faithful banks; refuses what the kernel would trim |
//! | `vmstat`   | event counters                                           | instrumented |
//! | `trace`    | tracepoints of every layer (the harness prints them)     | faithful (kernel events); instrumented (mmlab_*) |
//! | `sync`     | locks (zone lock with lock_stat)                          | instrumented |
//! | `rcu`      | RCU: grace periods, quiescent states, call_rcu, rcu_barrier | faithful gp_seq/QS rules, one node; GP latency modelled |
//!
//! All of mmlab's `unsafe` lives in this crate (arena views, the memmap
//! pointer, inline assembly), each block with its reasoning.
//!
//! # Stable API
//!
//! The paths the other crates use are those from before the regrouping,
//! kept by the re-exports at the top of this crate: `mmlab_engine::arch::arm64::tlb`,
//! `::pgtable` (with `pgtable::vmemmap`), `::barrier`, `::cost`, `::layout`,
//! `::cpu`, `::rcu`, `::sync`, `::gfp`, `::list`, `::memblock`, `::page`,
//! `::vmstat`, `::mm`, and the types re-exported at the root ([`Machine`],
//! [`MachineConfig`], [`Cpu`], [`Gfp`], [`Pfn`], [`PhysAddr`], ...). They are
//! the stable API: code outside the engine names these, not the
//! `arch`/`kernel`/`mm` paths, which may move as the tree grows.
//!
//! # Example
//!
//! Boot a small machine, map one page of RAM into the kernel's tables, and
//! walk them:
//!
//! ```
//! use mmlab_engine::arch::arm64::pgtable::{self, MapFlags, MemblockTables, desc};
//! use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE, arch::arm64::memory::VMALLOC_START, arch::arm64::pgtable::mmu};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let m = Machine::boot(MachineConfig::with("64M", 1)?)?;
//! let cpu = m.cpu(0)?;
//! let kernel = m.kernel_as();
//!
//! // A page of RAM from the boot allocator, mapped at the start of vmalloc
//! // space with tables from memblock (as before the page allocator runs).
//! let pa = m.memblock().alloc(PAGE_SIZE, PAGE_SIZE, "example")?;
//! let va = VMALLOC_START;
//! let (prot, flags) = (desc::PAGE_KERNEL, MapFlags::default());
//! let flush = pgtable::map_range(&cpu, &kernel, &MemblockTables, va, pa.0, PAGE_SIZE, prot, flags)?;
//! flush.flush(&cpu); // nothing was live: no TLBI is issued
//!
//! // The walk goes pgd -> pud -> pmd -> pte and ends at a 4 KiB leaf.
//! let walk = pgtable::walk(&m, &kernel, va + 8);
//! let leaf = walk.leaf.expect("mapped");
//! assert_eq!(leaf.pa.0, pa.0 + 8);
//! assert_eq!(walk.steps.len(), 4);
//!
//! // A store through the MMU lands in that page of RAM.
//! mmu::write_u64(&cpu, &kernel, va, 0x5a5a)?;
//! assert_eq!(mmu::read_u64(&cpu, &kernel, va)?, 0x5a5a);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod arch;
pub mod kernel;
pub mod mm;

pub mod addr;
pub mod arena;
pub mod clock;
pub mod counters;
pub mod machine;
pub mod rng;
pub mod trace;

pub use addr::{PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr, VirtAddr};
pub use kernel::cpu::Cpu;
pub use machine::{Machine, MachineConfig};
pub use mm::gfp::Gfp;
pub use mm::{MAX_PAGE_ORDER, Migratetype};
