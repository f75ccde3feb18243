// Device side of act_round.h: a warp's lanes store their activations' int8 rounding, four
// elements per lane, eight lanes per 32-element block.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/act_round.h"

namespace strata::kernels::cuda::detail {

// Where element e of the flat activations lies among the codes (matmul_internal.h ActGpu's lane
// order within chunks of perm_chunk elements; element order for 0), as quantize_act_q8_kernel
// places it.
__device__ __forceinline__ int64_t act_position(int64_t e, int perm_chunk) {
  if (perm_chunk == 0) return e;
  const int64_t base = e - e % perm_chunk;
  const int k = int(e - base), sub = k >> 5, t = (k >> 2) & 3, hi = ((k >> 4) & 1) * 4 + (k & 3);
  return base + (perm_chunk == 32 ? t * 8 + hi : (((sub >> 1) ^ t) * 64) + t * 16 + (sub & 1) * 8 + hi);
}

// Elements e .. e + 3 (e % 4 == 0) of the flat (n_cols * n_in) activations, held by this lane as v:
// lanes 8j .. 8j + 7 of the warp hold one 32-element block in order. Every lane of the warp must
// call this (the reductions are warp shuffles); lanes with valid == false hold zeros and store
// nothing (the eight lanes of a block are valid or not together). The arithmetic is
// quantize_act_q8_kernel's (gemv_q8_legacy.cu): d = amax / 127, q = round(v / d), sums per 16.
__device__ __forceinline__ void round_store4(float4 v, int64_t e, bool valid, const ActRounding& r) {
  const unsigned all = 0xffffffffu;
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  amax = fmaxf(amax, __shfl_xor_sync(all, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(all, amax, 2));
  amax = fmaxf(amax, __shfl_xor_sync(all, amax, 4));
  const float dd = __fdiv_rn(amax, 127.0f);
  const bool nz = dd > 0.0f;
  const int q0 = nz ? __float2int_rn(__fdiv_rn(v.x, dd)) : 0, q1 = nz ? __float2int_rn(__fdiv_rn(v.y, dd)) : 0;
  const int q2 = nz ? __float2int_rn(__fdiv_rn(v.z, dd)) : 0, q3 = nz ? __float2int_rn(__fdiv_rn(v.w, dd)) : 0;
  int sum = q0 + q1 + q2 + q3;
  sum += __shfl_xor_sync(all, sum, 1);
  sum += __shfl_xor_sync(all, sum, 2);  // lanes 4i .. 4i + 3: one 16-element half
  if (!valid) return;
  const int lane = threadIdx.x & 31;
  const int64_t blk = e >> 5;
  if ((lane & 7) == 0) r.d[blk] = dd;
  if ((lane & 3) == 0) r.s16[blk * 2 + ((lane >> 2) & 1)] = sum;
  const int64_t at = act_position(e, r.perm_chunk);  // four consecutive elements stay together
  const uint32_t packed = (uint32_t(q0) & 0xffu) | (uint32_t(q1) & 0xffu) << 8 | (uint32_t(q2) & 0xffu) << 16 |
                          (uint32_t(q3) & 0xffu) << 24;
  *reinterpret_cast<uint32_t*>(r.q + at) = packed;
}

// One element per lane: element e (= a 32-aligned base + lane) held as v by each of the warp's 32
// lanes, which all call this (a 32-element block per warp). The same arithmetic as round_store4.
__device__ __forceinline__ void round_store1(float v, int64_t e, const ActRounding& r) {
  const unsigned all = 0xffffffffu;
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(all, amax, o));
  const float dd = __fdiv_rn(amax, 127.0f);
  const int qi = dd > 0.0f ? __float2int_rn(__fdiv_rn(v, dd)) : 0;
  int sum = qi;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) sum += __shfl_xor_sync(all, sum, o);  // within each 16 lanes
  const int lane = threadIdx.x & 31;
  const int64_t blk = e >> 5;
  if (lane == 0) r.d[blk] = dd;
  if ((lane & 15) == 0) r.s16[blk * 2 + (lane >> 4)] = sum;
  r.q[act_position(e, r.perm_chunk)] = int8_t(qi);
}

}  // namespace strata::kernels::cuda::detail
