// The largest value of a range of floats and where it first occurs: the greedy sampler's argmax
// (runtime/sampler.h) over one range, or over pieces of it merged, so a thread team's parts can
// each take the maximum of the rows they just wrote (the head's logits, gemv_q8.h) and the caller
// merges one candidate per part instead of scanning the vocabulary alone.
//
// The rule: the first index of the largest value, compared with > (NaNs are passed over, -0 ties
// +0), and no index where no element is above -inf (empty, all -inf, all NaN). Pieces merged in
// any order and any grouping give max_at of their union.
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

namespace strata::kernels::cpu {

struct MaxAt {
  float value = -std::numeric_limits<float>::infinity();
  int64_t index = -1;  // -1: no element above -inf
};

// Over x[i0, i1) (indices are absolute: x is the whole row).
MaxAt max_at(const float* x, int64_t i0, int64_t i1);

// The larger of two candidates of disjoint ranges; of equal values, the smaller index.
inline MaxAt max_at_merge(MaxAt a, MaxAt b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  return b.value > a.value || (b.value == a.value && b.index < a.index) ? b : a;
}
// The candidate of the union of disjoint ranges (a team job's parts).
inline MaxAt max_at_merge(std::span<const MaxAt> parts) {
  MaxAt m;
  for (const MaxAt& p : parts) m = max_at_merge(m, p);
  return m;
}

}  // namespace strata::kernels::cpu
