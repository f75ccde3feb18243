#include "spec/early_exit.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampler.h"
#include "spec/layer_subset.h"

namespace strata::spec {

EarlyExit::EarlyExit(runtime::Engine& engine, uint32_t depth, float min_confidence)
    : engine_(engine), depth_(depth), min_confidence_(min_confidence) {}

Status EarlyExit::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  out.verify_from = depth_;
  if (history.empty() || k == 0) return {};
  const size_t d = engine_.model().spec.hp.n_embd;
  const uint32_t pos = engine_.n_past();
  out.hidden.resize((k + 1) * d);
  int32_t x = history.back();  // the pending token, at position pos
  // Step i runs token x_i (the pending token, then each draft) through layers [0, d) at pos + i,
  // keeps its stream as verification row i, and reads the next draft from the head.
  for (uint32_t i = 0; i < k; ++i) {
    runtime::LayerRange r{0, depth_, nullptr, out.hidden.data() + i * d, {}};
    STRATA_TRY(engine_.eval_layers(std::span(&x, 1), pos + i, r, runtime::Logits::last, logits_));
    ++out.engine_steps;
    const int32_t next = runtime::argmax(logits_);
    if (min_confidence_ > 0 && top_probability(logits_, next) < min_confidence_) break;
    out.tokens.push_back(next);
    x = next;
  }
  // The last draft needs its own stream at layer d too (so that, all accepted, the verify pass
  // also yields the token after it): layers only, no head.
  const uint32_t n = uint32_t(out.tokens.size());
  if (n == k) {
    runtime::LayerRange r{0, depth_, nullptr, out.hidden.data() + n * d, {}};
    STRATA_TRY(engine_.eval_layers(std::span(&x, 1), pos + n, r, runtime::Logits::none, logits_));
    ++out.engine_steps;
  }
  out.hidden.resize((n + 1) * d);
  return {};
}

}  // namespace strata::spec
