#!/usr/bin/env python3
"""Summarise peer captures (boot.sh output directories) into the table the
boot-work tests compare mmlab with (tests/data/arm64-peer/boot-spread.tsv):
one row per real boot, the page allocator's and vmalloc's numbers after boot.

usage: boot-spread.py DIR... > tests/data/arm64-peer/boot-spread.tsv

pgfree_rt is pgfree less the managed pages (every managed page was freed
once into the allocator: memblock_free_all, deferred init, CMA activation,
free_reserved_area), i.e. the boot's runtime frees; held is pgalloc less
pgfree_rt. The vmallocinfo columns count lines by caller (%pS without the
offset) and the unpurged ones.
"""
import os
import re
import sys

CALLERS = ["paging_init", "__ioremap_prot", "start_kernel", "kernel_clone", "fork_idle", "bpf_prog_alloc_no_stats",
           "bpf_jit_alloc_exec", "dma_common_contiguous_remap", "gen_pool_add_owner", "pcpu_mem_zalloc",
           "pcpu_get_vm_areas", "lz4_alloc_ctx", "n_tty_open", "unpurged"]


def row(d):
    vm = dict(l.split() for l in open(os.path.join(d, "proc_vmstat")))
    zi = open(os.path.join(d, "proc_zoneinfo")).read()
    managed = sum(int(x) for x in re.findall(r"\n\s+managed\s+(\d+)", zi))
    pcp = sum(int(x) for x in re.findall(r"\n\s+count:\s+(\d+)", zi))
    pgalloc = sum(int(vm[k]) for k in vm if k.startswith("pgalloc_"))
    pgfree = int(vm["pgfree"])
    mi = dict((l.split(":")[0], l.split()[1]) for l in open(os.path.join(d, "proc_meminfo")))
    kt = open(os.path.join(d, "kernel.txt")).read()
    mem = re.search(r"-m (\S+)", kt).group(1)
    cpus = re.search(r"-smp (\d+)", kt).group(1)
    counts = {c: 0 for c in CALLERS}
    lines = 0
    for line in open(os.path.join(d, "proc_vmallocinfo")):
        p = line.split()
        if len(p) < 3:
            continue
        lines += 1
        c = "unpurged" if p[2] == "unpurged" else p[2].split("+")[0]
        if c in counts:
            counts[c] += 1
    vals = [mem, cpus, os.path.basename(os.path.normpath(d)), pgalloc, pgfree, managed, pgfree - managed,
            pgalloc - (pgfree - managed), int(vm["nr_free_pages"]), pcp, int(vm["nr_vmalloc"]), int(mi["VmallocUsed"]),
            int(vm["nr_free_cma"]), int(vm["cma_alloc_success"]), lines] + [counts[c] for c in CALLERS]
    return "\t".join(str(v) for v in vals)


if __name__ == "__main__":
    print("# Real boots of Debian 7.2.13 arm64 under qemu -M virt -cpu neoverse-n1 -nic none by")
    print("# scripts/arm64-peer/boot.sh (the initramfs with both modules, /init of 2026-12-02), summarised by")
    print("# scripts/arm64-peer/boot-spread.py: the committed captures (run: arm64-peer, boot2, boot3) and")
    print("# boots of the same scripts on 2026-12-02 (run: n<k>).")
    print("\t".join(["mem", "cpus", "run", "pgalloc", "pgfree", "managed", "pgfree_rt", "held", "nr_free_pages", "pcp",
                     "nr_vmalloc", "vmalloc_used_kb", "nr_free_cma", "cma_alloc_success", "vmallocinfo_lines"] + CALLERS))
    for d in sys.argv[1:]:
        print(row(d))
