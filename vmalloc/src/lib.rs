//! vmalloc (mm/vmalloc.c): virtually contiguous kernel memory backed by
//! scattered pages. (Being built.)
#![forbid(unsafe_code)]

pub mod vmap_area;
