// The AVX2 lanes of gated_act_impl.h's scalar form: the same operations in the same order, eight
// elements at a time, so the same bits (tests/kernels/test_ops.cpp). Compiled with -mavx2 and
// -ffp-contract=off, without -mfma (every multiply and add rounds on its own, as in the scalar
// form). Called only when cpu_features().avx2; the last n % 8 elements take the scalar form.
#include <immintrin.h>

#include "kernels/cpu/fast_exp_avx2.h"
#include "kernels/cpu/gated_act_impl.h"

namespace strata::kernels::cpu {
namespace {

namespace ga = gated_act;

// gated_act::sigmoid_form, eight lanes.
inline __m256 sigmoid_form8(__m256 g, __m256 t, __m256 u) {
  const __m256 v = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), fast_exp::exp_clamped8(t))), u);
  return _mm256_and_ps(v, _mm256_cmp_ps(t, _mm256_set1_ps(fast_exp::kExpHi), _CMP_LE_OQ));
}

}  // namespace

void silu_mul_range_avx2(float* gate, const float* up, int64_t i0, int64_t i1) {
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
    _mm256_storeu_ps(gate + i, sigmoid_form8(g, _mm256_sub_ps(_mm256_setzero_ps(), g), u));
  }
  for (; i < i1; ++i) gate[i] = ga::silu_mul1(gate[i], up[i]);
}

void gelu_tanh_mul_range_avx2(float* gate, const float* up, int64_t i0, int64_t i1) {
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(ga::kGeluCubic), g), g), g);
    const __m256 z = _mm256_mul_ps(_mm256_set1_ps(ga::kSqrt2OverPi), _mm256_add_ps(g, g3));
    _mm256_storeu_ps(gate + i, sigmoid_form8(g, _mm256_mul_ps(_mm256_set1_ps(-2.0f), z), u));
  }
  for (; i < i1; ++i) gate[i] = ga::gelu_tanh_mul1(gate[i], up[i]);
}

}  // namespace strata::kernels::cpu
