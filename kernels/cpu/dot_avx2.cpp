// AVX2 + FMA + F16C dot kernels: sum_i dequant(row)[i] * x[i], f32 activations, f32 accumulation
// (see quant_kernels.h). Compiled with -mavx2 -mfma -mf16c; called only when cpu_features().avx2.
//
// Scheme shared by every quantised type: codes are widened to int32 lanes with vpmovzx/sx straight
// from memory (8 bytes -> 8 lanes; a lane holding a whole byte yields both nibbles with and/shift),
// converted to f32 and FMA'd with x into a per-sub-block sum; the sub-block scale is applied once
// to that sum, and for types with mins (y = a*q - b) the min term is b * sum(x over the sub-block)
// instead of a per-element subtraction. Every load is unaligned: rows may start at any byte.
//
// ISA hygiene: this file must not instantiate any inline function or template shared with other
// translation units (std::, core/half.h, ...). The linker keeps one copy of such a function, and
// it could be this file's AVX2 build, which would then run on CPUs without AVX2. Everything here
// is in an anonymous namespace or is one of the exported dot_<t>_avx2 functions; f16 scales are
// converted with F16C (exact for every f16, subnormals included).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

inline float load_f16(const u8* p) { return _cvtsh_ss(load_u16(p)); }

// 8 bytes at p -> 8 int32 lanes, zero- or sign-extended.
inline __m256i u8x8(const u8* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i i8x8(const u8* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 to_f32(__m256i v) { return _mm256_cvtepi32_ps(v); }
inline __m256 ld(const float* x) { return _mm256_loadu_ps(x); }
inline __m256i splat(int v) { return _mm256_set1_epi32(v); }

// sum over 8 lanes of q*x + acc (q int32 codes).
inline __m256 fma_q(__m256i q, const float* x, __m256 acc) {
  return _mm256_fmadd_ps(to_f32(q), ld(x), acc);
}

// ---- float rows -------------------------------------------------------------------------------
// n is any count here (block size 1): 32-wide main loop, 8-wide, then a scalar tail.

template <typename Load8, typename Load1>
inline float dot_float_row(const void* row, const float* x, int64_t n, Load8 load8, Load1 load1) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load8(row, i), ld(x + i), a0);
    a1 = _mm256_fmadd_ps(load8(row, i + 8), ld(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8(row, i + 16), ld(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8(row, i + 24), ld(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8(row, i), ld(x + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += load1(row, i) * x[i];
  return s;
}

// ---- legacy 32-element blocks ---------------------------------------------------------------
// Lane l of u8x8(qs + g) holds qs[g + l]: its low nibble is element g + l, its high nibble element
// 16 + g + l. Two such loads cover the block. A Codes functor fills q[0..3] with the int32 codes
// of elements 0-7, 8-15, 16-23, 24-31 (after full unrolling these stay in registers).
//
// Latency, not throughput, is what limits a naive loop here (an FMA chain per block), so each
// block's sum uses two chains and consecutive blocks go to two accumulators.

struct Codes4 {
  __m256i q[4];
};

// sum over the block of q * x, two FMA chains.
inline __m256 block_qx(const Codes4& c, const float* xb) {
  __m256 s0 = _mm256_mul_ps(to_f32(c.q[0]), ld(xb));
  __m256 s1 = _mm256_mul_ps(to_f32(c.q[1]), ld(xb + 8));
  s0 = fma_q(c.q[2], xb + 16, s0);
  s1 = fma_q(c.q[3], xb + 24, s1);
  return _mm256_add_ps(s0, s1);
}

// y = q * d (q signed, already offset).
template <typename Codes>
inline float dot_legacy(const u8* row, const float* x, int64_t n, size_t block_bytes, Codes codes) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  const int64_t nb = n / kQK;
  int64_t ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    const u8* b = row + ib * block_bytes;
    const float* xb = x + ib * kQK;
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b)), block_qx(codes(b), xb), acc0);
    const u8* b1 = b + block_bytes;
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b1)), block_qx(codes(b1), xb + kQK), acc1);
  }
  if (ib < nb) {
    const u8* b = row + ib * block_bytes;
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b)), block_qx(codes(b), x + ib * kQK), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// y = q * d + m (q unsigned).  dot = d * sum(q*x) + m * sum(x).
template <typename Codes>
inline float dot_legacy_min(const u8* row, const float* x, int64_t n, size_t block_bytes,
                            Codes codes) {
  __m256 acc = _mm256_setzero_ps(), macc = acc;
  const int64_t nb = n / kQK;
  for (int64_t ib = 0; ib < nb; ++ib) {
    const u8* b = row + ib * block_bytes;
    const float* xb = x + ib * kQK;
    const Codes4 c = codes(b);
    const __m256 xs = _mm256_add_ps(_mm256_add_ps(ld(xb), ld(xb + 8)),
                                    _mm256_add_ps(ld(xb + 16), ld(xb + 24)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b)), block_qx(c, xb), acc);
    macc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b + 2)), xs, macc);
  }
  return hsum(_mm256_add_ps(acc, macc));
}

