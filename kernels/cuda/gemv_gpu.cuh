// Device readers of the GPU weight layout (kernels/gpu_layout.h: 8-row x chunk tiles, lane
// L = 4 g + t owns row g and, per 32-element sub-block s, the elements 32 s + 16 h + 4 t + i), the
// GEMV on it (int8 activations, __dp4a) and its dequantiser. Internal to kernels/cuda (CUDA only).
//
// A reader's load() issues every load of one lane for one tile and decodes the packed scales; it is
// load_raw() (the loads only, so that a kernel can issue the next tile's loads before it uses this
// one's) followed by finish() (the scale decode, which waits for them). Per-lane streams are read at
// lane * W (consecutive lanes, consecutive W-byte words: W = 8, 16 or 32 as two 16-byte loads),
// per-row streams at g * W (the 4 lanes of a row share the word: one broadcast). codes(s, h) gives
// the lane's 4 codes of half h of sub-block s as the bytes of one word: unsigned (code - kBias is
// the value index) or, where kSigned, already the signed value index (q3_K, q8_0);
// scale(s, h) the integer sub-scale, min(s) the integer min (q4_K / q5_K), d() / dmin() the f16
// super-block factors. Element value (as the CPU decoders): (d * scale) * (code - kBias) - dmin * min.
#pragma once

#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/quant_decode.cuh"

namespace strata::kernels::cuda::detail {

__device__ __forceinline__ uint4 ld_u4(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint2 ld_u2(const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ uint32_t ld_u1(const uint8_t* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }
__device__ __forceinline__ uint32_t word_of(const uint4& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }
__device__ __forceinline__ int sbyte(const uint4& v, int k) { return int(int8_t(word_of(v, k >> 2) >> (8 * (k & 3)))); }
__device__ __forceinline__ int ubyte(const uint4& v, int k) { return int((word_of(v, k >> 2) >> (8 * (k & 3))) & 0xffu); }

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
  static constexpr bool kMin = true, kScale16 = false, kSigned = false;
  static constexpr int kSc = kHigh ? 1280 : 1024, kD = kHigh ? 1376 : 1120;
  uint4 qa, qb, sc;
  uint2 qh;
  uint32_t dm;
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) {
    qa = ld_u4(tile + lane * 32);
    qb = ld_u4(tile + lane * 32 + 16);
    if constexpr (kHigh) qh = ld_u2(tile + 1024 + lane * 8);
    const uint8_t* p = tile + kSc + g * 12;
    sc = make_uint4(ld_u1(p), ld_u1(p + 4), ld_u1(p + 8), 0u);  // raw until finish()
    dm = ld_u1(tile + kD + g * 4);
  }
  __device__ __forceinline__ void finish() { sc = k4_scales(sc.x, sc.y, sc.z); }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
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

// q3_K codes come out signed (q = code - 4 per byte, kBias 0): the hmask bit h and low bits l
// give q = l - 4 (1 - h), i.e. the byte l | (h ? 0 : 0xFC) = l + (h ^ 1) * 0xFC (no carry between
// bytes), as cheap as the unsigned code, and the kernels then need no bias correction.
struct GpuQ3K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 880, kBias = 0;
  static constexpr bool kMin = false, kScale16 = true, kSigned = true;
  uint4 ql, sc;
  uint2 qh;
  uint16_t dd;
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) {
    ql = ld_u4(tile + lane * 16);
    qh = ld_u2(tile + 512 + lane * 8);
    const uint8_t* p = tile + 768 + g * 12;
    sc = make_uint4(ld_u1(p), ld_u1(p + 4), ld_u1(p + 8), 0u);  // raw until finish()
    dd = ld16(tile + 864 + g * 2);
  }
  __device__ __forceinline__ void finish() { sc = q3_scales(sc.x, sc.y, sc.z); }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const uint32_t lo = (word_of(ql, s >> 1) >> (4 * (s & 1) + 2 * h)) & 0x03030303u;
    const uint32_t nh = (((s < 4 ? qh.x : qh.y) >> (2 * (s & 3) + h)) & 0x01010101u) ^ 0x01010101u;
    return nh * 0xFCu + lo;
  }
  __device__ __forceinline__ int scale(int s, int h) const { return sbyte(sc, 2 * s + h); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

struct GpuQ6K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 1680, kBias = 32;
  static constexpr bool kMin = false, kScale16 = true, kSigned = false;
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
  static constexpr bool kMin = false, kScale16 = false, kSigned = true;
  uint2 q;
  uint16_t dd;
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) { load(tile, lane, g); }
  __device__ __forceinline__ void finish() {}
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    q = ld_u2(tile + lane * 8);
    dd = ld16(tile + 256 + g * 2);
  }
  __device__ __forceinline__ uint32_t codes(int, int h) const { return h ? q.y : q.x; }
  __device__ __forceinline__ int scale(int, int) const { return 1; }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

