//! The percpu allocator (mm/percpu.c), kernel-shaped enough for
//! test_vmalloc's `pcpu_alloc_test`.
//!
//! # The algorithm
//!
//! Per-cpu memory comes in *chunks*. A chunk has one *unit* per CPU, all the
//! same size, laid out back to back in one area of the vmalloc range, which
//! `pcpu_create_chunk()` (the vmalloc backend, mm/percpu-vm.c) takes with
//! `pcpu_get_vm_areas()` and populates with pages of its own
//! (the crate's `percpu_vm` module). An allocation reserves the same offset in every
//! unit: the returned pointer is the address in CPU 0's unit, and
//! `per_cpu_ptr(ptr, cpu)` adds `cpu * unit_size`.
//!
//! Inside a chunk, space is managed at `PCPU_MIN_ALLOC_SIZE` (4 bytes)
//! granularity with two bitmaps, as `pcpu_alloc_area` does: `alloc_map`
//! marks used slots and `bound_map` marks where each allocation starts (and
//! where the next one would), so a free needs only the address.
//!
//! The search is first fit at the requested alignment, chunk by chunk in
//! creation order. Each chunk keeps the kernel's chunk-wide hints
//! (`struct pcpu_block_md`): `first_free`, and the longest free run
//! `contig_hint` with its start. A chunk is scanned only if the request fits
//! inside that run at the requested alignment (`pcpu_check_block_hint`), and
//! the scan starts at `first_free`, so every scan succeeds: one bitmap scan
//! per allocation however many chunks there are. (Without the alignment
//! check, a workload of 35,000 small, highly aligned objects scans hundreds
//! of chunks that pass a size-only test and fail the alignment, per
//! allocation.) An allocation that cuts into the contig run rebuilds the
//! hints (`pcpu_chunk_refresh_hint`); a free folds its merged run in
//! (`pcpu_block_update`, which prefers the better-aligned of two equal runs).
//! When nothing fits, a new chunk is created; a chunk that becomes empty is
//! destroyed unless it is the only one (the kernel keeps spare empty chunks
//! and frees the rest from a workqueue).
//!
//! Each chunk also carries its metadata, allocated before its units as
//! `pcpu_alloc_chunk` does, with `pcpu_mem_zalloc` (vzalloc above a page,
//! kzalloc below, which mmlab does not count): `alloc_map` and `bound_map`
//! (4,608 bytes each: two pages), and, because the memcg's kernel memory
//! accounting is on (Debian's config; `need_pcpuobj_ext()`), `obj_exts`, a
//! `struct pcpuobj_ext` per 4-byte slot: 294,912 bytes, 72 pages, as many as
//! the units of a 2-CPU machine. On the real 7.2 kernel test_vmalloc's
//! pcpu_alloc_test allocates and frees twice the pages its objects need
//! for that reason.
//!
//! Fidelity: simplified. Units are populated at creation, not page by page
//! (`pcpu_populate_chunk`), there is no first (embedded) chunk and no
//! reserved chunk, the hints are kept per chunk only (the kernel also keeps
//! them per `PCPU_BITMAP_BLOCK_SIZE` block), and chunks are searched in
//! creation order rather than from the kernel's free-size slot lists.

use crate::error::VmallocError;
use crate::vmalloc::Vmalloc;
use bitvec::prelude::*;
use mmlab_engine::sync::Mutex;
use mmlab_engine::{Cpu, Gfp, PAGE_SIZE, Pfn};

use std::fmt;

/// `PCPU_MIN_ALLOC_SIZE`: allocation granularity.
pub const PCPU_MIN_ALLOC_SIZE: u64 = 4;
/// Unit size per CPU (`pcpu_unit_size`): that of Debian's arm64 7.2 kernel,
/// whose boot prints `pcpu-alloc: s109144 r8192 d30120 u147456` (36 pages;
/// the first chunk's static, reserved and dynamic parts rounded up, which
/// every later chunk's units repeat).
pub const PCPU_UNIT_SIZE: u64 = 36 * PAGE_SIZE;
/// `sizeof(struct pcpuobj_ext)` with CONFIG_MEMCG and without
/// CONFIG_MEM_ALLOC_PROFILING (Debian's config): one `obj_cgroup` pointer.
pub const PCPUOBJ_EXT_SIZE: u64 = 8;
/// `PCPU_MIN_UNIT_SIZE`: the largest allocation (`pcpu_alloc` refuses more).
pub const PCPU_MIN_UNIT_SIZE: u64 = 32 << 10;

