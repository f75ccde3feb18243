// Device-side decoding of the i-quants (IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ1_S, IQ1_M) in the GGUF layout, for the dequantise / GEMM-tile / f32-activation GEMV kernels
// (as quant_decode.cuh decoders, DecIq<T>) and the int8-activation GEMV (as quant_unit.cuh units,
// UnitIq<T>). Internal to kernels/cuda (CUDA only). Layouts: kernels/cpu/quant/blocks.h; the CPU
// reference decoders: kernels/cpu/quant/iq_types.cpp.
//
// Every type's value is code * scale with a small signed integer code and a float scale per 8 (or
// more) elements:
//   grid types: code = +-grid magnitude, scale = the sub-block factor, e.g. (d * (0.5 + s)) * 0.25
//               (the sign is a multiplication by -1 on the CPU: exact either way);
//   IQ1_S/M:    code = 8 g +- 1, scale = dl / 8 (iq_tables.cuh iq1_codes says why that is exact);
//   IQ4_NL/XS:  code = kValuesIq4nl[nibble], scale = d or d * (ls - 32).
// Scales are evaluated in the CPU's order with __fmul_rn (no contraction), so decode_piece
// reproduces the CPU decoders bit for bit. Codes fit int8 (|code| <= 127), so the int8 GEMV feeds
// them to __dp4a as signed bytes with no bias.
//
// Each type T gives groups(b, ib, only, tab, g): for the 8-element groups l = 0..3 of 32-element
// sub-block ib of the block at b (only = -1: all four; else only group `only`), g(l, lo, hi, sc)
// with lo / hi the signed codes of elements 8 l .. 8 l + 3 / 8 l + 4 .. 8 l + 7 (byte j = element j)
// and sc their scale; tab is the type's grid (Entry[kTableEntries]: global_table(), or a copy of
// it elsewhere, e.g. in shared memory; none for IQ4). Loads: blocks are only 2-byte aligned
// (except IQ4_XS and IQ1_M), so bytes come through quant_unit.cuh's aligned-word loaders.
#pragma once

#include "kernels/cuda/iq_tables.cuh"
#include "kernels/cuda/quant_unit.cuh"

