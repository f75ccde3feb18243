// The GPU-layout GEMV for 1..64 columns on int8 tensor cores (mma.sync m16n8k16 / m16n8k32, s8 x s8
// -> s32; sm_80 and later, so sm_86 / sm_89 / sm_90 alike). CUDA only; included by gemv_gpu.cu.
//
// Roles: A (16 x k, row-major) = 16 weight rows, row groups G (MMA rows 0-7) and G + 1 (8-15) of
// the layout, whose lane words are A fragments as they are loaded (lane 4 g + t holds
// k = 4 t .. 4 t + 3 of each 16-element half for row g); B (k x 8, column-major) = 8 columns of
// activations, lane (g, t) loading column g's lane-t words (ActGpu), each chunk's once per column
// tile. D element e of a lane: weight row g of group G + (e >> 1), column 2 t + (e & 1) -- the
// lane's own rows, so the scales it decoded with its codes are the ones its D elements need.
// Why weights as A: each weight word is decoded once per lane, whatever the column count, and one
// MMA covers 16 rows x 8 columns x 32 k (a dp4a 4 k of one row and column); 1 column wastes 7/8 of
// the MMA, which costs nothing here: the kernel is bound by the weight stream and the decode.
//
// Per 32-element sub-block the integer sums are exact: k16 MMAs per 16-element half where the type
// has 16-element scales (q3_K, q6_K), one k32 MMA otherwise; biased codes enter the MMA as signed
// int8 (signed_codes), q4_K/q5_K mins are removed with the activation sums s16. The float steps
// after them are the ones the dp4a kernel takes (gemv_gpu.cuh, "shared bit for bit"), so a column
// gets the same bits from either kernel. Split-K over the CTA's 8 warps, partial sums added in
// shared memory in a fixed order (deterministic).
//
// Where it runs (gemv_gpu.cu): from kGemvMmaFromCols (3) columns. Measured on the H200 (bench
// kernels, 2026-12-02, graph-timed, times over the dp4a kernel's 1 column): 8 columns 1.1-2.5x,
// 16 columns 1.3-6.2x, 64 columns 3.6-16x (q8_0 cheapest, q4_K dearest). What limits it from 16
// columns: the per-element epilogue (integer scale, I2F, FMA per row, column and sub-block), the
// registers (16 columns spill ~120 bytes at 2 blocks per SM), and each 16-row warp reading every
// column's activations from L2 (64 columns: ~9x the weight bytes).
// ncu (H100, 2026-12-07, q4_K 5376 x 21504, 16 columns, the one-CTA launch: 212 registers, 8 warps
// per SM, issue slots 45% busy, 5.1 cycles per issued instruction, ~1000 instructions per warp and
// chunk): of the warp-stall samples, 31% wait (long scoreboard) on the activation loads at their
// point of use (load_dx's s16 sums feeding the IADDs of xsd, then dx and b: per chunk and lane 32
// 16-byte loads of activations against ~5 of weights, 80% L1 hits), 14% wait at the split-K
// barrier (21 chunks over 8 warps: the busiest warp takes 3, the mean is 2.6; 7 warps would not
// help, a CTA still takes 3 chunk-steps), 7% on the next chunk's weight tiles. Loading a tile's
// activations before the weight decode would hide the first, but needs ~64 more registers per
// tile (a spill at 255); fewer activation words per chunk (the min term's d * sum as one float
// per 32 elements, written by the quantisers, instead of two int sums per 32) is the next step.
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

// Codes as signed int8 (code - kBias), per byte, for the types with a bias (q3_K: 0..7 - 4,
// q6_K: 0..63 - 32): codes are below 128 + kBias, so c + 128 - kBias stays within a byte (no carry
// crosses bytes) and flipping its bit 7 gives the two's complement byte of c - kBias. Two
// operations per word.
template <int kBias>
__device__ __forceinline__ uint32_t signed_codes(uint32_t c) {
  if constexpr (kBias == 0) {
    return c;
  } else {
    return (c + 0x01010101u * uint32_t(128 - kBias)) ^ 0x80808080u;
  }
}

