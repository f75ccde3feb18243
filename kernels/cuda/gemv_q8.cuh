// The int8-activation GEMV for quantised weights (decode and speculative verification). CUDA only.
//
// Why: the float-activation GEMV (gemv_impl.cuh) spends ~5 instructions per weight element on
// decoding codes to floats and multiplying; at HBM rates that is more issue slots than an SM has,
// so it ran at 13-50% of device bandwidth. Here activations are quantised once per call to int8
// (per 32 elements: scale d = amax / 127, q = round-to-nearest-even(x / d), and the integer sums
// of q over each 16 elements), and each 4 weight codes x 4 activations are one __dp4a.
//
// Numerics: the result is W x~ with x~ = d q, the activations rounded to 8 bits per 32-element
// block (|x~ - x| <= d / 2 per element), which is what llama.cpp's CUDA backend does too; the
// weight side is exact (integer products and sums, then the float scales). The tests compare
// against the CPU reference evaluated on x~ (activation_q8 below is reproduced bit for bit on the
// host: IEEE division and round-to-nearest-even).
//
// Shape: a warp owns R rows (R > 1 only for many columns, so each weight load serves more columns
// and each activation load more rows); lanes stride over the row's units (quant_unit.cuh);
// partial sums are reduced with shuffles. CTAs of 4 warps.
#pragma once

#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/quant_unit.cuh"

namespace strata::kernels::cuda::detail {

// One warp per 32-element block.
__global__ void quantize_act_q8_kernel(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ q,
                                       float* __restrict__ d, int* __restrict__ s16, int perm_chunk);

// NC: the columns the kernel is compiled for (1, 2, 4, 8, 16); n_cols <= NC of them are real (the
// others are skipped by predicates), which keeps 5 instantiations per type instead of 16.
template <class U, int NC>
__global__ void __launch_bounds__(128) gemv_q8_kernel(const uint8_t* __restrict__ w, uint64_t row_bytes, int64_t n_out,
                                                      int64_t n_in, ActQ8 x, int n_cols, float* __restrict__ y) {
  constexpr int R = NC <= 4 ? 1 : 2;
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (int64_t(blockIdx.x) * 4 + (threadIdx.x >> 5)) * R;
  if (row0 >= n_out) return;  // the whole warp
  float acc[R][NC];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;
  const int64_t n_units = n_in / U::kUnit, nb32 = n_in / 32, nb16 = n_in / 16;
  for (int64_t u = lane; u < n_units; u += 32) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = w + uint64_t(min(row0 + r, n_out - 1)) * row_bytes;
      U::visit(row, u, [&](int64_t e, const uint32_t (&q)[8], const float (&sc)[2], const float (&mn)[2]) {
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (NC > 1 && c >= n_cols) break;
          const int4* xp = reinterpret_cast<const int4*>(x.q + c * n_in + e);
          const int4 xa = __ldg(xp), xb = __ldg(xp + 1);
          const float dx = __ldg(x.d + c * nb32 + (e >> 5));
          const int2 sx = __ldg(reinterpret_cast<const int2*>(x.s16 + c * nb16 + (e >> 4)));
          int s0 = __dp4a(int(q[0]), xa.x, 0);
          s0 = __dp4a(int(q[1]), xa.y, s0);
          s0 = __dp4a(int(q[2]), xa.z, s0);
          s0 = __dp4a(int(q[3]), xa.w, s0);
          int s1 = __dp4a(int(q[4]), xb.x, 0);
          s1 = __dp4a(int(q[5]), xb.y, s1);
          s1 = __dp4a(int(q[6]), xb.z, s1);
          s1 = __dp4a(int(q[7]), xb.w, s1);
          if constexpr (U::kBias != 0) {
            s0 -= U::kBias * sx.x;
            s1 -= U::kBias * sx.y;
          }
          float part = fmaf(sc[0], float(s0), sc[1] * float(s1));
          part = fmaf(-mn[0], float(sx.x), part);
          part = fmaf(-mn[1], float(sx.y), part);
          acc[r][c] = fmaf(dx, part, acc[r][c]);
        }
      });
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float v = acc[r][c];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && row0 + r < n_out && c < n_cols) y[int64_t(c) * n_out + row0 + r] = v;
    }
}

template <class U, int NC>
void launch_gemv_q8_nc(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  constexpr int R = NC <= 4 ? 1 : 2;
  const unsigned grid = unsigned((w.n_out + 4 * R - 1) / (4 * R));
  gemv_q8_kernel<U, NC><<<grid, 128, 0, s>>>(w.data, w.row_bytes, w.n_out, w.n_in, x, n_cols, d_y);
}

template <class U>
void launch_gemv_q8(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  with_column_tile(n_cols, [&](auto nc) { launch_gemv_q8_nc<U, decltype(nc)::value>(w, x, n_cols, d_y, s); });
}

}  // namespace strata::kernels::cuda::detail
