//! The one way a configured machine boots: [`Stack`].
//!
//! Every command, bench, example and test helper boots through this type,
//! from one resolved [`Configs`], so the same options give the same machine
//! everywhere. The layers come up in the kernel's order:
//!
//! ```text
//! Stack::boot        Machine::boot          setup_arch(), mm_core_init() up to the memmap
//! Stack::allocator   PageAllocator::boot    memblock_free_all(): the pages into the buddy,
//!                                           and the boot's own page allocations
//! Stack::vmalloc     Vmalloc::boot          vmalloc_init(), and the boot's vmalloc areas
//! Stack::hugetlb     Hugetlb::new + init    hugetlb_init(): the pools of `hugepages=`
//! ```
//!
//! On a `boot.state=real` machine the boot's vmalloc areas (stacks,
//! ioremaps, DMA pools, a percpu chunk) are made while the allocator boots,
//! before the end of boot frees the initrd and the init sections
//! (`PageAllocator::boot_with`), and kept in the allocator until vmalloc
//! comes up over it ([`Stack::vmalloc`], or any `Vmalloc::new`): a command
//! that never looks at vmalloc still runs on the machine those areas leave.
//!
//! The layers borrow the one below (`PageAllocator<'m>` borrows the
//! machine, `Vmalloc` and `Hugetlb` the allocator), so the stack owns the
//! machine and hands out the upper layers for the caller to hold; a command
//! takes only the layers it looks at (`walk` the machine, `stat buddyinfo`
//! the allocator), and the layers it takes are the same for every command.
//! [`Stack::with`] brings every layer up at once for a closure. A failure
//! is one [`StackError`] naming the layer that failed.

use crate::settings::Configs;
use mmlab_engine::Machine;
use mmlab_hugetlb::Hugetlb;
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::Vmalloc;
use std::fmt;

/// A layer of the stack that failed to come up.
#[derive(Debug)]
pub enum StackError {
    /// The machine (`Machine::boot`: memblock, the memmap, the tables).
    Boot(mmlab_engine::machine::BootError),
    /// The page allocator (`PageAllocator::boot`: zones, pcp, sysctls).
    PageAllocator(mmlab_pcp::SysctlError),
    /// hugetlb's boot pools (`hugetlb_init`), or the CPU it runs on.
    Hugetlb(String),
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::Boot(e) => write!(f, "boot failed: {e}"),
            StackError::PageAllocator(e) => write!(f, "page allocator boot failed: {e}"),
            StackError::Hugetlb(e) => write!(f, "hugetlb_init: {e}"),
        }
    }
}

impl std::error::Error for StackError {}

impl From<StackError> for String {
    fn from(e: StackError) -> String {
        e.to_string()
    }
}

/// A booted machine and the configuration of every layer above it.
#[derive(Debug)]
pub struct Stack {
    configs: Configs,
    machine: Machine,
}

/// Every layer of a [`Stack`], up at once ([`Stack::with`]).
#[derive(Debug)]
pub struct Layers<'a, 'm> {
    /// The machine.
    pub machine: &'m Machine,
    /// The page allocator.
    pub allocator: &'a PageAllocator<'m>,
    /// vmalloc.
    pub vmalloc: Vmalloc<'a, 'm>,
    /// hugetlb, its boot pools grown.
    pub hugetlb: Hugetlb<'a, 'm>,
    /// The pages each pool got at boot, in `HugePageSize::ALL` order.
    pub pools: [u64; 4],
}

impl Configs {
    /// `machine` with every other layer at its default, as given: the
    /// barrier backend is not settled from the cost profile (a test or a
    /// bench that builds its `MachineConfig` by hand chose it).
    pub fn with_machine(machine: mmlab_engine::MachineConfig) -> Configs {
        Configs { machine, allocator: Default::default(), vmalloc: Default::default(), hugetlb: Default::default() }
    }
}

impl Stack {
    /// Boot the machine of `configs` (the upper layers come up on request).
    ///
    /// # Errors
    /// [`StackError::Boot`].
    pub fn boot(configs: &Configs) -> Result<Stack, StackError> {
        let machine = Machine::boot(configs.machine.clone()).map_err(StackError::Boot)?;
        Ok(Stack { configs: configs.clone(), machine })
    }

