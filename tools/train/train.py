#!/usr/bin/env python3
"""Train strata's embedded default model: a small gemma3, computed exactly as strata's forward pass
(src/runtime/forward_pass.h, src/model/model_spec.cpp) computes it, so that `strata convert` +
`strata perplexity` reproduce the PyTorch figures.

The math, layer by layer (HF gemma3_text conventions; GGUF stores norm weights as 1 + w):
  x = embed[tokens] * sqrt(n_embd)
  per layer il (sliding iff il % 6 != 5; sliding layers see keys j with i - window < j <= i):
    h = rmsnorm(x) * (1 + w_attn_norm)
    q, k, v = h Wq, h Wk, h Wv                        (GQA: n_head_kv key/value heads)
    q, k = rmsnorm_per_head(q, k) * (1 + w_q/k_norm)  (QK-norm)
    q, k = rope_neox(q, k, pos, base = 1e4 sliding | 1e6 global)
    a = softmax(q k^T / sqrt(head_dim) + mask) v
    x = x + rmsnorm(a Wo) * (1 + w_post_attn_norm)
    h = rmsnorm(x) * (1 + w_ffn_norm)
    x = x + rmsnorm((gelu_tanh(h Wg) * (h Wu)) Wd) * (1 + w_post_ffw_norm)
  logits = (rmsnorm(x) * (1 + w_out_norm)) embed^T     (tied head, no softcaps)
Early exit (LayerSkip-style): the same final norm and head after layers [0, d) for d in --exits,
trained with a small weight, so that strata's self-speculative drafts from a layer prefix work.

Inputs: --data DIR with train.u16.xz / valid.u16.xz (uint16 token ids, little-endian, made by
tokenize.py) and tokenizer.model. Outputs in --out: config.json, model.safetensors split into
parts of < 16 MiB (model.safetensors.partNN; join with cat), metrics.json, train_log.txt.
"""
import argparse
import json
import lzma
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def log(msg, f=None):
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    if f:
        f.write(line + "\n")
        f.flush()


class Config:
    def __init__(self, **kw):
        self.vocab_size = 8192
        self.hidden_size = 512
        self.num_hidden_layers = 12
        self.num_attention_heads = 8
        self.num_key_value_heads = 2
        self.head_dim = 64
        self.intermediate_size = 1024
        self.sliding_window = 256
        self.pattern = 6  # layer il is global iff il % pattern == pattern - 1
        self.rope_global = 1e6
        self.rope_local = 1e4
        self.rms_norm_eps = 1e-6
        self.max_position_embeddings = 2048
        self.__dict__.update(kw)

    def is_sliding(self, il):
        return il % self.pattern != self.pattern - 1

    def hf_config(self, bos, eos, pad):
        layer_types = ["sliding_attention" if self.is_sliding(i) else "full_attention"
                       for i in range(self.num_hidden_layers)]
        return {
            "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim, "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps, "tie_word_embeddings": True, "attention_bias": False,
            "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": self.head_dim,
            "sliding_window": self.sliding_window, "layer_types": layer_types,
            "sliding_window_pattern": self.pattern,
            "final_logit_softcapping": None, "attn_logit_softcapping": None,
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": self.rope_global},
                                "sliding_attention": {"rope_type": "default", "rope_theta": self.rope_local}},
            "rope_theta": self.rope_global, "rope_local_base_freq": self.rope_local,
            "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad, "torch_dtype": "float16",
        }


def rmsnorm(x, w, eps):
    # In float32 like strata (which accumulates the mean square in double: the difference is noise).
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * (1.0 + w.float())).to(x.dtype)


