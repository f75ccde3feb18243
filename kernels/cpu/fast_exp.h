// A float e^t without libm, one definition for every CPU loop that needs many: the FFN's gated
// activations (gated_act_impl.h) and the decode attention's softmax weights (attention_head.h).
// Scalar forms here; fast_exp_avx2.h repeats them operation for operation in AVX2 lanes, so both
// give the same bits (tests/kernels/test_ops.cpp, test_attention_tiled.cpp). Internal to kernels/cpu.
//
// Why: std::exp / std::tanh cost ~17-20 ns an element here, and a call cannot be vectorised: a
// third of the embedded model's fused gate/up part, and about half of the CPU decode attention's
// time per key (two heads of a GQA group, one exp per key each) once its loads were prefetched.
// exp_clamped: within 2 ulp of e^t on [-87, 88] (Cody-Waite reduction by ln 2 and Cephes' expf
// polynomial, published constants), t clamped there first: e^88 is 1.65e38, so 1 + e^t never
// overflows and 2^n stays a normal float. Every operation rounds on its own (the files that use
// these build with -ffp-contract=off, and the vector code uses no FMA), which is what makes the
// scalar and the vector bits equal.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace strata::kernels::cpu::fast_exp {

inline constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo; n hi is exact
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

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

// A softmax weight e^t, t = score - max <= 0: +0 below kExpLo (a masked key's -inf, and weights
// below 1.6e-38 next to the max's 1), NaN stays NaN (a NaN score still shows in the output).
inline float exp_weight(float t) {
  const float e = exp_clamped(t);
  return t >= kExpLo ? e : (t != t ? t : 0.0f);
}

}  // namespace strata::kernels::cpu::fast_exp
