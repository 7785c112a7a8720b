//! arm64: what the kernel keeps under `arch/arm64/` (its `include/asm/`
//! headers and `mm/`), plus the cost model of the effects userspace cannot
//! execute on it.
//!
//! - [`barrier`]: `dmb`/`dsb`/`isb` (`asm/barrier.h`) and their backends.
//! - [`memory`]: the kernel virtual-address layout (`asm/memory.h`).
//! - [`pgtable`]: descriptors and table operations (`asm/pgtable*.h`,
//!   `mm/mmu.c`).
//! - [`tlb`]: TLBI encoding, the per-CPU TLB model and the flush API
//!   (`asm/tlbflush.h`).
//! - [`cpu`]: the arm64 half of a CPU: its barrier counters, TLB and
//!   lazy-MMU state, and the system-wide features it consults.
//! - [`cost`]: modelled costs of TLBIs, their completion and grace periods.
//! - [`fixmap`]: the fixmap slots and their TLB maintenance
//!   (`asm/fixmap.h`, `mm/fixmap.c`).
//! - [`kimage`]: the kernel image in RAM and its carve-out from the
//!   linear map (`vmlinux.lds.S`, `arm64_memblock_init()`).
//! - [`pageattr`]: `set_memory_ro/rw` on the linear map, with 6.18's
//!   block splitting (`mm/pageattr.c`, `split_kernel_leaf_mapping()`).
//! - [`mmu`]: the linear map built at boot, `map_mem()` and its 2024
//!   variants (`mm/mmu.c`); opt-in with `arm64.linear_map=1`.

pub mod barrier;
pub mod cost;
pub mod cpu;
pub mod fixmap;
pub mod kimage;
pub mod memory;
pub mod mmu;
pub mod pageattr;
pub mod pgtable;
pub mod tlb;
