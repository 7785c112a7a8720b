//! What `__rmqueue` reports about its fallbacks: the mode it found pages in
//! (`enum rmqueue_mode`) and the result of `find_suitable_fallback()`. Kept
//! apart from the code that takes blocks so that the zone's methods can name
//! them.

use mmlab_engine::mm::Migratetype;

/// `enum rmqueue_mode`: where `__rmqueue` found pages last, so that
/// `rmqueue_bulk` does not search again from the top.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RmqueueMode {
    /// `RMQUEUE_NORMAL`: the wanted migratetype's own lists.
    #[default]
    Normal,
    /// `RMQUEUE_CMA`: the CMA free lists (`__rmqueue_cma_fallback`).
    Cma,
    /// `RMQUEUE_CLAIM`: a whole block claimed from another type.
    Claim,
    /// `RMQUEUE_STEAL`: a block stolen from another type without relabelling.
    Steal,
}

/// Result of `find_suitable_fallback()`.
pub(super) enum Fallback {
    Found(Migratetype),
    NoBlock,
    TooLowToClaim,
}
