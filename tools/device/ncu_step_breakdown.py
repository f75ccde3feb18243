#!/usr/bin/env python3
"""One decode step's kernels from an `ncu --csv --metrics gpu__time_duration.sum` log of a
generate run: the step is the span between the last two launches of the head matrix (the GEMV
with the largest grid, one per step), so loading, prefill and the other steps drop out. Prints
each kernel kind (name + grid) of that step with its count and time, largest first, and the share
of GEMVs. Durations are of each kernel alone (ncu serialises them): gaps and overlap are not in them.
  tools/device/ncu_step_breakdown.py ncu.csv [--top N]
"""
import csv, sys, collections, re


def rows_of(path):
    lines = [l for l in open(path) if l.startswith('"')]
    out = []
    for r in csv.DictReader(lines):
        if r.get('Metric Name') != 'gpu__time_duration.sum':
            continue
        v = float(r['Metric Value'].replace(',', ''))
        unit = r.get('Metric Unit', 'nsecond')
        us = v / 1e3 if unit.startswith('n') else (v if unit.startswith('u') else v * 1e3)
        name = re.sub(r'\(.*', '', r['Kernel Name'])
        out.append((name, r.get('Grid Size', ''), r.get('Block Size', ''), us))
    return out


def grid_x(g):
    m = re.match(r'\(?\s*(\d+)', g)
    return int(m.group(1)) if m else 0


def main():
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 40
    rows = rows_of(sys.argv[1])
    gemv = [i for i, r in enumerate(rows) if 'gemv' in r[0]]
    if not gemv:
        sys.exit('no GEMV kernels in the log')
    head_grid = max(grid_x(rows[i][1]) for i in gemv)
    heads = [i for i in gemv if grid_x(rows[i][1]) == head_grid]
    if len(heads) < 2:
        sys.exit(f'fewer than two head GEMVs (grid {head_grid}) in the log: no whole step')
    step = rows[heads[-2] + 1: heads[-1] + 1]
    groups = collections.defaultdict(lambda: [0, 0.0])
    for name, grid, blk, us in step:
        key = f"{name[:70]} grid{grid} blk{blk}"
        groups[key][0] += 1
        groups[key][1] += us
    total = sum(us for *_, us in step)
    g_us = sum(us for name, *_, us in step if 'gemv' in name)
    print(f"one step: {len(step)} kernels, {total / 1e3:.3f} ms of kernel time; GEMV {g_us / 1e3:.3f} ms "
          f"({100 * g_us / total:.0f}%), the rest {(total - g_us) / 1e3:.3f} ms; {len(heads)} steps in the log")
    for k, (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {us:9.1f} us {n:5d} x {us / n:7.2f} us  {100 * us / total:5.1f}%  {k}")


main()