def rope_tables(cfg, T, base, device):
    d = cfg.head_dim
    inv = base ** (-torch.arange(0, d // 2, dtype=torch.float64, device=device) * 2.0 / d)
    ang = torch.arange(T, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope_neox(x, cos, sin):
    # x: (B, H, T, d); rotate halves (x[i], x[i + d/2]).
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h].float(), x[..., h:].float()
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).to(x.dtype)


class Layer(nn.Module):
    def __init__(self, cfg, il):
        super().__init__()
        d, hd = cfg.hidden_size, cfg.head_dim
        self.cfg, self.sliding = cfg, cfg.is_sliding(il)
        self.q_proj = nn.Linear(d, cfg.num_attention_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.num_attention_heads * hd, d, bias=False)
        self.gate_proj = nn.Linear(d, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(d, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, d, bias=False)
        z = lambda n: nn.Parameter(torch.zeros(n))  # (1 + w) = 1 at init
        self.input_layernorm, self.post_attention_layernorm = z(d), z(d)
        self.pre_feedforward_layernorm, self.post_feedforward_layernorm = z(d), z(d)
        self.q_norm, self.k_norm = z(hd), z(hd)

    def forward(self, x, rope, mask):
        cfg, eps = self.cfg, self.cfg.rms_norm_eps
        B, T, _ = x.shape
        H, KV, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        h = rmsnorm(x, self.input_layernorm, eps)
        q = self.q_proj(h).view(B, T, H, hd)
        k = self.k_proj(h).view(B, T, KV, hd)
        v = self.v_proj(h).view(B, T, KV, hd)
        q = rmsnorm(q, self.q_norm, eps).transpose(1, 2)
        k = rmsnorm(k, self.k_norm, eps).transpose(1, 2)
        v = v.transpose(1, 2)
        cos, sin = rope
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
        # GQA: query head h uses key/value head h // (H / KV), as strata's attention does.
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        if mask is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(hd))
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(hd))
        a = a.transpose(1, 2).reshape(B, T, H * hd)
        x = x + rmsnorm(self.o_proj(a), self.post_attention_layernorm, eps)
        h = rmsnorm(x, self.pre_feedforward_layernorm, eps)
        m = F.gelu(self.gate_proj(h), approximate="tanh") * self.up_proj(h)
        return x + rmsnorm(self.down_proj(m), self.post_feedforward_layernorm, eps)


class Gemma3(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([Layer(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = nn.Parameter(torch.zeros(cfg.hidden_size))
        std = 0.02
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=std)
                if n.endswith(("o_proj.weight", "down_proj.weight")):
                    p.data.mul_(1.0 / math.sqrt(2 * cfg.num_hidden_layers))
        self._cache = {}

    def tables(self, T, device):
        key = (T, device)
        if key not in self._cache:
            cfg = self.cfg
            g = rope_tables(cfg, T, cfg.rope_global, device)
            l = rope_tables(cfg, T, cfg.rope_local, device)
            i = torch.arange(T, device=device)
            # Sliding: a query at i sees keys j with i - window < j <= i.
            ok = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - cfg.sliding_window)
            self._cache[key] = (g, l, ok)
        return self._cache[key]

    def head(self, x):
        return rmsnorm(x, self.norm, self.cfg.rms_norm_eps) @ self.embed_tokens.weight.to(x.dtype).t()

    def forward(self, tokens, exits=()):
        """Final logits, plus the logits after layers [0, d) for each d in exits."""
        T = tokens.shape[1]
        g, l, ok = self.tables(T, tokens.device)
        # The residual stream stays f32; matmuls run in bf16 under autocast.
        x = self.embed_tokens(tokens).float() * math.sqrt(self.cfg.hidden_size)
        outs = []
        for il, layer in enumerate(self.layers):
            sliding = layer.sliding
            mask = ok if (sliding and T > self.cfg.sliding_window) else None
            x = layer(x, l if sliding else g, mask)
            if il + 1 in exits:
                outs.append(self.head(x))
        return self.head(x), outs


# ---------------------------------------------------------------------------------------------
# Data


def load_u16(path):
    with lzma.open(path) as f:
        return np.frombuffer(f.read(), dtype="<u2").astype(np.int64)


def perplexity(model, ids, n_ctx, bos, device, max_chunks=None, batch=16):
    """llama.cpp's (and strata's) method: non-overlapping chunks of n_ctx tokens, each starting
    with BOS in place of its first token; the second half of each chunk is scored."""
    n_chunks = len(ids) // n_ctx
    if max_chunks:
        n_chunks = min(n_chunks, max_chunks)
    first = n_ctx // 2
    nll, count = 0.0, 0
    with torch.no_grad():
        for c0 in range(0, n_chunks, batch):
            cs = range(c0, min(n_chunks, c0 + batch))
            x = torch.stack([torch.from_numpy(ids[c * n_ctx:(c + 1) * n_ctx].copy()) for c in cs]).to(device)
            x[:, 0] = bos
            logits, _ = model(x)
            lp = torch.log_softmax(logits.float(), dim=-1)
            tgt = x[:, first + 1:]
            nll -= lp[:, first:n_ctx - 1].gather(-1, tgt[..., None]).sum().item()
            count += tgt.numel()
    return math.exp(nll / max(count, 1)), count, n_chunks


# ---------------------------------------------------------------------------------------------
# Safetensors, written by hand (8-byte LE header length, JSON header, raw little-endian data).


def save_safetensors(tensors, path):
    header, offset, blobs = {"__metadata__": {"format": "pt", "producer": "strata tools/train"}}, 0, []
    for name, t in tensors.items():
        b = t.contiguous().cpu().numpy().astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def hf_state(model):
    out = {"model.embed_tokens.weight": model.embed_tokens.weight, "model.norm.weight": model.norm}
    for i, l in enumerate(model.layers):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": l.input_layernorm,
            p + "self_attn.q_proj.weight": l.q_proj.weight, p + "self_attn.k_proj.weight": l.k_proj.weight,
            p + "self_attn.v_proj.weight": l.v_proj.weight, p + "self_attn.o_proj.weight": l.o_proj.weight,
            p + "self_attn.q_norm.weight": l.q_norm, p + "self_attn.k_norm.weight": l.k_norm,
            p + "post_attention_layernorm.weight": l.post_attention_layernorm,
            p + "pre_feedforward_layernorm.weight": l.pre_feedforward_layernorm,
            p + "mlp.gate_proj.weight": l.gate_proj.weight, p + "mlp.up_proj.weight": l.up_proj.weight,
            p + "mlp.down_proj.weight": l.down_proj.weight,
            p + "post_feedforward_layernorm.weight": l.post_feedforward_layernorm,
        })
    return {k: v.detach().float() for k, v in out.items()}


