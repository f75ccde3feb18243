#!/usr/bin/env python3
"""Train the SentencePiece tokenizer (Debian's spm_train) on the training split and encode both
splits to uint16 token ids (xz-compressed, little-endian) for train.py.

  train.u16.xz: for each training document, BOS followed by its ids (documents as written by
                extract_data.py, separated by blank lines).
  valid.u16.xz: the whole validation text encoded as ONE string, without BOS: exactly what
                `strata perplexity -f valid.txt` tokenizes, so both score the same ids.

Tokenizer choices, each so that strata's SPM tokenizer reproduces SentencePiece's ids: BPE (strata
merges by score, SentencePiece's BPE algorithm), identity normalisation, no whitespace collapsing,
byte fallback (no <unk> on unseen characters).
"""
import argparse
import lzma
import os
import subprocess
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="folder with train.txt, valid.txt (extract_data.py)")
    ap.add_argument("--out", required=True, help="folder for train.u16.xz, valid.u16.xz (what the device run carries)")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--sentences", type=int, default=2000000, help="lines sampled for spm_train")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    d = args.data
    os.makedirs(args.out, exist_ok=True)
    prefix = os.path.join(d, "tokenizer")
    if not os.path.exists(prefix + ".model"):
        cmd = ["spm_train", f"--input={d}/train.txt", f"--model_prefix={prefix}", f"--vocab_size={args.vocab}",
               "--model_type=bpe", "--byte_fallback=true", "--character_coverage=0.9995",
               "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
               "--allow_whitespace_only_pieces=true", "--split_digits=true", "--max_sentence_length=8192",
               f"--input_sentence_size={args.sentences}", "--shuffle_input_sentence=true", "--seed_sentencepiece_size=1000000",
               "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1", f"--num_threads={args.threads}",
               "--minloglevel=1"]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    assert sp.get_piece_size() == args.vocab and sp.get_piece_size() < 65536
    bos = sp.bos_id()

    with open(os.path.join(d, "train.txt"), encoding="utf-8") as f:
        docs = f.read().split("\n\n\n")  # extract_data.py ends each document with a blank line
    ids = []
    for i in range(0, len(docs), 2000):
        for doc_ids in sp.encode(docs[i:i + 2000]):
            ids.append(bos)
            ids.extend(doc_ids)
    train = np.asarray(ids, dtype="<u2")
    with open(os.path.join(d, "valid.txt"), encoding="utf-8") as f:
        valid = np.asarray(sp.encode(f.read()), dtype="<u2")
    for name, arr in (("train", train), ("valid", valid)):
        with lzma.open(os.path.join(args.out, f"{name}.u16.xz"), "wb", preset=6) as f:
            f.write(arr.tobytes())
    print(f"vocab {sp.get_piece_size()}, train {len(train)} tokens ({len(docs)} documents), valid {len(valid)} tokens; "
          f"{os.path.getsize(os.path.join(args.out, 'train.u16.xz')) / 1e6:.1f} MB compressed", flush=True)


if __name__ == "__main__":
    main()