namespace strata::kernels::cuda::detail {

__device__ __forceinline__ uint32_t byte_at(const uint32_t* w, int j) { return (w[j >> 2] >> (8 * (j & 3))) & 0xffu; }
__device__ __forceinline__ uint32_t ld8(const uint8_t* p) { return __ldg(p); }
__device__ __forceinline__ uint32_t lo32(uint64_t v) { return uint32_t(v); }
__device__ __forceinline__ uint32_t hi32(uint64_t v) { return uint32_t(v >> 32); }
// (d * (0.5 + s)) * f, the grid types' sub-block factor in the CPU's order.
__device__ __forceinline__ float iq_half_scale(float d, uint32_t s, float f) {
  return __fmul_rn(__fmul_rn(d, 0.5f + float(s)), f);
}

// IQ2_XXS (66 bytes): d; per sub-block 8 bytes: 4 grid indices, then 4 x 7 sign bits + scale.
struct IqIq2_XXS {
  static constexpr int kBlockElems = 256, kBlockBytes = 66, kAlign = 2;
  using Entry = uint64_t;
  static constexpr int kTableEntries = 256;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq2xxsGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t w[2];
    load_words_a2<2>(b + 2 + 8 * ib, w);
    const float db = iq_half_scale(h2f(ld16(b)), w[1] >> 28, 0.25f);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint64_t e = tab[byte_at(w, l)];
      const uint32_t s = iq_ksigns((w[1] >> (7 * l)) & 127u);
      g(l, iq_apply_signs(lo32(e), s), iq_apply_signs(hi32(e), s >> 4), db);
    }
  }
};
// IQ2_XS (74 bytes): d; qs u16[32] (9-bit grid index | 7-bit sign index << 9); scales[8] at 66.
struct IqIq2_XS {
  static constexpr int kBlockElems = 256, kBlockBytes = 74, kAlign = 2;
  using Entry = uint64_t;
  static constexpr int kTableEntries = 512;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq2xsGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t w[2];
    load_words_a2<2>(b + 2 + 8 * ib, w);
    const float d = h2f(ld16(b));
    const uint32_t s8 = ld8(b + 66 + ib);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint32_t q = (w[l >> 1] >> (16 * (l & 1))) & 0xffffu;
      const uint64_t e = tab[q & 511u];
      const uint32_t s = iq_ksigns(q >> 9);
      g(l, iq_apply_signs(lo32(e), s), iq_apply_signs(hi32(e), s >> 4), iq_half_scale(d, (s8 >> (4 * (l >> 1))) & 15u, 0.25f));
    }
  }
};
// IQ2_S (82 bytes): d; qs[32] grid index low bytes at 2, sign bytes at 34; qh[8] at 66 (2 high
// index bits per group); scales[8] at 74.
struct IqIq2_S {
  static constexpr int kBlockElems = 256, kBlockBytes = 82, kAlign = 2;
  using Entry = uint64_t;
  static constexpr int kTableEntries = 1024;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq2sGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t qs[1], sg[1];
    load_words_a2<1>(b + 2 + 4 * ib, qs);
    load_words_a2<1>(b + 34 + 4 * ib, sg);
    const float d = h2f(ld16(b));
    const uint32_t qh = ld8(b + 66 + ib), s8 = ld8(b + 74 + ib);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint32_t idx = ((qs[0] >> (8 * l)) & 0xffu) | (((qh >> (2 * l)) & 3u) << 8);
      const uint64_t e = tab[idx];
      const uint32_t s = (sg[0] >> (8 * l)) & 0xffu;
      g(l, iq_apply_signs(lo32(e), s), iq_apply_signs(hi32(e), s >> 4), iq_half_scale(d, (s8 >> (4 * (l >> 1))) & 15u, 0.25f));
    }
  }
};
// IQ3_XXS (98 bytes): d; qs[64] grid indices (4 elements each) at 2; per sub-block a u32 at 66:
// 4 x 7 sign bits + scale.
struct IqIq3_XXS {
  static constexpr int kBlockElems = 256, kBlockBytes = 98, kAlign = 2;
  using Entry = uint32_t;
  static constexpr int kTableEntries = 256;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq3xxsGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t qs[2], meta[1];
    load_words_a2<2>(b + 2 + 8 * ib, qs);
    load_words_a2<1>(b + 66 + 4 * ib, meta);
    const float db = iq_half_scale(h2f(ld16(b)), meta[0] >> 28, 0.5f);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint32_t s = iq_ksigns((meta[0] >> (7 * l)) & 127u);
      const uint32_t g1 = tab[byte_at(qs, 2 * l)], g2 = tab[byte_at(qs, 2 * l + 1)];
      g(l, iq_apply_signs(g1, s), iq_apply_signs(g2, s >> 4), db);
    }
  }
};
// IQ3_S (110 bytes): d; qs[64] index low bytes at 2; qh[8] at 66 (one high bit per index); sign
// bits [32] at 74; scales[4] (a nibble per sub-block) at 106; value = d * (1 + 2 s) * grid * sign.
struct IqIq3_S {
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kAlign = 2;
  using Entry = uint32_t;
  static constexpr int kTableEntries = 512;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq3sGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t qs[2], sg[1];
    load_words_a2<2>(b + 2 + 8 * ib, qs);
    load_words_a2<1>(b + 74 + 4 * ib, sg);
    const uint32_t qh = ld8(b + 66 + ib);
    const uint32_t s = (ld8(b + 106 + (ib >> 1)) >> (4 * (ib & 1))) & 15u;
    const float db = __fmul_rn(h2f(ld16(b)), float(1u + 2u * s));
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint32_t i1 = byte_at(qs, 2 * l) | (((qh >> (2 * l)) & 1u) << 8);
      const uint32_t i2 = byte_at(qs, 2 * l + 1) | (((qh >> (2 * l + 1)) & 1u) << 8);
      const uint32_t bits = (sg[0] >> (8 * l)) & 0xffu;
      g(l, iq_apply_signs(tab[i1], bits), iq_apply_signs(tab[i2], bits >> 4), db);
    }
  }
};
// IQ1_S (50 bytes): d; qs[32] index low bytes at 2; qh u16[8] at 34: 3 high index bits per group,
// a 3-bit scale (bits 12-14) and the delta sign (bit 15) per sub-block.
struct IqIq1_S {
  static constexpr int kBlockElems = 256, kBlockBytes = 50, kAlign = 2;
  using Entry = uint64_t;
  static constexpr int kTableEntries = 2048;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq1sGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t qs[1];
    load_words_a2<1>(b + 2 + 4 * ib, qs);
    const uint32_t h = ld16(b + 34 + 2 * ib);
    const float dl = __fmul_rn(h2f(ld16(b)), float(2u * ((h >> 12) & 7u) + 1u));
    const float sc = __fmul_rn(dl, 0.125f);
    const bool neg = (h & 0x8000u) != 0;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint64_t e = tab[((qs[0] >> (8 * l)) & 0xffu) | (((h >> (3 * l)) & 7u) << 8)];
      g(l, iq1_codes(lo32(e), neg), iq1_codes(hi32(e), neg), sc);
    }
  }
};
// IQ1_M (56 bytes): qs[32] index low bytes at 0; qh[16] at 32 (a nibble per group: 3 high index
// bits, delta sign); four u16 scale words at 48: four 3-bit scales each (one per 16 elements),
// their top nibbles together the f16 super-scale.
struct IqIq1_M {
  static constexpr int kBlockElems = 256, kBlockBytes = 56, kAlign = 2;
  using Entry = uint64_t;
  static constexpr int kTableEntries = 2048;
  __device__ __forceinline__ static const Entry* global_table() { return kDevIq1sGrid.v; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry* tab, G&& g) {
    uint32_t qs[1], sw[2];
    load_words_a2<1>(b + 4 * ib, qs);
    load_words_a2<2>(b + 48, sw);
    const uint32_t hh = ld16(b + 32 + 2 * ib);  // qh[2 ib], qh[2 ib + 1]: group l's nibble at bit 4 l
    const uint32_t sc0 = sw[0] & 0xffffu, sc1 = sw[0] >> 16, sc2 = sw[1] & 0xffffu, sc3 = sw[1] >> 16;
    const float d = h2f(uint16_t((sc0 >> 12) | ((sc1 >> 8) & 0x00f0u) | ((sc2 >> 4) & 0x0f00u) | (sc3 & 0xf000u)));
    const uint32_t s = (sw[ib >> 2] >> (16 * ((ib >> 1) & 1) + 6 * (ib & 1)));
    const float sc[2] = {__fmul_rn(__fmul_rn(d, float(2u * (s & 7u) + 1u)), 0.125f),
                         __fmul_rn(__fmul_rn(d, float(2u * ((s >> 3) & 7u) + 1u)), 0.125f)};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (only >= 0 && l != only) continue;
      const uint32_t h = (hh >> (4 * l)) & 15u;
      const uint64_t e = tab[((qs[0] >> (8 * l)) & 0xffu) | ((h & 7u) << 8)];
      g(l, iq1_codes(lo32(e), (h & 8u) != 0), iq1_codes(hi32(e), (h & 8u) != 0), sc[l >> 1]);
    }
  }
};
// IQ4: 16 code bytes per 32 elements: element j (< 16) is the low nibble of byte j, element j + 16
// its high nibble; group l = nibble half l / 2 of bytes 8 (l % 2) .. 8 (l % 2) + 7.
template <class G>
__device__ __forceinline__ void iq4_groups(const uint32_t (&w)[4], float sc, int only, G&& g) {
#pragma unroll
  for (int l = 0; l < 4; ++l) {
    if (only >= 0 && l != only) continue;
    const int sh = 4 * (l >> 1);
    g(l, iq4_levels((w[2 * (l & 1)] >> sh) & 0x0F0F0F0Fu), iq4_levels((w[2 * (l & 1) + 1] >> sh) & 0x0F0F0F0Fu), sc);
  }
}
// IQ4_NL (18 bytes, 32 elements): d; qs[16] at 2.
struct IqIq4_NL {
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kAlign = 2;
  using Entry = uint32_t;
  static constexpr int kTableEntries = 0;
  __device__ __forceinline__ static const Entry* global_table() { return nullptr; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int, int only, const Entry*, G&& g) {
    uint32_t w[4];
    load_words_a2<4>(b + 2, w);
    iq4_groups(w, h2f(ld16(b)), only, g);
  }
};
// IQ4_XS (136 bytes, 8-byte aligned): d, scales_h (u16), scales_l[4], then qs[16] per sub-block
// at 8 + 16 ib; 6-bit scale ls, value = d * (ls - 32) * level.
struct IqIq4_XS {
  static constexpr int kBlockElems = 256, kBlockBytes = 136, kAlign = 8;
  using Entry = uint32_t;
  static constexpr int kTableEntries = 0;
  __device__ __forceinline__ static const Entry* global_table() { return nullptr; }
  template <class G>
  __device__ __forceinline__ static void groups(const uint8_t* b, int ib, int only, const Entry*, G&& g) {
    const uint2 hdr = __ldg(reinterpret_cast<const uint2*>(b));
    const uint2* qs = reinterpret_cast<const uint2*>(b + 8 + 16 * ib);
    const uint2 q0 = __ldg(qs), q1 = __ldg(qs + 1);
    const uint32_t ls = ((hdr.y >> (4 * ib)) & 15u) | (((hdr.x >> (16 + 2 * ib)) & 3u) << 4);
    const float dl = __fmul_rn(h2f(uint16_t(hdr.x)), float(int(ls) - 32));
    const uint32_t w[4] = {q0.x, q0.y, q1.x, q1.y};
    iq4_groups(w, dl, only, g);
  }
};

