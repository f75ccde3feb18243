#!/usr/bin/env python3
"""How much two tracks of a strata --trace file (Chrome trace JSON) ran at the same time: per track,
its busy time (the union of its spans), and the time both were busy. The cpu tier's claim (M17) is
that cpu-tier blocks compute on the host while the copy engine streams other blocks, so
    tools/device/trace_overlap.py trace.json ["cpu compute"] ["h2d copy"] [--after-ms T]
prints how much of the CPU's busy time had a copy in flight. --after-ms skips the first T ms
(the prompt), so that decode steps alone count.
"""
import json, sys


def busy(intervals):
    """The union of [start, end) intervals, as a sorted list of disjoint ones."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap(a, b):
    """Total length of the intersection of two disjoint sorted interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def main():
    args = [a for a in sys.argv[1:]]
    after = 0.0
    if '--after-ms' in args:
        k = args.index('--after-ms')
        after = float(args[k + 1]) * 1e3
        del args[k:k + 2]
    path = args[0]
    first = args[1] if len(args) > 1 else 'cpu compute'
    second = args[2] if len(args) > 2 else 'h2d copy'
    data = json.load(open(path))
    events = data['traceEvents'] if isinstance(data, dict) else data
    tracks = {}
    for e in events:
        if e.get('ph') == 'M' and e.get('name') == 'thread_name':
            tracks[(e.get('pid'), e.get('tid'))] = e['args']['name']
    spans = {first: [], second: []}
    t0 = None
    for e in events:
        if e.get('ph') != 'X':
            continue
        t0 = e['ts'] if t0 is None else min(t0, e['ts'])
    for e in events:
        if e.get('ph') != 'X':
            continue
        t = tracks.get((e.get('pid'), e.get('tid')), str(e.get('tid')))
        if t in spans and e['ts'] - t0 >= after:
            spans[t].append((e['ts'], e['ts'] + e.get('dur', 0.0)))
    a, b = busy(spans[first]), busy(spans[second])
    ta, tb = sum(e - s for s, e in a), sum(e - s for s, e in b)
    both = overlap(a, b)
    print(f'{first}: {len(spans[first])} spans, busy {ta / 1e3:.1f} ms')
    print(f'{second}: {len(spans[second])} spans, busy {tb / 1e3:.1f} ms')
    share = 100 * both / ta if ta else 0.0
    print(f'both at once: {both / 1e3:.1f} ms = {share:.0f}% of {first}\'s busy time')


if __name__ == '__main__':
    main()
