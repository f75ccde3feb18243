// AVX2 int8-activation dots (dot_q8.h): u8 x s8 products with vpmaddubsw, pairs to int32 with
// vpmaddwd, exactly the integer sums and f32 lane order of the scalar reference
// (dot_q8_scalar.cpp). Compiled with -mavx2 -mfma -mf16c; called only when cpu_features().avx2.
//
// Each weight block is decoded once into registers (unsigned codes per 32 elements, scales as
// int32 lanes) and then multiplied with every activation column; per column the K types keep
// eight f32 lanes (one per 32-element group) and the legacy types eight lanes of 4-element sums.
//
// ISA hygiene (as dot_avx2.cpp): nothing here instantiates an inline function shared with other
// translation units: no std::, no member functions of Q8ActView (pointers are computed from its
// fields).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/quant/blocks.h"

#define STRATA_UNROLL _Pragma("GCC unroll 16")

namespace strata::kernels::cpu {
namespace {

inline __m256i ld(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i ld128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Bits [shift, shift + width) of every byte, as small unsigned bytes.
template <int kShift>
inline __m256i bits(__m256i v, __m256i mask) {
  return _mm256_and_si256(kShift ? _mm256_srli_epi16(v, kShift) : v, mask);
}
// (small byte values) << kShift within each byte (inputs < 2^(8 - kShift), so no carry between bytes).
template <int kShift>
inline __m256i shl(__m256i v) { return _mm256_slli_epi16(v, kShift); }

// ---- K types -----------------------------------------------------------------------------------

struct KRegs {
  __m256i u[8];         // unsigned codes of group g (32 elements)
  __m256i sc_a, sc_b;   // int32 scales in the order of the half-sums (see reduce_groups)
  __m256i off, m;       // int16 sc * offset and mins per half-group
  float d, dmin;
};

// The scales are unpacked with a few u32 / vector operations (the scalar unpack of
// dot_q8_scales.h costs more than the whole integer dot of one column); the tests hold them to the
// scalar reference.
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// 16 int8 scales per half-group (Q3_K, Q6_K): int32 in half-sum order, and sc << kOffShift.
template <int kOffShift>
inline void load_scales_i8(__m128i sc, KRegs* k) {
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  k->sc_a = _mm256_permutevar8x32_epi32(_mm256_cvtepi8_epi32(sc), order);
  k->sc_b = _mm256_permutevar8x32_epi32(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)), order);
  k->off = _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc), kOffShift);
}

