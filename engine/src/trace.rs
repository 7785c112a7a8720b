//! (stub until the trace module lands)
use crate::gfp::Gfp;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
#[derive(Debug, Default)]
pub struct TraceClock(AtomicU64);
impl TraceClock { pub fn new() -> Self { Self::default() } pub fn tick(&self) -> u64 { self.0.fetch_add(1, Relaxed) + 1 } }
#[allow(clippy::too_many_arguments)]
pub fn mm_page_alloc(_cpu: usize, _c: &TraceClock, _page: u64, _pfn: Option<u64>, _order: u32, _gfp: Gfp, _mt: i32) {}
pub fn mm_page_free(_cpu: usize, _c: &TraceClock, _page: u64, _pfn: u64, _order: u32) {}
#[allow(clippy::too_many_arguments)]
pub fn mm_page_alloc_zone_locked(_cpu: usize, _c: &TraceClock, _page: u64, _pfn: u64, _order: u32, _mt: i32, _r: bool) {}
pub fn mm_page_pcpu_drain(_cpu: usize, _c: &TraceClock, _page: u64, _pfn: u64, _order: u32, _mt: i32) {}
#[allow(clippy::too_many_arguments)]
pub fn mm_page_alloc_extfrag(_cpu: usize, _c: &TraceClock, _page: u64, _pfn: u64, _ao: u32, _fo: u32, _am: i32, _fm: i32, _co: bool) {}
