#!/usr/bin/env python3
"""Sums an `ncu --csv --metrics gpu__time_duration.sum` log by kernel (name + grid + block):
count, total and mean duration, largest first. Durations are of each kernel alone (ncu
serialises them), so launch gaps are not in them.
  tools/device/ncu_kernel_times.py ncu.csv [--top N]
"""
import csv, sys, collections, re

def main():
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 40
    rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
    groups = collections.defaultdict(lambda: [0, 0.0])
    total = 0.0
    for r in csv.DictReader(rows):
        if r.get('Metric Name') != 'gpu__time_duration.sum':
            continue
        v = float(r['Metric Value'].replace(',', ''))
        unit = r.get('Metric Unit', 'nsecond')
        us = v / 1e3 if unit.startswith('n') else (v if unit.startswith('u') else v * 1e3)
        name = re.sub(r'\(.*', '', r['Kernel Name'])[:60]
        key = f"{name} grid{r.get('Grid Size','')} blk{r.get('Block Size','')}"
        groups[key][0] += 1
        groups[key][1] += us
        total += us
    print(f"{total / 1e3:.2f} ms in {sum(g[0] for g in groups.values())} kernels")
    for k, (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {us:9.1f} us {n:6d} x {us / n:7.2f} us  {k}")

main()
