// AVX2 + FMA + F16C dot kernels of the i-quants (f32 activations, f32 accumulation; see
// quant_kernels.h). Compiled with -mavx2 -mfma -mf16c; called only when cpu_features().avx2.
// Kept apart from dot_avx2.cpp only for file size; the same ISA hygiene applies: nothing here
// instantiates inline code shared with other translation units (the grid tables are plain
// aggregates, f16 goes through F16C).
//
// Scheme. Grid types: a group of 8 elements is one u64 grid entry (or two u32 entries for IQ3),
// widened byte -> int32 -> f32 lanes; its 8 sign bits become a lane mask whose sign bit is XORed
// into x (w * (-x) = -(w * x) exactly), so the FMA needs no separate sign multiply. The lanes of a
// sub-block (shared scale) are summed in one vector and scaled once. IQ1: the grid value plus the
// group's delta is the weight. IQ4: the 16 levels are a pshufb table over the nibbles.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

inline float f16(uint16_t h) { return _cvtsh_ss(h); }
inline __m256 ld(const float* x) { return _mm256_loadu_ps(x); }

// 8 bytes of a grid entry as f32 lanes (unsigned magnitudes / signed IQ1 values).
inline __m256 grid_u8(uint64_t g) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(g))));
}
inline __m256 grid_i8(uint64_t g) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(int64_t(g))));
}
// x with lane j negated where bit j of signs is set.
inline __m256 signed_x(const float* x, unsigned signs) {
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(signs)), bits), bits);
  return _mm256_xor_ps(ld(x), _mm256_castsi256_ps(_mm256_slli_epi32(set, 31)));
}
// acc + grid * sign * x over one group of 8.
inline __m256 group(uint64_t g, unsigned signs, const float* x, __m256 acc) {
  return _mm256_fmadd_ps(grid_u8(g), signed_x(x, signs), acc);
}

float dot_iq2_xxs(const BlockIQ2_XXS* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t idx = load_u32(b[i].qs + 4 * ib), meta = load_u32(b[i].qs + 4 * ib + 2);
      __m256 s = _mm256_setzero_ps();
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        s = group(kIq2xxsGrid.v[(idx >> (8 * l)) & 255], kKsignsIq2xs.v[(meta >> (7 * l)) & 127],
                  x + 32 * ib + 8 * l, s);
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (0.5f + float(meta >> 28)) * 0.25f), s, acc);
    }
  }
  return hsum(acc);
}

float dot_iq2_xs(const BlockIQ2_XS* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = b[i].qs[4 * ib + l];
        s[l / 2] = group(kIq2xsGrid.v[q & 511], kKsignsIq2xs.v[q >> 9], x + 32 * ib + 8 * l, s[l / 2]);
      }
      const unsigned sc = b[i].scales[ib];
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (0.5f + float(sc & 15)) * 0.25f), s[0], acc);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (0.5f + float(sc >> 4)) * 0.25f), s[1], acc);
    }
  }
  return hsum(acc);
}

float dot_iq2_s(const BlockIQ2_S* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    const u8* signs = b[i].qs + kQK_K / 8;
    for (int ib = 0; ib < 8; ++ib) {
      __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
      const unsigned qh = b[i].qh[ib];
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        const unsigned idx = b[i].qs[4 * ib + l] | (((qh >> (2 * l)) & 3u) << 8);
        s[l / 2] = group(kIq2sGrid.v[idx], signs[4 * ib + l], x + 32 * ib + 8 * l, s[l / 2]);
      }
      const unsigned sc = b[i].scales[ib];
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (0.5f + float(sc & 15)) * 0.25f), s[0], acc);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (0.5f + float(sc >> 4)) * 0.25f), s[1], acc);
    }
  }
  return hsum(acc);
}

inline uint64_t pair(uint32_t lo, uint32_t hi) { return uint64_t(lo) | (uint64_t(hi) << 32); }

float dot_iq3_xxs(const BlockIQ3_XXS* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    const u8* meta_bytes = b[i].qs + kQK_K / 4;
    for (int ib = 0; ib < 8; ++ib) {
      const u8* qs = b[i].qs + 8 * ib;
      const uint32_t meta = load_u32(meta_bytes + 4 * ib);
      __m256 s = _mm256_setzero_ps();
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = pair(kIq3xxsGrid.v[qs[2 * l]], kIq3xxsGrid.v[qs[2 * l + 1]]);
        s = group(g, kKsignsIq2xs.v[(meta >> (7 * l)) & 127], x + 32 * ib + 8 * l, s);
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (0.5f + float(meta >> 28)) * 0.5f), s, acc);
    }
  }
  return hsum(acc);
}

