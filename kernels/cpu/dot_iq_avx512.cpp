// AVX-512 (F + BW + VL + DQ) dot kernels of the i-quants (f32 activations, f32 accumulation; see
// quant_kernels.h). Compiled with the flags of dot_avx512.cpp; called only when
// cpu_features().avx512. The ISA hygiene of dot_avx2.cpp applies: helpers are in an anonymous
// namespace, the grid tables are plain aggregates, f16 goes through F16C.
//
// Scheme (dot_iq_avx2.cpp's, 16 lanes). Grid types: two groups of 8 (two u64 grid entries, or four
// u32 for IQ3) fill the 16 bytes of one xmm; their 16 sign bits are a __mmask16 under which the
// bytes are negated (vpsubb from zero: magnitudes are at most 62, so the signed byte is exact),
// then widened with sign (vpmovsxbd) and converted to f32, so the FMA with x needs no sign work.
// The lanes of a sub-block (shared scale) are summed in one vector and scaled once. IQ1: the grid
// value plus the group's delta is the weight (delta per 16 lanes picked by a mask blend for IQ1_M).
// IQ4: the 16 levels are a 16-float table indexed by the nibbles with vpermps (no convert).
// IQ1_S has no kernel here: see quant_table.cpp.
#include <cstddef>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

// 16 signed bytes -> 16 f32 lanes.
inline __m512 i8_f32(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

// 16 magnitude bytes, byte j negated where bit j of signs is set, as f32 lanes.
inline __m512 signed16(__m128i g, unsigned signs) {
  return i8_f32(_mm_mask_sub_epi8(g, __mmask16(signs), _mm_setzero_si128(), g));
}
// Two grid entries of 8 magnitudes / four IQ3 grid entries of 4, signed as signed16.
inline __m512 grid16(uint64_t g0, uint64_t g1, unsigned signs) {
  return signed16(_mm_set_epi64x(int64_t(g1), int64_t(g0)), signs);
}
inline __m512 grid16_u32(uint32_t g0, uint32_t g1, uint32_t g2, uint32_t g3, unsigned signs) {
  return signed16(_mm_setr_epi32(int(g0), int(g1), int(g2), int(g3)), signs);
}
// IQ2_XXS / IQ3_XXS: the 16 sign bits of groups 2k, 2k + 1 of a sub-block, from the ksigns indices
// (7 bits each) at bits 14k and 14k + 7 of its meta word.
inline unsigned meta_signs16(uint32_t meta, int k) {
  const auto& ks = kKsignsIq2xs.v;
  return ks[(meta >> (14 * k)) & 127] | (unsigned(ks[(meta >> (14 * k + 7)) & 127]) << 8);
}
// IQ2_XS / IQ2_S: a sub-block's two 16-element products, each scaled by d (0.5 + its nibble of sc)
// into its own accumulator.
inline void add_scaled_halves(__m512& acc0, __m512& acc1, float d, unsigned sc, __m512 s0, __m512 s1) {
  acc0 = _mm512_fmadd_ps(bcast(d * (0.5f + float(sc & 15))), s0, acc0);
  acc1 = _mm512_fmadd_ps(bcast(d * (0.5f + float(sc >> 4))), s1, acc1);
}

float dot_iq2_xxs(const BlockIQ2_XXS* b, const float* x, int64_t nb) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d) * 0.25f;
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t idx = load_u32(b[i].qs + 4 * ib), meta = load_u32(b[i].qs + 4 * ib + 2);
      const auto& grid = kIq2xxsGrid.v;
      const unsigned s01 = meta_signs16(meta, 0), s23 = meta_signs16(meta, 1);
      const float* xb = x + 32 * ib;
      __m512 s = _mm512_mul_ps(grid16(grid[idx & 255], grid[(idx >> 8) & 255], s01), ld(xb));
      s = _mm512_fmadd_ps(grid16(grid[(idx >> 16) & 255], grid[idx >> 24], s23), ld(xb + 16), s);
      __m512& acc = (ib % 2) ? acc1 : acc0;
      acc = _mm512_fmadd_ps(bcast(d * (0.5f + float(meta >> 28))), s, acc);
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

