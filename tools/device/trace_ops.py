#!/usr/bin/env python3
"""Where a run's time goes, from a strata --trace file (Chrome trace JSON): per track, the spans
grouped by name (count, total, mean), largest first. With STRATA_TRACE_OPS=1 the "gpu ops" track
has one span per kernel call, named with its shape and row count (n=), so decode, draft and verify
calls separate by name.
  tools/device/trace_ops.py trace.json [--top N] [--track NAME]
"""
import json, sys, collections

def main():
    data = json.load(open(sys.argv[1]))
    events = data['traceEvents'] if isinstance(data, dict) else data
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 25
    only = sys.argv[sys.argv.index('--track') + 1] if '--track' in sys.argv else None
    tracks = {}
    for e in events:
        if e.get('ph') == 'M' and e.get('name') == 'thread_name':
            tracks[(e.get('pid'), e.get('tid'))] = e['args']['name']
    groups = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0.0]))
    for e in events:
        if e.get('ph') != 'X':
            continue
        t = tracks.get((e.get('pid'), e.get('tid')), str(e.get('tid')))
        if only and t != only:
            continue
        g = groups[t][e['name']]
        g[0] += 1
        g[1] += e.get('dur', 0.0)
    for t, names in groups.items():
        total = sum(v[1] for v in names.values())
        print(f"== track {t}: {total / 1e3:.1f} ms in {sum(v[0] for v in names.values())} spans")
        for name, (n, us) in sorted(names.items(), key=lambda kv: -kv[1][1])[:top]:
            print(f"  {us / 1e3:9.2f} ms {n:6d} x {us / n:8.1f} us  {name[:80]}")

main()