// The 4-bit codes of a block (nibbles only, unsigned 0..15).
inline Codes4 nibbles(const u8* qs) {
  const __m256i m4 = splat(15);
  const __m256i b0 = u8x8(qs), b1 = u8x8(qs + 8);
  return {{_mm256_and_si256(b0, m4), _mm256_and_si256(b1, m4), _mm256_srli_epi32(b0, 4),
           _mm256_srli_epi32(b1, 4)}};
}

// Or the 5th bit (bit k of qh for element k) into 4-bit codes: as 16 where set or, when
// `offset16`, as -16 where clear (giving q - 16 for Q5_0). Lane l of group g tests bit 8g + l.
inline void fifth_bit(uint32_t qh, bool offset16, Codes4& c) {
  const __m256i h = splat(int(qh));
  const __m256i bit0 = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  STRATA_UNROLL
  for (int g = 0; g < 4; ++g) {
    const __m256i bit = _mm256_slli_epi32(bit0, 8 * g);
    const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(h, bit), bit);  // -1 where set
    if (offset16) {  // clear -> or in ...fff0 (= -16 on top of a nibble)
      c.q[g] = _mm256_or_si256(c.q[g], _mm256_andnot_si256(set, splat(-16)));
    } else {
      c.q[g] = _mm256_or_si256(c.q[g], _mm256_and_si256(set, splat(16)));
    }
  }
}

// ---- K quants: scales -------------------------------------------------------------------------
// Sub-block scales (and mins) are decoded once per super-block into float arrays already
// multiplied by d (dmin), so the inner loop applies each with one broadcast load and one FMA.

inline void store_scaled(__m128i bytes8_lo, bool sign, float mul, float* out) {
  const __m256i v = sign ? _mm256_cvtepi8_epi32(bytes8_lo) : _mm256_cvtepu8_epi32(bytes8_lo);
  _mm256_storeu_ps(out, _mm256_mul_ps(to_f32(v), _mm256_set1_ps(mul)));
}

// The 8 (scale, min) 6-bit pairs of Q4_K / Q5_K, unpacked from 12 bytes, times d and dmin.
inline void k4_scales(const u8* p, float d, float dmin, float dsc[8], float dmn[8]) {
  const uint32_t u0 = load_u32(p), u1 = load_u32(p + 4), u2 = load_u32(p + 8);
  const uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const uint32_t s_lo = u0 & k6, m_lo = u1 & k6;
  const uint32_t s_hi = (u2 & k4) | (((u0 >> 6) & k2) << 4);
  const uint32_t m_hi = ((u2 >> 4) & k4) | (((u1 >> 6) & k2) << 4);
  const __m128i v = _mm_setr_epi32(int(s_lo), int(s_hi), int(m_lo), int(m_hi));
  store_scaled(v, false, d, dsc);
  store_scaled(_mm_srli_si128(v, 8), false, dmin, dmn);
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
  store_scaled(v, true, d, dsc);
  store_scaled(_mm_srli_si128(v, 8), true, d, dsc + 8);
}

