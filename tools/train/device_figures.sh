#!/usr/bin/env bash
# On the GPU machine, right after run_on_device.sh in the same device command: turn the trained
# checkpoint into GGUFs with strata (convert, quantise) and measure validation perplexity with
# `strata perplexity` on the GPU and on the CPU for each format, next to PyTorch's figure from the
# same run. Needs a strata bundle on PATH (../shared/device/bundle.sh build/strata) and the
# validation text and tokenizer beside the training data (tools/train/extract_data.sh puts
# valid.txt and tokenizer.model into .train/carry/).
#   OUT=... bash tools/train/device_figures.sh RESULT_DIR DATA_DIR
# Writes $OUT/figures.json, $OUT/figures.txt and the shipped model split into <16 MiB parts
# ($OUT/strata-tiny-q4_k.gguf.partNN: the device returns files up to 16 MiB).
set -euo pipefail
RES=${1:?result folder of run_on_device.sh}
DATA=${2:?data folder with valid.txt and tokenizer.model}
OUT=${OUT:-$RES}
CTX=${CTX:-1024}
CHUNKS=${CHUNKS:-40}
# The CPU half takes minutes per format on a busy machine: CPU=0 measures on the GPU only.
CPU=${CPU:-1}
work=$(mktemp -d)
HF=$work/strata-tiny  # the folder name becomes general.name
mkdir -p "$HF"
cp "$RES/config.json" "$HF/config.json"
cat "$RES"/model.safetensors.part* > "$HF/model.safetensors"
cp "$DATA/tokenizer.model" "$HF/tokenizer.model"

strata convert "$HF" "$work/strata-tiny-f16.gguf" --outtype f16 --no-progress
types=(f16 q8_0 q4_k q4_k_m q3_k_m)
for t in "${types[@]:1}"; do
  strata quantize "$work/strata-tiny-f16.gguf" "$work/strata-tiny-$t.gguf" "$t" --no-progress
done

ppl_of() {  # model device -> perplexity
  strata perplexity -m "$1" -f "$DATA/valid.txt" -c "$CTX" --chunks "$CHUNKS" --device "$2" 2>/dev/null |
    sed -n 's/^perplexity: \([0-9.]*\).*/\1/p'
}
pytorch=$(python3 -c "import json;print(json.load(open('$RES/metrics.json'))['ppl_ctx${CTX}_first${CHUNKS}']['ppl'])")
{
  echo "{"
  echo "  \"pytorch\": $pytorch, \"ctx\": $CTX, \"chunks\": $CHUNKS,"
  for t in "${types[@]}"; do
    size=$(stat -c %s "$work/strata-tiny-$t.gguf")
    gpu=$(ppl_of "$work/strata-tiny-$t.gguf" cuda)
    cpu=
    [ "$CPU" = 0 ] || cpu=$(ppl_of "$work/strata-tiny-$t.gguf" cpu)
    echo "  \"$t\": {\"bytes\": $size, \"gpu\": ${gpu:-null}, \"cpu\": ${cpu:-null}},"
    echo "$t: $size bytes, gpu ${gpu:-FAILED}, cpu ${cpu:-not measured} (pytorch $pytorch)" >&2
  done
  echo "  \"done\": true"
  echo "}"
} > "$OUT/figures.json" 2> >(tee "$OUT/figures.txt" >&2)
split -b 15M -d "$work/strata-tiny-q4_k.gguf" "$OUT/strata-tiny-q4_k.gguf.part"
sha256sum "$work"/strata-tiny-*.gguf > "$OUT/gguf.sha256"
cat "$OUT/figures.json"
