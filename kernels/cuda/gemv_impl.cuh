// The GEMV kernel template, included by the per-family files (gemv_legacy.cu, gemv_k.cu,
// gemv_float.cu) so that each compiles only its own instantiations. CUDA only.
//
// Shape: a CTA of kGemvThreads threads owns R consecutive rows of W (R grows with the column count
// so that each x load serves several rows). Its threads stride over the row's pieces (8 elements,
// see quant_decode.cuh): consecutive threads read consecutive pieces, so a warp's weight loads are
// one contiguous run of the row, each weight byte is read once for all NC columns, and decoding
// happens in registers. For quantised types a piece's contribution is factored as
//   scale * sum(q * x) - offset * sum(x),
// which is the same value as sum(w * x) up to f32 rounding (tests bound it by ~n eps sum|w x|).
// Partial sums are reduced with warp shuffles, then across the CTA's warps through shared memory.
#pragma once

#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/quant_decode.cuh"

namespace strata::kernels::cuda::detail {

inline constexpr int kGemvThreads = 128;

// Rows per CTA for NC columns.
template <int NC>
constexpr int gemv_rows() { return NC <= 2 ? 1 : (NC <= 8 ? 2 : 4); }

// Exact float(code - kBias) for byte j (0..3) of word without the (slow) conversion unit: one byte
// permute places the code in the mantissa of 2^23 (bits 0x4B0000cc), one subtraction removes
// 2^23 + kBias (both exact: all values are integers below 2^24).
template <int kBias>
__device__ __forceinline__ float code_to_float(uint32_t word, int j) {
  return __int_as_float(int(__byte_perm(word, 0x4B000000u, 0x7440u | uint32_t(j)))) - float(8388608 + kBias);
}

template <int P>
__device__ __forceinline__ void load_x(const float* __restrict__ x, float (&v)[P]) {
  if constexpr (P == 8) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x)), b = __ldg(reinterpret_cast<const float4*>(x) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < P; ++i) v[i] = __ldg(x + i);
  }
}

// NC: the columns compiled for (1, 2, 4, 8, 16); the first n_cols <= NC are real, the rest are
// skipped by predicates (5 instantiations per type instead of 16).
template <class Dec, int NC>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                            int64_t n_out, int64_t n_in,
                                                            const float* __restrict__ x, int n_cols,
                                                            float* __restrict__ y) {
  constexpr int R = gemv_rows<NC>();
  constexpr int P = Dec::kPiece;
  constexpr int kPiecesPerBlock = Dec::kBlockElems / P;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const uint8_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + uint64_t(min(row0 + r, n_out - 1)) * row_bytes;

  float acc[R][NC];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

  const int64_t n_pieces = n_in / P;
  constexpr int kUnroll = NC <= 4 ? 4 : 1;  // more loads in flight where registers allow
#pragma unroll kUnroll
  for (int64_t pc = threadIdx.x; pc < n_pieces; pc += kGemvThreads) {
    const int64_t blk = pc / kPiecesPerBlock;
    const int p = int(pc % kPiecesPerBlock);
    if constexpr (Dec::kIsFloat) {
      float wv[R][P];
#pragma unroll
      for (int r = 0; r < R; ++r) Dec::values(rows[r] + blk * Dec::kBlockBytes, wv[r]);
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (NC > 1 && c >= n_cols) break;
        float xv[P];
        load_x<P>(x + c * n_in + pc * P, xv);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < P; ++i) acc[r][c] = fmaf(wv[r][i], xv[i], acc[r][c]);
      }
    } else {
      float qf[R][8], sc[R], off[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint2 cw;
        Dec::codes(rows[r] + blk * Dec::kBlockBytes, p, cw, sc[r], off[r]);
#pragma unroll
        for (int i = 0; i < 8; ++i) qf[r][i] = code_to_float<Dec::kBias>(i < 4 ? cw.x : cw.y, i & 3);
      }
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (NC > 1 && c >= n_cols) break;
        float xv[8];
        load_x<8>(x + c * n_in + pc * 8, xv);
        float sx = 0.0f;
        if constexpr (Dec::kHasOffset) sx = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float d0 = qf[r][0] * xv[0], d1 = qf[r][1] * xv[1];
#pragma unroll
          for (int i = 2; i < 8; i += 2) {
            d0 = fmaf(qf[r][i], xv[i], d0);
            d1 = fmaf(qf[r][i + 1], xv[i + 1], d1);
          }
          acc[r][c] = fmaf(sc[r], d0 + d1, acc[r][c]);
          if constexpr (Dec::kHasOffset) acc[r][c] = fmaf(-off[r], sx, acc[r][c]);
        }
      }
    }
  }

  constexpr int kWarps = kGemvThreads / 32;
  __shared__ float part[kWarps][R * NC];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float v = acc[r][c];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) part[warp][r * NC + c] = v;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < R * NC; i += kGemvThreads) {
    const int r = i / NC, c = i % NC;
    if (row0 + r >= n_out || c >= n_cols) continue;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) v += part[k][i];
    y[int64_t(c) * n_out + row0 + r] = v;
  }
}

template <class Dec, int NC>
void launch_gemv_nc(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s) {
  constexpr int R = gemv_rows<NC>();
  const unsigned grid = unsigned((w.n_out + R - 1) / R);
  gemv_kernel<Dec, NC><<<grid, kGemvThreads, 0, s>>>(w.data, w.row_bytes, w.n_out, w.n_in, d_x, n_cols, d_y);
}

// n_cols: 1..16, validated by gemv().
template <class Dec>
void launch_gemv(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s) {
  with_column_tile(n_cols, [&](auto nc) { launch_gemv_nc<Dec, decltype(nc)::value>(w, d_x, n_cols, d_y, s); });
}

}  // namespace strata::kernels::cuda::detail
