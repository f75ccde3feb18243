#!/usr/bin/env bash
# Runs strata's GPU-machine suite from an unpacked bundle (see ../shared/device/README.md):
# every test binary on PATH (gpu tests included), the decode benchmark, `strata probe`, and the
# HF transformers comparison. Results (logs, JSON) go to $1 (default $OUT), packed into one
# results.tgz so the device tool returns them as a single file.
#   tools/device/run_suite.sh [OUT_DIR] [STEPS...]
#   STEPS: tests bench probe hf synth27b kernels offload27b disk27b prefill27b profile spec batch kv stress128k
#          ctx32k kvhost cpublocks graphs27b serve27b prefill128k replay27b
#   (default: the first nine)
set -uo pipefail
out=${1:-${OUT:-$PWD/device-out}}
shift || true
steps=${*:-tests bench probe hf synth27b kernels offload27b disk27b prefill27b}
work=/tmp/strata-suite
# The reference data travels with the working tree (tests/data/reference); the test binaries were
# built with this machine's absolute path to it.
export STRATA_TESTDATA=${STRATA_TESTDATA:-$PWD/tests/data/reference}
mkdir -p "$out" "$work/res"
res=$work/res
has() { [[ " $steps " == *" $1 "* ]]; }

{ lscpu | grep -E 'Model name|^CPU\(s\)'; nvidia-smi -L; } > "$res/machine.txt" 2>&1
cat "$res/machine.txt"

if has tests; then
  for t in /tmp/b/bin/test_*; do
    name=$(basename "$t")
    "$t" > "$res/$name.log" 2>&1
    echo "$name: rc=$? $(tail -2 "$res/$name.log" | tr '\n' ' ')"
  done
fi
if has synth27b; then
  /usr/bin/time -f "synth27b wall %e s, max RSS %M KiB" strata synth --preset 27b --mix q3_k_m --no-progress \
    -o "$work/27b.gguf" 2>&1 | tail -2 | tee "$res/synth27b.txt"
fi
if has bench; then
  strata synth --arch llama --preset 1b --type q4_k --no-progress -o "$work/l1b-q4k.gguf" >/dev/null 2>&1
  strata synth --arch llama --preset 1b --type q8_0 --no-progress -o "$work/l1b-q8.gguf" >/dev/null 2>&1
  for m in l1b-q4k l1b-q8; do
    strata bench decode -m "$work/$m.gguf" --device cpu -n 32 -r 3 --json "$res/bench_decode_cpu_$m.json" 2>&1 | tail -1
  done
fi
if has probe; then
  timeout 200 strata probe --dir /var/tmp --out "$res/h200-probe.toml" > "$res/probe.log" 2>&1; echo "probe rc=$?"
  tail -30 "$res/h200-probe.toml" 2>/dev/null
fi
if has hf; then
  WORK=$work/hf bash tools/reference/run_on_device.sh "$res/hf" > "$res/hf.log" 2>&1; echo "hf rc=$?"
  tail -12 "$res/hf.log"
fi
if has kernels; then
  strata bench kernels --json "$res/bench_kernels.json" 2>&1 | tee "$res/bench_kernels.txt"
fi
if has offload27b; then
  # The flagship shape: 27B Q3_K_M-like, resident on the whole H200, then under a 12 GiB budget
  # (planned by configs/hw/h200-probed.toml, the rest streamed from pinned RAM).
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  strata bench decode -m "$work/27b.gguf" --device cuda -c 4096 -p 512 -n 32 -r 2 \
    --json "$res/bench_27b_resident.json" 2>&1 | tail -3 | tee "$res/bench_27b_resident.txt"
  strata bench decode -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -c 4096 -p 512 -n 32 -r 2 \
    --json "$res/bench_27b_vram12.json" > "$res/bench_27b_vram12.txt" 2>&1
  tail -4 "$res/bench_27b_vram12.txt"
  strata generate -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -c 4096 -p "The" -n 16 \
    > "$res/generate_27b_vram12.txt" 2>&1
  echo "generate --vram 12GiB rc=$?"
