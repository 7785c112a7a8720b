#!/usr/bin/env bash
# Concurrency checks that one passing run cannot give:
#  1. the tests that race emulated CPUs on host threads, run REPEAT times in
#     a debug build (overflow checks catch races that a release build hides;
#     each run sees other interleavings);
#  2. `mmlab test-vmalloc` with every case on 3 to 8 workers over two seeds,
#     debug build (how the vmap_lazy_nr underflow was found: 54 of 140 such
#     runs panicked before the fix); seed 2 with `lock_stat=1`, so that the
#     counted lock paths race too;
#  3. the loom models (every interleaving of the lazy-list accounting and
#     of the pcp <-> buddy hand-off).
# The shuttle runs (replayable schedules) are scripts/shuttle.sh: a build of
# their own and minutes of executions, so not here.
# Usage: scripts/stress.sh [REPEAT]   (default 20)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPEAT=${1:-20}
# Only tests whose outcome depends on how host threads interleave: a
# single-threaded seeded test gives the same run every time.
TESTS=(--test reliability --test threaded_stress --test test_vmalloc --test hvo_race)
T0=$SECONDS
lap() { printf '[stress] %s: %ss\n' "$1" $((SECONDS - T0)); T0=$SECONDS; }

cargo test -q -p mmlab-tests "${TESTS[@]}" --no-run
for i in $(seq 1 "$REPEAT"); do
	printf 'stress run %d/%d\n' "$i" "$REPEAT"
	cargo test -q -p mmlab-tests "${TESTS[@]}" >/tmp/mmlab-stress.$$ 2>&1 || {
		cat /tmp/mmlab-stress.$$
		echo "stress run $i failed" >&2
		exit 1
	}
done
rm -f /tmp/mmlab-stress.$$
lap "racing tests x$REPEAT"

cargo build -q -p mmlab-harness --bin mmlab
for seed in 1 2; do
	for threads in 3 4 5 6 7 8; do
		printf 'test-vmalloc seed %d nr_threads=%d lock_stat=%d\n' "$seed" "$threads" $((seed - 1))
		cargo run -q -p mmlab-harness --bin mmlab -- --seed "$seed" --set lock_stat=$((seed - 1)) test-vmalloc \
			run_test_mask=2047 nr_threads="$threads" \
			test_loop_count=20 nr_pcpu_objects=5000 >/tmp/mmlab-stress.$$ 2>&1 || {
			cat /tmp/mmlab-stress.$$
			echo "test-vmalloc seed $seed nr_threads=$threads failed" >&2
			exit 1
		}
	done
done
rm -f /tmp/mmlab-stress.$$
lap "test-vmalloc runs"

# loom: its own target directory (a --cfg loom build of the whole graph).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p mmlab-vmalloc -p mmlab-pcp --lib loom
lap "loom models"
