// One sequence of a multi-sequence engine seen through the single-sequence API (eval, n_past(),
// truncate(n), eval_layers), so that the speculative decoder, which works on sequence 0, can step
// a server session on any sequence.
//
// On sequence 0 every call goes to the engine unchanged (early-exit and layer-subset drafts
// included). On another sequence the engine's eval_layers (sequence 0 only) is replaced by
// eval_batch with every row on this sequence, which computes each row exactly as eval_layers
// does: enough for verification from layer 0 at n_past() (prompt lookup drafts and plain steps);
// partial layer ranges (early exit, layer subset) are refused there, so supports() says which
// speculation a sequence can run.
//
// Not thread-safe, like the engine; the engine must outlive the view.
#pragma once

#include "runtime/engine.h"
#include "spec/spec_config.h"

namespace strata::session {

class SequenceView final : public runtime::Engine {
 public:
  SequenceView(runtime::Engine& engine, uint32_t seq) : e_(engine), seq_(seq) {}
  // Whether the speculative decoder of `mode` can run on `seq` of an engine (see above).
  static bool supports(spec::SpecMode mode, uint32_t seq) {
    return seq == 0 || mode == spec::SpecMode::lookup || mode == spec::SpecMode::none;
  }

  using Engine::eval;
  using Engine::n_past;
  using Engine::truncate;
  Status eval(uint32_t seq, std::span<const int32_t> tokens, runtime::Logits which,
              std::vector<float>& logits) override;
  Status eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const runtime::LayerRange& r,
                     runtime::Logits which, std::vector<float>& logits) override;
  // Token trees: sequence 0 only (Engine::eval_tree works on sequence 0); elsewhere chains.
  Status eval_tree(std::span<const int32_t> tokens, std::span<const int32_t> parents, uint32_t pos0,
                   const runtime::LayerRange& r, runtime::Logits which, std::vector<float>& logits) override {
    if (seq_ != 0) return Engine::eval_tree(tokens, parents, pos0, r, which, logits);
    return e_.eval_tree(tokens, parents, pos0, r, which, logits);
  }
  Status keep_tree_path(uint32_t pos0, std::span<const uint32_t> path) override {
    return seq_ != 0 ? Engine::keep_tree_path(pos0, path) : e_.keep_tree_path(pos0, path);
  }
  bool supports_trees() const override { return seq_ == 0 && e_.supports_trees(); }
  bool supports_draft_window() const override { return seq_ == 0 && e_.supports_draft_window(); }
  // Shadow weights are the engine's, shared by its sequences; drafting is sequence 0's (supports()).
  Status make_shadow(GgmlType type) override { return seq_ == 0 ? e_.make_shadow(type) : Engine::make_shadow(type); }
  std::optional<GgmlType> shadow_type() const override { return e_.shadow_type(); }
  uint64_t shadow_bytes() const override { return e_.shadow_bytes(); }
  std::vector<uint8_t> non_resident_layers() const override { return e_.non_resident_layers(); }
  uint32_t n_seq() const override { return 1; }
  uint32_t n_past(uint32_t seq) const override;
  void truncate(uint32_t seq, uint32_t n) override;
  Status eval_batch(std::span<const runtime::BatchRow> rows, std::vector<float>& logits) override;
  uint64_t kv_bytes_per_seq() const override { return e_.kv_bytes_per_seq(); }
  uint32_t n_ctx() const override { return e_.n_ctx(); }
  uint32_t ubatch() const override { return e_.ubatch(); }
  const runtime::Model& model() const override { return e_.model(); }
  std::string_view device_name() const override { return e_.device_name(); }
  uint64_t vram_peak_bytes() const override { return e_.vram_peak_bytes(); }
  uint64_t streamed_bytes() const override { return e_.streamed_bytes(); }
  uint64_t disk_bytes() const override { return e_.disk_bytes(); }
  double host_compute_seconds() const override { return e_.host_compute_seconds(); }
  uint64_t graph_captures() const override { return e_.graph_captures(); }
  int32_t last_argmax() const override { return e_.last_argmax(); }

 private:
  runtime::Engine& e_;
  const uint32_t seq_;
  std::vector<runtime::BatchRow> rows_;
};

}  // namespace strata::session
