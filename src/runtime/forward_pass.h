// The forward pass of every architecture, written once over an `Ops` policy: the CPU engine
// (cpu_forward.cpp) and the CUDA engine (cuda_forward.cpp) differ only in where buffers live and
// which kernels run. The architecture differences are data in ModelSpec.
//
// Ops must provide (pointers are host or device memory as the policy decides; `n` tokens):
//   void begin_chunk(const int32_t* tokens, uint32_t n, const RowMap& rows, Layers layers, bool head);
//                          // each row's sequence and position; layers run; head: the chunk ends
//                          // with norm + head
//   void rows_from(uint32_t t0);             // layer-major groups (forward_group): the ops until the
//                          // next call act on rows [t0, t0 + n) of the group begin_chunk announced
//                          // (positions, tokens); begin_chunk resets it to 0
//   void begin_block(Block b, uint32_t il);  // before a block's first weight is used, and
//   void end_block(Block b, uint32_t il);    // after its last (where an executor streams weights)
//   void embed(const int32_t* tokens, uint32_t n, float scale, float* x);
//   void load_hidden(float* x, uint32_t n);         // x = the caller's residual stream (layers.first > 0)
//   void store_hidden(const float* x, uint32_t n);  // hands x to the caller (after the last layer run)
//   void norm(const float* x, const float* w, int64_t n_vec, int64_t dim, float eps, float* out,
//             const kernels::WeightView* next);  // next: the matrix that reads out first (a GPU
//                          // rounds out to its int8 activations in the same kernel), or null
//   void matmul(const kernels::WeightView& w, const float* x, uint32_t n, float* y);
//   void matmuls(const MatmulJob* jobs, int count, const float* x, uint32_t n);  // y_j = W_j x for
//                          // matrices of one input (Q, K, V; gate, up): a GPU may run them side by
//                          // side; each y_j as matmul(*jobs[j].w, x, n, jobs[j].y) gives it
//   void qk_norm_rope(float* q, float* k, uint32_t n, const QkRope& r);  // QK-norm (where r has
//                          // weights), then RoPE, of every head of q and k (one fused kernel on a GPU)
//   void rope_kv_write(uint32_t il, float* q, float* k, const float* v, uint32_t n, const QkRope& r);
//                          // qk_norm_rope, then kv_write (one kernel on a GPU where it can)
//   void kv_write(uint32_t il, const float* k, const float* v, uint32_t n);   // row t into its
//   void attention(uint32_t il, const float* q, uint32_t n, const kernels::cpu::AttentionShape& s, float* out,
//                  const kernels::WeightView* next);  // next: as for norm
//                          // sequence's cache at its position; attention of row t over its sequence
//   void gated_act(model::FfnActivation act, float* gate, const float* up, int64_t count,
//                  const kernels::WeightView* next);  // next: as for norm
//   void add(float* x, const float* y, int64_t count);
//   void norm_add(float* x, float* h, const float* w, int64_t n_vec, int64_t dim, float eps);
//                          // x += rms_norm(h) * w (post-norm and residual add; h may be clobbered)
//   bool fuses_residual(Block b, uint32_t il);  // block (b, il)'s residual add may wait for
//                                               // the next block's input norm
//                          // (every block's weights stay in place outside its begin/end bracket)
//   void add_norm(float* x, float* h, const float* post_w, const float* w, int64_t n_vec, int64_t dim,
//                 float eps, float* out, const kernels::WeightView* next);  // x += h, post-normed
//                          // first with post_w where non-null (norm_add), then norm(x, w, ..., out,
//                          // next); out may be h
//   uint32_t logit_rows(); float* logits(uint32_t r0); void logits_done(uint32_t r0, uint32_t rows);
// and the buffers below, each sized for `ubatch` tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cpu/attention.h"
#include "model/model_spec.h"
#include "model/model_weights.h"
#include "runtime/draft_window.h"

