//! The free-space allocator of the vmalloc range: the kernel's
//! `free_vmap_area_root` and `free_vmap_area_list` (mm/vmalloc.c).
//!
//! Every free stretch of kernel virtual address space in the managed range is
//! one node of a balanced binary search tree keyed by start address. Free
//! areas never overlap and never touch: when an area is given back it is
//! coalesced with the free neighbour that ends where it starts and with the one
//! that starts where it ends, so two nodes are always separated by at least
//! one busy page. Beside its own `[start, end)` each node caches
//! `subtree_max_size`, the size of the largest free area in the subtree rooted
//! at it, which is the kernel's `RB_DECLARE_CALLBACKS_MAX` augmentation. That
//! one number lets a search skip a whole subtree that cannot hold a request,
//! so finding the lowest suitable area costs a few root-to-leaf walks instead
//! of a scan of every fragment.
//!
//! An allocation (`__alloc_vmap_area`) first looks for the free area with the
//! lowest start address that can hold `size` bytes at an `align`-aligned
//! address not below `vstart` (`find_vmap_lowest_match`). The walk goes left
//! while the left subtree's cached maximum says a big-enough area lives there
//! and `vstart` lies below the current node; otherwise it tries the current
//! node itself, then its right subtree when that subtree's maximum is big
//! enough, and when both fail it climbs back towards the root, testing each
//! ancestor and the right subtree of ancestors it has not yet passed. For an
//! alignment above a page the walk prunes with `size + align - 1`, the worst
//! case an area needs so that *any* alignment offset still leaves room; that
//! keeps the walk short but means a small area whose start happens to be
//! aligned well enough is only found when it lies on the walk's path (see
//! "Divergence from a strict lowest fit" below). The chosen area is then cut
//! (`va_clip`) in one of four ways: the request takes all of it (FL_FIT: the
//! node is removed), its left end (LE_FIT: the start moves up), its right end
//! (RE_FIT: the end moves down), or its middle (NE_FIT: the node keeps the
//! right remainder and a new node is inserted for the left remainder). Each
//! cut refreshes `subtree_max_size` on the path to the root
//! (`augment_tree_propagate_from`). Freeing (`merge_or_add_vmap_area`) walks
//! down to the gap where the area belongs, refusing it if it overlaps a free
//! area (a double free: the kernel warns and drops it, here a typed error and
//! nothing changes), and merges with the next and/or previous free area.
//!
//! # Tree kind
//!
//! The kernel uses a red-black tree; this module uses an AVL tree stored in a
//! `Vec` arena addressed by `u32` indices, with parent links (the search climbs
//! towards the root as the kernel's does with `rb_parent`). The search never
//! looks at colours or heights: it depends only on the in-order sequence being
//! the address order and on every node's `subtree_max_size` being exact, and
//! rotations preserve the in-order sequence while this module recomputes the
//! cached maximum of the two nodes each rotation moves (the kernel's
//! `augment_rotate` callback). So an unadjusted search (page alignment)
//! returns exactly the area the kernel's would, and the tree shape only
//! changes how many nodes a walk touches; for the adjusted search the shape
//! can also matter, as the next section explains. AVL was chosen because it is the simpler balanced tree to write
//! with parent links, and its height bound (about 1.44 log2 n, against 2 log2 n
//! for red-black) keeps that walk count low. The address-ordered
//! `free_vmap_area_list` is kept too, as `prev`/`next` links in the nodes; it
//! gives the merge step its neighbours and drives iteration, and [`check`]
//! verifies it matches the tree's in-order traversal.
//!
//! # Divergence from a strict lowest fit
//!
//! The kernel promises the lowest-address fit only in the sense its own debug
//! check (`find_vmap_lowest_match_check`, which searches with the unadjusted
//! length) tests. With `align > PAGE_SIZE` the real allocation path prunes with
//! `size + align - 1`, so a free area of size in `[size, size + align - 1)`
//! whose start is suitably aligned is returned only if it is *tested on the
//! walk's path*; if it sits in a subtree whose cached maximum is below the
//! search length, the walk passes it by and returns a higher area (or nothing).
//! Which small areas lie on the path depends on the tree's shape, so the
//! result for such a request depends on the history of inserts and removals
//! and may differ between the kernel's red-black tree and this AVL tree. What
//! holds for both: the result fits; it is never above the lowest fitting area
//! of size at least `size + align - 1`; every fitting area below it is smaller
//! than that; and when the lowest fitting area is itself that large, the
//! result is exactly it. A consequence of the same heuristic plus the
//! kernel's order of checks (`va_alloc` applies `vend` only to the area the
//! search returned) is that a request can fail with [`VmapError::NoSpace`]
//! while a small aligned fit below `vend` exists. This module mirrors the
//! kernel here on purpose, because placement is what it emulates;
//! [`FreeVmapTree::find_vmap_lowest_match`] with `adjust_search_size = false`
//! gives the strict lowest fit. With `align <= PAGE_SIZE` (or a range exactly
//! `size` long) the search is unadjusted and the result is always the lowest
//! fitting area.
//!
//! [`check`]: FreeVmapTree::check

