#!/usr/bin/env bash
# ThreadSanitizer build of the host-side threading tests (CPU only): the io block reader (its
# pread thread pool, the io_uring engine's submit/complete paths, fault injection), the batch
# journal and the CPU kernels' thread team. Only those test binaries and the libraries they link
# are built.
#   tools/tsan.sh                  # build into build-tsan and run them
#   STRATA_TSAN_BUILD=dir tools/tsan.sh
# Not in tools/test.sh by default: see the timing in docs/hardening.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${STRATA_TSAN_BUILD:-build-tsan}
# -O1 -g1: TSan needs optimisation off enough to keep frames; line tables keep reports readable.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build "$build" -j "$(nproc)" --target test_io test_batch test_thread_team
# halt_on_error: the first race fails the test that hit it, with both stacks in the output.
(cd "$build" && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
   ctest --output-on-failure -j "$(nproc)" -R '^(test_io|test_batch|test_thread_team):')