// Lane t's activations of chunk ch of column c (matmul_internal.h ActGpu): its code words per
// sub-block and half, the scales d and the s16 sums of the chunk (vector loads; all lanes of a t
// read the same words, the 4 t's of a load 64 consecutive bytes).
template <class D, int S = D::kSubs>
__device__ __forceinline__ void load_act(const ActGpu& x, int c, int64_t n_in, int64_t ch, int t, uint32_t (&xw)[S][2],
                                         float (&dx)[S], int (&sx)[2 * S]) {
  const uint8_t* xq = reinterpret_cast<const uint8_t*>(x.q + int64_t(c) * n_in + ch * D::kChunk);
  const float* d = x.d + int64_t(c) * (n_in / 32) + ch * S;
  const int* s16 = x.s16 + int64_t(c) * (n_in / 16) + ch * 2 * S;
  if constexpr (S == 1) {
    const uint2 v = ld_u2(xq + 8 * t);
    xw[0][0] = v.x, xw[0][1] = v.y;
    dx[0] = __ldg(d);
    sx[0] = sx[1] = 0;  // q8_0: no bias, no min
  } else {
    static_assert(S == 8);
#pragma unroll
    for (int k = 0; k < S / 2; ++k) {
      const uint4 v = ld_u4(xq + 64 * k + 16 * t);
      xw[2 * k][0] = v.x, xw[2 * k][1] = v.y, xw[2 * k + 1][0] = v.z, xw[2 * k + 1][1] = v.w;
    }
#pragma unroll
    for (int k = 0; k < S / 4; ++k) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(d) + k);
      dx[4 * k] = v.x, dx[4 * k + 1] = v.y, dx[4 * k + 2] = v.z, dx[4 * k + 3] = v.w;
    }
    if constexpr (D::kBias != 0 || D::kMin) {
#pragma unroll
      for (int k = 0; k < S / 2; ++k) {
        const int4 v = __ldg(reinterpret_cast<const int4*>(s16) + k);
        sx[4 * k] = v.x, sx[4 * k + 1] = v.y, sx[4 * k + 2] = v.z, sx[4 * k + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int k = 0; k < 2 * S; ++k) sx[k] = 0;
    }
  }
}

// sc(s, 0) * lo16(p) + sc(s, 1) * hi16(p) for the 16-element-scale types: the two scales are the
// bytes 2 s, 2 s + 1 of the decoded scale word s / 2 (GpuQ3K::sc), low or high half by s % 2.
template <class D>
__device__ __forceinline__ int dp2a_scales(const D& r, int s, uint32_t p) {
  const int w = int(word_of(r.sc, s >> 1));
  return (s & 1) ? __dp2a_hi(int(p), w, 0) : __dp2a_lo(int(p), w, 0);
}

constexpr int kGpuGemvWarps = 8;  // warps per CTA, splitting one row group's chunks (split-K)

