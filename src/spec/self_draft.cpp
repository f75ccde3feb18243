#include "spec/self_draft.h"

#include <cmath>

#include "runtime/sampler.h"

namespace strata::spec {

bool has_probability(std::span<const float> logits, int32_t top, int32_t token, float min_p) {
  if (min_p <= 0) return true;
  const float mx = logits[size_t(top)];
  // p(token) = e^(l_token - mx) / S >= min_p  <=>  S <= bound.
  const double bound = std::exp(double(logits[size_t(token)]) - mx) / min_p;
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i] - mx;
    if (x < -30.0f) continue;
    sum += std::exp(x);
    if (sum > bound) return false;
  }
  return true;
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
    if (!has_probability(logits, next, next, min_confidence)) break;
    out.tokens.push_back(next);
    x = next;
  }
  return {};
}

}  // namespace strata::spec
