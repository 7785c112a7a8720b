#!/usr/bin/env bash
# Capture the host kernel's kmem page-allocator tracepoints while
# scripts/kernel-trace/anon-touch runs pinned to one CPU, for
# `mmlab trace kernel` (tests/data/trace/ holds one such trace).
#
#   sudo scripts/capture-kernel-trace.sh OUT.trace [CPU [PAGES [ROUNDS [FRACTION]]]]
#
# Records on CPU (default 1) only (tracing_cpumask), so every allocation
# and free that goes through that CPU's pcp lists is in the trace, whoever
# made it. vm.percpu_pagelist_high_fraction is set to FRACTION (default
# 100000: pcp high = max(managed / FRACTION / CPUs, 4 * batch), a few hundred
# pages, so a small trace shows many drains) for the capture. The trace
# starts with `# mmlab:` lines describing the machine (kernel, CPUs, the
# zone's managed pages, batch, high_min, high_max, the fraction, max_pfn,
# each CPU's pcp count when the trace started) and the /proc/zoneinfo
# excerpt of the zone then, as comments.
#
# Every setting changed (tracing_on, set_event, tracing_cpumask,
# buffer_size_kb, the fraction) is put back as it was on exit, also on error.
set -euo pipefail
OUT=${1:?usage: capture-kernel-trace.sh OUT.trace [CPU [PAGES [ROUNDS [FRACTION]]]]}
CPU=${2:-1}
PAGES=${3:-384}
ROUNDS=${4:-3}
FRACTION=${5:-100000}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T
BIN=$(mktemp -d)/anon-touch
cc -O2 -o "$BIN" "$HERE/kernel-trace/anon-touch.c"

old_on=$(cat $T/tracing_on)
old_events=$(cat $T/set_event)
old_mask=$(cat $T/tracing_cpumask)
old_buf=$(cat $T/buffer_size_kb | sed 's/ .*//')
old_frac=$(cat /proc/sys/vm/percpu_pagelist_high_fraction)
restore() {
	echo 0 >$T/tracing_on
	echo >$T/set_event
	for e in $old_events; do echo "$e" >>$T/set_event; done
	echo "$old_mask" >$T/tracing_cpumask
	echo "$old_buf" >$T/buffer_size_kb
	echo "$old_frac" >/proc/sys/vm/percpu_pagelist_high_fraction
	echo "$old_on" >$T/tracing_on
	rm -rf "$(dirname "$BIN")"
}
trap restore EXIT

echo "$FRACTION" >/proc/sys/vm/percpu_pagelist_high_fraction
echo 0 >$T/tracing_on
echo >$T/set_event
for e in mm_page_alloc mm_page_free mm_page_free_batched mm_page_alloc_zone_locked mm_page_pcpu_drain; do
	echo "kmem:$e" >>$T/set_event
done
printf '%x\n' $((1 << CPU)) >$T/tracing_cpumask
echo 4096 >$T/buffer_size_kb
echo >$T/trace
# The zone the workload's pages come from: Normal (or the last populated
# one), as it is when the trace starts (the pcp counts say what the lists
# held then).
zone=$(awk '/^Node/ {z=$4} /managed/ && $2 > 0 {last=z} END {print last}' /proc/zoneinfo)
excerpt=$(awk -v z="$zone" '/^Node/ {on = ($4 == z)} on' /proc/zoneinfo)
echo 1 >$T/tracing_on
taskset -c "$CPU" "$BIN" "$PAGES" "$ROUNDS"
echo 0 >$T/tracing_on

field() { echo "$excerpt" | awk -v k="$1" '$1 == k {print $2; exit}'; }
max_pfn=$(awk '/start_pfn/ {s=$2} /spanned/ {if ($2 + 0 > 0) sp=$2} /^Node/ {if (s + sp > m) m = s + sp} END {if (s + sp > m) m = s + sp; print m}' /proc/zoneinfo)
{
	echo "# mmlab: kernel=$(uname -r) cpus=$(nproc) traced_cpu=$CPU workload=anon-touch pages=$PAGES rounds=$ROUNDS"
	echo "# mmlab: zone=$zone managed=$(field managed) batch=$(field batch:) high_min=$(field high_min:) high_max=$(field high_max:) percpu_pagelist_high_fraction=$FRACTION max_pfn=$max_pfn"
	echo "# mmlab: $(echo "$excerpt" | awk '$1 == "cpu:" {c=$2} $1 == "count:" {printf "pcp_count_cpu%s=%s ", c, $2}')"
	echo "# /proc/zoneinfo, zone $zone, when the trace started:"
	echo "$excerpt" | grep -v -E '^ +(nr_|numa_|workingset|pgpromote|pgdemote)' | sed 's/^/#   /'
	cat $T/trace
} >"$OUT"
echo "wrote $OUT ($(grep -c -v '^#' "$OUT") events)"
