#!/usr/bin/env bash
# Sets up, builds, and runs strata's main job on the embedded default model: strata-tiny, a
# 31M-parameter gemma3 trained here on Debian documentation (models/README.md), quantised to Q4_K.
# Prints the placement report (where each block would go on a 12 GiB card), then generates text.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=AUTO >/dev/null
cmake --build build -j "$(nproc)"
model=models/strata-tiny-q4_k.gguf
./build/strata plan -m "$model" --profile configs/hw/rtx3060-12g.toml --ctx 2048
./build/strata generate -m "$model" -p "${PROMPT:-The kernel uses a linked list to}" -n "${N:-96}" \
  --temp "${TEMP:-0.7}" --top-k 40 --top-p 0.95 --repeat-penalty 1.1 --seed 1