// One CTA per row group of 8 rows; warp w takes chunks w, w + 8, ...; per lane, each weight word
// is decoded once and used for all NC columns; the 8 warps' partial sums meet in shared memory in
// a fixed order (deterministic).
// 4 CTAs (32 warps) per SM for 1-2 columns: at 3 (the register use without the bound) a 512-CTA
// matrix (4096 rows) took two waves on 132 SMs.
// Under programmatic dependent launch (pdl, sm_90) the warp first asks L2 for its first
// kGpuGemvPrefetch tiles, while the kernel that writes x (the quantiser) still runs.
constexpr int kGpuGemvPrefetch = 2;
template <class D, int NC>
__global__ void __launch_bounds__(kGpuGemvWarps * 32, NC <= 2 ? 4 : 2) gemv_gpu_kernel(const uint8_t* __restrict__ w, int64_t n_in,
                                                                      int64_t n_out, ActGpu x, int n_cols,
                                                                      float* __restrict__ y, bool pdl) {
  constexpr int S = D::kSubs;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_chunks = n_in / D::kChunk;
  const uint8_t* group = w + uint64_t(blockIdx.x) * uint64_t(n_chunks) * D::kTile;
  if (pdl) {
    for (int64_t ch = warp, k = 0; ch < n_chunks && k < kGpuGemvPrefetch; ch += kGpuGemvWarps, ++k)
      if (lane * 128 < D::kTile) asm volatile("prefetch.global.L2 [%0];" ::"l"(group + ch * D::kTile + lane * 128));
    pdl_wait();
  }
  pdl_launch_dependents();
  const int bsel = t == 0 ? D::kBias : 0;  // bias and min corrections: once per row (lane t = 0)
  float acc[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
#pragma unroll 2
  for (int64_t ch = warp; ch < n_chunks; ch += kGpuGemvWarps) {
    D r;
    r.load(group + ch * D::kTile, lane, g);
    uint32_t b[S][2];
    int sc[S][2], mn[S];
#pragma unroll
    for (int s = 0; s < S; ++s) {
      b[s][0] = r.codes(s, 0);
      b[s][1] = r.codes(s, 1);
      sc[s][0] = r.scale(s, 0);
      sc[s][1] = r.scale(s, 1);
      mn[s] = t == 0 ? r.min(s) : 0;
    }
    const float fd = r.d(), fm = r.dmin();
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      if (NC > 1 && c >= n_cols) break;
      uint32_t xw[S][2];
      float dx[S];
      int sx[2 * S];
      load_act<D>(x, c, n_in, ch, t, xw, dx, sx);
      float accd = 0.0f, accm = 0.0f;
#pragma unroll
      for (int s = 0; s < S; ++s) {
        int p0 = __dp4a(int(b[s][0]), int(xw[s][0]), 0);
        int p1 = __dp4a(int(b[s][1]), int(xw[s][1]), 0);
        const int s0 = sx[2 * s], s1 = sx[2 * s + 1];
        if constexpr (D::kBias != 0) {
          p0 -= bsel * s0;
          p1 -= bsel * s1;
        }
        int ip;
        if constexpr (D::kScale16 && D::kBias == 0) {
          // Both halves' scales in one __dp2a: |p| <= 4 * 4 * 127 fits the int16 lanes (q3_K).
          ip = dp2a_scales<D>(r, s, __byte_perm(p0, p1, 0x5410));
        } else {
          ip = D::kScale16 ? sc[s][0] * p0 + sc[s][1] * p1 : sc[s][0] * (p0 + p1);
        }
        const float dxs = dx[s];
        accd = fmaf(dxs, float(ip), accd);
        if constexpr (D::kMin) accm = fmaf(dxs, float(mn[s] * (s0 + s1)), accm);
      }
      acc[c] = fmaf(fd, accd, acc[c]);
      if constexpr (D::kMin) acc[c] = fmaf(-fm, accm, acc[c]);
    }
  }
  __shared__ float red[kGpuGemvWarps][NC][8];
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    float v = acc[c];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (t == 0) red[warp][c][g] = v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < NC * 8; i += blockDim.x) {
    const int c = i >> 3, row = i & 7;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < kGpuGemvWarps; ++k) v += red[k][c][row];
    const int64_t r = int64_t(blockIdx.x) * 8 + row;
    if (c < n_cols && r < n_out) y[int64_t(c) * n_out + r] = v;
  }
}

// Exact decode of the GPU layout to f32 / f16: one thread per (output row, chunk, lane t); output
// row r decodes source row ids[r] (gather) or row0 + r, times `scale` (1 keeps it exact).
template <class D, typename Out>
__global__ void dequant_gpu_kernel(const uint8_t* __restrict__ w, int64_t n_in, int64_t row0,
                                   const int32_t* __restrict__ ids, int64_t n_rows, float scale, Out* __restrict__ out) {
  const int64_t n_chunks = n_in / D::kChunk;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_rows * n_chunks * 4) return;
  const int t = int(i & 3);
  const int64_t ch = (i >> 2) % n_chunks, r = (i >> 2) / n_chunks;
  const int64_t src = ids ? int64_t(ids[r]) : row0 + r;
  const int g = int(src & 7);
  D rd;
  rd.load(w + uint64_t((src >> 3) * n_chunks + ch) * D::kTile, 4 * g + t, g);
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
