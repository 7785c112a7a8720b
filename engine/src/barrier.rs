//! (stub until the barrier module lands)
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
#[derive(Clone, Debug, Default)]
pub enum BarrierBackend { Native, #[default] Count }
impl std::str::FromStr for BarrierBackend { type Err = String; fn from_str(s: &str) -> Result<Self, String> { match s { "native" => Ok(Self::Native), "count" => Ok(Self::Count), _ => Err(s.into()) } } }
impl std::fmt::Display for BarrierBackend { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(match self { Self::Native => "native", Self::Count => "count" }) } }
#[derive(Debug, Default)]
pub struct BarrierStats { n: AtomicU64 }
impl BarrierStats { pub fn new() -> Self { Self::default() } pub fn snapshot(&self) -> BarrierCounts { BarrierCounts { n: self.n.load(Relaxed) } } }
#[derive(Debug, Default, Clone, Copy)]
pub struct BarrierCounts { pub n: u64 }
impl std::ops::AddAssign for BarrierCounts { fn add_assign(&mut self, o: Self) { self.n += o.n } }
