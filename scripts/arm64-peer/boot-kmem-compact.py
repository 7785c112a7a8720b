#!/usr/bin/env python3
"""Turn a peer's boot trace into the compact base records mmlab's emulated boot
replays: the page allocator's (pcp/data/boot-work-7.2-virt.txt) and vmalloc's
(vmalloc/data/boot-vmalloc-7.2-virt.txt). What scales with the machine's memory
and CPUs is cut out of the trace and left as rule markers (`r ...`) that the
crates expand for the machine at hand (pcp/src/boot_work/rules.rs,
vmalloc/src/boot/rules.rs).

usage:
  boot-kmem-compact.py pages   BOOT_KMEM KERNEL_TXT > pcp/data/boot-work-7.2-virt.txt
  boot-kmem-compact.py vmalloc BOOT_KMEM KERNEL_TXT > vmalloc/data/boot-vmalloc-7.2-virt.txt
  boot-kmem-compact.py sites   DIR...                  (pages per allocation site, one column per DIR)

The trace must carry kernel stacks and the task and vmalloc events: boot.sh
with PEER_BOOT_TRACE=1 and the kernel command line extended to
  trace_event=kmem:mm_page_alloc,kmem:mm_page_free,kmem:mm_page_free_batched,
    vmalloc:alloc_vmap_area,vmalloc:free_vmap_area_noflush,vmalloc:purge_vmap_area_lazy,
    cma:cma_alloc_start,cma:cma_alloc_finish,percpu:percpu_create_chunk,
    sched:sched_process_fork,sched:sched_process_exit
  trace_options=stacktrace trace_buf_size=8M
and /init writing "show FILE" to /sys/kernel/tracing/trace_marker before it
prints each FILE (tracefs mounted first), so the records stop where the
capture read /proc/vmstat. The shipped records come from Debian 7.2.13 under
qemu -M virt -cpu neoverse-n1 with virtio-net: pages from 4G/1 CPU, vmalloc
from 4G/2 CPUs (2026-12-02).

Page record (`pages`), one line per step, allocations numbered from 0:
  g <i> <gfp>                 gfp string number i (the names ftrace prints)
  a <cpu> <order> <mt> <g>    an allocation (alloc #k for the k-th 'a')
  f <cpu> <k> <off> <order>   free of 2^order pages at page offset <off> of alloc #k
  s <k>                       alloc #k was split into order-0 pages first
  r <rule> [arg]              the work of a rule goes here (early, hash NAME,
                              futex, percpu, memory_blocks, ftrace_free), or
                              where free_initrd_mem() gave the initrd back
                              (initrd_free: mmlab frees it there)
Left out: the trace's ring buffers and /init's `mount -t tracefs` (the
observer); every page of a vmalloc
area, of a percpu chunk, and every kernel page table of the vmalloc range
(mmlab's vmalloc allocates those itself); the hash tables, futex queues,
memory-block devices (rule markers instead); frees of memory the page
allocator got from memblock (mmlab frees it itself); frees of pages
allocated before the trace started (ftrace's group: the `ftrace_free` rule).
alloc_pages_bulk() allocations are not traced (no mm_page_alloc event):
copy_splice_read's, freed before the capture, are put back as
allocations at their frees.

vmalloc record (`vmalloc`):
  t <cpu>                     a task is created on cpu (copy_process: its stack), task #n
  x <cpu> <n>                 task #n exits; its stack is released on cpu
  i <cpu> <phys> <size> <caller>   ioremap #m of size bytes at phys
  u <cpu> <m>                 iounmap of ioremap #m
  v <cpu> <size> <zero> <caller>   vmalloc (zero: vzalloc) of size bytes
  r <rule>                    irq_stacks, percpu_kthreads, percpu_kworker,
                              idle_threads, dma_pools, pcpu_chunk, acomp_streams,
                              pci_iospace
"""
import re
import sys
from collections import defaultdict

HDR = re.compile(r"^(.+?)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s*(.*)$")


