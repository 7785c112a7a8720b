//! The thirteen test cases of lib/test_vmalloc.c (Linux 7.2), each doing
//! per loop iteration what the module's does: the calls, sizes, alignments
//! and GFP flags, and the setup and teardown of full_fit and long_busy_list
//! (whose pointer arrays are vmalloc'd too). A case returns `Err` with the
//! reason where the module returns -1; it never panics on a failed
//! allocation.
//!
//! A case runs on one worker's [`Ctx`]: its emulated CPU, the allocators
//! every worker shares, and its own random stream.

use super::params::{NR_TEST_CASES, Params};
use mmlab_engine::arch::arm64::pgtable::{AddressSpace, mmu};
use mmlab_engine::mm::vmstat::VmEvent;
use mmlab_engine::rng::Xoshiro256StarStar;
use mmlab_engine::{Cpu, Gfp, PAGE_SIZE, Pfn};
use mmlab_pcp::PageAllocator;
use mmlab_vmalloc::Vmalloc;
use mmlab_vmalloc::percpu::PercpuAllocator;

/// One entry of the module's `test_case_array`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestCase {
    /// `test_name`.
    pub name: &'static str,
    /// Expected to fail.
    pub xfail: bool,
    /// What one call of the case is, for per-call figures.
    pub unit: CallUnit,
}

/// What a case repeats: `test_loop_count` iterations, or (pcpu_alloc_test)
/// one allocation per `nr_pcpu_objects` object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallUnit {
    /// One iteration of the case's loop.
    Loop,
    /// One percpu object.
    PcpuObject,
}

/// The module's `test_case_array`; bit `i` of `run_test_mask` selects entry `i`.
pub const TEST_CASES: [TestCase; NR_TEST_CASES] = [
    TestCase { name: "fix_size_alloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "full_fit_alloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "long_busy_list_alloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "random_size_alloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "fix_align_alloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "random_size_align_alloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "align_shift_alloc_test", xfail: true, unit: CallUnit::Loop },
    TestCase { name: "pcpu_alloc_test", xfail: false, unit: CallUnit::PcpuObject },
    TestCase { name: "kvfree_rcu_1_arg_vmalloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "kvfree_rcu_2_arg_vmalloc_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "vm_map_ram_test", xfail: false, unit: CallUnit::Loop },
    TestCase { name: "no_block_alloc_test", xfail: true, unit: CallUnit::Loop },
    TestCase { name: "vrealloc_test", xfail: false, unit: CallUnit::Loop },
];

/// `THREAD_ALIGN << 1` on arm64 with VMAP_STACK and 16 KiB stacks.
const FIX_ALIGN: u64 = 64 << 10;
/// long_busy_list_alloc_test's busy areas.
const LONG_BUSY_LIST_AREAS: usize = 15000;
/// `offsetof(struct test_kvfree_rcu, array)`: after a 16-byte `rcu_head`.
const KVFREE_ARRAY_OFFSET: u64 = 16;
/// `BITS_PER_LONG`.
const BITS_PER_LONG: u32 = 64;

/// The pcp after one long_busy_list iteration (mmlab extension, every
/// `pcp_sample_interval` iterations): what the pcp-drain regression is
/// made of, drawn by `reproduce pcp-drain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PcpSample {
    /// The iteration just finished, from 0.
    pub iteration: u64,
    /// `pcp->count` of the worker's CPU in the preferred zone (the first
    /// of the zonelist, where the test's pages come from).
    pub count: i32,
    /// That pageset's `pcp->high` (it moves: 7.2's adaptive high).
    pub high: i32,
    /// That pageset's `pcp->high_min`.
    pub high_min: i32,
    /// `free_pcppages_bulk()` calls during the iteration (every CPU and
    /// zone: `pcp_drain` of vmstat).
    pub drains: u64,
    /// Pages those calls moved back to the buddy lists (`pcp_drain_pages`).
    pub drained_pages: u64,
}

/// A case's return value: `Err` is the module's `return -1`, with the reason.
pub(super) type CaseRet = Result<(), String>;

/// What a case runs with: its CPU, the shared allocators, its random stream.
pub(super) struct Ctx<'r, 'a, 'm> {
    pub(super) cpu: &'r Cpu<'m>,
    pub(super) vm: &'r Vmalloc<'a, 'm>,
    pub(super) pa: &'r PageAllocator<'m>,
    pub(super) pcpu: &'r PercpuAllocator,
    pub(super) asp: AddressSpace,
    pub(super) p: &'r Params,
    pub(super) rng: Xoshiro256StarStar,
    /// Emulated time slept (`msleep_before_free`), ms.
    pub(super) slept_ms: u64,
    pub(super) pcp_series: Vec<PcpSample>,
}

