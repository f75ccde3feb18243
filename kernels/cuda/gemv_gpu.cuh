// Device readers of the GPU weight layout (kernels/gpu_layout.h: 8-row x chunk tiles, lane
// L = 4 g + t owns row g and, per 32-element sub-block s, the elements 32 s + 16 h + 4 t + i), the
// GEMV on it (int8 activations, __dp4a) and its dequantiser. Internal to kernels/cuda (CUDA only).
//
// A reader's load() issues every load of one lane for one tile: per-lane streams are read at
// lane * W (consecutive lanes, consecutive W-byte words: W = 8, 16 or 32 as two 16-byte loads),
// per-row streams at g * W (the 4 lanes of a row share the word: one broadcast). codes(s, h) gives
// the lane's 4 unsigned codes of half h of sub-block s as the bytes of one word (q8_0: signed);
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
template <bool kHigh>
struct GpuQ45K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = kHigh ? 1440 : 1184, kBias = 0;
  static constexpr bool kMin = true, kScale16 = false;
  static constexpr int kSc = kHigh ? 1280 : 1024, kD = kHigh ? 1408 : 1152;
  uint4 qa, qb, sc;
  uint2 qh;
  uint32_t dm;
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    qa = ld_u4(tile + lane * 32);
    qb = ld_u4(tile + lane * 32 + 16);
    if constexpr (kHigh) qh = ld_u2(tile + 1024 + lane * 8);
    sc = ld_u4(tile + kSc + g * 16);
    dm = ld_u1(tile + kD + g * 4);
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

struct GpuQ3K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 912, kBias = 4;
  static constexpr bool kMin = false, kScale16 = true;
  uint4 ql, sc;
  uint2 qh;
  uint16_t dd;
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    ql = ld_u4(tile + lane * 16);
    qh = ld_u2(tile + 512 + lane * 8);
    sc = ld_u4(tile + 768 + g * 16);
    dd = ld16(tile + 896 + g * 2);
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const uint32_t lo = (word_of(ql, s >> 1) >> (4 * (s & 1) + 2 * h)) & 0x03030303u;
    const uint32_t hb = ((s < 4 ? qh.x : qh.y) >> (2 * (s & 3) + h)) & 0x01010101u;
    return lo | (hb << 2);
  }
  __device__ __forceinline__ int scale(int s, int h) const { return sbyte(sc, 2 * s + h); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

struct GpuQ6K {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 1680, kBias = 32;
  static constexpr bool kMin = false, kScale16 = true;
  uint4 qa, qb, qh, sc;
  uint16_t dd;
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
  static constexpr bool kMin = false, kScale16 = false;
  uint2 q;
  uint16_t dd;
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

constexpr int kGpuGemvWarps = 8;  // warps per CTA, splitting one row group's chunks (split-K)

// One CTA per row group of 8 rows; warp w takes chunks w, w + 8, ...; per lane, each weight word
// is decoded once and used for all NC columns; the 8 warps' partial sums meet in shared memory in
// a fixed order (deterministic).
template <class D, int NC>
__global__ void __launch_bounds__(kGpuGemvWarps * 32) gemv_gpu_kernel(const uint8_t* __restrict__ w, int64_t n_in,
                                                                      int64_t n_out, ActGpu x, int n_cols,
                                                                      float* __restrict__ y) {
  constexpr int S = D::kSubs;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_chunks = n_in / D::kChunk;
  const uint8_t* group = w + uint64_t(blockIdx.x) * uint64_t(n_chunks) * D::kTile;
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
        const int ip = D::kScale16 ? sc[s][0] * p0 + sc[s][1] * p1 : sc[s][0] * (p0 + p1);
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
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int q = D::kChunk == 32 ? int(int8_t(c >> (8 * k))) : int((c >> (8 * k)) & 0xffu) - D::kBias;
        float v = __fmul_rn(float(q), sc);
        if constexpr (D::kMin) v = __fsub_rn(v, off);
        v = __fmul_rn(v, scale);
        if constexpr (sizeof(Out) == 4) o[k] = v;
        else o[k] = __float2half_rn(v);
      }
    }
  }
}

}  // namespace strata::kernels::cuda::detail
