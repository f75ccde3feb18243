// SIMD decoders of rows to f32 where the scalar one is slow (quant_kernels.h best_dequantize): the
// same values, bit for bit (tests/kernels/test_dot.cpp). The CPU attention decodes a quantised V
// slice per key with them (attention.cpp, attention_avx512.cpp), where the scalar loops were the
// largest part of a q8_0 / q4_1 KV step. Compiled with -mavx2 -mf16c -ffp-contract=off: q4_1's
// code * d + m must round twice, as the scalar decoder (legacy_types.cpp) rounds it.
#include <immintrin.h>

#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/type_kernels.h"
#include "kernels/cpu/unaligned_load.h"

namespace strata::kernels::cpu {

// F16C, 8 values per instruction (the scalar decoder is a branchy bit manipulation per value).
// Exact for every value (NaN payloads may be quieted).
void dequantize_f16_avx2(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(load_u16(h + i));
}

// q8_0: value = code * d, one rounding.
void dequantize_q8_0_avx2(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
    for (int k = 0; k < kQK; k += 8) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + k)));
      _mm256_storeu_ps(dst + k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
    }
  }
}

// q4_1: value j = (low nibble of qs[j]) * d + m, value 16 + j = (high nibble) * d + m.
void dequantize_q4_1_avx2(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d)), m = _mm256_set1_ps(_cvtsh_ss(b[i].m));
    for (int k = 0; k < kQK / 2; k += 8) {
      const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + k)));
      const __m256i lo = _mm256_and_si256(q, _mm256_set1_epi32(15)), hi = _mm256_srli_epi32(q, 4);
      _mm256_storeu_ps(dst + k, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lo), d), m));
      _mm256_storeu_ps(dst + kQK / 2 + k, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(hi), d), m));
    }
  }
}

}  // namespace strata::kernels::cpu
