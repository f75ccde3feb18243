#!/usr/bin/env bash
# Registers, spills and shared memory of every kernel in one CUDA source, as ptxas reports them --
# no GPU needed. It reruns the build's own nvcc command for the file (from ninja) with -Xptxas -v
# and prints one line per kernel, demangled, optionally only those matching a regex. Why: a launch
# bound that caps registers makes ptxas spill to local memory, which a kernel's speed shows but its
# code does not (the 16-column MMA GEMV spilled ~300 bytes per thread at 128 registers).
#
#   tools/cuda_resources.sh BUILD_DIR SOURCE.cu [REGEX]
#   e.g. tools/cuda_resources.sh build kernels/cuda/gemv_gpu.cu 'mma_kernel<GpuQ45K<false>'
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR SOURCE.cu [REGEX]" >&2; exit 2; }
build=$1 src=$(realpath "$2") filter=${3:-.}
obj=$(ninja -C "$build" -t query "$src" 2>/dev/null | awk '/outputs:/ {getline; print $1; exit}')
[ -n "$obj" ] || { echo "no ninja target builds $src in $build (a Ninja build dir is needed)" >&2; exit 2; }
cmd=$(ninja -C "$build" -t commands "$obj" | tail -1)
# Compile to a scratch object: drop ccache, the output and dependency-file arguments.
cmd=${cmd#ccache }
cmd=$(sed -E 's/ -o [^ ]+/ -o \/dev\/null/; s/ -MD//; s/ -MT [^ ]+//; s/ -MF [^ ]+//' <<< "$cmd")
log=$(mktemp); trap 'rm -f "$log"' EXIT
(cd "$build" && eval "$cmd -Xptxas -v") > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
python3 - "$log" "$filter" <<'PY'
import re, subprocess, sys
log, flt = open(sys.argv[1]).read().splitlines(), re.compile(sys.argv[2])
rows, name, frame = [], None, (0, 0, 0)
for line in log:
    m = re.search(r"Compiling entry function '(\S+)' for '(\w+)'", line)
    if m:
        name, arch = m.group(1), m.group(2)
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and name:
        frame = tuple(map(int, m.groups()))
        continue
    m = re.search(r"Used (\d+) registers.*?(?:(\d+) bytes smem)?$", line)
    if m and name:
        rows.append((name, arch, int(m.group(1)), frame, int(m.group(2) or 0)))
        name, frame = None, (0, 0, 0)
names = subprocess.run(["c++filt"], input="\n".join(r[0] for r in rows), capture_output=True, text=True).stdout.splitlines()
print(f"{'regs':>4} {'stack':>5} {'spill st':>8} {'spill ld':>8} {'smem':>6} arch  kernel")
for (mangled, arch, regs, (stack, st, ld), smem), full in zip(rows, names):
    short = re.sub(r"\(.*", "", full.replace("strata::kernels::cuda::detail::", "").replace("void ", ""))
    if flt.search(short):
        print(f"{regs:>4} {stack:>5} {st:>8} {ld:>8} {smem:>6} {arch} {short}")
PY
