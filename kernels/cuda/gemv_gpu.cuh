// Device readers of the GPU weight layout (kernels/gpu_layout.h: 8-row x chunk tiles, lane
// L = 4 g + t owns row g and, per 32-element sub-block, the elements 32 s + 16 h + 4 t + i; its
// slot j holds sub-block j ^ 2 t), the GEMV on it (int8 activations, __dp4a) and its dequantiser.
// Internal to kernels/cuda (CUDA only).
//
// A reader's load() issues every load of one lane for one tile and decodes the packed scales; it is
// load_raw() (the loads only, so that a kernel can issue the next tile's loads before it uses this
// one's) followed by finish() (the scale decode, which waits for them). Per-lane streams are read at
// lane * W (consecutive lanes, consecutive W-byte words: W = 8, 16 or 32 as two 16-byte loads),
// per-row streams at g * W (the 4 lanes of a row share the word: one broadcast). codes(s, h) gives
// the lane's 4 codes of half h of slot s (after unrotate(t): of sub-block s) as the bytes of one
// word: unsigned (code - kBias is
// the value index) or, where kSigned, already the signed value index (q8_0);
// scale(s, h) the integer sub-scale, min(s) the integer min (q4_K / q5_K), d() / dmin() the f16
// super-block factors. Element value (as the CPU decoders): (d * scale) * (code - kBias) - dmin * min.
#pragma once

#include <type_traits>

#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/quant_decode.cuh"

