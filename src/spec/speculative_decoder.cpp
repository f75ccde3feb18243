#include "spec/speculative_decoder.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/log.h"
#include "spec/early_exit.h"
#include "spec/layer_subset.h"
#include "spec/prompt_lookup.h"
#include "spec/shadow_draft.h"

namespace strata::spec {
namespace {


constexpr uint32_t kMaxNgram = 4;
constexpr uint32_t kProbeAfterRounds = 32;
constexpr uint32_t kMaxProbeInterval = 1024;

}  // namespace

Result<std::unique_ptr<SpeculativeDecoder>> SpeculativeDecoder::create(runtime::Engine& engine,
                                                                       runtime::Sampler& sampler, SpecConfig config) {
  const uint32_t n_layer = engine.model().spec.hp.n_layer;
  const bool early = config.mode == SpecMode::early || config.mode == SpecMode::automatic;
  if (early && (config.depth < 1 || config.depth >= n_layer))
    return Status::error("--spec: early-exit depth {} must be in [1, {})", config.depth, n_layer);
  if (config.mode == SpecMode::subset && n_layer < 3)
    return Status::error("--spec subset needs a model of at least 3 layers (it has {})", n_layer);
  if (config.mode != SpecMode::none && (config.draft_max < 1 || config.draft_max >= runtime::kMaxExactRows))
    return Status::error("--draft-max must be in [1, {}] (got {})", runtime::kMaxExactRows - 1, config.draft_max);
  if (config.mode == SpecMode::shadow) {
    const Status made = engine.make_shadow(config.shadow_type);
    if (!made.is_ok()) return Status::error("--spec {}: {}", config.text(), made.message());
  }
  return std::unique_ptr<SpeculativeDecoder>(new SpeculativeDecoder(engine, sampler, config));
}

Result<std::unique_ptr<SpeculativeDecoder>> SpeculativeDecoder::create_with(runtime::Engine& engine,
                                                                            runtime::Sampler& sampler,
                                                                            uint32_t draft_max,
                                                                            std::unique_ptr<Drafter> drafter,
                                                                            uint32_t tree, bool tree_fit_cost,
                                                                            bool adaptive) {
  if (!drafter) return Status::error("speculative decoder: no drafter given");
  if (draft_max < 1 || draft_max >= runtime::kMaxExactRows)
    return Status::error("--draft-max must be in [1, {}] (got {})", runtime::kMaxExactRows - 1, draft_max);
  if (tree > 0 && !drafter->drafts_trees())
    return Status::error("token trees: the {} drafter proposes chains only", drafter->name());
  SpecConfig c;
  c.mode = SpecMode::replay;
  c.draft_max = draft_max;
  c.tree = tree;
  c.tree_fit_cost = tree_fit_cost;
  c.replay_auto = adaptive;
  return std::unique_ptr<SpeculativeDecoder>(new SpeculativeDecoder(engine, sampler, c, std::move(drafter)));
}

SpeculativeDecoder::SpeculativeDecoder(runtime::Engine& engine, runtime::Sampler& sampler, SpecConfig config,
                                       std::unique_ptr<Drafter> given)
    : engine_(engine), sampler_(sampler), cfg_(config), rng_(sampler.params().seed, /*stream=*/0x5bec) {
  stats_.spec = given ? std::string(given->name()) : cfg_.text();
  // A replay (given) drafter keeps its own passes; a window the engine cannot run is dropped (the
  // drafts then attend to everything, as before the window existed).
  if (given) cfg_.window = DraftWindowConfig::off();
  if (cfg_.window.mode != DraftWindowConfig::Mode::off && !engine_.supports_draft_window()) {
    if (cfg_.window.mode == DraftWindowConfig::Mode::fixed)
      log::info("--draft-window {}: the {} engine cannot attend through a draft window here; drafting over the "
                "whole context", cfg_.window.text(), engine_.device_name());
    cfg_.window = DraftWindowConfig::off();
  }
  // `auto` stays off on the CUDA engine until its window path (attention_decode.cu's sinks split)
  // has run on a GPU (tests/gpu/test_cuda_draft_window.cpp has not yet); an explicit SINKS,RECENT
  // uses it there.
  if (cfg_.window.mode == DraftWindowConfig::Mode::automatic && engine_.device_name() != "cpu")
    cfg_.window = DraftWindowConfig::off();
  stats_.draft_window = cfg_.window.text();
  if (given) drafters_.push_back(std::move(given));  // SpecMode::replay: drafter 0, every round
  if (cfg_.mode == SpecMode::lookup || cfg_.mode == SpecMode::automatic) {
    lookup_ = int(drafters_.size());
    drafters_.push_back(std::make_unique<PromptLookup>(kMaxNgram, 1));
  }
  if (cfg_.mode == SpecMode::early || cfg_.mode == SpecMode::automatic) {
    early_ = int(drafters_.size());
    drafters_.push_back(std::make_unique<EarlyExit>(engine_, cfg_.depth, cfg_.min_confidence, cfg_.window));
  }
  const uint32_t n_layer = engine_.model().spec.hp.n_layer;
  if (cfg_.mode == SpecMode::subset || (cfg_.mode == SpecMode::automatic && n_layer >= 3)) {
    const double fixed[] = {cfg_.skip_ratio};
    // Under a VRAM budget every candidate skips the layers whose weights are not resident, so that
    // a draft step copies nothing over PCIe (the first candidate skips exactly those).
    const std::vector<uint8_t> must_skip = engine_.non_resident_layers();
    auto arms = cfg_.skip_ratio > 0 ? subset_candidates(n_layer, fixed, must_skip)
                                    : subset_candidates(n_layer, kDefaultSkipRatios, must_skip);
    subset_ = int(drafters_.size());
    drafters_.push_back(std::make_unique<LayerSubset>(engine_, cfg_.min_confidence, cfg_.window));
    chooser_ = std::make_unique<SubsetChooser>(std::move(arms), sampler.params().seed);
  }
  if (cfg_.mode == SpecMode::shadow) {
    shadow_ = int(drafters_.size());
    drafters_.push_back(std::make_unique<ShadowDraft>(engine_, cfg_.min_confidence, cfg_.window));
  }
  if (cfg_.tree > 0) shaper_ = std::make_unique<TreeShaper>(cfg_.tree);
  if (cfg_.mode == SpecMode::replay && cfg_.tree > 0) stats_.spec += fmt::format(",tree={}", cfg_.tree);
  for (const auto& d : drafters_) stats_.drafters.push_back({.name = std::string(d->name())});
  if (subset_ >= 0)
    for (size_t i = 0; i < chooser_->size(); ++i)
      stats_.drafters[size_t(subset_)].arms.push_back({.label = chooser_->arm(i).label});
  accept_.resize(drafters_.size());
  idle_rounds_.resize(drafters_.size());
  probe_after_.assign(drafters_.size(), kProbeAfterRounds);
  plain_probe_after_ = kProbeAfterRounds;
}

Result<int32_t> SpeculativeDecoder::start(std::span<const int32_t> prompt) {
  engine_.truncate(0);
  STRATA_TRY(engine_.eval(prompt, runtime::Logits::last, logits_));
  history_.assign(prompt.begin(), prompt.end());
  const int32_t first = sampler_.sample(logits_, engine_.last_argmax());
  sampler_.accept(first);
  history_.push_back(first);
  return first;
}

Status SpeculativeDecoder::plain_step(std::vector<int32_t>& out) {
  const double t0 = now();
  const uint64_t g0 = engine_.graph_captures();
  STRATA_TRY(engine_.eval(std::span(&history_.back(), 1), runtime::Logits::last, logits_));
  const double s = now() - t0;
  if (steady(g0)) plain_cost_.observe(1, s);
  ++stats_.plain_steps;
  stats_.plain_s += s;
  if (keep_raw_) raw_logits_ = logits_;
  const int32_t t = sampler_.sample(logits_, engine_.last_argmax());
  sampler_.accept(t);
  history_.push_back(t);
  out.push_back(t);
  return {};
}

double SpeculativeDecoder::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double SpeculativeDecoder::t_plain() const {
  if (plain_cost_.known()) return plain_cost_.predict(1);
  return verify_cost_full_.known() ? verify_cost_full_.predict(1) : 0.0;  // subset mode takes no plain steps
}

double SpeculativeDecoder::t_verify_full(uint32_t rows) const {
  return verify_cost_full_.known() ? verify_cost_full_.predict(rows) : t_plain() * (1 + 0.05 * (rows - 1));
}

double SpeculativeDecoder::t_verify_early(uint32_t rows) const {
  if (verify_cost_early_.known()) return verify_cost_early_.predict(rows);
  const double L = engine_.model().spec.hp.n_layer, d = cfg_.depth;
  return t_verify_full(rows) * (L - d) / L;
}

double SpeculativeDecoder::t_draft_step() const {
  if (draft_step_cost_.known()) return draft_step_cost_.predict(1);
  return t_plain() * double(cfg_.depth) / double(engine_.model().spec.hp.n_layer);
}

double SpeculativeDecoder::t_draft_level(uint32_t nodes) const {
  if (draft_level_cost_.known()) return std::max(0.0, draft_level_cost_.predict(nodes));
  return t_draft_step();
}

void SpeculativeDecoder::pick_subset_arm(uint32_t k) {
  subset_arm_ = chooser_->choose(k, t_verify_full(k + 1), t_plain());
  static_cast<LayerSubset&>(*drafters_[size_t(subset_)]).set_skip(chooser_->arm(subset_arm_).skip);
}

SpeculativeDecoder::Choice SpeculativeDecoder::choose(uint32_t k_max) {
  Choice c;
  if (k_max == 0 || cfg_.mode == SpecMode::none) return c;
  if (cfg_.mode == SpecMode::early) return {early_, k_max, {}};
  if (cfg_.mode == SpecMode::replay) return cfg_.replay_auto ? choose_replay(k_max) : Choice{0, k_max, {}};
  if (cfg_.mode == SpecMode::subset) return {subset_, k_max, {}};
  if (cfg_.mode == SpecMode::shadow) return {shadow_, k_max, {}};
  std::vector<int32_t> cont;
  uint32_t matched_n = 0;
  if (lookup_ >= 0) cont = lookup_continuation(history_, k_max, kMaxNgram, 1, &matched_n);
  if (cfg_.mode == SpecMode::lookup) {
    if (!cont.empty()) c = {lookup_, uint32_t(cont.size()), std::move(cont)};
    return c;
  }
  // automatic: the rule in the header. The first round measures a plain step.
  if (!plain_cost_.known()) return c;
  const double t_plain = this->t_plain();
  auto verify_full = [&](uint32_t n) { return t_verify_full(n); };
  auto verify_early = [&](uint32_t n) { return t_verify_early(n); };
  const double t_step = t_draft_step();
  // Early exit through a draft window (its k passes reach n_past + k - 1): k passes, verification
  // from layer 0 (early_exit.h). Decided at k_max for every k.
  const bool early_windowed = cfg_.window.at(engine_.n_past() + k_max - 1).on();
  double best = 1.0 / t_plain;
  const bool short_match = matched_n == 1;
  if (!cont.empty()) {
    const double a = short_match ? accept_short_lookup_.alpha() : accept_[lookup_].alpha();
    for (uint32_t k = 1; k <= cont.size(); ++k) {
      const double rate = expected_tokens(a, k) / verify_full(k + 1);
      if (rate > best) best = rate, c = {lookup_, k, {}, short_match, false};
    }
  }
  for (uint32_t k = 1; k <= k_max; ++k) {
    // k + 1 draft steps: the k drafts' own and the last draft's stream to layer d (or the step
    // whose low-confidence token was dropped).
    const double rate = expected_tokens(accept_[early_].alpha(), k) /
                        (early_windowed ? k * t_step + verify_full(k + 1) : (k + 1) * t_step + verify_early(k + 1));
    if (rate > best) best = rate, c = {early_, k, {}};
  }
  if (subset_ >= 0) {
    const size_t arm = chooser_->best(k_max, verify_full(k_max + 1), t_plain);
    const double t_sub = chooser_->step_seconds(arm, t_plain);
    for (uint32_t k = 1; k <= k_max; ++k) {
      const double rate = expected_tokens(chooser_->alpha(arm), k) / (k * t_sub + verify_full(k + 1));
      if (rate > best) best = rate, c = {subset_, k, {}};
    }
  }
  // Probes: an option left out for long gets one round, so a stale estimate can recover (plain
  // steps too: the first one is a single noisy sample).
  // The interval doubles per probe (an option that keeps losing is probed ever more rarely) and
  // resets when the option wins on its rate.
  auto probe = [&](int drafter, uint32_t k) { return probe_round(drafter, k, drafter == lookup_ && short_match); };
  won_on_rate(c);
  if (c.drafter >= 0 && plain_idle_rounds_ >= plain_probe_after_) return probe(-1, 0);
  if (c.drafter != lookup_ && !cont.empty() && idle_rounds_[lookup_] >= probe_after_[lookup_])
    c = probe(lookup_, std::min<uint32_t>(2, uint32_t(cont.size())));
  else if (c.drafter != early_ && idle_rounds_[early_] >= probe_after_[early_])
    c = probe(early_, std::min<uint32_t>(2, k_max));
  else if (subset_ >= 0 && c.drafter != subset_ && idle_rounds_[size_t(subset_)] >= probe_after_[size_t(subset_)])
    c = probe(subset_, std::min<uint32_t>(2, k_max));
  if (c.drafter == lookup_) {
    cont.resize(c.k);
    c.lookup = std::move(cont);
  }
  return c;
}

SpeculativeDecoder::Choice SpeculativeDecoder::choose_replay(uint32_t k_max) {
  // auto's rule for its one drafter: the first round measures a plain step; then the draft length
  // with the most expected tokens per second, if that beats a plain step's rate. Verification runs
  // from layer 0 (replay.h); k drafts cost k + 1 passes of the cost drafter, as auto counts early
  // exit's (nothing without a cost drafter: its passes are never timed). Trees size themselves.
  Choice c;
  if (tree_round_for(0)) return {0, k_max, {}};
  if (!plain_cost_.known()) return c;
  double best = 1.0 / t_plain();
  const double t_step = draft_step_cost_.known() ? draft_step_cost_.predict(1) : 0.0;
  for (uint32_t k = 1; k <= k_max; ++k) {
    const double rate = expected_tokens(accept_[0].alpha(), k) / ((k + 1) * t_step + t_verify_full(k + 1));
    if (rate > best) best = rate, c = {0, k, {}};
  }
  // Probes, as auto's: a plain step now and then while drafting, two drafts now and then while
  // not, each probed ever more rarely while it keeps losing.
  won_on_rate(c);
  if (c.drafter >= 0 && plain_idle_rounds_ >= plain_probe_after_) return probe_round(-1, 0, false);
  if (c.drafter < 0 && idle_rounds_[0] >= probe_after_[0]) return probe_round(0, std::min<uint32_t>(2, k_max), false);
  return c;
}

void SpeculativeDecoder::won_on_rate(const Choice& c) {
  (c.drafter < 0 ? plain_probe_after_ : probe_after_[size_t(c.drafter)]) = kProbeAfterRounds;
}

SpeculativeDecoder::Choice SpeculativeDecoder::probe_round(int drafter, uint32_t k, bool short_match) {
  uint32_t& after = drafter < 0 ? plain_probe_after_ : probe_after_[size_t(drafter)];
  after = std::min(after * 2, kMaxProbeInterval);
  return Choice{drafter, k, {}, short_match, true};
}

Status SpeculativeDecoder::verify(int drafter, const Draft& d, std::vector<int32_t>& out) {
  const uint32_t pos = engine_.n_past(), k = uint32_t(d.tokens.size()), n = k + 1;
  std::vector<int32_t> rows;
  rows.reserve(n);
  rows.push_back(history_.back());
  rows.insert(rows.end(), d.tokens.begin(), d.tokens.end());
  const runtime::LayerRange range{.first = d.verify_from,
                                  .end = 0,
                                  .hidden_in = d.verify_from > 0 ? d.hidden.data() : nullptr,
                                  .hidden_out = nullptr,
                                  .skip = {}};
  const double t0 = now();
  const uint64_t g0 = engine_.graph_captures();
  STRATA_TRY(engine_.eval_layers(rows, pos, range, runtime::Logits::all, logits_));
  const double s = now() - t0;
  if (steady(g0)) (d.verify_from > 0 ? verify_cost_early_ : verify_cost_full_).observe(n, s);
  ++stats_.verify_passes;
  stats_.verify_rows += n;
  stats_.verify_s += s;
  if (keep_raw_) raw_logits_ = logits_;  // rows 0..m: the emitted tokens' (the rest is dropped)

  // Row r scores the token at position pos + r + 1: draft r, or (r == k) the bonus token.
  const size_t V = engine_.model().spec.hp.n_vocab;
  const bool greedy = sampler_.params().temperature <= 0.0f;
  uint32_t m = 0;
  int32_t y = -1;
  auto emit = [&](int32_t t) {
    sampler_.accept(t);
    history_.push_back(t);
    out.push_back(t);
  };
  for (uint32_t r = 0; r < n && y < 0; ++r) {
    std::span<float> row(logits_.data() + r * V, V);
    if (greedy) {
      const int32_t t = sampler_.sample(row);
      if (r < k && t == d.tokens[r]) emit(t), ++m;
      else y = t;
      continue;
    }
    std::vector<float> p = sampler_.distribution(row);
    int32_t rejected = -1;
    if (r < k) {
      const int32_t x = d.tokens[r];
      // Deterministic draft (q one-hot at x): accept with min(1, p(x) / q(x)) = p(x).
      if (rng_.uniform() < p[size_t(x)]) {
        emit(x), ++m;
        continue;
      }
      p[size_t(x)] = 0;  // norm(max(0, p - q)): p without x
      rejected = x;
    }
    double sum = 0;
    for (float v : p) sum += v;
    y = rejected;  // only if rounding left no other mass
    if (sum > 0) {
      double u = double(rng_.uniform()) * sum;
      for (size_t i = 0; i < V; ++i) {
        if (p[i] <= 0) continue;
        y = int32_t(i);
        if ((u -= p[i]) < 0) break;
      }
    }
  }
  emit(y);
  engine_.truncate(pos + m + 1);  // the pending token and the accepted drafts stay

  if (drafter >= 0) {
    if (drafter == lookup_ && round_short_lookup_) accept_short_lookup_.observe(k, m);
    else accept_[size_t(drafter)].observe(k, m);
    auto& ds = stats_.drafters[size_t(drafter)];
    ++ds.rounds;
    ds.drafted += k;
    ds.accepted += m;
    ds.by_depth.observe(k, m);
    ds.tokens += m + 1;
    ds.verify_s += s;
    if (drafter == subset_) {
      chooser_->observe_acceptance(subset_arm_, k, m);
      auto& as = ds.arms[subset_arm_];
      ++as.rounds, as.drafted += k, as.accepted += m;
    }
  }
  return {};
}

bool SpeculativeDecoder::tree_round_for(int drafter) const {
  // Greedy and sampled alike: verify_tree draws each token from the target's own distribution
  // (sampler_.sample, one draw per token as a plain step) and walks on only where a drafted child
  // carries it. The drafted children are a function of the context alone (the drafter's top
  // tokens), so this is exact -- the same tokens as plain sampling with the same seed -- and with
  // fixed candidates no rejection scheme accepts more (a child is taken with its whole target
  // probability).
  return shaper_ && drafter >= 0 && drafters_[size_t(drafter)]->drafts_trees() && engine_.supports_trees();
}

Status SpeculativeDecoder::tree_round(int drafter, uint32_t max_depth, std::vector<int32_t>& out) {
  const uint32_t pos = engine_.n_past();
  // Every node takes a verify row and a KV slot past n_past (at most ubatch ahead, the rings' margin).
  const uint32_t budget = std::min({runtime::kMaxExactRows, engine_.ubatch(), engine_.n_ctx() - pos});
  TreePlan plan = shaper_->plan(budget, max_depth);
  // Once a verify pass of the kind this drafter's trees take is measured (from the draft depth for
  // early exit; from layer 0 for the others, e.g. a replay), the tree stops where more nodes would
  // lower tokens per second, keeping the first draft (without drafts the acceptance estimates could
  // never recover).
  // (A tree drafted through a draft window is verified from layer 0.)
  const bool from_draft = drafter == early_ && !cfg_.window.at(pos + plan.size() - 1).on();
  const bool explore = ++tree_rounds_since_explore_ >= kTreeExploreInterval;
  if (explore) tree_rounds_since_explore_ = 0;
  if (cfg_.tree_fit_cost && (from_draft ? verify_cost_early_ : verify_cost_full_).known()) {
    auto t_verify = [&](uint32_t k) { return from_draft ? t_verify_early(k) : t_verify_full(k); };
    const uint32_t n = best_tree_size(plan, [&](uint32_t w) { return t_draft_level(w); }, t_verify);
    if (log::level() <= log::Level::debug) {  // `strata -v`: why a tree has the size it has
      auto ms = [&](uint32_t k) { return 1e3 * t_verify(k); };
      double tokens = 0;
      for (uint32_t i = 0; i < n; ++i) tokens += plan.value[i];
      log::debug("tree size {} of {}: {:.2f} expected tokens; verify {:.2f} / {:.2f} / {:.2f} ms at 1 / {} / {} "
                 "nodes; level {:.2f} / {:.2f} ms at 1 / 2 nodes",
                 n, plan.size(), tokens, ms(1), ms(n), ms(plan.size()), n, plan.size(), 1e3 * t_draft_level(1),
                 1e3 * t_draft_level(2));
    }
    // An exploring round drafts twice the chosen size (within the plan).
    plan = plan.prefix(std::max(explore ? 2 * n : n, std::min(2u, plan.size())));
  }
  auto& ds = stats_.drafters[size_t(drafter)];
  const double td = now();
  const uint64_t g0 = engine_.graph_captures();
  STRATA_TRY(drafters_[size_t(drafter)]->propose_tree(history_, plan, tree_));
  const double s = now() - td;
  ds.draft_s += s;
  ds.steps += tree_.engine_steps;
  if (tree_.windowed && tree_.tokens.size() > 1) ++ds.windowed_rounds;  // verified (else a plain step)
  // The early-exit drafter's passes, or a replay drafter's cost drafter's (real passes, simulated
  // tokens): without them a replayed tree would be sized from the prior's level cost.
  const bool timed = (drafter == early_ || cfg_.mode == SpecMode::replay) && steady(g0);
  if (tree_.engine_steps && timed) draft_step_cost_.observe(1, s / tree_.engine_steps);
  if (timed) {
    for (const TreeDraft::LevelCost& l : tree_.levels) draft_level_cost_.observe(l.nodes, l.seconds);
    // A drafter that times no levels (a replay without a cost drafter: free drafts, as prompt
    // lookup) has its time split evenly over the tree's levels, so its trees are sized for what
    // they cost, not for the prior's draft pass.
    if (tree_.levels.empty() && tree_.tokens.size() > 1) {
      std::vector<uint32_t> width{1}, depth(tree_.tokens.size(), 0);
      for (size_t i = 1; i < tree_.tokens.size(); ++i) {
        depth[i] = depth[size_t(tree_.parents[i])] + 1;
        if (width.size() <= depth[i]) width.resize(depth[i] + 1, 0);
        ++width[depth[i]];
      }
      for (const uint32_t w : width) draft_level_cost_.observe(w, s / double(width.size()));
    }
  }
  if (tree_.tokens.size() <= 1 && tree_.verify_from == 0) return plain_step(out);
  return verify_tree(drafter, tree_, out);
}

Status SpeculativeDecoder::verify_tree(int drafter, const TreeDraft& t, std::vector<int32_t>& out) {
  const uint32_t pos = engine_.n_past(), n = uint32_t(t.tokens.size());
  const runtime::LayerRange range{.first = t.verify_from,
                                  .end = 0,
                                  .hidden_in = t.verify_from > 0 ? t.hidden.data() : nullptr,
                                  .hidden_out = nullptr,
                                  .skip = {}};
  const double t0 = now();
  const uint64_t g0 = engine_.graph_captures();
  STRATA_TRY(engine_.eval_tree(t.tokens, t.parents, pos, range, runtime::Logits::all, logits_));
  const double s = now() - t0;
  if (steady(g0)) (t.verify_from > 0 ? verify_cost_early_ : verify_cost_full_).observe(n, s);
  ++stats_.verify_passes;
  stats_.verify_rows += n;
  stats_.verify_s += s;

  // From the root: the target's token after each accepted node (argmax, or drawn from the
  // sampler's distribution: tree_round_for says why that is exact); a child carrying it is
  // accepted, otherwise it is the round's own token and the walk ends.
  const size_t V = engine_.model().spec.hp.n_vocab;
  std::vector<uint32_t> path{0};
  uint32_t max_depth = 0;
  {
    std::vector<uint32_t> depth(n, 0);
    for (uint32_t i = 1; i < n; ++i) max_depth = std::max(max_depth, depth[i] = depth[size_t(t.parents[i])] + 1);
  }
  if (keep_raw_) raw_logits_.clear();
  for (;;) {
    const uint32_t node = path.back();
    std::span<float> row(logits_.data() + node * V, V);
    if (keep_raw_) raw_logits_.insert(raw_logits_.end(), row.begin(), row.end());
    const int32_t y = sampler_.sample(row);
    int32_t child = -1;
    uint32_t candidates = 0;
    for (uint32_t c = node + 1; c < n; ++c) {
      if (t.parents[c] != int32_t(node)) continue;
      candidates = std::max(candidates, t.rank[c] + 1);
      if (child < 0 && t.tokens[c] == y) child = int32_t(c);
    }
    shaper_->observe(uint32_t(path.size()), candidates, child >= 0 ? int32_t(t.rank[size_t(child)]) : -1);
    sampler_.accept(y);
    history_.push_back(y);
    out.push_back(y);
    if (child < 0) break;
    path.push_back(uint32_t(child));
  }
  STRATA_TRY(engine_.keep_tree_path(pos, path));  // the pending token and the accepted nodes stay

  const uint32_t m = uint32_t(path.size()) - 1;
  accept_[size_t(drafter)].observe(max_depth, m);
  auto& ds = stats_.drafters[size_t(drafter)];
  ++ds.rounds;
  ds.drafted += n - 1;
  ds.accepted += m;
  ds.by_depth.observe(max_depth, m);
  ds.tokens += m + 1;
  ds.verify_s += s;
  ++ds.tree_rounds;
  ds.tree_nodes += n;
  return {};
}

Status SpeculativeDecoder::step(uint32_t max_new, std::vector<int32_t>& out) {
  if (max_new == 0) return {};
  const double t0 = now();
  const size_t before = out.size();
  const uint32_t pos = engine_.n_past(), n_ctx = engine_.n_ctx();
  if (pos >= n_ctx) return Status::error("context full ({} tokens)", n_ctx);
  // k drafts and the pending token are k + 1 verify rows, written at most k + 1 past n_past.
  const uint32_t k_max = std::min({cfg_.draft_max, max_new - 1, n_ctx - pos - 1, engine_.ubatch() - 1});
  Choice c = choose(k_max);
  for (size_t i = 0; i < idle_rounds_.size(); ++i) idle_rounds_[i] = int(i) == c.drafter ? 0 : idle_rounds_[i] + 1;
  plain_idle_rounds_ = c.drafter < 0 ? 0 : plain_idle_rounds_ + 1;
  if (c.drafter < 0) {
    STRATA_TRY(plain_step(out));
  } else if (tree_round_for(c.drafter)) {
    STRATA_TRY(tree_round(c.drafter, c.k, out));
  } else {
    auto& ds = stats_.drafters[size_t(c.drafter)];
    const double td = now();
    const uint64_t g0 = engine_.graph_captures();
    round_short_lookup_ = c.drafter == lookup_ && c.short_match;
    if (c.drafter == lookup_) {
      draft_ = Draft{};
      draft_.tokens = std::move(c.lookup);
    } else {
      if (c.drafter == subset_) pick_subset_arm(c.k);
      STRATA_TRY(drafters_[size_t(c.drafter)]->propose(history_, c.k, draft_));
    }
    const double s = now() - td;
    ds.draft_s += s;
    ds.steps += draft_.engine_steps;
    if (draft_.windowed && !draft_.tokens.empty()) ++ds.windowed_rounds;  // verified (else a plain step)
    const bool timed = draft_.engine_steps && steady(g0);
    // The early-exit drafter's passes, or a replay's cost drafter's (choose_replay weighs them).
    if (timed && (c.drafter == early_ || cfg_.mode == SpecMode::replay))
      draft_step_cost_.observe(1, s / draft_.engine_steps);
    if (draft_.engine_steps && c.drafter == subset_) {
      if (timed) chooser_->observe_step(subset_arm_, s / draft_.engine_steps);
      // A first draft too unsure to propose wastes the step: counted as a rejected token, so a
      // skip set whose head is never confident does not keep its prior acceptance.
      if (draft_.tokens.empty()) chooser_->observe_acceptance(subset_arm_, 1, 0);
    }
    if (draft_.tokens.empty() && draft_.verify_from == 0) STRATA_TRY(plain_step(out));
    else STRATA_TRY(verify(c.drafter, draft_, out));
  }
  stats_.tokens += out.size() - before;
  stats_.decode_s += now() - t0;
  if (subset_ >= 0) {
    const uint32_t k = std::max(1u, cfg_.draft_max);
    stats_.drafters[size_t(subset_)].chosen = chooser_->arm(chooser_->best(k, t_verify_full(k + 1), t_plain())).label;
  }
  return {};
}

double SpecStats::speedup_vs_plain_steps() const {
  return plain_steps && tokens > plain_steps ? tokens_per_s() * plain_s / double(plain_steps) : 0.0;
}

nlohmann::json SpecStats::to_json() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& s : drafters) {
    nlohmann::json j = {{"name", s.name}, {"rounds", s.rounds}, {"drafted", s.drafted}, {"accepted", s.accepted},
                        {"acceptance", s.acceptance()}, {"tokens", s.tokens},
                        {"tokens_per_verify", s.tokens_per_verify()}, {"mean_accepted", s.mean_accepted()},
                        {"acceptance_by_depth", s.by_depth.to_json()}, {"draft_steps", s.steps},
                        {"draft_s", s.draft_s}, {"draft_step_ms", s.steps ? 1e3 * s.draft_s / double(s.steps) : 0.0},
                        {"verify_s", s.verify_s}, {"verify_ms", s.rounds ? 1e3 * s.verify_s / double(s.rounds) : 0.0}};
    if (s.windowed_rounds) j["windowed_rounds"] = s.windowed_rounds;
    if (s.tree_rounds)
      j["tree"] = {{"rounds", s.tree_rounds}, {"nodes", s.tree_nodes},
                   {"nodes_per_tree", double(s.tree_nodes) / double(s.tree_rounds)}};
    if (!s.arms.empty()) {
      nlohmann::json arms = nlohmann::json::array();
      for (const auto& a : s.arms)
        arms.push_back({{"skip_set", a.label}, {"rounds", a.rounds}, {"drafted", a.drafted}, {"accepted", a.accepted},
                        {"acceptance", a.acceptance()}});
      j["skip_sets"] = arms;
      j["chosen"] = s.chosen;
    }
    d.push_back(j);
  }
  return {{"spec", spec}, {"draft_window", draft_window}, {"tokens", tokens}, {"decode_s", decode_s}, {"tok_per_s", tokens_per_s()},
          {"plain_steps", plain_steps}, {"plain_step_ms", plain_steps ? 1e3 * plain_s / double(plain_steps) : 0.0},
          {"verify_passes", verify_passes}, {"verify_rows", verify_rows}, {"verify_s", verify_s},
          {"verify_ms", verify_passes ? 1e3 * verify_s / double(verify_passes) : 0.0},
          {"tokens_per_verify", verify_passes ? double(tokens - plain_steps) / double(verify_passes) : 0.0},
          {"speedup_vs_plain_steps", speedup_vs_plain_steps()}, {"drafters", d}};
}