namespace strata::runtime {

// One matrix of an Ops::matmuls group: y = W x.
struct MatmulJob {
  const kernels::WeightView* w;
  float* y;
};

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

// Which sequence and position each row of a chunk belongs to. A plain chunk (prefill, decode,
// eval_layers) is one sequence at consecutive positions from pos0; a batched step (eval_batch) gives
// per-row arrays: rows of several sequences share every matmul, and the policy's kv_write and
// attention send each row to its own sequence's cache.
struct RowMap {
  uint32_t seq = 0, pos0 = 0;
  const uint32_t* seqs = nullptr;      // batched: n entries, else null
  const int32_t* positions = nullptr;  // batched: n entries, else null
  bool batched() const { return seqs != nullptr; }
  uint32_t seq_of(uint32_t t) const { return seqs ? seqs[t] : seq; }
  int32_t pos_of(uint32_t t) const { return positions ? positions[t] : int32_t(pos0 + t); }
};

// Layers [first, end) of a chunk; the rest of the pass is skipped (speculative drafts and
// verification, engine.h LayerRange). store_hidden: the policy wants the stream after end - 1.
// skip: null, or one entry per model layer; a layer with a nonzero entry is not run (its
// residual stream passes unchanged; layer-subset drafts). window: a draft's attention window on
// full-attention layers (draft_window.h; off: full attention).
struct Layers {
  uint32_t first = 0, end = 0;
  bool store_hidden = false;
  const uint8_t* skip = nullptr;
  DraftWindow window = {};
  bool runs(uint32_t il) const { return il >= first && il < end && !(skip && skip[il]); }
};

// Q and K heads' QK-norm and RoPE (Ops::qk_norm_rope): the norms apply where a weight is given.
struct QkRope {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  const float* q_norm = nullptr;  // (head_dim) weights of every Q head's RMS norm; null: no norm
  const float* k_norm = nullptr;
  float eps = 0, base = 0, linear_scale = 1;  // position of a row = its position / linear_scale
  const float* freq_div = nullptr;
  bool neox = false;
};

// The blocks a forward pass brackets with begin_block/end_block (model/arch.h): attention, ffn, head.
using model::Block;
inline std::string block_label(Block b, uint32_t il) { return model::block_label(b, int(il)); }

// A block is begin_block, its rows' compute, end_block, then the residual add. The compute of
// n rows is apart so that a layer-major group (forward_group) runs it once per chunk between one
// begin/end pair: the same kernels on the same rows as a chunk-major pass, the block's weights
// acquired once.

// The previous block's output, still in b.h, when its residual add waits for this block's input
// norm (Ops::fuses_residual: one kernel for both on a GPU, two fewer launches per layer).
struct PendingOutput {
  bool pending = false;
  const float* post_norm = nullptr;  // its post-norm weight (architectures with post-norms)
};

// A block's input: b.h = norm(b.x) * w for the matrix `next`, after adding the pending output.
template <typename Ops>
void block_input(Ops& ops, const model::ModelSpec& s, const ForwardBuffers& b, const float* w,
                 const kernels::WeightView* next, uint32_t n, PendingOutput* carry) {
  const int64_t d = s.hp.n_embd;
  if (carry && carry->pending) {
    ops.add_norm(b.x, b.h, s.post_norms ? carry->post_norm : nullptr, w, n, d, s.hp.rms_eps, b.h, next);
    carry->pending = false;
    return;
  }
  ops.norm(b.x, w, n, d, s.hp.rms_eps, b.h, next);
}

// The attention block on b.x's n rows, its output in b.h (KV of layer il written for the rows),
// before the post-norm (add_block_output applies it). carry: see PendingOutput. window: a draft's
// (Layers::window), applied to full-attention layers.
template <typename Ops>
void attention_rows(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                    uint32_t il, uint32_t n, PendingOutput* carry = nullptr, DraftWindow window = {}) {
  const auto& l = w.layers[il];
  const int64_t hd = s.hp.n_embd_head;
  const float eps = s.hp.rms_eps;
  block_input(ops, s, b, l.attn_norm, &l.wq, n, carry);
  const MatmulJob qkv[3] = {{&l.wq, b.q}, {&l.wk, b.k}, {&l.wv, b.v}};
  ops.matmuls(qkv, 3, b.h, n);
  QkRope r;
  r.n_head = s.hp.n_head, r.n_head_kv = s.hp.n_head_kv, r.head_dim = hd;
  if (s.qk_norm) r.q_norm = l.q_norm, r.k_norm = l.k_norm;
  r.eps = eps, r.base = s.rope_base(il), r.linear_scale = s.rope_linear_scale(il);
  r.freq_div = w.rope_freqs, r.neox = s.rope_style == model::RopeStyle::neox;
  ops.rope_kv_write(il, b.q, b.k, b.v, n, r);
  const kernels::cpu::AttentionShape shape =
      window.apply({s.hp.n_head, s.hp.n_head_kv, hd, s.window(il), s.attention_scale});
  ops.attention(il, b.q, n, shape, b.att, &l.wo);
  ops.matmul(l.wo, b.att, n, b.h);
}

// gate = act(W_gate x) * (W_up x): Ops::matmuls then Ops::gated_act, or the policy's fused member
// where it has one (optional: bool gated_matmuls(act, gate_up, x, n, next) computes the same gate
// and up, or returns false having done nothing; the CPU engine's int8 decode, one thread-team job).
template <typename Ops>
void gated_matmuls(Ops& ops, model::FfnActivation act, const MatmulJob* gate_up, const float* x, uint32_t n,
                   int64_t n_ff, const kernels::WeightView* next) {
  if constexpr (requires { ops.gated_matmuls(act, gate_up, x, n, next); }) {
    if (ops.gated_matmuls(act, gate_up, x, n, next)) return;
  }
  ops.matmuls(gate_up, 2, x, n);
  ops.gated_act(act, gate_up[0].y, gate_up[1].y, int64_t(n) * n_ff, next);
}

// The FFN block on b.x's n rows, its output in b.h (before the post-norm).
template <typename Ops>
void ffn_rows(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
              uint32_t il, uint32_t n, PendingOutput* carry = nullptr) {
  const auto& l = w.layers[il];
  block_input(ops, s, b, l.ffn_norm, &l.ffn_gate, n, carry);
  const MatmulJob gate_up[2] = {{&l.ffn_gate, b.gate}, {&l.ffn_up, b.up}};
  gated_matmuls(ops, s.activation, gate_up, b.h, n, s.hp.n_ff, &l.ffn_down);
  ops.matmul(l.ffn_down, b.gate, n, b.h);
}

// x += the block's output h, RMS-normalised with post_norm first where the architecture has
// post-norms (one fused kernel on a GPU). Inside the block's begin/end bracket: the post-norm
// weight is one of the block's tensors (streamed with it).
template <typename Ops>
void add_block_output(Ops& ops, const model::ModelSpec& s, const float* post_norm, const ForwardBuffers& b,
                      uint32_t n) {
  if (s.post_norms) ops.norm_add(b.x, b.h, post_norm, n, s.hp.n_embd, s.hp.rms_eps);
  else ops.add(b.x, b.h, int64_t(n) * s.hp.n_embd);
}

// The block's output is added now, or left pending in `carry` where the policy fuses it with the
// next block's input norm.
inline void finish_block(PendingOutput& carry, const float* post_norm) { carry = {true, post_norm}; }

template <typename Ops>
void attention_block(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                     uint32_t il, uint32_t n, PendingOutput& carry, DraftWindow window = {}) {
  ops.begin_block(Block::attention, il);
  attention_rows(ops, s, w, b, il, n, &carry, window);
  if (ops.fuses_residual(Block::attention, il)) finish_block(carry, w.layers[il].post_attn_norm);
  else add_block_output(ops, s, w.layers[il].post_attn_norm, b, n);
  ops.end_block(Block::attention, il);
}

// A policy may compute a whole FFN block elsewhere (optional members; the CUDA engine's cpu-tier
// blocks, on the host): bool ffn_on_host(uint32_t il) says whether it does for this chunk, and
// host_ffn(il, x, n) then does x += the block's post-normed output for n rows, one copy of x each
// way instead of one round trip per matrix.
template <typename Ops>
void ffn_block(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
               uint32_t il, uint32_t n, PendingOutput& carry) {
  ops.begin_block(Block::ffn, il);
  if constexpr (requires { ops.host_ffn(il, b.x, n); }) {
    if (ops.ffn_on_host(il)) {
      if (carry.pending) add_block_output(ops, s, carry.post_norm, b, n);
      carry.pending = false;
      ops.host_ffn(il, b.x, n);
      ops.end_block(Block::ffn, il);
      return;
    }
  }
  ffn_rows(ops, s, w, b, il, n, &carry);
  if (ops.fuses_residual(Block::ffn, il)) finish_block(carry, w.layers[il].post_ffw_norm);
  else add_block_output(ops, s, w.layers[il].post_ffw_norm, b, n);
  ops.end_block(Block::ffn, il);
}

// The final norm and head for the last `rows` of b.x's n rows, in groups of at most
// ops.logit_rows() rows (see forward_chunk).
template <typename Ops>
void head_rows(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
               uint32_t n, uint32_t rows) {
  const int64_t d = s.hp.n_embd;
  ops.begin_block(Block::head, 0);
  for (uint32_t r0 = 0; r0 < rows; r0 += ops.logit_rows()) {
    const uint32_t nr = std::min(ops.logit_rows(), rows - r0);
    ops.norm(b.x + int64_t(n - rows + r0) * d, w.output_norm, nr, d, s.hp.rms_eps, b.h, &w.output);
    ops.matmul(w.output, b.h, nr, ops.logits(r0));
    ops.logits_done(r0, nr);
  }
  ops.end_block(Block::head, 0);
}

// Runs n tokens at the positions of `map` through layers [L.first, L.end) but those L.skip marks
// (from the embedding
// when L.first == 0, else from ops.load_hidden); then, when `rows` > 0, the final norm and head
// for the last `rows` tokens, in groups of at most ops.logit_rows() rows:
// group r0 is written to ops.logits(r0) and handed over by ops.logits_done(r0, rows_in_group)
// (so a device policy holds a few rows of a 262K-entry vocabulary, not a whole chunk's).
template <typename Ops>
void forward_chunk(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                   const int32_t* tokens, uint32_t n, const RowMap& map, uint32_t rows, Layers L) {
  ops.begin_chunk(tokens, n, map, L, rows > 0);
  if (L.first == 0) ops.embed(tokens, n, s.embedding_scale, b.x);
  else ops.load_hidden(b.x, n);
  PendingOutput carry;
  for (uint32_t il = L.first; il < L.end; ++il) {
    if (!L.runs(il)) continue;
    attention_block(ops, s, w, b, il, n, carry, L.window);
    ffn_block(ops, s, w, b, il, n, carry);
  }
  if (carry.pending) add_block_output(ops, s, carry.post_norm, b, n);  // the last block's
  if (L.store_hidden) ops.store_hidden(b.x, n);
  if (rows > 0) head_rows(ops, s, w, b, n, rows);
}

// The whole model, one sequence at positions [pos0, pos0 + n).
template <typename Ops>
void forward_chunk(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                   const int32_t* tokens, uint32_t n, uint32_t seq, uint32_t pos0, uint32_t rows) {
  forward_chunk(ops, s, w, b, tokens, n, RowMap{seq, pos0}, rows, Layers{0, s.hp.n_layer, false, nullptr});
}


// Layer-major prefill (FlexGen's order) of n tokens of one sequence at positions [pos0, pos0 + n),
// split into chunks of `chunk` rows (the last may be shorter): for each layer, each block is
// begun once, run for every chunk in order, and ended, so a streamed block crosses PCIe once per
// group instead of once per chunk. Chunk c's rows live in x_group (n, n_embd) at row c * chunk;
// the scratch in b (sized for one chunk) is reused by every chunk. Within a layer the chunks
// write their KV and attend in the chunk-major order, and layers keep their KV apart, so chunk
// c's attention sees exactly what it sees chunk-major: the logits are bit-identical (the same
// kernels on the same rows). head_last: the final norm and head for the last token, into
// ops.logits(0). Ops: begin_chunk is called once for the whole group, rows_from(t0) before each
// chunk's work.
template <typename Ops>
void forward_group(Ops& ops, const model::ModelSpec& s, const model::ModelWeights& w, const ForwardBuffers& b,
                   float* x_group, const int32_t* tokens, uint32_t n, uint32_t chunk, uint32_t seq, uint32_t pos0,
                   bool head_last) {
  const int64_t d = s.hp.n_embd;
  const Layers all{0, s.hp.n_layer, false, nullptr};
  ops.begin_chunk(tokens, n, RowMap{seq, pos0}, all, head_last);
  // Chunk c's view of the buffers: its own residual stream, the shared scratch.
  auto rows_of = [&](uint32_t t0) {
    ForwardBuffers bc = b;
    bc.x = x_group + int64_t(t0) * d;
    ops.rows_from(t0);
    return bc;
  };
  auto rows_in = [&](uint32_t t0) { return std::min(chunk, n - t0); };
  for (uint32_t t0 = 0; t0 < n; t0 += chunk) {
    const ForwardBuffers bc = rows_of(t0);
    ops.embed(tokens + t0, rows_in(t0), s.embedding_scale, bc.x);
  }
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    ops.begin_block(Block::attention, il);
    for (uint32_t t0 = 0; t0 < n; t0 += chunk) {
      const ForwardBuffers bc = rows_of(t0);
      attention_rows(ops, s, w, bc, il, rows_in(t0));
      add_block_output(ops, s, w.layers[il].post_attn_norm, bc, rows_in(t0));
    }
    ops.end_block(Block::attention, il);
    ops.begin_block(Block::ffn, il);
    for (uint32_t t0 = 0; t0 < n; t0 += chunk) {
      const ForwardBuffers bc = rows_of(t0);
      ffn_rows(ops, s, w, bc, il, rows_in(t0));
      add_block_output(ops, s, w.layers[il].post_ffw_norm, bc, rows_in(t0));
    }
    ops.end_block(Block::ffn, il);
  }
  if (!head_last) return;
  const uint32_t last0 = (n - 1) / chunk * chunk;
  head_rows(ops, s, w, rows_of(last0), rows_in(last0), 1);
}

}  // namespace strata::runtime
