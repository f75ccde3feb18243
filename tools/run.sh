#!/usr/bin/env bash
# Sets up, builds, and runs strata's main job on the embedded default model.
# For now (M1) the default model is a synthetic tiny gemma3, generated and then inspected; later
# milestones replace this with real generation on the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=AUTO >/dev/null
cmake --build build -j "$(nproc)"
model=build/models/tiny-gemma3-q8_0.gguf
mkdir -p build/models
./build/strata synth --arch gemma3 --preset tiny --type q8_0 -o "$model"
./build/strata inspect "$model"