std::string SpecStats::summary() const {
  std::string s = fmt::format("spec {}: {} tokens in {:.2f} s ({:.2f} tok/s) | {} verify passes ({:.2f} tokens, {:.2f} ms "
                              "each) | {} plain steps ({:.2f} ms each)",
                              spec, tokens, decode_s, tokens_per_s(), verify_passes,
                              verify_passes ? double(tokens - plain_steps) / double(verify_passes) : 0.0,
                              verify_passes ? 1e3 * verify_s / double(verify_passes) : 0.0, plain_steps,
                              plain_steps ? 1e3 * plain_s / double(plain_steps) : 0.0);
  if (speedup_vs_plain_steps() > 0) s += fmt::format(" | x{:.2f} vs those plain steps", speedup_vs_plain_steps());
  if (!draft_window.empty() && draft_window != "off") s += fmt::format(" | draft window {}", draft_window);
  for (const auto& d : drafters) {
    s += fmt::format("\n  {}: {} rounds, {}/{} drafted tokens accepted ({:.1f}%), {:.2f} tokens per verify, {} draft "
                     "steps ({:.3f} ms each), verify {:.2f} ms each",
                     d.name, d.rounds, d.accepted, d.drafted, 100 * d.acceptance(), d.tokens_per_verify(), d.steps,
                     d.steps ? 1e3 * d.draft_s / double(d.steps) : 0.0,
                     d.rounds ? 1e3 * d.verify_s / double(d.rounds) : 0.0);
    if (!d.chosen.empty()) s += fmt::format("; best skip set {}", d.chosen);
    if (d.windowed_rounds) s += fmt::format("; {} of the rounds drafted through the window", d.windowed_rounds);
    if (d.tree_rounds)
      s += fmt::format("; {} token trees of {:.1f} nodes", d.tree_rounds, double(d.tree_nodes) / double(d.tree_rounds));
    if (d.by_depth.max_depth())
      s += fmt::format("\n    mean accepted {:.2f}; acceptance by depth (rate, passes reaching it): {}", d.mean_accepted(),
                       d.by_depth.text());
    for (const auto& a : d.arms)
      if (a.rounds)
        s += fmt::format("\n    {}: {} rounds, {}/{} accepted ({:.1f}%)", a.label, a.rounds, a.accepted, a.drafted,
                         100 * a.acceptance());
  }
  return s;
}

}  // namespace strata::spec
