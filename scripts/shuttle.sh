#!/usr/bin/env bash
# Races with replayable schedules (tests/tests/shuttle.rs): a scripted
# multi-CPU workload of the page allocator and vmalloc, and the lanes of
# `mmlab fuzz --threads 3`, under shuttle's random and PCT schedulers.
# Each test reverts one old race fix (test-only switch of the shuttle
# build), finds the race by seed, prints the seed, the failing execution
# and the schedule's length, replays the schedule to the same failure and
# runs the same seed clean with the fix in place; one test runs both
# workloads with every fix in place.
#
# Failing schedules are written to target/shuttle-schedules/scheduleNNN.txt;
# shuttle::replay_from_file replays one exactly (see the test's `replay`).
# Usage: scripts/shuttle.sh [TEST-NAME-FILTER]
#   MMLAB_SHUTTLE_ITERATIONS=N  executions per scheduler of the clean test (1000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Its own target directory: a --cfg shuttle build of the whole graph. The
# expected failures print shuttle's panic reports; on success only the
# summary lines are shown, on a failure everything.
set +e
out=$(RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle \
	cargo test -q --profile shuttle -p mmlab-tests --test shuttle -- --test-threads 1 --nocapture "$@" 2>&1)
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
	printf '%s\n' "$out"
	exit "$rc"
fi
grep -E '^(shuttle |test result)' <<<"$out"
