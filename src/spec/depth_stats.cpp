#include "spec/depth_stats.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace strata::spec {

void DepthStats::observe(uint32_t drafted, uint32_t accepted) {
  assert(accepted <= drafted);
  const size_t judged = std::min<size_t>(size_t(accepted) + 1, drafted);
  if (judged > reached_.size()) reached_.resize(judged, 0), accepted_.resize(judged, 0);
  for (size_t i = 0; i < judged; ++i) ++reached_[i];
  for (size_t i = 0; i < accepted; ++i) ++accepted_[i];
}

double DepthStats::rate(size_t i) const {
  const uint64_t n = reached(i);
  return n ? double(accepted(i)) / double(n) : 0.0;
}

nlohmann::json DepthStats::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 1; i <= max_depth(); ++i)
    out.push_back({{"depth", i}, {"reached", reached(i)}, {"accepted", accepted(i)}, {"rate", rate(i)}});
  return out;
}

std::string DepthStats::text() const {
  std::string s;
  for (size_t i = 1; i <= max_depth(); ++i)
    s += fmt::format("{}d{} {:.2f} ({})", i > 1 ? " " : "", i, rate(i), reached(i));
  return s;
}

}  // namespace strata::spec
