//! mmlab's machine: the pieces of an arm64 Linux system that the
//! memory-management code stands on.
//!
//! # Layers
//!
//! The modules are grouped as the kernel's tree is, so that a kernel
//! developer finds `flush_tlb_kernel_range` where arm64 keeps it
//! (`arch/arm64/include/asm/tlbflush.h` → [`arch::arm64::tlb::flush`]).
//! They form layers, and every `use` points down (a test,
//! `tests/tests/module_graph.rs`, checks that the module graph of every
//! crate has no cycle and that the engine's layers hold):
//!
//! ```text
//!  machine        Machine: the composition root; builds everything at boot
//!    |            (machine/boot.rs) and hands out CPU handles
//!  mm             memmap, page, list, zones, banks, boot state,
//!    |            sparse_vmemmap, vmemmap, mm_init
//!  kernel         cpu (the CPU handle), rcu, lockstat, sysctl, params
//!    |
//!  arch::arm64    cpu (the arch half of a CPU: barriers, TLB, lazy MMU,
//!    |            system features), barrier, pgtable, tlb, cost, fixmap,
//!    |            mmu (map_mem), kimage, pageattr, memory (the VA layout)
//!  trace          tracepoints and their clock
//!    |
//!  mm headers     mm::mmzone, mm::gfp, mm::vmstat, mm::memblock: leaves that
//!    |            every layer includes, as every kernel file includes
//!    |            gfp_types.h and vm_event_item.h (count_vm_event() is
//!    |            called from arch code too; boot's arch code takes its
//!    |            pages from memblock)
//!  primitives     addr, arena, clock, counters, rng, sync
//! ```
//!
//! A lower layer never holds or calls the object above it:
//!
//! - A kernel [`Cpu`] handle contains its arch half,
//!   [`arch::arm64::cpu::ArchCpu`], and dereferences to it; arch functions
//!   take `&ArchCpu`, so a caller passes its `&Cpu`. Neither holds the
//!   machine: an `ArchCpu` holds the system's arm64 state, its own and the
//!   other CPUs' arch data (a broadcast TLBI reaches them all), the RAM and
//!   the trace clock; a `Cpu` adds its kernel data and the RCU state.
//! - Table code reaches memory through a small trait,
//!   [`arch::arm64::pgtable::TableMemory`] (as google/aarch64-paging's
//!   `Translation`), and gets table pages through
//!   [`arch::arm64::pgtable::PgtableAlloc`]; boot's arch code gets its pages
//!   and memory regions through [`arch::arm64::cpu::EarlyAlloc`]. The
//!   machine implements them.
//! - The TLB code reaches the memmap's cached vmemmap translations through
//!   [`arch::arm64::cpu::SecondaryTlb`], which the memmap implements.
//! - RCU knows CPUs by id ([`kernel::rcu::tree`]); its API takes the CPU
//!   handle ([`kernel::rcu`]).
//!
//! The crate root names the handful of types every caller uses
//! ([`Machine`], [`MachineConfig`], [`Cpu`], [`Gfp`], [`Pfn`],
//! [`PhysAddr`], [`VirtAddr`], [`PAGE_SIZE`], [`PAGE_SHIFT`],
//! [`MAX_PAGE_ORDER`], [`Migratetype`]); everything else is named by its
//! module's path, and only there (CHANGELOG.md records what moved).
//!
//! # Fidelity
//!
//! | module     | what it emulates                                         | fidelity      |
//! |------------|----------------------------------------------------------|---------------|
//! | `arena`    | physical RAM (an anonymous `MAP_NORESERVE` mapping)       | faithful      |
//! | `memblock` | the boot allocator                                       | faithful regions, merging and placement; one node, arrays grow without doubling, no memory contents |
//! | `page`     | `struct page`                                             | faithful layout, instrumented state word |
//! | `list`     | `struct list_head` through struct pages                  | faithful shape |
//! | `mm_init`  | boot: memmap init, reservations                           | simplified (one node, one zone) |
//! | `cpu`      | CPUs as handles; per-cpu data (kernel and arm64 halves)   | faithful in ownership |
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
//! | `sync`     | spinlock and the loom facade                              | faithful shape (`spinlock_t`) |
//! | `lockstat` | the zone lock's lock_stat accounting                      | instrumented |
//! | `rcu`      | RCU: grace periods, quiescent states, call_rcu, rcu_barrier | faithful gp_seq/QS rules, one node; GP latency modelled |
//!
//! All of mmlab's `unsafe` lives in this crate (arena views, the memmap
//! pointer, inline assembly), each block with its reasoning.
//!
//! # Example
//!
//! Boot a small machine, map one page of RAM into the kernel's tables, and
//! walk them:
//!
//! ```
//! use mmlab_engine::arch::arm64::memory::VMALLOC_START;
//! use mmlab_engine::arch::arm64::pgtable::{self, MapFlags, desc, mmu};
//! use mmlab_engine::machine::MemblockTables;
//! use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE};
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
//! let flush = pgtable::map_range(&cpu, &kernel, &MemblockTables(&m), va, pa.0, PAGE_SIZE, prot, flags)?;
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
pub mod sync;
pub mod trace;

pub use addr::{PAGE_SHIFT, PAGE_SIZE, Pfn, PhysAddr, VirtAddr};
pub use kernel::cpu::Cpu;
pub use machine::{Machine, MachineConfig};
pub use mm::gfp::Gfp;
pub use mm::{MAX_PAGE_ORDER, Migratetype};
