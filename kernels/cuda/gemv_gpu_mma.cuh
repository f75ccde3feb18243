// The GPU-layout GEMV for 3..16 columns on int8 tensor cores (mma.sync m16n8k16 / m16n8k32, s8 x s8
// -> s32; sm_80 and later, so sm_86 / sm_89 / sm_90 alike). CUDA only; included by gemv_gpu.cu.
//
// Roles: A (16 x k, row-major) = the activations, one MMA row per column (columns past n_cols are
// zero), B (k x 8, column-major) = 8 weight rows -- a row group of the layout, whose lane words
// are B fragments as they are loaded (lane 4 g + t holds k = 4 t .. 4 t + 3 of each 16-element
// half for weight row g). A fragments come from the lane-ordered activations (ActGpu): lane (g, t)
// loads its 8 S bytes of a chunk for columns g and g + 8, once per chunk, and reuses them for R row
// groups. D element e of a lane: column g + 8 (e >> 1), weight row 2 t + (e & 1).
//
// Per 32-element sub-block the integer sums are scaled as in the dp4a kernel (gemv_gpu.cuh):
// k16 MMAs per 16-element half where the type has 16-element scales (q3_K, q6_K), one k32 MMA
// otherwise; biased codes enter the MMA as signed int8 (signed_codes), q4_K/q5_K mins are removed
// with the activation sums s16. Split-K over
// the CTA's 8 warps, partial sums added in shared memory in a fixed order (deterministic).
#pragma once

#include "kernels/cuda/gemv_gpu.cuh"

namespace strata::kernels::cuda::detail {

__device__ __forceinline__ void mma_s8_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(0));
}
__device__ __forceinline__ void mma_s8_k32(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                           uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}

constexpr int kGpuMmaGroups = 2;  // row groups (of 8 rows) per warp sharing one chunk's A fragments

// Codes as signed int8 (code - kBias), per byte, for the types with a bias (q3_K: 0..7 - 4,
// q6_K: 0..63 - 32): flip the bias bit, then extend the sign from it. No carry crosses a byte.
template <int kBias>
__device__ __forceinline__ uint32_t signed_codes(uint32_t c) {
  if constexpr (kBias == 0) {
    return c;
  } else {
    constexpr uint32_t kBit = 0x01010101u * uint32_t(kBias);
    const uint32_t v = c ^ kBit;
    constexpr uint32_t kMul = uint32_t((256 - 2 * kBias) / kBias);  // copies the bit to every bit above it
    return v | ((v & kBit) * kMul);
  }
}

template <class D, int R>
__global__ void __launch_bounds__(kGpuGemvWarps * 32, 2)
    gemv_gpu_mma_kernel(const uint8_t* __restrict__ w, int64_t n_in, int64_t n_out, ActGpu x, int n_cols,
                        float* __restrict__ y) {
  constexpr int S = D::kSubs;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_chunks = n_in / D::kChunk;
  const int64_t n_groups = (n_out + 7) / 8, G0 = int64_t(blockIdx.x) * R;
  float acc[R][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[r][e] = 0.0f;
  for (int64_t ch = warp; ch < n_chunks; ch += kGpuGemvWarps) {
    uint32_t a[2][S][2];
    float dx[2][S], xsd[2][S];  // xsd: d * (sum of the sub-block's codes), for the mins
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int col = g + 8 * cc;
      int sx[2 * S];
      if (col < n_cols) {
        load_act<D>(x, col, n_in, ch, t, a[cc], dx[cc], sx);
      } else {
#pragma unroll
        for (int s = 0; s < S; ++s) a[cc][s][0] = a[cc][s][1] = 0u, dx[cc][s] = 0.0f, sx[2 * s] = sx[2 * s + 1] = 0;
      }
#pragma unroll
      for (int s = 0; s < S; ++s) xsd[cc][s] = D::kMin ? dx[cc][s] * float(sx[2 * s] + sx[2 * s + 1]) : 0.0f;
    }
#pragma unroll
    for (int rg = 0; rg < R; ++rg) {
      // Past the last group: read the last one again (its sums are never stored: rows >= n_out).
      const int64_t G = min(G0 + rg, n_groups - 1);
      const uint8_t* tile = w + uint64_t(G * n_chunks + ch) * D::kTile;
      D wq, r0, r1;
      wq.load(tile, lane, g);       // B fragments: row g
      r0.load(tile, lane, 2 * t);   // scales of the D rows 2 t and 2 t + 1 (their code loads are dead)
      r1.load(tile, lane, 2 * t + 1);
      float accd[4] = {0, 0, 0, 0}, accm[4] = {0, 0, 0, 0};
#pragma unroll
      for (int s = 0; s < S; ++s) {
        if constexpr (D::kScale16) {
          int d0[4], d1[4];
          mma_s8_k16(d0, a[0][s][0], a[1][s][0], signed_codes<D::kBias>(wq.codes(s, 0)));
          mma_s8_k16(d1, a[0][s][1], a[1][s][1], signed_codes<D::kBias>(wq.codes(s, 1)));
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const D& rs = (e & 1) ? r1 : r0;
            int ip;
            if constexpr (D::kBias == 0)  // q3_K: |d| <= 16 * 4 * 127 fits the int16 lanes of __dp2a
              ip = dp2a_scales<D>(rs, s, __byte_perm(d0[e], d1[e], 0x5410));
            else
              ip = rs.scale(s, 0) * d0[e] + rs.scale(s, 1) * d1[e];
            accd[e] = fmaf(dx[e >> 1][s], float(ip), accd[e]);
          }
        } else {
          int dd[4];
          mma_s8_k32(dd, a[0][s][0], a[1][s][0], a[0][s][1], a[1][s][1], signed_codes<D::kBias>(wq.codes(s, 0)),
                     signed_codes<D::kBias>(wq.codes(s, 1)));
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int cc = e >> 1;
            const D& rs = (e & 1) ? r1 : r0;
            accd[e] = fmaf(dx[cc][s], float(rs.scale(s, 0) * dd[e]), accd[e]);
            if constexpr (D::kMin) accm[e] = fmaf(xsd[cc][s], float(rs.min(s)), accm[e]);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const D& rs = (e & 1) ? r1 : r0;
        acc[rg][e] = fmaf(rs.d(), accd[e], acc[rg][e]);
        if constexpr (D::kMin) acc[rg][e] = fmaf(-rs.dmin(), accm[e], acc[rg][e]);
      }
    }
  }
  __shared__ float red[kGpuGemvWarps][R][32][4];
#pragma unroll
  for (int rg = 0; rg < R; ++rg)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][rg][lane][e] = acc[rg][e];
  __syncthreads();
  for (int i = threadIdx.x; i < R * 128; i += blockDim.x) {
    const int rg = i >> 7, l = (i >> 2) & 31, e = i & 3;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < kGpuGemvWarps; ++k) v += red[k][rg][l][e];
    const int col = (l >> 2) + 8 * (e >> 1);
    const int64_t row = (G0 + rg) * 8 + 2 * (l & 3) + (e & 1);
    if (col < n_cols && row < n_out) y[int64_t(col) * n_out + row] = v;
  }
}

}  // namespace strata::kernels::cuda::detail