namespace strata::kernels::cuda::detail {

// Reader traits beyond the members every reader has. kTableWords: a grid table in shared memory
// (IQ3_XXS, IQ3_S: gemv_gpu_iq.cuh), filled once per CTA (gpu_table_fill), after which the GEMV
// kernels loop over row groups (persistent CTAs; gemv_gpu.cu sizes their grids). kIq: finish() and
// unrotate() may exchange values between the 4 lanes of a row (shuffles), so every lane of the warp
// runs them; the dp4a kernel takes the lane's two sub-block scales from own_scales().
template <class D, class = void>
struct HasTable : std::false_type {};
template <class D>
struct HasTable<D, std::void_t<decltype(D::kTableWords)>> : std::true_type {};
template <class D, class = void>
struct IsIqReader : std::false_type {};
template <class D>
struct IsIqReader<D, std::void_t<decltype(D::kIq)>> : std::true_type {};
template <class D>
__device__ __forceinline__ void gpu_table_fill() {
  if constexpr (HasTable<D>::value) {
    D::fill_table();
    __syncthreads();
  }
}

__device__ __forceinline__ uint4 ld_u4(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint2 ld_u2(const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ uint32_t ld_u1(const uint8_t* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }
__device__ __forceinline__ uint32_t word_of(const uint4& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }
__device__ __forceinline__ int sbyte(const uint4& v, int k) { return int(int8_t(word_of(v, k >> 2) >> (8 * (k & 3)))); }
__device__ __forceinline__ int ubyte(const uint4& v, int k) { return int((word_of(v, k >> 2) >> (8 * (k & 3))) & 0xffu); }

// A tile staged in shared memory (gemv_gpu_async_kernel): the readers' loads take it in place of a
// global pointer (load_raw is a template on the pointer), as plain shared-memory loads.
struct SmemTile {
  const uint8_t* p;
  __device__ __forceinline__ SmemTile operator+(int64_t o) const { return {p + o}; }
};
__device__ __forceinline__ uint4 ld_u4(SmemTile s) { return *reinterpret_cast<const uint4*>(s.p); }
__device__ __forceinline__ uint2 ld_u2(SmemTile s) { return *reinterpret_cast<const uint2*>(s.p); }
__device__ __forceinline__ uint32_t ld_u1(SmemTile s) { return *reinterpret_cast<const uint32_t*>(s.p); }
__device__ __forceinline__ uint16_t ld16(SmemTile s) { return *reinterpret_cast<const uint16_t*>(s.p); }

// Undoing the slot rotation (slot j holds sub-block j ^ 2t) in registers, as word permutations.
__device__ __forceinline__ void swap_if(bool c, uint32_t& a, uint32_t& b) {
  const uint32_t x = c ? b : a;
  b = c ? a : b;
  a = x;
}
// Word w of v becomes word w ^ t (one word per 2 slots: q3_K ql, q6_K qh).
__device__ __forceinline__ void xor_words(uint4& v, int t) {
  swap_if(t & 1, v.x, v.y);
  swap_if(t & 1, v.z, v.w);
  swap_if(t & 2, v.x, v.z);
  swap_if(t & 2, v.y, v.w);
}
// One word per slot in two uint4 (q4_K/q5_K/q6_K qs): word s becomes word s ^ 2t.
__device__ __forceinline__ void xor_slot_words(uint4& a, uint4& b, int t) {
  swap_if(t & 1, a.x, a.z);
  swap_if(t & 1, a.y, a.w);
  swap_if(t & 1, b.x, b.z);
  swap_if(t & 1, b.y, b.w);
  swap_if(t & 2, a.x, b.x);
  swap_if(t & 2, a.y, b.y);
  swap_if(t & 2, a.z, b.z);
  swap_if(t & 2, a.w, b.w);
}
// One byte per slot in a uint2 (q5_K qh): byte s becomes byte s ^ 2t.
__device__ __forceinline__ void xor_slot_bytes(uint2& v, int t) {
  const uint32_t k = 0x11111111u * uint32_t(2 * t);  // xor of every selector nibble
  const uint32_t x = __byte_perm(v.x, v.y, 0x3210u ^ k), y = __byte_perm(v.x, v.y, 0x7654u ^ k);
  v = make_uint2(x, y);
}

// q4_K (kHigh = false) and q5_K (kHigh = true).
// The packed 6-bit scales of a GGUF block (12 bytes, 4-byte aligned in a tile), decoded per word.
// q4_K / q5_K -> bytes 0..7 scales, 8..15 mins (the layout of cpu::k4_scale_min: scales and mins
// 0-3 are the low 6 bits of bytes 0-3 / 4-7; 4-7 take their low nibble from bytes 8-11 and their
// top 2 bits from bits 6-7 of bytes 0-3 / 4-7).
__device__ __forceinline__ uint4 k4_scales(uint32_t a0, uint32_t a1, uint32_t a2) {
  return make_uint4(a0 & 0x3F3F3F3Fu, (a2 & 0x0F0F0F0Fu) | ((a0 >> 2) & 0x30303030u), a1 & 0x3F3F3F3Fu,
                    ((a2 >> 4) & 0x0F0F0F0Fu) | ((a1 >> 2) & 0x30303030u));
}
// q3_K -> 16 signed bytes, scale j - 32 (cpu::q3_scale_code: low nibbles of scales 0-7 / 8-15 in
// the low / high halves of bytes 0-7, top 2 bits of scale j at bits 2 (j / 4) of byte 8 + j % 4).
__device__ __forceinline__ uint32_t minus32(uint32_t u) {  // per byte: 6-bit u -> int8 u - 32
  const uint32_t v = u ^ 0x20202020u;
  return v | ((v & 0x20202020u) * 6u);  // extends bit 5 to bits 6, 7 (no carry between bytes)
}
__device__ __forceinline__ uint4 q3_scales(uint32_t a0, uint32_t a1, uint32_t a2) {
  return make_uint4(minus32((a0 & 0x0F0F0F0Fu) | ((a2 << 4) & 0x30303030u)),
                    minus32((a1 & 0x0F0F0F0Fu) | ((a2 << 2) & 0x30303030u)),
                    minus32(((a0 >> 4) & 0x0F0F0F0Fu) | (a2 & 0x30303030u)),
                    minus32(((a1 >> 4) & 0x0F0F0F0Fu) | ((a2 >> 2) & 0x30303030u)));
}

template <bool kHigh>
struct GpuQ45K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = kHigh ? 1408 : 1152, kBias = 0;
  static constexpr bool kMin = true, kScale16 = false, kSigned = false, kLaneScales = false;
  static constexpr int kSc = kHigh ? 1280 : 1024, kD = kHigh ? 1376 : 1120;
  uint4 qa, qb, sc;
  uint2 qh;
  uint32_t dm;
  template <class P = const uint8_t*>
  __device__ __forceinline__ void load_raw(P tile, int lane, int g) {
    qa = ld_u4(tile + lane * 32);
    qb = ld_u4(tile + lane * 32 + 16);
    if constexpr (kHigh) qh = ld_u2(tile + 1024 + lane * 8);
    const P p = tile + kSc + g * 12;
    sc = make_uint4(ld_u1(p), ld_u1(p + 4), ld_u1(p + 8), 0u);  // raw until finish()
    dm = ld_u1(tile + kD + g * 4);
  }
  __device__ __forceinline__ void finish() { sc = k4_scales(sc.x, sc.y, sc.z); }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
  }
  __device__ __forceinline__ void unrotate(int t) {
    xor_slot_words(qa, qb, t);
    if constexpr (kHigh) xor_slot_bytes(qh, t);
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const uint32_t w = s < 4 ? word_of(qa, s) : word_of(qb, s - 4);
    uint32_t c = (w >> (4 * h)) & 0x0F0F0F0Fu;
    if constexpr (kHigh) {
      const uint32_t hb = ((s < 4 ? qh.x : qh.y) >> (8 * (s & 3) + 4 * h)) & 15u;
      c |= spread4(hb) << 4;
    }
    return c;
  }
  __device__ __forceinline__ int scale(int s, int) const { return ubyte(sc, s); }
  __device__ __forceinline__ int min(int s) const { return ubyte(sc, 8 + s); }
  __device__ __forceinline__ float d() const { return h2f(uint16_t(dm)); }
  __device__ __forceinline__ float dmin() const { return h2f(uint16_t(dm >> 16)); }
};
using GpuQ4K = GpuQ45K<false>;
using GpuQ5K = GpuQ45K<true>;

// q3_K: unsigned codes 0..7 (value index q = code - 4, kBias 4), read from the six words per lane of
// gpu_layout.h ("q3_K"): ql = W0..W3, qh = W4, W5.
// The dp4a kernel decodes only the lane's own scale word (kLaneScales: lane_scale_word, from the raw
// packed bytes), the MMA kernel and the dequantiser all 16 scales (finish()).
struct GpuQ3K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 880, kBias = 4;
  static constexpr bool kMin = false, kScale16 = true, kSigned = false, kLaneScales = true;
  uint4 ql, sc;
  uint2 qh;
  uint16_t dd;
  template <class P = const uint8_t*>
  __device__ __forceinline__ void load_raw(P tile, int lane, int g) {
    ql = ld_u4(tile + lane * 16);
    qh = ld_u2(tile + 512 + lane * 8);
    const P p = tile + 768 + g * 12;
    sc = make_uint4(ld_u1(p), ld_u1(p + 4), ld_u1(p + 8), 0u);  // raw until finish()
    dd = ld16(tile + 864 + g * 2);
  }
  __device__ __forceinline__ void finish() { sc = q3_scales(sc.x, sc.y, sc.z); }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
  }
  // Word t of q3_scales() from the raw bytes (before finish()): the scales of sub-blocks 2t, 2t + 1.
  __device__ __forceinline__ uint32_t lane_scale_word(int t) const {
    const uint32_t a = (t & 1) ? sc.y : sc.x;
    const uint32_t lo = (a >> (4 * (t >> 1))) & 0x0F0F0F0Fu;
    const uint32_t hi = ((sc.z >> (2 * t)) << 4) & 0x30303030u;
    return minus32(lo | hi);
  }
  // Slot m ^ t's words to word m: W0..W3 as words; in W4 / W5 bit 0 of t swaps the fields
  // 0-2 / 3-5 and the bits 6 / 7 of every byte, bit 1 swaps the words.
  __device__ __forceinline__ static uint32_t swap_fields(uint32_t w) {
    return ((w << 3) & 0x38383838u) | ((w >> 3) & 0x07070707u) | ((w << 1) & 0x80808080u) | ((w >> 1) & 0x40404040u);
  }
  __device__ __forceinline__ void unrotate(int t) {
    xor_words(ql, t);
    if (t & 1) qh = make_uint2(swap_fields(qh.x), swap_fields(qh.y));
    swap_if(t & 2, qh.x, qh.y);
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const int m = s >> 1, kind = 2 * (s & 1) + h;
    const uint32_t w = word_of(ql, m), wh = m < 2 ? qh.x : qh.y;
    if (kind == 0) return w & 0x07070707u;
    if (kind == 1) return (w >> 3) & 0x07070707u;
    if (kind == 2) return (wh >> (3 * (m & 1))) & 0x07070707u;
    return ((w >> 6) & 0x03030303u) | ((wh >> (4 + (m & 1))) & 0x04040404u);
  }
  __device__ __forceinline__ int scale(int s, int h) const { return sbyte(sc, 2 * s + h); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

struct GpuQ6K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 1680, kBias = 32;
  static constexpr bool kMin = false, kScale16 = true, kSigned = false, kLaneScales = false;
  uint4 qa, qb, qh, sc;
  uint16_t dd;
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) { load(tile, lane, g); }
  __device__ __forceinline__ void finish() {}
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    qa = ld_u4(tile + lane * 32);
    qb = ld_u4(tile + lane * 32 + 16);
    qh = ld_u4(tile + 1024 + lane * 16);
    sc = ld_u4(tile + 1536 + g * 16);
    dd = ld16(tile + 1664 + g * 2);
  }
  __device__ __forceinline__ void unrotate(int t) {
    xor_slot_words(qa, qb, t);
    xor_words(qh, t);
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const uint32_t w = s < 4 ? word_of(qa, s) : word_of(qb, s - 4);
    const uint32_t hi = (word_of(qh, s >> 1) >> (4 * (s & 1) + 2 * h)) & 0x03030303u;
    return ((w >> (4 * h)) & 0x0F0F0F0Fu) | (hi << 4);
  }
  __device__ __forceinline__ int scale(int s, int h) const { return sbyte(sc, 2 * s + h); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

struct GpuQ8_0 {
  static constexpr int kChunk = 32, kSubs = 1, kTile = 272, kBias = 0;
  static constexpr bool kMin = false, kScale16 = false, kSigned = true, kLaneScales = false;
  uint2 q;
  uint16_t dd;
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) { load(tile, lane, g); }
  __device__ __forceinline__ void finish() {}
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    q = ld_u2(tile + lane * 8);
    dd = ld16(tile + 256 + g * 2);
  }
  __device__ __forceinline__ void unrotate(int) {}  // one sub-block per chunk: no slots
  __device__ __forceinline__ uint32_t codes(int, int h) const { return h ? q.y : q.x; }
  __device__ __forceinline__ int scale(int, int) const { return 1; }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

