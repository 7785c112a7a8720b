//! The invariant check of the free vmap area tree, split out of
//! vmap_area.rs by job: the tree's order, links, AVL heights and balance,
//! the cached `subtree_max_size` of every node, and the address-ordered
//! list, walked once in order and compared.

use super::{FreeVmapTree, NIL};
use mmlab_engine::PAGE_SIZE;

impl FreeVmapTree {
    /// Verify every invariant, as the kernel's debug-only
    /// `augment_tree_propagate_check` (cached maxima) and the overlap
    /// warnings of `find_va_links` do, and more: binary-search order by
    /// address, parent links, AVL heights and balance, each node's cached `subtree_max_size`, areas
    /// page aligned, inside the range, non-empty, not overlapping and not
    /// touching (an unmerged neighbour), the list equal to the in-order
    /// traversal, and the node and byte counts.
    ///
    /// # Errors
    /// The first inconsistency found, described (a bug in mmlab).
    pub fn check(&self) -> Result<(), String> {
        let mut inorder = Vec::with_capacity(self.count);
        if self.root != NIL && self.nodes[self.root as usize].parent != NIL {
            return Err("root has a parent".into());
        }
        self.check_subtree(self.root, &mut inorder)?;
        if inorder.len() != self.count {
            return Err(format!("{} nodes in the tree, count says {}", inorder.len(), self.count));
        }
        let mut bytes = 0u64;
        let mut prev_end: Option<u64> = None;
        for &i in &inorder {
            let n = &self.nodes[i as usize];
            if n.start >= n.end {
                return Err(format!("empty area {:#x}-{:#x}", n.start, n.end));
            }
            if !n.start.is_multiple_of(PAGE_SIZE) || !n.end.is_multiple_of(PAGE_SIZE) {
                return Err(format!("unaligned area {:#x}-{:#x}", n.start, n.end));
            }
            if n.start < self.range_start || n.end > self.range_end {
                return Err(format!("area {:#x}-{:#x} outside the range", n.start, n.end));
            }
            if let Some(pe) = prev_end {
                if n.start < pe {
                    return Err(format!("area {:#x}-{:#x} overlaps or is out of order", n.start, n.end));
                }
                if n.start == pe {
                    return Err(format!("area {:#x}-{:#x} touches its predecessor, not merged", n.start, n.end));
                }
            }
            prev_end = Some(n.end);
            bytes += n.end - n.start;
        }
        if bytes != self.free_bytes {
            return Err(format!("{bytes:#x} free bytes in the tree, counter says {:#x}", self.free_bytes));
        }
        // The list must be the in-order traversal, linked both ways.
        let mut cur = self.head;
        let mut prev = NIL;
        for (pos, &i) in inorder.iter().enumerate() {
            if cur != i {
                return Err(format!("list position {pos} is node {cur}, in-order says {i}"));
            }
            if self.nodes[cur as usize].prev != prev {
                return Err(format!("bad prev link at list position {pos}"));
            }
            prev = cur;
            cur = self.nodes[cur as usize].next;
        }
        if cur != NIL || self.tail != prev {
            return Err("list longer than the tree, or bad tail".into());
        }
        Ok(())
    }

    // ---- search ----

    /// Recursive part of [`check`](Self::check); returns the subtree height.
    fn check_subtree(&self, n: u32, out: &mut Vec<u32>) -> Result<u32, String> {
        if n == NIL {
            return Ok(0);
        }
        if out.len() > self.count {
            return Err("cycle or more nodes than counted".into());
        }
        let node = &self.nodes[n as usize];
        for c in [node.left, node.right] {
            if c != NIL && self.nodes[c as usize].parent != n {
                return Err(format!("node {c} has a wrong parent link"));
            }
        }
        let hl = self.check_subtree(node.left, out)?;
        out.push(n);
        let hr = self.check_subtree(node.right, out)?;
        let h = 1 + hl.max(hr);
        if u32::from(node.height) != h {
            return Err(format!("node {:#x}-{:#x} caches height {}, is {h}", node.start, node.end, node.height));
        }
        if hl.abs_diff(hr) > 1 {
            return Err(format!("node {:#x}-{:#x} out of AVL balance ({hl} vs {hr})", node.start, node.end));
        }
        let want = (node.end.saturating_sub(node.start)).max(self.max_of(node.left)).max(self.max_of(node.right));
        if node.max != want {
            return Err(format!(
                "node {:#x}-{:#x} caches subtree_max_size {:#x}, should be {want:#x}",
                node.start, node.end, node.max
            ));
        }
        Ok(h)
    }
}
