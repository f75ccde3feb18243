#!/usr/bin/env python3
"""Where one decode step's wall time goes on the GPU timeline, from `nsys stats -r cuda_gpu_trace
-f csv` of a run profiled with `nsys profile --cuda-graph-trace=node` (kernels inside graphs are
listed one by one): the span of the last whole step (between the last two head GEMVs, the GEMV of
the largest grid), the time some kernel runs (the union of kernel intervals over all streams), the
idle gaps between them, and per kernel name its count, total time and the idle time before it.
Unlike ncu's serialised durations this shows launch gaps and overlap.
  tools/device/nsys_step_gaps.py trace_cuda_gpu_trace.csv [--top N]
"""
import csv, sys, collections, re


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 25
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            name = r.get('Name', '')
            if not r.get('GrdX') or 'memcpy' in name.lower() or 'memset' in name.lower():
                continue
            start, dur = float(r['Start (ns)']), float(r['Duration (ns)'])
            rows.append((start, start + dur, re.sub(r'\(.*', '', name)[:90], int(r['GrdX'] or 0), r.get('Strm', '')))
    rows.sort()
    gemv = [i for i, r in enumerate(rows) if 'gemv' in r[2]]
    head_grid = max(rows[i][3] for i in gemv)
    heads = [i for i in gemv if rows[i][3] == head_grid]
    # A head may run in parts (launches within a few kernels of each other): a step ends at the
    # last part of its group.
    ends = [h for k, h in enumerate(heads) if k + 1 == len(heads) or heads[k + 1] - h > 5]
    if len(ends) < 2:
        sys.exit('fewer than two head GEMVs: no whole step in the trace')
    step = rows[ends[-2] + 1: ends[-1] + 1]
    t0, t1 = rows[ends[-2]][1], step[-1][1]
    busy, idle_before = 0.0, collections.Counter()
    cur_end = t0
    for s, e, name, _, _ in step:
        if s > cur_end:
            idle_before[name] += s - cur_end
        if e > cur_end:
            busy += e - max(s, cur_end)
            cur_end = e
    span = t1 - t0
    print(f'step: {len(step)} kernels, {span / 1e3:.1f} us from the previous head GEMV\'s end to this one\'s end; '
          f'some kernel running {busy / 1e3:.1f} us ({100 * busy / span:.1f}%), idle {(span - busy) / 1e3:.1f} us')
    by = collections.defaultdict(lambda: [0, 0.0])
    for s, e, name, _, _ in step:
        by[name][0] += 1
        by[name][1] += e - s
    print(f'{"kernel":90s} {"n":>4s} {"total us":>9s} {"mean us":>8s} {"idle before us":>14s}')
    for name, (n, tot) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f'{name:90s} {n:4d} {tot / 1e3:9.1f} {tot / n / 1e3:8.2f} {idle_before[name] / 1e3:14.1f}')


if __name__ == '__main__':
    main()
