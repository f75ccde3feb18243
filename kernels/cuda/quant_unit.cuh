// Weight decoders for the int8-activation GEMV (gemv_q8.cuh). Internal to kernels/cuda (CUDA only).
//
// A decoder walks a row in units of kUnit elements (one thread, one unit at a time) and hands the
// kernel each 32-element sub-unit of the unit as
//   visit(e, q, sc, mn):  e = the sub-unit's first element in the row (a multiple of 32),
//                         q[8] = its 32 codes as bytes (word k holds elements 4k..4k+3, little-end),
//                         sc[2], mn[2] = scale and min of its two 16-element halves,
// with element value = sc * (code - kBias) - mn. Codes are at most 63 after the bias is removed
// in integers, so they are valid int8 and feed __dp4a with the int8 activations directly.
// Units are chosen so that the bytes a unit shares (scales, high-bit planes) are loaded once and
// the loads are as wide as the block alignment allows; the layouts are the format facts in
// kernels/cpu/quant/blocks.h (and quant_decode.cuh, the exact decoders these agree with).
// kAlign: the alignment the data pointer and row stride must have (else the gemv falls back).
#pragma once

#include "kernels/cuda/quant_decode.cuh"

namespace strata::kernels::cuda::detail {

// N words from p (2-byte aligned) as aligned 32-bit loads joined by funnel shifts; never reads a
// word holding none of the wanted bytes.
template <int N>
__device__ __forceinline__ void load_words_a2(const uint8_t* p, uint32_t (&w)[N]) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* q = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
  const uint32_t sh = uint32_t(a & 2) * 8;  // 0 or 16
  uint32_t cur = __ldg(q);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next = (i + 1 < N || sh) ? __ldg(q + i + 1) : 0u;
    w[i] = __funnelshift_r(cur, next, sh);
    cur = next;
  }
}
template <int N>
__device__ __forceinline__ void load_words_a4(const uint8_t* p, uint32_t (&w)[N]) {
  const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) w[i] = __ldg(q + i);
}
template <int N>
__device__ __forceinline__ void load_words_a16(const uint8_t* p, uint32_t (&w)[N]) {
  static_assert(N % 4 == 0);
  const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    const uint4 v = __ldg(q + i);
    w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
  }
}

// ---- legacy 32-element blocks: one unit = one block ----
struct UnitQ8_0 {
  static constexpr int kUnit = 32, kBlockBytes = 34, kAlign = 2, kBias = 0;
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
    const uint8_t* b = row + u * kBlockBytes;
    const float d = h2f(ld16(b));
    uint32_t q[8];
    load_words_a2<8>(b + 2, q);
    const float sc[2] = {d, d}, mn[2] = {0.0f, 0.0f};
    f(u * 32, q, sc, mn);
  }
};
template <int kBlock, int kQsOff, bool kMin, bool kHigh>  // q4_0 q4_1 q5_0 q5_1
struct UnitLegacy4 {
  static constexpr int kUnit = 32, kBlockBytes = kBlock, kAlign = (kBlock % 4 == 0) ? 4 : 2;
  static constexpr int kBias = kMin ? 0 : (kHigh ? 16 : 8);
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
    const uint8_t* b = row + u * kBlockBytes;
    const float d = h2f(ld16(b));
    const float m = kMin ? -h2f(ld16(b + 2)) : 0.0f;  // value = q d + m = q d - (-m)
    uint32_t w[4];
    if constexpr (kAlign == 4) load_words_a4<4>(b + kQsOff, w);
    else load_words_a2<4>(b + kQsOff, w);
    uint32_t qh = 0;
    if constexpr (kHigh) qh = kAlign == 4 ? __ldg(reinterpret_cast<const uint32_t*>(b + kQsOff - 4)) : ld32_a2(b + kQsOff - 4);
    uint32_t q[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      q[k] = w[k] & 0x0F0F0F0Fu;
      q[k + 4] = (w[k] >> 4) & 0x0F0F0F0Fu;
      if constexpr (kHigh) {
        q[k] |= spread4(qh >> (4 * k)) << 4;
        q[k + 4] |= spread4(qh >> (16 + 4 * k)) << 4;
      }
    }
    const float sc[2] = {d, d}, mn[2] = {m, m};
    f(u * 32, q, sc, mn);
  }
};
using UnitQ4_0 = UnitLegacy4<18, 2, false, false>;
using UnitQ4_1 = UnitLegacy4<20, 4, true, false>;
using UnitQ5_0 = UnitLegacy4<22, 6, false, true>;
using UnitQ5_1 = UnitLegacy4<24, 8, true, true>;