const SLOTS: usize = (PCPU_UNIT_SIZE / PCPU_MIN_ALLOC_SIZE) as usize;
/// Pages per unit.
const UNIT_PAGES: u64 = PCPU_UNIT_SIZE / PAGE_SIZE;

/// Why a percpu call failed; nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PercpuError {
    /// Size 0 or above `PCPU_MIN_UNIT_SIZE`, or an alignment that is not a
    /// power of two or above a page.
    BadRequest {
        /// The size asked for, in bytes.
        size: u64,
        /// The alignment asked for, in bytes.
        align: u64,
    },
    /// No chunk could be created.
    NoMemory(VmallocError),
    /// Not a pointer this allocator returned.
    NotPercpu {
        /// The pointer given.
        ptr: u64,
    },
}

impl fmt::Display for PercpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PercpuError::BadRequest { size, align } => {
                write!(f, "illegal size ({size}) or align ({align}) for percpu allocation")
            }
            PercpuError::NoMemory(e) => write!(f, "percpu: allocation failed: {e}"),
            PercpuError::NotPercpu { ptr } => write!(f, "free_percpu of {ptr:#x}, not a percpu pointer"),
        }
    }
}
impl std::error::Error for PercpuError {}

/// `struct pcpu_chunk`, with the chunk-wide `struct pcpu_block_md` hints
/// folded in.
#[derive(Clone, Debug)]
struct Chunk {
    /// Start of the vmalloc area (CPU 0's unit).
    base: u64,
    /// The vmalloc'd metadata (`obj_exts`, `alloc_map`, `bound_map`).
    meta: Vec<u64>,
    /// The units' pages, unit by unit (`pcpu_alloc_pages()`).
    pages: Vec<Pfn>,
    alloc_map: BitVec,
    bound_map: BitVec,
    free_bytes: u64,
    /// `contig_hint`: the longest free run, in slots.
    contig: usize,
    /// `contig_hint_start`: where that run starts.
    contig_start: usize,
    /// `first_free`: the lowest free slot (`SLOTS` when full).
    first_free: usize,
}

impl Chunk {
    /// A fresh chunk: one free run over the whole unit.
    fn new(base: u64, meta: Vec<u64>, pages: Vec<Pfn>) -> Chunk {
        let mut bound_map = bitvec![0; SLOTS + 1];
        bound_map.set(SLOTS, true);
        Chunk {
            base,
            meta,
            pages,
            alloc_map: bitvec![0; SLOTS],
            bound_map,
            free_bytes: PCPU_UNIT_SIZE,
            contig: SLOTS,
            contig_start: 0,
            first_free: 0,
        }
    }

    /// `pcpu_block_update()`: fold the free run `[start, end)` into the
    /// hints. A run as long as the hint replaces it if it starts at a better
    /// alignment, as the kernel prefers.
    fn block_update(&mut self, start: usize, end: usize) {
        let len = end - start;
        self.first_free = self.first_free.min(start);
        if len > self.contig {
            self.contig = len;
            self.contig_start = start;
        } else if len == self.contig
            && len > 0
            && self.contig_start != 0
            && (start == 0 || start.trailing_zeros() > self.contig_start.trailing_zeros())
        {
            self.contig_start = start;
        }
    }

    /// `pcpu_chunk_refresh_hint()`: rebuild the hints by walking every free
    /// run from the first free slot.
    fn refresh_hint(&mut self) {
        self.contig = 0;
        self.contig_start = 0;
        self.first_free = self.alloc_map.first_zero().unwrap_or(SLOTS);
        let mut i = self.first_free;
        while i < SLOTS {
            let Some(z) = self.alloc_map[i..].first_zero() else { break };
            let start = i + z;
            let len = self.alloc_map[start..].first_one().unwrap_or(SLOTS - start);
            self.block_update(start, start + len);
            i = start + len;
        }
    }

    /// `pcpu_check_block_hint()`: does the contig hint hold `slots` at
    /// `align_slots`? A chunk whose hint cannot is skipped without a scan,
    /// even if a smaller aligned run elsewhere would do, as in the kernel.
    fn hint_fits(&self, slots: usize, align_slots: usize) -> bool {
        let start = self.contig_start.next_multiple_of(align_slots);
        start + slots <= self.contig_start + self.contig
    }

