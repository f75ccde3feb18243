#include "spec/early_exit.h"

#include "spec/self_draft.h"

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
  // Each step keeps its stream at layer d as verification row i.
  auto step_range = [&](uint32_t i) { return runtime::LayerRange{0, depth_, nullptr, out.hidden.data() + i * d, {}}; };
  STRATA_TRY(draft_greedily(engine_, history.back(), k, min_confidence_, step_range, logits_, out));
  // The last draft needs its own stream at layer d too (so that, all accepted, the verify pass
  // also yields the token after it): layers only, no head.
  const uint32_t n = uint32_t(out.tokens.size());
  if (n == k) {
    runtime::LayerRange r{0, depth_, nullptr, out.hidden.data() + n * d, {}};
    const int32_t x = out.tokens.back();
    STRATA_TRY(engine_.eval_layers(std::span(&x, 1), pos + n, r, runtime::Logits::none, logits_));
    ++out.engine_steps;
  }
  out.hidden.resize((n + 1) * d);
  return {};
}

}  // namespace strata::spec
