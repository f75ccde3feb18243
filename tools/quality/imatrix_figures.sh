#!/bin/bash
# M13's importance-matrix figures on the embedded model: for IQ4_XS, IQ3_XXS and IQ2_XS, the
# perplexity and the KL divergence against the base model, quantised with and without an imatrix.
#
#   tools/quality/imatrix_figures.sh [STRATA] [OUT_DIR]      (defaults: build/strata, /tmp/imatrix-figures)
#   CALIB_CHUNKS=120 tools/quality/imatrix_figures.sh ...      (calibrate on the first 120 chunks only)
#
# Base: the shipped q4_k weights dequantised to f32 (the f16 training export is not in the
# repository: tools/train makes it on the GPU machine). Every quantisation below starts from that
# base, so "with" and "without" differ only in the imatrix. Texts (Debian 12 package vim-runtime,
# English technical documentation the model never saw: its training text is linux-doc, Python
# docs, debian-reference and GCIDE): calibration = Vim's user manual (usr_*.txt, 0.64 MB: 404
# chunks of 512 tokens, or the first CALIB_CHUNKS), the head included (--process-output: the head is tied to the
# embedding, 13.5% of this model's weights);
# evaluation = pattern.txt, eval.txt and options.txt (0.65 MB), 40 chunks of 1024 tokens, second
# halves scored (llama.cpp's method). CPU engine, exact f32 matmuls, f32 KV.
set -euo pipefail
strata=${1:-build/strata}
out=${2:-/tmp/imatrix-figures}
doc=/usr/share/vim/vim90/doc
[ -x "$strata" ] || { echo "no strata binary at $strata (build it, or pass its path)" >&2; exit 2; }
[ -f "$doc/usr_01.txt" ] || { echo "$doc not found: install the Debian package vim-runtime (9.0)" >&2; exit 2; }
mkdir -p "$out"
cat "$doc"/usr_*.txt > "$out/calibration.txt"
cat "$doc/pattern.txt" "$doc/eval.txt" "$doc/options.txt" > "$out/evaluation.txt"
model=$(dirname "$0")/../../models/strata-tiny-q4_k.gguf
ppl() {  # ppl MODEL [extra args]: prints "perplexity kl top1"
  local m=$1; shift
  "$strata" perplexity -m "$m" --device cpu -c 1024 --chunks 40 -f "$out/evaluation.txt" "$@" > "$out/ppl.log" 2>&1 \
    || { cat "$out/ppl.log" >&2; exit 1; }
  cat "$out/ppl.log" >> "$out/all.log"
}
: > "$out/all.log"
"$strata" quantize --no-progress "$model" "$out/base-f32.gguf" f32 >> "$out/all.log" 2>&1
"$strata" imatrix -m "$out/base-f32.gguf" -f "$out/calibration.txt" -o "$out/tiny.imatrix" -c 512 ${CALIB_CHUNKS:+--chunks $CALIB_CHUNKS} \
  --process-output >> "$out/all.log" 2>&1
ppl "$out/base-f32.gguf" --save-logits "$out/base.logits"
echo "| weights | size | perplexity | KL vs base | top-1 = base |"
echo "| --- | --- | --- | --- | --- |"
base=$(grep -oE "perplexity[^0-9]*[0-9.]+" "$out/ppl.log" | tail -1 | grep -oE "[0-9.]+$")
echo "| base (shipped q4_k as f32) | $(du -h "$out/base-f32.gguf" | cut -f1) | $base | 0 | 100% |"
for type in iq4_xs iq3_xxs iq2_xs; do
  for with in no yes; do
    f="$out/tiny-$type-$with.gguf"
    if [ $with = yes ]; then
      "$strata" quantize --no-progress --imatrix "$out/tiny.imatrix" "$out/base-f32.gguf" "$f" $type >> "$out/all.log" 2>&1
    else
      "$strata" quantize --no-progress --allow-no-imatrix "$out/base-f32.gguf" "$f" $type >> "$out/all.log" 2>&1
    fi
    ppl "$f" --kl-base "$out/base.logits"
    p=$(grep -oE "perplexity[^0-9]*[0-9.]+" "$out/ppl.log" | tail -1 | grep -oE "[0-9.]+$")
    kl=$(grep -oiE "KL[^0-9]*[0-9.e+-]+" "$out/ppl.log" | tail -1 | grep -oE "[0-9.e+-]+$")
    top=$(grep -oiE "top-1[^0-9]*[0-9.]+%?" "$out/ppl.log" | tail -1 | grep -oE "[0-9.]+%?$")
    echo "| $type, imatrix $with | $(du -h "$f" | cut -f1) | $p | $kl | $top |"
  done
done
