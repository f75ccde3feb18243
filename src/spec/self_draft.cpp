#include "spec/self_draft.h"

#include <cmath>

#include "runtime/sampler.h"

namespace strata::spec {

float top_probability(std::span<const float> logits, int32_t top) {
  const float mx = logits[size_t(top)];
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l - mx));
  return float(1.0 / sum);
}

Status draft_greedily(runtime::Engine& engine, int32_t pending, uint32_t k, float min_confidence,
                      const std::function<runtime::LayerRange(uint32_t step)>& range, std::vector<float>& logits,
                      Draft& out) {
  const uint32_t pos = engine.n_past();
  int32_t x = pending;
  for (uint32_t i = 0; i < k; ++i) {
    STRATA_TRY(engine.eval_layers(std::span(&x, 1), pos + i, range(i), runtime::Logits::last, logits));
    ++out.engine_steps;
    const int32_t next = runtime::argmax(logits);
    if (min_confidence > 0 && top_probability(logits, next) < min_confidence) break;
    out.tokens.push_back(next);
    x = next;
  }
  return {};
}

}  // namespace strata::spec
