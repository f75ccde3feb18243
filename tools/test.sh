#!/usr/bin/env bash
# Sets up, builds and runs strata's tests: the release build (CUDA code compiled when nvcc exists;
# `gpu` tests run only where a GPU is present), then an ASan+UBSan build of the `cpu` tests, then
# a short libFuzzer run of every fuzz target (tools/fuzz.sh).
#   tools/test.sh                 # everything (what CI runs)
#   STRATA_SKIP_SANITIZE=1 tools/test.sh   # skip the ASan+UBSan build
#   STRATA_SKIP_FUZZ=1 tools/test.sh       # skip the fuzz phase
#   STRATA_FUZZ_SECONDS=n tools/test.sh    # seconds per fuzz target (default 15: a smoke run; long runs: tools/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

tools/setup.sh

cuda_archs=${STRATA_CUDA_ARCHS:-}
if [ -z "$cuda_archs" ]; then
  # One architecture is enough to prove the CUDA code compiles; a GPU here gets its own.
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then cuda_archs=native; else cuda_archs=90; fi
fi

echo "== release build (CUDA archs: $cuda_archs)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=AUTO \
  -DCMAKE_CUDA_ARCHITECTURES="$cuda_archs"
cmake --build build -j "$jobs"
labels=(-LE gpu)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then labels=(); fi
(cd build && ctest --output-on-failure -j "$jobs" "${labels[@]}")

if [ -z "${STRATA_SKIP_SANITIZE:-}" ]; then
  echo "== ASan + UBSan build, cpu tests"
  # -O1 -g1 (line tables only): sanitizer reports keep file:line, and the build takes ~40% less
  # time than -O2 -g (measured on cmd_plan.cpp: 40 s vs 70 s), which keeps CI well inside its budget.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF -DSTRATA_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
  cmake --build build-asan -j "$jobs"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j "$jobs" -L cpu)
fi

if [ -z "${STRATA_SKIP_FUZZ:-}" ]; then
  # About 2.5 min on two idle cores from a clean build folder: the fuzz project compiles only the
  # parsers' sources at -O1 (164 s of CPU, so ~85 s on two cores), and the four targets run two at a
  # time (60 s). See docs/hardening.md.
  echo "== fuzz: ${STRATA_FUZZ_SECONDS:-15} s per target"
  fuzz_start=$(date +%s)
  tools/fuzz.sh "${STRATA_FUZZ_SECONDS:-15}"
  echo "== fuzz phase took $(( $(date +%s) - fuzz_start )) s"
fi
