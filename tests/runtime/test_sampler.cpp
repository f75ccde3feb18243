#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "runtime/sampler.h"
#include "test_util.h"

using namespace strata;
using runtime::Sampler;
using runtime::SamplerParams;

namespace {
std::vector<float> logits_of(std::vector<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}
}  // namespace

TEST_CASE("greedy and top_k = 1 pick the argmax", "[sampler]") {
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f};
  Sampler greedy({.temperature = 0}, l.size());
  CHECK(greedy.sample(l) == 1);
  Sampler k1({.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0, .seed = test::fresh_seed()}, l.size());
  for (int i = 0; i < 20; ++i) {
    auto copy = l;
    CHECK(k1.sample(copy) == 1);
  }
}

TEST_CASE("the same seed gives the same tokens and another seed differs", "[sampler]") {
  const auto base = logits_of({0.2, 0.2, 0.2, 0.2, 0.2});
  auto draw = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = seed}, base.size());
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = base;
      out.push_back(s.sample(l));
    }
    return out;
  };
  CHECK(draw(7) == draw(7));
  CHECK(draw(7) != draw(8));
}

TEST_CASE("filters keep what they should", "[sampler]") {
  const auto l = logits_of({0.5, 0.25, 0.15, 0.07, 0.03});
  auto dist = [&](SamplerParams p) {
    Sampler s(p, l.size());
    auto copy = l;
    return s.distribution(copy);
  };
  auto top_p = dist({.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .min_p = 0});
  CHECK(top_p[0] == Approx(0.5 / 0.9));
  CHECK(top_p[2] == Approx(0.15 / 0.9));
  CHECK(top_p[3] == 0.0f);
  auto min_p = dist({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.2f});  // >= 0.1
  CHECK(min_p[2] == Approx(0.15 / 0.9));
  CHECK(min_p[3] == 0.0f);
  auto top_k = dist({.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .min_p = 0});
  CHECK(top_k[0] == Approx(0.5 / 0.75));
  CHECK(top_k[2] == 0.0f);
  auto hot = dist({.temperature = 2.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0});
  double z = 0;
  for (double p : {0.5, 0.25, 0.15, 0.07, 0.03}) z += std::sqrt(p);
  CHECK(hot[0] == Approx(std::sqrt(0.5) / z));
  CHECK(std::accumulate(hot.begin(), hot.end(), 0.0) == Approx(1.0));
}

TEST_CASE("sampled frequencies follow the distribution", "[sampler]") {
  const std::vector<double> p = {0.4, 0.3, 0.2, 0.1};
  const auto l = logits_of(p);
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = seed}, l.size());
  const int n = 40000;
  std::vector<int> count(p.size(), 0);
  for (int i = 0; i < n; ++i) {
    auto copy = l;
    ++count[size_t(s.sample(copy))];
  }
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) chi2 += std::pow(count[i] - n * p[i], 2) / (n * p[i]);
  // 3 degrees of freedom: P(chi2 > 21.1) = 1e-4, so a correct sampler fails 1 run in 10000.
  CHECK(chi2 < 21.1);
}

TEST_CASE("repetition penalty lowers recent tokens", "[sampler]") {
  std::vector<float> l = {2.0f, 1.9f, -1.0f};
  Sampler s({.temperature = 0, .repeat_penalty = 1.5f, .repeat_last_n = 4}, l.size());
  s.accept(0);
  CHECK(s.sample(l) == 1);  // 2.0 / 1.5 < 1.9
  CHECK(l[2] == -1.0f);
  SamplerParams bad{.top_p = 0.0f};
  CHECK(bad.validate().message().find("--top-p") != std::string::npos);
}

// runtime::argmax is a hand-vectorised pass (lanes of strided maxima): it must give
// std::max_element's answer -- the first of equal maxima -- on rows with many ties, -inf
// entries, a maximum in the tail past the last full lane group, and every length 0..40.
TEST_CASE("argmax gives the first largest logit, as max_element", "[sampler]") {
  Rng rng(29);
  const float inf = std::numeric_limits<float>::infinity();
  for (int row = 0; row < 400; ++row) {
    const size_t n = row < 41 ? size_t(row) : 1 + rng.next_u32() % 70000;
    std::vector<float> l(n);
    const uint32_t levels = 1 + rng.next_u32() % 6;  // few distinct values: ties everywhere
    for (float& x : l) x = rng.next_u32() % 3 == 0 ? -inf : float(rng.next_u32() % levels) - 3.0f;
    if (row % 7 == 0)
      for (float& x : l) x = -inf;
    if (row % 5 == 0 && n > 0) l[n - 1] = 100.0f;  // the maximum in the tail
    const int32_t want = n == 0 ? 0 : int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    INFO("row " << row << " n " << n);
    CHECK(runtime::argmax(l) == want);
  }
}

// A caller's known argmax (Engine::last_argmax) is what greedy sampling returns where no penalty
// changes the logits; with a penalty, or when sampling, the logits decide.
TEST_CASE("greedy sampling takes a known argmax only where no penalty applies", "[sampler]") {
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f};
  Sampler greedy({.temperature = 0}, l.size());
  CHECK(greedy.sample(l, 3) == 3);  // trusted: the caller computed it from these logits
  CHECK(greedy.sample(l, -1) == 1);
  Sampler penalised({.temperature = 0, .repeat_penalty = 2.0f}, l.size());
  CHECK(penalised.sample(l, 1) == 1);  // nothing recent yet: no penalty
  penalised.accept(1);                 // token 1's logit halves to 1.0: token 3 leads
  auto copy = l;
  CHECK(penalised.sample(copy, 1) == 3);
  Sampler k1({.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0, .seed = test::fresh_seed()}, l.size());
  copy = l;
  CHECK(k1.sample(copy, 3) == 1);
}
