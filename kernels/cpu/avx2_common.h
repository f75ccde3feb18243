// Helpers of the AVX2 kernel files (dot_avx2.cpp, dot_iq_avx2.cpp). Include only from files
// compiled with -mavx2 -mfma -mf16c. Everything is in an anonymous namespace on purpose: each
// including translation unit gets its own internal copy, so no AVX2 body can be picked by the
// linker for code that runs on CPUs without AVX2 (the ISA hygiene those files describe).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/unaligned_load.h"

// Small constant-trip loops must be fully unrolled (-O2 does not), so that shift counts are
// immediates and arrays of vectors stay in registers.
#define STRATA_UNROLL _Pragma("GCC unroll 16")

namespace strata::kernels::cpu {
namespace {

using u8 = uint8_t;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace strata::kernels::cpu
