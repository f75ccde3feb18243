// Device-side decoding of GGML weight blocks, shared by the GEMV, GEMM-tile and dequantise kernels.
// Internal to kernels/cuda (CUDA only).
//
// Every type is decoded in "pieces" of kPiece consecutive elements (8 for the quantised types: one
// piece never straddles a sub-block, so its 8 values share one scale and one offset). A quantised
// decoder yields the piece's integer codes q[] and (scale, offset) with
//   value = float(q) * scale - offset
// (codes() gives q as 8 unsigned bytes, q + kBias, built with a few 32-bit word operations for all
// 8 elements at once, so the GEMV can turn each into a float with one byte permute; piece() gives
// the same q as ints),
// evaluated exactly in that order (__fmul_rn / __fsub_rn: no FMA contraction), which reproduces
// the CPU reference decoders (kernels/cpu/quant/*.cpp) bit for bit; the layouts are the format
// facts in kernels/cpu/quant/blocks.h. Float types (kIsFloat) yield the values directly.
//
// Alignment: kAlign is the byte alignment that the weight data pointer and row_bytes must have
// (validated on the host) for the widest load a decoder issues. 8 bytes at a 2-aligned address are
// read as aligned 32-bit words (each holding at least one of the wanted bytes, so never past the
// allocation) joined with funnel shifts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace strata::kernels::cuda::detail {

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
__device__ __forceinline__ uint16_t ld16(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned short*>(p)); }
__device__ __forceinline__ uint32_t ld32_a2(const uint8_t* p) { return uint32_t(ld16(p)) | (uint32_t(ld16(p + 2)) << 16); }

// 8 bytes at p (little-endian) as two words, p aligned to A bytes.
template <int A>
__device__ __forceinline__ uint2 ld64(const uint8_t* p) {
  if constexpr (A >= 8) {
    return __ldg(reinterpret_cast<const uint2*>(p));
  } else if constexpr (A == 4) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(p);
    return make_uint2(__ldg(w), __ldg(w + 1));
  } else {
    // Three (or two) aligned words cover [p, p + 8); each word read holds at least one of those bytes.
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
    const uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = __ldg(w + ((a & 2) ? 2 : 1));
    const uint32_t sh = uint32_t(a & 3) * 8;
    return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
  }
}

// Byte i (0..7) of an 8-byte word pair.
__device__ __forceinline__ uint32_t byte_of(uint2 v, int i);
// Bits 0..3 of n spread to bit 0 of bytes 0..3.
__device__ __forceinline__ uint32_t spread4(uint32_t n) { return ((n & 15u) * 0x00204081u) & 0x01010101u; }
// A quantised decoder's codes(b, p, c, sc, off) yields the piece's 8 codes as unsigned bytes of c
// (byte i = element i) with q = code - kBias; piece() gives the same as ints.
template <class Dec>
__device__ __forceinline__ void piece_from_codes(const uint8_t* b, int p, int (&q)[8], float& sc, float& off) {
  uint2 c;
  Dec::codes(b, p, c, sc, off);
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] = int(byte_of(c, i)) - Dec::kBias;
}
#define STRATA_PIECE_FROM_CODES(D) \
  __device__ __forceinline__ static void piece(const uint8_t* b, int p, int (&q)[8], float& sc, float& off) { \
    piece_from_codes<D>(b, p, q, sc, off); \
  }
// Byte i (0..7) of an 8-byte word pair.
__device__ __forceinline__ uint32_t byte_of(uint2 v, int i) { return ((i < 4 ? v.x : v.y) >> (8 * (i & 3))) & 0xffu; }

