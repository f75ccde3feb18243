// The FFN's gated activations, one element at a time (ops.h silu_mul / gelu_tanh_mul): the scalar
// form that gated_act.cpp runs and gated_act_avx2.cpp's lanes repeat operation for operation, so
// both give the same bits (tests/kernels/test_ops.cpp). Internal to kernels/cpu.
//
// Why not libm: std::tanh / std::exp cost ~17 ns an element here (a third of the embedded model's
// fused gate/up part, 12 x 1024 elements a token), and a call cannot be vectorised. Both use
//   silu(g) u = g / (1 + e^-g) u,   gelu_tanh(g) u = g / (1 + e^-2z) u,  z = sqrt(2/pi) (g + 0.044715 g^3)
// (0.5 (1 + tanh z) = 1 / (1 + e^-2z): the same function as the tanh form, without its cancellation
// at g << 0), with e^t from exp_clamped: within 2 ulp of e^t on [-87, 88] (Cody-Waite reduction by
// ln 2 and Cephes' expf polynomial, published constants), t clamped there first: e^88 is 1.65e38,
// so 1 + e^t never overflows and 2^n stays a normal float; below -87 the sum is 1 either way, and
// above 88 the result is flushed to zero (sigmoid_form).
// Every operation rounds on its own (the files build with -ffp-contract=off, and the vector code
// uses no FMA), which is what makes the scalar and the vector bits equal.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace strata::kernels::cpu::gated_act {

inline constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo; n hi is exact
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
inline constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluCubic = 0.044715f;

// max / min as _mm256_max_ps(a, b) / _mm256_min_ps(a, b) define them (b where either is NaN).
inline float max_like_simd(float a, float b) { return a > b ? a : b; }
inline float min_like_simd(float a, float b) { return a < b ? a : b; }

inline float exp_clamped(float t) {
  t = min_like_simd(max_like_simd(t, kExpLo), kExpHi);
  const float n = std::nearbyint(t * kLog2e);  // round to nearest even, as _mm256_round_ps
  const float r = (t - n * kLn2Hi) - n * kLn2Lo;
  float p = kP0 * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * (r * r) + r + 1.0f;
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;  // 2^n, n in [-126, 127]
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// g / (1 + e^t) u, flushed to +0 where t > kExpHi (or NaN): there the true value is below
// |g u| e^-88 = 6e-39 |g u|, while the clamped e^t would leave g / 1.65e38 (-1.8 for g = -3e38).
inline float sigmoid_form(float g, float t, float u) {
  const float v = g / (1.0f + exp_clamped(t)) * u;
  return t <= kExpHi ? v : 0.0f;
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
