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
#include "runtime/cpu_ops.h"
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
  if (opt_.cpu_int8) {
    const int64_t width = std::max<int64_t>(s.q_width(), s.hp.n_ff);
    if (width % cpu::kQ8Group == 0) q8_act_.resize(cpu::q8_act_bytes(width, std::min<size_t>(n, kMaxExactRows)) + 64);
  }
  // A layer-major group's positions and residual stream (prefill_group_tokens rows).
  const size_t group = prefill_group(opt_, SIZE_MAX, Logits::last);
  pos_.resize(std::max(n, group));
  x_group_.resize(group * s.hp.n_embd);
  row_seqs_.reserve(kMaxExactRows);
}

Status CpuForward::eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
  const auto& hp = model_->spec.hp;
  last_argmax_ = -1;
  STRATA_TRY(seqs_.check_seq(seq));
  tree_.reset();
  if (tokens.empty()) return Status::error("nothing to evaluate (empty token list)");
  STRATA_TRY(check_tokens(model_->spec, tokens));
  STRATA_TRY(seqs_.check_append(seq, tokens.size()));
  const uint32_t pos0 = n_past(seq);
  logits.resize(which == Logits::all ? tokens.size() * hp.n_vocab : which == Logits::last ? hp.n_vocab : 0);
  const uint32_t group = prefill_group(opt_, tokens.size(), which);
  kernels::cpu::MaxAt head_max;
  bool head_max_done = false;
  for (size_t done = 0; done < tokens.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(group ? group : opt_.ubatch, tokens.size() - done));
    const bool last_chunk = done + n == tokens.size();
    const uint32_t p = pos0 + uint32_t(done);
    TraceScope step(opt_.trace.get(), "host", n == 1 ? "decode step" : fmt::format("prefill {} tokens", n));
    if (group) {
      head_max_done = run_group(tokens.data() + done, n, seq, p, last_chunk && which == Logits::last, logits.data(),
                                &head_max);
    } else {
      float* out = which == Logits::all ? logits.data() + done * hp.n_vocab : logits.data();
      head_max_done = run_chunk(tokens.data() + done, n, RowMap{seq, p},
                                which == Logits::all ? Logits::all : (last_chunk ? which : Logits::none), out, nullptr,
                                false, nullptr, which == Logits::last ? &head_max : nullptr);
    }
    done += n;
  }
  seqs_.append(seq, uint32_t(tokens.size()));
  // The head ran on the last chunk only; its maximum is runtime::argmax's answer (0 where none).
  if (which == Logits::last && head_max_done) last_argmax_ = head_max.index < 0 ? 0 : int32_t(head_max.index);
  return {};
}

Status CpuForward::eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                               std::vector<float>& logits) {
  auto range = check_layer_range(model_->spec, tokens, pos0, r, seqs_, shadow_.has_value());
  last_argmax_ = -1;
  if (!range) return range.status();
  tree_.reset();
  const uint32_t n = uint32_t(tokens.size()), n_vocab = model_->spec.hp.n_vocab;
  logits.resize(which == Logits::all ? n * n_vocab : which == Logits::last ? n_vocab : 0);
  run_chunk(tokens.data(), n, RowMap{0, pos0}, which, logits.data(), &*range, true);
  seqs_.wrote(0, pos0, n, completes_positions(*range, model_->spec.hp.n_layer));
  return {};
}

Status CpuForward::make_shadow(GgmlType type) {
  if (shadow_ && shadow_->type == type) return {};
  auto made = make_shadow_weights(model_->weights, model_->spec, type);
  if (!made) return made.status();
  shadow_ = std::move(*made);
  return {};
}

Status CpuForward::eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) {
  last_argmax_ = -1;
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
  last_argmax_ = -1;
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

bool CpuForward::run_chunk(const int32_t* tokens, uint32_t n, const RowMap& map, Logits which, float* logits,
                           const LayerRange* range, bool exact, const TreeRows* tree, cpu::MaxAt* head_max) {
  const model::ModelWeights& w = range && range->shadow ? shadow_->weights : model_->weights;
  CpuOps ops{w, kv_, pos_, logits, int64_t(model_->spec.hp.n_vocab), range, exact, {}};
  ops.tree = tree;
  ops.head_max = head_max;
  ops.trace = opt_.trace.get();
  ops.observer = observer_;
  ops.int8 = opt_.cpu_int8;
  ops.use_q8_room(q8_act_);
  const ForwardBuffers b{x_.data(), h_.data(), q_.data(), k_.data(), v_.data(), att_.data(), gate_.data(), up_.data()};
  const uint32_t rows = which == Logits::none ? 0 : which == Logits::last ? 1 : n;
  const Layers layers = range ? Layers{range->first, range->end, range->hidden_out != nullptr,
                                       range->skip.empty() ? nullptr : range->skip.data(), range->window}
                              : Layers{0, model_->spec.hp.n_layer, false, nullptr};
  forward_chunk(ops, model_->spec, w, b, tokens, n, map, rows, layers);
  return ops.head_max_done;
}

bool CpuForward::run_group(const int32_t* tokens, uint32_t n, uint32_t seq, uint32_t pos0, bool head_last,
                           float* logits, cpu::MaxAt* head_max) {
  CpuOps ops{model_->weights, kv_, pos_, logits, int64_t(model_->spec.hp.n_vocab), nullptr, false, {}};
  ops.trace = opt_.trace.get();
  ops.observer = observer_;
  ops.int8 = opt_.cpu_int8;
  ops.head_max = head_max;
  ops.use_q8_room(q8_act_);
  const ForwardBuffers b{x_.data(), h_.data(), q_.data(), k_.data(), v_.data(), att_.data(), gate_.data(), up_.data()};
  forward_group(ops, model_->spec, model_->weights, b, x_group_.data(), tokens, n, opt_.ubatch, seq, pos0, head_last);
  return ops.head_max_done;
}

}  // namespace strata::runtime
