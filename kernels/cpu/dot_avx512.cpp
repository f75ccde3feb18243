// AVX-512 (F + BW + VL + DQ) dot kernels: sum_i dequant(row)[i] * x[i], f32 activations, f32
// accumulation (see quant_kernels.h). Compiled with the AVX-512 flags; called only when
// cpu_features().avx512. Same scheme as dot_avx2.cpp with 16 lanes: codes widened to int32 with
// vpmovzx/sx straight from memory (16 bytes -> 16 lanes), converted to f32 and FMA'd with x; a
// sub-block scale applied once per 16 or 32 elements; mins as min * sum(x over the sub-block).
// Extra bits (Q5 5th bit, Q3_K hmask) become lane masks (vptestm) feeding masked add/sub.
// Every load is unaligned (or masked for the f32/f16/bf16 tail): rows may start at any byte.
//
// ISA hygiene as in dot_avx2.cpp: nothing here may instantiate an inline function or template
// shared with other translation units (the linker could keep this file's AVX-512 copy for every
// caller). Helpers are in an anonymous namespace; f16 scales go through F16C.
#include <cstddef>
#include <type_traits>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/dot_float_avx512.h"
#include "kernels/cpu/dot_legacy_avx512.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

// ---- float rows: dot_float_avx512.h ----------------------------------------------------------

// ---- legacy 32-element blocks: dot_legacy_avx512.h ----------------------------------------

// ---- K quants: scales -------------------------------------------------------------------------
// Sub-block scales (and mins) are decoded once per super-block into float arrays already
// multiplied by d (dmin); the inner loop applies each with one broadcast and one FMA.

inline void store_scaled8(__m128i bytes8_lo, float mul, float* out) {
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes8_lo)),
                                      _mm256_set1_ps(mul)));
}
inline void store_scaled16(__m128i bytes16, bool sign, float mul, float* out) {
  const __m512i v = sign ? _mm512_cvtepi8_epi32(bytes16) : _mm512_cvtepu8_epi32(bytes16);
  _mm512_storeu_ps(out, _mm512_mul_ps(to_f32(v), bcast(mul)));
}

// The 8 (scale, min) 6-bit pairs of Q4_K / Q5_K, unpacked from 12 bytes, times d and dmin.
inline void k4_scales(const u8* p, float d, float dmin, float dsc[8], float dmn[8]) {
  const uint32_t u0 = load_u32(p), u1 = load_u32(p + 4), u2 = load_u32(p + 8);
  const uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const uint32_t s_lo = u0 & k6, m_lo = u1 & k6;
  const uint32_t s_hi = (u2 & k4) | (((u0 >> 6) & k2) << 4);
  const uint32_t m_hi = ((u2 >> 4) & k4) | (((u1 >> 6) & k2) << 4);
  const __m128i v = _mm_setr_epi32(int(s_lo), int(s_hi), int(m_lo), int(m_hi));
  store_scaled8(v, d, dsc);
  store_scaled8(_mm_srli_si128(v, 8), dmin, dmn);
}

// The 16 6-bit scales of Q3_K (minus 32), times d.
inline void q3k_scales(const u8* p, float d, float dsc[16]) {
  const uint32_t a0 = load_u32(p), a1 = load_u32(p + 4), a2 = load_u32(p + 8);
  const uint32_t k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const __m128i v = _mm_sub_epi8(
      _mm_setr_epi32(int((a0 & k4) | ((a2 & k2) << 4)), int((a1 & k4) | (((a2 >> 2) & k2) << 4)),
                     int(((a0 >> 4) & k4) | (((a2 >> 4) & k2) << 4)),
                     int(((a1 >> 4) & k4) | (((a2 >> 6) & k2) << 4))),
      _mm_set1_epi8(32));
  store_scaled16(v, true, d, dsc);
}

inline __m512 sum4(const __m512 a[4]) {
  return _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
}

// ---- Q2_K / Q3_K: 16 sub-blocks of 16, 2-bit codes ----------------------------------------------
// Half h (128 elements) uses qs[32h .. 32h+31]. Lane l of u8x16(q + 16k) holds q[16k + l];
// (byte >> 2j) & 3 is element 128h + 32j + 16k + l: sub-block 8h + 2j + k, exactly one vector.