use std::fmt;

use mmlab_engine::PAGE_SIZE;
use mmlab_engine::arch::arm64::memory::VMALLOC_START;

mod check;

/// Index of "no node" in the arena (the kernel's NULL `rb_node`).
const NIL: u32 = u32::MAX;

/// Errors of the free-space allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmapError {
    /// Size zero, not a multiple of `PAGE_SIZE`, or so large that the area
    /// would wrap the address space (`alloc_vmap_area`'s `-EINVAL`).
    BadSize {
        /// The size asked for.
        size: u64,
    },
    /// Alignment not a power of two (`alloc_vmap_area`'s `-EINVAL`).
    BadAlign {
        /// The alignment asked for.
        align: u64,
    },
    /// An address that must be page aligned is not.
    Misaligned {
        /// The offending address.
        addr: u64,
    },
    /// An empty or inverted range: `vstart > vend` for an allocation, or
    /// `start >= end` for a new tree.
    BadRange {
        /// Range start.
        start: u64,
        /// Range end.
        end: u64,
    },
    /// No free area satisfies the request (`__alloc_vmap_area` returning
    /// `vend`).
    NoSpace {
        /// Requested size.
        size: u64,
        /// Effective alignment.
        align: u64,
    },
    /// An area being freed lies (partly) outside the range the tree manages.
    OutOfRange {
        /// Start of the area.
        start: u64,
        /// End of the area.
        end: u64,
    },
    /// An area being freed overlaps a free area: a double free
    /// (`find_va_links`' "vmalloc bug: ... overlaps with ..." warning).
    Overlap {
        /// Start of the area being freed.
        start: u64,
        /// End of the area being freed.
        end: u64,
        /// Start of the free area it overlaps.
        free_start: u64,
        /// End of the free area it overlaps.
        free_end: u64,
    },
}

impl fmt::Display for VmapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BadSize { size } => write!(f, "bad vmap area size {size:#x}"),
            Self::BadAlign { align } => write!(f, "vmap alignment {align:#x} is not a power of two"),
            Self::Misaligned { addr } => write!(f, "address {addr:#x} is not page aligned"),
            Self::BadRange { start, end } => write!(f, "bad address range {start:#x}-{end:#x}"),
            Self::NoSpace { size, align } => {
                write!(f, "no free vmap area of size {size:#x} with alignment {align:#x}")
            }
            Self::OutOfRange { start, end } => {
                write!(f, "area {start:#x}-{end:#x} is outside the managed vmalloc range")
            }
            Self::Overlap { start, end, free_start, free_end } => {
                write!(f, "vmalloc bug: {start:#x}-{end:#x} overlaps with free {free_start:#x}-{free_end:#x}")
            }
        }
    }
}

impl std::error::Error for VmapError {}

/// One free area, `[start, end)`: the address part of a free `vmap_area`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FreeArea {
    /// First byte of the area (`va_start`).
    pub start: u64,
    /// One past the last byte (`va_end`).
    pub end: u64,
}

impl FreeArea {
    /// `va_size`.
    pub fn size(&self) -> u64 {
        self.end - self.start
    }
}

