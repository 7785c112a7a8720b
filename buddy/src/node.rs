//! `struct pglist_data` of node 0: its zones (`node_zones[]`), built from the
//! layout the machine computed at boot, the boot-time freeing of memblock's
//! memory into each frame's zone, and `init_per_zone_wmark_min`.
//!
//! | piece | fidelity |
//! |---|---|
//! | one `Zone` per zone type, spans from `free_area_init` | faithful (one node) |
//! | `memblock_free_all` into `page_zone()` of each block | faithful |
//! | `init_per_zone_wmark_min` + khugepaged's `set_recommended_min_free_kbytes` | faithful |
//! | ZONELIST_FALLBACK | faithful for one node |

use crate::zone::Zone;
use crate::zones::{self, LOWMEM_RESERVE_RATIO};
use mmlab_engine::mm::ZoneType;
use mmlab_engine::mm::zone_layout::NR_ZONE_TYPES;
use mmlab_engine::{Cpu, Machine, Pfn};

/// The zones of node 0 (`NODE_DATA(0)->node_zones`).
#[derive(Debug)]
pub struct NodeZones<'m> {
    zones: [Zone<'m>; NR_ZONE_TYPES],
}

impl<'m> NodeZones<'m> {
    /// `free_area_init_core()`: every zone of the node, empty, at the spans
    /// the machine's boot computed (`Machine::zone_spans`).
    pub fn new(m: &'m Machine) -> NodeZones<'m> {
        let spans = *m.zone_spans();
        NodeZones { zones: std::array::from_fn(|i| Zone::from_span(m, spans[i])) }
    }

    /// `&pgdat->node_zones[zt]`.
    pub fn zone(&self, zt: ZoneType) -> &Zone<'m> {
        &self.zones[zt as usize]
    }
    /// Every zone, lowest first (`for_each_zone`).
    pub fn zones(&self) -> &[Zone<'m>; NR_ZONE_TYPES] {
        &self.zones
    }
    /// `page_zone()`: the zone number in the frame's struct page flags.
    pub fn page_zone(&self, m: &Machine, pfn: Pfn) -> &Zone<'m> {
        &self.zones[m.page(pfn).zonenum() as usize % NR_ZONE_TYPES]
    }

    /// `memblock_free_all()` → `__free_pages_core()`: each free block of
    /// memblock into the buddy lists of its zone. Zone boundaries are
    /// aligned to the largest block or lie at the end of RAM, so no block
    /// straddles two zones.
    pub fn memblock_free_all(&self, cpu: &Cpu<'m>) {
        let m = self.zones[0].machine();
        m.memblock().for_each_free_block(|pfn, order| self.page_zone(m, pfn).free_pages_core(cpu, pfn, order));
    }

    /// `zone_managed_pages()` of every zone.
    pub fn managed(&self) -> [u64; NR_ZONE_TYPES] {
        std::array::from_fn(|i| self.zones[i].managed_pages())
    }

    /// `init_per_zone_wmark_min()` at boot, then, with THP enabled,
    /// khugepaged's `set_recommended_min_free_kbytes()`: the final
    /// `min_free_kbytes` (or `user_min_free_kbytes` when given), the
    /// watermarks of every zone and their `lowmem_reserve[]`. Returns the
    /// `min_free_kbytes` in force.
    pub fn init_per_zone_wmark_min(&self, user_min_free_kbytes: Option<u64>, thp: bool) -> u64 {
        let managed = self.managed();
        let populated = std::array::from_fn(|i| self.zones[i].is_populated());
        let min_free = user_min_free_kbytes.unwrap_or_else(|| zones::boot_min_free_kbytes(&managed, &populated, thp));
        self.setup_per_zone_wmarks(min_free);
        let reserve = zones::setup_per_zone_lowmem_reserve(&managed, &LOWMEM_RESERVE_RATIO);
        for (z, r) in self.zones.iter().zip(reserve) {
            z.set_lowmem_reserve(r);
        }
        min_free
    }

    /// `setup_per_zone_wmarks()` for a new `min_free_kbytes`.
    pub fn setup_per_zone_wmarks(&self, min_free_kbytes: u64) {
        let wm = zones::setup_per_zone_wmarks(min_free_kbytes, &self.managed());
        for (z, w) in self.zones.iter().zip(wm) {
            z.set_watermarks(w, min_free_kbytes);
        }
    }

    /// The ZONELIST_FALLBACK zonelist: managed zones, highest first.
    pub fn zonelist(&self) -> Vec<ZoneType> {
        zones::zonelist_fallback(&self.managed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocFlags, WMARK_HIGH, WMARK_LOW, WMARK_MIN};
    use mmlab_engine::MachineConfig;

    #[test]
    fn a_1g_machine_has_only_dma_and_one_zone_of_thp_reserve() {
        let m = Machine::boot(MachineConfig::with("1G", 1).unwrap()).unwrap();
        assert!(m.claim_memblock_free_all());
        let node = NodeZones::new(&m);
        let cpu = m.cpu(0).unwrap();
        node.memblock_free_all(&cpu);
        let managed = node.managed();
        assert!(managed[0] > 0);
        assert_eq!(&managed[1..], &[0, 0, 0]);
        assert_eq!(node.zonelist(), vec![ZoneType::Dma]);
        // 512 × 1 × 11 pages × 4 = 22,528 kB, as the real 1G kernel reports.
        assert_eq!(node.init_per_zone_wmark_min(None, true), 22_528);
        let dma = node.zone(ZoneType::Dma);
        // All lowmem is DMA: its min is the whole 5,632 pages.
        assert_eq!(dma.watermark_raw(WMARK_MIN), 5_632);
        assert_eq!(dma.watermark_raw(WMARK_LOW), 5_632 + 5_632 / 4);
        // Nothing above DMA: no reserve.
        assert_eq!(dma.lowmem_reserve(), [0; 4]);
        assert_eq!(dma.nr_free_pages() as u64, managed[0]);
        // Buddyinfo: one DMA row (unpopulated zones are skipped).
        let zs: Vec<&Zone<'_>> = node.zones().iter().collect();
        let b = crate::procfs::buddyinfo_zones(&zs);
        assert_eq!(b.lines().count(), 1);
        assert!(b.starts_with("Node 0, zone      DMA "));
        // transparent_hugepage=never: int_sqrt(managed × 4 × 16).
        let k = node.init_per_zone_wmark_min(None, false);
        assert_eq!(k, crate::watermark::int_sqrt(managed[0] * 64));
        assert_eq!(
            dma.watermark_raw(WMARK_HIGH),
            dma.watermark_raw(WMARK_MIN) + 2 * (k / 4 / 4).max(managed[0] / 1000)
        );
        assert!(dma.zone_watermark_ok(
            0,
            dma.watermark_raw(WMARK_LOW),
            ZoneType::Normal as usize,
            AllocFlags::default()
        ));
    }
}
