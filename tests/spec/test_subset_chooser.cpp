// The layer-subset drafter's candidates and its online choice of skip set (spec/subset_chooser.h):
// the masks keep the first and last layers, and given synthetic observations (per-token
// acceptance drawn from a known rate per skip set, step cost from the layers run) the chooser
// settles on the skip set of the highest true tokens-per-second value, deterministically.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/rng.h"
#include "spec/subset_chooser.h"

using namespace strata;

namespace {

std::vector<int> skipped(const spec::SkipSet& s) {
  std::vector<int> out;
  for (size_t i = 0; i < s.skip.size(); ++i)
    if (s.skip[i]) out.push_back(int(i));
  return out;
}

// A round of k drafts with per-token acceptance a: the accepted prefix length.
uint32_t draw_accepted(Rng& rng, double a, uint32_t k) {
  uint32_t m = 0;
  while (m < k && rng.uniform() < a) ++m;
  return m;
}

}  // namespace

TEST_CASE("subset candidates: patterns, ratios, first and last layers always run", "[spec]") {
  using V = std::vector<int>;
  CHECK(skipped(spec::make_skip_set(12, 0.5, spec::SkipPattern::alt)) == V{2, 4, 6, 8, 10});
  CHECK(skipped(spec::make_skip_set(12, 0.5, spec::SkipPattern::mid)) == V{3, 4, 5, 6, 7});
  CHECK(skipped(spec::make_skip_set(12, 0.25, spec::SkipPattern::late)) == V{8, 9, 10});
  CHECK(skipped(spec::make_skip_set(12, 0.4, spec::SkipPattern::alt)) == V{2, 4, 7, 9});
  CHECK(spec::make_skip_set(12, 0.4, spec::SkipPattern::alt).layers_run == 8);
  CHECK(spec::make_skip_set(12, 0.5, spec::SkipPattern::alt).label == "alt 0.50: skip 2,4,6,8,10");
  // At least one layer, at most all the middle ones.
  CHECK(skipped(spec::make_skip_set(3, 0.1, spec::SkipPattern::alt)) == V{1});
  CHECK(skipped(spec::make_skip_set(5, 0.99, spec::SkipPattern::mid)) == V{1, 2, 3});

  const auto c12 = spec::subset_candidates(12, spec::kDefaultSkipRatios);
  REQUIRE(c12.size() == 9);
  CHECK(c12[0].label == "alt 0.40: skip 2,4,7,9");  // the default: alt at the middle ratio
  for (const auto& s : c12) {
    INFO(s.label);
    REQUIRE(s.skip.size() == 12);
    CHECK(s.skip.front() == 0);
    CHECK(s.skip.back() == 0);
    CHECK(s.layers_run == 12 - skipped(s).size());
  }
  // Small models: duplicate masks are dropped (4 layers: skip 1 or skip 2).
  const auto c4 = spec::subset_candidates(4, spec::kDefaultSkipRatios);
  REQUIRE(c4.size() == 2);
  CHECK(c4[0].skip != c4[1].skip);
  const double fixed[] = {0.5};
  CHECK(spec::subset_candidates(12, fixed).size() == 3);
}

TEST_CASE("subset candidates under a VRAM budget skip every non-resident layer", "[spec]") {
  using V = std::vector<int>;
  // 12 layers, the last three streamed (as a plan that keeps the early layers resident).
  std::vector<uint8_t> must(12, 0);
  must[9] = must[10] = must[11] = 1;
  const auto c = spec::subset_candidates(12, spec::kDefaultSkipRatios, must);
  REQUIRE(!c.empty());
  CHECK(c[0].label == "resident: skip 9,10,11");
  CHECK(skipped(c[0]) == V{9, 10, 11});
  CHECK(c[0].layers_run == 9);
  for (size_t i = 0; i < c.size(); ++i) {
    INFO(c[i].label);
    REQUIRE(c[i].skip.size() == 12);
    CHECK((c[i].skip[9] && c[i].skip[10] && c[i].skip[11]));
    CHECK(c[i].skip.front() == 0);
    CHECK(c[i].layers_run == 12 - skipped(c[i]).size());
    for (size_t j = 0; j < i; ++j) CHECK(c[j].skip != c[i].skip);
  }
  // The default pattern follows "resident", with the streamed layers added to its own.
  REQUIRE(c.size() >= 2);
  CHECK(c[1].label == "alt 0.40 + non-resident: skip 2,4,7,9,10,11");
  // Patterns that overlap once the streamed layers are added collapse into one (no two alike,
  // above); none runs no layer at all.
  for (const auto& s : c) CHECK(s.layers_run > 0);

  // Every layer streamed: no candidate could run a layer, so the unrestricted ones come back
  // (drafts then stream weights, as before).
  const std::vector<uint8_t> all(12, 1);
  const auto u = spec::subset_candidates(12, spec::kDefaultSkipRatios, all);
  const auto plain = spec::subset_candidates(12, spec::kDefaultSkipRatios);
  REQUIRE(u.size() == plain.size());
  for (size_t i = 0; i < u.size(); ++i) CHECK(u[i].skip == plain[i].skip);
  // All resident (or no placement): the unrestricted candidates.
  const auto none = spec::subset_candidates(12, spec::kDefaultSkipRatios, std::vector<uint8_t>(12, 0));
  REQUIRE(none.size() == plain.size());
  CHECK(none[0].label == plain[0].label);
}

