#include "spec/layer_subset.h"

#include <algorithm>

#include "spec/self_draft.h"

namespace strata::spec {

Status LayerSubset::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  out.verify_from = 0;
  if (history.empty() || k == 0) return {};
  if (skip_.size() != engine_.model().spec.hp.n_layer || std::ranges::none_of(skip_, [](uint8_t s) { return s != 0; }))
    return Status::error("layer-subset draft: the skip set must name at least one of the model's {} layers",
                         engine_.model().spec.hp.n_layer);
  // No stream is kept: verification starts at layer 0. Passes at n_past .. n_past + k - 1.
  const runtime::DraftWindow w = window_.at(engine_.n_past() + k - 1);
  out.windowed = w.on();
  const runtime::LayerRange r{.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = skip_,
                              .window = w};
  return draft_greedily(engine_, history.back(), k, min_confidence_, [&](uint32_t) { return r; }, logits_, out);
}

}  // namespace strata::spec
