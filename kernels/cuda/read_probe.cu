// The device-memory read ceiling (read_probe.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/read_probe.h"

namespace strata::kernels::cuda {
namespace {

// Sums every 16-byte word (so the loads cannot be elided) and writes one value per thread only
// when the sum is an impossible sentinel (so the write traffic is nil).
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
#pragma unroll 4
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

}  // namespace

Result<double> measure_read_bandwidth(size_t bytes, int iters) {
  using detail::cuda_status;
  const std::string op = "measure_read_bandwidth";
  void* buf = nullptr;
  STRATA_TRY(cuda_status(cudaMalloc(&buf, bytes + 256), op));
  cudaEvent_t a = nullptr, b = nullptr;
  float best_ms = 1e30f;
  cudaError_t first_err = cudaSuccess;  // the first failure; later steps are skipped
  auto step = [&](cudaError_t err) {
    if (first_err == cudaSuccess) first_err = err;
  };
  step(cudaMemset(buf, 1, bytes + 256));
  step(cudaEventCreate(&a));
  step(cudaEventCreate(&b));
  int dev = 0, sms = 0;
  step(cudaGetDevice(&dev));
  step(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const size_t n = bytes / 16;
  for (int it = -1; first_err == cudaSuccess && it < iters; ++it) {
    step(cudaEventRecord(a));
    read_kernel<<<unsigned(sms * 8), 256>>>(static_cast<const uint4*>(buf), n, static_cast<unsigned*>(buf) + n * 4);
    step(cudaGetLastError());
    step(cudaEventRecord(b));
    step(cudaEventSynchronize(b));
    float ms = 0;
    step(cudaEventElapsedTime(&ms, a, b));
    if (first_err == cudaSuccess && it >= 0) best_ms = std::min(best_ms, ms);
  }
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  cudaFree(buf);
  if (first_err != cudaSuccess) return cuda_status(first_err, op);
  return double(n * 16) / (double(best_ms) * 1e-3);
}

}  // namespace strata::kernels::cuda
