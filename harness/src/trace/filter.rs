//! Event selection as tracefs's `set_event` takes it.
//!
//! A spec is a list of words (comma-separated, or `-e` repeated):
//! `system:event`, `system:*` (or `system:`), `*:event`, a bare `event`
//! (in any system), `*:*` or `all`; a word starting with `!` removes what it
//! matches. Words apply in order. With no adding word, the selection starts
//! from [`DEFAULT_SYSTEMS`]' events, so `!kmem:mm_page_free` alone means
//! "the default, without mm_page_free". A word that matches no event of the
//! catalogue is an error, as writing an unknown event to `set_event` is.

use mmlab_engine::trace::EVENTS;
use std::fmt;

/// The systems selected when no word adds any: every layer's events and
/// mmlab's TLB, RCU, HVO and operation brackets, but not the barriers (one
/// per page-table write: they would drown the rest) nor the gauges
/// (`mmlab_state`, for timelines). Select those by name.
pub const DEFAULT_SYSTEMS: &[&str] =
    &["kmem", "vmalloc", "rcu", "mmlab_rcu", "mmlab_tlb", "mmlab_hvo", "mmlab_hugetlb", "mmlab_func"];

/// A set of selected events: one bit per catalogue entry.
#[derive(Clone, PartialEq, Eq)]
pub struct EventFilter {
    on: Vec<bool>,
}

impl fmt::Debug for EventFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// A word matching no event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError(pub String);

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for FilterError {}

fn matches(word: &str, system: &str, name: &str) -> bool {
    match word.split_once(':') {
        Some((s, e)) => (s == "*" || s == system) && (e.is_empty() || e == "*" || e == name),
        None => word == "all" || word == name,
    }
}

impl EventFilter {
    /// Nothing selected.
    pub fn none() -> Self {
        EventFilter { on: vec![false; EVENTS.len()] }
    }
    /// Every event of the catalogue.
    pub fn all() -> Self {
        EventFilter { on: vec![true; EVENTS.len()] }
    }
    /// The default selection ([`DEFAULT_SYSTEMS`]).
    pub fn default_set() -> Self {
        EventFilter { on: EVENTS.iter().map(|e| DEFAULT_SYSTEMS.contains(&e.system)).collect() }
    }

    /// Parse `words` (each may hold several, comma-separated).
    ///
    /// # Errors
    /// A word that matches no event, or an empty one.
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<Self, FilterError> {
        Self::parse_from(Self::default_set(), words)
    }

    /// As [`EventFilter::parse`], starting from `base` when no word adds.
    ///
    /// # Errors
    /// As [`EventFilter::parse`].
    pub fn parse_from<S: AsRef<str>>(base: Self, words: &[S]) -> Result<Self, FilterError> {
        let words: Vec<&str> =
            words.iter().flat_map(|w| w.as_ref().split(',')).map(str::trim).filter(|w| !w.is_empty()).collect();
        let adds = words.iter().any(|w| !w.starts_with('!'));
        let mut f = if adds { Self::none() } else { base };
        for w in words {
            let (remove, pat) = match w.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, w),
            };
            let mut hit = false;
            for (i, e) in EVENTS.iter().enumerate() {
                if matches(pat, e.system, e.name) {
                    f.on[i] = !remove;
                    hit = true;
                }
            }
            if !hit {
                return Err(FilterError(format!(
                    "event `{pat}` matches no event (systems: {})",
                    systems().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        Ok(f)
    }

    /// This selection with every event of `system` added.
    pub fn with_system(mut self, system: &str) -> Self {
        for (e, on) in EVENTS.iter().zip(self.on.iter_mut()) {
            *on |= e.system == system;
        }
        self
    }

    /// Whether `system:name` is selected.
    pub fn selects(&self, system: &str, name: &str) -> bool {
        EVENTS.iter().zip(&self.on).any(|(e, &on)| on && e.system == system && e.name == name)
    }

    /// The selected events as `system:name`, in catalogue order.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        EVENTS.iter().zip(&self.on).filter(|(_, on)| **on).map(|(e, _)| format!("{}:{}", e.system, e.name))
    }
}

/// The catalogue's systems, each once, in order.
pub fn systems() -> impl Iterator<Item = &'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    EVENTS.iter().filter_map(move |e| {
        if seen.contains(&e.system) {
            None
        } else {
            seen.push(e.system);
            Some(e.system)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_event_words() {
        let f = EventFilter::parse(&["kmem:mm_page_alloc"]).unwrap();
        assert_eq!(f.names().collect::<Vec<_>>(), ["kmem:mm_page_alloc"]);
        let f = EventFilter::parse(&["vmalloc:*,mm_page_free"]).unwrap();
        assert_eq!(
            f.names().collect::<Vec<_>>(),
            [
                "kmem:mm_page_free",
                "vmalloc:alloc_vmap_area",
                "vmalloc:purge_vmap_area_lazy",
                "vmalloc:free_vmap_area_noflush"
            ]
        );
        let f = EventFilter::parse(&["kmem:", "!kmem:mm_page_free"]).unwrap();
        assert!(f.selects("kmem", "mm_page_alloc") && !f.selects("kmem", "mm_page_free"));
        // Only removals: from the default.
        let f = EventFilter::parse(&["!kmem:mm_page_free"]).unwrap();
        assert!(f.selects("vmalloc", "alloc_vmap_area") && !f.selects("kmem", "mm_page_free"));
        assert!(!f.selects("mmlab_barrier", "dsb"));
        assert_eq!(EventFilter::parse::<&str>(&[]).unwrap(), EventFilter::default_set());
        assert_eq!(EventFilter::parse(&["*:*"]).unwrap(), EventFilter::all());
        assert_eq!(EventFilter::parse(&["all"]).unwrap(), EventFilter::all());
        assert!(EventFilter::parse(&["*:dsb"]).unwrap().selects("mmlab_barrier", "dsb"));
    }

    #[test]
    fn unknown_words_are_errors() {
        let e = EventFilter::parse(&["kmem:mm_page_mystery"]).unwrap_err();
        assert!(e.0.contains("matches no event") && e.0.contains("mmlab_tlb"), "{e}");
        assert!(EventFilter::parse(&["sched:*"]).is_err());
        assert!(EventFilter::parse(&["!nothing"]).is_err());
    }
}