def parse(path):
    evs, cur = [], None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("=> "):
            if cur is not None:
                cur["stack"].append(re.sub(r"\+0x.*", "", line[3:].strip()))
            continue
        m = HDR.match(line)
        if not m or "<stack trace>" in line:
            continue
        task, cpu, ts, ev, rest = m.groups()
        f = {}
        for kv in rest.replace(": ", ":").split():
            if "=" in kv:
                k, v = kv.split("=", 1)
                f[k] = v
            elif ":" in kv:
                k, v = kv.split(":", 1)
                f[k] = v
        cur = dict(task=task.strip(), cpu=int(cpu), ev=ev, f=f, raw=rest, stack=[])
        evs.append(cur)
    return evs


def until_vmstat(evs):
    out = []
    for e in evs:
        if e["ev"] == "tracing_mark_write" and "show /proc/vmstat" in e["raw"]:
            return out
        out.append(e)
    return out


def tracefs_mount_pid(evs):
    """The pid of the `mount -t tracefs` a tracing /init runs before its
    first trace marker (the last `mount` to exit before it): the observer,
    which an untraced boot does not run."""
    pid = None
    for e in evs:
        if e["ev"] == "tracing_mark_write":
            break
        if e["ev"] == "sched_process_exit" and e["f"].get("comm") == "mount":
            pid = e["f"].get("pid")
    return pid


def task_pid(e):
    return e["task"].rsplit("-", 1)[-1]


def has(e, *names):
    return any(f in names for f in e["stack"])


def is_ring(e):
    return any(f.startswith(("rb_allocate", "alloc_cpu_data", "__rb_allocate")) for f in e["stack"])


def is_vmalloc_page(e):
    """Pages of vmalloc areas, percpu chunks, and kernel page tables of the
    vmalloc range: mmlab's vmalloc allocates these itself."""
    if has(e, "__vmalloc_node_range_noprof", "vm_area_alloc_pages", "pcpu_populate_chunk", "pcpu_alloc_pages"):
        return True
    kernel_pt = any(f.startswith(("__pte_alloc_kernel", "__pmd_alloc", "__pud_alloc", "pte_alloc_kernel")) for f in e["stack"])
    vmap = any(
        f.startswith(("vmap", "__vmap", "ioremap", "generic_ioremap", "__ioremap", "vmap_range_noflush", "pcpu_map_pages"))
        for f in e["stack"]
    )
    return kernel_pt and vmap


HASH_CALLERS = {
    "mnt_init": ["Mount-cache", "Mountpoint-cache"],
    "posixtimer_init": ["posixtimers"],
    "ip_rt_init": ["IP idents"],
    "inet_hashinfo2_init": ["tcp_listen_portaddr_hash", "Table-perturb"],
    "tcp_init": ["TCP established", "TCP bind"],
    "mptcp_token_init": ["MPTCP token"],
    "udp_table_init": ["UDP"],
    "udp_init": ["UDP"],
}

SMP_INIT_AFTER = ("driver_init", "smp_init", "sched_init_smp", "page_alloc_init_late", "padata_init",
                  "do_basic_setup", "deferred_init_memmap")


