// fast_exp.h's scalar forms in eight AVX2 lanes, operation for operation (the same bits). Include
// only from files built with -mavx2 and -ffp-contract=off, and call only where cpu_features().avx2.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/fast_exp.h"

namespace strata::kernels::cpu::fast_exp {

inline __m256 exp_clamped8(__m256 t) {
  t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(t, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 p = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(kP0), r), _mm256_set1_ps(kP1));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP5));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// exp_weight: e where t >= kExpLo, t itself where t is NaN, else +0.
inline __m256 exp_weight8(__m256 t) {
  const __m256 e = _mm256_and_ps(exp_clamped8(t), _mm256_cmp_ps(t, _mm256_set1_ps(kExpLo), _CMP_GE_OQ));
  return _mm256_blendv_ps(e, t, _mm256_cmp_ps(t, t, _CMP_UNORD_Q));
}

}  // namespace strata::kernels::cpu::fast_exp
