// The CPU kernels as forward_pass.h's Ops policy (host buffers, a KvCache per sequence): the CPU
// engine (cpu_forward.cpp) runs every block through it, and the CUDA engine's host half
// (host_compute.cpp) runs its cpu-tier FFN blocks through it, so a block computed on the CPU is
// the same code whichever engine asks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/trace.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tiled.h"
#include "kernels/cpu/attention_tree.h"
#include "kernels/cpu/gated_ffn_q8.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_kernels.h"
#include "kv/kv_cache.h"
#include "runtime/cpu_forward.h"
#include "runtime/forward_pass.h"
#include "runtime/rope_angle_cache.h"
#include "runtime/token_tree.h"

namespace strata::runtime {

namespace cpu = kernels::cpu;

// The CPU kernels as forward_pass.h's Ops policy: host buffers, a KvCache per sequence.
struct CpuOps {
  const model::ModelWeights& w;
  std::vector<kv::KvCache>& kv;
  std::vector<int32_t>& pos;  // the chunk's (a layer-major group's) positions, per row
  float* out = nullptr;  // logits (rows, n_vocab)
  int64_t n_vocab = 0;
  const LayerRange* range = nullptr;  // eval_layers: hidden in/out
  bool exact = false;                 // every matmul by the dot kernels (eval_layers, eval_batch)
  RowMap map;
  MatmulObserver* observer = nullptr;  // strata imatrix: sees every matmul input
  bool int8 = false;                   // ForwardOptions::cpu_int8
  uint32_t row0 = 0;                   // a group's rows from row0 on are the current chunk (rows_from)
  const TreeRows* tree = nullptr;      // eval_tree: RoPE at each node's depth, attention by its mask
  // Where set, a head of one row (the matmul of w.output) also takes the maximum of its logits in
  // its team parts (matmul_q8_max / matmul_dot_max: the same logits) and stores it here, and
  // head_max_done becomes true: the greedy argmax without a serial pass over the vocabulary.
  cpu::MaxAt* head_max = nullptr;
  bool head_max_done = false;

  // Int8 activations quantised by the op that produced them, inside its thread-team job (attention,
  // gated_matmuls), for the matmul that reads them next: no serial quantisation pass (and, for the
  // FFN, no activation job) between two team jobs. q8_room: null (no such fusion) or 64-byte
  // aligned room for q8_room_bytes. q8_src: the f32 activations q8_view holds, until the next
  // matmul (which uses it where it reads q8_src) or matmuls.
  void* q8_room = nullptr;
  size_t q8_room_bytes = 0;
  const float* q8_src = nullptr;
  cpu::Q8ActView q8_view = {};
  // q8_room in `room` (its first 64-byte boundary on; sized 64 bytes more than the codes), if any.
  void use_q8_room(std::vector<uint8_t>& room) {
    if (room.size() <= 64) return;
    const auto base = reinterpret_cast<uintptr_t>(room.data());
    q8_room = reinterpret_cast<void*>((base + 63) / 64 * 64);
    q8_room_bytes = room.size() - 64;
  }
  void* q8_out(int64_t n_in, uint32_t n) const {
    return cpu::q8_act_bytes(n_in, n) <= q8_room_bytes ? q8_room : nullptr;
  }

  uint32_t logit_rows() const { return UINT32_MAX; }  // the caller's buffer holds them all
  float* logits(uint32_t r0) { return out + r0 * n_vocab; }
  void logits_done(uint32_t, uint32_t) {}

  Trace* trace = nullptr;
  double block_start_us = 0;