float dot_iq2_xs(const BlockIQ2_XS* b, const float* x, int64_t nb) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d) * 0.25f;
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t* q = b[i].qs + 4 * ib;
      const auto& grid = kIq2xsGrid.v;
      const auto& ks = kKsignsIq2xs.v;
      const float* xb = x + 32 * ib;
      const unsigned sc = b[i].scales[ib];
      const __m512 s0 = _mm512_mul_ps(
          grid16(grid[q[0] & 511], grid[q[1] & 511], ks[q[0] >> 9] | (unsigned(ks[q[1] >> 9]) << 8)), ld(xb));
      const __m512 s1 = _mm512_mul_ps(
          grid16(grid[q[2] & 511], grid[q[3] & 511], ks[q[2] >> 9] | (unsigned(ks[q[3] >> 9]) << 8)), ld(xb + 16));
      add_scaled_halves(acc0, acc1, d, sc, s0, s1);
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

float dot_iq2_s(const BlockIQ2_S* b, const float* x, int64_t nb) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d) * 0.25f;
    const u8* qs = b[i].qs;
    const u8* signs = b[i].qs + kQK_K / 8;
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned qh = b[i].qh[ib];
      const uint32_t sg = load_u32(signs + 4 * ib);
      const auto& grid = kIq2sGrid.v;
      auto index = [&](int l) { return qs[4 * ib + l] | (((qh >> (2 * l)) & 3u) << 8); };
      const float* xb = x + 32 * ib;
      const unsigned sc = b[i].scales[ib];
      const __m512 s0 = _mm512_mul_ps(grid16(grid[index(0)], grid[index(1)], sg & 0xffff), ld(xb));
      const __m512 s1 = _mm512_mul_ps(grid16(grid[index(2)], grid[index(3)], sg >> 16), ld(xb + 16));
      add_scaled_halves(acc0, acc1, d, sc, s0, s1);
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

float dot_iq3_xxs(const BlockIQ3_XXS* b, const float* x, int64_t nb) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d) * 0.5f;
    const u8* meta_bytes = b[i].qs + kQK_K / 4;
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const u8* qs = b[i].qs + 8 * ib;
      const uint32_t meta = load_u32(meta_bytes + 4 * ib);
      const auto& grid = kIq3xxsGrid.v;
      const unsigned s01 = meta_signs16(meta, 0), s23 = meta_signs16(meta, 1);
      const float* xb = x + 32 * ib;
      __m512 s = _mm512_mul_ps(grid16_u32(grid[qs[0]], grid[qs[1]], grid[qs[2]], grid[qs[3]], s01), ld(xb));
      s = _mm512_fmadd_ps(grid16_u32(grid[qs[4]], grid[qs[5]], grid[qs[6]], grid[qs[7]], s23), ld(xb + 16), s);
      __m512& acc = (ib % 2) ? acc1 : acc0;
      acc = _mm512_fmadd_ps(bcast(d * (0.5f + float(meta >> 28))), s, acc);
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

float dot_iq3_s(const BlockIQ3_S* b, const float* x, int64_t nb) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const u8* qs = b[i].qs + 8 * ib;
      const unsigned qh = b[i].qh[ib];
      const uint32_t sg = load_u32(b[i].signs + 4 * ib);
      const auto& grid = kIq3sGrid.v;
      auto g = [&](int l) { return grid[qs[l] | (((qh >> l) & 1u) << 8)]; };
      const float* xb = x + 32 * ib;
      __m512 s = _mm512_mul_ps(grid16_u32(g(0), g(1), g(2), g(3), sg & 0xffff), ld(xb));
      s = _mm512_fmadd_ps(grid16_u32(g(4), g(5), g(6), g(7), sg >> 16), ld(xb + 16), s);
      const int sc = (b[i].scales[ib / 2] >> (4 * (ib % 2))) & 15;
      __m512& acc = (ib % 2) ? acc1 : acc0;
      acc = _mm512_fmadd_ps(bcast(d * float(1 + 2 * sc)), s, acc);
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

// Two IQ1 grid entries (signed bytes) as f32 lanes.
inline __m512 grid16_i8(uint64_t g0, uint64_t g1) { return i8_f32(_mm_set_epi64x(int64_t(g1), int64_t(g0))); }

