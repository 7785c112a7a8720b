//! What a reproduction measured ([`Data`]), below both the reproductions
//! that fill it and the report that renders it.

use super::hvo;
use super::linear_map;
use super::run::{BarrierBatching, Contpte, PcpDrain};

/// What a reproduction measured, by reproduction.
#[derive(Clone, Debug)]
pub enum Data {
    /// `barrier-batching` (boxed: its calibration makes it large).
    BarrierBatching(Box<BarrierBatching>),
    /// `contpte` (boxed: it is large).
    Contpte(Box<Contpte>),
    /// `pcp-drain` (boxed: it is large).
    PcpDrain(Box<PcpDrain>),
    /// `hvo` (boxed: its counters make it the largest).
    Hvo(Box<hvo::Hvo>),
    /// `linear-map`.
    LinearMap(linear_map::LinearMap),
}

impl Data {
    /// Whether a test case failed.
    pub fn failed(&self) -> bool {
        match self {
            Data::BarrierBatching(b) => b.failed(),
            Data::Contpte(c) => c.h1.any_failed(),
            Data::PcpDrain(p) => p.failed(),
            Data::Hvo(h) => h.failed(),
            Data::LinearMap(_) => false,
        }
    }
}