  // Every weight is in host memory: the hooks only time blocks for a trace.
  void begin_block(Block, uint32_t) {
    if (trace) block_start_us = trace->now_us();
  }
  void end_block(Block b, uint32_t il) {
    if (trace) trace->span_until_now("cpu compute", block_label(b, il), block_start_us);
  }
  void begin_chunk(const int32_t*, uint32_t n, const RowMap& m, Layers, bool) {
    map = m;
    row0 = 0;
    for (uint32_t t = 0; t < n; ++t) pos[t] = m.pos_of(t);
  }
  void rows_from(uint32_t t0) { row0 = t0; }
  const int32_t* rows_pos() const { return pos.data() + row0; }
  void embed(const int32_t* tokens, uint32_t n, float scale, float* x) {
    const int64_t d = w.token_embd.n_in;
    const auto* k = cpu::quant_kernels(w.token_embd.type);
    for (uint32_t t = 0; t < n; ++t) {
      k->dequantize(w.token_embd.row(tokens[t]), x + t * d, d);
      if (scale != 1.0f) cpu::scale(x + t * d, scale, d);
    }
  }
  void load_hidden(float* x, uint32_t n) { std::copy_n(range->hidden_in, size_t(n) * w.token_embd.n_in, x); }
  void store_hidden(const float* x, uint32_t n) { std::copy_n(x, size_t(n) * w.token_embd.n_in, range->hidden_out); }
  void norm(const float* x, const float* weight, int64_t n_vec, int64_t dim, float eps, float* out,
            const kernels::WeightView* /*next: the GPU rounds for it*/ = nullptr) {
    cpu::rms_norm_vecs(x, weight, n_vec, dim, eps, out);
  }
  void matmuls(const MatmulJob* jobs, int count, const float* x, uint32_t n) {
    q8_src = nullptr;
    // int8 decode rows: one quantisation of x and one thread-team job for the whole group (the same
    // bits as one matmul each, see matmul_q8_group), where every matrix has an int8 kernel.
    bool group = count >= 2 && count <= cpu::kMaxQ8Group;
    for (int j = 0; group && j < count; ++j) group = int8_rows(*jobs[j].w, n) && jobs[j].w->n_in == jobs[0].w->n_in;
    if (!group) {
      for (int j = 0; j < count; ++j) matmul(*jobs[j].w, x, n, jobs[j].y);
      return;
    }
    const kernels::WeightView* ws[cpu::kMaxQ8Group];
    float* ys[cpu::kMaxQ8Group];
    for (int j = 0; j < count; ++j) {
      if (observer) observer->on_matmul(*jobs[j].w, x, n);
      ws[j] = jobs[j].w, ys[j] = jobs[j].y;
    }
    cpu::matmul_q8_group(ws, ys, count, x, n);
  }
  // int8 activations for decode-sized calls; the chunk decides (n), so a row's arithmetic never
  // depends on how many rows share the call.
  bool int8_rows(const kernels::WeightView& m, uint32_t n) const {
    return int8 && n <= kMaxExactRows && cpu::has_dot_q8(m.type);
  }
  void matmul(const kernels::WeightView& m, const float* x, uint32_t n, float* y) {
    if (observer) observer->on_matmul(m, x, n);
    const bool ready = x == q8_src && q8_view.n == m.n_in && q8_view.n_col == int(n);
    q8_src = nullptr;
    if (head_max && n == 1 && &m == &w.output && !ready) {
      // One row: matmul() would take matmul_dot, exact or not.
      *head_max = int8_rows(m, n) ? cpu::matmul_q8_max(m, x, y) : cpu::matmul_dot_max(m, x, y);
      head_max_done = true;
      return;
    }
    if (int8_rows(m, n)) return ready ? cpu::matmul_q8(m, q8_view, y) : cpu::matmul_q8(m, x, n, y);
    if (exact) cpu::matmul_dot(m, x, n, y);  // per-row identical to n = 1
    else cpu::matmul(m, x, n, y);
  }
  void qk_norm_rope(float* q, float* k, uint32_t n, const QkRope& r) {
    // Every Q and K head of the rows in one call: their norms' chains side by side (rms_norm_set),
    // each head's bits those of norm() on it.
    norm_vecs.clear();
    norm_vecs.reserve(size_t(n) * size_t(r.n_head + r.n_head_kv));
    const int64_t hd = r.head_dim, nq = int64_t(n) * r.n_head, nk = int64_t(n) * r.n_head_kv;
    if (r.q_norm)
      for (int64_t h = 0; h < nq; ++h) norm_vecs.push_back({q + h * hd, r.q_norm, q + h * hd});
    if (r.k_norm)
      for (int64_t h = 0; h < nk; ++h) norm_vecs.push_back({k + h * hd, r.k_norm, k + h * hd});
    cpu::rms_norm_set(norm_vecs.data(), int64_t(norm_vecs.size()), hd, r.eps);
    for (uint32_t t = 0; t < n; ++t) {
      // A tree node's position is its depth past pos0; its slot (rows_pos) is its index.
      const int32_t at = tree ? int32_t(tree->pos0 + tree->shape->depth(tree->node0 + t)) : rows_pos()[t];
      const float p = float(at) / r.linear_scale;
      const float* cs = rope_cache.angles(r.head_dim, p, r.base, r.freq_div);
      cpu::rope_apply(q + int64_t(t) * r.n_head * r.head_dim, r.n_head, r.head_dim, cs, r.neox);
      cpu::rope_apply(k + int64_t(t) * r.n_head_kv * r.head_dim, r.n_head_kv, r.head_dim, cs, r.neox);
    }
  }
  std::vector<cpu::NormVec> norm_vecs = {};  // qk_norm_rope's heads
  RopeAngleCache rope_cache = {};  // a decode step's tables: one per RoPE base, not two per layer

