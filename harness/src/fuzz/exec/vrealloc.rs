//! `vrealloc` in the executor: the outcomes the oracle accepts, the call,
//! and the model's update (the handle follows its area when it moves).
//!
//! A live vmalloc handle may be resized to any size: 0 frees it
//! (`vfree`), a size beyond RAM is `TooLarge` (changing nothing), any other
//! must succeed or fail for lack of memory, leaving the old area as it
//! was. A wrong call names a vmap area (`WrongKind`), a percpu object
//! (whatever the address is to vmalloc: the start of a percpu chunk's area
//! is `WrongKind`, an address inside one `InsideArea`, one outside vmalloc
//! `NotVmalloc`), an address inside an area (`InsideArea`), or an area
//! already freed, by `vfree` or `kvfree_rcu` (`DoubleFree`, or
//! `NotVmalloc` once purged).

use super::expect::{Expect, errors, only, succeeds};
use super::{Executor, Obj};
use crate::fuzz::op::{HandleKind, Ref};
use crate::fuzz::oracle::Outcome;
use mmlab_engine::{Gfp, PAGE_SIZE};

impl<'a, 'm> Executor<'a, 'm> {
    /// The acceptable outcomes of `vrealloc(area, size)`.
    pub(super) fn expect_vrealloc(&self, area: &Ref, size: u64) -> Expect {
        let e = self.area_expect(area, HandleKind::Vmalloc);
        if e.allowed == [Outcome::Ok] {
            return if size == 0 {
                only(Outcome::Ok)
            } else if size > self.pa.managed_pages() * PAGE_SIZE {
                only(Outcome::TooLarge)
            } else {
                succeeds(&[Outcome::Ok, Outcome::NoMemory, Outcome::NoVmapSpace])
            };
        }
        if e.allowed == [Outcome::Skipped]
            && let Ref::Whole(h) = *area
            && let Some(Obj::Percpu { live: true, .. }) = self.handles.get(&h)
        {
            return errors(&[Outcome::WrongKind, Outcome::InsideArea, Outcome::NotVmalloc]);
        }
        e
    }

    /// Run `vrealloc` and follow the area in the model.
    pub(super) fn run_vrealloc(&mut self, cpu_i: usize, area: &Ref, size: u64, gfp: Gfp) -> (Outcome, String) {
        let Some(addr) = self.area_addr(area) else { return (Outcome::Skipped, String::new()) };
        let cpu = &self.cpus[cpu_i % self.cpus.len()];
        match self.vm.vrealloc(cpu, Some(addr), size, gfp) {
            Ok(new) => {
                if let Some(h) = area.handle()
                    && let Some(Obj::Vmalloc { addr: a, size: s, live, kvfree_pending }) = self.handles.get_mut(&h)
                    && *a == addr
                {
                    match new {
                        Some(n) => (*a, *s) = (n, size),
                        None => (*live, *kvfree_pending) = (false, false),
                    }
                }
                match new {
                    Some(n) if n == addr => (Outcome::Ok, self.ok_detail(format_args!("{addr:#x} in place"))),
                    Some(n) => (Outcome::Ok, self.ok_detail(format_args!("{addr:#x} -> {n:#x}"))),
                    None => (Outcome::Ok, self.ok_detail(format_args!("{addr:#x} freed"))),
                }
            }
            Err(e) => (e.into(), e.to_string()),
        }
    }
}
