#include "spec/adaptive.h"

#include <algorithm>

namespace strata::spec {

void AcceptanceEstimate::observe(uint32_t drafted, uint32_t accepted) {
  if (drafted == 0) return;
  accepted_ = accepted_ * decay_ + accepted;
  rejected_ = rejected_ * decay_ + (accepted < drafted ? 1 : 0);
}

void CostEstimate::observe(uint32_t rows, double seconds) {
  const double n = rows;
  w_ = w_ * decay_ + 1;
  sn_ = sn_ * decay_ + n;
  snn_ = snn_ * decay_ + n * n;
  st_ = st_ * decay_ + seconds;
  snt_ = snt_ * decay_ + n * seconds;
}

double CostEstimate::predict(uint32_t rows) const {
  if (w_ <= 0) return 0;
  const double mn = sn_ / w_, mt = st_ / w_;
  const double var = snn_ / w_ - mn * mn;
  // Too little spread in the row counts for a slope: assume the prior.
  double slope = var > 0.25 ? (snt_ / w_ - mn * mt) / var : prior_slope_ * mt;
  slope = std::max(slope, 0.0);  // timing noise must not make long verifies look free
  return std::max(mt + slope * (double(rows) - mn), 0.05 * mt);
}

double expected_tokens(double a, uint32_t k) {
  double e = 1, p = 1;
  for (uint32_t i = 0; i < k; ++i) e += (p *= a);
  return e;
}

}  // namespace strata::spec