// Lane t's activations of chunk ch of column c (matmul_internal.h ActGpu) in its slot order: the
// code words xw[j][h] of slot j (sub-block j ^ 2t); dx[0..1] the scales d of sub-blocks 2t and
// 2t + 1 (the ones whose whole sums the lane ends with) and, for the types with a bias or mins,
// sx[0..3] their 16-element sums s16 (sub-block 2t halves 0, 1, then 2t + 1). Vector loads; the
// 4 t's of a code load read 64 consecutive bytes.
template <class D, int S = D::kSubs>
__device__ __forceinline__ void load_act(const ActGpu& x, int c, int64_t n_in, int64_t ch, int t, uint32_t (&xw)[S][2],
                                         float (&dx)[2], int (&sx)[4]) {
  const uint8_t* xq = reinterpret_cast<const uint8_t*>(x.q + int64_t(c) * n_in + ch * D::kChunk);
  const float* d = x.d + int64_t(c) * (n_in / 32) + ch * S;
  if constexpr (S == 1) {
    const uint2 v = ld_u2(xq + 8 * t);
    xw[0][0] = v.x, xw[0][1] = v.y;
    dx[0] = dx[1] = __ldg(d);
  } else {
    static_assert(S == 8);
#pragma unroll
    for (int k = 0; k < S / 2; ++k) {  // slots 2k, 2k + 1 (stored in slot order: ActGpu)
      const uint4 v = ld_u4(xq + 64 * k + 16 * t);
      xw[2 * k][0] = v.x, xw[2 * k][1] = v.y, xw[2 * k + 1][0] = v.z, xw[2 * k + 1][1] = v.w;
    }
    const float2 v = __ldg(reinterpret_cast<const float2*>(d) + t);
    dx[0] = v.x, dx[1] = v.y;
    if constexpr (D::kBias != 0 || D::kMin) {
      const int4 u = __ldg(reinterpret_cast<const int4*>(x.s16 + int64_t(c) * (n_in / 16) + ch * 2 * S) + t);
      sx[0] = u.x, sx[1] = u.y, sx[2] = u.z, sx[3] = u.w;
    }
  }
}

