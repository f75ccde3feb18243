// silu_mul_range / gelu_tanh_mul_range (ops.h): gated_act_impl.h's scalar form, or its AVX2 lanes
// (gated_act_avx2.cpp, the same bits) where cpu_features() has AVX2.
#include "core/cpu_features.h"
#include "kernels/cpu/gated_act_impl.h"
#include "kernels/cpu/ops.h"

namespace strata::kernels::cpu {

void silu_mul_range(float* gate, const float* up, int64_t i0, int64_t i1) {
  if (cpu_features().avx2) return silu_mul_range_avx2(gate, up, i0, i1);
  for (int64_t i = i0; i < i1; ++i) gate[i] = gated_act::silu_mul1(gate[i], up[i]);
}

void gelu_tanh_mul_range(float* gate, const float* up, int64_t i0, int64_t i1) {
  if (cpu_features().avx2) return gelu_tanh_mul_range_avx2(gate, up, i0, i1);
  for (int64_t i = i0; i < i1; ++i) gate[i] = gated_act::gelu_tanh_mul1(gate[i], up[i]);
}

}  // namespace strata::kernels::cpu