// As a quant_decode.cuh decoder (pieces of 8 = the groups): codes are the signed codes + 128.
template <class T>
struct DecIq {
  static constexpr int kBlockElems = T::kBlockElems, kBlockBytes = T::kBlockBytes, kAlign = T::kAlign, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = false;
  static constexpr int kBias = 128;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    off = 0.0f;
    T::groups(b, p >> 2, p & 3, T::global_table(), [&](int, uint32_t lo, uint32_t hi, float s) {
      c = make_uint2(lo ^ 0x80808080u, hi ^ 0x80808080u);  // int8 q as q + 128
      sc = s;
    });
  }
  STRATA_PIECE_FROM_CODES(DecIq)
};

// As a quant_unit.cuh unit: kSubs consecutive 32-element sub-blocks per unit (one lane's step),
// codes as signed bytes (kBias 0). More sub-blocks per step put more bytes in flight per lane (the
// loads of a unit are one straight-line block the compiler issues together) at the cost of idle
// lanes at the end of a row; gemv_q8_iq.cu picks kSubsPerUnit (1 measured best). kSubs must divide the row's sub-blocks:
// the 256-element types take 1, 2 or 4; IQ4_NL (32-element blocks) takes 1.
template <class T, int kSubsPerUnit = 1>
struct UnitIq {
  static constexpr int kUnit = 32 * kSubsPerUnit, kBlockBytes = T::kBlockBytes, kAlign = T::kAlign, kBias = 0;
  static constexpr int kSubs = T::kBlockElems / 32;  // sub-blocks per block
  static_assert(kSubs % kSubsPerUnit == 0);
  template <class F>
  __device__ __forceinline__ static void visit(const uint8_t* row, int64_t u, F&& f) {
#pragma unroll
    for (int k = 0; k < kSubsPerUnit; ++k) {
      const int64_t sb = u * kSubsPerUnit + k;  // sub-block index in the row
      uint32_t q[8];
      float sc[2];
      const uint8_t* b = row + (sb / kSubs) * kBlockBytes;
      T::groups(b, int(sb % kSubs), -1, T::global_table(), [&](int l, uint32_t lo, uint32_t hi, float s) {
        q[2 * l] = lo;
        q[2 * l + 1] = hi;
        sc[l >> 1] = s;  // groups 0, 1 share a scale, as 2, 3 do
      });
      const float mn[2] = {0.0f, 0.0f};
      f(sb * 32, q, sc, mn);
    }
  }
};

}  // namespace strata::kernels::cuda::detail
