#!/usr/bin/env bash
# After the device run: assemble the HF folder from what came back, convert it with strata, check
# the tokenizer against SentencePiece, quantise, and measure perplexity on the validation text.
#   tools/train/finish.sh RESULT_DIR [BUILD_DIR]
# RESULT_DIR holds config.json, model.safetensors.partNN, metrics.json (from run_on_device.sh).
# Writes .train/strata-tiny/ (HF checkpoint), .train/gguf/strata-tiny-{f16,q8_0,q4_k,q4_k_m,q3_k_m}.gguf and
# .train/figures.json (PyTorch vs strata perplexity).
set -euo pipefail
cd "$(dirname "$0")/../.."
RES=${1:?result folder from the device run}
BUILD=${2:-build}
STRATA=$BUILD/strata
CTX=${CTX:-1024}
CHUNKS=${CHUNKS:-40}
HF=.train/strata-tiny  # the folder name becomes general.name
G=.train/gguf
mkdir -p "$HF" "$G"
cp "$RES/config.json" "$HF/config.json"
cat "$RES"/model.safetensors.part* > "$HF/model.safetensors"
cp .train/tokenizer.model "$HF/tokenizer.model"

"$STRATA" convert "$HF" "$G/strata-tiny-f16.gguf" --outtype f16 --no-progress
for t in q8_0 q4_k q4_k_m q3_k_m; do
  "$STRATA" quantize "$G/strata-tiny-f16.gguf" "$G/strata-tiny-$t.gguf" "$t" --no-progress
done

# Tokenizer: strata's ids for the validation text == SentencePiece's (the ids PyTorch scored).
/usr/bin/python3 tools/train/check_tokenizer.py --strata "$STRATA" --model "$G/strata-tiny-f16.gguf" \
  --spm .train/tokenizer.model --text .train/valid.txt --max-bytes 100000000

{
  echo "{"
  for t in f16 q8_0 q4_k q4_k_m q3_k_m; do
    ppl=$("$STRATA" perplexity -m "$G/strata-tiny-$t.gguf" -f .train/valid.txt -c "$CTX" --chunks "$CHUNKS" 2>/dev/null \
          | sed -n 's/^perplexity: \([0-9.]*\).*/\1/p')
    echo "  \"strata_cpu_$t\": $ppl,"
    echo "strata $t: $ppl" >&2
  done
  echo "  \"pytorch\": $(/usr/bin/python3 -c "import json;print(json.load(open('$RES/metrics.json'))['ppl_ctx${CTX}_first${CHUNKS}']['ppl'])"),"
  echo "  \"ctx\": $CTX, \"chunks\": $CHUNKS"
  echo "}"
} > .train/figures.json
cat .train/figures.json
ls -la "$G"
