#include "spec/subset_chooser.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace strata::spec {

namespace {

// The layers a skip set skips, as "2,4,6".
std::string layer_list(const std::vector<uint8_t>& skip) {
  std::string out;
  for (size_t il = 0; il < skip.size(); ++il) {
    if (!skip[il]) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(il);
  }
  return out;
}

// s with the layers of must_skip skipped too (labelled "+ non-resident"); false when it would run
// no layer at all.
bool add_must_skip(SkipSet& s, std::span<const uint8_t> must_skip) {
  bool added = false;
  uint32_t run = 0;
  for (size_t il = 0; il < s.skip.size(); ++il) {
    if (must_skip[il] && !s.skip[il]) s.skip[il] = 1, added = true;
    run += s.skip[il] ? 0 : 1;
  }
  s.layers_run = run;
  if (added) s.label = fmt::format("{} + non-resident: skip {}", s.label.substr(0, s.label.find(':')), layer_list(s.skip));
  return run > 0;
}

}  // namespace

SkipSet make_skip_set(uint32_t n_layer, double ratio, SkipPattern pattern) {
  const uint32_t middle = n_layer - 2;
  const uint32_t s = std::clamp<uint32_t>(uint32_t(std::lround(ratio * middle)), 1, middle);
  SkipSet out;
  out.skip.assign(n_layer, 0);
  const char* name = "alt";
  if (pattern == SkipPattern::alt) {
    // The centre of each of s equal slices of the middle layers.
    for (uint32_t i = 0; i < s; ++i) out.skip[1 + uint32_t((i + 0.5) * middle / s)] = 1;
  } else {
    name = pattern == SkipPattern::mid ? "mid" : "late";
    const uint32_t start = pattern == SkipPattern::mid ? 1 + (middle - s) / 2 : n_layer - 1 - s;
    for (uint32_t i = 0; i < s; ++i) out.skip[start + i] = 1;
  }
  out.layers_run = n_layer - s;
  out.label = fmt::format("{} {:.2f}: skip {}", name, ratio, layer_list(out.skip));
  return out;
}

std::vector<SkipSet> subset_candidates(uint32_t n_layer, std::span<const double> ratios,
                                       std::span<const uint8_t> must_skip) {
  std::vector<SkipSet> out;
  auto add = [&](SkipSet s) {
    for (const auto& o : out)
      if (o.skip == s.skip) return;
    out.push_back(std::move(s));
  };
  if (ratios.empty() || n_layer < 3) return out;
  const bool restrict = must_skip.size() == n_layer &&
                        std::any_of(must_skip.begin(), must_skip.end(), [](uint8_t m) { return m != 0; });
  if (restrict) {  // "resident": nothing skipped but the non-resident layers
    SkipSet resident;
    resident.skip.assign(n_layer, 0);
    if (add_must_skip(resident, must_skip)) {
      resident.label = "resident: skip " + layer_list(resident.skip);
      add(std::move(resident));
    }
  }
  auto add_pattern = [&](double r, SkipPattern p) {
    SkipSet s = make_skip_set(n_layer, r, p);
    if (!restrict || add_must_skip(s, must_skip)) add(std::move(s));
  };
  add_pattern(ratios[ratios.size() / 2], SkipPattern::alt);  // the default (after "resident")
  for (double r : ratios)
    for (SkipPattern p : {SkipPattern::alt, SkipPattern::mid, SkipPattern::late}) add_pattern(r, p);
  if (restrict && out.empty()) return subset_candidates(n_layer, ratios);
  return out;
}

SubsetChooser::SubsetChooser(std::vector<SkipSet> arms, uint64_t seed, Policy policy)
    : arms_(std::move(arms)), policy_(policy), rng_(seed, /*stream=*/0x5b5e7), accept_(arms_.size()),
      step_cost_(0.0), n_layer_(arms_.empty() ? 0 : uint32_t(arms_[0].skip.size())) {
  // The default first, then the others in a seeded order (Fisher-Yates).
  for (size_t i = 0; i < arms_.size(); ++i) warmup_order_.push_back(i);
  for (size_t i = warmup_order_.size(); i > 2; --i)
    std::swap(warmup_order_[i - 1], warmup_order_[1 + rng_.next_u32() % (i - 1)]);
  // A step's cost is proportional to the layers it runs until two arms' costs are measured.
  const uint32_t run0 = arms_.empty() ? 1 : std::max(1u, arms_[0].layers_run);
  step_cost_ = CostEstimate(1.0 / run0);
}

double SubsetChooser::step_seconds(size_t arm, double t_full_step) const {
  if (step_cost_.known()) return step_cost_.predict(arms_[arm].layers_run);
  return n_layer_ ? t_full_step * arms_[arm].layers_run / n_layer_ : t_full_step;
}

double SubsetChooser::value(size_t arm, uint32_t k, double t_verify, double t_full_step) const {
  const double cost = k * step_seconds(arm, t_full_step) + t_verify;
  const double tokens = expected_tokens(alpha(arm), k);
  return cost > 0 ? tokens / cost : tokens;
}

size_t SubsetChooser::best(uint32_t k, double t_verify, double t_full_step) const {
  size_t b = 0;
  for (size_t i = 1; i < arms_.size(); ++i)
    if (value(i, k, t_verify, t_full_step) > value(b, k, t_verify, t_full_step)) b = i;
  return b;
}

size_t SubsetChooser::choose(uint32_t k, double t_verify, double t_full_step) {
  const uint64_t t = rounds_++;
  if (t < arms_.size()) return warmup_order_[t];
  if (t < policy_.budget) {
    const double span = double(policy_.budget - arms_.size());
    const double eps = policy_.epsilon * (1.0 - double(t - arms_.size()) / span);
    if (rng_.uniform() < eps) return rng_.next_u32() % arms_.size();
  }
  return best(k, t_verify, t_full_step);
}

void SubsetChooser::observe_acceptance(size_t arm, uint32_t drafted, uint32_t accepted) {
  accept_[arm].observe(drafted, accepted);
}

void SubsetChooser::observe_step(size_t arm, double seconds) { step_cost_.observe(arms_[arm].layers_run, seconds); }

}  // namespace strata::spec
