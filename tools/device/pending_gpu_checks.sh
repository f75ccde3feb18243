#!/usr/bin/env bash
# The GPU checks that sessions 27-28 could not run (no device lease), in one script for the GPU
# machine, run from the repository root with a bundle's binaries on PATH (tools/device/bundle.sh;
# ../shared/device/README.md) and STRATA_TESTDATA set:
#   tools/device/pending_gpu_checks.sh OUT_DIR [tests|kernels|model|all]
# tests:   the new GPU tests (draft window / sinks, shadow refused on CUDA, GEMV column independence
#          with the persistent grid and the one-CTA 16-column kernel) and the suites their changes
#          touch; each prints its last lines.
# kernels: GEMV A/B of STRATA_GEMV_MMA_PERSIST / STRATA_GEMV_MMA16_ONE_CTA (bench kernels, JSON
#          kept), and the CPU int8 kernels on the host (which IQ3 grid load the pick takes there).
# model:   the 27B-shaped synth: resident subset drafts under --vram 12GiB, the draft window's
#          effect on a draft step at 40K positions (explicit 64,4096 vs off), and decode attention's
#          min chunk 64 vs 256 (session 26's default, never timed).
# cpu:     (session 29) --cpu-blocks auto became the default without a GPU run: the 27B at
#          --vram 12GiB with no flag vs --cpu-blocks off (the report's "cpu tier:" line, tok/s
#          against prediction; session 30 ran these two: 31.80 vs 27.06 tok/s, 93% of prediction),
#          batch --batch 8 (the tier should stay out: RunShape::decode_rows), and the host-tier
#          GPU tests (needs models/strata-tiny-q4_k.gguf in the carried tree). Session 31 ran the
#          last two (H100): [host-tiers] 6 cases pass (also with STRATA_ATTN_ROWS=0); batch 8 writes
#          8 of 8 (`batch` needs --instruction for a folder of documents, as below).
# norm:    (session 30) the norm, attention and forward suites as the defaults run them (the
#          review's restructure of norm.cu and of the lean attention launch ran on no GPU), then
#          the cluster RMS norm (kernels/cuda/norm.cu, opt-in STRATA_NORM_CLUSTER=1, never run):
#          its bit-for-bit tests with it on, the forward and graph suites, and the
#          27B resident decode A/B against the one-block kernel. If it passes and wins, make it
#          the default (launch_norm_cluster's switch) and note the figures in norm.cu.
#          Session 31 ran it (H100): every suite passes with the defaults and with the cluster norm;
#          the cluster norm lost the A/B (-3%) and stays opt-in (norm.cu).
# ring:    (session 31) the two-ended staging ring (offload/shared_ring.h): the streaming and graph
#          suites (their two-ended cases pass the option themselves), then bench spec's replay at
#          --vram 12GiB with it off and on. Session 31 ran it (H100): suites pass, +5.8-6.6% plain,
#          +3-5% at A = 0.7; it is the default since (STRATA_SHARED_RING=0 for two slots).
# s32:     (session 32, no lease came) the start-up CPU check now times the int8 GEMV beyond the LLC
#          (offload/default_profile.cpp): session 32's first lease saw the default plan put 2.1 GB
#          of FFN blocks on the CPU at 75% of its prediction (22.6 vs 30.1 tok/s) while explicit
#          --cpu-blocks auto took 26 attention blocks at 88% (29.4 vs 33.6): the default's plan and
#          speed against its prediction, and how long `strata plan` takes now; then the CPU
#          kernels on 16 threads (the one-column register accumulators and the half-chunk tails,
#          never run there) and the 1b synth on the CPU engine with its team profile (M17: >= 60%
#          of the host-read roofline, 53% in session 31).
# s33:     (session 33, no lease came) the table readers' GEMV staged by cp.async across row groups
#          (STRATA_IQ_GEMV_VARIANT=3, gemv_gpu_async_kernel; opt-in, never run): its bit-for-bit GEMV
#          tests, then bench kernels A/B against the default (the new "alone1" column: the GEMV
#          without the quantiser's launch, as the engine runs it). If it wins on every shape, make
#          it kIqGemvVariant (gemv_gpu_launch.cuh) and note the figures there.
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [tests|kernels|model|cpu|norm|ring|s32|s33|all]} what=${2:-all}
mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
t() { local name=$1; shift; echo "== $name"; timeout 120 env "$@" 2>&1 | tail -3; }
nvidia-smi -L; lscpu | grep -m1 "Model name"
if [ "$what" = tests ] || [ "$what" = all ]; then
  t "draft window (sinks)" test_cuda "decode attention with sinks*"
  t "draft window spec" test_cuda "GPU greedy speculative decoding through a draft window*"
  t "shadow refused" test_cuda "GPU engine: --spec shadow is refused*"
  t "gemv column independence" test_cuda "cuda gemv on the GPU layout: a column's output does not depend on the column count or kernel"
  t "gemv column independence (one cta 16)" STRATA_GEMV_MMA16_ONE_CTA=1 test_cuda "cuda gemv on the GPU layout: a column's output does not depend on the column count or kernel"
  t "gemv vs cpu (one cta 16, persist 1)" STRATA_GEMV_MMA16_ONE_CTA=1 STRATA_GEMV_MMA_PERSIST=1 test_cuda "cuda gemv on the GPU layout matches the CPU reference*"
  t "attention" test_cuda "[attention]"
  t "forward graphs" test_cuda "[forward],[graphs]"
  t "tree spec" test_cuda "[tree],[spec]"
  t "host tiers" test_cuda "[host-tiers]"
  t "session 23 seed" STRATA_TEST_SEED=6018027478611333349 test_cuda "decode attention with a token-tree mask matches the CPU with the same mask"
  el "tests"
