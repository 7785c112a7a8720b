#!/usr/bin/env bash
# Write mmlab's deterministic outputs to DIR, one file per command, so that a
# change of shape (a refactoring) can show them byte-identical before and after:
#   scripts/outputs-snapshot.sh /tmp/before && (change) &&
#   scripts/outputs-snapshot.sh /tmp/after && diff -r /tmp/before /tmp/after
# Host-time fields (measured wall time, cycles, the git revision) are dropped
# from the JSON ones, and so are the host-dependent fields of the "run"
# record (revision, command_line: the binary's path); everything else is
# kept as printed. The text outputs here keep the kernel's formats: their
# run header goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:?usage: scripts/outputs-snapshot.sh DIR}
mkdir -p "$OUT"
cargo build -q --release -p mmlab-harness --bin mmlab
MMLAB=${CARGO_TARGET_DIR:-target}/release/mmlab
m() { "$MMLAB" --mem 256M "$@"; }

for f in buddyinfo zoneinfo pagetypeinfo vmstat vmallocinfo meminfo; do
	m stat "$f" >"$OUT/stat-$f.txt"
	m stat "$f" --after-ops 3000 >"$OUT/stat-$f-after-ops.txt"
done
m stat pagetables --ptdump >"$OUT/stat-pagetables-ptdump.txt"
m stat pagetables --ptdump --after-ops 3000 >"$OUT/stat-pagetables-ptdump-after-ops.txt"
m trace pages --ops 2000 >"$OUT/trace-pages.txt"

# Drop measured host time; keep counters and settings.
strip_host_time() {
	python3 -c '
import json, re, sys
HOST = re.compile(r"(usec|_ns$|^ns|cycles|wall|git_rev|measured|ci|stddev|mean|change|rsd|samples|verdict|^sd$|^mark$|^t$|^p$|^revision$|^command_line$)")
def walk(v):
    if isinstance(v, dict):
        return {k: walk(x) for k, x in v.items() if not HOST.search(k) or k.endswith("_modelled_ns") or k == "zone_lock_hold_ns"}
    if isinstance(v, list):
        return [walk(x) for x in v]
    return v
print(json.dumps(walk(json.load(sys.stdin)), indent=1, sort_keys=False))
'
}
m --cpus 3 test-vmalloc --json run_test_mask=2047 nr_threads=1 test_loop_count=50 nr_pcpu_objects=2000 |
	strip_host_time >"$OUT/test-vmalloc.json"
m compare --base "" --new "vmalloc.contpte=off" --repeat 2 --warmup 0 --counters all --format json \
	run_test_mask=7 test_loop_count=50 2>/dev/null | strip_host_time >"$OUT/compare.json"
echo "outputs in $OUT"
