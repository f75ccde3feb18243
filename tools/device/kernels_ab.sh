#!/usr/bin/env bash
# A/B of GEMV settings in one call on the GPU machine: `strata bench kernels` once per setting, the
# list twice in turn (A B C A B C), each run's GEMV rows printed under its setting (every figure is
# a fraction of the device read that run measured, or a ratio to its own 1-column time) and its
# JSON kept as OUT_DIR/kernels_<round>_<index>.json for `strata bench kernels --compare`.
#
#   tools/device/kernels_ab.sh OUT_DIR "BENCH ARGS" SETTING [SETTING...]
#   SETTING: environment assignments for one run ("-" for none; bin=PROGRAM runs another build), e.g.
#   tools/device/kernels_ab.sh $OUT "--types q3_K,q4_K --kv f16 --ctx 4096 --iters 3" - \
#       STRATA_GEMV_MMA_PERSIST=3 STRATA_GEMV_MMA16_ONE_CTA=1
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OUT_DIR \"BENCH ARGS\" SETTING..." >&2; exit 2; }
out=$1 args=$2
shift 2
mkdir -p "$out"
for round in 1 2; do
  i=0
  for setting in "$@"; do
    envs=() bin=strata
    [ "$setting" = "-" ] || read -r -a envs <<< "$setting"
    for k in "${!envs[@]}"; do [[ ${envs[$k]} == bin=* ]] && bin=${envs[$k]#bin=} && unset "envs[$k]"; done
    json="$out/kernels_${round}_${i}.json"
    echo "== round $round | $setting"
    # shellcheck disable=SC2086
    env "${envs[@]}" "$bin" bench kernels $args --json "$json" 2>&1 | grep -E "^(ceilings:|type |[a-zA-Z0-9_]+ +(qkv|ffn|head) )"
    i=$((i + 1))
  done
done