// Q4_K / Q5_K: 8 6-bit (scale, min) pairs per group (layout in dot_q8_scales.h); group g's scale
// serves both of its half-groups, so half-sum order [h0 h2 h4 h6 | h1 h3 h5 h7] is [s0..s3 | s0..s3].
inline void load_scales_k4(const uint8_t* q, KRegs* k) {
  const uint32_t a0 = load_u32(q), a1 = load_u32(q + 4), a2 = load_u32(q + 8);
  const uint32_t sc_lo = a0 & 0x3f3f3f3fu, m_lo = a1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | (((a0 >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((a2 >> 4) & 0x0f0f0f0fu) | (((a1 >> 6) & 0x03030303u) << 4);
  k->sc_a = _mm256_cvtepu8_epi32(_mm_set1_epi32(int(sc_lo)));
  k->sc_b = _mm256_cvtepu8_epi32(_mm_set1_epi32(int(sc_hi)));
  const __m128i m8 = _mm_cvtsi64_si128(int64_t(uint64_t(m_lo) | (uint64_t(m_hi) << 32)));
  k->m = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));  // m per half-group: m0 m0 m1 m1 ...
  k->off = _mm256_setzero_si256();
}

// Q3_K: 16 6-bit codes (scale + 32): low nibbles in bytes 0-7, top 2 bits in bytes 8-11.
inline __m128i q3k_scales(const uint8_t* q) {
  const uint32_t a0 = load_u32(q), a1 = load_u32(q + 4), a2 = load_u32(q + 8);
  const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const __m128i codes = _mm_setr_epi32(int((a0 & m4) | ((a2 & m2) << 4)), int((a1 & m4) | (((a2 >> 2) & m2) << 4)),
                                       int(((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4)),
                                       int(((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4)));
  return _mm_sub_epi8(codes, _mm_set1_epi8(32));
}

inline void decode(const BlockQ4_K& b, KRegs* k) {
  const __m256i m4 = _mm256_set1_epi8(15);
  STRATA_UNROLL for (int j = 0; j < 4; ++j) {
    const __m256i v = ld(b.qs + 32 * j);
    k->u[2 * j] = bits<0>(v, m4);
    k->u[2 * j + 1] = bits<4>(v, m4);
  }
  load_scales_k4(b.scales, k);
  k->d = _cvtsh_ss(b.d), k->dmin = _cvtsh_ss(b.dmin);
}

inline void decode(const BlockQ5_K& b, KRegs* k) {
  const __m256i m4 = _mm256_set1_epi8(15), m1 = _mm256_set1_epi8(1);
  const __m256i hb = ld(b.qh);
  const __m256i v0 = ld(b.qs), v1 = ld(b.qs + 32), v2 = ld(b.qs + 64), v3 = ld(b.qs + 96);
  k->u[0] = _mm256_or_si256(bits<0>(v0, m4), shl<4>(bits<0>(hb, m1)));
  k->u[1] = _mm256_or_si256(bits<4>(v0, m4), shl<4>(bits<1>(hb, m1)));
  k->u[2] = _mm256_or_si256(bits<0>(v1, m4), shl<4>(bits<2>(hb, m1)));
  k->u[3] = _mm256_or_si256(bits<4>(v1, m4), shl<4>(bits<3>(hb, m1)));
  k->u[4] = _mm256_or_si256(bits<0>(v2, m4), shl<4>(bits<4>(hb, m1)));
  k->u[5] = _mm256_or_si256(bits<4>(v2, m4), shl<4>(bits<5>(hb, m1)));
  k->u[6] = _mm256_or_si256(bits<0>(v3, m4), shl<4>(bits<6>(hb, m1)));
  k->u[7] = _mm256_or_si256(bits<4>(v3, m4), shl<4>(bits<7>(hb, m1)));
  load_scales_k4(b.scales, k);
  k->d = _cvtsh_ss(b.d), k->dmin = _cvtsh_ss(b.dmin);
}

inline void decode(const BlockQ6_K& b, KRegs* k) {
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
  STRATA_UNROLL for (int c = 0; c < 2; ++c) {
    const __m256i q0 = ld(b.ql + 64 * c), q1 = ld(b.ql + 64 * c + 32), h = ld(b.qh + 32 * c);
    k->u[4 * c + 0] = _mm256_or_si256(bits<0>(q0, m4), shl<4>(bits<0>(h, m2)));
    k->u[4 * c + 1] = _mm256_or_si256(bits<0>(q1, m4), shl<4>(bits<2>(h, m2)));
    k->u[4 * c + 2] = _mm256_or_si256(bits<4>(q0, m4), shl<4>(bits<4>(h, m2)));
    k->u[4 * c + 3] = _mm256_or_si256(bits<4>(q1, m4), shl<4>(bits<6>(h, m2)));
  }
  load_scales_i8<5>(ld128(b.scales), k);
  k->d = _cvtsh_ss(b.d), k->dmin = 0;
}

inline void decode(const BlockQ3_K& b, KRegs* k) {
  const __m256i m2 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
  const __m256i hm = ld(b.hmask), q0 = ld(b.qs), q1 = ld(b.qs + 32);
  k->u[0] = _mm256_or_si256(bits<0>(q0, m2), shl<2>(bits<0>(hm, m1)));
  k->u[1] = _mm256_or_si256(bits<2>(q0, m2), shl<2>(bits<1>(hm, m1)));
  k->u[2] = _mm256_or_si256(bits<4>(q0, m2), shl<2>(bits<2>(hm, m1)));
  k->u[3] = _mm256_or_si256(bits<6>(q0, m2), shl<2>(bits<3>(hm, m1)));
  k->u[4] = _mm256_or_si256(bits<0>(q1, m2), shl<2>(bits<4>(hm, m1)));
  k->u[5] = _mm256_or_si256(bits<2>(q1, m2), shl<2>(bits<5>(hm, m1)));
  k->u[6] = _mm256_or_si256(bits<4>(q1, m2), shl<2>(bits<6>(hm, m1)));
  k->u[7] = _mm256_or_si256(bits<6>(q1, m2), shl<2>(bits<7>(hm, m1)));
  load_scales_i8<2>(q3k_scales(b.scales), k);
  k->d = _cvtsh_ss(b.d), k->dmin = 0;
}

// p[g]: eight int32 lanes of group g, lanes 0-3 summing half-group 2g, lanes 4-7 half-group 2g+1.
// Returns lane g = sc_{2g} * half_{2g} + sc_{2g+1} * half_{2g+1}.
inline __m256i reduce_groups(const __m256i* p, const KRegs& k) {
  // hadd twice: [h0 h2 h4 h6 | h1 h3 h5 h7] and [h8 h10 h12 h14 | h9 h11 h13 h15].
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  const __m256i sa = _mm256_mullo_epi32(a, k.sc_a), sb = _mm256_mullo_epi32(b, k.sc_b);
  return _mm256_add_epi32(_mm256_permute2x128_si256(sa, sb, 0x20), _mm256_permute2x128_si256(sa, sb, 0x31));
}

template <typename Block, bool kOffset, bool kMin>
void dot_k(const void* row, const Q8ActView& x, float* y, int64_t y_stride) {
  const Block* blocks = static_cast<const Block*>(row);
  const int n_col = x.n_col;
  const int64_t n = x.n, nd = n / kQ8Group, ns = n / 16;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kQ8MaxCols], accm[kQ8MaxCols];
  for (int c = 0; c < n_col; ++c) acc[c] = accm[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    KRegs k;
    decode(blocks[b], &k);
    const __m256 d = _mm256_set1_ps(k.d), dmin = _mm256_set1_ps(k.dmin);
    for (int c = 0; c < n_col; ++c) {
      const int8_t* xq = x.q + c * n + b * kQK_K;
      __m256i p[8];
      STRATA_UNROLL for (int g = 0; g < 8; ++g)
        p[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(k.u[g], ld(xq + 32 * g)), ones);
      __m256i isum = reduce_groups(p, k);
      const __m256i s = ld(x.s + c * ns + b * 16);
      if (kOffset) isum = _mm256_sub_epi32(isum, _mm256_madd_epi16(s, k.off));
      const __m256 dx = _mm256_loadu_ps(x.d + c * nd + b * 8);
      acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), dx), d, acc[c]);
      if (kMin) {
        const __m256i mint = _mm256_madd_epi16(s, k.m);
        accm[c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(mint), dx), dmin, accm[c]);
      }
    }
  }
  for (int c = 0; c < n_col; ++c) y[c * y_stride] = hsum(_mm256_sub_ps(acc[c], accm[c]));
}

