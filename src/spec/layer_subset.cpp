#include "spec/layer_subset.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampler.h"

namespace strata::spec {

float top_probability(std::span<const float> logits, int32_t top) {
  const float mx = logits[size_t(top)];
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l - mx));
  return float(1.0 / sum);
}

Status LayerSubset::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  out.verify_from = 0;
  if (history.empty() || k == 0) return {};
  if (skip_.size() != engine_.model().spec.hp.n_layer || std::ranges::none_of(skip_, [](uint8_t s) { return s != 0; }))
    return Status::error("layer-subset draft: the skip set must name at least one of the model's {} layers",
                         engine_.model().spec.hp.n_layer);
  const uint32_t pos = engine_.n_past();
  int32_t x = history.back();  // the pending token, at position pos
  // Step i runs token x_i (the pending token, then each draft) through the kept layers at pos + i
  // and reads the next draft from the head. No stream is kept: verification starts at layer 0.
  for (uint32_t i = 0; i < k; ++i) {
    const runtime::LayerRange r{.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = skip_};
    STRATA_TRY(engine_.eval_layers(std::span(&x, 1), pos + i, r, runtime::Logits::last, logits_));
    ++out.engine_steps;
    const int32_t next = runtime::argmax(logits_);
    if (min_confidence_ > 0 && top_probability(logits_, next) < min_confidence_) break;
    out.tokens.push_back(next);
    x = next;
  }
  return {};
}

}  // namespace strata::spec