float dot_iq3_s(const BlockIQ3_S* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const u8* qs = b[i].qs + 8 * ib;
      const unsigned qh = b[i].qh[ib];
      __m256 s = _mm256_setzero_ps();
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = pair(kIq3sGrid.v[qs[2 * l] | (((qh >> (2 * l)) & 1u) << 8)],
                                kIq3sGrid.v[qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1u) << 8)]);
        s = group(g, b[i].signs[4 * ib + l], x + 32 * ib + 8 * l, s);
      }
      const int sc = (b[i].scales[ib / 2] >> (4 * (ib % 2))) & 15;
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(1 + 2 * sc)), s, acc);
    }
  }
  return hsum(acc);
}

// acc + (grid + delta) * x over one group of 8 IQ1 elements.
inline __m256 group1(uint64_t g, float delta, const float* x, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_add_ps(grid_i8(g), _mm256_set1_ps(delta)), ld(x), acc);
}

float dot_iq1_s(const BlockIQ1_S* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned h = b[i].qh[ib];
      const float delta = (h & 0x8000) ? -kIq1Delta : kIq1Delta;
      __m256 s = _mm256_setzero_ps();
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        s = group1(kIq1sGrid.v[b[i].qs[4 * ib + l] | (((h >> (3 * l)) & 7u) << 8)], delta,
                   x + 32 * ib + 8 * l, s);
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(2 * ((h >> 12) & 7) + 1)), s, acc);
    }
  }
  return hsum(acc);
}

float dot_iq1_m(const BlockIQ1_M* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint16_t sc[4];
    __builtin_memcpy(sc, b[i].scales, sizeof sc);
    const float d = f16(uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                 (sc[3] & 0xf000)));
    for (int ib = 0; ib < 8; ++ib) {
      __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
      STRATA_UNROLL
      for (int l = 0; l < 4; ++l) {
        const unsigned h = b[i].qh[2 * ib + l / 2] >> (4 * (l % 2));
        s[l / 2] = group1(kIq1sGrid.v[b[i].qs[4 * ib + l] | ((h & 7u) << 8)],
                          (h & 8) ? -kIq1Delta : kIq1Delta, x + 32 * ib + 8 * l, s[l / 2]);
      }
      const unsigned ls = sc[ib / 2] >> (6 * (ib % 2));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(2 * (ls & 7) + 1)), s[0], acc);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(2 * ((ls >> 3) & 7) + 1)), s[1], acc);
    }
  }
  return hsum(acc);
}

// sum over 32 elements of level(q) * x, q = the nibbles of 16 bytes (low: elements 0-15, high:
// 16-31), level through a pshufb table.
inline __m256 iq4_32(const u8* qs, const float* x) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIq4nl));
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(15);
  const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m));
  const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m));
  auto f = [](__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); };
  __m256 s0 = _mm256_mul_ps(f(lo), ld(x));
  __m256 s1 = _mm256_mul_ps(f(_mm_srli_si128(lo, 8)), ld(x + 8));
  s0 = _mm256_fmadd_ps(f(hi), ld(x + 16), s0);
  s1 = _mm256_fmadd_ps(f(_mm_srli_si128(hi, 8)), ld(x + 24), s1);
  return _mm256_add_ps(s0, s1);
}

}  // namespace

float dot_iq2_xxs_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq2_xxs(static_cast<const BlockIQ2_XXS*>(row), x, n / kQK_K);
}
float dot_iq2_xs_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq2_xs(static_cast<const BlockIQ2_XS*>(row), x, n / kQK_K);
}
float dot_iq2_s_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq2_s(static_cast<const BlockIQ2_S*>(row), x, n / kQK_K);
}
float dot_iq3_xxs_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq3_xxs(static_cast<const BlockIQ3_XXS*>(row), x, n / kQK_K);
}
float dot_iq3_s_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq3_s(static_cast<const BlockIQ3_S*>(row), x, n / kQK_K);
}
float dot_iq1_s_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq1_s(static_cast<const BlockIQ1_S*>(row), x, n / kQK_K);
}
float dot_iq1_m_avx2(const void* row, const float* x, int64_t n) {
  return dot_iq1_m(static_cast<const BlockIQ1_M*>(row), x, n / kQK_K);
}

float dot_iq4_nl_avx2(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(row);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  const int64_t nb = n / kQK;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {  // two accumulators: the FMA chain latency, not loads, limits
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(b[i].d)), iq4_32(b[i].qs, x + i * kQK), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(b[i + 1].d)), iq4_32(b[i + 1].qs, x + (i + 1) * kQK), acc1);
  }
  if (i < nb) acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(b[i].d)), iq4_32(b[i].qs, x + i * kQK), acc0);
  return hsum(_mm256_add_ps(acc0, acc1));
}

float dot_iq4_xs_avx2(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_XS*>(row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float d = f16(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b[i].scales_h >> (2 * ib)) & 3) << 4);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(ls - 32)), iq4_32(b[i].qs + 16 * ib, x + 32 * ib), acc);
    }
  }
  return hsum(acc);
}

}  // namespace strata::kernels::cpu
