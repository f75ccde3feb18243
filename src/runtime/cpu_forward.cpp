#include "runtime/cpu_forward.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tiled.h"
#include "kernels/cpu/attention_tree.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_kernels.h"
#include "runtime/forward_pass.h"

namespace strata::runtime {

namespace cpu = kernels::cpu;

Result<std::unique_ptr<CpuForward>> CpuForward::create(std::shared_ptr<const Model> model, ForwardOptions opt) {
  const auto& spec = model->spec;
  if (opt.n_ctx == 0) return Status::error("context length must be positive");
  if (opt.n_ctx > spec.hp.n_ctx_train && spec.hp.n_ctx_train > 0)
    return Status::error("context {} is longer than the model allows ({} tokens)", opt.n_ctx, spec.hp.n_ctx_train);
  if (opt.ubatch == 0) return Status::error("ubatch must be positive");
  std::vector<kv::LayerShape> shapes;
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il) shapes.push_back({spec.kv_width(), spec.window(il), spec.hp.n_embd_head});
  if (opt.n_seq == 0) return Status::error("the number of sequences must be positive");
  std::vector<kv::KvCache> caches;
  for (uint32_t i = 0; i < opt.n_seq; ++i) {
    auto kv = kv::KvCache::create(shapes, opt.n_ctx, opt.ubatch, opt.k_type, opt.v_type);
    if (!kv) return opt.n_seq > 1 ? Status::error("sequence {} of {}: {}", i, opt.n_seq, kv.message()) : kv.status();
    caches.push_back(std::move(kv.value()));
  }
  return std::unique_ptr<CpuForward>(new CpuForward(std::move(model), opt, std::move(caches)));
}

CpuForward::CpuForward(std::shared_ptr<const Model> model, ForwardOptions options, std::vector<kv::KvCache> kv)
    : model_(std::move(model)), opt_(options), seqs_(sequence_table(model_->spec, options)), kv_(std::move(kv)) {
  const auto& s = model_->spec;
  for (uint32_t il = 0; il < s.hp.n_layer; ++il)
    STRATA_CHECK(kv_.front().capacity(il) == seqs_.slots(il), "layer {}: {} KV slots stored, {} in the table", il,
                 kv_.front().capacity(il), seqs_.slots(il));
  const size_t n = max_chunk_rows(opt_);
  x_.resize(n * s.hp.n_embd);
  h_.resize(n * s.hp.n_embd);
  q_.resize(n * s.q_width());
  k_.resize(n * s.kv_width());
  v_.resize(n * s.kv_width());
  att_.resize(n * s.q_width());
  gate_.resize(n * s.hp.n_ff);
  up_.resize(n * s.hp.n_ff);
  // A layer-major group's positions and residual stream (prefill_group_tokens rows).
  const size_t group = prefill_group(opt_, SIZE_MAX, Logits::last);
  pos_.resize(std::max(n, group));
  x_group_.resize(group * s.hp.n_embd);
  row_seqs_.reserve(kMaxExactRows);
}

Status CpuForward::eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
  const auto& hp = model_->spec.hp;
  STRATA_TRY(seqs_.check_seq(seq));
  tree_.reset();
  if (tokens.empty()) return Status::error("nothing to evaluate (empty token list)");
  STRATA_TRY(check_tokens(model_->spec, tokens));
  STRATA_TRY(seqs_.check_append(seq, tokens.size()));
  const uint32_t pos0 = n_past(seq);
  logits.resize(which == Logits::all ? tokens.size() * hp.n_vocab : which == Logits::last ? hp.n_vocab : 0);
  const uint32_t group = prefill_group(opt_, tokens.size(), which);
  for (size_t done = 0; done < tokens.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(group ? group : opt_.ubatch, tokens.size() - done));
    const bool last_chunk = done + n == tokens.size();
    const uint32_t p = pos0 + uint32_t(done);
    TraceScope step(opt_.trace.get(), "host", n == 1 ? "decode step" : fmt::format("prefill {} tokens", n));
    if (group) {
      run_group(tokens.data() + done, n, seq, p, last_chunk && which == Logits::last, logits.data());
    } else {
      float* out = which == Logits::all ? logits.data() + done * hp.n_vocab : logits.data();
      run_chunk(tokens.data() + done, n, RowMap{seq, p}, which == Logits::all ? Logits::all : (last_chunk ? which : Logits::none),
                out, nullptr, false);
    }
    done += n;
  }
  seqs_.append(seq, uint32_t(tokens.size()));
  return {};
}