fi
if has disk27b; then
  # Part of the weights on the disk tier: the pinned budget is cut so that the plan reads some
  # blocks from the model file at every step. Traces (Perfetto) of both 12 GiB runs.
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  strata bench decode -m "$work/27b.gguf" --vram 12GiB --pinned ${DISK_PINNED:-4GiB} --profile configs/hw/h200-probed.toml \
    -c 4096 -p 512 -n 8 -r 1 --json "$res/bench_27b_disk.json" > "$res/bench_27b_disk.txt" 2>&1
  echo "bench disk rc=$?"; tail -6 "$res/bench_27b_disk.txt"
  strata generate -m "$work/27b.gguf" --vram 12GiB --pinned ${DISK_PINNED:-4GiB} --profile configs/hw/h200-probed.toml \
    -c 4096 -p "The" -n 6 --trace "$res/trace_27b_disk.json" > "$res/generate_27b_disk.txt" 2>&1
  echo "generate disk rc=$?"; tail -3 "$res/generate_27b_disk.txt"
  strata generate -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -c 4096 -p "The" -n 6 \
    --trace "$res/trace_27b_vram12.json" > "$res/generate_27b_trace.txt" 2>&1
  echo "generate trace rc=$?"; tail -3 "$res/generate_27b_trace.txt"
fi
if has prefill27b; then
  # Prefill of the resident 27B at two chunk sizes, and a per-kernel trace (STRATA_TRACE_OPS) of one.
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  for ub in 512 2048; do
    strata bench decode -m "$work/27b.gguf" --device cuda -c 4096 -p 2048 -n 4 -r 2 -b $ub \
      --json "$res/bench_27b_prefill_ub$ub.json" 2>&1 | grep prefill | tee "$res/bench_27b_prefill_ub$ub.txt"
  done
  STRATA_TRACE_OPS=1 strata bench decode -m "$work/27b.gguf" --device cuda -c 4096 -p 2048 -n 2 -r 1 -b 512 \
    --trace "$res/trace_27b_prefill_ops.json" > "$res/trace_27b_prefill_ops.txt" 2>&1
  echo "prefill ops trace rc=$?"
fi
if has profile; then
  # Nsight Compute on the kernels whose benchmark ratios miss their targets: the decode attention
  # at 32K keys, the q3_K GEMV (batch 1 and 8 columns) and a prefill GEMM's dequantisation.
  ncu=/usr/local/cuda/bin/ncu
  sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
  $ncu -k regex:attention_kernel --launch-skip 3 --launch-count 1 $sections \
    /tmp/b/bin/test_cuda "cuda decode attention bandwidth at 32K keys (informational)" > "$res/ncu_attention.txt" 2>&1
  echo "ncu attention rc=$?"
  $ncu -k regex:gemv --launch-skip 20 --launch-count 3 $sections strata bench kernels > "$res/ncu_gemv.txt" 2>&1
  echo "ncu gemv rc=$?"
  $ncu -k regex:dequant_kernel --launch-skip 4 --launch-count 1 $sections strata bench kernels > "$res/ncu_dequant.txt" 2>&1
  echo "ncu dequant rc=$?"
fi
if has spec; then
  # Speculative decoding on the embedded model: every mode against plain decoding in the same run.
  strata bench spec -m models/strata-tiny-q4_k.gguf --device cuda -n 128 -r 3 --json "$res/bench_spec_tiny.json" \
    > "$res/bench_spec_tiny.txt" 2>&1
  echo "bench spec rc=$?"; tail -12 "$res/bench_spec_tiny.txt"
fi
if has batch; then
  # Throughput mode: N sessions stepping together vs one, on the embedded model and (streaming-bound)
  # the 27B-shaped model at --vram 12GiB; and batch results with --batch 8 identical to --batch 1.
  for n in 4 8 16; do
    strata bench decode -m models/strata-tiny-q4_k.gguf --device cuda -p 128 -n 64 -r 2 --batch $n \
      --json "$res/bench_batch_tiny_b$n.json" 2>&1 | tail -2 | tee -a "$res/bench_batch.txt"
  done
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  strata bench decode -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -c 4096 -p 256 -n 16 \
    -r 1 --batch 8 --json "$res/bench_batch_27b_b8.json" 2>&1 | tail -3 | tee -a "$res/bench_batch.txt"
  for i in $(seq 1 12); do
    printf '{"id":"j%d","input":"Document %d. The kernel schedules tasks by priority; the scheduler picks the next task.","instruction":"Summarise:","max_tokens":%d}\n' \
      "$i" "$i" $((16 + 8 * (i % 4)))
  done > "$work/jobs.jsonl"
  rm -f "$work/r1.jsonl" "$work/r8.jsonl"
  strata batch "$work/jobs.jsonl" -o "$work/r1.jsonl" -m models/strata-tiny-q4_k.gguf --device cuda --temp 0 --batch 1 \
    --no-progress > "$res/batch_b1.txt" 2>&1
  strata batch "$work/jobs.jsonl" -o "$work/r8.jsonl" -m models/strata-tiny-q4_k.gguf --device cuda --temp 0 --batch 8 \
    --no-progress > "$res/batch_b8.txt" 2>&1
  python3 - "$work/r1.jsonl" "$work/r8.jsonl" <<'PY' | tee -a "$res/bench_batch.txt"
