// Shared by the GPU tests of kernels that write the GEMV's int8 activations (test_cuda_act_round.cpp,
// test_cuda_gated_gemv.cpp): a rounding downloaded, and two compared byte for byte.
#pragma once

#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/act_round.h"

namespace strata::test {

// The codes, scales and 16-sums of n activations.
struct Rounded {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int> s16;
};

inline Rounded download(const kernels::cuda::ActRounding& r, int64_t n) {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  Rounded out{std::vector<int8_t>(size_t(n)), std::vector<float>(size_t(n / 32)), std::vector<int>(size_t(n / 16))};
  REQUIRE(cudaMemcpy(out.q.data(), r.q, out.q.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(out.d.data(), r.d, out.d.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(out.s16.data(), r.s16, out.s16.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}

inline void check_same(const Rounded& a, const Rounded& b) {
  CHECK(std::memcmp(a.q.data(), b.q.data(), a.q.size()) == 0);
  CHECK(std::memcmp(a.d.data(), b.d.data(), a.d.size() * 4) == 0);
  CHECK(std::memcmp(a.s16.data(), b.s16.data(), a.s16.size() * 4) == 0);
}

}  // namespace strata::test
