#!/usr/bin/env bash
# Long libFuzzer runs on a machine with many free cores (the GPU machine's CPUs), from prebuilt
# targets on PATH (build-fuzz/fuzz_* packed with ../shared/device/bundle.sh). Each target runs in
# libFuzzer's fork mode with its share of the cores, seeded with the committed corpus and the past
# crashers; crashes are kept (-ignore_crashes=1 keeps the run going) and the logs and any crashing
# inputs land in OUT_DIR. Prints executions per target at the end (summary.txt).
#   tools/device/fuzz_long.sh OUT_DIR SECONDS gguf:3 tokenizer:7 jobs:2 profile:4
set -uo pipefail
out=${1:?output folder}
secs=${2:?seconds per target}
shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
for spec in "$@"; do
  t=${spec%%:*}
  n=${spec##*:}
  work=/tmp/fuzz-long/$t
  mkdir -p "$work/corpus" "$out/$t-artifacts"
  seeds=("$here/tests/fuzz/corpus/$t")
  [ -d "$here/tests/fuzz/regressions/$t" ] && seeds+=("$here/tests/fuzz/regressions/$t")
  dict=()
  [ -f "$here/tests/fuzz/$t.dict" ] && dict=(-dict="$here/tests/fuzz/$t.dict")
  # Same limits as tools/fuzz.sh: 10 s per input is a hang, 2 GiB of RSS is an allocation from a
  # claimed size.
  "fuzz_$t" -fork="$n" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 "${dict[@]}" -artifact_prefix="$out/$t-artifacts/" "$work/corpus" "${seeds[@]}" \
    >"$out/$t.log" 2>&1 &
done
wait
{
  for spec in "$@"; do
    t=${spec%%:*}
    # Fork mode's status lines carry the total executions of all workers: "#123456: cov: ..."
    execs=$(grep -oE '^#[0-9]+' "$out/$t.log" | tail -1 | tr -d '#')
    crashes=$(find "$out/$t-artifacts" -type f | wc -l)
    echo "$t: ${execs:-0} executions in ${secs}s on ${spec##*:} workers, $crashes crash/timeout/oom inputs"
  done
} | tee "$out/summary.txt"