def pages(path, kernel_txt):
    evs = until_vmstat(parse(path))
    observer = tracefs_mount_pid(evs)
    gfps, out = {}, []
    owner = {}  # pfn -> ("keep", k) | ("drop", None)
    blocks = {}  # k -> [head, order, split]
    seen_hash = defaultdict(int)
    n_alloc = 0
    dropped = defaultdict(int)
    percpu_done = memory_done = initrd_done = False
    out.append(("r", "early"))
    for e in evs:
        ev = e["ev"]
        if not percpu_done and ev == "mm_page_alloc" and has(e, *SMP_INIT_AFTER):
            out.append(("r", "percpu"))
            percpu_done = True
        if ev == "mm_page_alloc":
            pfn, order = int(e["f"]["pfn"], 16), int(e["f"]["order"])
            if pfn == 0:
                continue
            kind = None
            if is_ring(e):
                kind = "ring"
            elif observer is not None and task_pid(e) == observer:
                kind = "tracefs mount"
            elif is_vmalloc_page(e):
                kind = "vmalloc"
            elif has(e, "alloc_large_system_hash"):
                i = e["stack"].index("alloc_large_system_hash")
                caller = e["stack"][i + 1] if i + 1 < len(e["stack"]) else "?"
                names = HASH_CALLERS.get(caller, [caller])
                name = names[min(seen_hash[caller], len(names) - 1)]
                seen_hash[caller] += 1
                out.append(("r", "hash", name.replace(" ", "_")))
                kind = "hash"
            elif has(e, "futex_init"):
                out.append(("r", "futex"))
                kind = "hash"
            elif has(e, "memory_dev_init"):
                if not memory_done:
                    out.append(("r", "memory_blocks"))
                    memory_done = True
                kind = "memory_blocks"
            if kind:
                dropped[kind] += 1 << order
                for i in range(1 << order):
                    owner[pfn + i] = ("drop", None)
                continue
            g = gfps.setdefault(e["f"]["gfp_flags"], len(gfps))
            out.append(("a", e["cpu"], order, int(e["f"]["migratetype"]), g))
            blocks[n_alloc] = [pfn, order, False]
            for i in range(1 << order):
                owner[pfn + i] = ("keep", n_alloc)
            n_alloc += 1
        elif ev == "mm_page_free":
            pfn, order = int(e["f"]["pfn"], 16), int(e["f"]["order"])
            o = owner.get(pfn)
            if o is None:
                if has(e, "copy_splice_read"):
                    # alloc_pages_bulk(): allocated untraced, freed here.
                    g = gfps.setdefault("GFP_USER", len(gfps))
                    for _ in range(1 << order):
                        out.append(("a", e["cpu"], 0, 0, g))
                        out.append(("f", e["cpu"], n_alloc, 0, 0))
                        n_alloc += 1
                    dropped["bulk (put back)"] += 1 << order
                elif has(e, "ftrace_free_pages"):
                    out.append(("r", "ftrace_free"))
                elif has(e, "free_initrd_mem"):
                    # The initrd's pages (memblock's): mmlab frees them
                    # itself, where this marker stands.
                    if not initrd_done:
                        out.append(("r", "initrd_free"))
                        initrd_done = True
                    dropped["memblock-era or pre-trace frees"] += 1 << order
                else:
                    dropped["memblock-era or pre-trace frees"] += 1 << order
                continue
            for i in range(1 << order):
                owner.pop(pfn + i, None)
            if o[0] == "drop":
                continue
            k = o[1]
            head, border, split = blocks[k]
            off = pfn - head
            if (off != 0 or order != border) and not split:
                out.append(("s", k))
                blocks[k][2] = True
            out.append(("f", e["cpu"], k, off, order))
    kernel = " / ".join(l.strip() for l in open(kernel_txt))
    n_free = sum(1 for r in out if r[0] == "f")
    print("# mmlab boot work: the page allocations and frees of a real boot (the base record),")
    print("# replayed by PageAllocator::boot with the rules of pcp/src/boot_work/rules.rs expanded")
    print("# at their markers for the machine at hand (boot.state=real).")
    print(f"# source: {kernel}, boot_kmem with kernel stacks, cut where /proc/vmstat was read;")
    print("# compacted by scripts/arm64-peer/boot-kmem-compact.py pages.")
    print(f"# allocations {n_alloc}, frees {n_free}; left out (pages): "
          + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())))
    for name, i in sorted(gfps.items(), key=lambda x: x[1]):
        print(f"g {i} {name}")
    for r in out:
        print(" ".join(str(x) for x in r))


PERCPU_KTHREAD = re.compile(r"^(?:cpuhp|migration|ksoftirqd)/(\d+)$|^kworker/(\d+):0H?$")

# The AMBA devices whose peripheral ids amba_device_add() reads through a
# short-lived ioremap, in the virt machine's device-tree order (their areas
# are unmapped again, so the capture's vmallocinfo does not show them).
AMBA_PERIPHID = [0x09000000, 0x09010000, 0x09030000]


def vmallocinfo_phys(path):
    """va -> phys of the ioremaps the capture's /proc/vmallocinfo lists."""
    out = {}
    for line in open(path):
        p = line.split()
        if "ioremap" in p and any(x.startswith("phys=") for x in p):
            va = int(p[0].split("-")[0], 16)
            out[va] = int(next(x for x in p if x.startswith("phys="))[5:], 16)
    return out


# QEMU virt's VIRT_HIGH_PCIE_ECAM base.
VIRT_HIGH_PCIE_ECAM = 0x4010000000


