#!/usr/bin/env python3
"""Check that strata's SPM tokenizer (reading the vocabulary `strata convert` stored in a GGUF)
gives the same ids as SentencePiece itself on a text, line by line and as one string (the way
`strata perplexity` and tokenize.py encode the validation text). Exit 1 on the first difference."""
import argparse
import subprocess
import sys
import tempfile

import sentencepiece as spm


def strata_ids(strata, model, text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        r = subprocess.run([strata, "tokenize", "-m", model, "-f", f.name, "--no-bos", "--no-special"], capture_output=True,
                           text=True)
    if r.returncode != 0:
        sys.exit(f"strata tokenize failed: {r.stderr.strip()}")
    return [int(x) for x in r.stdout.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--spm", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--max-bytes", type=int, default=200000)
    args = ap.parse_args()
    sp = spm.SentencePieceProcessor(model_file=args.spm)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()[: args.max_bytes]
    want = sp.encode(text)
    got = strata_ids(args.strata, args.model, text)
    if got != want:
        i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        sys.exit(f"tokenizer mismatch at token {i} of {len(want)}: strata {got[i:i + 8]} vs sentencepiece "
                 f"{want[i:i + 8]} ({sp.decode(want[max(0, i - 8):i + 8])!r})")
    print(f"tokenizer: strata == sentencepiece on {len(want)} tokens ({len(text)} chars)")


if __name__ == "__main__":
    main()
