#include "runtime/engine.h"

#include <algorithm>

#include "core/log.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "kv/kv_quant.h"
#include "kv/sequence_table.h"
#include "runtime/cpu_forward.h"
#include "runtime/cuda_forward.h"

namespace strata::runtime {

void use_plan(const offload::ExecutorPlan& e, ForwardOptions& o) {
  o.placement = e.plan.placement;
  o.ring_slots = e.ring_slots;
  o.shared_ring = e.plan.ring_shared;
  o.vram_budget = e.engine_vram_budget;
  o.pinned_budget = e.pinned_budget;
  // The plan counted a group of whole chunks of its prefill chunk (= ubatch, session/run_plan.cpp).
  o.prefill_group_tokens = e.plan.prefill_group > 1 && e.shape.prefill_chunk == o.ubatch
                               ? e.plan.prefill_group * o.ubatch
                               : 0;
}

kv::SequenceTable sequence_table(const model::ModelSpec& spec, const ForwardOptions& o) {
  std::vector<uint32_t> windows(spec.hp.n_layer);
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il) windows[il] = spec.window(il);
  return kv::SequenceTable(std::move(windows), o.n_ctx, o.ubatch, o.n_seq);
}

Result<LayerRange> check_layer_range(const model::ModelSpec& spec, std::span<const int32_t> tokens, uint32_t pos0,
                                     const LayerRange& r, const kv::SequenceTable& seqs, bool has_shadow) {
  const uint32_t n_layer = spec.hp.n_layer, ubatch = seqs.margin();
  LayerRange out = r;
  if (out.end == 0) out.end = n_layer;
  if (out.first >= out.end || out.end > n_layer)
    return Status::error("layer range [{}, {}) is empty or beyond the model's {} layers", out.first, out.end, n_layer);
  if (!out.skip.empty() && out.skip.size() != n_layer)
    return Status::error("skip mask has {} entries; the model has {} layers", out.skip.size(), n_layer);
  if (std::ranges::none_of(out.skip, [](uint8_t s) { return s != 0; })) out.skip = {};
  if (out.shadow && !has_shadow) return Status::error("a shadow layer range needs shadow weights (make_shadow)");
  if (out.window.on() && out.window.recent < kMaxExactRows)
    return Status::error("draft window: {} recent positions; at least {} (the rows of one draft pass)",
                         out.window.recent, kMaxExactRows);
  if (!out.window.on() && out.window.sinks > 0)
    return Status::error("draft window: {} sinks without recent positions", out.window.sinks);
  if (out.first > 0 && !out.hidden_in)
    return Status::error("layer range starting at layer {} needs the residual stream entering it", out.first);
  if (tokens.empty() || tokens.size() > std::min(kMaxExactRows, ubatch))
    return Status::error("eval_layers takes 1..{} tokens (got {})", std::min(kMaxExactRows, ubatch), tokens.size());
  STRATA_TRY(check_tokens(spec, tokens));
  STRATA_TRY(seqs.check_write(0, pos0, tokens.size()));
  // The call's last row has the highest position: a window that cuts none of its keys is none.
  if (!out.window.cuts(pos0 + uint32_t(tokens.size()) - 1)) out.window = {};
  return out;
}

Result<TreeShape> check_tree(const model::ModelSpec& spec, std::span<const int32_t> tokens,
                             std::span<const int32_t> parents, uint32_t pos0, const LayerRange& r,
                             const kv::SequenceTable& seqs, LayerRange& range) {
  auto shape = TreeShape::create(parents, std::min(kMaxExactRows, seqs.margin()));
  if (!shape) return shape.status();
  if (tokens.empty() || tokens.size() > parents.size())
    return Status::error("eval_tree runs 1..{} nodes of its {}-node tree (got {} tokens)", parents.size(),
                         parents.size(), tokens.size());
  if (pos0 != seqs.length(0))
    return Status::error("eval_tree: the tree must start at n_past ({}), not at position {}", seqs.length(0), pos0);
  if (std::ranges::any_of(r.skip, [](uint8_t s) { return s != 0; }))
    return Status::error("eval_tree takes no skip mask (a layer-subset draft verifies as a chain)");
  if (r.shadow) return Status::error("eval_tree takes no shadow range (a shadow draft verifies as a chain)");
  const uint32_t node0 = uint32_t(parents.size() - tokens.size());
  auto checked = check_layer_range(spec, tokens, pos0 + node0, r, seqs);
  if (!checked) return checked.status();
  range = *checked;
  return shape;
}

