#!/bin/bash
# The CPU engine's decode of a small model on a many-core host: tok/s against the host-read roofline
# with the FFN block as one team job of phases (default) and as per-op jobs (STRATA_CPU_PHASES=0),
# the part size swept (STRATA_TEAM_MIN_PART_KB), and where the team's time goes
# (STRATA_TEAM_PROFILE=1: per call site, the serial gap before a job, wake, tail, efficiency), and
# parts per thread (STRATA_TEAM_PARTS_PER_THREAD) x the FFN block's down prefetch (STRATA_FFN_PREFETCH).
# usage: tools/bench/cpu_team_sweep.sh [strata binary] [model] [threads...]   (defaults: build-cpu/strata,
# models/strata-tiny-q4_k.gguf, 8 16). Prints to stdout; takes a few minutes.
set -u
BIN=${1:-build-cpu/strata}
MODEL=${2:-models/strata-tiny-q4_k.gguf}
shift $(( $# > 2 ? 2 : $# ))
THREADS=${*:-8 16}
bench() {  # env... -- mode threads
  env "$@" "$BIN" bench decode -m "$MODEL" --device cpu --cpu-matmul "$MODE" -t "$T" -n 128 -r 3 2>&1 | grep '^decode:'
}
echo "host: $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for T in $THREADS; do
  for MODE in int8 exact; do
    for P in 1 0 1 0; do echo -n "t=$T $MODE phases=$P: "; bench STRATA_CPU_PHASES=$P; done
  done
  MODE=int8
  for KB in 8 32 64; do echo -n "t=$T int8 phases=1 min_part_kb=$KB: "; bench STRATA_TEAM_MIN_PART_KB=$KB; done
  # More parts than threads (late threads' parts taken by early ones) and the down rows prefetched
  # during the gate/up phase's tail; both leave results unchanged.
  for R in 1 2; do
    for PPT in 1 2 4; do for PF in 0 1; do
      echo -n "t=$T int8 phases=1 parts_per_thread=$PPT ffn_prefetch=$PF: "
      bench STRATA_TEAM_PARTS_PER_THREAD=$PPT STRATA_FFN_PREFETCH=$PF
    done; done
  done
done
T=$(echo $THREADS | awk '{print $NF}'); MODE=int8
for P in 1 0; do
  echo "== profile t=$T int8 phases=$P"
  STRATA_TEAM_PROFILE=1 STRATA_CPU_PHASES=$P "$BIN" bench decode -m "$MODEL" --device cpu --cpu-matmul int8 -t "$T" -n 128 -r 3 2>&1 | grep -v '^\[' | grep -A30 '^team profile (' 
done
