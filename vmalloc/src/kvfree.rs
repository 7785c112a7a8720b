//! `kvfree_rcu` for vmalloc'd objects (kernel/rcu/tree.c `kvfree_call_rcu`,
//! `kvfree_rcu_barrier`), split out of vmalloc.rs by job.
//!
//! A freed object is not given back at once: it is queued with the cookie
//! of the grace period it must wait for (`start_poll_synchronize_rcu`), and
//! any later call on any CPU frees the queued objects whose grace period
//! has ended (`poll_state_synchronize_rcu`), as the kernel's monitor work
//! does from a workqueue. Bad input is refused when the object is queued,
//! not when the deferred free runs, so the caller gets the error.

use crate::area::AreaKind;
use crate::error::VmallocError;
use crate::vmalloc::KvfreeQueued;
use crate::vmalloc::Vmalloc;
use mmlab_engine::Cpu;
use mmlab_engine::kernel::rcu;
use std::sync::atomic::Ordering::Release;

impl<'m> Vmalloc<'_, 'm> {
    /// `kvfree_rcu(ptr, rhf)` for a vmalloc'd object: the vfree runs after
    /// an RCU grace period. Like the kernel's per-CPU `kfree_rcu_cpu`
    /// batches, the pointer is queued with a grace-period cookie
    /// (`start_poll_synchronize_rcu`) and freed by a later call on any CPU
    /// once the cookie's grace period has ended (the kernel's monitor work
    /// does this from a workqueue).
    ///
    /// # Errors
    /// As [`Vmalloc::vfree`], checked when the object is queued, so bad input is refused at once.
    pub fn kvfree_rcu(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        self.check_live(cpu, addr)?;
        let cookie = rcu::start_poll_synchronize_rcu(cpu);
        {
            let mut q = self.kvfree_pending.lock();
            q.push(KvfreeQueued { addr, cookie });
            self.kvfree_nr.store(q.len(), Release);
        }
        self.kvfree_drain_ready(cpu);
        Ok(())
    }

    /// `kvfree_rcu_mightsleep(ptr)` (`kvfree_call_rcu` without a head): a
    /// point where the caller may sleep (a quiescent state), then the same
    /// queueing as [`Vmalloc::kvfree_rcu`]. The kernel puts the pointer in a
    /// page-sized bulk array and only when it cannot get such a page falls
    /// back to `synchronize_rcu()` and an immediate `kvfree()`; the bulk
    /// arrays are not modelled, so that fallback never happens here.
    ///
    /// # Errors
    /// As [`Vmalloc::kvfree_rcu`].
    pub fn kvfree_rcu_mightsleep(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        self.check_live(cpu, addr)?;
        rcu::rcu_quiescent_state(cpu);
        self.kvfree_rcu(cpu, addr)
    }

    /// `kvfree_rcu_barrier()`: wait for a grace period and free everything
    /// queued by [`Vmalloc::kvfree_rcu`].
    ///
    /// # Errors
    /// [`VmallocError::ForeignCpu`], or the error of a queued free (none is expected: each was
    /// checked when queued).
    pub fn kvfree_rcu_barrier(&self, cpu: &Cpu<'m>) -> Result<(), VmallocError> {
        self.this_machine(cpu)?;
        rcu::synchronize_rcu(cpu);
        self.kvfree_drain_ready(cpu);
        let left: Vec<u64> = {
            let mut q = self.kvfree_pending.lock();
            self.kvfree_nr.store(0, Release);
            q.drain(..).map(|q| q.addr).collect()
        };
        for a in left {
            self.vfree(cpu, a)?;
        }
        Ok(())
    }

    /// Objects queued by `kvfree_rcu` and not yet freed.
    pub fn kvfree_pending(&self) -> usize {
        self.kvfree_pending.lock().len()
    }
    /// Whether `addr` is queued by `kvfree_rcu` and not yet freed.
    pub fn kvfree_queued(&self, addr: u64) -> bool {
        self.kvfree_pending.lock().iter().any(|q| q.addr == addr)
    }

    /// Free the queued objects whose grace period has ended.
    pub(crate) fn kvfree_drain_ready(&self, cpu: &Cpu<'m>) {
        let ready: Vec<u64> = {
            let mut q = self.kvfree_pending.lock();
            let mut ready = Vec::new();
            q.retain(|queued| {
                let done = rcu::poll_state_synchronize_rcu(cpu, queued.cookie);
                if done {
                    ready.push(queued.addr);
                }
                !done
            });
            self.kvfree_nr.store(q.len(), Release);
            ready
        };
        for a in ready {
            // Queued only after check_live: the area is ours to free.
            let _ = self.vfree(cpu, a);
        }
    }

    /// The area at `addr` exists and is a vmalloc area (checked before a
    /// deferred free is queued, so bad input is refused at once).
    fn check_live(&self, cpu: &Cpu<'m>, addr: u64) -> Result<(), VmallocError> {
        let area = self.find_unlink(cpu, addr)?;
        let ok = area.kind == AreaKind::Vmalloc;
        self.busy_lock(cpu, addr).insert(addr, area);
        if !ok {
            return Err(VmallocError::WrongKind { addr });
        }
        if self.kvfree_pending.lock().iter().any(|q| q.addr == addr) {
            return Err(VmallocError::DoubleFree { addr });
        }
        Ok(())
    }
}