TEST_CASE("subset chooser settles on the best skip set from synthetic observations", "[spec]") {
  // 12 layers, k = 6 drafts, a verify pass costs 3 full steps, a step 0.1 ms per layer + 0.2 ms
  // for the head. True acceptances favour one mid-ratio set that is neither the default nor the
  // cheapest: the chooser must weigh acceptance against cost.
  auto arms = spec::subset_candidates(12, spec::kDefaultSkipRatios);
  const size_t n = arms.size();
  std::vector<double> alpha(n);
  for (size_t i = 0; i < n; ++i) alpha[i] = 0.3 + 0.02 * double(i);
  const size_t target = 4;
  alpha[target] = 0.85;
  const uint32_t k = 6;
  auto step_s = [&](size_t i) { return 1e-4 * arms[i].layers_run + 2e-4; };
  const double t_full = 1e-4 * 12 + 2e-4, t_verify = 3 * t_full;
  auto true_value = [&](size_t i) { return spec::expected_tokens(alpha[i], k) / (k * step_s(i) + t_verify); };
  size_t want = 0;
  for (size_t i = 1; i < n; ++i)
    if (true_value(i) > true_value(want)) want = i;
  REQUIRE(want == target);

  auto run = [&](uint64_t seed, std::vector<size_t>& picks) {
    spec::SubsetChooser ch(arms, seed);
    Rng world(seed + 1);
    for (int r = 0; r < 300; ++r) {
      const size_t a = ch.choose(k, t_verify, t_full);
      picks.push_back(a);
      for (uint32_t s = 0; s < k; ++s) ch.observe_step(a, step_s(a));
      ch.observe_acceptance(a, k, draw_accepted(world, alpha[a], k));
    }
    return ch.best(k, t_verify, t_full);
  };
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    INFO("seed " << seed);
    std::vector<size_t> picks;
    CHECK(run(seed, picks) == target);
    // Warm-up: every arm once, the default first.
    CHECK(picks[0] == 0);
    std::vector<size_t> first(picks.begin(), picks.begin() + long(n));
    std::sort(first.begin(), first.end());
    for (size_t i = 0; i < n; ++i) CHECK(first[i] == i);
    // Settled: the last 100 rounds are all the best arm.
    CHECK(std::count(picks.end() - 100, picks.end(), target) == 100);
    // Deterministic given the seed and the observations.
    std::vector<size_t> again;
    run(seed, again);
    CHECK(again == picks);
  }
}

TEST_CASE("subset chooser: equal acceptance favours the cheaper skip set and the cost prior is the layer fraction", "[spec]") {
  auto arms = spec::subset_candidates(12, spec::kDefaultSkipRatios);
  spec::SubsetChooser ch(arms, 7);
  // Unmeasured: a step costs the full step times the fraction of layers run.
  CHECK(ch.step_seconds(0, 1.2) == Approx(1.2 * arms[0].layers_run / 12));
  for (size_t i = 0; i < arms.size(); ++i) {
    ch.observe_step(i, 1e-3 * arms[i].layers_run);
    ch.observe_acceptance(i, 4, 2);
  }
  size_t cheapest = 0;
  for (size_t i = 1; i < arms.size(); ++i)
    if (arms[i].layers_run < arms[cheapest].layers_run) cheapest = i;
  CHECK(arms[ch.best(4, 0.02, 0.012)].layers_run == arms[cheapest].layers_run);
  CHECK(ch.step_seconds(cheapest, 0.012) == Approx(1e-3 * arms[cheapest].layers_run).epsilon(1e-6));
}