// ---- The arithmetic both GEMV kernels share, bit for bit ----
// Per row, column and chunk: I_s, the exact integer sum of sub-block s (scales, bias and all); per
// lane-quarter t = 0..3 of the chunk's 8 sub-blocks (sub-blocks 2t, 2t + 1):
//   A_t = fma(dx[2t+1], float(I[2t+1]), dx[2t] * float(I[2t]))
//   C_t = d * A_t, or with mins fma(d, A_t, -(dmin * M_t)), M_t the same form over
//         xsd[s] = dx[s] * float(S_s) (S_s the sub-block's activation code sum) and float(min_s)
//   chunk = (C_0 + C_1) + (C_2 + C_3); acc += chunk (chunks of a warp in order).
// One sub-block per chunk (q8_0): chunk = d * (dx * float(I)). Every operation is an explicit
// _rn intrinsic or fmaf, so the compiler cannot contract them differently in the two kernels.
// The dp4a kernel computes C_t in lane t and the two sums by shuffles; the MMA kernel computes all
// four in each lane (gemv_gpu_mma.cuh). The warps' partials meet in the same order in both.
template <class D>
__device__ __forceinline__ float chunk_term(float d, float dmin, float dx0, float dx1, int i0, int i1, float xsd0,
                                            float xsd1, float m0, float m1) {
  const float a = fmaf(dx1, float(i1), __fmul_rn(dx0, float(i0)));
  if constexpr (D::kMin) {
    const float m = fmaf(xsd1, m1, __fmul_rn(xsd0, m0));
    return fmaf(d, a, -__fmul_rn(dmin, m));
  } else {
    return __fmul_rn(d, a);
  }
}

// Butterfly over a row's 4 lanes in slot order: slots 0 and 1 end with the whole sums of
// sub-blocks 2t and 2t + 1 (lane t ^ 2 holds this lane's slots 0..3 in its slots 4..7, lane
// t ^ 1 its slots 0..1 in its slots 2..3).
template <int K>
__device__ __forceinline__ void reduce_slots(int (&v)[8][K]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int k = 0; k < K; ++k) v[j][k] += __shfl_xor_sync(0xffffffffu, v[j + 4][k], 2);
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int k = 0; k < K; ++k) v[j][k] += __shfl_xor_sync(0xffffffffu, v[j + 2][k], 1);
}

