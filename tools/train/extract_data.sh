#!/usr/bin/env bash
# Build the training data on this (CPU) machine: install the Debian documentation packages and
# SentencePiece, extract plain text (extract_data.py), train the tokenizer and encode the splits
# (tokenize.py). Idempotent; everything lands in .train/ (git-ignored):
#   .train/train.txt, valid.txt, manifest.json   plain text + package names/versions/licences
#   .train/tokenizer.model                        SentencePiece BPE, 8192 pieces, byte fallback
#   .train/carry/train.u16.xz, valid.u16.xz       token ids: what the device run carries
#   .train/carry/valid.txt, tokenizer.model       for strata's perplexity there (device_figures.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
PKGS="linux-doc python3.11-doc debian-reference-en dict-gcide sentencepiece python3-sentencepiece python3-numpy"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
mkdir -p .train
[ -s .train/train.txt ] || /usr/bin/python3 tools/train/extract_data.py --out .train
/usr/bin/python3 tools/train/tokenize.py --data .train --out .train/carry
# What tools/train/device_figures.sh needs on the device beside the token ids.
cp .train/valid.txt .train/tokenizer.model .train/carry/
ls -la .train .train/carry
