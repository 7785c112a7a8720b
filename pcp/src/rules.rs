//! The kernel-version-dependent rules of the pcp allocator, in one place.
//!
//! mmlab follows Linux 7.2 by default. The rules that changed between the
//! releases the reference experiments were measured on are switchable, so a
//! result can be checked against the kernel it was published for.

use std::fmt;
use std::str::FromStr;

/// Which kernel's pcp rules to follow (`pcp.rules=7.2|6.12`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KernelRules {
    /// Linux 6.12: free_high needs `free_count >= batch`; a pcp drain on free
    /// is one `free_pcppages_bulk` call holding the zone lock throughout.
    Linux6_12,
    /// Linux 7.2: free_high needs `free_count >= batch + high_min / 2`; a
    /// drain on free runs in chunks of `batch`, dropping and re-taking the
    /// pcp lock (and so the zone lock) between chunks.
    ///
    /// In both, `decay_pcp_high()` drains in chunks of at most `batch`
    /// (6.12.117 and 7.2; 6.17 drained in one call).
    #[default]
    Linux7_2,
}

impl KernelRules {
    /// The `free_count` threshold of the free_high test in
    /// `free_frozen_page_commit()` (`free_unref_page_commit()` in 6.12).
    #[inline]
    pub fn free_high_threshold(self, batch: i32, high_min: i32) -> i32 {
        match self {
            KernelRules::Linux6_12 => batch,
            KernelRules::Linux7_2 => batch + high_min / 2,
        }
    }
    /// Largest chunk one `free_pcppages_bulk` call takes when a free pushes
    /// the pcp over high (None: the whole amount at once).
    #[inline]
    pub fn free_drain_chunk(self, batch: i32) -> Option<i32> {
        match self {
            KernelRules::Linux6_12 => None,
            KernelRules::Linux7_2 => Some(batch.max(1)),
        }
    }
    /// Kernel release named by the rules.
    pub fn release(self) -> &'static str {
        match self {
            KernelRules::Linux6_12 => "6.12",
            KernelRules::Linux7_2 => "7.2",
        }
    }
}

impl fmt::Display for KernelRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.release())
    }
}

impl FromStr for KernelRules {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "6.12" => Ok(KernelRules::Linux6_12),
            "7.2" => Ok(KernelRules::Linux7_2),
            _ => Err(format!("unknown pcp rules {s:?}: expected 7.2 or 6.12")),
        }
    }
}