// Per tile and lane: what the dp4a kernel's epilogue needs of its two sub-blocks 2t, 2t + 1.
template <class D>
struct OwnScales {
  uint32_t w = 0;         // q3_K / q6_K: scale word t (bytes (2t, h0), (2t, h1), (2t+1, h0), (2t+1, h1))
  int corr0 = 0, corr1 = 0;  // q3_K: -16384 * (sc0 + sc1) per sub-block (the packed sums' bias)
  int sc0 = 0, sc1 = 0;   // q4_K / q5_K / i-quant scales; q6_K: see s6
  int s6[4] = {0, 0, 0, 0};  // q6_K: the 4 scales
  float m0 = 0, m1 = 0;   // float(min) of the two sub-blocks (q4_K / q5_K)
  __device__ __forceinline__ OwnScales(const D& r, int t) {
    if constexpr (IsIqReader<D>::value && D::kSubs == 8) {
      r.own_scales(t, sc0, sc1);
    } else if constexpr (D::kSubs == 8 && D::kScale16) {
      if constexpr (D::kLaneScales) {
        w = r.lane_scale_word(t);
        corr0 = __dp2a_lo(int(0xC000C000u), int(w), 0);
        corr1 = __dp2a_hi(int(0xC000C000u), int(w), 0);
      } else {
        w = word_of(r.sc, t);
#pragma unroll
        for (int k = 0; k < 4; ++k) s6[k] = int(int8_t(w >> (8 * k)));
      }
    } else if constexpr (D::kSubs == 8) {
      const uint32_t sel = uint32_t(2 * t) | (uint32_t(2 * t + 1) << 4);
      const uint32_t s = __byte_perm(r.sc.x, r.sc.y, sel), m = __byte_perm(r.sc.z, r.sc.w, sel);
      sc0 = int(s & 0xffu), sc1 = int((s >> 8) & 0xffu);
      m0 = float(m & 0xffu), m1 = float((m >> 8) & 0xffu);
    }
  }
};

// The lane's C_t (its quarter of the chunk's term, above) for one column; the caller's two
// shuffles give every lane of the row the chunk's term. q8_0 (one sub-block): the whole term.
template <class D>
__device__ __forceinline__ float lane_term(const D& r, const OwnScales<D>& o, const uint32_t (&b)[D::kSubs][2],
                                           const uint32_t (&xw)[D::kSubs][2], const float (&dx)[2], const int (&sx)[4]) {
  constexpr int S = D::kSubs;
  if constexpr (S == 1) {
    int v = __dp4a(int(b[0][1]), int(xw[0][1]), __dp4a(int(b[0][0]), int(xw[0][0]), 0));
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return __fmul_rn(r.d(), __fmul_rn(dx[0], float(v)));
  } else if constexpr (D::kLaneScales) {
    // q3_K: codes 0..7, q = code - 4. |lane half sum| <= 4 * 7 * 128 = 3584, so half sums + 4096
    // (the dp4a accumulator) pack into 16-bit halves that stay within [2048, 30720] summed over the
    // 4 lanes: one word per slot through the butterfly. The code bias comes off the packed word as
    // 4 (S0 + 65536 S1) (S the activations' 16-element sums): each half then holds
    // sum (code - 4) x + 16384, within [8256, 24512], so no borrow crosses the halves; one dp2a with
    // the scales gives I = sc0 (P0 - 4 S0) + sc1 (P1 - 4 S1), its addend the packing's -16384 (sc0 + sc1).
    int v[8][1];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j][0] = int(__byte_perm(uint32_t(__dp4a(int(b[j][0]), int(xw[j][0]), 4096)),
                                uint32_t(__dp4a(int(b[j][1]), int(xw[j][1]), 4096)), 0x5410));
    reduce_slots<1>(v);
    const int p0 = v[0][0] - 4 * (sx[0] + 65536 * sx[1]), p1 = v[1][0] - 4 * (sx[2] + 65536 * sx[3]);
    const int i0 = __dp2a_lo(p0, int(o.w), o.corr0), i1 = __dp2a_hi(p1, int(o.w), o.corr1);
    return chunk_term<D>(r.d(), 0.0f, dx[0], dx[1], i0, i1, 0.0f, 0.0f, 0.0f, 0.0f);
  } else if constexpr (D::kScale16) {
    // q6_K: unsigned codes; the bias 32 comes off the whole half sums: I = sc (P - 32 S).
    int v[8][2];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) v[j][h] = __dp4a(int(b[j][h]), int(xw[j][h]), 0);
    reduce_slots<2>(v);
    const int i0 = o.s6[0] * (v[0][0] - D::kBias * sx[0]) + o.s6[1] * (v[0][1] - D::kBias * sx[1]);
    const int i1 = o.s6[2] * (v[1][0] - D::kBias * sx[2]) + o.s6[3] * (v[1][1] - D::kBias * sx[3]);
    return chunk_term<D>(r.d(), 0.0f, dx[0], dx[1], i0, i1, 0.0f, 0.0f, 0.0f, 0.0f);
  } else {
    // q4_K / q5_K: one scale per sub-block, so both halves chain in one sum; mins from s16.
    int v[8][1];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j][0] = __dp4a(int(b[j][1]), int(xw[j][1]), __dp4a(int(b[j][0]), int(xw[j][0]), 0));
    reduce_slots<1>(v);
    const float xsd0 = __fmul_rn(dx[0], float(sx[0] + sx[1])), xsd1 = __fmul_rn(dx[1], float(sx[2] + sx[3]));
    return chunk_term<D>(r.d(), r.dmin(), dx[0], dx[1], o.sc0 * v[0][0], o.sc1 * v[1][0], xsd0, xsd1, o.m0, o.m1);
  }
}

