//! vm_map_ram's vmap blocks (mm/vmalloc.c `vb_alloc`, `vb_free`): 4 MiB
//! pieces of VA handed out bump-pointer style in power-of-two slots, each
//! slot marked in the block's `used_map` until `vm_unmap_ram` gives it
//! back; a block whose every page was given back goes lazy as a whole.
//! Split out of vmalloc.rs by job, as mm/ files are.

use bitvec::BitArr;
use mmlab_engine::PAGE_SIZE;
use std::collections::BTreeMap;
mod map_ram;

/// `VMAP_MAX_ALLOC`: vm_map_ram requests up to this many pages use vmap blocks.
pub const VMAP_MAX_ALLOC: usize = 64;
/// `VMAP_BBMAP_BITS`: pages per vmap block, min(1024, max(128, 128 GiB / 4 KiB
/// / roundup_pow_of_two(NR_CPUS) / 16)) = 1024 for NR_CPUS up to 2048.
pub const VMAP_BBMAP_BITS: u64 = 1024;
/// `VMAP_BLOCK_SIZE`: 4 MiB.
pub const VMAP_BLOCK_SIZE: u64 = VMAP_BBMAP_BITS * PAGE_SIZE;

/// `struct vmap_block`: a 4 MiB piece of VA handed out bump-pointer style.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VmapBlock {
    pub(crate) va_start: u64,
    /// Pages not yet handed out.
    pub(crate) free: u64,
    /// Pages handed out and given back.
    dirty: u64,
    /// The CPU whose free list holds the block.
    cpu: usize,
    /// `vb->used_map`: a bit per page handed out and not yet given back.
    used_map: BitArr!(for VMAP_BBMAP_BITS as usize, in u64),
    /// Instrumented (page_owner-style, not in the kernel's struct): the
    /// order and page count of each live allocation by its first page, so
    /// that a `vm_unmap_ram` with a wrong address or count is refused
    /// instead of corrupting the block (the kernel's `vb_free` would BUG or
    /// silently clear someone else's bits; it sees only the order).
    allocs: BTreeMap<u64, VbAlloc>,
}

impl VmapBlock {
    /// Pages handed out so far (the bump pointer).
    fn handed_out(&self) -> u64 {
        VMAP_BBMAP_BITS - self.free
    }
}

/// One live `vm_map_ram` allocation of a vmap block, by its first page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VbAlloc {
    /// The slot's order: `get_order(count pages)`, the bits it holds in
    /// `used_map`.
    order: u32,
    /// The page count the mapping was made with, which `vm_unmap_ram`
    /// must give again.
    count: u64,
}
