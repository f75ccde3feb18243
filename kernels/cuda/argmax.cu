// The greedy argmax of one logits row on the device (cuda_api.h argmax_key), so that a decode step
// does not leave the GPU idle while the host scans the vocabulary (262144 logits: ~135 us serial).
//
// Every candidate is packed into one 64-bit key whose unsigned order is the sampler's rule
// (runtime::argmax, kernels/cpu/max_at.h): the value's bits made monotone in the high word (-0
// counted as +0, so they tie), the complement of the index in the low word (of equal values the
// first index wins). Each thread scans its strided elements with > (NaNs and -inf never win), the
// block reduces to one candidate, and one atomicMax per block merges them: any order, the same key.
// A key of 0 means no element above -inf (argmax_from_key gives 0 then, as the sampler does).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 256;

__device__ __forceinline__ unsigned long long key_of(float v, int64_t i) {
  const uint32_t bits = v == 0.0f ? 0u : __float_as_uint(v);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<unsigned long long>(ordered) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}

__global__ void __launch_bounds__(kThreads) argmax_key_kernel(const float* __restrict__ x, int64_t n,
                                                              unsigned long long* key) {
  unsigned long long best = 0;  // keys of values above -inf are all > 0
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const float v = x[i];
    if (v > -INFINITY) {  // false for NaN and -inf
      const unsigned long long k = key_of(v, i);
      best = k > best ? k : best;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, best, off);
    best = o > best ? o : best;
  }
  __shared__ unsigned long long warp_best[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) best = warp_best[w] > best ? warp_best[w] : best;
    if (best != 0) atomicMax(key, best);
  }
}

}  // namespace

Status argmax_key(const float* d_x, int64_t n, unsigned long long* d_key, Stream s) {
  if (!d_x || !d_key) return Status::error("argmax: null pointer");
  if (n < 0 || n > int64_t(0xffffffffu)) return Status::error("argmax: bad length {}", n);
  const cudaStream_t st = static_cast<cudaStream_t>(s);
  STRATA_TRY(detail::cuda_status(cudaMemsetAsync(d_key, 0, sizeof(*d_key), st), "argmax: cudaMemsetAsync"));
  if (n == 0) return Status::ok();
  const int64_t blocks = std::min<int64_t>((n + 4 * kThreads - 1) / (4 * kThreads), kMaxBlocks);
  argmax_key_kernel<<<unsigned(blocks), kThreads, 0, st>>>(d_x, n, d_key);
  return detail::launch_status("argmax");
}

}  // namespace strata::kernels::cuda