// Warps per CTA (W), splitting one row group's chunks (split-K): 8, or 16 where the shape makes
// the last wave of 8-warp CTAs run mostly empty (gemv_gpu.cu gemv_warps). A property of the matrix,
// not of the column count: the MMA kernel splits alike, so that both sum in the same order.

// One CTA per row group of 8 rows; warp w takes chunks w, w + 8, ...; per lane, each weight word
// is decoded once and used for all NC columns. Per column and chunk the 4 lanes of a row add their
// integer sums by a butterfly (reduce_slots), lane t scales sub-blocks 2t, 2t + 1, and two float
// shuffles give every lane the chunk's term (the shared arithmetic above: the MMA kernel's result
// bit for bit). The 8 warps' partial sums meet in shared memory in a fixed order.
// 4 CTAs (32 warps) per SM for 1-2 columns: at 3 (the register use without the bound) a 512-CTA
// matrix (4096 rows) took two waves on 132 SMs.
// Under programmatic dependent launch (pdl, sm_90) the warp first asks L2 for its first
// kGpuGemvPrefetch tiles, while the kernel that writes x (the quantiser) still runs.
// kMinBlocks: CTAs per SM (the register bound); kPipe: the warp loads its next tile before it decodes
// this one (as the MMA kernel does) instead of leaving the overlap to a 2-fold unroll -- variants
// for the table readers, whose decode has shared-memory latency (gemv_gpu_launch.cuh picks them).
// One loaded tile's terms for every column, added to acc in chunk order (the loop body of both
// dp4a kernels below): per lane, each weight word is decoded once and used for all NC columns.
template <class D, int NC>
__device__ __forceinline__ void gemv_tile_add(D& r, const ActGpu& xc, int64_t n_in, int t, int n_cols, float (&acc)[NC]) {
  constexpr int S = D::kSubs;
  if constexpr (!D::kLaneScales) r.finish();  // q3_K: OwnScales decodes only the lane's scale word
  uint32_t b[S][2];
#pragma unroll
  for (int j = 0; j < S; ++j) b[j][0] = r.codes(j, 0), b[j][1] = r.codes(j, 1);
  const OwnScales<D> o(r, t);
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    if (NC > 1 && c >= n_cols) break;
    uint32_t xw[S][2];
    float dx[2];
    int sx[4] = {0, 0, 0, 0};
    load_act<D>(xc, c, n_in, 0, t, xw, dx, sx);
    float v = lane_term<D>(r, o, b, xw, dx, sx);
    if constexpr (S > 1) {
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
    }
    acc[c] = __fadd_rn(acc[c], v);
  }
}

// The W warps' partial sums of row group G meet in shared memory in warp order; y gets the rows.
// A persistent caller syncs the CTA before it calls this again (the partials are rewritten).
template <int W, int NC>
__device__ __forceinline__ void gemv_store_rows(const float (&acc)[NC], int64_t G, int64_t n_out, int n_cols,
                                                float* __restrict__ y) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  __shared__ float red[W][NC][8];
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (t == 0) red[warp][c][g] = acc[c];  // every lane of the row holds the same sum
  __syncthreads();
  for (int i = threadIdx.x; i < NC * 8; i += blockDim.x) {
    const int c = i >> 3, row = i & 7;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < W; ++k) v = __fadd_rn(v, red[k][c][row]);
    const int64_t r = G * 8 + row;
    if (c < n_cols && r < n_out) y[int64_t(c) * n_out + r] = v;
  }
}