  void rope_kv_write(uint32_t il, float* q, float* k, const float* v, uint32_t n, const QkRope& r) {
    qk_norm_rope(q, k, n, r);
    kv_write(il, k, v, n);
  }
  void kv_write(uint32_t il, const float* k, const float* v, uint32_t n) {
    const int64_t width = int64_t(w.layers[il].wk.n_out);
    for (uint32_t t = 0; t < n; ++t) kv[map.seq_of(t)].write(il, uint32_t(rows_pos()[t]), k + t * width, v + t * width);
  }
  void attention(uint32_t il, const float* q, uint32_t n, const cpu::AttentionShape& s, float* out,
                 const kernels::WeightView* next = nullptr) {
    if (tree) return tree_attention(il, q, n, s, out);
    if (!map.batched()) {
      // Prefill chunks by tiles (SGEMM, another summation order); exact passes and short chunks
      // query by query, so that a row equals its one-token eval.
      if (!exact && n >= cpu::kTiledAttentionMinQueries)
        return cpu::attention_tiled(q, rows_pos(), n, kv[map.seq].view(il), s, out);
      // The output projection's int8 input, head by head in the attention job (heads of whole groups).
      const int64_t width = s.n_head * s.head_dim;
      void* out_q8 = next && int8_rows(*next, n) && next->n_in == width && s.head_dim % cpu::kQ8Group == 0
                         ? q8_out(width, n) : nullptr;
      cpu::attention(q, rows_pos(), n, kv[map.seq].view(il), s, out, out_q8);
      if (out_q8) q8_src = out, q8_view = cpu::q8_act_layout(width, n, out_q8);
      return;
    }
    // Each query over its own sequence's cache (the kernel computes every query independently, so
    // a row equals its one-token eval). Runs of rows of one sequence go in one call.
    const int64_t row = s.n_head * s.head_dim;
    for (uint32_t t0 = 0; t0 < n;) {
      uint32_t t1 = t0 + 1;
      while (t1 < n && map.seq_of(t1) == map.seq_of(t0)) ++t1;
      cpu::attention(q + t0 * row, pos.data() + t0, t1 - t0, kv[map.seq_of(t0)].view(il), s, out + t0 * row);
      t0 = t1;
    }
  }
  // Row t is node i = node0 + t: its query is at slot pos0 + i (so the kernel's causal range covers
  // every ancestor's slot), the mask keeps the committed keys and its visible ancestors. Through a
  // window W the committed keys must start where a query at its position (pos0 + depth) starts:
  // window W + (i - depth) from its slot does that. Rows with one offset share a call; the
  // kernel computes every query alone, so each row equals its one-token eval bit for bit.
  void tree_attention(uint32_t il, const float* q, uint32_t n, const cpu::AttentionShape& s, float* out) {
    const TreeShape& shape = *tree->shape;
    const int64_t row = s.n_head * s.head_dim;
    auto offset = [&](uint32_t t) { return tree->node0 + t - shape.depth(tree->node0 + t); };
    bits.resize(n);
    for (uint32_t t = 0; t < n; ++t) bits[t] = shape.visible(tree->node0 + t, uint32_t(s.window));
    for (uint32_t t0 = 0; t0 < n;) {
      uint32_t t1 = t0 + 1;
      const uint32_t o = offset(t0);
      while (s.window > 0 && t1 < n && offset(t1) == o) ++t1;
      if (s.window == 0) t1 = n;
      cpu::AttentionShape sw = s;
      if (s.window > 0) sw.window = s.window + o;
      cpu::attention_tree(q + t0 * row, rows_pos() + t0, t1 - t0, kv[map.seq].view(il), sw,
                          cpu::TreeMask{bits.data() + t0, int32_t(tree->pos0)}, out + t0 * row);
      t0 = t1;
    }
  }
  std::vector<uint64_t> bits = {};  // tree_attention: per row, for one layer's window