float dot_q2_k_impl(const u8* row, const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  const __m512i m2 = splat(3);
  alignas(64) float dsc[16], dmn[16];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(BlockQ2_K);
    const float* xb = x + ib * kQK_K;
    {
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
      const __m128i lo = _mm_and_si128(s, _mm_set1_epi8(15));
      const __m128i hi = _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15));
      store_scaled16(lo, false, load_f16(b + offsetof(BlockQ2_K, d)), dsc);
      store_scaled16(hi, false, load_f16(b + offsetof(BlockQ2_K, dmin)), dmn);
    }
    STRATA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const u8* q = b + offsetof(BlockQ2_K, qs) + 32 * h;
      const __m512i v[2] = {u8x16(q), u8x16(q + 16)};
      STRATA_UNROLL
      for (int j = 0; j < 4; ++j) {
        STRATA_UNROLL
        for (int k = 0; k < 2; ++k) {
          const int is = 8 * h + 2 * j + k;
          const __m512 xs = ld(xb + 128 * h + 32 * j + 16 * k);
          const __m512i q2 = _mm512_and_si512(_mm512_srli_epi32(v[k], 2 * j), m2);
          __m512& a = acc[is & 3];
          a = _mm512_fmadd_ps(bcast(dsc[is]), _mm512_mul_ps(to_f32(q2), xs), a);
          a = _mm512_fnmadd_ps(bcast(dmn[is]), xs, a);
        }
      }
    }
  }
  return hsum(sum4(acc));
}

// Q3_K: as Q2_K plus hmask: bit (4h + j) of hmask[16k + l] clear -> code - 4.
float dot_q3_k_impl(const u8* row, const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  const __m512i m2 = splat(3), four = splat(4);
  alignas(64) float dsc[16];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(BlockQ3_K);
    const float* xb = x + ib * kQK_K;
    q3k_scales(b + offsetof(BlockQ3_K, scales), load_f16(b + offsetof(BlockQ3_K, d)), dsc);
    const u8* hm = b + offsetof(BlockQ3_K, hmask);
    const __m512i hv[2] = {u8x16(hm), u8x16(hm + 16)};
    STRATA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const u8* q = b + offsetof(BlockQ3_K, qs) + 32 * h;
      const __m512i v[2] = {u8x16(q), u8x16(q + 16)};
      STRATA_UNROLL
      for (int j = 0; j < 4; ++j) {
        STRATA_UNROLL
        for (int k = 0; k < 2; ++k) {
          const int is = 8 * h + 2 * j + k;
          const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(v[k], 2 * j), m2);
          const __mmask16 clear = _mm512_testn_epi32_mask(hv[k], splat(1 << (4 * h + j)));
          const __m512i q3 = _mm512_mask_sub_epi32(lo, clear, lo, four);
          const __m512 xs = ld(xb + 128 * h + 32 * j + 16 * k);
          acc[is & 3] = _mm512_fmadd_ps(bcast(dsc[is]), _mm512_mul_ps(to_f32(q3), xs), acc[is & 3]);
        }
      }
    }
  }
  return hsum(sum4(acc));
}

// ---- Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min ---------------------------------
// Chunk c (64 elements) uses qs[32c .. 32c+31]: low nibbles are elements 64c + l (sub-block 2c),
// high nibbles 64c + 32 + l (sub-block 2c+1). Q5_K: bit 2c of qh[l] adds 16 to the low element,
// bit 2c+1 to the high one.

