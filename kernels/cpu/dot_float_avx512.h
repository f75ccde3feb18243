// dot_float_row: sum_i row[i] * x[i] for rows of f32, f16 or bf16 (Load16 widens 16 of them),
// AVX-512. Shared by dot_avx512.cpp (dot_f32/f16/bf16_avx512) and attention_avx512.cpp, whose
// q.k must be dot_f32_avx512's bits. Include only from files compiled with the AVX-512 flags: the
// anonymous namespace gives each such file its own copy, so no AVX-512 code is shared with a
// translation unit that runs on other CPUs (dot_avx512.cpp's "ISA hygiene").
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace strata::kernels::cpu {
namespace {

// n is any count (block size 1): four accumulators over a 64-wide main loop, 16-wide steps into
// the first, then one masked step into the second; summed (a0 + a1) + (a2 + a3).
// Load16(row, i, mask) -> 16 floats of row[i..i+15] (masked-off lanes zero, not read).
template <typename Load16>
inline float dot_float_row(const void* row, const float* x, int64_t n, Load16 load16) {
  const __mmask16 all = 0xffff;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(load16(row, i, all), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load16(row, i + 16, all), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load16(row, i + 32, all), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load16(row, i + 48, all), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load16(row, i, all), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    a1 = _mm512_fmadd_ps(load16(row, i, m), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// The f32 row loader of dot_f32_avx512.
inline __m512 load16_f32(const void* r, int64_t i, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(r) + i);
}

}  // namespace
}  // namespace strata::kernels::cpu
