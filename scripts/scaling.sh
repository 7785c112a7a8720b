#!/usr/bin/env bash
# Two-thread scaling of `mmlab test-vmalloc`, read against the host's own
# ceiling and against what the two CPUs share (the target: at least 80 % of
# one thread's throughput per thread):
#
#   scripts/scaling.sh [ROUNDS] [TEST-VMALLOC PARAMETERS...]
#
# Each round runs, back to back, the share_nothing example (two threads that
# share nothing: what this host gives a second thread at that moment; then
# the time to hand one cache line between them) and test-vmalloc with
# nr_threads=1 then nr_threads=2 (default parameters run_test_mask=7
# test_loop_count=100000: runs of a second or so, since runs of a few
# milliseconds vary by half from run to run on their own). It prints, per
# round, the per-thread throughput of each (test-vmalloc: one thread's
# `All test took workerN=` host counter ticks over the mean of the two
# workers') and the handoff time. Rounds interleave because a shared host's
# ceiling moves from minute to minute.
#
# After the rounds, one nr_threads=2 run with `--set lock_stat=1` gives
# vmalloc's bounces (a lock or `vmap_lazy_nr` taken on one CPU after the
# other CPU last took it) per vmalloc+vfree pair, by lock class.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${1:-5}
shift || true
PARAMS=("$@")
[ ${#PARAMS[@]} -gt 0 ] || PARAMS=(run_test_mask=7 test_loop_count=100000)

cargo build -q --release -p mmlab-harness --bin mmlab --example share_nothing
BIN=${CARGO_TARGET_DIR:-target}/release

ticks() { # mean worker ticks of one test-vmalloc run
	"$BIN/mmlab" test-vmalloc "${PARAMS[@]}" nr_threads="$1" |
		sed -n 's/^All test took worker[0-9]*=\([0-9]*\) cycles$/\1/p' |
		awk '{s += $1; n++} END { if (n == 0) exit 1; printf "%.0f\n", s / n }'
}

printf '%-6s %-22s %-14s %-16s %-16s %s\n' round "share_nothing per-thread" "handoff" "test-vmalloc 1" "test-vmalloc 2" "test-vmalloc per-thread"
for r in $(seq 1 "$ROUNDS"); do
	sn=$("$BIN/examples/share_nothing")
	base=$(sed -n 's/.*per-thread throughput \([0-9]*\)%.*/\1/p' <<<"$sn")
	handoff=$(sed -n 's/^shared line: \([0-9]*\) ns.*/\1/p' <<<"$sn")
	one=$(ticks 1)
	two=$(ticks 2)
	printf '%-6s %-22s %-14s %-16s %-16s %d%%\n' "$r" "$base%" "$handoff ns" "$one" "$two" $((100 * one / two))
done

echo
echo "lock_stat, nr_threads=2 (one run): bounces per vmalloc+vfree pair"
"$BIN/mmlab" test-vmalloc --set lock_stat=1 "${PARAMS[@]}" nr_threads=2 | awk '
	/^#   vmallocs: / { pairs = $3 }
	/^# lock_stat/ { on = 1; next }
	on && /^#   class name/ { next }
	on && /^#   / {
		# class name (may hold spaces), then four numbers
		n = NF; name = $2; for (i = 3; i <= n - 4; i++) name = name " " $i
		row[++rows] = name; acq[rows] = $n; bounce[rows] = $(n - 1)
	}
	END {
		if (pairs == 0) { print "no vmallocs counted"; exit 1 }
		for (i = 1; i <= rows; i++) {
			printf "  %-28s %8.3f bounces, %8.3f acquisitions per pair\n", row[i], bounce[i] / pairs, acq[i] / pairs
			total += bounce[i]
		}
		printf "  %-28s %8.3f bounces per pair\n", "all", total / pairs
	}'