// ---- legacy 32-element blocks ----
struct DecQ4_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = false;
  static constexpr int kBias = 8;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    sc = h2f(ld16(b));
    off = 0.0f;
    const uint2 v = ld64<2>(b + 2 + 8 * (p & 1));
    const int sh = (p >> 1) * 4;
    c = make_uint2((v.x >> sh) & 0x0F0F0F0Fu, (v.y >> sh) & 0x0F0F0F0Fu);
  }
  STRATA_PIECE_FROM_CODES(DecQ4_0)
};
struct DecQ4_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 20, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = true;
  static constexpr int kBias = 0;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    sc = h2f(ld16(b));
    off = -h2f(ld16(b + 2));  // value = q * d + m = q * d - (-m), exactly
    const uint2 v = ld64<2>(b + 4 + 8 * (p & 1));
    const int sh = (p >> 1) * 4;
    c = make_uint2((v.x >> sh) & 0x0F0F0F0Fu, (v.y >> sh) & 0x0F0F0F0Fu);
  }
  STRATA_PIECE_FROM_CODES(DecQ4_1)
};
struct DecQ5_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 22, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = false;
  static constexpr int kBias = 16;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    sc = h2f(ld16(b));
    off = 0.0f;
    const uint32_t qh = ld32_a2(b + 2) >> (8 * p);  // bit j of qh is element j's 5th bit
    const uint2 v = ld64<2>(b + 6 + 8 * (p & 1));
    const int sh = (p >> 1) * 4;
    c = make_uint2(((v.x >> sh) & 0x0F0F0F0Fu) | (spread4(qh) << 4), ((v.y >> sh) & 0x0F0F0F0Fu) | (spread4(qh >> 4) << 4));
  }
  STRATA_PIECE_FROM_CODES(DecQ5_0)
};
struct DecQ5_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 24, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = true;
  static constexpr int kBias = 0;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    sc = h2f(ld16(b));
    off = -h2f(ld16(b + 2));
    const uint32_t qh = ld32_a2(b + 4) >> (8 * p);
    const uint2 v = ld64<2>(b + 8 + 8 * (p & 1));
    const int sh = (p >> 1) * 4;
    c = make_uint2(((v.x >> sh) & 0x0F0F0F0Fu) | (spread4(qh) << 4), ((v.y >> sh) & 0x0F0F0F0Fu) | (spread4(qh >> 4) << 4));
  }
  STRATA_PIECE_FROM_CODES(DecQ5_1)
};
struct DecQ8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = false;
  static constexpr int kBias = 128;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    sc = h2f(ld16(b));
    off = 0.0f;
    const uint2 v = ld64<2>(b + 2 + 8 * p);
    c = make_uint2(v.x ^ 0x80808080u, v.y ^ 0x80808080u);  // int8 q as q + 128
  }
  STRATA_PIECE_FROM_CODES(DecQ8_0)
};

// ---- K types (256-element super-blocks) ----
// Q2_K / Q3_K element e: half = e / 128, shift index s = (e % 128) / 32, part = (e % 32) / 16,
// l = e % 16; 2-bit code in qs[32 * half + 16 * part + l] at bit 2 * s; sub-block 8 * half + 2 * s + part.
struct DecQ2_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 84, kAlign = 4, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = true;
  static constexpr int kBias = 0;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    const int e = 8 * p, half = e >> 7, s = (e >> 5) & 3, part = (e >> 4) & 1, l = e & 15;
    const uint32_t scb = b[8 * half + 2 * s + part];
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    sc = __fmul_rn(d, float(scb & 15u));
    off = __fmul_rn(dmin, float(scb >> 4));
    const uint2 v = ld64<4>(b + 16 + 32 * half + 16 * part + l);
    c = make_uint2((v.x >> (2 * s)) & 0x03030303u, (v.y >> (2 * s)) & 0x03030303u);
  }
  STRATA_PIECE_FROM_CODES(DecQ2_K)
};
struct DecQ3_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = false;
  static constexpr int kBias = 4;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    const int e = 8 * p, half = e >> 7, s = (e >> 5) & 3, part = (e >> 4) & 1, l = e & 15;
    const int is = 8 * half + 2 * s + part;
    const uint8_t* scales = b + 96;
    const int lo = is < 8 ? (scales[is] & 15) : (scales[is - 8] >> 4);
    const int hi = (scales[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
    sc = __fmul_rn(h2f(ld16(b + 108)), float((lo | (hi << 4)) - 32));
    off = 0.0f;
    const uint2 v = ld64<2>(b + 32 + 32 * half + 16 * part + l);
    const uint2 h = ld64<2>(b + 16 * part + l);
    const int hs = 4 * half + s;  // q = low 2 bits + 4 * high bit - 4
    c = make_uint2(((v.x >> (2 * s)) & 0x03030303u) | (((h.x >> hs) & 0x01010101u) << 2),
                   ((v.y >> (2 * s)) & 0x03030303u) | (((h.y >> hs) & 0x01010101u) << 2));
  }
  STRATA_PIECE_FROM_CODES(DecQ3_K)
};
// Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits in bytes 4..15 of the block.
__device__ __forceinline__ void k4_scale_min(const uint8_t* q, int j, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// Element e: group g = e / 64, hi = (e % 64) / 32 (high nibble), l = e % 32; sub-block 2 * g + hi.
struct DecQ4_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144, kAlign = 8, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = true;
  static constexpr int kBias = 0;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    const int e = 8 * p, g = e >> 6, hi = (e >> 5) & 1, l = e & 31;
    int s, m;
    k4_scale_min(b + 4, 2 * g + hi, s, m);
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    sc = __fmul_rn(d, float(s));
    off = __fmul_rn(dmin, float(m));
    const uint2 v = ld64<8>(b + 16 + 32 * g + l);
    c = make_uint2((v.x >> (4 * hi)) & 0x0F0F0F0Fu, (v.y >> (4 * hi)) & 0x0F0F0F0Fu);
  }
  STRATA_PIECE_FROM_CODES(DecQ4_K)
};
struct DecQ5_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 176, kAlign = 8, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = true;
  static constexpr int kBias = 0;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& c, float& sc, float& off) {
    const int e = 8 * p, g = e >> 6, hi = (e >> 5) & 1, l = e & 31;
    int s, m;
    k4_scale_min(b + 4, 2 * g + hi, s, m);
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    sc = __fmul_rn(d, float(s));
    off = __fmul_rn(dmin, float(m));
    const uint2 v = ld64<8>(b + 48 + 32 * g + l);
    const uint2 h = ld64<8>(b + 16 + l);
    const int hb = 2 * g + hi;
    c = make_uint2(((v.x >> (4 * hi)) & 0x0F0F0F0Fu) | (((h.x >> hb) & 0x01010101u) << 4),
                   ((v.y >> (4 * hi)) & 0x0F0F0F0Fu) | (((h.y >> hb) & 0x01010101u) << 4));
  }
  STRATA_PIECE_FROM_CODES(DecQ5_K)
};
// Q6_K element e: chunk c = e / 128, quarter k = (e % 128) / 32, l = e % 32; low 4 bits in
// ql[64 c + 32 (k & 1) + l] (high nibble for k >= 2), top 2 bits in qh[32 c + l] at bit 2 k;
// scale scales[8 c + l / 16 + 2 k]; value = (d * scale) * (q - 32).
struct DecQ6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210, kAlign = 2, kPiece = 8;
  static constexpr bool kIsFloat = false, kHasOffset = false;
  static constexpr int kBias = 32;
  __device__ __forceinline__ static void codes(const uint8_t* b, int p, uint2& cw, float& sc, float& off) {
    const int e = 8 * p, c = e >> 7, k = (e >> 5) & 3, l = e & 31;
    sc = __fmul_rn(h2f(ld16(b + 208)), float(int8_t(b[192 + 8 * c + (l >> 4) + 2 * k])));
    off = 0.0f;
    const uint2 v = ld64<2>(b + 64 * c + 32 * (k & 1) + l);
    const uint2 h = ld64<2>(b + 128 + 32 * c + l);
    const int sh = 4 * (k >> 1);
    cw = make_uint2(((v.x >> sh) & 0x0F0F0F0Fu) | (((h.x >> (2 * k)) & 0x03030303u) << 4),
                   ((v.y >> sh) & 0x0F0F0F0Fu) | (((h.y >> (2 * k)) & 0x03030303u) << 4));
  }
  STRATA_PIECE_FROM_CODES(DecQ6_K)
};