// ---- Q2_K / Q3_K: 16 sub-blocks of 16, 2-bit codes ----------------------------------------------
// Half h (128 elements) uses qs[32h .. 32h+31]. Lane l of u8x8(q + 8g) (g = 0..3) holds
// q[8g + l]; (byte >> 2j) & 3 is element 128h + 32j + 8g + l, in sub-block 8h + 2j + g/2.

float dot_q2_k_avx2_impl(const u8* row, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  const __m256i m2 = splat(3);
  alignas(32) float dsc[16], dmn[16];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(BlockQ2_K);
    const float* xb = x + ib * kQK_K;
    {
      const float d = load_f16(b + offsetof(BlockQ2_K, d));
      const float dmin = load_f16(b + offsetof(BlockQ2_K, dmin));
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
      const __m128i lo = _mm_and_si128(s, _mm_set1_epi8(15));
      const __m128i hi = _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15));
      store_scaled(lo, false, d, dsc);
      store_scaled(_mm_srli_si128(lo, 8), false, d, dsc + 8);
      store_scaled(hi, false, dmin, dmn);
      store_scaled(_mm_srli_si128(hi, 8), false, dmin, dmn + 8);
    }
    STRATA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const u8* q = b + offsetof(BlockQ2_K, qs) + 32 * h;
      const __m256i v[4] = {u8x8(q), u8x8(q + 8), u8x8(q + 16), u8x8(q + 24)};
      STRATA_UNROLL
      for (int j = 0; j < 4; ++j) {
        const float* xs = xb + 128 * h + 32 * j;
        STRATA_UNROLL
        for (int k = 0; k < 2; ++k) {  // sub-block 8h + 2j + k: groups 2k, 2k+1
          const __m256i q0 = _mm256_and_si256(_mm256_srli_epi32(v[2 * k], 2 * j), m2);
          const __m256i q1 = _mm256_and_si256(_mm256_srli_epi32(v[2 * k + 1], 2 * j), m2);
          const __m256 x0 = ld(xs + 16 * k), x1 = ld(xs + 16 * k + 8);
          const __m256 s = _mm256_fmadd_ps(to_f32(q1), x1, _mm256_mul_ps(to_f32(q0), x0));
          const int is = 8 * h + 2 * j + k;
          __m256& a = acc[is & 3];
          a = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + is), s, a);
          a = _mm256_fnmadd_ps(_mm256_broadcast_ss(dmn + is), _mm256_add_ps(x0, x1), a);
        }
      }
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

