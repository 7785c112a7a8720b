#!/usr/bin/env bash
# Time the host kernel growing and shrinking its hugetlb pool, with the
# vmemmap optimisation (HVO) off and on: the live-peer numbers that
# `cargo bench -p mmlab-hugetlb --bench pool` is compared with.
#
# For each HVO setting (vm.hugetlb_optimize_vmemmap = 0, then 1) and each
# repetition: `echo N > nr_hugepages` (the pool grows to N pages), read back
# what it reached, then `echo 0` (the pool is freed). Each write is timed
# with bash's $EPOCHREALTIME (no fork in the timed part). Prints one raw line
# per write, then the median per (size, HVO, direction).
#
# Needs root and an empty pool. Restores vm.hugetlb_optimize_vmemmap and the
# pool sizes it found (both 0 in practice) on exit, even on error or ^C, and
# recomputes the zone watermarks (see restore()).
#
# Usage: scripts/host-hugetlb-timing.sh [N_2M] [REPS] [N_1G]
#   defaults: 4000 x 2 MiB, 5 repetitions, 8 x 1 GiB (0 skips 1 GiB)
set -euo pipefail
N2M=${1:-4000}
REPS=${2:-5}
N1G=${3:-8}
SYSCTL_HVO=/proc/sys/vm/hugetlb_optimize_vmemmap
P2M=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
P1G=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages

if [[ $(id -u) -ne 0 ]]; then
	echo "needs root" >&2
	exit 1
fi
[[ -w $SYSCTL_HVO ]] || { echo "$SYSCTL_HVO missing: kernel without HVO" >&2; exit 1; }
orig_hvo=$(cat "$SYSCTL_HVO")
orig_2m=$(cat "$P2M")
orig_1g=$( [[ -e $P1G ]] && cat "$P1G" || echo none)
if [[ $orig_2m != 0 || ($orig_1g != none && $orig_1g != 0) ]]; then
	echo "the pool is not empty (2M: $orig_2m, 1G: $orig_1g); refusing to time" >&2
	exit 1
fi
restore() {
	echo 0 >"$P2M" || true
	[[ $orig_1g == none ]] || echo "$orig_1g" >"$P1G" || true
	echo "$orig_2m" >"$P2M" || true
	echo "$orig_hvo" >"$SYSCTL_HVO" || true
	# HVO gives boot-time (memblock) memmap pages to the buddy allocator and
	# its restore takes ordinary pages back, so managed pages grew while the
	# watermarks still derive from the old count (tests/live_peer.rs compares
	# them). Writing watermark_scale_factor its own value recomputes them
	# (setup_per_zone_wmarks) and changes no setting.
	local wsf
	wsf=$(cat /proc/sys/vm/watermark_scale_factor)
	echo "$wsf" >/proc/sys/vm/watermark_scale_factor || true
	echo "# restored: hugetlb_optimize_vmemmap=$(cat "$SYSCTL_HVO") 2M=$(cat "$P2M") 1G=$( [[ -e $P1G ]] && cat "$P1G" || echo none)"
}
trap restore EXIT

# time_write FILE VALUE -> prints elapsed microseconds
time_write() {
	local t0 t1
	t0=$EPOCHREALTIME
	echo "$2" >"$1"
	t1=$EPOCHREALTIME
	echo $(( ${t1/./} - ${t0/./} ))
}

median() {
	sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2}'
}

declare -A samples
run() { # run LABEL FILE N
	local label=$1 file=$2 n=$3 hvo rep us got
	for hvo in 0 1; do
		echo "$hvo" >"$SYSCTL_HVO"
		for rep in $(seq 1 "$REPS"); do
			us=$(time_write "$file" "$n")
			got=$(cat "$file")
			echo "raw size=$label hvo=$hvo rep=$rep write=$n reached=$got us=$us"
			samples[$label,$hvo,alloc]+="$us "
			us=$(time_write "$file" 0)
			echo "raw size=$label hvo=$hvo rep=$rep write=0 reached=$(cat "$file") us=$us"
			samples[$label,$hvo,free]+="$us "
		done
	done
}

echo "# host $(uname -r), $(nproc) CPUs, MemTotal $(awk '/MemTotal/ {print $2, $3}' /proc/meminfo)"
run 2M "$P2M" "$N2M"
if [[ $N1G -gt 0 ]]; then
	if [[ -e $P1G ]]; then
		run 1G "$P1G" "$N1G"
	else
		echo "# no 1 GiB hstate on this host"
	fi
fi
echo "# median microseconds per write"
for key in "${!samples[@]}"; do
	printf '%s %s\n' "$key" "$(tr ' ' '\n' <<<"${samples[$key]}" | grep -v '^$' | median)"
done | sort | awk '{split($1, k, ","); printf "median size=%s hvo=%s %s us=%s\n", k[1], k[2], k[3], $2}'