// ---- float types: a "block" is one piece of kPiece elements ----
template <int P>
struct DecF32 {
  static constexpr int kBlockElems = P, kBlockBytes = 4 * P, kAlign = P == 8 ? 16 : 4, kPiece = P;
  static constexpr bool kIsFloat = true, kHasOffset = false;
  __device__ __forceinline__ static void values(const uint8_t* b, float (&w)[P]) {
    if constexpr (P == 8) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(b)), c = __ldg(reinterpret_cast<const float4*>(b) + 1);
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = c.x, w[5] = c.y, w[6] = c.z, w[7] = c.w;
    } else {
#pragma unroll
      for (int i = 0; i < P; ++i) w[i] = __ldg(reinterpret_cast<const float*>(b) + i);
    }
  }
};
template <int P, bool kBf16>
struct DecHalf {
  static constexpr int kBlockElems = P, kBlockBytes = 2 * P, kAlign = P == 8 ? 16 : 2, kPiece = P;
  static constexpr bool kIsFloat = true, kHasOffset = false;
  __device__ __forceinline__ static void values(const uint8_t* b, float (&w)[P]) {
    if constexpr (P == 8) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(b));
      const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        w[2 * i] = kBf16 ? bf2f(uint16_t(u[i])) : h2f(uint16_t(u[i]));
        w[2 * i + 1] = kBf16 ? bf2f(uint16_t(u[i] >> 16)) : h2f(uint16_t(u[i] >> 16));
      }
    } else {
#pragma unroll
      for (int i = 0; i < P; ++i) w[i] = kBf16 ? bf2f(ld16(b + 2 * i)) : h2f(ld16(b + 2 * i));
    }
  }
};

// The exact decoded values of piece p of the block at b (CPU-reference rounding).
template <class Dec>
__device__ __forceinline__ void decode_piece(const uint8_t* b, int p, float (&w)[Dec::kPiece]) {
  if constexpr (Dec::kIsFloat) {
    Dec::values(b, w);
  } else {
    int q[8];
    float sc, off;
    Dec::piece(b, p, q, sc, off);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float v = __fmul_rn(float(q[i]), sc);
      w[i] = Dec::kHasOffset ? __fsub_rn(v, off) : v;
    }
  }
}

}  // namespace strata::kernels::cuda::detail
