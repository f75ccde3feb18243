#!/usr/bin/env bash
# Sets up, builds and runs strata's tests (what CI runs: .ci/run):
#   1. one ASan+UBSan build of everything, CUDA code included (nvcc compiles the kernels; the
#      sanitizers instrument the host C++), and every test in it: `cpu` and `slow` everywhere,
#      `gpu` only where a GPU is present;
#   2. a ThreadSanitizer build of the host-side threading tests (tools/tsan.sh);
#   3. a short libFuzzer run of every fuzz target (tools/fuzz.sh).
# One sanitized build instead of a release build plus a sanitized one: every test still runs, under
# stricter checking, and CI compiles the sources once (the release build was ~11 of ~28 minutes).
# Release binaries for real work come from tools/run.sh (build/).
#   STRATA_SKIP_TSAN=1 tools/test.sh       # skip the TSan phase
#   STRATA_SKIP_FUZZ=1 tools/test.sh       # skip the fuzz phase
#   STRATA_FUZZ_SECONDS=n tools/test.sh    # seconds per fuzz target (default 15: a smoke run; long runs: tools/fuzz.sh)
#   STRATA_CUDA_ARCHS=90 tools/test.sh     # CUDA architectures (default: this GPU, or 90 without one)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
phase() { echo "== $1"; phase_start=$(date +%s); }
phase_end() { echo "== took $(( $(date +%s) - phase_start )) s"; }

tools/setup.sh

have_gpu=
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi
cuda_archs=${STRATA_CUDA_ARCHS:-}
# One architecture is enough to prove the CUDA code compiles; a GPU here gets its own.
[ -n "$cuda_archs" ] || { [ -n "$have_gpu" ] && cuda_archs=native || cuda_archs=90; }

phase "ASan + UBSan build (CUDA archs: $cuda_archs), all tests"
# -O1 -g1 (line tables only): sanitizer reports keep file:line, and the build takes ~40% less
# time than -O2 -g (measured on cmd_plan.cpp: 40 s vs 70 s).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=AUTO -DSTRATA_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CUDA_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
  -DCMAKE_CUDA_ARCHITECTURES="$cuda_archs"
cmake --build build-asan -j "$jobs"
labels=(-LE gpu)
[ -z "$have_gpu" ] || labels=()
# protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap would be.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0 \
   UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" "${labels[@]}")
phase_end

if [ -z "${STRATA_SKIP_TSAN:-}" ]; then
  phase "ThreadSanitizer: host-side threading tests"
  tools/tsan.sh
  phase_end
fi

if [ -z "${STRATA_SKIP_FUZZ:-}" ]; then
  # About 2.5 min on two idle cores from a clean build folder: the fuzz project compiles only the
  # parsers' sources at -O1, and the four targets run two at a time. See docs/hardening.md.
  phase "fuzz: ${STRATA_FUZZ_SECONDS:-15} s per target"
  tools/fuzz.sh "${STRATA_FUZZ_SECONDS:-15}"
  phase_end
fi