/// How an allocation cuts the free area it was placed in (`enum fit_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitType {
    /// `FL_FIT_TYPE`: the request is the whole area; the node goes away.
    Full,
    /// `LE_FIT_TYPE`: the request is the left end; the start moves up.
    LeftEdge,
    /// `RE_FIT_TYPE`: the request is the right end; the end moves down.
    RightEdge,
    /// `NE_FIT_TYPE`: the request is in the middle; the area splits in two.
    NoEdge,
}

/// Counters of the search, for tests and benchmarks. All of them are
/// mmlab's own, instrumented: the kernel counts none of this (the
/// `vmalloc:alloc_vmap_area` tracepoint reports each allocation's result,
/// not the walk). Not a [`counter_snapshot!`](mmlab_engine::counter_snapshot)
/// type: `last_visits` and `max_visits` are gauges, which a delta would not
/// mean anything for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SearchStats {
    /// mmlab's own, instrumented: searches run (`find_vmap_lowest_match`
    /// calls).
    pub searches: u64,
    /// mmlab's own, instrumented: nodes visited over all searches.
    pub visits: u64,
    /// mmlab's own, instrumented: nodes visited by the most recent search.
    pub last_visits: u32,
    /// mmlab's own, instrumented: largest number of nodes any single search
    /// visited.
    pub max_visits: u32,
    /// mmlab's own, instrumented: allocations by `enum fit_type`
    /// (`FL_FIT_TYPE`, `LE_FIT_TYPE`, `RE_FIT_TYPE`, `NE_FIT_TYPE`).
    pub fits: [u64; 4],
    /// mmlab's own, instrumented: frees that merged with the next area
    /// (`__merge_or_add_vmap_area`).
    pub merged_next: u64,
    /// mmlab's own, instrumented: frees that merged with the previous area.
    pub merged_prev: u64,
    /// mmlab's own, instrumented: frees inserted as a new node.
    pub inserted: u64,
}

#[derive(Debug, Clone)]
struct Node {
    start: u64,
    end: u64,
    /// `subtree_max_size`.
    max: u64,
    height: u8,
    left: u32,
    right: u32,
    parent: u32,
    /// `free_vmap_area_list` links, address order.
    prev: u32,
    next: u32,
}

/// Where a new area would hang in the tree: under `parent`, on the left or
/// on the right (the kernel's `parent` plus `link`).
#[derive(Debug, Clone, Copy)]
struct Link {
    parent: u32,
    left: bool,
}

/// The free vmap area tree and list of one address range.
#[derive(Debug, Clone)]
pub struct FreeVmapTree {
    nodes: Vec<Node>,
    /// Arena slots of removed nodes, reused before the arena grows.
    spare: Vec<u32>,
    root: u32,
    head: u32,
    tail: u32,
    count: usize,
    free_bytes: u64,
    range_start: u64,
    range_end: u64,
    stats: SearchStats,
}

/// `ALIGN(x, align)` for a power-of-two `align`, `None` on wrap.
fn align_up(x: u64, align: u64) -> Option<u64> {
    Some(x.checked_add(align - 1)? & !(align - 1))
}

impl FreeVmapTree {
    /// A tree whose whole range `[start, end)` is one free area, as
    /// `vmap_init_free_space` leaves it when no early area is busy. Both ends
    /// must be page aligned and `start < end`.
    ///
    /// # Errors
    /// [`VmapError::Misaligned`] for an end that is not page aligned, [`VmapError::BadRange`] for
    /// `start >= end`.
    pub fn new(start: u64, end: u64) -> Result<Self, VmapError> {
        if start >= end {
            return Err(VmapError::BadRange { start, end });
        }
        for addr in [start, end] {
            if !addr.is_multiple_of(PAGE_SIZE) {
                return Err(VmapError::Misaligned { addr });
            }
        }
        let mut tree = Self {
            nodes: Vec::new(),
            spare: Vec::new(),
            root: NIL,
            head: NIL,
            tail: NIL,
            count: 0,
            free_bytes: 0,
            range_start: start,
            range_end: end,
            stats: SearchStats::default(),
        };
        let idx = tree.new_node(start, end);
        tree.link(idx, Link { parent: NIL, left: false });
        tree.free_bytes = end - start;
        Ok(tree)
    }