    /// `pcpu_find_block_fit()`: first fit of `slots` slots at `align_slots`,
    /// scanning from `first_free`, for a chunk whose hint fits.
    fn find_fit(&self, slots: usize, align_slots: usize) -> Option<usize> {
        if !self.hint_fits(slots, align_slots) {
            return None;
        }
        let mut i = self.first_free;
        while i + slots <= SLOTS {
            let start = i.next_multiple_of(align_slots);
            if start + slots > SLOTS {
                return None;
            }
            match self.alloc_map[start..start + slots].first_one() {
                None => return Some(start),
                Some(used) => {
                    // Skip past the used run.
                    let after = start + used;
                    i = after + self.alloc_map[after..].first_zero().unwrap_or(SLOTS - after);
                }
            }
        }
        None
    }

    /// `pcpu_alloc_area()`: mark `[off, off + slots)` used and update the
    /// hints.
    fn alloc_area(&mut self, off: usize, slots: usize) {
        self.alloc_map[off..off + slots].fill(true);
        self.bound_map.set(off, true);
        self.bound_map.set(off + slots, true);
        self.free_bytes -= slots as u64 * PCPU_MIN_ALLOC_SIZE;
        let breaks_hint = off < self.contig_start + self.contig && self.contig_start < off + slots;
        if breaks_hint {
            self.refresh_hint();
        } else if off == self.first_free {
            self.first_free = self.alloc_map[off..].first_zero().map_or(SLOTS, |z| off + z);
        }
    }

    /// `pcpu_free_area()`: free the allocation starting at slot `off`; the
    /// number of bytes freed.
    fn free_area(&mut self, off: usize) -> u64 {
        // The allocation ends at the next boundary bit.
        let end = off + 1 + self.bound_map[off + 1..].first_one().expect("the map ends with a boundary");
        self.alloc_map[off..end].fill(false);
        // The start bit stays if the previous allocation ends here.
        if off == 0 || !self.alloc_map[off - 1] {
            self.bound_map.set(off, false);
        }
        // Keep the end boundary only if an allocation starts there.
        if end < SLOTS && !self.alloc_map[end] {
            self.bound_map.set(end, false);
        }
        let bytes = (end - off) as u64 * PCPU_MIN_ALLOC_SIZE;
        self.free_bytes += bytes;
        let left = self.alloc_map[..off].last_one().map_or(0, |i| i + 1);
        let right = self.alloc_map[end..].first_one().map_or(SLOTS, |i| end + i);
        self.block_update(left, right);
        bytes
    }
}

mmlab_engine::counter_snapshot! {
    /// Counters of the percpu allocator (the `pcpu_stats` of
    /// `CONFIG_PERCPU_STATS` and the `percpu:*` tracepoints).
    pub struct PercpuCounts {
        /// `pcpu_stats.nr_alloc`; one `percpu:percpu_alloc_percpu`
        /// tracepoint each.
        pub allocs: u64,
        /// `pcpu_stats.nr_dealloc`; one `percpu:percpu_free_percpu`
        /// tracepoint each.
        pub frees: u64,
        /// One `percpu:percpu_create_chunk` tracepoint each.
        pub chunks_created: u64,
        /// One `percpu:percpu_destroy_chunk` tracepoint each.
        pub chunks_destroyed: u64,
        /// mmlab's own, instrumented: bitmap scans of a chunk
        /// (`pcpu_find_block_fit` past the hint check); with the hints, one
        /// per allocation.
        pub chunk_scans: u64,
    }
}

/// The percpu allocator.
#[derive(Debug)]
pub struct PercpuAllocator {
    chunks: Mutex<Vec<Chunk>>,
    counts: Mutex<PercpuCounts>,
}

impl Default for PercpuAllocator {
    fn default() -> Self {
        PercpuAllocator::new()
    }
}

impl PercpuAllocator {
    /// No chunks yet; the first allocation creates one.
    pub fn new() -> PercpuAllocator {
        PercpuAllocator { chunks: Mutex::new(Vec::new()), counts: Mutex::new(PercpuCounts::default()) }
    }

