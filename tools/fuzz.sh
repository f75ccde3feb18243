#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, a standalone clang project) and runs each for a while
# on its committed seeds and past crashers. A crash, leak, sanitizer report or timeout fails the
# run; the input that caused it is kept under $build/runs/<target>/artifacts/ (make it a
# regression: tests/fuzz/regressions/<target>/ plus a cpu test, see tests/fuzz/README.md).
#   tools/fuzz.sh                    # every target, 30 s each, nproc at a time (CI: tools/test.sh)
#   tools/fuzz.sh 600 gguf jobs      # chosen targets, 10 min each
#   STRATA_FUZZ_BUILD=dir            # build folder (default build-fuzz)
#   STRATA_FUZZ_PARALLEL=n           # targets run at once (default nproc)
# Targets: gguf, tokenizer, jobs, profile, request. New inputs libFuzzer finds go to a scratch corpus in
# the build folder (reused by the next run), so the committed seeds stay small.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf tokenizer jobs profile request)
build=${STRATA_FUZZ_BUILD:-build-fuzz}
parallel=${STRATA_FUZZ_PARALLEL:-$(nproc)}

cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

# One target; its verdict goes to $work/verdict so the runs can go in parallel.
run_one() {
  local t=$1 work="$build/runs/$1"
  mkdir -p "$work/corpus" "$work/artifacts"
  local seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  # -timeout: an input taking 10 s is a hang; -rss_limit_mb: the parsers must not allocate from
  # claimed sizes, so 2 GiB is far beyond any honest input of libFuzzer's default 4 KiB length.
  local dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  if "$build/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
       -artifact_prefix="$work/artifacts/" "$work/corpus" "${seeds[@]}" >"$work/log" 2>&1; then
    echo "fuzz $t: ok, $(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log") executions in ${secs}s" \
      >"$work/verdict"
  else
    { echo "fuzz $t: FAILED (log: $work/log)"
      grep -E "ERROR|SUMMARY|Test unit written|runtime error" "$work/log" | head -20 || true; } >"$work/verdict"
    return 1
  fi
}

running=0
for t in "${targets[@]}"; do
  rm -f "$build/runs/$t/verdict"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
done
wait || true
failed=()
for t in "${targets[@]}"; do
  cat "$build/runs/$t/verdict" 2>/dev/null || echo "fuzz $t: no verdict"
  grep -q ": ok," "$build/runs/$t/verdict" 2>/dev/null || failed+=("$t")
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: failures in ${failed[*]}"; exit 1; }
