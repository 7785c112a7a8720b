#!/usr/bin/env bash
# Instruction counts per operation, measured with valgrind's callgrind (no
# hardware counters needed), so that a change that adds instructions to a
# hot path shows in review:
#
#   scripts/instructions.sh                      # print the table
#   scripts/instructions.sh --tsv new.tsv        # also write it as TSV
#   scripts/instructions.sh --compare old.tsv    # and the change against a TSV
#
# scripts/instructions.tsv holds the committed counts: run with
# `--compare scripts/instructions.tsv` to see what a change does to them, and
# refresh it with `--tsv scripts/instructions.tsv` in the same commit.
#   scripts/instructions.sh --quick              # tiny counts (smoke test)
#
# vmalloc/examples/instructions.rs runs each operation in two out-of-line
# spans, ir_<op>_n1 (N1 operations) and ir_<op>_n2 (N2), after a warm-up;
# callgrind collects inside the spans only. The count per operation (per
# page for map and unmap) is (Ir(n2) - Ir(n1)) / (units(n2) - units(n1)),
# which cancels what a span costs once. The counts are deterministic for a
# given binary (same seed, same toolchain); rows marked "peer" are the
# crates the criterion benches compare against. The example documents the
# operations and their set-up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TSV= COMPARE= QUICK=
while [ $# -gt 0 ]; do
	case $1 in
	--tsv) TSV=${2:?--tsv FILE}; shift 2 ;;
	--compare) COMPARE=${2:?--compare FILE}; shift 2 ;;
	--quick) QUICK=--quick; shift ;;
	*) echo "usage: scripts/instructions.sh [--tsv FILE] [--compare OLD.tsv] [--quick]" >&2; exit 2 ;;
	esac
done
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

cargo build -q --release -p mmlab-vmalloc --example instructions
BIN=${CARGO_TARGET_DIR:-target}/release/examples/instructions
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*::ir_*' \
	--callgrind-out-file="$WORK/cg.out" "$BIN" $QUICK >"$WORK/spans.txt" 2>"$WORK/valgrind.log" ||
	{ cat "$WORK/valgrind.log" >&2; exit 1; }
callgrind_annotate --inclusive=yes --threshold=100 "$WORK/cg.out" >"$WORK/annotate.txt" 2>/dev/null

python3 - "$WORK/spans.txt" "$WORK/annotate.txt" "$TSV" "$COMPARE" <<'EOF'
import re, sys
spans_file, annotate_file, tsv, compare = sys.argv[1:5]
PEERS = {"bsa_pair": "buddy_system_allocator", "a64_unmap": "aarch64-paging"}
UNIT = {"map_pte": "page", "unmap_range": "page", "a64_unmap": "page", "lazy_purge_area": "area"}

spans = {}  # function name -> (op, span, n, units)
order = []
for line in open(spans_file):
    f = line.rstrip("\n").split("\t")
    if f[0] == "span":
        spans[f[2]] = (f[1], f[2].rsplit("_", 1)[1], int(f[3]), int(f[4]))
        if f[1] not in order:
            order.append(f[1])

ir = {}
pat = re.compile(r"^\s*([\d,]+)\s.*?(ir_[a-z0-9_]+_n[12])\b")
for line in open(annotate_file):
    m = pat.match(line)
    if m and m.group(2) in spans:
        ir[m.group(2)] = max(ir.get(m.group(2), 0), int(m.group(1).replace(",", "")))

rows = []
for op in order:
    a, b = f"ir_{op}_n1", f"ir_{op}_n2"
    if a not in ir or b not in ir:
        sys.exit(f"no callgrind count for {op} (spans {a}, {b})")
    u1, u2 = spans[a][3], spans[b][3]
    per = (ir[b] - ir[a]) / (u2 - u1)
    rows.append((op, UNIT.get(op, "op"), PEERS.get(op, "mmlab"), u1, u2, ir[a], ir[b], per))

old = {}
if compare:
    for line in open(compare):
        f = line.rstrip("\n").split("\t")
        if f[0] != "op":
            old[f[0]] = float(f[7])

print(f"{'operation':<18} {'per':<5} {'who':<23} {'Ir/unit':>10}" + (f" {'before':>10} {'change':>8}" if compare else ""))
for op, unit, who, u1, u2, i1, i2, per in rows:
    line = f"{op:<18} {unit:<5} {who:<23} {per:>10.1f}"
    if compare:
        if op in old and old[op]:
            line += f" {old[op]:>10.1f} {100 * (per - old[op]) / old[op]:>+7.1f}%"
        else:
            line += f" {'-':>10} {'new':>8}"
    print(line)
if tsv:
    with open(tsv, "w") as out:
        out.write("op\tunit\twho\tunits_n1\tunits_n2\tir_n1\tir_n2\tir_per_unit\n")
        for op, unit, who, u1, u2, i1, i2, per in rows:
            out.write(f"{op}\t{unit}\t{who}\t{u1}\t{u2}\t{i1}\t{i2}\t{per:.1f}\n")
    print(f"written to {tsv}")
EOF
