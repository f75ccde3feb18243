#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, a standalone clang project) and runs each for a while
# on its committed seeds. A crash, leak, sanitizer report or timeout fails the run; the input that
# caused it is kept under $build/runs/<target>/artifacts/ (turn it into a regression test).
#   tools/fuzz.sh                    # every target, 30 s each (what tools/test.sh runs in CI)
#   tools/fuzz.sh 600 gguf jobs      # chosen targets, 10 min each
#   STRATA_FUZZ_BUILD=dir            # build folder (default build-fuzz)
# Targets: gguf, tokenizer, jobs, profile. New inputs libFuzzer finds go to a scratch corpus in
# the build folder (reused by the next run), so the committed seeds stay small.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf tokenizer jobs profile)
build=${STRATA_FUZZ_BUILD:-build-fuzz}

cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

failed=()
for t in "${targets[@]}"; do
  work="$build/runs/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  # -timeout: an input taking 10 s is a hang; -rss_limit_mb: the parsers must not allocate from
  # claimed sizes, so 2 GiB is far beyond any honest input of libFuzzer's default 4 KiB length.
  # Inputs that once crashed a target (tests/fuzz/regressions) are replayed first as seeds.
  seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  if "$build/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$work/artifacts/" "$work/corpus" "${seeds[@]}" >"$work/log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
    echo "fuzz $t: ok, ${runs:-?} executions in ${secs}s"
  else
    echo "fuzz $t: FAILED (log: $work/log)"
    grep -E "ERROR|SUMMARY|Test unit written|runtime error" "$work/log" | head -20 || true
    failed+=("$t")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: failures in ${failed[*]}"; exit 1; }