impl Ctx<'_, '_, '_> {
    pub(super) fn run_case(&mut self, index: usize) -> CaseRet {
        match index {
            0 => self.fix_size_alloc_test(),
            1 => self.full_fit_alloc_test(),
            2 => self.long_busy_list_alloc_test(),
            3 => self.random_size_alloc_test(),
            4 => self.fix_align_alloc_test(),
            5 => self.random_size_align_alloc_test(),
            6 => self.align_shift_alloc_test(),
            7 => self.pcpu_alloc_test(),
            8 => self.kvfree_rcu_1_arg_vmalloc_test(),
            9 => self.kvfree_rcu_2_arg_vmalloc_test(),
            10 => self.vm_map_ram_test(),
            11 => self.no_block_alloc_test(),
            12 => self.vrealloc_test(),
            _ => unreachable!("test case index {index}"),
        }
    }

    fn vmalloc(&self, size: u64) -> Result<u64, String> {
        self.vm.vmalloc(self.cpu, size).map_err(|e| e.to_string())
    }

    fn vmalloc_node(&self, size: u64, align: u64) -> Result<u64, String> {
        self.vm.__vmalloc_node(self.cpu, size, align, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO).map_err(|e| e.to_string())
    }

    fn vfree(&self, addr: u64) -> CaseRet {
        self.vm.vfree(self.cpu, addr).map_err(|e| e.to_string())
    }

    /// `vfree()` of a pointer that may be NULL (a failed allocation).
    fn vfree_opt(&self, addr: Option<u64>) -> CaseRet {
        addr.map_or(Ok(()), |a| self.vfree(a))
    }

    /// `msleep(ms)` in emulated time: the task sleeps
    /// `msecs_to_jiffies(ms) + 1` jiffies (HZ = 250, arm64's defconfig, so
    /// msleep(1) is 8 ms), and every `sysctl_stat_interval` (HZ jiffies =
    /// 1 s) that passes runs this CPU's `vmstat_update`, whose
    /// `refresh_cpu_vm_stats` decays the pcp high (`decay_pcp_high`).
    fn msleep(&mut self, ms: u32) {
        const HZ: u64 = 250;
        const STAT_INTERVAL_MS: u64 = 1000;
        if ms == 0 {
            return;
        }
        let jiffies = (u64::from(ms) * HZ).div_ceil(1000) + 1;
        let before = self.slept_ms / STAT_INTERVAL_MS;
        self.slept_ms += jiffies * 1000 / HZ;
        for _ in before..self.slept_ms / STAT_INTERVAL_MS {
            self.pa.decay_pcp_high(self.cpu);
        }
    }

    /// `*(u8 *)va = v`.
    fn poke(&self, va: u64, v: u8) -> CaseRet {
        mmu::write_bytes(self.cpu, &self.asp, va, &[v]).map_err(|e| format!("write to {va:#x}: {e}"))
    }

    /// `*(u8 *)va`.
    fn peek(&self, va: u64) -> Result<u8, String> {
        let mut b = [0u8];
        mmu::read_bytes(self.cpu, &self.asp, va, &mut b).map_err(|e| format!("read of {va:#x}: {e}"))?;
        Ok(b[0])
    }

    fn fix_size_alloc_test(&mut self) -> CaseRet {
        let size = self.p.pages() as u64 * PAGE_SIZE;
        for _ in 0..self.p.loops() {
            let ptr = if self.p.use_huge {
                self.vm.vmalloc_huge(self.cpu, size, Gfp::GFP_KERNEL).map_err(|e| e.to_string())?
            } else {
                self.vmalloc(size)?
            };
            self.poke(ptr, 0)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    fn full_fit_alloc_test(&mut self) -> CaseRet {
        // fls(num_online_cpus()) * (32 MiB / PAGE_SIZE) = lazy_max_pages().
        let fls = u64::BITS - (self.cpu.all_arch_data().count() as u64).leading_zeros();
        let junk_length = (u64::from(fls) * ((32 << 20) / PAGE_SIZE)) as usize;
        let ptr_array = self.vmalloc(8 * junk_length as u64)?;
        let junk_array = match self.vmalloc(8 * junk_length as u64) {
            Ok(a) => a,
            Err(e) => {
                self.vfree(ptr_array)?;
                return Err(e);
            }
        };
        let mut ptr = Vec::with_capacity(junk_length);
        let mut junk = Vec::with_capacity(junk_length);
        for _ in 0..junk_length {
            ptr.push(self.vmalloc(PAGE_SIZE).ok());
            junk.push(self.vmalloc(PAGE_SIZE).ok());
        }
        let mut rv = Ok(());
        for &j in &junk {
            rv = rv.and(self.vfree_opt(j));
        }
        if rv.is_ok() {
            rv = (|| {
                for _ in 0..self.p.loops() {
                    let tmp = self.vmalloc(PAGE_SIZE)?;
                    self.poke(tmp, 1)?;
                    self.vfree(tmp)?;
                }
                Ok(())
            })();
        }
        for &p in &ptr {
            rv = rv.and(self.vfree_opt(p));
        }
        rv.and(self.vfree(ptr_array)).and(self.vfree(junk_array))
    }

    /// `(pcp_drain, pcp_drain_pages)` of the machine so far.
    fn drain_events(&self) -> (u64, u64) {
        let ev = self.pa.machine().vm_events();
        (ev.get(VmEvent::PcpDrain), ev.get(VmEvent::PcpDrainPages))
    }

    /// Records a [`PcpSample`] after iteration `i`; `before` is
    /// [`drain_events`](Self::drain_events) at the previous sample, and the
    /// result the new one.
    fn sample_pcp(&mut self, i: u64, before: (u64, u64)) -> (u64, u64) {
        let now = self.drain_events();
        let zt = self.pa.zonelist()[0];
        let ps = self.pa.pageset_of(zt, self.cpu.id()).unwrap_or_default();
        self.pcp_series.push(PcpSample {
            iteration: i,
            count: ps.count,
            high: ps.high,
            high_min: ps.high_min,
            drains: now.0 - before.0,
            drained_pages: now.1 - before.1,
        });
        now
    }

    fn long_busy_list_alloc_test(&mut self) -> CaseRet {
        let array = self.vmalloc(8 * LONG_BUSY_LIST_AREAS as u64)?;
        let ptr: Vec<Option<u64>> = (0..LONG_BUSY_LIST_AREAS).map(|_| self.vmalloc(PAGE_SIZE).ok()).collect();
        let rv = (|| {
            let every = u64::from(self.p.pcp_sample_interval);
            let mut drained = self.drain_events();
            for i in 0..self.p.loops() {
                let ptr_1 = self.vmalloc(100 * PAGE_SIZE)?;
                let ptr_2 = match self.vmalloc(PAGE_SIZE) {
                    Ok(p) => p,
                    Err(e) => {
                        self.vfree(ptr_1)?;
                        return Err(e);
                    }
                };
                self.poke(ptr_1, 0)?;
                self.poke(ptr_2, 1)?;
                self.msleep(self.p.msleep_before_free);
                self.vfree(ptr_1)?;
                self.vfree(ptr_2)?;
                if every != 0 && i % every == 0 {
                    drained = self.sample_pcp(i, drained);
                }
            }
            Ok(())
        })();
        let mut rv = rv;
        for &p in &ptr {
            rv = rv.and(self.vfree_opt(p));
        }
        rv.and(self.vfree(array))
    }

    fn random_size_alloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            // get_random_u32_inclusive(1, 100)
            let n = 1 + self.rng.below(100);
            let p = self.vmalloc(n * PAGE_SIZE)?;
            self.poke(p, 1)?;
            self.vfree(p)?;
        }
        Ok(())
    }

    fn fix_align_alloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let ptr = self.vmalloc_node(5 * PAGE_SIZE, FIX_ALIGN)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    fn random_size_align_alloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            // get_random_u8()
            let rnd = self.rng.next_u64() as u8;
            let align = 1u64 << (rnd % 23);
            let size = (u64::from(rnd % 10) + 1) * PAGE_SIZE;
            let ptr = self.vmalloc_node(size, align)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    /// Expected to fail: an alignment beyond the vmalloc range.
    fn align_shift_alloc_test(&mut self) -> CaseRet {
        for i in 0..BITS_PER_LONG {
            let ptr = self.vmalloc_node(PAGE_SIZE, 1u64 << i).map_err(|e| format!("align 1<<{i}: {e}"))?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    fn pcpu_alloc_test(&mut self) -> CaseRet {
        let n = self.p.nr_pcpu_objects.max(1) as usize;
        let array = self.vmalloc(8 * n as u64)?;
        let mut rv = Ok(());
        let mut pcpu = Vec::with_capacity(n);
        for _ in 0..n {
            // get_random_u32_inclusive(1, PAGE_SIZE / 4)
            let size = 1 + self.rng.below(PAGE_SIZE / 4);
            // 1 << get_random_u32_inclusive(1, 11)
            let align = 1u64 << (1 + self.rng.below(11));
            match self.pcpu.alloc_percpu(self.vm, self.cpu, size, align) {
                Ok(p) => pcpu.push(p),
                Err(e) => {
                    if rv.is_ok() {
                        rv = Err(e.to_string());
                    }
                }
            }
        }
        for p in pcpu {
            if let Err(e) = self.pcpu.free_percpu(self.vm, self.cpu, p)
                && rv.is_ok()
            {
                rv = Err(e.to_string());
            }
        }
        rv.and(self.vfree(array))
    }

    fn kvfree_rcu_1_arg_vmalloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let p = self.vmalloc(PAGE_SIZE)?;
            self.poke(p + KVFREE_ARRAY_OFFSET, b'a')?;
            self.vm.kvfree_rcu_mightsleep(self.cpu, p).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn kvfree_rcu_2_arg_vmalloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let p = self.vmalloc(PAGE_SIZE)?;
            self.poke(p + KVFREE_ARRAY_OFFSET, b'a')?;
            self.vm.kvfree_rcu(self.cpu, p).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn vm_map_ram_test(&mut self) -> CaseRet {
        let map_nr_pages = self.p.pages();
        let mut slots: Vec<Option<Pfn>> = vec![None; map_nr_pages];
        let nr_allocated = self.pa.alloc_pages_bulk(self.cpu, Gfp::GFP_KERNEL, &mut slots);
        let pages: Vec<Pfn> = slots.iter().flatten().copied().collect();
        let mut rv = if nr_allocated != map_nr_pages {
            Err(format!("alloc_pages_bulk: {nr_allocated} of {map_nr_pages} pages"))
        } else {
            (|| {
                for _ in 0..self.p.loops() {
                    let v = self.vm.vm_map_ram(self.cpu, &pages).map_err(|e| format!("vm_map_ram: {e}"))?;
                    self.poke(v, b'a')?;
                    self.vm.vm_unmap_ram(self.cpu, v, map_nr_pages).map_err(|e| format!("vm_unmap_ram: {e}"))?;
                }
                Ok(())
            })()
        };
        for p in pages {
            if let Err(e) = self.pa.free_pages(self.cpu, p, 0)
                && rv.is_ok()
            {
                rv = Err(format!("__free_page: {e}"));
            }
        }
        rv
    }

    /// Expected to fail (7.2 marks it xfail): `__vmalloc()` with
    /// GFP_ATOMIC or GFP_NOWAIT, chosen at random, with preemption off.
    fn no_block_alloc_test(&mut self) -> CaseRet {
        let size = self.p.pages() as u64 * PAGE_SIZE;
        for _ in 0..self.p.loops() {
            // get_random_u8() % 2
            let use_atomic = (self.rng.next_u64() as u8) % 2 == 1;
            let gfp = if use_atomic { Gfp::GFP_ATOMIC } else { Gfp::GFP_NOWAIT };
            let ptr = self.vm.__vmalloc_node(self.cpu, size, 1, gfp).map_err(|e| e.to_string())?;
            self.poke(ptr, 0)?;
            self.vfree(ptr)?;
        }
        Ok(())
    }

    /// `vrealloc()` through each of its paths per iteration: allocate one
    /// page, grow to four (a new area and a copy), shrink to one (the tail
    /// pages unmapped and freed), to half a page and back (in place), and
    /// check the first byte survives each step.
    fn vrealloc_test(&mut self) -> CaseRet {
        for _ in 0..self.p.loops() {
            let ptr = self.vrealloc(None, PAGE_SIZE)?;
            self.poke(ptr, b'a')?;
            let mut cur = ptr;
            let rv = (|| {
                for size in [4 * PAGE_SIZE, PAGE_SIZE, PAGE_SIZE / 2, PAGE_SIZE] {
                    cur = self.vrealloc(Some(cur), size)?;
                    if self.peek(cur)? != b'a' {
                        return Err(format!("vrealloc to {size} bytes lost the contents"));
                    }
                }
                Ok(())
            })();
            self.vfree(cur)?;
            rv?;
        }
        Ok(())
    }

    /// `vrealloc(p, size, GFP_KERNEL)`; a NULL return is the case's failure.
    fn vrealloc(&self, p: Option<u64>, size: u64) -> Result<u64, String> {
        match self.vm.vrealloc(self.cpu, p, size, Gfp::GFP_KERNEL) {
            Ok(Some(a)) => Ok(a),
            Ok(None) => Err(format!("vrealloc to {size} bytes returned NULL")),
            Err(e) => Err(e.to_string()),
        }
    }
}
