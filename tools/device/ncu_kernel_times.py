#!/usr/bin/env python3
"""Sums an `ncu --csv --metrics gpu__time_duration.sum` log by kernel (name + grid + block):
count, total and mean duration, largest first. Durations are of each kernel alone (ncu
serialises them), so launch gaps and overlap are not in them.
  tools/device/ncu_kernel_times.py ncu.csv [--top N] [--step]
--step: only one decode step of a generate run, the span between the last two launches of the
head matrix (the GEMV with the largest grid, one per step), so loading, prefill and the other
steps drop out; also prints the GEMVs' share of the step.
"""
import csv, sys, collections, re


def rows_of(path):
    """(name, grid, block, microseconds) per kernel launch, in launch order."""
    lines = [l for l in open(path) if l.startswith('"')]
    out = []
    for r in csv.DictReader(lines):
        if r.get('Metric Name') != 'gpu__time_duration.sum':
            continue
        v = float(r['Metric Value'].replace(',', ''))
        unit = r.get('Metric Unit', 'nsecond')
        us = v / 1e3 if unit.startswith('n') else (v if unit.startswith('u') else v * 1e3)
        out.append((re.sub(r'\(.*', '', r['Kernel Name']), r.get('Grid Size', ''), r.get('Block Size', ''), us))
    return out


def last_step(rows):
    grid_x = lambda g: int(re.match(r'\(?\s*(\d+)', g).group(1)) if re.match(r'\(?\s*(\d+)', g) else 0
    gemv = [i for i, r in enumerate(rows) if 'gemv' in r[0]]
    if not gemv:
        sys.exit('no GEMV kernels in the log')
    head_grid = max(grid_x(rows[i][1]) for i in gemv)
    heads = [i for i in gemv if grid_x(rows[i][1]) == head_grid]
    if len(heads) < 2:
        sys.exit(f'fewer than two head GEMVs (grid {head_grid}) in the log: no whole step')
    return rows[heads[-2] + 1: heads[-1] + 1], len(heads)


def main():
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 40
    rows = rows_of(sys.argv[1])
    if '--step' in sys.argv:
        rows, n_steps = last_step(rows)
        total = sum(r[3] for r in rows)
        g_us = sum(r[3] for r in rows if 'gemv' in r[0])
        print(f"one step: {len(rows)} kernels, {total / 1e3:.3f} ms of kernel time; GEMV {g_us / 1e3:.3f} ms "
              f"({100 * g_us / total:.0f}%), the rest {(total - g_us) / 1e3:.3f} ms; {n_steps} steps in the log")
    groups = collections.defaultdict(lambda: [0, 0.0])
    for name, grid, blk, us in rows:
        key = f"{name[:70]} grid{grid} blk{blk}"
        groups[key][0] += 1
        groups[key][1] += us
    total = sum(g[1] for g in groups.values())
    print(f"{total / 1e3:.2f} ms in {sum(g[0] for g in groups.values())} kernels")
    for k, (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {us:9.1f} us {n:6d} x {us / n:7.2f} us  {100 * us / total:5.1f}%  {k}")


main()