    /// The tree of the real arm64 vmalloc range,
    /// `[VMALLOC_START, vmalloc_end)`, all free (`VMALLOC_END` depends on the
    /// VA layout: [`VaLayout::vmalloc_end`](mmlab_engine::arch::arm64::memory::VaLayout::vmalloc_end)).
    pub fn vmalloc_range(vmalloc_end: u64) -> Self {
        let nodes = vec![Node {
            start: VMALLOC_START,
            end: vmalloc_end,
            max: vmalloc_end - VMALLOC_START,
            height: 1,
            left: NIL,
            right: NIL,
            parent: NIL,
            prev: NIL,
            next: NIL,
        }];
        Self {
            nodes,
            spare: Vec::new(),
            root: 0,
            head: 0,
            tail: 0,
            count: 1,
            free_bytes: vmalloc_end - VMALLOC_START,
            range_start: VMALLOC_START,
            range_end: vmalloc_end,
            stats: SearchStats::default(),
        }
    }

    /// The managed range `[start, end)`.
    pub fn range(&self) -> (u64, u64) {
        (self.range_start, self.range_end)
    }

    /// Number of free areas (nodes).
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no address in the range is free.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Total free bytes.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Size of the largest free area: the root's `subtree_max_size`, as
    /// `get_subtree_max_size(free_vmap_area_root.rb_node)`.
    pub fn largest_free(&self) -> u64 {
        self.max_of(self.root)
    }

    /// Height of the tree (0 when empty).
    pub fn height(&self) -> u32 {
        self.height_of(self.root)
    }

    /// Search and placement counters.
    pub fn stats(&self) -> SearchStats {
        self.stats
    }

    /// Zero the counters.
    pub fn reset_stats(&mut self) {
        self.stats = SearchStats::default();
    }

