#!/usr/bin/env python3
"""A float64 NumPy forward pass of an `strata export-hf` checkpoint, with HF's conventions
(rotate-half RoPE, gemma's x * (1 + w) norms), for machines without torch/transformers.

    np_reference.py --hf DIR --tokens tokens.txt [--out logits.f64ref.f32] [--strata-logits F.f32]

It reads config.json and model.safetensors itself. It is a second opinion, not the reference:
compare_hf.py with transformers is the external check. What it does show without transformers is
that the export is consistent with HF's conventions (a wrong q/k un-permutation or a missing
"w - 1" changes the logits far beyond the threshold). Supports llama, mistral, qwen3, gemma3_text.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", name
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(buf, dtype="<f4", count=(e - b) // 4, offset=8 + n + b).reshape(info["shape"]).astype(np.float64)
    return out


def forward(cfg, W, ids):
    mt = cfg["model_type"]
    gemma = mt.startswith("gemma")
    H, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)

    def rms(x, w):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
        return y * (1.0 + w) if gemma else y * w

    def rope_tables(p):
        factor = p.get("factor", 1.0) if p.get("rope_type", "default") == "linear" else 1.0
        inv = 1.0 / (p["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd)) / factor
        ang = pos[:, None] * inv[None, :]
        ang = np.concatenate([ang, ang], axis=1)
        return np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rotate(x, cs):
        cos, sin = cs
        half = hd // 2
        rh = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rh * sin

    rp = cfg.get("rope_parameters") or {"rope_type": "default", "rope_theta": cfg.get("rope_theta", 10000.0)}
    layer_types = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
    if "full_attention" in rp:
        tables = {k: rope_tables(v) for k, v in rp.items()}
    else:
        tables = {k: rope_tables(rp) for k in ("full_attention", "sliding_attention")}
    if mt == "mistral" and cfg.get("sliding_window"):
        layer_types = ["sliding_attention"] * cfg["num_hidden_layers"]
    window = cfg.get("sliding_window") or 0
    scale = (cfg["query_pre_attn_scalar"] if gemma else hd) ** -0.5

    x = W["model.embed_tokens.weight"][ids]
    if gemma:
        x = x * np.float64(np.float32(H ** 0.5))
    i_idx, j_idx = np.arange(T)[:, None], np.arange(T)[None, :]
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, nh, hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
        if p + "self_attn.q_norm.weight" in W:
            q = rms(q, W[p + "self_attn.q_norm.weight"])
            k = rms(k, W[p + "self_attn.k_norm.weight"])
        lt = layer_types[il]
        q, k = rotate(q, tables[lt]), rotate(k, tables[lt])
        allowed = j_idx <= i_idx
        if lt == "sliding_attention" and window:
            allowed &= j_idx > i_idx - window
        g = nh // nkv
        out = np.empty((T, nh, hd))
        for hh in range(nh):
            s = (q[:, hh, :] @ k[:, hh // g, :].T) * scale
            s = np.where(allowed, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, hh, :] = s @ v[:, hh // g, :]
        a = out.reshape(T, nh * hd) @ W[p + "self_attn.o_proj.weight"].T
        if gemma:
            a = rms(a, W[p + "post_attention_layernorm.weight"])
            x = x + a
            h = rms(x, W[p + "pre_feedforward_layernorm.weight"])
        else:
            x = x + a
            h = rms(x, W[p + "post_attention_layernorm.weight"])
        gate = h @ W[p + "mlp.gate_proj.weight"].T
        up = h @ W[p + "mlp.up_proj.weight"].T
        if gemma:  # gelu, tanh approximation
            act = 0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3)))
        else:  # silu
            act = gate / (1.0 + np.exp(-gate))
        m = (act * up) @ W[p + "mlp.down_proj.weight"].T
        if gemma:
            m = rms(m, W[p + "post_feedforward_layernorm.weight"])
        x = x + m
    x = rms(x, W["model.norm.weight"])
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", help="write the logits as float32 [n][n_vocab]")
    ap.add_argument("--strata-logits", help="compare with this `strata logits --all` file")
    ap.add_argument("--threshold", type=float, default=1e-3)
    a = ap.parse_args()
    with open(os.path.join(a.hf, "config.json")) as f:
        cfg = json.load(f)
    W = load_safetensors(os.path.join(a.hf, "model.safetensors"))
    with open(a.tokens) as f:
        ids = [int(t) for t in re.split(r"[\s,]+", f.read().strip()) if t]
    logits = forward(cfg, W, np.array(ids))
    if a.out:
        logits.astype("<f4").tofile(a.out)
    if a.strata_logits:
        got = np.fromfile(a.strata_logits, dtype="<f4").astype(np.float64).reshape(logits.shape)
        ratio = np.abs(got - logits).max(axis=1) / np.abs(logits).max(axis=1)
        top1 = float(np.mean(got.argmax(axis=1) == logits.argmax(axis=1)))
        w = int(ratio.argmax())
        ok = ratio[w] <= a.threshold
        print(f"{os.path.basename(os.path.normpath(a.hf))}: worst max|diff|/max|logit| {ratio[w]:.3e} at position {w}, "
              f"top-1 agreement {top1 * 100:.1f}%  {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
