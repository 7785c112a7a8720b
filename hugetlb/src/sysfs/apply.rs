//! Applying a checked write to the pools ([`Hugetlb::store`]) and reading
//! the meminfo lines from them ([`Hugetlb::meminfo`]).

use super::{HugetlbMeminfo, Store, StoreOutcome, SysfsError};
use crate::hstate::HugePageSize;
use crate::hugetlb::Hugetlb;
use mmlab_engine::Cpu;

impl<'m> Hugetlb<'_, 'm> {
    /// The `store` of `store`'s file of `size`, on `cpu`
    /// (`nr_hugepages_store`, `nr_overcommit_hugepages_store`,
    /// `demote_store`, `demote_size_store`).
    ///
    /// # Errors
    /// As the store: `-EINVAL` for gigantic overcommit or a bad demote
    /// size, `-ENOMEM` when demote cannot restore a folio's vmemmap (the
    /// pages demoted before stay demoted), or a bug reported below.
    pub fn store(&mut self, cpu: &Cpu<'m>, size: HugePageSize, store: Store) -> Result<StoreOutcome, SysfsError> {
        let mut demoted = 0;
        match store {
            Store::NrHugepages(n) => {
                self.set_max_huge_pages_of(cpu, size, n)?;
            }
            Store::NrOvercommitHugepages(n) => self.set_nr_overcommit_hugepages(size, n)?,
            Store::Demote(n) => demoted = self.demote(cpu, size, n)?,
            Store::DemoteSize(dst) => self.set_demote_size(size, dst.bytes())?,
        }
        Ok(StoreOutcome { size, store, nr_hugepages: self.hstate_of(size).nr_huge_pages, demoted })
    }

    /// The hugetlb lines of /proc/meminfo (`hugetlb_report_meminfo`).
    pub fn meminfo(&self) -> HugetlbMeminfo {
        let d = self.hstate();
        HugetlbMeminfo {
            hugepages_total: d.nr_huge_pages,
            hugepages_free: d.free_huge_pages,
            hugepages_rsvd: d.resv_huge_pages,
            hugepages_surp: d.surplus_huge_pages,
            hugepagesize_kb: d.size().bytes() / 1024,
            hugetlb_kb: self.hstates().map(|h| h.nr_huge_pages * h.size().bytes() / 1024).sum(),
        }
    }
}
