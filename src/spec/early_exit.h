// Early-exit drafting: layers [0, d) of the model itself, then its final norm and head, draft
// greedily one token at a time. Each step writes the KV of layers < d at the drafted position
// (ahead of n_past) and keeps its residual stream, so verification continues from layer d
// without recomputing the shallow layers. A model trained with early-exit losses (LayerSkip,
// models/README.md) drafts well from its trained exits. A round drafted through a draft window
// (draft_window_config.h) keeps no stream: its KV and stream come from windowed attention, so
// verification starts at layer 0 (engine.h), and the last draft's extra pass is not run.
#pragma once

#include "runtime/engine.h"
#include "spec/draft_window_config.h"
#include "spec/drafter.h"

namespace strata::spec {

class EarlyExit final : public Drafter {
 public:
  // depth: 1 <= d < n_layer (validated by parse_spec). min_confidence: drafting stops before a
  // token whose draft probability is below it (a likely rejection is not worth the draft step and
  // the verify row); 0 drafts k tokens always.
  // window: when rounds attend through a window (the engine must support_draft_window where it
  // can give one).
  EarlyExit(runtime::Engine& engine, uint32_t depth, float min_confidence,
            DraftWindowConfig window = DraftWindowConfig::off());
  std::string_view name() const override { return "early"; }
  Status propose(std::span<const int32_t> history, uint32_t k, Draft& out) override;
  // One pass of layers [0, d) per level of the plan (Engine::eval_tree over that level's nodes,
  // keeping their streams at layer d); a node's children are its draft head's top tokens, each
  // proposed only when the head gives it min_confidence or more.
  bool drafts_trees() const override { return true; }
  Status propose_tree(std::span<const int32_t> history, const TreePlan& plan, TreeDraft& out) override;
  uint32_t depth() const { return depth_; }

 private:
  runtime::Engine& engine_;
  uint32_t depth_;
  float min_confidence_;
  DraftWindowConfig window_;
  std::vector<float> logits_;
};

}  // namespace strata::spec
