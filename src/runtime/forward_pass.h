// The forward pass of every architecture, written once over an `Ops` policy: the CPU engine
// (cpu_forward.cpp) and the CUDA engine (cuda_forward.cpp) differ only in where buffers live and
// which kernels run. The architecture differences are data in ModelSpec.
//
// Ops must provide (pointers are host or device memory as the policy decides; `n` tokens):
//   void begin_chunk(const int32_t* tokens, uint32_t n, uint32_t pos0);  // positions pos0 + t
//   void embed(const int32_t* tokens, uint32_t n, float scale, float* x);
//   void norm(const float* x, const float* w, int64_t n_vec, int64_t dim, float eps, float* out);
//   void matmul(const kernels::WeightView& w, const float* x, uint32_t n, float* y);
//   void rope(float* x, uint32_t n, int64_t n_heads, int64_t head_dim, float base, float linear_scale,
//             const float* freq_div, bool neox);
//   void kv_write(uint32_t il, const float* k, const float* v, uint32_t n, uint32_t pos0);
//   void attention(uint32_t il, const float* q, uint32_t n, const kernels::cpu::AttentionShape& s, float* out);
//   void gated_act(model::FfnActivation act, float* gate, const float* up, int64_t count);
//   void add(float* x, const float* y, int64_t count);
// and the buffers below, each sized for `ubatch` tokens.
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.h"
#include "model/model_spec.h"
#include "model/model_weights.h"

namespace strata::runtime {

struct ForwardBuffers {
  float* x;     // (n, n_embd) residual stream
  float* h;     // (n, n_embd) normed input of a block / block output
  float* q;     // (n, n_head * head_dim)
  float* k;     // (n, n_head_kv * head_dim)
  float* v;     // (n, n_head_kv * head_dim)
  float* att;   // (n, n_head * head_dim)
  float* gate;  // (n, n_ff)
  float* up;    // (n, n_ff)
};

template <typename Ops>
void attention_block(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                     uint32_t il, uint32_t n, uint32_t pos0) {
  const auto& l = w.layers[il];
  const int64_t d = s.hp.n_embd, hd = s.hp.n_embd_head;
  const float eps = s.hp.rms_eps;
  ops.norm(b.x, l.attn_norm, n, d, eps, b.h);
  ops.matmul(l.wq, b.h, n, b.q);
  ops.matmul(l.wk, b.h, n, b.k);
  ops.matmul(l.wv, b.h, n, b.v);
  if (s.qk_norm) {
    ops.norm(b.q, l.q_norm, int64_t(n) * s.hp.n_head, hd, eps, b.q);
    ops.norm(b.k, l.k_norm, int64_t(n) * s.hp.n_head_kv, hd, eps, b.k);
  }
  const bool neox = s.rope_style == model::RopeStyle::neox;
  ops.rope(b.q, n, s.hp.n_head, hd, s.rope_base(il), s.rope_linear_scale(il), w.rope_freqs, neox);
  ops.rope(b.k, n, s.hp.n_head_kv, hd, s.rope_base(il), s.rope_linear_scale(il), w.rope_freqs, neox);
  ops.kv_write(il, b.k, b.v, n, pos0);
  const kernels::cpu::AttentionShape shape{s.hp.n_head, s.hp.n_head_kv, hd, s.window(il), s.attention_scale};
  ops.attention(il, b.q, n, shape, b.att);
  ops.matmul(l.wo, b.att, n, b.h);
  if (s.post_norms) ops.norm(b.h, l.post_attn_norm, n, d, eps, b.h);
  ops.add(b.x, b.h, int64_t(n) * d);
}

template <typename Ops>
void ffn_block(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
               uint32_t il, uint32_t n) {
  const auto& l = w.layers[il];
  const int64_t d = s.hp.n_embd;
  const float eps = s.hp.rms_eps;
  ops.norm(b.x, l.ffn_norm, n, d, eps, b.h);
  ops.matmul(l.ffn_gate, b.h, n, b.gate);
  ops.matmul(l.ffn_up, b.h, n, b.up);
  ops.gated_act(s.activation, b.gate, b.up, int64_t(n) * s.hp.n_ff);
  ops.matmul(l.ffn_down, b.gate, n, b.h);
  if (s.post_norms) ops.norm(b.h, l.post_ffw_norm, n, d, eps, b.h);
  ops.add(b.x, b.h, int64_t(n) * d);
}

// Runs n tokens at positions [pos0, pos0 + n) through every layer; then, when `rows` > 0, the
// final norm and head for the last `rows` tokens into `logits` (rows, n_vocab).
template <typename Ops>
void forward_chunk(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                   const int32_t* tokens, uint32_t n, uint32_t pos0, uint32_t rows, float* logits) {
  const int64_t d = s.hp.n_embd;
  ops.begin_chunk(tokens, n, pos0);
  ops.embed(tokens, n, s.embedding_scale, b.x);
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    attention_block(ops, s, w, b, il, n, pos0);
    ffn_block(ops, s, w, b, il, n);
  }
  if (rows == 0) return;
  ops.norm(b.x + int64_t(n - rows) * d, w.output_norm, rows, d, s.hp.rms_eps, b.h);
  ops.matmul(w.output, b.h, rows, logits);
}

}  // namespace strata::runtime