// ---- Q4_0 / Q8_0 -------------------------------------------------------------------------------

inline __m256i decode_legacy(const BlockQ4_0& b) {
  const __m128i v = ld128(b.qs), m4 = _mm_set1_epi8(15);
  const __m256i u = _mm256_setr_m128i(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
  return _mm256_sub_epi8(u, _mm256_set1_epi8(8));
}
inline __m256i decode_legacy(const BlockQ8_0& b) { return ld(b.qs); }

template <typename Block>
void dot_legacy(const void* row, const Q8ActView& x, float* y, int64_t y_stride) {
  const Block* blocks = static_cast<const Block*>(row);
  const int n_col = x.n_col;
  const int64_t n = x.n, nd = n / kQ8Group;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kQ8MaxCols];
  for (int c = 0; c < n_col; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK; ++b) {
    const __m256i w = decode_legacy(blocks[b]);
    const __m256i aw = _mm256_sign_epi8(w, w);  // |w| as unsigned bytes (-128 -> 128)
    const float dw = _cvtsh_ss(blocks[b].d);
    for (int c = 0; c < n_col; ++c) {
      const __m256i sx = _mm256_sign_epi8(ld(x.q + c * n + b * kQK), w);  // x * sign(w)
      const __m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones);
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(dw * x.d[c * nd + b]), acc[c]);
    }
  }
  for (int c = 0; c < n_col; ++c) y[c * y_stride] = hsum(acc[c]);
}

}  // namespace

void dot_q8_q4_0_avx2(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy<BlockQ4_0>(r, x, y, ys); }
void dot_q8_q8_0_avx2(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy<BlockQ8_0>(r, x, y, ys); }
void dot_q8_q3_k_avx2(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k<BlockQ3_K, true, false>(r, x, y, ys); }
void dot_q8_q4_k_avx2(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k<BlockQ4_K, false, true>(r, x, y, ys); }
void dot_q8_q5_k_avx2(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k<BlockQ5_K, false, true>(r, x, y, ys); }
void dot_q8_q6_k_avx2(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k<BlockQ6_K, true, false>(r, x, y, ys); }

}  // namespace strata::kernels::cpu
