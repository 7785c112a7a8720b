#!/usr/bin/env bash
# Throughput of `mmlab fuzz` (issue 29, item 2): operations per second
# (wall clock, single thread, checks every 10,000 ops) and instructions per
# operation (callgrind), and how the instructions split between the kernel
# work the fuzzer drives and its own bookkeeping.
#
# Instructions per op are the difference of two callgrind runs of the same
# seed (--ops LONG minus --ops SHORT), so the boot and the end-of-run checks
# cancel. The same difference, collected only inside some functions, splits
# it: "calls" is `Executor::run` (the library calls and the executor's glue
# around each), "checks" the periodic and generated checks
# (`Executor::check`), "generator" the op generator with its feedback, and
# "bookkeeping" the rest of each step (oracle, snapshots, handle tables,
# tallies) and of the run loop. Eight callgrind runs: a few minutes.
#
# Usage: scripts/fuzz-throughput.sh [SEED]
#   FUZZ_OPS=N          ops per seed for the wall-clock rate (500000)
#   FUZZ_SEEDS=A..B     seeds for the wall-clock rate (5000..5002)
#   CG_SHORT, CG_LONG   the callgrind runs' --ops (20000, 60000)
# Wall-clock rates mean something only on an idle machine; the
# instruction counts are the same on any x86_64 host.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SEED=${1:-5000}
OPS=${FUZZ_OPS:-500000}
SEEDS=${FUZZ_SEEDS:-5000..5002}
SHORT=${CG_SHORT:-20000}
LONG=${CG_LONG:-60000}
case "$SEED$OPS$SHORT$LONG" in *[!0-9]*) echo "fuzz-throughput: SEED and the op counts are numbers" >&2; exit 2 ;; esac
if [ "$SHORT" -ge "$LONG" ]; then
	echo "fuzz-throughput: CG_SHORT ($SHORT) must be below CG_LONG ($LONG)" >&2
	exit 2
fi
command -v valgrind >/dev/null || { echo "fuzz-throughput: valgrind is not installed" >&2; exit 2; }
cargo build -q --release -p mmlab-harness
BIN=target/release/mmlab
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== wall clock: mmlab fuzz --ops $OPS --seeds $SEEDS (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
"$BIN" fuzz --ops "$OPS" --seeds "$SEEDS" 2>/dev/null | head -1

# Seed SEED alone (a half-open range of one). Each part is measured by its
# own pair of runs that collect only inside the part's functions
# (callgrind's --toggle-collect; "" collects everything).
next=$((SEED + 1))
collected() { # N PATTERN...: instructions collected by one run of N ops
	local n=$1 args=()
	shift
	if [ $# -gt 0 ]; then
		args+=(--collect-atstart=no)
		for f in "$@"; do args+=("--toggle-collect=$f"); done
	fi
	valgrind --tool=callgrind "${args[@]}" --callgrind-out-file="$WORK/cg" "$BIN" fuzz --seeds "$SEED..$next" \
		--ops "$n" >/dev/null 2>"$WORK/vg" || { cat "$WORK/vg" >&2; exit 1; }
	grep -m1 'Collected' "$WORK/vg" | awk '{print $NF}'
}
per_op() { # PATTERN...: instructions per op of a part
	local a b
	a=$(collected "$SHORT" "$@")
	b=$(collected "$LONG" "$@")
	echo $(((b - a) / (LONG - SHORT)))
}
all=$(per_op)
calls=$(per_op '*Executor>::run')
checks=$(per_op '*Executor>::check')
gen=$(per_op '*Generator::next_op' '*Generator::observe')
echo "== instructions per op (callgrind, seed $SEED, --ops $LONG minus --ops $SHORT)"
printf '%-12s %8s\n' total "$all" calls "$calls" checks "$checks" generator "$gen" \
	bookkeeping "$((all - calls - checks - gen))"
echo "(calls: Executor::run, the library calls with the executor's glue; checks: Executor::check;"
echo " generator: next_op and observe; bookkeeping: the rest of each step and of the run loop)"