Status CpuForward::eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                               std::vector<float>& logits) {
  auto range = check_layer_range(model_->spec, tokens, pos0, r, seqs_);
  if (!range) return range.status();
  tree_.reset();
  const uint32_t n = uint32_t(tokens.size()), n_vocab = model_->spec.hp.n_vocab;
  logits.resize(which == Logits::all ? n * n_vocab : which == Logits::last ? n_vocab : 0);
  run_chunk(tokens.data(), n, RowMap{0, pos0}, which, logits.data(), &*range, true);
  seqs_.wrote(0, pos0, n, range->end == model_->spec.hp.n_layer && range->skip.empty());
  return {};
}

Status CpuForward::eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) {
  auto pos = check_batch_rows(model_->spec, rows, seqs_, row_seqs_);
  if (!pos) return pos.status();
  tree_.reset();
  const uint32_t n = uint32_t(rows.size());
  std::vector<int32_t> tokens(n);
  for (uint32_t t = 0; t < n; ++t) tokens[t] = rows[t].token;
  logits.resize(size_t(n) * model_->spec.hp.n_vocab);
  TraceScope step(opt_.trace.get(), "host", fmt::format("decode step x{}", n));
  run_chunk(tokens.data(), n, RowMap{0, 0, row_seqs_.data(), pos->data()}, Logits::all, logits.data(), nullptr, true);
  seqs_.placed(row_seqs_, *pos);
  return {};
}

Status CpuForward::eval_tree(std::span<const int32_t> tokens, std::span<const int32_t> parents, uint32_t pos0,
                             const LayerRange& r, Logits which, std::vector<float>& logits) {
  LayerRange range;
  auto shape = check_tree(model_->spec, tokens, parents, pos0, r, seqs_, range);
  if (!shape) return shape.status();
  const uint32_t n = uint32_t(tokens.size()), node0 = uint32_t(parents.size()) - n;
  const uint32_t n_vocab = model_->spec.hp.n_vocab;
  logits.resize(which == Logits::all ? n * n_vocab : which == Logits::last ? n_vocab : 0);
  tree_ = std::move(*shape);
  tree_pos0_ = pos0;
  const TreeRows rows{&*tree_, pos0, node0};
  run_chunk(tokens.data(), n, RowMap{0, pos0 + node0}, which, logits.data(), &range, true, &rows);
  seqs_.wrote(0, pos0 + node0, n, false);  // n_past stays: keep_tree_path commits
  return {};
}

Status CpuForward::keep_tree_path(uint32_t pos0, std::span<const uint32_t> path) {
  if (!tree_ || tree_pos0_ != pos0 || n_past(0) != pos0)
    return Status::error("keep_tree_path: no token tree was evaluated at position {} (n_past is {})", pos0, n_past(0));
  STRATA_TRY(tree_->check_path(path));
  // Ascending j: the slot written (pos0 + j) is never a later entry's source (path[j'] > path[j] >= j).
  for (uint32_t il = 0; il < model_->spec.hp.n_layer; ++il)
    for (size_t j = 0; j < path.size(); ++j) kv_[0].move_row(il, pos0 + path[j], pos0 + uint32_t(j));
  seqs_.wrote(0, pos0, uint32_t(path.size()), true);
  tree_.reset();
  return {};
}