fi
if [ "$what" = kernels ] || [ "$what" = all ]; then
  bash tools/device/kernels_ab.sh "$out" "--types q3_K,q4_K --kv f16 --ctx 4096 --iters 3" - \
      STRATA_GEMV_MMA_PERSIST=3 STRATA_GEMV_MMA16_ONE_CTA=1 "STRATA_GEMV_MMA_PERSIST=3 STRATA_GEMV_MMA16_ONE_CTA=1"
  timeout 120 strata bench cpu-kernels --types q3_K,q4_K,iq3_xxs,iq3_s,iq2_xs,iq1_m --cols 1,8 --threads 16 \
      --json "$out/cpu_kernels.json" 2>&1 | tail -16
  el "kernels"
fi
if [ "$what" = model ] || [ "$what" = all ]; then
  m=/tmp/w/27b.gguf
  mkdir -p /tmp/w
  [ -f $m ] || strata synth --preset 27b --mix q3_k_m --no-progress -o $m > /tmp/w/synth.log 2>&1
  el "synth"
  timeout 150 strata bench spec -m $m --device cuda --vram 12GiB -c 4096 -n 64 -r 1 --modes none,subset,auto \
      --json "$out/spec_subset.json" 2>&1 | tail -14
  head -c 150000 README.md > /tmp/w/long.txt
  for w in off 64,4096; do
    timeout 150 strata bench spec -m $m --device cuda -c 40960 -f /tmp/w/long.txt -n 48 -r 1 --modes none,early:d=16 \
        --draft-window $w --json "$out/window_$w.json" 2>&1 | grep -E "tok/s|draft steps|windowed"
    el "window $w"
  done
  bash tools/device/decode_ab.sh $m "-c 4096 -p 512 -n 64 -r 2" STRATA_ATTN_MIN_CHUNK=256 -
  el "min chunk"
fi
if [ "$what" = norm ] || [ "$what" = all ]; then
  m=/tmp/w/27b.gguf
  mkdir -p /tmp/w
  [ -f $m ] || strata synth --preset 27b --mix q3_k_m --no-progress -o $m > /tmp/w/synth.log 2>&1
  # The default (one block per vector) first: its kernel body became the cluster kernel's too in
  # session 30's review, after the last GPU run.
  t "norm tests (default)" test_cuda "cuda rms_norm*,cuda add_rms_norm*,cuda act_round*,cuda gated_act_round*"
  t "attention, forward + graphs (default)" test_cuda "[attention],[forward],[graphs]"
  t "norm tests (cluster)" STRATA_NORM_CLUSTER=1 test_cuda "cuda rms_norm*,cuda add_rms_norm*,cuda act_round*,cuda gated_act_round*"
  t "forward + graphs (cluster)" STRATA_NORM_CLUSTER=1 test_cuda "[forward],[graphs]"
  bash tools/device/decode_ab.sh $m "-c 4096 -p 512 -n 64 -r 2" - STRATA_NORM_CLUSTER=1
  el "norm"
fi
if [ "$what" = ring ] || [ "$what" = all ]; then
  m=/tmp/w/27b.gguf
  mkdir -p /tmp/w
  [ -f $m ] || strata synth --preset 27b --mix q3_k_m --no-progress -o $m > /tmp/w/synth.log 2>&1
  t "streaming (two-ended cases included)" test_cuda "[streaming]"
  t "graph steps (two-ended cases included)" test_cuda "Graph steps equal eager steps*"
  for sr in 0 1; do
    echo "== bench spec --vram 12GiB, STRATA_SHARED_RING=$sr"
    STRATA_SHARED_RING=$sr timeout 170 strata bench spec -m $m --device cuda --vram 12GiB -c 4096 -n 48 -r 1 \
        --modes none --replay 0.5,0.7 --replay-cost early:d=16 --json "$out/spec_ring$sr.json" 2>&1 | tail -12
  done
  el "ring"
