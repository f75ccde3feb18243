// One query head of CPU decode attention over f32 K and V slices (attention.cpp's per-query path),
// and the tree visibility of one query. Internal to kernels/cpu/attention*.cpp.
#pragma once

#include <cstdint>

#include "kernels/cpu/kv_slices.h"

namespace strata::kernels::cpu {

// A query's tree visibility (TreeMask): all keys unless `on`.
struct TreeRow {
  bool on = false;
  uint64_t bits = 0;
  int64_t first = 0;
  bool sees(int64_t j) const {
    const int64_t d = j - first;
    return !on || d < 0 || (d < 64 && ((bits >> d) & 1u) != 0);
  }
};

// The AVX-512 path of attend_one for f32 K and V: the same operations in the same order (each
// q.k as dot_f32_avx512 sums it, scaled; the max; expf and the double denominator key by key; out
// as 0 + p * v for each key in order, a multiply then an add, never fused), so the same bits, with
// the K dot inlined and out held in registers across the keys instead of a load, add and store of
// it per key. Keys lo .. lo + n - 1, from slot lo % capacity on. Needs head_dim % 16 == 0 and
// head_dim <= kHeadAvx512MaxDim; scores: n floats of scratch. Call only where the CPU has AVX-512
// and best_dot(F32) is dot_f32_avx512 (attention.cpp checks both).
inline constexpr int64_t kHeadAvx512MaxDim = 256;
void attend_head_f32_avx512(const float* q, const KvSlices& k, const KvSlices& v, int64_t capacity, int64_t kv_head,
                            int64_t lo, int64_t n, float scale, const TreeRow& tree, float* scores, float* out);

}  // namespace strata::kernels::cpu
