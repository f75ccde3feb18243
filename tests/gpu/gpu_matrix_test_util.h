// Shared by the GPU-layout GEMV tests (test_cuda_gated_gemv.cpp, test_cuda_gemv_group.cpp): a
// random matrix repacked into the GPU layout on the device, and a count of differing elements.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/gpu_layout.h"
#include "kernels/weight_view.h"
#include "test_util.h"

namespace strata::test {

// A random matrix of type t repacked into the GPU layout, on the device.
struct GpuMatrix {
  DevBuf buf;
  kernels::WeightView view;
  GpuMatrix(GgmlType t, int64_t n_in, int64_t n_out, Rng& rng) : buf(kernels::gpu_layout_bytes(t, n_in, n_out)) {
    const auto* qk = kernels::cpu::quant_kernels(t);
    REQUIRE(qk != nullptr);
    const uint64_t row_bytes = ggml_row_bytes(t, uint64_t(n_in));
    std::vector<uint8_t> gguf(row_bytes * uint64_t(n_out));
    for (int64_t r = 0; r < n_out; ++r) {
      uint8_t* row = gguf.data() + r * row_bytes;
      if (r % 2 == 0) {
        qk->fill_random(row, n_in, rng, 1.0f);
      } else {
        const auto v = random_normal(size_t(n_in), rng);
        qk->quantize(v.data(), row, n_in);
      }
    }
    std::vector<uint8_t> packed(buf.bytes());
    kernels::repack_to_gpu_layout({gguf.data(), t, n_in, n_out, row_bytes}, packed.data());
    buf.upload(packed);
    view = kernels::gpu_layout_view(buf.as<uint8_t>(), t, n_in, n_out);
  }
};

inline int differing(const void* a, const void* b, size_t n, size_t elem) {
  int k = 0;
  for (size_t i = 0; i < n; ++i) k += std::memcmp(static_cast<const char*>(a) + i * elem, static_cast<const char*>(b) + i * elem, elem) != 0;
  return k;
}

}  // namespace strata::test