    /// Free areas in address order (`list_for_each_entry` over
    /// `free_vmap_area_list`).
    pub fn iter(&self) -> Iter<'_> {
        Iter { tree: self, cur: self.head }
    }

    /// The free area containing `addr`, if any: the descent of
    /// `__find_vmap_area`, run on the free tree.
    pub fn area_containing(&self, addr: u64) -> Option<FreeArea> {
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n as usize];
            if addr < node.start {
                n = node.left;
            } else if addr >= node.end {
                n = node.right;
            } else {
                return Some(FreeArea { start: node.start, end: node.end });
            }
        }
        None
    }

    /// Allocate `size` bytes at an `align`-aligned address in
    /// `[vstart, vend)`: `__alloc_vmap_area` (find, then `va_alloc`, which
    /// checks `vend` and cuts the area with `va_clip`), with the argument
    /// checks of `alloc_vmap_area`.
    ///
    /// `size` must be a non-zero multiple of `PAGE_SIZE` and `align` a power
    /// of two; an alignment below a page acts as `PAGE_SIZE` (free areas
    /// start on page boundaries, so the kernel's result is the same for
    /// page-aligned `vstart`, and this keeps the result page aligned
    /// whatever `vstart` is).
    ///
    /// # Errors
    /// [`VmapError::BadSize`], [`VmapError::BadAlign`], [`VmapError::BadRange`], or
    /// [`VmapError::NoSpace`] when no free area fits; the tree is unchanged.
    pub fn alloc(&mut self, size: u64, align: u64, vstart: u64, vend: u64) -> Result<u64, VmapError> {
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(VmapError::BadSize { size });
        }
        if !align.is_power_of_two() {
            return Err(VmapError::BadAlign { align });
        }
        if vstart > vend {
            return Err(VmapError::BadRange { start: vstart, end: vend });
        }
        let align = align.max(PAGE_SIZE);
        // No adjustment for page alignment (every area start already is) nor
        // for a range exactly `size` long, which the longer search length
        // could never match.
        let adjust = !(align <= PAGE_SIZE || vend - vstart == size);
        let no_space = VmapError::NoSpace { size, align };
        let (idx, visits) = self.lowest_match(size, align, vstart, adjust);
        self.record_search(visits);
        if idx == NIL {
            return Err(no_space);
        }
        // va_alloc: the search guaranteed the aligned start does not wrap.
        let node = &self.nodes[idx as usize];
        let nva_start = align_up(node.start.max(vstart), align).ok_or(no_space)?;
        match nva_start.checked_add(size) {
            Some(end) if end <= vend => {}
            _ => return Err(no_space),
        }
        self.va_clip(idx, nva_start, size).ok_or(no_space)?;
        Ok(nva_start)
    }

    /// Give `[start, start + size)` back: `merge_or_add_vmap_area_augment`.
    /// The area is merged with the free area ending at `start` and/or the one
    /// starting at `start + size`, or inserted as a new node. An area
    /// overlapping any free area is refused with [`VmapError::Overlap`] and
    /// the tree is left as it was.
    ///
    /// # Errors
    /// [`VmapError::BadSize`], [`VmapError::Misaligned`], [`VmapError::OutOfRange`] or
    /// [`VmapError::Overlap`]; the tree is unchanged.
    pub fn free(&mut self, start: u64, size: u64) -> Result<(), VmapError> {
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(VmapError::BadSize { size });
        }
        if !start.is_multiple_of(PAGE_SIZE) {
            return Err(VmapError::Misaligned { addr: start });
        }
        let end = start.checked_add(size).ok_or(VmapError::BadSize { size })?;
        if start < self.range_start || end > self.range_end {
            return Err(VmapError::OutOfRange { start, end });
        }
        self.merge_or_add(start, end).map(|_| ())
    }

    /// `find_vmap_lowest_match`: the free area with the lowest start that can
    /// hold `size` bytes at an `align`-aligned address not below `vstart`,
    /// pruning subtrees by `size + align - 1` when `adjust_search_size` (as
    /// [`alloc`](Self::alloc) does for `align > PAGE_SIZE`) and by `size`
    /// otherwise. See the module documentation for what the adjusted search
    /// can pass by. `align` must be a power of two (else `None`); values
    /// below a page act as `PAGE_SIZE`. Counts visits in [`stats`](Self::stats).
    pub fn find_vmap_lowest_match(
        &mut self,
        size: u64,
        align: u64,
        vstart: u64,
        adjust_search_size: bool,
    ) -> Option<FreeArea> {
        if !align.is_power_of_two() {
            return None;
        }
        let (idx, visits) = self.lowest_match(size, align.max(PAGE_SIZE), vstart, adjust_search_size);
        self.record_search(visits);
        (idx != NIL).then(|| {
            let n = &self.nodes[idx as usize];
            FreeArea { start: n.start, end: n.end }
        })
    }

    /// `classify_va_fit_type` of a request `[nva_start, nva_start + size)`
    /// against the free area containing `nva_start`; `None` (`NOTHING_FIT`)
    /// if no free area holds the whole request.
    pub fn classify_fit(&self, nva_start: u64, size: u64) -> Option<FitType> {
        let area = self.area_containing(nva_start)?;
        classify_va_fit_type(area, nva_start, size)
    }

    /// `is_within_this_va`: can area `idx` hold `size` bytes at an
    /// `align`-aligned address not below `vstart`?
    fn is_within_this_va(&self, idx: u32, size: u64, align: u64, vstart: u64) -> bool {
        let n = &self.nodes[idx as usize];
        match align_up(n.start.max(vstart), align).and_then(|a| a.checked_add(size)) {
            Some(end) => end <= n.end,
            None => false,
        }
    }

    /// The walk of `find_vmap_lowest_match`; returns the node (or `NIL`) and
    /// the number of nodes looked at.
    fn lowest_match(&self, size: u64, align: u64, mut vstart: u64, adjust: bool) -> (u32, u32) {
        let length = if adjust { size.saturating_add(align - 1) } else { size };
        let mut visits = 0u32;
        let mut node = self.root;
        while node != NIL {
            visits += 1;
            let n = &self.nodes[node as usize];
            if self.max_of(n.left) >= length && vstart < n.start {
                node = n.left;
                continue;
            }
            if self.is_within_this_va(node, size, align, vstart) {
                return (node, visits);
            }
            // Going right only pays if some area there is long enough.
            if self.max_of(n.right) >= length {
                node = n.right;
                continue;
            }
            // Climb to the first ancestor that fits, or whose right subtree
            // has not been searched and may; vstart moves past each searched
            // ancestor so the same right subtree is not entered twice.
            loop {
                node = self.nodes[node as usize].parent;
                if node == NIL {
                    return (NIL, visits);
                }
                visits += 1;
                if self.is_within_this_va(node, size, align, vstart) {
                    return (node, visits);
                }
                let p = &self.nodes[node as usize];
                if self.max_of(p.right) >= length && vstart <= p.start {
                    vstart = p.start + 1;
                    node = p.right;
                    break;
                }
            }
        }
        (NIL, visits)
    }

    fn record_search(&mut self, visits: u32) {
        self.stats.searches += 1;
        self.stats.visits += u64::from(visits);
        self.stats.last_visits = visits;
        self.stats.max_visits = self.stats.max_visits.max(visits);
    }

    // ---- clip and merge ----

    /// `va_clip`: carve `[nva_start, nva_start + size)` out of free area
    /// `idx`. `None` if the request is not inside the area (`NOTHING_FIT`).
    fn va_clip(&mut self, idx: u32, nva_start: u64, size: u64) -> Option<FitType> {
        let area = FreeArea { start: self.nodes[idx as usize].start, end: self.nodes[idx as usize].end };
        let fit = classify_va_fit_type(area, nva_start, size)?;
        match fit {
            FitType::Full => self.erase(idx),
            FitType::LeftEdge => {
                self.nodes[idx as usize].start += size;
                self.propagate(idx);
            }
            FitType::RightEdge => {
                self.nodes[idx as usize].end = nva_start;
                self.propagate(idx);
            }
            FitType::NoEdge => {
                // This node keeps the right remainder; the left remainder
                // becomes a new node (the kernel's preloaded spare `lva`).
                self.nodes[idx as usize].start = nva_start + size;
                self.propagate(idx);
                // As insert_vmap_area_augment(lva, &va->rb_node, ...): the
                // walk from this node for an area just below it ends at the
                // in-order predecessor's gap, left of this node or right of
                // the rightmost node of its left subtree.
                let mut link = Link { parent: idx, left: true };
                let mut n = self.nodes[idx as usize].left;
                while n != NIL {
                    link = Link { parent: n, left: false };
                    n = self.nodes[n as usize].right;
                }
                let lva = self.new_node(area.start, nva_start);
                self.link(lva, link);
            }
        }
        self.free_bytes -= size;
        let slot = match fit {
            FitType::Full => 0,
            FitType::LeftEdge => 1,
            FitType::RightEdge => 2,
            FitType::NoEdge => 3,
        };
        self.stats.fits[slot] += 1;
        Some(fit)
    }

    /// `find_va_links`: where `[start, end)` would hang, or the free area it
    /// overlaps.
    fn find_va_links(&self, start: u64, end: u64) -> Result<Link, VmapError> {
        let mut link = Link { parent: NIL, left: false };
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n as usize];
            link.parent = n;
            if end <= node.start {
                link.left = true;
                n = node.left;
            } else if start >= node.end {
                link.left = false;
                n = node.right;
            } else {
                return Err(VmapError::Overlap { start, end, free_start: node.start, free_end: node.end });
            }
        }
        Ok(link)
    }

    /// `__merge_or_add_vmap_area` followed by `augment_tree_propagate_from`;
    /// returns the node now holding the area.
    fn merge_or_add(&mut self, start: u64, end: u64) -> Result<u32, VmapError> {
        let link = self.find_va_links(start, end)?;
        // get_va_next_sibling: the parent if we hang on its left, else the
        // parent's list successor; an empty tree has neither neighbour.
        let next = match link {
            Link { parent: NIL, .. } => NIL,
            Link { parent, left: true } => parent,
            Link { parent, left: false } => self.nodes[parent as usize].next,
        };
        let prev = if link.parent == NIL {
            NIL
        } else if next == NIL {
            self.tail
        } else {
            self.nodes[next as usize].prev
        };
        let mut merged = NIL;
        if next != NIL && self.nodes[next as usize].start == end {
            self.nodes[next as usize].start = start;
            merged = next;
            self.stats.merged_next += 1;
        }
        if prev != NIL && self.nodes[prev as usize].end == start {
            let new_end = if merged != NIL {
                // Unlink the grown "next" before growing "prev", as the
                // kernel does, so the cached maxima stay exact.
                let e = self.nodes[merged as usize].end;
                self.erase(merged);
                e
            } else {
                end
            };
            self.nodes[prev as usize].end = new_end;
            merged = prev;
            self.stats.merged_prev += 1;
        }
        if merged == NIL {
            merged = self.new_node(start, end);
            self.link(merged, link);
            self.stats.inserted += 1;
        } else {
            self.propagate(merged);
        }
        self.free_bytes += end - start;
        Ok(merged)
    }

    // ---- arena and AVL mechanics ----

    fn max_of(&self, n: u32) -> u64 {
        if n == NIL { 0 } else { self.nodes[n as usize].max }
    }

    fn height_of(&self, n: u32) -> u32 {
        if n == NIL { 0 } else { u32::from(self.nodes[n as usize].height) }
    }

    fn new_node(&mut self, start: u64, end: u64) -> u32 {
        let node =
            Node { start, end, max: end - start, height: 1, left: NIL, right: NIL, parent: NIL, prev: NIL, next: NIL };
        match self.spare.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// `__link_va` (tree and list) for a fresh node, then rebalance. Byte
    /// accounting is the caller's.
    fn link(&mut self, idx: u32, link: Link) {
        let Link { parent, left } = link;
        self.nodes[idx as usize].parent = parent;
        let (prev, next) = if parent == NIL {
            self.root = idx;
            (NIL, NIL)
        } else if left {
            self.nodes[parent as usize].left = idx;
            (self.nodes[parent as usize].prev, parent)
        } else {
            self.nodes[parent as usize].right = idx;
            (parent, self.nodes[parent as usize].next)
        };
        self.nodes[idx as usize].prev = prev;
        self.nodes[idx as usize].next = next;
        if prev == NIL {
            self.head = idx;
        } else {
            self.nodes[prev as usize].next = idx;
        }
        if next == NIL {
            self.tail = idx;
        } else {
            self.nodes[next as usize].prev = idx;
        }
        self.count += 1;
        self.rebalance_up(parent);
    }

    /// `__unlink_va` for the tree and list. Byte accounting is the caller's.
    fn erase(&mut self, v: u32) {
        let Node { left: l, right: r, parent: p, prev, next, .. } = self.nodes[v as usize].clone();
        let fix_from = if l == NIL || r == NIL {
            let child = if l != NIL { l } else { r };
            self.replace_child(p, v, child);
            p
        } else {
            // Put the in-order successor in v's place.
            let mut s = r;
            while self.nodes[s as usize].left != NIL {
                s = self.nodes[s as usize].left;
            }
            let fix = if s == r {
                s
            } else {
                let sp = self.nodes[s as usize].parent;
                let sr = self.nodes[s as usize].right;
                self.nodes[sp as usize].left = sr;
                if sr != NIL {
                    self.nodes[sr as usize].parent = sp;
                }
                self.nodes[s as usize].right = r;
                self.nodes[r as usize].parent = s;
                sp
            };
            self.nodes[s as usize].left = l;
            self.nodes[l as usize].parent = s;
            self.replace_child(p, v, s);
            fix
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        self.count -= 1;
        self.spare.push(v);
        self.rebalance_up(fix_from);
    }

    /// Make `new` take `old`'s place under `parent` (or as root).
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
        } else if self.nodes[parent as usize].left == old {
            self.nodes[parent as usize].left = new;
        } else {
            self.nodes[parent as usize].right = new;
        }
        if new != NIL {
            self.nodes[new as usize].parent = parent;
        }
    }

    /// Recompute height and `subtree_max_size` of `n` from its children
    /// (the `RB_DECLARE_CALLBACKS_MAX` compute step).
    fn update(&mut self, n: u32) {
        let (l, r) = (self.nodes[n as usize].left, self.nodes[n as usize].right);
        let h = 1 + self.height_of(l).max(self.height_of(r));
        let m = self.max_of(l).max(self.max_of(r));
        let node = &mut self.nodes[n as usize];
        node.height = h as u8;
        node.max = m.max(node.end - node.start);
    }

    /// `augment_tree_propagate_from`: refresh cached maxima from `n` up,
    /// stopping once a node's value does not change (its ancestors then
    /// cannot either). Heights are untouched: only sizes changed.
    fn propagate(&mut self, mut n: u32) {
        while n != NIL {
            let old = self.nodes[n as usize].max;
            self.update(n);
            if self.nodes[n as usize].max == old {
                break;
            }
            n = self.nodes[n as usize].parent;
        }
    }

    /// Rotate `x` down to the left; returns the new subtree root. Both moved
    /// nodes get their maxima recomputed (`augment_rotate`).
    fn rotate_left(&mut self, x: u32) -> u32 {
        let y = self.nodes[x as usize].right;
        let b = self.nodes[y as usize].left;
        let p = self.nodes[x as usize].parent;
        self.nodes[x as usize].right = b;
        if b != NIL {
            self.nodes[b as usize].parent = x;
        }
        self.nodes[y as usize].left = x;
        self.nodes[x as usize].parent = y;
        self.replace_child(p, x, y);
        self.update(x);
        self.update(y);
        y
    }

    /// Mirror of [`rotate_left`](Self::rotate_left).
    fn rotate_right(&mut self, x: u32) -> u32 {
        let y = self.nodes[x as usize].left;
        let b = self.nodes[y as usize].right;
        let p = self.nodes[x as usize].parent;
        self.nodes[x as usize].left = b;
        if b != NIL {
            self.nodes[b as usize].parent = x;
        }
        self.nodes[y as usize].right = x;
        self.nodes[x as usize].parent = y;
        self.replace_child(p, x, y);
        self.update(x);
        self.update(y);
        y
    }

    /// Walk from `n` to the root refreshing heights and maxima and restoring
    /// the AVL balance with single or double rotations.
    fn rebalance_up(&mut self, mut n: u32) {
        while n != NIL {
            self.update(n);
            let (l, r) = (self.nodes[n as usize].left, self.nodes[n as usize].right);
            let (hl, hr) = (self.height_of(l), self.height_of(r));
            if hl > hr + 1 {
                let (ll, lr) = (self.nodes[l as usize].left, self.nodes[l as usize].right);
                if self.height_of(ll) < self.height_of(lr) {
                    self.rotate_left(l);
                }
                n = self.rotate_right(n);
            } else if hr > hl + 1 {
                let (rl, rr) = (self.nodes[r as usize].left, self.nodes[r as usize].right);
                if self.height_of(rr) < self.height_of(rl) {
                    self.rotate_right(r);
                }
                n = self.rotate_left(n);
            }
            n = self.nodes[n as usize].parent;
        }
    }
}

/// `classify_va_fit_type`.
fn classify_va_fit_type(va: FreeArea, nva_start: u64, size: u64) -> Option<FitType> {
    let nva_end = nva_start.checked_add(size)?;
    if nva_start < va.start || nva_end > va.end {
        return None;
    }
    Some(match (va.start == nva_start, va.end == nva_end) {
        (true, true) => FitType::Full,
        (true, false) => FitType::LeftEdge,
        (false, true) => FitType::RightEdge,
        (false, false) => FitType::NoEdge,
    })
}

/// Address-order iterator over the free areas.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    tree: &'a FreeVmapTree,
    cur: u32,
}

impl Iterator for Iter<'_> {
    type Item = FreeArea;

    fn next(&mut self) -> Option<FreeArea> {
        if self.cur == NIL {
            return None;
        }
        let n = &self.tree.nodes[self.cur as usize];
        self.cur = n.next;
        Some(FreeArea { start: n.start, end: n.end })
    }
}

impl<'a> IntoIterator for &'a FreeVmapTree {
    type Item = FreeArea;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}
