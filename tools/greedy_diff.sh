#!/usr/bin/env bash
# Greedy output of two strata binaries, byte for byte, on the testdata models and the embedded
# model: the check that a refactor left generation unchanged (M16's "byte-identical to before").
#   tools/greedy_diff.sh OLD_STRATA NEW_STRATA [generate options...]   e.g. --device cpu
# Prints one line per model (same / DIFFERS) and exits non-zero if any output differs.
set -uo pipefail
old=$1 new=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
data=${STRATA_TESTDATA:-$here/tests/data/reference}
prompt="The scheduler picks the next task by priority. Tasks wait in queues; each queue has a level."
rc=0
for m in "$data"/models/*/model.gguf "$here"/models/strata-tiny-q4_k.gguf; do
  [ -f "$m" ] || continue
  a=$("$old" generate -m "$m" -p "$prompt" -n 48 --temp 0 "$@" 2>/dev/null)
  ra=$?
  b=$("$new" generate -m "$m" -p "$prompt" -n 48 --temp 0 "$@" 2>/dev/null)
  rb=$?
  if [ $ra -ne 0 ] || [ $rb -ne 0 ]; then
    echo "ERROR  $m (rc $ra / $rb)"; rc=1
  elif [ "$a" == "$b" ]; then
    echo "same     $m (${#b} bytes)"
  else
    echo "DIFFERS  $m"; rc=1
  fi
done
exit $rc
