#include "runtime/engine.h"

#include <algorithm>

#include "core/log.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "kv/kv_quant.h"
#include "runtime/cpu_forward.h"
#include "runtime/cuda_forward.h"

namespace strata::runtime {

void use_plan(const offload::ExecutorPlan& e, ForwardOptions& o) {
  o.placement = e.plan.placement;
  o.ring_slots = e.ring_slots;
  o.vram_budget = e.engine_vram_budget;
  o.pinned_budget = e.pinned_budget;
}

Result<LayerRange> check_layer_range(const model::ModelSpec& spec, std::span<const int32_t> tokens, uint32_t pos0,
                                     const LayerRange& r, uint32_t n_past, uint32_t n_ctx, uint32_t ubatch) {
  const uint32_t n_layer = spec.hp.n_layer;
  LayerRange out = r;
  if (out.end == 0) out.end = n_layer;
  if (out.first >= out.end || out.end > n_layer)
    return Status::error("layer range [{}, {}) is empty or beyond the model's {} layers", out.first, out.end, n_layer);
  if (!out.skip.empty() && out.skip.size() != n_layer)
    return Status::error("skip mask has {} entries; the model has {} layers", out.skip.size(), n_layer);
  if (std::ranges::none_of(out.skip, [](uint8_t s) { return s != 0; })) out.skip = {};
  if (out.first > 0 && !out.hidden_in)
    return Status::error("layer range starting at layer {} needs the residual stream entering it", out.first);
  if (tokens.empty() || tokens.size() > std::min(kMaxExactRows, ubatch))
    return Status::error("eval_layers takes 1..{} tokens (got {})", std::min(kMaxExactRows, ubatch), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= spec.hp.n_vocab)
      return Status::error("token id {} at index {} is out of range (vocabulary has {} tokens)", tokens[i], i,
                           spec.hp.n_vocab);
  const uint64_t end_pos = uint64_t(pos0) + tokens.size();
  if (end_pos > n_ctx)
    return Status::error("context full: positions up to {} would exceed the context of {}", end_pos, n_ctx);
  // A sliding layer's ring holds window + ubatch slots: writing further ahead of n_past would
  // overwrite keys that queries at n_past still read.
  if (end_pos > uint64_t(n_past) + ubatch)
    return Status::error("positions up to {} are more than ubatch ({}) past the {} evaluated", end_pos, ubatch, n_past);
  return out;
}

Result<std::vector<int32_t>> check_batch_rows(const model::ModelSpec& spec, std::span<const BatchRow> rows,
                                              std::span<const uint32_t> n_past, uint32_t n_ctx, uint32_t ubatch) {
  if (rows.empty() || rows.size() > kMaxExactRows)
    return Status::error("eval_batch takes 1..{} rows (got {})", kMaxExactRows, rows.size());
  std::vector<uint32_t> count(n_past.size(), 0);
  std::vector<int32_t> pos(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const BatchRow& r = rows[i];
    if (r.seq >= n_past.size())
      return Status::error("row {}: sequence {} is out of range (the engine holds {})", i, r.seq, n_past.size());
    if (r.token < 0 || uint32_t(r.token) >= spec.hp.n_vocab)
      return Status::error("row {}: token id {} is out of range (vocabulary has {} tokens)", i, r.token,
                           spec.hp.n_vocab);
    const uint64_t p = uint64_t(n_past[r.seq]) + count[r.seq];
    if (p >= n_ctx)
      return Status::error("row {}: context of sequence {} full ({} tokens, context {})", i, r.seq, p, n_ctx);
    // Like eval_layers: a sliding layer's ring holds window + ubatch slots.
    if (++count[r.seq] > ubatch)
      return Status::error("row {}: more than ubatch ({}) rows of sequence {} in one step", i, ubatch, r.seq);
    pos[i] = int32_t(p);
  }
  return pos;
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
    // A type only the CPU computes (the i-quants, for now): the CPU engine, said once.
    for (const auto& t : model->file.tensors())
      if (device == Device::cuda && t.ne.size() >= 2 && !kernels::cuda::supports_weight_type(t.type)) {
        log::info("tensor {} is {}, which the CUDA engine cannot compute yet: running on the CPU", t.name,
                  ggml_type_info(t.type).name);
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
