#!/usr/bin/env bash
# A/B of decode settings in one call on the GPU machine: `strata bench decode` once per setting,
# the whole list run twice in turn (A B C A B C), so drift over the call shows up as a difference
# between the two rounds rather than between settings. Each line keeps bench's own roofline figure
# (the device read it measured in that run), so compare fractions, not only tok/s.
#
#   tools/device/decode_ab.sh MODEL "BENCH ARGS" "SETTING" ["SETTING"...]
#   SETTING: environment assignments for one run ("-" for none; bin=PROGRAM runs another build of
#   strata, e.g. an older one for a baseline), e.g.
#   tools/device/decode_ab.sh 27b.gguf "-c 4096 -p 512 -n 64 -r 2" - "STRATA_ATTN_MIN_CHUNK=64"
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 MODEL \"BENCH ARGS\" SETTING..." >&2; exit 2; }
model=$1 args=$2
shift 2
for round in 1 2; do
  for setting in "$@"; do
    envs=() bin=strata
    [ "$setting" = "-" ] || read -r -a envs <<< "$setting"
    for i in "${!envs[@]}"; do [[ ${envs[$i]} == bin=* ]] && bin=${envs[$i]#bin=} && unset "envs[$i]"; done
    # shellcheck disable=SC2086
    line=$(env "${envs[@]}" "$bin" bench decode -m "$model" --device cuda $args 2>&1 | grep -E "^decode:" | tail -1)
    printf 'round %s | %-60s | %s\n' "$round" "$setting" "$line"
  done
done
