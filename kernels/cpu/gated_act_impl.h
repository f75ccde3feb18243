// The FFN's gated activations, one element at a time (ops.h silu_mul / gelu_tanh_mul): the scalar
// form that gated_act.cpp runs and gated_act_avx2.cpp's lanes repeat operation for operation, so
// both give the same bits (tests/kernels/test_ops.cpp). Internal to kernels/cpu.
//
// Both use e^t from fast_exp.h (no libm):
//   silu(g) u = g / (1 + e^-g) u,   gelu_tanh(g) u = g / (1 + e^-2z) u,  z = sqrt(2/pi) (g + 0.044715 g^3)
// (0.5 (1 + tanh z) = 1 / (1 + e^-2z): the same function as the tanh form, without its cancellation
// at g << 0); below t = -87 the sum is 1 either way, and above 88 the result is flushed to zero
// (sigmoid_form).
#pragma once

#include <cstdint>

#include "kernels/cpu/fast_exp.h"

namespace strata::kernels::cpu::gated_act {

inline constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluCubic = 0.044715f;

// g / (1 + e^t) u, flushed to +0 where t > kExpHi (or NaN): there the true value is below
// |g u| e^-88 = 6e-39 |g u|, while the clamped e^t would leave g / 1.65e38 (-1.8 for g = -3e38).
inline float sigmoid_form(float g, float t, float u) {
  const float v = g / (1.0f + fast_exp::exp_clamped(t)) * u;
  return t <= fast_exp::kExpHi ? v : 0.0f;
}
inline float silu_mul1(float g, float u) { return sigmoid_form(g, -g, u); }
inline float gelu_tanh_mul1(float g, float u) {
  const float z = kSqrt2OverPi * (g + kGeluCubic * g * g * g);
  return sigmoid_form(g, -2.0f * z, u);
}

}  // namespace strata::kernels::cpu::gated_act

namespace strata::kernels::cpu {
// gated_act_avx2.cpp (only where cpu_features().avx2): the ops.h range functions' vector bodies.
void silu_mul_range_avx2(float* gate, const float* up, int64_t i0, int64_t i1);
void gelu_tanh_mul_range_avx2(float* gate, const float* up, int64_t i0, int64_t i1);
}  // namespace strata::kernels::cpu