fi
if [ "$what" = cpu ] || [ "$what" = all ]; then
  m=/tmp/w/27b.gguf
  mkdir -p /tmp/w
  [ -f $m ] || strata synth --preset 27b --mix q3_k_m --no-progress -o $m > /tmp/w/synth.log 2>&1
  for cb in "" "--cpu-blocks off"; do
    echo "== bench decode --vram 12GiB ${cb:-(default: auto)}"
    timeout 150 strata bench decode -m $m --device cuda --vram 12GiB -c 4096 -p 256 -n 48 -r 2 $cb 2>&1 |
        grep -E "cpu tier|predicted|decode:|tok/s" | head -8
  done
  mkdir -p /tmp/w/jobs
  for i in $(seq 1 8); do head -c 2000 README.md > /tmp/w/jobs/doc$i.txt; done
  rm -f /tmp/w/jobs.jsonl
  echo "== batch --batch 8 --vram 12GiB (default --cpu-blocks)"
  timeout 200 strata batch /tmp/w/jobs -m $m --device cuda --vram 12GiB -c 4096 --batch 8 -n 32 \
      --instruction "Summarise:" -o /tmp/w/jobs.jsonl 2>&1 |
      grep -E "cpu tier|sessions|written|error" | head -6
  t "host tiers" test_cuda "[host-tiers]"
  el "cpu"
fi
if [ "$what" = s32 ] || [ "$what" = all ]; then
  m=/tmp/w/27b.gguf
  mkdir -p /tmp/w
  [ -f $m ] || strata synth --preset 27b --mix q3_k_m --no-progress -o $m > /tmp/w/synth.log 2>&1
  [ -f /tmp/w/1b.gguf ] || strata synth --preset 1b --mix q4_k_m --no-progress -o /tmp/w/1b.gguf > /tmp/w/synth1.log 2>&1
  s=$(date +%s%N)
  timeout 60 strata plan -m $m --vram 12GiB --ctx 4096 2>&1 | grep -E "cpu tier|bottleneck|predicted: decode|error"
  echo "plan took $(( ($(date +%s%N) - s) / 1000000 )) ms"
  timeout 150 strata bench decode -m $m --device cuda --vram 12GiB -c 4096 -p 256 -n 48 -r 2 2>&1 |
      grep -E "cpu tier|predicted: decode|measured|bottleneck|host tiers|roofline"
  timeout 100 strata bench cpu-kernels --types q3_K,q4_K,q6_K,q8_0,q5_0 --cols 1,8 --threads 16 --iters 2 \
      --json "$out/cpuk.json" 2>&1 | grep -E "^[qi]"
  STRATA_TEAM_PROFILE=1 timeout 100 strata bench decode -m /tmp/w/1b.gguf --device cpu -c 2048 -p 64 -n 64 -r 2 \
      -t 16 2>&1 | grep -E "site|gated|gemv_q8|attention|total|^decode:" | cut -c1-140
  el "s32"
fi
if [ "$what" = s33 ] || [ "$what" = all ]; then
  t "gemv tests (table readers' ring)" STRATA_IQ_GEMV_VARIANT=3 test_cuda "cuda gemv on the GPU layout*"
  # The M11 / M13 GEMV figures with the new alone1 column (the GEMV without the quantiser's launch).
  timeout 240 strata bench kernels --types q3_K,q4_K,q5_K,q6_K,q8_0,iq3_xxs,iq3_s,iq4_xs --kv f16,q8,q4 \
      --ctx 32768 --iters 3 --json "$out/kernels_s33.json" 2>&1 | tail -40
  bash tools/device/kernels_ab.sh "$out/iqab" "--types iq3_xxs,iq3_s --kv f16 --ctx 16 --prefill-queries 16 --iters 3" \
      - STRATA_IQ_GEMV_VARIANT=3
  timeout 60 ncu --kernel-name regex:gemv_gpu_async_kernel --launch-skip 6 --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats env STRATA_IQ_GEMV_VARIANT=3 strata bench kernels --types iq3_xxs \
      --shapes ffn_up --kv f16 --ctx 16 --prefill-queries 16 --iters 1 > "$out/ncu_ring.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Achieved Occupancy|Stall Long|L1TEX" "$out/ncu_ring.txt" | head -8
  # The CPU decode attention (session 33: prefetched slices, q8 / q4 decoded once) on the host's
  # 16 threads, 32K and 128K keys: the --kv-host attention's speed, which the cost model prices at
  # the host read rate.
  for c in 32768 131072; do
    timeout 150 strata bench cpu-kernels --types q8_0 --cols 1 --threads 16 --iters 2 --attention f16,q8,q4 \
        --ctx $c --queries 1,8 --json "$out/cpu_attention_$c.json" 2>&1 | grep -E "^attention"
  done
  el "s33"
fi
