//! What an allocation derives from its gfp mask (`prepare_alloc_pages`,
//! `gfp_migratetype`), before any zone is looked at.

use mmlab_buddy::AllocFlags;
use mmlab_engine::Gfp;
use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;
use mmlab_engine::mm::{Migratetype, ZoneType};

/// `ac->highest_zoneidx = gfp_zone(gfp)` (`prepare_alloc_pages`). A mask
/// the kernel's GFP_ZONE_TABLE rejects (a `VM_BUG_ON` there) is taken as
/// Normal's.
#[inline]
pub(crate) fn highest_zoneidx(gfp: Gfp) -> usize {
    mmlab_buddy::zones::gfp_zone(gfp).unwrap_or(mmlab_engine::mm::ZoneType::Normal) as usize
}

/// What `prepare_alloc_pages()` (`gfp_zone`, `first_zones_zonelist`) and
/// `alloc_flags_nofragment()` derive from the zone modifier bits of a gfp
/// mask. The zonelist is fixed at boot, so the allocator keeps one entry per
/// combination of the four bits (`GFP_ZONEMASK`) instead of recomputing it
/// on every allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ZonePrep {
    /// `ac->highest_zoneidx`.
    pub(crate) highest_zoneidx: u8,
    /// The index in the zonelist of the first zone not above it.
    pub(crate) first: u8,
    /// ALLOC_NOFRAGMENT or nothing, for the first attempt.
    pub(crate) nofragment: AllocFlags,
}

/// The [`ZonePrep`] of each value of the zone modifier bits, for the
/// zonelist `zonelist` and its `first_zone` table.
pub(crate) fn zone_prep_table(zonelist: &[ZoneType], first_zone: &[u8; NR_ZONE_TYPES]) -> [ZonePrep; 16] {
    std::array::from_fn(|bits| {
        let highest = highest_zoneidx(Gfp::from_bits_retain(bits as u32));
        let first = first_zone[highest];
        let preferred = zonelist.get(first as usize).copied();
        let nofragment = if mmlab_buddy::zones::alloc_nofragment(preferred) {
            AllocFlags::NOFRAGMENT
        } else {
            AllocFlags::default()
        };
        ZonePrep { highest_zoneidx: highest as u8, first, nofragment }
    })
}

/// `gfp_to_alloc_flags_cma()`: movable allocations may use CMA pageblocks.
#[inline]
pub(crate) fn gfp_to_alloc_flags_cma(gfp: Gfp, alloc_flags: AllocFlags) -> AllocFlags {
    if gfp_mt(gfp) == Migratetype::Movable { alloc_flags | AllocFlags::CMA } else { alloc_flags }
}

/// `gfp_migratetype()` as a type.
#[inline]
pub(crate) fn gfp_mt(gfp: Gfp) -> Migratetype {
    Migratetype::from_index(gfp.gfp_migratetype() as usize)
}