constexpr int kGpuGemvPrefetch = 2;
template <class D, int NC, int W, int kMinBlocks = (NC <= 2 ? 4 : 2) * 8 / W, bool kPipe = false>
__global__ void __launch_bounds__(W * 32, kMinBlocks) gemv_gpu_kernel(const uint8_t* __restrict__ w, int64_t n_in,
                                                                      int64_t n_out, ActGpu x, int n_cols,
                                                                      float* __restrict__ y, bool pdl) {
  constexpr int S = D::kSubs;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_chunks = n_in / D::kChunk, n_groups = (n_out + 7) / 8;
  gpu_table_fill<D>();  // table readers: once per CTA, before the loop over row groups
  if (pdl) {
    const uint8_t* first = w + uint64_t(blockIdx.x) * uint64_t(n_chunks) * D::kTile;
    for (int64_t ch = warp, k = 0; ch < n_chunks && k < kGpuGemvPrefetch; ch += W, ++k)
      if (lane * 128 < D::kTile) asm volatile("prefetch.global.L2 [%0];" ::"l"(first + ch * D::kTile + lane * 128));
    pdl_wait();
  }
  pdl_launch_dependents();
  // One row group per CTA; table readers: row groups blockIdx.x, + gridDim.x, ... (persistent).
  for (int64_t G = blockIdx.x;;) {
    const uint8_t* group = w + uint64_t(G) * uint64_t(n_chunks) * D::kTile;
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
    // Cursors that step by the warps' stride (pointer increments: addresses are not recomputed from
    // the chunk index each pass, which at the 64-register bound the compiler did with 64-bit multiplies).
    const uint8_t* tile = group + int64_t(warp) * D::kTile;
    ActGpu xc{x.q + int64_t(warp) * D::kChunk, x.d + int64_t(warp) * S, x.s16 + int64_t(warp) * 2 * S};
    D next;
    if constexpr (kPipe) {
      if (warp < n_chunks) next.load_raw(tile, lane, g);
    }
#pragma unroll(kPipe ? 1 : 2)
    for (int64_t ch = warp; ch < n_chunks; ch += W, tile += W * D::kTile,
                 xc.q += W * D::kChunk, xc.d += W * S, xc.s16 += W * 2 * S) {
      D r;
      if constexpr (kPipe) {
        r = next;
        if (ch + W < n_chunks) next.load_raw(tile + W * D::kTile, lane, g);
      } else {
        r.load_raw(tile, lane, g);
      }
      gemv_tile_add<D, NC>(r, xc, n_in, t, n_cols, acc);
    }
    gemv_store_rows<W, NC>(acc, G, n_out, n_cols, y);
    if constexpr (!HasTable<D>::value) break;
    G += gridDim.x;
    if (G >= n_groups) break;
    __syncthreads();  // red is written again
  }
}