    /// Boot a machine of `machine` with every other layer at its default
    /// (the tests' and benches' machines).
    ///
    /// # Errors
    /// As [`Stack::boot`].
    pub fn boot_machine(machine: mmlab_engine::MachineConfig) -> Result<Stack, StackError> {
        Stack::boot(&Configs::with_machine(machine))
    }

    /// The configuration the stack was booted from.
    pub fn configs(&self) -> &Configs {
        &self.configs
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The machine, owned: for a caller that needs only it.
    pub fn into_machine(self) -> Machine {
        self.machine
    }

    /// Bring the page allocator up (`memblock_free_all()`).
    ///
    /// # Errors
    /// [`StackError::PageAllocator`].
    pub fn allocator(&self) -> Result<PageAllocator<'_>, StackError> {
        let cfg = self.configs.vmalloc;
        PageAllocator::boot_with(&self.machine, self.configs.allocator.clone(), |pa| {
            // vmalloc_init() and the boot's vmalloc areas (mm_core_init(),
            // the initcalls), before the end of boot.
            if let Err(e) = Vmalloc::boot_before_end_of_boot(pa, cfg) {
                tracing::warn!(target: "mmlab::stack", "{e}: vmalloc without the boot's areas");
            }
        })
        .map_err(StackError::PageAllocator)
    }

    /// vmalloc over `pa`: the first time, vmalloc as [`Stack::allocator`]
    /// left it (`vmalloc_init()` and the boot's areas); over an allocator
    /// booted elsewhere, `Vmalloc::boot` (which makes the boot's areas
    /// once per allocator). If a CPU's handle is held elsewhere the areas
    /// cannot be made: vmalloc comes up without them, and says so.
    pub fn vmalloc<'a, 'm>(&self, pa: &'a PageAllocator<'m>) -> Vmalloc<'a, 'm> {
        let cfg = self.configs.vmalloc;
        Vmalloc::boot(pa, cfg).unwrap_or_else(|e| {
            tracing::warn!(target: "mmlab::stack", "{e}: vmalloc without the boot's areas");
            Vmalloc::new(pa, cfg)
        })
    }

    /// hugetlb over `pa` with its boot pools (`hugepages=`) grown on CPU 0,
    /// as `hugetlb_init` does; returns the pages each pool got.
    ///
    /// # Errors
    /// [`StackError::Hugetlb`]: CPU 0 taken, or `hugetlb_init` failing.
    pub fn hugetlb<'a, 'm>(&self, pa: &'a PageAllocator<'m>) -> Result<(Hugetlb<'a, 'm>, [u64; 4]), StackError> {
        let mut ht = Hugetlb::new(pa, self.configs.hugetlb);
        let cpu = pa.machine().cpu(0).map_err(|e| StackError::Hugetlb(e.to_string()))?;
        let got = ht.hugetlb_init(&cpu).map_err(|e| StackError::Hugetlb(e.to_string()))?;
        // The boot's pr_warn(), on stderr as the kernel's console would show it.
        for w in ht.init_warnings(got) {
            eprintln!("mmlab: warning: {w}");
        }
        Ok((ht, got))
    }

    /// Boot every layer of `configs` and run `f` on them.
    ///
    /// # Errors
    /// The failing layer's [`StackError`], or `f`'s error.
    pub fn with<R, E: From<StackError>>(
        configs: &Configs,
        f: impl FnOnce(Layers<'_, '_>) -> Result<R, E>,
    ) -> Result<R, E> {
        let stack = Stack::boot(configs)?;
        let pa = stack.allocator()?;
        // vmalloc_init() and the boot's areas come before hugetlb_init(),
        // a subsys_initcall.
        let vmalloc = stack.vmalloc(&pa);
        let (hugetlb, pools) = stack.hugetlb(&pa)?;
        f(Layers { machine: stack.machine(), allocator: &pa, vmalloc, hugetlb, pools })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layer_comes_up_and_errors_name_theirs() {
        let c = Configs::new(
            mmlab_engine::MachineConfig { mem_bytes: 256 << 20, ..Default::default() },
            &["hugepages=2".to_string()],
        )
        .unwrap();
        let pools = Stack::with(&c, |l| Ok::<_, StackError>(l.pools)).unwrap();
        assert_eq!(pools, [0, 2, 0, 0]);
        let bad = Configs::with_machine(mmlab_engine::MachineConfig { mem_bytes: 4096, ..Default::default() });
        let e = Stack::boot(&bad).unwrap_err().to_string();
        assert!(e.starts_with("boot failed: "), "{e}");
    }
}