namespace {

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
    for (int64_t v = 0; v < n_vec; ++v) cpu::rms_norm(x + v * dim, weight, dim, eps, out + v * dim);
  }
  void matmuls(const MatmulJob* jobs, int count, const float* x, uint32_t n) {
    for (int j = 0; j < count; ++j) matmul(*jobs[j].w, x, n, jobs[j].y);
  }
  void matmul(const kernels::WeightView& m, const float* x, uint32_t n, float* y) {
    if (observer) observer->on_matmul(m, x, n);
    // int8 activations for decode-sized calls; the chunk decides (n), so a row's arithmetic
    // never depends on how many rows share the call.
    if (int8 && n <= kMaxExactRows && cpu::has_dot_q8(m.type)) return cpu::matmul_q8(m, x, n, y);
    if (exact) cpu::matmul_dot(m, x, n, y);  // per-row identical to n = 1
    else cpu::matmul(m, x, n, y);
  }
  void qk_norm_rope(float* q, float* k, uint32_t n, const QkRope& r) {
    if (r.q_norm) norm(q, r.q_norm, int64_t(n) * r.n_head, r.head_dim, r.eps, q);
    if (r.k_norm) norm(k, r.k_norm, int64_t(n) * r.n_head_kv, r.head_dim, r.eps, k);
    for (uint32_t t = 0; t < n; ++t) {
      // A tree node's position is its depth past pos0; its slot (rows_pos) is its index.
      const int32_t at = tree ? int32_t(tree->pos0 + tree->shape->depth(tree->node0 + t)) : rows_pos()[t];
      const float p = float(at) / r.linear_scale;
      cpu::rope_heads(q + int64_t(t) * r.n_head * r.head_dim, r.n_head, r.head_dim, p, r.base, r.freq_div, r.neox);
      cpu::rope_heads(k + int64_t(t) * r.n_head_kv * r.head_dim, r.n_head_kv, r.head_dim, p, r.base, r.freq_div, r.neox);
    }
  }
  void rope_kv_write(uint32_t il, float* q, float* k, const float* v, uint32_t n, const QkRope& r) {
    qk_norm_rope(q, k, n, r);
    kv_write(il, k, v, n);
  }
  void kv_write(uint32_t il, const float* k, const float* v, uint32_t n) {
    const int64_t width = int64_t(w.layers[il].wk.n_out);
    for (uint32_t t = 0; t < n; ++t) kv[map.seq_of(t)].write(il, uint32_t(rows_pos()[t]), k + t * width, v + t * width);
  }
  void attention(uint32_t il, const float* q, uint32_t n, const cpu::AttentionShape& s, float* out,
                 const kernels::WeightView* /*next*/ = nullptr) {
    if (tree) return tree_attention(il, q, n, s, out);
    if (!map.batched()) {
      // Prefill chunks by tiles (SGEMM, another summation order); exact passes and short chunks
      // query by query, so that a row equals its one-token eval.
      if (!exact && n >= cpu::kTiledAttentionMinQueries)
        return cpu::attention_tiled(q, rows_pos(), n, kv[map.seq].view(il), s, out);
      return cpu::attention(q, rows_pos(), n, kv[map.seq].view(il), s, out);
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

}  // namespace

void CpuForward::run_chunk(const int32_t* tokens, uint32_t n, const RowMap& map, Logits which, float* logits,
                           const LayerRange* range, bool exact, const TreeRows* tree) {
  CpuOps ops{model_->weights, kv_, pos_, logits, int64_t(model_->spec.hp.n_vocab), range, exact, {}};
  ops.tree = tree;
  ops.trace = opt_.trace.get();
  ops.observer = observer_;
  ops.int8 = opt_.cpu_int8;
  const ForwardBuffers b{x_.data(), h_.data(), q_.data(), k_.data(), v_.data(), att_.data(), gate_.data(), up_.data()};
  const uint32_t rows = which == Logits::none ? 0 : which == Logits::last ? 1 : n;
  const Layers layers = range ? Layers{range->first, range->end, range->hidden_out != nullptr,
                                       range->skip.empty() ? nullptr : range->skip.data()}
                              : Layers{0, model_->spec.hp.n_layer, false, nullptr};
  forward_chunk(ops, model_->spec, model_->weights, b, tokens, n, map, rows, layers);
}

void CpuForward::run_group(const int32_t* tokens, uint32_t n, uint32_t seq, uint32_t pos0, bool head_last,
                           float* logits) {
  CpuOps ops{model_->weights, kv_, pos_, logits, int64_t(model_->spec.hp.n_vocab), nullptr, false, {}};
  ops.trace = opt_.trace.get();
  ops.observer = observer_;
  ops.int8 = opt_.cpu_int8;
  const ForwardBuffers b{x_.data(), h_.data(), q_.data(), k_.data(), v_.data(), att_.data(), gate_.data(), up_.data()};
  forward_group(ops, model_->spec, model_->weights, b, x_group_.data(), tokens, n, opt_.ubatch, seq, pos0, head_last);
}

}  // namespace strata::runtime