  // matmuls(gate_up) then gated_act in one team job (gated_ffn_q8.h), the down projection's int8
  // input quantised in it, where all three matrices take int8 activations; else false, nothing done.
  bool gated_matmuls(model::FfnActivation act, const MatmulJob* gate_up, const float* x, uint32_t n,
                     const kernels::WeightView* next) {
    const kernels::WeightView &g = *gate_up[0].w, &u = *gate_up[1].w;
    const int64_t n_ff = g.n_out;
    void* out_q8 = next && int8_rows(g, n) && int8_rows(u, n) && int8_rows(*next, n) && u.n_out == n_ff &&
                           u.n_in == g.n_in && next->n_in == n_ff && n_ff % cpu::kQ8Group == 0
                       ? q8_out(n_ff, n) : nullptr;
    if (!out_q8) return false;
    if (observer) observer->on_matmul(g, x, n), observer->on_matmul(u, x, n);
    const cpu::GatedActFn fn = act == model::FfnActivation::gelu_tanh ? cpu::gelu_tanh_mul_range : cpu::silu_mul_range;
    q8_view = cpu::gated_ffn_q8(g, u, fn, x, n, gate_up[0].y, gate_up[1].y, out_q8);
    q8_src = gate_up[0].y;
    return true;
  }
  void gated_act(model::FfnActivation act, float* gate, const float* up, int64_t count,
                 const kernels::WeightView* /*next*/ = nullptr) {
    if (act == model::FfnActivation::gelu_tanh) cpu::gelu_tanh_mul(gate, up, count);
    else cpu::silu_mul(gate, up, count);
  }
  void add(float* x, const float* y, int64_t count) { cpu::add(x, y, count); }
  void norm_add(float* x, float* h, const float* weight, int64_t n_vec, int64_t dim, float eps) {
    norm(h, weight, n_vec, dim, eps, h);
    add(x, h, n_vec * dim);
  }
  // Blocks add their outputs at once: nothing to fuse on the CPU.
  bool fuses_residual(Block, uint32_t) const { return false; }
  void add_norm(float* x, float* h, const float* post_w, const float* weight, int64_t n_vec, int64_t dim, float eps,
                float* out, const kernels::WeightView* next) {
    if (post_w) norm_add(x, h, post_w, n_vec, dim, eps);
    else add(x, h, n_vec * dim);
    norm(x, weight, n_vec, dim, eps, out, next);
  }
};


}  // namespace strata::runtime
