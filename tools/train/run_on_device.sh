#!/usr/bin/env bash
# Train strata's default model on the GPU machine: ONE device command (torch + an H200 there).
#
# Prepare here (CPU, once): tools/train/extract_data.sh (Debian docs -> .train/{train,valid}.txt,
# tokenizer, .train/carry/{train,valid}.u16.xz). Then, with the device `run` tool:
#   run  carry: [".train/carry"]   command: bash tools/train/run_on_device.sh
# or, to also convert, quantise and measure strata's perplexity there (GPU and CPU) in the same
# command, with a strata bundle (../shared/device/bundle.sh build/strata):
#   run  carry: [".train/carry", ".device"]   command:
#     mkdir -p /tmp/b && tar -xzf .device/bundle.tgz -C /tmp/b && export PATH=/tmp/b/bin:$PATH
#     LD_LIBRARY_PATH=/tmp/b/lib && OUT=$OUT bash tools/train/run_on_device.sh &&
#     OUT=$OUT bash tools/train/device_figures.sh $OUT .train/carry
# (defaults: 270 s of training, ~6 min in all). The device receives the session's own checkout:
# from a helper's worktree, first copy tools/train/{run_on_device.sh,train.py} and .train/carry
# into one git-ignored folder of that checkout, carry it, and run the copy of this script there
# (DATA defaults to the carry/ folder beside this script when it exists).
# $OUT receives config.json, model.safetensors.part00.. (join with cat), metrics.json,
# train_log.txt; tools/train/finish.sh then assembles the HF folder, converts and quantises.
# Extra arguments go to train.py (e.g. --fake-data 3000000 --seconds 15 --max-steps 70: smoke run).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -d "$HERE/carry" ]; then DATA=${DATA:-$HERE/carry}; else DATA=${DATA:-$HERE/../../.train/carry}; fi
OUT=${OUT:-/tmp/strata-train-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
python3 "$HERE/train.py" --data "$DATA" --out "$OUT" "$@"
ls -la "$OUT"
