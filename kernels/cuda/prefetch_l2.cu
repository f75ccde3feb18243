// cuda_api.h prefetch_l2: asks the L2 cache for byte ranges of device memory (weights the step
// multiplies next) and returns without waiting for them. Why: between two GEMVs of a decode step the
// small kernels (norms, RoPE, attention, the gated activation) leave DRAM mostly idle for 5-20 us;
// weight bytes fetched into L2 meanwhile are then read by the GEMV from L2.
//
// One kernel call for up to kMaxPrefetchRanges ranges, spread over many CTAs: a single CTA's
// requests go through one SM (session 20's one-block version issued 12 MB at a few hundred GB/s and
// stalled the step). sm_90: one cp.async.bulk.prefetch.L2 (a TMA request, no completion to wait for)
// per kPrefetchChunk bytes; earlier devices: one prefetch.global.L2 per 128-byte line.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"

namespace strata::kernels::cuda {
namespace {

using detail::launch_status;

constexpr uint64_t kPrefetchChunk = 16 << 10;
constexpr int kPrefetchThreads = 128;

struct Ranges {
  const uint8_t* p[kMaxPrefetchRanges];
  uint64_t bytes[kMaxPrefetchRanges];
  uint64_t chunk_end[kMaxPrefetchRanges];  // cumulative chunk counts
  int count;
};

__device__ __forceinline__ void prefetch_chunk(const uint8_t* at, uint64_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t n16 = uint32_t(n & ~uint64_t(15));  // bulk sizes are multiples of 16 (a hint may miss a tail)
  if (n16) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(at), "r"(n16) : "memory");
#else
  for (uint64_t o = 0; o < n; o += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(at + o));
#endif
}

// One thread per chunk (grid-stride); chunk k of the concatenated ranges.
__global__ void __launch_bounds__(kPrefetchThreads) prefetch_l2_kernel(Ranges r) {
  const uint64_t total = r.chunk_end[r.count - 1];
  for (uint64_t k = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += uint64_t(gridDim.x) * blockDim.x) {
    int i = 0;
    while (k >= r.chunk_end[i]) ++i;
    const uint64_t c = k - (i ? r.chunk_end[i - 1] : 0);
    const uint64_t off = c * kPrefetchChunk;
    const uint64_t left = r.bytes[i] - off;
    prefetch_chunk(r.p[i] + off, left < kPrefetchChunk ? left : kPrefetchChunk);
  }
}

}  // namespace

Status prefetch_l2(const PrefetchRange* ranges, int count, Stream s) {
  if (count < 0 || count > kMaxPrefetchRanges) return Status::error("prefetch_l2: {} ranges (at most {})", count, kMaxPrefetchRanges);
  Ranges r = {};
  uint64_t chunks = 0;
  for (int i = 0; i < count; ++i) {
    if (!ranges[i].d_p || ranges[i].bytes == 0) continue;
    if (reinterpret_cast<uintptr_t>(ranges[i].d_p) % 16 != 0) return Status::error("prefetch_l2: address not 16-byte aligned");
    r.p[r.count] = static_cast<const uint8_t*>(ranges[i].d_p);
    r.bytes[r.count] = ranges[i].bytes;
    chunks += (ranges[i].bytes + kPrefetchChunk - 1) / kPrefetchChunk;
    r.chunk_end[r.count] = chunks;
    ++r.count;
  }
  if (chunks == 0) return Status::ok();
  const uint64_t blocks = std::min<uint64_t>((chunks + kPrefetchThreads - 1) / kPrefetchThreads, 1024);
  prefetch_l2_kernel<<<unsigned(blocks), kPrefetchThreads, 0, static_cast<cudaStream_t>(s)>>>(r);
  return launch_status("prefetch_l2");
}

}  // namespace strata::kernels::cuda
