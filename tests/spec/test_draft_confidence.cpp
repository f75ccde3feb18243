// The drafters' confidence cut (spec/self_draft.h has_probability) against the softmax
// probability computed in full, in double: on flat, peaked and mixed rows, at thresholds on both
// sides of each candidate's probability, for the argmax and for lower-ranked candidates.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "spec/self_draft.h"

using namespace strata;

namespace {

double probability(const std::vector<float>& l, size_t token) {
  double mx = l[0];
  for (float x : l) mx = std::max(mx, double(x));
  double sum = 0;
  for (float x : l) sum += std::exp(double(x) - mx);
  return std::exp(double(l[token]) - mx) / sum;
}

size_t argmax(const std::vector<float>& l) { return size_t(std::max_element(l.begin(), l.end()) - l.begin()); }

}  // namespace

TEST_CASE("has_probability agrees with the full softmax on either side of the threshold", "[spec]") {
  Rng rng(11);
  for (int row = 0; row < 60; ++row) {
    const size_t n = row % 3 == 0 ? 262144 : 1000 + rng.next_u32() % 5000;
    const float spread = row % 4 == 0 ? 0.1f : row % 4 == 1 ? 3.0f : row % 4 == 2 ? 12.0f : 40.0f;
    std::vector<float> l(n);
    for (float& x : l) x = spread * (float(rng.next_u32() % 20000) / 10000.0f - 1.0f);
    if (row % 5 == 0) l[rng.next_u32() % n] += 25.0f;  // one confident token
    const size_t top = argmax(l);
    // The argmax and a few other candidates, at 0.9x and 1.1x their exact probability.
    for (size_t token : {top, size_t(rng.next_u32() % n), size_t(0)}) {
      const double p = probability(l, token);
      INFO("row " << row << " n " << n << " spread " << spread << " token " << token << " p " << p);
      if (p > 1e-30) {
        CHECK(spec::has_probability(l, int32_t(top), int32_t(token), float(std::min(0.9 * p, 1.0))));
        if (1.1 * p <= 1.0) CHECK_FALSE(spec::has_probability(l, int32_t(top), int32_t(token), float(1.1 * p)));
      }
      CHECK(spec::has_probability(l, int32_t(top), int32_t(token), 0.0f));  // no cut
    }
  }
}

TEST_CASE("has_probability: a one-entry row and exact ties", "[spec]") {
  const std::vector<float> one{3.0f};
  CHECK(spec::has_probability(one, 0, 0, 1.0f));
  const std::vector<float> tie{2.0f, 2.0f, -100.0f};  // 0.5 each
  CHECK(spec::has_probability(tie, 0, 1, 0.49f));
  CHECK_FALSE(spec::has_probability(tie, 0, 1, 0.51f));
}