float dot_iq1_m(const BlockIQ1_M* b, const float* x, int64_t nb) {
  const __m512 plus = bcast(kIq1Delta), minus = bcast(-kIq1Delta);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint16_t sc[4];
    __builtin_memcpy(sc, b[i].scales, sizeof sc);
    const float d = f16(uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                 (sc[3] & 0xf000)));
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const u8* qs = b[i].qs + 4 * ib;
      const auto& grid = kIq1sGrid.v;
      const float* xb = x + 32 * ib;
      const unsigned ls = sc[ib / 2] >> (6 * (ib % 2));
      STRATA_UNROLL
      for (int half = 0; half < 2; ++half) {  // 16 elements: one qh byte, one scale
        const unsigned h = b[i].qh[2 * ib + half];
        // delta sign per group of 8: bit 3 (first group) and bit 7 (second) of h
        const __mmask16 neg = __mmask16(((0u - ((h >> 3) & 1u)) & 0x00ffu) | ((0u - ((h >> 7) & 1u)) & 0xff00u));
        const __m512 delta = _mm512_mask_blend_ps(neg, plus, minus);
        const __m512 w = _mm512_add_ps(
            grid16_i8(grid[qs[2 * half] | ((h & 7u) << 8)], grid[qs[2 * half + 1] | (((h >> 4) & 7u) << 8)]), delta);
        const float scale = d * float(2 * ((ls >> (3 * half)) & 7) + 1);
        __m512& acc = half ? acc1 : acc0;
        acc = _mm512_fmadd_ps(bcast(scale), _mm512_mul_ps(w, ld(xb + 16 * half)), acc);
      }
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

// sum over 32 elements of level(q) * x, q = the nibbles of 16 bytes (low: elements 0-15, high:
// 16-31); levels is kValuesIq4nl as 16 floats, indexed by vpermps.
inline __m512 iq4_32(const u8* qs, const float* x, __m512 levels) {
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m512 lo = _mm512_permutexvar_ps(q, levels);  // vpermps uses the low 4 bits of each lane
  const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), levels);
  return _mm512_fmadd_ps(hi, ld(x + 16), _mm512_mul_ps(lo, ld(x)));
}

inline __m512 iq4_levels() { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
    reinterpret_cast<const __m128i*>(kValuesIq4nl)))); }

}  // namespace

float dot_iq2_xxs_avx512(const void* row, const float* x, int64_t n) {
  return dot_iq2_xxs(static_cast<const BlockIQ2_XXS*>(row), x, n / kQK_K);
}
float dot_iq2_xs_avx512(const void* row, const float* x, int64_t n) {
  return dot_iq2_xs(static_cast<const BlockIQ2_XS*>(row), x, n / kQK_K);
}
float dot_iq2_s_avx512(const void* row, const float* x, int64_t n) {
  return dot_iq2_s(static_cast<const BlockIQ2_S*>(row), x, n / kQK_K);
}
float dot_iq3_xxs_avx512(const void* row, const float* x, int64_t n) {
  return dot_iq3_xxs(static_cast<const BlockIQ3_XXS*>(row), x, n / kQK_K);
}
float dot_iq3_s_avx512(const void* row, const float* x, int64_t n) {
  return dot_iq3_s(static_cast<const BlockIQ3_S*>(row), x, n / kQK_K);
}
float dot_iq1_m_avx512(const void* row, const float* x, int64_t n) {
  return dot_iq1_m(static_cast<const BlockIQ1_M*>(row), x, n / kQK_K);
}

float dot_iq4_nl_avx512(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(row);
  const __m512 levels = iq4_levels();
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  const int64_t nb = n / kQK;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {  // two accumulators: the FMA chain latency, not loads, limits
    acc0 = _mm512_fmadd_ps(bcast(f16(b[i].d)), iq4_32(b[i].qs, x + i * kQK, levels), acc0);
    acc1 = _mm512_fmadd_ps(bcast(f16(b[i + 1].d)), iq4_32(b[i + 1].qs, x + (i + 1) * kQK, levels), acc1);
  }
  if (i < nb) acc0 = _mm512_fmadd_ps(bcast(f16(b[i].d)), iq4_32(b[i].qs, x + i * kQK, levels), acc0);
  return hsum(_mm512_add_ps(acc0, acc1));
}

float dot_iq4_xs_avx512(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_XS*>(row);
  const __m512 levels = iq4_levels();
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    STRATA_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b[i].scales_h >> (2 * ib)) & 3) << 4);
      __m512& acc = (ib % 2) ? acc1 : acc0;
      acc = _mm512_fmadd_ps(bcast(d * float(ls - 32)), iq4_32(b[i].qs + 16 * ib, x + 32 * ib, levels), acc);
    }
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

}  // namespace strata::kernels::cpu
