#!/usr/bin/env bash
# Concurrency checks that one passing run cannot give (issue 9):
#  1. the tests that race emulated CPUs on host threads, run REPEAT times in
#     a debug build (overflow checks catch races that a release build hides;
#     each run sees other interleavings);
#  2. the loom models (every interleaving of the lazy-list accounting).
# Usage: scripts/stress.sh [REPEAT]   (default 20)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPEAT=${1:-20}
TESTS=(--test reliability --test threaded_stress --test test_vmalloc --test fault_injection)

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

# loom: its own target directory (a --cfg loom build of the whole graph).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p mmlab-vmalloc --lib loom
