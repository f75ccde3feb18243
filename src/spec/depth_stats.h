// Acceptance per draft depth: for a drafter, P(draft token i accepted | drafts 1..i-1 accepted)
// for i = 1..k. One overall acceptance rate hides where drafts fail: a drafter right 90% of the
// time at depth 1 but 40% at depth 5 wants short drafts, one with a flat curve wants long ones
// (and a token tree wants its shape from exactly this curve).
//
// A verify pass that drafted k tokens and accepted the first m of them (m <= k) reached depths
// 1 .. min(m + 1, k): draft i was judged only if every draft before it was accepted. Depths
// 1..m count as accepted, depth m + 1 (when m < k) as rejected; deeper drafts were never judged
// and count nowhere. Rounds that drafted fewer tokens (a drafter stopping early on low
// confidence, a lookup with a short continuation) simply reach fewer depths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::spec {

class DepthStats {
 public:
  // One verify pass: `drafted` tokens proposed, the first `accepted` of them kept (accepted <= drafted).
  void observe(uint32_t drafted, uint32_t accepted);

  size_t max_depth() const { return reached_.size(); }  // deepest draft ever judged
  // Depth i, 1-based: passes in which draft i was judged / accepted.
  uint64_t reached(size_t i) const { return i >= 1 && i <= reached_.size() ? reached_[i - 1] : 0; }
  uint64_t accepted(size_t i) const { return i >= 1 && i <= accepted_.size() ? accepted_[i - 1] : 0; }
  // accepted(i) / reached(i); 0 when depth i was never judged.
  double rate(size_t i) const;
  // {"depth": i, "reached": n, "accepted": n, "rate": p} per depth 1..max_depth().
  nlohmann::json to_json() const;
  // "d1 0.92 (120) d2 0.81 (110) ..." : rate and passes that reached each depth.
  std::string text() const;

 private:
  std::vector<uint64_t> reached_, accepted_;  // index i - 1 for depth i
};

}  // namespace strata::spec