template <bool kQ5>
float dot_q45_k(const u8* row, const float* x, int64_t n) {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  const __m512i m4 = splat(15), sixteen = splat(16);
  alignas(32) float dsc[8], dmn[8];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(Block);
    const float* xb = x + ib * kQK_K;
    k4_scales(b + offsetof(Block, scales), load_f16(b + offsetof(Block, d)),
              load_f16(b + offsetof(Block, dmin)), dsc, dmn);
    __m512i hv[2];
    if constexpr (kQ5) {
      const u8* qh = b + offsetof(BlockQ5_K, qh);
      hv[0] = u8x16(qh);
      hv[1] = u8x16(qh + 16);
    }
    STRATA_UNROLL
    for (int c = 0; c < 4; ++c) {
      const u8* q = b + offsetof(Block, qs) + 32 * c;
      const float* xlo = xb + 64 * c;
      const float* xhi = xlo + 32;
      __m512 slo, shi, xslo, xshi;
      STRATA_UNROLL
      for (int g = 0; g < 2; ++g) {
        const __m512i v = u8x16(q + 16 * g);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_srli_epi32(v, 4);
        if constexpr (kQ5) {
          lo = _mm512_mask_add_epi32(lo, _mm512_test_epi32_mask(hv[g], splat(1 << (2 * c))), lo,
                                     sixteen);
          hi = _mm512_mask_add_epi32(hi, _mm512_test_epi32_mask(hv[g], splat(2 << (2 * c))), hi,
                                     sixteen);
        }
        const __m512 x0 = ld(xlo + 16 * g), x1 = ld(xhi + 16 * g);
        if (g == 0) {
          slo = _mm512_mul_ps(to_f32(lo), x0);
          shi = _mm512_mul_ps(to_f32(hi), x1);
          xslo = x0;
          xshi = x1;
        } else {
          slo = _mm512_fmadd_ps(to_f32(lo), x0, slo);
          shi = _mm512_fmadd_ps(to_f32(hi), x1, shi);
          xslo = _mm512_add_ps(xslo, x0);
          xshi = _mm512_add_ps(xshi, x1);
        }
      }
      __m512& a = acc[c];
      a = _mm512_fmadd_ps(bcast(dsc[2 * c]), slo, a);
      a = _mm512_fmadd_ps(bcast(dsc[2 * c + 1]), shi, a);
      a = _mm512_fnmadd_ps(bcast(dmn[2 * c]), xslo, a);
      a = _mm512_fnmadd_ps(bcast(dmn[2 * c + 1]), xshi, a);
    }
  }
  return hsum(sum4(acc));
}

// ---- Q6_K: 16 sub-blocks of 16, 6-bit codes - 32 ----------------------------------------------
// Half h uses ql[64h ..], qh[32h ..], scales[8h ..]. For l < 32: element l = ql[l] low | qh[l]
// bits 0-1, l+32 = ql[l+32] low | bits 2-3, l+64 = ql[l] high | bits 4-5, l+96 = ql[l+32] high |
// bits 6-7. With l in [16k, 16k + 16), each of the four is one sub-block: 8h + k + 2t.

float dot_q6_k_impl(const u8* row, const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  const __m512i m4 = splat(15), m30 = splat(0x30), k32 = splat(32);
  alignas(64) float dsc[16];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(BlockQ6_K);
    const float* xb = x + ib * kQK_K;
    store_scaled16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ6_K, scales))), true,
        load_f16(b + offsetof(BlockQ6_K, d)), dsc);
    STRATA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const u8* ql = b + offsetof(BlockQ6_K, ql) + 64 * h;
      const u8* qh = b + offsetof(BlockQ6_K, qh) + 32 * h;
      const float* xh = xb + 128 * h;
      STRATA_UNROLL
      for (int k = 0; k < 2; ++k) {
        const int l = 16 * k;
        const __m512i a = u8x16(ql + l), c = u8x16(ql + l + 32), hb = u8x16(qh + l);
        const __m512i q[4] = {
            _mm512_or_si512(_mm512_and_si512(a, m4),
                            _mm512_and_si512(_mm512_slli_epi32(hb, 4), m30)),
            _mm512_or_si512(_mm512_and_si512(c, m4),
                            _mm512_and_si512(_mm512_slli_epi32(hb, 2), m30)),
            _mm512_or_si512(_mm512_srli_epi32(a, 4), _mm512_and_si512(hb, m30)),
            _mm512_or_si512(_mm512_srli_epi32(c, 4),
                            _mm512_and_si512(_mm512_srli_epi32(hb, 2), m30)),
        };
        STRATA_UNROLL
        for (int t = 0; t < 4; ++t) {
          const __m512 p = _mm512_mul_ps(to_f32(_mm512_sub_epi32(q[t], k32)), ld(xh + l + 32 * t));
          acc[t] = _mm512_fmadd_ps(bcast(dsc[8 * h + k + 2 * t]), p, acc[t]);
        }
      }
    }
  }
  return hsum(sum4(acc));
}

}  // namespace

