#!/usr/bin/env python3
"""Turn a peer's kmem trace into the trace that `mmlab trace kernel` replays
(tests/data/trace/arm64-*.trace): boot.sh with PEER_BOOT_TRACE=1 (`boot_kmem`,
the five kmem page-allocator events of the whole boot) or PEER_BOOT_TRACE=2
(`workload_kmem`, the same events switched on after boot around a small
workload, with `workload_zoneinfo`, /proc/zoneinfo just before).

usage: boot-kmem-trace.py CAPTURE_DIR > tests/data/trace/arm64-7.2.13-2G-3cpu-boot.trace

The events stay ftrace text, in the kernel's order, each line as ftrace prints
it less what the replay does not read, to keep the file small: the task's pid,
the flags column, the padding, and `page=` (with no_hash_pointers it is the
struct page's address, `vmemmap + pfn * 64`, so pfn= says the same). The
`# mmlab:` header describes the traced machine (see harness/src/trace/kernel):
`kernel`, `mem`, `cpus` (qemu's -m and -smp), `boot_trace=1` for a boot
(the events start at the first one the kernel recorded: `trace_event=` on
the command line), `entries`/`written` (ftrace's own count: equal when none
was lost), and from /proc/zoneinfo (at the end of boot; for a workload,
just before the events were switched on, with each CPU's pcp count as
`pcp_count_cpuN`) the zone with managed pages and its pageset bounds
(batch, high_min, high_max), and vm.percpu_pagelist_high_fraction.
"""
import os
import re
import sys

LINE = re.compile(r"^\s*(.+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(mm_page_\w+):\s+(.*)$")
ENTRIES = re.compile(r"entries-in-buffer/entries-written:\s+(\d+)/(\d+)")


def zoneinfo(path):
    """The populated zone (managed > 0) with its pageset bounds and counts."""
    zone, out, cpu = None, None, None
    for line in open(path):
        m = re.match(r"Node \d+, zone\s+(\S+)", line)
        if m:
            zone = m.group(1)
            continue
        w = line.split()
        if len(w) == 2 and w[0] == "managed" and int(w[1]) > 0 and out is None:
            out = {"zone": zone, "managed": w[1]}
        if out is not None and out["zone"] == zone and len(w) == 2 and w[0].rstrip(":") in ("batch", "high_min", "high_max"):
            out.setdefault(w[0].rstrip(":"), w[1])
        if out is not None and out["zone"] == zone and len(w) == 2 and w[0] == "cpu:":
            cpu = w[1]
        if out is not None and out["zone"] == zone and len(w) == 2 and w[0] == "count:" and cpu is not None:
            out[f"pcp_count_cpu{cpu}"] = w[1]
    return out or {}


def main(d):
    kernel = open(os.path.join(d, "kernel.txt")).read().split("\n")
    pkg = kernel[0].split()[0].removeprefix("linux-image-")
    qemu = kernel[1].split()
    mem = qemu[qemu.index("-m") + 1]
    cpus = qemu[qemu.index("-smp") + 1]
    entries = written = None
    events = []
    boot = os.path.exists(os.path.join(d, "boot_kmem"))
    for line in open(os.path.join(d, "boot_kmem" if boot else "workload_kmem")):
        m = ENTRIES.search(line)
        if m:
            entries, written = m.groups()
            continue
        m = LINE.match(line)
        if not m:
            continue
        comm, _pid, cpu, ts, ev, rest = m.groups()
        fields = " ".join(kv for kv in rest.split() if not kv.startswith("page="))
        events.append(f"{comm.strip().replace(' ', '_')} [{cpu}] {ts}: {ev}: {fields}")
    z = zoneinfo(os.path.join(d, "proc_zoneinfo" if boot else "workload_zoneinfo"))
    if boot:
        z = {k: v for k, v in z.items() if not k.startswith("pcp_count")}
    print("# mmlab: kernel=" + pkg + " machine=virt cpu=neoverse-n1 mem=" + mem + " cpus=" + cpus
          + (" boot_trace=1" if boot else ""))
    fraction = open(os.path.join(d, "proc_sys_vm_percpu_pagelist_high_fraction")).read().strip()
    print(f"# mmlab: entries={entries} written={written} events={len(events)} percpu_pagelist_high_fraction={fraction}")
    print("# mmlab: " + " ".join(f"{k}={v}" for k, v in z.items()))
    print(f"# from scripts/arm64-peer/boot.sh with PEER_BOOT_TRACE={1 if boot else 2} (kernel command line: "
          + open(os.path.join(d, "proc_cmdline")).read().strip() + "),")
    print("# compacted by scripts/arm64-peer/boot-kmem-trace.py; zone values: /proc/zoneinfo "
          + ("at the end of boot" if boot else "just before the events were switched on"))
    for e in events:
        print(e)


if __name__ == "__main__":
    main(sys.argv[1])
