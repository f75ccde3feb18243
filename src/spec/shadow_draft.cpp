#include "spec/shadow_draft.h"

#include "spec/self_draft.h"

namespace strata::spec {

Status ShadowDraft::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  out.verify_from = 0;
  if (history.empty() || k == 0) return {};
  if (!engine_.shadow_type()) return Status::error("shadow draft: the engine holds no shadow weights (make_shadow)");
  // Passes at n_past .. n_past + k - 1.
  const runtime::DraftWindow w = window_.at(engine_.n_past() + k - 1);
  out.windowed = w.on();
  const runtime::LayerRange r{
      .first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = {}, .window = w, .shadow = true};
  return draft_greedily(engine_, history.back(), k, min_confidence_, [&](uint32_t) { return r; }, logits_, out);
}

}  // namespace strata::spec
