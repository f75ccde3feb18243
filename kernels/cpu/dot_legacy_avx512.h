// The legacy 32-element blocks' f32-activation dot, AVX-512 (dot_avx512.cpp's dot_q4_0 .. q8_0
// kernels), and the same arithmetic on a q8_0 / q4_1 row decoded once for several x
// (LegacyRow: attention_avx512.cpp's rows of a GQA group share each quantised key's decode, and
// each row's q.k must keep dot_q8_0_avx512's / dot_q4_1_avx512's bits, tests/kernels/
// test_attention_tree.cpp). Include only from files compiled with the AVX-512 flags: the anonymous
// namespace gives each such file its own copy (dot_avx512.cpp's "ISA hygiene").
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/quant/blocks.h"

namespace strata::kernels::cpu {
namespace {

// 16 bytes at p -> 16 int32 lanes, zero- or sign-extended.
inline __m512i u8x16(const u8* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i i8x16(const u8* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 to_f32(__m512i v) { return _mm512_cvtepi32_ps(v); }
inline __m512i splat(int v) { return _mm512_set1_epi32(v); }

// Lane l of u8x16(qs) holds qs[l]: its low nibble is element l, its high nibble element 16 + l.
// A Codes functor returns the int32 codes of elements 0-15 and 16-31.
struct Codes2 {
  __m512i q[2];
};
inline Codes2 nibbles(const u8* qs) {
  const __m512i v = u8x16(qs);
  return {{_mm512_and_si512(v, splat(15)), _mm512_srli_epi32(v, 4)}};
}
inline Codes2 q8_0_codes(const u8* b) {
  const u8* qs = b + offsetof(BlockQ8_0, qs);
  return Codes2{{i8x16(qs), i8x16(qs + 16)}};
}
inline Codes2 q4_1_codes(const u8* b) { return nibbles(b + offsetof(BlockQ4_1, qs)); }

// A block's codes (as f32) times x, per lane: elements l and 16 + l.
inline __m512 block_qx_f(__m512 f0, __m512 f1, const float* xb) {
  return _mm512_fmadd_ps(f1, ld(xb + 16), _mm512_mul_ps(f0, ld(xb)));
}
inline __m512 block_qx(const Codes2& c, const float* xb) { return block_qx_f(to_f32(c.q[0]), to_f32(c.q[1]), xb); }

// y = q * d (q signed, already offset); consecutive blocks go to two accumulators.
template <typename Codes>
inline float dot_legacy(const u8* row, const float* x, int64_t n, size_t block_bytes, Codes codes) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  const int64_t nb = n / kQK;
  int64_t ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    const u8* b = row + ib * block_bytes;
    const float* xb = x + ib * kQK;
    acc0 = _mm512_fmadd_ps(bcast(load_f16(b)), block_qx(codes(b), xb), acc0);
    const u8* b1 = b + block_bytes;
    acc1 = _mm512_fmadd_ps(bcast(load_f16(b1)), block_qx(codes(b1), xb + kQK), acc1);
  }
  if (ib < nb) {
    const u8* b = row + ib * block_bytes;
    acc0 = _mm512_fmadd_ps(bcast(load_f16(b)), block_qx(codes(b), x + ib * kQK), acc0);
  }
  return hsum(_mm512_add_ps(acc0, acc1));
}

// y = q * d + m (q unsigned).  dot = d * sum(q*x) + m * sum(x).
template <typename Codes>
inline float dot_legacy_min(const u8* row, const float* x, int64_t n, size_t block_bytes, Codes codes) {
  __m512 acc = _mm512_setzero_ps(), macc = acc;
  const int64_t nb = n / kQK;
  for (int64_t ib = 0; ib < nb; ++ib) {
    const u8* b = row + ib * block_bytes;
    const float* xb = x + ib * kQK;
    const __m512 xs = _mm512_add_ps(ld(xb), ld(xb + 16));
    acc = _mm512_fmadd_ps(bcast(load_f16(b)), block_qx(codes(b), xb), acc);
    macc = _mm512_fmadd_ps(bcast(load_f16(b + 2)), xs, macc);
  }
  return hsum(_mm512_add_ps(acc, macc));
}

// A q8_0 (kMin false) or q4_1 (kMin true) row of up to kMaxBlocks blocks, decoded once: codes as
// f32, d (and m) broadcast. dot(x) runs dot_legacy's / dot_legacy_min's operations in their order
// on it (to_f32 is exact, so converting once changes nothing): the same bits as the kernel.
template <bool kMin, int kMaxBlocks>
struct LegacyRow {
  __m512 f[kMaxBlocks][2], d[kMaxBlocks], m[kMaxBlocks];
  int nb = 0;
  void decode(const u8* row, int n_blocks) {
    constexpr size_t kBytes = kMin ? sizeof(BlockQ4_1) : sizeof(BlockQ8_0);
    nb = n_blocks;
    STRATA_UNROLL for (int ib = 0; ib < kMaxBlocks; ++ib) {
      if (ib >= nb) break;
      const u8* b = row + ib * kBytes;
      const Codes2 c = kMin ? q4_1_codes(b) : q8_0_codes(b);
      f[ib][0] = to_f32(c.q[0]), f[ib][1] = to_f32(c.q[1]);
      d[ib] = bcast(load_f16(b));
      if constexpr (kMin) m[ib] = bcast(load_f16(b + 2));
    }
  }
  float dot(const float* x) const {
    if constexpr (kMin) {
      __m512 acc = _mm512_setzero_ps(), macc = acc;
      STRATA_UNROLL for (int ib = 0; ib < kMaxBlocks; ++ib) {
        if (ib >= nb) break;
        const float* xb = x + ib * kQK;
        const __m512 xs = _mm512_add_ps(ld(xb), ld(xb + 16));
        acc = _mm512_fmadd_ps(d[ib], block_qx_f(f[ib][0], f[ib][1], xb), acc);
        macc = _mm512_fmadd_ps(m[ib], xs, macc);
      }
      return hsum(_mm512_add_ps(acc, macc));
    } else {
      __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
      STRATA_UNROLL for (int ib = 0; ib < kMaxBlocks; ib += 2) {
        if (ib >= nb) break;
        acc0 = _mm512_fmadd_ps(d[ib], block_qx_f(f[ib][0], f[ib][1], x + ib * kQK), acc0);
        if (ib + 1 < nb)
          acc1 = _mm512_fmadd_ps(d[ib + 1], block_qx_f(f[ib + 1][0], f[ib + 1][1], x + (ib + 1) * kQK), acc1);
      }
      return hsum(_mm512_add_ps(acc0, acc1));
    }
  }
};

}  // namespace
}  // namespace strata::kernels::cpu