Status Engine::eval_tree(std::span<const int32_t>, std::span<const int32_t>, uint32_t, const LayerRange&, Logits,
                         std::vector<float>&) {
  return Status::error("token trees are not supported by the {} engine (it verifies chains only)", device_name());
}

Status Engine::make_shadow(GgmlType type) {
  return Status::error("the {} engine keeps no shadow weights (cannot draft with {} copies)", device_name(),
                       ggml_type_info(type).name);
}

Status Engine::keep_tree_path(uint32_t, std::span<const uint32_t>) {
  return Status::error("token trees are not supported by the {} engine (it verifies chains only)", device_name());
}

Status check_tokens(const model::ModelSpec& spec, std::span<const int32_t> tokens) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= spec.hp.n_vocab)
      return Status::error("token id {} at index {} is out of range (vocabulary has {} tokens)", tokens[i], i,
                           spec.hp.n_vocab);
  return {};
}

Result<std::vector<int32_t>> check_batch_rows(const model::ModelSpec& spec, std::span<const BatchRow> rows,
                                              const kv::SequenceTable& seqs, std::vector<uint32_t>& row_seqs) {
  if (rows.empty() || rows.size() > kMaxExactRows)
    return Status::error("eval_batch takes 1..{} rows (got {})", kMaxExactRows, rows.size());
  row_seqs.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const BatchRow& r = rows[i];
    if (r.seq >= seqs.n_seq())
      return Status::error("row {}: sequence {} is out of range (the engine holds {})", i, r.seq, seqs.n_seq());
    if (r.token < 0 || uint32_t(r.token) >= spec.hp.n_vocab)
      return Status::error("row {}: token id {} is out of range (vocabulary has {} tokens)", i, r.token,
                           spec.hp.n_vocab);
    row_seqs[i] = r.seq;
  }
  return seqs.place_rows(row_seqs);
}

uint64_t kv_bytes_per_seq(const model::ModelSpec& spec, uint32_t n_ctx, uint32_t ubatch, GgmlType k_type,
                          GgmlType v_type) {
  const uint64_t row = kv::kv_row_bytes(k_type, spec.kv_width()) + kv::kv_row_bytes(v_type, spec.kv_width());
  uint64_t slots = 0;
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il) {
    slots += spec.kv_slots(il, n_ctx, ubatch);
  }
  return slots * row;
}

Result<std::unique_ptr<Engine>> make_engine(std::shared_ptr<const Model> model, ForwardOptions options, Device device) {
  if (device == Device::automatic) {
    device = kernels::cuda::devices().empty() ? Device::cpu : Device::cuda;
    // A type only the CPU computes (none since M13 gave the i-quants CUDA kernels; kept for a type
    // that reaches the CPU first): the CPU engine, said once.
    if (const auto* t = device == Device::cuda ? CudaForward::unsupported_tensor(*model) : nullptr) {
      log::info("tensor {} is {}, which the CUDA engine cannot compute yet: running on the CPU", t->name,
                ggml_type_info(t->type).name);
      device = Device::cpu;
    }
  }
  if (device == Device::cuda) {
    std::string why;
    if (kernels::cuda::devices(&why).empty()) return Status::error("--device cuda: no usable GPU ({})", why);
    auto f = CudaForward::create(std::move(model), options);
    if (!f) return f.status();
    return std::unique_ptr<Engine>(std::move(f.value()));
  }
  if (options.placement.any_streamed() || options.vram_budget)
    return Status::error("a VRAM budget and weight streaming need the CUDA engine (--device cuda)");
  auto f = CpuForward::create(std::move(model), options);
  if (!f) return f.status();
  return std::unique_ptr<Engine>(std::move(f.value()));
}

}  // namespace strata::runtime
