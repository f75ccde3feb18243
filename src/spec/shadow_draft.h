// Shadow drafting (SubSpec-style; M12 item 1): the whole model, every layer, from low-bit copies
// of its matrices (Engine::make_shadow), then its own head, drafts greedily one token at a time.
// Unlike early exit and layer skipping no layer's contribution is lost, only precision; under a
// VRAM budget the copies are what the plan keeps resident for drafting, so a draft step streams
// nothing. The draft's KV and stream are the shadow's, so verification runs from layer 0.
#pragma once

#include "runtime/engine.h"
#include "spec/draft_window_config.h"
#include "spec/drafter.h"

namespace strata::spec {

class ShadowDraft final : public Drafter {
 public:
  // The engine must hold shadow weights (make_shadow) before propose(). min_confidence: as
  // EarlyExit's (drafting stops before a token its head gives less probability). window: when
  // rounds attend through a draft window (draft_window_config.h).
  ShadowDraft(runtime::Engine& engine, float min_confidence, DraftWindowConfig window = DraftWindowConfig::off())
      : engine_(engine), min_confidence_(min_confidence), window_(window) {}
  std::string_view name() const override { return "shadow"; }
  Status propose(std::span<const int32_t> history, uint32_t k, Draft& out) override;

 private:
  runtime::Engine& engine_;
  float min_confidence_;
  DraftWindowConfig window_;
  std::vector<float> logits_;
};

}  // namespace strata::spec
