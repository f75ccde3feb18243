// attention_head.h's AVX-512 head kernel. Compiled with -ffp-contract=off: GCC may fuse the
// intrinsics' vector multiply and add into an FMA otherwise, and attend_one rounds both.
#include <immintrin.h>

// GCC 12 warns inside _mm512_reduce_add_ps (its _mm512_extractf64x4_pd takes an undefined vector
// as the masked-off source): a false positive of the header, not of this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_head.h"
#include "kernels/cpu/dot_float_avx512.h"

namespace strata::kernels::cpu {
namespace {

// q.k: dot_f32_avx512's arithmetic (dot_float_avx512.h), its bits.
inline float dot_f32(const float* row, const float* x, int64_t n) { return dot_float_row(row, x, n, load16_f32); }

// out[c .. c + 16 * N) = sum over keys in order of p_j * v_j, from +0, in N registers.
template <int N>
void weighted_sum(const KvSlices& v, int64_t capacity, int64_t kv_head, const KeySpan& span, const float* p,
                  float inv, int64_t c, float* out) {
  __m512 acc[N];
  for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t j = 0, slot = span.first_slot(capacity); j < span.n; ++j) {
    const float* row = reinterpret_cast<const float*>(v.at(slot, kv_head)) + c;
    const __m512 pj = _mm512_set1_ps(p[j] * inv);
    for (int r = 0; r < N; ++r) acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(pj, _mm512_loadu_ps(row + 16 * r)));
    slot = span.next_slot(j, slot, capacity);
  }
  for (int r = 0; r < N; ++r) _mm512_storeu_ps(out + c + 16 * r, acc[r]);
}

// Scaled q.k of the span's keys into scores; their max. HD: head_dim where the compiler
// should see it (a common size: the dot's loops unrolled), else 0 and k.head_dim.
template <int64_t HD>
float key_scores(const float* q, const KvSlices& k, int64_t capacity, int64_t kv_head, const KeySpan& span,
                 float scale, const TreeRow& tree, float* scores) {
  const int64_t hd = HD ? HD : k.head_dim;
  float max_score = -INFINITY;
  for (int64_t j = 0, slot = span.first_slot(capacity); j < span.n; ++j) {
    scores[j] = tree.sees(span.key(j))
                    ? dot_f32(reinterpret_cast<const float*>(k.at(slot, kv_head)), q, hd) * scale
                    : -INFINITY;
    max_score = std::max(max_score, scores[j]);
    slot = span.next_slot(j, slot, capacity);
  }
  return max_score;
}

}  // namespace

void attend_head_f32_avx512(const float* q, const KvSlices& k, const KvSlices& v, int64_t capacity, int64_t kv_head,
                            const KeySpan& span, float scale, const TreeRow& tree, float* scores, float* out) {
  const int64_t hd = k.head_dim;
  const float max_score = hd == 64    ? key_scores<64>(q, k, capacity, kv_head, span, scale, tree, scores)
                          : hd == 128 ? key_scores<128>(q, k, capacity, kv_head, span, scale, tree, scores)
                                      : key_scores<0>(q, k, capacity, kv_head, span, scale, tree, scores);
  double denom = 0;
  for (int64_t j = 0; j < span.n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = float(1.0 / denom);
  // 64 dims (4 registers) at a time, then what is left in 16s.
  int64_t c = 0;
  for (; c + 64 <= hd; c += 64) weighted_sum<4>(v, capacity, kv_head, span, scores, inv, c, out);
  for (; c < hd; c += 16) weighted_sum<1>(v, capacity, kv_head, span, scores, inv, c, out);
}

}  // namespace strata::kernels::cpu
