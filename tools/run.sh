#!/usr/bin/env bash
# Sets up, builds, and runs strata's main job on the embedded default model: strata-tiny, a
# 31M-parameter gemma3 trained here on Debian documentation (models/README.md), quantised to Q4_K.
# Prints the placement report (where each block would go on a 12 GiB card), then generates text.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
# Only what the run needs: the strata binary, for the GPU that is here (or none: no CUDA code at
# all, minutes less on a small machine). tools/test.sh builds everything.
cuda=(-DSTRATA_CUDA=OFF)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  cuda=(-DSTRATA_CUDA=AUTO -DCMAKE_CUDA_ARCHITECTURES=native)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" >/dev/null
cmake --build build -j "$(nproc)" --target strata
model=models/strata-tiny-q4_k.gguf
./build/strata plan -m "$model" --profile configs/hw/rtx3060-12g.toml --ctx 2048
./build/strata generate -m "$model" -p "${PROMPT:-The kernel uses a linked list to}" -n "${N:-96}" \
  --temp "${TEMP:-0.7}" --top-k 40 --top-p 0.95 --repeat-penalty 1.1 --seed 1
