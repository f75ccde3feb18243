// Shared by the decode-attention GPU tests (test_cuda_attention_decode.cpp,
// test_cuda_attention_tree.cpp): random quantised KV stores and the decode kernels' bound
// against the CPU reference, |gpu - cpu| <= 2e-5 + 1e-3 m with m = sum_j p_j |v_j| per output
// (exact f32 products of the same decoded K/V values, different summation and split orders: the
// error is relative to the softmax-weighted magnitude of the values, which |cpu| is not where
// positive and negative terms cancel; a seed of session 23 failed the old |cpu| bound by 4% on an
// output near zero). q * 3 makes the softmax peaked, so one wrong key, slot or chunk merge moves
// outputs by ~1e-2 or more.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
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

// The stores as f32 rows (every KV format decodes exactly to floats), V as magnitudes |v|: the CPU
// attention over them gives m = sum_j p_j |v_j| per output (the same p: K is the same values).
struct MagnitudeKv {
  std::vector<float> k, v;
};
inline MagnitudeKv magnitude_kv(GgmlType kt, const std::vector<uint8_t>& k, GgmlType vt, const std::vector<uint8_t>& v,
                                int64_t capacity, int64_t width) {
  auto decode = [&](GgmlType t, const std::vector<uint8_t>& store) {
    const size_t row = kv::kv_row_bytes(t, uint32_t(width));
    std::vector<float> f(size_t(capacity * width));
    for (int64_t slot = 0; slot < capacity; ++slot)
      kv::kv_dequantize_row(t, store.data() + size_t(slot) * row, f.data() + size_t(slot * width), uint32_t(width));
    return f;
  };
  MagnitudeKv m{decode(kt, k), decode(vt, v)};
  for (float& x : m.v) x = std::abs(x);
  return m;
}

// The CPU's outputs and, per output, m = sum_j p_j |v_j| (the same attention over |V|).
struct AttentionRef {
  std::vector<float> out, magnitude;
};

inline void check_decode_attention_close(const std::vector<float>& got, const AttentionRef& ref) {
  REQUIRE(got.size() == ref.out.size());
  REQUIRE(ref.magnitude.size() == ref.out.size());
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < ref.out.size(); ++i) {
    // m >= |out| up to rounding; the max keeps the bound no looser than |out| would make it.
    const double m = std::max(std::abs(double(ref.out[i])), double(ref.magnitude[i]));
    const double r = std::isfinite(got[i]) ? std::abs(double(got[i]) - ref.out[i]) / (2e-5 + 1e-3 * m) : INFINITY;
    if (r > worst) worst = r, worst_i = i;
  }
  INFO("worst at " << worst_i << ": gpu " << got[worst_i] << " cpu " << ref.out[worst_i] << " magnitude "
                   << ref.magnitude[worst_i]);
  CHECK(worst <= 1.0);
}

}  // namespace strata::test