import json, sys
a, b = ({j["id"]: j["output"] for j in map(json.loads, open(p))} for p in sys.argv[1:3])
same = sum(a[k] == b.get(k) for k in a)
print(f"batch --batch 8 vs --batch 1 (GPU, greedy): {same}/{len(a)} outputs identical, ids {sorted(a) == sorted(b)}")
PY
fi
if has kv; then
  # KV quantisation: quality (1b-shaped synthetic, tiny model) and decode attention bandwidth.
  [ -f "$work/g1b-q4k.gguf" ] || strata synth --arch gemma3 --preset 1b --type q4_k --no-progress -o "$work/g1b-q4k.gguf" >/dev/null 2>&1
  strata bench kv-quality -m "$work/g1b-q4k.gguf" --device cuda --ctx 4096,32768 --json "$res/kv_quality_g1b.json" \
    > "$res/kv_quality_g1b.txt" 2>&1; echo "kv-quality g1b rc=$?"; tail -6 "$res/kv_quality_g1b.txt"
  strata bench kv-quality -m models/strata-tiny-q4_k.gguf --device cuda --ctx 2048 --json "$res/kv_quality_tiny.json" \
    > "$res/kv_quality_tiny.txt" 2>&1; echo "kv-quality tiny rc=$?"; tail -4 "$res/kv_quality_tiny.txt"
  for kv in q8 q4; do
    strata bench kernels --kv $kv --json "$res/bench_kernels_kv_$kv.json" 2>&1 | grep -i "attention" | tee -a "$res/kv_attention.txt"
  done
fi
if has stress128k; then
  # The flagship context: 27B at --vram 12GiB with q4 KV, 4K to 128K.
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  strata stress -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -ctk q4 -ctv q4 --ctx 4k:128k -n 8 \
    --json "$res/stress_27b_q4.json" --svg "$res/stress_27b_q4.svg" > "$res/stress_27b_q4.txt" 2>&1
  echo "stress rc=$?"; tail -12 "$res/stress_27b_q4.txt"
fi
if has ctx32k; then
  # M5's benchmark shape: 27B at --vram 12GiB, 32K context, INT8 KV, a 4K prompt (prefill against
  # the GEMM rate; decode against the plan's prediction and the pinned ceiling).
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  strata bench decode -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -c 32768 -ctk q8 -ctv q8 \
    -p 4096 -n 32 -r 1 --json "$res/bench_27b_32k_q8.json" > "$res/bench_27b_32k_q8.txt" 2>&1
  echo "ctx32k rc=$?"; tail -5 "$res/bench_27b_32k_q8.txt"
fi
if has kvhost; then
  # M6 host-tier KV: decode at long context with every full-attention layer's KV in VRAM (none) vs in
  # host RAM with attention on the CPU (all); --kv-host keeps the weight placement the same.
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  # Prefill attention of host-KV layers runs on the CPU too (cost grows with prompt^2): raise
  # KVHOST_PROMPT with care.
  ctx=${KVHOST_CTX:-16384}
  prompt=${KVHOST_PROMPT:-8192}
  for kvh in none all; do
    strata bench decode -m "$work/27b.gguf" --vram 12GiB --profile configs/hw/h200-probed.toml -c "$ctx" \
      -p "$prompt" -n 32 -r 1 --kv-host $kvh --json "$res/bench_kvhost_$kvh.json" > "$res/bench_kvhost_$kvh.txt" 2>&1
    echo "kv-host $kvh (ctx $ctx, prompt $prompt) rc=$?"; grep -E "^decode|^prefill|^host tiers|measured" "$res/bench_kvhost_$kvh.txt"
  done
fi
if has cpublocks; then
  # M5 cpu tier: a small pinned budget with --cpu-blocks lets the planner compute blocks on the CPU.
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  strata bench decode -m "$work/27b.gguf" --vram 12GiB --pinned ${CPU_PINNED:-4GiB} --cpu-blocks \
    --profile configs/hw/h200-probed.toml -c 4096 -p 512 -n 32 -r 2 --trace "$res/trace_cpublocks.json" \
    --json "$res/bench_cpublocks.json" > "$res/bench_cpublocks.txt" 2>&1
  echo "cpu blocks rc=$?"; grep -E "cpu|^decode|^prefill|measured" "$res/bench_cpublocks.txt" | head -20
