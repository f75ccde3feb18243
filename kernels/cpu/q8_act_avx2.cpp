// quantize_q8_act's AVX2 body (q8_act.h): the scalar code's operations, eight lanes at a time, so
// the codes, scales and sums are the same bits (tests/kernels/test_q8_act.cpp). It runs on the
// calling thread before every int8 matmul of a decode step, between the thread team's jobs, where
// the scalar loop cost ~2 ns an element (1.1 us for a 512-wide model's input; ~50 calls a step).
// Compiled with -mavx2 and -ffp-contract=off, without -mfma: x * id, + 1.5 * 2^23, - 1.5 * 2^23
// must round one at a time as the scalar code rounds them (a fused multiply-add rounds once and
// would move ties). Called only when cpu_features().avx2.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/q8_act.h"
#include "kernels/cpu/q8_act_impl.h"

namespace strata::kernels::cpu {

namespace {

// Horizontal max and sum of eight lanes (exact: max, and integer adds, in any order).
float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}
int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_q8_groups_avx2(const float* xc, int64_t n, int64_t g0, int64_t g1, int8_t* qc, float* d, int16_t* s,
                             float* sf) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 magic = _mm256_set1_ps(kQ8RoundMagic), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i ones = _mm256_set1_epi16(1);
  // packs_epi32 then packs_epi16 leave 4-byte words in the order 0, 2, 4, 6, 1, 3, 5, 7 of the group.
  const __m256i unscramble = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t g = g0; g < g1; ++g) {
    const float* xg = xc + g * kQ8Group;
    __m256 v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(xg + 8 * j);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                                   _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    const float amax = hmax(m);
    const float dg = amax / 127.0f;
    const float id = dg > 0 ? 1.0f / dg : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i c[4];
    for (int j = 0; j < 4; ++j) {
      // round_half_even(x * id), then the clamp: min(hi, max(lo, r)) as std::clamp for every finite r.
      __m256 r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v[j], vid), magic), magic);
      r = _mm256_min_ps(hi, _mm256_max_ps(lo, r));
      c[j] = _mm256_cvttps_epi32(r);  // r is a whole number: truncation is exact
    }
    const __m256i h0 = _mm256_packs_epi32(c[0], c[1]), h1 = _mm256_packs_epi32(c[2], c[3]);  // halves, as int16
    const __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(h0, h1), unscramble);  // element order
    alignas(32) int8_t qg[kQ8Group];
    _mm256_store_si256(reinterpret_cast<__m256i*>(qg), q);
    store_q8_group(qc, n, g, qg);
    const int s0 = hsum(_mm256_madd_epi16(h0, ones)), s1 = hsum(_mm256_madd_epi16(h1, ones));
    d[g] = dg;
    s[2 * g] = int16_t(s0);
    s[2 * g + 1] = int16_t(s1);
    sf[g] = float(s0 + s1) * dg;
  }
}

}  // namespace strata::kernels::cpu
