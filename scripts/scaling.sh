#!/usr/bin/env bash
# Two-thread scaling of `mmlab test-vmalloc`, read against the host's own
# ceiling (issue 15):
#
#   scripts/scaling.sh [ROUNDS] [TEST-VMALLOC PARAMETERS...]
#
# Each round runs, back to back, the share_nothing example (two threads that
# share nothing: what this host gives a second thread at that moment) and
# test-vmalloc with nr_threads=1 then nr_threads=2 (default parameters
# run_test_mask=7 test_loop_count=20000). It prints, per round, the
# per-thread throughput of each: one thread's time over the mean of the two
# threads' times (test-vmalloc: its `All test took workerN=` host counter
# ticks). Rounds interleave the two because a shared host's ceiling moves
# from minute to minute.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${1:-5}
shift || true
PARAMS=("$@")
[ ${#PARAMS[@]} -gt 0 ] || PARAMS=(run_test_mask=7 test_loop_count=20000)

cargo build -q --release -p mmlab-harness --bin mmlab --example share_nothing
BIN=${CARGO_TARGET_DIR:-target}/release

ticks() { # mean worker ticks of one test-vmalloc run
	"$BIN/mmlab" test-vmalloc "${PARAMS[@]}" nr_threads="$1" |
		sed -n 's/^All test took worker[0-9]*=\([0-9]*\) cycles$/\1/p' |
		awk '{s += $1; n++} END { if (n == 0) exit 1; printf "%d\n", s / n }'
}

printf '%-6s %-22s %-16s %-16s %s\n' round "share_nothing per-thread" "test-vmalloc 1" "test-vmalloc 2" "test-vmalloc per-thread"
for r in $(seq 1 "$ROUNDS"); do
	base=$("$BIN/examples/share_nothing" | sed -n 's/.*per-thread throughput \([0-9]*\)%.*/\1/p')
	one=$(ticks 1)
	two=$(ticks 2)
	printf '%-6s %-22s %-16s %-16s %d%%\n' "$r" "$base%" "$one" "$two" $((100 * one / two))
done