def vmalloc(path, kernel_txt):
    import os
    evs = until_vmstat(parse(path))
    observer = tracefs_mount_pid(evs)
    phys = vmallocinfo_phys(os.path.join(os.path.dirname(path), "proc_vmallocinfo"))
    out = [("r", "irq_stacks")]
    tasks = {}  # pid -> task number
    n_task = 0
    ioremaps = {}  # va -> ioremap number
    amba = iter(AMBA_PERIPHID)
    emitted = set()

    def once(rule):
        if rule not in emitted:
            out.append(("r", rule))
            emitted.add(rule)

    for e in evs:
        ev, f, st = e["ev"], e["f"], e["stack"]
        if ev == "alloc_vmap_area":
            va, size = int(f["va_start"]), int(f["size"])
            ioremap = any(s.startswith("__ioremap_prot") for s in st)
            if not ioremap and ("init_IRQ" in st or "copy_process" in st and "fork_idle" not in st):
                continue  # irq_stacks; task stacks come from the task events
            if "fork_idle" in st:
                once("idle_threads")
            elif ioremap:
                pa = phys.get(va)
                if pa is None:
                    pa = next(amba)
                if pa == VIRT_HIGH_PCIE_ECAM:
                    # pci_remap_iospace() maps the I/O window (no vmap area,
                    # no event) just before the host bridge maps its ECAM.
                    once("pci_iospace")
                ioremaps[va] = len(ioremaps)
                out.append(("i", e["cpu"], f"{pa:#x}", size - 4096, "__ioremap_prot+0x6c/0xe0"))
            elif "atomic_pool_expand" in st or "__dma_atomic_pool_init" in st:
                once("dma_pools")
            elif "pcpu_create_chunk" in st:
                once("pcpu_chunk")
            elif any(s.startswith(("lz4_alloc_ctx", "crypto_acomp_alloc_streams", "acomp_stream_workfn")) for s in st):
                once("acomp_streams")
            else:
                callers = {
                    "bpf_prog_alloc_no_stats": "bpf_prog_alloc_no_stats+0x4c/0x258",
                    "bpf_jit_alloc_exec": "bpf_jit_alloc_exec+0x20/0x38",
                    "n_tty_open": "n_tty_open+0x24/0xc0",
                }
                c = next((callers[s] for s in st if s in callers), None)
                if c is None:
                    print(f"# unknown vmalloc area: {e['raw']} {'<'.join(st[:6])}", file=sys.stderr)
                    continue
                zero = 1 if any(s.startswith("vzalloc") for s in st) or c.startswith("bpf_prog") else 0
                out.append(("v", e["cpu"], size - 4096, zero, c))
        elif ev == "free_vmap_area_noflush" and "iounmap" in st:
            va = int(f["va_start"], 16)
            if va in ioremaps:
                out.append(("u", e["cpu"], ioremaps[va]))
        elif ev == "sched_process_fork":
            child, pid = f.get("child_comm", ""), f.get("child_pid")
            if pid == observer:
                continue
            m = PERCPU_KTHREAD.match(child)
            n = next((g for g in (m.groups() if m else ()) if g is not None), None)
            if n is not None and int(n) > 0:
                once("percpu_kthreads")
                continue
            if re.match(r"^kworker/[1-9]\d*:1$", child):
                once("percpu_kworker")
                continue
            tasks[pid] = n_task
            n_task += 1
            out.append(("t", e["cpu"]))
        elif ev == "sched_process_exit":
            pid = f.get("pid")
            if pid in tasks:
                out.append(("x", e["cpu"], tasks[pid]))
    kernel = " / ".join(l.strip() for l in open(kernel_txt))
    print("# mmlab boot vmalloc work: the vmalloc areas, ioremaps and task stacks of a real boot")
    print("# (the base record), replayed by Vmalloc::boot with the rules of vmalloc/src/boot/rules.rs")
    print("# expanded at their markers for the machine at hand (boot.state=real).")
    print(f"# source: {kernel}, boot_kmem with kernel stacks and")
    print("# task events, cut where /proc/vmstat was read; compacted by")
    print("# scripts/arm64-peer/boot-kmem-compact.py vmalloc.")
    print(f"# tasks {n_task}, exits {sum(1 for r in out if r[0] == 'x')}, ioremaps {len(ioremaps)}")
    for r in out:
        print(" ".join(str(x) for x in r))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode = sys.argv[1]
    if mode == "pages":
        pages(sys.argv[2], sys.argv[3])
    elif mode == "vmalloc":
        vmalloc(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