// Q3_K: as Q2_K plus hmask: bit (4h + j) of hmask[8g + l] clear -> code - 4.
float dot_q3_k_avx2_impl(const u8* row, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  const __m256i m2 = splat(3), four = splat(4), ones = splat(-1);
  alignas(32) float dsc[16];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(BlockQ3_K);
    const float* xb = x + ib * kQK_K;
    q3k_scales(b + offsetof(BlockQ3_K, scales), load_f16(b + offsetof(BlockQ3_K, d)), dsc);
    const u8* hm = b + offsetof(BlockQ3_K, hmask);
    // hmask inverted, so that a set bit means "subtract 4"; shared by both halves.
    const __m256i hv[4] = {_mm256_xor_si256(u8x8(hm), ones), _mm256_xor_si256(u8x8(hm + 8), ones),
                           _mm256_xor_si256(u8x8(hm + 16), ones),
                           _mm256_xor_si256(u8x8(hm + 24), ones)};
    STRATA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const u8* q = b + offsetof(BlockQ3_K, qs) + 32 * h;
      const __m256i v[4] = {u8x8(q), u8x8(q + 8), u8x8(q + 16), u8x8(q + 24)};
      STRATA_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int hbit = 4 * h + j;
        const float* xs = xb + 128 * h + 32 * j;
        __m256i c[4];
        STRATA_UNROLL
        for (int g = 0; g < 4; ++g) {
          const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(v[g], 2 * j), m2);
          // ((~hmask >> hbit) & 1) * 4: move the bit to position 2
          const __m256i sub = _mm256_and_si256(
              hbit >= 2 ? _mm256_srli_epi32(hv[g], hbit - 2) : _mm256_slli_epi32(hv[g], 2 - hbit),
              four);
          c[g] = _mm256_sub_epi32(lo, sub);
        }
        STRATA_UNROLL
        for (int k = 0; k < 2; ++k) {  // sub-block 8h + 2j + k
          const __m256 s = _mm256_fmadd_ps(to_f32(c[2 * k + 1]), ld(xs + 16 * k + 8),
                                           _mm256_mul_ps(to_f32(c[2 * k]), ld(xs + 16 * k)));
          const int is = 8 * h + 2 * j + k;
          acc[is & 3] = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + is), s, acc[is & 3]);
        }
      }
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

// ---- Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min ---------------------------------
// Chunk c (64 elements) uses qs[32c .. 32c+31]: low nibbles are elements 64c + l (sub-block 2c),
// high nibbles 64c + 32 + l (sub-block 2c+1).

template <bool kQ5>
float dot_q45_k(const u8* row, const float* x, int64_t n) {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  const __m256i m4 = splat(15), sixteen = splat(16);
  alignas(32) float dsc[8], dmn[8];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(Block);
    const float* xb = x + ib * kQK_K;
    k4_scales(b + offsetof(Block, scales), load_f16(b + offsetof(Block, d)),
              load_f16(b + offsetof(Block, dmin)), dsc, dmn);
    __m256i hv[4];
    if constexpr (kQ5) {
      const u8* qh = b + offsetof(BlockQ5_K, qh);
      STRATA_UNROLL
      for (int g = 0; g < 4; ++g) hv[g] = u8x8(qh + 8 * g);
    }
    STRATA_UNROLL
    for (int c = 0; c < 4; ++c) {
      const u8* q = b + offsetof(Block, qs) + 32 * c;
      const float* xlo = xb + 64 * c;
      const float* xhi = xlo + 32;
      // two chains each for the low / high sums and the x sums
      __m256 slo[2], shi[2], xslo[2], xshi[2];
      STRATA_UNROLL
      for (int g = 0; g < 4; ++g) {
        const __m256i v = u8x8(q + 8 * g);
        __m256i lo = _mm256_and_si256(v, m4);
        __m256i hi = _mm256_srli_epi32(v, 4);
        if constexpr (kQ5) {  // bit 2c -> +16 on the low element, bit 2c+1 on the high one
          const __m256i hl = 2 * c >= 4 ? _mm256_srli_epi32(hv[g], 2 * c - 4)
                                        : _mm256_slli_epi32(hv[g], 4 - 2 * c);
          const __m256i hh = 2 * c + 1 >= 4 ? _mm256_srli_epi32(hv[g], 2 * c + 1 - 4)
                                            : _mm256_slli_epi32(hv[g], 4 - 2 * c - 1);
          lo = _mm256_or_si256(lo, _mm256_and_si256(hl, sixteen));
          hi = _mm256_or_si256(hi, _mm256_and_si256(hh, sixteen));
        }
        const __m256 x0 = ld(xlo + 8 * g), x1 = ld(xhi + 8 * g);
        const int t = g & 1;
        if (g < 2) {
          slo[t] = _mm256_mul_ps(to_f32(lo), x0);
          shi[t] = _mm256_mul_ps(to_f32(hi), x1);
          xslo[t] = x0;
          xshi[t] = x1;
        } else {
          slo[t] = _mm256_fmadd_ps(to_f32(lo), x0, slo[t]);
          shi[t] = _mm256_fmadd_ps(to_f32(hi), x1, shi[t]);
          xslo[t] = _mm256_add_ps(xslo[t], x0);
          xshi[t] = _mm256_add_ps(xshi[t], x1);
        }
      }
      __m256& a = acc[c];
      a = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + 2 * c), _mm256_add_ps(slo[0], slo[1]), a);
      a = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + 2 * c + 1), _mm256_add_ps(shi[0], shi[1]), a);
      a = _mm256_fnmadd_ps(_mm256_broadcast_ss(dmn + 2 * c), _mm256_add_ps(xslo[0], xslo[1]), a);
      a = _mm256_fnmadd_ps(_mm256_broadcast_ss(dmn + 2 * c + 1), _mm256_add_ps(xshi[0], xshi[1]),
                           a);
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

