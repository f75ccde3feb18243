// The decode attention's softmax exponentials (attention_head.h exp_shifted): fast_exp.h's
// exp_weight per score, or its AVX2 lanes (attention_exp_avx2.cpp, the same bits) where
// cpu_features() has AVX2. Built with -ffp-contract=off (fast_exp.h).
#include "core/cpu_features.h"
#include "kernels/cpu/attention_head.h"
#include "kernels/cpu/fast_exp.h"

namespace strata::kernels::cpu {

void exp_shifted(float* scores, int64_t n, float max) {
  if (cpu_features().avx2) return exp_shifted_avx2(scores, n, max);
  for (int64_t j = 0; j < n; ++j) scores[j] = fast_exp::exp_weight(scores[j] - max);
}

}  // namespace strata::kernels::cpu
