// exp_shifted's AVX2 lanes (attention_exp.cpp): fast_exp.h's exp_weight eight scores at a time,
// the last n % 8 by the scalar form: the same bits. Built with -mavx2 -ffp-contract=off.
#include <immintrin.h>

#include "kernels/cpu/attention_head.h"
#include "kernels/cpu/fast_exp_avx2.h"

namespace strata::kernels::cpu {

void exp_shifted_avx2(float* scores, int64_t n, float max) {
  const __m256 m = _mm256_set1_ps(max);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(scores + j, fast_exp::exp_weight8(_mm256_sub_ps(_mm256_loadu_ps(scores + j), m)));
  for (; j < n; ++j) scores[j] = fast_exp::exp_weight(scores[j] - max);
}

}  // namespace strata::kernels::cpu