    /// Counters.
    pub fn counts(&self) -> PercpuCounts {
        *self.counts.lock()
    }
    /// Chunks alive.
    pub fn nr_chunks(&self) -> usize {
        self.chunks.lock().len()
    }
    /// Pages the chunks' units hold (allocated by the chunks, not by
    /// their vmalloc areas).
    pub fn nr_pages(&self) -> u64 {
        self.chunks.lock().iter().map(|c| c.pages.len() as u64).sum()
    }

    /// `per_cpu_ptr(ptr, cpu)`: the address of `cpu`'s copy.
    pub fn per_cpu_ptr(ptr: u64, cpu: usize) -> u64 {
        ptr + cpu as u64 * PCPU_UNIT_SIZE
    }

    /// `__alloc_percpu(size, align)`: zeroed, `size` bytes at `align` in
    /// every CPU's unit. Returns CPU 0's address.
    ///
    /// # Errors
    /// [`PercpuError::BadRequest`] for a size of 0 or above `PCPU_MIN_UNIT_SIZE` or a bad
    /// alignment, [`PercpuError::NoMemory`] when a new chunk cannot be vmalloc'd. Nothing is taken
    /// on error.
    pub fn alloc_percpu<'m>(
        &self,
        vm: &Vmalloc<'_, 'm>,
        cpu: &Cpu<'m>,
        size: u64,
        align: u64,
    ) -> Result<u64, PercpuError> {
        let align = align.max(PCPU_MIN_ALLOC_SIZE);
        if size == 0 || size > PCPU_MIN_UNIT_SIZE || !align.is_power_of_two() || align > PAGE_SIZE {
            return Err(PercpuError::BadRequest { size, align });
        }
        let bytes = size.next_multiple_of(PCPU_MIN_ALLOC_SIZE);
        let slots = (bytes / PCPU_MIN_ALLOC_SIZE) as usize;
        let align_slots = (align / PCPU_MIN_ALLOC_SIZE) as usize;
        let mut chunks = self.chunks.lock();
        let mut scans = 0;
        let found = chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.free_bytes >= bytes && c.hint_fits(slots, align_slots))
            .find_map(|(i, c)| {
                scans += 1;
                c.find_fit(slots, align_slots).map(|off| (i, off))
            });
        let (ci, off) = match found {
            Some(x) => x,
            None => {
                // pcpu_create_chunk(): the metadata (pcpu_alloc_chunk), the
                // area (pcpu_get_vm_areas), then every unit populated.
                let meta = Self::alloc_chunk_meta(vm, cpu)?;
                let (base, pages) = match Self::create_chunk_area(vm, cpu) {
                    Ok(x) => x,
                    Err(e) => {
                        Self::free_chunk_meta(vm, cpu, meta);
                        return Err(PercpuError::NoMemory(e));
                    }
                };
                let c = Chunk::new(base, meta, pages);
                scans += 1;
                let off = c.find_fit(slots, align_slots).expect("an empty chunk fits any legal request");
                chunks.push(c);
                self.counts.lock().chunks_created += 1;
                (chunks.len() - 1, off)
            }
        };
        let c = &mut chunks[ci];
        c.alloc_area(off, slots);
        let ptr = c.base + off as u64 * PCPU_MIN_ALLOC_SIZE;
        drop(chunks);
        // pcpu_alloc() zeroes every CPU's copy.
        let zeroes = vec![0; bytes as usize];
        for u in 0..vm.m.nr_cpus() {
            let _ =
                mmlab_engine::arch::arm64::pgtable::mmu::write_bytes(cpu, &vm.asp, Self::per_cpu_ptr(ptr, u), &zeroes);
        }
        let mut counts = self.counts.lock();
        counts.allocs += 1;
        counts.chunk_scans += scans;
        Ok(ptr)
    }

    /// `pcpu_alloc_chunk()`'s vmalloc'd metadata: `alloc_map`, `bound_map`
    /// and `obj_exts`, each by `pcpu_mem_zalloc()` (vzalloc when over a
    /// page; every one is, at this unit size).
    fn alloc_chunk_meta<'m>(vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>) -> Result<Vec<u64>, PercpuError> {
        let longs = |bits: u64| bits.div_ceil(64) * 8;
        let sizes = [longs(SLOTS as u64), longs(SLOTS as u64 + 1), SLOTS as u64 * PCPUOBJ_EXT_SIZE];
        let mut meta = Vec::with_capacity(sizes.len());
        for size in sizes.into_iter().filter(|&s| s > PAGE_SIZE) {
            match vm.__vmalloc_node(cpu, size, 1, Gfp::GFP_KERNEL | Gfp::__GFP_ZERO) {
                Ok(a) => meta.push(a),
                Err(e) => {
                    Self::free_chunk_meta(vm, cpu, meta);
                    return Err(PercpuError::NoMemory(e));
                }
            }
        }
        Ok(meta)
    }

    /// The metadata of a chunk that could not be made, back (an error path:
    /// the areas were just allocated, so the vfrees cannot fail).
    fn free_chunk_meta<'m>(vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>, meta: Vec<u64>) {
        for a in meta {
            let _ = vm.vfree(cpu, a);
        }
    }

    /// `pcpu_get_vm_areas()` of one unit per CPU, then
    /// `pcpu_populate_chunk()` of all of it: `pcpu_alloc_pages()` (every
    /// unit's pages, unit by unit, `GFP_KERNEL | __GFP_HIGHMEM`; `pcpu_alloc`
    /// zeroes what it hands out), `pcpu_map_pages()` unit by unit. Nothing
    /// is left taken on error.
    fn create_chunk_area<'m>(vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>) -> Result<(u64, Vec<Pfn>), VmallocError> {
        let nr_units = vm.m.nr_cpus() as u64;
        let base = vm.pcpu_get_vm_areas(cpu, nr_units * PCPU_UNIT_SIZE, PAGE_SIZE)?;
        let nr_pages = nr_units * UNIT_PAGES;
        let mut pages = Vec::with_capacity(nr_pages as usize);
        let mut mapped = 0;
        let r = (|| {
            for _ in 0..nr_pages {
                let p = vm
                    .pa
                    .alloc_pages(cpu, Gfp::GFP_KERNEL | Gfp::__GFP_HIGHMEM, 0)
                    .ok_or(VmallocError::NoMemory { size: PAGE_SIZE })?;
                pages.push(p);
            }
            for (u, unit) in pages.chunks(UNIT_PAGES as usize).enumerate() {
                vm.pcpu_map_pages(cpu, base + u as u64 * PCPU_UNIT_SIZE, unit)?;
                mapped += 1;
            }
            Ok(())
        })();
        if let Err(e) = r {
            Self::depopulate(vm, cpu, base, mapped, &pages);
            vm.pcpu_free_vm_areas(cpu, base).expect("the area was just made");
            return Err(e);
        }
        Ok((base, pages))
    }

    /// `pcpu_depopulate_chunk()`: `pcpu_unmap_pages()` of the first
    /// `mapped` units, one `pcpu_post_unmap_tlb_flush()`, then
    /// `pcpu_free_pages()`.
    fn depopulate<'m>(vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>, base: u64, mapped: u64, pages: &[Pfn]) {
        for u in 0..mapped {
            vm.pcpu_unmap_pages(cpu, base + u * PCPU_UNIT_SIZE, UNIT_PAGES)
                .expect("a populated unit is mapped page by page");
        }
        if mapped > 0 {
            vm.pcpu_post_unmap_tlb_flush(cpu, base, base + mapped * PCPU_UNIT_SIZE);
        }
        for &p in pages {
            vm.pa.free_pages(cpu, p, 0).expect("a unit's pages are order-0 pages of its own");
        }
    }

    /// `pcpu_balance_free()` of one empty chunk: depopulate it, then
    /// `pcpu_destroy_chunk()`: the area (`pcpu_free_vm_areas()`), then the
    /// metadata.
    fn destroy_chunk<'m>(&self, vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>, c: Chunk) -> Result<(), PercpuError> {
        let units = c.pages.len() as u64 / UNIT_PAGES;
        Self::depopulate(vm, cpu, c.base, units, &c.pages);
        vm.pcpu_free_vm_areas(cpu, c.base).map_err(PercpuError::NoMemory)?;
        for a in c.meta {
            vm.vfree(cpu, a).map_err(PercpuError::NoMemory)?;
        }
        self.counts.lock().chunks_destroyed += 1;
        Ok(())
    }

    /// Check every chunk against its bitmaps: the free byte count, the
    /// boundary map (a boundary wherever a used run starts or ends), and the
    /// hints, which must be exact (`contig` the longest free run, starting at
    /// `contig_start`; `first_free` the first free slot).
    ///
    /// Each chunk must also own its area: a live percpu area of one unit
    /// per CPU at its base (so no vmalloc area can overlap a live chunk),
    /// and every unit's page must be allocated.
    ///
    /// # Errors
    /// The first inconsistency found, described (a bug in mmlab).
    pub fn check(&self, vm: &Vmalloc<'_, '_>) -> Result<(), String> {
        let units = vm.m.nr_cpus() as u64 * PCPU_UNIT_SIZE;
        for c in self.chunks.lock().iter() {
            let at = c.base;
            if vm.percpu_area_size(at) != Some(units) {
                return Err(format!(
                    "percpu chunk {at:#x}: no percpu area of {units} bytes there (vmalloc area {:?})",
                    vm.areas().iter().find(|a| a.addr <= at && at < a.addr + a.size).map(|a| (a.addr, a.size, a.kind))
                ));
            }
            if c.pages.len() as u64 != units / PAGE_SIZE {
                return Err(format!("percpu chunk {at:#x}: {} pages for {units} bytes of units", c.pages.len()));
            }
            if let Some(p) = c.pages.iter().find(|&&p| vm.pa.check_allocated(p).is_err()) {
                return Err(format!("percpu chunk {at:#x}: unit page {p:?} is not allocated"));
            }
            let free = c.alloc_map.count_zeros() as u64 * PCPU_MIN_ALLOC_SIZE;
            if free != c.free_bytes {
                return Err(format!("percpu chunk {at:#x}: free_bytes {} but {free} bytes free", c.free_bytes));
            }
            for i in 0..=SLOTS {
                let before = i > 0 && c.alloc_map[i - 1];
                let here = i < SLOTS && c.alloc_map[i];
                if here != before && !c.bound_map[i] {
                    return Err(format!("percpu chunk {at:#x}: used run edge at slot {i} without a boundary"));
                }
            }
            let mut exact = c.clone();
            exact.refresh_hint();
            if (exact.contig, exact.first_free) != (c.contig, c.first_free)
                || c.contig_start + c.contig > SLOTS
                || c.alloc_map[c.contig_start..c.contig_start + c.contig].any()
            {
                return Err(format!(
                    "percpu chunk {at:#x}: hints contig {} at {} first_free {}, bitmap says contig {} first_free {}",
                    c.contig, c.contig_start, c.first_free, exact.contig, exact.first_free
                ));
            }
        }
        Ok(())
    }

    /// Destroy every empty chunk, the last one too (the balance work's job;
    /// for a clean teardown).
    ///
    /// # Errors
    /// [`PercpuError::NoMemory`] with the error of vfreeing a chunk (none is expected).
    pub fn shrink<'m>(&self, vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>) -> Result<(), PercpuError> {
        let empty: Vec<Chunk> = {
            let mut chunks = self.chunks.lock();
            let (empty, busy): (Vec<Chunk>, Vec<Chunk>) =
                std::mem::take(&mut *chunks).into_iter().partition(|c| c.free_bytes == PCPU_UNIT_SIZE);
            *chunks = busy;
            empty
        };
        for c in empty {
            self.destroy_chunk(vm, cpu, c)?;
        }
        Ok(())
    }

    /// `free_percpu(ptr)`.
    ///
    /// # Errors
    /// [`PercpuError::NotPercpu`] for a pointer this allocator did not return (or returned and
    /// freed); nothing is changed.
    pub fn free_percpu<'m>(&self, vm: &Vmalloc<'_, 'm>, cpu: &Cpu<'m>, ptr: u64) -> Result<(), PercpuError> {
        let mut chunks = self.chunks.lock();
        let Some(ci) = chunks.iter().position(|c| ptr >= c.base && ptr < c.base + PCPU_UNIT_SIZE) else {
            return Err(PercpuError::NotPercpu { ptr });
        };
        let c = &mut chunks[ci];
        let off = ((ptr - c.base) / PCPU_MIN_ALLOC_SIZE) as usize;
        if !(ptr - c.base).is_multiple_of(PCPU_MIN_ALLOC_SIZE) || !c.bound_map[off] || !c.alloc_map[off] {
            return Err(PercpuError::NotPercpu { ptr });
        }
        c.free_area(off);
        let destroy = (c.free_bytes == PCPU_UNIT_SIZE && chunks.len() > 1).then(|| chunks.remove(ci));
        drop(chunks);
        if let Some(c) = destroy {
            self.destroy_chunk(vm, cpu, c)?;
        }
        self.counts.lock().frees += 1;
        Ok(())
    }
}
