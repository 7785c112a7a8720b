#!/usr/bin/env python3
"""Turn a peer's boot trace (boot.sh with PEER_BOOT_TRACE=1: `boot_kmem`,
ftrace text of kmem:mm_page_alloc/mm_page_free) into the compact boot-work
file the page allocator replays (pcp/data/boot-work-*.txt).

usage: boot-kmem-compact.py BOOT_KMEM KERNEL_TXT > pcp/data/boot-work-....txt

Output, one record per line, allocations numbered from 0 in file order:
  g <i> <gfp>                 gfp string number i (the names ftrace prints)
  a <cpu> <order> <mt> <g>    an allocation on <cpu> (alloc #k for the k-th 'a')
  f <cpu> <k> <off> <order>   free of 2^order pages at page offset <off> of alloc #k
  s <k>                       alloc #k was split into order-0 pages (split_page)
                              before a free of part of it

Dropped, and counted in the header:
  - the trace's own ring buffer (init-1, GFP_KERNEL|__GFP_ZERO|__GFP_RETRY_MAYFAIL|__GFP_COMP):
    the observer, not the boot;
  - frees of pages the trace never saw allocated (memblock memory freed late:
    deferred struct page init, CMA activation, the initrd and init sections,
    which mmlab frees itself), and mm_page_free_batched (it repeats a free
    mm_page_free already recorded).
"""
import re
import sys

RING = "GFP_KERNEL|__GFP_ZERO|__GFP_RETRY_MAYFAIL|__GFP_COMP"
LINE = re.compile(r"^\s*(\S+)\s+\[(\d+)\]\s+\S+\s+[\d.]+:\s+(mm_page_\w+):\s+(.*)$")


def main(path, kernel_txt):
    gfps, out = {}, []
    owner = {}  # pfn -> alloc index
    blocks = {}  # alloc index -> (head pfn, order, split)
    n_alloc = ring = never = batched = splits = 0
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        task, cpu, ev, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if ev == "mm_page_free_batched":
            batched += 1
            continue
        pfn, order = int(f["pfn"], 16), int(f["order"])
        if ev == "mm_page_alloc":
            if pfn == 0:
                continue
            if task.startswith("init-1") and f["gfp_flags"] == RING and order == 0:
                ring += 1
                continue
            g = gfps.setdefault(f["gfp_flags"], len(gfps))
            out.append(("a", cpu, order, int(f["migratetype"]), g))
            blocks[n_alloc] = [pfn, order, False]
            for i in range(1 << order):
                owner[pfn + i] = n_alloc
            n_alloc += 1
        elif ev == "mm_page_free":
            k = owner.get(pfn)
            if k is None:
                never += 1
                continue
            head, border, split = blocks[k]
            off = pfn - head
            if (off != 0 or order != border) and not split:
                out.append(("s", k))
                blocks[k][2] = True
                splits += 1
            out.append(("f", cpu, k, off, order))
            for i in range(1 << order):
                owner.pop(pfn + i, None)
    kernel = " / ".join(l.strip() for l in open(kernel_txt))
    print("# mmlab boot work: the page allocations and frees of a real boot, replayed by")
    print("# PageAllocator::boot on boot.state=real machines (pcp/src/boot_work.rs).")
    print(f"# source: {kernel}, PEER_BOOT_TRACE=1 (scripts/arm64-peer/boot.sh),")
    print("# compacted by scripts/arm64-peer/boot-kmem-compact.py.")
    print(f"# allocations {n_alloc}, frees {sum(1 for r in out if r[0] == 'f')}, splits {splits};")
    print(f"# dropped: {ring} ring-buffer pages, {never} frees of pages allocated before the trace,")
    print(f"# {batched} mm_page_free_batched")
    for name, i in sorted(gfps.items(), key=lambda x: x[1]):
        print(f"g {i} {name}")
    for r in out:
        print(" ".join(str(x) for x in r))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
