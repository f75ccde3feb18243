#!/usr/bin/env python3
"""Compare strata's logits with HF transformers' on the same token ids (float32, eager attention).

    compare_hf.py --hf DIR --tokens tokens.txt --strata-logits logits.f32 [--json out.json]

DIR is what `strata export-hf` wrote (config.json + model.safetensors). tokens.txt holds token ids
(space- or comma-separated); logits.f32 is `strata logits --all` output: little-endian float32
[n_tokens][n_vocab]. The model runs one forward pass over the whole sequence. Per position it
measures max|diff| / max|logit_hf|, KL(hf || strata) and top-1 agreement; exit status 1 when the
worst ratio exceeds --threshold (default 1e-3), 2 on bad input.

--check-only validates the export and the inputs without torch (safetensors header against
config.json, logits file size) - the part that runs on a machine without transformers.
"""
import argparse
import json
import math
import os
import re
import struct
import sys


def read_tokens(path):
    with open(path) as f:
        text = f.read()
    ids = [int(t) for t in re.split(r"[\s,]+", text.strip()) if t]
    if not ids:
        raise ValueError(f"{path}: no token ids")
    return ids


def read_safetensors_header(path):
    """Returns (header dict without __metadata__, metadata, data_start, file_size)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: shorter than 8 bytes")
        (n,) = struct.unpack("<Q", raw)
        if 8 + n > size:
            raise ValueError(f"{path}: header length {n} runs past the end ({size} bytes)")
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", {})
    return header, meta, 8 + n, size


def expected_tensors(cfg):
    """HF name -> shape that the config implies (the export's contract)."""
    H, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    gemma = cfg["model_type"].startswith("gemma")
    qk_norm = gemma or cfg["model_type"] == "qwen3"
    t = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = [V, H]
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        t[p + "input_layernorm.weight"] = [H]
        t[p + "self_attn.q_proj.weight"] = [nh * hd, H]
        t[p + "self_attn.k_proj.weight"] = [nkv * hd, H]
        t[p + "self_attn.v_proj.weight"] = [nkv * hd, H]
        t[p + "self_attn.o_proj.weight"] = [H, nh * hd]
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = [hd]
            t[p + "self_attn.k_norm.weight"] = [hd]
        t[p + "post_attention_layernorm.weight"] = [H]
        if gemma:
            t[p + "pre_feedforward_layernorm.weight"] = [H]
            t[p + "post_feedforward_layernorm.weight"] = [H]
        t[p + "mlp.gate_proj.weight"] = [F, H]
        t[p + "mlp.up_proj.weight"] = [F, H]
        t[p + "mlp.down_proj.weight"] = [H, F]
    return t


def check_export(hf_dir):
    """Raises ValueError naming the first problem; returns the config."""
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    path = os.path.join(hf_dir, "model.safetensors")
    header, meta, data_start, size = read_safetensors_header(path)
    if meta.get("format") != "pt":
        raise ValueError(f"{path}: __metadata__.format is {meta.get('format')!r}, transformers wants 'pt'")
    want = expected_tensors(cfg)
    if set(header) != set(want):
        missing, extra = sorted(set(want) - set(header)), sorted(set(header) - set(want))
        raise ValueError(f"{path}: tensor names differ from the config's: missing {missing[:5]}, extra {extra[:5]}")
    end = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if info["dtype"] != "F32":
            raise ValueError(f"{name}: dtype {info['dtype']}, expected F32")
        if info["shape"] != want[name]:
            raise ValueError(f"{name}: shape {info['shape']}, expected {want[name]}")
        b, e = info["data_offsets"]
        if b != end or e - b != 4 * math.prod(info["shape"]):
            raise ValueError(f"{name}: data_offsets {b}..{e} do not tile the buffer (expected start {end})")
        end = e
    if data_start + end != size:
        raise ValueError(f"{path}: data ends at {data_start + end}, file has {size} bytes")
    return cfg


def read_f32(path, n_rows, n_cols):
    size = os.path.getsize(path)
    if size != 4 * n_rows * n_cols:
        raise ValueError(f"{path}: {size} bytes, expected {n_rows} x {n_cols} float32 = {4 * n_rows * n_cols}")
    with open(path, "rb") as f:
        return f.read()


def expected_inv_freqs(cfg):
    """{label: [inv_freq...]} the config asks for, computed here from the numbers we wrote."""
    hd = cfg["head_dim"]

    def inv(theta, factor):
        return [1.0 / (theta ** (2 * i / hd)) / factor for i in range(hd // 2)]

    rp = cfg.get("rope_parameters") or {}
    if "full_attention" in rp or "sliding_attention" in rp:
        return {k: inv(v["rope_theta"], v.get("factor", 1.0) if v.get("rope_type") == "linear" else 1.0)
                for k, v in rp.items()}
    return {"all": inv(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)),
                       rp.get("factor", 1.0) if rp.get("rope_type") == "linear" else 1.0)}


def check_rope_buffers(model, cfg):
    """Every RoPE frequency vector the config implies must exist among the model's inv_freq buffers:
    catches a transformers version that reads the rope keys differently. Returns notes."""
    import torch
    bufs = {n: b.detach().double().cpu() for n, b in model.named_buffers() if "inv_freq" in n}
    notes = []
    for label, want in expected_inv_freqs(cfg).items():
        w = torch.tensor(want, dtype=torch.float64)
        hits = [n for n, b in bufs.items() if b.shape == w.shape and torch.allclose(b, w, rtol=1e-5, atol=0)]
        notes.append(f"rope {label}: " + (f"matches buffer {hits[0]}" if hits else
                                          f"NO inv_freq buffer matches (buffers: {sorted(bufs)})"))
    return notes


def compare(ref, got):
    """ref, got: float64 tensors [n, V]. Per-position stats and a summary."""
    import torch
    diff = (ref - got).abs().amax(dim=1)
    scale = ref.abs().amax(dim=1).clamp_min(1e-30)
    ratio = diff / scale
    lp, lq = torch.log_softmax(ref, dim=1), torch.log_softmax(got, dim=1)
    kl = (lp.exp() * (lp - lq)).sum(dim=1)
    top_ref, top_got = ref.argmax(dim=1), got.argmax(dim=1)
    top2 = ref.topk(2, dim=1).values
    gap = (top2[:, 0] - top2[:, 1])
    rows = [{"pos": i, "max_abs_diff": float(diff[i]), "max_abs_logit": float(scale[i]), "ratio": float(ratio[i]),
             "kl": float(kl[i]), "top1_hf": int(top_ref[i]), "top1_strata": int(top_got[i]),
             "top1_gap_hf": float(gap[i])} for i in range(ref.shape[0])]
    worst = int(ratio.argmax())
    summary = {"worst_ratio": float(ratio[worst]), "worst_pos": worst, "mean_kl": float(kl.mean()),
               "max_kl": float(kl.max()), "top1_agree": float((top_ref == top_got).double().mean()),
               "top1_disagree_positions": [i for i in range(ref.shape[0]) if top_ref[i] != top_got[i]]}
    return rows, summary


def print_table(name, rows, summary, threshold, bucket):
    print(f"\n{name}: {len(rows)} positions")
    print(f"  {'positions':>11} {'worst ratio':>12} {'max|diff|':>11} {'max|logit|':>11} {'mean KL':>10} {'top1':>6}")
    for b in range(0, len(rows), bucket):
        chunk = rows[b:b + bucket]
        w = max(chunk, key=lambda r: r["ratio"])
        agree = sum(r["top1_hf"] == r["top1_strata"] for r in chunk)
        print(f"  {b:>5}-{b + len(chunk) - 1:<5} {w['ratio']:>12.3e} {w['max_abs_diff']:>11.3e} "
              f"{w['max_abs_logit']:>11.3e} {sum(r['kl'] for r in chunk) / len(chunk):>10.3e} {agree:>3}/{len(chunk)}")
    verdict = "PASS" if summary["worst_ratio"] <= threshold else "FAIL"
    print(f"  worst ratio {summary['worst_ratio']:.3e} at position {summary['worst_pos']} (threshold {threshold:g}), "
          f"mean KL {summary['mean_kl']:.3e}, top-1 agreement {summary['top1_agree'] * 100:.1f}%  {verdict}")


def load_model(hf_dir, device):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    kwargs = dict(attn_implementation="eager")
    try:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, **kwargs)
    except TypeError:  # transformers < 4.56 spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32, **kwargs)
    model.eval().to(device)
    return model, transformers.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", required=True, help="folder written by `strata export-hf`")
    ap.add_argument("--tokens", required=True, help="token ids, space- or comma-separated")
    ap.add_argument("--strata-logits", required=True, help="`strata logits --all` output, float32 [n][n_vocab]")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--name", default=None, help="label for the table (default: the --hf folder name)")
    ap.add_argument("--threshold", type=float, default=1e-3, help="max allowed worst max|diff|/max|logit|")
    ap.add_argument("--device", default="auto", help="auto (cuda if available), cpu or cuda")
    ap.add_argument("--bucket", type=int, default=16, help="positions per table row")
    ap.add_argument("--check-only", action="store_true", help="validate the export and inputs; no torch")
    a = ap.parse_args()
    name = a.name or os.path.basename(os.path.normpath(a.hf))

    try:
        cfg = check_export(a.hf)
        ids = read_tokens(a.tokens)
        V = cfg["vocab_size"]
        bad = [t for t in ids if not 0 <= t < V]
        if bad:
            raise ValueError(f"{a.tokens}: ids out of range [0, {V}): {bad[:5]}")
        raw = read_f32(a.strata_logits, len(ids), V)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_hf: {e}", file=sys.stderr)
        return 2
    print(f"{name}: export ok ({cfg['model_type']}, {cfg['num_hidden_layers']} layers, vocab {V}), "
          f"{len(ids)} tokens, strata logits {len(raw)} bytes")
    if a.check_only:
        return 0

    import torch
    # Exact float32: no TF32 matmuls/convolutions on the GPU.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    model, tf_version = load_model(a.hf, device)
    notes = check_rope_buffers(model, cfg)
    # What the loaded config made of our keys (a version that ignores one shows here).
    mc = model.config
    seen = {k: getattr(mc, k, None) for k in ("layer_types", "sliding_window", "rope_parameters", "rope_scaling",
                                               "query_pre_attn_scalar", "tie_word_embeddings", "head_dim")}
    with torch.no_grad():
        input_ids = torch.tensor([ids], dtype=torch.long, device=device)
        out = model(input_ids=input_ids, use_cache=False)
        ref = out.logits[0].double().cpu()
    got = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(len(ids), V).double()
    rows, summary = compare(ref, got)
    for n in notes:
        print(f"  {n}")
    print_table(name, rows, summary, a.threshold, a.bucket)
    ok = summary["worst_ratio"] <= a.threshold
    if a.json:
        result = {"name": name, "hf_dir": a.hf, "n_tokens": len(ids), "n_vocab": V, "threshold": a.threshold,
                  "pass": ok, **summary, "rope_checks": notes, "hf_config_seen": json.loads(json.dumps(seen, default=str)),
                  "transformers_version": tf_version, "torch_version": torch.__version__, "device": device,
                  "per_position": rows}
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
