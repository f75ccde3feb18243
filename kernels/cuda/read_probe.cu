// The device-memory read ceiling (read_probe.h).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

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

namespace {

// Times `body` (which enqueues work on the default stream) between two events: best of iters
// passes after one warm-up. Returns milliseconds.
template <typename Body>
Result<float> time_best(int iters, const std::string& op, Body body) {
  using detail::cuda_status;
  cudaEvent_t a = nullptr, b = nullptr;
  STRATA_TRY(cuda_status(cudaEventCreate(&a), op));
  STRATA_TRY(cuda_status(cudaEventCreate(&b), op));
  float best = 1e30f;
  cudaError_t err = cudaSuccess;
  for (int it = -1; err == cudaSuccess && it < iters; ++it) {
    err = cudaEventRecord(a);
    if (err == cudaSuccess) err = body();
    if (err == cudaSuccess) err = cudaEventRecord(b);
    if (err == cudaSuccess) err = cudaEventSynchronize(b);
    float ms = 0;
    if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, a, b);
    if (err == cudaSuccess && it >= 0) best = std::min(best, ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (err != cudaSuccess) return cuda_status(err, op);
  return best;
}

}  // namespace

Result<double> measure_h2d_bandwidth(size_t chunk_bytes, size_t total_bytes, int iters) {
  using detail::cuda_status;
  const std::string op = "measure_h2d_bandwidth";
  if (chunk_bytes == 0 || total_bytes < chunk_bytes) return Status::error("{}: bad sizes", op);
  void* host = nullptr;
  void* dev = nullptr;
  STRATA_TRY(cuda_status(cudaMallocHost(&host, total_bytes), op));
  if (cudaError_t e = cudaMalloc(&dev, total_bytes); e != cudaSuccess) {
    cudaFreeHost(host);
    return cuda_status(e, op);
  }
  std::memset(host, 1, total_bytes);
  const size_t n_chunks = total_bytes / chunk_bytes;
  auto ms = time_best(iters, op, [&] {
    for (size_t c = 0; c < n_chunks; ++c) {
      const size_t off = c * chunk_bytes;
      if (cudaError_t e = cudaMemcpyAsync(static_cast<char*>(dev) + off, static_cast<char*>(host) + off, chunk_bytes,
                                          cudaMemcpyHostToDevice);
          e != cudaSuccess)
        return e;
    }
    return cudaSuccess;
  });
  cudaFree(dev);
  cudaFreeHost(host);
  if (!ms) return ms.status();
  return double(n_chunks * chunk_bytes) / (double(*ms) * 1e-3);
}

Result<double> time_on_device(const std::function<Status()>& enqueue, int iters, Stream s) {
  using detail::cuda_status;
  const std::string op = "time_on_device";
  const cudaStream_t st = cudaStream_t(s);
  cudaEvent_t a = nullptr, b = nullptr;
  STRATA_TRY(cuda_status(cudaEventCreate(&a), op));
  if (cudaError_t e = cudaEventCreate(&b); e != cudaSuccess) {
    cudaEventDestroy(a);
    return cuda_status(e, op);
  }
  float best = 1e30f;
  cudaError_t err = cudaSuccess;
  for (int it = -1; err == cudaSuccess && it < iters; ++it) {
    err = cudaEventRecord(a, st);
    if (err != cudaSuccess) break;
    if (Status failed = enqueue(); !failed.is_ok()) {
      cudaStreamSynchronize(st);  // what was enqueued before the failure finishes before the events go
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      return failed;
    }
    err = cudaEventRecord(b, st);
    if (err == cudaSuccess) err = cudaEventSynchronize(b);
    float ms = 0;
    if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, a, b);
    if (err == cudaSuccess && it >= 0) best = std::min(best, ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (err != cudaSuccess) return cuda_status(err, op);
  return double(best) * 1e-3;
}

Result<double> measure_gemm_flops(int n, int iters) {
  using detail::cuda_status;
  const std::string op = "measure_gemm_flops";
  const size_t elems = size_t(n) * n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaError_t e = cudaMalloc(&a, elems * 2);
  if (e == cudaSuccess) e = cudaMalloc(&b, elems * 2);
  if (e == cudaSuccess) e = cudaMalloc(&c, elems * 4);
  if (e == cudaSuccess) e = cudaMemset(a, 0x3c, elems * 2);  // random-ish bf16 bit patterns
  if (e == cudaSuccess) e = cudaMemset(b, 0x3b, elems * 2);
  cublasHandle_t h = nullptr;
  const bool have_handle = e == cudaSuccess && cublasCreate(&h) == CUBLAS_STATUS_SUCCESS;
  auto gemm = [&] {
    const float one = 1.0f, zero = 0.0f;
    const auto st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                                 &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
  };
  auto ms = have_handle ? time_best(iters, op, gemm) : Result<float>(Status::error("{}: no cuBLAS handle", op));
  if (h) cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  if (e != cudaSuccess) return cuda_status(e, op);
  if (!ms) return ms.status();
  return 2.0 * double(n) * n * n / (double(*ms) * 1e-3);
}

}  // namespace strata::kernels::cuda
