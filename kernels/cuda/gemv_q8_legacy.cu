// Int8-activation GEMV instantiations for q4_0 q4_1 q5_0 q5_1 q8_0 (gemv_q8.cuh), and the
// activation quantiser.
#include "kernels/cuda/gemv_q8.cuh"

namespace strata::kernels::cuda::detail {

__global__ void quantize_act_q8_kernel(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ q,
                                       float* __restrict__ d, int* __restrict__ s16, int perm_chunk) {
  pdl_launch_dependents();  // a GEMV launched after it may load its weights meanwhile
  const int64_t blk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (blk >= n_blocks) return;  // whole warps
  const float v = x[blk * 32 + lane];
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float dd = __fdiv_rn(amax, 127.0f);
  const int qi = dd > 0.0f ? __float2int_rn(__fdiv_rn(v, dd)) : 0;
  int64_t at = blk * 32 + lane;
  if (perm_chunk > 0) {  // the GPU layout's lane order (matmul_internal.h ActGpu)
    const int64_t base = at - at % perm_chunk;
    const int e = int(at - base), sub = e >> 5, t = (e >> 2) & 3, hi = ((e >> 4) & 1) * 4 + (e & 3);
    at = base + (perm_chunk == 32 ? t * 8 + hi : (((sub >> 1) ^ t) * 64) + t * 16 + (sub & 1) * 8 + hi);
  }
  q[at] = int8_t(qi);
  int s = qi;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);  // within each 16 lanes
  if (lane == 0) d[blk] = dd;
  if ((lane & 15) == 0) s16[blk * 2 + (lane >> 4)] = s;
}

bool launch_gemv_q8_legacy(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q4_0: launch_gemv_q8<UnitQ4_0>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q4_1: launch_gemv_q8<UnitQ4_1>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q5_0: launch_gemv_q8<UnitQ5_0>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q5_1: launch_gemv_q8<UnitQ5_1>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q8_0: launch_gemv_q8<UnitQ8_0>(w, x, n_cols, d_y, s); return true;
    default: return false;
  }
}

void launch_quantize_act_q8(const float* d_x, int64_t n, int8_t* q, float* d, int* s16, int perm_chunk, cudaStream_t s) {
  const int64_t blocks = n / 32;
  const unsigned grid = unsigned((blocks * 32 + 255) / 256);
  quantize_act_q8_kernel<<<grid, 256, 0, s>>>(d_x, blocks, q, d, s16, perm_chunk);
}

}  // namespace strata::kernels::cuda::detail
