//! The vmalloc range's addresses that no vmap area may take: the list-head
//! window of the kernel's statics ([`KERNEL_DATA_LISTS`], at the start of
//! the image's `[_data, _end)` segment; see `mmlab_engine::mm::list`).
//!
//! With the kernel image in RAM the window lies inside the `_data` area of
//! `declare_kernel_vmas()`, which is busy for ever, so nothing more is
//! needed. Without the image (`boot.state=bare`, `arm64.kernel_image=0`)
//! the kernel has no counterpart (its image is always there), and mmlab
//! keeps its statics where the image would have them: `vmalloc_init()`
//! takes the window out of the free space, as if the static `vm_struct` of
//! that piece of the image were on `vmlist`, but lists no area for it, so
//! /proc/vmallocinfo of a bare machine stays empty. Either way no vmalloc,
//! vmap or vm_map_ram of any size can cover a list head.

use crate::vmap_area::FreeVmapTree;
use mmlab_engine::arch::arm64::kimage::KernelVma;
use mmlab_engine::mm::list::{KERNEL_DATA_LISTS, KERNEL_DATA_LISTS_SIZE};

/// The list-head window as `[start, end)`.
pub const LIST_HEAD_WINDOW: (u64, u64) = (KERNEL_DATA_LISTS, KERNEL_DATA_LISTS + KERNEL_DATA_LISTS_SIZE);

/// Whether one of the early areas `vmas` holds the whole window.
pub(crate) fn window_in_early_areas(vmas: &[KernelVma]) -> bool {
    let (s, e) = LIST_HEAD_WINDOW;
    vmas.iter().any(|v| v.addr <= s && e <= v.addr + v.size)
}

/// Take the window out of `free` when no early area holds it; the range
/// taken, for the invariant check. Nothing is taken when the window is
/// not free (it is then busy already).
pub(crate) fn reserve_list_head_window(free: &mut FreeVmapTree, vmas: &[KernelVma]) -> Option<(u64, u64)> {
    if window_in_early_areas(vmas) {
        return None;
    }
    let (s, e) = LIST_HEAD_WINDOW;
    free.alloc(e - s, mmlab_engine::PAGE_SIZE, s, e).ok().map(|a| (a, a + (e - s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AreaKind, Vmalloc, VmallocConfig, VmallocError};
    use mmlab_engine::arch::arm64::memory::VMALLOC_START;
    use mmlab_engine::{Machine, MachineConfig, PAGE_SIZE};
    use mmlab_pcp::{AllocatorConfig, PageAllocator};

    fn overlaps(a: u64, size: u64) -> bool {
        let (s, e) = LIST_HEAD_WINDOW;
        a < e && s < a + size
    }

    /// Ask for every free byte of the vmalloc range, the largest request
    /// that can succeed first, until nothing is left (vmap areas only:
    /// no pages are mapped): no area ever covers the window. A request
    /// for the whole range cannot be had at all.
    fn take_everything(vm: &Vmalloc<'_, '_>, m: &Machine) -> usize {
        let cpu = m.cpu(0).unwrap();
        let whole = m.va_layout().vmalloc_end() - VMALLOC_START;
        assert!(matches!(vm.alloc_vmap_area(&cpu, whole, PAGE_SIZE), Err(VmallocError::NoVmapSpace { .. })));
        let mut taken = Vec::new();
        loop {
            let largest = vm.free.lock().largest_free();
            if largest == 0 {
                break;
            }
            let a = vm.alloc_vmap_area(&cpu, largest, PAGE_SIZE).unwrap();
            assert!(!overlaps(a, largest), "area {a:#x}+{largest:#x} covers the list-head window");
            taken.push((a, largest));
        }
        assert_eq!(vm.free_bytes(), 0);
        for &(a, size) in &taken {
            vm.free.lock().free(a, size).unwrap();
        }
        taken.len()
    }

    #[test]
    fn the_window_is_in_the_images_data_area() {
        let m = Machine::boot(MachineConfig::with("1G", 1).unwrap()).unwrap();
        let k = *m.kernel_image().expect("the real boot state has the image");
        let (s, e) = LIST_HEAD_WINDOW;
        // Inside [_data, _end), the last of declare_kernel_vmas()'s areas.
        assert!(k.va(k.init_end()) <= s && e <= k.va_end(), "{s:#x}..{e:#x}");
        let vmas = &m.boot_state().kernel_vmas;
        assert!(window_in_early_areas(vmas));
        assert_eq!(vmas.iter().filter(|v| v.addr <= s && e <= v.addr + v.size).count(), 1);
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        assert_eq!(vm.reserved, None, "the image's area holds it: nothing else reserved");
        let holder = vm.areas().into_iter().find(|a| a.addr <= s && e <= a.addr + a.size).unwrap();
        assert_eq!((holder.kind, holder.caller), (AreaKind::Early, "paging_init+0x3f4/0x440"));
        // One free area after the image: it goes in one piece.
        assert_eq!(take_everything(&vm, &m), 1);
        vm.check().unwrap();
    }

    #[test]
    fn without_the_image_the_window_is_kept_out_of_the_free_space() {
        let m = Machine::boot(MachineConfig::with("1G", 1).unwrap().bare()).unwrap();
        assert!(m.kernel_image().is_none());
        let pa = PageAllocator::boot(&m, AllocatorConfig::default()).unwrap();
        let vm = Vmalloc::new(&pa, VmallocConfig::default());
        assert_eq!(vm.reserved, Some(LIST_HEAD_WINDOW));
        assert_eq!(vm.vmallocinfo(), "", "no area is listed for it");
        assert_eq!(vm.free_bytes(), m.va_layout().vmalloc_end() - VMALLOC_START - KERNEL_DATA_LISTS_SIZE);
        vm.check().unwrap();
        // The free space is the two sides of the window: two requests.
        assert_eq!(take_everything(&vm, &m), 2);
        vm.check().unwrap();
    }
}