// gemv_gpu_kernel with the warp's weight tiles staged in shared memory by cp.async, R tiles ahead
// (STRATA_GEMV_ASYNC: gemv_gpu_launch.cuh). Why: the split-K kernel is bound by per-warp latency at
// 64 registers (32 warps per SM); a warp holds at most ~2 tiles of loads in registers, while
// cp.async keeps R tiles in flight without registers. The first R copies go out before
// griddepcontrol.wait (the weights do not depend on the previous kernel) and, for the table readers,
// before the table fill, which they then hide. Same arithmetic, same order: the same bits as
// gemv_gpu_kernel. K types: one row group per CTA. Table readers (IQ3): persistent, as
// gemv_gpu_kernel (row groups blockIdx.x, + gridDim.x, ...), and a warp's tiles of all its row groups
// are one sequence to the ring, so its copies run on across a group's end (the CTA's reduction and
// barriers) instead of draining there: ncu found the IQ3 kernel waiting on global loads for half its
// stalls, with one tile ahead per warp and the table fill and first loads of each CTA exposed.
__device__ __forceinline__ void gemv_cp_async16(void* smem, const void* gmem) {
  const uint32_t s = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void gemv_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void gemv_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
template <class D, int NC, int W, int R>
__global__ void __launch_bounds__(W * 32, (NC <= 2 ? 4 : 2) * 8 / W)
    gemv_gpu_async_kernel(const uint8_t* __restrict__ w, int64_t n_in, int64_t n_out, ActGpu x, int n_cols,
                          float* __restrict__ y, bool pdl) {
  static_assert(D::kTile % 16 == 0 && R >= 1);
  constexpr int S = D::kSubs;
  extern __shared__ __align__(16) uint8_t gemv_ring[];  // [W][R][kTile]: W * R * kTile bytes (the launch's)
  auto ring = reinterpret_cast<uint8_t (*)[R][D::kTile]>(gemv_ring);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_chunks = n_in / D::kChunk, n_groups = (n_out + 7) / 8;
  const int n_mine = warp < n_chunks ? int((n_chunks - warp + W - 1) / W) : 0;  // the warp's tiles per group
  // The issue cursor: the next tile to copy, as (row group, the warp's k-th chunk of it); one commit
  // group per tile, empty past the warp's last tile, so that wait_group<R - 1> always means "the
  // oldest tile not yet used has landed". Tile number k goes to slot k % R.
  int64_t issue_group = blockIdx.x;
  int issue_k = 0, issued = 0;
  auto issue = [&]() {
    if (n_mine > 0 && issue_group < n_groups) {
      const uint8_t* src = w + (uint64_t(issue_group) * uint64_t(n_chunks) + uint64_t(warp + issue_k * W)) * D::kTile;
      uint8_t* dst = ring[warp][issued % R];
#pragma unroll
      for (int o = lane * 16; o < D::kTile; o += 32 * 16) gemv_cp_async16(dst + o, src + o);
      if (++issue_k == n_mine) issue_k = 0, issue_group += HasTable<D>::value ? int64_t(gridDim.x) : n_groups;
    }
    ++issued;
    gemv_cp_async_commit();
  };
#pragma unroll
  for (int k = 0; k < R; ++k) issue();
  gpu_table_fill<D>();  // table readers, while the first copies are in flight
  if (pdl) pdl_wait();
  pdl_launch_dependents();
  int used = 0;
  for (int64_t G = blockIdx.x; G < n_groups; G += gridDim.x) {
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
    ActGpu xc{x.q + int64_t(warp) * D::kChunk, x.d + int64_t(warp) * S, x.s16 + int64_t(warp) * 2 * S};
    for (int k = 0; k < n_mine; ++k, ++used, xc.q += W * D::kChunk, xc.d += W * S, xc.s16 += W * 2 * S) {
      gemv_cp_async_wait<R - 1>();
      __syncwarp();  // every lane's copies of this tile have landed
      D r;
      r.load_raw(SmemTile{ring[warp][used % R]}, lane, g);
      gemv_tile_add<D, NC>(r, xc, n_in, t, n_cols, acc);
      __syncwarp();  // every lane is done with this slot: refill it, R tiles ahead
      issue();
    }
    gemv_store_rows<W, NC>(acc, G, n_out, n_cols, y);
    if constexpr (!HasTable<D>::value) break;  // one row group per CTA
    __syncthreads();  // red is written again
  }
}

// Exact decode of the GPU layout to f32 / f16: one thread per (output row, chunk, lane t); output
// row r decodes source row ids[r] (gather) or row0 + r, times `scale` (1 keeps it exact).
template <class D, typename Out>
__global__ void dequant_gpu_kernel(const uint8_t* __restrict__ w, int64_t n_in, int64_t row0,
                                   const int32_t* __restrict__ ids, int64_t n_rows, float scale, Out* __restrict__ out) {
  const int64_t n_chunks = n_in / D::kChunk, n = n_rows * n_chunks * 4;
  gpu_table_fill<D>();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool valid = i < n;
  // kIq readers shuffle between a row's 4 lanes: idle lanes decode the last element group again
  // (same t, so the groups of 4 stay whole) and store nothing.
  if constexpr (IsIqReader<D>::value) {
    if (!valid) i = n - 4 + (i & 3);
  } else {
    if (!valid) return;
  }
  const int t = int(i & 3);
  const int64_t ch = (i >> 2) % n_chunks, r = (i >> 2) / n_chunks;
  const int64_t src = ids ? int64_t(ids[r]) : row0 + r;
  const int g = int(src & 7);
  D rd;
  rd.load(w + uint64_t((src >> 3) * n_chunks + ch) * D::kTile, 4 * g + t, g);
  rd.unrotate(t);
  const float d = rd.d(), dmin = rd.dmin();
#pragma unroll
  for (int s = 0; s < D::kSubs; ++s) {
    const float off = D::kMin ? __fmul_rn(dmin, float(rd.min(s))) : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t c = rd.codes(s, h);
      const float sc = __fmul_rn(d, float(rd.scale(s, h)));
      Out* o = out + r * n_in + ch * D::kChunk + 32 * s + 16 * h + 4 * t;
      float v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int q = D::kSigned ? int(int8_t(c >> (8 * k))) : int((c >> (8 * k)) & 0xffu) - D::kBias;
        v[k] = __fmul_rn(float(q), sc);
        if constexpr (D::kMin) v[k] = __fsub_rn(v[k], off);
        v[k] = __fmul_rn(v[k], scale);
      }
      // One 16- or 8-byte store per 4 elements (n_in is a multiple of the chunk, so aligned).
      if (!valid) continue;
      if constexpr (sizeof(Out) == 4) {
        *reinterpret_cast<float4*>(o) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        const __half2 lo = __halves2half2(__float2half_rn(v[0]), __float2half_rn(v[1]));
        const __half2 hi = __halves2half2(__float2half_rn(v[2]), __float2half_rn(v[3]));
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&lo);
        packed.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(o) = packed;
      }
    }
  }
}

}  // namespace strata::kernels::cuda::detail