def split_file(path, part_bytes):
    parts = []
    with open(path, "rb") as f:
        i = 0
        while True:
            b = f.read(part_bytes)
            if not b:
                break
            p = f"{path}.part{i:02d}"
            with open(p, "wb") as g:
                g.write(b)
            parts.append(os.path.basename(p))
            i += 1
    os.remove(path)
    return parts


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description="train strata's tiny gemma3")
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=270, help="training time budget (excl. load/eval)")
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--exits", default="4,8", help="early-exit depths d (layers [0, d) + head)")
    ap.add_argument("--exit-weight", type=float, default=0.1)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--eval-chunks", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--fake-data", type=int, default=0, help="smoke test: N random tokens instead of --data")
    ap.add_argument("--bos", type=int, default=1)
    ap.add_argument("--eos", type=int, default=2)
    ap.add_argument("--pad", type=int, default=-1)
    args = ap.parse_args()
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    lf = open(os.path.join(args.out, "train_log.txt"), "w")
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    log(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", lf)

    if args.fake_data:
        rng = np.random.default_rng(args.seed)
        train = rng.integers(3, 8192, args.fake_data).astype(np.int64)
        valid = rng.integers(3, 8192, 1 << 17).astype(np.int64)
    else:
        train = load_u16(os.path.join(args.data, "train.u16.xz"))
        valid = load_u16(os.path.join(args.data, "valid.u16.xz"))
    log(f"data: {len(train)} train tokens, {len(valid)} valid tokens ({time.time() - t_start:.1f} s)", lf)
    train_gpu = torch.from_numpy(train).to(dev)

    cfg = Config(max_position_embeddings=args.ctx)
    model = Gemma3(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f} M parameters", lf)
    exits = tuple(int(e) for e in args.exits.split(",") if e)
    fwd = torch.compile(model) if args.compile else model

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    B, T = args.batch, args.ctx
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    offs = torch.arange(T + 1, device=dev)

    def batch():
        start = torch.randint(0, len(train) - T - 1, (B,), device=dev, generator=gen)
        x = train_gpu[start[:, None] + offs]
        x[:, 0] = args.bos  # every window starts with BOS, as strata's perplexity chunks do
        return x[:, :-1], x[:, 1:]

    # Model selection: loss on the LAST 16 x ctx validation tokens every --eval-every steps; the best
    # weights are kept (the reported perplexities use the first chunks: disjoint on long valid sets).
    sel = torch.from_numpy(valid[-16 * T:].copy()).view(16, T).to(dev)
    sel_x, sel_y = sel[:, :-1].clone(), sel[:, 1:]
    sel_x[:, 0] = args.bos
    best = (float("inf"), -1, None)

    def select(step):
        nonlocal best
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            lg, _ = fwd(sel_x)
            v = F.cross_entropy(lg.float().view(-1, cfg.vocab_size), sel_y.reshape(-1)).item()
        if v < best[0]:
            best = (v, step, {k: t.detach().clone() for k, t in model.state_dict().items()})
        return v

    warmup, total = 50, args.max_steps
    step, t_train0, tokens_seen = 0, time.time(), 0
    losses = []
    while step < total:
        if step == 20:
            torch.cuda.synchronize()
            t20 = time.time()
        if step == 60:
            torch.cuda.synchronize()
            per_step = (time.time() - t20) / 40
            total = min(args.max_steps, 60 + int((args.seconds - (time.time() - t_train0)) / per_step))
            log(f"{per_step * 1000:.0f} ms/step, {B * T / per_step / 1e3:.0f} K tok/s -> {total} steps", lf)
        lr = args.lr * min(1.0, (step + 1) / warmup)
        if step >= warmup and total > warmup:
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / (total - warmup)))))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, early = fwd(x, exits)
            loss = F.cross_entropy(logits.float().view(-1, cfg.vocab_size), y.reshape(-1))
            total_loss = loss
            for e in early:
                total_loss = total_loss + args.exit_weight * F.cross_entropy(e.float().view(-1, cfg.vocab_size), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        total_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens_seen += B * T
        if step % args.eval_every == 0 or step == total - 1:
            l = loss.item()
            v = select(step)
            losses.append((step, l, v))
            log(f"step {step}/{total} loss {l:.4f} valid {v:.4f} lr {lr:.2e} tokens {tokens_seen / 1e6:.1f}M "
                f"({time.time() - t_train0:.0f} s)", lf)
        step += 1
    torch.cuda.synchronize()
    train_s = time.time() - t_train0
    log(f"best selection loss {best[0]:.4f} at step {best[1]} (of {step})", lf)
    model.load_state_dict(best[2])

    # Evaluate the weights exactly as shipped: rounded to f16, computed in f32 (no TF32), as strata does.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    state = hf_state(model)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    model.eval()
    metrics = {"n_params": n_params, "steps": step, "tokens_seen": tokens_seen, "train_seconds": train_s,
               "final_train_loss": losses[-1][1] if losses else None, "batch": B, "ctx": T, "lr": args.lr,
               "exits": list(exits), "exit_weight": args.exit_weight, "torch": torch.__version__,
               "valid_tokens": int(len(valid)), "selected_step": best[1], "selection_loss": best[0],
               "loss_curve": losses}
    for n_ctx in (512, 1024, 2048):
        for mc in (None, args.eval_chunks):
            ppl, n, chunks = perplexity(model, valid, n_ctx, args.bos, dev, mc)
            key = f"ppl_ctx{n_ctx}_" + ("all" if mc is None else f"first{mc}")
            metrics[key] = {"ppl": ppl, "scored_tokens": n, "chunks": chunks}
            log(f"{key}: {ppl:.4f} ({n} tokens)", lf)
    # Early-exit quality: perplexity of the draft head at each exit depth (ctx 1024, first chunks).
    with torch.no_grad():
        n_ctx, nch = 1024, min(args.eval_chunks, len(valid) // 1024)
        x = torch.stack([torch.from_numpy(valid[c * n_ctx:(c + 1) * n_ctx].copy()) for c in range(nch)]).to(dev)
        x[:, 0] = args.bos
        depths = sorted(set(exits) | {2, 4, 6, 8, 10})
        nll = {d: 0.0 for d in depths}
        agree = {d: 0 for d in depths}
        full, early = model(x, tuple(depths))
        tgt = x[:, n_ctx // 2 + 1:]
        top_full = full[:, n_ctx // 2:-1].argmax(-1)
        for d, e in zip(depths, early):
            lp = torch.log_softmax(e.float(), -1)[:, n_ctx // 2:-1]
            nll[d] = -lp.gather(-1, tgt[..., None]).mean().item()
            agree[d] = (e[:, n_ctx // 2:-1].argmax(-1) == top_full).float().mean().item()
        metrics["early_exit"] = {str(d): {"ppl": math.exp(nll[d]), "greedy_agreement_with_full": agree[d]}
                                 for d in depths}
        log(f"early exit: {metrics['early_exit']}", lf)

    config = cfg.hf_config(args.bos, args.eos, args.pad if args.pad >= 0 else None)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    st = os.path.join(args.out, "model.safetensors")
    save_safetensors(state, st)
    metrics["safetensors_bytes"] = os.path.getsize(st)
    metrics["parts"] = split_file(st, 15 << 20)
    metrics["total_seconds"] = time.time() - t_start
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    log(f"done in {metrics['total_seconds']:.0f} s: {metrics['parts']}", lf)


if __name__ == "__main__":
    main()
