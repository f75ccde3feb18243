// Shared by the decode-attention GPU tests (test_cuda_attention_decode.cpp,
// test_cuda_attention_tree.cpp): random quantised KV stores and the decode kernels' bound
// against the CPU reference, |gpu - cpu| <= 2e-5 + 1e-3 |cpu| (exact f32 products of the same
// decoded K/V values, different summation orders; q * 3 makes the softmax peaked, so one wrong
// key, slot or chunk merge moves outputs by ~1e-2 or more).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kv/kv_quant.h"
#include "test_util.h"

namespace strata::test {

// capacity slots of random N(0, 1) rows of `width` values, in KV format t.
inline std::vector<uint8_t> random_kv_store(GgmlType t, int64_t capacity, int64_t width, Rng& rng) {
  const size_t row = kv::kv_row_bytes(t, uint32_t(width));
  std::vector<uint8_t> buf(size_t(capacity) * row);
  for (int64_t slot = 0; slot < capacity; ++slot) {
    auto f = random_normal(size_t(width), rng);
    kv::kv_quantize_row(t, f.data(), buf.data() + size_t(slot) * row, uint32_t(width));
  }
  return buf;
}

inline void check_decode_attention_close(const std::vector<float>& got, const std::vector<float>& ref) {
  REQUIRE(got.size() == ref.size());
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = std::isfinite(got[i]) ? std::abs(double(got[i]) - ref[i]) / (2e-5 + 1e-3 * std::abs(ref[i])) : INFINITY;
    if (r > worst) worst = r, worst_i = i;
  }
  INFO("worst at " << worst_i << ": gpu " << got[worst_i] << " cpu " << ref[worst_i]);
  CHECK(worst <= 1.0);
}

}  // namespace strata::test
