#!/usr/bin/env python3
"""Per-graph kernel breakdown of an nsys report exported to SQLite (nsys export -t sqlite).

Graphs traced with --cuda-graph-trace=node carry graphId / graphNodeId on each kernel row: for every
graph this prints how often it was launched, its mean kernel time per launch, and the kernels that
make it up (mean time per launch, share), and its mean span per launch (first kernel's start to the
last one's end: kernel time plus the gaps between kernels). Kernels outside graphs are graph 0.
  tools/device/graph_kernels.py report.sqlite [--top N]
"""
import sqlite3, sys, collections

def main():
    db = sqlite3.connect(sys.argv[1])
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 12
    cols = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    gid = 'graphId' if 'graphId' in cols else None
    nid = 'graphNodeId' if 'graphNodeId' in cols else None
    q = f"SELECT k.start, k.end, s.value, {gid or 0}, {nid or 0} FROM CUPTI_ACTIVITY_KIND_KERNEL k " \
        "JOIN StringIds s ON s.id = k.shortName"
    per_graph = collections.defaultdict(lambda: collections.defaultdict(float))
    node_counts = collections.defaultdict(lambda: collections.Counter())
    spans = collections.defaultdict(dict)  # graph -> launch index -> [first start, last end]
    for start, end, name, g, n in db.execute(q + " ORDER BY k.start"):
        g = g or 0
        per_graph[g][name] += (end - start) / 1e3
        i = node_counts[g][n]  # the i-th run of node n belongs to the graph's i-th launch
        node_counts[g][n] += 1
        if g:
            sp = spans[g].setdefault(i, [start, end])
            sp[0], sp[1] = min(sp[0], start), max(sp[1], end)
    for g, kern in sorted(per_graph.items(), key=lambda kv: -sum(kv[1].values())):
        launches = min(node_counts[g].values()) if g else 1
        total = sum(kern.values())
        span = sum(e - b for b, e in spans[g].values()) / 1e3 / max(1, len(spans[g])) if g else 0.0
        print(f"graph {g}: {len(node_counts[g])} nodes, {launches} launches, "
              f"{total / launches:.1f} us kernel time per launch" + (f", {span:.1f} us span" if g else ""))
        for name, us in sorted(kern.items(), key=lambda kv: -kv[1])[:top]:
            print(f"   {us / launches:9.1f} us  {100 * us / total:5.1f}%  {name[:90]}")

main()
