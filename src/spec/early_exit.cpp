#include "spec/early_exit.h"

#include <chrono>

#include "spec/self_draft.h"
#include "spec/tree_grower.h"

namespace strata::spec {

EarlyExit::EarlyExit(runtime::Engine& engine, uint32_t depth, float min_confidence, DraftWindowConfig window)
    : engine_(engine), depth_(depth), min_confidence_(min_confidence), window_(window) {}

Status EarlyExit::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  out.verify_from = depth_;
  if (history.empty() || k == 0) return {};
  const size_t d = engine_.model().spec.hp.n_embd;
  const uint32_t pos = engine_.n_past();
  // Through a window: k passes, at pos .. pos + k - 1 (unwindowed, one more for the last draft's
  // stream, which a round verified from layer 0 does not need).
  if (const runtime::DraftWindow w = window_.at(pos + k - 1); w.on()) {
    out.verify_from = 0;
    out.windowed = true;
    const runtime::LayerRange r{.first = 0, .end = depth_, .hidden_in = nullptr, .hidden_out = nullptr, .skip = {},
                                .window = w};
    return draft_greedily(engine_, history.back(), k, min_confidence_, [&](uint32_t) { return r; }, logits_, out);
  }
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

Status EarlyExit::propose_tree(std::span<const int32_t> history, const TreePlan& plan, TreeDraft& out) {
  if (history.empty()) return Status::error("early-exit tree: no pending token");
  out = TreeDraft{};
  TreeGrower grow(plan, history.back(), out);
  const size_t d = engine_.model().spec.hp.n_embd, V = engine_.model().spec.hp.n_vocab;
  const uint32_t pos = engine_.n_past();
  // Nodes sit in slots pos .. pos + plan.size() - 1 (and at positions no higher).
  const runtime::DraftWindow w = window_.at(pos + plan.size() - 1);
  out.windowed = w.on();
  out.verify_from = w.on() ? 0 : depth_;
  if (!w.on()) out.hidden.resize(plan.size() * d);
  do {
    const uint32_t b = grow.level_begin(), e = grow.level_end();
    bool branches = false;
    for (uint32_t i = b; i < e; ++i) branches = branches || grow.wanted(i) > 0;
    // The level's streams at layer d are verification rows b..e-1; the head only where a node
    // has planned children (the last level runs the layers alone, as a chain's last draft does:
    // not at all through a window, where verification starts at layer 0).
    if (!branches && w.on()) break;
    const runtime::LayerRange r{0, depth_, nullptr, w.on() ? nullptr : out.hidden.data() + b * d, {}, w};
    // The level's cost includes choosing its children (a pass over the vocabulary per node).
    const auto t0 = std::chrono::steady_clock::now();
    auto timed = [&] {
      out.levels.push_back({e - b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    };
    STRATA_TRY(engine_.eval_tree(std::span(out.tokens).subspan(b, e - b), out.parents, pos, r,
                                 branches ? runtime::Logits::all : runtime::Logits::none, logits_));
    ++out.engine_steps;
    if (!branches) {
      timed();
      break;
    }
    for (uint32_t i = b; i < e; ++i) {
      const uint32_t w = grow.wanted(i);
      if (w == 0) continue;
      const std::span<const float> row(logits_.data() + (i - b) * V, V);
      const auto ranked = top_tokens(row, w);
      grow.add_children(i, ranked, [&](uint32_t rank) {
        return has_probability(row, ranked[0], ranked[rank], min_confidence_);
      });
    }
    timed();
  } while (grow.next_level());
  if (!w.on()) out.hidden.resize(out.tokens.size() * d);
  return {};
}

}  // namespace strata::spec