// Lane t's B fragments of chunk ch of column col (ActGpu): the code words of every sub-block and
// half (all lanes of one t read the same 16-byte words: one broadcast per load). Zero past n_cols.
template <class D, int S = D::kSubs>
__device__ __forceinline__ void load_b(const ActGpu& x, int col, int n_cols, int64_t n_in, int64_t ch, int t,
                                       uint32_t (&b)[S][2]) {
  if (col >= n_cols) {
#pragma unroll
    for (int s = 0; s < S; ++s) b[s][0] = b[s][1] = 0u;
    return;
  }
  const uint8_t* xq = reinterpret_cast<const uint8_t*>(x.q + int64_t(col) * n_in + ch * D::kChunk);
  if constexpr (S == 1) {
    const uint2 v = ld_u2(xq + 8 * t);
    b[0][0] = v.x, b[0][1] = v.y;
  } else {
#pragma unroll
    for (int k = 0; k < S / 2; ++k) {  // sub-blocks 2k, 2k + 1: lane t's slot word k ^ t (ActGpu)
      const uint4 v = ld_u4(xq + 64 * (k ^ t) + 16 * t);
      b[2 * k][0] = v.x, b[2 * k][1] = v.y, b[2 * k + 1][0] = v.z, b[2 * k + 1][1] = v.w;
    }
  }
}

// The activation scales d of chunk ch of column col per sub-block, and for the types with mins
// d * (sum of the sub-block's codes) (the min term's factor). Zero past n_cols.
template <class D, int S = D::kSubs>
__device__ __forceinline__ void load_dx(const ActGpu& x, int col, int n_cols, int64_t n_in, int64_t ch, float (&dx)[S],
                                        float (&xsd)[S]) {
  if (col >= n_cols) {
#pragma unroll
    for (int s = 0; s < S; ++s) dx[s] = xsd[s] = 0.0f;
    return;
  }
  const float* d = x.d + int64_t(col) * (n_in / 32) + ch * S;
  if constexpr (S == 1) {
    dx[0] = __ldg(d);
  } else {
#pragma unroll
    for (int k = 0; k < S / 4; ++k) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(d) + k);
      dx[4 * k] = v.x, dx[4 * k + 1] = v.y, dx[4 * k + 2] = v.z, dx[4 * k + 3] = v.w;
    }
  }
  if constexpr (D::kMin) {
    const int* s16 = x.s16 + int64_t(col) * (n_in / 16) + ch * 2 * S;
#pragma unroll
    for (int k = 0; k < S / 2; ++k) {
      const int4 v = __ldg(reinterpret_cast<const int4*>(s16) + k);
      xsd[2 * k] = __fmul_rn(dx[2 * k], float(v.x + v.y));
      xsd[2 * k + 1] = __fmul_rn(dx[2 * k + 1], float(v.z + v.w));
    }
  } else {
#pragma unroll
    for (int s = 0; s < S; ++s) xsd[s] = 0.0f;
  }
}