// ---- Q6_K: 16 sub-blocks of 16, 6-bit codes - 32 ----------------------------------------------
// Half h uses ql[64h ..], qh[32h ..], scales[8h ..]. For l < 32: element l = ql[l] low | qh[l]
// bits 0-1, l+32 = ql[l+32] low | bits 2-3, l+64 = ql[l] high | bits 4-5, l+96 = ql[l+32] high |
// bits 6-7; the sub-block of element e (within the half) is e / 16.

float dot_q6_k_avx2_impl(const u8* row, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  const __m256i m4 = splat(15), m30 = splat(0x30), k32 = splat(32);
  alignas(32) float dsc[16];
  for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
    const u8* b = row + ib * sizeof(BlockQ6_K);
    const float* xb = x + ib * kQK_K;
    {
      const float d = load_f16(b + offsetof(BlockQ6_K, d));
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ6_K, scales)));
      store_scaled(s, true, d, dsc);
      store_scaled(_mm_srli_si128(s, 8), true, d, dsc + 8);
    }
    STRATA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const u8* ql = b + offsetof(BlockQ6_K, ql) + 64 * h;
      const u8* qh = b + offsetof(BlockQ6_K, qh) + 32 * h;
      const float* xh = xb + 128 * h;
      STRATA_UNROLL
      for (int k = 0; k < 2; ++k) {  // l in [16k, 16k + 16): sub-blocks 8h + k + {0, 2, 4, 6}
        __m256 s[4];
        STRATA_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int l = 16 * k + 8 * e;
          const __m256i a = u8x8(ql + l), c = u8x8(ql + l + 32), hb = u8x8(qh + l);
          const __m256i q[4] = {
              _mm256_or_si256(_mm256_and_si256(a, m4),
                              _mm256_and_si256(_mm256_slli_epi32(hb, 4), m30)),
              _mm256_or_si256(_mm256_and_si256(c, m4),
                              _mm256_and_si256(_mm256_slli_epi32(hb, 2), m30)),
              _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(hb, m30)),
              _mm256_or_si256(_mm256_srli_epi32(c, 4),
                              _mm256_and_si256(_mm256_srli_epi32(hb, 2), m30)),
          };
          STRATA_UNROLL
          for (int t = 0; t < 4; ++t) {
            const __m256 p = to_f32(_mm256_sub_epi32(q[t], k32));
            s[t] = e == 0 ? _mm256_mul_ps(p, ld(xh + l + 32 * t))
                          : _mm256_fmadd_ps(p, ld(xh + l + 32 * t), s[t]);
          }
        }
        STRATA_UNROLL
        for (int t = 0; t < 4; ++t) {
          acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + 8 * h + k + 2 * t), s[t], acc[t]);
        }
      }
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

}  // namespace

// ---- exported kernels -------------------------------------------------------------------------

float dot_f32_avx2(const void* row, const float* x, int64_t n) {
  return dot_float_row(
      row, x, n,
      [](const void* r, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(r) + i); },
      [](const void* r, int64_t i) { return static_cast<const float*>(r)[i]; });
}