// ---- K types (256-element super-blocks) ----
// Q2_K: unit = one half (128 elements): the 32 qs bytes of the half hold all four 2-bit planes.
struct UnitQ2_K {
  static constexpr int kUnit = 128, kBlockBytes = 84, kAlign = 4, kBias = 0;
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
    const uint8_t* b = row + (u >> 1) * kBlockBytes;
    const int half = int(u & 1);
    uint32_t w[8], sb[2];
    load_words_a4<8>(b + 16 + 32 * half, w);
    load_words_a4<2>(b + 8 * half, sb);  // scales[8 half .. 8 half + 8): (scale | min << 4) per 16
    const uint32_t dd = __ldg(reinterpret_cast<const uint32_t*>(b + 80));
    const float d = h2f(uint16_t(dd)), dmin = h2f(uint16_t(dd >> 16));
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      uint32_t q[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k] = (w[k] >> (2 * s)) & 0x03030303u;
      const uint32_t s0 = (sb[s >> 1] >> (16 * (s & 1))) & 0xffu, s1 = (sb[s >> 1] >> (16 * (s & 1) + 8)) & 0xffu;
      const float sc[2] = {__fmul_rn(d, float(s0 & 15u)), __fmul_rn(d, float(s1 & 15u))};
      const float mn[2] = {__fmul_rn(dmin, float(s0 >> 4)), __fmul_rn(dmin, float(s1 >> 4))};
      f(u * 128 + 32 * s, q, sc, mn);
    }
  }
};
// Q3_K: unit = one half (128 elements): its 32 qs bytes hold four 2-bit planes, the 32 hmask bytes
// eight 1-bit planes (4 per half).
struct UnitQ3_K {
  static constexpr int kUnit = 128, kBlockBytes = 110, kAlign = 2, kBias = 4;
  __device__ __forceinline__ static int scale6(const uint8_t* scales, int is) {
    const int lo = is < 8 ? (scales[is] & 15) : (scales[is - 8] >> 4);
    const int hi = (scales[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
  }
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
    const uint8_t* b = row + (u >> 1) * kBlockBytes;
    const int half = int(u & 1);
    uint32_t w[8], h[8], sw[3];
    load_words_a2<8>(b + 32 + 32 * half, w);
    load_words_a2<8>(b, h);
    load_words_a2<3>(b + 96, sw);
    const uint8_t* scales = reinterpret_cast<const uint8_t*>(sw);
    const float d = h2f(ld16(b + 108));
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      uint32_t q[8];
      const int hs = 4 * half + s;
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k] = ((w[k] >> (2 * s)) & 0x03030303u) | (((h[k] >> hs) & 0x01010101u) << 2);
      const int is = 8 * half + 2 * s;
      const float sc[2] = {__fmul_rn(d, float(scale6(scales, is))), __fmul_rn(d, float(scale6(scales, is + 1)))};
      const float mn[2] = {0.0f, 0.0f};
      f(u * 128 + 32 * s, q, sc, mn);
    }
  }
};
// Q4_K / Q5_K: unit = one 64-element group g: the 32 qs bytes of g hold both sub-blocks (low and
// high nibbles); the 16-byte header (d, dmin, 12 scale bytes) is one load.
template <bool kHigh>
struct UnitQ45_K {
  static constexpr int kUnit = 64, kBlockBytes = kHigh ? 176 : 144, kAlign = 16, kBias = 0;
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
    const uint8_t* b = row + (u >> 2) * kBlockBytes;
    const int g = int(u & 3);
    uint32_t hdr[4], w[8], qh[8];
    load_words_a16<4>(b, hdr);
    load_words_a16<8>(b + (kHigh ? 48 : 16) + 32 * g, w);
    if constexpr (kHigh) load_words_a16<8>(b + 16, qh);
    const uint8_t* sb = reinterpret_cast<const uint8_t*>(hdr) + 4;
    const float d = h2f(uint16_t(hdr[0])), dmin = h2f(uint16_t(hdr[0] >> 16));
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      int s, m;
      k4_scale_min(sb, 2 * g + hi, s, m);
      uint32_t q[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        q[k] = (w[k] >> (4 * hi)) & 0x0F0F0F0Fu;
        if constexpr (kHigh) q[k] |= ((qh[k] >> (2 * g + hi)) & 0x01010101u) << 4;
      }
      const float scv = __fmul_rn(d, float(s)), mnv = __fmul_rn(dmin, float(m));
      const float sc[2] = {scv, scv}, mn[2] = {mnv, mnv};
      f(u * 64 + 32 * hi, q, sc, mn);
    }
  }
};
using UnitQ4_K = UnitQ45_K<false>;
using UnitQ5_K = UnitQ45_K<true>;
// Q6_K: unit = one 128-element chunk c: ql[64 c ..) holds quarters k and k + 2 in its nibbles,
// qh[32 c ..) the top 2 bits of all four quarters.
struct UnitQ6_K {
  static constexpr int kUnit = 128, kBlockBytes = 210, kAlign = 2, kBias = 32;
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
    const uint8_t* b = row + (u >> 1) * kBlockBytes;
    const int c = int(u & 1);
    uint32_t lo[16], hb[8], sw[2];
    load_words_a2<16>(b + 64 * c, lo);
    load_words_a2<8>(b + 128 + 32 * c, hb);
    load_words_a2<2>(b + 192 + 8 * c, sw);
    const int8_t* scales = reinterpret_cast<const int8_t*>(sw);
    const float d = h2f(ld16(b + 208));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      uint32_t q[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        q[i] = ((lo[8 * (k & 1) + i] >> (4 * (k >> 1))) & 0x0F0F0F0Fu) | (((hb[i] >> (2 * k)) & 0x03030303u) << 4);
      const float sc[2] = {__fmul_rn(d, float(scales[2 * k])), __fmul_rn(d, float(scales[2 * k + 1]))};
      const float mn[2] = {0.0f, 0.0f};
      f(u * 128 + 32 * k, q, sc, mn);
    }
  }
};

}  // namespace strata::kernels::cuda::detail