// The integer sums I_s of sub-block s for the lane's 4 D elements (exact: MMAs per half where the
// type has 16-element scales, one k32 MMA otherwise, then the integer scales).
template <class D>
__device__ __forceinline__ void sub_sums(const D& r0, const D& r1, const uint32_t (&a)[D::kSubs][2][2],
                                         const uint32_t (&b)[D::kSubs][2], int s, int (&dd)[4]) {
  if constexpr (D::kScale16) {
    int d0[4], d1[4];
    mma_s8_k16(d0, a[s][0][0], a[s][0][1], b[s][0]);
    mma_s8_k16(d1, a[s][1][0], a[s][1][1], b[s][1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const D& rs = e < 2 ? r0 : r1;
      dd[e] = rs.scale(s, 0) * d0[e] + rs.scale(s, 1) * d1[e];
    }
  } else {
    int m[4];
    mma_s8_k32(m, a[s][0][0], a[s][0][1], a[s][1][0], a[s][1][1], b[s][0], b[s][1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) dd[e] = (e < 2 ? r0 : r1).scale(s, 0) * m[e];
  }
}

// One warp's MMA tile: 16 weight rows (row groups G and G + 1) x 8 columns x one chunk. Adds the
// chunk's term of D elements e (row g + 8 (e >> 1), column 2 t + (e & 1)) to acc: the arithmetic
// gemv_gpu.cuh defines ("shared bit for bit"), all four lane-quarters C_0..C_3 in this lane.
// kOdd = false: the odd columns cannot be real (1 column), their elements are skipped.
template <class D, bool kOdd>
__device__ __forceinline__ void mma_chunk(const D& r0, const D& r1, const uint32_t (&a)[D::kSubs][2][2],
                                          const uint32_t (&b)[D::kSubs][2], const float (&dx)[2][D::kSubs],
                                          const float (&xsd)[2][D::kSubs], float (&acc)[4]) {
  constexpr int S = D::kSubs;
  if constexpr (S == 1) {
    int dd[4];
    sub_sums<D>(r0, r1, a, b, 0, dd);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (!kOdd && (e & 1)) continue;
      acc[e] = __fadd_rn(acc[e], __fmul_rn((e < 2 ? r0 : r1).d(), __fmul_rn(dx[e & 1][0], float(dd[e]))));
    }
  } else {
    float q01[4], q23[4];
#pragma unroll
    for (int tq = 0; tq < 4; ++tq) {
      int i0[4], i1[4];
      sub_sums<D>(r0, r1, a, b, 2 * tq, i0);
      sub_sums<D>(r0, r1, a, b, 2 * tq + 1, i1);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (!kOdd && (e & 1)) continue;
        const D& rs = e < 2 ? r0 : r1;
        const int c = e & 1;
        const float term = chunk_term<D>(rs.d(), rs.dmin(), dx[c][2 * tq], dx[c][2 * tq + 1], i0[e], i1[e],
                                         xsd[c][2 * tq], xsd[c][2 * tq + 1], float(rs.min(2 * tq)),
                                         float(rs.min(2 * tq + 1)));
        float& q = tq < 2 ? q01[e] : q23[e];
        q = (tq & 1) ? __fadd_rn(q, term) : term;
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (!kOdd && (e & 1)) continue;
      acc[e] = __fadd_rn(acc[e], __fadd_rn(q01[e], q23[e]));
    }
  }
}


// One CTA per 16 rows (row groups 2 b, 2 b + 1: the MMA's M), NC compiled columns (1, 2, 8, 16,
// 32, 64; NC / 8 MMA column tiles of 8, the first n_cols real). W warps (the dp4a kernel's for the
// same matrix: the same summation order); warp w takes chunks w, w + W, ...,
// and loads the next chunk's tiles before it decodes the current one (two tiles of its rows in
// flight per warp). Every column is computed alike -- exact integer sums per sub-block, then the
// same float operations in the same order for any NC -- so a column's result does not depend on
// how many columns run with it (the engine's verify and batched rows equal one-token steps).
// kMinBlocks: CTAs per SM the launch bound asks for (the register cap: 2 -> 128 per thread at 8
// warps). At 16 columns 128 registers spill (ptxas, sm_90: q4_K 288 bytes stored / 296 loaded per
// thread, q3_K 88 / 92, q6_K 304 / 364); the launcher runs it at 1 CTA per SM, 255 registers
// (gemv_gpu_launch.cuh gemv_mma16_one_cta: measured 18-25% faster on the H100).
template <class D, int NC, int W, int kMinBlocks = (NC <= 16 && W == 8 ? 2 : 1)>
__global__ void __launch_bounds__(W * 32, kMinBlocks)
    gemv_gpu_mma_kernel(const uint8_t* __restrict__ w, int64_t n_in, int64_t n_out, ActGpu x, int n_cols,
                        float* __restrict__ y) {
  constexpr int S = D::kSubs, NT = (NC + 7) / 8;
  constexpr bool kOdd = NC > 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_chunks = n_in / D::kChunk, n_groups = (n_out + 7) / 8;
  gpu_table_fill<D>();  // table readers: once per CTA, before the loop over row-group pairs
  pdl_wait();  // launched with programmatic dependent launch: x is written by the kernel before
  pdl_launch_dependents();
  // Pairs blockIdx.x, + gridDim.x, ...: one per CTA where the grid has a CTA per pair; persistent
  // grids (table readers; STRATA_GEMV_MMA_PERSIST for the others) walk several, each re-reading the
  // same activations, which then come from the SM's L1 instead of L2 (gemv_gpu_launch.cuh).
  for (int64_t pair = blockIdx.x;;) {
    const int64_t G0 = pair * 2;
    // Past the last group: read the last one again (its sums are never stored: rows >= n_out).
    const int64_t G1 = min(G0 + 1, n_groups - 1);
    const uint8_t* w0 = w + uint64_t(G0) * uint64_t(n_chunks) * D::kTile;
    const uint8_t* w1 = w + uint64_t(G1) * uint64_t(n_chunks) * D::kTile;
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
    D c0, c1;
    int64_t ch = warp;
    if (ch < n_chunks) {
      c0.load_raw(w0 + ch * D::kTile, lane, g);
      c1.load_raw(w1 + ch * D::kTile, lane, g);
    }
    for (; ch < n_chunks; ch += W) {
      D n0, n1;
      const int64_t cn = ch + W;
      if (cn < n_chunks) {
        n0.load_raw(w0 + cn * D::kTile, lane, g);
        n1.load_raw(w1 + cn * D::kTile, lane, g);
      }
      c0.finish();
      c1.finish();
      c0.unrotate(t);  // slot order -> sub-block order (gpu_layout.h "Slots")
      c1.unrotate(t);
      uint32_t a[S][2][2];  // A fragments: [sub-block][half][row group]
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a[s][h][0] = signed_codes<D::kBias>(c0.codes(s, h));
          a[s][h][1] = signed_codes<D::kBias>(c1.codes(s, h));
        }
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        uint32_t b[S][2];
        float dx[2][S], xsd[2][S];
        load_b<D>(x, 8 * n + g, n_cols, n_in, ch, t, b);
        load_dx<D>(x, 8 * n + 2 * t, n_cols, n_in, ch, dx[0], xsd[0]);
        if constexpr (kOdd) {
          load_dx<D>(x, 8 * n + 2 * t + 1, n_cols, n_in, ch, dx[1], xsd[1]);
        } else {
#pragma unroll
          for (int s = 0; s < S; ++s) dx[1][s] = xsd[1][s] = 0.0f;
        }
        mma_chunk<D, kOdd>(c0, c1, a, b, dx, xsd, acc[n]);
      }
      if (cn < n_chunks) c0 = n0, c1 = n1;
    }
    // Split-K: the warps' partial sums added in warp order (deterministic), one column tile at a time.
    __shared__ float red[W][32][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      if (n > 0) __syncthreads();
#pragma unroll
      for (int e = 0; e < 4; ++e) red[warp][lane][e] = acc[n][e];
      __syncthreads();
      if (threadIdx.x < 128) {
        const int l = threadIdx.x >> 2, e = threadIdx.x & 3;
        const int col = 8 * n + 2 * (l & 3) + (e & 1);
        const int64_t row = (G0 + (e >> 1)) * 8 + (l >> 2);
        if (col < n_cols && row < n_out) {
          float v = 0.0f;
#pragma unroll
          for (int k = 0; k < W; ++k) v = __fadd_rn(v, red[k][l][e]);
          y[int64_t(col) * n_out + row] = v;
        }
      }
    }
    // Grids of one CTA per pair end here; persistent grids (table readers, and the K types' where
    // gemv_mma_grid says so) take the next pair.
    pair += gridDim.x;
    if (pair * 2 >= n_groups) break;
    __syncthreads();  // red is written again
  }
}

}  // namespace strata::kernels::cuda::detail
