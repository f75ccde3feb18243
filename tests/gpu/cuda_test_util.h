// Helpers for the CUDA op tests: device buffers through the CUDA runtime directly (independent of
// the backend's own device_memory.cu), NaN poisoning, and the skip-without-a-GPU check.
#pragma once

#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/device_info.h"

namespace strata::test {

#define CUDA_REQUIRE(expr)                                          \
  do {                                                              \
    const cudaError_t err_ = (expr);                                \
    INFO(#expr << ": " << cudaGetErrorString(err_));                \
    REQUIRE(err_ == cudaSuccess);                                   \
  } while (0)

// True when a device is present; otherwise WARNs and the test returns.
inline bool have_gpu() {
  std::string why;
  if (kernels::cuda::devices(&why).empty()) {
    WARN("skipped: no CUDA device (" << why << ")");
    return false;
  }
  return true;
}

// A device buffer of bytes (RAII).
class DevBuf {
 public:
  explicit DevBuf(size_t bytes) : bytes_(bytes) { CUDA_REQUIRE(cudaMalloc(&p_, bytes ? bytes : 1)); }
  ~DevBuf() { cudaFree(p_); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) { CUDA_REQUIRE(cudaMemcpy(p_, src, n, cudaMemcpyHostToDevice)); }
  template <typename T>
  void upload(const std::vector<T>& v) { upload(v.data(), v.size() * sizeof(T)); }
  // 0xff bytes: every f32 (and f16) element becomes a NaN, so unwritten outputs fail comparisons.
  void poison() { CUDA_REQUIRE(cudaMemset(p_, 0xff, bytes_)); }
  template <typename T>
  std::vector<T> download(size_t n) const {
    std::vector<T> out(n);
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CUDA_REQUIRE(cudaMemcpy(out.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

template <typename T>
inline DevBuf to_device(const std::vector<T>& v) {
  DevBuf b(v.size() * sizeof(T));
  b.upload(v);
  return b;
}

}  // namespace strata::test