float dot_f16_avx2(const void* row, const float* x, int64_t n) {
  return dot_float_row(
      row, x, n,
      [](const void* r, int64_t i) {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(r) + i)));
      },
      [](const void* r, int64_t i) {
        return _cvtsh_ss(load_u16(static_cast<const u8*>(r) + 2 * i));
      });
}

float dot_bf16_avx2(const void* row, const float* x, int64_t n) {
  return dot_float_row(
      row, x, n,
      [](const void* r, int64_t i) {
        const __m256i w = _mm256_cvtepu16_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(r) + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
      },
      [](const void* r, int64_t i) {
        const uint32_t bits = uint32_t(load_u16(static_cast<const u8*>(r) + 2 * i)) << 16;
        float f;
        __builtin_memcpy(&f, &bits, sizeof f);
        return f;
      });
}

float dot_q4_0_avx2(const void* row, const float* x, int64_t n) {
  return dot_legacy(static_cast<const u8*>(row), x, n, sizeof(BlockQ4_0),
                    [](const u8* b) {
                      Codes4 c = nibbles(b + offsetof(BlockQ4_0, qs));
                      STRATA_UNROLL
                      for (int g = 0; g < 4; ++g) c.q[g] = _mm256_sub_epi32(c.q[g], splat(8));
                      return c;
                    });
}

float dot_q4_1_avx2(const void* row, const float* x, int64_t n) {
  return dot_legacy_min(static_cast<const u8*>(row), x, n, sizeof(BlockQ4_1),
                        [](const u8* b) { return nibbles(b + offsetof(BlockQ4_1, qs)); });
}

float dot_q5_0_avx2(const void* row, const float* x, int64_t n) {
  return dot_legacy(static_cast<const u8*>(row), x, n, sizeof(BlockQ5_0),
                    [](const u8* b) {
                      Codes4 c = nibbles(b + offsetof(BlockQ5_0, qs));
                      fifth_bit(load_u32(b + offsetof(BlockQ5_0, qh)), true, c);
                      return c;
                    });
}

float dot_q5_1_avx2(const void* row, const float* x, int64_t n) {
  return dot_legacy_min(static_cast<const u8*>(row), x, n, sizeof(BlockQ5_1),
                        [](const u8* b) {
                          Codes4 c = nibbles(b + offsetof(BlockQ5_1, qs));
                          fifth_bit(load_u32(b + offsetof(BlockQ5_1, qh)), false, c);
                          return c;
                        });
}

float dot_q8_0_avx2(const void* row, const float* x, int64_t n) {
  return dot_legacy(static_cast<const u8*>(row), x, n, sizeof(BlockQ8_0),
                    [](const u8* b) {
                      const u8* qs = b + offsetof(BlockQ8_0, qs);
                      return Codes4{{i8x8(qs), i8x8(qs + 8), i8x8(qs + 16), i8x8(qs + 24)}};
                    });
}

float dot_q2_k_avx2(const void* row, const float* x, int64_t n) {
  return dot_q2_k_avx2_impl(static_cast<const u8*>(row), x, n);
}
float dot_q3_k_avx2(const void* row, const float* x, int64_t n) {
  return dot_q3_k_avx2_impl(static_cast<const u8*>(row), x, n);
}
float dot_q4_k_avx2(const void* row, const float* x, int64_t n) {
  return dot_q45_k<false>(static_cast<const u8*>(row), x, n);
}
float dot_q5_k_avx2(const void* row, const float* x, int64_t n) {
  return dot_q45_k<true>(static_cast<const u8*>(row), x, n);
}
float dot_q6_k_avx2(const void* row, const float* x, int64_t n) {
  return dot_q6_k_avx2_impl(static_cast<const u8*>(row), x, n);
}

}  // namespace strata::kernels::cpu