fi
if has graphs27b; then
  # M16: the 27B at --vram 12GiB with step graphs (the default) and without (STRATA_CUDA_GRAPHS=0):
  # plain decode, and early-exit drafts from a plan made for them (draft step and verify times).
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  P="--vram 12GiB --profile configs/hw/h200-probed.toml -c 4096"
  PR="The scheduler picks the next task by priority. Tasks wait in queues; each queue has a level."
  for g in 1 0; do
    STRATA_CUDA_GRAPHS=$g strata bench decode -m "$work/27b.gguf" $P -p 512 -n 32 -r 2 \
      --json "$res/bench_graphs27b_g$g.json" 2>&1 | tail -3 | tee -a "$res/graphs27b.txt"
    for sp in early:d=16 early:d=8; do
      echo "graphs=$g $sp" | tee -a "$res/graphs27b.txt"
      STRATA_CUDA_GRAPHS=$g strata generate -m "$work/27b.gguf" $P -p "$PR" -n 64 --temp 0 --spec $sp 2>&1 >/dev/null \
        | grep -E "draft steps|measured|predicted: decode" | tee -a "$res/graphs27b.txt"
    done
  done
fi
if has prefill128k; then
  # M14: long-document prefill of the 27B at --vram 12GiB with q4 KV: a 130000-token prompt with a
  # reserved layer-major group of 32 chunks, and a 16K prompt at 32K context with the default plan
  # (time to first token, fraction of the GEMM ceilings, PCIe bytes per prompt token).
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  P="--vram 12GiB --profile configs/hw/h200-probed.toml -ctk q4 -ctv q4"
  strata bench decode -m "$work/27b.gguf" $P -c 131072 --prefill-group 32 -p 130000 -n 4 -r 1 \
    --json "$res/prefill128k.json" > "$res/prefill128k.txt" 2>&1
  echo "prefill128k rc=$?"; grep -E "^prefill|group" "$res/prefill128k.txt"
  strata bench decode -m "$work/27b.gguf" $P -c 32768 -p 16384 -n 4 -r 1 \
    --json "$res/prefill32k.json" > "$res/prefill32k.txt" 2>&1
  echo "prefill32k rc=$?"; grep -E "^prefill|group" "$res/prefill32k.txt"
fi
if has serve27b; then
  # M15: 8 concurrent streaming clients of `strata serve` against `bench decode --batch 8`, the
  # 27B-shaped model at --vram 12GiB (same budget, profile and context): the aggregate decode rate
  # while all 8 decode should be within 10% of the benchmark's. tools/device/serve_load.py starts
  # the server on a free loopback port, runs the clients (python3 stdlib), SIGTERMs it.
  # SERVE_MODEL / SERVE_ARGS replace the model and its flags, to try the step without a GPU:
  #   SERVE_MODEL=models/strata-tiny-q4_k.gguf SERVE_ARGS="--device cpu -c 2048" run_suite.sh OUT serve27b
  M27=${SERVE_MODEL:-$work/27b.gguf}
  [ -f "$M27" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$M27" >/dev/null 2>&1
  P=${SERVE_ARGS:-"--vram 12GiB --profile configs/hw/h200-probed.toml -c 4096"}
  strata bench decode -m "$M27" $P -p 256 -n 64 -r 1 --batch 8 --json "$res/serve27b_bench_b8.json" \
    > "$res/serve27b_bench_b8.txt" 2>&1
  echo "bench decode --batch 8 rc=$?"; grep -E "^decode|^batch" "$res/serve27b_bench_b8.txt"
  python3 tools/device/serve_load.py --clients 8 --tokens 64 --bench-json "$res/serve27b_bench_b8.json" \
    --out "$res/serve27b.json" --server-log "$res/serve27b_server.log" -- -m "$M27" $P 2>&1 | tee "$res/serve27b.txt"
  echo "serve27b rc=${PIPESTATUS[0]}"
fi
if has replay27b; then
  # M12: speculation against a simulated acceptance (bench spec --replay, spec/replay.h): the 27B at
  # --vram 12GiB, early-exit drafts at d=16 paying their real passes on a plan that keeps the draft
  # path resident, A = 0.3 .. 0.9, at k = 8 and k = 4.
  [ -f "$work/27b.gguf" ] || strata synth --preset 27b --mix q3_k_m --no-progress -o "$work/27b.gguf" >/dev/null 2>&1
  P="--vram 12GiB --profile configs/hw/h200-probed.toml -c 4096"
  for k in 8 4; do
    strata bench spec -m "$work/27b.gguf" $P -n 64 -r 1 --modes none --draft-max $k --replay 0.3,0.5,0.7,0.9 \
      --replay-cost early:d=16 --json "$res/replay27b_k$k.json" > "$res/replay27b_k$k.txt" 2>&1
    echo "replay27b k=$k rc=$?"; grep -E "^(none|replay)" "$res/replay27b_k$k.txt"
  done
fi
tar -czf "$out/results.tgz" -C "$res" .
