// Layer-subset drafting (SWIFT-style self-speculation, no training): the model itself with some
// middle layers skipped (the residual stream passes them unchanged), then its final norm and head,
// drafts greedily one token at a time. Each step writes the KV of the layers it runs at the
// drafted position (ahead of n_past); the skipped layers have none there and the run layers saw
// a different stream, so verification recomputes every layer from layer 0 (verify_from = 0) and
// overwrites it all. Which layers to skip is chosen online (subset_chooser.h).
#pragma once

#include "runtime/engine.h"
#include "spec/draft_window_config.h"
#include "spec/drafter.h"

namespace strata::spec {

class LayerSubset final : public Drafter {
 public:
  // min_confidence: as EarlyExit's (drafting stops before a token its head gives less probability).
  // window: when rounds attend through a window (draft_window_config.h; verification starts at
  // layer 0 either way).
  LayerSubset(runtime::Engine& engine, float min_confidence, DraftWindowConfig window = DraftWindowConfig::off())
      : engine_(engine), min_confidence_(min_confidence), window_(window) {}
  std::string_view name() const override { return "subset"; }
  // The layers the next drafts skip: one entry per layer, at least one nonzero (an empty skip set
  // would be a full pass, which moves n_past). The span must stay valid while drafting.
  void set_skip(std::span<const uint8_t> skip) { skip_ = skip; }
  Status propose(std::span<const int32_t> history, uint32_t k, Draft& out) override;

 private:
  runtime::Engine& engine_;
  float min_confidence_;
  DraftWindowConfig window_;
  std::span<const uint8_t> skip_;
  std::vector<float> logits_;
};

}  // namespace strata::spec
