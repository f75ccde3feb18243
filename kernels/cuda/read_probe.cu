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
  int dev = 0, sms = 0;
  cudaError_t err = cudaMemset(buf, 1, bytes + 256);
  if (err == cudaSuccess) err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const size_t n = bytes / 16;
  auto t = err != cudaSuccess ? Result<double>(cuda_status(err, op))
                              : time_on_device(
                                    [&] {
                                      read_kernel<<<unsigned(sms * 8), 256>>>(static_cast<const uint4*>(buf), n,
                                                                              static_cast<unsigned*>(buf) + n * 4);
                                      return cuda_status(cudaGetLastError(), op);
                                    },
                                    iters, nullptr);
  cudaFree(buf);
  if (!t) return t.status();
  return double(n * 16) / *t;
}

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
  auto t = time_on_device(
      [&] {
        for (size_t c = 0; c < n_chunks; ++c) {
          const size_t off = c * chunk_bytes;
          STRATA_TRY(cuda_status(cudaMemcpyAsync(static_cast<char*>(dev) + off, static_cast<char*>(host) + off,
                                                 chunk_bytes, cudaMemcpyHostToDevice),
                                 op));
        }
        return Status::ok();
      },
      iters, nullptr);
  cudaFree(dev);
  cudaFreeHost(host);
  if (!t) return t.status();
  return double(n_chunks * chunk_bytes) / *t;
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

namespace {

// One n x n x n cuBLAS GEMM timed on the device: bf16 x bf16 -> f32, or int8 x int8 -> int32
// (IMMA wants A transposed: the "TN" form). Returns operations (multiply-adds x 2) per second.
Result<double> measure_gemm_rate(int n, int iters, bool int8) {
  using detail::cuda_status;
  const std::string op = int8 ? "measure_int8_gemm_ops" : "measure_gemm_flops";
  const size_t elems = size_t(n) * n, in_bytes = int8 ? 1 : 2;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaError_t e = cudaMalloc(&a, elems * in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&b, elems * in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&c, elems * 4);
  if (e == cudaSuccess) e = cudaMemset(a, 0x3c, elems * in_bytes);  // random-ish bit patterns
  if (e == cudaSuccess) e = cudaMemset(b, 0x3b, elems * in_bytes);
  cublasHandle_t h = nullptr;
  const bool have_handle = e == cudaSuccess && cublasCreate(&h) == CUBLAS_STATUS_SUCCESS;
  auto gemm = [&] {
    const float one = 1.0f, zero = 0.0f;
    const int32_t ione = 1, izero = 0;
    const auto st = int8 ? cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &ione, a, CUDA_R_8I, n, b, CUDA_R_8I, n,
                                        &izero, c, CUDA_R_32I, n, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT)
                         : cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                                        &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? Status::ok() : Status::error("{}: cublasGemmEx: {}", op, cublasGetStatusString(st));
  };
  auto t = have_handle ? time_on_device(gemm, iters, nullptr) : Result<double>(Status::error("{}: no cuBLAS handle", op));
  if (h) cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  if (e != cudaSuccess) return cuda_status(e, op);
  if (!t) return t.status();
  return 2.0 * double(n) * n * n / *t;
}

}  // namespace

Result<double> measure_gemm_flops(int n, int iters) { return measure_gemm_rate(n, iters, false); }
Result<double> measure_int8_gemm_ops(int n, int iters) { return measure_gemm_rate(n, iters, true); }

}  // namespace strata::kernels::cuda