// ---- exported kernels -------------------------------------------------------------------------

float dot_f32_avx512(const void* row, const float* x, int64_t n) {
  return dot_float_row(row, x, n, load16_f32);
}

float dot_f16_avx512(const void* row, const float* x, int64_t n) {
  return dot_float_row(row, x, n, [](const void* r, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(r) + i));
  });
}

float dot_bf16_avx512(const void* row, const float* x, int64_t n) {
  return dot_float_row(row, x, n, [](const void* r, int64_t i, __mmask16 m) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(r) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  });
}

float dot_q4_0_avx512(const void* row, const float* x, int64_t n) {
  return dot_legacy(static_cast<const u8*>(row), x, n, sizeof(BlockQ4_0), [](const u8* b) {
    Codes2 c = nibbles(b + offsetof(BlockQ4_0, qs));
    c.q[0] = _mm512_sub_epi32(c.q[0], splat(8));
    c.q[1] = _mm512_sub_epi32(c.q[1], splat(8));
    return c;
  });
}

float dot_q4_1_avx512(const void* row, const float* x, int64_t n) {
  return dot_legacy_min(static_cast<const u8*>(row), x, n, sizeof(BlockQ4_1), q4_1_codes);
}

// Q5_0: y = (q - 16) * d: subtract 16 where the 5th bit (bit k of qh for element k) is clear.
float dot_q5_0_avx512(const void* row, const float* x, int64_t n) {
  return dot_legacy(static_cast<const u8*>(row), x, n, sizeof(BlockQ5_0), [](const u8* b) {
    Codes2 c = nibbles(b + offsetof(BlockQ5_0, qs));
    const uint32_t qh = load_u32(b + offsetof(BlockQ5_0, qh));
    c.q[0] = _mm512_mask_sub_epi32(c.q[0], __mmask16(~qh), c.q[0], splat(16));
    c.q[1] = _mm512_mask_sub_epi32(c.q[1], __mmask16(~qh >> 16), c.q[1], splat(16));
    return c;
  });
}

// Q5_1: y = q * d + m: add 16 where the 5th bit is set.
float dot_q5_1_avx512(const void* row, const float* x, int64_t n) {
  return dot_legacy_min(static_cast<const u8*>(row), x, n, sizeof(BlockQ5_1), [](const u8* b) {
    Codes2 c = nibbles(b + offsetof(BlockQ5_1, qs));
    const uint32_t qh = load_u32(b + offsetof(BlockQ5_1, qh));
    c.q[0] = _mm512_mask_add_epi32(c.q[0], __mmask16(qh), c.q[0], splat(16));
    c.q[1] = _mm512_mask_add_epi32(c.q[1], __mmask16(qh >> 16), c.q[1], splat(16));
    return c;
  });
}

float dot_q8_0_avx512(const void* row, const float* x, int64_t n) {
  return dot_legacy(static_cast<const u8*>(row), x, n, sizeof(BlockQ8_0), q8_0_codes);
}

float dot_q2_k_avx512(const void* row, const float* x, int64_t n) {
  return dot_q2_k_impl(static_cast<const u8*>(row), x, n);
}
float dot_q3_k_avx512(const void* row, const float* x, int64_t n) {
  return dot_q3_k_impl(static_cast<const u8*>(row), x, n);
}
float dot_q4_k_avx512(const void* row, const float* x, int64_t n) {
  return dot_q45_k<false>(static_cast<const u8*>(row), x, n);
}
float dot_q5_k_avx512(const void* row, const float* x, int64_t n) {
  return dot_q45_k<true>(static_cast<const u8*>(row), x, n);
}
float dot_q6_k_avx512(const void* row, const float* x, int64_t n) {
  return dot_q6_k_impl(static_cast<const u8*>(row), x, n);
}

}  // namespace strata::kernels::cpu
