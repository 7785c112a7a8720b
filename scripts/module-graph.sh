#!/usr/bin/env bash
# Module cycles of every crate, as cargo-modules sees them:
#
#   cargo install cargo-modules --version 0.27.0 --locked   # once
#   scripts/module-graph.sh                # every crate; exit 1 on a cycle
#   scripts/module-graph.sh mmlab-vmalloc  # one crate, with the edges of each cycle
#
# It reads `cargo modules dependencies --lib -p CRATE` with types, functions
# and traits folded away (module "uses" edges only) and prints each strongly
# connected group of modules. (cargo-modules 0.27's own `--acyclic` also
# counts a type and its methods as a cycle, so it cannot be used as is.)
# The test suite runs the same check from the source without the tool:
# tests/tests/module_graph.rs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v cargo-modules >/dev/null ||
	{ echo "cargo-modules is not installed: cargo install cargo-modules --version 0.27.0 --locked" >&2; exit 2; }
CRATES=("$@")
[ ${#CRATES[@]} -gt 0 ] || CRATES=(mmlab-engine mmlab-buddy mmlab-pcp mmlab-vmalloc mmlab-vmemmap mmlab-hugetlb mmlab-harness)
python3 - "${CRATES[@]}" <<'PY'
import collections, re, subprocess, sys

def graph(pkg):
    out = subprocess.run(["cargo", "modules", "dependencies", "--lib", "-p", pkg, "--no-externs", "--no-sysroot",
                          "--no-fns", "--no-types", "--no-traits"], capture_output=True, text=True, check=True).stdout
    g, nodes = collections.defaultdict(set), set()
    for a, b in re.findall(r'"([^"]+)" -> "([^"]+)" \[label="uses"', out):
        if a != b:
            g[a].add(b)
            nodes |= {a, b}
    return g, nodes

def sccs(g, nodes):
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop(); on.discard(w); c.append(w)
                if w == v:
                    break
            if len(c) > 1:
                out.append(sorted(c))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out

short = lambda m: m.split("::", 1)[1] if "::" in m else m
total = 0
for pkg in sys.argv[1:]:
    g, nodes = graph(pkg)
    cycles = sccs(g, nodes)
    total += len(cycles)
    print(f"{pkg}: {len(nodes)} modules, {sum(len(v) for v in g.values())} use edges, {len(cycles)} cycles")
    for c in cycles:
        members = set(c)
        print("   ", " <-> ".join(short(m) for m in c))
        for a in c:
            for b in sorted(g[a] & members):
                print(f"        {short(a)} -> {short(b)}")
sys.exit(1 if total else 0)
PY
